/*
 * test_router_property.c: the trie returns what a linear scan in config
 * order returns, on many random rule sets and topics (fixed seeds, so a
 * failure reproduces). Rule index, every capture (same bytes of the same
 * buffer), the '#' remainder, the upstream topic and the attributes must
 * all agree with the naive matcher in router_oracle.h.
 *
 * The alphabets are small on purpose: few distinct levels make overlapping
 * rules, shared trie prefixes, $ topics, empty levels and fall-through on
 * capture_values common rather than rare.
 */
#include "tests/unit/gateway/router/router_oracle.h"
#include "unit/gateway/router/helper_router.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

typedef struct rng { uint64_t s; } rng_t;

static uint32_t rnd(rng_t *r, uint32_t n)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)(r->s % n);
}

#define MAX_RULES 1000

/* One random rule set and everything its specs point to. */
typedef struct world {
    size_t n;
    router_spec_t specs[MAX_RULES];
    char pattern[MAX_RULES][96];
    char topic[MAX_RULES][32];
    const char *vals[MAX_RULES][3];
    router_values_spec_t cv[MAX_RULES][1];
    router_attr_spec_t attrs[MAX_RULES][2];
} world_t;

static const char *const value_pool[] = { "a", "b", "" };

static void random_rule(rng_t *g, world_t *w, size_t i, const char *const *lits, size_t n_lits)
{
    router_spec_t *s = &w->specs[i];
    size_t levels = 1 + rnd(g, 5), len = 0, plus = 0;
    bool hash = false;
    for (size_t k = 0; k < levels; k++) {
        uint32_t pick = rnd(g, 10);
        const char *lvl = pick < 3 ? "+" : (pick == 3 && k == levels - 1) ? "#" : lits[rnd(g, (uint32_t)n_lits)];
        plus += lvl[0] == '+';
        hash = lvl[0] == '#';
        len += (size_t)snprintf(w->pattern[i] + len, sizeof w->pattern[i] - len, "%s%s", k ? "/" : "", lvl);
    }
    if (len == 0) /* one empty level: MQTT forbids the empty filter */
        snprintf(w->pattern[i], sizeof w->pattern[i], "/");
    *s = (router_spec_t){ .mqtt_pattern = w->pattern[i], .danube_topic = w->topic[i] };
    snprintf(w->topic[i], sizeof w->topic[i], "/e/r%zu", i);
    size_t na = 0;
    if (plus)
        w->attrs[i][na++] = (router_attr_spec_t){ "first", "$1" };
    if (hash)
        w->attrs[i][na++] = (router_attr_spec_t){ "rest", "$#" };
    s->attrs = w->attrs[i];
    s->n_attrs = na;
    /* Some rules restrict a capture to a value list; some of those fan out by template. */
    if ((plus || hash) && rnd(g, 3) == 0) {
        const char *ref = plus && (!hash || rnd(g, 2)) ? "$1" : "$#";
        size_t nv = 1 + rnd(g, 3), first = rnd(g, 3);
        for (size_t k = 0; k < nv; k++)
            w->vals[i][k] = value_pool[(first + k) % 3];
        w->cv[i][0] = (router_values_spec_t){ ref, w->vals[i], nv };
        s->capture_values = w->cv[i];
        s->n_capture_values = 1;
        if (rnd(g, 2))
            snprintf(w->topic[i], sizeof w->topic[i], "/e/r%zu_${%s}", i, ref + 1);
    }
}

static void random_topic(rng_t *g, char *out, size_t size, const char *const *lits, size_t n_lits)
{
    size_t levels = 1 + rnd(g, 6), len = 0;
    for (size_t k = 0; k < levels; k++)
        len += (size_t)snprintf(out + len, size - len, "%s%s", k ? "/" : "",
                                rnd(g, 8) == 0 ? "zz" : lits[rnd(g, (uint32_t)n_lits)]);
}

static bool same_slice(router_slice_t a, router_slice_t b)
{
    return a.len == b.len && (a.len == 0 || a.p == b.p);
}

/* Matches one topic both ways and asserts every observable agrees. */
static void compare(const router_t *r, const orc_t *o, const char *topic)
{
    router_match_t m;
    orc_match_t want;
    size_t len = strlen(topic);
    int got = router_match(r, topic, len, &m);
    int exp = orc_match(o, topic, len, &want);
    cr_assert_eq(got, exp, "topic \"%s\": router says rule %d, linear scan says %d", topic, got, exp);
    if (exp < 0)
        return;
    cr_assert_eq(m.n_caps, want.n_caps, "topic \"%s\"", topic);
    for (size_t k = 0; k < want.n_caps; k++)
        cr_assert(same_slice(m.caps[k], want.caps[k]), "topic \"%s\" $%zu", topic, k + 1);
    cr_assert_eq(m.has_rest, want.has_rest, "topic \"%s\"", topic);
    if (want.has_rest)
        cr_assert(same_slice(m.rest, want.rest), "topic \"%s\" $#", topic);
    char up[128];
    cr_assert(orc_upstream(o, &want, up, sizeof up));
    cr_assert_str_eq(rt_upstream(r, &m), up, "topic \"%s\"", topic);
    size_t it = 0;
    const char *name;
    router_slice_t v;
    while (router_attr_next(r, &m, &it, &name, &v)) {
        const char *ref = o->rules[exp].spec->attrs[it - 1].ref;
        cr_assert(same_slice(v, orc_capture(&want, ref)), "topic \"%s\" attribute %s", topic, name);
    }
    cr_assert_eq(it, o->rules[exp].spec->n_attrs);
}

static void run(uint64_t seed, size_t sets, size_t max_rules, size_t topics,
                const char *const *lits, size_t n_lits)
{
    static world_t w;
    rng_t g = { seed };
    for (size_t set = 0; set < sets; set++) {
        w.n = 1 + rnd(&g, (uint32_t)max_rules);
        for (size_t i = 0; i < w.n; i++)
            random_rule(&g, &w, i, lits, n_lits);
        router_t *r = rt_compile(w.specs, w.n);
        orc_t o;
        orc_init(&o, w.specs, w.n);
        for (size_t t = 0; t < topics; t++) {
            char topic[64];
            random_topic(&g, topic, sizeof topic, lits, n_lits);
            compare(r, &o, topic);
        }
        orc_free(&o);
        router_free(r);
    }
}

static const char *const small_lits[] = { "a", "b", "", "$s" };

Test(router_property, trie_agrees_with_linear_scan_on_small_overlapping_rule_sets)
{
    run(0x9e3779b97f4a7c15ull, 2000, 12, 200, small_lits, TB_ARRAY_LEN(small_lits));
}

Test(router_property, trie_agrees_with_linear_scan_on_1000_rules)
{
    static char names[64][8];
    static const char *lits[64] = { "a", "b", "$s", "" };
    for (int i = 4; i < 64; i++) {
        snprintf(names[i], sizeof names[i], "n%d", i);
        lits[i] = names[i];
    }
    run(42, 5, MAX_RULES, 5000, lits, 64);
}
