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
 * queued, dropped (by reason: the disk bound, max_age, a refused spill),
 * rejected or dead-lettered:
 *   received = replicated + queued + dropped + rejected + dead_lettered
 * metrics_catalog_derive() computes it per topic and overall at each
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
    [id_] = { id_, { name_, METRICS_COUNTER, help_, 1, NULL, 0 }, l1_, l2_, json_, false }
#define G(id_, name_, help_, div_, l1_, json_, bool_) \
    [id_] = { id_, { name_, METRICS_GAUGE, help_, div_, NULL, 0 }, l1_, METRICS_L_NONE, json_, bool_ }

#define G2(id_, name_, help_, div_, l1_, l2_, json_) \
    [id_] = { id_, { name_, METRICS_GAUGE, help_, div_, NULL, 0 }, l1_, l2_, json_, false }

const metrics_entry_t metrics_catalog[METRICS__COUNT] = {
    /* per upstream topic */
    C(METRICS_RECEIVED, "tributary_messages_received_total",
      "Messages routed to the upstream topic, accepted or not.", METRICS_L_TOPIC, METRICS_L_NONE, "received"),
    C(METRICS_STORED, "tributary_messages_stored_total",
      "Messages appended to the topic's write-ahead log.", METRICS_L_TOPIC, METRICS_L_NONE, "stored"),
    C(METRICS_REPLICATED, "tributary_messages_replicated_total",
      "Messages received since start that the cluster acknowledged while they were in the log.", METRICS_L_TOPIC,
      METRICS_L_NONE, "replicated"),
    G(METRICS_QUEUED, "tributary_messages_queued",
      "Messages received since start, accepted and not yet acknowledged by the cluster (batching, in the log "
      "or in flight).", 1, METRICS_L_TOPIC, "queued", false),
    /* /stats shows it as dropped_by_reason, and as dropped (bound + spill, what it was before the label:
     * http_stats.c) beside dropped_age */
    C(METRICS_DROPPED, "tributary_messages_dropped_total",
      "Messages received since start and dropped before the cluster acknowledged them, by reason: bound (the "
      "log deleted them at a disk bound, drop_oldest, or set them aside as corrupt), age (the replicator dropped "
      "them unsent for being older than the mapping's max_age), spill (acknowledged on receipt, ack: received, "
      "then lost with a memory_first spill that could not be written). The sum over reasons is the accounting "
      "invariant's dropped term.", METRICS_L_TOPIC, METRICS_L_DROP, "dropped_by_reason"),
    C(METRICS_REJECTED, "tributary_messages_rejected_total",
      "Messages refused, by reason; never acknowledged as stored.", METRICS_L_TOPIC, METRICS_L_REASON, "rejected"),
    G(METRICS_WAL_BYTES, "tributary_wal_bytes", "Bytes of the topic's log on disk.", 1, METRICS_L_TOPIC, "wal_bytes", false),
    G(METRICS_WAL_SEGMENTS, "tributary_wal_segments", "Segment files of the topic's log.", 1, METRICS_L_TOPIC,
      "wal_segments", false),
    G(METRICS_WAL_OLDEST_OFFSET, "tributary_wal_oldest_offset", "Offset of the oldest message still in the log.", 1,
      METRICS_L_TOPIC, "wal_oldest_offset", false),
    G(METRICS_WAL_NEWEST_OFFSET, "tributary_wal_newest_offset", "Offset of the newest message in the log.", 1,
      METRICS_L_TOPIC, "wal_newest_offset", false),
    G(METRICS_ACKED_OFFSET, "tributary_replication_acked_offset", "Highest offset the cluster has acknowledged.", 1,
      METRICS_L_TOPIC, "acked_offset", false),
    G(METRICS_LAG_MESSAGES, "tributary_replication_lag_messages",
      "Messages stored after the acknowledged offset (in the log or held in memory).", 1, METRICS_L_TOPIC, "lag_messages", false),
    G(METRICS_LAG_BYTES, "tributary_replication_lag_bytes", "Bytes in the log after the acknowledged offset.", 1,
      METRICS_L_TOPIC, "lag_bytes", false),
    G(METRICS_OLDEST_UNREPLICATED_AGE, "tributary_replication_oldest_unreplicated_age_seconds",
      "Age of the oldest message the cluster has not acknowledged; 0 when caught up.", MS_PER_S, METRICS_L_TOPIC,
      "oldest_unreplicated_age_seconds", false),
    G(METRICS_TOPIC_STALLED, "tributary_topic_stalled",
      "1 when messages are waiting and no acknowledgement has moved them for health.stall_after_ms.", 1,
      METRICS_L_TOPIC, "stalled", true),
    G(METRICS_TOPIC_PAUSED, "tributary_topic_paused",
      "1 while the topic's replication is paused (POST /admin/topics/NS/T/pause; not kept across a restart).", 1,
      METRICS_L_TOPIC, "paused", true),
    G(METRICS_TOPIC_BLOCKED, "tributary_topic_blocked",
      "1 while the topic's log holds messages for room at a disk bound (on_full: block) and its publishers are not "
      "read.", 1, METRICS_L_TOPIC, "blocked", true),
    C(METRICS_BLOCKED_PAUSES, "tributary_blocked_pauses_total",
      "Times a connection was paused after publishing to the topic while its log was blocked (on_full: block).",
      METRICS_L_TOPIC, METRICS_L_NONE, "blocked_pauses"),
    G(METRICS_NO_PROGRESS, "tributary_replication_no_progress_seconds",
      "While messages wait: time since the cluster's acknowledgements last moved the topic (or since they began "
      "to wait); 0 when none wait.", MS_PER_S, METRICS_L_TOPIC, "no_progress_seconds", false),
    G(METRICS_TOPIC_INVARIANT_OK, "tributary_topic_invariant_ok",
      "1 when received = replicated + queued + dropped + rejected + dead_lettered for the topic.", 1, METRICS_L_TOPIC,
      "invariant_ok", true),
    C(METRICS_DROPPED_IN_FLIGHT, "tributary_messages_dropped_in_flight_total",
      "Of the dropped messages: those whose batch was in flight when the bound deleted them and that the cluster "
      "acknowledged afterwards (they most likely reached it).", METRICS_L_TOPIC, METRICS_L_NONE, "dropped_in_flight"),
    C(METRICS_WAL_DROPPED, "tributary_wal_dropped_messages_total",
      "Messages the topic's log deleted (disk bound) or set aside (corrupt) before the cluster acknowledged them, "
      "over the log's whole life: persistent across restarts.", METRICS_L_TOPIC, METRICS_L_NONE, "wal_dropped_total"),
    C(METRICS_WAL_LOST, "tributary_wal_lost_messages_total",
      "Messages acknowledged to devices (wal.fsync interval or never) then lost to a failed fdatasync, over the "
      "log's whole life: persistent across restarts.", METRICS_L_TOPIC, METRICS_L_NONE, "wal_lost_total"),
    C(METRICS_DROPPED_AGE, "tributary_messages_dropped_age_total",
      "Messages received since start that the replicator dropped unsent for being older than the mapping's "
      "max_age: equal to tributary_messages_dropped_total{reason=\"age\"} (kept for existing dashboards).",
      METRICS_L_TOPIC, METRICS_L_NONE, "dropped_age"),
    C(METRICS_WAL_DROPPED_AGE, "tributary_wal_dropped_age_messages_total",
      "Messages dropped unsent for being older than max_age, over the log's whole life: persistent across "
      "restarts, with the checkpoint that passed them.", METRICS_L_TOPIC, METRICS_L_NONE, "wal_dropped_age_total"),
    C(METRICS_WAL_WRITE_ERRORS, "tributary_wal_write_errors_total",
      "Writes and fdatasyncs of the topic's log that failed (disk full, I/O error) since start.", METRICS_L_TOPIC,
      METRICS_L_NONE, "wal_write_errors"),
    C(METRICS_WAL_BATCHES, "tributary_wal_batches_total",
      "Batches submitted to the topic's log (one write each; with wal.fsync always, one fdatasync for those "
      "pending together), by why: full (batch_size or its byte bound), timeout (batch_timeout_ms), idle (every "
      "client in it had gone quiet), flush (drain or shutdown), turn (a memory_first topic in memory: the end of the "
      "loop turn). stored / batches is messages per batch.",
      METRICS_L_TOPIC, METRICS_L_BATCH, "wal_batches"),
    G(METRICS_BATCHES_IN_FLIGHT, "tributary_replication_batches_in_flight",
      "Replication batches built and not yet acknowledged (sent, or waiting to be sent again).", 1, METRICS_L_TOPIC,
      "batches_in_flight", false),
    C(METRICS_BATCHES_SENT, "tributary_replication_batches_sent_total",
      "Replication batches sent to the cluster, resends included.", METRICS_L_TOPIC, METRICS_L_NONE, "batches_sent"),
    C(METRICS_BATCHES_RESENT, "tributary_replication_batches_resent_total",
      "Replication batches sent again on a new stream after the previous one ended unacknowledged.", METRICS_L_TOPIC,
      METRICS_L_NONE, "batches_resent"),
    C(METRICS_RETRIES, "tributary_replication_retries_total",
      "Times replication was retried after a backoff, by reason.", METRICS_L_TOPIC, METRICS_L_RETRY, "retries"),
    C(METRICS_STREAM_RESETS, "tributary_replication_stream_resets_total",
      "Replication streams that ended while open (cancelled or failed) and were rebuilt.", METRICS_L_TOPIC, METRICS_L_NONE,
      "stream_resets"),
    /* raw milliseconds; /stats shows them as the integer throttled_ms (http_stats.c) */
    [METRICS_THROTTLED] = { METRICS_THROTTLED, { "tributary_replication_throttled_seconds_total", METRICS_COUNTER,
      "Time the topic's replication waited for its output's rate caps (max_bytes_per_s, max_messages_per_s) "
      "since start; 0 without caps.", MS_PER_S, NULL, 0 }, METRICS_L_TOPIC, METRICS_L_NONE, NULL, false },
    /* a gauge with a second label: /stats shows it as the string durability (http_stats.c) */
    [METRICS_TOPIC_MODE] = { METRICS_TOPIC_MODE, { "tributary_topic_mode", METRICS_GAUGE,
      "1 for the topic's current durability mode (label mode): log (a log topic), or for a memory_first topic "
      "memory, spilling, draining (in the log until its backlog is acknowledged) or ready; 0 for the others.",
      1, NULL, 0 }, METRICS_L_TOPIC, METRICS_L_MODE, NULL, false },
    G(METRICS_MEMORY_HELD, "tributary_memory_held_messages",
      "memory_first: messages held in memory and not yet acknowledged by the cluster.", 1, METRICS_L_TOPIC,
      "held_messages", false),
    G(METRICS_MEMORY_HELD_BYTES, "tributary_memory_held_bytes",
      "memory_first: bytes of the records held in memory (bounded by wal.memory_first.memory_bytes).", 1,
      METRICS_L_TOPIC, "held_bytes", false),
    C(METRICS_SPILLS, "tributary_spills_total",
      "memory_first: switches from memory to the log since start (everything held written and synced), by "
      "reason: timeout (no ack within spill_after_ms), bytes (memory_bytes), output (the stream went down), "
      "shutdown.", METRICS_L_TOPIC, METRICS_L_SPILL, "spills"),
    C(METRICS_TO_MEMORY, "tributary_durability_to_memory_total",
      "memory_first: switches from the log back to memory since start (the backlog acknowledged).",
      METRICS_L_TOPIC, METRICS_L_NONE, "to_memory"),

    /* gateway-wide */
    G(METRICS_INVARIANT_OK, "tributary_invariant_ok", "1 when the accounting invariant holds for every topic.", 1,
      METRICS_L_NONE, "invariant_ok", true),
    C(METRICS_UNMATCHED, "tributary_messages_unmatched_total",
      "MQTT messages whose topic matched no mapping (refused or dropped, never stored).", METRICS_L_NONE, METRICS_L_NONE,
      "unmatched"),
    C(METRICS_PUBLISH_DENIED, "tributary_mqtt_publish_denied_total",
      "PUBLISHes (and wills) to a topic auth.acl_file does not let the client write, by the listener the client came "
      "in by: never stored.", METRICS_L_LISTENER, METRICS_L_NONE, "publish_denied"),
    G(METRICS_MQTT_CONNECTIONS, "tributary_mqtt_connections", "Open MQTT connections (past CONNECT).", 1, METRICS_L_NONE,
      "connections.mqtt", false),
    G(METRICS_MQTT_LISTENER_CONNECTIONS, "tributary_mqtt_listener_connections",
      "Open MQTT connections (past CONNECT) by the listener they came in by.", 1, METRICS_L_LISTENER, "connections",
      false),
    C(METRICS_TLS_READ_PAUSES, "tributary_mqtt_tls_read_pauses_total",
      "Times a busy TLS connection's reading was paused for tls.read_coalesce_ms (read coalescing), by the listener "
      "it came in by.", METRICS_L_LISTENER, METRICS_L_NONE, "tls_read_pauses"),
    C(METRICS_MQTT_ACCEPTED, "tributary_mqtt_connections_accepted_total", "TCP connections accepted by the MQTT listener.",
      METRICS_L_NONE, METRICS_L_NONE, "connections.mqtt_accepted"),
    C(METRICS_MQTT_REFUSED, "tributary_mqtt_connections_refused_total",
      "CONNECTs refused with a CONNACK, by reason.", METRICS_L_REFUSE, METRICS_L_NONE, "connections.mqtt_refused"),
    C(METRICS_MQTT_CLOSED, "tributary_mqtt_connections_closed_total",
      "MQTT connections the gateway closed on its own, by reason.", METRICS_L_CLOSE, METRICS_L_NONE,
      "connections.mqtt_closed"),
    G(METRICS_SESSIONS_PERSISTENT, "tributary_mqtt_sessions_persistent",
      "Persistent MQTT sessions, connected or not (what mqtt.max_sessions bounds).", 1, METRICS_L_NONE,
      "sessions.persistent", false),
    G(METRICS_SESSIONS_REMEMBERED, "tributary_mqtt_sessions_remembered",
      "Persistent MQTT sessions whose client is not connected, kept until they expire.", 1, METRICS_L_NONE,
      "sessions.remembered", false),
    G(METRICS_WILLS_PENDING, "tributary_mqtt_wills_pending",
      "MQTT 5 wills waiting out their Will Delay Interval.", 1, METRICS_L_NONE, "sessions.wills_pending", false),
    G(METRICS_JOURNAL_BYTES, "tributary_session_journal_bytes",
      "Bytes of the session journal ($sessions) on disk.", 1, METRICS_L_NONE, "sessions.journal_bytes", false),
    G(METRICS_WILL_BYTES, "tributary_mqtt_will_bytes",
      "Memory the wills hold: connected clients' and delayed ones (what mqtt.max_will_bytes bounds).", 1,
      METRICS_L_NONE, "sessions.will_bytes", false),
    G(METRICS_HTTP_CONNECTIONS, "tributary_http_connections", "Open HTTP connections to this endpoint.", 1,
      METRICS_L_NONE, "connections.http", false),
    C(METRICS_HTTP_REQUESTS, "tributary_http_requests_total", "HTTP responses sent, by status code.", METRICS_L_CODE,
      METRICS_L_NONE, NULL),
    C(METRICS_HTTP_REFUSED, "tributary_http_connections_refused_total",
      "HTTP connections answered 503 and closed because every slot was busy writing a response.", METRICS_L_NONE,
      METRICS_L_NONE, NULL),
    C(METRICS_HTTP_EVICTED, "tributary_http_connections_evicted_total",
      "HTTP connections closed to make room for a new one (the longest-waiting idle or incomplete one).",
      METRICS_L_NONE, METRICS_L_NONE, NULL),
    C(METRICS_HTTP_TIMEOUTS, "tributary_http_timeouts_total",
      "HTTP connections closed by a deadline: request (whole request not received), idle, write, handshake "
      "(http.tls: the TLS handshake not done within the request deadline).", METRICS_L_TIMEOUT, METRICS_L_NONE, NULL),
    C(METRICS_HTTP_TLS_FAILED, "tributary_http_tls_handshake_failures_total",
      "HTTPS connections closed because their TLS handshake failed (not TLS, no client certificate http.tls.ca_file "
      "trusts where one is required, nothing in common).", METRICS_L_NONE, METRICS_L_NONE, NULL),
    [METRICS_WAL_FSYNC_SECONDS] = { METRICS_WAL_FSYNC_SECONDS,
                                 { "tributary_wal_fsync_duration_seconds", METRICS_HISTOGRAM,
                                   "Time one fdatasync of the write-ahead log took.", NS_PER_S, fsync_bounds_ns,
                                   TB_ARRAY_LEN(fsync_bounds_ns) },
                                 METRICS_L_NONE, METRICS_L_NONE, NULL, false },
    G(METRICS_WAL_TOPIC_LIMIT, "tributary_wal_topic_limit_bytes",
      "Disk bound of each topic's log (wal.max_topic_bytes); past it its on_full acts: drop_oldest drops the oldest "
      "segment, drop_newest refuses new messages.", 1, METRICS_L_NONE,
      "wal_limits.topic_bytes", false),
    G(METRICS_WAL_TOTAL_LIMIT, "tributary_wal_total_limit_bytes",
      "Disk bound of the whole log (wal.max_total_bytes); past it the writing topic's on_full acts: drop_oldest "
      "drops the oldest segment overall, drop_newest refuses new messages.", 1,
      METRICS_L_NONE, "wal_limits.total_bytes", false),
    G(METRICS_WAL_FREE_BYTES, "tributary_wal_free_bytes",
      "Free bytes on the file system holding wal.dir, as the log's writer last estimated them (a statvfs reading "
      "every second, less what the log wrote since).", 1, METRICS_L_NONE, "wal_limits.free_bytes", false),
    G(METRICS_WAL_MIN_FREE, "tributary_wal_min_free_bytes",
      "The free-space floor (wal.min_free_bytes, in bytes): below it the log behaves as full; 0 when off.", 1,
      METRICS_L_NONE, "wal_limits.min_free_bytes", false),
    G(METRICS_CLUSTER_UP, "tributary_cluster_up", "1 when the replication stream to the cluster is established.", 1,
      METRICS_L_NONE, "cluster.up", true),
    G(METRICS_READY, "tributary_ready", "1 when /readyz answers 200.", 1, METRICS_L_NONE, "ready", true),
    G(METRICS_LOOP_LAG, "tributary_event_loop_lag_seconds",
      "How late the event loop's last health tick ran; high values mean the loop is blocked.", NS_PER_S, METRICS_L_NONE,
      "event_loop_lag_seconds", false),
    G(METRICS_CONFIG_FILE_VALID, "tributary_config_file_valid",
      "1 while the configuration file passed the last reload's check (a refused reload: 0, and a restart would fail).",
      1, METRICS_L_NONE, "config.file_valid", true),
    G(METRICS_BUILD_INFO, "tributary_build_info", "Always 1; the version is the label.", 1, METRICS_L_VERSION, NULL, false),

    /* the process */
    G(METRICS_PROC_RSS, "process_resident_memory_bytes", "Resident memory size in bytes.", 1, METRICS_L_NONE,
      "process.resident_memory_bytes", false),
    G(METRICS_PROC_VSIZE, "process_virtual_memory_bytes", "Virtual memory size in bytes.", 1, METRICS_L_NONE,
      "process.virtual_memory_bytes", false),
    [METRICS_PROC_CPU] = { METRICS_PROC_CPU,
                        { "process_cpu_seconds_total", METRICS_COUNTER, "User and system CPU time spent in seconds.",
                          NS_PER_S, NULL, 0 },
                        METRICS_L_NONE, METRICS_L_NONE, "process.cpu_seconds", false },
    G(METRICS_PROC_OPEN_FDS, "process_open_fds", "Open file descriptors.", 1, METRICS_L_NONE, "process.open_fds", false),
    G(METRICS_PROC_MAX_FDS, "process_max_fds", "Limit on open file descriptors (RLIMIT_NOFILE).", 1, METRICS_L_NONE,
      "process.max_fds", false),
    G(METRICS_PROC_START_TIME, "process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.",
      MS_PER_S, METRICS_L_NONE, "process.start_time_seconds", false),
    C(METRICS_PROC_WRITE_BYTES, "tributary_process_disk_write_bytes_total",
      "Bytes this process caused to be written to storage (/proc/self/io write_bytes).", METRICS_L_NONE, METRICS_L_NONE,
      "process.disk_write_bytes"),
    C(METRICS_PROC_READ_BYTES, "tributary_process_disk_read_bytes_total",
      "Bytes this process caused to be read from storage (/proc/self/io read_bytes).", METRICS_L_NONE, METRICS_L_NONE,
      "process.disk_read_bytes"),
    /* per output (issue 17): /stats outputs[] (http_stats.c), lanes in outputs[].topics[] */
    G(METRICS_OUTPUT_UP, "tributary_output_up",
      "1 while the output is connected (mqtt: CONNACK accepted; danube: the cluster's channel ready and "
      "registered).", 1, METRICS_L_OUTPUT, "up", true),
    [METRICS_OUTPUT_STATE] = { METRICS_OUTPUT_STATE, { "tributary_output_state", METRICS_GAUGE,
      "1 for the output's current connection state (label state): connecting, up, backoff, refused (the remote "
      "refused CONNECT: bad credentials, not authorized), stopped, idle; danube: connecting, connected, "
      "unreachable.", 1, NULL, 0 }, METRICS_L_OUTPUT, METRICS_L_OUTPUT_STATE, NULL, false },
    C(METRICS_OUTPUT_ATTEMPTS, "tributary_output_connect_attempts_total",
      "Connection attempts of the output (mqtt: each a fresh libmosquitto handle).", METRICS_L_OUTPUT,
      METRICS_L_NONE, "attempts"),
    C(METRICS_OUTPUT_SESSIONS, "tributary_output_sessions_total",
      "Sessions the remote accepted (mqtt: CONNACK 0).", METRICS_L_OUTPUT, METRICS_L_NONE, "sessions"),
    C(METRICS_OUTPUT_REFUSALS, "tributary_output_refusals_total",
      "CONNECTs the remote refused (bad user name or password, not authorized, ...); retried with backoff.",
      METRICS_L_OUTPUT, METRICS_L_NONE, "refusals"),
    C(METRICS_OUTPUT_FAILURES, "tributary_output_failures_total",
      "Attempts or sessions of the output that ended in an error (refusals included).", METRICS_L_OUTPUT,
      METRICS_L_NONE, "failures"),
    G(METRICS_OUTPUT_INFLIGHT, "tributary_output_inflight",
      "Messages the output sent and the remote has not acknowledged yet.", 1, METRICS_L_OUTPUT, "inflight", false),
    C(METRICS_OUTPUT_DEAD_LETTERS, "tributary_output_dead_letters_total",
      "Records the output cannot carry (its remote topic too long or invalid): skipped, counted.",
      METRICS_L_OUTPUT, METRICS_L_NONE, "dead_letters"),
    C(METRICS_OUTPUT_REPLICATED, "tributary_output_replicated_total",
      "Messages received since start that this output's remote acknowledged while they were in the log.",
      METRICS_L_OUTPUT, METRICS_L_TOPIC, "replicated"),
    C(METRICS_OUTPUT_ACKED, "tributary_output_acked_total",
      "Messages this output's remote acknowledged since start (the backlog from before the start included).",
      METRICS_L_OUTPUT, METRICS_L_TOPIC, "acked"),
    G2(METRICS_OUTPUT_ACKED_OFFSET, "tributary_output_acked_offset",
       "The output's checkpoint in the topic's log: every offset up to it is acknowledged by its remote.", 1,
       METRICS_L_OUTPUT, METRICS_L_TOPIC, "acked_offset"),
    G2(METRICS_OUTPUT_LAG_MESSAGES, "tributary_output_lag_messages",
       "Messages stored after the output's checkpoint: not yet acknowledged by its remote.", 1, METRICS_L_OUTPUT,
       METRICS_L_TOPIC, "lag_messages"),
    G2(METRICS_OUTPUT_LAG_BYTES, "tributary_output_lag_bytes",
       "Bytes of the records after the output's checkpoint.", 1, METRICS_L_OUTPUT, METRICS_L_TOPIC, "lag_bytes"),
    G2(METRICS_OUTPUT_OLDEST_AGE, "tributary_output_oldest_unacked_age_seconds",
       "Age of the oldest message the output has read and its remote not acknowledged; 0 when caught up.",
       MS_PER_S, METRICS_L_OUTPUT, METRICS_L_TOPIC, "oldest_unacked_age_seconds"),
    C(METRICS_OUTPUT_SENT, "tributary_output_sent_total",
      "Units the output sent (mqtt: PUBLISHes; danube: batches), resends included.", METRICS_L_OUTPUT,
      METRICS_L_TOPIC, "sent"),
    C(METRICS_OUTPUT_RESENT, "tributary_output_resent_total",
      "Units sent again after a lost session or stream (mqtt: PUBLISHes from checkpoint + 1, marked "
      "tributary.replayed): the duplicates the remote may see.", METRICS_L_OUTPUT, METRICS_L_TOPIC, "resent"),
    C(METRICS_OUTPUT_DROPPED, "tributary_output_dropped_total",
      "Messages received since start that a disk bound deleted before this output's remote acknowledged them.",
      METRICS_L_OUTPUT, METRICS_L_TOPIC, "dropped"),
    C(METRICS_OUTPUT_DROPPED_IN_FLIGHT, "tributary_output_dropped_in_flight_total",
      "Messages acknowledged by this output's remote after a disk bound had deleted them (counted in dropped).",
      METRICS_L_OUTPUT, METRICS_L_TOPIC, "dropped_in_flight"),
    C(METRICS_DEAD_LETTERED, "tributary_messages_dead_lettered_total",
      "Messages received since start whose batch the cluster refused replicator.max_attempts times with a "
      "permanent status, passed by the checkpoint once kept in the dead-letter log (the invariant's term).",
      METRICS_L_TOPIC, METRICS_L_NONE, "dead_lettered"),
    C(METRICS_DEAD_LETTERS, "tributary_dead_letters_total",
      "Records stored in the dead-letter log, by topic and reason: invalid_schema (the gateway's validation), "
      "cluster_* (a batch the cluster refused for good), operator, output_type_mismatch and output_unroutable (a record an "
      "mqtt or sparkplug output cannot carry).", METRICS_L_TOPIC, METRICS_L_DL, "dead_letters"),
    C(METRICS_DL_LOG_DROPPED, "tributary_dead_letter_log_dropped_total",
      "Dead letters deleted unread by the dead-letter log's own bound (mqtt.dead_letter_max_bytes, oldest first); "
      "persistent.", METRICS_L_NONE, METRICS_L_NONE, "dead_letter_log.dropped_total"),
    G(METRICS_CLUSTER_REFUSED, "tributary_cluster_credentials_refused",
      "1 while the cluster refuses the edge's credentials (UNAUTHENTICATED, PERMISSION_DENIED) or has no edge "
      "service: not an outage, /readyz stays 200 and says so.", 1, METRICS_L_NONE, "cluster.credentials_refused", true),
    /* the wear accounting (docs/WAL.md "Flash wear"): what the log wrote since start, by why */
    C(METRICS_WAL_WRITTEN_BYTES, "tributary_wal_written_bytes_total",
      "Bytes the write-ahead log handed to write/pwrite since start, by cause: record, pad, probe, segment "
      "(headers), checkpoint, reserve, drop, switch (meta replaces), repair, state, other. Not what the device "
      "wrote: a replaced meta file is its size here and a page or more in the process's write_bytes.",
      METRICS_L_WAL_CAUSE, METRICS_L_NONE, "wal.written_bytes"),
    C(METRICS_WAL_WRITES, "tributary_wal_writes_total",
      "Writes of the write-ahead log since start, by cause (one per record batch write, padding record or "
      "segment header; one per file replaced atomically).", METRICS_L_WAL_CAUSE, METRICS_L_NONE, "wal.writes"),
    C(METRICS_WAL_SYNCS, "tributary_wal_syncs_total",
      "fdatasync and fsync calls of the write-ahead log since start, by cause; a directory's included (a file "
      "replaced atomically is two).", METRICS_L_WAL_CAUSE, METRICS_L_NONE, "wal.syncs"),
    C(METRICS_TOPICS_RETIRED, "tributary_wal_topics_retired_total",
      "Topics retired since start: a reload removed their last mapping, their backlog was replicated to every "
      "output, then their directory was removed (wal.retire: remove; their next offset and counters kept in "
      "<wal.dir>/RETIRED) or kept (wal.retire: keep).", METRICS_L_NONE, METRICS_L_NONE, "retire.retired_total"),
    G(METRICS_TOPICS_RETIRING, "tributary_wal_topics_retiring",
      "Topics no mapping routes to whose backlog is still being replicated (then retired).", 1, METRICS_L_NONE,
      "retire.retiring", false),
};

const char *const metrics_dl_reasons[METRICS_DL__COUNT] = {
    [METRICS_DL_INVALID_SCHEMA] = "invalid_schema",
    [METRICS_DL_CLUSTER_INVALID_ARGUMENT] = "cluster_invalid_argument",
    [METRICS_DL_CLUSTER_FAILED_PRECONDITION] = "cluster_failed_precondition",
    [METRICS_DL_CLUSTER_OUT_OF_RANGE] = "cluster_out_of_range",
    [METRICS_DL_CLUSTER_TOO_LARGE] = "cluster_too_large",
    [METRICS_DL_OPERATOR] = "operator",
    [METRICS_DL_OUTPUT_TYPE_MISMATCH] = "output_type_mismatch",
    [METRICS_DL_OUTPUT_UNROUTABLE] = "output_unroutable",
};

const char *const metrics_reject_reasons[METRICS_REJECT__COUNT] = {
    [METRICS_REJECT_SCHEMA_INVALID] = "schema_invalid",
    [METRICS_REJECT_SCHEMA_UNAVAILABLE] = "schema_unavailable",
    [METRICS_REJECT_PAYLOAD_TOO_LARGE] = "payload_too_large",
    [METRICS_REJECT_WAL_UNAVAILABLE] = "wal_unavailable",
    [METRICS_REJECT_FULL] = "full",
};

/* the names rep_retry_name() gives (a unit test checks they agree) */
const char *const metrics_retry_reasons[] = { "unavailable", "ack_timeout", "status", "protocol", "lookup",
                                              "permanent", "refused" };
const size_t metrics_nretry_reasons = TB_ARRAY_LEN(metrics_retry_reasons);

const char *const metrics_mqtt_refuse_reasons[METRICS_REFUSE__COUNT] = {
    [METRICS_REFUSE_MAX_CONNECTIONS] = "max_connections",
    [METRICS_REFUSE_CLIENT_ID] = "client_id_invalid",
    [METRICS_REFUSE_AUTH] = "auth_unsupported",
    [METRICS_REFUSE_SHUTTING_DOWN] = "shutting_down",
    [METRICS_REFUSE_MAX_SESSIONS] = "max_sessions",
    [METRICS_REFUSE_JOURNAL_FULL] = "journal_full",
    [METRICS_REFUSE_WILL_INVALID] = "will_invalid",
    [METRICS_REFUSE_MAX_WILL_BYTES] = "max_will_bytes",
    [METRICS_REFUSE_AUTH_BAD_PASSWORD] = "bad_password",
    [METRICS_REFUSE_AUTH_UNKNOWN_USER] = "unknown_user",
    [METRICS_REFUSE_AUTH_ANONYMOUS] = "anonymous",
    [METRICS_REFUSE_AUTH_THROTTLED] = "auth_throttled",
    [METRICS_REFUSE_WILL_DENIED] = "will_denied",
};

const char *const metrics_batch_reasons[METRICS_BATCH__COUNT] = {
    [METRICS_BATCH_FULL] = "full",
    [METRICS_BATCH_TIMEOUT] = "timeout",
    [METRICS_BATCH_IDLE] = "idle",
    [METRICS_BATCH_FLUSH] = "flush",
    [METRICS_BATCH_TURN] = "turn",
};

const char *const metrics_modes[METRICS_MODE__COUNT] = { "log", "memory", "spilling", "draining", "ready" };
const char *const metrics_spill_reasons[METRICS_SPILL__COUNT] = { "timeout", "bytes", "output", "shutdown" };
const char *const metrics_wal_causes[METRICS_WAL_CAUSE__COUNT] = {
    "record", "pad", "probe", "segment", "checkpoint", "reserve", "drop", "switch", "repair", "state", "other",
};
const char *const metrics_drop_reasons[METRICS_DROP__COUNT] = {
    [METRICS_DROP_BOUND] = "bound",
    [METRICS_DROP_AGE] = "age",
    [METRICS_DROP_SPILL] = "spill",
    [METRICS_DROP_FORGOTTEN] = "forgotten",
};

const char *const metrics_mqtt_close_reasons[METRICS_CLOSE__COUNT] = {
    [METRICS_CLOSE_MALFORMED] = "malformed",
    [METRICS_CLOSE_CONNECT_TIMEOUT] = "connect_timeout",
    [METRICS_CLOSE_KEEPALIVE_TIMEOUT] = "keepalive_timeout",
    [METRICS_CLOSE_WRITE_ERROR] = "write_error",
    [METRICS_CLOSE_UNREAD_LIMIT] = "unread_limit",
    [METRICS_CLOSE_WRITE_TIMEOUT] = "write_timeout",
    [METRICS_CLOSE_PACKET_TIMEOUT] = "packet_timeout",
    [METRICS_CLOSE_MEMORY_LIMIT] = "memory_limit",
    [METRICS_CLOSE_TLS_HANDSHAKE] = "tls_handshake",
};

const int metrics_http_codes[] = { 200, 400, 401, 404, 405, 408, 413, 431, 500, 503, 505, 0 /* other */ };
static const char *const http_code_names[] = { "200", "400", "401", "404", "405", "408", "413",
                                               "431", "500", "503", "505", "other" };
const size_t metrics_nhttp_codes = TB_ARRAY_LEN(http_code_names);

size_t metrics_http_code_index(int status)
{
    for (size_t i = 0; i + 1 < metrics_nhttp_codes; i++)
        if (metrics_http_codes[i] == status)
            return i;
    return metrics_nhttp_codes - 1;
}

const char *const metrics_output_states[METRICS_OUTPUT_STATE__COUNT] = {
    "connecting", "up", "backoff", "refused", "stopped", "idle", "connected", "unreachable",
};

int metrics_output_state_index(const char *s)
{
    for (int i = 0; s && i < METRICS_OUTPUT_STATE__COUNT; i++)
        if (strcmp(metrics_output_states[i], s) == 0)
            return i;
    return -1;
}

static const char *const timeout_names[METRICS_HTTP_TIMEOUT__COUNT] = { "request", "idle", "write", "handshake" };
static const char *const versions[] = { TRIB_VERSION };

int metrics_catalog_register(metrics_t *m, size_t max_topics)
{
    int rc;
    metrics_labels_t **L = m->catalog_labels;
    if ((rc = metrics_labels_bounded(m, "topic", max_topics, &L[METRICS_L_TOPIC])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_reject_reasons, METRICS_REJECT__COUNT, &L[METRICS_L_REASON])) < 0 ||
        (rc = metrics_labels_fixed(m, "code", http_code_names, metrics_nhttp_codes, &L[METRICS_L_CODE])) < 0 ||
        (rc = metrics_labels_fixed(m, "kind", timeout_names, METRICS_HTTP_TIMEOUT__COUNT, &L[METRICS_L_TIMEOUT])) < 0 ||
        (rc = metrics_labels_fixed(m, "version", versions, TB_ARRAY_LEN(versions), &L[METRICS_L_VERSION])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_retry_reasons, metrics_nretry_reasons,
                                      &L[METRICS_L_RETRY])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_mqtt_refuse_reasons, METRICS_REFUSE__COUNT,
                                      &L[METRICS_L_REFUSE])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_mqtt_close_reasons, METRICS_CLOSE__COUNT,
                                      &L[METRICS_L_CLOSE])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_batch_reasons, METRICS_BATCH__COUNT, &L[METRICS_L_BATCH])) < 0 ||
        (rc = metrics_labels_bounded(m, "listener", METRICS_MAX_LISTENERS, &L[METRICS_L_LISTENER])) < 0 ||
        (rc = metrics_labels_fixed(m, "mode", metrics_modes, METRICS_MODE__COUNT, &L[METRICS_L_MODE])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_spill_reasons, METRICS_SPILL__COUNT, &L[METRICS_L_SPILL])) < 0 ||
        (rc = metrics_labels_bounded(m, "output", METRICS_MAX_OUTPUTS, &L[METRICS_L_OUTPUT])) < 0 ||
        (rc = metrics_labels_fixed(m, "state", metrics_output_states, METRICS_OUTPUT_STATE__COUNT,
                                   &L[METRICS_L_OUTPUT_STATE])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_dl_reasons, METRICS_DL__COUNT, &L[METRICS_L_DL])) < 0 ||
        (rc = metrics_labels_fixed(m, "reason", metrics_drop_reasons, METRICS_DROP__COUNT, &L[METRICS_L_DROP])) < 0 ||
        (rc = metrics_labels_fixed(m, "cause", metrics_wal_causes, METRICS_WAL_CAUSE__COUNT,
                                   &L[METRICS_L_WAL_CAUSE])) < 0)
        return rc;
    for (size_t i = 0; i < METRICS__COUNT; i++) {
        const metrics_entry_t *e = &metrics_catalog[i];
        if (e->id != (metrics_id_t)i || !e->spec.name)
            return TB_EINVALID; /* the table is out of order or has a hole */
        rc = metrics_register(m, &e->spec, L[e->l1], L[e->l2], &m->catalog[i]);
        if (rc < 0) {
            tb_error("metric catalog entry rejected", TB_S("metric", e->spec.name), TB_ERR(rc));
            return rc;
        }
    }
    metrics_set(m->catalog[METRICS_BUILD_INFO], 0, 0, 1);
    return metrics_add_collector(m, metrics__proc_collect, NULL);
}

metrics_family_t *metrics_fam(metrics_t *m, metrics_id_t id)
{
    return (unsigned)id < METRICS__COUNT ? m->catalog[id] : NULL;
}

metrics_labels_t *metrics_topics(metrics_t *m)
{
    return m->catalog_labels[METRICS_L_TOPIC];
}

int metrics_topic_add(metrics_t *m, const char *topic)
{
    metrics_labels_t *l = m->catalog_labels[METRICS_L_TOPIC];
    return l ? metrics_labels_add(l, topic) : TB_EINVALID;
}

metrics_labels_t *metrics_listeners(metrics_t *m)
{
    return m->catalog_labels[METRICS_L_LISTENER];
}

int metrics_listener_add(metrics_t *m, const char *addr)
{
    metrics_labels_t *l = m->catalog_labels[METRICS_L_LISTENER];
    return l ? metrics_labels_add(l, addr) : TB_EINVALID;
}

metrics_labels_t *metrics_outputs(metrics_t *m)
{
    return m->catalog_labels[METRICS_L_OUTPUT];
}

int metrics_output_add(metrics_t *m, const char *name)
{
    metrics_labels_t *l = m->catalog_labels[METRICS_L_OUTPUT];
    return l ? metrics_labels_add(l, name) : TB_EINVALID;
}

bool metrics_topic_balance(metrics_t *m, size_t t, metrics_balance_t *out)
{
    memset(out, 0, sizeof *out);
    metrics_labels_t *topics = m->catalog_labels[METRICS_L_TOPIC];
    if (!topics || t >= metrics_labels_count(topics))
        return false;
    out->received = (uint64_t)metrics_get(m->catalog[METRICS_RECEIVED], t, 0);
    out->replicated = (uint64_t)metrics_get(m->catalog[METRICS_REPLICATED], t, 0);
    out->queued = (uint64_t)metrics_get(m->catalog[METRICS_QUEUED], t, 0);
    for (size_t r = 0; r < METRICS_DROP__COUNT; r++) /* the bound's, max_age's, a refused spill's, a forget's */
        out->dropped += (uint64_t)metrics_get(m->catalog[METRICS_DROPPED], t, r);
    for (size_t r = 0; r < METRICS_REJECT__COUNT; r++)
        out->rejected += (uint64_t)metrics_get(m->catalog[METRICS_REJECTED], t, r);
    out->dead_lettered = (uint64_t)metrics_get(m->catalog[METRICS_DEAD_LETTERED], t, 0);
    out->ok = out->received == out->replicated + out->queued + out->dropped + out->rejected + out->dead_lettered;
    return true;
}

bool metrics_catalog_derive(metrics_t *m)
{
    metrics_labels_t *topics = m->catalog_labels[METRICS_L_TOPIC];
    if (!topics)
        return true;
    bool all = true;
    for (size_t t = 0; t < metrics_labels_count(topics); t++) {
        metrics_balance_t b;
        metrics_topic_balance(m, t, &b);
        metrics_set(m->catalog[METRICS_TOPIC_INVARIANT_OK], t, 0, b.ok);
        all = all && b.ok;
    }
    metrics_set(m->catalog[METRICS_INVARIANT_OK], 0, 0, all);
    return all;
}
