/*
 * helper_json.h: shorthands for the JSON Schema unit tests (test_json_*.c),
 * so each test reads as "this schema, this payload, this answer".
 */
#ifndef TEST_HELPER_JSON_H
#define TEST_HELPER_JSON_H

#include <stdbool.h>

#include "base/base.h"
#include "schema/sch_json.h"

/* Compiles or fails the test with the compiler's message. */
sch__json_t *js_compile(const char *schema);
sch__json_t *js_compile_opts(const char *schema, const sch_opts_t *opts);
/* Compile return code; the message goes to err (may be NULL). */
int js_compile_rc(const char *schema, const sch_opts_t *opts, char *err, size_t errlen);
/* Validates payload text; returns true when valid. The message goes to the
 * helper's buffer, read with js_err(). */
bool js_valid(const sch__json_t *s, const char *payload);
const char *js_err(void);
/* One-shot: compile, validate, free. */
bool js_check(const char *schema, const char *payload);
/* A resolver over a fixed table of (uri, text) pairs, NULL-terminated. */
const char *js_table_resolve(void *arg, const char *uri, size_t *len);

#endif
