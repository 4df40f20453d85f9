/*
 * sch_json_check.c: the assertions of one node, and its object and array
 * applicators (properties, patternProperties, additionalProperties,
 * propertyNames, dependent*, prefixItems/items, contains).
 *
 * Kept apart from sch_json_validate.c, which owns the walk, the dynamic
 * scope and annotations; everything here reads the pre-parsed keyword values
 * of a node and one instance value, and writes one message on failure:
 * "<path>: <value> <op> <keyword> <limit>" where a number is involved
 * ("/temperature: 130 > maximum 120"), otherwise the keyword's name and what
 * was wrong ("/name: required property missing").
 *
 * Semantics worth stating: lengths count Unicode code points (not bytes);
 * numbers compare exactly across integer and double (sch_json_equal.c);
 * enum/const/uniqueItems use JSON equality (1 == 1.0, key order ignored);
 * "format" is checked only when the node asserts formats (opts or the
 * format-assertion vocabulary), otherwise it is an annotation.
 */
#include "schema/sch_json.h"

#include <string.h>

#include "base/base.h"

static const char *type_name(const json_t *x)
{
    switch (json_typeof(x)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return sch__json_num_is_integral(sch__json_num(x)) ? "integer" : "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

static bool check_type(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    uint8_t have;
    switch (json_typeof(x)) {
    case JSON_OBJECT: have = SCH_JSON_T_OBJECT; break;
    case JSON_ARRAY: have = SCH_JSON_T_ARRAY; break;
    case JSON_STRING: have = SCH_JSON_T_STRING; break;
    case JSON_INTEGER: have = SCH_JSON_T_NUMBER | SCH_JSON_T_INTEGER; break;
    case JSON_REAL:
        have = SCH_JSON_T_NUMBER | (sch__json_num_is_integral(sch__json_num(x)) ? SCH_JSON_T_INTEGER : 0);
        break;
    case JSON_TRUE: case JSON_FALSE: have = SCH_JSON_T_BOOLEAN; break;
    default: have = SCH_JSON_T_NULL; break;
    }
    if (have & n->types) return true;
    if (c->quiet || c->err_set) return false;
    static const char *const names[] = { "null", "boolean", "object", "array", "number", "string", "integer" };
    char want[80] = "";
    size_t o = 0;
    for (unsigned b = 0; b < TB_ARRAY_LEN(names); b++) {
        if (!(n->types & (1u << b))) continue;
        int k = snprintf(want + o, sizeof want - o, "%s%s", o ? " or " : "", names[b]);
        if (k < 0 || (size_t)k >= sizeof want - o) break;
        o += (size_t)k;
    }
    sch__json_verr(c, "type is %s, expected %s", type_name(x), want);
    return false;
}

static bool check_number(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    sch__json_num_t v = sch__json_num(x);
    char a[40], b[40];
#define FMT() (sch__json_num_format(v, a, sizeof a), a)
#define LIM(l) (sch__json_num_format((l), b, sizeof b), b)
    if ((n->has & SCH_JSON_HAS_MULTIPLE_OF) && !sch__json_num_multiple_of(v, n->multiple_of)) {
        sch__json_verr(c, "%s is not a multipleOf %s", FMT(), LIM(n->multiple_of));
        return false;
    }
    if ((n->has & SCH_JSON_HAS_MAXIMUM) && sch__json_num_cmp(v, n->maximum) > 0) {
        sch__json_verr(c, "%s > maximum %s", FMT(), LIM(n->maximum));
        return false;
    }
    if ((n->has & SCH_JSON_HAS_EXCL_MAX) && sch__json_num_cmp(v, n->excl_max) >= 0) {
        sch__json_verr(c, "%s >= exclusiveMaximum %s", FMT(), LIM(n->excl_max));
        return false;
    }
    if ((n->has & SCH_JSON_HAS_MINIMUM) && sch__json_num_cmp(v, n->minimum) < 0) {
        sch__json_verr(c, "%s < minimum %s", FMT(), LIM(n->minimum));
        return false;
    }
    if ((n->has & SCH_JSON_HAS_EXCL_MIN) && sch__json_num_cmp(v, n->excl_min) <= 0) {
        sch__json_verr(c, "%s <= exclusiveMinimum %s", FMT(), LIM(n->excl_min));
        return false;
    }
#undef FMT
#undef LIM
    return true;
}

static size_t utf8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

static bool check_string(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    const char *s = json_string_value(x);
    size_t len = json_string_length(x);
    if (n->has & (SCH_JSON_HAS_MAX_LENGTH | SCH_JSON_HAS_MIN_LENGTH)) {
        size_t cps = utf8_count(s, len);
        if ((n->has & SCH_JSON_HAS_MAX_LENGTH) && cps > n->max_length) {
            sch__json_verr(c, "length %zu > maxLength %llu", cps, (unsigned long long)n->max_length);
            return false;
        }
        if ((n->has & SCH_JSON_HAS_MIN_LENGTH) && cps < n->min_length) {
            sch__json_verr(c, "length %zu < minLength %llu", cps, (unsigned long long)n->min_length);
            return false;
        }
    }
    if (n->pattern) {
        int r = sch__json_regex_search(n->pattern, s, len);
        if (r < 0) {
            sch__json_vabort(c, "pattern \"%.*s\" too costly to evaluate on this string",
                             sch__json_utf8_cut(n->pattern_src, 60), n->pattern_src);
            return false;
        }
        if (!r) {
            sch__json_verr(c, "does not match pattern \"%.*s\"", sch__json_utf8_cut(n->pattern_src, 60),
                           n->pattern_src);
            return false;
        }
    }
    if (n->format_assert && n->format > SCH_JSON_FMT_UNKNOWN && !sch__json_format_check(n->format, s, len)) {
        sch__json_verr(c, "not a valid %s (format)", sch__json_format_name(n->format));
        return false;
    }
    return true;
}

bool sch__json_eval_scalar(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    if (n->types && !check_type(c, n, x)) return false;
    bool too_deep = false;
    if ((n->has & SCH_JSON_HAS_CONST) && !sch__json_equal(x, n->konst, &too_deep)) {
        if (too_deep) sch__json_vabort(c, "value nested too deeply to compare with const");
        else sch__json_verr(c, "value differs from const");
        return false;
    }
    if (n->enm) {
        bool found = false;
        for (size_t i = 0; i < json_array_size(n->enm) && !found; i++)
            found = sch__json_equal(x, json_array_get(n->enm, i), &too_deep);
        if (too_deep) {
            sch__json_vabort(c, "value nested too deeply to compare with enum");
            return false;
        }
        if (!found) {
            sch__json_verr(c, "value is not one of the %zu in enum", json_array_size(n->enm));
            return false;
        }
    }
    if (json_is_number(x)) return check_number(c, n, x);
    if (json_is_string(x)) return check_string(c, n, x);
    return true;
}

/* ---- objects ---------------------------------------------------------------- */

static const sch__json_node_t *find_prop(const sch__json_node_t *n, const char *key, size_t len)
{
    size_t lo = 0, hi = n->nprops;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const sch__json_prop_t *p = &n->props[mid];
        int cmp = p->len != len ? (p->len < len ? -1 : 1) : memcmp(p->name, key, len);
        if (cmp == 0) return p->node;
        if (cmp < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static bool check_object_counts(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x,
                                 sch__json_ev_t *ev)
{
    size_t size = json_object_size(x);
    if ((n->has & SCH_JSON_HAS_MAX_PROPS) && size > n->max_props) {
        sch__json_verr(c, "%zu properties > maxProperties %llu", size, (unsigned long long)n->max_props);
        return false;
    }
    if ((n->has & SCH_JSON_HAS_MIN_PROPS) && size < n->min_props) {
        sch__json_verr(c, "%zu properties < minProperties %llu", size, (unsigned long long)n->min_props);
        return false;
    }
    for (size_t i = 0; i < n->required.n; i++) {
        if (!json_object_getn(x, n->required.s[i], n->required.len[i])) {
            sch__json_verr_key(c, n->required.s[i], n->required.len[i], "required property missing");
            return false;
        }
    }
    for (size_t d = 0; d < n->ndeps; d++) {
        const sch__json_dep_t *dep = &n->deps[d];
        if (!json_object_getn(x, dep->name, dep->len)) continue;
        if (dep->node && !sch__json_eval(c, dep->node, x, ev, "dependentSchemas")) return false;
        for (size_t i = 0; i < dep->req.n; i++) {
            if (!json_object_getn(x, dep->req.s[i], dep->req.len[i])) {
                sch__json_verr_key(c, dep->req.s[i], dep->req.len[i],
                                   "required property missing (dependentRequired by \"%.*s\")",
                                   sch__json_utf8_cut(dep->name, TB_MIN(dep->len, 60)), dep->name);
                return false;
            }
        }
    }
    return true;
}

bool sch__json_eval_object(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    if (!check_object_counts(c, n, x, ev)) return false;
    if (!n->nprops && !n->npatprops && !n->addl_props && !n->prop_names) return true;
    size_t i = 0;
    for (void *it = json_object_iter((json_t *)x); it; it = json_object_iter_next((json_t *)x, it), i++) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *val = json_object_iter_value(it);
        if (n->prop_names) {
            json_t *name = json_stringn_nocheck(key, klen);
            c->quiet++;
            bool ok = sch__json_eval(c, n->prop_names, name, NULL, "propertyNames");
            c->quiet--;
            json_decref(name);
            if (!ok) {
                if (!c->abort) sch__json_verr_key(c, key, klen, "property name not allowed by propertyNames");
                return false;
            }
        }
        bool matched = false;
        sch__json_push_key(c, key, klen);
        const sch__json_node_t *p = n->nprops ? find_prop(n, key, klen) : NULL;
        bool ok = !p || sch__json_eval(c, p, val, NULL, "properties");
        matched = p != NULL;
        for (size_t k = 0; ok && k < n->npatprops; k++) {
            int r = sch__json_regex_search(n->patprops[k].re, key, klen);
            if (r < 0) {
                sch__json_vabort(c, "patternProperties \"%.*s\" too costly to evaluate",
                                 sch__json_utf8_cut(n->patprops[k].src, 60), n->patprops[k].src);
                ok = false;
            } else if (r) {
                matched = true;
                ok = sch__json_eval(c, n->patprops[k].node, val, NULL, "patternProperties");
            }
        }
        if (ok && !matched && n->addl_props) {
            matched = true;
            ok = sch__json_eval(c, n->addl_props, val, NULL, "additionalProperties");
        }
        c->npath--;
        if (!ok) return false;
        if (matched && ev) ev->b[i] = 1;
    }
    return true;
}

/* ---- arrays ------------------------------------------------------------------ */

static bool check_array_counts(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    size_t size = json_array_size(x);
    if ((n->has & SCH_JSON_HAS_MAX_ITEMS) && size > n->max_items) {
        sch__json_verr(c, "%zu items > maxItems %llu", size, (unsigned long long)n->max_items);
        return false;
    }
    if ((n->has & SCH_JSON_HAS_MIN_ITEMS) && size < n->min_items) {
        sch__json_verr(c, "%zu items < minItems %llu", size, (unsigned long long)n->min_items);
        return false;
    }
    if (n->has & SCH_JSON_HAS_UNIQUE) {
        size_t a = 0, b = 0;
        bool too_deep = false;
        bool unique = sch__json_unique(x, &a, &b, &too_deep);
        if (too_deep) {
            sch__json_vabort(c, "items nested too deeply to compare for uniqueItems");
            return false;
        }
        if (!unique) {
            sch__json_verr(c, "items %zu and %zu are equal (uniqueItems)", a, b);
            return false;
        }
    }
    return true;
}

static bool check_contains(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    size_t size = json_array_size(x), count = 0;
    uint64_t min = (n->has & SCH_JSON_HAS_MIN_CONTAINS) ? n->min_contains : 1;
    bool need_all = ev || (n->has & SCH_JSON_HAS_MAX_CONTAINS);
    c->quiet++;
    for (size_t i = 0; i < size && !c->abort; i++) {
        if (!need_all && count >= min) break;
        if (sch__json_eval(c, n->contains, json_array_get(x, i), NULL, "contains")) {
            count++;
            if (ev) ev->b[i] = 1;
        }
    }
    c->quiet--;
    if (c->abort) return false;
    if (count < min) {
        if (min == 1) sch__json_verr(c, "no item matches contains");
        else sch__json_verr(c, "%zu items match contains < minContains %llu", count, (unsigned long long)min);
        return false;
    }
    if ((n->has & SCH_JSON_HAS_MAX_CONTAINS) && count > n->max_contains) {
        sch__json_verr(c, "%zu items match contains > maxContains %llu", count,
                       (unsigned long long)n->max_contains);
        return false;
    }
    return true;
}

bool sch__json_eval_array(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    if (!check_array_counts(c, n, x)) return false;
    size_t size = json_array_size(x);
    size_t i = 0;
    for (; i < size && i < n->prefix.n; i++) {
        sch__json_push_index(c, i);
        bool ok = sch__json_eval(c, n->prefix.v[i], json_array_get(x, i), NULL, "prefixItems");
        c->npath--;
        if (!ok) return false;
        if (ev) ev->b[i] = 1;
    }
    if (n->items) {
        for (; i < size; i++) {
            sch__json_push_index(c, i);
            bool ok = sch__json_eval(c, n->items, json_array_get(x, i), NULL, "items");
            c->npath--;
            if (!ok) return false;
            if (ev) ev->b[i] = 1;
        }
    }
    return !n->contains || check_contains(c, n, x, ev);
}
