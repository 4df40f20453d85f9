/*
 * metrics.h: counters, gauges and histograms behind /metrics and /stats
 * (the gateway/metrics/ folder's one public header). Prefix metrics_,
 * METRICS_; metrics__ for what its files share (metrics_int.h). Depends on
 * base and jansson only. The catalog at the end is the gateway's own list
 * of metrics and of the label values they take (rejection, refusal, close
 * and batch reasons): the broker and the HTTP server count by these.
 *
 * BOUNDED SERIES. A metric has at most two labels, and every label value
 * comes from a label set created up front: either a fixed table (rejection
 * reasons, HTTP codes) or a bounded set whose capacity is fixed when it is
 * created (upstream topics: known at startup or at a reload, within the
 * capacity fixed at startup, see
 * docs/CONFIG.md). Series are addressed by index into those sets, so there
 * is no call that could create a series from a string seen on the network:
 * MQTT topics and client ids can never become label values, and the number
 * of series never grows with the number of devices. Storage for every
 * series is allocated at registration; an update never allocates.
 *
 * OWNERSHIP. The registry belongs to the loop thread. Values the loop owns
 * (router counters, connection gauges) are plain integers updated there with
 * metrics_add/set/observe. Values owned by other threads (the WAL
 * writer's fsync histogram, the replicator's counters) stay in those
 * threads as atomics; a collector callback registered with
 * metrics_add_collector() runs on the loop at every scrape and copies
 * them in (metrics_set, metrics_hist_load). metrics_ahist_t is a
 * histogram any thread can observe into without locks.
 *
 * UNITS. Values are integers in a raw unit (nanoseconds, milliseconds,
 * bytes); a family's `div` turns them into the base unit the exposition
 * uses (seconds, bytes): exposed = raw / div. Integers keep updates exact
 * and cheap; the division happens once, when writing.
 *
 * CATALOG. The gateway's own metrics are one table (metrics_catalog.c):
 * name, type, help, labels and the /stats JSON field of each, so the
 * Prometheus names, the JSON names and docs/OPERATIONS.md are checked
 * against a single list (tests/unit/gateway/test_metrics_catalog.c).
 */
#ifndef METRICS_METRICS_H
#define METRICS_METRICS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM } metrics_type_t;

/* Bounds, not allocations: a registry holds two pointer arrays of FAMILIES
 * and LABELSETS entries (1.2 KiB together); a family allocates its own label
 * capacities multiplied, 8 bytes a series (a histogram's (nbounds + 2) x 8),
 * so raising SERIES costs nothing until a family is that large (131,072
 * series: 1 MiB). Raised for issue 19 and the outputs and memory-first
 * families (docs/design/RELOAD.md 2.9, 8.4). */
#define METRICS_MAX_BUCKETS    24  /* finite upper bounds per histogram */
#define METRICS_MAX_FAMILIES   128
#define METRICS_MAX_LABELSETS  24
#define METRICS_MAX_COLLECTORS 16
#define METRICS_MAX_SERIES     131072 /* per family: label set capacities multiplied */

typedef struct metrics metrics_t;               /* a registry */
typedef struct metrics_family metrics_family_t; /* one metric name, all its series */
typedef struct metrics_labels metrics_labels_t; /* a bounded set of label values */

/* ---- registry ----------------------------------------------------------- */

/* A new, empty registry. Returns 0 (allocation aborts on out-of-memory). */
int metrics_new(metrics_t **out /* OUT */);
/* Frees the registry, its label sets and families. NULL is allowed. */
void metrics_free(metrics_t *m);

/* ---- label sets --------------------------------------------------------- */

/*
 * A label named `name` whose values are exactly `values` (copied). Returns 0,
 * or TB_EINVALID for a bad label name, an empty or duplicate value, or
 * TB_EFULL when the registry holds METRICS_MAX_LABELSETS sets.
 */
int metrics_labels_fixed(metrics_t *m, const char *name, const char *const *values, size_t n,
                            metrics_labels_t **out /* OUT */);
/* A label whose values are added later with metrics_labels_add, at most `cap` of them. */
int metrics_labels_bounded(metrics_t *m, const char *name, size_t cap,
                              metrics_labels_t **out /* OUT */);
/*
 * Adds `value` to a bounded set. Returns its index (an existing value keeps
 * its index), TB_EFULL past the capacity, TB_EINVALID for a fixed set or an
 * empty or non-UTF-8 value.
 */
int metrics_labels_add(metrics_labels_t *l, const char *value);
/* Index of `value`, or TB_EINVALID when it is not in the set. */
int metrics_labels_find(const metrics_labels_t *l, const char *value);
size_t metrics_labels_count(const metrics_labels_t *l);
const char *metrics_labels_value(const metrics_labels_t *l, size_t i); /* NULL out of range */
const char *metrics_labels_name(const metrics_labels_t *l);

/* ---- families ----------------------------------------------------------- */

typedef struct metrics_spec {
    const char *name;         /* exposition name; counters end in _total */
    metrics_type_t type;
    const char *help;         /* one line; escaped when written */
    uint64_t div;             /* exposed = raw / div; 0 means 1 */
    const uint64_t *bounds;   /* histograms: finite upper bounds, raw unit, strictly ascending */
    size_t nbounds;           /* 1..METRICS_MAX_BUCKETS; +Inf is implicit */
} metrics_spec_t;

/*
 * Registers a family with zero, one (l1) or two (l1, l2) labels. The spec's
 * strings must outlive the registry (they are not copied: they are
 * literals in a table). Returns 0, or TB_EINVALID (bad name or label name,
 * counter without _total, l2 without l1, histogram bounds not ascending,
 * "le" used as a label of a histogram, too many series), or TB_EFULL.
 * Writers list families in registration order.
 */
int metrics_register(metrics_t *m, const metrics_spec_t *spec, metrics_labels_t *l1,
                        metrics_labels_t *l2, metrics_family_t **out /* OUT */);
metrics_family_t *metrics_find(metrics_t *m, const char *name); /* NULL when absent */

size_t metrics_nfamilies(const metrics_t *m);
metrics_family_t *metrics_family_at(metrics_t *m, size_t i);
const metrics_spec_t *metrics_family_spec(const metrics_family_t *f);
metrics_labels_t *metrics_family_label(const metrics_family_t *f, int which /* 0 or 1 */);

/* ---- updates (loop thread) ---------------------------------------------- */

/*
 * i1, i2 index the first and second label's sets (0 when the family has no
 * such label). An index past the set's current count is ignored: the call
 * does nothing, so a stale index cannot write into another series.
 */
void metrics_add(metrics_family_t *f, size_t i1, size_t i2, uint64_t n); /* counter, gauge */
void metrics_sub(metrics_family_t *f, size_t i1, size_t i2, uint64_t n); /* gauge */
/* Gauges; and counters whose running total is kept elsewhere (a collector copying an atomic). */
void metrics_set(metrics_family_t *f, size_t i1, size_t i2, int64_t v);
void metrics_observe(metrics_family_t *f, size_t i1, size_t i2, uint64_t v); /* histogram */
/* Raw value of a counter or gauge series (0 when out of range). */
int64_t metrics_get(const metrics_family_t *f, size_t i1, size_t i2);

/* Histogram series snapshot: counts per bucket (not cumulative), nbounds + 1 of them. */
typedef struct metrics_hist_view {
    const uint64_t *counts;
    size_t nbuckets; /* nbounds + 1; the last is the +Inf bucket */
    uint64_t count;  /* sum of counts */
    uint64_t sum;    /* raw unit */
} metrics_hist_view_t;
/* Returns 0 or TB_EINVALID (not a histogram, index out of range). */
int metrics_hist_get(const metrics_family_t *f, size_t i1, size_t i2, metrics_hist_view_t *out /* OUT */);

/* ---- values owned by other threads -------------------------------------- */

/*
 * A histogram any thread may observe into (relaxed atomics, no lock). A
 * collector copies it into a registered family at scrape time with
 * metrics_hist_load(). The copy is read bucket by bucket while writers
 * may be adding: the exposed _count is the sum of the copied buckets, so
 * the buckets, +Inf and _count always agree; _sum may include an
 * observation or two that the buckets do not yet show.
 */
typedef struct metrics_ahist {
    const uint64_t *bounds;
    size_t nbounds;
    _Atomic uint64_t counts[METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t sum;
} metrics_ahist_t;

void metrics_ahist_init(metrics_ahist_t *h, const uint64_t *bounds, size_t nbounds);
void metrics_ahist_observe(metrics_ahist_t *h, uint64_t v); /* any thread */
/* Replaces series (i1, i2) of histogram f with a copy of h. TB_EINVALID when the bounds differ. */
int metrics_hist_load(metrics_family_t *f, size_t i1, size_t i2, const metrics_ahist_t *h);

/*
 * Collectors run on the loop thread, in registration order, when
 * metrics_collect() is called (each scrape of /metrics or /stats, before
 * writing). They must be quick and must not block: read atomics and
 * in-memory state, set values. Returns 0 or TB_EFULL.
 */
typedef void (*metrics_collect_cb)(void *arg, metrics_t *m);
int metrics_add_collector(metrics_t *m, metrics_collect_cb cb, void *arg);
/* Removes the collector registered with exactly (cb, arg), if any (before freeing arg). */
void metrics_remove_collector(metrics_t *m, metrics_collect_cb cb, void *arg);
void metrics_collect(metrics_t *m);

/* ---- writers ------------------------------------------------------------ */

/*
 * Appends every family with at least one series in the Prometheus text
 * exposition format 0.0.4 (HELP, TYPE, samples; histograms as _bucket with
 * cumulative le, +Inf, _sum and _count; label values and help escaped).
 * Does not run the collectors.
 */
void metrics_write_prometheus(metrics_t *m, tb_buf_t *out);
#define METRICS_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes a number as the exposition does: integers exactly, others in the shortest form that reads back. */
void metrics_format_value(char *dst, size_t n, int64_t raw, uint64_t div);

/*
 * One series as JSON (new reference): an integer when div is 1, a real
 * otherwise; a histogram as {"count", "sum", "buckets": {"le": cumulative}}.
 * NULL when out of range.
 */
json_t *metrics_json_value(const metrics_family_t *f, size_t i1, size_t i2);

/* ---- the gateway's catalog (metrics_catalog.c) -------------------------- */

typedef enum {
    /* per upstream topic */
    METRICS_RECEIVED,
    METRICS_STORED,
    METRICS_REPLICATED,
    METRICS_QUEUED,
    METRICS_DROPPED,
    METRICS_REJECTED,
    METRICS_WAL_BYTES,
    METRICS_WAL_SEGMENTS,
    METRICS_WAL_OLDEST_OFFSET,
    METRICS_WAL_NEWEST_OFFSET,
    METRICS_ACKED_OFFSET,
    METRICS_LAG_MESSAGES,
    METRICS_LAG_BYTES,
    METRICS_OLDEST_UNREPLICATED_AGE,
    METRICS_TOPIC_STALLED,
    METRICS_TOPIC_PAUSED,
    METRICS_TOPIC_BLOCKED,
    METRICS_BLOCKED_PAUSES,
    METRICS_NO_PROGRESS,
    METRICS_TOPIC_INVARIANT_OK,
    METRICS_DROPPED_IN_FLIGHT,
    METRICS_WAL_DROPPED,
    METRICS_WAL_LOST,
    METRICS_DROPPED_AGE,
    METRICS_WAL_DROPPED_AGE,
    METRICS_WAL_WRITE_ERRORS,
    METRICS_WAL_BATCHES,
    METRICS_BATCHES_IN_FLIGHT,
    METRICS_BATCHES_SENT,
    METRICS_BATCHES_RESENT,
    METRICS_RETRIES,
    METRICS_STREAM_RESETS,
    METRICS_THROTTLED,
    METRICS_TOPIC_MODE,
    METRICS_MEMORY_HELD,
    METRICS_MEMORY_HELD_BYTES,
    METRICS_SPILLS,
    METRICS_TO_MEMORY,
    /* gateway-wide */
    METRICS_INVARIANT_OK,
    METRICS_UNMATCHED,
    METRICS_PUBLISH_DENIED,
    METRICS_MQTT_CONNECTIONS,
    METRICS_MQTT_LISTENER_CONNECTIONS,
    METRICS_TLS_READ_PAUSES,
    METRICS_MQTT_ACCEPTED,
    METRICS_MQTT_REFUSED,
    METRICS_MQTT_CLOSED,
    METRICS_SESSIONS_PERSISTENT,
    METRICS_SESSIONS_REMEMBERED,
    METRICS_WILLS_PENDING,
    METRICS_JOURNAL_BYTES,
    METRICS_WILL_BYTES,
    METRICS_HTTP_CONNECTIONS,
    METRICS_HTTP_REQUESTS,
    METRICS_HTTP_REFUSED,
    METRICS_HTTP_EVICTED,
    METRICS_HTTP_TIMEOUTS,
    METRICS_HTTP_TLS_FAILED,
    METRICS_WAL_FSYNC_SECONDS,
    METRICS_WAL_TOPIC_LIMIT,
    METRICS_WAL_TOTAL_LIMIT,
    METRICS_WAL_FREE_BYTES,
    METRICS_WAL_MIN_FREE,
    METRICS_CLUSTER_UP,
    METRICS_READY,
    METRICS_LOOP_LAG,
    METRICS_CONFIG_FILE_VALID,
    METRICS_BUILD_INFO,
    /* the process, from /proc/self (metrics_process.c) */
    METRICS_PROC_RSS,
    METRICS_PROC_VSIZE,
    METRICS_PROC_CPU,
    METRICS_PROC_OPEN_FDS,
    METRICS_PROC_MAX_FDS,
    METRICS_PROC_START_TIME,
    METRICS_PROC_WRITE_BYTES,
    METRICS_PROC_READ_BYTES,
    /* per output (issue 17; label output, outputs[] in config order) */
    METRICS_OUTPUT_UP,
    METRICS_OUTPUT_STATE,
    METRICS_OUTPUT_ATTEMPTS,
    METRICS_OUTPUT_SESSIONS,
    METRICS_OUTPUT_REFUSALS,
    METRICS_OUTPUT_FAILURES,
    METRICS_OUTPUT_INFLIGHT,
    METRICS_OUTPUT_DEAD_LETTERS,
    /* per (output, topic): the output's lane of the topic */
    METRICS_OUTPUT_REPLICATED,
    METRICS_OUTPUT_ACKED,
    METRICS_OUTPUT_ACKED_OFFSET,
    METRICS_OUTPUT_LAG_MESSAGES,
    METRICS_OUTPUT_LAG_BYTES,
    METRICS_OUTPUT_OLDEST_AGE,
    METRICS_OUTPUT_SENT,
    METRICS_OUTPUT_RESENT,
    METRICS_OUTPUT_DROPPED,
    METRICS_OUTPUT_DROPPED_IN_FLIGHT,
    METRICS_DEAD_LETTERED,      /* per topic: the invariant's dead-lettered term */
    METRICS_DEAD_LETTERS,       /* per topic and reason: records stored in the dead-letter log */
    METRICS_DL_LOG_DROPPED,     /* the dead-letter log's own bound: its oldest entries dropped */
    METRICS_CLUSTER_REFUSED,    /* 1 while the cluster refuses the edge's credentials */
    METRICS_WAL_WRITTEN_BYTES,  /* by cause: bytes the log handed to write/pwrite (wal_stats) */
    METRICS_WAL_WRITES,         /* by cause: its write calls, one per file replaced */
    METRICS_WAL_SYNCS,          /* by cause: its fdatasync/fsync calls */
    METRICS_TOPICS_RETIRED,     /* topics retired since start (a reload removed their mapping; drained) */
    METRICS_TOPICS_RETIRING,    /* topics no mapping routes to, their backlog replicating */
    METRICS__COUNT
} metrics_id_t;

/* Which label set a catalog metric draws from. */
typedef enum {
    METRICS_L_NONE, METRICS_L_TOPIC, METRICS_L_REASON, METRICS_L_CODE, METRICS_L_TIMEOUT, METRICS_L_VERSION,
    METRICS_L_RETRY, METRICS_L_REFUSE, METRICS_L_CLOSE, METRICS_L_BATCH, METRICS_L_LISTENER, METRICS_L_MODE,
    METRICS_L_SPILL, METRICS_L_OUTPUT, METRICS_L_OUTPUT_STATE, METRICS_L_DL, METRICS_L_DROP, METRICS_L_WAL_CAUSE, METRICS_L__COUNT
} metrics_label_kind_t;

typedef struct metrics_entry {
    metrics_id_t id;
    metrics_spec_t spec;
    metrics_label_kind_t l1, l2;
    /* The /stats field: inside each topic object when l1 is METRICS_L_TOPIC
     * (each listener object when METRICS_L_LISTENER),
     * else a path from the root ("process.open_fds"); NULL: not in /stats.
     * A label other than the topic makes the field an object keyed by it. */
    const char *json;
    bool json_bool; /* a 0/1 gauge shown as false/true */
} metrics_entry_t;

extern const metrics_entry_t metrics_catalog[METRICS__COUNT];

/* Why a message for a known upstream topic was refused (label "reason").
 * (A captured level outside capture_values makes its rule not match: the
 * message is counted as unmatched, with no topic.) */
typedef enum {
    METRICS_REJECT_SCHEMA_INVALID,     /* payload fails the topic's schema under enforce */
    METRICS_REJECT_SCHEMA_UNAVAILABLE, /* enforce, but the schema is not in the registry cache */
    METRICS_REJECT_PAYLOAD_TOO_LARGE,  /* over mqtt.max_payload_size (or too many attributes) */
    METRICS_REJECT_WAL_UNAVAILABLE,    /* the topic's log refused the append (failed fsync, disk) */
    METRICS_REJECT_FULL,               /* a disk bound refused it: on_full drop_newest, or nothing left to drop */
    METRICS_REJECT__COUNT
} metrics_reject_t;
extern const char *const metrics_reject_reasons[METRICS_REJECT__COUNT];

/* Why a record went to the dead-letter log (label "reason" of tributary_dead_letters_total):
 * replicator.h's rep_dl_reason_t by name, in its order (a unit test checks they agree). */
typedef enum {
    METRICS_DL_INVALID_SCHEMA, METRICS_DL_CLUSTER_INVALID_ARGUMENT, METRICS_DL_CLUSTER_FAILED_PRECONDITION,
    METRICS_DL_CLUSTER_OUT_OF_RANGE, METRICS_DL_CLUSTER_TOO_LARGE, METRICS_DL_OPERATOR, METRICS_DL_OUTPUT_TYPE_MISMATCH,
    METRICS_DL_OUTPUT_UNROUTABLE, METRICS_DL__COUNT
} metrics_dl_reason_t;
extern const char *const metrics_dl_reasons[METRICS_DL__COUNT];

/* Why replication rebuilt a stream (label "reason"): replicator.h's rep_retry_t by name. */
extern const char *const metrics_retry_reasons[];
extern const size_t metrics_nretry_reasons;

/* Why a CONNECT was refused with a CONNACK (label "reason"). */
typedef enum {
    METRICS_REFUSE_MAX_CONNECTIONS, /* mqtt.max_connections reached */
    METRICS_REFUSE_CLIENT_ID,       /* client identifier not valid (too long, NUL, empty
                                       without clean session on 3.1.1) */
    METRICS_REFUSE_AUTH,            /* MQTT 5 enhanced authentication asked for: not supported */
    METRICS_REFUSE_SHUTTING_DOWN,   /* during the drain */
    METRICS_REFUSE_MAX_SESSIONS,    /* a new persistent session past mqtt.max_sessions */
    METRICS_REFUSE_JOURNAL_FULL,    /* a new persistent session while the session journal is full */
    METRICS_REFUSE_WILL_INVALID,    /* its will could never be stored: payload over mqtt.max_payload_size,
                                       or more properties than a record holds */
    METRICS_REFUSE_MAX_WILL_BYTES,  /* its will would pass mqtt.max_will_bytes (all wills in memory) */
    METRICS_REFUSE_AUTH_BAD_PASSWORD, /* a user of auth.password_file, a wrong password (0x86 / 4) */
    METRICS_REFUSE_AUTH_UNKNOWN_USER, /* a user name auth.password_file does not have (0x86 / 4) */
    METRICS_REFUSE_AUTH_ANONYMOUS,  /* no user name where anonymous clients are not allowed (0x87 / 5) */
    METRICS_REFUSE_AUTH_THROTTLED,  /* too many failures from its address, auth.throttle: refuse (0x9F / 3) */
    METRICS_REFUSE_WILL_DENIED,     /* its will's topic is not writable under auth.acl_file (0x87 / 5) */
    METRICS_REFUSE__COUNT
} metrics_refuse_t;
extern const char *const metrics_mqtt_refuse_reasons[METRICS_REFUSE__COUNT];

/* Why the gateway closed a connection on its own (label "reason"). */
typedef enum {
    METRICS_CLOSE_MALFORMED,         /* a packet did not decode (or broke the protocol) */
    METRICS_CLOSE_CONNECT_TIMEOUT,   /* no CONNECT within mqtt.connect_timeout_ms */
    METRICS_CLOSE_KEEPALIVE_TIMEOUT, /* silent for 1.5 x its keep alive */
    METRICS_CLOSE_WRITE_ERROR,       /* its socket could not be written (the acks it carried are lost) */
    METRICS_CLOSE_UNREAD_LIMIT,      /* it left more than mqtt.max_unread_bytes of replies unread */
    METRICS_CLOSE_WRITE_TIMEOUT,     /* its replies made no progress for mqtt.write_timeout_ms (or, closing, its
                                        last bytes were not taken in that time) */
    METRICS_CLOSE_PACKET_TIMEOUT,    /* a packet begun was not complete within mqtt.packet_timeout_ms */
    METRICS_CLOSE_MEMORY_LIMIT,      /* it would have passed mqtt.max_partial_bytes */
    METRICS_CLOSE_TLS_HANDSHAKE,     /* its TLS handshake failed (not TLS, no trusted certificate, ...) */
    METRICS_CLOSE__COUNT
} metrics_close_t;
extern const char *const metrics_mqtt_close_reasons[METRICS_CLOSE__COUNT];

/* Why a topic's log batch was submitted (label "reason"). */
typedef enum {
    METRICS_BATCH_FULL,    /* mqtt.ingestion.batch_size messages, or the batch's byte bound */
    METRICS_BATCH_TIMEOUT, /* mqtt.ingestion.batch_timeout_ms after its first message */
    METRICS_BATCH_IDLE,    /* every client in it had gone quiet (idle_flush_ms, or its pace) */
    METRICS_BATCH_FLUSH,   /* the drain at shutdown, the session journal's compaction, or a journal batch that says STORED for its QoS 2 messages */
    METRICS_BATCH_TURN,    /* a memory_first topic in memory: at the end of the loop turn that filled it */
    METRICS_BATCH__COUNT
} metrics_batch_t;
extern const char *const metrics_batch_reasons[METRICS_BATCH__COUNT];

/* A topic's durability mode (label "mode" of tributary_topic_mode; /stats
 * durability): log for a log topic; a memory_first topic is memory,
 * spilling, draining (in the log until its backlog is acknowledged) or
 * ready (about to return to memory). In the order of wal.h's wal_mode_t. */
#define METRICS_MODE__COUNT 5
extern const char *const metrics_modes[METRICS_MODE__COUNT];
/* Why a memory_first topic spilled (label "reason"), in the order of wal.h's wal_spill_t. */
#define METRICS_SPILL__COUNT 4
extern const char *const metrics_spill_reasons[METRICS_SPILL__COUNT];
/* Why messages this process received were dropped before an ack (label
 * "reason" of tributary_messages_dropped_total; /stats dropped_by_reason):
 * bound (a disk bound deleted them, drop_oldest, or a corrupt segment was set
 * aside), age (the replicator skipped them for max_age), spill (answered with
 * ack: received, then lost with a memory_first spill that could not be
 * written). Their sum is the invariant's dropped term. */
/* FORGOTTEN: deleted unreplicated by the admin API's forget (a retired topic's backlog) */
typedef enum {
    METRICS_DROP_BOUND,
    METRICS_DROP_AGE,
    METRICS_DROP_SPILL,
    METRICS_DROP_FORGOTTEN,
    METRICS_DROP__COUNT
} metrics_drop_reason_t;
extern const char *const metrics_drop_reasons[METRICS_DROP__COUNT];
/* Why the log wrote (label "cause" of tributary_wal_written_bytes_total, _writes_total, _syncs_total;
 * /stats wal), in the order of wal.h's wal_cause_t (a unit test checks they agree). */
#define METRICS_WAL_CAUSE__COUNT 11
extern const char *const metrics_wal_causes[METRICS_WAL_CAUSE__COUNT];

/* An output's connection state (label "state" of tributary_output_state; /stats outputs[].state):
 * mqtt connecting, up, backoff, refused, stopped, idle; danube connecting, connected, unreachable. */
#define METRICS_OUTPUT_STATE__COUNT 8
extern const char *const metrics_output_states[METRICS_OUTPUT_STATE__COUNT];
/* The index of state name s in metrics_output_states, or -1. */
int metrics_output_state_index(const char *s);
/* At most this many outputs (config's bound). */
#define METRICS_MAX_OUTPUTS 16

/* HTTP status codes counted by tributary_http_requests_total (label "code"); "other" for the rest. */
extern const int metrics_http_codes[];
extern const size_t metrics_nhttp_codes; /* including the trailing "other" */
size_t metrics_http_code_index(int status);

/* Why an HTTP connection timed out (label "kind"). */
typedef enum {
    METRICS_HTTP_TIMEOUT_REQUEST,
    METRICS_HTTP_TIMEOUT_IDLE,
    METRICS_HTTP_TIMEOUT_WRITE,
    METRICS_HTTP_TIMEOUT_HANDSHAKE, /* http.tls: the TLS handshake not done within the request deadline */
    METRICS_HTTP_TIMEOUT__COUNT
} metrics_http_timeout_t;

/*
 * Registers every catalog metric with a topic label set of capacity
 * max_topics (>= 1), and the /proc/self collector. Returns 0 or a
 * metrics_register error (a bug in the table).
 */
int metrics_catalog_register(metrics_t *m, size_t max_topics);
/* The family of a catalog metric (NULL before metrics_catalog_register). */
metrics_family_t *metrics_fam(metrics_t *m, metrics_id_t id);
/* The upstream topic label set. */
metrics_labels_t *metrics_topics(metrics_t *m);
/* Adds an upstream topic; returns its index, TB_EFULL or TB_EINVALID. */
int metrics_topic_add(metrics_t *m, const char *topic);
/* At most this many MQTT listeners (mqtt.listeners' own bound). */
#define METRICS_MAX_LISTENERS 16
/* The MQTT listener label set (label "listener": the address it bound). */
metrics_labels_t *metrics_listeners(metrics_t *m);
/* Adds a listener by its bound address; returns its index, TB_EFULL or TB_EINVALID. */
int metrics_listener_add(metrics_t *m, const char *addr);
/* The output label set (label "output": outputs[].name). */
metrics_labels_t *metrics_outputs(metrics_t *m);
/* Adds an output by name; returns its index, TB_EFULL or TB_EINVALID. */
int metrics_output_add(metrics_t *m, const char *name);

/*
 * The accounting of one topic: every message routed to it is replicated,
 * still queued (accepted, not yet acknowledged by the cluster), dropped by
 * retention, or rejected. ok is received == replicated + queued + dropped
 * + rejected. Each term is measured where it happens (run.c's collector:
 * the loop's router counters, its batches and log completions, the
 * replicator's acks, the WAL's drops), never derived from the others, so
 * this is a check and not an identity. Returns false when `topic` is out
 * of range.
 */
typedef struct metrics_balance {
    uint64_t received, replicated, queued, dropped, rejected, dead_lettered;
    bool ok;
} metrics_balance_t;
bool metrics_topic_balance(metrics_t *m, size_t topic, metrics_balance_t *out /* OUT */);
/* Sets the invariant gauges from the other values; call after metrics_collect(). Returns the overall flag. */
bool metrics_catalog_derive(metrics_t *m);

/* ---- the process (metrics_process.c) ------------------------------------ */

typedef struct metrics_proc {
    uint64_t rss_bytes, vsize_bytes;
    uint64_t cpu_ns;           /* user + system */
    uint64_t start_time_ms;    /* since the Unix epoch */
    uint64_t open_fds, max_fds;
    uint64_t read_bytes, write_bytes; /* storage I/O, /proc/self/io */
    bool have_io;              /* /proc/self/io was readable */
} metrics_proc_t;

/* Parses /proc/<pid>/stat text. Returns 0 or TB_EMALFORMED. */
int metrics_proc_parse_stat(const char *text, long ticks_per_s, long page_size, uint64_t boot_time_s,
                               metrics_proc_t *out /* OUT: rss, vsize, cpu, start time */);
/* Parses /proc/<pid>/io text. Returns 0 or TB_EMALFORMED. */
int metrics_proc_parse_io(const char *text, metrics_proc_t *out /* OUT: read/write bytes */);
/* Reads all of it for this process. Returns 0 or -errno (what could be read is filled in). */
int metrics_proc_read(metrics_proc_t *out /* OUT */);

#endif
