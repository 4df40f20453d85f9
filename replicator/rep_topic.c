/*
 * rep_topic.c: one topic's replication to Danube, as a state machine on
 * the replicator thread. The topic embeds its lane (rep_lane.c: reader,
 * window, cursor, the ack accounting, stats); what is here is Danube's
 * protocol around it.
 *
 *   UNREGISTERED --registered--> (lookup needed?) LOOKUP --Connect--> CONNECTING
 *   CONNECTING --channel READY--> STREAMING --stream ends--> BACKOFF
 *   BACKOFF --jittered delay--> CONNECTING (or LOOKUP after UNAVAILABLE)
 *   any --rep_stop--> (in-flight batches get the grace) --> STOPPED
 *   any --TOPIC_REMOVED--> UNREGISTERED (until the next registration)
 *
 * While STREAMING, pump() does the work: it sends the next built batch
 * when no send is pending and the window allows, and reads the WAL into
 * the open batch while the window has room. A batch is closed when it
 * holds batch_size messages, when the next record would take it past
 * max_batch_bytes, or batch_timeout_ms after its first message (so a quiet
 * topic still has bounded latency). Reading only happens while streaming,
 * so the replayed flag is decided close to the moment of sending.
 *
 * Slow start: a new stream carries one batch until its first ack, then up
 * to max_inflight_batches. A stream that is silently swallowing batches
 * (the mock's "silent" fault; a broken middlebox) then holds at most one
 * unacked batch when it is given up, instead of a window of them that a
 * recovering peer might half-store. It costs one round trip per stream.
 *
 * max_age: records older than it when read are not sent; they make up
 * virtual batches (rep_fill.c), pushed already acknowledged, and advance()
 * moves the checkpoint over them with their count (wal_cursor_ack_ex).
 *
 * Acks: the window matches them to batches (rep_window.c); the checkpoint
 * (the lane's cursor, id 0: rep_lane.c) only moves through contiguous acks. The ack
 * deadline is the oldest sent batch's send time + ack_timeout_ms; at expiry
 * the stream is cancelled and rebuilt from the last ack, resending the same
 * batches. Outages are logged once when replication stops and once when it
 * resumes; each retry in between is a debug line and a counter.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

static void pump(rep_t *r, rep__topic_t *t);
static void connect_topic(rep_t *r, rep__topic_t *t);
static void output_down(rep__topic_t *t);
static void advance(rep_t *r, rep__topic_t *t);

static void set_state(rep_t *r, rep__topic_t *t, rep_topic_state_t s)
{
    t->state = s;
    t->lane.st.state = s;
    rep__topic_publish(r, t);
}

void rep__topic_publish(rep_t *r, rep__topic_t *t)
{
    (void)r;
    rep__lane_publish(&t->lane); /* lane.open is t->open: its bytes count as read and not acked */
}

/* ---- timers ------------------------------------------------------------------ */

static void arm_ack_timer(rep_t *r, rep__topic_t *t)
{
    rep__batch_t *b = rep__window_oldest_unacked(&t->lane.win);
    if (b && (b->state == REP__B_SENDING || b->state == REP__B_SENT))
        rep__timer_arm(&r->timers, &t->ack_timer, b->sent_ms + r->o.ack_timeout_ms);
    else
        rep__timer_cancel(&r->timers, &t->ack_timer);
}

static void ack_timer_cb(rep_t *r, rep__timer_t *tm)
{
    rep__topic_t *t = TB_CONTAINER_OF(tm, rep__topic_t, ack_timer);
    if (t->state == REP_TOPIC_STREAMING && t->stream) {
        tb_debug("replicator: no ack within ack_timeout_ms: cancelling the stream", REP__LOG_TOPIC(t),
                 TB_U("ack_timeout_ms", r->o.ack_timeout_ms), TB_U("acked_offset", t->lane.win.acked));
        rep__stream_cancel(t->stream, REP_RETRY_ACK_TIMEOUT);
    }
}

static void retry_timer_cb(rep_t *r, rep__timer_t *tm)
{
    rep__topic_t *t = TB_CONTAINER_OF(tm, rep__topic_t, retry_timer);
    if (t->state != REP_TOPIC_BACKOFF)
        return;
    if (r->stopping)
        set_state(r, t, REP_TOPIC_STOPPED);
    else if (!t->registered)
        set_state(r, t, REP_TOPIC_UNREGISTERED);
    else
        connect_topic(r, t);
}

static void batch_timer_cb(rep_t *r, rep__timer_t *tm)
{
    pump(r, TB_CONTAINER_OF(tm, rep__topic_t, batch_timer));
}

static void read_timer_cb(rep_t *r, rep__timer_t *tm)
{
    pump(r, TB_CONTAINER_OF(tm, rep__topic_t, read_timer));
}

/* After rep__lane_init (the lane's cursor, window and start offset are set). */
void rep__topic_init(rep_t *r, rep__topic_t *t)
{
    t->r = r;
    t->lane.open = &t->open;
    t->enc = (rep__enc_t){
        .topic = t->lane.name, .topic_len = strlen(t->lane.name),
        .producer = r->producer, .producer_len = strlen(r->producer),
        .batch_size = r->o.batch_size, .max_bytes = r->o.max_batch_bytes,
        .live_window_ms = r->o.live_window_ms, .live_base = t->lane.st.start_offset,
    };
    t->backoff = (rep__backoff_t){ r->o.retry_initial_ms, r->o.retry_max_ms, 0, true };
    t->ack_timer.cb = ack_timer_cb;
    t->retry_timer.cb = retry_timer_cb;
    t->batch_timer.cb = batch_timer_cb;
    t->read_timer.cb = read_timer_cb;
    t->state = t->lane.st.state = REP_TOPIC_UNREGISTERED;
    t->lane.pub = t->lane.st;
}

void rep__topic_free(rep__topic_t *t)
{
    if (t->lane.o)
        rep__lane_fini(&t->lane); /* the window's batches (rep__batch_release), reader, cursor */
    rep__open_free(&t->open);
    free(t->subject);
    free(t->dl_error);
}

/* ---- connecting ---------------------------------------------------------------- */

static void open_stream(rep_t *r, rep__topic_t *t)
{
    t->wait = NULL;
    t->acks_this_stream = 0;
    t->stream = rep__stream_open(r, t);
    set_state(r, t, REP_TOPIC_STREAMING);
    tb_debug("replicator: stream opened", REP__LOG_TOPIC(t), TB_S("url", t->chan->url),
             TB_U("from_offset", t->lane.win.acked + 1), TB_U("resending", t->lane.win.n));
    pump(r, t);
}

/* Lookup first if the broker is unknown; either way only on a READY channel. */
static void connect_topic(rep_t *r, rep__topic_t *t)
{
    rep__chan_t *need = t->chan ? t->chan : r->cluster;
    if (need->state != GRPC_CHANNEL_READY) {
        /* a reconnect that finds the cluster unreachable (a stream that
         * ended cleanly, then a refused connection) is an outage too; the
         * first connect at start is not */
        if (t->lane.st.stream_resets)
            output_down(t);
        t->wait = need;
        set_state(r, t, REP_TOPIC_CONNECTING);
        rep__chan_connect(r, need);
        return;
    }
    if (t->chan) {
        open_stream(r, t);
        return;
    }
    t->hops = 0;
    set_state(r, t, REP_TOPIC_LOOKUP);
    rep__lookup_start(r, t, NULL);
}

/*
 * memory_first (wal.h THE SPILL): the topic's stream is down (refused,
 * unavailable, no ack in time, lookup failed) or the cluster forgot the
 * topic, so no ack comes soon: what the log holds in memory is written to
 * it now rather than spill_after_ms later, and its publishers answered. A
 * no-op unless the topic is in memory. The WAL returns it to memory once
 * the log is acknowledged (no "up" needed).
 */
static void output_down(rep__topic_t *t)
{
    if (wal_topic_mode(t->lane.wal) == WAL_MODE_MEMORY)
        wal_topic_spill(t->lane.wal, WAL_SPILL_OUTPUT);
}

/* quiet: an idle stream the cluster closed cleanly is no outage: reopen
 * (with the backoff, so a peer that keeps doing it is not hammered) */
static void retry(rep_t *r, rep__topic_t *t, rep_retry_t why, const char *details, bool quiet)
{
    t->lane.st.retries[why]++;
    if (!quiet)
        output_down(t);
    bool refused = why == REP_RETRY_REFUSED;
    if (refused) { /* not an outage: the maximum at once, equal jitter (RELOAD.md 5.6) */
        t->backoff.attempt = 64;
        t->backoff.full_jitter = false;
    }
    uint32_t delay = rep__backoff_next(&t->backoff, &r->rng);
    t->backoff.full_jitter = true;
    if (!t->outage_logged && !quiet && !refused) { /* a refusal has its own line, once a minute */
        t->outage_logged = true;
        tb_warn("replication interrupted: retrying with backoff (logged once until it resumes)", REP__LOG_TOPIC(t),
                TB_S("reason", rep_retry_name(why)), TB_S("details", details ? details : ""),
                TB_U("acked_offset", t->lane.win.acked), TB_U("next_try_ms", delay));
    } else {
        tb_debug("replicator: retrying", REP__LOG_TOPIC(t), TB_S("reason", rep_retry_name(why)),
                 TB_S("details", details ? details : ""), TB_U("attempt", t->backoff.attempt), TB_U("delay_ms", delay));
    }
    set_state(r, t, REP_TOPIC_BACKOFF);
    rep__timer_arm(&r->timers, &t->retry_timer, tb_mono_ms() + delay);
}

void rep__topic_registered(rep_t *r, rep__topic_t *t)
{
    t->registered = true;
    t->lane.st.registered = true;
    if (!r->stopping && t->state == REP_TOPIC_UNREGISTERED)
        connect_topic(r, t);
    rep__topic_publish(r, t);
}

void rep__topic_unregistered(rep_t *r, rep__topic_t *t)
{
    t->registered = false;
    t->lane.st.registered = false;
    if (!r->stopping)
        output_down(t);
    switch (t->state) {
    case REP_TOPIC_STREAMING:
        rep__stream_cancel(t->stream, REP_RETRY_STATUS); /* its end leaves it UNREGISTERED */
        break;
    case REP_TOPIC_CONNECTING:
    case REP_TOPIC_BACKOFF:
        rep__timer_cancel(&r->timers, &t->retry_timer);
        t->wait = NULL;
        set_state(r, t, REP_TOPIC_UNREGISTERED);
        break;
    default: /* LOOKUP: its answer finds the topic unregistered */
        break;
    }
    rep__topic_publish(r, t);
}

void rep__topic_chan_ready(rep_t *r, rep__topic_t *t)
{
    if (t->state == REP_TOPIC_CONNECTING && !r->stopping)
        connect_topic(r, t);
}

void rep__topic_on_lookup(rep_t *r, rep__topic_t *t, rep__chan_t *chan, const char *why)
{
    t->lookup = NULL;
    if (r->stopping || t->released) {
        set_state(r, t, REP_TOPIC_STOPPED);
        return;
    }
    if (!t->registered) {
        set_state(r, t, REP_TOPIC_UNREGISTERED);
        return;
    }
    if (!chan) {
        retry(r, t, REP_RETRY_LOOKUP, why, false);
        return;
    }
    t->chan = chan;
    connect_topic(r, t);
}

void rep__topic_on_stream_end(rep_t *r, rep__topic_t *t, rep_retry_t why, grpc_status_code st, const char *details)
{
    rep__pace_leave(&r->out.pace, &t->lane.pace, tb_mono_ms()); /* no stream: nothing to grant it */
    /* which batch failed (RELOAD.md 5.3): the slow start sends one batch until the first ack, so a
     * stream that ends before any ack carried that one alone */
    rep__batch_t *alone = NULL;
    if (t->acks_this_stream == 0 && t->lane.win.sent == 1)
        for (uint32_t i = 0; i < t->lane.win.n && !alone; i++) {
            rep__batch_t *b = rep__window_at(&t->lane.win, i);
            if (b->state == REP__B_SENDING || b->state == REP__B_SENT)
                alone = b;
        }
    rep__window_rewind(&t->lane.win);
    rep__timer_cancel(&r->timers, &t->ack_timer);
    if (t->released) {
        set_state(r, t, REP_TOPIC_STOPPED);
        return;
    }
    if (r->stopping) {
        if (t->lane.win.n)
            tb_info("replicator: stream closed with batches unacknowledged; they are resent after restart",
                    REP__LOG_TOPIC(t), TB_U("batches", t->lane.win.n), TB_U("acked_offset", t->lane.win.acked));
        set_state(r, t, REP_TOPIC_STOPPED);
        return;
    }
    t->lane.st.stream_resets++;
    if (!t->registered) {
        output_down(t);
        set_state(r, t, REP_TOPIC_UNREGISTERED);
        return;
    }
    if (why == REP_RETRY_UNAVAILABLE)
        t->chan = NULL; /* the broker may have moved: look it up again */
    char text[300];
    snprintf(text, sizeof text, "%s%s%s", rep__status_name(st), details && *details ? ": " : "",
             details ? details : "");
    rep__class_t cls = why == REP_RETRY_STATUS ? rep__classify(st, alone ? alone->count : 0) : REP__CLASS_TRANSIENT;
    if (cls == REP__CLASS_PERMANENT) {
        why = REP_RETRY_PERMANENT;
        if (alone && alone->count)
            rep__poison_charge(r, t, alone, st, text); /* rep_poison.c */
    } else if (cls == REP__CLASS_CREDENTIALS || cls == REP__CLASS_UNIMPLEMENTED) {
        why = REP_RETRY_REFUSED;
        if (t->refused == REP_REFUSED_NONE) {
            t->refused = t->lane.st.refused =
                cls == REP__CLASS_CREDENTIALS ? REP_REFUSED_CREDENTIALS : REP_REFUSED_UNIMPLEMENTED;
            rep__refused_words(t->refused, rep__status_name(st), details, r->o.cluster_url, t->lane.st.problem,
                               sizeof t->lane.st.problem);
        }
        rep__refused_note(r, cls, st, details, "stream");
    }
    retry(r, t, why, text, st == GRPC_STATUS_OK && t->lane.win.n == 0);
}

/* ---- acks and sends ------------------------------------------------------------- */

/*
 * Pops the acknowledged batches at the head of the window and moves the
 * checkpoint over them: after an ack, and after a virtual batch (records
 * older than max_age, never sent, born ACKED) was pushed, so a virtual
 * batch at the head moves the checkpoint without an ack and one behind
 * unacknowledged batches waits for them. Their aged count goes to the WAL
 * with the checkpoint (wal_cursor_ack_ex: persisted in the same meta write).
 */
static void advance(rep_t *r, rep__topic_t *t)
{
    (void)r;
    rep__lane_acked(&t->lane); /* wal_cursor_ack_ex on its cursor, the exact counts, the publish */
}

void rep__topic_on_ack(rep_t *r, rep__topic_t *t, uint64_t acked_offset)
{
    rep__ack_t res = rep__window_ack(&t->lane.win, acked_offset);
    if (res == REP__ACK_UNKNOWN) {
        tb_debug("replicator: ack for no batch in flight (ignored)", REP__LOG_TOPIC(t), TB_U("acked_offset", acked_offset));
        return;
    }
    t->acks_this_stream++;
    rep__backoff_reset(&t->backoff);
    if (t->refused) {
        t->refused = t->lane.st.refused = REP_REFUSED_NONE;
        t->lane.st.problem[0] = '\0';
        rep__refused_note(r, REP__CLASS_TRANSIENT, GRPC_STATUS_OK, NULL, "stream");
    }
    if (t->outage_logged) {
        t->outage_logged = false;
        tb_info("replication resumed", REP__LOG_TOPIC(t), TB_U("acked_offset", acked_offset));
    }
    advance(r, t);
    arm_ack_timer(r, t);
    if (res == REP__ACK_OUT_OF_ORDER && t->stream) {
        rep__batch_t *gap = rep__window_oldest_unacked(&t->lane.win);
        tb_error("the cluster acknowledged a batch before an earlier one; the earlier batch may be lost upstream",
                 REP__LOG_TOPIC(t), TB_U("acked_offset", acked_offset), TB_U("unacked_first", gap ? gap->first : 0),
                 TB_U("unacked_last", gap ? gap->last : 0));
        rep__stream_cancel(t->stream, REP_RETRY_PROTOCOL);
    }
    pump(r, t);
    rep__topic_publish(r, t);
}

void rep__topic_on_sent(rep_t *r, rep__topic_t *t)
{
    for (uint32_t i = 0; i < t->lane.win.n; i++) {
        rep__batch_t *b = rep__window_at(&t->lane.win, i);
        if (b->state == REP__B_SENDING) {
            rep__window_mark_sent(&t->lane.win, b);
            break;
        }
    }
    pump(r, t);
}

/* ---- reading the log ------------------------------------------------------------- */

static void finish_open(rep_t *r, rep__topic_t *t)
{
    rep__batch_t *b = rep__window_push(&t->lane.win);
    rep__open_finish(&t->open, b);
    rep__timer_cancel(&r->timers, &t->batch_timer);
    if (b->state == REP__B_ACKED)
        advance(r, t); /* virtual (only records past max_age): moves the checkpoint unsent */
}

static bool open_due(rep_t *r, rep__topic_t *t, uint64_t now)
{
    if (t->open.aged)
        return true; /* nothing to wait for: a virtual batch closes as soon as a fill ends */
    return t->open.count && (rep__open_full(&t->open, &t->enc) || r->o.batch_timeout_ms == 0 ||
                             now >= t->open.started_ms + r->o.batch_timeout_ms);
}

/*
 * memory_first (wal.h MEMORY TIER): the log holds records in memory whose
 * publishers wait for the cluster's ack (or which spill to the log after
 * spill_after_ms), so a batch that reached the readable end goes now if the
 * window may send it, instead of waiting for batch_timeout_ms. With the
 * window full, records gather until an ack opens it: light load sends small
 * batches at once, heavy load fills them. The same while such a topic runs
 * in the log after a spill (DRAINING, READY): its way back to memory waits
 * for acks quicker than spill_after_ms / 2 (wal.h, rule (d)), which a batch
 * waiting out batch_timeout_ms could never give.
 */
static bool end_due(rep__topic_t *t)
{
    uint32_t may_send = t->acks_this_stream ? t->lane.win.cap : 1; /* pump's slow start */
    return t->open.count && t->state == REP_TOPIC_STREAMING && t->lane.win.sent < may_send &&
           (wal_topic_held(t->lane.wal) > 0 || wal_topic_mode(t->lane.wal) != WAL_MODE_LOG);
}

/* With wal.fsync interval the readable end moves without a completion. */
static void maybe_recheck(rep_t *r, rep__topic_t *t)
{
    if (!r->o.recheck_ms || rep__timer_armed(&t->read_timer))
        return;
    wal_topic_stats_t ws;
    wal_topic_stats(t->lane.wal, &ws);
    if (ws.next_offset > ws.readable_end)
        rep__timer_arm(&r->timers, &t->read_timer, tb_mono_ms() + r->o.recheck_ms);
}

static bool ensure_reader(rep_t *r, rep__topic_t *t)
{
    if (rep__lane_ensure_reader(&t->lane))
        return true;
    rep__timer_arm(&r->timers, &t->read_timer, tb_mono_ms() + 1000); /* logged by the lane */
    return false;
}

/* Reads records into the open batch. Returns true when a batch was closed. */
static bool read_more(rep_t *r, rep__topic_t *t)
{
    uint64_t now = tb_mono_ms();
    if (!ensure_reader(r, t))
        return false;
    if (open_due(r, t, now)) {
        finish_open(r, t);
        return true;
    }
    uint64_t gaps = t->lane.src.gaps, holes = t->lane.src.holes;
    int rc = rep__fill(&t->open, &t->enc, &t->lane.src, tb_wall_ms());
    rep__lane_note_gaps(&t->lane, gaps, holes);
    if (rc == 1 || (rc == 0 && (open_due(r, t, now) || end_due(t)))) {
        finish_open(r, t);
        return true;
    }
    if (t->open.count && !rep__timer_armed(&t->batch_timer))
        rep__timer_arm(&r->timers, &t->batch_timer, t->open.started_ms + r->o.batch_timeout_ms);
    if (rc == 0) {
        maybe_recheck(r, t);
        return false;
    }
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_error("replicator: reading the log failed; trying again in 1 s", REP__LOG_TOPIC(t), TB_ERR(rc),
                 TB_U("offset", wal_reader_offset(t->lane.src.rd)), TB_U("suppressed", skipped));
    rep__timer_arm(&r->timers, &t->read_timer, now + 1000);
    return false;
}

/*
 * max_age at send time for a batch built earlier (a stream ended and the
 * batch waits to be resent, its boundaries kept for the cluster's dedup):
 * when every one of its messages is older than max_age now, it becomes a
 * virtual batch (its messages counted as aged, never sent again) and the
 * checkpoint moves over it. A batch with any younger message is sent
 * whole: its boundaries cannot change. True when b was expired (b is then
 * no longer valid).
 */
static bool expire(rep_t *r, rep__topic_t *t, rep__batch_t *b)
{
    uint64_t now = tb_wall_ms();
    if (!t->enc.max_age_ms || !b->last_publish_ms || now <= b->last_publish_ms ||
        now - b->last_publish_ms <= t->enc.max_age_ms)
        return false;
    rep__batch_release(b);
    b->aged = b->count;
    b->aged_new = b->count_new;
    b->count = b->count_new = b->replayed = 0;
    b->len = 0;
    b->state = REP__B_ACKED;
    advance(r, t);
    return true;
}

/*
 * Pacing (rep_pace.c): with max_bytes_per_s or max_messages_per_s set, each
 * batch asks the output's buckets for its encoded bytes (the ReplicateBatch
 * as sent, resends included: the link carries them again) and its
 * StreamMessages before it is sent. Refused, the lane waits in its priority
 * class; the batch stays BUILT (reading goes on until the window is full)
 * and r->pace_timer fires when the pacer's head can go: rep__topic_paced
 * pumps the lanes it grants, highest priority first. Without caps every ask
 * is granted at once and nothing here waits.
 */
static void arm_pace_timer(rep_t *r, uint64_t now)
{
    uint64_t wait = rep__pace_wait(&r->out.pace, now);
    if (wait == UINT64_MAX)
        rep__timer_cancel(&r->timers, &r->pace_timer);
    else if (!rep__timer_armed(&r->pace_timer) || r->pace_timer.due > now + wait)
        rep__timer_arm(&r->timers, &r->pace_timer, now + wait);
}

static bool paced(rep_t *r, rep__topic_t *t, const rep__batch_t *b)
{
    if (!rep__pace_must_ask(&r->out.pace, &t->lane.pace))
        return true;
    uint64_t now = tb_mono_ms();
    uint32_t bytes = b->len > UINT32_MAX ? UINT32_MAX : (uint32_t)b->len;
    if (rep__pace_ask(&r->out.pace, &t->lane.pace, bytes, b->count, now))
        return true;
    arm_pace_timer(r, now);
    return false;
}

void rep__topic_rates_changed(rep_t *r)
{
    arm_pace_timer(r, tb_mono_ms()); /* the head's wait under the new rates (0 with them lifted) */
}

void rep__topic_paced(rep_t *r, rep__timer_t *tm)
{
    (void)tm;
    uint64_t now = tb_mono_ms();
    rep__pace_lane_t *pl;
    /* bounded: each grant is one waiting lane's unit, and a lane waits again only after its send */
    for (size_t n = 0; n <= r->ntopics && (pl = rep__pace_next(&r->out.pace, now, NULL)) != NULL; n++) {
        rep__topic_t *t = (rep__topic_t *)TB_CONTAINER_OF(pl, rep__lane_t, pace); /* the lane is first */
        pump(r, t);
    }
    arm_pace_timer(r, now);
}

static void pump(rep_t *r, rep__topic_t *t)
{
    if (t->released)
        return; /* a completion of its cancelled stream, or a timer armed before */
    rep__poison_retry(r, t);
    while (t->state == REP_TOPIC_STREAMING && t->stream) {
        uint32_t may_send = t->acks_this_stream ? t->lane.win.cap : 1; /* slow start */
        bool paused = rep__lane_paused(&t->lane); /* rep_pause.c: nothing new goes out */
        if (paused)
            output_down(t); /* memory_first: no ack comes soon, so what is held goes to the log */
        if (!paused && !rep__stream_send_busy(t->stream) && t->lane.win.sent < may_send) {
            rep__batch_t *b = rep__window_next_unsent(&t->lane.win);
            if (b && expire(r, t, b))
                continue; /* aged while it waited: the next one */
            if (b && !r->stopping && !paced(r, t, b))
                b = NULL; /* throttled: it waits for its grant (rep__topic_paced) */
            if (b) {
                if (b->sends)
                    t->lane.st.batches_resent++;
                else
                    t->lane.st.messages_replayed += b->replayed;
                rep__window_mark_sending(&t->lane.win, b, tb_mono_ms());
                t->lane.st.batches_sent++;
                rep__stream_send(t->stream, b);
                arm_ack_timer(r, t);
            }
        }
        if (r->stopping) {
            if (t->lane.win.sent == 0)
                rep__stream_close_send(t->stream);
            break;
        }
        if (paused || t->lane.win.n == t->lane.win.cap || !read_more(r, t))
            break;
    }
    rep__topic_publish(r, t);
}

void rep__topic_kicked(rep_t *r, rep__topic_t *t)
{
    rep__poison_answered(r, t);
    /* Nothing known to be waiting: caught up until now, so a stall (data
     * waiting, no ack progress) is measured from here, whether or not the
     * cluster is there. */
    bool idle = t->lane.win.n == 0 && rep__open_empty(&t->open) && !t->lane.src.has_held;
    if (idle)
        t->lane.progress_ms = tb_mono_ms();
    if (t->state == REP_TOPIC_STREAMING) {
        pump(r, t);
        return;
    }
    /* not sending: learn the oldest waiting message's age (it stays held for its batch) */
    const wal_record_t *rec;
    if (idle && !r->stopping && ensure_reader(r, t))
        (void)rep__src_peek(&t->lane.src, &rec);
    rep__topic_publish(r, t);
}

/* ---- stopping --------------------------------------------------------------------- */

void rep__topic_stop(rep_t *r, rep__topic_t *t)
{
    rep__timer_cancel(&r->timers, &t->batch_timer);
    rep__timer_cancel(&r->timers, &t->read_timer);
    rep__timer_cancel(&r->timers, &t->retry_timer);
    switch (t->state) {
    case REP_TOPIC_STREAMING:
        pump(r, t); /* closes the sending side now if nothing is in flight */
        break;
    case REP_TOPIC_LOOKUP:
        break; /* its cancelled call comes back through rep__topic_on_lookup */
    default:
        t->wait = NULL;
        set_state(r, t, REP_TOPIC_STOPPED);
        break;
    }
}

/* ---- released (a retired topic: RELOAD.md 4.3) ------------------------------------------ */

void rep__topic_release(rep_t *r, rep__topic_t *t)
{
    t->released = true;
    rep__timer_cancel(&r->timers, &t->batch_timer);
    rep__timer_cancel(&r->timers, &t->read_timer);
    rep__timer_cancel(&r->timers, &t->retry_timer);
    rep__timer_cancel(&r->timers, &t->ack_timer);
    t->wait = NULL;
    if (t->state == REP_TOPIC_STREAMING && t->stream)
        rep__stream_cancel(t->stream, REP_RETRY_STATUS); /* nothing in flight: its end leaves it STOPPED */
    else if (t->state != REP_TOPIC_LOOKUP) /* a lookup's answer finds it released */
        set_state(r, t, REP_TOPIC_STOPPED);
    for (size_t i = 0; i < r->ntopics; i++) {
        if (r->topics[i] != t)
            continue;
        memmove(&r->topics[i], &r->topics[i + 1], (r->ntopics - i - 1) * sizeof *r->topics);
        r->ntopics--;
        for (size_t k = i; k < r->ntopics; k++)
            r->topics[k]->idx = k;
        break;
    }
    if (!r->stopping)
        rep__reg_redeclare(r); /* the cluster's list of this edge's topics without it */
}

void rep__topic_grace_over(rep_t *r, rep__topic_t *t)
{
    (void)r;
    if (t->stream)
        rep__stream_cancel(t->stream, REP_RETRY_STATUS);
}
