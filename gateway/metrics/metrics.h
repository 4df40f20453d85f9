/*
 * metrics.h: counters, gauges and histograms behind /metrics and /stats
 * (internal to gateway/). Prefix gw_metrics_.
 *
 * BOUNDED SERIES. A metric has at most two labels, and every label value
 * comes from a label set created up front: either a fixed table (rejection
 * reasons, HTTP codes) or a bounded set whose capacity is fixed when it is
 * created (upstream topics: every one is known at startup, see
 * docs/CONFIG.md). Series are addressed by index into those sets, so there
 * is no call that could create a series from a string seen on the network:
 * MQTT topics and client ids can never become label values, and the number
 * of series never grows with the number of devices. Storage for every
 * series is allocated at registration; an update never allocates.
 *
 * OWNERSHIP. The registry belongs to the loop thread. Values the loop owns
 * (router counters, connection gauges) are plain integers updated there with
 * gw_metrics_add/set/observe. Values owned by other threads (the WAL
 * writer's fsync histogram, the replicator's counters) stay in those
 * threads as atomics; a collector callback registered with
 * gw_metrics_add_collector() runs on the loop at every scrape and copies
 * them in (gw_metrics_set, gw_metrics_hist_load). gw_metrics_ahist_t is a
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
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum { GW_METRICS_COUNTER, GW_METRICS_GAUGE, GW_METRICS_HISTOGRAM } gw_metrics_type_t;

#define GW_METRICS_MAX_BUCKETS    24  /* finite upper bounds per histogram */
#define GW_METRICS_MAX_FAMILIES   96
#define GW_METRICS_MAX_LABELSETS  16
#define GW_METRICS_MAX_COLLECTORS 16
#define GW_METRICS_MAX_SERIES     65536 /* per family: label set capacities multiplied */

typedef struct gw_metrics gw_metrics_t;               /* a registry */
typedef struct gw_metrics_family gw_metrics_family_t; /* one metric name, all its series */
typedef struct gw_metrics_labels gw_metrics_labels_t; /* a bounded set of label values */

/* ---- registry ----------------------------------------------------------- */

/* A new, empty registry. Returns 0 (allocation aborts on out-of-memory). */
int gw_metrics_new(gw_metrics_t **out /* OUT */);
/* Frees the registry, its label sets and families. NULL is allowed. */
void gw_metrics_free(gw_metrics_t *m);

/* ---- label sets --------------------------------------------------------- */

/*
 * A label named `name` whose values are exactly `values` (copied). Returns 0,
 * or TB_EINVALID for a bad label name, an empty or duplicate value, or
 * TB_EFULL when the registry holds GW_METRICS_MAX_LABELSETS sets.
 */
int gw_metrics_labels_fixed(gw_metrics_t *m, const char *name, const char *const *values, size_t n,
                            gw_metrics_labels_t **out /* OUT */);
/* A label whose values are added later with gw_metrics_labels_add, at most `cap` of them. */
int gw_metrics_labels_bounded(gw_metrics_t *m, const char *name, size_t cap,
                              gw_metrics_labels_t **out /* OUT */);
/*
 * Adds `value` to a bounded set. Returns its index (an existing value keeps
 * its index), TB_EFULL past the capacity, TB_EINVALID for a fixed set or an
 * empty or non-UTF-8 value.
 */
int gw_metrics_labels_add(gw_metrics_labels_t *l, const char *value);
/* Index of `value`, or TB_EINVALID when it is not in the set. */
int gw_metrics_labels_find(const gw_metrics_labels_t *l, const char *value);
size_t gw_metrics_labels_count(const gw_metrics_labels_t *l);
const char *gw_metrics_labels_value(const gw_metrics_labels_t *l, size_t i); /* NULL out of range */
const char *gw_metrics_labels_name(const gw_metrics_labels_t *l);

/* ---- families ----------------------------------------------------------- */

typedef struct gw_metrics_spec {
    const char *name;         /* exposition name; counters end in _total */
    gw_metrics_type_t type;
    const char *help;         /* one line; escaped when written */
    uint64_t div;             /* exposed = raw / div; 0 means 1 */
    const uint64_t *bounds;   /* histograms: finite upper bounds, raw unit, strictly ascending */
    size_t nbounds;           /* 1..GW_METRICS_MAX_BUCKETS; +Inf is implicit */
} gw_metrics_spec_t;

/*
 * Registers a family with zero, one (l1) or two (l1, l2) labels. The spec's
 * strings must outlive the registry (they are not copied: they are
 * literals in a table). Returns 0, or TB_EINVALID (bad name or label name,
 * counter without _total, l2 without l1, histogram bounds not ascending,
 * "le" used as a label of a histogram, too many series), or TB_EFULL.
 * Writers list families in registration order.
 */
int gw_metrics_register(gw_metrics_t *m, const gw_metrics_spec_t *spec, gw_metrics_labels_t *l1,
                        gw_metrics_labels_t *l2, gw_metrics_family_t **out /* OUT */);
gw_metrics_family_t *gw_metrics_find(gw_metrics_t *m, const char *name); /* NULL when absent */

size_t gw_metrics_nfamilies(const gw_metrics_t *m);
gw_metrics_family_t *gw_metrics_family_at(gw_metrics_t *m, size_t i);
const gw_metrics_spec_t *gw_metrics_family_spec(const gw_metrics_family_t *f);
gw_metrics_labels_t *gw_metrics_family_label(const gw_metrics_family_t *f, int which /* 0 or 1 */);

/* ---- updates (loop thread) ---------------------------------------------- */

/*
 * i1, i2 index the first and second label's sets (0 when the family has no
 * such label). An index past the set's current count is ignored: the call
 * does nothing, so a stale index cannot write into another series.
 */
void gw_metrics_add(gw_metrics_family_t *f, size_t i1, size_t i2, uint64_t n); /* counter, gauge */
void gw_metrics_sub(gw_metrics_family_t *f, size_t i1, size_t i2, uint64_t n); /* gauge */
/* Gauges; and counters whose running total is kept elsewhere (a collector copying an atomic). */
void gw_metrics_set(gw_metrics_family_t *f, size_t i1, size_t i2, int64_t v);
void gw_metrics_observe(gw_metrics_family_t *f, size_t i1, size_t i2, uint64_t v); /* histogram */
/* Raw value of a counter or gauge series (0 when out of range). */
int64_t gw_metrics_get(const gw_metrics_family_t *f, size_t i1, size_t i2);

/* Histogram series snapshot: counts per bucket (not cumulative), nbounds + 1 of them. */
typedef struct gw_metrics_hist_view {
    const uint64_t *counts;
    size_t nbuckets; /* nbounds + 1; the last is the +Inf bucket */
    uint64_t count;  /* sum of counts */
    uint64_t sum;    /* raw unit */
} gw_metrics_hist_view_t;
/* Returns 0 or TB_EINVALID (not a histogram, index out of range). */
int gw_metrics_hist_get(const gw_metrics_family_t *f, size_t i1, size_t i2, gw_metrics_hist_view_t *out /* OUT */);

/* ---- values owned by other threads -------------------------------------- */

/*
 * A histogram any thread may observe into (relaxed atomics, no lock). A
 * collector copies it into a registered family at scrape time with
 * gw_metrics_hist_load(). The copy is read bucket by bucket while writers
 * may be adding: the exposed _count is the sum of the copied buckets, so
 * the buckets, +Inf and _count always agree; _sum may include an
 * observation or two that the buckets do not yet show.
 */
typedef struct gw_metrics_ahist {
    const uint64_t *bounds;
    size_t nbounds;
    _Atomic uint64_t counts[GW_METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t sum;
} gw_metrics_ahist_t;

void gw_metrics_ahist_init(gw_metrics_ahist_t *h, const uint64_t *bounds, size_t nbounds);
void gw_metrics_ahist_observe(gw_metrics_ahist_t *h, uint64_t v); /* any thread */
/* Replaces series (i1, i2) of histogram f with a copy of h. TB_EINVALID when the bounds differ. */
int gw_metrics_hist_load(gw_metrics_family_t *f, size_t i1, size_t i2, const gw_metrics_ahist_t *h);

/*
 * Collectors run on the loop thread, in registration order, when
 * gw_metrics_collect() is called (each scrape of /metrics or /stats, before
 * writing). They must be quick and must not block: read atomics and
 * in-memory state, set values. Returns 0 or TB_EFULL.
 */
typedef void (*gw_metrics_collect_cb)(void *arg, gw_metrics_t *m);
int gw_metrics_add_collector(gw_metrics_t *m, gw_metrics_collect_cb cb, void *arg);
/* Removes the collector registered with exactly (cb, arg), if any (before freeing arg). */
void gw_metrics_remove_collector(gw_metrics_t *m, gw_metrics_collect_cb cb, void *arg);
void gw_metrics_collect(gw_metrics_t *m);

/* ---- writers ------------------------------------------------------------ */

/*
 * Appends every family with at least one series in the Prometheus text
 * exposition format 0.0.4 (HELP, TYPE, samples; histograms as _bucket with
 * cumulative le, +Inf, _sum and _count; label values and help escaped).
 * Does not run the collectors.
 */
void gw_metrics_write_prometheus(gw_metrics_t *m, tb_buf_t *out);
#define GW_METRICS_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes a number as the exposition does: integers exactly, others in the shortest form that reads back. */
void gw_metrics_format_value(char *dst, size_t n, int64_t raw, uint64_t div);

/*
 * One series as JSON (new reference): an integer when div is 1, a real
 * otherwise; a histogram as {"count", "sum", "buckets": {"le": cumulative}}.
 * NULL when out of range.
 */
json_t *gw_metrics_json_value(const gw_metrics_family_t *f, size_t i1, size_t i2);

/* ---- the gateway's catalog (metrics_catalog.c) -------------------------- */

typedef enum {
    /* per upstream topic */
    GW_M_RECEIVED,
    GW_M_STORED,
    GW_M_REPLICATED,
    GW_M_QUEUED,
    GW_M_DROPPED,
    GW_M_REJECTED,
    GW_M_WAL_BYTES,
    GW_M_WAL_SEGMENTS,
    GW_M_WAL_OLDEST_OFFSET,
    GW_M_WAL_NEWEST_OFFSET,
    GW_M_ACKED_OFFSET,
    GW_M_LAG_MESSAGES,
    GW_M_LAG_BYTES,
    GW_M_OLDEST_UNREPLICATED_AGE,
    GW_M_TOPIC_STALLED,
    GW_M_NO_PROGRESS,
    GW_M_TOPIC_INVARIANT_OK,
    GW_M_DROPPED_IN_FLIGHT,
    GW_M_WAL_DROPPED,
    GW_M_WAL_LOST,
    GW_M_WAL_WRITE_ERRORS,
    GW_M_WAL_BATCHES,
    GW_M_BATCHES_IN_FLIGHT,
    GW_M_BATCHES_SENT,
    GW_M_BATCHES_RESENT,
    GW_M_RETRIES,
    GW_M_STREAM_RESETS,
    /* gateway-wide */
    GW_M_INVARIANT_OK,
    GW_M_UNMATCHED,
    GW_M_MQTT_CONNECTIONS,
    GW_M_MQTT_ACCEPTED,
    GW_M_MQTT_REFUSED,
    GW_M_MQTT_CLOSED,
    GW_M_HTTP_CONNECTIONS,
    GW_M_HTTP_REQUESTS,
    GW_M_HTTP_REFUSED,
    GW_M_HTTP_EVICTED,
    GW_M_HTTP_TIMEOUTS,
    GW_M_WAL_FSYNC_SECONDS,
    GW_M_WAL_TOPIC_LIMIT,
    GW_M_WAL_TOTAL_LIMIT,
    GW_M_CLUSTER_UP,
    GW_M_READY,
    GW_M_LOOP_LAG,
    GW_M_BUILD_INFO,
    /* the process, from /proc/self (metrics_process.c) */
    GW_M_PROC_RSS,
    GW_M_PROC_VSIZE,
    GW_M_PROC_CPU,
    GW_M_PROC_OPEN_FDS,
    GW_M_PROC_MAX_FDS,
    GW_M_PROC_START_TIME,
    GW_M_PROC_WRITE_BYTES,
    GW_M_PROC_READ_BYTES,
    GW_M__COUNT
} gw_metric_id_t;

/* Which label set a catalog metric draws from. */
typedef enum {
    GW_ML_NONE, GW_ML_TOPIC, GW_ML_REASON, GW_ML_CODE, GW_ML_TIMEOUT, GW_ML_VERSION,
    GW_ML_RETRY, GW_ML_REFUSE, GW_ML_CLOSE, GW_ML_BATCH, GW_ML__COUNT
} gw_metrics_label_kind_t;

typedef struct gw_metrics_entry {
    gw_metric_id_t id;
    gw_metrics_spec_t spec;
    gw_metrics_label_kind_t l1, l2;
    /* The /stats field: inside each topic object when l1 is GW_ML_TOPIC,
     * else a path from the root ("process.open_fds"); NULL: not in /stats.
     * A label other than the topic makes the field an object keyed by it. */
    const char *json;
    bool json_bool; /* a 0/1 gauge shown as false/true */
} gw_metrics_entry_t;

extern const gw_metrics_entry_t gw_metrics_catalog[GW_M__COUNT];

/* Why a message for a known upstream topic was refused (label "reason").
 * (A captured level outside capture_values makes its rule not match: the
 * message is counted as unmatched, with no topic.) */
typedef enum {
    GW_REJECT_SCHEMA_INVALID,     /* payload fails the topic's schema under enforce */
    GW_REJECT_SCHEMA_UNAVAILABLE, /* enforce, but the schema is not in the registry cache */
    GW_REJECT_PAYLOAD_TOO_LARGE,  /* over mqtt.max_payload_size (or too many attributes) */
    GW_REJECT_WAL_UNAVAILABLE,    /* the topic's log refused the append (failed fsync, disk) */
    GW_REJECT__COUNT
} gw_reject_reason_t;
extern const char *const gw_metrics_reject_reasons[GW_REJECT__COUNT];

/* Why replication rebuilt a stream (label "reason"): replicator.h's rep_retry_t by name. */
extern const char *const gw_metrics_retry_reasons[];
extern const size_t gw_metrics_nretry_reasons;

/* Why a CONNECT was refused with a CONNACK (label "reason"). */
typedef enum {
    GW_MQTT_REFUSE_MAX_CONNECTIONS, /* mqtt.max_connections reached */
    GW_MQTT_REFUSE_CLIENT_ID,       /* client identifier not valid (too long, NUL, empty
                                       without clean session on 3.1.1) */
    GW_MQTT_REFUSE_AUTH,            /* MQTT 5 enhanced authentication asked for: not supported */
    GW_MQTT_REFUSE_SHUTTING_DOWN,   /* during the drain */
    GW_MQTT_REFUSE__COUNT
} gw_mqtt_refuse_t;
extern const char *const gw_metrics_mqtt_refuse_reasons[GW_MQTT_REFUSE__COUNT];

/* Why the gateway closed a connection on its own (label "reason"). */
typedef enum {
    GW_MQTT_CLOSE_MALFORMED,         /* a packet did not decode (or broke the protocol) */
    GW_MQTT_CLOSE_CONNECT_TIMEOUT,   /* no CONNECT within mqtt.connect_timeout_ms */
    GW_MQTT_CLOSE_KEEPALIVE_TIMEOUT, /* silent for 1.5 x its keep alive */
    GW_MQTT_CLOSE__COUNT
} gw_mqtt_close_t;
extern const char *const gw_metrics_mqtt_close_reasons[GW_MQTT_CLOSE__COUNT];

/* Why a topic's log batch was submitted (label "reason"). */
typedef enum {
    GW_BATCH_FULL,    /* mqtt.ingestion.batch_size messages, or the batch's byte bound */
    GW_BATCH_TIMEOUT, /* mqtt.ingestion.batch_timeout_ms after its first message */
    GW_BATCH_IDLE,    /* every client in it had gone quiet (idle_flush_ms, or its pace) */
    GW_BATCH_FLUSH,   /* the drain at shutdown, or the session journal's compaction */
    GW_BATCH__COUNT
} gw_batch_reason_t;
extern const char *const gw_metrics_batch_reasons[GW_BATCH__COUNT];

/* HTTP status codes counted by tributary_http_requests_total (label "code"); "other" for the rest. */
extern const int gw_metrics_http_codes[];
extern const size_t gw_metrics_nhttp_codes; /* including the trailing "other" */
size_t gw_metrics_http_code_index(int status);

/* Why an HTTP connection timed out (label "kind"). */
typedef enum { GW_HTTP_TIMEOUT_REQUEST, GW_HTTP_TIMEOUT_IDLE, GW_HTTP_TIMEOUT_WRITE, GW_HTTP_TIMEOUT__COUNT } gw_http_timeout_kind_t;

/*
 * Registers every catalog metric with a topic label set of capacity
 * max_topics (>= 1), and the /proc/self collector. Returns 0 or a
 * gw_metrics_register error (a bug in the table).
 */
int gw_metrics_catalog_register(gw_metrics_t *m, size_t max_topics);
/* The family of a catalog metric (NULL before gw_metrics_catalog_register). */
gw_metrics_family_t *gw_metrics_fam(gw_metrics_t *m, gw_metric_id_t id);
/* The upstream topic label set. */
gw_metrics_labels_t *gw_metrics_topics(gw_metrics_t *m);
/* Adds an upstream topic; returns its index, TB_EFULL or TB_EINVALID. */
int gw_metrics_topic_add(gw_metrics_t *m, const char *topic);

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
typedef struct gw_metrics_balance {
    uint64_t received, replicated, queued, dropped, rejected;
    bool ok;
} gw_metrics_balance_t;
bool gw_metrics_topic_balance(gw_metrics_t *m, size_t topic, gw_metrics_balance_t *out /* OUT */);
/* Sets the invariant gauges from the other values; call after gw_metrics_collect(). Returns the overall flag. */
bool gw_metrics_catalog_derive(gw_metrics_t *m);

/* ---- the process (metrics_process.c) ------------------------------------ */

typedef struct gw_metrics_proc {
    uint64_t rss_bytes, vsize_bytes;
    uint64_t cpu_ns;           /* user + system */
    uint64_t start_time_ms;    /* since the Unix epoch */
    uint64_t open_fds, max_fds;
    uint64_t read_bytes, write_bytes; /* storage I/O, /proc/self/io */
    bool have_io;              /* /proc/self/io was readable */
} gw_metrics_proc_t;

/* Parses /proc/<pid>/stat text. Returns 0 or TB_EMALFORMED. */
int gw_metrics_proc_parse_stat(const char *text, long ticks_per_s, long page_size, uint64_t boot_time_s,
                               gw_metrics_proc_t *out /* OUT: rss, vsize, cpu, start time */);
/* Parses /proc/<pid>/io text. Returns 0 or TB_EMALFORMED. */
int gw_metrics_proc_parse_io(const char *text, gw_metrics_proc_t *out /* OUT: read/write bytes */);
/* Reads all of it for this process. Returns 0 or -errno (what could be read is filled in). */
int gw_metrics_proc_read(gw_metrics_proc_t *out /* OUT */);

#endif
