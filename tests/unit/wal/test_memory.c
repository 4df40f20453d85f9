/*
 * test_memory.c: the memory tier (wal.h MEMORY TIER). A topic in MEMORY
 * holds its batches instead of writing them; readers get the records from
 * memory in offset order; the checkpoint (the cluster's ack) releases them
 * and posts their completions in order (ack upstream), or the completions
 * come at once (ack received); nothing is written to the disk while that
 * goes on, not even the checkpoint; and after a SIGKILL the next offsets
 * are above every offset a reader was ever given.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helper_wal.h"
#include "wal/wal_int.h"

#define PAYLOAD 100

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(memory, .init = setup, .fini = teardown);

/* ---- an I/O layer that counts every byte and call that changes the disk ---- */

static struct {
    wal_io_t io;
    pthread_mutex_t mu;
    uint64_t pwrite_bytes, pwrites, syncs, meta_writes, meta_bytes, truncates, renames, unlinks;
} cio = { .mu = PTHREAD_MUTEX_INITIALIZER };

#define COUNT(field, n)                \
    do {                               \
        pthread_mutex_lock(&cio.mu);   \
        cio.field += (n);              \
        pthread_mutex_unlock(&cio.mu); \
    } while (0)

static ssize_t c_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    COUNT(pwrite_bytes, n);
    COUNT(pwrites, 1);
    return wal_io_posix()->pwrite(ctx, fd, buf, n, off);
}
static int c_fdatasync(void *ctx, int fd)
{
    COUNT(syncs, 1);
    return wal_io_posix()->fdatasync(ctx, fd);
}
static int c_write_atomic(void *ctx, const char *path, const void *data, size_t len)
{
    COUNT(meta_writes, 1);
    COUNT(meta_bytes, len);
    return wal_io_posix()->write_atomic(ctx, path, data, len);
}
static int c_ftruncate(void *ctx, int fd, off_t len)
{
    COUNT(truncates, 1);
    return wal_io_posix()->ftruncate(ctx, fd, len);
}
static int c_rename(void *ctx, const char *a, const char *b)
{
    COUNT(renames, 1);
    return wal_io_posix()->rename(ctx, a, b);
}
static int c_unlink(void *ctx, const char *p)
{
    COUNT(unlinks, 1);
    return wal_io_posix()->unlink(ctx, p);
}

static const wal_io_t *counting_io(void)
{
    cio.io = *wal_io_posix();
    cio.io.pwrite = c_pwrite;
    cio.io.fdatasync = c_fdatasync;
    cio.io.write_atomic = c_write_atomic;
    cio.io.ftruncate = c_ftruncate;
    cio.io.rename = c_rename;
    cio.io.unlink = c_unlink;
    return &cio.io;
}

static void counts_reset(void)
{
    pthread_mutex_lock(&cio.mu);
    cio.pwrite_bytes = cio.pwrites = cio.syncs = cio.meta_writes = cio.meta_bytes = 0;
    cio.truncates = cio.renames = cio.unlinks = 0;
    pthread_mutex_unlock(&cio.mu);
}

/* ---- helpers ------------------------------------------------------------- */

static wal_topic_t *open_topic(void) { return th_topic(&h, "/e/t"); }

static void enter_memory(wal_topic_t *t, wal_ack_t ack, uint64_t memory_bytes)
{
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    o.durability = WAL_DURABILITY_MEMORY_FIRST;
    o.ack = ack;
    if (memory_bytes)
        o.memory_bytes = memory_bytes;
    cr_assert_eq(wal_topic_set_durability(t, &o), 0);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
}

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

/* Reads one record, which must be message seq at offset off. */
static void expect(wal_reader_t *r, uint64_t off, uint64_t seq, wal_record_t *rec)
{
    uint64_t got;
    cr_assert_eq(wal_reader_next(r, rec), 0, "offset %llu", (unsigned long long)off);
    cr_assert_eq(rec->offset, off);
    cr_assert(th_record_ok(rec, PAYLOAD, &got), "offset %llu intact", (unsigned long long)off);
    cr_assert_eq(got, seq);
}

/* ---- the tests ------------------------------------------------------------- */

Test(memory, held_records_readable_in_order)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 10, PAYLOAD), 0); /* the log: offsets 1..10 */
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    for (uint64_t seq = 10; seq < 40; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD);
    /* readable at once, without the writer: the offsets follow the log's */
    cr_assert_eq(wal_topic_readable_end(t), 41);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.mode, WAL_MODE_MEMORY);
    cr_assert_eq(st.held_msgs, 30);
    cr_assert_eq(st.next_offset, 41);
    cr_assert_eq(wal_topic_held(t), 30);
    cr_assert_lt(40, wal_topic_reserved(t), "every held offset is below the durable reservation");
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    for (uint64_t off = 1; off <= 40; off++)
        expect(r, off, off - 1, &rec); /* from the disk, then from memory */
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    th_submit(&h, t, 40, 5, PAYLOAD);
    expect(r, 41, 40, &rec);
    wal_reader_close(r);
    th_collect(&h);
    cr_assert_eq(h.ndone, 1, "held batches are not completed until acknowledged");
    cr_assert_eq(stats(t).segments, 1);
}

Test(memory, acks_post_completions_in_order)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    for (uint64_t seq = 0; seq < 40; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD); /* offsets 1..40 in 4 batches */
    cr_assert_eq(wal_checkpoint(t, 5), 0);
    th_collect(&h);
    cr_assert_eq(h.ndone, 0, "a batch is completed only when the checkpoint passes all of it");
    cr_assert_eq(wal_topic_held(t), 40);
    cr_assert_eq(wal_checkpoint(t, 30), 0);
    cr_assert(th_wait(&h, 3));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(h.done[i].rc, 0);
        cr_assert_eq(h.done[i].first_offset, 1 + 10 * i, "completion %zu in offset order", i);
        cr_assert_eq(h.done[i].count, 10);
        cr_assert_eq((uintptr_t)h.done[i].user, 10 * i);
        cr_assert_eq(h.done[i].topic, t);
    }
    cr_assert_eq(wal_topic_held(t), 10);
    cr_assert_eq(wal_checkpoint(t, 40), 0);
    cr_assert(th_wait(&h, 4));
    cr_assert_eq(h.done[3].first_offset, 31);
    cr_assert_eq(h.ndone, 4);
    cr_assert_eq(wal_topic_held(t), 0);
    cr_assert_eq(stats(t).held_bytes, 0);
}

/* The ack thread is not the loop: completions posted from another thread
 * come through the same done list and notify, in order. */
typedef struct {
    wal_topic_t *t;
    uint64_t upto;
} acker_t;
static void *acker(void *arg)
{
    acker_t *a = arg;
    for (uint64_t ck = 1; ck <= a->upto; ck++)
        wal_checkpoint(a->t, ck);
    return NULL;
}

Test(memory, acks_from_another_thread_complete_every_batch_once_in_order)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    for (uint64_t seq = 0; seq < 500; seq += 5)
        th_submit(&h, t, seq, 5, PAYLOAD);
    pthread_t th;
    acker_t a = { t, 500 };
    pthread_create(&th, NULL, acker, &a);
    cr_assert(th_wait(&h, 100));
    pthread_join(th, NULL);
    th_collect(&h);
    cr_assert_eq(h.ndone, 100);
    for (size_t i = 0; i < 100; i++)
        cr_assert_eq(h.done[i].first_offset, 1 + 5 * i);
}

Test(memory, received_completes_at_once)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_RECEIVED, 0);
    th_submit(&h, t, 0, 10, PAYLOAD);
    th_submit(&h, t, 10, 10, PAYLOAD);
    /* posted by wal_submit itself: collected without waiting for anyone */
    th_collect(&h);
    cr_assert_eq(h.ndone, 2);
    cr_assert(h.done[0].rc == 0 && h.done[0].first_offset == 1 && h.done[1].first_offset == 11);
    /* th_collect freed the loop's share; the tier still holds the records */
    cr_assert_eq(wal_topic_held(t), 20);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    for (uint64_t off = 1; off <= 20; off++)
        expect(r, off, off - 1, &rec);
    wal_reader_close(r);
    cr_assert_eq(wal_checkpoint(t, 20), 0);
    cr_assert_eq(wal_topic_held(t), 0, "released (and freed: the sanitizer build checks)");
    th_collect(&h);
    cr_assert_eq(h.ndone, 2, "no second completion at the ack");
}

Test(memory, reader_copies_survive_release)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 10, PAYLOAD);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    for (uint64_t off = 1; off <= 10; off++)
        expect(r, off, off - 1, &rec);
    /* the cluster acknowledges: the batch leaves memory and the loop frees it */
    cr_assert_eq(wal_checkpoint(t, 10), 0);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(wal_topic_held(t), 0);
    uint64_t seq;
    cr_assert(th_record_ok(&rec, PAYLOAD, &seq), "the view is into the reader's own copy");
    cr_assert_eq(seq, 9);
    /* the reader goes on with what comes next */
    th_submit(&h, t, 10, 3, PAYLOAD);
    expect(r, 11, 10, &rec);
    wal_reader_close(r);
    /* a reader behind what was released meets a hole, not a drop */
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    cr_assert_eq(wal_reader_next(r, &rec), WAL_GAP);
    cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_HOLE);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert(from == 1 && to == 11);
    expect(r, 11, 10, &rec);
    wal_reader_close(r);
    cr_assert_eq(stats(t).dropped_total, 0);
}

Test(memory, checkpoint_not_persisted_while_nothing_on_disk)
{
    h.o.io = counting_io();
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 5, PAYLOAD), 0);
    counts_reset();
    cr_assert_eq(wal_checkpoint(t, 5), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(cio.meta_writes, 1, "in the log, a checkpoint past records on disk is persisted");
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    counts_reset();
    /* steady state: messages held, read, acknowledged, completed */
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 6, &r), 0);
    uint64_t off = 6;
    for (uint64_t seq = 5; seq < 505; seq += 10) {
        th_submit(&h, t, seq, 10, PAYLOAD);
        wal_record_t rec;
        for (int i = 0; i < 10; i++, off++)
            expect(r, off, off - 1, &rec);
        cr_assert_eq(wal_checkpoint(t, off - 1), 0);
        cr_assert(th_wait(&h, 1 + (seq - 5) / 10 + 1));
    }
    wal_reader_close(r);
    cr_assert_eq(wal_sync(h.w), 0); /* forces a checkpoint apply: still nothing to write */
    cr_assert_eq(wal_topic_checkpoint(t), 505);
    pthread_mutex_lock(&cio.mu);
    uint64_t bytes = cio.pwrite_bytes, syncs = cio.syncs, metas = cio.meta_writes;
    uint64_t other = cio.truncates + cio.renames + cio.unlinks;
    pthread_mutex_unlock(&cio.mu);
    cr_assert_eq(bytes, 0, "%llu data bytes written in memory mode", (unsigned long long)bytes);
    cr_assert_eq(syncs, 0);
    cr_assert_eq(metas, 0, "the checkpoint moved 500 offsets and was not persisted");
    cr_assert_eq(other, 0);
    wal_meta_t m;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, &m, NULL), 0);
    cr_assert_eq(m.checkpoint, 5, "the persisted checkpoint stays at the log's last record");
}

/* ---- the spill ---------------------------------------------------------------- */

static uint64_t spills(wal_topic_t *t, wal_spill_t why)
{
    return stats(t).spills[why];
}

/* Reads t from `from` and checks offsets from..to-1 are messages seq0.. in
 * order; holes are allowed, drops are not. Returns the records read. */
static uint64_t read_through(wal_topic_t *t, uint64_t from, uint64_t *holes)
{
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, from, &r), 0);
    uint64_t n = 0, last = 0;
    *holes = 0;
    for (;;) {
        wal_record_t rec;
        int rc = wal_reader_next(r, &rec);
        if (rc == WAL_GAP) {
            cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_HOLE);
            (*holes)++;
            continue;
        }
        if (rc == WAL_END)
            break;
        cr_assert_eq(rc, 0);
        uint64_t seq;
        cr_assert(th_record_ok(&rec, PAYLOAD, &seq));
        cr_assert_eq(seq, rec.offset - 1, "offset %llu holds message %llu", (unsigned long long)rec.offset,
                     (unsigned long long)seq);
        cr_assert_gt(rec.offset, last);
        last = rec.offset;
        n++;
    }
    wal_reader_close(r);
    return n;
}

Test(memory, a_full_tier_spills_to_the_log_and_the_batch_follows_it)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 3000); /* two 10-record batches of ~1.4 KiB fit */
    for (uint64_t seq = 0; seq < 30; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD);
    /* the third would pass memory_bytes: the two held go to the log, synced,
     * and are completed; the third is written behind them */
    cr_assert(th_wait(&h, 3));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(h.done[i].rc, 0);
        cr_assert_eq(h.done[i].first_offset, 1 + 10 * i);
    }
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING);
    cr_assert_eq(spills(t, WAL_SPILL_BYTES), 1);
    cr_assert_eq(wal_topic_held(t), 0);
    uint64_t holes;
    cr_assert_eq(read_through(t, 1, &holes), 30, "all of it in the log now");
    cr_assert_eq(holes, 0);
    th_submit(&h, t, 30, 10, PAYLOAD); /* DRAINING: the log, as before memory */
    cr_assert(th_wait(&h, 4));
    cr_assert_eq(h.done[3].first_offset, 31);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(read_through(wal_topic_find(h.w, "/e/t"), 1, &holes), 40, "and on disk across a restart");
}

Test(memory, a_spill_after_acks_writes_only_what_is_unacknowledged_past_a_hole)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 4, PAYLOAD), 0); /* 1..4 in the log */
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    for (uint64_t seq = 4; seq < 34; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD); /* 5..34 held */
    cr_assert_eq(wal_checkpoint(t, 14), 0); /* the cluster has 1..14 */
    cr_assert(th_wait(&h, 2));
    uint32_t segs = stats(t).segments;
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait(&h, 4));
    cr_assert(h.done[2].rc == 0 && h.done[2].first_offset == 15);
    cr_assert(h.done[3].rc == 0 && h.done[3].first_offset == 25);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING);
    cr_assert_eq(spills(t, WAL_SPILL_OUTPUT), 1);
    cr_assert_geq(stats(t).segments, segs, "15.. starts a segment of its own: 5..14 hold no record");
    /* what the log holds for a reader from the start: 1..4 (acknowledged:
     * retention may have deleted them already), 5..14 a hole, 15..34 */
    uint64_t holes;
    uint64_t n = read_through(t, 1, &holes);
    cr_assert(n == 24 || n == 20, "%llu records", (unsigned long long)n);
    cr_assert_eq(holes, 1);
    cr_assert_eq(read_through(t, 15, &holes), 20);
    cr_assert_eq(holes, 0);
    th_submit(&h, t, 34, 3, PAYLOAD);
    cr_assert(th_wait(&h, 5));
    cr_assert_eq(h.done[4].first_offset, 35, "the log continues where memory ended");
    cr_assert_eq(stats(t).dropped_total, 0);
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert_eq(spills(t, WAL_SPILL_OUTPUT), 1, "not in memory: nothing to spill");
}

Test(memory, the_oldest_held_batch_spills_after_spill_after_ms)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    o.durability = WAL_DURABILITY_MEMORY_FIRST;
    o.spill_after_ms = 60;
    cr_assert_eq(wal_topic_set_durability(t, &o), 0);
    uint64_t t0 = tb_mono_ms();
    th_submit(&h, t, 0, 10, PAYLOAD);
    cr_assert(th_wait(&h, 1), "no ack came: the writer spilled it");
    uint64_t waited = tb_mono_ms() - t0;
    cr_assert_geq(waited, 60, "answered after %llu ms", (unsigned long long)waited);
    cr_assert_eq(h.done[0].rc, 0);
    cr_assert_eq(spills(t, WAL_SPILL_TIMEOUT), 1);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING);
    uint64_t holes;
    cr_assert_eq(read_through(t, 1, &holes), 10);
}

Test(memory, a_spill_keeps_what_received_already_answered)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_RECEIVED, 0);
    th_submit(&h, t, 0, 10, PAYLOAD);
    th_submit(&h, t, 10, 10, PAYLOAD);
    th_collect(&h);
    cr_assert_eq(h.ndone, 2, "answered at once");
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert_eq(wal_sync(h.w), 0); /* the spill is before the barrier in the writer's queue */
    th_collect(&h);
    cr_assert_eq(h.ndone, 2, "no second completion");
    cr_assert_eq(wal_topic_held(t), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    uint64_t holes;
    cr_assert_eq(read_through(wal_topic_find(h.w, "/e/t"), 1, &holes), 20, "the answered messages are in the log");
}

Test(memory, a_reader_sees_every_record_once_in_order_across_the_spill)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 20000); /* ~13 batches fit, then the spill */
    th_follower_t f = { .t = t, .payload_len = PAYLOAD, .want = 1000 };
    pthread_t th;
    pthread_create(&th, NULL, th_follow, &f);
    for (uint64_t seq = 0; seq < 1000; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD);
    pthread_join(th, NULL);
    cr_assert(f.in_order, "broken at record %llu", (unsigned long long)f.got);
    cr_assert_eq(f.got, 1000);
    cr_assert(th_wait(&h, 100));
    for (size_t i = 0; i < 100; i++)
        cr_assert(h.done[i].rc == 0 && h.done[i].first_offset == 1 + 10 * i, "completion %zu", i);
    cr_assert_eq(spills(t, WAL_SPILL_BYTES), 1);
}

Test(memory, every_offset_read_is_below_the_reservation_as_it_is_raised)
{
    h.o.reserve_span = 64;
    h.o.io = counting_io();
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    counts_reset();
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    uint64_t off = 1;
    for (uint64_t seq = 0; seq < 1000; seq += 10) {
        th_submit(&h, t, seq, 10, PAYLOAD);
        wal_record_t rec;
        for (int i = 0; i < 10; i++, off++) {
            expect(r, off, off - 1, &rec);
            cr_assert_lt(rec.offset, wal_topic_reserved(t), "offset %llu readable beyond the reservation",
                         (unsigned long long)rec.offset);
        }
        cr_assert_eq(wal_checkpoint(t, off - 1), 0);
    }
    wal_reader_close(r);
    pthread_mutex_lock(&cio.mu);
    uint64_t metas = cio.meta_writes, bytes = cio.pwrite_bytes;
    pthread_mutex_unlock(&cio.mu);
    cr_assert_eq(bytes, 0);
    /* one raise per half span or so, and nothing else: 1000 offsets at 64 a span */
    cr_assert_geq(metas, 1000 / 64 - 1);
    cr_assert_leq(metas, 2 * 1000 / 64 + 2, "%llu meta writes", (unsigned long long)metas);
}

Test(memory, a_clean_close_writes_what_is_held_and_the_restart_continues_past_it)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 4, PAYLOAD), 0);
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 4, 10, PAYLOAD); /* 5..14, read by the cluster perhaps, never acknowledged */
    cr_assert_eq(th_close(&h), 0); /* a clean stop writes them to the log */
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.mode, WAL_MODE_LOG, "not persisted: each open starts in the log");
    cr_assert_eq(st.next_offset, 15, "past what memory handed out, and no span further");
    cr_assert_eq(th_append(&h, t, 100, 1, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 15);
    /* the log's records, the held ones (written by the close), the new one */
    uint64_t seqs[16];
    int gaps = 0;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 16, &gaps), 15);
    cr_assert_eq(gaps, 0);
    cr_assert_eq(stats(t).spills[WAL_SPILL_SHUTDOWN], 0, "counted in the life that spilled; not persisted");
}

Test(memory, the_mode_is_checked)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    cr_assert_eq(o.durability, WAL_DURABILITY_LOG);
    cr_assert_eq(o.ack, WAL_ACK_UPSTREAM);
    cr_assert_eq(o.memory_bytes, 8u << 20);
    cr_assert_eq(o.spill_after_ms, 250);
    cr_assert_eq(wal_topic_set_durability(t, &o), 0, "the log on a log topic: nothing to do");
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_LOG);
    o.memory_bytes = 0;
    cr_assert_eq(wal_topic_set_durability(t, &o), TB_EINVALID);
    o.memory_bytes = 1 << 20;
    o.ack = (wal_ack_t)7;
    cr_assert_eq(wal_topic_set_durability(t, &o), TB_EINVALID);
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    o.ack = WAL_ACK_UPSTREAM;
    o.durability = WAL_DURABILITY_LOG;
    cr_assert_eq(wal_topic_set_durability(t, &o), TB_EUNSUPPORTED, "back to the log needs the spill");
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
}

/* ---- SIGKILL in memory mode: a real kill of a forked child ----------------- */

/* The child: opens the log, appends one batch to it (its offsets go to the
 * pipe), enters memory, and then submits, reads (each offset read goes to
 * the pipe: what the replicator would send the cluster) and acknowledges
 * about half of what it reads, until n offsets were read; then SIGKILL, with
 * none of the held records on disk. */
static void child(int fd, void *arg)
{
    uint64_t n = *(uint64_t *)arg;
    alarm(30);
    wal_topic_t *t;
    if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0)
        _exit(2);
    size_t before = h.ndone;
    th_submit(&h, t, 0, 4, PAYLOAD);
    if (!th_wait(&h, before + 1) || h.done[before].rc != 0)
        _exit(3);
    uint64_t first = h.done[before].first_offset;
    for (uint64_t o = first; o < first + 4; o++)
        if (write(fd, &o, sizeof o) != sizeof o)
            _exit(4);
    wal_memory_opts_t mo;
    wal_memory_opts_default(&mo);
    mo.durability = WAL_DURABILITY_MEMORY_FIRST;
    if (wal_topic_set_durability(t, &mo) != 0)
        _exit(5);
    wal_reader_t *r;
    if (wal_reader_open(t, first + 4, &r) != 0)
        _exit(6);
    uint64_t got = 0, seq = 1000;
    while (got < n) {
        th_submit(&h, t, seq, 7, PAYLOAD);
        seq += 7;
        wal_record_t rec;
        int rc;
        while ((rc = wal_reader_next(r, &rec)) == 0) {
            if (rec.offset >= wal_topic_reserved(t))
                _exit(7);
            if (write(fd, &rec.offset, sizeof rec.offset) != sizeof rec.offset)
                _exit(8);
            got++;
            if (got % 2)
                wal_checkpoint(t, rec.offset);
        }
        if (rc != WAL_END)
            _exit(9);
    }
    raise(SIGKILL);
    _exit(10);
}

static int life(uint64_t n, uint64_t *seen, size_t *nseen, size_t cap)
{
    return th_fork_life(child, &n, seen, sizeof *seen, cap, nseen);
}

Test(memory, offsets_continue_above_everything_read_after_sigkill)
{
    enum { LIVES = 4, N = 3000, SPAN = 1000 };
    h.o.reserve_span = SPAN;
    size_t cap = LIVES * (N + 16), nseen = 0;
    uint64_t *seen = calloc(cap, sizeof *seen);
    for (int i = 0; i < LIVES; i++)
        cr_assert_eq(life(N, seen, &nseen, cap), SIGKILL, "life %d", i);
    /* every offset handed out, from the log or from memory, in the order
     * the "cluster" saw them: strictly increasing, across the kills */
    for (size_t i = 1; i < nseen; i++)
        cr_assert_gt(seen[i], seen[i - 1], "offset %llu after %llu (item %zu)", (unsigned long long)seen[i],
                     (unsigned long long)seen[i - 1], i);
    cr_assert_geq(nseen, (size_t)LIVES * (N + 4));
    uint64_t last = seen[nseen - 1];
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.next_offset, last, "the next offset (%llu) is above every offset read (%llu)",
                 (unsigned long long)st.next_offset, (unsigned long long)last);
    cr_assert_leq(st.next_offset, last + 1 + SPAN + SPAN / 2, "and at most 1.5 spans above");
    cr_assert_eq(th_append(&h, t, 5000, 1, PAYLOAD), 0);
    cr_assert_gt(h.done[h.ndone - 1].first_offset, last);
    cr_assert_eq(st.dropped_total, 0);
    /* the replicator resumes past the checkpoint: what it finds next is
     * the new record, nothing from before the kill under a reused offset */
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, wal_topic_checkpoint(t) + 1, &r), 0);
    wal_record_t rec;
    int rc;
    while ((rc = wal_reader_next(r, &rec)) == WAL_GAP)
        cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_HOLE);
    cr_assert_eq(rc, 0);
    cr_assert_gt(rec.offset, last);
    wal_reader_close(r);
    free(seen);
}

/* The child of the next test: 1..50 held, 1..10 acknowledged, the rest
 * spilled; writes the first offset of each batch its publishers were told
 * of, then dies. */
static void spill_then_die(int fd, void *arg)
{
    (void)arg;
    alarm(30);
    wal_topic_t *t;
    wal_memory_opts_t mo;
    wal_memory_opts_default(&mo);
    mo.durability = WAL_DURABILITY_MEMORY_FIRST;
    if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0 || wal_topic_set_durability(t, &mo) != 0)
        _exit(2);
    for (uint64_t seq = 0; seq < 50; seq += 10)
        th_submit(&h, t, seq, 10, PAYLOAD); /* 1..50 held */
    if (wal_checkpoint(t, 10) != 0 || !th_wait(&h, 1))
        _exit(3);
    wal_topic_spill(t, WAL_SPILL_OUTPUT); /* 11..50 to the log */
    if (!th_wait(&h, 5))
        _exit(4);
    for (size_t i = 0; i < 5; i++) /* what the publishers were told: in the cluster or in the log */
        if (h.done[i].rc != 0 || write(fd, &h.done[i].first_offset, 8) != 8)
            _exit(5);
    raise(SIGKILL);
    _exit(6);
}

Test(memory, what_a_spill_completed_survives_a_sigkill_and_offsets_continue_above_it)
{
    h.o.reserve_span = 1000;
    uint64_t firsts[8];
    size_t n = 0;
    cr_assert_eq(th_fork_life(spill_then_die, NULL, firsts, sizeof firsts[0], 8, &n), SIGKILL);
    cr_assert_eq(n, 5);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    /* every batch completed after the first (which the cluster acknowledged) is in the log */
    uint64_t holes;
    cr_assert_eq(read_through(t, 11, &holes), 40);
    cr_assert_gt(stats(t).next_offset, 50);
    cr_assert_eq(th_append(&h, t, 500, 1, PAYLOAD), 0);
    cr_assert_gt(h.done[h.ndone - 1].first_offset, 50);
}

/* ---- the backlog: records stored above the checkpoint, not offsets --------- */

/* One life of the next test: enters memory, holds 30 records, acknowledges
 * the first `ack` of them (life 0 only), spills the rest to the log and
 * reports each completed batch (first offset, count: what is stored), then
 * holds 5 more and dies with them (never stored, never answered). */
typedef struct { uint64_t first, count; } stored_t;

static void backlog_child(int fd, void *arg)
{
    uint64_t ack = *(uint64_t *)arg;
    alarm(30);
    wal_topic_t *t;
    wal_memory_opts_t mo;
    wal_memory_opts_default(&mo);
    mo.durability = WAL_DURABILITY_MEMORY_FIRST;
    mo.spill_after_ms = 60000; /* only the spill asked for below */
    if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0 || wal_topic_set_durability(t, &mo) != 0)
        _exit(2);
    size_t before = h.ndone;
    for (uint64_t seq = 0; seq < 30; seq += 10)
        th_submit(&h, t, 1000 + seq, 10, PAYLOAD);
    if (ack) {
        uint64_t first = wal_topic_readable_end(t) - 30;
        if (wal_checkpoint(t, first + ack - 1) != 0)
            _exit(3);
    }
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    if (!th_wait(&h, before + 3))
        _exit(4);
    for (size_t i = before; i < h.ndone; i++) {
        stored_t s = { h.done[i].first_offset, h.done[i].count };
        if (h.done[i].rc != 0 || write(fd, &s, sizeof s) != sizeof s)
            _exit(5);
    }
    /* DRAINING now: back in the log; then held again? not before the
     * hold-down: these 5 go to the log too, completed, then the kill */
    before = h.ndone;
    th_submit(&h, t, 2000, 5, PAYLOAD);
    if (!th_wait(&h, before + 1) || h.done[before].rc != 0)
        _exit(6);
    stored_t s = { h.done[before].first_offset, h.done[before].count };
    if (write(fd, &s, sizeof s) != sizeof s)
        _exit(7);
    raise(SIGKILL);
    _exit(8);
}

/* Reads t from `from` to its readable end: the records read (each intact,
 * offsets increasing); *holes counts the gaps, every one a hole. */
static uint64_t read_through_any(wal_topic_t *t, uint64_t from, uint64_t *holes)
{
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, from, &r), 0);
    uint64_t n = 0, last = 0, seq;
    *holes = 0;
    wal_record_t rec;
    int rc;
    while ((rc = wal_reader_next(r, &rec)) != WAL_END) {
        if (rc == WAL_GAP) {
            cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_HOLE);
            (*holes)++;
            continue;
        }
        cr_assert_eq(rc, 0);
        cr_assert(th_record_ok(&rec, PAYLOAD, &seq));
        cr_assert_gt(rec.offset, last);
        last = rec.offset;
        n++;
    }
    wal_reader_close(r);
    return n;
}

static void backlog_after_kills(bool verify)
{
    enum { LIVES = 4, SPAN = 1000 };
    h.o.reserve_span = SPAN;
    h.o.verify_on_open = verify;
    stored_t ev[64];
    size_t n = 0;
    for (int i = 0; i < LIVES; i++) {
        uint64_t ack = i == 0 ? 12 : 0;
        cr_assert_eq(th_fork_life(backlog_child, &ack, ev, sizeof ev[0], 64, &n), SIGKILL, "life %d", i);
    }
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    uint64_t ck = wal_topic_checkpoint(t), end = wal_topic_readable_end(t), want = 0;
    for (size_t i = 0; i < n; i++)
        for (uint64_t o = ev[i].first; o < ev[i].first + ev[i].count; o++)
            want += o > ck;
    cr_assert_eq(want, 3 * 35 + 18 + 5, "what the lives stored above the checkpoint (%llu)", (unsigned long long)ck);
    uint64_t holes;
    cr_assert_eq(read_through_any(t, ck + 1, &holes), want, "a reader finds exactly those");
    cr_assert_geq(holes, LIVES - 1, "behind a reservation skip per kill");
    cr_assert_gt(end - 1 - ck, want + (LIVES - 1) * (SPAN / 2), "the offsets span the skips (%llu)",
                 (unsigned long long)(end - 1 - ck));
    cr_assert_eq(wal_topic_stored_between(t, ck, end), want, "the backlog counts records, not offsets: %llu",
                 (unsigned long long)wal_topic_stored_between(t, ck, end));
    /* and as the checkpoint passes the skips, one life at a time */
    uint64_t acked = ck;
    for (size_t i = 0; i < n; i++) {
        uint64_t last = ev[i].first + ev[i].count - 1;
        if (last <= acked)
            continue;
        for (uint64_t o = TB_MAX(ev[i].first, acked + 1); o <= last; o++)
            want--;
        cr_assert_eq(wal_checkpoint(t, last), 0);
        acked = last;
        cr_assert_eq(wal_topic_stored_between(t, acked, end), want, "after acking %llu",
                     (unsigned long long)acked);
    }
    cr_assert_eq(want, 0);
}

Test(memory, the_backlog_after_sigkills_counts_records_not_the_reservation_skips)
{
    backlog_after_kills(false);
}

Test(memory, the_backlog_after_sigkills_counts_the_same_when_every_record_is_verified_at_open)
{
    backlog_after_kills(true);
}

/* A bound deleting segments of that backlog counts the records they held as
 * dropped, not the skipped offsets after them. */
Test(memory, a_bound_dropping_the_backlog_after_sigkills_counts_records_not_the_skips)
{
    enum { LIVES = 4, SPAN = 1000 };
    h.o.reserve_span = SPAN;
    stored_t ev[64];
    size_t n = 0;
    for (int i = 0; i < LIVES; i++) {
        uint64_t ack = 0;
        cr_assert_eq(th_fork_life(backlog_child, &ack, ev, sizeof ev[0], 64, &n), SIGKILL, "life %d", i);
    }
    h.o.max_topic_bytes = 8192; /* the new records below push out every segment of the lives */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    uint64_t stored = wal_topic_stored_between(t, 0, wal_topic_readable_end(t));
    cr_assert_eq(stored, LIVES * 35);
    for (uint64_t seq = 5000; seq < 5100; seq += 10)
        cr_assert_eq(th_append(&h, t, seq, 10, PAYLOAD), 0);
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.oldest_offset, ev[n - 1].first, "every life's segments were deleted");
    cr_assert_eq(st.dropped_total, stored + 100 - wal_topic_stored_between(t, 0, wal_topic_readable_end(t)),
                 "dropped: the records deleted (%llu), not the offsets (the lives spanned %llu)",
                 (unsigned long long)st.dropped_total, (unsigned long long)(ev[n - 1].first + 5 - ev[0].first));
}

Test(memory, the_backlog_counts_held_records_once_across_a_spill_and_not_its_hole)
{
    h.o.checkpoint_flush_ms = 60000; /* 1..10 stay on disk (not deleted) until the close */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 10, PAYLOAD), 0); /* 1..10 in the log */
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 10, 5, PAYLOAD); /* 11..15 held */
    th_submit(&h, t, 15, 5, PAYLOAD); /* 16..20 held */
    uint64_t end = wal_topic_readable_end(t);
    cr_assert_eq(end, 21);
    cr_assert_eq(wal_topic_stored_between(t, 0, end), 20, "log and memory");
    cr_assert_eq(wal_topic_stored_between(t, 5, end), 15);
    cr_assert_eq(wal_topic_stored_between(t, 5, 16), 10, "bounded by end");
    cr_assert_eq(wal_checkpoint(t, 15), 0); /* 11..15 acknowledged from memory: never written */
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(wal_topic_stored_between(t, 15, end), 5);
    wal_topic_spill(t, WAL_SPILL_OUTPUT); /* 16..20 to a new segment at 16 */
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(wal_topic_stored_between(t, 15, wal_topic_readable_end(t)), 5, "spilled: the same 5");
    cr_assert_eq(wal_topic_stored_between(t, 0, wal_topic_readable_end(t)), 15, "11..15 are a hole");
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(wal_topic_stored_between(t, 15, wal_topic_readable_end(t)), 5, "and after a restart");
}

/* Recovery's look at a sealed segment's last record (no full scan) finds
 * the end a full scan finds, padding and size rotations included. */
static void sealed_ends_agree(uint64_t segment_bytes, const uint32_t *n, const size_t *len, size_t kinds)
{
    h.o.segment_bytes = segment_bytes;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    for (uint64_t seq = 0, k = 0; seq < 300; k++) { /* each batch a sync (ALWAYS): padding after some */
        cr_assert_eq(th_append(&h, t, seq, n[k % kinds], len[k % kinds]), 0);
        seq += n[k % kinds];
    }
    cr_assert_eq(th_close(&h), 0);
    wal_seg_t *ends[2];
    size_t nseg[2];
    for (int v = 0; v < 2; v++) {
        h.o.verify_on_open = v;
        cr_assert_eq(th_open(&h), 0);
        t = wal_topic_find(h.w, "/e/t");
        pthread_mutex_lock(&t->mu);
        nseg[v] = t->nsegs;
        ends[v] = malloc(t->nsegs * sizeof *ends[v]);
        memcpy(ends[v], t->segs, t->nsegs * sizeof *ends[v]);
        pthread_mutex_unlock(&t->mu);
        cr_assert_eq(th_close(&h), 0);
    }
    cr_assert_eq(nseg[0], nseg[1]);
    cr_assert_gt(nseg[0], 10);
    for (size_t i = 0; i + 1 < nseg[0]; i++) {
        cr_assert_eq(ends[0][i].end, ends[1][i].end, "segment %llu", (unsigned long long)ends[0][i].base);
        cr_assert_eq(ends[0][i].end, ends[0][i + 1].base, "contiguous: the next segment starts there");
    }
    free(ends[0]);
    free(ends[1]);
}

Test(memory, a_sealed_segments_end_from_its_tail_is_the_end_a_full_scan_finds)
{
    /* 4 KiB segments: rotations inside batches of short records */
    sealed_ends_agree(4096, (const uint32_t[]){ 7, 7, 2 }, (const size_t[]){ PAYLOAD, PAYLOAD, 1500 }, 3);
}

Test(memory, a_sealed_segments_end_is_found_behind_padding)
{
    /* 16 KiB: a sync padded to a page, then a record that does not fit */
    sealed_ends_agree(16384, (const uint32_t[]){ 2, 1, 1 }, (const size_t[]){ 1400, 4090, 3000 }, 3);
}

Test(memory, a_sealed_segments_end_is_found_past_a_last_record_longer_than_the_first_look)
{
    /* records longer than a page, unpadded: the look at the tail grows */
    sealed_ends_agree(16384, (const uint32_t[]){ 1 }, (const size_t[]){ 4090 }, 1);
}

/* ---- the way back: DRAINING -> READY -> MEMORY ------------------------------- */

static bool mode_is_ready(void *arg)
{
    return wal_topic_mode(arg) == WAL_MODE_READY;
}

Test(memory, once_the_log_is_acknowledged_the_topic_returns_to_memory)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 10, PAYLOAD); /* 1..10 held */
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING);
    th_submit(&h, t, 10, 10, PAYLOAD); /* 11..20 to the log */
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(h.done[1].first_offset, 11);
    cr_assert_eq(wal_checkpoint(t, 15), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING, "11..20 not all acknowledged yet");
    cr_assert_eq(wal_checkpoint(t, 20), 0);
    cr_assert(th_wait_until(mode_is_ready, t), "everything in the log acknowledged: READY");
    wal_meta_t m;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, &m, NULL), 0);
    cr_assert_eq(m.checkpoint, 20, "persisted at the switch: memory mode then writes none");
    cr_assert_gt(m.reserved, 20);
    th_submit(&h, t, 20, 10, PAYLOAD); /* the first submit takes the counter back */
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    cr_assert_eq(wal_topic_held(t), 10);
    cr_assert_eq(wal_topic_readable_end(t), 31, "offsets continue where the log ended");
    cr_assert_eq(stats(t).to_memory, 1);
    uint64_t holes;
    cr_assert_eq(read_through(t, 1, &holes), 30);
    cr_assert_eq(holes, 0);
    cr_assert_eq(wal_checkpoint(t, 30), 0);
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(h.done[2].first_offset, 21);
}

/* T2 rule (d): acks that come, but slower than half of spill_after_ms, keep
 * the topic in the log (back in memory it would only spill again); a fast
 * one lets it go back. The sleep is the cluster's ack latency under test. */
Test(memory, slow_acks_keep_the_log_until_a_fast_one)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    o.durability = WAL_DURABILITY_MEMORY_FIRST;
    o.spill_after_ms = 200;
    cr_assert_eq(wal_topic_set_durability(t, &o), 0);
    th_submit(&h, t, 0, 10, PAYLOAD); /* 1..10 held */
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(stats(t).ack_latency_ms, UINT64_MAX, "no sample since the spill");
    th_submit(&h, t, 10, 10, PAYLOAD); /* 11..20 to the log */
    cr_assert(th_wait(&h, 2));
    usleep(150 * 1000);
    cr_assert_eq(wal_checkpoint(t, 20), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    uint64_t lat = stats(t).ack_latency_ms;
    cr_assert(lat >= 150 && lat < 10000, "sample %llu ms", (unsigned long long)lat);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING, "acked, but in %llu ms >= 100: the log is kept",
                 (unsigned long long)lat);
    th_submit(&h, t, 20, 10, PAYLOAD); /* 21..30, still to the log, acked at once */
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(h.done[2].first_offset, 21);
    cr_assert_eq(wal_checkpoint(t, 30), 0);
    cr_assert(th_wait_until(mode_is_ready, t), "a fast ack: READY");
    cr_assert_lt(stats(t).ack_latency_ms, 100);
    th_submit(&h, t, 30, 10, PAYLOAD);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    cr_assert_eq(stats(t).to_memory, 1);
}

/* The acks of held records arriving while their spill is being written
 * (the cluster slower than spill_after_ms, yet acking) say nothing of how
 * fast it acknowledges the log: no sample, so rule (d) keeps the log until
 * something written after the spill is acknowledged quickly. */
static _Atomic bool in_spill_write, acked_in_spill;
static bool is_in_spill_write(void *arg) { (void)arg; return atomic_load(&in_spill_write); }
static bool is_acked_in_spill(void *arg) { (void)arg; return atomic_load(&acked_in_spill); }
static void hold_spill_write(void *arg, wal_topic_t *t, wal_step_t step)
{
    (void)arg;
    (void)t;
    if ((step == WAL_STEP_SEGMENT || step == WAL_STEP_WRITTEN) && !atomic_load(&in_spill_write)) { /* the writer */
        atomic_store(&in_spill_write, true);
        (void)th_wait_until(is_acked_in_spill, NULL);
    }
}

Test(memory, acks_inside_the_spill_write_are_no_sample)
{
    h.o.step_hook = hold_spill_write;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 10, PAYLOAD); /* 1..10 held */
    wal_topic_spill(t, WAL_SPILL_TIMEOUT);
    cr_assert(th_wait_until(is_in_spill_write, NULL));
    cr_assert_eq(wal_checkpoint(t, 10), 0); /* the slow cluster's acks, during the write */
    atomic_store(&acked_in_spill, true);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats(t).ack_latency_ms, UINT64_MAX, "no sample from records acknowledged before published");
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING, "everything acknowledged, but nothing says quickly");
    th_submit(&h, t, 10, 10, PAYLOAD); /* 11..20 to the log, acked at once */
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(h.done[1].first_offset, 11);
    cr_assert_eq(wal_checkpoint(t, 20), 0);
    cr_assert(th_wait_until(mode_is_ready, t), "a quick ack of the log: READY");
}

Test(memory, a_spill_soon_after_the_return_doubles_the_hold_down)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 5, PAYLOAD); /* 1..5 held */
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(stats(t).holddown_ms, 0, "the first spill: no hold-down");
    cr_assert_eq(wal_checkpoint(t, 5), 0);
    cr_assert(th_wait_until(mode_is_ready, t));
    th_submit(&h, t, 5, 5, PAYLOAD); /* 6..10: back in memory */
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    /* the cluster stalls again at once: a flap */
    uint64_t t0 = tb_mono_ms(); /* DRAINING begins after this */
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(stats(t).holddown_ms, 1000, "a spill within a minute of the return doubles it");
    cr_assert_eq(wal_checkpoint(t, 10), 0);
    cr_assert(th_wait_until(mode_is_ready, t));
    uint64_t waited = tb_mono_ms() - t0;
    cr_assert_geq(waited, 1000, "READY only after the hold-down: %llu ms", (unsigned long long)waited);
    th_submit(&h, t, 10, 5, PAYLOAD);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    cr_assert_eq(stats(t).to_memory, 2);
    cr_assert_eq(wal_topic_readable_end(t), 16);
}

Test(memory, a_shutdown_spill_is_for_good)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 5, PAYLOAD);
    wal_topic_spill(t, WAL_SPILL_SHUTDOWN);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(wal_checkpoint(t, 5), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING, "a stopping gateway writes everything to the log");
    th_submit(&h, t, 5, 5, PAYLOAD);
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(h.done[1].first_offset, 6);
    cr_assert_eq(wal_topic_held(t), 0);
}

/* ---- 2.8: a spill that cannot be written (refused-spill accounting) ---- */

static atomic_bool fail_pwrites;
static ssize_t f_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    if (atomic_load(&fail_pwrites))
        return -EIO;
    return wal_io_posix()->pwrite(ctx, fd, buf, n, off);
}
static wal_io_t failing;
static const wal_io_t *failing_io(void)
{
    failing = *wal_io_posix();
    failing.pwrite = f_pwrite;
    return &failing;
}

/* ack received: the publishers were answered at once, the spill fails (EIO):
 * the 20 answered and unacknowledged messages are lost and counted, exactly
 * (the 10 the cluster acknowledged first are not), persisted across a
 * reopen; the drop floor covers them, so an ack that still comes for one is
 * told it was counted (acked_dropped), not replicated. */
Test(memory, an_unwritable_spill_counts_what_received_had_answered_as_dropped_and_persists_it)
{
    atomic_store(&fail_pwrites, false);
    h.o.io = failing_io();
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_RECEIVED, 0);
    th_submit(&h, t, 0, 10, PAYLOAD);
    th_submit(&h, t, 10, 10, PAYLOAD);
    th_submit(&h, t, 20, 10, PAYLOAD);
    cr_assert(th_wait(&h, 3), "answered at once");
    uint64_t first = h.done[0].first_offset;
    cr_assert_eq(wal_checkpoint(t, first + 9), 0, "the cluster has the first batch");
    atomic_store(&fail_pwrites, true);
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    (void)wal_sync(h.w); /* the spill is before the barrier in the writer's queue */
    th_collect(&h);
    cr_assert_eq(h.ndone, 3, "no second completion");
    cr_assert_eq(wal_topic_held(t), 0);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.dropped_since_open, 20, "lost with the spill: %" PRIu64, st.dropped_since_open);
    cr_assert_eq(st.spill_lost_since_open, 20, "and counted by their cause (dropped_total{reason=\"spill\"})");
    cr_assert_eq(st.dropped_total, 20);
    cr_assert_geq(st.drop_floor, first + 30, "the floor covers every refused offset");
    uint64_t floor = 0;
    cr_assert_eq(wal_checkpoint_floor(t, first + 19, &floor), 0);
    cr_assert_gt(floor, first + 19, "an ack that still comes is one of the dropped");
    atomic_store(&fail_pwrites, false);
    (void)th_close(&h);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_stats(wal_topic_find(h.w, "/e/t"), &st);
    cr_assert_eq(st.dropped_total, 20, "persisted: %" PRIu64, st.dropped_total);
}

/* ack upstream: nobody was answered, so the spill's failure refuses them
 * (rc < 0: the broker counts them rejected, none acknowledged) and counts
 * none as dropped (no double count); the floor still takes them out of
 * what the log is said to queue. */
Test(memory, an_unwritable_spill_refuses_upstream_publishers_and_counts_no_drop)
{
    atomic_store(&fail_pwrites, false);
    h.o.io = failing_io();
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, 0, 10, PAYLOAD);
    th_submit(&h, t, 10, 10, PAYLOAD);
    th_collect(&h);
    cr_assert_eq(h.ndone, 0, "waiting for the cluster");
    uint64_t next = wal_topic_readable_end(t);
    atomic_store(&fail_pwrites, true);
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    (void)wal_sync(h.w); /* past the spill: its accounting is done */
    cr_assert(th_wait(&h, 2));
    for (size_t i = 0; i < 2; i++)
        cr_assert_lt(h.done[i].rc, 0, "batch %zu refused", i);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.dropped_since_open, 0);
    cr_assert_eq(st.spill_lost_since_open, 0);
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_geq(st.drop_floor, next, "refused offsets are not queued");
    atomic_store(&fail_pwrites, false);
    (void)th_close(&h);
}

/* ---- on_full block: the spill parks at the bound (design 2.8) ------------ */

static bool is_blocked(void *arg) { return wal_topic_blocked(arg); }
static bool is_unblocked(void *arg) { return !wal_topic_blocked(arg); }

/* A log of t (max_topic_bytes 16384, segments of 4096) filled to its bound
 * with unacknowledged records under drop_newest; then block, memory_first
 * (ack upstream) and two held batches. Returns the next seq; *log_end is
 * the log's readable end (the first held offset). */
static uint64_t memory_over_a_full_log(wal_topic_t *t, uint64_t *log_end)
{
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_DROP_NEWEST), 0);
    uint64_t seq = 0;
    for (int i = 0;; i++) {
        cr_assert_lt(i, 40, "the bound refuses within 40 batches");
        int rc = th_append(&h, t, seq, 10, PAYLOAD);
        if (rc == TB_EFULL)
            break;
        cr_assert_eq(rc, 0);
        seq += 10;
    }
    cr_assert_eq(wal_topic_set_overflow(t, WAL_OVERFLOW_BLOCK), 0);
    *log_end = wal_topic_readable_end(t);
    cr_assert_eq(*log_end, seq + 1, "offsets follow the seqs (read_through's rule)");
    enter_memory(t, WAL_ACK_UPSTREAM, 0);
    th_submit(&h, t, seq, 10, PAYLOAD);
    th_submit(&h, t, seq + 10, 10, PAYLOAD);
    return seq;
}

/* The spill finds the bound full: it parks. Nobody is answered or refused,
 * the topic stays SPILLING and blocked (the broker stops reading its
 * publishers), the held records stay readable, a batch submitted behind it
 * is held too. Once the checkpoint frees room the spill is written, its
 * two batches and the one behind complete rc 0 in order at their offsets,
 * the topic is in the log (DRAINING) and unblocked, and the log reads back
 * every record in order: nothing dropped, nothing refused. */
Test(memory, block_parks_a_spill_at_the_bound_and_writes_it_when_the_checkpoint_frees_room)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t log_end;
    uint64_t seq = memory_over_a_full_log(t, &log_end);
    size_t before = h.ndone;
    th_collect(&h);
    cr_assert_eq(h.ndone, before, "held: waiting for the cluster");

    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait_until(is_blocked, t), "the spill parks at the bound");
    cr_assert_eq(wal_sync(h.w), 0, "a wake: the parked spill is tried again and stays parked");
    th_collect(&h);
    cr_assert_eq(h.ndone, before, "a parked spill answers and refuses nobody");
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_SPILLING);
    cr_assert_eq(wal_topic_held(t), 20);
    uint64_t holes;
    cr_assert_eq(read_through(t, log_end, &holes), 20, "the held records are still read from memory");
    th_submit(&h, t, seq + 20, 10, PAYLOAD);
    cr_assert_eq(wal_sync(h.w), 0);
    th_collect(&h);
    cr_assert_eq(h.ndone, before, "a batch behind the parked spill is held too");
    cr_assert(wal_topic_blocked(t));

    cr_assert_eq(wal_checkpoint(t, log_end - 1), 0, "the cluster acknowledges the log: room");
    cr_assert(th_wait(&h, before + 3), "the spill and the batch behind it complete");
    cr_assert(th_wait_until(is_unblocked, t));
    for (size_t i = 0; i < 3; i++) {
        const wal_completion_t *c = &h.done[before + i];
        cr_assert_eq(c->rc, 0, "batch %zu", i);
        cr_assert_eq((uint64_t)(uintptr_t)c->user, seq + 10 * i, "in order: batch %zu", i);
        cr_assert_eq(c->first_offset, log_end + 10 * i, "at its offsets: batch %zu", i);
    }
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_DRAINING);
    cr_assert_eq(wal_topic_held(t), 0);
    cr_assert_eq(read_through(t, log_end, &holes), 30, "in the log, in order");
    cr_assert_eq(holes, 0);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_eq(st.spill_lost_since_open, 0);
    cr_assert_eq(st.spills[WAL_SPILL_OUTPUT], 1, "one spill, however often it was tried");
}

/* Parked, then given up: wal_topic_release_held (the broker's drain) ends
 * the wait at once. What the spill could not write is refused to its
 * publishers (never answered: they resend), nothing is counted dropped,
 * the batch behind completes TB_ECLOSED, the topic is unblocked; and a
 * close while parked does not wait for room either. */
Test(memory, a_parked_spill_given_up_refuses_its_batches_and_drops_nothing)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t log_end;
    uint64_t seq = memory_over_a_full_log(t, &log_end);
    size_t before = h.ndone;
    wal_topic_spill(t, WAL_SPILL_OUTPUT);
    cr_assert(th_wait_until(is_blocked, t));
    th_submit(&h, t, seq + 20, 10, PAYLOAD);
    wal_topic_release_held(t);
    cr_assert(th_wait(&h, before + 3), "every batch comes back");
    for (size_t i = 0; i < 3; i++) {
        const wal_completion_t *c = &h.done[before + i];
        cr_assert_lt(c->rc, 0, "batch %zu not acknowledged", i);
        cr_assert_eq((uint64_t)(uintptr_t)c->user, seq + 10 * i, "in order: batch %zu", i);
    }
    cr_assert(th_wait_until(is_unblocked, t));
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.dropped_total, 0, "refused, not lost: their publishers were never answered");
    cr_assert_eq(st.dropped_since_open, 0);

    /* a second topic parked, then closed */
    wal_topic_t *u = th_topic(&h, "/e/u");
    uint64_t u_end;
    memory_over_a_full_log(u, &u_end);
    wal_topic_spill(u, WAL_SPILL_OUTPUT);
    cr_assert(th_wait_until(is_blocked, u));
    cr_assert_eq(th_close(&h), 0, "close does not wait for room");
    cr_assert_eq(th_open(&h), 0);
    cr_assert_geq(stats(wal_topic_find(h.w, "/e/u")).next_offset, u_end + 20,
                 "the offsets memory handed out are not reused");
}
