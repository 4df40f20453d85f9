/*
 * test_avro_json.c: payloads in Avro's JSON encoding (SCH_AVRO_JSON), walked
 * against the schema: unions as {"type": value} or null, bytes and fixed as
 * ISO-8859-1 strings, enums as symbols, int within 32 bits, missing fields
 * only when the schema gives a default.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

#define READING                                                                          \
    "{\"type\":\"record\",\"name\":\"Reading\",\"namespace\":\"plant\",\"fields\":["     \
    "{\"name\":\"id\",\"type\":\"int\"},"                                                \
    "{\"name\":\"ts\",\"type\":\"long\"},"                                               \
    "{\"name\":\"v\",\"type\":\"float\"},"                                               \
    "{\"name\":\"ok\",\"type\":\"boolean\"},"                                            \
    "{\"name\":\"unit\",\"type\":\"string\",\"default\":\"C\"},"                         \
    "{\"name\":\"raw\",\"type\":\"bytes\"},"                                             \
    "{\"name\":\"state\",\"type\":{\"type\":\"enum\",\"name\":\"State\",\"symbols\":[\"ON\",\"OFF\"]}}," \
    "{\"name\":\"extra\",\"type\":[\"null\",\"string\",\"plant.State\"]}]}"

static int check(const char *schema, const char *json)
{
    sch_validator_t *v = h_avro_json(schema);
    int rc = h_check_json(v, json);
    sch_validator_unref(v);
    return rc;
}

#define GOOD_FIELDS "\"id\":1,\"ts\":1700000000000,\"v\":2.5,\"ok\":true,\"raw\":\"\\u00ff\\u0000A\",\"state\":\"ON\""

Test(avro_json, record_with_every_field_is_valid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"unit\":\"K\",\"extra\":null}"), 0, "%s", h_err());
}

Test(avro_json, missing_field_with_default_is_valid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":null}"), 0, "%s", h_err());
}

Test(avro_json, missing_field_without_default_is_invalid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"unit\":\"K\"}"), TB_EINVALID);
    cr_assert(strstr(h_err(), "/extra: missing field"), "%s", h_err());
}

Test(avro_json, unknown_field_is_invalid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":null,\"colour\":1}"), TB_EINVALID);
    cr_assert(strstr(h_err(), "no field \"colour\""), "%s", h_err());
}

Test(avro_json, union_value_is_wrapped_in_its_type_name)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":{\"string\":\"hi\"}}"), 0, "%s", h_err());
}

Test(avro_json, union_named_branch_uses_the_full_name)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":{\"plant.State\":\"OFF\"}}"), 0, "%s",
                 h_err());
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":{\"State\":\"OFF\"}}"), TB_EINVALID);
}

Test(avro_json, bare_union_value_is_invalid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":\"hi\"}"), TB_EINVALID);
    cr_assert(strstr(h_err(), "/extra: expected a union value"), "%s", h_err());
}

Test(avro_json, union_value_of_the_wrong_type_is_invalid)
{
    cr_assert_eq(check(READING, "{" GOOD_FIELDS ",\"extra\":{\"string\":5}}"), TB_EINVALID);
    cr_assert(strstr(h_err(), "/extra/string: expected string"), "%s", h_err());
}

Test(avro_json, null_for_a_union_without_null_is_invalid)
{
    cr_assert_eq(check("[\"int\",\"string\"]", "null"), TB_EINVALID);
}

Test(avro_json, int_accepts_32_bit_range)
{
    cr_assert_eq(check("\"int\"", "2147483647"), 0);
    cr_assert_eq(check("\"int\"", "-2147483648"), 0);
}

Test(avro_json, int_rejects_values_past_32_bits)
{
    cr_assert_eq(check("\"int\"", "2147483648"), TB_EINVALID);
    cr_assert(strstr(h_err(), "out of range for int"), "%s", h_err());
}

Test(avro_json, int_rejects_a_fraction)
{
    cr_assert_eq(check("\"int\"", "1.5"), TB_EINVALID);
}

Test(avro_json, long_accepts_64_bit_range)
{
    cr_assert_eq(check("\"long\"", "-9223372036854775808"), 0);
    cr_assert_eq(check("\"long\"", "9223372036854775807"), 0);
}

Test(avro_json, long_past_64_bits_is_invalid)
{
    cr_assert_eq(check("\"long\"", "9223372036854775808"), TB_EINVALID);
}

Test(avro_json, double_accepts_integers_and_special_strings)
{
    cr_assert_eq(check("\"double\"", "3"), 0);
    cr_assert_eq(check("\"double\"", "\"NaN\""), 0);
    cr_assert_eq(check("\"double\"", "\"-Infinity\""), 0);
}

Test(avro_json, float_out_of_range_is_invalid)
{
    cr_assert_eq(check("\"float\"", "1e39"), TB_EINVALID);
}

Test(avro_json, bytes_code_point_above_u00ff_is_invalid)
{
    cr_assert_eq(check("\"bytes\"", "\"\\u0100\""), TB_EINVALID);
    cr_assert(strstr(h_err(), "above U+00FF"), "%s", h_err());
}

Test(avro_json, fixed_counts_iso_8859_1_characters)
{
    const char *s = "{\"type\":\"fixed\",\"name\":\"F\",\"size\":3}";
    cr_assert_eq(check(s, "\"a\\u00e9\\u0000\""), 0, "%s", h_err());
    cr_assert_eq(check(s, "\"ab\""), TB_EINVALID);
}

Test(avro_json, enum_symbol_not_in_schema_is_invalid)
{
    cr_assert_eq(check("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", "\"B\""), TB_EINVALID);
}

Test(avro_json, enum_symbol_with_nul_suffix_is_invalid)
{
    cr_assert_eq(check("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}", "\"A\\u0000\""),
                 TB_EINVALID);
}

Test(avro_json, map_and_array_are_walked)
{
    const char *s = "{\"type\":\"map\",\"values\":{\"type\":\"array\",\"items\":\"int\"}}";
    cr_assert_eq(check(s, "{\"a\":[1,2],\"b\":[]}"), 0);
    cr_assert_eq(check(s, "{\"a\":[1,\"x\"]}"), TB_EINVALID);
    cr_assert(strstr(h_err(), "/a/1: expected int"), "%s", h_err());
}

Test(avro_json, payload_that_is_not_json_is_invalid)
{
    cr_assert_eq(check("\"int\"", "{1"), TB_EINVALID);
    cr_assert(strstr(h_err(), "not JSON"), "%s", h_err());
}

Test(avro_json, duplicate_keys_are_invalid)
{
    cr_assert_eq(check("{\"type\":\"map\",\"values\":\"int\"}", "{\"a\":1,\"a\":2}"), TB_EINVALID);
}

Test(avro_json, binary_datum_is_not_json)
{
    cr_assert_eq(check("\"int\"", "\x02"), TB_EINVALID);
}
