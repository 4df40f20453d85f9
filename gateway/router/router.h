/*
 * router.h: topic routing, from an MQTT topic to the first matching rule of
 * mqtt.topic_mappings, its wildcard captures and its upstream Danube topic
 * (the gateway/router/ folder's one public header). The loop thread owns
 * the router; it is immutable after compile, so several threads may match
 * against one router.
 *
 * Shape, and why:
 *  - Rules are compiled once at boot (router_compile) into a trie over
 *    topic levels, so matching costs about the topic's depth, not the
 *    number of rules; the first rule in config order still wins, exactly as
 *    a linear scan would (docs/ROUTING.md has the argument and figures).
 *  - router_match allocates nothing: captures are slices of the topic.
 *  - Upstream topics are registered with the cluster when the router is
 *    compiled (at boot, or at a reload: one immutable router per generation), so a
 *    danube_topic template (${1}, ${#}) is accepted only over captures with
 *    a declared finite value list (capture_values); the router exposes the
 *    full, deduplicated list of upstream topics the rules can produce.
 *  - The router knows nothing of schemas or policies: the rule index a
 *    match returns is the caller's key for the rest of the rule.
 *
 * Prefix: router_ (functions and types), ROUTER_ (limits), router__ (internal to
 * router/, router_int.h). Links base only (checked at build time).
 */
#ifndef ROUTER_ROUTER_H
#define ROUTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits a pattern must respect (compile reports the rule that does not). */
#define ROUTER_MAX_LEVELS   256  /* levels in one mqtt_pattern */
#define ROUTER_MAX_CAPTURES 32   /* '+' levels in one mqtt_pattern */
#define ROUTER_MAX_EXPANSION 4096 /* upstream topics one template may produce */

/* extract_attributes entry: attribute `name` takes the capture `ref`. */
typedef struct router_attr_spec {
    const char *name; /* attribute name, non-empty, unique in the rule */
    const char *ref;  /* "$1".."$N" (the N-th '+') or "$#" (the '#' remainder) */
} router_attr_spec_t;

/* capture_values entry: the capture `ref` may only take these values. */
typedef struct router_values_spec {
    const char *ref;            /* "$N" or "$#" */
    const char *const *values;  /* n_values >= 1 distinct strings */
    size_t n_values;
} router_values_spec_t;

/* One rule of mqtt.topic_mappings, as the config layer read it. The router
 * copies what it keeps; the spec may be freed after compile. */
typedef struct router_spec {
    const char *mqtt_pattern;  /* MQTT topic filter: levels, '+', a final '#' */
    const char *danube_topic;  /* "/namespace/topic", may use ${N} and ${#} */
    const router_attr_spec_t *attrs;
    size_t n_attrs;
    const router_values_spec_t *capture_values;
    size_t n_capture_values;
} router_spec_t;

/* A slice of the matched topic (not NUL-terminated). */
typedef struct router_slice {
    const char *p;
    size_t len;
} router_slice_t;

/* The result of one match. Slices point into the topic passed to
 * router_match and live as long as that buffer. */
typedef struct router_match {
    int rule;           /* index of the winning rule, -1 when none matched */
    uint32_t topic_id;  /* upstream topic (index into router_upstream_topics) */
    uint32_t n_caps;    /* number of '+' in the rule's pattern */
    bool has_rest;      /* the pattern ends in '#' */
    router_slice_t rest;                        /* $#: levels '#' matched ("" for zero) */
    router_slice_t caps[ROUTER_MAX_CAPTURES]; /* $1 is caps[0] */
} router_match_t;

typedef struct router router_t;

/*
 * Compiles n rules, in config order, into *out. Checks every pattern,
 * attribute reference, capture_values entry and danube_topic (template or
 * not; every topic it can produce must be a valid Danube topic).
 * Returns 0, or TB_ECONFIG with *out = NULL and a message in err (which
 * names the rule index and what is wrong). err may be NULL. n may be 0.
 * The caller owns *out and frees it with router_free.
 */
int router_compile(const router_spec_t *specs, size_t n, router_t **out /* OUT */,
                      char *err, size_t errlen);

void router_free(router_t *r);

/*
 * Matches an MQTT topic name (len bytes, no NUL needed) against the rules.
 * Returns the index of the first rule, in config order, whose pattern
 * matches and whose capture_values accept the captures, or -1 (m->rule
 * too). Allocates nothing. An empty topic matches nothing. The topic is not
 * validated here (the codec rejects wildcards and bad UTF-8 before).
 */
int router_match(const router_t *r, const char *topic, size_t len,
                    router_match_t *m /* OUT */);

size_t router_rule_count(const router_t *r);

/* Every upstream topic the rules can produce, deduplicated, in order of
 * first appearance (rule order; within a template, the cross product of
 * the value lists with the last capture varying fastest). Valid until
 * router_free. */
const char *const *router_upstream_topics(const router_t *r, size_t *n /* OUT */);

/* The distinct upstream topic ids rule `rule` can produce, in order of
 * first appearance; NULL with *n = 0 for an index out of range. */
const uint32_t *router_rule_topics(const router_t *r, size_t rule, size_t *n /* OUT */);

/*
 * Iterates the matched rule's extract_attributes in declared order:
 *   size_t it = 0; const char *name; router_slice_t v;
 *   while (router_attr_next(r, &m, &it, &name, &v)) ...
 * Returns false when there are no more (or m matched nothing).
 */
bool router_attr_next(const router_t *r, const router_match_t *m, size_t *it,
                         const char **name /* OUT */, router_slice_t *value /* OUT */);

/* ---- output topics (issue 17: an output's remote_topic, a Sparkplug device) ----
 *
 * A template is literal text with placeholders:
 *   ${topic}      the MQTT topic the message was received on
 *   ${upstream}   the upstream (Danube) topic its rule maps it to
 *   ${1}..${32}   the N-th '+' capture of the matched rule
 *   ${#}          what the rule's final '#' matched ("" for zero levels)
 *   ${attr.NAME}  the message attribute NAME (an extract_attributes name)
 * A '$' not followed by '{' is literal. Compile refuses what could expand
 * to an invalid MQTT topic name (wildcards, NUL, bad UTF-8, empty), naming
 * the column: literals holding '+', '#' or NUL; an unknown or unterminated
 * placeholder; a template whose every piece can be empty; and, checked
 * against the rules it will be expanded for, a ${N} past a rule's '+'
 * count, a ${#} for a rule without '#', an attribute a rule does not
 * extract (a capture is one level of a valid topic name, so its value is
 * safe; an arbitrary attribute would not be).
 */
#define ROUTER_OUT_MAX 65535u /* the longest MQTT topic name, in bytes */

/* Flags of router_out_compile. */
#define ROUTER_OUT_LEVEL 1u /* one topic level (a Sparkplug device id): only literals
                               without '/' and ${N}; no ${topic}, ${upstream}, ${#}, ${attr.*}.
                               Captures alone are accepted ("${1}"): an empty one is
                               ROUTER_OUT_EVALUE for that message */

/* Returns of router_out_expand below 0. */
#define ROUTER_OUT_ETOOLONG (-1) /* longer than cap */
#define ROUTER_OUT_EVALUE   (-2) /* a value makes it invalid: an attribute absent or not valid
                                    in a topic name, a capture the match lacks, an empty result */

typedef struct router_out router_out_t; /* immutable after compile: any thread */

typedef struct router_out_ctx {
    router_slice_t topic;      /* ${topic}: the message's MQTT topic */
    router_slice_t upstream;   /* ${upstream} */
    const router_match_t *m;   /* ${N}, ${#}: a match of that topic (NULL: none) */
    /* ${attr.NAME}: finds attribute name[0..name_len) of the message; NULL: none */
    bool (*attr)(void *arg, const char *name, size_t name_len, router_slice_t *val /* OUT */);
    void *arg;
} router_out_ctx_t;

/*
 * Compiles tmpl into *out. r NULL: the syntax alone (the config layer's
 * check). r given: also checked against the rules `rules[0..nrules)` (NULL:
 * every rule of r) the template will be expanded for. Returns 0, or
 * TB_ECONFIG with *out = NULL and err saying what and at which column
 * ("column 7: ..."), and for a rule, which one.
 */
int router_out_compile(const router_t *r, const char *tmpl, const uint32_t *rules, size_t nrules,
                          unsigned flags, router_out_t **out /* OUT */, char *err, size_t errlen);

/* Expands t for one message into buf (at most cap bytes, no NUL written).
 * Returns the length, ROUTER_OUT_ETOOLONG or ROUTER_OUT_EVALUE. Allocates
 * nothing; one pass. */
int router_out_expand(const router_out_t *t, const router_out_ctx_t *c, char *buf, size_t cap);

/* Whether t uses ${N} or ${#} (the caller must then match the topic). */
bool router_out_needs_match(const router_out_t *t);

void router_out_free(router_out_t *t);

/* Checks an MQTT topic filter ('+' and a final '#' as whole levels, not
 * empty, no NUL, UTF-8). Returns 0 or TB_ECONFIG with err. */
int router_filter_check(const char *filter, char *err, size_t errlen);

/* MQTT filter matching of a topic name (len bytes): '+' one level, '#'
 * the rest including the parent level ("a/#" matches "a"); a filter
 * starting with a wildcard does not match a topic starting with '$'. The
 * filter is assumed checked. */
bool router_filter_match(const char *filter, const char *topic, size_t len);

#endif
