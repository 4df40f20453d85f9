/*
 * test_own_bound.c: a topic with its own bound (wal_topic_set_own_bound),
 * as the broker's session journal is: outside the total bound (its bytes
 * are not in it, and no data topic's write deletes its segments), held to
 * its own max_bytes alone, refusing when full and deleting nothing, freed
 * only by its checkpoint; not persisted, so set again after a reopen.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_wal.h"

#define PAYLOAD 100
#define PER_BATCH 10
#define SEG 4096
#define HDR 32 /* a segment header: the most a bound frees beyond a batch's need */
#define JOURNAL "$sessions"

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.max_total_bytes = 24576; /* six segments */
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(own_bound, .init = setup, .fini = teardown);

static wal_topic_t *open_topic(const char *name) { return th_topic(&h, name); }

static wal_topic_t *open_journal(uint64_t max_bytes)
{
    wal_topic_t *j = open_topic(JOURNAL);
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, max_bytes), 0);
    return j;
}

static void fill(wal_topic_t *t, int batches, uint64_t *seq) { th_fill(&h, t, batches, PER_BATCH, PAYLOAD, seq); }

/* Appends until a batch is refused (TB_EFULL), at most max; returns how many were accepted. */
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

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

/* Every record of t from offset 1 is readable and intact, n of them, no gap. */
static void assert_all_readable(wal_topic_t *t, uint64_t n)
{
    uint64_t seqs[1024];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 1024, &gaps), (long)n, "%s", wal_topic_name(t));
    cr_assert_eq(gaps, 0);
    for (uint64_t i = 0; i < n && i < 1024; i++)
        cr_assert_eq(seqs[i], i);
}

/* The figures a data bound must not change in an own-bound topic. */
static void assert_intact(wal_topic_t *t, const wal_topic_stats_t *before)
{
    wal_topic_stats_t now = stats(t);
    cr_assert_eq(now.segments, before->segments);
    cr_assert_eq(now.bytes, before->bytes);
    cr_assert_eq(now.oldest_offset, 1);
    cr_assert_eq(now.dropped_total, 0);
    cr_assert_eq(now.state, WAL_TOPIC_OK);
}

Test(own_bound, the_total_bound_deletes_data_topics_but_never_the_own_bound_topic)
{
    cr_assert_eq(th_open(&h), 0);
    /* the journal first: its segments are the oldest, the total bound's first pick */
    wal_topic_t *j = open_journal(64 << 10);
    uint64_t sj = 0, sa = 0, sb = 0;
    fill(j, 6, &sj);
    wal_topic_stats_t j0 = stats(j);
    cr_assert_gt(j0.segments, 1, "the journal has sealed segments a bound could take");
    cr_assert_gt(j0.bytes, SEG + HDR, "enough that counting it would show");
    wal_topic_t *a = open_topic("/e/a");
    fill(a, 4, &sa);
    wal_topic_t *b = open_topic("/e/b");
    fill(b, 40, &sb);

    wal_topic_stats_t as = stats(a), bs = stats(b);
    assert_intact(j, &j0);
    assert_all_readable(j, sj);
    cr_assert_gt(as.dropped_total, 0, "the older data topic paid first");
    cr_assert_gt(bs.dropped_total, 0, "then the writing topic itself");
    /* the journal's bytes are not in the total: the data topics get all of it */
    cr_assert_leq(as.bytes + bs.bytes, 24576);
    cr_assert_gt(as.bytes + bs.bytes, 24576 - SEG - HDR, "only what the batch needed was deleted");
}

Test(own_bound, the_own_bound_topic_is_held_to_its_own_bound_not_the_total)
{
    h.o.max_total_bytes = 2 * SEG;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(32 << 10);
    /* a data topic fills the total bound first */
    wal_topic_t *a = open_topic("/e/a");
    uint64_t sj = 0, sa = 0;
    fill(a, 8, &sa);
    cr_assert_gt(stats(a).dropped_total, 0, "the total bound is full");
    /* the journal still takes about 18 KiB: more than the whole total bound */
    fill(j, 12, &sj);
    wal_topic_stats_t js = stats(j);
    cr_assert_gt(js.bytes, 2 * SEG);
    cr_assert_eq(js.dropped_total, 0);
    cr_assert_eq(js.oldest_offset, 1);
    /* and the data topic still has the whole total */
    fill(a, 2, &sa);
    cr_assert_gt(stats(a).bytes, 2 * SEG - SEG - HDR);
    assert_intact(j, &js);
}

Test(own_bound, the_own_bound_topic_refuses_when_full_deleting_nothing_until_its_checkpoint_moves)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(16384);
    cr_assert_eq(wal_topic_overflow(j), WAL_OVERFLOW_REFUSE);
    uint64_t sj = 0;
    cr_assert_gt(fill_until_refused(j, &sj, 40), 0);
    wal_topic_stats_t full = stats(j);
    cr_assert_leq(full.bytes, 16384);
    cr_assert_eq(full.state, WAL_TOPIC_OK, "a refusal is not a failure");
    cr_assert_eq(full.dropped_total, 0);
    cr_assert_eq(full.oldest_offset, 1, "nothing was deleted");
    cr_assert_eq(full.next_offset, sj + 1, "the refused batch took no offsets");
    cr_assert_eq(th_append(&h, j, sj, PER_BATCH, PAYLOAD), TB_EFULL, "and again");
    assert_intact(j, &full);
    assert_all_readable(j, sj);

    /* compaction acknowledges the older half: the segments wholly below it go */
    uint64_t ck = sj / 2;
    cr_assert_eq(wal_checkpoint(j, ck), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* the writer has applied it */
    wal_topic_stats_t freed = stats(j);
    cr_assert_gt(freed.oldest_offset, 1, "the checkpoint deleted the oldest segment");
    cr_assert_leq(freed.oldest_offset, ck + 1, "and nothing above the checkpoint");
    cr_assert_lt(freed.bytes, full.bytes);
    cr_assert_eq(freed.dropped_total, 0, "acknowledged records are not drops");
    cr_assert_eq(th_append(&h, j, sj, PER_BATCH, PAYLOAD), 0, "accepted again");
    sj += PER_BATCH;
    uint64_t seqs[1024];
    int gaps;
    cr_assert_eq(th_read_all(j, ck + 1, PAYLOAD, seqs, 1024, &gaps), (long)(sj - ck));
    cr_assert_eq(gaps, 0);
    cr_assert_eq(seqs[0], ck, "offset ck + 1 holds message ck");
}

Test(own_bound, a_full_journal_refuses_but_data_topics_go_on)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(2 * SEG);
    uint64_t sj = 0, sa = 0;
    fill_until_refused(j, &sj, 40);
    wal_topic_t *a = open_topic("/e/a");
    fill(a, 30, &sa); /* past the total bound: drop_oldest on a's own segments */
    cr_assert_gt(stats(a).dropped_total, 0);
    cr_assert_eq(th_append(&h, j, sj, PER_BATCH, PAYLOAD), TB_EFULL, "the data topic's drops freed nothing of it");
    cr_assert_eq(stats(j).dropped_total, 0);
    cr_assert_eq(stats(j).oldest_offset, 1);
}

Test(own_bound, switched_to_drop_oldest_it_drops_only_its_own_at_its_own_bound)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(16384);
    cr_assert_eq(wal_topic_set_overflow(j, WAL_OVERFLOW_DROP_OLDEST), 0);
    wal_topic_t *a = open_topic("/e/a");
    uint64_t sj = 0, sa = 0;
    /* fill the total bound to within less than one journal batch */
    while (24576 - stats(a).bytes >= 1000) {
        cr_assert_eq(th_append(&h, a, sa, 1, PAYLOAD), 0);
        sa++;
    }
    wal_topic_stats_t a0 = stats(a);
    cr_assert_gt(a0.segments, 1);
    fill(j, 30, &sj);
    wal_topic_stats_t js = stats(j);
    cr_assert_leq(js.bytes, 16384);
    cr_assert_gt(js.dropped_total, 0, "its own bound deleted its oldest");
    wal_topic_stats_t as = stats(a);
    cr_assert_eq(as.segments, a0.segments, "the journal's writes took nothing of the data topic");
    cr_assert_eq(as.bytes, a0.bytes);
    cr_assert_eq(as.dropped_total, a0.dropped_total);
}

Test(own_bound, stats_show_the_own_bound_and_every_other_topic_under_max_topic_bytes)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *a = open_topic("/e/a");
    wal_topic_t *j = open_topic(JOURNAL);
    wal_topic_stats_t st = stats(j);
    cr_assert_not(st.own_bound);
    cr_assert_eq(st.max_bytes, h.o.max_topic_bytes);
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 40000), 0);
    st = stats(j);
    cr_assert(st.own_bound);
    cr_assert_eq(st.max_bytes, 40000);
    st = stats(a);
    cr_assert_not(st.own_bound);
    cr_assert_eq(st.max_bytes, h.o.max_topic_bytes);
}

Test(own_bound, after_reopen_it_is_an_ordinary_topic_until_set_again_and_the_total_is_right)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(64 << 10);
    uint64_t sj = 0, sa = 0;
    fill(j, 6, &sj);
    wal_topic_stats_t j0 = stats(j);
    wal_topic_t *a = open_topic("/e/a");
    fill(a, 20, &sa);
    cr_assert_eq(th_close(&h), 0);

    cr_assert_eq(th_open(&h), 0);
    j = wal_topic_find(h.w, JOURNAL);
    a = wal_topic_find(h.w, "/e/a");
    cr_assert_not_null(j);
    cr_assert_not_null(a);
    wal_topic_stats_t st = stats(j);
    cr_assert_not(st.own_bound, "not persisted");
    cr_assert_eq(st.max_bytes, h.o.max_topic_bytes);
    cr_assert_eq(wal_topic_overflow(j), WAL_OVERFLOW_DROP_OLDEST, "opts->overflow, as for every topic");
    /* wal_open counted the journal in the total; setting it takes it out again */
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 64 << 10), 0);
    cr_assert_eq(wal_topic_overflow(j), WAL_OVERFLOW_REFUSE);
    fill(a, 20, &sa);
    wal_topic_stats_t as = stats(a);
    cr_assert_leq(as.bytes, 24576);
    cr_assert_gt(as.bytes, 24576 - SEG - HDR, "the data topic has the whole total again");
    assert_intact(j, &j0);
    assert_all_readable(j, sj);
}

Test(own_bound, setting_it_again_changes_only_the_max)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_journal(64 << 10);
    uint64_t sj = 0, sa = 0;
    fill(j, 6, &sj);
    /* a second call must not take the journal's bytes out of the total twice */
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 48 << 10), 0);
    cr_assert_eq(stats(j).max_bytes, 48 << 10);
    wal_topic_t *a = open_topic("/e/a");
    fill(a, 30, &sa);
    wal_topic_stats_t as = stats(a);
    cr_assert_leq(as.bytes, 24576, "the total bound still holds");
    cr_assert_gt(as.bytes, 24576 - SEG - HDR);
    cr_assert_eq(stats(j).dropped_total, 0);
}

Test(own_bound, arguments_are_checked_and_a_refused_call_changes_nothing)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *j = open_topic(JOURNAL);
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 0), TB_EINVALID);
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 2 * SEG - 1), TB_EINVALID);
    cr_assert_eq(wal_topic_set_own_bound(h.w, NULL, 1 << 20), TB_EINVALID);
    th_t other;
    th_init(&other, WAL_FSYNC_ALWAYS);
    cr_assert_eq(th_open(&other), 0);
    cr_assert_eq(wal_topic_set_own_bound(other.w, j, 1 << 20), TB_EINVALID, "a topic of another WAL");
    th_cleanup(&other);
    wal_topic_stats_t st = stats(j);
    cr_assert_not(st.own_bound);
    cr_assert_eq(wal_topic_overflow(j), WAL_OVERFLOW_DROP_OLDEST);
    cr_assert_eq(wal_topic_set_own_bound(h.w, j, 2 * SEG), 0, "twice segment_bytes is the least");
    cr_assert(stats(j).own_bound);
}
