/*
 * sch_json.h: the JSON Schema validator's internal interface, as the
 * dispatch in sch_validator.c calls it.
 *
 * The validator itself (schema/sch_json*.c) is written on another branch;
 * this header is the contract both branches agree on, so that the dispatch
 * builds and is tested before the two meet. Until then
 * sch_json_placeholder.c answers every compile with TB_EUNSUPPORTED.
 */
#ifndef SCH_JSON_H
#define SCH_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

typedef struct sch__json sch__json_t;

/* Compiles JSON Schema text. 0 and *out set, or a negative TB_E* code with
 * *out NULL and err filled. */
int sch__json_compile(const char *text, size_t len, const sch_opts_t *opts, sch__json_t **out,
                      char *err, size_t errlen);
/* 0 when valid, TB_EINVALID with err filled when not. Thread-safe. */
int sch__json_validate(const sch__json_t *s, const uint8_t *payload, size_t len, char *err,
                       size_t errlen);
void sch__json_free(sch__json_t *s);

#endif
