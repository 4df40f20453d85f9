/*
 * test_avro_crosscheck.c: the hand encoder and the walker agree with avro-c's
 * writer (avro_value_write into an avro_writer_memory), so the tests' bytes
 * are real Avro and not just what the walker expects.
 */
#include <avro.h>
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

typedef struct written {
    char buf[4096];
    size_t n;
} written_t;

static void write_value(avro_value_t *v, written_t *out)
{
    avro_writer_t w = avro_writer_memory(out->buf, sizeof out->buf);
    cr_assert_eq(avro_value_write(w, v), 0, "%s", avro_strerror());
    out->n = (size_t)avro_writer_tell(w);
    avro_writer_free(w);
}

Test(avro_crosscheck, zigzag_edges_match_avro_c)
{
    const int64_t vals[] = { 0, -1, 1, 63, -64, 64, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN };
    avro_schema_t s = avro_schema_long();
    avro_value_iface_t *iface = avro_generic_class_from_schema(s);
    for (size_t i = 0; i < TB_ARRAY_LEN(vals); i++) {
        avro_value_t v;
        avro_generic_value_new(iface, &v);
        avro_value_set_long(&v, vals[i]);
        written_t w;
        write_value(&v, &w);
        hbuf_t h = { .n = 0 };
        hb_long(&h, vals[i]);
        cr_assert_eq(w.n, h.n, "length differs for %lld", (long long)vals[i]);
        cr_assert_eq(memcmp(w.buf, h.b, h.n), 0, "bytes differ for %lld", (long long)vals[i]);
        avro_value_decref(&v);
    }
    avro_value_iface_decref(iface);
    avro_schema_decref(s);
}

#define REC                                                                               \
    "{\"type\":\"record\",\"name\":\"T\",\"fields\":["                                     \
    "{\"name\":\"device\",\"type\":\"string\"},"                                          \
    "{\"name\":\"ts\",\"type\":\"long\"},"                                                \
    "{\"name\":\"temp\",\"type\":\"double\"},"                                            \
    "{\"name\":\"ok\",\"type\":\"boolean\"},"                                             \
    "{\"name\":\"mode\",\"type\":{\"type\":\"enum\",\"name\":\"M\",\"symbols\":[\"A\",\"B\"]}}," \
    "{\"name\":\"tags\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"               \
    "{\"name\":\"samples\",\"type\":{\"type\":\"array\",\"items\":\"float\"}},"            \
    "{\"name\":\"note\",\"type\":[\"null\",\"string\"]},"                                 \
    "{\"name\":\"mac\",\"type\":{\"type\":\"fixed\",\"name\":\"Mac\",\"size\":6}}]}"

static void build_record(avro_value_t *rec)
{
    avro_value_t f, item, branch;
    avro_value_get_by_name(rec, "device", &f, NULL);
    avro_value_set_string(&f, "pump-7");
    avro_value_get_by_name(rec, "ts", &f, NULL);
    avro_value_set_long(&f, 1700000000123LL);
    avro_value_get_by_name(rec, "temp", &f, NULL);
    avro_value_set_double(&f, 21.25);
    avro_value_get_by_name(rec, "ok", &f, NULL);
    avro_value_set_boolean(&f, 1);
    avro_value_get_by_name(rec, "mode", &f, NULL);
    avro_value_set_enum(&f, 1);
    avro_value_get_by_name(rec, "tags", &f, NULL);
    avro_value_add(&f, "site", &item, NULL, NULL);
    avro_value_set_string(&item, "north");
    avro_value_get_by_name(rec, "samples", &f, NULL);
    avro_value_append(&f, &item, NULL);
    avro_value_set_float(&item, 1.0f);
    avro_value_append(&f, &item, NULL);
    avro_value_set_float(&item, 2.0f);
    avro_value_get_by_name(rec, "note", &f, NULL);
    avro_value_set_branch(&f, 1, &branch);
    avro_value_set_string(&branch, "fine");
    avro_value_get_by_name(rec, "mac", &f, NULL);
    avro_value_set_fixed(&f, "\x01\x02\x03\x04\x05\x06", 6);
}

static void hand_record(hbuf_t *h)
{
    hb_str(h, "pump-7");
    hb_long(h, 1700000000123LL);
    hb_double(h, 21.25);
    hb_byte(h, 1);
    hb_long(h, 1);
    hb_long(h, 1); hb_str(h, "site"); hb_str(h, "north"); hb_long(h, 0);
    hb_long(h, 2); hb_float(h, 1.0f); hb_float(h, 2.0f); hb_long(h, 0);
    hb_long(h, 1); hb_str(h, "fine");
    hb_raw(h, "\x01\x02\x03\x04\x05\x06", 6);
}

static void avro_c_record(written_t *w)
{
    avro_schema_t s;
    cr_assert_eq(avro_schema_from_json_length(REC, strlen(REC), &s), 0, "%s", avro_strerror());
    avro_value_iface_t *iface = avro_generic_class_from_schema(s);
    avro_value_t rec;
    avro_generic_value_new(iface, &rec);
    build_record(&rec);
    write_value(&rec, w);
    avro_value_decref(&rec);
    avro_value_iface_decref(iface);
    avro_schema_decref(s);
}

Test(avro_crosscheck, record_written_by_avro_c_is_valid)
{
    written_t w;
    avro_c_record(&w);
    sch_validator_t *v = h_avro(REC);
    cr_assert_eq(h_check_bytes(v, w.buf, w.n), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_crosscheck, hand_encoded_record_equals_avro_c_bytes)
{
    written_t w;
    avro_c_record(&w);
    hbuf_t h = { .n = 0 };
    hand_record(&h);
    cr_assert_eq(w.n, h.n);
    cr_assert_eq(memcmp(w.buf, h.b, h.n), 0);
}

Test(avro_crosscheck, record_written_by_avro_c_with_a_byte_cut_is_invalid)
{
    written_t w;
    avro_c_record(&w);
    sch_validator_t *v = h_avro(REC);
    cr_assert_eq(h_check_bytes(v, w.buf, w.n - 1), TB_EINVALID);
    cr_assert(strstr(h_err(), "/mac: truncated fixed Mac"), "%s", h_err());
    sch_validator_unref(v);
}
