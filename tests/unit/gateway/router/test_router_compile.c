/*
 * test_router_compile.c: rules the router must refuse at boot, each with a
 * message that names the rule index and what is wrong with it, so that the
 * operator can fix edge.yaml without reading code.
 */
#include "unit/gateway/router/helper_router.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define assert_has(text, part) \
    cr_assert(strstr((text), (part)) != NULL, "\"%s\" does not say \"%s\"", (text), (part))

/* ---- patterns -------------------------------------------------------------- */

Test(router_compile, plus_glued_to_text_is_rejected)
{
    router_spec_t s[] = { RT_RULE("ok/+"), RT_RULE("a/b+") };
    const char *err = rt_compile_error(s, 2);
    assert_has(err, "rule 1: ");
    assert_has(err, "'+' must be a whole level (level 2)");
}

Test(router_compile, hash_glued_to_text_is_rejected)
{
    router_spec_t s[] = { RT_RULE("a/#b") };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "rule 0: ");
    assert_has(err, "'#' must be a whole level (level 2)");
}

Test(router_compile, hash_before_the_last_level_is_rejected)
{
    router_spec_t s[] = { RT_RULE("a/#/b") };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "rule 0: ");
    assert_has(err, "'#' must be the last level (it is level 2)");
}

Test(router_compile, empty_pattern_is_rejected)
{
    router_spec_t s[] = { RT_RULE("a"), RT_RULE("b"), RT_RULE("") };
    const char *err = rt_compile_error(s, 3);
    cr_assert_str_eq(err, "rule 2: mqtt_pattern is empty");
}

Test(router_compile, missing_pattern_is_rejected)
{
    router_spec_t s[] = { { .mqtt_pattern = NULL } };
    const char *err = rt_compile_error(s, 1);
    cr_assert_str_eq(err, "rule 0: mqtt_pattern is empty");
}

Test(router_compile, pattern_deeper_than_the_limit_is_rejected)
{
    size_t levels = ROUTER_MAX_LEVELS + 1;
    char *p = tb_malloc(levels * 2);
    for (size_t i = 0; i < levels; i++) {
        p[2 * i] = 'a';
        p[2 * i + 1] = '/';
    }
    p[levels * 2 - 1] = '\0';
    router_spec_t s[] = { { .mqtt_pattern = p } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "more than 256 levels");
    free(p);
}

Test(router_compile, pattern_with_too_many_plus_is_rejected)
{
    size_t levels = ROUTER_MAX_CAPTURES + 1;
    char *p = tb_malloc(levels * 2);
    for (size_t i = 0; i < levels; i++) {
        p[2 * i] = '+';
        p[2 * i + 1] = '/';
    }
    p[levels * 2 - 1] = '\0';
    router_spec_t s[] = { { .mqtt_pattern = p } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "more than 32 '+' levels");
    free(p);
}

Test(router_compile, first_bad_rule_is_the_one_reported)
{
    router_spec_t s[] = { RT_RULE("a"), RT_RULE("b#"), RT_RULE("c+") };
    const char *err = rt_compile_error(s, 3);
    assert_has(err, "rule 1: ");
}

Test(router_compile, error_buffer_may_be_null)
{
    router_spec_t s[] = { RT_RULE("a/b+"), };
    s[0].danube_topic = "/edge1/t";
    router_t *r = NULL;
    cr_assert_eq(router_compile(s, 1, &r, NULL, 0), TB_ECONFIG);
    cr_assert_null(r);
}

Test(router_compile, small_error_buffer_is_truncated_not_overrun)
{
    router_spec_t s[] = { RT_RULE("a/b+") };
    s[0].danube_topic = "/edge1/t";
    char err[12];
    memset(err, 'z', sizeof err);
    router_t *r = NULL;
    cr_assert_eq(router_compile(s, 1, &r, err, 8), TB_ECONFIG);
    cr_assert_str_eq(err, "rule 0:");
    cr_assert_eq(err[8], 'z');
}

/* ---- attribute references --------------------------------------------------- */

Test(router_compile, attribute_naming_a_missing_plus_is_rejected)
{
    router_attr_spec_t a[] = { { "id", "$2" } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+/t", .attrs = a, .n_attrs = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "rule 0: ");
    assert_has(err, "\"id\": \"$2\" refers to a '+' the pattern does not have");
}

Test(router_compile, attribute_naming_rest_without_hash_is_rejected)
{
    router_attr_spec_t a[] = { { "path", "$#" } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .attrs = a, .n_attrs = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "refers to $# but the pattern does not end in '#'");
}

Test(router_compile, attribute_reference_that_is_not_a_capture_is_rejected)
{
    const char *bad[] = { "1", "$0", "$01", "$x", "$", "$1a", NULL };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        router_attr_spec_t a[] = { { "id", bad[i] } };
        router_spec_t s[] = { { .mqtt_pattern = "d/+", .attrs = a, .n_attrs = 1 } };
        const char *err = rt_compile_error(s, 1);
        assert_has(err, "is not $N or $#");
    }
}

Test(router_compile, attribute_named_twice_is_rejected)
{
    router_attr_spec_t a[] = { { "id", "$1" }, { "id", "$2" } };
    router_spec_t s[] = { { .mqtt_pattern = "+/+", .attrs = a, .n_attrs = 2 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "extract_attributes names \"id\" twice");
}

Test(router_compile, attribute_with_empty_name_is_rejected)
{
    router_attr_spec_t a[] = { { "", "$1" } };
    router_spec_t s[] = { { .mqtt_pattern = "+", .attrs = a, .n_attrs = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "extract_attributes entry 0 has an empty name");
}

/* ---- danube_topic ------------------------------------------------------------ */

Test(router_compile, upstream_topic_that_is_not_namespace_slash_topic_is_rejected)
{
    const char *bad[] = { "edge1/t", "/edge1", "/edge1/a/b", "/edge 1/t", "/edge1/", "//t",
                          "/edge1/t.x", "" };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        router_spec_t s[] = { { .mqtt_pattern = "a", .danube_topic = bad[i] } };
        const char *err = rt_compile_error(s, 1);
        assert_has(err, "rule 0: danube_topic ");
    }
}

Test(router_compile, upstream_topic_error_names_the_topic)
{
    router_spec_t s[] = { { .mqtt_pattern = "a", .danube_topic = "/edge1/a.b" } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "\"/edge1/a.b\" is not a Danube topic");
}
