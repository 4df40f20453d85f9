/*
 * collect.c: what /metrics, /stats and /readyz report about the running
 * process. The collector copies, at each scrape, the broker's counters, the
 * log's stats and the replicator's into the registry (metrics/); the
 * provider answers readiness, each topic's state and the cluster's state.
 * Each value is read where it is kept (the loop's counters, the WAL's
 * atomics, the replicator's snapshot), never derived from another.
 */
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void readiness(void *arg, http_readiness_t *out)
{
    gw__run_t *r = arg;
    broker_stats_t bs = { 0 };
    /* only while the log is open: between the log's close and the broker's
     * (the drain) its topics' logs are freed, and a probe or the page's
     * 5 s sample asking then must not read them (not listening: not ready) */
    if (r->broker && r->topics_open)
        broker_stats(r->broker, &bs);
    out->bootstrap_done = r->booted;
    out->mqtt_listening = bs.listening;
    out->wal_writable = r->topics_open;
    for (size_t i = 0; out->wal_writable && i < broker_ntopics(r->broker); i++)
        if (broker_topic(r->broker, i)->life != BROKER_LIFE_RETIRED && /* its log is gone (retire.c) */
            wal_topic_state(broker_topic(r->broker, i)->wal) != WAL_TOPIC_OK)
            out->wal_writable = false;
    out->draining = r->app->stopping;
    out->quiesced = r->drain != 0; /* POST /admin/drain: the pod leaves its Service */
}

static http_topic_state_t topic_state(void *arg, size_t mi)
{
    gw__run_t *r = arg;
    if (!r->topics_open)
        return HTTP_TOPIC_UNKNOWN;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        if (r->metric_topic[i] != (int)mi)
            continue;
        switch (broker_topic(r->broker, i)->life) { /* a reload removed its mapping (retire.c) */
        case BROKER_LIFE_RETIRED:
            return HTTP_TOPIC_RETIRED;
        case BROKER_LIFE_KEPT:
            return HTTP_TOPIC_KEPT;
        case BROKER_LIFE_RETIRING:
        case BROKER_LIFE_REMOVING:
            return HTTP_TOPIC_RETIRING;
        default:
            break;
        }
        if (wal_topic_state(broker_topic(r->broker, i)->wal) != WAL_TOPIC_OK)
            return HTTP_TOPIC_FAILED;
        if (!gw_repl_engine(r->repl))
            return HTTP_TOPIC_IDLE;
        rep_topic_stats_t st;
        gw_repl_topic_stats(r->repl, i, &st);
        if (st.paused)
            return HTTP_TOPIC_PAUSED; /* never stalled: held on purpose */
        if (st.stalled)
            return HTTP_TOPIC_STALLED;
        if (st.lag_messages == 0)
            return HTTP_TOPIC_IDLE;
        bool behind = st.oldest_unacked_ms && tb_wall_ms() > st.oldest_unacked_ms + r->app->cfg->replicator.live_window_ms;
        return behind ? HTTP_TOPIC_CATCHING_UP : HTTP_TOPIC_REPLICATING;
    }
    return HTTP_TOPIC_UNKNOWN;
}

static http_cluster_state_t cluster_state(void *arg)
{
    rep_engine_t *rep = gw_repl_engine(((gw__run_t *)arg)->repl);
    if (!rep || !rep_engine_has_danube(rep))
        return HTTP_CLUSTER_UNKNOWN; /* no Danube output: outputs[] says how the others are */
    rep_stats_t st;
    rep_engine_stats(rep, &st); /* the Danube output's cluster */
    switch (st.cluster) {
    case REP_CLUSTER_CONNECTED: return HTTP_CLUSTER_CONNECTED;
    case REP_CLUSTER_UNREACHABLE: return HTTP_CLUSTER_UNREACHABLE;
    default: return HTTP_CLUSTER_CONNECTING;
    }
}

static bool cluster_problem(void *arg, char *buf, size_t len)
{
    rep_engine_t *rep = gw_repl_engine(((gw__run_t *)arg)->repl);
    if (!rep)
        return false;
    rep_stats_t st;
    rep_engine_stats(rep, &st);
    if (st.refused == REP_REFUSED_NONE)
        return false;
    char since[40] = "?";
    time_t secs = (time_t)(st.refused_since_ms / 1000);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(buf, len, "%s since %s", st.refused_words, since);
    return true;
}

/* mi: the metrics label index (as topic_state's), mapped to the broker's topic id */
static bool topic_problem(void *arg, size_t mi, char *buf, size_t len)
{
    gw__run_t *r = arg;
    if (!r->topics_open)
        return false;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        if (r->metric_topic[i] != (int)mi)
            continue;
        rep_topic_stats_t st;
        gw_repl_topic_stats(r->repl, i, &st);
        if (!st.problem[0])
            return false;
        snprintf(buf, len, "%s", st.problem);
        return true;
    }
    return false;
}

/* broker_reject_t (publish.c) -> the metrics' reason label (unmatched has no topic) */
static const int reject_label[BROKER_REJ__COUNT] = {
    [BROKER_REJ_UNMATCHED] = -1,
    [BROKER_REJ_INVALID] = METRICS_REJECT_SCHEMA_INVALID,
    [BROKER_REJ_NOT_READY] = METRICS_REJECT_SCHEMA_UNAVAILABLE,
    [BROKER_REJ_TOO_LARGE] = METRICS_REJECT_PAYLOAD_TOO_LARGE,
    [BROKER_REJ_QUOTA] = METRICS_REJECT_WAL_UNAVAILABLE,
    [BROKER_REJ_FULL] = METRICS_REJECT_FULL,
};

#define SET(id, i1, i2, v) metrics_set(metrics_fam(m, (id)), (i1), (i2), (int64_t)(v))

/*
 * The accounting invariant's terms for one topic, each from where it is
 * measured (docs/OPERATIONS.md, "The accounting invariant"):
 *   received, rejected  the loop's router counters (publish.c, ingest.c)
 *   replicated          the replicator's acks of offsets this process wrote,
 *                       still in the log when acked (rep_topic.c)
 *   dropped             by reason: the WAL's count of such offsets deleted
 *                       before an ack (bound; of them, spill: answered ones a
 *                       refused spill lost, memory.c), and the replicator's
 *                       of those it skipped for max_age (age; the checkpoint
 *                       passed them: rep_topic.c advance)
 *   queued              what is still somewhere: in the loop's batches
 *                       (`batched`), plus the offsets the log confirmed to the
 *                       loop ([S, log_end)) that are neither acked (<= A) nor
 *                       deleted (< drop floor F); for a topic retired by
 *                       the admin API's forget, those are dropped (reason
 *                       forgotten) instead: its log is gone
 * S is the log's first offset of this process. The log term is signed on
 * purpose: when an ack overtakes a completion the loop has not taken yet,
 * those messages are both `batched` and replicated for a moment, and the
 * negative term takes them out again, so the sum stays exact.
 */
static void account(metrics_t *m, size_t mi, const broker_topic_t *t, const wal_topic_stats_t *st,
                    const rep_topic_stats_t *rs, bool forgotten)
{
    for (int k = 0; k < BROKER_REJ__COUNT; k++)
        if (reject_label[k] >= 0)
            SET(METRICS_REJECTED, mi, (size_t)reject_label[k], t->rejected[k]);
    uint64_t S = st->open_offset ? st->open_offset : 1;
    uint64_t end = t->log_end ? t->log_end : S;
    /* the replicator's acked offset comes with its counts, from one snapshot;
     * before it has started, nothing of this process is acked */
    uint64_t A = rs->start_offset ? rs->acked_offset : st->checkpoint;
    uint64_t from = TB_MAX(TB_MAX(S, A + 1), st->drop_floor);
    int64_t in_log = (int64_t)end - (int64_t)from;
    SET(METRICS_RECEIVED, mi, 0, t->received);
    SET(METRICS_STORED, mi, 0, t->stored);
    SET(METRICS_REPLICATED, mi, 0, rs->messages_acked_new);
    /* the WAL's drops since open include a refused spill's losses; they are split out by cause */
    uint64_t spill_lost = TB_MIN(st->spill_lost_since_open, st->dropped_since_open);
    SET(METRICS_DROPPED, mi, METRICS_DROP_BOUND, st->dropped_since_open - spill_lost);
    SET(METRICS_DROPPED, mi, METRICS_DROP_SPILL, spill_lost);
    SET(METRICS_DROPPED, mi, METRICS_DROP_AGE, rs->messages_dropped_age_new);
    SET(METRICS_DROPPED, mi, METRICS_DROP_FORGOTTEN, forgotten && in_log > 0 ? in_log : 0);
    if (forgotten)
        in_log = 0;
    SET(METRICS_DROPPED_IN_FLIGHT, mi, 0, rs->messages_acked_dropped);
    SET(METRICS_DROPPED_AGE, mi, 0, rs->messages_dropped_age_new);
    SET(METRICS_DEAD_LETTERED, mi, 0, rs->messages_dead_lettered_new);
    for (size_t k = 0; k < METRICS_DL__COUNT; k++)
        SET(METRICS_DEAD_LETTERS, mi, k, t->dead_letters[k]);
    SET(METRICS_QUEUED, mi, 0, (int64_t)t->batched + in_log);
}

/* The outputs a reload added (rep_engine_add_output appends them) get their label: the name's
 * own when it ran before (a replaced or re-added output keeps its series). */
static void sync_outputs(gw__run_t *r, rep_engine_t *rep)
{
    while (r->nmetric_outputs < rep_engine_noutputs(rep) && r->nmetric_outputs < TB_ARRAY_LEN(r->metric_output)) {
        rep_output_info_t info;
        rep_output_info(rep, r->nmetric_outputs, &info);
        r->metric_output[r->nmetric_outputs++] = metrics_output_add(r->metrics, info.name);
    }
}

/* Per output and per (output, topic) (issue 17): the engine's output and lane snapshots. Output o
 * is outputs[o] at the start, then the outputs a reload added, in that order (sync_outputs); one
 * a reload removed is left out (its label shows the instance that replaced it, or its last values). */
static void collect_outputs(gw__run_t *r, metrics_t *m, rep_engine_t *rep)
{
    uint64_t now_ms = tb_wall_ms();
    sync_outputs(r, rep);
    size_t no = TB_MIN(rep_engine_noutputs(rep), r->nmetric_outputs);
    for (size_t o = 0; o < no; o++) {
        if (r->metric_output[o] < 0 || rep_output_removed(rep, o))
            continue;
        size_t mo = (size_t)r->metric_output[o];
        rep_output_stats_t os;
        rep_output_stats(rep, o, &os);
        SET(METRICS_OUTPUT_UP, mo, 0, os.up);
        int si = metrics_output_state_index(os.state);
        for (size_t k = 0; k < METRICS_OUTPUT_STATE__COUNT; k++)
            SET(METRICS_OUTPUT_STATE, mo, k, (int)k == si);
        SET(METRICS_OUTPUT_ATTEMPTS, mo, 0, os.attempts);
        SET(METRICS_OUTPUT_SESSIONS, mo, 0, os.sessions);
        SET(METRICS_OUTPUT_REFUSALS, mo, 0, os.refusals);
        SET(METRICS_OUTPUT_FAILURES, mo, 0, os.failures);
        SET(METRICS_OUTPUT_INFLIGHT, mo, 0, os.inflight);
        SET(METRICS_OUTPUT_DEAD_LETTERS, mo, 0, os.dead_letters);
        for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
            if (r->metric_topic[i] < 0 || !rep_output_carries(rep, o, i))
                continue;
            size_t mi = (size_t)r->metric_topic[i];
            rep_topic_stats_t ls;
            rep_lane_stats(rep, o, i, &ls);
            SET(METRICS_OUTPUT_REPLICATED, mo, mi, ls.messages_acked_new);
            SET(METRICS_OUTPUT_ACKED, mo, mi, ls.messages_acked);
            SET(METRICS_OUTPUT_ACKED_OFFSET, mo, mi, ls.acked_offset);
            SET(METRICS_OUTPUT_LAG_MESSAGES, mo, mi, ls.lag_messages);
            SET(METRICS_OUTPUT_LAG_BYTES, mo, mi, ls.lag_bytes);
            SET(METRICS_OUTPUT_OLDEST_AGE, mo, mi,
                ls.oldest_unacked_ms && now_ms > ls.oldest_unacked_ms ? now_ms - ls.oldest_unacked_ms : 0);
            SET(METRICS_OUTPUT_SENT, mo, mi, ls.batches_sent);
            SET(METRICS_OUTPUT_RESENT, mo, mi, ls.batches_resent);
            SET(METRICS_OUTPUT_DROPPED, mo, mi, ls.slot_dropped);
            SET(METRICS_OUTPUT_DROPPED_IN_FLIGHT, mo, mi, ls.messages_acked_dropped);
        }
    }
}

/* Copies the loop's counters, the WAL's and the replicator's stats into the registry, at scrape
 * time. */
void gw__collect(void *arg, metrics_t *m)
{
    gw__run_t *r = arg;
    SET(METRICS_CONFIG_FILE_VALID, 0, 0, !r->reload || r->reload->file_valid); /* RELOAD.md 3.3 */
    if (!r->topics_open)
        return;
    broker_stats_t bs;
    broker_stats(r->broker, &bs);
    SET(METRICS_MQTT_CONNECTIONS, 0, 0, bs.connections);
    SET(METRICS_MQTT_ACCEPTED, 0, 0, bs.accepted);
    for (size_t k = 0; k < METRICS_REFUSE__COUNT; k++)
        SET(METRICS_MQTT_REFUSED, k, 0, bs.refused[k]);
    for (size_t k = 0; k < METRICS_CLOSE__COUNT; k++)
        SET(METRICS_MQTT_CLOSED, k, 0, bs.closed[k]);
    SET(METRICS_UNMATCHED, 0, 0, bs.unmatched);
    for (size_t i = 0; i < r->nmetric_listeners; i++) {
        if (r->metric_listener[i] < 0)
            continue;
        broker_listener_stats_t ls;
        broker_listener_stats(r->broker, i, &ls);
        SET(METRICS_PUBLISH_DENIED, (size_t)r->metric_listener[i], 0, ls.publish_denied);
        SET(METRICS_MQTT_LISTENER_CONNECTIONS, (size_t)r->metric_listener[i], 0, ls.connections);
        SET(METRICS_TLS_READ_PAUSES, (size_t)r->metric_listener[i], 0, ls.tls_read_pauses);
    }
    SET(METRICS_SESSIONS_PERSISTENT, 0, 0, bs.sessions_persistent);
    SET(METRICS_SESSIONS_REMEMBERED, 0, 0, bs.sessions_remembered);
    SET(METRICS_WILLS_PENDING, 0, 0, bs.wills_pending);
    SET(METRICS_JOURNAL_BYTES, 0, 0, bs.journal_bytes);
    SET(METRICS_WILL_BYTES, 0, 0, bs.will_bytes);
    rep_engine_t *rep = gw_repl_engine(r->repl);
    if (rep) {
        rep_stats_t cs;
        rep_engine_stats(rep, &cs);
        SET(METRICS_CLUSTER_UP, 0, 0, cs.cluster == REP_CLUSTER_CONNECTED && cs.registration == REP_REG_REGISTERED);
        SET(METRICS_CLUSTER_REFUSED, 0, 0, cs.refused != REP_REFUSED_NONE);
    }
    metrics_labels_t *retry = metrics_family_label(metrics_fam(m, METRICS_RETRIES), 1);
    uint64_t now_ms = tb_wall_ms();
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        if (r->metric_topic[i] < 0)
            continue;
        size_t mi = (size_t)r->metric_topic[i];
        broker_topic_t *t = broker_topic(r->broker, i);
        wal_topic_stats_t st;
        wal_topic_stats(t->wal, &st);
        rep_topic_stats_t rs;
        gw_repl_topic_stats(r->repl, i, &rs);
        account(m, mi, t, &st, &rs, t->life == BROKER_LIFE_RETIRED && gw_repl_topic_forgot(r->repl, i));
        SET(METRICS_WAL_DROPPED, mi, 0, st.dropped_total);
        SET(METRICS_WAL_LOST, mi, 0, st.lost_total);
        SET(METRICS_WAL_DROPPED_AGE, mi, 0, st.dropped_age_total);
        SET(METRICS_WAL_WRITE_ERRORS, mi, 0, st.write_errors);
        for (size_t k = 0; k < METRICS_BATCH__COUNT; k++)
            SET(METRICS_WAL_BATCHES, mi, k, t->batches[k]);
        SET(METRICS_WAL_BYTES, mi, 0, st.bytes);
        SET(METRICS_WAL_SEGMENTS, mi, 0, st.segments);
        SET(METRICS_WAL_OLDEST_OFFSET, mi, 0, st.oldest_offset);
        SET(METRICS_WAL_NEWEST_OFFSET, mi, 0, st.next_offset > 0 ? st.next_offset - 1 : 0);
        SET(METRICS_ACKED_OFFSET, mi, 0, st.checkpoint);
        /* the records stored (in the log or held) after the acked offset: not the offsets that
         * hold none (deleted by a bound, a reservation skipped after a kill: wal.h) */
        SET(METRICS_LAG_MESSAGES, mi, 0, wal_topic_stored_between(t->wal, st.checkpoint, st.next_offset));
        SET(METRICS_LAG_BYTES, mi, 0, rs.lag_bytes);
        SET(METRICS_OLDEST_UNREPLICATED_AGE, mi, 0,
            rs.oldest_unacked_ms && now_ms > rs.oldest_unacked_ms ? now_ms - rs.oldest_unacked_ms : 0);
        SET(METRICS_TOPIC_STALLED, mi, 0, rs.stalled);
        SET(METRICS_TOPIC_PAUSED, mi, 0, rs.paused);
        SET(METRICS_TOPIC_BLOCKED, mi, 0, wal_topic_blocked(t->wal));
        SET(METRICS_BLOCKED_PAUSES, mi, 0, t->blocked_pauses);
        SET(METRICS_NO_PROGRESS, mi, 0, rs.no_progress_ms);
        SET(METRICS_BATCHES_IN_FLIGHT, mi, 0, rs.batches_in_flight);
        SET(METRICS_BATCHES_SENT, mi, 0, rs.batches_sent);
        SET(METRICS_BATCHES_RESENT, mi, 0, rs.batches_resent);
        SET(METRICS_STREAM_RESETS, mi, 0, rs.stream_resets);
        SET(METRICS_THROTTLED, mi, 0, rs.throttled_ms);
        /* memory_first (wal.h MEMORY TIER): the mode, what is held, the switches */
        _Static_assert(METRICS_MODE__COUNT == WAL_MODE_READY + 1, "metrics_modes follows wal_mode_t");
        _Static_assert(METRICS_SPILL__COUNT == WAL_SPILL__COUNT, "metrics_spill_reasons follows wal_spill_t");
        for (size_t k = 0; k < METRICS_MODE__COUNT; k++)
            SET(METRICS_TOPIC_MODE, mi, k, (size_t)st.mode == k);
        SET(METRICS_MEMORY_HELD, mi, 0, st.held_msgs);
        SET(METRICS_MEMORY_HELD_BYTES, mi, 0, st.held_bytes);
        for (size_t k = 0; k < METRICS_SPILL__COUNT; k++)
            SET(METRICS_SPILLS, mi, k, st.spills[k]);
        SET(METRICS_TO_MEMORY, mi, 0, st.to_memory);
        for (int k = 0; k < REP_RETRY__COUNT; k++) {
            int li = metrics_labels_find(retry, rep_retry_name((rep_retry_t)k));
            if (li >= 0)
                SET(METRICS_RETRIES, mi, (size_t)li, rs.retries[k]);
        }
    }
    if (rep)
        collect_outputs(r, m, rep);
    gw__retire_counts_t rc;
    gw_repl_retire_counts(r->repl, &rc);
    SET(METRICS_TOPICS_RETIRED, 0, 0, rc.retired + rc.kept);
    SET(METRICS_TOPICS_RETIRING, 0, 0, rc.retiring);
    wal_topic_t *dl = r->broker ? broker_dead_letter_log(r->broker) : NULL;
    if (dl) {
        wal_topic_stats_t ds;
        wal_topic_stats(dl, &ds);
        SET(METRICS_DL_LOG_DROPPED, 0, 0, ds.dropped_total);
    }
    if (r->wal) {
        wal_space_t sp;
        wal_space(r->wal, &sp);
        if (sp.known) {
            SET(METRICS_WAL_FREE_BYTES, 0, 0, sp.free_bytes);
            SET(METRICS_WAL_MIN_FREE, 0, 0, sp.min_free_bytes);
        }
        wal_stats_t ws;
        wal_stats(r->wal, &ws);
        for (size_t c = 0; c < WAL_CAUSE__COUNT && c < METRICS_WAL_CAUSE__COUNT; c++) {
            SET(METRICS_WAL_WRITTEN_BYTES, c, 0, ws.bytes[c]);
            SET(METRICS_WAL_WRITES, c, 0, ws.writes[c]);
            SET(METRICS_WAL_SYNCS, c, 0, ws.syncs[c]);
        }
        wal_fsync_hist_t h;
        wal_fsync_hist(r->wal, &h);
        metrics_family_t *f = metrics_fam(m, METRICS_WAL_FSYNC_SECONDS);
        metrics_hist_view_t view;
        if (f && metrics_hist_get(f, 0, 0, &view) == 0) {
            /* the WAL's log2-microsecond buckets, re-observed as nanoseconds at
             * each bucket's upper bound: only the new samples since last time */
            for (int b = 0; b < WAL_FSYNC_HIST_BUCKETS; b++) {
                uint64_t upper_ns = (2ull << b) * 1000u;
                for (; r->fsync_seen[b] < h.buckets[b]; r->fsync_seen[b]++)
                    metrics_observe(f, 0, 0, upper_ns);
            }
        }
    }
}

static bool listener_tls(void *arg, size_t label)
{
    gw__run_t *r = arg;
    for (size_t i = 0; i < r->nmetric_listeners; i++) {
        if (r->metric_listener[i] == (int)label) {
            broker_listener_stats_t ls;
            broker_listener_stats(r->broker, i, &ls);
            return ls.tls;
        }
    }
    return false;
}

static size_t top_talkers(void *arg, http_talker_t *out, size_t n, double *window_s)
{
    gw__run_t *r = arg;
    *window_s = 0;
    if (!r->broker)
        return 0;
    broker_talker_t top[BROKER_TOP_TALKERS];
    size_t k = broker_top_talkers(r->broker, tb_mono_ms(), top, TB_MIN(n, (size_t)BROKER_TOP_TALKERS), window_s);
    for (size_t i = 0; i < k; i++) {
        _Static_assert(sizeof out[i].client_id == sizeof top[i].client_id, "one client id size");
        memcpy(out[i].client_id, top[i].client_id, sizeof out[i].client_id); /* NUL-terminated */
        out[i].messages_per_second = top[i].messages_per_second;
    }
    return k;
}

/* The engine's output behind a label: the running instance of the name, else the last one removed. */
static int output_of_label(gw__run_t *r, size_t label)
{
    rep_engine_t *rep = gw_repl_engine(r->repl);
    if (rep)
        sync_outputs(r, rep);
    int last = -1;
    for (size_t o = 0; o < r->nmetric_outputs; o++)
        if (r->metric_output[o] == (int)label) {
            if (!rep || !rep_output_removed(rep, o))
                return (int)o;
            last = (int)o;
        }
    return last;
}

static bool output_info(void *arg, size_t label, http_output_info_t *out)
{
    gw__run_t *r = arg;
    rep_engine_t *rep = gw_repl_engine(r->repl);
    int o = output_of_label(r, label);
    if (!rep || o < 0 || (size_t)o >= rep_engine_noutputs(rep))
        return false;
    rep_output_stats_t os;
    rep_output_stats(rep, (size_t)o, &os);
    out->kind = rep_kind_name(os.kind);
    out->state = rep_output_removed(rep, (size_t)o) ? "removed" : os.state;
    snprintf(out->last_error, sizeof out->last_error, "%s", os.last_error);
    out->max_bytes_per_s = os.max_bytes_per_s;
    out->max_messages_per_s = os.max_messages_per_s;
    out->throttled_ms = os.throttled_ms;
    const rep_spb_stats_t *sp = &os.sparkplug;
    out->spb.valid = sp->valid;
    out->spb.phase = sp->phase;
    out->spb.bdseq = sp->bdseq;
    out->spb.seq = sp->seq;
    out->spb.connects = sp->connects;
    out->spb.unconfirmed = sp->unconfirmed;
    out->spb.nbirths = sp->nbirths;
    out->spb.dbirths = sp->dbirths;
    out->spb.data_msgs = sp->data_msgs;
    out->spb.metrics = sp->metrics;
    out->spb.confirmed = sp->confirmed;
    out->spb.rebirth_cmds = sp->rebirth_cmds;
    out->spb.deadline_ends = sp->deadline_ends;
    out->spb.host_online = sp->host_online;
    return true;
}

static bool output_carries(void *arg, size_t label, size_t topic)
{
    gw__run_t *r = arg;
    rep_engine_t *rep = gw_repl_engine(r->repl);
    int o = output_of_label(r, label);
    if (!rep || o < 0 || !r->topics_open)
        return false;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++)
        if (r->metric_topic[i] == (int)topic)
            return rep_output_carries(rep, (size_t)o, i);
    return false;
}

void gw__provider(gw__run_t *r, http_provider_t *out)
{
    *out = (http_provider_t){ .arg = r, .readiness = readiness, .topic_state = topic_state,
                              .cluster_state = cluster_state, .cluster_problem = cluster_problem,
                              .topic_problem = topic_problem, .listener_tls = listener_tls,
                              .top_talkers = top_talkers, .output_info = output_info,
                              .output_carries = output_carries };
}
