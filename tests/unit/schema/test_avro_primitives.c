/*
 * test_avro_primitives.c: Avro binary encoding of the primitive types, the
 * zigzag varint edges, and the datum-must-fill-the-payload rule. Datums are
 * hand-encoded from the specification (helper_avro.c).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

static int check_raw(const char *schema, const char *bytes, size_t n)
{
    sch_validator_t *v = h_avro(schema);
    int rc = h_check_bytes(v, bytes, n);
    sch_validator_unref(v);
    return rc;
}

static int check_long(const char *schema, int64_t x)
{
    hbuf_t h = { .n = 0 };
    hb_long(&h, x);
    sch_validator_t *v = h_avro(schema);
    int rc = h_check(v, &h);
    sch_validator_unref(v);
    return rc;
}

Test(avro_primitives, null_is_the_empty_payload)
{
    cr_assert_eq(check_raw("\"null\"", "", 0), 0);
}

Test(avro_primitives, null_with_a_byte_is_invalid)
{
    cr_assert_eq(check_raw("\"null\"", "\0", 1), TB_EINVALID);
}

Test(avro_primitives, boolean_accepts_0_and_1)
{
    cr_assert_eq(check_raw("\"boolean\"", "\x00", 1), 0);
    cr_assert_eq(check_raw("\"boolean\"", "\x01", 1), 0);
}

Test(avro_primitives, boolean_rejects_other_bytes)
{
    cr_assert_eq(check_raw("\"boolean\"", "\x02", 1), TB_EINVALID);
}

Test(avro_primitives, int_accepts_int32_min_and_max)
{
    /* zigzag(INT32_MAX) = 0xfffffffe, zigzag(INT32_MIN) = 0xffffffff */
    cr_assert_eq(check_raw("\"int\"", "\xfe\xff\xff\xff\x0f", 5), 0);
    cr_assert_eq(check_raw("\"int\"", "\xff\xff\xff\xff\x0f", 5), 0);
    cr_assert_eq(check_long("\"int\"", INT32_MAX), 0);
    cr_assert_eq(check_long("\"int\"", INT32_MIN), 0);
}

Test(avro_primitives, int_rejects_values_past_32_bits)
{
    cr_assert_eq(check_long("\"int\"", (int64_t)INT32_MAX + 1), TB_EINVALID);
    cr_assert_eq(check_long("\"int\"", (int64_t)INT32_MIN - 1), TB_EINVALID);
}

Test(avro_primitives, int_rejects_a_sixth_varint_byte)
{
    cr_assert_eq(check_raw("\"int\"", "\x80\x80\x80\x80\x80\x00", 6), TB_EINVALID);
    cr_assert(strstr(h_err(), "longer than 5 bytes"), "%s", h_err());
}

Test(avro_primitives, long_accepts_int64_min_and_max)
{
    cr_assert_eq(check_raw("\"long\"", "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10), 0);
    cr_assert_eq(check_raw("\"long\"", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10), 0);
    cr_assert_eq(check_long("\"long\"", INT64_MAX), 0);
    cr_assert_eq(check_long("\"long\"", INT64_MIN), 0);
}

Test(avro_primitives, long_rejects_varint_longer_than_10_bytes)
{
    cr_assert_eq(check_raw("\"long\"", "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11),
                 TB_EINVALID);
    cr_assert(strstr(h_err(), "longer than 10 bytes"), "%s", h_err());
}

Test(avro_primitives, long_rejects_tenth_byte_overflowing_64_bits)
{
    cr_assert_eq(check_raw("\"long\"", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10), TB_EINVALID);
    cr_assert(strstr(h_err(), "overflows 64 bits"), "%s", h_err());
}

Test(avro_primitives, non_minimal_varint_within_length_is_accepted)
{
    /* 0 written in two bytes: Avro's reference readers accept it, so do we. */
    cr_assert_eq(check_raw("\"long\"", "\x80\x00", 2), 0);
}

Test(avro_primitives, varint_cut_after_continuation_byte_is_invalid)
{
    cr_assert_eq(check_raw("\"long\"", "\x80", 1), TB_EINVALID);
    cr_assert(strstr(h_err(), "truncated long"), "%s", h_err());
}

Test(avro_primitives, float_is_4_bytes)
{
    hbuf_t h = { .n = 0 };
    hb_float(&h, 21.5f);
    sch_validator_t *v = h_avro("\"float\"");
    cr_assert_eq(h_check(v, &h), 0);
    cr_assert_eq(h_check_bytes(v, h.b, 3), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_primitives, double_is_8_bytes)
{
    hbuf_t h = { .n = 0 };
    hb_double(&h, -1e300);
    sch_validator_t *v = h_avro("\"double\"");
    cr_assert_eq(h_check(v, &h), 0);
    cr_assert_eq(h_check_bytes(v, h.b, 7), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_primitives, bytes_accepts_any_content)
{
    hbuf_t h = { .n = 0 };
    hb_bytes(&h, "\xff\x00\xfe", 3);
    sch_validator_t *v = h_avro("\"bytes\"");
    cr_assert_eq(h_check(v, &h), 0);
    sch_validator_unref(v);
}

Test(avro_primitives, bytes_rejects_negative_length)
{
    cr_assert_eq(check_raw("\"bytes\"", "\x01" "abc", 4), TB_EINVALID);
    cr_assert(strstr(h_err(), "negative length"), "%s", h_err());
}

Test(avro_primitives, string_accepts_utf8)
{
    hbuf_t h = { .n = 0 };
    hb_str(&h, "caf\xc3\xa9");
    sch_validator_t *v = h_avro("\"string\"");
    cr_assert_eq(h_check(v, &h), 0);
    sch_validator_unref(v);
}

Test(avro_primitives, string_rejects_invalid_utf8)
{
    hbuf_t h = { .n = 0 };
    hb_bytes(&h, "ab\xed\xa0\x80", 5); /* a UTF-16 surrogate */
    sch_validator_t *v = h_avro("\"string\"");
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "UTF-8"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_primitives, string_longer_than_payload_is_invalid)
{
    cr_assert_eq(check_raw("\"string\"", "\x0a" "abc", 4), TB_EINVALID);
    cr_assert(strstr(h_err(), "length 5, 3 bytes left"), "%s", h_err());
}

Test(avro_primitives, trailing_bytes_are_invalid)
{
    cr_assert_eq(check_raw("\"int\"", "\x02\x00", 2), TB_EINVALID);
    cr_assert(strstr(h_err(), "1 trailing bytes"), "%s", h_err());
}

Test(avro_primitives, empty_payload_is_invalid_for_int)
{
    cr_assert_eq(check_raw("\"int\"", "", 0), TB_EINVALID);
}

Test(avro_primitives, primitive_in_object_form_compiles)
{
    cr_assert_eq(check_raw("{\"type\": \"int\"}", "\x02", 1), 0);
}
