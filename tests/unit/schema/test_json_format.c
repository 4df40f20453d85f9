/*
 * test_json_format.c: the asserted formats (schema/sch_json_format.c), one
 * accepted and one refused spelling per rule that matters at the edge.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "schema/sch_json.h"

static bool ok(const char *format, const char *s)
{
    sch_json_format_t f = sch__json_format_lookup(format);
    cr_assert_neq(f, SCH_JSON_FMT_UNKNOWN, "format %s is not known", format);
    return sch__json_format_check(f, s, strlen(s));
}

Test(json_format, date_time_with_offset)
{
    cr_assert(ok("date-time", "2024-02-29T23:59:59.123+01:00"));
}

Test(json_format, date_time_needs_an_offset)
{
    cr_assert_not(ok("date-time", "2024-02-29T23:59:59"));
}

Test(json_format, date_rejects_february_29_outside_leap_years)
{
    cr_assert_not(ok("date", "2023-02-29"));
}

Test(json_format, leap_second_only_at_23_59_60_utc)
{
    cr_assert(ok("time", "15:59:60-08:00"));
    cr_assert_not(ok("time", "22:59:60Z"));
}

Test(json_format, duration_units_in_order)
{
    cr_assert(ok("duration", "P1DT12H30M"));
    cr_assert_not(ok("duration", "PT1S2M"));
}

Test(json_format, email_dot_atom_and_ip_literal)
{
    cr_assert(ok("email", "sensor.7@plant-3.example"));
    cr_assert(ok("email", "ops@[192.168.0.1]"));
    cr_assert_not(ok("email", "a..b@example.com"));
}

Test(json_format, hostname_labels)
{
    cr_assert(ok("hostname", "gw-01.plant.example"));
    cr_assert_not(ok("hostname", "-gw.example"));
}

Test(json_format, ipv4_without_leading_zeros)
{
    cr_assert(ok("ipv4", "192.168.0.10"));
    cr_assert_not(ok("ipv4", "192.168.0.010"));
}

Test(json_format, ipv6_compressed_and_with_ipv4_tail)
{
    cr_assert(ok("ipv6", "fe80::1"));
    cr_assert(ok("ipv6", "::ffff:10.0.0.1"));
    cr_assert_not(ok("ipv6", "1::2::3"));
}

Test(json_format, uri_needs_a_scheme_but_uri_reference_does_not)
{
    cr_assert_not(ok("uri", "//host/path"));
    cr_assert(ok("uri-reference", "//host/path"));
}

Test(json_format, uri_rejects_spaces)
{
    cr_assert_not(ok("uri", "http://example.com/a b"));
}

Test(json_format, iri_allows_non_ascii)
{
    cr_assert(ok("iri", "http://\xc3\xa9xample.com/\xc3\xa9"));
    cr_assert_not(ok("uri", "http://\xc3\xa9xample.com/"));
}

Test(json_format, uuid_shape)
{
    cr_assert(ok("uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380"));
    cr_assert_not(ok("uuid", "2eb8aa08aa9811eab4aa73b441d16380"));
}

Test(json_format, json_pointer_escapes)
{
    cr_assert(ok("json-pointer", "/a~1b/~0"));
    cr_assert_not(ok("json-pointer", "/a~2"));
}

Test(json_format, relative_json_pointer)
{
    cr_assert(ok("relative-json-pointer", "1/a"));
    cr_assert_not(ok("relative-json-pointer", "01/a"));
}

Test(json_format, regex_uses_our_dialect)
{
    cr_assert(ok("regex", "^(?<year>\\d{4})$"));
    cr_assert_not(ok("regex", "^(abc"));
}

Test(json_format, uri_template_expressions)
{
    cr_assert(ok("uri-template", "http://example.com/{site}/{+path,x}{?q*}"));
    cr_assert_not(ok("uri-template", "http://example.com/{site"));
}

Test(json_format, unknown_formats_are_never_asserted)
{
    sch_json_format_t f = sch__json_format_lookup("x-made-up");
    cr_assert_eq(f, SCH_JSON_FMT_UNKNOWN);
}
