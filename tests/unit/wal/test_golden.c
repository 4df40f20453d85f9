/*
 * test_golden.c: the on-disk format, pinned byte for byte, in both versions
 * the code reads.
 *
 * v2/features.seg is what the writer produces now, with a fixed salt and
 * clock, for one batch that uses every format feature; the corrupt variants
 * are it with one deliberate change each (tests/data/wal/README.md).
 * v1/ holds the same files as format version 1 wrote them, frozen: every
 * read-side claim is checked against both (suites golden and golden_v1), so
 * segments written before padding existed are still read and recovered.
 * The padded layout has its own file, test_golden_padded.c.
 *
 * A format change makes writer_output_matches_the_golden_segment fail; the
 * change must then bump WAL_FORMAT_VERSION, freeze the old files under
 * v<old>/ and regenerate the current ones:
 *
 *   WAL_GOLDEN_UPDATE=1 TRIB_TESTDATA=$PWD/tests/data build/tests/unit_wal --filter 'golden*'
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_golden.h"
#include "wal/wal_int.h"

#define GOLDEN_RECORDS 7

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.segment_bytes = 1 << 20;
    h.o.max_topic_bytes = 4 << 20;
    h.o.pad_align = 4096;
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(golden, .init = setup, .fini = teardown);
TestSuite(golden_v1, .init = setup, .fini = teardown);

static const wal_attr_t attrs[] = {
    { (const uint8_t *)"site", 4, (const uint8_t *)"north", 5 },
    { (const uint8_t *)"mqtt.user.line", 14, (const uint8_t *)"2", 1 },
};
static const uint8_t binary[] = { 0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF };

/* One message per format feature; record i has offset i + 1. */
static wal_msg_t feature(int i)
{
    wal_msg_t m = { .mqtt_topic = "sensors/1", .mqtt_topic_len = 9, .publish_time_ms = GOLDEN_TIME + (uint64_t)i };
    switch (i) {
    case 0: m.payload = (const uint8_t *)"hello"; m.payload_len = 5; break;
    case 1: m.payload = (const uint8_t *)"{\"t\":1}"; m.payload_len = 7; m.attrs = attrs; m.nattrs = 2; m.qos = 1; break;
    case 2: m.payload = (const uint8_t *)"kept"; m.payload_len = 4; m.qos = 2; m.retain = true; break;
    case 3: m.payload = (const uint8_t *)"{\"v\":3}"; m.payload_len = 7; m.has_schema = true;
            m.schema_id = 1234567890123ull; m.schema_version = 7; break;
    case 4: m.payload = NULL; m.payload_len = 0; break;
    case 5: m.payload = binary; m.payload_len = sizeof binary; break;
    default: m.payload = (const uint8_t *)"temp\xC3\xA9rature"; m.payload_len = 12; m.mqtt_topic = ""; m.mqtt_topic_len = 0; break;
    }
    return m;
}

/* Runs the real writer and returns the segment it produced. */
static uint8_t *produce(size_t *n)
{
    h.o.io = tg_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, GOLDEN_TOPIC, &t), 0);
    wal_batch_t *b = wal_batch_new(t);
    for (int i = 0; i < GOLDEN_RECORDS; i++) {
        wal_msg_t m = feature(i);
        cr_assert_eq(wal_batch_add(b, &m), 0);
    }
    wal_submit(b, NULL);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(h.done[0].rc, 0);
    cr_assert_eq(th_close(&h), 0);
    return tg_segment(&h, 1, n);
}

/* The deliberate corruptions, applied to a copy of the features segment. */
static size_t record_pos(const uint8_t *buf, int index)
{
    size_t pos = WAL_SEG_HDR_SIZE;
    for (int i = 0; i < index; i++)
        pos += wal__ld32(buf + pos);
    return pos;
}
static void cut_tail(uint8_t *buf, size_t *n) { *n -= 7; }
static void flip_payload_of_record_4(uint8_t *buf, size_t *n)
{
    size_t pos = record_pos(buf, 3);
    buf[pos + wal__ld32(buf + pos) - 1] ^= 0x01;
}
static void next_version(uint8_t *buf, size_t *n) { tg_header_u16(buf, 4, WAL_FORMAT_VERSION + 1); }
static void other_salt(uint8_t *buf, size_t *n)
{
    wal__st32(buf + 24, GOLDEN_SALT ^ 1);
    wal__st32(buf + 28, wal__crc32c(0, buf, 28));
}
static void bad_magic(uint8_t *buf, size_t *n) { buf[3] = 'X'; }

static const tg_variant_t variants[] = {
    { "truncated_tail.seg", cut_tail },
    { "bad_crc.seg", flip_payload_of_record_4 },
    { "wrong_version.seg", next_version },
    { "wrong_salt.seg", other_salt },
    { "bad_magic.seg", bad_magic },
};
/* v1/ was frozen without wrong_version.seg: its "version 2" became readable. */
static const tg_variant_t variants_v1[] = {
    { "truncated_tail.seg", cut_tail },
    { "bad_crc.seg", flip_payload_of_record_4 },
    { "wrong_salt.seg", other_salt },
    { "bad_magic.seg", bad_magic },
};

Test(golden, writer_output_matches_the_golden_segment)
{
    size_t n;
    uint8_t *buf = produce(&n);
    tg_compare_or_update("v2/features.seg", buf, n, variants, TB_ARRAY_LEN(variants), "v2");
    free(buf);
}

Test(golden, corrupt_variants_are_the_documented_mutations_of_the_golden_segment)
{
    tg_check_variants("v2/features.seg", variants, TB_ARRAY_LEN(variants), "v2");
}

Test(golden_v1, corrupt_variants_are_the_documented_mutations_of_the_golden_segment)
{
    tg_check_variants("v1/features.seg", variants_v1, TB_ARRAY_LEN(variants_v1), "v1");
}

Test(golden_v1, records_are_byte_identical_to_version_2_and_only_the_header_version_differs)
{
    size_t n1, n2;
    char *p1 = tg_path("v1/features.seg"), *p2 = tg_path("v2/features.seg");
    uint8_t *v1 = tg_slurp(p1, &n1), *v2 = tg_slurp(p2, &n2);
    cr_assert(v1 && v2);
    cr_assert_eq(n1, n2);
    cr_assert(wal__ld16(v1 + 4) == 1 && wal__ld16(v2 + 4) == 2);
    cr_assert_eq(memcmp(v1, v2, 4), 0);
    cr_assert_eq(memcmp(v1 + 6, v2 + 6, 22), 0, "the rest of the header (hcrc aside)");
    cr_assert_eq(memcmp(v1 + WAL_SEG_HDR_SIZE, v2 + WAL_SEG_HDR_SIZE, n1 - WAL_SEG_HDR_SIZE), 0);
    free(v1);
    free(v2);
    free(p1);
    free(p2);
}

/* ---- what recovery and readers make of each file, in both versions -------- */

/* A read-side claim run on the v1 and the v2 files alike. */
#define BOTH_VERSIONS(name)                      \
    static void name(const char *ver);           \
    Test(golden, name) { name("v2"); }           \
    Test(golden_v1, name) { name("v1"); }        \
    static void name(const char *ver)

static char *install(const char *ver, const char *file, uint64_t base)
{
    char *rel = tb_asprintf("%s/%s", ver, file);
    char *p = tg_install(&h, rel, base);
    free(rel);
    return p;
}

BOTH_VERSIONS(features_segment_reads_back_every_feature)
{
    free(install(ver, "features.seg", 1));
    cr_assert_eq(tg_open_stats(&h).next_offset, 8);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(wal_topic_find(h.w, GOLDEN_TOPIC), 1, &r), 0);
    for (int i = 0; i < GOLDEN_RECORDS; i++) {
        wal_record_t rec;
        cr_assert_eq(wal_reader_next(r, &rec), 0);
        wal_msg_t m = feature(i);
        cr_assert_eq(rec.offset, (uint64_t)i + 1);
        cr_assert(rec.payload_len == m.payload_len && (!m.payload_len || memcmp(rec.payload, m.payload, m.payload_len) == 0));
        cr_assert(rec.qos == m.qos && rec.retain == m.retain && rec.has_schema == m.has_schema);
        cr_assert(rec.schema_id == m.schema_id && rec.schema_version == m.schema_version);
        cr_assert_eq(rec.nattrs, m.nattrs);
        cr_assert_eq(rec.publish_time_ms, m.publish_time_ms);
    }
    wal_reader_close(r);
}

BOTH_VERSIONS(truncated_tail_is_cut_to_the_last_whole_record)
{
    char *p = install(ver, "truncated_tail.seg", 1);
    cr_assert_eq(tg_open_stats(&h).next_offset, 7);
    cr_assert_eq(tg_readable(&h), 6);
    size_t n;
    char *rel = tb_asprintf("%s/features.seg", ver), *gp = tg_path(rel);
    uint8_t *g = tg_slurp(gp, &n);
    cr_assert_eq((size_t)th_file_size(p), record_pos(g, 6));
    free(g);
    free(gp);
    free(rel);
    free(p);
}

BOTH_VERSIONS(bad_crc_in_the_active_segment_ends_the_log_there)
{
    free(install(ver, "bad_crc.seg", 1));
    cr_assert_eq(tg_open_stats(&h).next_offset, 4);
    cr_assert_eq(tg_readable(&h), 3);
}

BOTH_VERSIONS(bad_crc_in_a_sealed_segment_quarantines_it_at_verified_open)
{
    free(install(ver, "bad_crc.seg", 1));
    tg_install_empty(&h, 8);
    h.o.verify_on_open = true;
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_eq(st.dropped_total, 7);
    cr_assert_eq(st.next_offset, 8);
}

BOTH_VERSIONS(bad_crc_in_a_sealed_segment_is_a_gap_for_readers)
{
    free(install(ver, "bad_crc.seg", 1));
    tg_install_empty(&h, 8);
    tg_open_stats(&h);
    wal_reader_t *r;
    wal_reader_open(wal_topic_find(h.w, GOLDEN_TOPIC), 1, &r);
    wal_record_t rec;
    int n = 0, rc;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        n++;
    cr_assert_eq(n, 3);
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert(from == 4 && to == 8);
    wal_reader_close(r);
}

BOTH_VERSIONS(offset_hole_between_segments_is_reported_as_a_gap)
{
    free(install(ver, "features.seg", 1));
    tg_install_empty(&h, 15);
    tg_open_stats(&h);
    wal_reader_t *r;
    wal_reader_open(wal_topic_find(h.w, GOLDEN_TOPIC), 1, &r);
    wal_record_t rec;
    int n = 0, rc;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        n++;
    cr_assert_eq(n, 7);
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert(from == 8 && to == 15);
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    wal_reader_close(r);
}

BOTH_VERSIONS(wrong_salt_validates_no_record)
{
    free(install(ver, "wrong_salt.seg", 1));
    cr_assert_eq(tg_open_stats(&h).next_offset, 1);
    cr_assert_eq(tg_readable(&h), 0);
}

BOTH_VERSIONS(bad_magic_is_quarantined)
{
    free(install(ver, "bad_magic.seg", 1));
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_gt(st.next_offset, 7);
}

Test(golden, unknown_version_is_quarantined_and_offsets_skip_past_it)
{
    char *p = install("v2", "wrong_version.seg", 1);
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_gt(st.next_offset, 7, "past any offset the unreadable segment could hold");
    char *q = tb_asprintf("%s.corrupt", p);
    cr_assert_gt(th_file_size(q), 0);
    free(q);
    free(p);
}

/* ---- a version 1 log under the current writer ------------------------------ */

Test(golden_v1, active_segment_is_sealed_at_open_and_appends_go_to_a_new_segment)
{
    free(install("v1", "features.seg", 1));
    tg_open_stats(&h);
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    wal_msg_t m = feature(0);
    wal_batch_t *b = wal_batch_new(t);
    cr_assert_eq(wal_batch_add(b, &m), 0);
    wal_submit(b, NULL);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(h.done[0].rc, 0);
    cr_assert_eq(h.done[0].first_offset, 8);
    cr_assert_eq(th_close(&h), 0);
    size_t n1, n8;
    uint8_t *s1 = tg_segment(&h, 1, &n1), *s8 = tg_segment(&h, 8, &n8);
    cr_assert_eq(wal__ld16(s1 + 4), 1, "the version 1 segment is kept as it was");
    cr_assert_eq(wal__ld16(s8 + 4), WAL_FORMAT_VERSION, "new records go to a new segment");
    free(s1);
    free(s8);
}

Test(golden_v1, sealed_segment_and_the_new_one_read_back_in_order)
{
    free(install("v1", "features.seg", 1));
    tg_open_stats(&h);
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    cr_assert_eq(th_append(&h, t, 100, 3, 10), 0);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    for (uint64_t off = 1; off <= 10; off++) {
        cr_assert_eq(wal_reader_next(r, &rec), 0, "offset %llu", (unsigned long long)off);
        cr_assert_eq(rec.offset, off);
    }
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    wal_reader_close(r);
}

Test(golden_v1, empty_active_segment_is_replaced_by_one_of_the_current_version)
{
    char *p = install("v1", "features.seg", 1);
    cr_assert_eq(truncate(p, WAL_SEG_HDR_SIZE), 0);
    tg_open_stats(&h);
    cr_assert_eq(th_close(&h), 0);
    size_t n;
    uint8_t *s = tg_segment(&h, 1, &n);
    cr_assert_eq(n, WAL_SEG_HDR_SIZE);
    cr_assert_eq(wal__ld16(s + 4), WAL_FORMAT_VERSION);
    char *dir = th_topic_dir(&h, GOLDEN_DIR);
    cr_assert_eq(th_count_files(dir, ".seg"), 1);
    free(dir);
    free(s);
    free(p);
}
