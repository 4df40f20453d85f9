/*
 * router_internal.h: what the router's files share and nothing else sees.
 *
 * The router is split by concern: router.c (compile order, accessors,
 * attributes), router_rule.c (pattern and reference checks),
 * router_template.c (danube_topic templates and the upstream topic list),
 * router_trie.c (the index and gw_router_match). A compiled rule is plain data
 * here so the trie can read it on the hot path without calls.
 * Prefix: gw__router_ (cross-file internals).
 */
#ifndef GW_ROUTER_INTERNAL_H
#define GW_ROUTER_INTERNAL_H

#include "gateway/router/router.h"

#include <stdarg.h>

/* A capture reference: 1..N is the N-th '+', GW__REF_REST is "$#". */
#define GW__REF_REST 0

/* One accepted value, in a view sorted by (len, bytes) for binary search. */
typedef struct gw__val {
    const char *s;
    uint32_t len;
    uint32_t pos; /* index in the declared list */
} gw__val_t;

/* One capture_values entry. */
typedef struct gw__cvals {
    int ref;
    size_t n;
    char **values;     /* declared order, owned */
    gw__val_t *sorted; /* the same strings, sorted */
    uint32_t stride;   /* weight in the rule's combination index; 0 if unused by the template */
} gw__cvals_t;

typedef struct gw__attr {
    char *name; /* owned */
    int ref;
} gw__attr_t;

typedef struct gw__rule {
    char *pattern;      /* owned copy; trie literals point into it */
    uint32_t n_levels;
    uint32_t n_plus;
    bool ends_hash;
    gw__attr_t *attrs;
    size_t n_attrs;
    gw__cvals_t *cvals;
    size_t n_cvals;
    uint32_t n_combos;     /* value combinations the template spans; 1 without one */
    uint32_t *combo_topic; /* n_combos upstream topic ids */
    uint32_t *topic_ids;   /* distinct ids, first-appearance order */
    size_t n_topic_ids;
} gw__rule_t;

struct gw__node;

struct gw_router {
    gw__rule_t *rules;
    size_t n_rules;
    char **topics; /* upstream topics, owned */
    size_t n_topics;
    struct gw__node *root;
};

/* Writes "rule <i>: <message>" into err (if err is non-NULL). */
void gw__router_err(char *err, size_t errlen, size_t rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* router_rule.c: checks spec's pattern, attributes and capture_values and
 * fills rule (which the caller zeroed). Returns 0 or TB_ECONFIG; on failure
 * rule may hold allocations that gw__router_rule_free releases. */
int gw__router_rule_parse(const gw_route_spec_t *spec, size_t idx, gw__rule_t *rule,
                          char *err, size_t errlen);
void gw__router_rule_free(gw__rule_t *rule);
/* Parses "$N" / "$#" against a rule; returns the ref or -1 if it is not one
 * of that rule's captures (why is written to *why). */
int gw__router_ref_parse(const char *s, const gw__rule_t *rule, const char **why);

/* router_template.c: checks every rule's danube_topic, expands templates,
 * fills r->topics and each rule's combo_topic / topic_ids. */
int gw__router_topics_build(gw_router_t *r, const gw_route_spec_t *specs,
                            char *err, size_t errlen);

/* router_trie.c (which also holds gw_router_match) */
struct gw__node *gw__router_trie_build(const gw__rule_t *rules, size_t n);
void gw__router_trie_free(struct gw__node *root);

#endif
