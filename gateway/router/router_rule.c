/*
 * router_rule.c: checks one mapping rule's mqtt_pattern, extract_attributes
 * and capture_values, and turns them into a compiled router__rule_t.
 *
 * Every check happens here, at boot, so that the match path can trust the
 * rule blindly. A rule that could never do what it says (a '+' glued to
 * text, a '#' that is not last, an attribute naming a capture that does not
 * exist, a value a '+' level can never hold) is refused with the rule index
 * and the reason, rather than silently never matching in production.
 */
#include "gateway/router/router_int.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q "%.80s" /* quoted config text, cut so one bad line stays one line */

/* Checks the pattern's shape and fills n_levels, n_plus, ends_hash. */
static int pattern_parse(const char *p, size_t idx, router__rule_t *rule, char *err, size_t errlen)
{
    if (!p || !*p) {
        router__err(err, errlen, idx, "mqtt_pattern is empty");
        return TB_ECONFIG;
    }
    uint32_t level = 0;
    const char *s = p;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        level++;
        if (memchr(s, '#', len)) {
            if (len != 1) {
                router__err(err, errlen, idx,
                               "mqtt_pattern \"" Q "\": '#' must be a whole level (level %u)",
                               p, level);
                return TB_ECONFIG;
            }
            if (slash) {
                router__err(err, errlen, idx,
                               "mqtt_pattern \"" Q "\": '#' must be the last level (it is level %u)",
                               p, level);
                return TB_ECONFIG;
            }
            rule->ends_hash = true;
        }
        if (memchr(s, '+', len)) {
            if (len != 1) {
                router__err(err, errlen, idx,
                               "mqtt_pattern \"" Q "\": '+' must be a whole level (level %u)",
                               p, level);
                return TB_ECONFIG;
            }
            rule->n_plus++;
        }
        if (level > ROUTER_MAX_LEVELS) {
            router__err(err, errlen, idx, "mqtt_pattern \"" Q "\": more than %d levels", p,
                           ROUTER_MAX_LEVELS);
            return TB_ECONFIG;
        }
        if (rule->n_plus > ROUTER_MAX_CAPTURES) {
            router__err(err, errlen, idx, "mqtt_pattern \"" Q "\": more than %d '+' levels",
                           p, ROUTER_MAX_CAPTURES);
            return TB_ECONFIG;
        }
        if (!slash)
            break;
        s = slash + 1;
    }
    rule->n_levels = level;
    rule->pattern = tb_strdup(p);
    return 0;
}

int router__ref_parse(const char *s, const router__rule_t *rule, const char **why)
{
    if (!s || s[0] != '$') {
        *why = "is not $N or $#";
        return -1;
    }
    if (strcmp(s, "$#") == 0) {
        if (!rule->ends_hash) {
            *why = "refers to $# but the pattern does not end in '#'";
            return -1;
        }
        return ROUTER__REF_REST;
    }
    const char *d = s + 1;
    if (*d < '1' || *d > '9' || strspn(d, "0123456789") != strlen(d) || strlen(d) > 3) {
        *why = "is not $N or $#";
        return -1;
    }
    int n = atoi(d);
    if ((uint32_t)n > rule->n_plus) {
        *why = "refers to a '+' the pattern does not have";
        return -1;
    }
    return n;
}

static int attrs_parse(const router_spec_t *spec, size_t idx, router__rule_t *rule, char *err,
                       size_t errlen)
{
    if (spec->n_attrs == 0)
        return 0;
    rule->attrs = tb_calloc(spec->n_attrs, sizeof *rule->attrs);
    for (size_t i = 0; i < spec->n_attrs; i++) {
        const router_attr_spec_t *a = &spec->attrs[i];
        if (!a->name || !*a->name) {
            router__err(err, errlen, idx, "extract_attributes entry %zu has an empty name", i);
            return TB_ECONFIG;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(rule->attrs[j].name, a->name) == 0) {
                router__err(err, errlen, idx,
                               "extract_attributes names \"" Q "\" twice", a->name);
                return TB_ECONFIG;
            }
        }
        const char *why = NULL;
        int ref = router__ref_parse(a->ref, rule, &why);
        if (ref < 0) {
            router__err(err, errlen, idx,
                           "extract_attributes \"" Q "\": \"" Q "\" %s (pattern \"" Q "\")",
                           a->name, a->ref ? a->ref : "", why, rule->pattern);
            return TB_ECONFIG;
        }
        rule->attrs[i].name = tb_strdup(a->name);
        rule->attrs[i].ref = ref;
        rule->n_attrs = i + 1;
    }
    return 0;
}

static int val_cmp(const void *a, const void *b)
{
    const router__val_t *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(x->s, y->s, x->len);
}

/* Fills one capture_values entry; the ref is already checked. */
static int values_parse(const router_values_spec_t *v, size_t idx, router__cvals_t *cv,
                        char *err, size_t errlen)
{
    if (v->n_values == 0 || !v->values) {
        router__err(err, errlen, idx, "capture_values \"%s\" lists no values", v->ref);
        return TB_ECONFIG;
    }
    if (v->n_values > ROUTER_MAX_EXPANSION) {
        router__err(err, errlen, idx, "capture_values \"%s\" lists more than %d values",
                       v->ref, ROUTER_MAX_EXPANSION);
        return TB_ECONFIG;
    }
    /* A '+' captures one level of a topic name: never a '/', never a wildcard. */
    const char *never = cv->ref == ROUTER__REF_REST ? "+#" : "/+#";
    cv->values = tb_calloc(v->n_values, sizeof *cv->values);
    cv->sorted = tb_calloc(v->n_values, sizeof *cv->sorted);
    for (size_t i = 0; i < v->n_values; i++) {
        const char *s = v->values[i];
        if (!s) {
            router__err(err, errlen, idx, "capture_values \"%s\" value %zu is null", v->ref, i);
            return TB_ECONFIG;
        }
        if (strpbrk(s, never)) {
            router__err(err, errlen, idx,
                           "capture_values \"%s\": \"" Q "\" can never be captured (it holds one of \"%s\")",
                           v->ref, s, never);
            return TB_ECONFIG;
        }
        cv->values[i] = tb_strdup(s);
        cv->n = i + 1;
        cv->sorted[i] = (router__val_t){ .s = cv->values[i], .len = (uint32_t)strlen(s), .pos = (uint32_t)i };
    }
    qsort(cv->sorted, cv->n, sizeof *cv->sorted, val_cmp);
    for (size_t i = 1; i < cv->n; i++) {
        if (val_cmp(&cv->sorted[i - 1], &cv->sorted[i]) == 0) {
            router__err(err, errlen, idx, "capture_values \"%s\" lists \"" Q "\" twice",
                           v->ref, cv->sorted[i].s);
            return TB_ECONFIG;
        }
    }
    return 0;
}

static int cvals_parse(const router_spec_t *spec, size_t idx, router__rule_t *rule, char *err,
                       size_t errlen)
{
    if (spec->n_capture_values == 0)
        return 0;
    rule->cvals = tb_calloc(spec->n_capture_values, sizeof *rule->cvals);
    for (size_t i = 0; i < spec->n_capture_values; i++) {
        const router_values_spec_t *v = &spec->capture_values[i];
        const char *why = NULL;
        int ref = router__ref_parse(v->ref, rule, &why);
        if (ref < 0) {
            router__err(err, errlen, idx, "capture_values key \"" Q "\" %s (pattern \"" Q "\")",
                           v->ref ? v->ref : "", why, rule->pattern);
            return TB_ECONFIG;
        }
        for (size_t j = 0; j < i; j++) {
            if (rule->cvals[j].ref == ref) {
                router__err(err, errlen, idx, "capture_values lists \"%s\" twice", v->ref);
                return TB_ECONFIG;
            }
        }
        rule->n_cvals = i + 1;
        rule->cvals[i].ref = ref;
        int rc = values_parse(v, idx, &rule->cvals[i], err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int router__rule_parse(const router_spec_t *spec, size_t idx, router__rule_t *rule,
                          char *err, size_t errlen)
{
    int rc = pattern_parse(spec->mqtt_pattern, idx, rule, err, errlen);
    if (!rc)
        rc = attrs_parse(spec, idx, rule, err, errlen);
    if (!rc)
        rc = cvals_parse(spec, idx, rule, err, errlen);
    return rc;
}

void router__rule_free(router__rule_t *rule)
{
    for (size_t i = 0; i < rule->n_attrs; i++)
        free(rule->attrs[i].name);
    free(rule->attrs);
    for (size_t i = 0; i < rule->n_cvals; i++) {
        for (size_t j = 0; j < rule->cvals[i].n; j++)
            free(rule->cvals[i].values[j]);
        free(rule->cvals[i].values);
        free(rule->cvals[i].sorted);
    }
    free(rule->cvals);
    free(rule->combo_topic);
    free(rule->topic_ids);
    free(rule->pattern);
}
