/*
 * ingest.c: per-topic batches into the write-ahead log, and what happens
 * when the log says they are durable.
 *
 * Group commit, the gateway's half: a topic's messages gather in one open
 * batch (wal_batch_add copies each message once, already in its on-disk
 * layout) until mqtt.ingestion.batch_size messages, or
 * mqtt.ingestion.batch_timeout_ms after the batch's first message, or once
 * every client with a message in it has gone quiet; then the batch goes
 * to the WAL writer thread (one write; with wal.fsync always, batches
 * pending together share one fdatasync: the WAL's half).
 *
 * Why the idle flush: acks wait for the log, so a client whose window of
 * unacknowledged messages is full stops sending. If every client is in
 * that state with messages in a batch that is not full, nothing more will
 * arrive and the batch would wait out its whole timeout (measured: 7 such
 * stalls of 500 ms in a 5.7 s run of 100 QoS 1 publishers). A pause in
 * arrivals is the sign. How long a pause: mqtt.ingestion.idle_flush_ms
 * after a client's latest message, or twice its own usual gap for a
 * client that sends at a pace of its own (pace.c), so that clients between
 * two of their messages are not taken for clients waiting on us.
 * batch_quiet_ms is the latest of those moments over the batch's messages;
 * one timer per topic covers it and the timeout.
 * The writer's completions come back through a uv_async; every message's
 * pending ack is marked ready (or refused, if the write failed: nothing is
 * ever acknowledged that the log does not hold) and each affected
 * connection sends what is ready at the head of its FIFO.
 *
 * For the accounting invariant the loop counts what it holds itself:
 * `batched` (accepted, no completion yet) and `log_end` (one past the
 * highest offset the log confirmed), so the collector (run.c) can tell
 * the messages in its hands from those in the log without asking the
 * writer thread, whose offsets run ahead of the completions.
 *
 * on_full block: when a topic's log holds batches for room
 * (wal_topic_blocked), a connection that publishes to it is not read or
 * processed after that PUBLISH (broker__ingest_block: what it sent already
 * stays in its input buffer, within mqtt.max_partial_bytes), and waits in
 * the topic's waiters. The log turns unblocked before it posts the held
 * batches' completions, so after a batch of completions every topic that
 * has waiters and is no longer blocked wakes them (their input is
 * processed, their socket read again). Connections that publish only to
 * other topics are never paused, so a flood to a blocked topic stops at
 * one PUBLISH per flooding connection and cannot starve them.
 *
 * memory_first (wal.h MEMORY TIER; docs/WAL.md "The memory tier"): while
 * the topic's log holds in memory (MEMORY, or READY to), a batch is not a
 * write, so there is nothing to gather for: no timer and no pace; the open
 * batch is submitted at the end of the loop turn that filled it
 * (broker__ingest_turn, from the server's uv_check), the records are
 * readable at once, and the outputs are told then (broker_on_stored) rather
 * than at the completion, which for ack upstream comes only once the
 * cluster acknowledged the batch: so the PUBACK waits for the cluster
 * through the same completion path as a log write. When the topic spills,
 * its batches go to the log as any log topic's.
 *
 * A batch context keeps, per message with a pending ack, the connection
 * (one reference each) and the pending entry. A completed batch of an
 * upstream topic also tells whoever reads its log (broker_on_stored: the
 * replicator's rep_kick today, coalesced, one atomic exchange when it is
 * already awake), which reads the new records from the log itself.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

static void submit(broker_topic_t *t, metrics_batch_t why)
{
    broker_t *srv = t->srv;
    if (t == srv->journal) {
        /* A STORED record says "this QoS 2 message is in the log": the batch
         * holding the message goes to the writer first, which writes and
         * syncs a round's batches in the order they came. Otherwise a kill
         * between the two left a STORED with no message, and the client's
         * resend (DUP) was answered as a duplicate: the message lost. */
        for (size_t i = 0; i < srv->njdeps; i++) {
            srv->jdeps[i]->journal_dep = false;
            submit(srv->jdeps[i], METRICS_BATCH_FLUSH);
        }
        srv->njdeps = 0;
    }
    if (!t->batch)
        return;
    t->batches[why]++;
    uv_timer_stop(&t->timer);
    broker_batch_ctx_t *ctx = t->ctx;
    ctx->bytes = wal_batch_bytes(t->batch);
    broker__pending_add(t->srv, (int64_t)ctx->bytes);
    t->inflight++;
    wal_batch_t *b = t->batch;
    t->batch = NULL;
    t->ctx = NULL;
    uint64_t end = t->durability == CFG_DURABILITY_MEMORY_FIRST ? wal_topic_readable_end(t->wal) : 0;
    wal_submit(b, ctx);
    /* held: readable now, and its completion waits for the cluster (ack
     * upstream), so the outputs are told now (one coalesced kick) */
    if (end && wal_topic_readable_end(t->wal) != end && srv->on_stored && t->id != UINT32_MAX)
        srv->on_stored(srv->on_stored_arg, t->id);
}

/* The topic's log holds in memory: its batches are not writes. */
static bool holds_in_memory(const broker_topic_t *t)
{
    if (t->durability != CFG_DURABILITY_MEMORY_FIRST)
        return false;
    wal_mode_t mode = wal_topic_mode(t->wal);
    return mode == WAL_MODE_MEMORY || mode == WAL_MODE_READY;
}

void broker__ingest_turn(broker_t *srv)
{
    for (size_t i = 0; i < srv->nturn; i++) {
        broker_topic_t *t = srv->turn[i];
        t->turn_listed = false;
        submit(t, METRICS_BATCH_TURN);
    }
    srv->nturn = 0;
}

void broker__ingest_flush(broker_topic_t *t)
{
    submit(t, METRICS_BATCH_FLUSH);
}

static void timer_cb(uv_timer_t *h)
{
    broker_topic_t *t = h->data;
    const cfg_t *cfg = t->srv->cfg;
    uint64_t now = uv_now(t->srv->loop);
    uint64_t timeout_at = t->batch_first_ms + cfg->mqtt.ingestion.batch_timeout_ms;
    uint64_t idle_at = cfg->mqtt.ingestion.idle_flush_ms ? t->batch_quiet_ms : UINT64_MAX;
    if (now >= timeout_at)
        submit(t, METRICS_BATCH_TIMEOUT);
    else if (now >= idle_at)
        submit(t, METRICS_BATCH_IDLE);
    else
        uv_timer_start(&t->timer, timer_cb, TB_MIN(timeout_at, idle_at) - now, 0);
}

int broker__ingest(broker_topic_t *t, const broker_msg_t *m, broker_conn_t *c, broker_pending_t *p)
{
    if (wal_topic_state(t->wal) != WAL_TOPIC_OK) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("refusing messages: the topic's log cannot be written", TB_S("topic", t->name),
                    TB_S("error", tb_strerror(wal_topic_error(t->wal))), TB_U("suppressed", skipped));
        wal_topic_retry(t->wal);
        return TB_EFULL;
    }
    wal_msg_t wm = {
        .payload = m->payload, .payload_len = m->payload_len,
        .attrs = m->attrs, .nattrs = m->nattrs,
        .mqtt_topic = m->mqtt_topic, .mqtt_topic_len = m->mqtt_topic_len,
        .publish_time_ms = tb_wall_ms(),
        .qos = m->qos, .retain = m->retain,
        .has_schema = t->has_schema, .schema_id = t->schema_id, .schema_version = t->schema_version,
    };
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!t->batch) {
            t->batch = wal_batch_new(t->wal);
            t->ctx = tb_calloc(1, sizeof *t->ctx);
            t->ctx->t = t;
            if (t == t->srv->journal && t->srv->compacting) { /* a batch of the journal's snapshot */
                t->ctx->compaction = true;
                t->srv->compact_batches++;
            }
            const cfg_t *cfg = t->srv->cfg;
            uint32_t timeout = cfg->mqtt.ingestion.batch_timeout_ms;
            if (cfg->mqtt.ingestion.idle_flush_ms)
                timeout = TB_MIN(timeout, cfg->mqtt.ingestion.idle_flush_ms);
            t->batch_first_ms = uv_now(t->srv->loop);
            t->batch_quiet_ms = 0;
            if (holds_in_memory(t)) {
                broker_t *srv = t->srv; /* submitted at the end of this loop turn, not on a timer */
                if (!t->turn_listed) {
                    if (srv->nturn == srv->cap_turn) {
                        srv->cap_turn = srv->cap_turn ? srv->cap_turn * 2 : 8;
                        srv->turn = tb_realloc(srv->turn, srv->cap_turn * sizeof *srv->turn);
                    }
                    srv->turn[srv->nturn++] = t;
                    t->turn_listed = true;
                }
            } else {
                uv_timer_start(&t->timer, timer_cb, timeout, 0);
            }
        }
        int rc = wal_batch_add(t->batch, &wm);
        if (rc == TB_EFULL && attempt == 0) {
            submit(t, METRICS_BATCH_FULL); /* the batch reached its byte bound: start another */
            continue;
        }
        if (rc < 0)
            return rc;
        break;
    }
    /* A client that cannot send more (closing, or not read: its window is
     * at Receive Maximum, or backpressure) is not waited for its pace; nor
     * is anyone unless each batch is a sync (fsync always): otherwise a
     * batch is one write(2), and waiting would only delay the acks. */
    const cfg_t *cfg = t->srv->cfg;
    uint64_t now = uv_now(t->srv->loop);
    bool can_send = c && c->reading && !c->closing;
    uint32_t idle_max = cfg->wal.fsync == CFG_FSYNC_ALWAYS ? cfg->mqtt.ingestion.idle_flush_max_ms : 0;
    uint64_t quiet = broker__pace_quiet_ms(can_send ? &c->pace : NULL, now, cfg->mqtt.ingestion.idle_flush_ms, idle_max);
    t->batch_quiet_ms = TB_MAX(t->batch_quiet_ms, now + quiet);
    t->batched++;
    if (p && t == t->srv->journal && p->topic && p->topic->batch && !p->topic->journal_dep) {
        broker_t *srv = t->srv; /* this record speaks for a message still in p->topic's open batch */
        if (srv->njdeps == srv->cap_jdeps) {
            srv->cap_jdeps = srv->cap_jdeps ? srv->cap_jdeps * 2 : 8;
            srv->jdeps = tb_realloc(srv->jdeps, srv->cap_jdeps * sizeof *srv->jdeps);
        }
        srv->jdeps[srv->njdeps++] = p->topic;
        p->topic->journal_dep = true;
    }
    if (p && t != t->srv->journal)
        p->topic = t;
    if (p) {
        broker_batch_ctx_t *ctx = t->ctx;
        if (ctx->n == ctx->cap) {
            ctx->cap = ctx->cap ? ctx->cap * 2 : 16;
            ctx->p = tb_realloc(ctx->p, ctx->cap * sizeof *ctx->p);
        }
        ctx->p[ctx->n++] = p;
        p->waits++;
        c->refs++;
    }
    broker_dl_job_t *job = t->srv->dl_job;
    if (job && t == t->srv->dead_letter && t->ctx->job != job) {
        t->ctx->job = job; /* before the submit below: its completion must find it */
        job->waits++;
    }
    if (wal_batch_count(t->batch) >= t->srv->cfg->mqtt.ingestion.batch_size)
        submit(t, METRICS_BATCH_FULL);
    return 0;
}

/* The dead-letter attributes a poison record gains (broker_dead_letter_batch). */
#define DL_ATTRS 5

int broker_dead_letter_batch(broker_t *srv, const broker_dl_batch_t *d, void (*done)(void *arg, int rc), void *arg)
{
    broker_topic_t *dl = srv->dead_letter, *of = broker_topic(srv, d->topic);
    if (!dl)
        return TB_EUNSUPPORTED;
    if (!of)
        return TB_EINVALID;
    if (d->n == 0) {
        done(arg, 0); /* every record went to a disk bound meanwhile: nothing to keep */
        return 0;
    }
    submit(dl, METRICS_BATCH_FLUSH); /* its open batch is not ours: our batches hold only our records */
    broker_dl_job_t *job = tb_calloc(1, sizeof *job);
    *job = (broker_dl_job_t){ .of = of, .reason = d->reason, .done = done, .arg = arg };
    srv->dl_job = job;
    char attempts[16];
    snprintf(attempts, sizeof attempts, "%u", d->attempts);
    wal_attr_t attrs[BROKER_MAX_ATTRS];
    int rc = 0;
    for (size_t i = 0; i < d->n && rc == 0; i++) {
        const wal_record_t *rec = &d->recs[i];
        size_t n = 0, pos = 0;
        while (n < BROKER_MAX_ATTRS - DL_ATTRS && wal_record_attr_next(rec, &pos, &attrs[n]))
            n++;
        char off[24];
        snprintf(off, sizeof off, "%llu", (unsigned long long)rec->offset);
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"dead_letter.error", 17, (const uint8_t *)d->error, strlen(d->error) };
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"dead_letter.topic", 17, (const uint8_t *)of->name, strlen(of->name) };
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"dead_letter.offset", 18, (const uint8_t *)off, strlen(off) };
        const char *src = d->source ? d->source : "cluster";
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"dead_letter.source", 18, (const uint8_t *)src, strlen(src) };
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"dead_letter.attempts", 20, (const uint8_t *)attempts,
                                   strlen(attempts) };
        broker_msg_t msg = {
            .payload = rec->payload, .payload_len = rec->payload_len, .attrs = attrs, .nattrs = n,
            .mqtt_topic = rec->mqtt_topic, .mqtt_topic_len = rec->mqtt_topic_len, .qos = rec->qos, .retain = rec->retain,
        };
        rc = broker__ingest(dl, &msg, NULL, NULL);
    }
    submit(dl, METRICS_BATCH_FLUSH);
    srv->dl_job = NULL;
    job->submitted = true;
    if (rc < 0 && !job->rc)
        job->rc = rc;
    if (job->waits == 0) { /* nothing reached the writer: answer now */
        rc = job->rc;
        free(job);
        return rc < 0 ? rc : TB_EINVALID;
    }
    return 0; /* the last completion calls done (with the first failure, if any) */
}

static void dl_job_done(broker_dl_job_t *job, const wal_completion_t *done)
{
    if (done->rc != 0 && !job->rc)
        job->rc = done->rc;
    else if (done->rc == 0)
        job->count += done->count;
    if (--job->waits || !job->submitted)
        return;
    if (!job->rc)
        job->of->dead_letters[job->reason] += job->count;
    job->done(job->arg, job->rc);
    free(job);
}

void broker__ingest_block(broker_topic_t *t, broker_conn_t *c)
{
    if (c->blocked || c->closing)
        return;
    if (t->nwaiters == t->cap_waiters) {
        t->cap_waiters = t->cap_waiters ? t->cap_waiters * 2 : 8;
        t->waiters = tb_realloc(t->waiters, t->cap_waiters * sizeof *t->waiters);
    }
    t->waiters[t->nwaiters++] = c;
    t->blocked_pauses++;
    c->blocked = true;
    broker__conn_pause(c);
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_info("the topic's log is full (on_full: block): not reading its publishers until there is room",
                TB_S("topic", t->name), TB_S("client", c->client_id ? c->client_id : ""),
                TB_U("waiting", t->nwaiters), TB_U("suppressed", skipped));
}

static void forget_in(broker_topic_t *t, broker_conn_t *c)
{
    for (uint32_t i = 0; i < t->nwaiters; i++)
        if (t->waiters[i] == c) {
            t->waiters[i] = t->waiters[--t->nwaiters];
            return;
        }
}

void broker__ingest_forget(broker_conn_t *c)
{
    broker_t *srv = c->srv;
    for (size_t i = 0; i < srv->ntopics; i++)
        forget_in(srv->topics[i], c);
    c->blocked = false;
}

/* t's log has room again: its waiters are processed and read again. A
 * waiter may publish to t again at once and wait anew (the array is taken
 * first). */
static void wake(broker_topic_t *t)
{
    broker_conn_t **w = t->waiters;
    uint32_t n = t->nwaiters;
    t->waiters = NULL;
    t->nwaiters = t->cap_waiters = 0;
    for (uint32_t i = 0; i < n; i++) {
        w[i]->blocked = false;
        w[i]->refs++; /* one waiter's input must not free another */
    }
    for (uint32_t i = 0; i < n; i++) {
        broker_conn_t *c = w[i];
        if (!c->closing && !c->blocked)
            broker__conn_input_resume(c);
    }
    for (uint32_t i = 0; i < n; i++)
        broker__conn_unref(w[i]);
    free(w);
}

void broker__ingest_completions(broker_t *srv)
{
    for (wal_batch_t *b = wal_take_done(srv->wal), *next; b; b = next) {
        next = wal_batch_next(b);
        const wal_completion_t *done = wal_batch_completion(b);
        broker_batch_ctx_t *ctx = done->user;
        broker_topic_t *t = ctx->t;
        t->inflight--;
        t->batched -= wal_batch_count(b);
        if (done->rc == 0) {
            t->stored += done->count;
            if (done->count)
                t->log_end = TB_MAX(t->log_end, done->first_offset + done->count);
            if (srv->on_stored && t->id != UINT32_MAX)
                srv->on_stored(srv->on_stored_arg, t->id); /* new records are readable: wake the outputs */
        } else if (t == srv->dead_letter) {
            tb_error("dead-letter log write failed: refused payloads not kept", TB_ERR(done->rc));
        } else if (done->refused_at_bound) {
            /* a bound, not a broken disk: the log says which bound (wal/overflow.c) */
            t->rejected[BROKER_REJ_FULL] += wal_batch_count(b);
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
            uint64_t skipped;
            if (tb_ratelimit(&rl, &skipped))
                tb_warn("a disk bound refuses messages: none acknowledged (MQTT 5 0x97; 3.1.1 QoS 1/2 closed)",
                        TB_S("topic", t->name), TB_U("messages", wal_batch_count(b)),
                        TB_S("on_full", wal_overflow_name(wal_topic_overflow(t->wal))), TB_U("suppressed", skipped));
        } else if (done->rc == TB_ECLOSED && srv->draining && t->on_full == CFG_ON_FULL_BLOCK) {
            /* broker_drain gave up waiting for room: never written, never acknowledged */
            t->rejected[BROKER_REJ_QUOTA] += wal_batch_count(b);
            tb_info("shutting down: messages waiting for room (on_full: block) not taken, none acknowledged "
                    "(QoS 1/2 are resent by their clients)",
                    TB_S("topic", t->name), TB_U("messages", wal_batch_count(b)));
        } else {
            t->rejected[BROKER_REJ_QUOTA] += wal_batch_count(b);
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
            uint64_t skipped;
            if (tb_ratelimit(&rl, &skipped))
                tb_error("log write failed: messages refused, none acknowledged", TB_S("topic", t->name),
                         TB_U("messages", wal_batch_count(b)), TB_ERR(done->rc), TB_U("suppressed", skipped));
        }
        for (uint32_t i = 0; i < ctx->n; i++) {
            broker_pending_t *p = ctx->p[i];
            broker_conn_t *c = p->conn;
            if (done->rc != 0) {
                /* not stored (or, for the dead-letter log, not kept): never say it was */
                broker__refuse(c, p, done->refused_at_bound ? BROKER_REFUSE_QUOTA : BROKER_REFUSE_LOG_UNAVAILABLE);
                p->qos2_record = false;
            }
            if (p->stored_deferred) {
                /* memory_first QoS 2: the message is in the cluster (or the log) now */
                p->stored_deferred = false;
                if (done->rc == 0 && p->qos2_record && p->session) {
                    /* the runtime journal when it is on (written at once), else the session journal
                     * (p->waits++) */
                    p->stored_rt = broker__journal_qos2(srv, p->session, p->packet_id, true, p, true);
                    p->stored_journaled = true;
                }
            }
            p->waits--;
            broker__conn_drain_acks(c);
            broker__conn_unref(c);
        }
        if (t == srv->journal) {
            srv->journal_done += wal_batch_count(b); /* in order: OPENs before them are in (journal.c) */
            bool full = done->rc == TB_EFULL;
            if (full && !srv->journal_full)
                tb_warn("session journal full (mqtt.max_journal_bytes): new persistent sessions are refused until "
                        "compaction makes room", TB_U("max_journal_bytes", srv->cfg->mqtt.max_journal_bytes));
            if (!full && done->rc == 0 && srv->journal_full)
                tb_info("session journal has room again");
            if (full || done->rc == 0)
                srv->journal_full = full;
            if (ctx->compaction)
                broker__journal_compacted(srv, done->rc, done->first_offset);
            else
                broker__journal_maybe_compact(srv); /* it grows: compact as soon as it pays */
        }
        if (ctx->job)
            dl_job_done(ctx->job, done);
        broker__pending_add(srv, -(int64_t)ctx->bytes);
        free(ctx->p);
        free(ctx);
        wal_batch_free(b);
    }
    for (size_t i = 0; i < srv->ntopics; i++) {
        broker_topic_t *t = srv->topics[i];
        if (t->nwaiters && !wal_topic_blocked(t->wal))
            wake(t);
    }
}
