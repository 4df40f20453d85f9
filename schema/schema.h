/*
 * schema.h: payload validation at the edge (the schema/ folder's one public header).
 *
 * A schema arrives from the cluster registry as Danube's JSON envelope
 * (DANUBE-PROTOCOL.md, "Schema definitions"), is compiled once into an
 * immutable, reference-counted validator, and is swapped atomically (on the
 * loop thread) when the heartbeat reports a change. Validation never
 * re-parses the schema.
 *
 * Kinds: Bytes (anything), String (valid UTF-8), Number (4 or 8 bytes),
 * JSON Schema (drafts 7 and 2020-12, our own validator on jansson: no C
 * library for it is packaged in Debian), Avro (avro-c; raw binary datum, or
 * Avro's JSON encoding). Protobuf is refused at compile time with
 * TB_EUNSUPPORTED and a clear message, never a crash.
 *
 * Errors: functions return 0 or a negative TB_E* / -errno code. Where an
 * `err` buffer is given, a human message is written there (always
 * NUL-terminated, capped at errlen), e.g. "/temperature: 130 > maximum 120".
 *
 * Threads: a compiled validator is immutable; sch_validate may run on any
 * thread. sch_validator_ref/unref are atomic.
 *
 * Prefix: sch_ (public), sch__ (internal to schema/).
 */
#ifndef SCH_SCHEMA_H
#define SCH_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SCH_BYTES,
    SCH_STRING,
    SCH_NUMBER,
    SCH_JSON_SCHEMA,
    SCH_AVRO,
    SCH_PROTOBUF,
} sch_kind_t;

typedef enum { SCH_AVRO_BINARY, SCH_AVRO_JSON } sch_avro_encoding_t;

typedef struct sch_opts {
    bool format_assert;               /* JSON Schema: assert date-time, email, ipv4, ipv6, uri, uuid */
    sch_avro_encoding_t avro_encoding; /* Avro: payload encoding */
    /* JSON Schema remote $ref resolution, against schemas the registry
     * supplied only (no network). Returns the schema text for an absolute
     * URI or NULL; the text must stay valid until sch_compile returns. */
    const char *(*resolve)(void *arg, const char *uri, size_t *len /* OUT */);
    void *resolve_arg;
} sch_opts_t;

typedef struct sch_validator sch_validator_t;

/* Compiles `text` (the raw schema: JSON Schema text, Avro schema JSON, or
 * ignored for Bytes/String/Number). On success *out holds a validator with
 * one reference. On failure *out is NULL and err says why. */
int sch_compile(sch_kind_t kind, const char *text, size_t len, const sch_opts_t *opts,
                sch_validator_t **out, char *err, size_t errlen);

/* 0 when the payload is valid, TB_EINVALID (with err filled) when not. */
int sch_validate(const sch_validator_t *v, const uint8_t *payload, size_t len,
                 char *err, size_t errlen);

sch_validator_t *sch_validator_ref(sch_validator_t *v);
void sch_validator_unref(sch_validator_t *v);
sch_kind_t sch_validator_kind(const sch_validator_t *v);

/* Parses Danube's envelope (`schema_definition` bytes). On success sets
 * *kind, *raw (the schema text; NULL for Bytes/String/Number) and
 * *fingerprint (may be NULL); the caller frees both. */
int sch_envelope_parse(const uint8_t *def, size_t len, sch_kind_t *kind /* OUT */,
                       char **raw /* OUT */, char **fingerprint /* OUT */,
                       char *err, size_t errlen);

const char *sch_kind_name(sch_kind_t kind);

#endif
