/*
 * sch_avro.c: the Avro validator's entry points: pick the walker for the
 * compiled encoding, and free the node array.
 *
 * Single-object encoding (C3 01 + 8-byte schema fingerprint) is NOT
 * accepted: a payload must be the bare datum. Telling the two apart by
 * sniffing is unsound (C3 01 is also a valid start of many raw datums, e.g.
 * a record whose first field is the long -98), and devices on the edge send
 * bare datums. A topic that needs it would get its own sch_avro_encoding_t
 * value, never a guess. See docs/SCHEMA.md.
 */
#include "schema/sch_avro.h"

#include <stdlib.h>

#include "base/base.h"
#include "schema/sch_internal.h"

int sch__avro_validate(const sch__avro_t *s, const uint8_t *payload, size_t len, char *err,
                       size_t errlen)
{
    if (s->encoding == SCH_AVRO_BINARY)
        return sch__avro_binary_validate(s, s->root, payload, len, err, errlen);

    /* JSON encoding: one JSON text; duplicate keys are refused because a
     * record or map with two values for one key is ambiguous. */
    json_error_t jerr;
    json_t *v = json_loadb((const char *)payload, len,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!v) {
        sch__errf(err, errlen, "payload is not JSON: %s (at byte %d)", jerr.text, jerr.position);
        return TB_EINVALID;
    }
    int rc = sch__avro_json_check(s, s->root, v, false, err, errlen);
    json_decref(v);
    return rc;
}

void sch__avro_free(sch__avro_t *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nnodes; i++) {
        sch__av_node_t *n = &s->nodes[i];
        if (n->names) {
            for (uint32_t k = 0; k < n->n; k++)
                free(n->names[k]);
        }
        free(n->names);
        free(n->kids);
        free(n->has_default);
        free(n->name);
    }
    free(s->nodes);
    free(s);
}

const char *sch__av_branch_name(const sch__av_node_t *n)
{
    switch (n->type) {
    case SCH__AV_NULL: return "null";
    case SCH__AV_BOOLEAN: return "boolean";
    case SCH__AV_INT: return "int";
    case SCH__AV_LONG: return "long";
    case SCH__AV_FLOAT: return "float";
    case SCH__AV_DOUBLE: return "double";
    case SCH__AV_BYTES: return "bytes";
    case SCH__AV_STRING: return "string";
    case SCH__AV_ARRAY: return "array";
    case SCH__AV_MAP: return "map";
    case SCH__AV_UNION: return "union";
    case SCH__AV_RECORD:
    case SCH__AV_ENUM:
    case SCH__AV_FIXED: return n->name ? n->name : "";
    }
    return "?";
}
