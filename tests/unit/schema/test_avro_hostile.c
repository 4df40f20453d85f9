/*
 * test_avro_hostile.c: payloads built to hurt a reader: lengths and counts
 * far past the payload, negative ones, truncation at every byte, trailing
 * bytes, blocks of zero-byte items. Each must be rejected (or accepted, for
 * the valid ones) quickly and without allocating what the payload claims.
 *
 * "Without large allocation" is checked two ways: the time taken (a 2 GB
 * memset or a 2^62 loop would not finish in it) and the peak RSS of the
 * test process (Criterion runs each test in its own process).
 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/resource.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

Test(avro_hostile, ten_byte_payload_claiming_2gb_string_is_rejected_quickly)
{
    sch_validator_t *v = h_avro("\"string\"");
    hbuf_t h = { .n = 0 };
    hb_long(&h, (int64_t)2 << 30); /* 2 GiB: 5 varint bytes */
    hb_raw(&h, "abcde", 5);
    cr_assert_eq(h.n, 10);
    long rss0 = max_rss_kb();
    uint64_t t0 = tb_mono_ns();
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    uint64_t ns = tb_mono_ns() - t0;
    cr_assert(strstr(h_err(), "length 2147483648, 5 bytes left"), "%s", h_err());
    cr_assert_lt(ns, 100 * 1000 * 1000ULL, "took %llu ns", (unsigned long long)ns);
    cr_assert_lt(max_rss_kb() - rss0, 16 * 1024, "RSS grew by %ld kB", max_rss_kb() - rss0);
    sch_validator_unref(v);
}

Test(avro_hostile, bytes_length_of_int64_max_is_rejected)
{
    sch_validator_t *v = h_avro("\"bytes\"");
    hbuf_t h = { .n = 0 };
    hb_long(&h, INT64_MAX);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_hostile, huge_array_block_count_is_rejected_before_looping)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"long\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, (int64_t)1 << 62);
    hb_raw(&h, "\x02\x02\x02", 3);
    uint64_t t0 = tb_mono_ns();
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert_lt(tb_mono_ns() - t0, 100 * 1000 * 1000ULL);
    cr_assert(strstr(h_err(), "block claims 4611686018427387904 items, 3 bytes left"), "%s",
              h_err());
    sch_validator_unref(v);
}

Test(avro_hostile, block_count_larger_than_bytes_of_minimum_sized_records_is_rejected)
{
    /* Each item takes at least 8 + 1 bytes: 3 items cannot fit in 20 bytes. */
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"R\","
                                "\"fields\":[{\"name\":\"d\",\"type\":\"double\"},"
                                "{\"name\":\"b\",\"type\":\"boolean\"}]}}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 3);
    hb_raw(&h, "01234567890123456789", 20);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "block claims 3 items"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_hostile, huge_map_block_count_is_rejected)
{
    sch_validator_t *v = h_avro("{\"type\":\"map\",\"values\":\"null\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, INT64_MAX);
    hb_raw(&h, "\x02" "a", 2);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_hostile, block_count_int64_min_is_rejected)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"int\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, INT64_MIN);
    hb_long(&h, 1);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "block count out of range"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_hostile, negative_block_byte_size_is_rejected)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"int\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, -1);
    hb_long(&h, -5);
    hb_long(&h, 1);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "negative length"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_hostile, array_of_nulls_with_huge_count_is_checked_in_constant_time)
{
    /* Valid by the specification: 2^62 nulls take zero bytes. A reader that
     * loops per item (avro-c: 1.3 GB and 7-14 s before it gave up) would time out. */
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"null\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, (int64_t)1 << 62);
    hb_long(&h, 0);
    uint64_t t0 = tb_mono_ns();
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    cr_assert_lt(tb_mono_ns() - t0, 100 * 1000 * 1000ULL);
    sch_validator_unref(v);
}

Test(avro_hostile, deep_recursive_nesting_is_rejected_without_exhausting_the_stack)
{
    /* Recursive schema: each level costs 1 byte of payload, so a payload of
     * a few hundred kB could otherwise nest deep enough to overflow a
     * recursive reader's stack. */
    sch_validator_t *v = h_avro("{\"type\":\"record\",\"name\":\"T\",\"fields\":["
                                "{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"T\"}}]}");
    static hbuf_t h;
    h.n = 0;
    for (int i = 0; i < 4000; i++)
        hb_long(&h, 1); /* one child, which has one child, ... */
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "nested deeper than"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_hostile, union_index_of_int64_max_is_rejected)
{
    sch_validator_t *v = h_avro("[\"null\",\"int\"]");
    hbuf_t h = { .n = 0 };
    hb_long(&h, INT64_MAX);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    sch_validator_unref(v);
}

#define TELEMETRY                                                                      \
    "{\"type\":\"record\",\"name\":\"Telemetry\",\"namespace\":\"edge\",\"fields\":["  \
    "{\"name\":\"device\",\"type\":\"string\"},"                                       \
    "{\"name\":\"ts\",\"type\":\"long\"},"                                             \
    "{\"name\":\"temp\",\"type\":\"double\"},"                                         \
    "{\"name\":\"ok\",\"type\":\"boolean\"},"                                          \
    "{\"name\":\"mode\",\"type\":{\"type\":\"enum\",\"name\":\"Mode\",\"symbols\":[\"A\",\"B\"]}}," \
    "{\"name\":\"tags\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"            \
    "{\"name\":\"samples\",\"type\":{\"type\":\"array\",\"items\":\"float\"}},"         \
    "{\"name\":\"note\",\"type\":[\"null\",\"string\"]},"                              \
    "{\"name\":\"mac\",\"type\":{\"type\":\"fixed\",\"name\":\"Mac\",\"size\":6}}]}"

static void telemetry(hbuf_t *h)
{
    hb_str(h, "pump-7");
    hb_long(h, 1700000000123LL);
    hb_double(h, 21.25);
    hb_byte(h, 1);
    hb_long(h, 1);
    hb_long(h, 1); hb_str(h, "site"); hb_str(h, "north"); hb_long(h, 0);
    hb_long(h, -2); hb_long(h, 8); hb_float(h, 1.0f); hb_float(h, 2.0f); hb_long(h, 0);
    hb_long(h, 1); hb_str(h, "fine");
    hb_raw(h, "\x01\x02\x03\x04\x05\x06", 6);
}

Test(avro_hostile, every_truncation_of_a_valid_datum_is_invalid)
{
    sch_validator_t *v = h_avro(TELEMETRY);
    hbuf_t h = { .n = 0 };
    telemetry(&h);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    for (size_t n = 0; n < h.n; n++)
        cr_assert_eq(h_check_bytes(v, h.b, n), TB_EINVALID, "prefix of %zu/%zu bytes accepted", n,
                     h.n);
    sch_validator_unref(v);
}

Test(avro_hostile, every_trailing_byte_value_after_a_valid_datum_is_invalid)
{
    sch_validator_t *v = h_avro(TELEMETRY);
    hbuf_t h = { .n = 0 };
    telemetry(&h);
    h.n++;
    for (int b = 0; b < 256; b++) {
        h.b[h.n - 1] = (uint8_t)b;
        cr_assert_eq(h_check(v, &h), TB_EINVALID, "trailing 0x%02x accepted", b);
    }
    cr_assert(strstr(h_err(), "1 trailing bytes after the datum"), "%s", h_err());
    sch_validator_unref(v);
}
