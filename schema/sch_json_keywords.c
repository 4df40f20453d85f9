/*
 * sch_json_keywords.c: fills one compiled node from its schema object.
 *
 * Each keyword's value is checked and pre-parsed here, once: numbers into
 * sch__json_num_t, counts into uint64, "type" into a bit mask, patterns into
 * compiled regexes, property names into a sorted table, subschemas into node
 * pointers (made by sch__json_node_for and filled later from the work list),
 * $ref into the node it resolves to. A malformed keyword value is a compile
 * error naming the place ("#/properties/a: minLength must be a non-negative
 * integer"), never silently ignored: a schema that does not mean what it
 * says should not reach the devices' traffic.
 *
 * Which keywords apply depends on the resource's dialect: draft 7 ($ref
 * replaces every sibling; items/additionalItems; dependencies) or 2020-12
 * ($ref beside siblings; prefixItems/items; dependentRequired and
 * dependentSchemas; $dynamicRef; unevaluated*), and for 2020-12 on the
 * vocabularies its metaschema declares. Unknown keywords are ignored, as
 * the spec says.
 */
#include "schema/sch_json.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* The node being filled, with what its keywords need to know. */
typedef struct {
    sch__json_cstate_t *cs;
    sch__json_node_t *n;
    json_t *j;
    const char *base;
    sch_json_draft_t draft;
    unsigned vocab;
} fill_t;

#define FAIL(f, ...) (sch__json_cfail((f)->cs, TB_ESCHEMA, __VA_ARGS__), (f)->cs->rc)

static const char *where(const fill_t *f)
{
    return sch__json_loc_short(f->n->loc);
}

static bool get_uint(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= 0 && d < 18446744073709551616.0 && d == (double)(uint64_t)d) {
            *out = (uint64_t)d;
            return true;
        }
    }
    return false;
}

static int kw_uint(fill_t *f, const char *kw, uint32_t bit, uint64_t *out)
{
    json_t *v = json_object_get(f->j, kw);
    if (!v) return 0;
    if (!get_uint(v, out)) return FAIL(f, "%s: %s must be a non-negative integer", where(f), kw);
    f->n->has |= bit;
    return 0;
}

static int kw_num(fill_t *f, const char *kw, uint32_t bit, sch__json_num_t *out)
{
    json_t *v = json_object_get(f->j, kw);
    if (!v) return 0;
    if (!json_is_number(v)) return FAIL(f, "%s: %s must be a number", where(f), kw);
    *out = sch__json_num(v);
    f->n->has |= bit;
    return 0;
}

static const sch__json_node_t *child(fill_t *f, json_t *v, const char *kw)
{
    char what[256];
    snprintf(what, sizeof what, "%s: %s", where(f), kw);
    return sch__json_node_for(f->cs, v, what);
}

static int kw_schema(fill_t *f, const char *kw, const sch__json_node_t **out)
{
    json_t *v = json_object_get(f->j, kw);
    if (!v) return 0;
    *out = child(f, v, kw);
    return f->cs->rc;
}

static int schema_list(fill_t *f, json_t *a, const char *kw, sch__json_nodes_t *out)
{
    if (!json_is_array(a) || json_array_size(a) == 0)
        return FAIL(f, "%s: %s must be a non-empty array of schemas", where(f), kw);
    out->n = json_array_size(a);
    out->v = sch__json_arena_alloc(&f->cs->s->arena, out->n * sizeof *out->v);
    for (size_t i = 0; i < out->n && !f->cs->rc; i++) out->v[i] = child(f, json_array_get(a, i), kw);
    return f->cs->rc;
}

static int kw_schema_list(fill_t *f, const char *kw, sch__json_nodes_t *out)
{
    json_t *a = json_object_get(f->j, kw);
    return a ? schema_list(f, a, kw, out) : 0;
}

static int string_list(fill_t *f, json_t *a, const char *kw, sch__json_strs_t *out)
{
    if (!json_is_array(a)) return FAIL(f, "%s: %s must be an array of strings", where(f), kw);
    out->n = json_array_size(a);
    out->s = sch__json_arena_alloc(&f->cs->s->arena, out->n * sizeof *out->s);
    out->len = sch__json_arena_alloc(&f->cs->s->arena, out->n * sizeof *out->len);
    for (size_t i = 0; i < out->n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_string(v)) return FAIL(f, "%s: %s must be an array of strings", where(f), kw);
        out->s[i] = json_string_value(v);
        out->len[i] = json_string_length(v);
    }
    return 0;
}

static int regex(fill_t *f, json_t *v, const char *kw, const sch__json_regex_t **out)
{
    if (!json_is_string(v)) return FAIL(f, "%s: %s must be a string (a regex)", where(f), kw);
    char rerr[160];
    sch__json_regex_t *re;
    int rc = sch__json_regex_compile(json_string_value(v), json_string_length(v), &re, rerr, sizeof rerr);
    if (rc) {
        sch__json_cfail(f->cs, rc, "%s: %s \"%.*s\": %s", where(f), kw,
                        sch__json_utf8_cut(json_string_value(v), 60), json_string_value(v), rerr);
        return rc;
    }
    sch__json_t *s = f->cs->s;
    if (s->nregexes == s->capregexes) {
        s->capregexes = s->capregexes ? s->capregexes * 2 : 8;
        s->regexes = tb_realloc(s->regexes, s->capregexes * sizeof *s->regexes);
    }
    s->regexes[s->nregexes++] = re;
    *out = re;
    return 0;
}

/* ---- validation vocabulary ------------------------------------------------ */

static int fill_type(fill_t *f)
{
    static const struct { const char *name; uint8_t bit; } names[] = {
        { "null", SCH_JSON_T_NULL },     { "boolean", SCH_JSON_T_BOOLEAN }, { "object", SCH_JSON_T_OBJECT },
        { "array", SCH_JSON_T_ARRAY },   { "number", SCH_JSON_T_NUMBER },   { "string", SCH_JSON_T_STRING },
        { "integer", SCH_JSON_T_INTEGER },
    };
    json_t *t = json_object_get(f->j, "type");
    if (!t) return 0;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    if (!json_is_array(t) && !json_is_string(t)) n = 0;
    if (n == 0) return FAIL(f, "%s: type must be a type name or a non-empty array of them", where(f));
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(t) ? json_array_get(t, i) : t;
        size_t k = 0;
        for (; k < TB_ARRAY_LEN(names) && json_is_string(v); k++)
            if (strcmp(json_string_value(v), names[k].name) == 0) break;
        if (!json_is_string(v) || k == TB_ARRAY_LEN(names))
            return FAIL(f, "%s: type: unknown type name", where(f));
        f->n->types |= names[k].bit;
    }
    return 0;
}

static int fill_validation(fill_t *f)
{
    sch__json_node_t *n = f->n;
    if (fill_type(f)) return f->cs->rc;
    json_t *v;
    if ((v = json_object_get(f->j, "enum"))) {
        if (!json_is_array(v)) return FAIL(f, "%s: enum must be an array", where(f));
        n->enm = v;
    }
    if ((v = json_object_get(f->j, "const"))) {
        n->konst = v;
        n->has |= SCH_JSON_HAS_CONST;
    }
    if (kw_num(f, "multipleOf", SCH_JSON_HAS_MULTIPLE_OF, &n->multiple_of)) return f->cs->rc;
    if ((n->has & SCH_JSON_HAS_MULTIPLE_OF) &&
        sch__json_num_cmp(n->multiple_of, (sch__json_num_t){ .is_int = true }) <= 0)
        return FAIL(f, "%s: multipleOf must be greater than 0", where(f));
    if (kw_num(f, "maximum", SCH_JSON_HAS_MAXIMUM, &n->maximum) ||
        kw_num(f, "exclusiveMaximum", SCH_JSON_HAS_EXCL_MAX, &n->excl_max) ||
        kw_num(f, "minimum", SCH_JSON_HAS_MINIMUM, &n->minimum) ||
        kw_num(f, "exclusiveMinimum", SCH_JSON_HAS_EXCL_MIN, &n->excl_min) ||
        kw_uint(f, "maxLength", SCH_JSON_HAS_MAX_LENGTH, &n->max_length) ||
        kw_uint(f, "minLength", SCH_JSON_HAS_MIN_LENGTH, &n->min_length) ||
        kw_uint(f, "maxItems", SCH_JSON_HAS_MAX_ITEMS, &n->max_items) ||
        kw_uint(f, "minItems", SCH_JSON_HAS_MIN_ITEMS, &n->min_items) ||
        kw_uint(f, "maxProperties", SCH_JSON_HAS_MAX_PROPS, &n->max_props) ||
        kw_uint(f, "minProperties", SCH_JSON_HAS_MIN_PROPS, &n->min_props))
        return f->cs->rc;
    if (f->draft == SCH_JSON_DRAFT2020 &&
        (kw_uint(f, "maxContains", SCH_JSON_HAS_MAX_CONTAINS, &n->max_contains) ||
         kw_uint(f, "minContains", SCH_JSON_HAS_MIN_CONTAINS, &n->min_contains)))
        return f->cs->rc;
    if ((v = json_object_get(f->j, "uniqueItems"))) {
        if (!json_is_boolean(v)) return FAIL(f, "%s: uniqueItems must be a boolean", where(f));
        if (json_is_true(v)) n->has |= SCH_JSON_HAS_UNIQUE;
    }
    if ((v = json_object_get(f->j, "pattern"))) {
        if (regex(f, v, "pattern", &n->pattern)) return f->cs->rc;
        n->pattern_src = json_string_value(v);
    }
    if ((v = json_object_get(f->j, "required")) && string_list(f, v, "required", &n->required)) return f->cs->rc;
    if (f->draft == SCH_JSON_DRAFT2020 && (v = json_object_get(f->j, "dependentRequired"))) {
        if (!json_is_object(v)) return FAIL(f, "%s: dependentRequired must be an object", where(f));
        size_t k = n->ndeps;
        n->deps = sch__json_arena_alloc(&f->cs->s->arena, (k + json_object_size(v)) * sizeof *n->deps);
        for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it), k++) {
            n->deps[k].name = json_object_iter_key(it);
            n->deps[k].len = json_object_iter_key_len(it);
            if (string_list(f, json_object_iter_value(it), "dependentRequired", &n->deps[k].req)) return f->cs->rc;
        }
        n->ndeps = k;
    }
    return 0;
}

/* ---- applicator vocabulary ------------------------------------------------ */

static int prop_cmp(const void *a, const void *b)
{
    const sch__json_prop_t *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->name, y->name, x->len);
}

static int fill_object_applicators(fill_t *f)
{
    sch__json_node_t *n = f->n;
    sch__json_arena_t *ar = &f->cs->s->arena;
    json_t *v;
    if ((v = json_object_get(f->j, "properties"))) {
        if (!json_is_object(v)) return FAIL(f, "%s: properties must be an object", where(f));
        n->props = sch__json_arena_alloc(ar, json_object_size(v) * sizeof *n->props);
        for (void *it = json_object_iter(v); it && !f->cs->rc; it = json_object_iter_next(v, it)) {
            sch__json_prop_t *p = &n->props[n->nprops++];
            p->name = json_object_iter_key(it);
            p->len = json_object_iter_key_len(it);
            p->node = child(f, json_object_iter_value(it), "properties");
        }
        qsort(n->props, n->nprops, sizeof *n->props, prop_cmp);
    }
    if ((v = json_object_get(f->j, "patternProperties"))) {
        if (!json_is_object(v)) return FAIL(f, "%s: patternProperties must be an object", where(f));
        n->patprops = sch__json_arena_alloc(ar, json_object_size(v) * sizeof *n->patprops);
        for (void *it = json_object_iter(v); it && !f->cs->rc; it = json_object_iter_next(v, it)) {
            sch__json_patprop_t *p = &n->patprops[n->npatprops++];
            json_t *key = json_stringn(json_object_iter_key(it), json_object_iter_key_len(it));
            int rc = regex(f, key, "patternProperties", &p->re);
            json_decref(key);
            if (rc) return rc;
            p->src = json_object_iter_key(it);
            p->node = child(f, json_object_iter_value(it), "patternProperties");
        }
    }
    if (kw_schema(f, "additionalProperties", &n->addl_props) || kw_schema(f, "propertyNames", &n->prop_names))
        return f->cs->rc;
    /* 2020-12 also reads draft 7's "dependencies", which schemas written
     * for both drafts still carry */
    static const char *const depkws[] = { "dependencies", "dependentSchemas" };
    for (size_t d = 0; d < (f->draft == SCH_JSON_DRAFT7 ? 1u : 2u) && !f->cs->rc; d++) {
        const char *depkw = depkws[d];
        if (!(v = json_object_get(f->j, depkw))) continue;
        if (!json_is_object(v)) return FAIL(f, "%s: %s must be an object", where(f), depkw);
        size_t k = n->ndeps;
        sch__json_dep_t *deps = sch__json_arena_alloc(ar, (k + json_object_size(v)) * sizeof *deps);
        if (k) memcpy(deps, n->deps, k * sizeof *deps);
        n->deps = deps;
        for (void *it = json_object_iter(v); it && !f->cs->rc; it = json_object_iter_next(v, it), k++) {
            json_t *dv = json_object_iter_value(it);
            deps[k].name = json_object_iter_key(it);
            deps[k].len = json_object_iter_key_len(it);
            if (d == 0 && json_is_array(dv)) {
                if (string_list(f, dv, depkw, &deps[k].req)) return f->cs->rc;
            } else {
                deps[k].node = child(f, dv, depkw);
            }
        }
        n->ndeps = k;
    }
    return f->cs->rc;
}

static int fill_applicators(fill_t *f)
{
    sch__json_node_t *n = f->n;
    if (kw_schema_list(f, "allOf", &n->all_of) || kw_schema_list(f, "anyOf", &n->any_of) ||
        kw_schema_list(f, "oneOf", &n->one_of) || kw_schema(f, "not", &n->not_))
        return f->cs->rc;
    if (json_object_get(f->j, "if")) {
        if (kw_schema(f, "if", &n->if_) || kw_schema(f, "then", &n->then_) || kw_schema(f, "else", &n->else_))
            return f->cs->rc;
    }
    json_t *items = json_object_get(f->j, "items");
    if (f->draft == SCH_JSON_DRAFT7) {
        if (json_is_array(items)) {
            if (schema_list(f, items, "items", &n->prefix) || kw_schema(f, "additionalItems", &n->items))
                return f->cs->rc;
        } else if (items && !(n->items = child(f, items, "items"))) {
            return f->cs->rc;
        }
    } else {
        if (kw_schema_list(f, "prefixItems", &n->prefix)) return f->cs->rc;
        if (items && json_is_array(items))
            return FAIL(f, "%s: items must be a schema in 2020-12 (an array of schemas is prefixItems)", where(f));
        if (items && !(n->items = child(f, items, "items"))) return f->cs->rc;
    }
    if (kw_schema(f, "contains", &n->contains)) return f->cs->rc;
    return fill_object_applicators(f);
}

/* ---- core: $ref and $dynamicRef ------------------------------------------- */

static int fill_ref(fill_t *f, json_t *v, bool dynamic)
{
    const char *kw = dynamic ? "$dynamicRef" : "$ref";
    if (!json_is_string(v)) return FAIL(f, "%s: %s must be a string", where(f), kw);
    sch__json_target_t t;
    if (sch__json_resolve(f->cs, f->base, json_string_value(v), &t)) return f->cs->rc;
    const sch__json_node_t *target = child(f, t.json, kw);
    if (!target) return f->cs->rc;
    if (!dynamic) {
        f->n->ref = target;
        return 0;
    }
    f->n->dynref = target;
    /* Only a plain-name fragment that lands on a $dynamicAnchor of that name
     * searches the dynamic scope; anything else behaves like $ref. */
    if (t.anchor && t.dynamic) {
        f->n->dyn_anchor = t.anchor;
        f->n->dyn_anchor_len = t.anchor_len;
    }
    return 0;
}

int sch__json_fill(sch__json_cstate_t *cs, sch__json_node_t *n, json_t *j)
{
    const sch__json_loc_t *l = sch__json_loc_get(cs, j);
    /* copy out: resolving a $ref may load and scan documents, which moves
     * the records */
    fill_t f = { .cs = cs, .n = n, .j = j, .base = l->base, .draft = l->res->draft, .vocab = l->res->vocab };
    json_t *v;
    if ((v = json_object_get(j, "$ref"))) {
        if (fill_ref(&f, v, false)) return cs->rc;
        if (f.draft == SCH_JSON_DRAFT7) return 0; /* draft 7: $ref replaces its siblings */
    }
    if (f.draft == SCH_JSON_DRAFT2020 && (v = json_object_get(j, "$dynamicRef")) && fill_ref(&f, v, true))
        return cs->rc;
    if ((f.vocab & SCH_JSON_VOC_VALIDATION) && fill_validation(&f)) return cs->rc;
    if ((f.vocab & SCH_JSON_VOC_APPLICATOR) && fill_applicators(&f)) return cs->rc;
    if (f.draft == SCH_JSON_DRAFT2020 && (f.vocab & SCH_JSON_VOC_UNEVALUATED) &&
        (kw_schema(&f, "unevaluatedItems", &n->uneval_items) ||
         kw_schema(&f, "unevaluatedProperties", &n->uneval_props)))
        return cs->rc;
    if ((v = json_object_get(j, "format")) && json_is_string(v)) {
        n->format = sch__json_format_lookup(json_string_value(v));
        n->format_assert = (cs->opts && cs->opts->format_assert) || (f.vocab & SCH_JSON_VOC_FORMAT_ASSERT);
    }
    return 0;
}
