/* test_failure.c: a full disk or a failed fdatasync is never reported as success,
 * the topic says so, and it recovers by itself when the disk does. */
#include <criterion/criterion.h>
#include <errno.h>

#include "helper_crashio.h"
#include "helper_wal.h"

static th_t h;
static crashio_t *c;
static wal_topic_t *t;

static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    c = crashio_new(5);
    h.o.io = crashio_io(c);
    h.o.retry_ms = 3600 * 1000; /* retries happen only when a test asks */
}
static void teardown(void)
{
    th_cleanup(&h);
    crashio_free(c);
}
TestSuite(failure, .init = setup, .fini = teardown);

#define PAYLOAD 100

static void start(void)
{
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
}

static long active_size(void)
{
    char *p = tb_asprintf("%s/+e+t/00000000000000000001.seg", h.wal_dir);
    long n = th_file_size(p);
    free(p);
    return n;
}

Test(failure, disk_full_fails_the_batch_with_the_errno)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), -ENOSPC);
}

Test(failure, disk_full_puts_the_topic_in_failed_state)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    th_append(&h, t, 0, 5, PAYLOAD);
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_FAILED);
    cr_assert_eq(wal_topic_error(t), -ENOSPC);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.write_errors, 1);
}

Test(failure, failed_topic_fails_new_batches_fast_with_efull)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    th_append(&h, t, 0, 5, PAYLOAD);
    crashio_fail_writes(c, 0, 0); /* even with space back, no retry was due yet */
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), TB_EFULL);
}

Test(failure, topic_recovers_when_space_returns_and_offsets_continue)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -ENOSPC);
    crashio_fail_writes(c, 0, 0);
    wal_topic_retry(t);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), 0);
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_OK);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 6);
    uint64_t seqs[16];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 16, NULL), 10);
}

Test(failure, retry_while_the_disk_is_still_full_keeps_the_topic_failed)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), -ENOSPC);
    wal_topic_retry(t); /* the batch below runs the retry first: its probe write fails */
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), TB_EFULL, "refused fast: the topic never claimed to be writable");
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_FAILED);
}

Test(failure, failed_retry_leaves_the_segment_as_it_was)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    long before = active_size();
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -ENOSPC);
    crashio_fail_writes(c, -ENOSPC, 1000); /* part of the probe gets through */
    wal_topic_retry(t);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), TB_EFULL);
    cr_assert_eq(active_size(), before);
}

Test(failure, retry_probe_is_as_large_as_the_failed_batch)
{
    h.o.segment_bytes = 64 * 1024;
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 0, 100, PAYLOAD), -ENOSPC); /* ~14 KiB */
    crashio_fail_writes(c, -ENOSPC, 8192); /* more than a page, less than that batch */
    wal_topic_retry(t);
    cr_assert_eq(th_append(&h, t, 0, 1, PAYLOAD), TB_EFULL);
}

Test(failure, topic_created_on_a_full_disk_opens_in_failed_state)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    wal_topic_t *n = NULL;
    cr_assert_eq(wal_topic_open(h.w, "/e/new", &n), 0, "a full disk is an outage, not a refusal");
    cr_assert_eq(wal_topic_state(n), WAL_TOPIC_FAILED);
    cr_assert_eq(th_append(&h, n, 0, 5, PAYLOAD), TB_EFULL);
}

Test(failure, topic_created_on_a_full_disk_is_made_when_space_returns)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    wal_topic_t *n = NULL;
    cr_assert_eq(wal_topic_open(h.w, "/e/new", &n), 0);
    crashio_fail_writes(c, 0, 0);
    wal_topic_retry(n);
    cr_assert_eq(th_append(&h, n, 0, 5, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 1);
    uint64_t seqs[8];
    cr_assert_eq(th_read_all(n, 1, PAYLOAD, seqs, 8, NULL), 5);
}

Test(failure, partly_written_batch_is_cut_back_whole)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    long before = active_size();
    crashio_fail_writes(c, -ENOSPC, 300); /* two records' worth gets through */
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -ENOSPC);
    cr_assert_eq(active_size(), before);
    crashio_fail_writes(c, 0, 0);
    cr_assert_eq(th_close(&h), 0);
    h.o.io = NULL;
    cr_assert_eq(th_open(&h), 0);
    uint64_t seqs[16];
    cr_assert_eq(th_read_all(wal_topic_find(h.w, "/e/t"), 1, PAYLOAD, seqs, 16, NULL), 5);
}

Test(failure, failed_fdatasync_fails_the_batch)
{
    start();
    crashio_fail_syncs(c, -EIO, 1);
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), -EIO);
    cr_assert_eq(wal_topic_readable_end(t), 1, "nothing of it is readable");
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_FAILED);
}

Test(failure, failed_fdatasync_in_always_mode_cuts_what_was_not_synced)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    long before = active_size();
    crashio_fail_syncs(c, -EIO, 1);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -EIO);
    cr_assert_eq(active_size(), before);
}

Test(failure, topic_recovers_after_a_failed_fdatasync_and_reuses_unacked_offsets)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    crashio_fail_syncs(c, -EIO, 1);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -EIO);
    wal_topic_retry(t);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 6, "offsets 6.. were never acknowledged nor readable");
    uint64_t seqs[16];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 16, NULL), 10);
    cr_assert_eq(crashio_pending_bytes(c), 0);
}

static bool topic_ok(void *arg) { return wal_topic_state(arg) == WAL_TOPIC_OK; }

Test(failure, interval_mode_rewrites_acknowledged_records_after_a_failed_fdatasync)
{
    h.o.fsync = WAL_FSYNC_INTERVAL;
    h.o.fsync_interval_ms = 3600 * 1000;
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), 0);
    cr_assert_gt(crashio_pending_bytes(c), 0);
    crashio_fail_syncs(c, -EIO, 1);
    cr_assert_eq(wal_sync(h.w), -EIO);
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_FAILED);
    wal_topic_retry(t); /* asynchronous: the writer repairs when it wakes */
    cr_assert(th_wait_until(topic_ok, t));
    cr_assert_eq(crashio_pending_bytes(c), 0, "the rewritten records were synced");
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.lost_total, 0);
    uint64_t seqs[16];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 16, NULL), 10);
}

Test(failure, total_bound_refuses_a_batch_rather_than_exceed_it)
{
    h.o.max_total_bytes = 8192;
    h.o.max_topic_bytes = 8192;
    start();
    wal_topic_t *b;
    cr_assert_eq(wal_topic_open(h.w, "/e/b", &b), 0);
    cr_assert_eq(th_append(&h, t, 0, 25, PAYLOAD), 0);
    cr_assert_eq(th_append(&h, b, 0, 25, PAYLOAD), 0);
    cr_assert_eq(th_append(&h, t, 25, 7, PAYLOAD), TB_EFULL);
    wal_topic_stats_t sa, sb;
    wal_topic_stats(t, &sa);
    wal_topic_stats(b, &sb);
    cr_assert_leq(sa.bytes + sb.bytes, 8192);
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_OK, "a bound is not a disk failure");
}

Test(failure, sync_barrier_reports_a_topic_that_is_still_failed)
{
    start();
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), -ENOSPC);
    cr_assert_eq(wal_sync(h.w), TB_EFULL);
}

Test(failure, close_makes_one_last_repair_attempt)
{
    start();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 5, 5, PAYLOAD), -ENOSPC);
    crashio_fail_writes(c, 0, 0); /* space is back, but no retry was due */
    cr_assert_eq(th_close(&h), 0);
}

Test(failure, close_reports_a_topic_it_could_not_repair)
{
    start();
    crashio_fail_syncs(c, -EIO, 1000);
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), -EIO);
    cr_assert_eq(th_close(&h), -EIO);
}
