/*
 * test_min_free.c: the free-space floor (wal/space.c, wal.min_free_bytes).
 * The file system is the crash-injection layer's fake (crashio_space): a
 * file system of FS bytes of which the test says how many other programs
 * take, its free space following what the log writes and deletes. Below
 * the floor the log behaves as at the total bound: drop_oldest deletes the
 * oldest sealed segments across topics (acknowledged ones first), refuse
 * refuses, nothing at all is left when only active segments remain but a
 * refusal (TB_EFULL, the topic OK); the session journal (own bound) is
 * exempt; and the log takes writes again on its own when space returns.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helper_crashio.h"
#include "helper_wal.h"

#define PAYLOAD 100
#define PER_BATCH 10
#define FS (1u << 20)
#define FLOOR (64u << 10)
#define META 128 /* meta files are not in the estimate until the next reading */

static th_t h;
static crashio_t *c;

static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    c = crashio_new(7);
    crashio_space(c, FS, 0);
    h.o.io = crashio_io(c);
    h.o.min_free_bytes = FLOOR;
    h.o.min_free_permille = 0;
    h.o.space_check_ms = 60000; /* readings only at open, wal_sync, deletions, ENOSPC, unless a test asks */
}
static void teardown(void)
{
    th_cleanup(&h);
    crashio_free(c);
}
TestSuite(min_free, .init = setup, .fini = teardown);

static wal_topic_t *open_topic(const char *name) { return th_topic(&h, name); }

static wal_space_t space(void)
{
    wal_space_t sp;
    wal_space(h.w, &sp);
    return sp;
}

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

/* The faked file system has `free` bytes free now (other programs take the rest). */
static void set_free(uint64_t free)
{
    crashio_space(c, FS, 0);
    uint64_t log = FS - crashio_space_free(c, h.wal_dir);
    cr_assert_lt(free + log, FS);
    crashio_space(c, FS, FS - free - log);
}

static uint64_t truth(void)
{
    return crashio_space_free(c, h.wal_dir);
}

static void fill(wal_topic_t *t, int batches, uint64_t *seq) { th_fill(&h, t, batches, PER_BATCH, PAYLOAD, seq); }

static int fill_until_refused(wal_topic_t *t, uint64_t *seq, int max)
{
    for (int i = 0; i < max; i++) {
        int rc = th_append(&h, t, *seq, PER_BATCH, PAYLOAD);
        if (rc == TB_EFULL)
            return i;
        cr_assert_eq(rc, 0, "batch %d", i);
        *seq += PER_BATCH;
    }
    cr_assert_fail("no batch of %s was refused in %d", wal_topic_name(t), max);
    return -1;
}

static uint64_t want_free;
static bool free_at_least(void *arg)
{
    (void)arg;
    wal_space_t sp = space();
    return sp.known && sp.free_bytes >= want_free;
}
static bool free_below(void *arg)
{
    (void)arg;
    wal_space_t sp = space();
    return sp.known && sp.free_bytes < want_free;
}

/* ---- the reading and the floor --------------------------------------------- */

Test(min_free, the_floor_is_the_larger_of_the_bytes_and_the_percentage_of_the_file_system)
{
    static const struct { uint64_t bytes; uint32_t permille; uint64_t floor; } cases[] = {
        { 0, 20, (10u << 20) / 50 },     /* 2% of 10 MiB */
        { 1u << 20, 20, 1u << 20 },      /* the bytes are more */
        { 100u << 10, 20, (10u << 20) / 50 },
        { 0, 5, (10u << 20) / 200 },     /* 0.5% */
        { 0, 0, 0 },                     /* off */
    };
    crashio_space(c, 10u << 20, 0);
    for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
        h.o.min_free_bytes = cases[i].bytes;
        h.o.min_free_permille = cases[i].permille;
        cr_assert_eq(th_open(&h), 0);
        wal_space_t sp = space();
        cr_assert(sp.known);
        cr_assert_eq(sp.fs_bytes, 10u << 20);
        cr_assert_eq(sp.min_free_bytes, cases[i].floor, "case %zu", i);
        cr_assert_eq(sp.free_bytes, truth(), "case %zu: the reading at open", i);
        cr_assert_eq(th_close(&h), 0);
    }
}

Test(min_free, the_default_floor_is_two_percent)
{
    wal_opts_t o;
    wal_opts_default(&o);
    cr_assert_eq(o.min_free_bytes, 0);
    cr_assert_eq(o.min_free_permille, 20);
    cr_assert_eq(o.space_check_ms, 1000);
}

Test(min_free, wal_open_refuses_a_percentage_over_half_of_the_file_system)
{
    h.o.min_free_permille = 501;
    wal_t *w = (wal_t *)&h;
    cr_assert_eq(wal_open(&h.o, &w), TB_ECONFIG);
    cr_assert_null(w);
    h.o.min_free_permille = 500;
    h.o.space_check_ms = 0;
    cr_assert_eq(wal_open(&h.o, &w), TB_ECONFIG);
    h.o.space_check_ms = 1000;
    cr_assert_eq(th_open(&h), 0);
}

Test(min_free, the_estimate_follows_the_log_between_readings)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    int calls = crashio_statvfs_calls(c);
    wal_space_t before = space();
    wal_topic_stats_t st0 = stats(t);
    uint64_t seq = 0;
    fill(t, 5, &seq); /* a rotation on the way */
    wal_space_t after = space();
    wal_topic_stats_t st1 = stats(t);
    cr_assert_gt(st1.segments, st0.segments);
    cr_assert_eq(crashio_statvfs_calls(c), calls, "no reading in between");
    cr_assert_eq(before.free_bytes - after.free_bytes, st1.bytes - st0.bytes, "less exactly what the log grew by");
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_gt(space().readings, after.readings, "wal_sync reads");
    cr_assert_eq(space().free_bytes, truth());
}

Test(min_free, a_write_that_fails_for_want_of_space_reads_the_free_space_again)
{
    h.o.retry_ms = 3600 * 1000;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    int calls = crashio_statvfs_calls(c);
    crashio_fail_writes(c, -ENOSPC, 0);
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), -ENOSPC);
    cr_assert_gt(crashio_statvfs_calls(c), calls);
    cr_assert_not(h.done[h.ndone - 1].refused_at_bound, "a failed disk is no bound");
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), TB_EFULL, "the failed topic answers fast");
    cr_assert_not(h.done[h.ndone - 1].refused_at_bound, "and that is no bound either");
}

Test(min_free, without_a_reading_the_floor_is_off)
{
    crashio_statvfs_error(c, -ENOSYS);
    h.o.min_free_bytes = 1ull << 50; /* far more than any disk: every write would be refused */
    cr_assert_eq(th_open(&h), 0);
    cr_assert_not(space().known);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 3, &seq);
    cr_assert_eq(th_close(&h), 0);

    /* an io table without statvfs: the same */
    static wal_io_t io;
    io = *wal_io_posix();
    io.statvfs = NULL;
    h.o.io = &io;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_not(space().known);
    t = open_topic("/e/t");
    fill(t, 3, &seq);
}

/* ---- drop_oldest ------------------------------------------------------------ */

Test(min_free, below_the_floor_drop_oldest_deletes_the_oldest_sealed_segments_across_topics)
{
    cr_assert_eq(th_open(&h), 0);
    uint64_t sa = 0, sb = 0;
    wal_topic_t *a = open_topic("/e/a");
    fill(a, 8, &sa);
    wal_topic_stats_t a0 = stats(a);
    cr_assert_gt(a0.segments, 2, "a has sealed segments to give");
    wal_topic_t *b = open_topic("/e/b"); /* b's segments are all newer than a's */
    set_free(FLOOR + 6000);
    cr_assert_eq(wal_sync(h.w), 0);
    int calls = crashio_statvfs_calls(c);
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(th_append(&h, b, sb, PER_BATCH, PAYLOAD), 0, "batch %d: drop_oldest makes room", i);
        sb += PER_BATCH;
        cr_assert_geq(space().free_bytes, FLOOR, "batch %d: the estimate stays above the floor", i);
        cr_assert_geq(truth() + META, FLOOR, "batch %d: and so does the file system", i);
    }
    wal_topic_stats_t as = stats(a), bs = stats(b);
    cr_assert_eq(as.segments, 1, "a gave every sealed segment, the oldest first");
    cr_assert_gt(as.dropped_total, 0);
    cr_assert_eq(as.dropped_total, as.oldest_offset - 1, "every message a lost was counted");
    cr_assert_eq(bs.dropped_total, bs.oldest_offset - 1, "b, which paid next, counted too");
    cr_assert_eq(bs.next_offset - 1, sb, "no batch was refused");
    cr_assert_eq(as.state, WAL_TOPIC_OK);
    cr_assert_gt(crashio_statvfs_calls(c), calls, "deletions are followed by a reading");
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_geq(space().free_bytes + META, FLOOR);
}

Test(min_free, at_the_floor_acknowledged_segments_go_before_unacknowledged_ones)
{
    h.o.checkpoint_flush_ms = 60000; /* a moved checkpoint waits a minute to be applied */
    h.o.space_check_ms = 20;
    cr_assert_eq(th_open(&h), 0);
    uint64_t sa = 0, sb = 0;
    wal_topic_t *a = open_topic("/e/a"); /* older and unacknowledged: the oldest sealed segments */
    fill(a, 6, &sa);
    wal_topic_t *b = open_topic("/e/b");
    fill(b, 1, &sb);
    cr_assert_eq(wal_checkpoint(b, 1), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* applied now; the next one waits the minute */
    fill(b, 8, &sb);
    cr_assert_eq(wal_checkpoint(b, wal_topic_readable_end(b) - 1), 0);
    wal_topic_stats_t a0 = stats(a), b0 = stats(b);
    cr_assert_gt(b0.segments, 2, "b holds acknowledged sealed segments not deleted yet");
    cr_assert_gt(a0.segments, 1);
    set_free(FLOOR + 500);
    want_free = FLOOR + 1000;
    cr_assert(th_wait_until(free_below, NULL), "the periodic reading saw the space go");
    cr_assert_eq(th_append(&h, a, sa, PER_BATCH, PAYLOAD), 0);
    wal_topic_stats_t as = stats(a), bs = stats(b);
    cr_assert_eq(as.dropped_total, 0, "nothing unacknowledged was deleted");
    cr_assert_eq(as.oldest_offset, 1);
    cr_assert_geq(as.segments, a0.segments, "a kept every segment");
    cr_assert_eq(bs.dropped_total, 0);
    cr_assert_eq(bs.segments, 1, "b's acknowledged segments went");
    cr_assert_geq(truth() + META, FLOOR);
}

Test(min_free, drop_oldest_refuses_at_the_floor_with_only_active_segments_left_and_recovers_on_its_own)
{
    h.o.space_check_ms = 20;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    set_free(FLOOR - 1000);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), TB_EFULL);
    cr_assert(h.done[h.ndone - 1].refused_at_bound, "the floor is a bound");
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), TB_EFULL, "and again: nothing changed");
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.state, WAL_TOPIC_OK, "a bound, not a failure");
    cr_assert_eq(st.segments, 1);
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_eq(st.next_offset, 1, "the refused batches took no offsets");
    /* another program frees space: no retry, no restart, only the periodic reading */
    set_free(FLOOR + (100u << 10));
    want_free = FLOOR + (50u << 10);
    cr_assert(th_wait_until(free_at_least, NULL), "the periodic reading saw the space return");
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), 0);
    cr_assert_eq(stats(t).next_offset, 1 + PER_BATCH);
}

/* ---- refuse --------------------------------------------------------------------- */

static void refusing_policy_at_the_floor(wal_overflow_t policy)
{
    h.o.space_check_ms = 20;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    cr_assert_eq(wal_topic_set_overflow(t, policy), 0);
    uint64_t seq = 0;
    fill(t, 4, &seq);
    cr_assert_gt(stats(t).segments, 1, "sealed segments drop_oldest would take");
    set_free(FLOOR + 3000);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_gt(fill_until_refused(t, &seq, 20), 0, "what fits above the floor is taken");
    cr_assert(h.done[h.ndone - 1].refused_at_bound, "the floor is a bound");
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), TB_EFULL);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.state, WAL_TOPIC_OK);
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_eq(st.oldest_offset, 1, "nothing was deleted");
    cr_assert_eq(st.next_offset, seq + 1);
    cr_assert_geq(truth() + META, FLOOR);
    set_free(FLOOR + (100u << 10));
    want_free = FLOOR + (50u << 10);
    cr_assert(th_wait_until(free_at_least, NULL));
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "taken again");
    seq += PER_BATCH;
    uint64_t seqs[256];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 256, &gaps), (long)seq);
    cr_assert_eq(gaps, 0);
}

Test(min_free, refuse_at_the_floor_deletes_nothing_and_takes_writes_again_when_space_returns)
{
    refusing_policy_at_the_floor(WAL_OVERFLOW_REFUSE);
}

Test(min_free, drop_newest_at_the_floor_deletes_nothing_and_takes_writes_again_when_space_returns)
{
    refusing_policy_at_the_floor(WAL_OVERFLOW_DROP_NEWEST);
}

static bool blocked(void *arg) { return wal_topic_blocked(arg); }

Test(min_free, block_at_the_floor_holds_the_batch_and_writes_it_on_its_own_when_space_returns)
{
    h.o.space_check_ms = 20;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_BLOCK), 0);
    set_free(FLOOR - 1000);
    cr_assert_eq(wal_sync(h.w), 0);
    size_t before = h.ndone;
    th_submit(&h, t, 0, PER_BATCH, PAYLOAD);
    th_submit(&h, t, PER_BATCH, PER_BATCH, PAYLOAD);
    cr_assert(th_wait_until(blocked, t), "held at the floor");
    cr_assert_eq(wal_sync(h.w), 0);
    th_collect(&h);
    cr_assert_eq(h.ndone, before, "neither written nor refused");
    cr_assert_eq(stats(t).next_offset, 1, "no offsets taken");
    /* another program frees space: only the periodic reading sees it, and the held batches go */
    set_free(FLOOR + (100u << 10));
    cr_assert(th_wait(&h, before + 2), "written once the space returned, with no call from the caller");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(h.done[before + (size_t)i].rc, 0);
        cr_assert_eq(h.done[before + (size_t)i].first_offset, 1 + (uint64_t)i * PER_BATCH, "in order");
    }
    cr_assert_not(wal_topic_blocked(t));
    uint64_t seqs[64];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 64, &gaps), 2 * PER_BATCH);
    cr_assert_eq(gaps, 0);
    for (int i = 0; i < 2 * PER_BATCH; i++)
        cr_assert_eq(seqs[i], (uint64_t)i);
}

/* ---- the session journal ---------------------------------------------------------- */

Test(min_free, a_topic_with_an_own_bound_is_exempt_and_never_deleted_for_the_floor)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_topic("$sessions");
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 64u << 10), 0);
    uint64_t sj = 0, sd = 0;
    fill(j, 6, &sj);
    wal_topic_stats_t j0 = stats(j);
    cr_assert_gt(j0.segments, 1, "sealed segments a bound could take");
    wal_topic_t *d = open_topic("/e/d");
    set_free(FLOOR - 2000);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(th_append(&h, d, sd, PER_BATCH, PAYLOAD), TB_EFULL, "the data topic is held to the floor");
    wal_topic_stats_t js = stats(j);
    cr_assert_eq(js.segments, j0.segments, "the journal lost nothing to it");
    cr_assert_eq(js.oldest_offset, 1);
    cr_assert_eq(js.dropped_total, 0);
    fill(j, 3, &sj); /* and is written below it */
    cr_assert_eq(stats(j).dropped_total, 0);
    cr_assert_eq(stats(d).state, WAL_TOPIC_OK);
}
