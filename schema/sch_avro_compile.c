/*
 * sch_avro_compile.c: Avro schema JSON -> our flat node array.
 *
 * avro-c parses and checks the schema (names, required attributes, named
 * type references); we then walk its avro_schema_t graph once, depth first,
 * and copy what validation needs into sch__av_node_t entries, after which
 * the avro_schema_t is released (sch_avro.h says why we keep nothing of
 * avro-c at validation time).
 *
 * Named types (record, enum, fixed) become one node each, however often they
 * are referenced, so recursive schemas become cycles in the node array; the
 * memo maps avro-c's object to our index. The schema JSON is walked in step
 * with avro-c's graph (the two have the same shape) to pick up what avro-c
 * drops: field defaults. Each default is checked against its field's type
 * once the graph is complete, with the rules for default values (a union's
 * default is a value of its first branch).
 *
 * Then minsize, the fewest bytes a datum of each node can take, is solved as
 * a fixed point (records sum, unions take 1 + their cheapest branch, cycles
 * start at "infinite"). It lets the binary walker refuse an array block
 * claiming more items than the bytes left could hold, before looping, and it
 * exposes types with no finite datum (a record that always contains itself),
 * which we refuse to compile. Last, width marks types whose every datum is
 * the same number of arbitrary bytes (float, double, fixed, records of those)
 * so that the walker can step over an array block of them in one move.
 *
 * Nodes live in a growing array, so code here holds indices, never node
 * pointers, across a call that may add nodes.
 */
#include "schema/sch_avro.h"

#include <avro.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_internal.h"

/* avro-c's parse recursion is bounded by jansson's nesting limit (2048);
 * ours follows the same graph, this is a second fence. */
#define SCH__AV_MAX_SCHEMA_DEPTH 4096
#define SCH__AV_MINSIZE_CAP ((uint64_t)1 << 62)

typedef struct memo {
    avro_schema_t key;
    uint32_t idx;
} memo_t;

typedef struct pending_default {
    uint32_t rec;
    uint32_t field;
    const json_t *def;
} pending_default_t;

typedef struct builder {
    sch__avro_t *s;
    uint32_t cap;
    memo_t *memo;
    size_t nmemo, capmemo;
    pending_default_t *defs;
    size_t ndefs, capdefs;
    char *err;
    size_t errlen;
} builder_t;

static uint32_t node_new(builder_t *b, sch__av_type_t type)
{
    sch__avro_t *s = b->s;
    if (s->nnodes == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        s->nodes = tb_realloc(s->nodes, (size_t)b->cap * sizeof *s->nodes);
    }
    uint32_t idx = s->nnodes++;
    memset(&s->nodes[idx], 0, sizeof s->nodes[idx]);
    s->nodes[idx].type = type;
    s->nodes[idx].minsize = SCH__AV_INF;
    return idx;
}

static void memo_add(builder_t *b, avro_schema_t key, uint32_t idx)
{
    if (b->nmemo == b->capmemo) {
        b->capmemo = b->capmemo ? b->capmemo * 2 : 8;
        b->memo = tb_realloc(b->memo, b->capmemo * sizeof *b->memo);
    }
    b->memo[b->nmemo++] = (memo_t){ key, idx };
}

static bool memo_find(const builder_t *b, avro_schema_t key, uint32_t *idx)
{
    /* Linear: schemas have few named types, and this runs once per compile. */
    for (size_t i = 0; i < b->nmemo; i++) {
        if (b->memo[i].key == key) {
            *idx = b->memo[i].idx;
            return true;
        }
    }
    return false;
}

static void pending_add(builder_t *b, uint32_t rec, uint32_t field, const json_t *def)
{
    if (b->ndefs == b->capdefs) {
        b->capdefs = b->capdefs ? b->capdefs * 2 : 8;
        b->defs = tb_realloc(b->defs, b->capdefs * sizeof *b->defs);
    }
    b->defs[b->ndefs++] = (pending_default_t){ rec, field, def };
}

static char *full_name(avro_schema_t s)
{
    const char *name = avro_schema_name(s);
    const char *ns = avro_schema_namespace(s);
    if (!name)
        name = "";
    if (ns && ns[0])
        return tb_asprintf("%s.%s", ns, name);
    return tb_strdup(name);
}

/* The JSON object describing a complex type at this point, or NULL when the
 * schema refers to it by name (or is not an object at all). */
static const json_t *json_obj(const json_t *js)
{
    return json_is_object(js) ? js : NULL;
}

static int convert(builder_t *b, avro_schema_t as, const json_t *js, int depth, uint32_t *out);

static int convert_record(builder_t *b, avro_schema_t as, const json_t *js, int depth,
                          uint32_t idx)
{
    size_t n = avro_schema_record_size(as);
    if (n > UINT32_MAX / 2) {
        sch__errf(b->err, b->errlen, "record has too many fields");
        return TB_ESCHEMA;
    }
    sch__av_node_t *node = &b->s->nodes[idx];
    node->n = (uint32_t)n;
    node->kids = tb_calloc(n ? n : 1, sizeof *node->kids);
    node->names = tb_calloc(n ? n : 1, sizeof *node->names);
    node->has_default = tb_calloc(n ? n : 1, sizeof *node->has_default);
    for (size_t i = 0; i < n; i++) {
        const char *fname = avro_schema_record_field_name(as, (int)i);
        b->s->nodes[idx].names[i] = tb_strdup(fname ? fname : "");
    }
    const json_t *jfields = json_object_get(json_obj(js), "fields");
    if (json_array_size(jfields) != n)
        jfields = NULL; /* shapes disagree: pick up no defaults rather than wrong ones */
    for (size_t i = 0; i < n; i++) {
        avro_schema_t ft = avro_schema_record_field_get_by_index(as, (int)i);
        const json_t *jf = json_array_get(jfields, i);
        const json_t *def = json_object_get(jf, "default");
        if (def)
            pending_add(b, idx, (uint32_t)i, def);
        uint32_t kid;
        int rc = convert(b, ft, json_object_get(jf, "type"), depth + 1, &kid);
        if (rc)
            return rc;
        b->s->nodes[idx].kids[i] = kid;
    }
    return 0;
}

static int convert_enum(builder_t *b, avro_schema_t as, uint32_t idx)
{
    int n = avro_schema_enum_number_of_symbols(as);
    if (n <= 0) {
        sch__errf(b->err, b->errlen, "enum %s has no symbols", b->s->nodes[idx].name);
        return TB_ESCHEMA;
    }
    sch__av_node_t *node = &b->s->nodes[idx];
    node->n = (uint32_t)n;
    node->names = tb_calloc((size_t)n, sizeof *node->names);
    for (int i = 0; i < n; i++) {
        const char *sym = avro_schema_enum_get(as, i);
        node->names[i] = tb_strdup(sym ? sym : "");
    }
    return 0;
}

static int convert_union(builder_t *b, avro_schema_t as, const json_t *js, int depth,
                         uint32_t idx)
{
    size_t n = avro_schema_union_size(as);
    if (n == 0 || n > UINT32_MAX / 2) {
        sch__errf(b->err, b->errlen, "union must have at least one branch");
        return TB_ESCHEMA;
    }
    b->s->nodes[idx].n = (uint32_t)n;
    b->s->nodes[idx].kids = tb_calloc(n, sizeof(uint32_t));
    const json_t *jbranches = json_array_size(js) == n ? js : NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t kid;
        int rc = convert(b, avro_schema_union_branch(as, (int)i), json_array_get(jbranches, i),
                         depth + 1, &kid);
        if (rc)
            return rc;
        if (b->s->nodes[kid].type == SCH__AV_UNION) {
            sch__errf(b->err, b->errlen, "a union may not contain a union directly");
            return TB_ESCHEMA;
        }
        b->s->nodes[idx].kids[i] = kid;
    }
    return 0;
}

static int convert_container(builder_t *b, avro_schema_t sub, const json_t *jsub, int depth,
                             uint32_t idx)
{
    b->s->nodes[idx].n = 1;
    b->s->nodes[idx].kids = tb_calloc(1, sizeof(uint32_t));
    uint32_t kid;
    int rc = convert(b, sub, jsub, depth + 1, &kid);
    if (rc)
        return rc;
    b->s->nodes[idx].kids[0] = kid;
    return 0;
}

static int convert(builder_t *b, avro_schema_t as, const json_t *js, int depth, uint32_t *out)
{
    if (depth > SCH__AV_MAX_SCHEMA_DEPTH) {
        sch__errf(b->err, b->errlen, "schema nested deeper than %d", SCH__AV_MAX_SCHEMA_DEPTH);
        return TB_ESCHEMA;
    }
    if (!as) {
        sch__errf(b->err, b->errlen, "avro-c returned an incomplete schema");
        return TB_ESCHEMA;
    }
    if (is_avro_link(as)) {
        as = avro_schema_link_target(as);
        js = NULL; /* a reference by name: the definition carried the details */
        if (!as) {
            sch__errf(b->err, b->errlen, "unresolved named type reference");
            return TB_ESCHEMA;
        }
    }
    if (is_avro_named_type(as) && memo_find(b, as, out))
        return 0;

    static const struct { avro_type_t a; sch__av_type_t t; } prim[] = {
        { AVRO_NULL, SCH__AV_NULL },     { AVRO_BOOLEAN, SCH__AV_BOOLEAN },
        { AVRO_INT32, SCH__AV_INT },     { AVRO_INT64, SCH__AV_LONG },
        { AVRO_FLOAT, SCH__AV_FLOAT },   { AVRO_DOUBLE, SCH__AV_DOUBLE },
        { AVRO_BYTES, SCH__AV_BYTES },   { AVRO_STRING, SCH__AV_STRING },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(prim); i++) {
        if (avro_typeof(as) == prim[i].a) {
            *out = node_new(b, prim[i].t);
            return 0;
        }
    }

    uint32_t idx;
    switch (avro_typeof(as)) {
    case AVRO_RECORD:
        idx = node_new(b, SCH__AV_RECORD);
        b->s->nodes[idx].name = full_name(as);
        memo_add(b, as, idx); /* before the fields: they may refer back to us */
        *out = idx;
        return convert_record(b, as, js, depth, idx);
    case AVRO_ENUM:
        idx = node_new(b, SCH__AV_ENUM);
        b->s->nodes[idx].name = full_name(as);
        memo_add(b, as, idx);
        *out = idx;
        return convert_enum(b, as, idx);
    case AVRO_FIXED: {
        int64_t size = avro_schema_fixed_size(as);
        idx = node_new(b, SCH__AV_FIXED);
        b->s->nodes[idx].name = full_name(as);
        memo_add(b, as, idx);
        *out = idx;
        if (size < 0) {
            sch__errf(b->err, b->errlen, "fixed %s has negative size %lld",
                      b->s->nodes[idx].name, (long long)size);
            return TB_ESCHEMA;
        }
        b->s->nodes[idx].size = size;
        return 0;
    }
    case AVRO_ARRAY:
        idx = node_new(b, SCH__AV_ARRAY);
        *out = idx;
        return convert_container(b, avro_schema_array_items(as),
                                 json_object_get(json_obj(js), "items"), depth, idx);
    case AVRO_MAP:
        idx = node_new(b, SCH__AV_MAP);
        *out = idx;
        return convert_container(b, avro_schema_map_values(as),
                                 json_object_get(json_obj(js), "values"), depth, idx);
    case AVRO_UNION:
        idx = node_new(b, SCH__AV_UNION);
        *out = idx;
        return convert_union(b, as, js, depth, idx);
    default:
        sch__errf(b->err, b->errlen, "unknown Avro type %d from avro-c", (int)avro_typeof(as));
        return TB_ESCHEMA;
    }
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    if (a == SCH__AV_INF || b == SCH__AV_INF)
        return SCH__AV_INF;
    uint64_t sum = a + b; /* both <= 2^62: no wrap */
    return sum > SCH__AV_MINSIZE_CAP ? SCH__AV_MINSIZE_CAP : sum;
}

static uint64_t minsize_of(const sch__avro_t *s, const sch__av_node_t *n)
{
    uint64_t m;
    switch (n->type) {
    case SCH__AV_NULL: return 0;
    case SCH__AV_FLOAT: return 4;
    case SCH__AV_DOUBLE: return 8;
    case SCH__AV_FIXED:
        return (uint64_t)n->size > SCH__AV_MINSIZE_CAP ? SCH__AV_MINSIZE_CAP : (uint64_t)n->size;
    case SCH__AV_RECORD:
        m = 0;
        for (uint32_t i = 0; i < n->n; i++)
            m = sat_add(m, s->nodes[n->kids[i]].minsize);
        return m;
    case SCH__AV_UNION:
        m = SCH__AV_INF;
        for (uint32_t i = 0; i < n->n; i++)
            m = TB_MIN(m, s->nodes[n->kids[i]].minsize);
        return sat_add(1, m);
    default: /* boolean, int, long, bytes, string, enum, array, map: at least one byte */
        return 1;
    }
}

/* Least fixed point, from "infinite" down. Children mostly have higher
 * indices than their parents (depth-first numbering), so walking backwards
 * settles a tree in one pass; cycles take a few more. */
static void solve_minsize(sch__avro_t *s)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = s->nnodes; i-- > 0;) {
            uint64_t m = minsize_of(s, &s->nodes[i]);
            if (m != s->nodes[i].minsize) {
                s->nodes[i].minsize = m;
                changed = true;
            }
        }
    }
}

static int64_t width_of(const sch__avro_t *s, const sch__av_node_t *n)
{
    switch (n->type) {
    case SCH__AV_NULL: return 0;
    case SCH__AV_FLOAT: return 4;
    case SCH__AV_DOUBLE: return 8;
    case SCH__AV_FIXED: return n->size;
    case SCH__AV_RECORD: {
        int64_t sum = 0;
        for (uint32_t i = 0; i < n->n; i++) {
            int64_t k = s->nodes[n->kids[i]].width;
            if (k < 0 || k > INT64_MAX / 2 - sum)
                return -1;
            sum += k;
        }
        return sum;
    }
    default:
        return -1;
    }
}

/* Widths only ever go from -1 to a value, so this settles; a record in a
 * cycle always reaches a union, array or map, and stays -1. */
static void solve_width(sch__avro_t *s)
{
    for (uint32_t i = 0; i < s->nnodes; i++)
        s->nodes[i].width = -1;
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t i = s->nnodes; i-- > 0;) {
            int64_t w = width_of(s, &s->nodes[i]);
            if (w != s->nodes[i].width) {
                s->nodes[i].width = w;
                changed = true;
            }
        }
    }
}

static int check_finite(const sch__avro_t *s, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < s->nnodes; i++) {
        const sch__av_node_t *n = &s->nodes[i];
        if (n->minsize == SCH__AV_INF) {
            sch__errf(err, errlen, "type %s has no finite value: it always contains itself",
                      sch__av_branch_name(n));
            return TB_ESCHEMA;
        }
    }
    return 0;
}

static int check_defaults(builder_t *b)
{
    char why[256];
    /* Mark first: a record default may leave out a nested field that has
     * its own default (which is checked in this same loop). */
    for (size_t i = 0; i < b->ndefs; i++)
        b->s->nodes[b->defs[i].rec].has_default[b->defs[i].field] = true;
    for (size_t i = 0; i < b->ndefs; i++) {
        const pending_default_t *d = &b->defs[i];
        sch__av_node_t *rec = &b->s->nodes[d->rec];
        if (sch__avro_json_check(b->s, rec->kids[d->field], d->def, true, why, sizeof why)) {
            sch__errf(b->err, b->errlen, "default of field %s.%s does not match its type: %s",
                      rec->name, rec->names[d->field], why);
            return TB_ESCHEMA;
        }
    }
    return 0;
}

int sch__avro_compile(const char *text, size_t len, const sch_opts_t *opts, sch__avro_t **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    if (!text || len == 0) {
        sch__errf(err, errlen, "empty Avro schema");
        return TB_ESCHEMA;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!doc) {
        sch__errf(err, errlen, "Avro schema is not JSON: %s (line %d, column %d)", jerr.text,
                  jerr.line, jerr.column);
        return TB_ESCHEMA;
    }
    avro_schema_t as = NULL;
    if (avro_schema_from_json_length(text, len, &as) != 0 || !as) {
        sch__errf(err, errlen, "Avro schema rejected by avro-c: %s", avro_strerror());
        json_decref(doc);
        return TB_ESCHEMA;
    }

    builder_t b = { .s = tb_calloc(1, sizeof(sch__avro_t)), .err = err, .errlen = errlen };
    b.s->encoding = opts ? opts->avro_encoding : SCH_AVRO_BINARY;
    int rc = convert(&b, as, doc, 0, &b.s->root);
    avro_schema_decref(as);
    if (rc == 0) {
        solve_minsize(b.s);
        rc = check_finite(b.s, err, errlen);
    }
    if (rc == 0) {
        solve_width(b.s);
    }
    if (rc == 0)
        rc = check_defaults(&b);
    json_decref(doc);
    free(b.memo);
    free(b.defs);
    if (rc) {
        sch__avro_free(b.s);
        return rc;
    }
    *out = b.s;
    return 0;
}
