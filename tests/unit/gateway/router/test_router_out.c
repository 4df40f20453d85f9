/*
 * test_router_out.c: output topic templates (remote_topic, device) and
 * output topic filters: what each placeholder expands to, every template
 * refused at compile (with what and where), the per-message refusals, and
 * a randomized comparison with the naive oracle (router_out_oracle.h).
 */
#include "unit/gateway/router/helper_router.h"
#include "unit/gateway/router/router_out_oracle.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define assert_has(text, part) \
    cr_assert(strstr((text), (part)) != NULL, "\"%s\" does not say \"%s\"", (text), (part))

static const router_attr_spec_t line_attrs[] = { { "line", "$1" }, { "cell", "$2" } };
static const router_attr_spec_t rest_attrs[] = { { "rest", "$#" } };

/* rule 0: plant/+/+/temp (attrs line=$1, cell=$2); rule 1: raw/# (rest=$#); rule 2: "#" */
static router_t *rules3(void)
{
    static router_spec_t s[3];
    s[0] = (router_spec_t){ .mqtt_pattern = "plant/+/+/temp", .danube_topic = "/edge1/temp",
                            .attrs = line_attrs, .n_attrs = 2 };
    s[1] = (router_spec_t){ .mqtt_pattern = "raw/#", .danube_topic = "/edge1/raw", .attrs = rest_attrs,
                            .n_attrs = 1 };
    s[2] = (router_spec_t){ .mqtt_pattern = "#", .danube_topic = "/edge1/other" };
    return rt_compile(s, 3);
}

typedef struct attrs {
    const char *names[4];
    const char *values[4];
} attrs_t;

static bool find_attr(void *arg, const char *name, size_t len, router_slice_t *v)
{
    const attrs_t *a = arg;
    for (int i = 0; i < 4 && a->names[i]; i++)
        if (strlen(a->names[i]) == len && memcmp(a->names[i], name, len) == 0) {
            *v = (router_slice_t){ a->values[i], strlen(a->values[i]) };
            return true;
        }
    return false;
}

/* Compiles tmpl (its syntax: which rules it may meet is checked_against_rules'
 * business), expands it for topic with r's match, returns the result
 * (static) or "<error N>". */
static const char *expand(router_t *r, const char *tmpl, const char *topic, attrs_t *a)
{
    static char out[4096];
    router_out_t *t;
    char err[512];
    int rc = router_out_compile(NULL, tmpl, NULL, 0, 0, &t, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", tmpl, err);
    router_match_t m;
    rt_match(r, topic, &m);
    router_out_ctx_t c = { .topic = { topic, strlen(topic) },
                           .upstream = { rt_upstream(r, &m), strlen(rt_upstream(r, &m)) },
                           .m = &m, .attr = a ? find_attr : NULL, .arg = a };
    char buf[sizeof out];
    int n = router_out_expand(t, &c, buf, sizeof buf - 1);
    char *o;
    int on = oro_expand(tmpl, &c, sizeof buf - 1, &o);
    cr_assert_eq(n, on, "%s on %s: %d, oracle %d", tmpl, topic, n, on);
    if (n >= 0) {
        cr_assert(memcmp(buf, o, (size_t)n) == 0);
        free(o);
        memcpy(out, buf, (size_t)n);
        out[n] = 0;
    } else {
        snprintf(out, sizeof out, "<error %d>", n);
    }
    router_out_free(t);
    return out;
}

static const char *compile_error(router_t *r, const char *tmpl, const uint32_t *rules, size_t n,
                                 unsigned flags)
{
    static char err[512];
    router_out_t *t = (router_out_t *)1;
    int rc = router_out_compile(r, tmpl, rules, n, flags, &t, err, sizeof err);
    cr_assert_eq(rc, TB_ECONFIG, "\"%s\" compiled", tmpl);
    cr_assert_null(t);
    return err;
}

Test(router_out, placeholders_expand)
{
    router_t *r = rules3();
    cr_assert_str_eq(expand(r, "site1/${topic}", "plant/a/b/temp", NULL), "site1/plant/a/b/temp");
    cr_assert_str_eq(expand(r, "fwd${upstream}", "plant/a/b/temp", NULL), "fwd/edge1/temp");
    cr_assert_str_eq(expand(r, "s/${2}/${1}", "plant/l1/c7/temp", NULL), "s/c7/l1");
    cr_assert_str_eq(expand(r, "raw2/${#}", "raw/x/y/z", NULL), "raw2/x/y/z");
    cr_assert_str_eq(expand(r, "raw2/${#}", "raw", NULL), "raw2/");
    attrs_t a = { { "line", "cell" }, { "L9", "C3" } };
    cr_assert_str_eq(expand(r, "a/${attr.line}-${attr.cell}", "plant/L9/C3/temp", &a), "a/L9-C3");
    cr_assert_str_eq(expand(r, "cost$5/${topic}", "x", NULL), "cost$5/x", "a '$' without '{' is literal");
    cr_assert_str_eq(expand(r, "${topic}${topic}", "ab", NULL), "abab");
    router_free(r);
}

Test(router_out, per_message_refusals)
{
    router_t *r = rules3();
    attrs_t slash = { { "line" }, { "has/slash" } };
    cr_assert_str_eq(expand(r, "a/${attr.line}", "plant/x/y/temp", &slash), "a/has/slash", "levels are fine");
    attrs_t bad = { { "line" }, { "bad\xff" } };
    cr_assert_str_eq(expand(r, "a/${attr.line}", "plant/x/y/temp", &bad), "<error -2>", "not UTF-8");
    attrs_t wild = { { "line" }, { "w+" } };
    cr_assert_str_eq(expand(r, "a/${attr.line}", "plant/x/y/temp", &wild), "<error -2>");
    cr_assert_str_eq(expand(r, "a/${attr.line}", "plant/x/y/temp", NULL), "<error -2>", "absent");
    /* a capture the match does not have (the topic went to another rule) */
    router_out_t *t;
    char err[256];
    cr_assert_eq(router_out_compile(NULL, "a/${2}", NULL, 0, 0, &t, err, sizeof err), 0);
    router_match_t m;
    rt_match(r, "other", &m);
    router_out_ctx_t c = { .topic = { "other", 5 }, .upstream = { "/e/o", 4 }, .m = &m };
    char buf[64];
    cr_assert_eq(router_out_expand(t, &c, buf, sizeof buf), ROUTER_OUT_EVALUE);
    c.m = NULL;
    cr_assert_eq(router_out_expand(t, &c, buf, sizeof buf), ROUTER_OUT_EVALUE);
    router_out_free(t);
    /* the cap */
    cr_assert_eq(router_out_compile(NULL, "prefix/${topic}", NULL, 0, 0, &t, err, sizeof err), 0);
    c.topic = (router_slice_t){ "0123456789", 10 };
    cr_assert_eq(router_out_expand(t, &c, buf, 17), 17);
    cr_assert_eq(router_out_expand(t, &c, buf, 16), ROUTER_OUT_ETOOLONG);
    cr_assert(router_out_needs_match(t) == false);
    router_out_free(t);
    router_free(r);
}

Test(router_out, syntax_refused_with_column)
{
    assert_has(compile_error(NULL, "", NULL, 0, 0), "empty");
    const char *e = compile_error(NULL, "site/+/x", NULL, 0, 0);
    assert_has(e, "column 6");
    assert_has(e, "'+'");
    assert_has(compile_error(NULL, "site/#", NULL, 0, 0), "column 6");
    e = compile_error(NULL, "site1/${tpoic}", NULL, 0, 0);
    assert_has(e, "column 7");
    assert_has(e, "unknown placeholder ${tpoic}");
    assert_has(compile_error(NULL, "a/${topic", NULL, 0, 0), "without a closing");
    assert_has(compile_error(NULL, "a/${0}", NULL, 0, 0), "unknown placeholder ${0}");
    assert_has(compile_error(NULL, "a/${33}", NULL, 0, 0), "${1}..${32}");
    assert_has(compile_error(NULL, "a/${1x}", NULL, 0, 0), "${1}..${32}");
    assert_has(compile_error(NULL, "a/${attr.}", NULL, 0, 0), "unknown placeholder");
    assert_has(compile_error(NULL, "a/${a${1}}", NULL, 0, 0), "inside a placeholder");
    assert_has(compile_error(NULL, "${1}", NULL, 0, 0), "every piece can be empty");
    assert_has(compile_error(NULL, "${1}${#}${attr.x}", NULL, 0, 0), "every piece can be empty");
    assert_has(compile_error(NULL, "bad\xff", NULL, 0, 0), "UTF-8");
    /* one level (a Sparkplug device) */
    assert_has(compile_error(NULL, "dev/${1}", NULL, 0, ROUTER_OUT_LEVEL), "'/'");
    assert_has(compile_error(NULL, "${topic}", NULL, 0, ROUTER_OUT_LEVEL), "not allowed");
    assert_has(compile_error(NULL, "d${#}", NULL, 0, ROUTER_OUT_LEVEL), "not allowed");
    router_out_t *t;
    cr_assert_eq(router_out_compile(NULL, "line-${1}", NULL, 0, ROUTER_OUT_LEVEL, &t, NULL, 0), 0);
    cr_assert(router_out_needs_match(t));
    router_out_free(t);
    /* one level may be a capture alone (device: "${1}"); an empty one is refused per message */
    cr_assert_eq(router_out_compile(NULL, "${1}", NULL, 0, ROUTER_OUT_LEVEL, &t, NULL, 0), 0);
    router_t *r = rules3();
    router_match_t m;
    rt_match(r, "plant//c/temp", &m);
    router_out_ctx_t c = { .topic = { "plant//c/temp", 13 }, .m = &m };
    char buf[32];
    cr_assert_eq(router_out_expand(t, &c, buf, sizeof buf), ROUTER_OUT_EVALUE);
    rt_match(r, "plant/L2/c/temp", &m);
    cr_assert_eq(router_out_expand(t, &c, buf, sizeof buf), 2);
    cr_assert(memcmp(buf, "L2", 2) == 0);
    router_out_free(t);
    router_free(r);
}

Test(router_out, checked_against_rules)
{
    router_t *r = rules3();
    uint32_t only0[] = { 0 }, only1[] = { 1 }, both[] = { 0, 1 };
    router_out_t *t;
    char err[512];
    /* rule 0 has two '+' */
    cr_assert_eq(router_out_compile(r, "x/${2}", only0, 1, 0, &t, err, sizeof err), 0, "%s", err);
    router_out_free(t);
    const char *e = compile_error(r, "x/${3}", only0, 1, 0);
    assert_has(e, "rule 0");
    assert_has(e, "has 2 '+' captures");
    assert_has(e, "column 3");
    assert_has(compile_error(r, "x/${1}", only1, 1, 0), "rule 1");
    assert_has(compile_error(r, "x/${#}", only0, 1, 0), "does not end in '#'");
    cr_assert_eq(router_out_compile(r, "x/${#}", only1, 1, 0, &t, err, sizeof err), 0, "%s", err);
    router_out_free(t);
    e = compile_error(r, "x/${attr.cell}", both, 2, 0);
    assert_has(e, "${attr.cell} is not an extract_attributes name of rule 1");
    assert_has(e, "invalid topic");
    /* NULL rules: every rule of r; rule 1 ("raw/#") is the first without a '+' */
    assert_has(compile_error(r, "x/${1}", NULL, 0, 0), "rule 1 (\"raw/#\") has 0 '+' captures");
    uint32_t hash_only[] = { 2 };
    assert_has(compile_error(r, "x/${1}", hash_only, 1, 0), "rule 2 (\"#\") has 0 '+' captures");
    router_out_t *ok;
    cr_assert_eq(router_out_compile(r, "x/${#}", hash_only, 1, 0, &ok, err, sizeof err), 0, "%s", err);
    router_out_free(ok);
    uint32_t missing[] = { 9 };
    assert_has(compile_error(r, "x", missing, 1, 0), "rule 9 does not exist");
    router_free(r);
}

Test(router_out, filters)
{
    static const struct { const char *f, *t; bool m; } cases[] = {
        { "#", "a/b", true },          { "#", "$SYS/x", false },   { "+/x", "$SYS/x", false },
        { "$SYS/#", "$SYS/x", true },  { "a/#", "a", true },       { "a/#", "a/b/c", true },
        { "a/#", "ab", false },        { "a/+", "a/", true },      { "a/+", "a", false },
        { "+/b", "/b", true },         { "/edge1/#", "/edge1/telemetry", true },
        { "/edge1/#", "/edge2/telemetry", false }, { "a/b", "a/b", true }, { "a/b", "a/b/c", false },
        { "a/+/c", "a/x/c", true },    { "a/+/c", "a/x/d", false }, { "+", "x", true }, { "+", "x/y", false },
        { "+/+", "/", true },          { "a", "a/", false },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
        cr_assert_eq(router_filter_check(cases[i].f, NULL, 0), 0, "%s", cases[i].f);
        cr_assert_eq(router_filter_match(cases[i].f, cases[i].t, strlen(cases[i].t)), cases[i].m, "%s vs %s",
                     cases[i].f, cases[i].t);
        cr_assert_eq(oro_filter_match(cases[i].f, cases[i].t, strlen(cases[i].t)), cases[i].m,
                     "oracle: %s vs %s", cases[i].f, cases[i].t);
    }
    char err[256];
    const char *bad[] = { "", "a/b#", "a/#/b", "a+/b", "x\xc3" };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++)
        cr_assert_eq(router_filter_check(bad[i], err, sizeof err), TB_ECONFIG, "%s", bad[i]);
    router_filter_check("a/#/b", err, sizeof err);
    assert_has(err, "column 3");
}

/* Random templates and topics over a small alphabet: compile decides, and
 * every accepted expansion agrees with the oracle and is a valid topic. */
Test(router_out, random_against_oracle)
{
    static const char *bits[] = { "a", "/", "+", "#", "$", "{", "}", "${topic}", "${upstream}", "${1}", "${2}",
                                  "${#}", "${attr.line}", "${attr.rest}", "${", "é", "${3}" };
    static const char *levels[] = { "a", "b", "", "plant", "raw", "é" };
    router_t *r = rules3();
    attrs_t a = { { "line", "rest" }, { "L", "x/y" } };
    unsigned seed = 12345;
    size_t accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        char tmpl[256] = "", topic[128] = "";
        int nb = 1 + (int)(rand_r(&seed) % 6);
        for (int i = 0; i < nb; i++)
            strcat(tmpl, bits[rand_r(&seed) % TB_ARRAY_LEN(bits)]);
        int nl = 1 + (int)(rand_r(&seed) % 5);
        for (int i = 0; i < nl; i++) {
            if (i)
                strcat(topic, "/");
            strcat(topic, levels[rand_r(&seed) % TB_ARRAY_LEN(levels)]);
        }
        if (!*topic)
            continue; /* no MQTT topic name is empty */
        router_out_t *t;
        if (router_out_compile(NULL, tmpl, NULL, 0, 0, &t, NULL, 0) != 0) {
            refused++;
            continue;
        }
        accepted++;
        router_match_t m;
        rt_match(r, topic, &m);
        const char *up = rt_upstream(r, &m);
        router_out_ctx_t c = { .topic = { topic, strlen(topic) }, .upstream = { up, strlen(up) }, .m = &m,
                               .attr = find_attr, .arg = &a };
        char buf[512];
        int n = router_out_expand(t, &c, buf, sizeof buf);
        char *o;
        int on = oro_expand(tmpl, &c, sizeof buf, &o);
        cr_assert_eq(n, on, "\"%s\" on \"%s\": %d, oracle %d", tmpl, topic, n, on);
        if (n >= 0) {
            cr_assert(memcmp(buf, o, (size_t)n) == 0, "\"%s\" on \"%s\"", tmpl, topic);
            cr_assert(oro_topic_valid(buf, (size_t)n), "\"%s\" on \"%s\" gave an invalid topic", tmpl, topic);
            free(o);
        }
        router_out_free(t);
    }
    cr_assert_gt(accepted, 1000);
    cr_assert_gt(refused, 1000);
    router_free(r);
}
