/*
 * rep_thread.c: the replicator thread, its completion-queue loop, the
 * waker, commands from other threads, and the orderly stop.
 *
 * THE LOOP blocks in grpc_completion_queue_next() with a deadline: the
 * earliest of the thread's own timers (rep_timer.c), or none. It wakes for
 * a completion (every tag is a rep__op_t with a callback) or a due timer,
 * never on a tick.
 *
 * THE WAKER. Other threads (the event loop's WAL completions, rep_stop)
 * push commands onto a tb_mbox_t; its wake-up must make
 * grpc_completion_queue_next() return. gRPC 1.51's C API has no public
 * alarm (grpc_alarm is C++ only now), and the queue has no "post" for
 * callers. What it has: grpc_call_cancel(), documented in grpc.h as
 * thread-safe and callable at any point before grpc_call_unref(). So the
 * thread keeps one "waker" call parked with only RECV_STATUS_ON_CLIENT
 * started, on an inert channel: a call that never sends initial metadata
 * never picks a subchannel, so the channel never resolves or connects
 * (bench/bench_grpc_waker checks it against a listening socket: no
 * connection attempt). A wake cancels the parked call; its status tag returns on the
 * queue; the thread parks a new call and then drains the mailbox. Waking
 * again after the drain cancels the new call; waking between "park" and
 * "drain" costs one spurious turn; waking before "park" only cancels the
 * old call again (a no-op) and its command is drained right after. So no
 * command is ever left waiting. The pointer swap is under waker_mu, which
 * the waking thread also holds while it cancels, so a cancel never meets a
 * call being unreferenced. Cost (bench/bench_grpc_waker): 1.5 us for
 * park + cancel + dequeue on one thread, 23 us when the cancel comes from
 * another thread and wakes a sleeping one; the mailbox coalesces wake-ups
 * (one per empty-to-non-empty transition) and rep_kick coalesces per topic.
 *
 * STOP: no new batches, in-flight batches get shutdown_grace_ms, then
 * every stream is closed (WritesDone) or cancelled and every unary call
 * cancelled; when every topic is STOPPED and no call is left, the channels
 * are destroyed (their watches return), then the waker, then the queue is
 * shut down and drained, the WAL readers closed, and REP_EV_STOPPED posted.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

static void waker_cb(rep_t *r, rep__op_t *op, bool ok);

static grpc_call *waker_park(rep_t *r)
{
    grpc_call *c = grpc_channel_create_call(r->inert, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq,
                                            grpc_slice_from_static_string("/tributary.Waker/Park"), NULL,
                                            gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_metadata_array_init(&r->waker_md);
    r->waker_details = grpc_empty_slice();
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &r->waker_md;
    op.data.recv_status_on_client.status = &r->waker_status;
    op.data.recv_status_on_client.status_details = &r->waker_details;
    r->waker_op.cb = waker_cb;
    if (grpc_call_start_batch(c, &op, 1, &r->waker_op, NULL) != GRPC_CALL_OK)
        abort();
    return c;
}

static void waker_done(rep_t *r)
{
    grpc_metadata_array_destroy(&r->waker_md);
    grpc_slice_unref(r->waker_details);
}

void rep__wake(void *arg)
{
    rep_t *r = arg;
    pthread_mutex_lock(&r->waker_mu);
    if (r->waker)
        grpc_call_cancel(r->waker, NULL);
    pthread_mutex_unlock(&r->waker_mu);
}

/* The mailbox: kicks go to the lanes (rep__topic_kicked), stop to rep__begin_stop (rep_output.c). */
static void drain_cmds(rep_t *r)
{
    rep__output_drain(&r->out);
}

static void waker_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)op;
    (void)ok;
    waker_done(r);
    grpc_call *fresh = waker_park(r); /* park first, then drain: see the file header */
    pthread_mutex_lock(&r->waker_mu);
    grpc_call *old = r->waker;
    r->waker = fresh;
    pthread_mutex_unlock(&r->waker_mu);
    grpc_call_unref(old);
    drain_cmds(r);
}

/* ---- stop ------------------------------------------------------------------------ */

static void grace_cb(rep_t *r, rep__timer_t *tm)
{
    (void)tm;
    for (size_t i = 0; i < r->ntopics; i++)
        rep__topic_grace_over(r, r->topics[i]);
}

void rep__begin_stop(rep_t *r)
{
    if (r->stopping)
        return;
    r->stopping = true;
    uint64_t inflight = 0;
    for (size_t i = 0; i < r->ntopics; i++)
        inflight += r->topics[i]->lane.win.sent;
    tb_info("replicator stopping", TB_U("batches_in_flight", inflight), TB_U("grace_ms", r->o.shutdown_grace_ms));
    rep__reg_stop(r);
    for (rep__unary_t *u = r->unaries; u; u = u->next)
        grpc_call_cancel(u->call, NULL);
    r->grace_timer.cb = grace_cb;
    rep__timer_arm(&r->timers, &r->grace_timer, tb_mono_ms() + r->o.shutdown_grace_ms);
    for (size_t i = 0; i < r->ntopics; i++)
        rep__topic_stop(r, r->topics[i]);
}

static bool stop_done(rep_t *r)
{
    if (!r->chans_closed) {
        if (r->unaries)
            return false;
        for (size_t i = 0; i < r->ntopics; i++)
            if (r->topics[i]->state != REP_TOPIC_STOPPED)
                return false;
        rep__timer_cancel(&r->timers, &r->grace_timer);
        rep__chans_close(r);
        r->chans_closed = true;
    }
    return r->outstanding == 0;
}

/* ---- the loop ----------------------------------------------------------------------- */

static gpr_timespec next_deadline(rep_t *r)
{
    rep__timer_t *tm = rep__timer_peek(&r->timers);
    if (!tm)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    uint64_t now = tb_mono_ms();
    uint64_t wait = tm->due > now ? tm->due - now : 0;
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis((int64_t)wait, GPR_TIMESPAN));
}

static void run_timers(rep_t *r)
{
    uint64_t now = tb_mono_ms();
    rep__timer_t *tm;
    while ((tm = rep__timer_pop_due(&r->timers, now)) != NULL)
        tm->cb(r, tm);
}

void rep__post(rep_t *r, rep_event_t *ev)
{
    rep__output_post(&r->out, ev);
}

void rep__publish(rep_t *r)
{
    pthread_mutex_lock(&r->out.mu);
    r->pub = r->st;
    pthread_mutex_unlock(&r->out.mu);
}

void *rep__thread_main(void *arg)
{
    rep_t *r = arg;
    r->cluster = rep__chan_get(r, r->o.cluster_url);
    grpc_call *w = waker_park(r);
    pthread_mutex_lock(&r->waker_mu);
    r->waker = w;
    pthread_mutex_unlock(&r->waker_mu);
    rep__reg_start(r);
    drain_cmds(r); /* anything pushed before the waker was parked */

    while (!(r->stopping && stop_done(r))) {
        grpc_event ev = grpc_completion_queue_next(r->cq, next_deadline(r), NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            rep__op_t *op = ev.tag;
            op->cb(r, op, ev.success != 0);
        }
        run_timers(r);
    }

    /* the waker last: no other tag is outstanding now */
    pthread_mutex_lock(&r->waker_mu);
    w = r->waker;
    r->waker = NULL;
    pthread_mutex_unlock(&r->waker_mu);
    grpc_call_cancel(w, NULL);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &r->waker_op)
            break;
    }
    waker_done(r);
    grpc_call_unref(w);
    grpc_completion_queue_shutdown(r->cq);
    while (grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(r->cq);
    r->cq = NULL;
    for (size_t i = 0; i < r->ntopics; i++) {
        rep__topic_t *t = r->topics[i];
        rep__src_free(&t->lane.src); /* before the WAL closes */
        rep__topic_publish(r, t);
    }
    tb_info("replicator stopped");
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__post(r, ev);
    return NULL;
}
