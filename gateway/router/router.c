/*
 * router.c: the router's public face: compile in order (rules, then
 * upstream topics, then the trie), free, the accessors the registration
 * code reads, and the attribute iterator the message path uses.
 *
 * Compile either returns a complete router or nothing: the first error
 * stops it, its text names the rule, and everything built so far is freed.
 */
#include "gateway/router/router_int.h"

#include "base/base.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

void router__err(char *err, size_t errlen, size_t rule, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "rule %zu: ", rule);
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

void router_free(router_t *r)
{
    if (!r)
        return;
    router__trie_free(r->root);
    for (size_t i = 0; i < r->n_rules; i++)
        router__rule_free(&r->rules[i]);
    free(r->rules);
    for (size_t i = 0; i < r->n_topics; i++)
        free(r->topics[i]);
    free(r->topics);
    free(r);
}

int router_compile(const router_spec_t *specs, size_t n, router_t **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (n >= INT_MAX) { /* the match returns the rule index as an int */
        if (err && errlen)
            snprintf(err, errlen, "%zu rules: too many", n);
        return TB_ECONFIG;
    }
    router_t *r = tb_calloc(1, sizeof *r);
    r->rules = tb_calloc(n ? n : 1, sizeof *r->rules);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        r->n_rules = i + 1;
        rc = router__rule_parse(&specs[i], i, &r->rules[i], err, errlen);
    }
    if (!rc)
        rc = router__topics_build(r, specs, err, errlen);
    if (rc) {
        router_free(r);
        return rc;
    }
    r->root = router__trie_build(r->rules, r->n_rules);
    *out = r;
    return 0;
}

size_t router_rule_count(const router_t *r)
{
    return r->n_rules;
}

const char *const *router_upstream_topics(const router_t *r, size_t *n)
{
    *n = r->n_topics;
    return (const char *const *)r->topics;
}

const uint32_t *router_rule_topics(const router_t *r, size_t rule, size_t *n)
{
    if (rule >= r->n_rules) {
        *n = 0;
        return NULL;
    }
    *n = r->rules[rule].n_topic_ids;
    return r->rules[rule].topic_ids;
}

bool router_attr_next(const router_t *r, const router_match_t *m, size_t *it,
                         const char **name, router_slice_t *value)
{
    if (m->rule < 0 || (size_t)m->rule >= r->n_rules)
        return false;
    const router__rule_t *rule = &r->rules[m->rule];
    if (*it >= rule->n_attrs)
        return false;
    const router__attr_t *a = &rule->attrs[(*it)++];
    *name = a->name;
    *value = a->ref == ROUTER__REF_REST ? m->rest : m->caps[a->ref - 1];
    return true;
}
