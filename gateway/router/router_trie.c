/*
 * router_trie.c: the index over topic levels, and the match.
 *
 * DESIGN. Each rule's pattern is a path from the root: a literal level
 * goes to a literal child (an open-addressing hash table keyed by the
 * level's bytes), '+' to the node's one plus child, and a final '#' ends at
 * the node it follows (listed in `hterm`, since "a/#" also matches "a").
 * Each node lists the rules whose pattern ends there (`term`, ascending,
 * because rules are inserted in config order) and knows the smallest rule
 * index anywhere at or below it (`min_rule`).
 *
 * The match walks the topic's levels depth first, trying the literal child,
 * the plus child and the node's '#' rules in order of their smallest rule
 * index, and skips any branch whose smallest index is not below the best
 * rule found so far. Every rule sits at exactly one place in the trie and
 * every place that matches the topic is either visited or pruned because
 * it cannot beat the best, so the result is the lowest matching index:
 * what a linear scan in config order returns (tests/unit/gateway/
 * test_router_property.c checks this against a linear matcher).
 *
 * Cost: a trie node corresponds to one pattern prefix of fixed depth, so it
 * is visited at most once per match; in the typical config (literal first
 * levels, a few '+', a '#' here and there) a match touches a handful of
 * nodes whatever the number of rules. The recursion depth is bounded by the
 * deepest pattern (ROUTER_MAX_LEVELS), not by the topic, so a topic of
 * 65,535 levels is as safe as any.
 *
 * capture_values are checked where a rule ends (the captures are known
 * there): a rule whose values do not accept the captures is passed over and
 * the walk continues, exactly as the linear scan would fall through to a
 * later rule.
 */
#include "gateway/router/router_int.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct router__lit {
    uint32_t hash;
    uint32_t len;
    const char *text; /* points into the rule's pattern */
    struct router__node *child;
} lit_t;

typedef struct router__node {
    uint32_t min_rule;           /* smallest rule index at or below, NONE if none */
    uint32_t n_lit, lit_mask;    /* table of lit_mask + 1 slots, or lit == NULL */
    lit_t *lit;
    struct router__node *plus;
    uint32_t *term, n_term, cap_term;     /* rules ending here */
    uint32_t *hterm, n_hterm, cap_hterm;  /* rules ending here with "/#" (or "#" at the root) */
} node_t;

/* FNV-1a: levels are short, and this is one multiply per byte. */
static inline uint32_t level_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* ---- build -------------------------------------------------------------- */

static void push(uint32_t **list, uint32_t *n, uint32_t *cap, uint32_t v)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 2;
        *list = tb_realloc(*list, *cap * sizeof **list);
    }
    (*list)[(*n)++] = v;
}

static void lit_place(lit_t *tab, uint32_t mask, lit_t e)
{
    uint32_t j = e.hash & mask;
    while (tab[j].child)
        j = (j + 1) & mask;
    tab[j] = e;
}

static node_t *lit_child(node_t *n, const char *s, size_t len)
{
    uint32_t h = level_hash(s, len);
    if (n->lit) {
        for (uint32_t j = h & n->lit_mask; n->lit[j].child; j = (j + 1) & n->lit_mask) {
            lit_t *e = &n->lit[j];
            if (e->hash == h && e->len == len && memcmp(e->text, s, len) == 0)
                return e->child;
        }
    }
    /* Keep the table at most half full so probes stay short. */
    if (!n->lit || (n->n_lit + 1) * 2 > n->lit_mask + 1) {
        uint32_t cap = n->lit ? (n->lit_mask + 1) * 2 : 4;
        lit_t *tab = tb_calloc(cap, sizeof *tab);
        for (uint32_t j = 0; n->lit && j <= n->lit_mask; j++)
            if (n->lit[j].child)
                lit_place(tab, cap - 1, n->lit[j]);
        free(n->lit);
        n->lit = tab;
        n->lit_mask = cap - 1;
    }
    node_t *child = tb_calloc(1, sizeof *child);
    lit_place(n->lit, n->lit_mask, (lit_t){ .hash = h, .len = (uint32_t)len, .text = s, .child = child });
    n->n_lit++;
    return child;
}

static void insert(node_t *root, const char *pattern, uint32_t idx)
{
    node_t *n = root;
    const char *s = pattern;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        if (len == 1 && s[0] == '#') { /* compile checked it is the last level */
            push(&n->hterm, &n->n_hterm, &n->cap_hterm, idx);
            return;
        }
        if (len == 1 && s[0] == '+') {
            if (!n->plus)
                n->plus = tb_calloc(1, sizeof *n->plus);
            n = n->plus;
        } else {
            n = lit_child(n, s, len);
        }
        if (!slash) {
            push(&n->term, &n->n_term, &n->cap_term, idx);
            return;
        }
        s = slash + 1;
    }
}

/* Sets min_rule on n and below (post-order; each node once). */
static uint32_t finish(node_t *n)
{
    uint32_t m = NONE, sub;
    if (n->n_term)
        m = n->term[0];
    if (n->n_hterm && n->hterm[0] < m)
        m = n->hterm[0];
    if (n->plus && (sub = finish(n->plus)) < m)
        m = sub;
    for (uint32_t j = 0; n->lit && j <= n->lit_mask; j++)
        if (n->lit[j].child && (sub = finish(n->lit[j].child)) < m)
            m = sub;
    n->min_rule = m;
    return m;
}

node_t *router__trie_build(const router__rule_t *rules, size_t n)
{
    node_t *root = tb_calloc(1, sizeof *root);
    for (size_t i = 0; i < n; i++)
        insert(root, rules[i].pattern, (uint32_t)i);
    finish(root);
    return root;
}

void router__trie_free(node_t *n)
{
    if (!n)
        return;
    for (uint32_t j = 0; n->lit && j <= n->lit_mask; j++)
        router__trie_free(n->lit[j].child);
    router__trie_free(n->plus);
    free(n->lit);
    free(n->term);
    free(n->hterm);
    free(n);
}

/* ---- match -------------------------------------------------------------- */

typedef struct mctx {
    const router_t *r;
    const char *t;
    size_t len;
    uint32_t best; /* lowest accepted rule so far, NONE at first */
    router_match_t *m;
    router_slice_t path[ROUTER_MAX_CAPTURES]; /* '+' levels on the current path */
} mctx_t;

static const node_t *lit_find(const node_t *n, const char *s, size_t len)
{
    uint32_t h = level_hash(s, len);
    for (uint32_t j = h & n->lit_mask; n->lit[j].child; j = (j + 1) & n->lit_mask) {
        const lit_t *e = &n->lit[j];
        if (e->hash == h && e->len == len && memcmp(e->text, s, len) == 0)
            return e->child;
    }
    return NULL;
}

/* Declared position of v in cv's list, or -1. */
static int value_pos(const router__cvals_t *cv, router_slice_t v)
{
    size_t lo = 0, hi = cv->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const router__val_t *e = &cv->sorted[mid];
        int c = e->len != v.len ? (e->len < v.len ? -1 : 1) : memcmp(e->s, v.p, v.len);
        if (c == 0)
            return (int)e->pos;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Does the rule's capture_values accept these captures? Computes the
 * combination index of its template on the way. */
static bool accept(const router__rule_t *rule, const router_slice_t *caps, router_slice_t rest,
                   uint32_t *combo)
{
    uint32_t c = 0;
    for (size_t i = 0; i < rule->n_cvals; i++) {
        const router__cvals_t *cv = &rule->cvals[i];
        int pos = value_pos(cv, cv->ref == ROUTER__REF_REST ? rest : caps[cv->ref - 1]);
        if (pos < 0)
            return false;
        c += (uint32_t)pos * cv->stride;
    }
    *combo = c;
    return true;
}

/* Tries the rules that end at one place, lowest first; the first accepted
 * one below best becomes the match. rest_pos >= 0 for '#' rules. */
static void try_rules(mctx_t *c, const uint32_t *list, uint32_t n, uint32_t nplus, bool hash,
                      size_t rest_pos)
{
    router_slice_t rest = { c->t + rest_pos, hash ? c->len - rest_pos : 0 };
    for (uint32_t k = 0; k < n && list[k] < c->best; k++) {
        const router__rule_t *rule = &c->r->rules[list[k]];
        uint32_t combo;
        if (!accept(rule, c->path, rest, &combo))
            continue;
        router_match_t *m = c->m;
        c->best = list[k];
        m->rule = (int)list[k];
        m->topic_id = rule->combo_topic[combo];
        m->n_caps = nplus;
        memcpy(m->caps, c->path, nplus * sizeof *m->caps);
        m->has_rest = hash;
        m->rest = hash ? rest : (router_slice_t){ NULL, 0 };
        return;
    }
}

/* Visits node n with the topic's next level starting at pos (pos > len:
 * no levels left); nplus '+' captures are on the path. */
static void visit(mctx_t *c, const node_t *n, size_t pos, uint32_t nplus, bool root)
{
    if (pos > c->len) {
        if (n->n_term && n->term[0] < c->best)
            try_rules(c, n->term, n->n_term, nplus, false, c->len);
        if (n->n_hterm && n->hterm[0] < c->best) /* "a/#" matches "a": '#' takes zero levels */
            try_rules(c, n->hterm, n->n_hterm, nplus, true, c->len);
        return;
    }
    /* [MQTT-4.7.2-1]: a topic starting with '$' is not matched by a leading wildcard. */
    bool wild = !(root && c->t[0] == '$');
    const char *lvl = c->t + pos;
    const char *slash = memchr(lvl, '/', c->len - pos);
    size_t llen = slash ? (size_t)(slash - lvl) : c->len - pos;
    size_t next = pos + llen + 1;
    const node_t *lit = n->lit ? lit_find(n, lvl, llen) : NULL;
    const node_t *plus = wild ? n->plus : NULL;
    uint32_t kl = lit ? lit->min_rule : NONE;
    uint32_t kp = plus ? plus->min_rule : NONE;
    uint32_t kh = wild && n->n_hterm ? n->hterm[0] : NONE;
    /* The three branches hold disjoint rules, so their keys differ unless NONE. */
    for (;;) {
        uint32_t k = TB_MIN(kl, TB_MIN(kp, kh));
        if (k >= c->best)
            return;
        if (k == kl) {
            kl = NONE;
            visit(c, lit, next, nplus, false);
        } else if (k == kp) {
            kp = NONE;
            c->path[nplus] = (router_slice_t){ lvl, llen };
            visit(c, plus, next, nplus + 1, false);
        } else {
            kh = NONE;
            try_rules(c, n->hterm, n->n_hterm, nplus, true, pos);
        }
    }
}

int router_match(const router_t *r, const char *topic, size_t len, router_match_t *m)
{
    m->rule = -1;
    m->topic_id = 0;
    m->n_caps = 0;
    m->has_rest = false;
    m->rest = (router_slice_t){ NULL, 0 };
    if (len == 0 || !r->root || r->root->min_rule == NONE)
        return -1;
    mctx_t c; /* path[] is written before it is read; no need to clear it */
    c.r = r;
    c.t = topic;
    c.len = len;
    c.best = NONE;
    c.m = m;
    visit(&c, r->root, 0, 0, true);
    return m->rule;
}
