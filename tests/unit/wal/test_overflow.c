/*
 * test_overflow.c: the overflow-policy type (wal/overflow.c): its names,
 * its checks at wal_open and in the setter, and drop_oldest set explicitly
 * on a topic doing at each bound exactly what the default does. Each bound
 * scenario runs twice, in fresh logs, once with the default and once with
 * the policy set on every topic, and the two must agree in every figure
 * (and each figure must be what retention.* expects of drop_oldest).
 * Then refuse at each bound: nothing deleted, TB_EFULL, the topic OK, and
 * writes accepted again once the checkpoint moves; drop_newest, the same
 * policy under a data topic's name, likewise; and every refusal at a bound,
 * and only such a refusal, marked refused_at_bound in its completion.
 * Last block: a batch at the bound is held, not refused (nothing written,
 * no offsets taken, later batches behind it), and written in order when
 * the checkpoint frees room; at close what is held completes TB_ECLOSED.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_wal.h"

#define PAYLOAD 100
#define PER_BATCH 10

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(overflow, .init = setup, .fini = teardown);

Test(overflow, every_policy_name_parses_back_to_its_policy)
{
    for (int i = 0; i < WAL_OVERFLOW__COUNT; i++) {
        const char *name = wal_overflow_name((wal_overflow_t)i);
        cr_assert_str_neq(name, "?");
        wal_overflow_t p = WAL_OVERFLOW__COUNT;
        cr_assert_eq(wal_overflow_parse(name, &p), 0, "%s", name);
        cr_assert_eq(p, (wal_overflow_t)i, "%s", name);
    }
    cr_assert_str_eq(wal_overflow_name(WAL_OVERFLOW_DROP_OLDEST), "drop_oldest");
    cr_assert_str_eq(wal_overflow_name(WAL_OVERFLOW_REFUSE), "refuse");
    cr_assert_str_eq(wal_overflow_name(WAL_OVERFLOW_DROP_NEWEST), "drop_newest");
    cr_assert_str_eq(wal_overflow_name(WAL_OVERFLOW_BLOCK), "block");
    wal_overflow_t p = WAL_OVERFLOW__COUNT;
    cr_assert_eq(wal_overflow_parse("refuse", &p), 0);
    cr_assert_eq(p, WAL_OVERFLOW_REFUSE);
}

Test(overflow, an_unknown_name_is_refused_and_leaves_the_output_alone)
{
    static const char *const bad[] = { "", "drop-oldest", "DROP_OLDEST", "drop_oldest ", "drop-newest", "DROP_NEWEST",
                                     "drop_newest ", "BLOCK", "block ", "blocking", "REFUSE", "refuse ", "refused" };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        wal_overflow_t p = WAL_OVERFLOW__COUNT;
        cr_assert_eq(wal_overflow_parse(bad[i], &p), TB_ECONFIG, "\"%s\"", bad[i]);
        cr_assert_eq(p, WAL_OVERFLOW__COUNT, "\"%s\"", bad[i]);
    }
    cr_assert_str_eq(wal_overflow_name(WAL_OVERFLOW__COUNT), "?");
    cr_assert_str_eq(wal_overflow_name((wal_overflow_t)77), "?");
}

Test(overflow, the_default_policy_is_drop_oldest_for_every_topic)
{
    wal_opts_t o;
    memset(&o, 0xff, sizeof o);
    wal_opts_default(&o);
    cr_assert_eq(o.overflow, WAL_OVERFLOW_DROP_OLDEST);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_overflow(t), WAL_OVERFLOW_DROP_OLDEST);
}

Test(overflow, wal_open_refuses_a_policy_out_of_range)
{
    static const unsigned bad[] = { WAL_OVERFLOW__COUNT, 77, 0xffffffffu };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        h.o.overflow = (wal_overflow_t)bad[i];
        wal_t *w = (wal_t *)&h; /* not NULL: wal_open must clear it */
        cr_assert_eq(wal_open(&h.o, &w), TB_ECONFIG, "policy %u", bad[i]);
        cr_assert_null(w);
    }
    h.o.overflow = WAL_OVERFLOW_DROP_OLDEST;
    cr_assert_eq(th_open(&h), 0, "the same options with a known policy open");
}

Test(overflow, the_setter_refuses_a_policy_out_of_range_and_keeps_the_old_one)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW__COUNT), TB_EINVALID);
    cr_assert_eq(wal_topic_set_overflow(t, (wal_overflow_t)77), TB_EINVALID);
    cr_assert_eq(wal_topic_overflow(t), WAL_OVERFLOW_DROP_OLDEST);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_OLDEST), 0);
    cr_assert_eq(wal_topic_overflow(t), WAL_OVERFLOW_DROP_OLDEST);
    /* and the topic still takes batches */
    cr_assert_eq(th_append(&h, t, 0, PER_BATCH, PAYLOAD), 0);
}

/* ---- the bounds: default and explicit drop_oldest, side by side ---------- */

#define MAX_RCS 64

/* What a bound scenario ends with, per topic, and every batch's rc. */
typedef struct outcome {
    wal_topic_stats_t st[3];
    int rcs[MAX_RCS];
    bool at_bound[MAX_RCS]; /* the completion's refused_at_bound */
    size_t nrcs;
} outcome_t;

typedef struct run {
    th_t h;
    bool explicit_policy;
    outcome_t out;
} run_t;

static wal_topic_t *run_topic(run_t *r, const char *name)
{
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(r->h.w, name, &t), 0);
    if (r->explicit_policy)
        cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_OLDEST), 0);
    return t;
}

static int run_append(run_t *r, wal_topic_t *t, uint64_t *seq)
{
    int rc = th_append(&r->h, t, *seq, PER_BATCH, PAYLOAD);
    cr_assert_lt(r->out.nrcs, MAX_RCS);
    r->out.at_bound[r->out.nrcs] = r->h.done[r->h.ndone - 1].refused_at_bound;
    r->out.rcs[r->out.nrcs++] = rc;
    if (rc == 0)
        *seq += PER_BATCH;
    return rc;
}

static void run_start(run_t *r, bool explicit_policy, uint64_t max_topic, uint64_t max_total)
{
    memset(r, 0, sizeof *r);
    th_init(&r->h, WAL_FSYNC_ALWAYS);
    r->h.o.max_topic_bytes = max_topic;
    r->h.o.max_total_bytes = max_total;
    r->explicit_policy = explicit_policy;
    cr_assert_eq(th_open(&r->h), 0);
}

static void run_end(run_t *r, wal_topic_t **ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wal_topic_stats(ts[i], &r->out.st[i]);
    th_cleanup(&r->h);
}

/* The figures that say what a bound did: identical in both runs. */
static void assert_same(const outcome_t *a, const outcome_t *b, size_t ntopics)
{
    cr_assert_eq(a->nrcs, b->nrcs);
    for (size_t i = 0; i < a->nrcs; i++) {
        cr_assert_eq(a->rcs[i], b->rcs[i], "batch %zu", i);
        cr_assert_eq(a->at_bound[i], b->at_bound[i], "batch %zu", i);
    }
    for (size_t i = 0; i < ntopics; i++) {
        const wal_topic_stats_t *x = &a->st[i], *y = &b->st[i];
        cr_assert_eq(x->bytes, y->bytes, "topic %zu", i);
        cr_assert_eq(x->segments, y->segments, "topic %zu", i);
        cr_assert_eq(x->oldest_offset, y->oldest_offset, "topic %zu", i);
        cr_assert_eq(x->next_offset, y->next_offset, "topic %zu", i);
        cr_assert_eq(x->dropped_total, y->dropped_total, "topic %zu", i);
        cr_assert_eq(x->dropped_since_open, y->dropped_since_open, "topic %zu", i);
        cr_assert_eq(x->drop_floor, y->drop_floor, "topic %zu", i);
        cr_assert_eq(x->state, y->state, "topic %zu", i);
    }
}

/* One topic, bound 16 KiB (four segments), 40 batches. */
static void topic_bound(run_t *r, bool explicit_policy)
{
    run_start(r, explicit_policy, 16384, 4 << 20);
    wal_topic_t *t = run_topic(r, "/e/t");
    uint64_t seq = 0;
    for (int i = 0; i < 40; i++) {
        cr_assert_eq(run_append(r, t, &seq), 0);
        wal_topic_stats_t st;
        wal_topic_stats(t, &st);
        cr_assert_leq(st.bytes, 16384);
    }
    run_end(r, &t, 1);
}

Test(overflow, explicit_drop_oldest_at_the_topic_bound_does_what_the_default_does)
{
    static run_t def, set;
    topic_bound(&def, false);
    topic_bound(&set, true);
    const wal_topic_stats_t *st = &set.out.st[0];
    cr_assert_gt(st->dropped_total, 0, "the bound deleted unacknowledged messages");
    cr_assert_eq(st->dropped_total, st->oldest_offset - 1, "every message deleted was counted");
    cr_assert_eq(st->next_offset - 1, 40u * PER_BATCH, "no batch was refused");
    cr_assert_gt(st->bytes, 16384 - 4096 - 32, "only what the batch needed was deleted");
    assert_same(&def.out, &set.out, 1);
}

/* Two topics under a 24 KiB total bound (six segments): a fills, then b.
 * b is opened after a is full, so every segment of a is older than b's. */
static void total_bound(run_t *r, bool explicit_policy)
{
    run_start(r, explicit_policy, 1 << 20, 24576);
    wal_topic_t *ts[2];
    uint64_t sa = 0, sb = 0;
    ts[0] = run_topic(r, "/e/a");
    for (int i = 0; i < 8; i++)
        cr_assert_eq(run_append(r, ts[0], &sa), 0);
    ts[1] = run_topic(r, "/e/b");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(run_append(r, ts[1], &sb), 0);
    run_end(r, ts, 2);
}

Test(overflow, explicit_drop_oldest_at_the_total_bound_does_what_the_default_does)
{
    static run_t def, set;
    total_bound(&def, false);
    total_bound(&set, true);
    const wal_topic_stats_t *a = &set.out.st[0], *b = &set.out.st[1];
    cr_assert_gt(a->dropped_total, 0, "the older topic paid");
    cr_assert_eq(a->dropped_total, a->oldest_offset - 1);
    cr_assert_eq(b->dropped_total, 0, "the newer topic kept everything");
    cr_assert_leq(a->bytes + b->bytes, 24576);
    cr_assert_gt(a->bytes + b->bytes, 24576 - 4096 - 32, "only what the batch needed was deleted");
    assert_same(&def.out, &set.out, 2);
}

/* Total bound 8 KiB (two segments), three topics: a and b each hold two
 * batches in their active segment, c one; c's second batch would pass the
 * bound and no topic has a sealed segment left to delete. */
static void only_active_left(run_t *r, bool explicit_policy)
{
    run_start(r, explicit_policy, 1 << 20, 8192);
    wal_topic_t *ts[3];
    uint64_t seq[3] = { 0 };
    ts[0] = run_topic(r, "/e/a");
    ts[1] = run_topic(r, "/e/b");
    ts[2] = run_topic(r, "/e/c");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(run_append(r, ts[0], &seq[0]), 0);
        cr_assert_eq(run_append(r, ts[1], &seq[1]), 0);
    }
    cr_assert_eq(run_append(r, ts[2], &seq[2]), 0);
    cr_assert_eq(run_append(r, ts[2], &seq[2]), TB_EFULL);
    cr_assert_eq(run_append(r, ts[2], &seq[2]), TB_EFULL, "and again: nothing changed");
    run_end(r, ts, 3);
}

Test(overflow, explicit_drop_oldest_refuses_at_the_total_bound_as_the_default_does)
{
    static run_t def, set;
    only_active_left(&def, false);
    only_active_left(&set, true);
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) {
        const wal_topic_stats_t *st = &set.out.st[i];
        cr_assert_eq(st->segments, 1, "topic %d holds only its active segment", i);
        cr_assert_eq(st->dropped_total, 0, "topic %d: a refusal deletes nothing", i);
        cr_assert_eq(st->state, WAL_TOPIC_OK, "topic %d: a refusal is not a failure", i);
        total += st->bytes;
    }
    cr_assert_leq(total, 8192);
    cr_assert_eq(set.out.st[2].next_offset, 1 + PER_BATCH, "the refused batches took no offsets");
    assert_same(&def.out, &set.out, 3);
}

/* ---- refuse ---------------------------------------------------------------- */

static wal_topic_stats_t stats_of(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

/* Appends batches to t until one is refused (at most max); returns how many
 * were accepted, *seq continuing. Every rc is 0 until the one TB_EFULL. */
static int fill_until_refused(th_t *th, wal_topic_t *t, uint64_t *seq, int max)
{
    for (int i = 0; i < max; i++) {
        int rc = th_append(th, t, *seq, PER_BATCH, PAYLOAD);
        if (rc == TB_EFULL)
            return i;
        cr_assert_eq(rc, 0, "batch %d", i);
        *seq += PER_BATCH;
    }
    cr_assert_fail("no batch was refused in %d", max);
    return -1;
}

Test(overflow, refuse_at_the_topic_bound_deletes_nothing_and_keeps_the_topic_ok)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_REFUSE), 0);
    uint64_t seq = 0;
    cr_assert_gt(fill_until_refused(&h, t, &seq, 40), 0);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), TB_EFULL, "and again: nothing changed");
    wal_topic_stats_t st = stats_of(t);
    cr_assert_eq(st.state, WAL_TOPIC_OK, "a refusal is not a failure");
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_eq(st.oldest_offset, 1, "nothing was deleted");
    cr_assert_eq(st.next_offset, seq + 1, "the refused batches took no offsets");
    cr_assert_leq(st.bytes, 16384);
    uint64_t seqs[512];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 512, &gaps), (long)seq, "every accepted record is readable");
    cr_assert_eq(gaps, 0);

    /* the checkpoint is how space comes back */
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats_of(t).segments, 1);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "accepted again");
    cr_assert_eq(stats_of(t).dropped_total, 0);
}

Test(overflow, refuse_applies_a_checkpoint_the_writer_has_not_flushed_yet)
{
    h.o.max_topic_bytes = 16384;
    h.o.checkpoint_flush_ms = 60000; /* housekeeping would wait a minute */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_REFUSE), 0);
    uint64_t seq = 0;
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0);
    seq += PER_BATCH;
    /* a flushed checkpoint starts the minute in which the next one waits */
    cr_assert_eq(wal_checkpoint(t, 1), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_gt(fill_until_refused(&h, t, &seq, 40), 0);
    uint64_t segs = stats_of(t).segments;
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "the moved checkpoint made room at once");
    wal_topic_stats_t st = stats_of(t);
    cr_assert_lt(st.segments, segs, "the acknowledged segments went");
    cr_assert_eq(st.dropped_total, 0);
}

Test(overflow, refuse_at_the_total_bound_deletes_no_other_topic)
{
    h.o.max_total_bytes = 24576; /* six segments for both topics */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *a, *b;
    cr_assert_eq(wal_topic_open(h.w, "/e/a", &a), 0);
    uint64_t sa = 0, sb = 0;
    for (int i = 0; i < 8; i++, sa += PER_BATCH)
        cr_assert_eq(th_append(&h, a, sa, PER_BATCH, PAYLOAD), 0);
    wal_topic_stats_t a0 = stats_of(a);
    cr_assert_gt(a0.segments, 1, "a has sealed segments drop_oldest would take");
    cr_assert_eq(wal_topic_open(h.w, "/e/b", &b), 0);
    cr_assert_eq(wal_topic_set_overflow(b, WAL_OVERFLOW_REFUSE), 0);
    fill_until_refused(&h, b, &sb, 40);
    wal_topic_stats_t a1 = stats_of(a), b1 = stats_of(b);
    cr_assert_eq(a1.segments, a0.segments, "a's segments are all there");
    cr_assert_eq(a1.bytes, a0.bytes);
    cr_assert_eq(a1.dropped_total, 0);
    cr_assert_eq(b1.dropped_total, 0);
    cr_assert_eq(b1.state, WAL_TOPIC_OK);
    cr_assert_leq(a1.bytes + b1.bytes, 24576);
}

/* ---- drop_newest ------------------------------------------------------------ */

/* The completion of the last batch th_append waited for. */
static const wal_completion_t *last_done(th_t *th)
{
    cr_assert_gt(th->ndone, 0);
    return &th->done[th->ndone - 1];
}

Test(overflow, drop_newest_at_the_topic_bound_refuses_new_batches_and_keeps_what_is_stored)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    cr_assert_eq(wal_topic_overflow(t), WAL_OVERFLOW_DROP_NEWEST);
    uint64_t seq = 0;
    cr_assert_gt(fill_until_refused(&h, t, &seq, 40), 0);
    cr_assert(last_done(&h)->refused_at_bound, "a refusal at a bound says so");
    cr_assert_eq(last_done(&h)->first_offset, 0);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), TB_EFULL, "and again: nothing changed");
    wal_topic_stats_t st = stats_of(t);
    cr_assert_eq(st.state, WAL_TOPIC_OK, "a refusal is not a failure");
    cr_assert_eq(st.dropped_total, 0, "nothing stored was dropped");
    cr_assert_eq(st.oldest_offset, 1);
    cr_assert_eq(st.next_offset, seq + 1, "the refused batches took no offsets");
    cr_assert_leq(st.bytes, 16384);
    uint64_t seqs[512];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 512, &gaps), (long)seq, "the oldest messages are all there");
    cr_assert_eq(gaps, 0);
    for (uint64_t i = 0; i < seq; i++)
        cr_assert_eq(seqs[i], i);
    /* the cluster acknowledges: room again */
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "accepted again");
    cr_assert_not(last_done(&h)->refused_at_bound);
    cr_assert_eq(stats_of(t).dropped_total, 0);
}

Test(overflow, drop_newest_at_the_total_bound_deletes_no_other_topics_unacknowledged_data)
{
    h.o.max_total_bytes = 24576; /* six segments for all topics */
    h.o.checkpoint_flush_ms = 60000;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *a, *b, *c;
    cr_assert_eq(wal_topic_open(h.w, "/e/a", &a), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/b", &b), 0);
    uint64_t sa = 0, sb = 0, sc = 0;
    for (int i = 0; i < 5; i++, sa += PER_BATCH)
        cr_assert_eq(th_append(&h, a, sa, PER_BATCH, PAYLOAD), 0);
    for (int i = 0; i < 1; i++, sb += PER_BATCH)
        cr_assert_eq(th_append(&h, b, sb, PER_BATCH, PAYLOAD), 0);
    cr_assert_eq(wal_checkpoint(b, 1), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* b's next checkpoint waits the minute */
    for (int i = 0; i < 5; i++, sb += PER_BATCH)
        cr_assert_eq(th_append(&h, b, sb, PER_BATCH, PAYLOAD), 0);
    cr_assert_eq(wal_checkpoint(b, wal_topic_readable_end(b) - 1), 0); /* acknowledged, not yet applied */
    wal_topic_stats_t a0 = stats_of(a), b0 = stats_of(b);
    cr_assert_gt(a0.segments, 1);
    cr_assert_gt(b0.segments, 1);
    cr_assert_eq(wal_topic_open(h.w, "/e/c", &c), 0);
    cr_assert_eq(wal_topic_set_overflow(c, WAL_OVERFLOW_DROP_NEWEST), 0);
    fill_until_refused(&h, c, &sc, 40);
    cr_assert(last_done(&h)->refused_at_bound);
    wal_topic_stats_t a1 = stats_of(a), b1 = stats_of(b), c1 = stats_of(c);
    cr_assert_eq(a1.segments, a0.segments, "a's unacknowledged segments are all there");
    cr_assert_eq(a1.dropped_total, 0);
    cr_assert_eq(b1.segments, 1, "b's acknowledged ones went first: they cost nothing");
    cr_assert_eq(b1.dropped_total, 0);
    cr_assert_eq(c1.dropped_total, 0);
    cr_assert_eq(c1.state, WAL_TOPIC_OK);
    cr_assert_gt(c1.next_offset, 1, "c took what fitted");
    cr_assert_leq(a1.bytes + b1.bytes + c1.bytes, 24576);
}

Test(overflow, the_policy_can_change_between_batches)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    uint64_t seq = 0;
    fill_until_refused(&h, t, &seq, 40);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_OLDEST), 0);
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "drop_oldest makes room");
    cr_assert_gt(stats_of(t).dropped_total, 0);
    uint64_t dropped = stats_of(t).dropped_total;
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    seq += PER_BATCH;
    cr_assert_leq(fill_until_refused(&h, t, &seq, 40), 3, "what the deleted segment freed, then refused again");
    cr_assert_eq(stats_of(t).dropped_total, dropped, "and nothing more dropped");
}

Test(overflow, drop_oldest_refusing_with_only_active_segments_left_is_a_refusal_at_a_bound)
{
    static run_t r;
    only_active_left(&r, false); /* its last two batches were refused */
    size_t n = r.out.nrcs;
    cr_assert(r.out.at_bound[n - 1]);
    cr_assert(r.out.at_bound[n - 2]);
    for (size_t i = 0; i + 2 < n; i++)
        cr_assert_not(r.out.at_bound[i], "batch %zu was stored", i);
}

/* ---- block ------------------------------------------------------------------ */

static bool is_blocked(void *arg) { return wal_topic_blocked(arg); }
static bool is_unblocked(void *arg) { return !wal_topic_blocked(arg); }

/* Fills t (max_topic_bytes 16384) to its bound under drop_newest, then sets
 * block and submits nb batches, which the writer holds. Returns the seq of
 * the first held batch; *held_from is the topic's next offset then. */
static uint64_t block_at_bound(wal_topic_t *t, int nb, uint64_t *held_from)
{
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    uint64_t seq = 0;
    cr_assert_gt(fill_until_refused(&h, t, &seq, 40), 0);
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_BLOCK), 0);
    cr_assert_not(wal_topic_blocked(t));
    *held_from = stats_of(t).next_offset;
    for (int i = 0; i < nb; i++)
        th_submit(&h, t, seq + (uint64_t)i * PER_BATCH, PER_BATCH, PAYLOAD);
    cr_assert(th_wait_until(is_blocked, t), "the writer holds the batch");
    return seq;
}

Test(overflow, block_holds_batches_at_the_bound_unwritten_and_writes_them_in_order_when_room_returns)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    size_t before;
    uint64_t held_from;
    uint64_t seq = block_at_bound(t, 3, &held_from);
    before = h.ndone;
    wal_topic_stats_t st0 = stats_of(t);
    cr_assert_eq(wal_sync(h.w), 0, "a barrier passes the held batches");
    th_collect(&h);
    wal_topic_stats_t st1 = stats_of(t);
    cr_assert_eq(h.ndone, before, "a held batch has no completion: neither written nor refused");
    cr_assert(wal_topic_blocked(t));
    cr_assert_eq(st1.next_offset, held_from, "held batches take no offsets");
    cr_assert_eq(st1.bytes, st0.bytes, "nothing of them is written");
    cr_assert_eq(st1.dropped_total, 0);
    cr_assert_eq(st1.state, WAL_TOPIC_OK);
    /* a batch submitted now waits behind them */
    th_submit(&h, t, seq + 3 * PER_BATCH, PER_BATCH, PAYLOAD);
    cr_assert_eq(wal_sync(h.w), 0);
    th_collect(&h);
    cr_assert_eq(h.ndone, before);

    /* the cluster acknowledges what is stored: room, and the held batches go in order */
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    cr_assert(th_wait(&h, before + 4), "the held batches complete once the checkpoint frees room");
    cr_assert(th_wait_until(is_unblocked, t));
    for (int i = 0; i < 4; i++) {
        const wal_completion_t *c = &h.done[before + (size_t)i];
        cr_assert_eq(c->rc, 0, "batch %d", i);
        cr_assert_not(c->refused_at_bound);
        cr_assert_eq((uint64_t)(uintptr_t)c->user, seq + (uint64_t)i * PER_BATCH, "FIFO: batch %d", i);
        cr_assert_eq(c->first_offset, held_from + (uint64_t)i * PER_BATCH, "offsets continue: batch %d", i);
    }
    seq += 4 * PER_BATCH;
    uint64_t seqs[512];
    int gaps;
    uint64_t from = stats_of(t).oldest_offset;
    long n = th_read_all(t, from, PAYLOAD, seqs, 512, &gaps);
    cr_assert_eq(gaps, 0);
    cr_assert_gt(n, 4 * PER_BATCH);
    for (long i = 1; i < n; i++)
        cr_assert_eq(seqs[i], seqs[i - 1] + 1, "in order, nothing missing");
    cr_assert_eq(seqs[n - 1], seq - 1, "the last held message is the last record");
    cr_assert_eq(stats_of(t).dropped_total, 0, "block drops nothing");
    cr_assert_eq(th_append(&h, t, seq, PER_BATCH, PAYLOAD), 0, "and new batches are written at once");
}

Test(overflow, block_holds_only_its_topic_another_topic_is_written_meanwhile)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t, *o;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/o", &o), 0);
    uint64_t held_from;
    block_at_bound(t, 1, &held_from);
    size_t before = h.ndone;
    cr_assert_eq(th_append(&h, o, 0, PER_BATCH, PAYLOAD), 0, "another topic is not held");
    cr_assert_eq(h.ndone, before + 1);
    cr_assert_eq(h.done[before].topic, o);
    cr_assert_not(wal_topic_blocked(o));
    cr_assert(wal_topic_blocked(t));
}

Test(overflow, block_held_batches_end_with_close_never_written)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    uint64_t held_from;
    block_at_bound(t, 2, &held_from);
    cr_assert_eq(th_close(&h), 0, "close does not wait for room (held batches complete TB_ECLOSED, freed by it)");
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(stats_of(t).next_offset, held_from, "nothing of them reached the disk");
}

Test(overflow, block_changed_to_drop_newest_refuses_the_held_batches_at_the_next_wake)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    uint64_t held_from;
    block_at_bound(t, 2, &held_from);
    size_t before = h.ndone;
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* a wake */
    cr_assert(th_wait(&h, before + 2));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(h.done[before + (size_t)i].rc, TB_EFULL);
        cr_assert(h.done[before + (size_t)i].refused_at_bound);
    }
    cr_assert_not(wal_topic_blocked(t));
    cr_assert_eq(stats_of(t).next_offset, held_from);
}

Test(overflow, block_release_held_completes_the_held_batches_eclosed_in_order_and_holds_nothing_more)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    uint64_t held_from;
    uint64_t seq = block_at_bound(t, 2, &held_from);
    size_t before = h.ndone;
    wal_topic_release_held(t);
    cr_assert(th_wait(&h, before + 2), "the held batches come back");
    for (int i = 0; i < 2; i++) {
        const wal_completion_t *c = &h.done[before + (size_t)i];
        cr_assert_eq(c->rc, TB_ECLOSED, "batch %d", i);
        cr_assert_not(c->refused_at_bound);
        cr_assert_eq((uint64_t)(uintptr_t)c->user, seq + (uint64_t)i * PER_BATCH, "in order");
    }
    cr_assert_not(wal_topic_blocked(t));
    cr_assert_eq(th_append(&h, t, seq + 2 * PER_BATCH, PER_BATCH, PAYLOAD), TB_ECLOSED, "nothing is held any more");
    cr_assert_not(wal_topic_blocked(t));
    cr_assert_eq(stats_of(t).next_offset, held_from, "nothing of them was written");
}
