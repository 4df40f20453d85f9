/*
 * router_out_oracle.h: naive versions of the output template expansion and
 * of MQTT filter matching, written without any of router_out.c's code, so
 * the unit test and the fuzz target (tests/fuzz/fuzz_out_template.c) can
 * check the compiled form against the obvious reading of the rules.
 *
 * oro_expand re-reads the template text for every message, by string
 * prefix comparisons, and builds the result in a heap buffer;
 * oro_filter_match splits both strings into arrays of levels and compares
 * them level by level. oro_topic_valid is the MQTT topic-name rule every
 * accepted expansion must meet. Static inline: used by two targets that
 * link tb_router only.
 */
#ifndef TB_TEST_ROUTER_OUT_ORACLE_H
#define TB_TEST_ROUTER_OUT_ORACLE_H

#include "gateway/router/router.h"

#include "base/base.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The MQTT topic name rule: 1..65535 bytes, UTF-8, no NUL, no wildcard. */
static inline bool oro_topic_valid(const char *s, size_t n)
{
    if (n == 0 || n > 65535)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' || s[i] == '+' || s[i] == '#')
            return false;
    return tb_utf8_valid((const uint8_t *)s, n);
}

static inline bool oro_value_valid(router_slice_t v)
{
    for (size_t i = 0; i < v.len; i++)
        if (v.p[i] == '+' || v.p[i] == '#' || v.p[i] == '\0')
            return false;
    return tb_utf8_valid((const uint8_t *)v.p, v.len);
}

static inline bool oro_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Expands an accepted template. Returns the length (the bytes in *out,
 * malloc'd), ROUTER_OUT_ETOOLONG past cap, ROUTER_OUT_EVALUE for a missing
 * or invalid value or an empty result. */
static inline int oro_expand(const char *tmpl, const router_out_ctx_t *c, size_t cap, char **out)
{
    size_t room = 16, n = 0;
    char *b = malloc(room);
    *out = NULL;
    const char *s = tmpl;
    while (*s) {
        router_slice_t v;
        size_t adv;
        if (oro_starts(s, "${topic}")) {
            v = c->topic;
            adv = 8;
        } else if (oro_starts(s, "${upstream}")) {
            v = c->upstream;
            adv = 11;
        } else if (oro_starts(s, "${#}")) {
            if (!c->m || c->m->rule < 0 || !c->m->has_rest) {
                free(b);
                return ROUTER_OUT_EVALUE;
            }
            v = c->m->rest;
            adv = 4;
        } else if (oro_starts(s, "${attr.")) {
            const char *name = s + 7;
            const char *end = strchr(name, '}');
            if (!c->attr || !c->attr(c->arg, name, (size_t)(end - name), &v) || !oro_value_valid(v)) {
                free(b);
                return ROUTER_OUT_EVALUE;
            }
            adv = (size_t)(end - s) + 1;
        } else if (oro_starts(s, "${")) {
            char *end;
            long k = strtol(s + 2, &end, 10);
            if (!c->m || c->m->rule < 0 || k < 1 || (size_t)k > c->m->n_caps) {
                free(b);
                return ROUTER_OUT_EVALUE;
            }
            v = c->m->caps[k - 1];
            adv = (size_t)(end - s) + 1;
        } else {
            v = (router_slice_t){ s, 1 };
            adv = 1;
        }
        while (n + v.len + 1 > room) {
            room *= 2;
            b = realloc(b, room);
        }
        if (v.len)
            memcpy(b + n, v.p, v.len);
        n += v.len;
        s += adv;
    }
    if (n > cap || n > 65535) {
        free(b);
        return ROUTER_OUT_ETOOLONG;
    }
    if (n == 0) {
        free(b);
        return ROUTER_OUT_EVALUE;
    }
    *out = b;
    return (int)n;
}

/* Splits s[0..n) at '/' into slices (malloc'd array). */
static inline router_slice_t *oro_split(const char *s, size_t n, size_t *count)
{
    size_t k = 1;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '/';
    router_slice_t *v = malloc(k * sizeof *v);
    size_t start = 0, j = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '/') {
            v[j++] = (router_slice_t){ s + start, i - start };
            start = i + 1;
        }
    *count = k;
    return v;
}

static inline bool oro_filter_match(const char *filter, const char *topic, size_t len)
{
    if ((filter[0] == '+' || filter[0] == '#') && len > 0 && topic[0] == '$')
        return false;
    size_t nf, nt;
    router_slice_t *f = oro_split(filter, strlen(filter), &nf);
    router_slice_t *t = oro_split(topic, len, &nt);
    bool ok = true;
    size_t i = 0;
    for (; i < nf; i++) {
        if (f[i].len == 1 && f[i].p[0] == '#')
            break; /* matches what is left, even nothing */
        if (i >= nt) {
            ok = false;
            break;
        }
        if (f[i].len == 1 && f[i].p[0] == '+')
            continue;
        if (f[i].len != t[i].len || memcmp(f[i].p, t[i].p, f[i].len) != 0) {
            ok = false;
            break;
        }
    }
    if (ok && i == nf && nt != nf)
        ok = false; /* no '#', and the topic has more levels */
    free(f);
    free(t);
    return ok;
}

#endif
