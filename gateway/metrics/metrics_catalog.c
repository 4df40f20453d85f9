/*
 * metrics_catalog.c: every metric the gateway exposes, in one table.
 *
 * Each row gives the Prometheus name, type, help, unit divisor, labels and
 * the field it fills in /stats. /metrics, /stats and the tests that check
 * docs/OPERATIONS.md all read this table, so a metric cannot be renamed in
 * one place and not the others. Label values come only from the bounded
 * sets created here: upstream topics (capacity given at startup), the
 * rejection reasons, HTTP codes and timeout kinds (fixed tables), and the
 * version.
 *
 * The accounting invariant lives here too, because it is a statement about
 * these counters: every message routed to an upstream topic is replicated,
 * queued, dropped by the disk bound, or rejected:
 *   received = replicated + queued + dropped + rejected
 * gw_metrics_catalog_derive() computes it per topic and overall at each
 * scrape; a false value means messages were lost without being counted.
 * The terms are filled by run.c's collector from independent sources (see
 * there); nothing here derives one term from the others.
 */
#include "gateway/metrics/metrics_int.h"
#include "base/base.h"

#include <string.h>

#define NS_PER_S 1000000000ull
#define MS_PER_S 1000ull

/* fdatasync takes ~0.1 ms on NVMe, ~1-50 ms on eMMC/SD, seconds when a card stalls */
static const uint64_t fsync_bounds_ns[] = {
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000ull, 5000000000ull, 10000000000ull,
};

#define C(id_, name_, help_, l1_, l2_, json_) \
    [id_] = { id_, { name_, GW_METRICS_COUNTER, help_, 1, NULL, 0 }, l1_, l2_, json_, false }
#define G(id_, name_, help_, div_, l1_, json_, bool_) \
    [id_] = { id_, { name_, GW_METRICS_GAUGE, help_, div_, NULL, 0 }, l1_, GW_ML_NONE, json_, bool_ }

const gw_metrics_entry_t gw_metrics_catalog[GW_M__COUNT] = {
    /* per upstream topic */
    C(GW_M_RECEIVED, "tributary_messages_received_total",
      "Messages routed to the upstream topic, accepted or not.", GW_ML_TOPIC, GW_ML_NONE, "received"),
    C(GW_M_STORED, "tributary_messages_stored_total",
      "Messages appended to the topic's write-ahead log.", GW_ML_TOPIC, GW_ML_NONE, "stored"),
    C(GW_M_REPLICATED, "tributary_messages_replicated_total",
      "Messages received since start that the cluster acknowledged while they were in the log.", GW_ML_TOPIC,
      GW_ML_NONE, "replicated"),
    G(GW_M_QUEUED, "tributary_messages_queued",
      "Messages received since start, accepted and not yet acknowledged by the cluster (batching, in the log "
      "or in flight).", 1, GW_ML_TOPIC, "queued", false),
    C(GW_M_DROPPED, "tributary_messages_dropped_total",
      "Messages received since start that the log deleted (disk bound) or set aside (corrupt) before the "
      "cluster acknowledged them.", GW_ML_TOPIC, GW_ML_NONE, "dropped"),
    C(GW_M_REJECTED, "tributary_messages_rejected_total",
      "Messages refused, by reason; never acknowledged as stored.", GW_ML_TOPIC, GW_ML_REASON, "rejected"),
    G(GW_M_WAL_BYTES, "tributary_wal_bytes", "Bytes of the topic's log on disk.", 1, GW_ML_TOPIC, "wal_bytes", false),
    G(GW_M_WAL_SEGMENTS, "tributary_wal_segments", "Segment files of the topic's log.", 1, GW_ML_TOPIC,
      "wal_segments", false),
    G(GW_M_WAL_OLDEST_OFFSET, "tributary_wal_oldest_offset", "Offset of the oldest message still in the log.", 1,
      GW_ML_TOPIC, "wal_oldest_offset", false),
    G(GW_M_WAL_NEWEST_OFFSET, "tributary_wal_newest_offset", "Offset of the newest message in the log.", 1,
      GW_ML_TOPIC, "wal_newest_offset", false),
    G(GW_M_ACKED_OFFSET, "tributary_replication_acked_offset", "Highest offset the cluster has acknowledged.", 1,
      GW_ML_TOPIC, "acked_offset", false),
    G(GW_M_LAG_MESSAGES, "tributary_replication_lag_messages",
      "Messages in the log after the acknowledged offset.", 1, GW_ML_TOPIC, "lag_messages", false),
    G(GW_M_LAG_BYTES, "tributary_replication_lag_bytes", "Bytes in the log after the acknowledged offset.", 1,
      GW_ML_TOPIC, "lag_bytes", false),
    G(GW_M_OLDEST_UNREPLICATED_AGE, "tributary_replication_oldest_unreplicated_age_seconds",
      "Age of the oldest message the cluster has not acknowledged; 0 when caught up.", MS_PER_S, GW_ML_TOPIC,
      "oldest_unreplicated_age_seconds", false),
    G(GW_M_TOPIC_STALLED, "tributary_topic_stalled",
      "1 when messages are waiting and no acknowledgement has moved them for health.stall_after_ms.", 1,
      GW_ML_TOPIC, "stalled", true),
    G(GW_M_NO_PROGRESS, "tributary_replication_no_progress_seconds",
      "While messages wait: time since the cluster's acknowledgements last moved the topic (or since they began "
      "to wait); 0 when none wait.", MS_PER_S, GW_ML_TOPIC, "no_progress_seconds", false),
    G(GW_M_TOPIC_INVARIANT_OK, "tributary_topic_invariant_ok",
      "1 when received = replicated + queued + dropped + rejected for the topic.", 1, GW_ML_TOPIC,
      "invariant_ok", true),
    C(GW_M_DROPPED_IN_FLIGHT, "tributary_messages_dropped_in_flight_total",
      "Of the dropped messages: those whose batch was in flight when the bound deleted them and that the cluster "
      "acknowledged afterwards (they most likely reached it).", GW_ML_TOPIC, GW_ML_NONE, "dropped_in_flight"),
    C(GW_M_WAL_DROPPED, "tributary_wal_dropped_messages_total",
      "Messages the topic's log deleted (disk bound) or set aside (corrupt) before the cluster acknowledged them, "
      "over the log's whole life: persistent across restarts.", GW_ML_TOPIC, GW_ML_NONE, "wal_dropped_total"),
    C(GW_M_WAL_LOST, "tributary_wal_lost_messages_total",
      "Messages acknowledged to devices (wal.fsync interval or never) then lost to a failed fdatasync, over the "
      "log's whole life: persistent across restarts.", GW_ML_TOPIC, GW_ML_NONE, "wal_lost_total"),
    C(GW_M_WAL_WRITE_ERRORS, "tributary_wal_write_errors_total",
      "Writes and fdatasyncs of the topic's log that failed (disk full, I/O error) since start.", GW_ML_TOPIC,
      GW_ML_NONE, "wal_write_errors"),
    C(GW_M_WAL_BATCHES, "tributary_wal_batches_total",
      "Batches submitted to the topic's log (one write each; with wal.fsync always, one fdatasync for those "
      "pending together), by why: full (batch_size or its byte bound), timeout (batch_timeout_ms), idle (every "
      "client in it had gone quiet), flush (drain or shutdown). stored / batches is messages per batch.",
      GW_ML_TOPIC, GW_ML_BATCH, "wal_batches"),
    G(GW_M_BATCHES_IN_FLIGHT, "tributary_replication_batches_in_flight",
      "Replication batches built and not yet acknowledged (sent, or waiting to be sent again).", 1, GW_ML_TOPIC,
      "batches_in_flight", false),
    C(GW_M_BATCHES_SENT, "tributary_replication_batches_sent_total",
      "Replication batches sent to the cluster, resends included.", GW_ML_TOPIC, GW_ML_NONE, "batches_sent"),
    C(GW_M_BATCHES_RESENT, "tributary_replication_batches_resent_total",
      "Replication batches sent again on a new stream after the previous one ended unacknowledged.", GW_ML_TOPIC,
      GW_ML_NONE, "batches_resent"),
    C(GW_M_RETRIES, "tributary_replication_retries_total",
      "Times replication was retried after a backoff, by reason.", GW_ML_TOPIC, GW_ML_RETRY, "retries"),
    C(GW_M_STREAM_RESETS, "tributary_replication_stream_resets_total",
      "Replication streams that ended while open (cancelled or failed) and were rebuilt.", GW_ML_TOPIC, GW_ML_NONE,
      "stream_resets"),

    /* gateway-wide */
    G(GW_M_INVARIANT_OK, "tributary_invariant_ok", "1 when the accounting invariant holds for every topic.", 1,
      GW_ML_NONE, "invariant_ok", true),
    C(GW_M_UNMATCHED, "tributary_messages_unmatched_total",
      "MQTT messages whose topic matched no mapping (refused or dropped, never stored).", GW_ML_NONE, GW_ML_NONE,
      "unmatched"),
    G(GW_M_MQTT_CONNECTIONS, "tributary_mqtt_connections", "Open MQTT connections (past CONNECT).", 1, GW_ML_NONE,
      "connections.mqtt", false),
    C(GW_M_MQTT_ACCEPTED, "tributary_mqtt_connections_accepted_total", "TCP connections accepted by the MQTT listener.",
      GW_ML_NONE, GW_ML_NONE, "connections.mqtt_accepted"),
    C(GW_M_MQTT_REFUSED, "tributary_mqtt_connections_refused_total",
      "CONNECTs refused with a CONNACK, by reason.", GW_ML_REFUSE, GW_ML_NONE, "connections.mqtt_refused"),
    C(GW_M_MQTT_CLOSED, "tributary_mqtt_connections_closed_total",
      "MQTT connections the gateway closed on its own, by reason.", GW_ML_CLOSE, GW_ML_NONE,
      "connections.mqtt_closed"),
    G(GW_M_HTTP_CONNECTIONS, "tributary_http_connections", "Open HTTP connections to this endpoint.", 1,
      GW_ML_NONE, "connections.http", false),
    C(GW_M_HTTP_REQUESTS, "tributary_http_requests_total", "HTTP responses sent, by status code.", GW_ML_CODE,
      GW_ML_NONE, NULL),
    C(GW_M_HTTP_REFUSED, "tributary_http_connections_refused_total",
      "HTTP connections answered 503 and closed because every slot was busy writing a response.", GW_ML_NONE,
      GW_ML_NONE, NULL),
    C(GW_M_HTTP_EVICTED, "tributary_http_connections_evicted_total",
      "HTTP connections closed to make room for a new one (the longest-waiting idle or incomplete one).",
      GW_ML_NONE, GW_ML_NONE, NULL),
    C(GW_M_HTTP_TIMEOUTS, "tributary_http_timeouts_total",
      "HTTP connections closed by a deadline: request (whole request not received), idle, write.", GW_ML_TIMEOUT,
      GW_ML_NONE, NULL),
    [GW_M_WAL_FSYNC_SECONDS] = { GW_M_WAL_FSYNC_SECONDS,
                                 { "tributary_wal_fsync_duration_seconds", GW_METRICS_HISTOGRAM,
                                   "Time one fdatasync of the write-ahead log took.", NS_PER_S, fsync_bounds_ns,
                                   TB_ARRAY_LEN(fsync_bounds_ns) },
                                 GW_ML_NONE, GW_ML_NONE, NULL, false },
    G(GW_M_WAL_TOPIC_LIMIT, "tributary_wal_topic_limit_bytes",
      "Disk bound of each topic's log (wal.max_topic_bytes); past it the oldest segment is dropped.", 1, GW_ML_NONE,
      "wal_limits.topic_bytes", false),
    G(GW_M_WAL_TOTAL_LIMIT, "tributary_wal_total_limit_bytes",
      "Disk bound of the whole log (wal.max_total_bytes); past it the oldest segment overall is dropped.", 1,
      GW_ML_NONE, "wal_limits.total_bytes", false),
    G(GW_M_CLUSTER_UP, "tributary_cluster_up", "1 when the replication stream to the cluster is established.", 1,
      GW_ML_NONE, "cluster.up", true),
    G(GW_M_READY, "tributary_ready", "1 when /readyz answers 200.", 1, GW_ML_NONE, "ready", true),
    G(GW_M_LOOP_LAG, "tributary_event_loop_lag_seconds",
      "How late the event loop's last health tick ran; high values mean the loop is blocked.", NS_PER_S, GW_ML_NONE,
      "event_loop_lag_seconds", false),
    G(GW_M_BUILD_INFO, "tributary_build_info", "Always 1; the version is the label.", 1, GW_ML_VERSION, NULL, false),

    /* the process */
    G(GW_M_PROC_RSS, "process_resident_memory_bytes", "Resident memory size in bytes.", 1, GW_ML_NONE,
      "process.resident_memory_bytes", false),
    G(GW_M_PROC_VSIZE, "process_virtual_memory_bytes", "Virtual memory size in bytes.", 1, GW_ML_NONE,
      "process.virtual_memory_bytes", false),
    [GW_M_PROC_CPU] = { GW_M_PROC_CPU,
                        { "process_cpu_seconds_total", GW_METRICS_COUNTER, "User and system CPU time spent in seconds.",
                          NS_PER_S, NULL, 0 },
                        GW_ML_NONE, GW_ML_NONE, "process.cpu_seconds", false },
    G(GW_M_PROC_OPEN_FDS, "process_open_fds", "Open file descriptors.", 1, GW_ML_NONE, "process.open_fds", false),
    G(GW_M_PROC_MAX_FDS, "process_max_fds", "Limit on open file descriptors (RLIMIT_NOFILE).", 1, GW_ML_NONE,
      "process.max_fds", false),
    G(GW_M_PROC_START_TIME, "process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.",
      MS_PER_S, GW_ML_NONE, "process.start_time_seconds", false),
    C(GW_M_PROC_WRITE_BYTES, "tributary_process_disk_write_bytes_total",
      "Bytes this process caused to be written to storage (/proc/self/io write_bytes).", GW_ML_NONE, GW_ML_NONE,
      "process.disk_write_bytes"),
    C(GW_M_PROC_READ_BYTES, "tributary_process_disk_read_bytes_total",
      "Bytes this process caused to be read from storage (/proc/self/io read_bytes).", GW_ML_NONE, GW_ML_NONE,
      "process.disk_read_bytes"),
};

const char *const gw_metrics_reject_reasons[GW_REJECT__COUNT] = {
    [GW_REJECT_SCHEMA_INVALID] = "schema_invalid",
    [GW_REJECT_SCHEMA_UNAVAILABLE] = "schema_unavailable",
    [GW_REJECT_PAYLOAD_TOO_LARGE] = "payload_too_large",
    [GW_REJECT_WAL_UNAVAILABLE] = "wal_unavailable",
};

/* the names rep_retry_name() gives (a unit test checks they agree) */
const char *const gw_metrics_retry_reasons[] = { "unavailable", "ack_timeout", "status", "protocol", "lookup" };
const size_t gw_metrics_nretry_reasons = TB_ARRAY_LEN(gw_metrics_retry_reasons);

const char *const gw_metrics_mqtt_refuse_reasons[GW_MQTT_REFUSE__COUNT] = {
    [GW_MQTT_REFUSE_MAX_CONNECTIONS] = "max_connections",
    [GW_MQTT_REFUSE_CLIENT_ID] = "client_id_invalid",
    [GW_MQTT_REFUSE_AUTH] = "auth_unsupported",
    [GW_MQTT_REFUSE_SHUTTING_DOWN] = "shutting_down",
};

const char *const gw_metrics_batch_reasons[GW_BATCH__COUNT] = {
    [GW_BATCH_FULL] = "full",
    [GW_BATCH_TIMEOUT] = "timeout",
    [GW_BATCH_IDLE] = "idle",
    [GW_BATCH_FLUSH] = "flush",
};

const char *const gw_metrics_mqtt_close_reasons[GW_MQTT_CLOSE__COUNT] = {
    [GW_MQTT_CLOSE_MALFORMED] = "malformed",
    [GW_MQTT_CLOSE_CONNECT_TIMEOUT] = "connect_timeout",
    [GW_MQTT_CLOSE_KEEPALIVE_TIMEOUT] = "keepalive_timeout",
};

const int gw_metrics_http_codes[] = { 200, 400, 404, 405, 408, 413, 431, 500, 503, 505, 0 /* other */ };
static const char *const http_code_names[] = { "200", "400", "404", "405", "408", "413",
                                               "431", "500", "503", "505", "other" };
const size_t gw_metrics_nhttp_codes = TB_ARRAY_LEN(http_code_names);

size_t gw_metrics_http_code_index(int status)
{
    for (size_t i = 0; i + 1 < gw_metrics_nhttp_codes; i++)
        if (gw_metrics_http_codes[i] == status)
            return i;
    return gw_metrics_nhttp_codes - 1;
}

static const char *const timeout_names[GW_HTTP_TIMEOUT__COUNT] = { "request", "idle", "write" };
static const char *const versions[] = { TRIB_VERSION };

int gw_metrics_catalog_register(gw_metrics_t *m, size_t max_topics)
{
    int rc;
    gw_metrics_labels_t **L = m->catalog_labels;
    if ((rc = gw_metrics_labels_bounded(m, "topic", max_topics, &L[GW_ML_TOPIC])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "reason", gw_metrics_reject_reasons, GW_REJECT__COUNT, &L[GW_ML_REASON])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "code", http_code_names, gw_metrics_nhttp_codes, &L[GW_ML_CODE])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "kind", timeout_names, GW_HTTP_TIMEOUT__COUNT, &L[GW_ML_TIMEOUT])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "version", versions, TB_ARRAY_LEN(versions), &L[GW_ML_VERSION])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "reason", gw_metrics_retry_reasons, gw_metrics_nretry_reasons,
                                      &L[GW_ML_RETRY])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "reason", gw_metrics_mqtt_refuse_reasons, GW_MQTT_REFUSE__COUNT,
                                      &L[GW_ML_REFUSE])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "reason", gw_metrics_mqtt_close_reasons, GW_MQTT_CLOSE__COUNT,
                                      &L[GW_ML_CLOSE])) < 0 ||
        (rc = gw_metrics_labels_fixed(m, "reason", gw_metrics_batch_reasons, GW_BATCH__COUNT, &L[GW_ML_BATCH])) < 0)
        return rc;
    for (size_t i = 0; i < GW_M__COUNT; i++) {
        const gw_metrics_entry_t *e = &gw_metrics_catalog[i];
        if (e->id != (gw_metric_id_t)i || !e->spec.name)
            return TB_EINVALID; /* the table is out of order or has a hole */
        rc = gw_metrics_register(m, &e->spec, L[e->l1], L[e->l2], &m->catalog[i]);
        if (rc < 0) {
            tb_error("metric catalog entry rejected", TB_S("metric", e->spec.name), TB_ERR(rc));
            return rc;
        }
    }
    gw_metrics_set(m->catalog[GW_M_BUILD_INFO], 0, 0, 1);
    return gw_metrics_add_collector(m, gw_metrics__proc_collect, NULL);
}

gw_metrics_family_t *gw_metrics_fam(gw_metrics_t *m, gw_metric_id_t id)
{
    return (unsigned)id < GW_M__COUNT ? m->catalog[id] : NULL;
}

gw_metrics_labels_t *gw_metrics_topics(gw_metrics_t *m)
{
    return m->catalog_labels[GW_ML_TOPIC];
}

int gw_metrics_topic_add(gw_metrics_t *m, const char *topic)
{
    gw_metrics_labels_t *l = m->catalog_labels[GW_ML_TOPIC];
    return l ? gw_metrics_labels_add(l, topic) : TB_EINVALID;
}

bool gw_metrics_topic_balance(gw_metrics_t *m, size_t t, gw_metrics_balance_t *out)
{
    memset(out, 0, sizeof *out);
    gw_metrics_labels_t *topics = m->catalog_labels[GW_ML_TOPIC];
    if (!topics || t >= gw_metrics_labels_count(topics))
        return false;
    out->received = (uint64_t)gw_metrics_get(m->catalog[GW_M_RECEIVED], t, 0);
    out->replicated = (uint64_t)gw_metrics_get(m->catalog[GW_M_REPLICATED], t, 0);
    out->queued = (uint64_t)gw_metrics_get(m->catalog[GW_M_QUEUED], t, 0);
    out->dropped = (uint64_t)gw_metrics_get(m->catalog[GW_M_DROPPED], t, 0);
    for (size_t r = 0; r < GW_REJECT__COUNT; r++)
        out->rejected += (uint64_t)gw_metrics_get(m->catalog[GW_M_REJECTED], t, r);
    out->ok = out->received == out->replicated + out->queued + out->dropped + out->rejected;
    return true;
}

bool gw_metrics_catalog_derive(gw_metrics_t *m)
{
    gw_metrics_labels_t *topics = m->catalog_labels[GW_ML_TOPIC];
    if (!topics)
        return true;
    bool all = true;
    for (size_t t = 0; t < gw_metrics_labels_count(topics); t++) {
        gw_metrics_balance_t b;
        gw_metrics_topic_balance(m, t, &b);
        gw_metrics_set(m->catalog[GW_M_TOPIC_INVARIANT_OK], t, 0, b.ok);
        all = all && b.ok;
    }
    gw_metrics_set(m->catalog[GW_M_INVARIANT_OK], 0, 0, all);
    return all;
}
