/* fuzz-lib: tb_router */
/*
 * fuzz_router.c: compiles fuzzed rules, matches a fuzzed topic, and aborts
 * if the router and the naive linear matcher (router_oracle.h) disagree on
 * anything: rule index, capture slices, '#' remainder, upstream topic,
 * attributes; or if compile accepts an invalid pattern or rejects a valid
 * rule set.
 *
 * Input: up to 8 rule lines, each ended by '\n', then the topic (the rest
 * of the input, any bytes, newlines included once 8 rules are read). A rule
 * line is "pattern", "pattern<TAB>v1,v2" (capture_values for $1 if the
 * pattern has a '+', else for $#) or "pattern<TAB>=v1,v2" (the same plus a
 * danube_topic template using that capture). Every rule also gets
 * attributes for $1, its last '+' and $# when the pattern text suggests
 * them; compile decides whether that is valid.
 */
#include "tests/unit/gateway/router/router_oracle.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 8
#define MAX_VALUES 8
#define LINE_MAX_LEN 512

typedef struct fz_rule {
    char pattern[LINE_MAX_LEN + 1];
    char topic[64];
    char values_buf[LINE_MAX_LEN + 1];
    const char *values[MAX_VALUES];
    char last_ref[8];
    router_values_spec_t cv;
    router_attr_spec_t attrs[3];
} fz_rule_t;

static fz_rule_t rules[MAX_RULES];
static router_spec_t specs[MAX_RULES];

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "fuzz_router: " __VA_ARGS__); \
            fputc('\n', stderr);                          \
            abort();                                      \
        }                                                 \
    } while (0)

/* Fills rule i from one line; returns whether it declares capture_values. */
static bool parse_rule(size_t i, const char *line, size_t len)
{
    fz_rule_t *fr = &rules[i];
    router_spec_t *s = &specs[i];
    const char *tab = memchr(line, '\t', len);
    size_t plen = tab ? (size_t)(tab - line) : len;
    memcpy(fr->pattern, line, plen);
    fr->pattern[plen] = '\0'; /* an embedded NUL just shortens the pattern */
    snprintf(fr->topic, sizeof fr->topic, "/fz/r%zu", i);
    *s = (router_spec_t){ .mqtt_pattern = fr->pattern, .danube_topic = fr->topic, .attrs = fr->attrs };

    size_t plus = 0;
    for (const char *p = fr->pattern; *p; p++)
        plus += *p == '+';
    size_t pl = strlen(fr->pattern);
    bool hash = pl && fr->pattern[pl - 1] == '#';
    if (plus) {
        fr->attrs[s->n_attrs++] = (router_attr_spec_t){ "first", "$1" };
        snprintf(fr->last_ref, sizeof fr->last_ref, "$%zu", plus > 999 ? (size_t)999 : plus);
        fr->attrs[s->n_attrs++] = (router_attr_spec_t){ "last", fr->last_ref };
    }
    if (hash)
        fr->attrs[s->n_attrs++] = (router_attr_spec_t){ "rest", "$#" };
    if (!tab)
        return false;

    const char *v = tab + 1;
    size_t vlen = len - plen - 1;
    bool tmpl = vlen && v[0] == '=';
    if (tmpl) {
        v++;
        vlen--;
    }
    memcpy(fr->values_buf, v, vlen);
    fr->values_buf[vlen] = '\0';
    size_t n = 0;
    char *val = fr->values_buf;
    for (;;) {
        fr->values[n++] = val;
        char *comma = strchr(val, ',');
        if (!comma || n == MAX_VALUES)
            break;
        *comma = '\0';
        val = comma + 1;
    }
    const char *ref = plus ? "$1" : "$#";
    fr->cv = (router_values_spec_t){ ref, fr->values, n };
    s->capture_values = &fr->cv;
    s->n_capture_values = 1;
    if (tmpl)
        snprintf(fr->topic, sizeof fr->topic, "/fz/r%zu_${%s}", i, ref + 1);
    return true;
}

static bool same_slice(router_slice_t a, router_slice_t b)
{
    return a.len == b.len && (a.len == 0 || a.p == b.p);
}

static void compare(const router_t *r, const orc_t *o, const char *t, size_t len)
{
    router_match_t m;
    orc_match_t w;
    int got = router_match(r, t, len, &m);
    int exp = orc_match(o, t, len, &w);
    CHECK(got == exp, "rule %d, linear scan says %d", got, exp);
    CHECK(m.rule == got, "m.rule %d != returned %d", m.rule, got);
    if (exp < 0)
        return;
    CHECK(m.n_caps == w.n_caps, "n_caps %u vs %zu", m.n_caps, w.n_caps);
    for (size_t k = 0; k < w.n_caps; k++)
        CHECK(same_slice(m.caps[k], w.caps[k]), "capture $%zu differs", k + 1);
    CHECK(m.has_rest == w.has_rest, "has_rest differs");
    if (w.has_rest)
        CHECK(same_slice(m.rest, w.rest), "$# differs");
    static char up[LINE_MAX_LEN + 128];
    CHECK(orc_upstream(o, &w, up, sizeof up), "upstream too long");
    size_t n_topics;
    const char *const *topics = router_upstream_topics(r, &n_topics);
    CHECK(m.topic_id < n_topics, "topic id out of range");
    CHECK(strcmp(topics[m.topic_id], up) == 0, "upstream %s vs %s", topics[m.topic_id], up);
    size_t it = 0;
    const char *name;
    router_slice_t v;
    while (router_attr_next(r, &m, &it, &name, &v))
        CHECK(same_slice(v, orc_capture(&w, specs[exp].attrs[it - 1].ref)), "attribute %s", name);
    CHECK(it == specs[exp].n_attrs, "attribute count");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    size_t n = 0, pos = 0;
    bool any_values = false;
    while (n < MAX_RULES) {
        const char *nl = memchr(in + pos, '\n', size - pos);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (in + pos));
        if (len > LINE_MAX_LEN)
            return 0;
        any_values |= parse_rule(n++, in + pos, len);
        pos += len + 1;
    }
    const char *topic = in + pos;
    size_t tlen = size - pos;

    bool all_valid = true;
    for (size_t i = 0; i < n; i++)
        all_valid &= orc_pattern_valid(specs[i].mqtt_pattern);

    router_t *r = NULL;
    char err[256];
    int rc = router_compile(specs, n, &r, err, sizeof err);
    if (rc != 0) {
        CHECK(r == NULL, "failed compile left a router");
        CHECK(!all_valid || any_values, "valid rules rejected: %s", err);
        return 0;
    }
    CHECK(all_valid, "invalid pattern accepted");

    orc_t o;
    orc_init(&o, specs, n);
    compare(r, &o, topic, tlen);
    for (size_t i = 0; i < n; i++) /* each pattern, read as a topic */
        compare(r, &o, specs[i].mqtt_pattern, strlen(specs[i].mqtt_pattern));
    orc_free(&o);
    router_free(r);
    return 0;
}
