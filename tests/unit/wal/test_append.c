/* test_append.c: batches in, completions out, records back: the basic promises. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helper_crashio.h"
#include "helper_wal.h"

static th_t h;
static void setup_always(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }

TestSuite(append, .init = setup_always, .fini = teardown);

Test(append, round_trip_preserves_every_field)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/edge1/telemetry", &t), 0);
    cr_assert_eq(th_append(&h, t, 1, 20, 100), 0);
    uint64_t seqs[32];
    cr_assert_eq(th_read_all(t, 1, 100, seqs, 32, NULL), 20);
    for (int i = 0; i < 20; i++)
        cr_assert_eq(seqs[i], (uint64_t)i + 1);
}

Test(append, offsets_start_at_one_and_are_contiguous_across_batches)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (int i = 0; i < 5; i++)
        th_submit(&h, t, (uint64_t)i * 3, 3, 10);
    cr_assert(th_wait(&h, 5));
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(h.done[i].rc, 0);
        cr_assert_eq(h.done[i].first_offset, 1 + i * 3);
        cr_assert_eq(h.done[i].count, 3);
    }
}

Test(append, completions_arrive_in_submission_order)
{
    wal_topic_t *a, *b;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/a", &a), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/b", &b), 0);
    for (uint64_t i = 0; i < 200; i++)
        th_submit(&h, i % 2 ? a : b, i, 1, 20);
    cr_assert(th_wait(&h, 200));
    for (size_t i = 0; i < 200; i++)
        cr_assert_eq((uintptr_t)h.done[i].user, i);
}

Test(append, empty_batch_completes_with_zero_count)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    wal_submit(wal_batch_new(t), NULL);
    cr_assert(th_wait(&h, 1));
    cr_assert(h.done[0].rc == 0 && h.done[0].count == 0);
}

Test(append, batch_add_rejects_qos_above_2)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    wal_batch_t *b = wal_batch_new(t);
    wal_msg_t m = { .qos = 3 };
    cr_assert_eq(wal_batch_add(b, &m), -EINVAL);
    cr_assert_eq(wal_batch_count(b), 0);
    wal_batch_free(b);
}

Test(append, record_that_cannot_fit_a_segment_is_rejected)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    static uint8_t big[5000];
    wal_batch_t *b = wal_batch_new(t);
    wal_msg_t m = { .payload = big, .payload_len = sizeof big };
    cr_assert_eq(wal_batch_add(b, &m), -EMSGSIZE);
    wal_batch_free(b);
}

Test(append, full_batch_says_efull)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    wal_batch_t *b = wal_batch_new(t);
    th_msgbuf_t mb;
    int rc = 0;
    uint32_t n = 0;
    while ((rc = wal_batch_add(b, th_msg(&mb, n, 100))) == 0)
        n++;
    cr_assert_eq(rc, TB_EFULL);
    cr_assert_leq(wal_batch_bytes(b), 4096 - 32);
    wal_batch_free(b);
}

Test(append, invalid_topic_name_is_refused)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "", &t), TB_EINVALID);
    cr_assert_null(t);
}

Test(append, always_mode_syncs_before_completion)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(th_append(&h, t, (uint64_t)i * 5, 5, 50), 0);
        cr_assert_eq(crashio_pending_bytes(c), 0, "batch %d completed with unsynced bytes", i);
    }
    th_close(&h);
    crashio_free(c);
}

Test(append, always_mode_readable_end_covers_completed_batch)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 7, 10), 0);
    cr_assert_eq(wal_topic_readable_end(t), 8);
}

Test(append, pending_batches_share_one_fdatasync)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    int before = crashio_data_syncs(c);
    crashio_gate(c, true);
    th_submit(&h, t, 0, 1, 10);
    cr_assert(crashio_wait_blocked(c)); /* the writer is inside the first round's sync */
    for (uint64_t i = 1; i <= 50; i++)
        th_submit(&h, t, i, 1, 10);
    crashio_gate(c, false);
    cr_assert(th_wait(&h, 51));
    cr_assert_eq(crashio_data_syncs(c) - before, 2, "one sync for the first batch, one for the 50 behind it");
    for (size_t i = 0; i < 51; i++)
        cr_assert_eq(h.done[i].rc, 0);
    th_close(&h);
    crashio_free(c);
}

Test(append, interval_mode_completes_after_write_and_reads_only_synced)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    h.o.fsync = WAL_FSYNC_INTERVAL;
    h.o.fsync_interval_ms = 3600 * 1000;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 3, 10), 0);
    cr_assert_gt(crashio_pending_bytes(c), 0, "completed before any fdatasync");
    cr_assert_eq(wal_topic_readable_end(t), 1, "nothing synced, nothing readable");
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_topic_readable_end(t), 4);
    cr_assert_eq(th_append(&h, t, 3, 3, 10), 0);
    cr_assert_eq(wal_topic_readable_end(t), 4, "only the synced batch is readable");
    th_close(&h);
    crashio_free(c);
}

static bool readable_reaches_4(void *t) { return wal_topic_readable_end(t) >= 4; }

Test(append, interval_mode_syncs_on_its_timer)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    h.o.fsync = WAL_FSYNC_INTERVAL;
    h.o.fsync_interval_ms = 20;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 3, 10), 0);
    cr_assert(th_wait_until(readable_reaches_4, t), "no fdatasync within the interval");
    cr_assert_eq(crashio_pending_bytes(c), 0);
    th_close(&h);
    crashio_free(c);
}

Test(append, never_mode_readable_end_is_written_end)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    h.o.fsync = WAL_FSYNC_NEVER;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 4, 10), 0);
    cr_assert_gt(crashio_pending_bytes(c), 0);
    cr_assert_eq(wal_topic_readable_end(t), 5);
    th_close(&h);
    crashio_free(c);
}

Test(append, close_syncs_in_never_mode)
{
    crashio_t *c = crashio_new(1);
    h.o.io = crashio_io(c);
    h.o.fsync = WAL_FSYNC_NEVER;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 4, 10), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(crashio_pending_bytes(c), 0);
    crashio_free(c);
}

Test(append, batch_pending_at_close_is_written)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    th_submit(&h, t, 0, 2, 10);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    uint64_t seqs[4];
    cr_assert_eq(th_read_all(t, 1, 10, seqs, 4, NULL), 2, "a batch pending at close is written, not lost");
}

Test(append, fsync_histogram_counts_syncs)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    wal_fsync_hist_t a, b;
    wal_fsync_hist(h.w, &a);
    cr_assert_eq(th_append(&h, t, 0, 1, 10), 0);
    wal_fsync_hist(h.w, &b);
    cr_assert_eq(b.count - a.count, 1);
    uint64_t sum = 0;
    for (int i = 0; i < WAL_FSYNC_HIST_BUCKETS; i++)
        sum += b.buckets[i];
    cr_assert_eq(sum, b.count);
}
