/*
 * replicator.h: replication to a Danube cluster over gRPC, and the engine of
 * outputs it is one kind of (at the end of this file) (the replicator/
 * folder's one public header). Prefix rep_ (public), rep__ (internal).
 *
 * What it does, in the order a boot sees it (docs/REPLICATION.md is the
 * long form): RegisterEdge declares every upstream topic with its schema
 * subject, retried with backoff (1 s doubling to 60 s, jittered) for as long
 * as the cluster is away; each topic that registered is looked up
 * (Discovery.TopicLookup) and replicated from its WAL checkpoint + 1 on one
 * long-lived ReplicateData stream, several batches in flight, acks matched
 * to batch_last_offset, the checkpoint advanced through contiguous acks
 * only (wal_checkpoint, which also drives retention); a heartbeat keeps the
 * schemas in step. Every RPC has a deadline, a stream whose oldest batch is
 * not acked within ack_timeout_ms is cancelled and rebuilt from the last
 * acked offset with the same batch boundaries, and nothing ever gives up.
 *
 * THREADS. rep_start() starts one thread that owns every gRPC object (the
 * channels, the completion queue, the calls) and every WAL reader, and
 * blocks in grpc_completion_queue_next() until the next completion or the
 * next due timer of its own (batch timeout, ack deadline, backoff,
 * heartbeat); it never polls on a tick. Other threads talk to it through a
 * mailbox whose wake-up cancels a parked "waker" call (grpc_call_cancel is
 * thread-safe per grpc.h; see rep_thread.c). Towards the event loop it posts
 * rep_event_t's and calls opts.notify (coalesced, like wal_open's: drain
 * with rep_take_events each time; uv_async_send fits). The loop applies
 * schemas itself: validators and topic state belong to the loop thread.
 *
 * ERRORS follow base.h: 0 or a negative code; tb_strerror() names it.
 */
#ifndef REP_REPLICATOR_H
#define REP_REPLICATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "config/config.h"
#include "schema/schema.h"
#include "wal/wal.h"

typedef struct rep rep_t;

/* One upstream topic to register and replicate. */
typedef struct rep_topic_spec {
    const char *name;           /* /edge_name/topic */
    const char *schema_subject; /* NULL: no schema (raw bytes) */
    wal_topic_t *wal;           /* its log; must outlive the replicator */
    uint64_t max_age_ms;        /* mqtt.topic_mappings[].max_age: records older than this (by
                                   publish_time_ms) when about to be sent are dropped unsent and
                                   counted (messages_dropped_age; the WAL's dropped_age_total);
                                   0: none */
    uint8_t priority;           /* mqtt.topic_mappings[].priority (its mappings agree): when an output
                                   is capped, higher priorities drain first (rep_pace.c) */
    const cfg_t *mappings;      /* rep_engine_add_topic (a reload): the configuration whose
                                   topic_mappings made the topic, read during the call only (the mqtt
                                   and sparkplug kinds match its records' topics against them for
                                   ${N} in their templates); NULL: the start's configuration */
} rep_topic_spec_t;

/*
 * Options. A trailing key name says the field comes from that configuration
 * key, whose default (config_table.c, through cfg_defaults()) is the
 * field's default; rep_opts_from_cfg is the one place that maps them.
 * Fields without a key are the replicator's own.
 */
typedef struct rep_opts {
    const char *edge_name;          /* edge.edge_name */
    const char *cluster_url;        /* edge.cluster_url: http://host:port or https://host:port */
    const char *token;              /* edge.token; NULL or "": no authorization metadata */
    const char *tls_ca_file;        /* edge.tls.ca_file; https only; NULL/"": gRPC's default roots */
    const char *tls_cert_file;      /* edge.tls.cert_file; https only; client certificate (with key_file) */
    const char *tls_key_file;       /* edge.tls.key_file */
    uint32_t heartbeat_interval_ms; /* edge.heartbeat_interval_ms; each wait is jittered by +-10% */
    uint32_t batch_size;            /* replicator.batch_size: messages per batch */
    uint32_t batch_timeout_ms;      /* replicator.batch_timeout_ms, from the batch's first message */
    uint64_t max_batch_bytes;       /* replicator.max_batch_bytes, encoded; a single larger message
                                       goes alone */
    uint32_t max_inflight_batches;  /* replicator.max_inflight_batches, per topic, on one stream */
    uint32_t ack_timeout_ms;        /* replicator.ack_timeout_ms: oldest unacked batch -> cancel
                                       the stream */
    uint32_t rpc_timeout_ms;        /* replicator.rpc_timeout_ms: deadline of every unary RPC */
    uint32_t live_window_ms;        /* replicator.live_window_ms: older messages get
                                       tributary.replayed=true */
    uint32_t retry_initial_ms;      /* replicator.retry_initial_ms: stream rebuild backoff, full jitter */
    uint32_t retry_max_ms;          /* replicator.retry_max_ms */
    uint32_t max_attempts;          /* replicator.max_attempts: a batch refused with a permanent
                                       status this many times goes to the dead-letter log */
    uint32_t register_retry_initial_ms; /* 1000: RegisterEdge backoff (no key) */
    uint32_t register_retry_max_ms; /* 60000 (no key) */
    uint32_t shutdown_grace_ms;     /* replicator.shutdown_grace_ms: at stop, how long in-flight
                                       batches may take */
    uint32_t stall_after_ms;        /* health.stall_after_ms: a topic is stalled when messages
                                       wait and no ack has moved it for this long */
    uint32_t recheck_ms;            /* from wal.fsync and wal.fsync_interval_ms (see
                                       rep_opts_from_cfg); 0: off. With wal.fsync interval the
                                       readable end moves without a completion; a topic with
                                       written but not yet readable data looks again this often */
    uint64_t max_bytes_per_s;       /* outputs[danube].max_bytes_per_s: encoded ReplicateBatch bytes
                                       per second over all topics; 0: no cap */
    uint32_t max_messages_per_s;    /* outputs[danube].max_messages_per_s: StreamMessages per second
                                       over all topics; 0: no cap */
    const rep_topic_spec_t *topics; /* copied */
    size_t ntopics;
    void (*notify)(void *arg);      /* replicator thread: events are waiting */
    void *notify_arg;
} rep_opts_t;

/*
 * Fills the defaults: rep_opts_from_cfg(cfg_defaults(), o) plus the fields
 * that have no key (register_retry_*). Strings are the table's:
 * edge_name and cluster_url NULL, token and the TLS files "" (static, never
 * freed); no topics, no notify.
 */
void rep_opts_default(rep_opts_t *o /* OUT */);

/*
 * Sets every option that comes from configuration, from cfg: edge.* (TLS
 * included), replicator.* but checkpoint_interval_ms (the WAL's), and
 * health.stall_after_ms; and recheck_ms, which wal.fsync interval needs
 * (a quarter of wal.fsync_interval_ms, at least 5 ms) and the other modes
 * do not (0). Every other field is left as it was, so start from
 * rep_opts_default and add topics, notify and notify_arg. The strings are
 * borrowed from cfg: keep it alive until rep_new, which copies them.
 */
void rep_opts_from_cfg(const cfg_t *cfg, rep_opts_t *o /* IN/OUT */);

/*
 * Checks the options, reads the TLS files, records each topic's checkpoint
 * and opens nothing on the network. Returns 0 and *out, or TB_ECONFIG with
 * err naming the problem (e.g. "edge.tls.ca_file: cannot read ..."). Calls
 * grpc_init() (balanced by rep_free).
 */
int rep_new(const rep_opts_t *o, rep_t **out /* OUT */, char *err, size_t errlen);

/* Starts the replicator thread: registration begins at once. 0 or -errno. */
int rep_start(rep_t *r);

/*
 * New data may be readable for topic i (index in opts.topics): any thread,
 * typically the loop after a WAL completion. Cheap and coalesced: one
 * atomic exchange, and a wake-up only if the topic was not already queued.
 */
void rep_kick(rep_t *r, size_t topic);

/*
 * Asks the thread to stop (any thread; idempotent): no new batches are
 * built; in-flight batches get shutdown_grace_ms to be acknowledged (the
 * checkpoint follows their acks); then streams are closed (WritesDone, or
 * cancelled at the deadline) and pending calls cancelled. REP_EV_STOPPED is
 * posted when everything is closed; then call rep_free.
 */
void rep_stop(rep_t *r);

/* Joins the thread (if started), closes the WAL readers, frees everything,
 * events not taken included. Call wal_close after this. NULL is allowed. */
void rep_free(rep_t *r);

/* Why a record went to the dead-letter log (label "reason" of tributary_dead_letters_total):
 * a fixed set, the cluster's free text goes in the record (dead_letter.error), never a label. */
typedef enum {
    REP_DL_INVALID_SCHEMA,             /* the gateway's schema validation refused it */
    REP_DL_CLUSTER_INVALID_ARGUMENT,   /* the cluster refused its batch: INVALID_ARGUMENT */
    REP_DL_CLUSTER_FAILED_PRECONDITION,
    REP_DL_CLUSTER_OUT_OF_RANGE,
    REP_DL_CLUSTER_TOO_LARGE,          /* RESOURCE_EXHAUSTED for a one-message batch */
    REP_DL_OPERATOR,                   /* an operator's decision */
    REP_DL_OUTPUT_TYPE_MISMATCH,       /* an output cannot carry its value (a Sparkplug metric's type
                                          changed, the alias table full, a metric not born) */
    REP_DL_OUTPUT_UNROUTABLE,          /* an output has nowhere to send it (an MQTT remote topic or a
                                          Sparkplug device id its template cannot expand) */
    REP_DL__COUNT
} rep_dl_reason_t;
const char *rep_dl_reason_name(rep_dl_reason_t r);

/* A refusal that is not an outage (docs/OPERATIONS.md "Credentials refused"). */
typedef enum {
    REP_REFUSED_NONE,
    REP_REFUSED_CREDENTIALS,           /* UNAUTHENTICATED or PERMISSION_DENIED */
    REP_REFUSED_UNIMPLEMENTED,         /* the cluster URL has no EdgeReplicatorService */
    REP_REFUSED__COUNT
} rep_refused_t;
const char *rep_refused_name(rep_refused_t r);

/* ---- events towards the loop ------------------------------------------------ */

typedef enum {
    REP_EV_TOPIC_REGISTERED, /* RegisterEdge accepted the topic; schema_resolved says
                                whether its subject resolved (true when it has none) */
    REP_EV_TOPIC_FAILED,     /* RegisterEdge refused the topic (detail: the cluster's error) */
    REP_EV_SCHEMA_UPDATED,   /* heartbeat: a new schema for the topic */
    REP_EV_SCHEMA_REMOVED,   /* heartbeat: the topic's subject was deleted */
    REP_EV_TOPIC_REMOVED,    /* heartbeat: the topic was deleted on the cluster; the
                                replicator re-registers at the next heartbeat tick */
    REP_EV_STOPPED,          /* after rep_stop: everything is closed */
    REP_EV_DEAD_LETTER,      /* a batch the cluster refused replicator.max_attempts times, or a
                                record an mqtt/sparkplug output cannot carry (dl->source
                                "output:<name>"): its records (ev->dl) go to the dead-letter log;
                                answer with rep_engine_dead_letter_done once they are durable (or not) */
    REP_EV_TOPIC_RELEASED,   /* rep_engine_release_topic: this output let go of the topic (reader and
                                cursor closed, undeclared); one per output that carried it */
} rep_event_kind_t;

/* One record of a dead-lettered batch: rec's pointers point into blob (owned). */
typedef struct rep_dl_record {
    wal_record_t rec;        /* raw is NULL */
    uint8_t *blob;
} rep_dl_record_t;

typedef struct rep_dead_letter {
    uint64_t token;          /* to hand back to rep_engine_dead_letter_done */
    uint64_t first, last;    /* the batch's offsets in its topic */
    rep_dl_reason_t reason;
    char *error;             /* "INVALID_ARGUMENT: <the cluster's text>", or the output's reason */
    char *source;            /* dead_letter.source: NULL "cluster"; an output's "output:<name>" */
    uint32_t attempts;
    rep_dl_record_t *recs;   /* those still in the log (a bound may have deleted some) */
    size_t n;
} rep_dead_letter_t;

/* An owned copy of a ResolvedSchema. */
typedef struct rep_schema {
    char *subject;
    uint64_t schema_id;
    uint32_t schema_version;
    char *schema_type;
    uint8_t *definition;     /* Danube's JSON envelope */
    size_t definition_len;
    char *fingerprint;
} rep_schema_t;

typedef struct rep_event {
    tb_mnode_t node;         /* first: the mailbox link */
    rep_event_kind_t kind;
    uint16_t output;         /* the output that posted it (rep_engine_noutputs order; 0 standalone);
                                the engine's one STOPPED: 0 */
    size_t topic;            /* index in opts.topics / the engine's topics (not for STOPPED) */
    uint64_t config_version; /* the cluster's, when the event was made */
    bool schema_resolved;
    bool has_schema;         /* `schema` is filled */
    rep_schema_t schema;
    char *detail;            /* NULL or the cluster's text */
    rep_dead_letter_t *dl;   /* REP_EV_DEAD_LETTER: owned by the event */
} rep_event_t;

/* Splices out every waiting event, oldest first (follow rep_event_next). NULL when none. */
rep_event_t *rep_take_events(rep_t *r);
rep_event_t *rep_event_next(const rep_event_t *ev);
void rep_event_free(rep_event_t *ev);
const char *rep_event_kind_name(rep_event_kind_t k);
/* A borrowed sch_resolved_t view of ev->schema (valid while ev lives). */
void rep_event_resolved(const rep_event_t *ev, sch_resolved_t *out /* OUT */);

/* ---- stats for the operator (any thread) -------------------------------------- */

typedef enum {
    REP_CLUSTER_CONNECTING,  /* no answer yet (first attempt, or reconnecting) */
    REP_CLUSTER_CONNECTED,   /* the cluster channel is READY */
    REP_CLUSTER_UNREACHABLE, /* the channel is in TRANSIENT_FAILURE */
    REP_CLUSTER__COUNT
} rep_cluster_state_t;

typedef enum {
    REP_REG_NONE,            /* not tried yet */
    REP_REG_REGISTERING,     /* RegisterEdge in flight */
    REP_REG_REGISTERED,      /* heartbeating */
    REP_REG_RETRYING,        /* the last attempt failed; waiting out the backoff */
    REP_REG__COUNT
} rep_reg_state_t;

typedef enum {
    REP_TOPIC_UNREGISTERED,  /* waiting for registration (or removed on the cluster) */
    REP_TOPIC_LOOKUP,        /* Discovery.TopicLookup in flight */
    REP_TOPIC_CONNECTING,    /* waiting for the broker channel to be READY */
    REP_TOPIC_STREAMING,     /* the ReplicateData stream is open */
    REP_TOPIC_BACKOFF,       /* the stream failed; rebuilt after a jittered delay */
    REP_TOPIC_STOPPED,
    REP_TOPIC__COUNT
} rep_topic_state_t;

/* Why a stream was rebuilt (or a lookup retried). */
typedef enum {
    REP_RETRY_UNAVAILABLE,   /* the stream ended UNAVAILABLE (connection lost, refused) */
    REP_RETRY_ACK_TIMEOUT,   /* no ack within ack_timeout_ms: cancelled */
    REP_RETRY_STATUS,        /* the stream ended with another status (INTERNAL, ...) */
    REP_RETRY_PROTOCOL,      /* an ack out of order, or the stream ended with batches unacked */
    REP_RETRY_LOOKUP,        /* TopicLookup failed or answered Failed */
    REP_RETRY_PERMANENT,     /* the stream ended with a permanent status (INVALID_ARGUMENT, ...) */
    REP_RETRY_REFUSED,       /* the cluster refused the edge's credentials (or has no edge service) */
    REP_RETRY__COUNT
} rep_retry_t;


typedef struct rep_topic_stats {
    rep_topic_state_t state;
    bool registered;
    uint64_t start_offset;       /* the WAL's next offset when it was opened (wal open_offset):
                                    offsets from here on were received by this process */
    uint64_t acked_offset;       /* the checkpoint: contiguous acks */
    uint64_t readable_end;       /* live from the WAL */
    uint64_t lag_messages;       /* records stored in (acked_offset, readable_end): offsets with no
                                    record (a reservation skip, wal_topic_stored_between) left out */
    uint64_t lag_bytes;          /* bytes on disk of the records after acked_offset: those read and
                                    not yet acked (counted as read) plus the log past the reader
                                    (wal_topic_bytes_after); 0 before the reader first opened */
    uint64_t oldest_unacked_ms;  /* publish_time of the oldest message read and not acked; 0: none */
    uint32_t batches_in_flight;  /* built and not acked (sent or waiting to be sent) */
    uint64_t batches_sent;       /* SEND_MESSAGEs started, resends included */
    uint64_t batches_resent;
    uint64_t batches_acked;
    uint64_t messages_acked;     /* acknowledged since start */
    uint64_t messages_acked_new; /* of those, offsets >= start_offset (received since start) and
                                    still in the log when acked (see messages_acked_dropped) */
    uint64_t messages_acked_dropped; /* offsets >= start_offset acknowledged after a disk bound had
                                    deleted them while their batch was in flight: the WAL counted
                                    them as dropped (wal_checkpoint_floor), so not in _new */
    uint64_t messages_dropped_age; /* skipped unsent for being older than max_age, since start
                                    (the checkpoint passed them; the WAL's dropped_age_total is
                                    the persistent count) */
    uint64_t messages_dropped_age_new; /* of those, offsets >= start_offset still in the log when
                                    the checkpoint passed them: the accounting invariant's share */
    uint64_t messages_replayed;  /* sent with tributary.replayed=true (first sends) */
    uint64_t gaps;               /* WAL_GAPs met that were drops (records deleted before being read) */
    uint64_t holes;              /* WAL_GAPs met that were holes (offsets without records: a
                                    reservation skipped at restart, acknowledged from memory) */
    uint64_t attributes_skipped; /* attributes left out: not UTF-8 (a proto3 string must be) */
    uint64_t retries[REP_RETRY__COUNT];
    uint64_t stream_resets;      /* streams that ended while open */
    uint64_t last_ack_ms;        /* wall clock; 0: never */
    uint64_t messages_dead_lettered; /* passed by the checkpoint once in the dead-letter log (a batch
                                    the cluster refused replicator.max_attempts times), since start */
    uint64_t messages_dead_lettered_new; /* of those, offsets >= start_offset still in the log: the
                                    accounting invariant's share */
    uint64_t dead_letter_batches;
    uint64_t permanent_failures; /* stream ends charged to a batch with a permanent status */
    rep_refused_t refused;       /* the cluster refuses this topic's stream (credentials) */
    char problem[240];           /* in words: a refusal, or a poison batch held; "" when none */
    bool stalled;                /* messages waiting, and for stall_after_ms no ack has moved
                                    acked_offset (counted from when they began to wait) */
    uint64_t no_progress_ms;     /* messages waiting: since acked_offset last moved, or since they
                                    began to wait if later; 0 when none wait */
    uint64_t slot_dropped;       /* this output's cursor: offsets >= the topic's open_offset deleted
                                    by a disk bound before it acknowledged them (wal_cursor_stats
                                    dropped_since_open) */
    uint64_t slot_dropped_total; /* the same, persistent, since the slot exists */
    uint64_t throttled_ms;       /* cumulative time a unit of it waited for its output's rate
                                    caps (max_bytes_per_s, max_messages_per_s), since start */
    bool paused;                 /* rep_engine_pause: nothing new is sent (never stalled then) */
} rep_topic_stats_t;

typedef struct rep_stats {
    rep_cluster_state_t cluster;
    rep_reg_state_t registration;
    uint64_t config_version;
    uint64_t registrations;      /* successful RegisterEdge calls */
    uint64_t registration_failures;
    uint64_t heartbeats;         /* answered */
    uint64_t heartbeat_failures;
    uint64_t last_heartbeat_ms;  /* wall clock; 0: never */
    rep_refused_t refused;       /* the cluster refuses the edge (RegisterEdge, heartbeat, a stream) */
    char refused_words[240];     /* "credentials refused (UNAUTHENTICATED: ...)"; "" when none */
    uint64_t refused_since_ms;   /* wall clock */
} rep_stats_t;

void rep_topic_stats(rep_t *r, size_t topic, rep_topic_stats_t *out /* OUT */);
void rep_stats(rep_t *r, rep_stats_t *out /* OUT */);
size_t rep_ntopics(const rep_t *r);

/* ---- the engine: every output of the configuration ----------------------------
 *
 * The engine owns the outputs of cfg->outputs (docs/REPLICATION.md, "Engine,
 * outputs, lanes"): each is one destination of the log, of a kind (today
 * only danube: the replicator above, unchanged), with a thread of its own,
 * and one lane per upstream topic it carries (its `topics` filters, MQTT
 * filter syntax, matched against the upstream names). A lane reads the
 * topic's log with its own reader and acknowledges through its own WAL
 * cursor (wal.h CURSORS; danube's is id 0, the log's historic checkpoint),
 * so retention and the memory tier go by the minimum over the outputs that
 * carry the topic. After the outputs opened their cursors (rep_engine_start)
 * the engine calls wal_cursors_settled: slots of outputs no longer
 * configured stop holding retention. Events of every output come through
 * rep_engine_take_events, tagged with their output; REP_EV_STOPPED comes
 * once, when every output has stopped.
 */
typedef struct rep_engine rep_engine_t;
typedef enum { REP_KIND_DANUBE, REP_KIND_MQTT, REP_KIND_SPARKPLUG, REP_KIND__COUNT } rep_kind_t;

typedef struct rep_engine_opts {
    const cfg_t *cfg;                 /* outputs[], edge.*, replicator.*, health.*: borrowed until
                                         rep_engine_new returns */
    wal_t *wal;                       /* output ids and cursors */
    const rep_topic_spec_t *topics;   /* router order (the broker's topic indexes); copied */
    size_t ntopics;
    size_t max_topics;                /* the topic index capacity, for rep_engine_add_topic
                                         (the broker's registry: broker_topic_cap); 0: ntopics */
    void (*notify)(void *arg);        /* any output's thread: events are waiting */
    void *notify_arg;
} rep_engine_opts_t;

typedef struct rep_output_info {
    const char *name;                 /* outputs[].name; valid while the engine lives */
    rep_kind_t kind;
    size_t topics;                    /* topics it carries */
    bool removed;                     /* rep_engine_remove_output: stopping or stopped; not shown */
} rep_output_info_t;

/* kind sparkplug: its session (replicator/rep_spb.c) as /stats shows it. */
typedef struct rep_spb_stats {
    bool valid;                       /* a sparkplug output with a session */
    const char *phase;                /* "down", "subscribing", "refused", "wait_host", "up",
                                         "leaving", "stopped" (static) */
    uint8_t bdseq;                    /* the current (or last) attempt's: its will's and NBIRTH's */
    uint8_t seq;                      /* the seq the next message gets */
    uint32_t connects;                /* attempts since the bdSeq blob began */
    uint64_t nbirths, dbirths;        /* births sent (rebirths included) */
    uint64_t data_msgs, metrics;      /* NDATA/DDATA sent, metrics in them */
    uint64_t confirmed;               /* messages the remote confirmed */
    uint32_t unconfirmed;             /* messages out and not confirmed now */
    uint64_t rebirth_cmds;            /* NCMD Node Control/Rebirth answered */
    uint64_t deadline_ends;           /* sessions ended for an unconfirmed message */
    bool host_online;                 /* primary_host_id's STATE (true without one) */
} rep_spb_stats_t;

typedef struct rep_output_stats {
    rep_kind_t kind;
    size_t topics;                    /* topics it carries */
    uint64_t messages_acked;          /* sum over its lanes, since start */
    uint64_t lag_messages;            /* sum over its lanes, live */
    uint64_t lag_bytes;               /* sum over its lanes, live */
    uint32_t batches_in_flight;       /* sum over its lanes */
    /* the connection, in words (every kind): danube "connected", "connecting", "unreachable"
     * (the cluster's channel); mqtt "connecting", "up", "backoff", "refused" (the remote refused
     * CONNECT: bad credentials, not authorized), "stopped". A static string. */
    const char *state;
    bool up;                          /* danube: connected and registered; mqtt: "up" */
    char last_error[256];             /* "" until something failed; never a password */
    uint64_t attempts;                /* mqtt: connection attempts */
    uint64_t sessions;                /* mqtt: CONNACKs accepted */
    uint64_t refusals;                /* mqtt: CONNACKs refused */
    uint64_t failures;                /* mqtt: attempts or sessions that ended in an error */
    uint64_t messages_sent;           /* mqtt: PUBLISHes handed to the connection, resends included */
    uint64_t messages_resent;         /* mqtt: of those, sent again after a lost session */
    uint64_t dead_letters;            /* mqtt, sparkplug: records it cannot carry (remote topic too
                                         long or invalid, a type mismatch...): to the dead-letter
                                         log (or, mqtt.dead_letter off, skipped), counted */
    uint32_t inflight;                /* mqtt: PUBLISHes not yet acknowledged */
    uint32_t window;                  /* mqtt: min(max_inflight, the remote's Receive Maximum) */
    uint32_t backoff_ms;              /* mqtt: the last reconnect delay chosen */
    uint64_t max_bytes_per_s;         /* its caps (outputs[].max_bytes_per_s ...); 0: none */
    uint64_t max_messages_per_s;
    uint64_t throttled_ms;            /* sum over its lanes of throttled_ms */
    rep_stats_t danube;               /* kind danube: the cluster's (rep_stats); zeros otherwise */
    rep_spb_stats_t sparkplug;        /* kind sparkplug; zeros otherwise */
} rep_output_stats_t;

/*
 * Builds every output of o->cfg (ops->init: what can fail for a configuration
 * reason, nothing on the network; a kind this build lacks is TB_ECONFIG
 * naming outputs[i].kind), with the lanes their `topics` filters select.
 * 0 and *out, or < 0 with err.
 */
int rep_engine_new(const rep_engine_opts_t *o, rep_engine_t **out /* OUT */, char *err, size_t errlen);
/* wal_cursors_settled, then one thread per output. 0 or -errno. */
int rep_engine_start(rep_engine_t *e);
/* New data may be readable for topic (any thread): to every output carrying it, coalesced per lane. */
void rep_engine_kick(rep_engine_t *e, size_t topic);
/* The loop's answer to REP_EV_DEAD_LETTER (any thread): rc 0 once its records are durable in the
 * dead-letter log (the checkpoint then passes the batch), < 0 when they could not be kept (the
 * batch is held and the write asked again after the backoff). Every kind: danube's poison
 * batches; mqtt and sparkplug's records they cannot carry (TB_EUNSUPPORTED, mqtt.dead_letter
 * off: those are skipped and counted, the checkpoint passes them). */
void rep_engine_dead_letter_done(rep_engine_t *e, uint16_t output, size_t topic, uint64_t token, int rc);
/* Every output drains in parallel (rep_stop's rules for danube); REP_EV_STOPPED when the last is done. */
void rep_engine_stop(rep_engine_t *e);
/* Joins every thread, closes readers and cursors, frees everything. Before wal_close. NULL allowed. */
void rep_engine_free(rep_engine_t *e);
/* Every output's waiting events, oldest first per output; NULL when none. */
rep_event_t *rep_engine_take_events(rep_engine_t *e);

/*
 * A topic at run time (a reload, docs/design/RELOAD.md 2.6), loop thread,
 * after rep_engine_start: topic is the next index (rep_engine_ntopics) and
 * below max_topics. Each output whose `topics` filters carry it gets a lane
 * (its cursor opened now, on the loop); its thread then declares it to the
 * cluster (Danube: RegisterEdge again, existing streams untouched; the
 * outcome is the topic's REP_EV_TOPIC_REGISTERED or REP_EV_TOPIC_FAILED, so
 * a refused topic is reported alone and the rest goes on). Returns 0, or
 * TB_EFULL past max_topics, or the first output's error (err says which;
 * the other outputs still carry it). A kind without run-time topics is
 * named in err and carries it after a restart.
 */
int rep_engine_add_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec, char *err, size_t errlen);
/*
 * Retiring a topic (docs/design/RELOAD.md 4.3; loop thread): once the loop
 * saw it drained (every active cursor past its last offset, nothing held),
 * every output carrying it is told to let go of it on its thread: the kind
 * stops what it runs for it (Danube: its stream and timers; it is declared
 * no more, RegisterEdge again without it), the lane closes its reader and
 * its cursor and reads nothing again, and the output posts
 * REP_EV_TOPIC_RELEASED. Returns how many outputs were told (0: none
 * carries it, nothing to wait for); the log may be retired
 * (wal_topic_retire) once that many events came.
 */
size_t rep_engine_release_topic(rep_engine_t *e, size_t topic);
/* Whether every lane of topic was released (true when no output carries it). */
bool rep_engine_released(const rep_engine_t *e, size_t topic);
/*
 * A released topic given again (a reload maps its name again: the log
 * re-created after a retirement, or the same log kept by wal.retire: keep),
 * loop thread: as rep_engine_add_topic for an index below
 * rep_engine_ntopics whose lanes are all released; each output that carries
 * the name gets a new lane (the old one's memory stays until the engine is
 * freed: its stats are read without a lock).
 */
int rep_engine_readd_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec, char *err, size_t errlen);
/* Its schema subject or max_age changed (loop thread): Danube declares it again. */
void rep_engine_update_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec);
size_t rep_engine_ntopics(const rep_engine_t *e);
size_t rep_engine_noutputs(const rep_engine_t *e);
void rep_output_info(const rep_engine_t *e, size_t out, rep_output_info_t *info /* OUT */);
bool rep_output_carries(const rep_engine_t *e, size_t out, size_t topic); /* false once removed */
/* rep_output_info's removed alone (cheap: no walk over the lanes). */
bool rep_output_removed(const rep_engine_t *e, size_t out);
/* Any thread. */
void rep_output_stats(rep_engine_t *e, size_t out, rep_output_stats_t *st /* OUT */);
/* Any thread: output out's lane of topic (rep_topic_stats' fields); zeros when it does not carry it. */
void rep_lane_stats(rep_engine_t *e, size_t out, size_t topic, rep_topic_stats_t *st /* OUT */);
/* The first output carrying topic (whose lane /stats and /metrics show), or SIZE_MAX. */
size_t rep_engine_primary(const rep_engine_t *e, size_t topic);
/* The Danube cluster's stats (the first danube output's), zeros without one. */
void rep_engine_stats(rep_engine_t *e, rep_stats_t *out /* OUT */);
/* Whether the engine has a danube output. */
bool rep_engine_has_danube(const rep_engine_t *e);
const char *rep_kind_name(rep_kind_t k);
/*
 * Pause and resume (rep_pause.c; RELOAD.md 6.3; POST /admin/topics/T/pause):
 * any thread. While paused, no output carrying topic reads its log or sends
 * a new batch (those in flight are still acknowledged, streams stay open);
 * the log keeps taking its messages, lag grows. Resume sends on from the
 * checkpoint, in order. Idempotent; not persisted (a restart resumes).
 * Returns the outputs that carry the topic (0: none: nothing to pause), or
 * TB_EINVALID when topic is out of range.
 */
int rep_engine_pause(rep_engine_t *e, size_t topic, bool paused);
/* Whether topic is paused (false when out of range). */
bool rep_engine_paused(const rep_engine_t *e, size_t topic);

/* replicator.max_attempts from a reload (any thread): a batch already
 * charged keeps its charges and is judged by the new bound at its next
 * refusal (lowered below its charges: dead-lettered at that refusal).
 * Returns the outputs it applies to (the danube ones). */
size_t rep_engine_set_max_attempts(rep_engine_t *e, uint32_t max_attempts);

/*
 * Outputs at run time (a reload, docs/design/OUTPUTS.md 3.4; the loop thread, after
 * rep_engine_start). Kinds mqtt and sparkplug; a danube output is added or removed by a restart
 * (TB_EUNSUPPORTED).
 *
 * rep_engine_add_output: output `name` of cfg is made (its files, templates and lanes: each
 * lane's cursor opened, a slot seen before resumes from its checkpoint, a new one starts at the
 * log's end), started, and kicked for what waits in the log. 0; 1 when an output of that name
 * is still being removed (a replace): it starts, from the checkpoints the old one left, once
 * the old one stopped (cfg is kept by cfg_ref until then); or < 0 with err (nothing changed).
 * At most REP_RUNTIME_OUTPUTS instances (adds and replaces) after the start (TB_EFULL: restart).
 *
 * rep_engine_remove_output: the output stops as at rep_engine_stop (what is in flight gets
 * replicator.shutdown_grace_ms; Sparkplug sends its NDEATH); once its thread ended (seen in
 * rep_engine_take_events) its lanes are released and its cursors parked: checkpoints and drop
 * counts kept, retention and the memory tier no longer wait for it; re-adding the name resumes
 * from them, until `tributary wal forget-output NAME`. Its stats stay readable
 * (rep_output_info's removed). 0, or -ENOENT when no output of that name runs.
 */
int rep_engine_add_output(rep_engine_t *e, const cfg_t *cfg, const char *name, char *err, size_t errlen);
/* Output instances a reload may start beyond the boot's, until a restart: each add and each replace
 * takes one (a removed instance stays, its stats readable, until the engine is freed). */
#define REP_RUNTIME_OUTPUTS 256
/* What an mqtt or sparkplug output `name` of cfg reads when it starts (its broker address, the
 * password file, the TLS files), read now: a reload checks it before it replaces or adds the
 * output, so a file that does not load changes nothing. 0 (danube: nothing to read) or < 0
 * with err ("outputs[NAME].password_file ..."). Any thread; no network. */
int rep_output_check(const cfg_t *cfg, const char *name, char *err, size_t errlen);
int rep_engine_remove_output(rep_engine_t *e, const char *name);
/* Output instances a reload may still start (0: a restart is needed for the next add or replace). */
size_t rep_engine_output_room(const rep_engine_t *e);
/* Whether an add of `name` waits for its old instance to stop (a replace in progress). */
bool rep_engine_output_pending(const rep_engine_t *e, const char *name);
/* A reload applied cfg while adds wait: each waiting add of a name cfg still has starts with cfg
 * (its caps, its keys, the mappings its templates match), cfg_ref'd. */
void rep_engine_pending_config(rep_engine_t *e, const cfg_t *cfg);

/* outputs[NAME].max_bytes_per_s / max_messages_per_s from a reload (loop thread): the output's
 * pacer takes them on its thread and holds them from then on (rep__pace_set_rates); 0 lifts a
 * cap. /stats shows them at once. 0, or -ENOENT when no output has that name. */
int rep_engine_set_rates(rep_engine_t *e, const char *name, uint64_t max_bytes_per_s, uint64_t max_messages_per_s);

const char *rep_cluster_state_name(rep_cluster_state_t s);
const char *rep_reg_state_name(rep_reg_state_t s);
const char *rep_topic_state_name(rep_topic_state_t s);
const char *rep_retry_name(rep_retry_t r);

#endif
