/*
 * test_json_uri.c: $id/$ref URI resolution and JSON Pointers
 * (schema/sch_json_uri.c), checked against RFC 3986 section 5.4's examples.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "schema/sch_json.h"

static void resolves(const char *ref, const char *want)
{
    char *got = sch__json_uri_resolve("http://a/b/c/d;p?q", ref);
    cr_assert_str_eq(got, want, "ref %s", ref);
    free(got);
}

Test(json_uri, rfc3986_normal_examples)
{
    resolves("g", "http://a/b/c/g");
    resolves("./g", "http://a/b/c/g");
    resolves("g/", "http://a/b/c/g/");
    resolves("/g", "http://a/g");
    resolves("//g", "http://g");
    resolves("?y", "http://a/b/c/d;p?y");
    resolves("#s", "http://a/b/c/d;p?q#s");
    resolves("", "http://a/b/c/d;p?q");
    resolves("..", "http://a/b/");
    resolves("../g", "http://a/b/g");
    resolves("../../g", "http://a/g");
}

Test(json_uri, rfc3986_abnormal_examples)
{
    resolves("../../../g", "http://a/g");
    resolves("/./g", "http://a/g");
    resolves("g.", "http://a/b/c/g.");
    resolves("./../g", "http://a/b/g");
    resolves("g;x=1/../y", "http://a/b/c/y");
}

Test(json_uri, urn_base_keeps_fragment_refs)
{
    char *got = sch__json_uri_resolve("urn:uuid:feebdaed-ffff-0000-2020-1200deadbeef", "#/$defs/bar");
    cr_assert_str_eq(got, "urn:uuid:feebdaed-ffff-0000-2020-1200deadbeef#/$defs/bar");
    free(got);
}

Test(json_uri, pointer_unescapes_tilde_one_and_zero)
{
    json_t *doc = json_loads("{\"a/b\":{\"m~n\":7}}", 0, NULL);
    json_t *v = sch__json_pointer_get(doc, "/a~1b/m~0n", 10);
    cr_assert_eq(json_integer_value(v), 7);
    json_decref(doc);
}

Test(json_uri, pointer_indexes_arrays_without_leading_zeros)
{
    json_t *doc = json_loads("[1,2]", 0, NULL);
    cr_assert_eq(json_integer_value(sch__json_pointer_get(doc, "/1", 2)), 2);
    cr_assert_null(sch__json_pointer_get(doc, "/01", 3));
    json_decref(doc);
}

Test(json_uri, percent_decoding_rejects_a_bad_escape)
{
    size_t n;
    char *ok = sch__json_pct_decode("a%25b", 5, &n);
    cr_assert_str_eq(ok, "a%b");
    free(ok);
    cr_assert_null(sch__json_pct_decode("a%2", 3, &n));
}
