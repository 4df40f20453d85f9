/*
 * test_memory_kill.c: the memory tier's spill and way back under a SIGKILL
 * at each step, and under a power loss at each sync point of the same run
 * (docs/design/MEMORY-FIRST.md 2.9 and C9 in section 7).
 *
 * One workload, every step of it waited for before the next (so the order
 * of the steps, and of the sync points, is the same in every run):
 *
 *   A held, read, acknowledged from memory (1..3: a hole on disk)
 *   B, C held (4..9) and read; the spill (OUTPUT): a new segment at 4,
 *   the records, the sync, the completions; D to the log (10..12), read;
 *   the checkpoint passes it all: T2's meta write, READY; E takes the
 *   counter back (MEMORY) and is held (13..15), F held (16..18), both read;
 *   the checkpoint releases E.
 *
 * The SIGKILL run: a forked child runs it with wal_opts_t.step_hook set
 * and kills itself (raise(SIGKILL)) at the k-th step; every event a
 * publisher or the cluster would have seen (a completion, a record read,
 * a checkpoint acknowledged) went to the parent through a pipe before the
 * next step. The power-loss run: the same workload in process over crashio,
 * which loses power at its n-th sync. Both then reopen the log with real
 * I/O and check: every batch completed with rc 0 is acknowledged by the
 * fake reader (the cluster has it) or in the log, whole and at its offsets;
 * the next offset is above every offset ever readable; the log's offsets
 * are in order and none twice; each offset read holds the message it held
 * when it was read; nothing is counted dropped or lost (nothing was).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

#define PAYLOAD 100
#define NSEQ 64

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(memory_kill, .init = setup, .fini = teardown);

/* ---- what the outside world saw ------------------------------------------- */

enum { EV_STEP = 1, EV_DONE, EV_READ, EV_ACKED, EV_READABLE, EV_END };
typedef struct {
    uint64_t kind, a, b, c; /* STEP: step; DONE: first offset, count, seq0; READ: offset, seq;
                               ACKED: checkpoint; READABLE: readable end */
} event_t;

typedef struct {
    int fd;             /* the pipe to the parent, or -1 */
    event_t ev[256];
    size_t nev;
    size_t ndone_seen;  /* completions of h already emitted */
    _Atomic int step_n;
    int kill_at;
    crashio_t *c;       /* the power-loss run */
    bool ack_in_spill;  /* the writer waits at the spill's new segment for B's ack */
    bool bytes_spill;   /* memory_bytes fits one batch and a half: C's submit spills B,
                           and C follows it to the log (no wal_topic_spill) */
    _Atomic bool at_segment, acked_b;
} run_t;

static run_t run;
static bool ack_in_spill, bytes_spill; /* the variant the test runs */

/* Both threads report (the writer from the step hook). */
static pthread_mutex_t emit_mu = PTHREAD_MUTEX_INITIALIZER;
/* Set by the thread that kills the process, just before raise(SIGKILL):
 * the kill is not instant (that thread may be descheduled before the
 * syscall, the other one runs on), so from then on the other thread stops
 * at its next report: the world sees nothing past step k, as if the kill
 * had landed there. */
static _Atomic bool dying;

static void emit(run_t *r, event_t e)
{
    while (atomic_load(&dying))
        pause(); /* the SIGKILL is on its way */
    pthread_mutex_lock(&emit_mu);
    if (r->nev < sizeof r->ev / sizeof r->ev[0])
        r->ev[r->nev++] = e;
    if (r->fd >= 0 && write(r->fd, &e, sizeof e) != (ssize_t)sizeof e)
        _exit(90);
    pthread_mutex_unlock(&emit_mu);
}

static bool acked_b(void *arg) { return atomic_load(&((run_t *)arg)->acked_b); }
static bool dead(run_t *r);
static bool at_segment(void *arg) { return atomic_load(&((run_t *)arg)->at_segment) || dead(arg); }

static void step_hook(void *arg, wal_topic_t *t, wal_step_t step)
{
    run_t *r = arg;
    emit(r, (event_t){ EV_STEP, step, 0, 0 });
    /* what a reader could have read at the kill, not only what ours did */
    emit(r, (event_t){ EV_READABLE, wal_topic_readable_end(t), 0, 0 });
    if (atomic_fetch_add(&r->step_n, 1) + 1 == r->kill_at) {
        atomic_store(&dying, true);
        raise(SIGKILL);
    }
    if (r->ack_in_spill && step == WAL_STEP_SEGMENT) {
        /* the writer thread, the snapshot taken, no lock held: the cluster
         * acknowledges B now, while B is being written */
        atomic_store(&r->at_segment, true);
        (void)th_wait_until(acked_b, r);
    }
}

static bool dead(run_t *r) { return r->c && crashio_crashed(r->c); }

/* The completions collected so far: a publisher got its answer. */
static void emit_done(run_t *r, th_t *hh)
{
    for (; r->ndone_seen < hh->ndone; r->ndone_seen++) {
        const wal_completion_t *c = &hh->done[r->ndone_seen];
        if (c->rc == 0 && c->count > 0)
            emit(r, (event_t){ EV_DONE, c->first_offset, c->count, (uint64_t)(uintptr_t)c->user });
    }
}

/* Waits for n completions in all (10 s; false: they did not come). */
static bool wait_done(run_t *r, th_t *hh, size_t n)
{
    bool ok = th_wait(hh, n);
    emit_done(r, hh);
    return ok;
}

/* The fake cluster's reader: reads all that is readable, as the replicator
 * does, and reports each record; false when a record is not intact. */
static bool read_on(run_t *r, wal_topic_t *t, wal_reader_t *rd)
{
    emit(r, (event_t){ EV_READABLE, wal_topic_readable_end(t), 0, 0 });
    for (;;) {
        wal_record_t rec;
        int rc = wal_reader_next(rd, &rec);
        if (rc == WAL_GAP)
            continue;
        if (rc == WAL_END) {
            /* again: the end may have moved while we read (a spill in the
             * writer), and every offset read was readable */
            emit(r, (event_t){ EV_READABLE, wal_topic_readable_end(t), 0, 0 });
            return true;
        }
        if (rc < 0)
            return dead(r);
        uint64_t seq;
        if (!th_record_ok(&rec, PAYLOAD, &seq))
            return false;
        emit(r, (event_t){ EV_READ, rec.offset, seq, 0 });
    }
}

static bool ack(run_t *r, wal_topic_t *t, uint64_t ck)
{
    if (wal_checkpoint(t, ck) != 0)
        return false;
    emit(r, (event_t){ EV_ACKED, ck, 0, 0 });
    return true;
}

/* After a batch is held: the reservation's raise it may have asked for
 * (asynchronous, half a span ahead) is waited for, so the meta writes, and
 * with them the sync points, are the same in every run. */
typedef struct {
    wal_topic_t *t;
    crashio_t *c;
} mode_arg_t;

/* reserve.c's rule: a raise is due when less than half a span is left
 * above what was declared. Only what the code declared is looked at (the
 * test declares nothing: it would do the tier's job for it). */
static bool raised_or_dead(void *arg)
{
    mode_arg_t *m = arg;
    uint64_t used = atomic_load(&m->t->res_used), r = wal_topic_reserved(m->t);
    bool due = used > 0 && (r < used || r - used <= m->t->w->o.reserve_span / 2);
    return !due || (m->c && crashio_crashed(m->c));
}

static void settle(run_t *r, wal_topic_t *t)
{
    mode_arg_t ma = { t, r->c };
    (void)th_wait_until(raised_or_dead, &ma); /* a dead disk: the run notices next */
}

static bool ready_or_dead(void *arg)
{
    mode_arg_t *m = arg;
    return wal_topic_mode(m->t) == WAL_MODE_READY || (m->c && crashio_crashed(m->c));
}

/* The workload (the file's comment). Returns 0 when it ran to its end, or
 * the number of the phase it stopped at (the disk died: power loss). */
static int workload(run_t *r, th_t *hh)
{
    wal_topic_t *t;
    if (wal_topic_open(hh->w, "/e/t", &t) != 0)
        return 1;
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    o.durability = WAL_DURABILITY_MEMORY_FIRST;
    o.ack = WAL_ACK_UPSTREAM;
    o.spill_after_ms = 600000; /* no timer spill: the spill is the test's, at a known point */
    if (wal_topic_set_durability(t, &o) != 0 || wal_topic_mode(t) != WAL_MODE_MEMORY)
        return 2;
    wal_reader_t *rd;
    if (wal_reader_open(t, 1, &rd) != 0)
        return 3;
    int phase = 0;
    size_t n = hh->ndone;
    /* A: held, read, acknowledged from memory */
    th_submit(hh, t, 0, 3, PAYLOAD);
    settle(r, t);
    if (r->bytes_spill) {
        wal_topic_stats_t st;
        wal_topic_stats(t, &st);
        o.memory_bytes = st.held_bytes + st.held_bytes / 2; /* B fits, B and C do not */
        if (st.held_bytes == 0 || wal_topic_set_durability(t, &o) != 0) {
            phase = 12;
            goto out;
        }
    }
    if (!read_on(r, t, rd) || !ack(r, t, 3) || !wait_done(r, hh, n + 1) || dead(r)) {
        phase = 4;
        goto out;
    }
    /* B, C held and read; the spill; their completions */
    th_submit(hh, t, 3, 3, PAYLOAD);
    settle(r, t);
    th_submit(hh, t, 6, 3, PAYLOAD);
    settle(r, t);
    if (!read_on(r, t, rd)) {
        phase = 5;
        goto out;
    }
    if (!r->bytes_spill)
        wal_topic_spill(t, WAL_SPILL_OUTPUT);
    if (r->ack_in_spill) {
        /* B acknowledged while the spill writes it: completed by the ack */
        bool ok = th_wait_until(at_segment, r) && ack(r, t, 6);
        atomic_store(&r->acked_b, true);
        if (!ok) {
            phase = 11;
            goto out;
        }
    }
    if (!wait_done(r, hh, n + 3) || dead(r) || wal_topic_mode(t) != WAL_MODE_DRAINING) {
        phase = 6;
        goto out;
    }
    /* D to the log; read; everything acknowledged: READY */
    th_submit(hh, t, 9, 3, PAYLOAD);
    if (!wait_done(r, hh, n + 4) || dead(r) || !read_on(r, t, rd) || !ack(r, t, 12)) {
        phase = 7;
        goto out;
    }
    mode_arg_t ma = { t, r->c };
    if (!th_wait_until(ready_or_dead, &ma) || dead(r)) {
        phase = 8;
        goto out;
    }
    /* E takes the counter back and is held, F too; read; E released */
    th_submit(hh, t, 12, 3, PAYLOAD);
    if (wal_topic_mode(t) != WAL_MODE_MEMORY) {
        phase = 9;
        goto out;
    }
    settle(r, t);
    if (r->bytes_spill) {
        /* E and F do not fit together: E is released before F comes */
        if (!read_on(r, t, rd) || !ack(r, t, 15) || !wait_done(r, hh, n + 5) || dead(r)) {
            phase = 10;
            goto out;
        }
        th_submit(hh, t, 15, 3, PAYLOAD);
        settle(r, t);
        if (!read_on(r, t, rd) || wal_topic_held(t) != 3) {
            phase = 10;
            goto out;
        }
    } else {
        th_submit(hh, t, 15, 3, PAYLOAD);
        settle(r, t);
        if (!read_on(r, t, rd) || !ack(r, t, 15) || !wait_done(r, hh, n + 5) || dead(r)) {
            phase = 10;
            goto out;
        }
    }
    emit(r, (event_t){ EV_END, 0, 0, 0 });
out:
    wal_reader_close(rd);
    return phase;
}

/* ---- the checks after the restart ------------------------------------------- */

typedef struct {
    uint64_t seq_at[NSEQ + 32]; /* log offset -> seq + 1 (0: no record) */
    long records;
    uint64_t acked, max_readable, max_read, first_new;
    int done_batches, steps, gaps;
    bool end;
    wal_topic_stats_t st;
} verdict_t;

/* Reopens h's log with real I/O and checks what the events promise. */
static void check_after(const event_t *ev, size_t nev, const char *what, verdict_t *v)
{
    memset(v, 0, sizeof *v);
    h.o.io = NULL;
    h.o.step_hook = NULL;
    cr_assert_eq(th_open(&h), 0, "%s: reopen", what);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    if (!t) {
        /* killed before the topic existed on disk: nothing was seen either */
        for (size_t i = 0; i < nev; i++)
            cr_assert(ev[i].kind == EV_STEP, "%s: events without a topic", what);
        th_close(&h);
        return;
    }
    wal_topic_stats(t, &v->st);
    /* the log: offsets in order, none twice, each record whole, no seq twice */
    bool seq_seen[NSEQ] = { 0 };
    wal_reader_t *rd;
    cr_assert_eq(wal_reader_open(t, 1, &rd), 0);
    uint64_t last = 0;
    for (;;) {
        wal_record_t rec;
        int rc = wal_reader_next(rd, &rec);
        if (rc == WAL_GAP) {
            /* offsets acknowledged from memory, or skipped for the
             * reservation: never written, so a hole, never counted a drop */
            cr_assert_eq(wal_reader_gap_kind(rd), WAL_GAP_HOLE, "%s: a gap before %llu is a drop", what,
                         (unsigned long long)wal_reader_offset(rd));
            v->gaps++;
            continue;
        }
        if (rc == WAL_END)
            break;
        cr_assert_eq(rc, 0, "%s: reading the log", what);
        uint64_t seq;
        cr_assert(th_record_ok(&rec, PAYLOAD, &seq), "%s: offset %llu intact", what,
                  (unsigned long long)rec.offset);
        cr_assert_gt(rec.offset, last, "%s: offset %llu after %llu", what, (unsigned long long)rec.offset,
                     (unsigned long long)last);
        cr_assert_lt(seq, NSEQ);
        /* the run's offsets are known: message s at offset s + 1 (A at 1..3, ..., F at 16..18) */
        cr_assert_eq(rec.offset, seq + 1, "%s: message %llu at offset %llu", what, (unsigned long long)seq,
                     (unsigned long long)rec.offset);
        cr_assert_not(seq_seen[seq], "%s: message %llu twice in the log", what, (unsigned long long)seq);
        seq_seen[seq] = true;
        cr_assert_lt(rec.offset, sizeof v->seq_at / sizeof v->seq_at[0]);
        v->seq_at[rec.offset] = seq + 1;
        last = rec.offset;
        v->records++;
    }
    wal_reader_close(rd);
    /* what the world saw */
    uint64_t last_read = 0;
    for (size_t i = 0; i < nev; i++) {
        const event_t *e = &ev[i];
        switch (e->kind) {
        case EV_STEP:
            v->steps++;
            break;
        case EV_ACKED:
            v->acked = TB_MAX(v->acked, e->a);
            break;
        case EV_READABLE:
            if (e->a > 0)
                v->max_readable = TB_MAX(v->max_readable, e->a - 1);
            break;
        case EV_READ:
            cr_assert_gt(e->a, last_read, "%s: the reader got offset %llu after %llu", what,
                         (unsigned long long)e->a, (unsigned long long)last_read);
            last_read = e->a;
            v->max_read = TB_MAX(v->max_read, e->a);
            cr_assert_eq(e->a, e->b + 1, "%s: message %llu read at offset %llu", what, (unsigned long long)e->b,
                         (unsigned long long)e->a);
            cr_assert(v->seq_at[e->a] == 0 || v->seq_at[e->a] == e->b + 1,
                      "%s: offset %llu was read as message %llu, the log holds %llu", what,
                      (unsigned long long)e->a, (unsigned long long)e->b,
                      (unsigned long long)v->seq_at[e->a] - 1);
            break;
        case EV_END:
            v->end = true;
            break;
        }
    }
    for (size_t i = 0; i < nev; i++) {
        const event_t *e = &ev[i];
        if (e->kind != EV_DONE)
            continue;
        v->done_batches++;
        for (uint64_t k = 0; k < e->b; k++) {
            uint64_t off = e->a + k;
            if (off <= v->acked)
                continue; /* the cluster has it */
            cr_assert(off < sizeof v->seq_at / sizeof v->seq_at[0] && v->seq_at[off] == e->c + k + 1,
                      "%s: message %llu was completed at offset %llu, not acknowledged (checkpoint %llu), "
                      "and the log does not hold it",
                      what, (unsigned long long)(e->c + k), (unsigned long long)off,
                      (unsigned long long)v->acked);
        }
    }
    cr_assert_gt(v->st.next_offset, v->max_readable, "%s: next offset %llu, offset %llu was readable", what,
                 (unsigned long long)v->st.next_offset, (unsigned long long)v->max_readable);
    cr_assert_geq(v->max_readable, v->max_read);
    cr_assert_eq(v->st.dropped_total, 0, "%s: nothing was deleted by a bound", what);
    cr_assert_eq(v->st.lost_total, 0, "%s", what);
    cr_assert_eq(v->st.dropped_age_total, 0, "%s", what);
    /* and the next message gets an offset nobody has seen */
    size_t before = h.ndone;
    th_submit(&h, t, NSEQ - 1, 1, PAYLOAD);
    cr_assert(th_wait(&h, before + 1));
    cr_assert_eq(h.done[before].rc, 0, "%s", what);
    v->first_new = h.done[before].first_offset;
    cr_assert_gt(v->first_new, v->max_readable, "%s", what);
    cr_assert_gt(v->first_new, last, "%s", what);
    th_close(&h);
}

/* ---- SIGKILL at each step --------------------------------------------------- */

static void child(int fd, void *arg)
{
    int kill_at = *(int *)arg;
    alarm(60); /* a hung child dies of SIGALRM, which the parent reports */
    run = (run_t){ .fd = fd, .kill_at = kill_at, .ack_in_spill = ack_in_spill, .bytes_spill = bytes_spill };
    h.ndone = 0; /* the parent's completions (its checks) are not this life's */
    h.o.step_hook = step_hook;
    h.o.step_arg = &run;
    if (th_open(&h) != 0)
        _exit(2);
    int phase = workload(&run, &h);
    if (phase != 0)
        _exit(10 + phase);
    raise(SIGKILL); /* the end of the run: killed with F held */
    _exit(7);
}

/* One life killed at step kill_at (0: at the end); events into ev. Returns
 * the child's signal, or minus its exit status. */
static int life(int kill_at, event_t *ev, size_t *nev, size_t cap)
{
    *nev = 0;
    return th_fork_life(child, &kill_at, ev, sizeof *ev, cap, nev);
}

static const wal_step_t steps_output[] = {
    WAL_STEP_HELD,   WAL_STEP_HELD,   WAL_STEP_HELD,       WAL_STEP_SPILL_QUEUED, WAL_STEP_SEGMENT,
    WAL_STEP_WRITTEN, WAL_STEP_SYNCED, WAL_STEP_POSTED,    WAL_STEP_T2_WRITTEN,  WAL_STEP_READY,
    WAL_STEP_MEMORY, WAL_STEP_HELD,   WAL_STEP_HELD,
};
/* the bytes trigger: C is not held, its submit queues the spill */
static const wal_step_t steps_bytes[] = {
    WAL_STEP_HELD,   WAL_STEP_HELD,   WAL_STEP_SPILL_QUEUED, WAL_STEP_SEGMENT,     WAL_STEP_WRITTEN,
    WAL_STEP_SYNCED, WAL_STEP_POSTED, WAL_STEP_T2_WRITTEN,   WAL_STEP_READY,       WAL_STEP_MEMORY,
    WAL_STEP_HELD,   WAL_STEP_HELD,
};

/* Every step of the run, killed at each; span: the reservation's (small:
 * the raises, asynchronous, land anywhere among the steps). */
static void kill_each_step(uint64_t span)
{
    static event_t ev[256];
    size_t nev;
    h.o.reserve_span = span;
    const wal_step_t *expected_steps = bytes_spill ? steps_bytes : steps_output;
    const int NSTEPS = bytes_spill ? (int)(sizeof steps_bytes / sizeof steps_bytes[0])
                                   : (int)(sizeof steps_output / sizeof steps_output[0]);
    /* the whole run first: the steps, in the order the workload waits for them */
    cr_assert_eq(life(0, ev, &nev, 256), SIGKILL, "the run reached its end");
    int steps = 0;
    for (size_t i = 0; i < nev; i++)
        if (ev[i].kind == EV_STEP) {
            cr_assert_lt(steps, NSTEPS, "more steps than expected");
            cr_assert_eq(ev[i].a, expected_steps[steps], "step %d is %llu, expected %d", steps + 1,
                         (unsigned long long)ev[i].a, expected_steps[steps]);
            steps++;
        }
    cr_assert_eq(steps, NSTEPS);
    int acks_b = 0;
    for (size_t i = 0; i < nev; i++)
        acks_b += ev[i].kind == EV_ACKED && ev[i].a == 6;
    cr_assert_eq(acks_b, ack_in_spill ? 1 : 0, "B acknowledged during the spill in that variant only");
    verdict_t v;
    check_after(ev, nev, "run to the end", &v);
    cr_assert(v.end);
    cr_assert_eq(v.done_batches, 5, "A..E completed");
    cr_assert_eq(v.max_read, 18, "the reader saw all 18");
    cr_assert_eq(v.st.next_offset, v.st.reserved, "the restart continues at the reservation");
    th_rmrf(h.wal_dir);

    for (int k = 1; k <= NSTEPS; k++) {
        char what[64];
        snprintf(what, sizeof what, "span %llu, killed at step %d (%d)", (unsigned long long)span, k,
                 expected_steps[k - 1]);
        cr_assert_eq(life(k, ev, &nev, 256), SIGKILL, "%s: the child died of SIGKILL", what);
        int seen = 0;
        wal_step_t kth = 0;
        for (size_t i = 0; i < nev; i++)
            if (ev[i].kind == EV_STEP && ++seen == k)
                kth = (wal_step_t)ev[i].a;
        cr_assert_eq(seen, k, "%s: %d steps seen", what, seen);
        cr_assert_eq(kth, expected_steps[k - 1], "%s", what);
        check_after(ev, nev, what, &v);
        cr_assert_not(v.end, "%s", what);
        cr_log_info("%s: %d completed batches, acked %llu, max readable %llu, %ld records in the log, "
                    "next %llu, reserved %llu",
                    what, v.done_batches, (unsigned long long)v.acked, (unsigned long long)v.max_readable,
                    v.records, (unsigned long long)v.st.next_offset, (unsigned long long)v.st.reserved);
        th_rmrf(h.wal_dir);
    }
}

Test(memory_kill, sigkill_at_each_step_of_the_spill_and_the_way_back_loses_nothing_completed, .timeout = 300)
{
    kill_each_step(WAL_RESERVE_SPAN_DEFAULT);
}

Test(memory_kill, sigkill_at_each_step_with_a_small_reservation_span_never_reuses_an_offset_read, .timeout = 300)
{
    kill_each_step(8);
}

Test(memory_kill, sigkill_at_each_step_with_an_ack_during_the_spill_loses_nothing_completed, .timeout = 300)
{
    ack_in_spill = true;
    kill_each_step(8);
}

Test(memory_kill, sigkill_at_each_step_of_a_bytes_spill_with_the_batch_behind_it_loses_nothing_completed,
     .timeout = 300)
{
    bytes_spill = true;
    kill_each_step(8);
}

/* ---- power loss at each sync point of the same run -------------------------- */

typedef struct {
    int syncs;   /* sync points the run went through (before the close) */
    bool crashed;
    int phase;
} power_t;

static void power_run(int n, uint64_t span, power_t *out)
{
    h.o.reserve_span = span;
    crashio_t *c = crashio_new((unsigned)n * 7919u + 11);
    run = (run_t){ .fd = -1, .c = c, .ack_in_spill = ack_in_spill, .bytes_spill = bytes_spill };
    if (ack_in_spill) {
        h.o.step_hook = step_hook; /* never kills (kill_at 0): holds the spill for the ack */
        h.o.step_arg = &run;
    }
    h.o.io = crashio_io(c);
    h.o.retry_ms = 60000; /* a failed topic does not retry during the run */
    int armed = crashio_syncs(c);
    crashio_crash_at_sync(c, n);
    cr_assert_eq(th_open(&h), 0, "N=%d", n);
    out->phase = workload(&run, &h);
    out->syncs = crashio_syncs(c) - armed;
    out->crashed = crashio_crashed(c);
    th_close(&h); /* a clean stop spills F (a crash: it fails) */
    emit_done(&run, &h);
    h.ndone = 0;
    char what[64];
    snprintf(what, sizeof what, "power loss at sync %d", n);
    verdict_t v;
    check_after(run.ev, run.nev, what, &v);
    if (n == 0) {
        cr_assert_eq(out->phase, 0);
        cr_assert_eq(v.done_batches, 5, "A..E completed (the close frees what it completes)");
    }
    h.ndone = 0;
    crashio_free(c);
    th_rmrf(h.wal_dir);
}

static void power_each_sync(uint64_t span)
{
    power_t dry, again;
    power_run(0, span, &dry);
    power_run(0, span, &again);
    const int points = dry.syncs;
    cr_assert_eq(again.syncs, points, "the run's sync points are the same every time");
    cr_assert_geq(points, 5, "open, the spill's segment and records, D, T2's meta write");
    int crashed = 0;
    for (int n = 1; n <= points; n++) {
        power_t p;
        power_run(n, span, &p);
        cr_assert(p.crashed, "N=%d: the crash point is reached", n);
        cr_assert_neq(p.phase, 0, "N=%d: the run noticed", n);
        crashed++;
        cr_log_info("span %llu: power loss at sync %d of %d: the run stopped at phase %d",
                    (unsigned long long)span, n, points, p.phase);
    }
    cr_assert_eq(crashed, points);
    cr_log_info("span %llu: power loss at each of %d sync points of the spill run", (unsigned long long)span, points);
}

Test(memory_kill, power_loss_at_each_sync_point_of_the_spill_run_loses_nothing_completed, .timeout = 300)
{
    power_each_sync(WAL_RESERVE_SPAN_DEFAULT);
}

Test(memory_kill, power_loss_at_each_sync_point_with_reservation_raises_never_reuses_an_offset_read, .timeout = 300)
{
    power_each_sync(8);
}

Test(memory_kill, power_loss_at_each_sync_point_with_an_ack_during_the_spill_loses_nothing_completed, .timeout = 300)
{
    ack_in_spill = true;
    power_each_sync(8);
}

Test(memory_kill, power_loss_at_each_sync_point_of_a_bytes_spill_with_the_batch_behind_it_loses_nothing_completed,
     .timeout = 300)
{
    bytes_spill = true;
    power_each_sync(8);
}

Test(memory_kill, the_step_hook_is_for_tests_only_and_off_by_default)
{
    wal_opts_t d;
    memset(&d, 0xa5, sizeof d);
    wal_opts_default(&d);
    cr_assert_null(d.step_hook, "production (gateway/run.c starts from the defaults) never calls one");
    cr_assert_null(d.step_arg);
}
