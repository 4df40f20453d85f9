/*
 * test_avro_complex.c: Avro binary encoding of record, enum, array, map,
 * union and fixed, nested, recursive, and logical types (validated as their
 * underlying type); errors name the path of the failing value.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

#define POINT "{\"type\":\"record\",\"name\":\"Point\",\"fields\":[" \
              "{\"name\":\"x\",\"type\":\"int\"},{\"name\":\"label\",\"type\":\"string\"}]}"

Test(avro_complex, record_fields_in_order_are_valid)
{
    sch_validator_t *v = h_avro(POINT);
    hbuf_t h = { .n = 0 };
    hb_long(&h, -7);
    hb_str(&h, "p1");
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, record_error_names_the_field)
{
    sch_validator_t *v = h_avro(POINT);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 1);
    hb_bytes(&h, "\xff", 1);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "/label: string is not valid UTF-8"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, nested_record_error_gives_the_full_path_and_byte)
{
    sch_validator_t *v = h_avro("{\"type\":\"record\",\"name\":\"Outer\",\"fields\":["
                                "{\"name\":\"id\",\"type\":\"long\"},"
                                "{\"name\":\"pos\",\"type\":" POINT "}]}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 5);      /* id: 1 byte */
    hb_long(&h, 3);      /* pos.x: 1 byte */
    hb_byte(&h, 0x0a);   /* pos.label: length 5, nothing follows */
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "/pos/label: truncated string"), "%s", h_err());
    cr_assert(strstr(h_err(), "at byte 2"), "%s", h_err());
    sch_validator_unref(v);
}

#define COLOR "{\"type\":\"enum\",\"name\":\"Color\",\"symbols\":[\"RED\",\"GREEN\",\"BLUE\"]}"

Test(avro_complex, enum_index_within_symbols_is_valid)
{
    sch_validator_t *v = h_avro(COLOR);
    cr_assert_eq(h_check_bytes(v, "\x00", 1), 0);
    cr_assert_eq(h_check_bytes(v, "\x04", 1), 0); /* 2: BLUE */
    sch_validator_unref(v);
}

Test(avro_complex, enum_index_past_symbols_is_invalid)
{
    sch_validator_t *v = h_avro(COLOR);
    cr_assert_eq(h_check_bytes(v, "\x06", 1), TB_EINVALID); /* 3 */
    cr_assert(strstr(h_err(), "index 3 out of range (3 symbols)"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, enum_negative_index_is_invalid)
{
    sch_validator_t *v = h_avro(COLOR);
    cr_assert_eq(h_check_bytes(v, "\x01", 1), TB_EINVALID); /* -1 */
    sch_validator_unref(v);
}

#define INTS "{\"type\":\"array\",\"items\":\"int\"}"

Test(avro_complex, array_in_several_blocks_is_valid)
{
    sch_validator_t *v = h_avro(INTS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 2); hb_long(&h, 10); hb_long(&h, 20);
    hb_long(&h, 1); hb_long(&h, 30);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, empty_array_is_one_zero_byte)
{
    sch_validator_t *v = h_avro(INTS);
    cr_assert_eq(h_check_bytes(v, "\x00", 1), 0);
    sch_validator_unref(v);
}

Test(avro_complex, array_without_end_marker_is_invalid)
{
    sch_validator_t *v = h_avro(INTS);
    cr_assert_eq(h_check_bytes(v, "\x02\x02", 2), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_complex, negative_block_count_with_matching_byte_size_is_valid)
{
    sch_validator_t *v = h_avro(INTS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, -2); hb_long(&h, 3); /* 2 items in 3 bytes */
    hb_long(&h, 1); hb_long(&h, 100); /* 100 takes 2 bytes */
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, block_byte_size_that_disagrees_with_items_is_invalid)
{
    sch_validator_t *v = h_avro(INTS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, -2); hb_long(&h, 2);
    hb_long(&h, 1); hb_long(&h, 100);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "block byte size says 2 bytes, its items took 3"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, array_error_gives_the_item_index_across_blocks)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"string\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 2); hb_str(&h, "a"); hb_str(&h, "b");
    hb_long(&h, 2); hb_str(&h, "c"); hb_bytes(&h, "\xc0", 1);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "/3: string is not valid UTF-8"), "%s", h_err());
    sch_validator_unref(v);
}

#define TAGS "{\"type\":\"map\",\"values\":\"double\"}"

Test(avro_complex, map_of_entries_is_valid)
{
    sch_validator_t *v = h_avro(TAGS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 2);
    hb_str(&h, "t"); hb_double(&h, 1.5);
    hb_str(&h, "rh"); hb_double(&h, 40.0);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, map_error_gives_the_key)
{
    sch_validator_t *v = h_avro(TAGS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 1);
    hb_str(&h, "humidity"); hb_raw(&h, "\0\0\0", 3);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "/humidity: truncated double"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, map_key_must_be_utf8)
{
    sch_validator_t *v = h_avro(TAGS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 1);
    hb_bytes(&h, "\xff", 1); hb_double(&h, 1.0);
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "map key is not valid UTF-8"), "%s", h_err());
    sch_validator_unref(v);
}

#define OPT "[\"null\",\"string\",\"long\"]"

Test(avro_complex, union_branch_index_picks_the_type)
{
    sch_validator_t *v = h_avro(OPT);
    hbuf_t a = { .n = 0 }, b = { .n = 0 }, c = { .n = 0 };
    hb_long(&a, 0);
    hb_long(&b, 1); hb_str(&b, "x");
    hb_long(&c, 2); hb_long(&c, -1);
    cr_assert_eq(h_check(v, &a), 0);
    cr_assert_eq(h_check(v, &b), 0);
    cr_assert_eq(h_check(v, &c), 0);
    sch_validator_unref(v);
}

Test(avro_complex, union_branch_index_past_branches_is_invalid)
{
    sch_validator_t *v = h_avro(OPT);
    cr_assert_eq(h_check_bytes(v, "\x06", 1), TB_EINVALID);
    cr_assert(strstr(h_err(), "union index 3 out of range (3 branches)"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, union_negative_branch_index_is_invalid)
{
    sch_validator_t *v = h_avro(OPT);
    cr_assert_eq(h_check_bytes(v, "\x01", 1), TB_EINVALID);
    sch_validator_unref(v);
}

Test(avro_complex, union_value_must_match_the_chosen_branch)
{
    sch_validator_t *v = h_avro(OPT);
    cr_assert_eq(h_check_bytes(v, "\x02\x04" "a", 3), TB_EINVALID); /* string of 2, 1 byte */
    sch_validator_unref(v);
}

#define MAC "{\"type\":\"fixed\",\"name\":\"Mac\",\"size\":6}"

Test(avro_complex, fixed_takes_exactly_its_size)
{
    sch_validator_t *v = h_avro(MAC);
    cr_assert_eq(h_check_bytes(v, "\x00\x11\x22\x33\x44\x55", 6), 0);
    sch_validator_unref(v);
}

Test(avro_complex, fixed_short_is_invalid)
{
    sch_validator_t *v = h_avro(MAC);
    cr_assert_eq(h_check_bytes(v, "\x00\x11\x22\x33\x44", 5), TB_EINVALID);
    cr_assert(strstr(h_err(), "truncated fixed Mac: needs 6 bytes, 5 left"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, fixed_long_is_invalid)
{
    sch_validator_t *v = h_avro(MAC);
    cr_assert_eq(h_check_bytes(v, "\x00\x11\x22\x33\x44\x55\x66", 7), TB_EINVALID);
    sch_validator_unref(v);
}

#define LIST "{\"type\":\"record\",\"name\":\"Node\",\"fields\":[" \
             "{\"name\":\"v\",\"type\":\"int\"},{\"name\":\"next\",\"type\":[\"null\",\"Node\"]}]}"

static void linked_list(hbuf_t *h, int n)
{
    for (int i = 0; i < n; i++) {
        hb_long(h, i);
        hb_long(h, i + 1 < n ? 1 : 0);
    }
}

Test(avro_complex, recursive_record_is_valid)
{
    sch_validator_t *v = h_avro(LIST);
    hbuf_t h = { .n = 0 };
    linked_list(&h, 10);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, nesting_past_the_depth_limit_is_invalid)
{
    sch_validator_t *v = h_avro(LIST);
    hbuf_t h = { .n = 0 };
    linked_list(&h, 200); /* 400 levels: record, union, record, ... */
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "nested deeper than 128 levels"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, named_type_reused_by_name_is_valid)
{
    sch_validator_t *v = h_avro("{\"type\":\"record\",\"name\":\"Line\",\"fields\":["
                                "{\"name\":\"a\",\"type\":" POINT "},"
                                "{\"name\":\"b\",\"type\":\"Point\"}]}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 1); hb_str(&h, "a");
    hb_long(&h, 2); hb_str(&h, "b");
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    h.n--; /* cut b.label */
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    cr_assert(strstr(h_err(), "/b/label"), "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, nested_array_of_maps_of_unions_is_valid)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":{\"type\":\"map\",\"values\":"
                                "[\"null\",\"int\"," COLOR "]}}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 1);          /* one map */
    hb_long(&h, 3);          /* three entries */
    hb_str(&h, "a"); hb_long(&h, 0);
    hb_str(&h, "b"); hb_long(&h, 1); hb_long(&h, 42);
    hb_str(&h, "c"); hb_long(&h, 2); hb_long(&h, 1);
    hb_long(&h, 0);          /* end of map */
    hb_long(&h, 0);          /* end of array */
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, logical_types_validate_as_their_underlying_type)
{
    sch_validator_t *v = h_avro(
        "{\"type\":\"record\",\"name\":\"L\",\"fields\":["
        "{\"name\":\"day\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
        "{\"name\":\"ts\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
        "{\"name\":\"id\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}},"
        "{\"name\":\"amount\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\","
        "\"precision\":9,\"scale\":2}},"
        "{\"name\":\"dur\",\"type\":{\"type\":\"fixed\",\"name\":\"D\",\"size\":12,"
        "\"logicalType\":\"duration\"}}]}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, 19000);
    hb_long(&h, 1700000000000LL);
    hb_str(&h, "123e4567-e89b-12d3-a456-426614174000");
    hb_bytes(&h, "\x01\x2c", 2);
    hb_raw(&h, "012345678901", 12);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, logical_date_out_of_int_range_is_invalid)
{
    sch_validator_t *v = h_avro("{\"type\":\"int\",\"logicalType\":\"date\"}");
    hbuf_t h = { .n = 0 };
    hb_long(&h, (int64_t)1 << 40);
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    sch_validator_unref(v);
}

#define POINTS "{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"XY\"," \
               "\"fields\":[{\"name\":\"x\",\"type\":\"float\"},{\"name\":\"y\",\"type\":\"double\"}]}}"

Test(avro_complex, array_of_fixed_width_records_is_valid)
{
    sch_validator_t *v = h_avro(POINTS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 3);
    for (int i = 0; i < 3; i++) {
        hb_float(&h, (float)i);
        hb_double(&h, -i);
    }
    hb_long(&h, 0);
    cr_assert_eq(h_check(v, &h), 0, "%s", h_err());
    sch_validator_unref(v);
}

Test(avro_complex, array_of_fixed_width_records_one_byte_short_is_invalid)
{
    sch_validator_t *v = h_avro(POINTS);
    hbuf_t h = { .n = 0 };
    hb_long(&h, 2);
    hb_raw(&h, "0123456789ab" "0123456789a", 23); /* 2 x 12 bytes, one missing */
    cr_assert_eq(h_check(v, &h), TB_EINVALID);
    sch_validator_unref(v);
}
