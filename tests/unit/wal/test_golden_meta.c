/*
 * test_golden_meta.c: the topic meta file, pinned byte for byte in both
 * versions the code reads (tests/data/wal/meta/, wal_format.h "META FILE").
 *
 * meta/v1.bin is what the writer produces for a topic whose reservation and
 * dropped_age are 0 (the layout every older build wrote, and reads); v2.bin
 * the same counters with both new fields set; v3.bin the same with a slot
 * table of three outputs (CURSOR SLOTS: the default slot 0 and two more). The damaged files are v2.bin
 * with one deliberate change each. A change to the meta layout makes the
 * writer_output tests fail; it must then bump WAL_META_VERSION, keep the old
 * files and add the new ones:
 *
 *   WAL_GOLDEN_UPDATE=1 TRIB_TESTDATA=$PWD/tests/data build/tests/unit_wal --filter 'golden_meta/writer_output*'
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_golden.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.segment_bytes = 1 << 20;
    h.o.max_topic_bytes = 4 << 20;
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(golden_meta, .init = setup, .fini = teardown);

/* The counters of both files; they go with v2/features.seg (offsets 1..7). */
static const wal_meta_t META_V1 = { .floor = 1, .checkpoint = 3, .dropped = 4, .quarantined = 5, .lost = 6 };
static const wal_meta_t META_V2 = {
    .floor = 1, .checkpoint = 3, .dropped = 4, .quarantined = 5, .lost = 6, .reserved = 1000, .dropped_age = 7,
};

static const wal_meta_t META_V3 = {
    .floor = 1, .checkpoint = 3, .dropped = 4, .quarantined = 5, .lost = 6, .reserved = 1000, .dropped_age = 7,
    .nslots = 3,
    .slots = {
        { .id = 0, .flags = 0, .checkpoint = 3, .dropped = 4, .dropped_age = 7 },
        { .id = 1, .flags = WAL_SLOT_F_PROTECTS, .checkpoint = 6, .dropped = 2, .dropped_age = 0 },
        { .id = 7, .flags = 0, .checkpoint = 5, .dropped = 3, .dropped_age = 1 },
    },
};

static void flip_crc(uint8_t *buf, size_t *n) { buf[*n - 1] ^= 0x01; }
static void next_version(uint8_t *buf, size_t *n)
{
    wal__st16(buf + 4, WAL_META_VERSION + 1);
    wal__st32(buf + *n - 4, wal__crc32c(0, buf, *n - 4)); /* framed right: only the version is new */
}
static void sized_as_v1(uint8_t *buf, size_t *n)
{
    *n = WAL_META_V1_SIZE; /* a version 2 file cut to version 1's size: its CRC no longer frames it */
    wal__st16(buf + 6, WAL_META_V1_SIZE);
}

static const tg_variant_t variants[] = {
    { "v2_bad_crc.bin", flip_crc },
    { "v2_as_v4.bin", next_version },
    { "v2_cut_to_v1_size.bin", sized_as_v1 },
};

static void writer_output(const char *rel, const wal_meta_t *m, unsigned version, const tg_variant_t *v, size_t nv)
{
    uint8_t buf[WAL_META_MAX];
    size_t n = wal__meta_encode(buf, m);
    cr_assert_eq(wal__meta_version(m), version);
    cr_assert_eq(n, version == 1 ? WAL_META_V1_SIZE : version == 2 ? WAL_META_V2_SIZE : WAL_META_V3_SIZE(m->nslots));
    tg_compare_or_update(rel, buf, n, v, nv, "meta");
}

Test(golden_meta, writer_output_matches_the_version_1_file_while_both_new_fields_are_zero)
{
    writer_output("meta/v1.bin", &META_V1, 1, NULL, 0);
}

Test(golden_meta, writer_output_matches_the_version_2_file_when_a_new_field_is_set)
{
    writer_output("meta/v2.bin", &META_V2, 2, variants, TB_ARRAY_LEN(variants));
}

Test(golden_meta, damaged_files_are_the_documented_mutations_of_the_version_2_file)
{
    tg_check_variants("meta/v2.bin", variants, TB_ARRAY_LEN(variants), "meta");
}

static uint8_t *golden(const char *rel, size_t *n)
{
    char *p = tg_path(rel);
    uint8_t *b = tg_slurp(p, n);
    cr_assert_not_null(b, "missing %s", p);
    free(p);
    return b;
}

Test(golden_meta, both_versions_decode_to_their_counters)
{
    size_t n1, n2;
    uint8_t *v1 = golden("meta/v1.bin", &n1), *v2 = golden("meta/v2.bin", &n2);
    wal_meta_t m;
    unsigned ver;
    cr_assert_eq(wal__meta_decode(v1, n1, &m, &ver), 0);
    cr_assert_eq(ver, 1);
    cr_assert_eq(memcmp(&m, &META_V1, sizeof m), 0, "version 1 reads with reserved and dropped_age 0");
    cr_assert_eq(wal__meta_decode(v2, n2, &m, &ver), 0);
    cr_assert_eq(ver, 2);
    cr_assert_eq(memcmp(&m, &META_V2, sizeof m), 0);
    /* version 2 keeps version 1's fields where they were: only the version,
     * the size, the new fields and the CRC's place differ */
    cr_assert_eq(memcmp(v1, v2, 4), 0);
    cr_assert_eq(memcmp(v1 + 8, v2 + 8, 40), 0);
    free(v1);
    free(v2);
}

Test(golden_meta, damaged_files_do_not_decode)
{
    const struct { const char *rel; int rc; } want[] = {
        { "meta/v2_bad_crc.bin", TB_ECORRUPT },
        { "meta/v2_as_v4.bin", TB_EUNSUPPORTED },
        { "meta/v2_cut_to_v1_size.bin", TB_ECORRUPT },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        size_t n;
        uint8_t *b = golden(want[i].rel, &n);
        wal_meta_t m;
        cr_assert_eq(wal__meta_decode(b, n, &m, NULL), want[i].rc, "%s", want[i].rel);
        free(b);
    }
}

/* ---- what recovery makes of each file, beside v2/features.seg --------------- */

static void install_meta(const char *rel)
{
    char *src = tg_path(rel);
    char *cmd = tb_asprintf("mkdir -p %s/" GOLDEN_DIR " && cp %s %s/" GOLDEN_DIR "/meta", h.wal_dir, src, h.wal_dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    free(cmd);
    free(src);
}

static char *meta_path(void)
{
    return tb_asprintf("%s/" GOLDEN_DIR "/meta", h.wal_dir);
}

Test(golden_meta, recovery_reads_a_version_1_file)
{
    free(tg_install(&h, "v2/features.seg", 1));
    install_meta("meta/v1.bin");
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert(st.checkpoint == 3 && st.dropped_total == 4 && st.quarantined_segments == 5 && st.lost_total == 6);
    cr_assert(st.reserved == 0 && st.dropped_age_total == 0);
    cr_assert_eq(st.next_offset, 8, "the log's own end");
}

Test(golden_meta, recovery_reads_a_version_2_file_and_continues_at_the_reservation)
{
    free(tg_install(&h, "v2/features.seg", 1));
    install_meta("meta/v2.bin");
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert(st.checkpoint == 3 && st.dropped_total == 4 && st.quarantined_segments == 5 && st.lost_total == 6);
    cr_assert_eq(st.reserved, 1000);
    cr_assert_eq(st.dropped_age_total, 7);
    cr_assert_eq(st.next_offset, 1000, "offsets 8..999 may have been handed out from memory");
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    cr_assert_eq(th_append(&h, t, 0, 2, 10), 0);
    cr_assert_eq(h.done[0].first_offset, 1000);
    /* the log: 1..7, a hole, 1000..1001 (the hole is a segment boundary) */
    uint64_t seqs[16];
    int gaps = 0;
    cr_assert_eq(th_read_all(t, 8, 10, seqs, 16, &gaps), 2);
    cr_assert_eq(gaps, 1);
}

Test(golden_meta, damaged_file_is_taken_for_absent)
{
    const char *files[] = { "meta/v2_bad_crc.bin", "meta/v2_as_v4.bin", "meta/v2_cut_to_v1_size.bin",
                            "meta/v3_duplicate_slot.bin" };
    for (size_t i = 0; i < TB_ARRAY_LEN(files); i++) {
        th_cleanup(&h);
        setup();
        free(tg_install(&h, "v2/features.seg", 1));
        install_meta(files[i]);
        wal_topic_stats_t st = tg_open_stats(&h);
        cr_assert(st.checkpoint == 0 && st.reserved == 0 && st.dropped_total == 0, "%s", files[i]);
        cr_assert_eq(st.next_offset, 8, "%s", files[i]);
        cr_assert_eq(th_close(&h), 0);
    }
}

Test(golden_meta, a_meta_write_keeps_the_version_2_fields)
{
    free(tg_install(&h, "v2/features.seg", 1));
    install_meta("meta/v2.bin");
    tg_open_stats(&h);
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    cr_assert_eq(wal_checkpoint(t, 6), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    wal_meta_t m;
    unsigned ver;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, &m, &ver), 0);
    cr_assert_eq(ver, 2);
    cr_assert_eq(m.checkpoint, 6, "the checkpoint was persisted");
    cr_assert_eq(m.dropped_age, 7, "dropped_age rides along in every meta write");
    cr_assert_eq(m.reserved, 1000);
}

Test(golden_meta, a_log_that_never_reserved_nor_aged_keeps_writing_version_1)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, GOLDEN_TOPIC, &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 5, 10), 0);
    cr_assert_eq(wal_checkpoint(t, 4), 0);
    cr_assert_eq(th_close(&h), 0);
    char *p = meta_path();
    size_t n;
    uint8_t *b = tg_slurp(p, &n);
    cr_assert_not_null(b);
    cr_assert_eq(n, WAL_META_V1_SIZE, "an older build reads it: the gateway can be downgraded");
    cr_assert_eq(wal__ld16(b + 4), 1);
    free(b);
    free(p);
}

/* ---- version 3: the slot table (CURSOR SLOTS) ------------------------------- */

static void dup_slot(uint8_t *buf, size_t *n)
{
    memcpy(buf + WAL_META_V3_HEAD + WAL_META_SLOT_SIZE * 2, buf + WAL_META_V3_HEAD + WAL_META_SLOT_SIZE, 2);
    wal__st32(buf + *n - 4, wal__crc32c(0, buf, *n - 4)); /* framed right: slot id 1 twice */
}
static void count_too_high(uint8_t *buf, size_t *n)
{
    wal__st16(buf + 64, 4); /* says 4 slots in a file sized for 3 */
    wal__st32(buf + *n - 4, wal__crc32c(0, buf, *n - 4));
}
static const tg_variant_t variants_v3[] = {
    { "v3_duplicate_slot.bin", dup_slot },
    { "v3_bad_count.bin", count_too_high },
};

Test(golden_meta, writer_output_matches_the_version_3_file_when_a_second_slot_exists)
{
    writer_output("meta/v3.bin", &META_V3, 3, variants_v3, TB_ARRAY_LEN(variants_v3));
}

Test(golden_meta, version_3_decodes_to_its_counters_and_slots_and_keeps_version_2s_places)
{
    size_t n2, n3;
    uint8_t *v2 = golden("meta/v2.bin", &n2), *v3 = golden("meta/v3.bin", &n3);
    wal_meta_t m;
    unsigned ver;
    cr_assert_eq(n3, 84 + 32 * 3);
    cr_assert_eq(wal__meta_decode(v3, n3, &m, &ver), 0);
    cr_assert_eq(ver, 3);
    cr_assert_eq(memcmp(&m, &META_V3, sizeof m), 0);
    cr_assert_eq(memcmp(v2 + 8, v3 + 8, 56), 0, "floor .. dropped_age where version 2 has them");
    free(v2);
    free(v3);
    tg_check_variants("meta/v3.bin", variants_v3, TB_ARRAY_LEN(variants_v3), "meta");
    const char *bad[] = { "meta/v3_duplicate_slot.bin", "meta/v3_bad_count.bin" };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        size_t n;
        uint8_t *b = golden(bad[i], &n);
        cr_assert_eq(wal__meta_decode(b, n, &m, NULL), TB_ECORRUPT, "%s", bad[i]);
        free(b);
    }
}

Test(golden_meta, recovery_reads_a_version_3_file_and_each_slot_keeps_its_checkpoint)
{
    free(tg_install(&h, "v2/features.seg", 1));
    install_meta("meta/v3.bin");
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert(st.dropped_total == 4 && st.quarantined_segments == 5 && st.lost_total == 6);
    cr_assert_eq(st.reserved, 1000);
    cr_assert_eq(st.checkpoint, 3, "the minimum over every persisted slot");
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    wal_cursor_t *c1, *c7;
    cr_assert_eq(wal_cursor_open(t, 1, NULL, &c1), 0);
    cr_assert_eq(wal_cursor_open(t, 7, NULL, &c7), 0);
    wal_cursor_stats_t s1, s7;
    wal_cursor_stats(c1, &s1);
    wal_cursor_stats(c7, &s7);
    cr_assert(s1.checkpoint == 6 && s1.dropped_total == 2);
    cr_assert(s7.checkpoint == 5 && s7.dropped_total == 3 && s7.dropped_age_total == 1);
    wal_cursors_settled(h.w); /* nobody took slot 0 (at 3): parked */
    cr_assert_eq(wal_topic_checkpoint(t), 5, "the minimum over the active slots");
    wal_cursor_close(c1);
    wal_cursor_close(c7);
}
