/*
 * sch_fields.c: the leaf paths a schema declares, with their types
 * (schema.h, sch_field_types), so that a Sparkplug birth can announce the
 * metrics a bound schema promises before any value arrives
 * (docs/design/OUTPUTS.md 5.2). Reads only the compiled schema (no outside
 * bytes): Avro's compiled nodes, or the JSON Schema's own document.
 */
#include "schema/sch_avro.h"
#include "schema/sch_json.h"

#include "base/base.h"
#include "schema/sch_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct fields {
    sch_field_cb cb;
    void *arg;
    char path[SCH_FLAT_MAX_PATH + 1];
    const sch__av_node_t *nodes;
    uint32_t stack[SCH_FLAT_MAX_DEPTH]; /* Avro records being walked: a record in itself stops */
    json_t *doc;                        /* JSON Schema: the root document */
} fields_t;

static long push(fields_t *f, size_t plen, const char *s, size_t n)
{
    size_t need = plen + (plen ? 1 : 0) + n;
    if (need > SCH_FLAT_MAX_PATH || n == 0 || memchr(s, '/', n))
        return -1; /* not a path the flatteners could give: not listed */
    if (plen)
        f->path[plen++] = '/';
    memcpy(f->path + plen, s, n);
    f->path[need] = '\0';
    return (long)need;
}

/* ---- Avro ---------------------------------------------------------------- */

static bool av_leaf(const sch__av_node_t *n, sch_field_type_t *t)
{
    switch (n->type) {
    case SCH__AV_BOOLEAN: *t = SCH_FIELD_BOOL; return true;
    case SCH__AV_INT: *t = SCH_FIELD_INT32; return true;
    case SCH__AV_LONG: *t = SCH_FIELD_INT64; return true;
    case SCH__AV_FLOAT: *t = SCH_FIELD_FLOAT; return true;
    case SCH__AV_DOUBLE: *t = SCH_FIELD_DOUBLE; return true;
    case SCH__AV_STRING:
    case SCH__AV_ENUM: *t = SCH_FIELD_STRING; return true;
    case SCH__AV_BYTES:
    case SCH__AV_FIXED: *t = SCH_FIELD_BYTES; return true;
    default: return false;
    }
}

static int av_record(fields_t *f, uint32_t ri, size_t plen, int depth, bool nullable);

static int av_node(fields_t *f, uint32_t ni, size_t plen, int depth, bool nullable)
{
    const sch__av_node_t *n = &f->nodes[ni];
    if (n->type == SCH__AV_UNION) {
        /* ["null", T] or [T, "null"]: T, nullable; any other union has no one type */
        if (n->n != 2)
            return 0;
        uint32_t a = n->kids[0], b = n->kids[1];
        if (f->nodes[a].type == SCH__AV_NULL)
            return av_node(f, b, plen, depth, true);
        if (f->nodes[b].type == SCH__AV_NULL)
            return av_node(f, a, plen, depth, true);
        return 0;
    }
    sch_field_type_t t;
    if (av_leaf(n, &t))
        return f->cb(f->arg, f->path, plen, t, nullable);
    if (n->type == SCH__AV_RECORD)
        return av_record(f, ni, plen, depth, nullable);
    return 0; /* null alone, arrays, maps: no fixed path or type */
}

static int av_record(fields_t *f, uint32_t ri, size_t plen, int depth, bool nullable)
{
    if (depth >= SCH_FLAT_MAX_DEPTH)
        return 0;
    for (int i = 0; i < depth; i++)
        if (f->stack[i] == ri)
            return 0; /* recursive: its paths depend on the data */
    f->stack[depth] = ri;
    const sch__av_node_t *r = &f->nodes[ri];
    for (uint32_t i = 0; i < r->n; i++) {
        long m = push(f, plen, r->names[i], strlen(r->names[i]));
        if (m < 0)
            continue;
        int rc = av_node(f, r->kids[i], (size_t)m, depth + 1, nullable);
        f->path[plen] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- JSON Schema --------------------------------------------------------- */

/* Follows local references ("#" or "#/json/pointer") a bounded number of times. */
static const json_t *deref(fields_t *f, const json_t *s)
{
    for (int hops = 0; hops < SCH_FLAT_MAX_DEPTH && json_is_object(s); hops++) {
        const char *ref = json_string_value(json_object_get(s, "$ref"));
        if (!ref || ref[0] != '#')
            return s;
        char *ptr = sch__json_pct_decode(ref + 1, strlen(ref + 1), &(size_t){ 0 });
        if (!ptr)
            return NULL;
        const json_t *t = sch__json_pointer_get(f->doc, ptr, strlen(ptr));
        free(ptr);
        s = t;
    }
    return json_is_object(s) ? s : NULL;
}

/* The bits of "type" (a string or an array of strings), 0 when absent. */
static unsigned js_types(const json_t *s)
{
    static const struct { const char *n; unsigned bit; } names[] = {
        { "null", SCH_JSON_T_NULL },       { "boolean", SCH_JSON_T_BOOLEAN }, { "object", SCH_JSON_T_OBJECT },
        { "array", SCH_JSON_T_ARRAY },     { "number", SCH_JSON_T_NUMBER },   { "string", SCH_JSON_T_STRING },
        { "integer", SCH_JSON_T_INTEGER },
    };
    const json_t *t = json_object_get(s, "type");
    unsigned bits = 0;
    size_t count = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < count; i++) {
        const char *name = json_string_value(json_is_array(t) ? json_array_get(t, i) : t);
        for (size_t k = 0; name && k < sizeof names / sizeof names[0]; k++)
            if (strcmp(name, names[k].n) == 0)
                bits |= names[k].bit;
    }
    return bits;
}

static int js_node(fields_t *f, const json_t *s, size_t plen, int depth)
{
    s = deref(f, s);
    if (!s || depth >= SCH_FLAT_MAX_DEPTH)
        return 0;
    unsigned bits = js_types(s);
    bool nullable = bits & SCH_JSON_T_NULL;
    bits &= ~(unsigned)SCH_JSON_T_NULL;
    const json_t *props = json_object_get(s, "properties");
    if (json_is_object(props) && (bits == 0 || bits == SCH_JSON_T_OBJECT)) {
        const char *key;
        json_t *sub;
        json_object_foreach((json_t *)props, key, sub) {
            long m = push(f, plen, key, strlen(key));
            if (m < 0)
                continue;
            int rc = js_node(f, sub, (size_t)m, depth + 1);
            f->path[plen] = '\0';
            if (rc)
                return rc;
        }
        return 0;
    }
    if (plen == 0)
        return 0;
    sch_field_type_t t;
    if (bits == SCH_JSON_T_INTEGER)
        t = SCH_FIELD_INT64;
    else if (bits == SCH_JSON_T_NUMBER || bits == (SCH_JSON_T_NUMBER | SCH_JSON_T_INTEGER))
        t = SCH_FIELD_DOUBLE;
    else if (bits == SCH_JSON_T_BOOLEAN)
        t = SCH_FIELD_BOOL;
    else if (bits == SCH_JSON_T_STRING)
        t = SCH_FIELD_STRING;
    else
        return 0; /* no type, or several: inferred at first sight */
    return f->cb(f->arg, f->path, plen, t, nullable);
}

int sch_field_types(const sch_validator_t *v, sch_field_cb cb, void *arg, char *err, size_t errlen)
{
    sch__errf(err, errlen, "%s", "");
    const sch__avro_t *av = sch__validator_avro(v);
    const sch__json_t *js = sch__validator_json(v);
    if (!av && !js) {
        sch__errf(err, errlen, "a %s schema declares no fields", v ? sch_kind_name(sch_validator_kind(v)) : "missing");
        return TB_EUNSUPPORTED;
    }
    fields_t *f = tb_calloc(1, sizeof *f);
    f->cb = cb;
    f->arg = arg;
    int rc;
    if (av) {
        f->nodes = av->nodes;
        rc = av->nodes[av->root].type == SCH__AV_RECORD ? av_record(f, av->root, 0, 0, false) : 0;
    } else {
        f->doc = js->docs[0];
        rc = js_node(f, f->doc, 0, 0);
    }
    free(f);
    return rc;
}
