/*
 * test_reserve.c: the offset reservation (wal.h, OFFSET RESERVATION). An
 * offset handed out beyond the log (from memory, later) is first covered by
 * a durable reservation in the topic's meta file, and recovery continues at
 * or above it, so no restart ever gives an offset the cluster may have seen
 * to another message. Here the test plays the caller: it hands offsets
 * out (to a pipe, to the parent, as the replicator would to the cluster)
 * only once wal_topic_reserve said they are covered, then the process is
 * killed or loses power, and the reopened log must continue above them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

#define SPAN 1000

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.reserve_span = SPAN;
    h.o.retry_ms = 10;
}
static void open_gate(void);
/* the gate first: a failed assertion must not leave the writer held in a meta write */
static void teardown(void)
{
    open_gate();
    th_cleanup(&h);
}
TestSuite(reserve, .init = setup, .fini = teardown);

/* ---- an I/O layer that counts what it writes, and can hold or fail the
 * meta file's atomic replace ------------------------------------------------ */

static struct {
    wal_io_t io;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int meta_writes, other_writes, syncs;
    uint64_t meta_bytes;
    bool gate, inside;   /* gate: a meta write waits; inside: one is waiting */
    int fail_next;       /* the next n meta writes fail with EIO */
} cio = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static ssize_t c_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    pthread_mutex_lock(&cio.mu);
    cio.other_writes++;
    pthread_mutex_unlock(&cio.mu);
    return wal_io_posix()->pwrite(ctx, fd, buf, n, off);
}

static int c_fdatasync(void *ctx, int fd)
{
    pthread_mutex_lock(&cio.mu);
    cio.syncs++;
    pthread_mutex_unlock(&cio.mu);
    return wal_io_posix()->fdatasync(ctx, fd);
}

static int c_write_atomic(void *ctx, const char *path, const void *data, size_t len)
{
    pthread_mutex_lock(&cio.mu);
    cio.inside = true;
    pthread_cond_broadcast(&cio.cv);
    while (cio.gate)
        pthread_cond_wait(&cio.cv, &cio.mu);
    cio.inside = false;
    bool fail = cio.fail_next > 0;
    if (fail)
        cio.fail_next--;
    else {
        cio.meta_writes++;
        cio.meta_bytes += len;
    }
    pthread_mutex_unlock(&cio.mu);
    return fail ? -EIO : wal_io_posix()->write_atomic(ctx, path, data, len);
}

static const wal_io_t *counting_io(void)
{
    cio.io = *wal_io_posix();
    cio.io.pwrite = c_pwrite;
    cio.io.fdatasync = c_fdatasync;
    cio.io.write_atomic = c_write_atomic;
    cio.meta_writes = cio.other_writes = cio.syncs = 0;
    cio.meta_bytes = 0;
    cio.gate = cio.inside = false;
    cio.fail_next = 0;
    return &cio.io;
}

static int meta_writes(void)
{
    pthread_mutex_lock(&cio.mu);
    int n = cio.meta_writes;
    pthread_mutex_unlock(&cio.mu);
    return n;
}

/* Waits (10 s deadline) until a meta write is held at the gate. */
static bool wait_inside(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&cio.mu);
    int rc = 0;
    while (!cio.inside && rc == 0)
        rc = pthread_cond_timedwait(&cio.cv, &cio.mu, &ts);
    bool in = cio.inside;
    pthread_mutex_unlock(&cio.mu);
    return in;
}

static void open_gate(void)
{
    pthread_mutex_lock(&cio.mu);
    cio.gate = false;
    pthread_cond_broadcast(&cio.cv);
    pthread_mutex_unlock(&cio.mu);
}

/* ---- helpers ---------------------------------------------------------------- */

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static wal_meta_t meta_on_disk(wal_topic_t *t, unsigned *version)
{
    wal_meta_t m;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, &m, version), 0);
    return m;
}

/* Hands out offsets [from, to) as a memory tier would: each only once the
 * reservation covers it (wal_topic_reserve; on PENDING, wait). Returns the
 * end of what was handed out. */
static uint64_t hand_out(wal_topic_t *t, uint64_t from, uint64_t to)
{
    for (uint64_t o = from; o < to; o++) {
        int rc = wal_topic_reserve(t, o + 1);
        if (rc == WAL_RESERVE_PENDING)
            rc = wal_topic_reserve_wait(t, o + 1);
        if (rc != 0)
            return o;
        cr_assert_lt(o, wal_topic_reserved(t), "handed out only below the durable reservation");
    }
    return to;
}

static bool reserved_at_least(void *arg)
{
    wal_topic_t *t = ((void **)arg)[0];
    uint64_t want = (uint64_t)(uintptr_t)((void **)arg)[1];
    return wal_topic_reserved(t) >= want;
}

/* ---- the API ----------------------------------------------------------------- */

Test(reserve, options_and_arguments_are_checked)
{
    h.o.reserve_span = 1;
    wal_t *w;
    cr_assert_eq(wal_open(&h.o, &w), TB_ECONFIG);
    h.o.reserve_span = (1ull << 40) + 1;
    cr_assert_eq(wal_open(&h.o, &w), TB_ECONFIG);
    wal_opts_t d;
    wal_opts_default(&d);
    cr_assert_eq(d.reserve_span, 1ull << 24, "2^24 offsets per reservation write");
    h.o.reserve_span = SPAN;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_reserve(t, WAL_OFFSET_MAX + 1), TB_EINVALID);
    cr_assert_eq(wal_topic_reserve_wait(t, WAL_OFFSET_MAX + 1), TB_EINVALID);
    cr_assert_eq(wal_topic_reserved(t), 0, "nothing reserved until asked");
    cr_assert_eq(wal_topic_reserve(t, 0), 0, "an empty range is covered");
}

Test(reserve, the_first_reservation_covers_a_span_past_the_log_end_in_one_meta_write)
{
    h.o.io = counting_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, 100), 0); /* offsets 1..10 in the log */
    int before = meta_writes();
    cr_assert_eq(wal_topic_reserve(t, 12), WAL_RESERVE_PENDING, "not covered before the write");
    cr_assert_eq(wal_topic_reserve_wait(t, 12), 0);
    cr_assert_eq(wal_topic_reserved(t), 12 + SPAN, "the end declared + one span");
    cr_assert_eq(meta_writes() - before, 1);
    unsigned v;
    wal_meta_t m = meta_on_disk(t, &v);
    cr_assert_eq(v, 2);
    cr_assert_eq(m.reserved, 12 + SPAN, "durable before it is reported");
    cr_assert_eq(stats(t).reserved, 12 + SPAN);
    cr_assert_eq(stats(t).next_offset, 11, "the log's own next offset does not move");
}

Test(reserve, the_reservation_is_raised_once_half_the_span_is_used_and_not_before)
{
    h.o.io = counting_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_topic_reserve_wait(t, 2), 0);
    uint64_t r = wal_topic_reserved(t);
    cr_assert_eq(r, 2 + SPAN);
    int before = meta_writes();
    /* while more than half a span is left: covered, and the writer is not
     * even woken (so nothing can be written) */
    cr_assert_eq(hand_out(t, 1, r - SPAN / 2 - 1), r - SPAN / 2 - 1);
    cr_assert_eq(wal_topic_reserve_wait(t, r - SPAN / 2 - 1), 0);
    cr_assert_not(atomic_load(&t->res_pending), "no raise asked for");
    cr_assert_eq(meta_writes(), before);
    /* one more: the raise is due, off the caller's path (it is still covered) */
    cr_assert_eq(wal_topic_reserve(t, r - SPAN / 2), 0);
    void *arg[2] = { t, (void *)(uintptr_t)(r + SPAN) };
    cr_assert(th_wait_until(reserved_at_least, arg), "the writer raised it without being waited on");
    cr_assert_eq(wal_topic_reserved(t), r + SPAN, "by a whole span: one write per span handed out");
    cr_assert_eq(meta_writes(), before + 1);
}

Test(reserve, a_reservation_is_reported_only_once_its_meta_write_returned)
{
    h.o.io = counting_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    pthread_mutex_lock(&cio.mu);
    cio.gate = true;
    pthread_mutex_unlock(&cio.mu);
    cr_assert_eq(wal_topic_reserve(t, 5), WAL_RESERVE_PENDING);
    cr_assert(wait_inside(), "the writer is inside the meta write");
    cr_assert_eq(wal_topic_reserved(t), 0, "not before the write returned");
    cr_assert_eq(wal_topic_reserve(t, 5), WAL_RESERVE_PENDING);
    open_gate();
    cr_assert_eq(wal_topic_reserve_wait(t, 5), 0);
    cr_assert_eq(wal_topic_reserved(t), 5 + SPAN);
}

Test(reserve, a_failed_meta_write_reserves_nothing_and_is_retried)
{
    h.o.io = counting_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    pthread_mutex_lock(&cio.mu);
    cio.fail_next = 1;
    pthread_mutex_unlock(&cio.mu);
    cr_assert_eq(wal_topic_reserve_wait(t, 5), -EIO);
    cr_assert_eq(wal_topic_reserved(t), 0);
    cr_assert_eq(wal_topic_reserve(t, 5), WAL_RESERVE_PENDING, "still nothing to hand out");
    void *arg[2] = { t, (void *)(uintptr_t)5 };
    cr_assert(th_wait_until(reserved_at_least, arg), "the writer retried after retry_ms");
    cr_assert_eq(wal_topic_reserve(t, 5), 0);
}

/* Bytes written per reservation: one atomic replace of the 80-byte meta
 * file, nothing else; and what the file system charged for it, which
 * docs/WAL.md states (ext4: 4 KiB per replace, a fresh page for the
 * temporary file). */
static uint64_t write_bytes_now(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    uint64_t wb = 0, cancelled = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "write_bytes: %lu", &wb);
        sscanf(line, "cancelled_write_bytes: %lu", &cancelled);
    }
    fclose(f);
    return wb - TB_MIN(wb, cancelled);
}

Test(reserve, each_reservation_is_one_80_byte_meta_write_and_nothing_else)
{
    h.o.io = counting_io();
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    /* the counts and the bytes read together: the writer thread may write the
     * meta file between two separate reads (it did once, under load) */
    pthread_mutex_lock(&cio.mu);
    int writes0 = cio.other_writes, syncs0 = cio.syncs, meta0 = cio.meta_writes;
    uint64_t bytes0 = cio.meta_bytes;
    pthread_mutex_unlock(&cio.mu);
    uint64_t wb0 = write_bytes_now();
    const uint64_t n = 20 * SPAN;
    cr_assert_eq(hand_out(t, 1, 1 + n), 1 + n);
    cr_assert_eq(wal_sync(h.w), 0);
    pthread_mutex_lock(&cio.mu);
    int meta = cio.meta_writes - meta0;
    uint64_t bytes = cio.meta_bytes - bytes0;
    pthread_mutex_unlock(&cio.mu);
    uint64_t wb = write_bytes_now() - wb0;
    /* the first raise covers a span past the first offset, then one per span */
    cr_assert(meta >= 20 && meta <= 21, "%d meta writes for %llu offsets of span %d", meta,
              (unsigned long long)n, SPAN);
    cr_assert_eq(bytes, (uint64_t)meta * WAL_META_V2_SIZE);
    cr_assert_eq(cio.other_writes, writes0, "no segment write");
    cr_assert_eq(cio.syncs, syncs0, "no segment fdatasync");
    cr_log_info("offset reservation: %d meta writes of %u bytes for %llu offsets (span %d); "
                "write_bytes %llu, %.0f per reservation",
                meta, WAL_META_V2_SIZE, (unsigned long long)n, SPAN, (unsigned long long)wb,
                meta ? (double)wb / meta : 0.0);
}

/* ---- clean close ---------------------------------------------------------------- */

Test(reserve, a_clean_close_clears_a_reservation_nothing_needs_and_the_restart_does_not_jump)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, 100), 0);
    /* offsets declared, then all written to the log (a spill, later) */
    cr_assert_eq(wal_topic_reserve_wait(t, 11), 0);
    cr_assert_eq(wal_topic_reserved(t), 11 + SPAN);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).next_offset, 11, "not 11 + span");
    cr_assert_eq(stats(t).reserved, 0);
    unsigned v;
    meta_on_disk(t, &v);
    cr_assert_eq(v, 1, "version 1 again: the gateway can be downgraded");
}

Test(reserve, a_clean_close_keeps_exactly_the_offsets_handed_out_beyond_the_log)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, 100), 0);
    cr_assert_eq(hand_out(t, 11, 16), 16); /* 11..15 went out and never reached the log */
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).reserved, 16);
    cr_assert_eq(stats(t).next_offset, 16, "above what went out, and no span further");
    cr_assert_eq(th_append(&h, t, 100, 1, 100), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 16);
    cr_assert_eq(th_close(&h), 0);
    /* nothing declared in that life: the next one continues from the log alone */
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).reserved, 0);
    cr_assert_eq(stats(t).next_offset, 17);
}

/* ---- SIGKILL: a real kill of a forked child ---------------------------------------- */

enum { EV_APPEND = 1, EV_HANDED = 2 };
typedef struct { uint64_t kind, offset, count; } event_t;

/* The child: opens the log, appends a batch of 4 (the offsets the log gave
 * them go to the pipe), hands out n offsets beyond the log (each to the pipe
 * once covered), and dies by SIGKILL with none of them on disk. */
static void child(int fd, void *arg)
{
    uint64_t n = *(uint64_t *)arg;
    alarm(30); /* a hung child dies of SIGALRM, which the parent reports */
    wal_topic_t *t;
    if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0)
        _exit(2);
    size_t before = h.ndone;
    th_submit(&h, t, 0, 4, 100);
    if (!th_wait(&h, before + 1) || h.done[before].rc != 0)
        _exit(3);
    event_t e = { EV_APPEND, h.done[before].first_offset, 4 };
    if (write(fd, &e, sizeof e) != sizeof e)
        _exit(4);
    uint64_t from = stats(t).next_offset;
    for (uint64_t o = from; o < from + n; o++) {
        int rc = wal_topic_reserve(t, o + 1);
        if (rc == WAL_RESERVE_PENDING)
            rc = wal_topic_reserve_wait(t, o + 1);
        if (rc != 0 || o >= wal_topic_reserved(t))
            _exit(5);
        e = (event_t){ EV_HANDED, o, 1 };
        if (write(fd, &e, sizeof e) != sizeof e)
            _exit(6);
    }
    raise(SIGKILL);
    _exit(7);
}

/* Runs one life; appends its events to ev. Returns the child's signal. */
static int life(uint64_t n, event_t *ev, size_t *nev, size_t cap)
{
    return th_fork_life(child, &n, ev, sizeof *ev, cap, nev);
}

Test(reserve, offsets_handed_out_past_the_disk_are_never_reused_after_sigkill)
{
    enum { LIVES = 4, N = 2500 };
    event_t *ev = calloc(LIVES * (N + 1), sizeof *ev);
    size_t nev = 0;
    for (int i = 0; i < LIVES; i++)
        cr_assert_eq(life(N, ev, &nev, LIVES * (N + 1)), SIGKILL, "life %d", i);
    cr_assert_eq(nev, (size_t)LIVES * (N + 1), "every life appended and handed out all it meant to");
    /* every offset the "cluster" saw, from the log or from memory, in the
     * order it saw them: strictly increasing, so none twice */
    uint64_t last = 0, handed = 0;
    for (size_t i = 0; i < nev; i++) {
        cr_assert_gt(ev[i].offset, last, "event %zu (kind %llu): offset %llu after %llu", i,
                     (unsigned long long)ev[i].kind, (unsigned long long)ev[i].offset, (unsigned long long)last);
        last = ev[i].offset + ev[i].count - 1;
        handed += ev[i].kind == EV_HANDED;
    }
    cr_assert_eq(handed, (uint64_t)LIVES * N);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.next_offset, last, "the next offset is above every offset ever handed out");
    cr_assert_leq(st.next_offset, last + 1 + SPAN + SPAN / 2, "and at most 1.5 spans above");
    /* what was acknowledged by the log is all there, in order */
    uint64_t seqs[64];
    int gaps = 0;
    cr_assert_eq(th_read_all(t, 1, 100, seqs, 64, &gaps), 4 * LIVES);
    free(ev);
}

Test(reserve, after_a_kill_with_nothing_on_disk_above_the_checkpoint_the_checkpoint_moves_over_the_hole)
{
    /* the child: 4 records, all acknowledged and the checkpoint persisted */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        wal_topic_t *t;
        if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0 || th_append(&h, t, 0, 4, 100) != 0 ||
            wal_checkpoint(t, 4) != 0 || wal_sync(h.w) != 0 || hand_out(t, 5, 20) != 20)
            _exit(2);
        raise(SIGKILL);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    wal_topic_stats_t st = stats(t);
    /* the first offset handed out was 5: the reservation went to 6 + span */
    cr_assert_eq(st.next_offset, 6 + SPAN);
    cr_assert_eq(st.checkpoint, 5 + SPAN, "offsets 5..%d hold no record: nothing to replicate", 5 + SPAN);
    cr_assert(st.hole_from == 0 && st.hole_to == 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(meta_on_disk(t, NULL).checkpoint, 5 + SPAN, "persisted with the next checkpoint write");
    cr_assert_eq(stats(t).segments, 1, "the old segment, wholly acknowledged, is gone");
}

Test(reserve, after_a_kill_behind_a_backlog_the_skipped_offsets_are_a_hole)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        wal_topic_t *t;
        if (th_open(&h) != 0 || wal_topic_open(h.w, "/e/t", &t) != 0 || th_append(&h, t, 0, 4, 100) != 0 ||
            wal_checkpoint(t, 2) != 0 || wal_sync(h.w) != 0 || hand_out(t, 5, 20) != 20)
            _exit(2);
        raise(SIGKILL);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.next_offset, 6 + SPAN);
    cr_assert_eq(st.checkpoint, 2, "records 3 and 4 still wait for the cluster");
    cr_assert(st.hole_from == 5 && st.hole_to == 6 + SPAN);
    /* a reader: the backlog, then the hole as a gap, then what follows */
    cr_assert_eq(th_append(&h, t, 10, 2, 100), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 6 + SPAN);
    uint64_t seqs[8];
    int gaps = 0;
    cr_assert_eq(th_read_all(t, 3, 100, seqs, 8, &gaps), 4);
    cr_assert_eq(gaps, 1);
    cr_assert_eq(wal_checkpoint(t, 4), 0);
    cr_assert_eq(stats(t).hole_to, 6 + SPAN, "still ahead of the checkpoint");
    cr_assert_eq(wal_checkpoint(t, 6 + SPAN), 0);
    cr_assert(stats(t).hole_from == 0 && stats(t).hole_to == 0, "passed");
}

/* ---- power loss at every sync, the reservation's included ----------------------- */

#define BATCHES 4

typedef struct {
    bool crashed, in_reserve;    /* the crash hit a reservation's meta write */
    int syncs;                   /* sync points the workload went through once armed (before close) */
    uint64_t acked_end;          /* offsets below it were acknowledged by the log */
    uint64_t handed_end;         /* offsets below it were handed out (0: none was) */
    wal_topic_stats_t st;        /* after reopening with real I/O */
    long recovered;
    uint64_t first_new;
} power_t;

static void power_run(int n, power_t *out)
{
    th_t hh;
    th_init(&hh, WAL_FSYNC_ALWAYS);
    hh.o.reserve_span = 16;
    hh.o.retry_ms = 1;
    crashio_t *c = crashio_new((unsigned)n * 7919u + 3);
    hh.o.io = crashio_io(c);
    *out = (power_t){ .acked_end = 1 };
    wal_topic_t *t;
    cr_assert_eq(th_open(&hh), 0);
    cr_assert_eq(wal_topic_open(hh.w, "/e/t", &t), 0);
    int armed = crashio_syncs(c);
    crashio_crash_at_sync(c, n);
    for (int i = 0; i < BATCHES && !crashio_crashed(c); i++) {
        size_t before = hh.ndone;
        th_submit(&hh, t, (uint64_t)i * 3, 3, 100);
        cr_assert(th_wait(&hh, before + 1));
        if (hh.done[before].rc == 0)
            out->acked_end = hh.done[before].first_offset + 3;
    }
    /* hand out beyond the log while the disk lives, each raise waited for
     * (so the raises, and the sync points, are the same in every run: an
     * asynchronous raise reads however far the caller got meanwhile); after
     * it died keep asking without waiting, as a process that has not noticed
     * would: only what a durable reservation covered may go out */
    uint64_t o = stats(t).next_offset;
    for (int k = 0; k < 200; k++, o++) {
        int rc;
        if (!crashio_crashed(c)) {
            rc = wal_topic_reserve_wait(t, o + 1);
            out->in_reserve |= crashio_crashed(c);
        } else {
            rc = wal_topic_reserve(t, o + 1);
        }
        if (rc != 0)
            continue;
        out->handed_end = o + 1;
    }
    out->crashed = crashio_crashed(c);
    out->syncs = crashio_syncs(c) - armed;
    th_close(&hh);
    hh.o.io = NULL;
    cr_assert_eq(th_open(&hh), 0, "N=%d", n);
    t = wal_topic_find(hh.w, "/e/t");
    out->st = stats(t);
    uint64_t seqs[64];
    out->recovered = th_read_all(t, 1, 100, seqs, 64, NULL);
    size_t before = hh.ndone;
    th_submit(&hh, t, 1000, 1, 100);
    cr_assert(th_wait(&hh, before + 1));
    cr_assert_eq(hh.done[before].rc, 0);
    out->first_new = hh.done[before].first_offset;
    th_cleanup(&hh);
    crashio_free(c);
}

Test(reserve, power_loss_at_any_sync_including_the_reservations_never_reuses_an_offset_handed_out)
{
    /* a run without a crash counts the sync points: each one is a crash point */
    power_t dry;
    power_run(0, &dry);
    const int points = dry.syncs;
    cr_assert_gt(points, BATCHES + 10, "the batches' syncs and a dozen reservation writes");
    int in_reserve = 0, crashed = 0;
    for (int n = 1; n <= points; n++) {
        power_t p;
        power_run(n, &p);
        crashed += p.crashed;
        in_reserve += p.in_reserve;
        cr_assert_geq(p.st.next_offset, p.handed_end, "N=%d: next offset %llu, handed out below %llu", n,
                      (unsigned long long)p.st.next_offset, (unsigned long long)p.handed_end);
        cr_assert_geq(p.first_new, p.handed_end, "N=%d", n);
        cr_assert_geq(p.first_new, p.acked_end, "N=%d", n);
        cr_assert_geq(p.recovered, (long)p.acked_end - 1, "N=%d: an acknowledged record was lost", n);
    }
    cr_assert_eq(crashed, points, "every crash point is reached (%d of %d)", crashed, points);
    cr_assert_gt(in_reserve, points / 3, "crashes hit a reservation's meta write (%d of %d)", in_reserve, points);
    cr_log_info("power loss: %d crash points, %d at a reservation's meta write", points, in_reserve);
}
