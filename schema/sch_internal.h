/*
 * sch_internal.h: helpers shared by the files of schema/ (not public).
 *
 * Kept tiny on purpose: each validator kind has its own internal header
 * (sch_avro.h, sch_json.h); this one holds only what every kind needs.
 */
#ifndef SCH_INTERNAL_H
#define SCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

/* Writes a message into err (NUL-terminated, truncated to errlen). Does
 * nothing when err is NULL or errlen is 0, so callers need not check. */
void sch__errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Validates a payload against one of the kinds that need no schema text
 * (SCH_BYTES, SCH_STRING, SCH_NUMBER): 0 or TB_EINVALID with err filled. */
int sch__simple_validate(sch_kind_t kind, const uint8_t *payload, size_t len, char *err,
                         size_t errlen);

/* A validator's compiled form, for the flatteners (sch_flat_avro.c,
 * sch_fields.c): NULL when v is of another kind. */
/* sch_flat.c: appends one level (n bytes of s) to a flattened path of
 * length plen in path[SCH_FLAT_MAX_PATH + 1]; returns the new length, or -1
 * when it would pass SCH_FLAT_MAX_PATH. For both flattenings. */
long sch__path_push(char *path, size_t plen, const char *s, size_t n);

struct sch__avro;
struct sch__json;
const struct sch__avro *sch__validator_avro(const sch_validator_t *v);
const struct sch__json *sch__validator_json(const sch_validator_t *v);

#endif
