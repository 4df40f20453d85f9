/* test_format.c: the byte-level rules of wal_format.h, without threads or files. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "wal/wal_int.h"

static const wal_attr_t attrs[] = {
    { (const uint8_t *)"site", 4, (const uint8_t *)"north", 5 },
    { (const uint8_t *)"mqtt.user.k", 11, (const uint8_t *)"", 0 },
};

static wal_msg_t sample(void)
{
    return (wal_msg_t){
        .payload = (const uint8_t *)"{\"t\":21.5}", .payload_len = 10,
        .attrs = attrs, .nattrs = 2,
        .mqtt_topic = "plant/line1/temp", .mqtt_topic_len = 16,
        .publish_time_ms = 1700000000123ull, .qos = 2, .retain = true,
        .has_schema = true, .schema_id = 42, .schema_version = 3,
    };
}

static size_t encode(uint8_t *buf, const wal_msg_t *m, uint64_t off, uint32_t seed)
{
    size_t n = wal__rec_size(m);
    wal__rec_encode(buf, m, n);
    wal__rec_seal(buf, off, seed);
    return n;
}

Test(format, record_round_trips_every_field)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 77, 0xABCD);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, n, n, 0xABCD, WAL_FORMAT_VERSION, 77, &rec), WAL_REC_OK);
    wal_record_t r;
    wal__rec_view(&rec, buf, &r);
    cr_assert_eq(r.offset, 77);
    cr_assert_eq(r.publish_time_ms, 1700000000123ull);
    cr_assert(r.qos == 2 && r.retain && r.has_schema && r.schema_id == 42 && r.schema_version == 3);
    cr_assert(r.mqtt_topic_len == 16 && memcmp(r.mqtt_topic, "plant/line1/temp", 16) == 0);
    cr_assert(r.payload_len == 10 && memcmp(r.payload, "{\"t\":21.5}", 10) == 0);
    size_t pos = 0;
    wal_attr_t a;
    cr_assert(wal_record_attr_next(&r, &pos, &a));
    cr_assert(a.key_len == 4 && memcmp(a.key, "site", 4) == 0 && a.val_len == 5 && memcmp(a.val, "north", 5) == 0);
    cr_assert(wal_record_attr_next(&r, &pos, &a));
    cr_assert(a.key_len == 11 && a.val_len == 0);
    cr_assert_not(wal_record_attr_next(&r, &pos, &a));
    cr_assert_eq(r.raw_len, n);
}

Test(format, record_head_is_28_bytes)
{
    uint8_t payload[100] = { 0 };
    wal_msg_t m = { .payload = payload, .payload_len = 100 };
    cr_assert_eq(wal__rec_size(&m), 128);
    m.has_schema = true;
    cr_assert_eq(wal__rec_size(&m), 140);
}

Test(format, record_from_another_segment_salt_does_not_validate)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 5, wal__crc32c(0, "\x01\x02\x03\x04", 4));
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, n, n, wal__crc32c(0, "\x01\x02\x03\x05", 4), WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD);
}

Test(format, record_at_unexpected_offset_does_not_validate)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 5, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 6, &rec), WAL_REC_BAD);
}

Test(format, any_single_flipped_bit_invalidates_a_record)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 5, 9);
    for (size_t bit = 0; bit < n * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        wal_rec_t rec;
        cr_assert_neq(wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_OK, "bit %zu", bit);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

Test(format, truncated_record_needs_more_or_is_torn)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 5, 9);
    wal_rec_t rec;
    for (size_t cut = 0; cut < n; cut++) {
        cr_assert_eq(wal__rec_decode(buf, cut, UINT64_MAX, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_SHORT, "cut %zu", cut);
        cr_assert_eq(wal__rec_decode(buf, cut, cut, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD, "cut %zu at end of file", cut);
    }
}

Test(format, record_with_reserved_flag_bits_is_rejected)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = wal__rec_size(&m);
    for (unsigned bit = 5; bit < 8; bit++) {
        wal__rec_encode(buf, &m, n);
        buf[24] |= (uint8_t)(1u << bit);
        wal__rec_seal(buf, 5, 9); /* a valid CRC over the bad flags */
        wal_rec_t rec;
        cr_assert_eq(wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD, "bit %u", bit);
    }
}

Test(format, version_1_segment_reserves_the_padding_bit)
{
    uint8_t buf[64];
    wal__pad_encode(buf, sizeof buf, 5, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, sizeof buf, sizeof buf, 9, 1, 5, &rec), WAL_REC_BAD);
}

Test(format, message_record_of_version_1_reads_the_same_in_version_2)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = encode(buf, &m, 5, 9);
    wal_rec_t v1, v2;
    cr_assert_eq(wal__rec_decode(buf, n, n, 9, 1, 5, &v1), WAL_REC_OK);
    cr_assert_eq(wal__rec_decode(buf, n, n, 9, 2, 5, &v2), WAL_REC_OK);
    cr_assert_eq(memcmp(&v1, &v2, sizeof v1), 0);
}

/* ---- padding records ---------------------------------------------------- */

Test(format, padding_record_is_recognised_and_takes_no_offset)
{
    uint8_t buf[1000];
    wal__pad_encode(buf, sizeof buf, 42, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, sizeof buf, sizeof buf, 9, WAL_FORMAT_VERSION, 42, &rec), WAL_REC_PAD);
    cr_assert_eq(rec.len, sizeof buf);
    cr_assert_eq(rec.offset, 42, "it names the offset of the record after it");
}

Test(format, padding_record_layout_is_as_specified)
{
    uint8_t buf[100];
    memset(buf, 0xAA, sizeof buf);
    wal__pad_encode(buf, sizeof buf, 42, 9);
    cr_assert_eq(wal__ld32(buf), 100);
    cr_assert_eq(wal__ld32(buf + 4), wal__crc32c(9, buf + 8, 92));
    cr_assert_eq(wal__ld64(buf + 8), 42);
    cr_assert_eq(wal__ld64(buf + 16), 0);
    cr_assert(buf[24] == WAL_FLAG_PAD && buf[25] == 0 && wal__ld16(buf + 26) == 0);
    for (size_t i = 28; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0, "byte %zu", i);
}

Test(format, any_single_flipped_bit_invalidates_a_padding_record)
{
    uint8_t buf[64];
    wal__pad_encode(buf, sizeof buf, 5, 9);
    for (size_t bit = 0; bit < sizeof buf * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        wal_rec_t rec;
        int d = wal__rec_decode(buf, sizeof buf, sizeof buf, 9, WAL_FORMAT_VERSION, 5, &rec);
        cr_assert_eq(d, WAL_REC_BAD, "bit %zu", bit);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

Test(format, padding_record_of_another_salt_or_place_does_not_validate)
{
    uint8_t buf[64];
    wal__pad_encode(buf, sizeof buf, 5, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, sizeof buf, sizeof buf, 10, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD);
    cr_assert_eq(wal__rec_decode(buf, sizeof buf, sizeof buf, 9, WAL_FORMAT_VERSION, 6, &rec), WAL_REC_BAD);
}

Test(format, torn_padding_record_needs_more_or_is_torn)
{
    uint8_t buf[300];
    wal__pad_encode(buf, sizeof buf, 5, 9);
    wal_rec_t rec;
    for (size_t cut = 0; cut < sizeof buf; cut++) {
        cr_assert_eq(wal__rec_decode(buf, cut, UINT64_MAX, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_SHORT, "cut %zu", cut);
        cr_assert_eq(wal__rec_decode(buf, cut, cut, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD, "cut %zu at end", cut);
    }
}

Test(format, zeros_are_never_padding)
{
    uint8_t buf[4096] = { 0 };
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, sizeof buf, sizeof buf, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD);
}

/* Seals buf (a padding record whose head was then edited) with a valid CRC. */
static int decode_edited(uint8_t *buf, size_t n)
{
    wal__rec_seal(buf, 5, 9);
    wal_rec_t rec;
    return wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 5, &rec);
}

Test(format, padding_flag_with_other_flags_or_fields_is_rejected)
{
    uint8_t buf[64];
    wal__pad_encode(buf, sizeof buf, 5, 9);
    buf[24] |= 0x01; /* padding and QoS 1 */
    cr_assert_eq(decode_edited(buf, sizeof buf), WAL_REC_BAD);
    wal__pad_encode(buf, sizeof buf, 5, 9);
    buf[25] = 1; /* an attribute */
    cr_assert_eq(decode_edited(buf, sizeof buf), WAL_REC_BAD);
    wal__pad_encode(buf, sizeof buf, 5, 9);
    wal__st16(buf + 26, 1); /* a topic */
    cr_assert_eq(decode_edited(buf, sizeof buf), WAL_REC_BAD);
}

Test(format, padding_longer_than_64_kib_is_rejected)
{
    size_t n = WAL_PAD_MAX + 1;
    uint8_t *buf = malloc(n);
    wal__pad_encode(buf, (uint32_t)n, 5, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD);
    wal__pad_encode(buf, WAL_PAD_MAX, 5, 9);
    cr_assert_eq(wal__rec_decode(buf, WAL_PAD_MAX, WAL_PAD_MAX, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_PAD);
    free(buf);
}

Test(format, attributes_overrunning_the_record_are_rejected)
{
    wal_msg_t m = sample();
    uint8_t buf[256];
    size_t n = wal__rec_size(&m);
    wal__rec_encode(buf, &m, n);
    buf[25] = 200; /* claims 200 attributes */
    wal__rec_seal(buf, 5, 9);
    wal_rec_t rec;
    cr_assert_eq(wal__rec_decode(buf, n, n, 9, WAL_FORMAT_VERSION, 5, &rec), WAL_REC_BAD);
}

Test(format, segment_header_round_trips)
{
    wal_seghdr_t h = { .base = 12345678901234ull, .created_ms = 1700000000000ull, .salt = 0xDEADBEEF }, g;
    uint8_t b[WAL_SEG_HDR_SIZE];
    wal__seghdr_encode(b, &h);
    cr_assert_eq(wal__seghdr_decode(b, &g), 0);
    cr_assert(g.base == h.base && g.created_ms == h.created_ms && g.salt == h.salt);
    cr_assert_eq(g.seed, wal__crc32c(0, b + 24, 4));
}

Test(format, segment_header_with_bad_magic_is_corrupt)
{
    wal_seghdr_t h = { .base = 1 }, g;
    uint8_t b[WAL_SEG_HDR_SIZE];
    wal__seghdr_encode(b, &h);
    b[0] = 'X';
    cr_assert_eq(wal__seghdr_decode(b, &g), TB_ECORRUPT);
}

/* A header of version v, CRC recomputed, decoded. */
static int header_of_version(uint16_t v, wal_seghdr_t *g)
{
    wal_seghdr_t h = { .base = 1 };
    uint8_t b[WAL_SEG_HDR_SIZE];
    wal__seghdr_encode(b, &h);
    wal__st16(b + 4, v);
    wal__st32(b + 28, wal__crc32c(0, b, 28));
    return wal__seghdr_decode(b, g);
}

Test(format, segment_header_of_an_unknown_version_is_unsupported)
{
    wal_seghdr_t g;
    cr_assert_eq(header_of_version(WAL_FORMAT_VERSION + 1, &g), TB_EUNSUPPORTED);
    cr_assert_eq(header_of_version(0, &g), TB_EUNSUPPORTED);
}

Test(format, segment_header_of_version_1_is_still_read)
{
    wal_seghdr_t g;
    cr_assert_eq(header_of_version(1, &g), 0);
    cr_assert_eq(g.version, 1);
}

Test(format, new_segment_headers_carry_the_current_version)
{
    wal_seghdr_t h = { .base = 1, .version = 1 }, g;
    uint8_t b[WAL_SEG_HDR_SIZE];
    wal__seghdr_encode(b, &h);
    cr_assert_eq(wal__ld16(b + 4), WAL_FORMAT_VERSION);
    cr_assert_eq(wal__seghdr_decode(b, &g), 0);
    cr_assert_eq(g.version, WAL_FORMAT_VERSION);
}

Test(format, meta_round_trips_in_version_1_while_the_new_fields_are_zero)
{
    wal_meta_t m = { .floor = 10, .checkpoint = 20, .dropped = 30, .quarantined = 2, .lost = 1 }, g;
    uint8_t b[WAL_META_MAX];
    unsigned v;
    cr_assert_eq(wal__meta_version(&m), 1);
    size_t n = wal__meta_encode(b, &m);
    cr_assert_eq(n, WAL_META_V1_SIZE);
    cr_assert(wal__ld16(b + 4) == 1 && wal__ld16(b + 6) == 64);
    cr_assert_eq(wal__meta_decode(b, n, &g, &v), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(memcmp(&m, &g, sizeof m), 0);
    b[9] ^= 1;
    cr_assert_eq(wal__meta_decode(b, n, &g, &v), TB_ECORRUPT);
    cr_assert_eq(v, 0);
}

Test(format, meta_round_trips_in_version_2_when_a_new_field_is_set)
{
    const wal_meta_t ms[] = {
        { .floor = 10, .checkpoint = 20, .dropped = 30, .quarantined = 2, .lost = 1, .reserved = 1ull << 40 },
        { .floor = 10, .checkpoint = 20, .dropped = 30, .quarantined = 2, .lost = 1, .dropped_age = 99 },
        { .floor = 1, .reserved = WAL_OFFSET_MAX, .dropped_age = UINT64_MAX },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(ms); i++) {
        wal_meta_t g;
        uint8_t b[WAL_META_MAX];
        unsigned v;
        cr_assert_eq(wal__meta_version(&ms[i]), 2);
        size_t n = wal__meta_encode(b, &ms[i]);
        cr_assert_eq(n, WAL_META_V2_SIZE);
        cr_assert(wal__ld16(b + 4) == 2 && wal__ld16(b + 6) == 80);
        cr_assert_eq(wal__meta_decode(b, n, &g, &v), 0, "case %zu", i);
        cr_assert_eq(v, 2);
        cr_assert_eq(memcmp(&ms[i], &g, sizeof g), 0, "case %zu", i);
        for (size_t k = 0; k < n; k++) { /* every byte is covered by the CRC or the framing */
            b[k] ^= 0x40;
            cr_assert_neq(wal__meta_decode(b, n, &g, NULL), 0, "case %zu byte %zu", i, k);
            b[k] ^= 0x40;
        }
    }
}

/* A framed meta file (magic, size, CRC right) of n bytes claiming version v. */
static size_t framed_meta(uint8_t *b, size_t n, uint16_t v, const wal_meta_t *m)
{
    memset(b, 0, n);
    memcpy(b, WAL_META_MAGIC, 4);
    wal__st16(b + 4, v);
    wal__st16(b + 6, (uint16_t)n);
    wal__st64(b + 8, m->floor);
    wal__st64(b + 16, m->checkpoint);
    if (n >= 64)
        wal__st64(b + 48, m->reserved);
    wal__st32(b + n - 4, wal__crc32c(0, b, n - 4));
    return n;
}

Test(format, meta_of_a_newer_version_is_unsupported_and_damage_is_corrupt)
{
    uint8_t b[128];
    wal_meta_t m = { .floor = 1, .checkpoint = 5 }, g;
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 96, 4, &m), &g, NULL), TB_EUNSUPPORTED, "a newer build's file");
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 96, 3, &m), &g, NULL), TB_ECORRUPT,
                 "version 3 is 84 + 32 n bytes (n at byte 64: 0 here)");
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 84, 3, &m), &g, NULL), 0, "version 3 with no slot");
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 80, 0, &m), &g, NULL), TB_EUNSUPPORTED);
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 80, 1, &m), &g, NULL), TB_ECORRUPT, "version 1 is 64 bytes");
    cr_assert_eq(wal__meta_decode(b, framed_meta(b, 64, 2, &m), &g, NULL), TB_ECORRUPT, "version 2 is 80 bytes");
    size_t n = framed_meta(b, 80, 2, &m);
    cr_assert_eq(wal__meta_decode(b, n, &g, NULL), 0);
    cr_assert_eq(wal__meta_decode(b, n - 1, &g, NULL), TB_ECORRUPT, "a short read");
    cr_assert_eq(wal__meta_decode(b, 0, &g, NULL), TB_ECORRUPT);
    memcpy(b, "TBWX", 4);
    cr_assert_eq(wal__meta_decode(b, n, &g, NULL), TB_ECORRUPT);
}

Test(format, meta_naming_an_offset_past_the_maximum_is_corrupt)
{
    uint8_t b[WAL_META_MAX];
    wal_meta_t g;
    const wal_meta_t bad[] = {
        { .floor = WAL_OFFSET_MAX + 1 },
        { .checkpoint = UINT64_MAX },
        { .reserved = WAL_OFFSET_MAX + 1 },
        { .nslots = 2, .slots = { { .id = 0 }, { .id = 1, .checkpoint = WAL_OFFSET_MAX + 1 } } }, /* version 3 */
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        size_t n = wal__meta_encode(b, &bad[i]);
        cr_assert_eq(wal__meta_decode(b, n, &g, NULL), TB_ECORRUPT, "case %zu", i);
        cr_assert_eq(g.checkpoint, 0, "nothing decoded on error");
    }
    wal_meta_t ok = { .floor = WAL_OFFSET_MAX, .checkpoint = WAL_OFFSET_MAX, .reserved = WAL_OFFSET_MAX };
    cr_assert_eq(wal__meta_decode(b, wal__meta_encode(b, &ok), &g, NULL), 0);
}

Test(format, topic_directory_names_round_trip)
{
    const char *names[] = { "/edge1/telemetry", "/a-b_c/D9", "/sp ace/%/+/./..", "x" };
    const char *want[] = { "+edge1+telemetry", "+a-b_c+D9", "+sp%20ace+%25+%2B+%2E+%2E%2E", "x" };
    for (size_t i = 0; i < 4; i++) {
        char *e = wal__topic_encode(names[i]);
        cr_assert_str_eq(e, want[i]);
        char *d = wal__topic_decode(e);
        cr_assert_str_eq(d, names[i]);
        free(e);
        free(d);
    }
}

Test(format, non_canonical_directory_names_are_not_topics)
{
    const char *bad[] = { ".", "..", "LOCK.x", "%2f", "%41", "a%2", "" };
    for (size_t i = 0; i < 7; i++) {
        char *d = wal__topic_decode(bad[i]);
        cr_assert_null(d, "%s", bad[i]);
    }
}

Test(format, segment_names_parse_only_when_canonical)
{
    uint64_t b;
    cr_assert(wal__seg_name_parse("00000000000000000042.seg", &b) && b == 42);
    cr_assert_not(wal__seg_name_parse("0000000000000000042.seg", &b));
    cr_assert_not(wal__seg_name_parse("00000000000000000042.seg.tmp", &b));
    cr_assert_not(wal__seg_name_parse("99999999999999999999.seg", &b)); /* > UINT64_MAX */
}
