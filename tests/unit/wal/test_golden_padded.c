/*
 * test_golden_padded.c: the padded layout of format version 2, pinned byte
 * for byte (tests/data/wal/v2/padded*.seg), and what recovery and readers
 * make of it and of its damaged variants.
 *
 * padded.seg is what the writer produces with wal.fsync always, 4 KiB
 * pages, a fixed salt and clock, for three rounds: two of 15 records of 217
 * bytes (3,255 bytes each: padded, 809 and 841 bytes, so each ends on a
 * page boundary) and one of a single record (its padding would be longer
 * than the record: not padded). 31 records, 8,409 bytes.
 * Regenerate with the other golden files (test_golden.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_golden.h"
#include "wal/wal_int.h"

#define PAGE 4096u
#define REC 217u         /* 28 head + 9 topic + 180 payload */
#define PER_ROUND 15u
#define RECORDS 31u
#define PAD1 (PAGE - WAL_SEG_HDR_SIZE - PER_ROUND * REC)   /* 809 */
#define PAD2 (PAGE - PER_ROUND * REC)                      /* 841 */
#define FILE_BYTES (2 * PAGE + REC)

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.segment_bytes = 1 << 20;
    h.o.max_topic_bytes = 4 << 20;
    h.o.pad_align = PAGE;
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(golden_padded, .init = setup, .fini = teardown);

/* Message i (offset i + 1): 180 payload bytes derived from i. */
static wal_msg_t message(unsigned i, uint8_t payload[180])
{
    for (unsigned k = 0; k < 180; k++)
        payload[k] = (uint8_t)('a' + (i * 7 + k) % 26);
    return (wal_msg_t){ .payload = payload, .payload_len = 180, .mqtt_topic = "sensors/1", .mqtt_topic_len = 9,
                        .publish_time_ms = GOLDEN_TIME + i, .qos = 1 };
}

static void round_of(wal_topic_t *t, unsigned first, unsigned n)
{
    wal_batch_t *b = wal_batch_new(t);
    uint8_t payload[180];
    for (unsigned i = first; i < first + n; i++) {
        wal_msg_t m = message(i, payload);
        cr_assert_eq(wal_batch_add(b, &m), 0);
    }
    size_t want = h.ndone + 1;
    wal_submit(b, NULL);
    cr_assert(th_wait(&h, want));
    cr_assert_eq(h.done[want - 1].rc, 0);
}

static uint8_t *produce(size_t *n)
{
    h.o.io = tg_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, GOLDEN_TOPIC, &t), 0);
    round_of(t, 0, PER_ROUND);
    round_of(t, PER_ROUND, PER_ROUND);
    round_of(t, 2 * PER_ROUND, 1);
    cr_assert_eq(th_close(&h), 0);
    return tg_segment(&h, 1, n);
}

static void cut_in_second_padding(uint8_t *buf, size_t *n) { *n = PAGE + PER_ROUND * REC + 700; }
static void flip_first_padding(uint8_t *buf, size_t *n) { buf[PAGE - 100] ^= 0x01; }
static void as_version_1(uint8_t *buf, size_t *n) { tg_header_u16(buf, 4, 1); }

static const tg_variant_t variants[] = {
    { "padded_torn_padding.seg", cut_in_second_padding },
    { "padded_bad_padding.seg", flip_first_padding },
    { "padded_as_v1.seg", as_version_1 },
};

Test(golden_padded, writer_output_matches_the_padded_golden_segment)
{
    size_t n;
    uint8_t *buf = produce(&n);
    tg_compare_or_update("v2/padded.seg", buf, n, variants, TB_ARRAY_LEN(variants), "v2");
    free(buf);
}

Test(golden_padded, damaged_variants_are_the_documented_mutations)
{
    tg_check_variants("v2/padded.seg", variants, TB_ARRAY_LEN(variants), "v2");
}

Test(golden_padded, layout_is_records_then_padding_to_each_page_boundary)
{
    size_t n;
    char *p = tg_path("v2/padded.seg");
    uint8_t *g = tg_slurp(p, &n);
    cr_assert_not_null(g);
    cr_assert_eq(n, FILE_BYTES);
    size_t pad1 = WAL_SEG_HDR_SIZE + PER_ROUND * REC, pad2 = PAGE + PER_ROUND * REC;
    cr_assert(wal__ld32(g + pad1) == PAD1 && g[pad1 + 24] == WAL_FLAG_PAD);
    cr_assert_eq(wal__ld64(g + pad1 + 8), PER_ROUND + 1, "padding names the offset after it");
    cr_assert(wal__ld32(g + pad2) == PAD2 && g[pad2 + 24] == WAL_FLAG_PAD);
    cr_assert_eq(wal__ld64(g + PAGE + 8), PER_ROUND + 1, "the second round starts the second page");
    cr_assert_eq(wal__ld64(g + 2 * PAGE + 8), 2 * PER_ROUND + 1, "the third starts the third page");
    free(g);
    free(p);
}

Test(golden_padded, reads_back_every_record_in_order_and_no_padding)
{
    free(tg_install(&h, "v2/padded.seg", 1));
    cr_assert_eq(tg_open_stats(&h).next_offset, RECORDS + 1);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(wal_topic_find(h.w, GOLDEN_TOPIC), 1, &r), 0);
    uint8_t payload[180];
    for (unsigned i = 0; i < RECORDS; i++) {
        wal_record_t rec;
        cr_assert_eq(wal_reader_next(r, &rec), 0, "record %u", i);
        wal_msg_t m = message(i, payload);
        cr_assert_eq(rec.offset, i + 1u);
        cr_assert_eq(rec.raw_len, REC);
        cr_assert(rec.payload_len == 180 && memcmp(rec.payload, m.payload, 180) == 0);
    }
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    wal_reader_close(r);
}

Test(golden_padded, recovery_keeps_the_whole_file)
{
    char *p = tg_install(&h, "v2/padded.seg", 1);
    tg_open_stats(&h);
    cr_assert_eq(th_file_size(p), FILE_BYTES);
    free(p);
}

Test(golden_padded, sealed_padded_segment_passes_verification_and_reads_into_the_next)
{
    free(tg_install(&h, "v2/padded.seg", 1));
    tg_install_empty(&h, RECORDS + 1);
    h.o.verify_on_open = true;
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert_eq(st.quarantined_segments, 0);
    wal_topic_t *t = wal_topic_find(h.w, GOLDEN_TOPIC);
    cr_assert_eq(th_append(&h, t, 0, 2, 10), 0);
    cr_assert_eq(tg_readable(&h), RECORDS + 2);
}

Test(golden_padded, torn_padding_is_cut_and_the_records_before_it_stay)
{
    char *p = tg_install(&h, "v2/padded_torn_padding.seg", 1);
    cr_assert_eq(tg_open_stats(&h).next_offset, 2 * PER_ROUND + 1);
    cr_assert_eq(tg_readable(&h), 2 * PER_ROUND);
    cr_assert_eq(th_file_size(p), PAGE + PER_ROUND * REC, "cut where the padding began");
    free(p);
}

Test(golden_padded, garbled_padding_ends_the_log_before_it)
{
    char *p = tg_install(&h, "v2/padded_bad_padding.seg", 1);
    cr_assert_eq(tg_open_stats(&h).next_offset, PER_ROUND + 1);
    cr_assert_eq(tg_readable(&h), PER_ROUND);
    cr_assert_eq(th_file_size(p), WAL_SEG_HDR_SIZE + PER_ROUND * REC);
    free(p);
}

Test(golden_padded, padding_in_a_version_1_segment_ends_the_log_there)
{
    free(tg_install(&h, "v2/padded_as_v1.seg", 1));
    cr_assert_eq(tg_open_stats(&h).next_offset, PER_ROUND + 1);
    cr_assert_eq(tg_readable(&h), PER_ROUND);
}

Test(golden_padded, garbled_padding_in_a_sealed_segment_quarantines_it_at_verified_open)
{
    free(tg_install(&h, "v2/padded_bad_padding.seg", 1));
    tg_install_empty(&h, RECORDS + 1);
    h.o.verify_on_open = true;
    wal_topic_stats_t st = tg_open_stats(&h);
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_eq(st.dropped_total, RECORDS);
}
