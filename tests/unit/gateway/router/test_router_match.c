/*
 * test_router_match.c: what a topic matches and what it captures: '+'
 * captures, '#' remainders (zero levels included), $ topics, first-match
 * order, empty levels, very deep and very long topics, attributes.
 */
#include "unit/gateway/router/helper_router.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- '+' ---------------------------------------------------------------- */

Test(router, plus_captures_one_level)
{
    router_spec_t s[] = { RT_RULE("device/+/telemetry") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "device/sensor-42/telemetry", &m), 0);
    cr_assert_eq(m.n_caps, 1);
    cr_assert(rt_slice_is(m.caps[0], "sensor-42"));
    router_free(r);
}

Test(router, plus_does_not_match_two_levels)
{
    router_spec_t s[] = { RT_RULE("device/+/telemetry") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "device/a/b/telemetry", &m), -1);
    cr_assert_eq(m.rule, -1);
    router_free(r);
}

Test(router, plus_does_not_match_missing_level)
{
    router_spec_t s[] = { RT_RULE("device/+") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "device", &m), -1);
    router_free(r);
}

Test(router, plus_captures_numbered_in_order_of_appearance)
{
    router_spec_t s[] = { RT_RULE("+/x/+/+") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "one/x/two/three", &m), 0);
    cr_assert_eq(m.n_caps, 3);
    cr_assert(rt_slice_is(m.caps[0], "one"));
    cr_assert(rt_slice_is(m.caps[1], "two"));
    cr_assert(rt_slice_is(m.caps[2], "three"));
    router_free(r);
}

Test(router, captures_point_into_the_topic_buffer)
{
    router_spec_t s[] = { RT_RULE("a/+/#") };
    router_t *r = rt_compile(s, 1);
    const char *topic = "a/bb/c/d";
    router_match_t m;
    cr_assert_eq(rt_match(r, topic, &m), 0);
    cr_assert_eq(m.caps[0].p, topic + 2);
    cr_assert_eq(m.rest.p, topic + 5);
    router_free(r);
}

/* ---- '#' ---------------------------------------------------------------- */

Test(router, hash_captures_the_remaining_levels)
{
    router_spec_t s[] = { RT_RULE("a/#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a/b/c", &m), 0);
    cr_assert(m.has_rest);
    cr_assert(rt_slice_is(m.rest, "b/c"));
    router_free(r);
}

Test(router, hash_matches_zero_levels_with_an_empty_capture)
{
    router_spec_t s[] = { RT_RULE("a/#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a", &m), 0);
    cr_assert(m.has_rest);
    cr_assert_eq(m.rest.len, 0);
    router_free(r);
}

Test(router, hash_does_not_match_a_longer_first_level)
{
    router_spec_t s[] = { RT_RULE("a/#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "ab/c", &m), -1);
    router_free(r);
}

Test(router, plus_then_hash_matches_a_single_level)
{
    router_spec_t s[] = { RT_RULE("+/#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "solo", &m), 0);
    cr_assert(rt_slice_is(m.caps[0], "solo"));
    cr_assert_eq(m.rest.len, 0);
    router_free(r);
}

Test(router, root_hash_matches_every_topic_not_starting_with_dollar)
{
    router_spec_t s[] = { RT_RULE("#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    const char *topics[] = { "a", "/", "a/b/c", "x//y", "a/$b" };
    for (size_t i = 0; i < TB_ARRAY_LEN(topics); i++) {
        cr_assert_eq(rt_match(r, topics[i], &m), 0, "topic %s", topics[i]);
        cr_assert(rt_slice_is(m.rest, topics[i]), "topic %s", topics[i]);
    }
    cr_assert_eq(rt_match(r, "$SYS/uptime", &m), -1);
    router_free(r);
}

/* ---- $ topics [MQTT-4.7.2-1] --------------------------------------------- */

Test(router, dollar_topic_is_not_matched_by_a_leading_plus)
{
    router_spec_t s[] = { RT_RULE("+/broker/uptime") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "$SYS/broker/uptime", &m), -1);
    router_free(r);
}

Test(router, dollar_topic_falls_through_to_a_literal_rule)
{
    router_spec_t s[] = { RT_RULE("#"), RT_RULE("+/x"), RT_RULE("$SYS/#") };
    router_t *r = rt_compile(s, 3);
    router_match_t m;
    cr_assert_eq(rt_match(r, "$SYS/broker/uptime", &m), 2);
    cr_assert(rt_slice_is(m.rest, "broker/uptime"));
    router_free(r);
}

Test(router, dollar_only_matters_in_the_first_level)
{
    router_spec_t s[] = { RT_RULE("a/+") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a/$x", &m), 0);
    router_free(r);
}

/* ---- order --------------------------------------------------------------- */

Test(router, first_rule_wins_over_a_later_more_specific_one)
{
    router_spec_t s[] = { RT_RULE("device/#"), RT_RULE("device/a/telemetry") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "device/a/telemetry", &m), 0);
    router_free(r);
}

Test(router, plus_rule_first_wins_over_a_later_literal)
{
    router_spec_t s[] = { RT_RULE("+/status"), RT_RULE("pump/status") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "pump/status", &m), 0);
    router_free(r);
}

Test(router, literal_rule_first_wins_over_a_later_plus)
{
    router_spec_t s[] = { RT_RULE("pump/status"), RT_RULE("+/status") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "pump/status", &m), 0);
    cr_assert_eq(m.n_caps, 0);
    router_free(r);
}

Test(router, later_rule_matches_what_earlier_rules_do_not)
{
    router_spec_t s[] = { RT_RULE("a/+"), RT_RULE("b/#"), RT_RULE("#") };
    router_t *r = rt_compile(s, 3);
    router_match_t m;
    cr_assert_eq(rt_match(r, "c/d", &m), 2);
    router_free(r);
}

Test(router, captures_belong_to_the_winning_rule)
{
    /* The trie reaches "+/+/z" (rule 1) before "a/#" (rule 0) can win only
     * if it explores badly; either way the captures must be rule 0's. */
    router_spec_t s[] = { RT_RULE("a/#"), RT_RULE("+/+/z") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a/y/z", &m), 0);
    cr_assert_eq(m.n_caps, 0);
    cr_assert(rt_slice_is(m.rest, "y/z"));
    router_free(r);
}

Test(router, no_rule_matching_returns_minus_one)
{
    router_spec_t s[] = { RT_RULE("a/b") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a/c", &m), -1);
    router_free(r);
}

Test(router, empty_topic_matches_nothing)
{
    router_spec_t s[] = { RT_RULE("#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "", &m), -1);
    router_free(r);
}

Test(router, zero_rules_match_nothing)
{
    router_t *r = NULL;
    cr_assert_eq(router_compile(NULL, 0, &r, NULL, 0), 0);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a", &m), -1);
    router_free(r);
}

/* ---- empty levels --------------------------------------------------------- */

Test(router, empty_level_is_a_level_that_plus_captures)
{
    router_spec_t s[] = { RT_RULE("a/+/b") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a//b", &m), 0);
    cr_assert(rt_slice_is(m.caps[0], ""));
    router_free(r);
}

Test(router, empty_level_is_not_skipped)
{
    router_spec_t s[] = { RT_RULE("a/b") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a//b", &m), -1);
    router_free(r);
}

Test(router, leading_slash_makes_an_empty_first_level)
{
    router_spec_t s[] = { RT_RULE("+/a") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "/a", &m), 0);
    cr_assert(rt_slice_is(m.caps[0], ""));
    router_free(r);
}

Test(router, trailing_slash_makes_an_empty_last_level)
{
    router_spec_t s[] = { RT_RULE("a/b"), RT_RULE("a/b/") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a/b/", &m), 1);
    router_free(r);
}

/* ---- depth and size ------------------------------------------------------- */

Test(router, single_level_topic_matches_a_single_level_pattern)
{
    router_spec_t s[] = { RT_RULE("a/b"), RT_RULE("a") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(rt_match(r, "a", &m), 1);
    router_free(r);
}

/* "l0/l1/.../l<n-1>"; with plus_every > 0, levels i % plus_every == 0 are '+'. */
static char *deep(size_t n, size_t plus_every)
{
    char *s = tb_malloc(n * 8 + 1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (plus_every && i % plus_every == 0)
            len += (size_t)sprintf(s + len, "%s+", i ? "/" : "");
        else
            len += (size_t)sprintf(s + len, "%sl%zu", i ? "/" : "", i);
    }
    return s;
}

Test(router, topic_with_150_levels_matches_a_150_level_pattern)
{
    char *topic = deep(150, 0);
    char *pattern = deep(150, 10); /* '+' at levels 0, 10, ..., 140 */
    router_spec_t s[] = { RT_RULE("x/#"), { .mqtt_pattern = pattern } };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(router_match(r, topic, strlen(topic), &m), 1);
    cr_assert_eq(m.n_caps, 15);
    cr_assert(rt_slice_is(m.caps[0], "l0"));
    cr_assert(rt_slice_is(m.caps[14], "l140"));
    router_free(r);
    free(pattern);
    free(topic);
}

Test(router, topic_with_150_levels_does_not_match_a_149_level_pattern)
{
    char *topic = deep(150, 0);
    char *pattern = deep(149, 10);
    router_spec_t s[] = { { .mqtt_pattern = pattern } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(router_match(r, topic, strlen(topic), &m), -1);
    router_free(r);
    free(pattern);
    free(topic);
}

Test(router, topic_with_150_levels_is_captured_whole_by_root_hash)
{
    char *topic = deep(150, 0);
    router_spec_t s[] = { RT_RULE("#") };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(router_match(r, topic, strlen(topic), &m), 0);
    cr_assert_eq(m.rest.len, strlen(topic));
    router_free(r);
    free(topic);
}

Test(router, level_of_65535_bytes_is_captured_by_plus)
{
    size_t n = 65535;
    char *topic = tb_malloc(n);
    memset(topic, 'x', n);
    router_spec_t s[] = { RT_RULE("x"), RT_RULE("+") };
    router_t *r = rt_compile(s, 2);
    router_match_t m;
    cr_assert_eq(router_match(r, topic, n, &m), 1);
    cr_assert_eq(m.caps[0].len, n);
    router_free(r);
    free(topic);
}

Test(router, topic_of_65535_slashes_is_matched_by_root_hash)
{
    size_t n = 65535; /* 65,536 empty levels */
    char *topic = tb_malloc(n);
    memset(topic, '/', n);
    router_spec_t s[] = { RT_RULE("+/+"), RT_RULE("/x/#"), RT_RULE("#") };
    router_t *r = rt_compile(s, 3);
    router_match_t m;
    cr_assert_eq(router_match(r, topic, n, &m), 2);
    cr_assert_eq(m.rest.len, n);
    router_free(r);
    free(topic);
}

/* ---- attributes ----------------------------------------------------------- */

Test(router, attributes_come_in_declared_order_with_their_captures)
{
    router_attr_spec_t attrs[] = { { "line", "$2" }, { "site", "$1" }, { "path", "$#" } };
    router_spec_t s[] = { { .mqtt_pattern = "plant/+/line/+/#", .attrs = attrs, .n_attrs = 3 } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "plant/north/line/7/temp/c", &m), 0);
    const char *want_name[] = { "line", "site", "path" };
    const char *want_value[] = { "7", "north", "temp/c" };
    size_t it = 0, k = 0;
    const char *name;
    router_slice_t v;
    while (router_attr_next(r, &m, &it, &name, &v)) {
        cr_assert_lt(k, 3);
        cr_assert_str_eq(name, want_name[k]);
        cr_assert(rt_slice_is(v, want_value[k]), "attribute %s", name);
        k++;
    }
    cr_assert_eq(k, 3);
    router_free(r);
}

Test(router, no_match_yields_no_attributes)
{
    router_attr_spec_t attrs[] = { { "id", "$1" } };
    router_spec_t s[] = { { .mqtt_pattern = "d/+", .attrs = attrs, .n_attrs = 1 } };
    router_t *r = rt_compile(s, 1);
    router_match_t m;
    cr_assert_eq(rt_match(r, "e/1", &m), -1);
    size_t it = 0;
    const char *name;
    router_slice_t v;
    cr_assert_not(router_attr_next(r, &m, &it, &name, &v));
    router_free(r);
}
