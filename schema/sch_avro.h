/*
 * sch_avro.h: the Avro validator's internal interface (not public).
 *
 * DESIGN. avro-c (libavro 1.11.1) parses the schema JSON; we then flatten
 * its avro_schema_t graph into our own array of nodes (sch__av_node_t) and
 * drop the avro_schema_t. Payloads are checked by a small walker over those
 * nodes that decodes zigzag varints and steps over each value against the
 * bytes left, allocating nothing (sch_avro_binary.c), or, for Avro's JSON
 * encoding, by a walk of the jansson value against the same nodes
 * (sch_avro_json.c).
 *
 * Why not avro-c's own reader (avro_value_read into a generic value)? It
 * was measured on hostile bytes (bench_avro --avro-c-hostile; figures in
 * docs/SCHEMA.md, "Avro"):
 *  - a string or bytes length is malloc'ed before it is checked against the
 *    input: a 10-byte payload claiming 2 GiB fails only if malloc does;
 *  - an array<null> claiming 2^62 items grew to 1.3 GB RSS over 7-14 s;
 *  - 100 kB nesting a recursive record 100000 deep overflows its stack;
 *  - trailing bytes, an enum index past the symbols and invalid UTF-8 in a
 *    string are all accepted.
 * It also materialises every value, which a validator does not need: on a
 * valid 10-field record it is 5-7x slower than the walker. The
 * walker is bounded by the payload: it reads each byte once, never
 * allocates, refuses a length or count the remaining bytes cannot hold, and
 * limits nesting to SCH__AV_MAX_DEPTH. Being read-only over immutable nodes,
 * it is safe from any thread. avro-c's schema objects are not kept because
 * their getters go through its own refcounted objects and hash tables; our
 * nodes carry exactly what validation needs (field names, symbols, sizes,
 * union branch names, minimum encoded sizes).
 *
 * avro-c 1.11.1 ignores logicalType and default values; we read both from
 * the schema JSON alongside avro-c's graph: logical types are validated as
 * their underlying type, and every field default is checked against its
 * field's type at compile time (a bad default is a schema error).
 */
#ifndef SCH_AVRO_H
#define SCH_AVRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "schema/schema.h"

/* Deepest nesting of values a payload may use (records in records, arrays
 * in maps, ...). Recursive schemas make depth data-driven, and the walkers
 * recurse, so this bounds stack use whatever the payload says. */
#define SCH__AV_MAX_DEPTH 128

/* "No finite datum": minsize of a type that contains itself with no way out. */
#define SCH__AV_INF UINT64_MAX

typedef enum {
    SCH__AV_NULL,
    SCH__AV_BOOLEAN,
    SCH__AV_INT,
    SCH__AV_LONG,
    SCH__AV_FLOAT,
    SCH__AV_DOUBLE,
    SCH__AV_BYTES,
    SCH__AV_STRING,
    SCH__AV_RECORD,
    SCH__AV_ENUM,
    SCH__AV_ARRAY,
    SCH__AV_MAP,
    SCH__AV_UNION,
    SCH__AV_FIXED,
} sch__av_type_t;

typedef struct sch__av_node {
    sch__av_type_t type;
    uint32_t n;         /* record: fields; enum: symbols; union: branches; array/map: 1 */
    int64_t size;       /* fixed: size in bytes */
    uint64_t minsize;   /* fewest bytes any datum encodes to; SCH__AV_INF if none exists */
    int64_t width;      /* >= 0: every datum is exactly this many bytes and any bytes are
                         * valid (null, float, double, fixed, records of those); else -1 */
    char *name;         /* record/enum/fixed: full name (namespace.name) */
    uint32_t *kids;     /* node indices: record field types, union branches, array items, map values */
    char **names;       /* record: field names; enum: symbols */
    bool *has_default;  /* record: the field has a default (checked at compile) */
} sch__av_node_t;

typedef struct sch__avro {
    sch__av_node_t *nodes;
    uint32_t nnodes;
    uint32_t root;
    sch_avro_encoding_t encoding;
} sch__avro_t;

/* Compiles Avro schema JSON text. 0 with *out set, or TB_ESCHEMA with *out
 * NULL and err saying why (avro-c's message, or ours). */
int sch__avro_compile(const char *text, size_t len, const sch_opts_t *opts, sch__avro_t **out,
                      char *err, size_t errlen);
/* 0 when the payload is one datum of the schema in the compiled encoding,
 * TB_EINVALID with err ("at byte N, /path: reason") when not. Thread-safe. */
int sch__avro_validate(const sch__avro_t *s, const uint8_t *payload, size_t len, char *err,
                       size_t errlen);
void sch__avro_free(sch__avro_t *s);

/* Binary encoding: the payload must be exactly one datum of node `root`. */
int sch__avro_binary_validate(const sch__avro_t *s, uint32_t root, const uint8_t *p, size_t len,
                              char *err, size_t errlen);
/* JSON encoding: `v` must be a value of node `root`. With `is_default`, the
 * rules for default values apply instead (a union takes its first branch's
 * value without the {"type": value} wrapper). */
int sch__avro_json_check(const sch__avro_t *s, uint32_t root, const json_t *v, bool is_default,
                         char *err, size_t errlen);

/* Name of a node's type as Avro JSON encoding uses it for union branches:
 * the full name for named types, else "int", "array", ... */
const char *sch__av_branch_name(const sch__av_node_t *n);

/* Error path of a failing walk, built from the innermost segment outwards:
 * each level prepends "/segment" as the failure unwinds. Only touched on
 * failure, so valid payloads pay nothing for it. */
typedef struct sch__av_path {
    char buf[192];
    size_t len;       /* bytes used at the end of buf */
    bool truncated;   /* segments were dropped from the front */
} sch__av_path_t;

void sch__av_path_init(sch__av_path_t *p);
void sch__av_path_push_name(sch__av_path_t *p, const char *name, size_t n);
void sch__av_path_push_index(sch__av_path_t *p, uint64_t i);
/* The path as a string ("/" for the root); valid while p lives. */
const char *sch__av_path_str(sch__av_path_t *p);

#endif
