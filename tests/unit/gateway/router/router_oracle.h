/*
 * router_oracle.h: the naive linear matcher the router is checked against.
 *
 * It reads the same router_spec_t rules and scans them in config order,
 * comparing each pattern level by level with the topic: the obvious
 * implementation of the MQTT rules, written without any of the router's
 * code, so that the property test, the fuzz target and the benchmark can
 * all compare the trie with it. Patterns are split into levels once
 * (orc_init), so the benchmark compares against a fair linear scan, not
 * against one that re-parses strings per message.
 *
 * A header of static inline functions because three different targets use
 * it (tests/unit/gateway, tests/fuzz/fuzz_router.c, bench/bench_router.c),
 * each linked only against tb_gateway. It assumes the rules compiled.
 */
#ifndef TB_TEST_ROUTER_ORACLE_H
#define TB_TEST_ROUTER_ORACLE_H

#include "gateway/router/router.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct orc_rule {
    const router_spec_t *spec;
    size_t n_levels;
    router_slice_t *levels; /* slices of spec->mqtt_pattern */
} orc_rule_t;

typedef struct orc {
    size_t n;
    orc_rule_t *rules;
} orc_t;

typedef struct orc_match {
    int rule;
    size_t n_caps;
    router_slice_t caps[ROUTER_MAX_CAPTURES];
    bool has_rest;
    router_slice_t rest;
} orc_match_t;

static inline bool orc_is(router_slice_t s, char c)
{
    return s.len == 1 && s.p[0] == c;
}

/* Splits every pattern into levels. The specs must outlive the oracle. */
static inline void orc_init(orc_t *o, const router_spec_t *specs, size_t n)
{
    o->n = n;
    o->rules = calloc(n ? n : 1, sizeof *o->rules);
    for (size_t i = 0; i < n; i++) {
        const char *p = specs[i].mqtt_pattern;
        size_t levels = 1;
        for (const char *q = p; *q; q++)
            levels += *q == '/';
        orc_rule_t *r = &o->rules[i];
        r->spec = &specs[i];
        r->levels = calloc(levels, sizeof *r->levels);
        const char *s = p;
        for (size_t k = 0; k < levels; k++) {
            const char *e = strchr(s, '/');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            r->levels[k] = (router_slice_t){ s, len };
            s += len + 1;
        }
        r->n_levels = levels;
    }
}

static inline void orc_free(orc_t *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->rules[i].levels);
    free(o->rules);
}

/* The MQTT filter rules, one pattern against one topic. */
static inline bool orc_pattern_match(const orc_rule_t *r, const char *t, size_t len, orc_match_t *m)
{
    m->n_caps = 0;
    m->has_rest = false;
    m->rest = (router_slice_t){ NULL, 0 };
    if (len == 0)
        return false;
    if (t[0] == '$' && (orc_is(r->levels[0], '+') || orc_is(r->levels[0], '#')))
        return false;
    size_t pos = 0;
    bool done = false; /* no topic levels left */
    for (size_t k = 0; k < r->n_levels; k++) {
        router_slice_t pl = r->levels[k];
        if (orc_is(pl, '#')) {
            m->has_rest = true;
            m->rest = done ? (router_slice_t){ t + len, 0 } : (router_slice_t){ t + pos, len - pos };
            return true;
        }
        if (done)
            return false;
        size_t e = pos;
        while (e < len && t[e] != '/')
            e++;
        if (orc_is(pl, '+'))
            m->caps[m->n_caps++] = (router_slice_t){ t + pos, e - pos };
        else if (pl.len != e - pos || memcmp(pl.p, t + pos, pl.len) != 0)
            return false;
        if (e == len)
            done = true;
        else
            pos = e + 1;
    }
    return done;
}

/* The capture a "$N" / "$#" reference names in m. */
static inline router_slice_t orc_capture(const orc_match_t *m, const char *ref)
{
    if (ref[1] == '#')
        return m->rest;
    return m->caps[atoi(ref + 1) - 1];
}

static inline bool orc_values_ok(const router_spec_t *spec, const orc_match_t *m)
{
    for (size_t i = 0; i < spec->n_capture_values; i++) {
        const router_values_spec_t *cv = &spec->capture_values[i];
        router_slice_t v = orc_capture(m, cv->ref);
        bool found = false;
        for (size_t j = 0; j < cv->n_values && !found; j++)
            found = strlen(cv->values[j]) == v.len && memcmp(cv->values[j], v.p, v.len) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* First rule in order that matches and whose capture_values accept. */
static inline int orc_match(const orc_t *o, const char *t, size_t len, orc_match_t *m)
{
    m->n_caps = 0;
    m->has_rest = false;
    m->rest = (router_slice_t){ NULL, 0 };
    for (size_t i = 0; i < o->n; i++) {
        if (orc_pattern_match(&o->rules[i], t, len, m) && orc_values_ok(o->rules[i].spec, m)) {
            m->rule = (int)i;
            return m->rule;
        }
    }
    m->rule = -1;
    return -1;
}

/* Writes the upstream topic of a match (the danube_topic with ${N} / ${#}
 * replaced by the captured text) into buf; false if it does not fit. */
static inline bool orc_upstream(const orc_t *o, const orc_match_t *m, char *buf, size_t size)
{
    const char *s = o->rules[m->rule].spec->danube_topic;
    size_t used = 0;
    while (*s) {
        const char *text = s;
        size_t n = 1;
        if (s[0] == '$' && s[1] == '{') {
            const char *close = strchr(s, '}');
            char ref[16];
            snprintf(ref, sizeof ref, "$%.*s", (int)(close - s - 2), s + 2);
            router_slice_t v = orc_capture(m, ref);
            text = v.p;
            n = v.len;
            s = close + 1;
        } else {
            s++;
        }
        if (used + n + 1 > size)
            return false;
        memcpy(buf + used, text, n);
        used += n;
    }
    buf[used] = '\0';
    return true;
}

/* Is p a valid pattern by the router's documented rules and limits? */
static inline bool orc_pattern_valid(const char *p)
{
    if (!p || !*p)
        return false;
    size_t levels = 0, plus = 0;
    const char *s = p;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        levels++;
        for (size_t i = 0; i < len; i++) {
            if (s[i] == '+' && len != 1)
                return false;
            if (s[i] == '#' && (len != 1 || e))
                return false;
        }
        plus += len == 1 && s[0] == '+';
        if (!e)
            break;
        s = e + 1;
    }
    return levels <= ROUTER_MAX_LEVELS && plus <= ROUTER_MAX_CAPTURES;
}

#endif
