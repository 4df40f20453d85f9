/*
 * helper_avro.h: shared helpers for the schema/ unit tests: a hand encoder
 * for Avro binary datums (so tests state the exact bytes a device sends)
 * and compile/validate shorthands that fail the test on unexpected errors.
 */
#ifndef HELPER_AVRO_H
#define HELPER_AVRO_H

#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

typedef struct hbuf {
    uint8_t b[8192];
    size_t n;
} hbuf_t;

/* Zigzag varint, as Avro encodes int, long, lengths and indices. */
void hb_long(hbuf_t *h, int64_t v);
void hb_raw(hbuf_t *h, const void *p, size_t n);
void hb_byte(hbuf_t *h, uint8_t b);
/* Length-prefixed bytes / string. */
void hb_bytes(hbuf_t *h, const void *p, size_t n);
void hb_str(hbuf_t *h, const char *s);
void hb_float(hbuf_t *h, float f);
void hb_double(hbuf_t *h, double d);

/* Compiles an Avro schema (binary or JSON encoding); fails the test if it
 * does not compile, printing the error. */
sch_validator_t *h_avro(const char *schema_json);
sch_validator_t *h_avro_json(const char *schema_json);
/* Compiles and returns the rc; err receives the message. */
int h_avro_rc(const char *schema_json, char *err, size_t errlen);

/* sch_validate shorthands; err is a static buffer valid until the next call. */
int h_check(const sch_validator_t *v, const hbuf_t *h);
int h_check_bytes(const sch_validator_t *v, const void *p, size_t n);
int h_check_json(const sch_validator_t *v, const char *json);
const char *h_err(void);

#endif
