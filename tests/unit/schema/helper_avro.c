/*
 * helper_avro.c: the hand encoder and shorthands declared in helper_avro.h.
 * The encoder is written from the Avro specification, independently of the
 * walker under test; test_avro_crosscheck.c checks it against avro-c's
 * writer.
 */
#include "unit/schema/helper_avro.h"

#include <criterion/criterion.h>
#include <string.h>

static char last_err[512];

void hb_raw(hbuf_t *h, const void *p, size_t n)
{
    cr_assert(h->n + n <= sizeof h->b, "test buffer overflow");
    memcpy(h->b + h->n, p, n);
    h->n += n;
}

void hb_byte(hbuf_t *h, uint8_t b)
{
    hb_raw(h, &b, 1);
}

void hb_long(hbuf_t *h, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    do {
        uint8_t b = z & 0x7f;
        z >>= 7;
        hb_byte(h, b | (z ? 0x80 : 0));
    } while (z);
}

void hb_bytes(hbuf_t *h, const void *p, size_t n)
{
    hb_long(h, (int64_t)n);
    hb_raw(h, p, n);
}

void hb_str(hbuf_t *h, const char *s)
{
    hb_bytes(h, s, strlen(s));
}

void hb_float(hbuf_t *h, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        hb_byte(h, (uint8_t)(u >> (8 * i))); /* little-endian */
}

void hb_double(hbuf_t *h, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        hb_byte(h, (uint8_t)(u >> (8 * i)));
}

static sch_validator_t *compile_enc(const char *schema_json, sch_avro_encoding_t enc)
{
    sch_opts_t opts = { .avro_encoding = enc };
    sch_validator_t *v = NULL;
    char err[512] = "";
    int rc = sch_compile(SCH_AVRO, schema_json, strlen(schema_json), &opts, &v, err, sizeof err);
    cr_assert_eq(rc, 0, "schema did not compile: %s\n%s", err, schema_json);
    cr_assert_not_null(v);
    return v;
}

sch_validator_t *h_avro(const char *schema_json)
{
    return compile_enc(schema_json, SCH_AVRO_BINARY);
}

sch_validator_t *h_avro_json(const char *schema_json)
{
    return compile_enc(schema_json, SCH_AVRO_JSON);
}

int h_avro_rc(const char *schema_json, char *err, size_t errlen)
{
    sch_validator_t *v = NULL;
    int rc = sch_compile(SCH_AVRO, schema_json, strlen(schema_json), NULL, &v, err, errlen);
    if (rc == 0)
        cr_assert_not_null(v);
    else
        cr_assert_null(v, "failed compile must leave *out NULL");
    sch_validator_unref(v);
    return rc;
}

int h_check_bytes(const sch_validator_t *v, const void *p, size_t n)
{
    last_err[0] = '\0';
    return sch_validate(v, p, n, last_err, sizeof last_err);
}

int h_check(const sch_validator_t *v, const hbuf_t *h)
{
    return h_check_bytes(v, h->b, h->n);
}

int h_check_json(const sch_validator_t *v, const char *json)
{
    return h_check_bytes(v, json, strlen(json));
}

const char *h_err(void)
{
    return last_err;
}
