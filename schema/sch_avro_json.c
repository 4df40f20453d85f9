/*
 * sch_avro_json.c: checks a jansson value against the compiled Avro nodes.
 *
 * Two users: payloads in Avro's JSON encoding (sch_opts_t.avro_encoding ==
 * SCH_AVRO_JSON; avro-c has no JSON decoder), and field defaults at compile
 * time. The rules follow the Avro 1.11 specification:
 *
 *   null -> null; boolean -> true/false; int -> integer in 32 bits;
 *   long -> integer (jansson refuses integers past 64 bits when parsing);
 *   float/double -> any number, or "NaN", "Infinity", "-Infinity" (Java's
 *   encoder writes those), float finite values within FLT_MAX;
 *   bytes/fixed -> string whose code points are all <= U+00FF (ISO-8859-1
 *   bytes), fixed of exactly `size` of them; string -> string;
 *   enum -> one of the symbols; array -> array; map -> object;
 *   record -> object with each field by name, no others;
 *   union -> null for a null branch, else {"<branch name>": value} where the
 *   name is the full name of a named type or the type name otherwise.
 *
 * Decisions: a record field missing from the payload is accepted only if
 * the schema gives it a default (checked at compile, so the reader can fill
 * it in), which is what hand-written device JSON needs and what Avro's
 * schema resolution would do; a field the schema does not name is refused.
 * In default values (is_default) a union takes a value of its first branch,
 * bare, as the specification says; inside a default everything else follows
 * the same rules.
 *
 * Depth is bounded by SCH__AV_MAX_DEPTH like the binary walker; jansson
 * bounds the nesting of the parsed document too.
 */
#include "schema/sch_avro.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_internal.h"

typedef struct jwalk {
    const sch__av_node_t *nodes;
    bool is_default;
    char why[160];
    sch__av_path_t path;
} jwalk_t;

#define JFAIL(w, ...)                                         \
    do {                                                      \
        snprintf((w)->why, sizeof (w)->why, __VA_ARGS__);     \
        return -1;                                            \
    } while (0)

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static bool is_special_float(const json_t *v)
{
    if (!json_is_string(v))
        return false;
    const char *s = json_string_value(v);
    return !strcmp(s, "NaN") || !strcmp(s, "Infinity") || !strcmp(s, "-Infinity");
}

/* Counts the code points of a JSON string if all are <= U+00FF. jansson
 * hands us valid UTF-8, so a code point <= U+00FF is one byte < 0x80 or a
 * 0xC2/0xC3 lead followed by one continuation byte. */
static bool latin1_len(const json_t *v, size_t *out)
{
    const uint8_t *s = (const uint8_t *)json_string_value(v);
    size_t n = json_string_length(v), count = 0;
    for (size_t i = 0; i < n; count++) {
        if (s[i] < 0x80)
            i++;
        else if ((s[i] == 0xC2 || s[i] == 0xC3) && i + 1 < n)
            i += 2;
        else
            return false;
    }
    *out = count;
    return true;
}

/* Length-aware: JSON strings and keys may hold U+0000, C names may not. */
static bool same(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(s, name, len) == 0;
}

static int jcheck(jwalk_t *w, uint32_t idx, const json_t *v, int depth);

static int jcheck_record(jwalk_t *w, const sch__av_node_t *n, const json_t *v, int depth)
{
    if (!json_is_object(v))
        JFAIL(w, "expected record %s (object), got %s", n->name, json_kind(v));
    size_t present = 0;
    for (uint32_t i = 0; i < n->n; i++) {
        const json_t *fv = json_object_get(v, n->names[i]);
        if (!fv) {
            if (n->has_default[i])
                continue;
            sch__av_path_push_name(&w->path, n->names[i], strlen(n->names[i]));
            JFAIL(w, "missing field (it has no default)");
        }
        present++;
        if (jcheck(w, n->kids[i], fv, depth + 1)) {
            sch__av_path_push_name(&w->path, n->names[i], strlen(n->names[i]));
            return -1;
        }
    }
    if (present == json_object_size(v))
        return 0;
    const char *key;
    const json_t *unused;
    json_object_foreach((json_t *)v, key, unused) {
        bool known = false;
        for (uint32_t i = 0; i < n->n && !known; i++)
            known = strcmp(key, n->names[i]) == 0;
        if (!known)
            JFAIL(w, "record %s has no field \"%.64s\"", n->name, key);
    }
    JFAIL(w, "record %s: unexpected fields", n->name);
}

static int jcheck_union(jwalk_t *w, const sch__av_node_t *n, const json_t *v, int depth)
{
    if (w->is_default)
        return jcheck(w, n->kids[0], v, depth + 1);
    if (json_is_null(v)) {
        for (uint32_t i = 0; i < n->n; i++)
            if (w->nodes[n->kids[i]].type == SCH__AV_NULL)
                return 0;
        JFAIL(w, "null, but the union has no null branch");
    }
    if (!json_is_object(v) || json_object_size(v) != 1)
        JFAIL(w, "expected a union value {\"<type>\": value} or null, got %s", json_kind(v));
    void *it = json_object_iter((json_t *)v);
    const char *key = json_object_iter_key(it);
    size_t keylen = json_object_iter_key_len(it);
    const json_t *bv = json_object_iter_value(it);
    for (uint32_t i = 0; i < n->n; i++) {
        const sch__av_node_t *b = &w->nodes[n->kids[i]];
        if (b->type != SCH__AV_NULL && same(key, keylen, sch__av_branch_name(b))) {
            if (jcheck(w, n->kids[i], bv, depth + 1)) {
                sch__av_path_push_name(&w->path, key, keylen);
                return -1;
            }
            return 0;
        }
    }
    JFAIL(w, "union has no branch \"%.64s\"", key);
}

static int jcheck_container(jwalk_t *w, const sch__av_node_t *n, const json_t *v, int depth)
{
    if (n->type == SCH__AV_ARRAY) {
        if (!json_is_array(v))
            JFAIL(w, "expected array, got %s", json_kind(v));
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (jcheck(w, n->kids[0], json_array_get(v, i), depth + 1)) {
                sch__av_path_push_index(&w->path, i);
                return -1;
            }
        }
        return 0;
    }
    if (!json_is_object(v))
        JFAIL(w, "expected map (object), got %s", json_kind(v));
    const char *key;
    const json_t *mv;
    json_object_foreach((json_t *)v, key, mv) {
        if (jcheck(w, n->kids[0], mv, depth + 1)) {
            sch__av_path_push_name(&w->path, key, strlen(key));
            return -1;
        }
    }
    return 0;
}

static int jcheck(jwalk_t *w, uint32_t idx, const json_t *v, int depth)
{
    const sch__av_node_t *n = &w->nodes[idx];
    size_t len;
    if (depth > SCH__AV_MAX_DEPTH)
        JFAIL(w, "nested deeper than %d levels", SCH__AV_MAX_DEPTH);
    switch (n->type) {
    case SCH__AV_NULL:
        if (!json_is_null(v))
            JFAIL(w, "expected null, got %s", json_kind(v));
        return 0;
    case SCH__AV_BOOLEAN:
        if (!json_is_boolean(v))
            JFAIL(w, "expected boolean, got %s", json_kind(v));
        return 0;
    case SCH__AV_INT:
    case SCH__AV_LONG:
        if (!json_is_integer(v))
            JFAIL(w, "expected %s (integer), got %s", sch__av_branch_name(n), json_kind(v));
        if (n->type == SCH__AV_INT &&
            (json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX))
            JFAIL(w, "%" JSON_INTEGER_FORMAT " out of range for int (32 bits)",
                  json_integer_value(v));
        return 0;
    case SCH__AV_FLOAT:
    case SCH__AV_DOUBLE:
        if (is_special_float(v))
            return 0;
        if (!json_is_number(v))
            JFAIL(w, "expected %s (number), got %s", sch__av_branch_name(n), json_kind(v));
        if (n->type == SCH__AV_FLOAT && fabs(json_number_value(v)) > FLT_MAX)
            JFAIL(w, "%g out of range for float", json_number_value(v));
        return 0;
    case SCH__AV_STRING:
        if (!json_is_string(v))
            JFAIL(w, "expected string, got %s", json_kind(v));
        return 0;
    case SCH__AV_BYTES:
    case SCH__AV_FIXED:
        if (!json_is_string(v))
            JFAIL(w, "expected %s (string of bytes), got %s", sch__av_branch_name(n), json_kind(v));
        if (!latin1_len(v, &len))
            JFAIL(w, "%s string has a code point above U+00FF", sch__av_branch_name(n));
        if (n->type == SCH__AV_FIXED && (int64_t)len != n->size)
            JFAIL(w, "fixed %s needs %lld bytes, got %zu", n->name, (long long)n->size, len);
        return 0;
    case SCH__AV_ENUM:
        if (!json_is_string(v))
            JFAIL(w, "expected enum %s symbol (string), got %s", n->name, json_kind(v));
        for (uint32_t i = 0; i < n->n; i++)
            if (same(json_string_value(v), json_string_length(v), n->names[i]))
                return 0;
        JFAIL(w, "\"%.64s\" is not a symbol of enum %s", json_string_value(v), n->name);
    case SCH__AV_RECORD:
        return jcheck_record(w, n, v, depth);
    case SCH__AV_UNION:
        return jcheck_union(w, n, v, depth);
    case SCH__AV_ARRAY:
    case SCH__AV_MAP:
        return jcheck_container(w, n, v, depth);
    }
    JFAIL(w, "corrupt compiled schema");
}

int sch__avro_json_check(const sch__avro_t *s, uint32_t root, const json_t *v, bool is_default,
                         char *err, size_t errlen)
{
    jwalk_t w = { .nodes = s->nodes, .is_default = is_default };
    sch__av_path_init(&w.path);
    if (jcheck(&w, root, v, 0) == 0)
        return 0;
    sch__errf(err, errlen, "%s: %s", sch__av_path_str(&w.path), w.why);
    return TB_EINVALID;
}
