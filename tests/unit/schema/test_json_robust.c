/*
 * test_json_robust.c: hostile or careless schemas and payloads get a clear
 * answer, never a crash or a stall: nesting bounds, $ref cycles, work
 * bounds, and many threads on one compiled schema.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit/schema/helper_json.h"

/* "{\"not\":" x n "true" "}" x n */
static char *nested_not(int n)
{
    char *s = malloc((size_t)n * 8 + 8);
    char *o = s;
    for (int i = 0; i < n; i++) o += sprintf(o, "{\"not\":");
    o += sprintf(o, "true");
    for (int i = 0; i < n; i++) *o++ = '}';
    *o = '\0';
    return s;
}

/* n nested arrays around 0 */
static char *nested_array(int n)
{
    char *s = malloc((size_t)n * 2 + 2);
    memset(s, '[', (size_t)n);
    s[n] = '0';
    memset(s + n + 1, ']', (size_t)n);
    s[2 * n + 1] = '\0';
    return s;
}

Test(json_robust, schema_nested_beyond_the_bound_is_refused)
{
    char *schema = nested_not(SCH_JSON_MAX_SCHEMA_DEPTH + 10);
    char err[256];
    cr_assert_eq(js_compile_rc(schema, NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "nested deeper than") != NULL, "got: %s", err);
    free(schema);
}

Test(json_robust, schema_nested_within_the_bound_compiles)
{
    char *schema = nested_not(SCH_JSON_MAX_SCHEMA_DEPTH - 2);
    cr_assert_eq(js_compile_rc(schema, NULL, NULL, 0), 0);
    free(schema);
}

Test(json_robust, deep_instance_on_recursive_schema_is_refused_with_reason)
{
    sch__json_t *s = js_compile("{\"items\":{\"$ref\":\"#\"}}");
    char *payload = nested_array(1000);
    cr_assert_not(js_valid(s, payload));
    cr_assert(strstr(js_err(), "evaluation deeper than") != NULL, "got: %s", js_err());
    free(payload);
    sch__json_free(s);
}

Test(json_robust, instance_deeper_than_the_parser_allows_is_invalid)
{
    sch__json_t *s = js_compile("true");
    char *payload = nested_array(5000);
    cr_assert_not(js_valid(s, payload));
    free(payload);
    sch__json_free(s);
}

Test(json_robust, depth_bound_is_not_turned_into_a_pass_by_not)
{
    /* not(deep recursion) must not read the aborted evaluation as "no match" */
    sch__json_t *s = js_compile("{\"not\":{\"$ref\":\"#/$defs/t\"},\"$defs\":{\"t\":{\"items\":{\"$ref\":\"#/$defs/t\"}}}}");
    char *payload = nested_array(600);
    cr_assert_not(js_valid(s, payload));
    free(payload);
    sch__json_free(s);
}

Test(json_robust, ref_to_itself_is_refused_at_compile)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"$ref\":\"#\"}", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "cycle") != NULL, "got: %s", err);
}

Test(json_robust, ref_cycle_through_all_of_is_refused_at_compile)
{
    cr_assert_eq(js_compile_rc("{\"$defs\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/b\"}]},"
                               "\"b\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/a\"}]}},"
                               "\"$ref\":\"#/$defs/a\"}",
                               NULL, NULL, 0),
                 TB_ESCHEMA);
}

Test(json_robust, recursion_through_properties_is_allowed)
{
    const char *tree = "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}}}";
    cr_assert(js_check(tree, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}"));
    cr_assert_not(js_check(tree, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":\"x\"}]}]}"));
    cr_assert_str_eq(js_err(), "/kids/0/kids/0/v: type is string, expected integer");
}

Test(json_robust, long_instance_path_is_shortened_and_the_reason_kept)
{
    sch__json_t *s = js_compile("{\"items\":{\"$ref\":\"#\"},\"type\":\"array\"}");
    char *payload = nested_array(40); /* the innermost 0 is not an array */
    char err[64];
    cr_assert_eq(sch__json_validate(s, (const uint8_t *)payload, strlen(payload), err, sizeof err), TB_EINVALID);
    cr_assert_str_eq(err, "/0/0/0/0/0/0/0/0/.../0/0/0/0/0/0: type is integer, expected arr");
    free(payload);
    sch__json_free(s);
}

Test(json_robust, dynamic_ref_loop_is_bounded_at_validation)
{
    sch__json_t *s = js_compile("{\"$dynamicAnchor\":\"x\",\"$dynamicRef\":\"#x\"}");
    cr_assert_not(js_valid(s, "1"));
    cr_assert(strstr(js_err(), "evaluation deeper than") != NULL, "got: %s", js_err());
    sch__json_free(s);
}

Test(json_robust, exponential_schema_is_cut_by_the_step_bound)
{
    /* d0 -> anyOf[d1, d1] -> ... 40 levels: 2^40 evaluations if unbounded */
    char *schema = malloc(64 * 1024);
    char *o = schema + sprintf(schema, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
    for (int i = 0; i < 40; i++)
        o += sprintf(o, "\"d%d\":{\"anyOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"}]},", i, i + 1,
                     i + 1);
    sprintf(o, "\"d40\":{\"type\":\"string\"}}}");
    sch__json_t *s = js_compile(schema);
    cr_assert_not(js_valid(s, "1"));
    cr_assert(strstr(js_err(), "steps") != NULL, "got: %s", js_err());
    sch__json_free(s);
    free(schema);
}

Test(json_robust, catastrophic_regex_answers_without_backtracking_blowup)
{
    sch__json_t *s = js_compile("{\"pattern\":\"^(a+)+$\"}");
    char payload[4100];
    payload[0] = '"';
    memset(payload + 1, 'a', 4000);
    strcpy(payload + 4001, "b\"");
    cr_assert_not(js_valid(s, payload));
    cr_assert(strstr(js_err(), "does not match pattern") != NULL, "got: %s", js_err());
    sch__json_free(s);
}

Test(json_robust, unique_items_on_a_large_array_finds_the_late_duplicate)
{
    size_t n = 100000;
    char *payload = malloc(n * 8 + 16);
    char *o = payload;
    *o++ = '[';
    for (size_t i = 0; i < n; i++) o += sprintf(o, "%zu,", i);
    o += sprintf(o, "%zu]", n - 1);
    cr_assert_not(js_check("{\"uniqueItems\":true}", payload));
    cr_assert_str_eq(js_err(), "(root): items 99999 and 100000 are equal (uniqueItems)");
    free(payload);
}

Test(json_robust, nul_in_a_property_name_is_refused_with_reason)
{
    /* jansson cannot hold such a key; the payload is refused, not truncated to "a" */
    cr_assert_not(js_check("{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\\u0000b\":1}"));
    cr_assert(strstr(js_err(), "NUL byte in object key") != NULL, "got: %s", js_err());
}

/* ---- threads: one compiled schema, many validators ----------------------- */

typedef struct {
    const sch__json_t *s;
    int wrong;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    char err[128];
    for (int i = 0; i < 2000; i++) {
        char p[96];
        int t = i % 200;
        snprintf(p, sizeof p, "{\"id\":\"s-%d\",\"t\":%d,\"tags\":[\"a\",\"b\"]}", i, t);
        int rc = sch__json_validate(w->s, (const uint8_t *)p, strlen(p), err, sizeof err);
        bool want = t <= 120;
        if ((rc == 0) != want) w->wrong++;
        if (!want && strcmp(err, "/t: 121 > maximum 120") != 0 && t == 121) w->wrong++;
    }
    return NULL;
}

Test(json_robust, threads_share_one_compiled_schema)
{
    sch__json_t *s = js_compile("{\"properties\":{\"id\":{\"pattern\":\"^s-[0-9]+$\"},\"t\":{\"maximum\":120},"
                                "\"tags\":{\"uniqueItems\":true}},\"unevaluatedProperties\":false}");
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){ s, 0 };
        cr_assert_eq(pthread_create(&th[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].wrong, 0, "thread %d saw %d wrong answers", i, w[i].wrong);
    }
    sch__json_free(s);
}
