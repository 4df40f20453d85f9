/*
 * router_int.h: what the router's files share and nothing else sees (its
 * unit tests aside).
 *
 * The router is split by concern: router.c (compile order, accessors,
 * attributes), router_rule.c (pattern and reference checks),
 * router_template.c (danube_topic templates and the upstream topic list),
 * router_trie.c (the index and router_match). A compiled rule is plain data
 * here so the trie can read it on the hot path without calls.
 * Prefix: router__ (cross-file internals).
 */
#ifndef ROUTER_ROUTER_INT_H
#define ROUTER_ROUTER_INT_H

#include "gateway/router/router.h"

#include <stdarg.h>

/* A capture reference: 1..N is the N-th '+', ROUTER__REF_REST is "$#". */
#define ROUTER__REF_REST 0

/* One accepted value, in a view sorted by (len, bytes) for binary search. */
typedef struct router__val {
    const char *s;
    uint32_t len;
    uint32_t pos; /* index in the declared list */
} router__val_t;

/* One capture_values entry. */
typedef struct router__cvals {
    int ref;
    size_t n;
    char **values;     /* declared order, owned */
    router__val_t *sorted; /* the same strings, sorted */
    uint32_t stride;   /* weight in the rule's combination index; 0 if unused by the template */
} router__cvals_t;

typedef struct router__attr {
    char *name; /* owned */
    int ref;
} router__attr_t;

typedef struct router__rule {
    char *pattern;      /* owned copy; trie literals point into it */
    uint32_t n_levels;
    uint32_t n_plus;
    bool ends_hash;
    router__attr_t *attrs;
    size_t n_attrs;
    router__cvals_t *cvals;
    size_t n_cvals;
    uint32_t n_combos;     /* value combinations the template spans; 1 without one */
    uint32_t *combo_topic; /* n_combos upstream topic ids */
    uint32_t *topic_ids;   /* distinct ids, first-appearance order */
    size_t n_topic_ids;
} router__rule_t;

struct router__node;

struct router {
    router__rule_t *rules;
    size_t n_rules;
    char **topics; /* upstream topics, owned */
    size_t n_topics;
    struct router__node *root;
};

/* Writes "rule <i>: <message>" into err (if err is non-NULL). */
void router__err(char *err, size_t errlen, size_t rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* router_rule.c: checks spec's pattern, attributes and capture_values and
 * fills rule (which the caller zeroed). Returns 0 or TB_ECONFIG; on failure
 * rule may hold allocations that router__rule_free releases. */
int router__rule_parse(const router_spec_t *spec, size_t idx, router__rule_t *rule,
                          char *err, size_t errlen);
void router__rule_free(router__rule_t *rule);
/* Parses "$N" / "$#" against a rule; returns the ref or -1 if it is not one
 * of that rule's captures (why is written to *why). */
int router__ref_parse(const char *s, const router__rule_t *rule, const char **why);

/* router_template.c: checks every rule's danube_topic, expands templates,
 * fills r->topics and each rule's combo_topic / topic_ids. */
int router__topics_build(router_t *r, const router_spec_t *specs,
                            char *err, size_t errlen);

/* router_trie.c (which also holds router_match) */
struct router__node *router__trie_build(const router__rule_t *rules, size_t n);
void router__trie_free(struct router__node *root);

#endif
