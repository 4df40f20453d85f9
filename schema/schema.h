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
 * library for it is packaged in Debian), Avro (avro-c parses the schema; our
 * own non-allocating walker checks a raw binary datum, or Avro's JSON
 * encoding: see sch_avro.h for why). Protobuf is refused at compile time with
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

/* ---- registry cache ------------------------------------------------------
 *
 * The edge's copy of the cluster's schema registry, keyed by subject (one
 * entry per subject) and, within it, by fingerprint: applying the schema a
 * subject already has (same fingerprint; the definition bytes when there is
 * no fingerprint) compiles nothing and keeps the validator every topic with
 * that subject already shares; a new fingerprint compiles and replaces it
 * (holders of the old validator keep it alive until they unref it).
 *
 * Fail closed: a schema that does not parse or compile is recorded as
 * failed with the compiler's reason; lookups then answer TB_ENOTREADY with
 * that reason and no validator, and the caller keeps the topic not ready. A
 * failed update replaces a working validator too: the cluster's latest
 * schema is the one that counts, and passing payloads under the old one
 * would be a guess.
 *
 * Threads: not thread-safe; owned by the event loop, which alone applies
 * updates and looks up. The validators it hands out are thread-safe.
 */
typedef struct sch_registry sch_registry_t;

/* One ResolvedSchema from RegisterEdge or a heartbeat's SCHEMA_UPDATED, as
 * received. Everything is borrowed for the duration of the call. */
typedef struct sch_resolved {
    const char *subject;
    uint64_t schema_id;
    uint32_t schema_version;
    const char *schema_type;       /* "avro", "json_schema", "bytes", ...; NULL or "" skips the cross-check */
    const uint8_t *definition;     /* schema_definition: Danube's envelope */
    size_t definition_len;
    const char *fingerprint;       /* NULL or "": the envelope's, else the definition bytes identify it */
} sch_resolved_t;

/* What a subject currently resolves to. */
typedef struct sch_lookup {
    sch_validator_t *validator;    /* one reference for the caller; NULL unless ready */
    uint64_t schema_id;
    uint32_t schema_version;
    sch_kind_t kind;               /* the envelope's; schema_type's if the envelope did not parse */
} sch_lookup_t;

/* opts apply to every compile (NULL: defaults). Copied. */
sch_registry_t *sch_registry_new(const sch_opts_t *opts);
/* Drops the registry's references; validators held elsewhere live on. */
void sch_registry_free(sch_registry_t *r);

/* Applies one resolved schema. 0: the subject is ready (compiled, or the
 * same fingerprint as before). Otherwise the subject is now recorded as
 * failed and the code says why (TB_EMALFORMED envelope, TB_ESCHEMA,
 * TB_EUNSUPPORTED), err too. -EINVAL if subject is NULL or empty (nothing
 * recorded). */
int sch_registry_apply(sch_registry_t *r, const sch_resolved_t *rs, char *err, size_t errlen);

/* 0: *out filled, out->validator referenced (caller unrefs). TB_ENOTREADY:
 * the subject's schema failed; err has the recorded reason, out has the id,
 * version and kind, no validator. -ENOENT: subject unknown. */
int sch_registry_lookup(const sch_registry_t *r, const char *subject, sch_lookup_t *out,
                        char *err, size_t errlen);

/* Forgets a subject (SCHEMA_REMOVED). 0, or -ENOENT if it was unknown. */
int sch_registry_remove(sch_registry_t *r, const char *subject);

/* The kind named by ResolvedSchema.schema_type ("avro", "json_schema",
 * "bytes", "string", "number", "protobuf"). 0 or -EINVAL. */
int sch_kind_from_type(const char *schema_type, sch_kind_t *kind /* OUT */);

/* ---- payload flattening (an output's metrics: Sparkplug, issue 18) -------
 *
 * sch_flatten_json walks a JSON object payload and calls cb once per leaf,
 * depth first in document order, with its path (object keys and array
 * indexes joined by '/': {"motor":{"rpm":900},"a":[1,2]} gives
 * "motor/rpm", "a/0", "a/1") and its value. Paths are unique within one
 * payload: a key holding '/' or an empty key, or a duplicate key, is
 * refused (two values could otherwise share a metric name), and so is a
 * payload deeper than SCH_FLAT_MAX_DEPTH or a path longer than
 * SCH_FLAT_MAX_PATH. An empty object or array yields nothing. Types are
 * the payload's own (JSON integer vs real, as written); which Sparkplug
 * type a metric gets, and mismatches, are the caller's (docs/design/
 * OUTPUTS.md 5.2). Returns 0; TB_EINVALID with err when the payload is not
 * a JSON object or breaks a rule above (nothing is called after the
 * error); or cb's nonzero return, which stops the walk.
 */
#define SCH_FLAT_MAX_DEPTH 32
#define SCH_FLAT_MAX_PATH 1024

typedef enum {
    SCH_FLAT_NULL,
    SCH_FLAT_BOOL,
    SCH_FLAT_INT,    /* a JSON integer (fits int64) */
    SCH_FLAT_DOUBLE, /* a JSON number with a fraction or exponent */
    SCH_FLAT_STRING, /* UTF-8, may hold NUL (s, len) */
    SCH_FLAT_BYTES,  /* Avro bytes or fixed (s, len): any bytes */
} sch_flat_type_t;

typedef struct sch_flat_value {
    sch_flat_type_t type;
    bool b;
    int64_t i;
    double d;
    const char *s; /* STRING, BYTES: valid during the callback */
    size_t len;
} sch_flat_value_t;

/* path is NUL-terminated (path_len bytes) and valid during the call. */
typedef int (*sch_flat_cb)(void *arg, const char *path, size_t path_len, const sch_flat_value_t *v);

int sch_flatten_json(const uint8_t *payload, size_t len, sch_flat_cb cb, void *arg, char *err, size_t errlen);

/* sch_flatten_avro: the same for one Avro binary datum of an Avro validator
 * `v` (the topic's writer schema) whose root is a record. The payload is
 * first checked by the validator's bounded walker (sch_avro.h: so hostile
 * bytes are refused before anything is decoded), then walked: record
 * fields by name, arrays by index, map entries by key (an empty key, a key
 * holding '/' or a NUL byte, or a key twice in one map is refused); a union
 * is its branch's value at the same path (the null branch: SCH_FLAT_NULL);
 * int and long are SCH_FLAT_INT, float and double SCH_FLAT_DOUBLE (the
 * float widened exactly), string and enum symbols SCH_FLAT_STRING, bytes
 * and fixed SCH_FLAT_BYTES. Same limits and returns as sch_flatten_json;
 * TB_EUNSUPPORTED when v is not Avro or uses Avro's JSON encoding (not
 * flattened yet), TB_EINVALID when the root is not a record. */
int sch_flatten_avro(const sch_validator_t *v, const uint8_t *payload, size_t len, sch_flat_cb cb, void *arg,
                     char *err, size_t errlen);

/* sch_field_types: the leaf paths a schema declares, with their types, for
 * an output that must announce its fields before it sees any value (a
 * Sparkplug birth). JSON Schema: `properties` recursively from the root
 * (local "$ref": "#/..." followed, at most SCH_FLAT_MAX_DEPTH deep), a
 * `type` of integer, number, boolean or string (or one of them with
 * "null": nullable); Avro: the fields of the root record recursively, a
 * `["null", T]` union as T nullable. What has no fixed path or one type
 * (arrays, maps, other unions, a record inside itself, a property without
 * a type) is not listed: the output infers those at first sight. Paths are
 * those the flatteners give. cb in schema order; its nonzero return stops
 * the walk and is returned. TB_EUNSUPPORTED for other kinds (no fields). */
typedef enum {
    SCH_FIELD_BOOL,
    SCH_FIELD_INT32,  /* Avro int */
    SCH_FIELD_INT64,  /* Avro long, JSON Schema integer */
    SCH_FIELD_FLOAT,  /* Avro float */
    SCH_FIELD_DOUBLE, /* Avro double, JSON Schema number */
    SCH_FIELD_STRING, /* Avro string or enum, JSON Schema string */
    SCH_FIELD_BYTES,  /* Avro bytes or fixed */
} sch_field_type_t;

typedef int (*sch_field_cb)(void *arg, const char *path, size_t path_len, sch_field_type_t type, bool nullable);

int sch_field_types(const sch_validator_t *v, sch_field_cb cb, void *arg, char *err, size_t errlen);

#endif
