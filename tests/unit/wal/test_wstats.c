/*
 * test_wstats.c: wal_stats counts what the log writes by cause, exactly:
 * a workload whose bytes are known (N batches whose wal_batch_bytes are
 * summed, a rotation, a checkpoint) must come out byte for byte under
 * record, segment and checkpoint, with nothing under the other causes.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "helper_wal.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(wstats, .init = setup, .fini = teardown);

/* One batch of n messages of payload_len bytes from seq0; returns its record bytes. */
static size_t append(wal_topic_t *t, uint64_t seq0, uint32_t n, size_t payload_len)
{
    wal_batch_t *b = wal_batch_new(t);
    th_msgbuf_t mb;
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(wal_batch_add(b, th_msg(&mb, seq0 + i, payload_len)), 0);
    size_t bytes = wal_batch_bytes(b);
    size_t want = h.ndone + 1;
    wal_submit(b, (void *)(uintptr_t)seq0);
    cr_assert(th_wait(&h, want));
    cr_assert_eq(h.done[want - 1].rc, 0);
    return bytes;
}

static wal_stats_t delta(const wal_stats_t *a, const wal_stats_t *b)
{
    wal_stats_t d;
    for (size_t i = 0; i < WAL_CAUSE__COUNT; i++) {
        d.bytes[i] = b->bytes[i] - a->bytes[i];
        d.writes[i] = b->writes[i] - a->writes[i];
        d.syncs[i] = b->syncs[i] - a->syncs[i];
    }
    return d;
}

Test(wstats, records_a_rotation_and_a_checkpoint_are_counted_exactly_by_cause)
{
    h.o.pad_align = 1; /* no padding: the record bytes are the batches' bytes, nothing added */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = th_topic(&h, "/e/t");
    uint64_t seq = 0;
    append(t, seq, 1, 10); /* the first batch takes the offset reservation: not measured */
    seq++;
    cr_assert_eq(wal_sync(h.w), 0);
    wal_stats_t s0, s1, s2;
    wal_stats(h.w, &s0);
    wal_topic_stats_t st0, st1;
    wal_topic_stats(t, &st0);

    /* N batches of ~1 KiB in 4 KiB segments: at least one rotation */
    const int N = 8;
    uint64_t want = 0;
    for (int i = 0; i < N; i++, seq += 5)
        want += append(t, seq, 5, 150);
    wal_stats(h.w, &s1);
    wal_topic_stats(t, &st1);
    wal_stats_t d = delta(&s0, &s1);
    uint64_t rotations = st1.segments - st0.segments;
    cr_assert_geq(rotations, 1, "the workload rotates");
    cr_assert_eq(d.bytes[WAL_CAUSE_RECORD], want, "record bytes %" PRIu64 ", batches' %" PRIu64,
                 d.bytes[WAL_CAUSE_RECORD], want);
    /* one fdatasync per batch (fsync always), and one sealing each full segment */
    cr_assert_eq(d.syncs[WAL_CAUSE_RECORD], (uint64_t)N + rotations, "record syncs %" PRIu64,
                 d.syncs[WAL_CAUSE_RECORD]);
    /* a new segment: its header written, synced, and its directory synced */
    cr_assert_eq(d.writes[WAL_CAUSE_SEGMENT], rotations);
    cr_assert_eq(d.bytes[WAL_CAUSE_SEGMENT], rotations * 32, "a segment header is 32 bytes");
    cr_assert_eq(d.syncs[WAL_CAUSE_SEGMENT], rotations * 2);
    /* the log's bytes on disk grew by exactly what was counted */
    cr_assert_eq(st1.bytes - st0.bytes, d.bytes[WAL_CAUSE_RECORD] + d.bytes[WAL_CAUSE_SEGMENT]);
    for (size_t c = 0; c < WAL_CAUSE__COUNT; c++)
        if (c != WAL_CAUSE_RECORD && c != WAL_CAUSE_SEGMENT)
            cr_assert_eq(d.bytes[c] + d.writes[c] + d.syncs[c], 0, "nothing under %s", wal_cause_name((wal_cause_t)c));

    /* a checkpoint persisted: one atomic replace of the meta file */
    cr_assert_eq(wal_checkpoint(t, 3), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    wal_stats(h.w, &s2);
    d = delta(&s1, &s2);
    char *dir = th_topic_dir(&h, "+e+t");
    char *meta = tb_asprintf("%s/meta", dir);
    cr_assert_eq(d.writes[WAL_CAUSE_CHECKPOINT], 1);
    cr_assert_eq(d.bytes[WAL_CAUSE_CHECKPOINT], (uint64_t)th_file_size(meta), "the whole meta file");
    cr_assert_eq(d.syncs[WAL_CAUSE_CHECKPOINT], 2, "the file and its directory");
    for (size_t c = 0; c < WAL_CAUSE__COUNT; c++)
        if (c != WAL_CAUSE_CHECKPOINT)
            cr_assert_eq(d.bytes[c] + d.writes[c] + d.syncs[c], 0, "nothing under %s", wal_cause_name((wal_cause_t)c));
    free(meta);
    free(dir);
}

Test(wstats, padding_is_counted_apart_from_records)
{
    h.o.pad_align = 4096;
    h.o.segment_bytes = 16384; /* a page of records is padded only with room after it (wal/pad.c) */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = th_topic(&h, "/e/t");
    wal_stats_t s0, s1;
    wal_stats(h.w, &s0);
    wal_topic_stats_t st0, st1;
    wal_topic_stats(t, &st0);
    uint64_t want = append(t, 0, 10, 250); /* over half a page: worth padding */
    wal_stats(h.w, &s1);
    wal_topic_stats(t, &st1);
    wal_stats_t d = delta(&s0, &s1);
    cr_assert_eq(d.bytes[WAL_CAUSE_RECORD], want);
    cr_assert_gt(d.bytes[WAL_CAUSE_PAD], 0, "a small synced write is padded to the page end");
    cr_assert_eq(st1.bytes % 4096, 0, "to the page end: %" PRIu64, st1.bytes);
    cr_assert_eq(st1.bytes - st0.bytes, want + d.bytes[WAL_CAUSE_PAD]);
}

Test(wstats, cause_names_are_distinct_and_total)
{
    for (size_t c = 0; c < WAL_CAUSE__COUNT; c++) {
        cr_assert_str_neq(wal_cause_name((wal_cause_t)c), "?");
        for (size_t k = 0; k < c; k++)
            cr_assert_str_neq(wal_cause_name((wal_cause_t)c), wal_cause_name((wal_cause_t)k));
    }
    cr_assert_str_eq(wal_cause_name(WAL_CAUSE__COUNT), "?");
}
