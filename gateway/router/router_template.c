/*
 * router_template.c: danube_topic templates and the list of upstream topics.
 *
 * Upstream topics are registered with the cluster at boot (RegisterEdge
 * declares them all), so the router must know every topic a rule can send
 * to before the first message arrives. A plain danube_topic is one topic. A
 * template ("/plant/${1}-telemetry") may only use captures that carry a
 * finite capture_values list, and it stands for the cross product of those
 * lists, expanded here once. Each expansion is checked as a Danube topic
 * (/namespace/topic, letters, digits, '_' and '-'), so a bad value is a boot
 * error naming the rule and the value, never a failed send later.
 *
 * At match time a rule's combination index (sum of value position times
 * stride, last capture fastest) picks the concrete topic id from
 * rule->combo_topic: no string is built on the message path.
 */
#include "gateway/router/router_int.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q "%.80s"

/* A template piece: literal text, or a capture reference. */
typedef struct part {
    const char *s;
    size_t len;
    int ref; /* -1 for literal text */
} part_t;

/* The deduplicating set of upstream topics being built. */
typedef struct topic_set {
    router_t *r;
    size_t cap_topics;
    uint32_t *slots; /* id + 1, 0 when empty */
    size_t mask;
    size_t *last_rule; /* per topic id: 1 + last rule that listed it */
} topic_set_t;

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static bool seg_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* "/namespace/topic": exactly two non-empty segments of [A-Za-z0-9_-]. */
static bool danube_topic_valid(const char *s)
{
    if (*s++ != '/')
        return false;
    for (int seg = 0; seg < 2; seg++) {
        const char *start = s;
        while (seg_char(*s))
            s++;
        if (s == start)
            return false;
        if (seg == 0 && *s++ != '/')
            return false;
    }
    return *s == '\0';
}

static void set_grow(topic_set_t *ts)
{
    size_t cap = ts->mask ? (ts->mask + 1) * 2 : 64;
    uint32_t *slots = tb_calloc(cap, sizeof *slots);
    for (size_t i = 0; ts->mask && i <= ts->mask; i++) {
        if (!ts->slots[i])
            continue;
        const char *t = ts->r->topics[ts->slots[i] - 1];
        size_t j = hash_str(t, strlen(t)) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = ts->slots[i];
    }
    free(ts->slots);
    ts->slots = slots;
    ts->mask = cap - 1;
}

/* Returns the id of topic t (len n), adding a copy if it is new. */
static uint32_t set_insert(topic_set_t *ts, const char *t, size_t n)
{
    router_t *r = ts->r;
    if ((r->n_topics + 1) * 2 > ts->mask + 1)
        set_grow(ts);
    size_t j = hash_str(t, n) & ts->mask;
    for (; ts->slots[j]; j = (j + 1) & ts->mask) {
        const char *have = r->topics[ts->slots[j] - 1];
        if (strlen(have) == n && memcmp(have, t, n) == 0)
            return ts->slots[j] - 1;
    }
    if (r->n_topics == ts->cap_topics) {
        ts->cap_topics = ts->cap_topics ? ts->cap_topics * 2 : 16;
        r->topics = tb_realloc(r->topics, ts->cap_topics * sizeof *r->topics);
        ts->last_rule = tb_realloc(ts->last_rule, ts->cap_topics * sizeof *ts->last_rule);
    }
    uint32_t id = (uint32_t)r->n_topics++;
    r->topics[id] = tb_strndup(t, n);
    ts->last_rule[id] = 0;
    ts->slots[j] = id + 1;
    return id;
}

/* Splits a template into parts; refs are checked against the rule. Returns
 * the number of parts, or -1 with err filled. parts holds strlen(t)+1. */
static int template_parse(const char *t, size_t idx, const router__rule_t *rule, part_t *parts,
                          char *err, size_t errlen)
{
    int n = 0;
    const char *s = t;
    while (*s) {
        if (*s != '$') {
            size_t len = strcspn(s, "$");
            parts[n++] = (part_t){ .s = s, .len = len, .ref = -1 };
            s += len;
            continue;
        }
        const char *close = s[1] == '{' ? strchr(s + 2, '}') : NULL;
        if (!close || close - s > 8) {
            router__err(err, errlen, idx,
                           "danube_topic \"" Q "\": '$' must start ${N} or ${#}", t);
            return -1;
        }
        char ref_text[8];
        snprintf(ref_text, sizeof ref_text, "$%.*s", (int)(close - s - 2), s + 2);
        const char *why = NULL;
        int ref = router__ref_parse(ref_text, rule, &why);
        if (ref < 0) {
            router__err(err, errlen, idx, "danube_topic \"" Q "\": ${%s} %s (pattern \"" Q "\")",
                           t, ref_text + 1, why, rule->pattern);
            return -1;
        }
        parts[n++] = (part_t){ .s = s, .len = (size_t)(close + 1 - s), .ref = ref };
        s = close + 1;
    }
    return n;
}

static router__cvals_t *cvals_for(router__rule_t *rule, int ref)
{
    for (size_t i = 0; i < rule->n_cvals; i++)
        if (rule->cvals[i].ref == ref)
            return &rule->cvals[i];
    return NULL;
}

/* Builds the topic for combination c into buf (which holds room enough). */
static size_t expand(const part_t *parts, int n_parts, router__rule_t *rule, uint32_t c, char *buf)
{
    size_t len = 0;
    for (int i = 0; i < n_parts; i++) {
        const char *s = parts[i].s;
        size_t n = parts[i].len;
        if (parts[i].ref >= 0) {
            const router__cvals_t *cv = cvals_for(rule, parts[i].ref);
            const char *v = cv->values[(c / cv->stride) % cv->n];
            s = v;
            n = strlen(v);
        }
        memcpy(buf + len, s, n);
        len += n;
    }
    buf[len] = '\0';
    return len;
}

/* Names the values of combination c ("$1=\"a\" $#=\"b/c\"") for an error. */
static void describe(router__rule_t *rule, uint32_t c, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < rule->n_cvals && used < outlen; i++) {
        const router__cvals_t *cv = &rule->cvals[i];
        if (!cv->stride)
            continue;
        const char *v = cv->values[(c / cv->stride) % cv->n];
        int w = cv->ref == ROUTER__REF_REST
                    ? snprintf(out + used, outlen - used, "%s$#=\"%.40s\"", used ? " " : "", v)
                    : snprintf(out + used, outlen - used, "%s$%d=\"%.40s\"", used ? " " : "", cv->ref, v);
        used += w > 0 ? (size_t)w : 0;
    }
}

/* Assigns strides to the captures the template uses (first appearance
 * order, last fastest) and returns the number of combinations, or 0 with
 * err filled. */
static uint32_t assign_strides(const char *t, size_t idx, router__rule_t *rule, const part_t *parts,
                               int n_parts, char *err, size_t errlen)
{
    router__cvals_t *order[ROUTER_MAX_CAPTURES + 1];
    int k = 0;
    for (int i = 0; i < n_parts; i++) {
        if (parts[i].ref < 0)
            continue;
        router__cvals_t *cv = cvals_for(rule, parts[i].ref);
        if (!cv) {
            router__err(err, errlen, idx,
                           "danube_topic \"" Q "\" uses %.*s but capture_values has no list for it "
                           "(every upstream topic must be known at boot)",
                           t, (int)parts[i].len, parts[i].s);
            return 0;
        }
        if (cv->stride)
            continue;
        cv->stride = 1; /* mark as used; the real value comes below */
        order[k++] = cv;
    }
    uint64_t combos = 1;
    for (int i = k - 1; i >= 0; i--) {
        order[i]->stride = (uint32_t)combos;
        combos *= order[i]->n;
        if (combos > ROUTER_MAX_EXPANSION) {
            router__err(err, errlen, idx,
                           "danube_topic \"" Q "\" expands to more than %d upstream topics", t,
                           ROUTER_MAX_EXPANSION);
            return 0;
        }
    }
    return (uint32_t)combos;
}

static int rule_topics(topic_set_t *ts, const char *t, size_t idx, char *err, size_t errlen)
{
    router__rule_t *rule = &ts->r->rules[idx];
    if (!t || !*t) {
        router__err(err, errlen, idx, "danube_topic is empty");
        return TB_ECONFIG;
    }
    size_t tlen = strlen(t);
    int rc = TB_ECONFIG;
    part_t *parts = tb_malloc((tlen + 1) * sizeof *parts);
    char *buf = NULL;
    int n_parts = template_parse(t, idx, rule, parts, err, errlen);
    if (n_parts < 0)
        goto out;
    uint32_t combos = assign_strides(t, idx, rule, parts, n_parts, err, errlen);
    if (!combos)
        goto out;
    size_t maxval = 0;
    for (size_t i = 0; i < rule->n_cvals; i++)
        for (size_t j = 0; j < rule->cvals[i].n; j++)
            maxval = TB_MAX(maxval, rule->cvals[i].sorted[j].len);
    buf = tb_malloc(tlen + (size_t)n_parts * maxval + 1);
    rule->n_combos = combos;
    rule->combo_topic = tb_calloc(combos, sizeof *rule->combo_topic);
    rule->topic_ids = tb_calloc(combos, sizeof *rule->topic_ids);
    for (uint32_t c = 0; c < combos; c++) {
        size_t len = expand(parts, n_parts, rule, c, buf);
        if (!danube_topic_valid(buf)) {
            char vals[256];
            describe(rule, c, vals, sizeof vals);
            if (combos == 1 && !vals[0])
                router__err(err, errlen, idx,
                               "danube_topic \"" Q "\" is not a Danube topic "
                               "(/namespace/topic; letters, digits, '_' and '-')", t);
            else
                router__err(err, errlen, idx,
                               "danube_topic \"" Q "\" gives \"" Q "\" for %s, not a Danube topic "
                               "(/namespace/topic; letters, digits, '_' and '-')", t, buf, vals);
            goto out;
        }
        uint32_t id = set_insert(ts, buf, len);
        rule->combo_topic[c] = id;
        if (ts->last_rule[id] != idx + 1) {
            ts->last_rule[id] = idx + 1;
            rule->topic_ids[rule->n_topic_ids++] = id;
        }
    }
    rc = 0;
out:
    free(buf);
    free(parts);
    return rc;
}

int router__topics_build(router_t *r, const router_spec_t *specs, char *err, size_t errlen)
{
    topic_set_t ts = { .r = r };
    int rc = 0;
    for (size_t i = 0; i < r->n_rules && !rc; i++)
        rc = rule_topics(&ts, specs[i].danube_topic, i, err, errlen);
    free(ts.slots);
    free(ts.last_rule);
    return rc;
}
