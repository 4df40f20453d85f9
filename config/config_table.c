/*
 * config_table.c: every configuration key, once.
 *
 * Parsing, defaults, environment overrides, `tributary config --describe`
 * and docs/CONFIG.md all read this table. Adding a key = one row here plus
 * the field in cfg_t. Keys marked DANUBE are those of Danube's own
 * edge.yaml, with Danube's defaults, so its file is accepted unchanged.
 */
#include "config/config_int.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define K(path_, type_, field_, def_, min_, max_, enums_, flags_, desc_) \
    { path_, type_, offsetof(cfg_t, field_), def_, min_, max_, enums_, flags_, desc_ }
#define L(path_, type_, field_, def_, min_, max_, enums_, flags_, desc_) \
    { path_, type_, offsetof(cfg_listener_t, field_), def_, min_, max_, enums_, flags_, desc_ }
#define M(path_, type_, field_, def_, min_, max_, enums_, flags_, desc_) \
    { path_, type_, offsetof(cfg_mapping_t, field_), def_, min_, max_, enums_, flags_, desc_ }
/* Every key of an output is live: a reload applies an mqtt or sparkplug output's change by
 * replacing that output alone (its caps in place), and names a danube output's as needing a
 * restart (gateway/reload.c, apply_output; docs/design/OUTPUTS.md 3.5). */
#define O(path_, type_, field_, def_, min_, max_, enums_, flags_, desc_) \
    { path_, type_, offsetof(cfg_output_t, field_), def_, min_, max_, enums_, (flags_) | CFG__F_RELOAD, desc_ }

#define D CFG__F_DANUBE
#define R CFG__F_REQUIRED
#define S CFG__F_SECRET
#define T CFG__F_TEMPLATE
#define KD CFG__F_K_DANUBE
#define KM CFG__F_K_MQTT
#define KS CFG__F_K_SPB
#define KALL (KD | KM | KS)
#define RL CFG__F_RELOAD /* reload class LIVE (cfg_reload_class): a reload applies it */
#define U32MAX 4294967295u
#define DAY_MS 86400000u

static const char *const fsync_modes[] = { "always", "interval", "never", NULL };
static const char *const policies[] = { "none", "enforce", NULL };
static const char *const encodings[] = { "binary", "json", NULL };
static const char *const unmatched_modes[] = { "reject", "drop", NULL };
static const char *const log_levels[] = { "debug", "info", "warn", "error", NULL };
static const char *const log_formats[] = { "text", "json", NULL };
static const char *const anon_modes[] = { "auto", "true", "false", NULL };
static const char *const throttle_modes[] = { "delay", "refuse", NULL };
static const char *const tls_versions[] = { "1.2", "1.3", NULL };
static const char *const retire_modes[] = { "remove", "keep", NULL }; /* cfg_retire_t */
static const char *const on_full_modes[] = { "drop_oldest", "drop_newest", "block", NULL }; /* cfg_on_full_t */
static const char *const durabilities[] = { "log", "memory_first", NULL };   /* cfg_durability_t */
static const char *const qos2_states[] = { "runtime", "journal", NULL };     /* cfg_qos2_state_t */
static const char *const mf_acks[] = { "upstream", "received", NULL };          /* cfg_mf_ack_t */
const char *const cfg__output_kinds[] = { "danube", "mqtt", "sparkplug", NULL }; /* cfg_output_kind_t */
static const char *const spb_hist_modes[] = { "flag", "separate", NULL };   /* cfg_spb_historical_t */

const cfg__key_t cfg__keys[] = {
    K("edge.edge_name", CFG__STR, edge.edge_name, NULL, 1, 128, NULL, D | R,
      "Name of this edge; every danube_topic must be under /{edge_name}/."),
    K("edge.cluster_url", CFG__URL, edge.cluster_url, NULL, 0, 0, NULL, D,
      "Danube cluster gRPC endpoint, http://host:port or https://host:port. Required while a danube output "
      "exists (always, without an outputs section)."),
    K("edge.token", CFG__STR, edge.token, "", 0, 4096, NULL, D | S,
      "Bearer token sent as `authorization: Bearer <token>`; empty = no auth. Never logged."),
    K("edge.heartbeat_interval_ms", CFG__MS, edge.heartbeat_interval_ms, "30000", 100, DAY_MS, NULL, D,
      "Interval between heartbeats that keep schemas in step with the cluster."),
    K("edge.tls.ca_file", CFG__STR, edge.tls.ca_file, "", 0, 4096, NULL, 0,
      "With an https cluster_url: PEM file of the CAs to trust; empty = gRPC's default roots."),
    K("edge.tls.cert_file", CFG__STR, edge.tls.cert_file, "", 0, 4096, NULL, 0,
      "With an https cluster_url: PEM client certificate (mutual TLS); needs key_file."),
    K("edge.tls.key_file", CFG__STR, edge.tls.key_file, "", 0, 4096, NULL, 0,
      "With an https cluster_url: PEM private key of cert_file."),

    K("replicator.batch_size", CFG__U32, replicator.batch_size, "100", 1, 100000, NULL, D,
      "Most messages per ReplicateBatch sent to the cluster."),
    K("replicator.batch_timeout_ms", CFG__MS, replicator.batch_timeout_ms, "1000", 0, 600000, NULL, D,
      "Longest a message waits for its replication batch to fill, from the batch's first message."),
    K("replicator.max_batch_bytes", CFG__BYTES, replicator.max_batch_bytes, "1MiB", 4096, 64ull << 20, NULL, 0,
      "Most bytes per ReplicateBatch (encoded); a single larger message goes alone. Danube's server "
      "refuses gRPC messages over 4 MiB."),
    K("replicator.max_inflight_batches", CFG__U32, replicator.max_inflight_batches, "4", 1, 1024, NULL, 0,
      "Batches sent and not yet acknowledged, per topic, on its one ReplicateData stream."),
    K("replicator.ack_timeout_ms", CFG__MS, replicator.ack_timeout_ms, "5000", 100, 600000, NULL, 0,
      "A batch not acknowledged within this time cancels the stream; it is rebuilt from the last ack."),
    K("replicator.rpc_timeout_ms", CFG__MS, replicator.rpc_timeout_ms, "10000", 100, 600000, NULL, 0,
      "Deadline of each RegisterEdge, EdgeHeartbeat and TopicLookup call."),
    K("replicator.checkpoint_interval_ms", CFG__MS, replicator.checkpoint_interval_ms, "5000", 0, 600000, NULL, 0,
      "Acknowledged offsets reach disk at most this often (and at shutdown); a crash re-sends at most "
      "this much, which the cluster's dedup skips."),
    K("replicator.live_window_ms", CFG__MS, replicator.live_window_ms, "2000", 0, DAY_MS, NULL, 0,
      "A message older than this when first batched is sent with attribute tributary.replayed=true."),
    K("replicator.retry_initial_ms", CFG__MS, replicator.retry_initial_ms, "100", 1, 600000, NULL, 0,
      "First delay before a failed stream is rebuilt; doubles per failure (full jitter)."),
    K("replicator.retry_max_ms", CFG__MS, replicator.retry_max_ms, "30000", 1, DAY_MS, NULL, 0,
      "Cap of the stream rebuild delay."),
    K("replicator.shutdown_grace_ms", CFG__MS, replicator.shutdown_grace_ms, "2000", 0, 60000, NULL, 0,
      "At shutdown, how long batches in flight may take to be acknowledged before streams are closed."),
    K("replicator.max_attempts", CFG__U32, replicator.max_attempts, "10", 1, 1000, NULL, RL,
      "Attempts of a batch the cluster refuses for good (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, "
      "RESOURCE_EXHAUSTED for one message; not INTERNAL) before its messages go to the dead-letter log "
      "(mqtt.dead_letter) and the topic moves on; each attempt waits the topic's backoff. A reload applies it (a "
      "held batch is judged by the new bound at its next refusal). Not persisted: after a restart a held batch "
      "gets them again. With mqtt.dead_letter off the batch is held and /stats says so."),

    K("outputs", CFG__OUTPUTS, outputs, NULL, 1, 16, NULL, 0,
      "Where the log's messages go: a list of outputs, each with its own reader and checkpoint (see below). "
      "Absent: one output, {name: danube, kind: danube}, the edge.cluster_url cluster (Danube's edge.yaml "
      "unchanged)."),

    K("mqtt.listener", CFG__ADDR, mqtt.listener, "0.0.0.0:1883", 0, 0, NULL, D,
      "MQTT listen address, host:port (IPv6 as [addr]:port): one plain listener. Not with mqtt.listeners, "
      "which replaces it (giving both is an error)."),
    K("mqtt.listeners", CFG__LISTENERS, mqtt.listeners, NULL, 1, 16, NULL, 0,
      "Several listeners, each plain or TLS (see below); when given, mqtt.listener must not be."),
    K("mqtt.max_payload_size", CFG__U32, mqtt.max_payload_size, "262144", 1, 268435455, NULL, D,
      "Largest PUBLISH payload accepted, in bytes."),
    K("mqtt.max_connections", CFG__U32, mqtt.max_connections, "10000", 1, 1000000, NULL, D,
      "Most MQTT sockets open at once, counting those waiting for CONNECT and those closing until their "
      "descriptor is released; past it a CONNECT is refused with a CONNACK (0x97 / 3), and 16 past it a "
      "new socket is closed unread."),
    K("mqtt.connect_timeout_ms", CFG__MS, mqtt.connect_timeout_ms, "10000", 100, 600000, NULL, 0,
      "A connection that has not sent CONNECT within this time is closed."),
    K("mqtt.max_unread_bytes", CFG__BYTES, mqtt.max_unread_bytes, "256KiB", 4096, 1ull << 30, NULL, 0,
      "Memory a connection's unread replies (acks, PINGRESPs, ...) may hold: at half of it the connection "
      "is not read from until they drain to a quarter; past it (one turn's replies) it is closed at once "
      "(reason unread_limit). Bounds what one client that does not read can cost."),
    K("mqtt.write_timeout_ms", CFG__MS, mqtt.write_timeout_ms, "10000", 100, 600000, NULL, 0,
      "A connection whose queued replies make no progress for this long is closed (reason write_timeout); "
      "a closing connection's socket is released after at most this long, sent or not."),
    K("mqtt.packet_timeout_ms", CFG__MS, mqtt.packet_timeout_ms, "30000", 100, 3600000, NULL, 0,
      "A packet that has begun to arrive must be complete within this time, whatever the keep alive "
      "(reason packet_timeout)."),
    K("mqtt.max_partial_bytes", CFG__BYTES, mqtt.max_partial_bytes, "64MiB", 65536, 1ull << 40, NULL, 0,
      "Most bytes all connections together may hold in incomplete packets and MQTT 5 topic alias tables; "
      "a connection that would pass it is closed (reason memory_limit; MQTT 5: DISCONNECT 0x97)."),
    K("mqtt.receive_maximum", CFG__U32, mqtt.receive_maximum, "1024", 1, 65535, NULL, 0,
      "MQTT 5 Receive Maximum advertised in CONNACK: unacknowledged QoS 1/2 PUBLISHes a client may have in flight."),
    K("mqtt.topic_alias_maximum", CFG__U32, mqtt.topic_alias_maximum, "64", 0, 65535, NULL, 0,
      "MQTT 5 Topic Alias Maximum advertised in CONNACK (0 disables aliases)."),
    K("mqtt.max_session_expiry_s", CFG__U32, mqtt.max_session_expiry_s, "604800", 0, 4294967295u, NULL, 0,
      "Longest a persistent session (clean_session=0, or MQTT 5 session expiry) is kept after its client goes."),
    K("mqtt.max_sessions", CFG__U32, mqtt.max_sessions, "100000", 1, 10000000, NULL, 0,
      "Most persistent sessions (connected or remembered); a CONNECT asking for a new one past it is "
      "refused (CONNACK 0x97 / 3): none already remembered is forgotten for it."),
    K("mqtt.max_journal_bytes", CFG__BYTES, mqtt.max_journal_bytes, "64MiB", 8192, 1ull << 40, NULL, 0,
      "Disk bound of the session journal ($sessions: persistent sessions, unreleased QoS 2 ids), kept "
      "outside wal.max_total_bytes so a data bound never deletes it; compacted online; when full, new "
      "persistent sessions are refused (0x97) rather than old ones forgotten. At least 2 x wal.segment_bytes."),
    K("mqtt.qos2_state", CFG__ENUM, mqtt.qos2_state, "runtime", 0, 0, qos2_states, 0,
      "Where the QoS 2 packet ids (between PUBREC and PUBREL) of persistent sessions publishing to "
      "memory_first topics are kept. runtime: a small journal in mqtt.runtime_dir, which must be a RAM file "
      "system (tmpfs/ramfs, checked at start; otherwise a warning and the session journal): no flash write per "
      "message, exactly-once across a process kill, at-least-once (resends stored again) across a reboot or "
      "power loss; journal: the session journal in wal.dir (about 8 KiB written per message with wal.fsync "
      "always). Topics with durability log always use the session journal."),
    K("mqtt.runtime_dir", CFG__STR, mqtt.runtime_dir, "/run/tributary", 1, 4096, NULL, 0,
      "Directory of the runtime QoS 2 journal (mqtt.qos2_state: runtime); created if missing. Must be on "
      "tmpfs or ramfs and survive a restart of the process but not of the machine: systemd "
      "RuntimeDirectory=tributary with RuntimeDirectoryPreserve=restart, or /dev/shm/tributary; in Kubernetes "
      "an emptyDir with medium Memory."),
    K("mqtt.max_will_bytes", CFG__BYTES, mqtt.max_will_bytes, "64MiB", 65536, 1ull << 40, NULL, 0,
      "Memory all wills may hold together (topic, payload and properties of every connected client's will "
      "and of every delayed will waiting); a CONNECT whose will would pass it is refused (CONNACK 0x97 / 3)."),
    K("mqtt.unmatched", CFG__ENUM, mqtt.unmatched, "reject", 0, 0, unmatched_modes, RL,
      "A PUBLISH no mapping matches. reject: MQTT 5 negative ack 0x90, MQTT 3.1.1 QoS 1/2 closes the "
      "connection; drop: acknowledge and count, never stored."),
    K("mqtt.dead_letter", CFG__BOOL, mqtt.dead_letter, "false", 0, 0, NULL, 0,
      "Keep payloads refused by their schema (enforce) in a local dead-letter log, topic "
      "\"$dead-letter\" in wal.dir, with the validation error; `tributary wal dump` reads it."),
    K("mqtt.dead_letter_max_bytes", CFG__BYTES, mqtt.dead_letter_max_bytes, "64MiB", 65536, 1ull << 40, NULL, 0,
      "Disk bound of the dead-letter log itself, outside wal.max_total_bytes; past it its oldest entries are "
      "dropped and counted (tributary_dead_letter_log_dropped_total). Restart to change."),
    K("mqtt.ingestion.batch_size", CFG__U32, mqtt.ingestion.batch_size, "100", 1, 100000, NULL, D,
      "Most messages per write-ahead-log batch (one write, one sync)."),
    K("mqtt.ingestion.batch_timeout_ms", CFG__MS, mqtt.ingestion.batch_timeout_ms, "500", 0, 60000, NULL, D,
      "Longest a message waits for its log batch to fill; bounds ack latency at low rates."),
    K("mqtt.ingestion.idle_flush_ms", CFG__MS, mqtt.ingestion.idle_flush_ms, "2", 0, 60000, NULL, 0,
      "Submit a topic's batch once every client with a message in it has been quiet this long (0: only "
      "size and timeout). Acks wait for the log, so clients with a full window stop sending; this keeps "
      "them from waiting for batch_timeout_ms. See docs/WAL.md for its cost in syncs."),
    K("mqtt.ingestion.idle_flush_max_ms", CFG__MS, mqtt.ingestion.idle_flush_max_ms, "25", 0, 60000, NULL, 0,
      "With wal.fsync always, a client that publishes at a steady pace without waiting for acks is waited "
      "for twice its usual gap instead of idle_flush_ms, up to this long, so its batches fill and take "
      "fewer syncs (flash wear; its acks wait longer). Not above idle_flush_ms: every client is waited for "
      "idle_flush_ms."),
    K("mqtt.ingestion.max_pending_bytes", CFG__BYTES, mqtt.ingestion.max_pending_bytes, "64MiB", 65536, 1ull << 40, NULL, 0,
      "Bytes of messages waiting for the log; past it the gateway stops reading sockets (backpressure)."),
    K("mqtt.topic_mappings", CFG__MAPPINGS, mqtt.mappings, NULL, 1, 100000, NULL, D | R | RL,
      "Ordered MQTT-topic to Danube-topic rules; the first match wins (see below)."),

    K("wal.dir", CFG__STR, wal.dir, "/var/lib/tributary/wal", 1, 4096, NULL, 0,
      "Directory of the write-ahead log (one subdirectory per upstream topic)."),
    K("wal.segment_bytes", CFG__BYTES, wal.segment_bytes, "16MiB", 4096, 1ull << 32, NULL, 0,
      "Size at which a topic's active segment is sealed and a new one started."),
    K("wal.max_topic_bytes", CFG__BYTES, wal.max_topic_bytes, "1GiB", 8192, 1ull << 50, NULL, 0,
      "Disk bound per topic; past it the oldest segment is dropped (and counted), or new messages are refused "
      "(on_full: drop_newest) or wait, their publishers not read (on_full: block)."),
    K("wal.max_total_bytes", CFG__BYTES, wal.max_total_bytes, "4GiB", 8192, 1ull << 50, NULL, 0,
      "Disk bound for the whole log; past it the oldest segment overall is dropped (and counted), or the "
      "writing topic's new messages are refused (on_full: drop_newest) or wait (on_full: block)."),
    K("wal.fsync", CFG__ENUM, wal.fsync, "always", 0, 0, fsync_modes, 0,
      "always: fdatasync before acks (group commit); interval: ack after write, sync every "
      "fsync_interval_ms; never: leave syncing to the OS."),
    K("wal.fsync_interval_ms", CFG__MS, wal.fsync_interval_ms, "1000", 1, 600000, NULL, 0,
      "Sync period for wal.fsync: interval (the power-loss window)."),
    K("wal.min_free_bytes", CFG__SPACE, wal.min_free_bytes, "2%", 0, 1ull << 50, NULL, 0,
      "Free space to leave on the file system holding wal.dir, in bytes (64MiB) or as a share of its size "
      "(2%, 0.5%; at most 50%), for the OS and other programs sharing it: below it the log behaves as at "
      "max_total_bytes (each mapping's on_full acts; the session journal is exempt) and takes writes again by "
      "itself once space returns. 0: off."),
    K("wal.durability", CFG__ENUM, wal.durability, "log", 0, 0, durabilities, 0,
      "The durability of every mapping that does not say its own (mqtt.topic_mappings[].durability). log: "
      "every message is written (and synced per wal.fsync) before its PUBACK/PUBREC; memory_first: held in "
      "memory while the cluster confirms, written to the log only when it does not (wal.memory_first.*); "
      "docs/WAL.md \"The memory tier\", docs/GUARANTEES.md."),
    K("wal.memory_first.ack", CFG__ENUM, wal.memory_first.ack, "upstream", 0, 0, mf_acks, 0,
      "memory_first topics: upstream acknowledges a QoS 1/2 message to its publisher once the cluster "
      "acknowledged it (or once it is in the log after a spill); received as soon as it is held: a hard "
      "kill with the link up then loses what was held."),
    K("wal.memory_first.spill_after_ms", CFG__MS, wal.memory_first.spill_after_ms, "250", 10, 60000, NULL, 0,
      "memory_first topics: when the cluster has not acknowledged the oldest held message within this "
      "time, everything held is written to the log (synced) and acknowledged; the topic then runs as log "
      "until its backlog is replicated, and returns to memory."),
    K("wal.memory_first.memory_bytes", CFG__BYTES, wal.memory_first.memory_bytes, "8MiB", 65536, 1ull << 30, NULL, 0,
      "memory_first topics: the most one topic holds in memory (message records); a message that would "
      "pass it makes the topic write what it holds to the log first."),
    K("wal.retire", CFG__ENUM, wal.retire, "remove", 0, 0, retire_modes, RL,
      "A topic no mapping routes to any more (a reload removed its last mapping), once its backlog is "
      "replicated to every output: remove (its directory is deleted, its next offset and counters kept in "
      "<wal.dir>/RETIRED, so a re-created topic continues above them) or keep (the directory stays, not "
      "replicated; switching back to remove retires it). Applied at a reload."),

    K("auth.password_file", CFG__STR, auth.password_file, "", 0, 4096, NULL, RL,
      "Mosquitto password file (mosquitto_passwd's format: $7$ PBKDF2-SHA512, or $6$); a CONNECT with a "
      "user name is checked against it (MQTT 5 0x86 / 3.1.1 4 when wrong). Re-read on SIGHUP; a file "
      "that fails to parse keeps the one in force. Empty: user names are not checked."),
    K("auth.acl_file", CFG__STR, auth.acl_file, "", 0, 4096, NULL, RL,
      "Mosquitto acl_file (topic, user, pattern lines): a PUBLISH or a will to a topic the client may not "
      "write is refused (MQTT 5 0x87; 3.1.1 QoS 1/2 closed, QoS 0 dropped), never stored. Re-read on "
      "SIGHUP. Empty: every topic may be written."),
    K("auth.allow_anonymous", CFG__ENUM, auth.allow_anonymous, "auto", 0, 0, anon_modes, RL,
      "Whether a CONNECT without a user name is accepted (refused: MQTT 5 0x87 / 3.1.1 5). auto: false "
      "when auth.password_file is set, true otherwise."),
    K("auth.max_failures", CFG__U32, auth.max_failures, "10", 0, 1000000, NULL, RL,
      "Failed authentications from one address within auth.failure_window_ms before its CONNECTs are "
      "throttled (auth.throttle); 0: never throttled."),
    K("auth.failure_window_ms", CFG__MS, auth.failure_window_ms, "60000", 1000, DAY_MS, NULL, RL,
      "The window auth.max_failures counts in; an address is forgiven once a window passes without a failure."),
    K("auth.throttle", CFG__ENUM, auth.throttle, "delay", 0, 0, throttle_modes, RL,
      "A throttled address: delay answers each CONNECT after auth.throttle_delay_ms (checked then, so a "
      "right password still gets in); refuse answers at once, unchecked, MQTT 5 0x9F / 3.1.1 3."),
    K("auth.throttle_delay_ms", CFG__MS, auth.throttle_delay_ms, "2000", 0, 600000, NULL, RL,
      "How long a throttled address's CONNECT waits (auth.throttle: delay)."),

    K("http.listener", CFG__ADDR, http.listener, "127.0.0.1:9090", 0, 0, NULL, 0,
      "Listen address for /metrics, /stats, /healthz and /readyz."),
    K("http.auth_token_file", CFG__STR, http.auth_token_file, "", 0, 4096, NULL, RL,
      "A file holding a bearer token (its first line): /metrics, /stats and the page then answer 401 without "
      "\"Authorization: Bearer <token>\" (or HTTP Basic with the token as password, for a browser). Read again "
      "on SIGHUP. Empty: no token."),
    K("http.auth_probes", CFG__BOOL, http.auth_probes, "false", 0, 0, NULL, 0,
      "With http.auth_token_file: /healthz and /readyz ask for the token too (false: probes stay open)."),
    K("http.admin_token_file", CFG__STR, http.admin_token_file, "", 0, 4096, NULL, RL,
      "A file holding the admin API's bearer token (its first line, as http.auth_token_file): /admin/... then "
      "answer 401 without \"Authorization: Bearer <token>\", from any peer. Empty: the admin API answers loopback "
      "peers only (403 to others), with the http.auth_token_file token when that is set. Read again on SIGHUP "
      "and POST /admin/reload."),
    /* http.tls: the keys of a listener's tls mapping, the same meaning (docs/SECURITY.md) */
    K("http.tls.cert_file", CFG__STR, http.tls.cert_file, "", 0, 4096, NULL, RL,
      "With http.tls: the endpoint serves HTTPS only, with this PEM server certificate (optionally followed "
      "by its intermediate CAs); needs key_file. Read at start (a file that does not load is a "
      "configuration error) and again on SIGHUP. Without http.tls: plain HTTP."),
    K("http.tls.key_file", CFG__STR, http.tls.key_file, "", 0, 4096, NULL, RL,
      "With http.tls: PEM private key of cert_file (unencrypted)."),
    K("http.tls.ca_file", CFG__STR, http.tls.ca_file, "", 0, 4096, NULL, RL,
      "PEM CAs that HTTPS client certificates are checked against; a client may then present one, and an "
      "untrusted one fails the handshake. Empty: no client certificate is asked for."),
    K("http.tls.require_client_cert", CFG__BOOL, http.tls.require_client_cert, "false", 0, 0, NULL, RL,
      "An HTTPS client without a certificate that ca_file trusts fails the handshake (needs ca_file); "
      "probes then need one too."),
    K("http.tls.min_version", CFG__ENUM, http.tls.min_version, "1.2", 0, 0, tls_versions, RL,
      "Oldest TLS version the endpoint accepts: 1.2 or 1.3."),
    K("http.tls.ciphers", CFG__STR, http.tls.ciphers, "", 0, 4096, NULL, RL,
      "OpenSSL cipher list for TLS 1.2 (`openssl ciphers` syntax); empty: OpenSSL's default. TLS 1.3 "
      "suites are OpenSSL's."),

    K("shutdown_timeout_ms", CFG__MS, shutdown_timeout_ms, "25000", 1000, 600000, NULL, 0,
      "Longest the SIGTERM drain may take before the process exits anyway (the log stays consistent); "
      "keep it under the orchestrator's grace period (Kubernetes: 30 s)."),
    K("health.stall_after_ms", CFG__MS, health.stall_after_ms, "30000", 100, DAY_MS, NULL, 0,
      "A topic is stalled when messages wait and no acknowledgement from the cluster has moved it for "
      "this long (counted from when they began to wait): /stats, tributary_topic_stalled, and one log "
      "line when it starts and one when it ends."),
    K("reload.watch_ms", CFG__MS, reload.watch_ms, "0", 0, 3600000, NULL, 0,
      "How often edge.yaml and the files it names are checked for a change, which then starts a reload as "
      "SIGHUP does (edge.yaml's bytes, and the device, inode, size and mtime of the password, ACL, token "
      "and TLS files of the start's configuration, looked at on a worker thread); 0 or at least 1000; 0: "
      "off. For a Kubernetes ConfigMap or Secret mounted as a directory (the Helm chart sets 10000)."),

    K("log.level", CFG__ENUM, log.level, "info", 0, 0, log_levels, RL,
      "Least severe level written: debug, info, warn or error."),
    K("log.format", CFG__ENUM, log.format, "text", 0, 0, log_formats, RL,
      "text (logfmt key=value) or json (one object per line); logs go to stderr."),
};
const size_t cfg__nkeys = sizeof cfg__keys / sizeof cfg__keys[0];

const cfg__key_t cfg__mapping_keys[] = {
    M("mqtt_pattern", CFG__STR, mqtt_pattern, NULL, 1, 65535, NULL, D | R | RL,
      "MQTT topic filter; `+` matches one level (captured as $1, $2, ...), `#` the rest (as $#)."),
    M("danube_topic", CFG__STR, danube_topic, NULL, 1, 1024, NULL, D | R | RL,
      "Upstream topic, /{edge_name}/name; may use ${1}.. only with capture_values."),
    M("schema_subject", CFG__STR, schema_subject, NULL, 1, 1024, NULL, D | RL,
      "Schema subject in the cluster registry; absent = raw bytes, no schema."),
    M("validation_policy", CFG__ENUM, validation_policy, "none", 0, 0, policies, D | RL,
      "none: stamp schema id/version only; enforce: refuse invalid payloads."),
    M("extract_attributes", CFG__ATTRS, attrs, NULL, 0, 64, NULL, D | RL,
      "Map of attribute name to capture (\"$1\", \"$2\", ... or \"$#\")."),
    M("capture_values", CFG__CAPVALS, capvals, NULL, 0, 16, NULL, RL,
      "Map of capture to its allowed values; required for each capture used in a danube_topic template."),
    M("encoding", CFG__ENUM, encoding, "binary", 0, 0, encodings, RL,
      "Avro payload encoding: binary (raw datum) or json."),
    M("on_full", CFG__ENUM, on_full, "drop_oldest", 0, 0, on_full_modes, RL,
      "What the topic's log does at a disk bound (wal.max_topic_bytes, wal.max_total_bytes, wal.min_free_bytes). "
      "drop_oldest: delete its oldest messages, replicated or not (counted as dropped), to take the new ones; "
      "drop_newest: keep what is stored until the cluster acknowledges it and refuse new messages meanwhile "
      "(MQTT 5 0x97, 3.1.1 QoS 1/2 closed, QoS 0 dropped; counted as rejected, reason full); "
      "block: keep what is stored, hold the new messages unwritten and unacknowledged, and stop reading the "
      "connections that publish to the topic until the cluster's acknowledgements (or free space) make room; "
      "nothing is dropped, other topics' publishers go on. Every mapping of one danube_topic must say the same."),
    M("max_age", CFG__DURATION, max_age_ms, "0", 0, 3650ull * DAY_MS, NULL, RL,
      "Messages older than this (by publish time) when the replicator is about to send them are dropped "
      "unsent and counted (tributary_messages_dropped_age_total, persistent in the log's meta file). A "
      "duration: 500ms, 45s, 30m, 12h, 7d (a bare number is milliseconds); 0 = no age limit. Every mapping "
      "of one danube_topic must say the same."),
    M("priority", CFG__U32, priority, "0", 0, 255, NULL, 0,
      "When an output is behind (its rate cap or window is the limit), topics of higher priority drain "
      "first; equal priorities share. Every mapping of one danube_topic must say the same."),
    M("durability", CFG__ENUM, durability, NULL, 0, 0, durabilities, 0,
      "log or memory_first (see wal.durability, its default when absent, and wal.memory_first.*). Every "
      "mapping of one danube_topic must say the same."),
};
const size_t cfg__nmapping_keys = sizeof cfg__mapping_keys / sizeof cfg__mapping_keys[0];

const cfg__key_t cfg__listener_keys[] = {
    L("address", CFG__ADDR, address, NULL, 0, 0, NULL, R,
      "Listen address, host:port (IPv6 as [addr]:port)."),
    L("allow_anonymous", CFG__ENUM, allow_anonymous, "auto", 0, 0, anon_modes, 0,
      "This listener's choice for a CONNECT without a user name: true, false, or auto (auth.allow_anonymous). "
      "E.g. a loopback listener for local tools that need none beside an authenticated 8883."),
    L("tls.cert_file", CFG__STR, tls.cert_file, NULL, 1, 4096, NULL, R | RL,
      "With tls: PEM server certificate, optionally followed by its intermediate CAs. Read at start "
      "(a file that does not load is a configuration error) and again on SIGHUP."),
    L("tls.key_file", CFG__STR, tls.key_file, NULL, 1, 4096, NULL, R | RL,
      "With tls: PEM private key of cert_file (unencrypted)."),
    L("tls.ca_file", CFG__STR, tls.ca_file, "", 0, 4096, NULL, RL,
      "PEM CAs that client certificates are checked against; a client may then present one, and an "
      "untrusted one fails the handshake. Empty: no client certificate is asked for."),
    L("tls.require_client_cert", CFG__BOOL, tls.require_client_cert, "false", 0, 0, NULL, RL,
      "A client without a certificate that ca_file trusts fails the handshake (needs ca_file)."),
    L("tls.min_version", CFG__ENUM, tls.min_version, "1.2", 0, 0, tls_versions, RL,
      "Oldest TLS version accepted: 1.2 or 1.3."),
    L("tls.ciphers", CFG__STR, tls.ciphers, "", 0, 4096, NULL, RL,
      "OpenSSL cipher list for TLS 1.2 (`openssl ciphers` syntax); empty: OpenSSL's default. TLS 1.3 "
      "suites are OpenSSL's."),
    L("tls.use_identity_as_username", CFG__BOOL, tls.use_identity_as_username, "false", 0, 0, NULL, RL,
      "The client certificate's Common Name is the client's user name (for auth.acl_file), instead of "
      "the CONNECT's, which is then not checked against auth.password_file (needs require_client_cert)."),
    L("tls.read_coalesce_ms", CFG__U32, tls.read_coalesce_ms, "1", 0, 10, NULL, 0,
      "Milliseconds a busy TLS connection's socket is left unread after a read, so what the client sends "
      "meanwhile is taken in one read (fewer reads and wakeups: less server CPU per message). Busy: its last "
      "4 reads were each under 16 KiB and within this long (+1 ms) of the one before. Never paused: before "
      "CONNECT, with a QoS 1/2 PUBLISH awaiting its ack, or a client sending more slowly; a message that "
      "arrives during a pause waits this long at most. 0 = read every arrival at once."),
};
const size_t cfg__nlistener_keys = sizeof cfg__listener_keys / sizeof cfg__listener_keys[0];

/* One entry of outputs. The kinds that take a key are its K* flags; the
 * kind-specific required keys (broker, group_id) are checked at load. */
const cfg__key_t cfg__output_keys[] = {
    O("name", CFG__STR, name, NULL, 1, 64, NULL, R | KALL,
      "The output's name: letters, digits, _ and -; unique; a metrics label and a file name. `danube` only "
      "for kind danube."),
    O("kind", CFG__ENUM, kind, NULL, 0, 0, cfg__output_kinds, R | KALL,
      "danube (the edge.cluster_url cluster; at most one), mqtt (an MQTT broker) or sparkplug (a Sparkplug B "
      "edge node on an MQTT broker; docs/SPARKPLUG.md). A reload that changes it under the same name is "
      "refused (rename the output)."),
    O("topics", CFG__STRLIST, topics, NULL, 1, 256, NULL, KALL,
      "Upstream (danube_topic) topics the output carries, as MQTT filters (\"/edge1/#\"); each must match one "
      "the mappings produce. Default: all (\"#\")."),
    O("broker", CFG__ADDR, broker, NULL, 0, 0, NULL, KM | KS,
      "mqtt, sparkplug (required): the remote broker, host:port."),
    O("protocol", CFG__U32, protocol, "5", 4, 5, NULL, KM | KS,
      "mqtt, sparkplug: MQTT protocol level, 4 (3.1.1) or 5."),
    O("qos", CFG__U32, qos, "1", 0, 2, NULL, KM,
      "mqtt: QoS of the PUBLISHes to the remote; the checkpoint moves on its PUBACK (1) or PUBCOMP (2)."),
    O("client_id", CFG__STR, client_id, "", 0, 256, NULL, KM | KS,
      "mqtt, sparkplug: MQTT client id; empty: tributary-<edge_name>-<name>. Unique among outputs to one broker."),
    O("remote_topic", CFG__STR, remote_topic, "${topic}", 1, 65535, NULL, KM | T,
      "mqtt: the remote topic, a template: ${topic} (the MQTT topic received), ${upstream} (the mapped "
      "topic), ${1}.. and ${#} (the rule's captures), ${attr.NAME} (an extract_attributes name); other "
      "${NAME} are environment variables. One that could produce an invalid topic is refused at load."),
    O("tls.ca_file", CFG__STR, tls.ca_file, "", 0, 4096, NULL, KM | KS,
      "mqtt, sparkplug: a tls mapping turns TLS on; PEM CAs the broker's certificate is verified against "
      "(empty: the system's roots). Verification is always on."),
    O("tls.cert_file", CFG__STR, tls.cert_file, "", 0, 4096, NULL, KM | KS,
      "mqtt, sparkplug: PEM client certificate; needs key_file."),
    O("tls.key_file", CFG__STR, tls.key_file, "", 0, 4096, NULL, KM | KS,
      "mqtt, sparkplug: PEM private key of cert_file."),
    O("username", CFG__STR, username, "", 0, 4096, NULL, KM | KS,
      "mqtt, sparkplug: MQTT user name; empty: none."),
    O("password_file", CFG__STR, password_file, "", 0, 4096, NULL, KM | KS,
      "mqtt, sparkplug: a file whose first line is the password; read at start, never logged."),
    O("max_inflight", CFG__U32, max_inflight, "100", 1, 65535, NULL, KM | KS,
      "mqtt, sparkplug: messages sent and not yet acknowledged (confirmed), at most."),
    O("max_bytes_per_s", CFG__BYTES, max_bytes_per_s, "0", 0, 1ull << 40, NULL, KALL,
      "Bytes per second the output may send, as the link carries them before TLS (danube: each encoded "
      "ReplicateBatch; mqtt: each PUBLISH packet; sparkplug: each record's stored payload, births never "
      "counted), over all its topics: a token bucket with a burst of 200 ms (or the largest unit); 0: no cap. "
      "A reload applies it to the running output, held from then on."),
    O("max_messages_per_s", CFG__U32, max_messages_per_s, "0", 0, 100000000, NULL, KALL,
      "Messages of the log per second the output may send (danube: StreamMessages; mqtt: PUBLISHes; "
      "sparkplug: records, packed into NDATA/DDATA, births never counted), over all its topics; 0: no cap. "
      "With either cap, higher mapping priorities drain first. A reload applies it to the running output."),
    O("group_id", CFG__STR, group_id, "", 0, 256, NULL, KS,
      "sparkplug (required): the Sparkplug group id (no +, /, #)."),
    O("edge_node_id", CFG__STR, edge_node_id, "", 0, 256, NULL, KS,
      "sparkplug: the edge node id (no +, /, #); empty: edge.edge_name."),
    O("device", CFG__STR, device, NULL, 1, 1024, NULL, KS | T,
      "sparkplug: the device id, a one-level template over the rule's captures (${1}..) and literal text; "
      "absent: every metric is a node metric."),
    O("primary_host_id", CFG__STR, primary_host_id, "", 0, 256, NULL, KS,
      "sparkplug: the primary host whose STATE the node waits for; empty: none."),
    O("historical", CFG__ENUM, historical, "flag", 0, 0, spb_hist_modes, KS,
      "sparkplug: values older than replicator.live_window_ms when sent (a replay) carry is_historical; "
      "flag: they may share an NDATA/DDATA with live values; separate: they go in payloads of their own, "
      "never beside a live value (the direction of eclipse-sparkplug issue 594; docs/SPARKPLUG.md)."),
};
const size_t cfg__noutputs_keys = sizeof cfg__output_keys / sizeof cfg__output_keys[0];

_Static_assert(offsetof(cfg_output_t, ntopics) == offsetof(cfg_output_t, topics) + sizeof(char **),
               "CFG__STRLIST: the count follows the list");

const char *cfg__type_name(const cfg__key_t *k)
{
    switch (k->type) {
    case CFG__STR: return "string";
    case CFG__BOOL: return "bool";
    case CFG__U32: case CFG__U64: return "integer";
    case CFG__BYTES: return "bytes";
    case CFG__MS: return "milliseconds";
    case CFG__ENUM: return "enum";
    case CFG__ADDR: return "address";
    case CFG__URL: return "url";
    case CFG__ATTRS: return "map";
    case CFG__CAPVALS: return "map of lists";
    case CFG__MAPPINGS: return "list";
    case CFG__LISTENERS: return "list";
    case CFG__SPACE: return "bytes or %";
    case CFG__DURATION: return "duration";
    case CFG__OUTPUTS: return "list";
    case CFG__STRLIST: return "list of strings";
    }
    return "?";
}

static size_t field_size(const cfg__key_t *k)
{
    switch (k->type) {
    case CFG__STR: case CFG__ADDR: case CFG__URL: return sizeof(char *);
    case CFG__BOOL: return sizeof(bool);
    case CFG__U32: case CFG__MS: return sizeof(uint32_t);
    case CFG__U64: case CFG__BYTES: case CFG__DURATION: return sizeof(uint64_t);
    case CFG__ENUM: return sizeof(int);
    case CFG__SPACE: return sizeof(cfg_space_t);
    default: return 0; /* lists: not a scalar field */
    }
}

static void info(const cfg__key_t *k, cfg_key_info_t *out)
{
    *out = (cfg_key_info_t){ k->path, cfg__type_name(k), k->off, field_size(k) };
}

bool cfg_key_at(size_t i, cfg_key_info_t *out)
{
    if (i >= cfg__nkeys)
        return false;
    info(&cfg__keys[i], out);
    return true;
}

/* The table of a list's entries for a path "LIST[...].rest": sets *rest. */
static const cfg__key_t *entry_table(const char *path, size_t *n, const char **rest)
{
    static const struct {
        const char *list;
        const cfg__key_t *tab;
        const size_t *n;
    } lists[] = {
        { "mqtt.topic_mappings[", cfg__mapping_keys, &cfg__nmapping_keys },
        { "mqtt.listeners[", cfg__listener_keys, &cfg__nlistener_keys },
        { "outputs[", cfg__output_keys, &cfg__noutputs_keys },
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        size_t len = strlen(lists[i].list);
        if (strncmp(path, lists[i].list, len) != 0)
            continue;
        const char *close = strchr(path + len, ']');
        if (!close || close[1] != '.')
            return NULL; /* "outputs[central]": an entry added or removed, not a key */
        *rest = close + 2;
        *n = *lists[i].n;
        return lists[i].tab;
    }
    return NULL;
}

cfg_reload_class_t cfg_reload_class(const char *path)
{
    const cfg__key_t *tab = cfg__keys;
    size_t n = cfg__nkeys;
    const char *key = path;
    if (strchr(path, '[')) {
        /* an output added or removed ("outputs[central]"), or its TLS turned on or off
         * ("outputs[central].tls"): live like its keys (the reload adds, removes or replaces it) */
        const char *close = strncmp(path, "outputs[", 8) == 0 ? strchr(path + 8, ']') : NULL;
        if (close && close > path + 8 && (!close[1] || strcmp(close + 1, ".tls") == 0))
            return CFG_RELOAD_LIVE;
        tab = entry_table(path, &n, &key);
        if (!tab)
            return CFG_RELOAD_RESTART;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(tab[i].path, key) == 0)
            return (tab[i].flags & CFG__F_RELOAD) ? CFG_RELOAD_LIVE : CFG_RELOAD_RESTART;
    return CFG_RELOAD_RESTART; /* not a key ("mqtt.listeners[1].tls" turned on): the conservative answer */
}

bool cfg_key_path_at(size_t i, char *path, size_t len, cfg_reload_class_t *cls)
{
    static const struct {
        const char *prefix;
        const cfg__key_t *tab;
        const size_t *n;
    } parts[] = {
        { "", cfg__keys, &cfg__nkeys },
        { "mqtt.listeners[].", cfg__listener_keys, &cfg__nlistener_keys },
        { "mqtt.topic_mappings[].", cfg__mapping_keys, &cfg__nmapping_keys },
        { "outputs[].", cfg__output_keys, &cfg__noutputs_keys },
    };
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        if (i >= *parts[p].n) {
            i -= *parts[p].n;
            continue;
        }
        const cfg__key_t *k = &parts[p].tab[i];
        snprintf(path, len, "%s%s", parts[p].prefix, k->path);
        *cls = (k->flags & CFG__F_RELOAD) ? CFG_RELOAD_LIVE : CFG_RELOAD_RESTART;
        return true;
    }
    return false;
}

bool cfg_key_find(const char *path, cfg_key_info_t *out)
{
    for (size_t i = 0; i < cfg__nkeys; i++) {
        if (strcmp(cfg__keys[i].path, path) == 0) {
            info(&cfg__keys[i], out);
            return true;
        }
    }
    return false;
}
