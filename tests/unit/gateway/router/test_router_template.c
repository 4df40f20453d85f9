/*
 * test_router_template.c: danube_topic templates over capture_values: which
 * topic a message goes to, what falls through, the upstream topic list the
 * registration declares, and the templates refused at boot.
 */
#include "unit/gateway/router/helper_router.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define assert_has(text, part) \
    cr_assert(strstr((text), (part)) != NULL, "\"%s\" does not say \"%s\"", (text), (part))

static const char *plants[] = { "plant-a", "plant-b" };
static const router_values_spec_t plant_values[] = { { "$1", plants, 2 } };

/* rule 0: site/+/temp -> /edge1/${1}_temp for plant-a, plant-b; rule 1: catch-all */
static router_t *plant_router(void)
{
    static router_spec_t s[2];
    s[0] = (router_spec_t){ .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/${1}_temp",
                              .capture_values = plant_values, .n_capture_values = 1 };
    s[1] = (router_spec_t){ .mqtt_pattern = "#", .danube_topic = "/edge1/other" };
    return rt_compile(s, 2);
}

/* ---- matching ---------------------------------------------------------------- */

Test(router_template, each_value_routes_to_its_own_topic)
{
    router_t *r = plant_router();
    router_match_t m;
    cr_assert_eq(rt_match(r, "site/plant-a/temp", &m), 0);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/plant-a_temp");
    cr_assert_eq(rt_match(r, "site/plant-b/temp", &m), 0);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/plant-b_temp");
    router_free(r);
}

Test(router_template, value_outside_the_list_falls_through_to_a_later_rule)
{
    router_t *r = plant_router();
    router_match_t m;
    cr_assert_eq(rt_match(r, "site/plant-c/temp", &m), 1);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/other");
    router_free(r);
}

Test(router_template, value_outside_the_list_with_no_later_rule_matches_nothing)
{
    router_spec_t s[] = { { .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/${1}_temp",
                              .capture_values = plant_values, .n_capture_values = 1 } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "site/plant/temp", &m), -1);
    router_free(r);
}

Test(router_template, values_without_a_template_only_restrict_matching)
{
    router_spec_t s[] = {
        { .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/known",
          .capture_values = plant_values, .n_capture_values = 1 },
        { .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/unknown" },
    };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "site/plant-b/temp", &m), 0);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/known");
    cr_assert_eq(rt_match(r, "site/plant-z/temp", &m), 1);
    router_free(r);
}

Test(router_template, rest_capture_selects_the_topic)
{
    const char *kinds[] = { "app", "sys" };
    router_values_spec_t v[] = { { "$#", kinds, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "logs/#", .danube_topic = "/edge1/log-${#}",
                              .capture_values = v, .n_capture_values = 1 } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "logs/sys", &m), 0);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/log-sys");
    router_free(r);
}

Test(router_template, rest_capture_with_more_levels_than_listed_falls_through)
{
    const char *kinds[] = { "app", "sys" };
    router_values_spec_t v[] = { { "$#", kinds, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "logs/#", .danube_topic = "/edge1/log-${#}",
                              .capture_values = v, .n_capture_values = 1 } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "logs/sys/extra", &m), -1);
    router_free(r);
}

Test(router_template, rest_value_that_adds_a_segment_is_rejected)
{
    const char *kinds[] = { "app", "sys/kernel" };
    router_values_spec_t v[] = { { "$#", kinds, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "logs/#", .danube_topic = "/edge1/log-${#}",
                              .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "gives \"/edge1/log-sys/kernel\" for $#=\"sys/kernel\"");
}

/* ---- the upstream topic list -------------------------------------------------- */

Test(router_template, upstream_list_is_the_cross_product_last_capture_fastest)
{
    const char *lines[] = { "l1", "l2" };
    router_values_spec_t v[] = { { "$2", lines, 2 }, { "$1", plants, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "+/+/x", .danube_topic = "/edge1/${1}_${2}",
                              .capture_values = v, .n_capture_values = 2 } };
    router_t *r = rt_compile(s, 1);
    size_t n;
    const char *const *t = router_upstream_topics(r, &n);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(t[0], "/edge1/plant-a_l1");
    cr_assert_str_eq(t[1], "/edge1/plant-a_l2");
    cr_assert_str_eq(t[2], "/edge1/plant-b_l1");
    cr_assert_str_eq(t[3], "/edge1/plant-b_l2");
    router_match_t m;
    cr_assert_eq(rt_match(r, "plant-b/l1/x", &m), 0);
    cr_assert_str_eq(rt_upstream(r, &m), "/edge1/plant-b_l1");
    router_free(r);
}

Test(router_template, upstream_list_is_deduplicated_in_first_appearance_order)
{
    router_spec_t s[] = {
        { .mqtt_pattern = "a/+", .danube_topic = "/edge1/telemetry" },
        { .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/${1}_temp",
          .capture_values = plant_values, .n_capture_values = 1 },
        { .mqtt_pattern = "b/+", .danube_topic = "/edge1/plant-b_temp" },
        { .mqtt_pattern = "#", .danube_topic = "/edge1/telemetry" },
    };
    router_t *r = rt_compile(s, 4);
    size_t n;
    const char *const *t = router_upstream_topics(r, &n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(t[0], "/edge1/telemetry");
    cr_assert_str_eq(t[1], "/edge1/plant-a_temp");
    cr_assert_str_eq(t[2], "/edge1/plant-b_temp");
    router_free(r);
}

Test(router_template, each_rule_lists_the_topic_ids_it_can_produce)
{
    router_spec_t s[] = {
        { .mqtt_pattern = "a/+", .danube_topic = "/edge1/telemetry" },
        { .mqtt_pattern = "site/+/temp", .danube_topic = "/edge1/${1}_temp",
          .capture_values = plant_values, .n_capture_values = 1 },
        { .mqtt_pattern = "#", .danube_topic = "/edge1/telemetry" },
    };
    router_t *r = rt_compile(s, 3);
    size_t n;
    const uint32_t *ids = router_rule_topics(r, 1, &n);
    cr_assert_eq(n, 2);
    cr_assert_eq(ids[0], 1);
    cr_assert_eq(ids[1], 2);
    ids = router_rule_topics(r, 2, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(ids[0], 0);
    cr_assert_null(router_rule_topics(r, 3, &n));
    cr_assert_eq(n, 0);
    router_free(r);
}

/* ---- refused templates ----------------------------------------------------------- */

Test(router_template, template_over_a_capture_without_values_is_rejected)
{
    router_spec_t s[] = { RT_RULE("a"),
                            { .mqtt_pattern = "+/+", .danube_topic = "/edge1/${2}",
                              .capture_values = plant_values, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 2);
    assert_has(err, "rule 1: ");
    assert_has(err, "uses ${2} but capture_values has no list for it");
}

Test(router_template, template_over_a_missing_capture_is_rejected)
{
    router_spec_t s[] = { { .mqtt_pattern = "a/b", .danube_topic = "/edge1/${1}" } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "${1} refers to a '+' the pattern does not have");
}

Test(router_template, value_giving_an_invalid_topic_is_rejected_by_name)
{
    const char *vals[] = { "ok", "not ok" };
    router_values_spec_t v[] = { { "$1", vals, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .danube_topic = "/edge1/${1}",
                              .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "rule 0: ");
    assert_has(err, "gives \"/edge1/not ok\" for $1=\"not ok\"");
}

Test(router_template, dollar_outside_a_reference_is_rejected)
{
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .danube_topic = "/edge1/$1" } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "'$' must start ${N} or ${#}");
}

Test(router_template, expansion_beyond_the_limit_is_rejected)
{
    static char names[100][8];
    static const char *vals[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "v%d", i);
        vals[i] = names[i];
    }
    router_values_spec_t v[] = { { "$1", vals, 100 }, { "$2", vals, 100 } };
    router_spec_t s[] = { { .mqtt_pattern = "+/+", .danube_topic = "/edge1/${1}_${2}",
                              .capture_values = v, .n_capture_values = 2 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "expands to more than 4096 upstream topics");
}

/* ---- refused capture_values ------------------------------------------------------ */

Test(router_template, plus_value_holding_a_slash_is_rejected)
{
    const char *vals[] = { "a/b" };
    router_values_spec_t v[] = { { "$1", vals, 1 } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "\"a/b\" can never be captured");
}

Test(router_template, values_for_a_missing_capture_are_rejected)
{
    router_values_spec_t v[] = { { "$3", plants, 2 } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "capture_values key \"$3\" refers to a '+' the pattern does not have");
}

Test(router_template, value_listed_twice_is_rejected)
{
    const char *vals[] = { "a", "b", "a" };
    router_values_spec_t v[] = { { "$1", vals, 3 } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "capture_values \"$1\" lists \"a\" twice");
}

Test(router_template, empty_value_list_is_rejected)
{
    router_values_spec_t v[] = { { "$1", plants, 0 } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .capture_values = v, .n_capture_values = 1 } };
    const char *err = rt_compile_error(s, 1);
    assert_has(err, "capture_values \"$1\" lists no values");
}
