/*
 * sch_envelope.c: parses Danube's schema envelope (ResolvedSchema's
 * `schema_definition` bytes).
 *
 * Danube serialises its schema enum with serde's external tagging, so the
 * bytes are JSON of exactly one of these shapes (DANUBE-PROTOCOL.md,
 * "Schema definitions"):
 *
 *   "Bytes" | "String" | "Number"
 *   {"JsonSchema": {"raw_schema": "<text>", "fingerprint": "sha256:..."}}
 *   {"Avro":       {"raw_schema": "<text>", "fingerprint": "sha256:..."}}
 *   {"Protobuf":   {"raw_proto": "<text>", "message_name": "<name>",
 *                   "fingerprint": "sha256:..."}}
 *
 * Strict on purpose: the envelope decides how payloads are checked, so any
 * other shape (unknown tag, two tags, unknown member, wrong member type,
 * trailing bytes, duplicate keys, an empty schema text) is refused with a
 * message naming what is wrong; the caller then keeps the topic not ready
 * rather than guess. `fingerprint` is optional (our callers also get one in
 * ResolvedSchema). A Protobuf envelope parses (its kind is reported, raw is
 * the .proto text) so the refusal comes from sch_compile with its own
 * message.
 */
#include "schema/schema.h"

#include <jansson.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_internal.h"

typedef struct variant {
    const char *tag;
    sch_kind_t kind;
    const char *text_key; /* the member holding the schema text */
} variant_t;

static const variant_t variants[] = {
    { "JsonSchema", SCH_JSON_SCHEMA, "raw_schema" },
    { "Avro", SCH_AVRO, "raw_schema" },
    { "Protobuf", SCH_PROTOBUF, "raw_proto" },
};

static int parse_bare(const json_t *doc, sch_kind_t *kind, char *err, size_t errlen)
{
    static const sch_kind_t bare[] = { SCH_BYTES, SCH_STRING, SCH_NUMBER };
    const char *s = json_string_value(doc);
    for (size_t i = 0; i < TB_ARRAY_LEN(bare); i++) {
        if (strlen(s) == json_string_length(doc) && !strcmp(s, sch_kind_name(bare[i]))) {
            *kind = bare[i];
            return 0;
        }
    }
    sch__errf(err, errlen,
              "schema envelope: unknown schema type \"%.40s\" (expected \"Bytes\", \"String\", "
              "\"Number\" or an object {\"JsonSchema\"|\"Avro\"|\"Protobuf\": {...}})",
              s);
    return TB_EMALFORMED;
}

/* Checks the members of a tagged variant's body; returns the text member. */
static int parse_body(const variant_t *var, const json_t *body, const char **text,
                      const char **fp, char *err, size_t errlen)
{
    if (!json_is_object(body)) {
        sch__errf(err, errlen, "schema envelope: \"%s\" must hold an object", var->tag);
        return TB_EMALFORMED;
    }
    *text = NULL;
    *fp = NULL;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)body, key, val) {
        bool is_text = !strcmp(key, var->text_key);
        bool is_fp = !strcmp(key, "fingerprint");
        bool is_msg = var->kind == SCH_PROTOBUF && !strcmp(key, "message_name");
        if (!is_text && !is_fp && !is_msg) {
            sch__errf(err, errlen, "schema envelope: unknown member \"%.40s\" in \"%s\"", key,
                      var->tag);
            return TB_EMALFORMED;
        }
        if (!json_is_string(val)) {
            sch__errf(err, errlen, "schema envelope: \"%s.%s\" must be a string", var->tag, key);
            return TB_EMALFORMED;
        }
        if (is_text)
            *text = json_string_value(val);
        if (is_fp)
            *fp = json_string_value(val);
    }
    if (!*text || !**text) {
        sch__errf(err, errlen, "schema envelope: \"%s\" needs a non-empty \"%s\"", var->tag,
                  var->text_key);
        return TB_EMALFORMED;
    }
    if (var->kind == SCH_PROTOBUF && !json_is_string(json_object_get(body, "message_name"))) {
        sch__errf(err, errlen, "schema envelope: \"Protobuf\" needs \"message_name\"");
        return TB_EMALFORMED;
    }
    return 0;
}

static int parse_tagged(const json_t *doc, sch_kind_t *kind, char **raw, char **fingerprint,
                        char *err, size_t errlen)
{
    if (json_object_size(doc) != 1) {
        sch__errf(err, errlen, "schema envelope: object must have exactly one tag, has %zu",
                  json_object_size(doc));
        return TB_EMALFORMED;
    }
    void *it = json_object_iter((json_t *)doc);
    const char *tag = json_object_iter_key(it);
    for (size_t i = 0; i < TB_ARRAY_LEN(variants); i++) {
        if (strcmp(tag, variants[i].tag) != 0)
            continue;
        const char *text, *fp;
        int rc = parse_body(&variants[i], json_object_iter_value(it), &text, &fp, err, errlen);
        if (rc)
            return rc;
        *kind = variants[i].kind;
        *raw = tb_strdup(text);
        *fingerprint = fp ? tb_strdup(fp) : NULL;
        return 0;
    }
    sch__errf(err, errlen,
              "schema envelope: unknown tag \"%.40s\" (expected JsonSchema, Avro or Protobuf)", tag);
    return TB_EMALFORMED;
}

int sch_envelope_parse(const uint8_t *def, size_t len, sch_kind_t *kind, char **raw,
                       char **fingerprint, char *err, size_t errlen)
{
    *raw = NULL;
    *fingerprint = NULL;
    if (!def || len == 0) {
        sch__errf(err, errlen, "schema envelope is empty");
        return TB_EMALFORMED;
    }
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)def, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                             &jerr);
    if (!doc) {
        sch__errf(err, errlen, "schema envelope is not JSON: %s (at byte %d)", jerr.text,
                  jerr.position);
        return TB_EMALFORMED;
    }
    int rc;
    if (json_is_string(doc)) {
        rc = parse_bare(doc, kind, err, errlen);
    } else if (json_is_object(doc)) {
        rc = parse_tagged(doc, kind, raw, fingerprint, err, errlen);
    } else {
        sch__errf(err, errlen, "schema envelope must be a string or an object");
        rc = TB_EMALFORMED;
    }
    json_decref(doc);
    return rc;
}
