/*
 * run.c: gw_run(), the boot sequence. Each phase is logged; the services
 * registered here start in order and drain in reverse (app.h):
 *
 *   http        /metrics, /stats, /healthz, /readyz  (drains last: probes answer throughout)
 *   log         the WAL (recovery), rules and topics (closes after everything that writes
 *               or reads it: the replicator's readers are closed before wal_close)
 *   replicator  RegisterEdge (retried with backoff while the cluster is away), then per
 *               topic lookup and replication from the checkpoint, and the heartbeat
 *               (drains after the listener: in-flight batches get a grace, the
 *               checkpoint follows their acks, streams close)
 *   mqtt        the MQTT listener                    (drains first: acks, then goodbye)
 *   boot-complete                                    (marks /readyz's bootstrap step)
 *
 * The listener never waits for the cluster: registration runs on the
 * replicator's thread and an unreachable cluster is an outage the log
 * absorbs, not a failed boot (replication.c, docs/REPLICATION.md).
 */
#include "gateway/app.h"
#include "gateway/gateway.h"
#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"
#include "gateway/replication.h"
#include "gateway/broker/broker_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct run {
    gw__app_t *app;
    broker_t *srv;
    wal_t *wal;
    gw_repl_t *repl;
    metrics_t *metrics;
    int *metric_topic;           /* server topic index -> metrics topic label index (-1: none) */
    uint64_t fsync_seen[WAL_FSYNC_HIST_BUCKETS]; /* WAL fsync samples already in the registry */
    bool booted;
} run_t;

/* ---- the operator's endpoint (http/) --------------------------------------- */

static int http_start(gw__app_t *app, void *arg)
{
    /* on failure the app still calls our drain step, which closes the handles */
    return http_service_listen(arg, app->cfg->http.listener);
}

static void http_closed(void *arg)
{
    gw__app_drained(arg);
}

static void http_drain(gw__app_t *app, void *arg)
{
    http_service_close(arg, http_closed, app);
}

/* ---- the log and the topics ------------------------------------------------ */

static void wal_notify(void *arg)
{
    uv_async_send(arg);
}

static int log_start(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    const cfg_t *cfg = app->cfg;
    r->srv = tb_calloc(1, sizeof *r->srv);
    r->srv->owner = r;
    broker_prepare(r->srv, &app->loop);

    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = cfg->wal.dir;
    o.segment_bytes = cfg->wal.segment_bytes;
    o.max_topic_bytes = cfg->wal.max_topic_bytes;
    o.max_total_bytes = cfg->wal.max_total_bytes;
    o.fsync = (wal_fsync_t)cfg->wal.fsync;
    o.fsync_interval_ms = cfg->wal.fsync_interval_ms;
    o.checkpoint_flush_ms = cfg->replicator.checkpoint_interval_ms;
    o.notify = wal_notify;
    o.notify_arg = &r->srv->wal_async;
    uint64_t t0 = tb_mono_ms();
    int rc = wal_open(&o, &r->wal);
    if (rc < 0) {
        tb_error("cannot open the write-ahead log", TB_S("dir", cfg->wal.dir), TB_ERR(rc));
        return rc;
    }
    tb_info("log opened", TB_S("dir", cfg->wal.dir), TB_S("fsync", cfg_fsync_name(cfg->wal.fsync)),
            TB_U("ms", tb_mono_ms() - t0));
    char err[1024];
    rc = broker_init(r->srv, &app->loop, cfg, r->wal, err, sizeof err);
    if (rc < 0) {
        tb_error("cannot set up the topics", TB_S("why", err));
        return rc;
    }
    r->metric_topic = tb_calloc(r->srv->ntopics + 1, sizeof *r->metric_topic);
    for (size_t i = 0; i < r->srv->ntopics; i++) {
        broker_topic_t *t = &r->srv->topics[i];
        wal_topic_stats_t st;
        wal_topic_stats(t->wal, &st);
        r->metric_topic[i] = metrics_topic_add(r->metrics, t->name);
        tb_info("topic", TB_S("topic", t->name), TB_U("next_offset", st.next_offset),
                TB_U("checkpoint", st.checkpoint), TB_U("bytes", st.bytes), TB_U("dropped_total", st.dropped_total),
                TB_S("schema_subject", t->schema_subject ? t->schema_subject : ""));
    }
    return 0;
}

static void server_closed(broker_t *srv)
{
    run_t *r = srv->owner;
    free(srv);
    r->srv = NULL;
    gw__app_drained(r->app);
}

static void log_drain(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    if (!r->srv) {
        gw__app_drained(app);
        return;
    }
    if (r->wal) {
        int rc = wal_close(r->wal);
        r->wal = NULL;
        if (rc < 0)
            tb_error("closing the log reported an error", TB_ERR(rc));
        else
            tb_info("log closed: everything synced");
    }
    /* the writer thread is joined: the WAL's wake-up handle can close now */
    broker_close(r->srv, server_closed);
}

/* ---- the replicator (replication.c) ---------------------------------------------- */

static int repl_start(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    gw_repl_set_server(r->repl, r->srv);
    return gw_repl_start(app, r->repl);
}

static void repl_drain(gw__app_t *app, void *arg)
{
    gw_repl_drain(app, ((run_t *)arg)->repl);
}

/* ---- the MQTT listener -------------------------------------------------------- */

static int mqtt_start(gw__app_t *app, void *arg)
{
    (void)app;
    run_t *r = arg;
    return broker_listen(r->srv);
}

static void server_drained(broker_t *srv)
{
    run_t *r = srv->owner;
    for (size_t i = 0; i < srv->ntopics; i++) {
        broker_topic_t *t = &srv->topics[i];
        rep_topic_stats_t rs;
        gw_repl_topic_stats(r->repl, i, &rs);
        tb_info("topic totals", TB_S("topic", t->name), TB_U("received", t->received), TB_U("stored", t->stored),
                TB_U("replicated", rs.messages_acked), TB_U("acked_offset", rs.acked_offset),
                TB_U("batches_full", t->batches[METRICS_BATCH_FULL]), TB_U("batches_timeout", t->batches[METRICS_BATCH_TIMEOUT]),
                TB_U("batches_idle", t->batches[METRICS_BATCH_IDLE]));
    }
    gw__app_drained(r->app);
}

static void mqtt_drain(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    if (!r->srv || !r->srv->topics) {
        gw__app_drained(app);
        return;
    }
    broker_drain(r->srv, server_drained);
}

static int boot_complete(gw__app_t *app, void *arg)
{
    (void)app;
    ((run_t *)arg)->booted = true;
    tb_info("bootstrap complete");
    return 0;
}

/* ---- what /metrics, /stats, /readyz report ------------------------------------ */

static void readiness(void *arg, http_readiness_t *out)
{
    run_t *r = arg;
    out->bootstrap_done = r->booted;
    out->mqtt_listening = r->srv && r->srv->listening;
    out->wal_writable = r->srv && r->srv->topics;
    for (size_t i = 0; out->wal_writable && i < r->srv->ntopics; i++)
        if (wal_topic_state(r->srv->topics[i].wal) != WAL_TOPIC_OK)
            out->wal_writable = false;
    out->draining = r->app->stopping;
}

static http_topic_state_t topic_state(void *arg, size_t mi)
{
    run_t *r = arg;
    if (!r->srv || !r->srv->topics)
        return HTTP_TOPIC_UNKNOWN;
    for (size_t i = 0; i < r->srv->ntopics; i++) {
        if (r->metric_topic[i] != (int)mi)
            continue;
        if (wal_topic_state(r->srv->topics[i].wal) != WAL_TOPIC_OK)
            return HTTP_TOPIC_FAILED;
        if (!gw_repl_rep(r->repl))
            return HTTP_TOPIC_IDLE;
        rep_topic_stats_t st;
        gw_repl_topic_stats(r->repl, i, &st);
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
    rep_t *rep = gw_repl_rep(((run_t *)arg)->repl);
    if (!rep)
        return HTTP_CLUSTER_UNKNOWN;
    rep_stats_t st;
    rep_stats(rep, &st);
    switch (st.cluster) {
    case REP_CLUSTER_CONNECTED: return HTTP_CLUSTER_CONNECTED;
    case REP_CLUSTER_UNREACHABLE: return HTTP_CLUSTER_UNREACHABLE;
    default: return HTTP_CLUSTER_CONNECTING;
    }
}

/* broker_reject_t (publish.c) -> the metrics' reason label (unmatched has no topic) */
static const int reject_label[BROKER_REJ__COUNT] = {
    [BROKER_REJ_UNMATCHED] = -1,
    [BROKER_REJ_INVALID] = METRICS_REJECT_SCHEMA_INVALID,
    [BROKER_REJ_NOT_READY] = METRICS_REJECT_SCHEMA_UNAVAILABLE,
    [BROKER_REJ_TOO_LARGE] = METRICS_REJECT_PAYLOAD_TOO_LARGE,
    [BROKER_REJ_QUOTA] = METRICS_REJECT_WAL_UNAVAILABLE,
};

#define SET(id, i1, i2, v) metrics_set(metrics_fam(m, (id)), (i1), (i2), (int64_t)(v))

/*
 * The accounting invariant's terms for one topic, each from where it is
 * measured (docs/OPERATIONS.md, "The accounting invariant"):
 *   received, rejected  the loop's router counters (publish.c, ingest.c)
 *   replicated          the replicator's acks of offsets this process wrote,
 *                       still in the log when acked (rep_topic.c)
 *   dropped             the WAL's count of such offsets deleted before an ack
 *   queued              what is still somewhere: in the loop's batches
 *                       (`batched`), plus the offsets the log confirmed to the
 *                       loop ([S, log_end)) that are neither acked (<= A) nor
 *                       deleted (< drop floor F)
 * S is the log's first offset of this process. The log term is signed on
 * purpose: when an ack overtakes a completion the loop has not taken yet,
 * those messages are both `batched` and replicated for a moment, and the
 * negative term takes them out again, so the sum stays exact.
 */
static void account(metrics_t *m, size_t mi, const broker_topic_t *t, const wal_topic_stats_t *st,
                    const rep_topic_stats_t *rs)
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
    SET(METRICS_DROPPED, mi, 0, st->dropped_since_open);
    SET(METRICS_DROPPED_IN_FLIGHT, mi, 0, rs->messages_acked_dropped);
    SET(METRICS_QUEUED, mi, 0, (int64_t)t->batched + in_log);
}

/* Copies the loop's counters, the WAL's and the replicator's stats into the registry, at scrape
 * time. */
static void collect(void *arg, metrics_t *m)
{
    run_t *r = arg;
    broker_t *srv = r->srv;
    if (!srv || !srv->topics)
        return;
    SET(METRICS_MQTT_CONNECTIONS, 0, 0, srv->nconnected);
    SET(METRICS_MQTT_ACCEPTED, 0, 0, srv->conn_accepted);
    for (size_t k = 0; k < METRICS_REFUSE__COUNT; k++)
        SET(METRICS_MQTT_REFUSED, k, 0, srv->conn_refused[k]);
    for (size_t k = 0; k < METRICS_CLOSE__COUNT; k++)
        SET(METRICS_MQTT_CLOSED, k, 0, srv->conn_closed[k]);
    SET(METRICS_UNMATCHED, 0, 0, srv->unmatched_dropped);
    rep_t *rep = gw_repl_rep(r->repl);
    if (rep) {
        rep_stats_t cs;
        rep_stats(rep, &cs);
        SET(METRICS_CLUSTER_UP, 0, 0, cs.cluster == REP_CLUSTER_CONNECTED && cs.registration == REP_REG_REGISTERED);
    }
    metrics_labels_t *retry = metrics_family_label(metrics_fam(m, METRICS_RETRIES), 1);
    uint64_t now_ms = tb_wall_ms();
    for (size_t i = 0; i < srv->ntopics; i++) {
        if (r->metric_topic[i] < 0)
            continue;
        size_t mi = (size_t)r->metric_topic[i];
        broker_topic_t *t = &srv->topics[i];
        wal_topic_stats_t st;
        wal_topic_stats(t->wal, &st);
        rep_topic_stats_t rs;
        gw_repl_topic_stats(r->repl, i, &rs);
        account(m, mi, t, &st, &rs);
        SET(METRICS_WAL_DROPPED, mi, 0, st.dropped_total);
        SET(METRICS_WAL_LOST, mi, 0, st.lost_total);
        SET(METRICS_WAL_WRITE_ERRORS, mi, 0, st.write_errors);
        for (size_t k = 0; k < METRICS_BATCH__COUNT; k++)
            SET(METRICS_WAL_BATCHES, mi, k, t->batches[k]);
        SET(METRICS_WAL_BYTES, mi, 0, st.bytes);
        SET(METRICS_WAL_SEGMENTS, mi, 0, st.segments);
        SET(METRICS_WAL_OLDEST_OFFSET, mi, 0, st.oldest_offset);
        SET(METRICS_WAL_NEWEST_OFFSET, mi, 0, st.next_offset > 0 ? st.next_offset - 1 : 0);
        SET(METRICS_ACKED_OFFSET, mi, 0, st.checkpoint);
        /* in the log after the acked offset: offsets the bound deleted are not waiting any more */
        uint64_t waiting_from = TB_MAX(st.checkpoint + 1, st.oldest_offset);
        SET(METRICS_LAG_MESSAGES, mi, 0, st.next_offset > waiting_from ? st.next_offset - waiting_from : 0);
        SET(METRICS_LAG_BYTES, mi, 0, rs.lag_bytes);
        SET(METRICS_OLDEST_UNREPLICATED_AGE, mi, 0,
            rs.oldest_unacked_ms && now_ms > rs.oldest_unacked_ms ? now_ms - rs.oldest_unacked_ms : 0);
        SET(METRICS_TOPIC_STALLED, mi, 0, rs.stalled);
        SET(METRICS_NO_PROGRESS, mi, 0, rs.no_progress_ms);
        SET(METRICS_BATCHES_IN_FLIGHT, mi, 0, rs.batches_in_flight);
        SET(METRICS_BATCHES_SENT, mi, 0, rs.batches_sent);
        SET(METRICS_BATCHES_RESENT, mi, 0, rs.batches_resent);
        SET(METRICS_STREAM_RESETS, mi, 0, rs.stream_resets);
        for (int k = 0; k < REP_RETRY__COUNT; k++) {
            int li = metrics_labels_find(retry, rep_retry_name((rep_retry_t)k));
            if (li >= 0)
                SET(METRICS_RETRIES, mi, (size_t)li, rs.retries[k]);
        }
    }
    if (r->wal) {
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

static void reload(gw__app_t *app, void *arg)
{
    gw__reload(((run_t *)arg)->srv, app->cfg);
}

static size_t topic_capacity(const cfg_t *cfg)
{
    size_t total = 0;
    for (size_t i = 0; i < cfg->mqtt.nmappings; i++) {
        size_t n = 1;
        for (size_t k = 0; k < cfg->mqtt.mappings[i].ncapvals && n < 100000; k++)
            n *= cfg->mqtt.mappings[i].capvals[k].nvalues ? cfg->mqtt.mappings[i].capvals[k].nvalues : 1;
        total += n;
    }
    return total ? TB_MIN(total, 10000) : 1;
}

int gw_run(const cfg_t *cfg)
{
    gw__app_t app;
    gw__app_init(&app, cfg);
    tb_info("starting", TB_S("version", TRIB_VERSION), TB_S("config", cfg->source),
            TB_S("edge", cfg->edge.edge_name), TB_S("cluster", cfg->edge.cluster_url),
            TB_U("topic_mappings", cfg->mqtt.nmappings), TB_S("wal_fsync", cfg_fsync_name(cfg->wal.fsync)));

    run_t r = { .app = &app, .repl = gw_repl_new() };
    if (metrics_new(&r.metrics) < 0 || metrics_catalog_register(r.metrics, topic_capacity(cfg)) < 0) {
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_FAILURE;
    }
    metrics_set(metrics_fam(r.metrics, METRICS_WAL_TOPIC_LIMIT), 0, 0, (int64_t)cfg->wal.max_topic_bytes);
    metrics_set(metrics_fam(r.metrics, METRICS_WAL_TOTAL_LIMIT), 0, 0, (int64_t)cfg->wal.max_total_bytes);
    metrics_add_collector(r.metrics, collect, &r);
    http_provider_t provider = { .arg = &r, .readiness = readiness, .topic_state = topic_state,
                                    .cluster_state = cluster_state };
    http_service_opts_t hopts;
    http_service_opts_default(&hopts);
    hopts.edge_name = cfg->edge.edge_name;
    http_service_t *http;
    if (http_service_new(&app.loop, &hopts, r.metrics, &provider, &http) < 0) {
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_FAILURE;
    }
    gw__app_add(&app, &(gw__service_t){ "http", http_start, http_drain, http });
    gw__app_add(&app, &(gw__service_t){ "log", log_start, log_drain, &r });
    gw__app_add(&app, &(gw__service_t){ "replicator", repl_start, repl_drain, &r });
    gw__app_add(&app, &(gw__service_t){ "mqtt", mqtt_start, mqtt_drain, &r });
    gw__app_add(&app, &(gw__service_t){ "boot-complete", boot_complete, NULL, &r }); /* keep last */
    app.reload = reload;
    app.reload_arg = &r;

    int rc = gw__app_run(&app);
    http_service_free(http);
    metrics_free(r.metrics);
    gw_repl_free(r.repl);
    free(r.metric_topic);
    tb_info("stopped", TB_I("exit_code", rc));
    return rc;
}
