/*
 * broker.h: the MQTT broker (the gateway/broker/ folder's one public
 * header): listeners, connections, CONNECT, PUBLISH, sessions and their
 * journal, wills, and each upstream topic's batches into the write-ahead
 * log. Prefix broker_ (public), broker__ (internal, broker_int.h).
 *
 * What it knows: the configuration, the MQTT codec (mqtt/), the router
 * (router/), the log (wal/), the validators (schema/) and the metrics'
 * label vocabularies (metrics/). What it does not know: where stored
 * messages go next. An output that reads the log (the Danube replicator
 * today, others later) learns that a topic has new records through
 * broker_on_stored(); the broker never calls an output.
 *
 * THREADS. Everything here runs on the loop thread, except
 * broker_wal_notify (the WAL writer's thread).
 *
 * LIFETIME, in the order the process calls it (gateway/run.c):
 *   broker_new       loop handles (before wal_open: the writer may notify at once)
 *   broker_init      rules, topics, the session journal, every topic's log
 *   broker_listen    the MQTT listeners
 *   broker_drain     stop accepting, answer everything received, close connections
 *   broker_close     after wal_close: close the loop handles, free
 */
#ifndef BROKER_BROKER_H
#define BROKER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "gateway/auth/auth.h"
#include "gateway/metrics/metrics.h"
#include "schema/schema.h"
#include "wal/wal.h"

typedef struct broker broker_t;

/* Sockets past max_connections still accepted so that their CONNECT is
 * answered with a refusal (CONNACK 0x97 / 3); past these the socket is
 * closed at accept, unread. The descriptor budget reserves them. */
#define BROKER_REFUSAL_HEADROOM 16u

/* Why a message was not stored (counted per topic; a bounded set). */
typedef enum {
    BROKER_REJ_UNMATCHED,     /* no mapping matched the MQTT topic */
    BROKER_REJ_INVALID,       /* failed schema validation under enforce */
    BROKER_REJ_NOT_READY,     /* enforce mapping whose schema is not resolved */
    BROKER_REJ_TOO_LARGE,     /* payload over mqtt.max_payload_size */
    BROKER_REJ_QUOTA,         /* the topic's log failed (disk full, I/O error) */
    BROKER_REJ_FULL,          /* a disk bound refused it (the log is fine): the topic's on_full, or the
                                 free-space floor, with nothing left to drop */
    BROKER_REJ__COUNT
} broker_reject_t;
const char *broker_reject_name(broker_reject_t r);

/*
 * One upstream topic. The broker owns it (broker_topic(); valid until
 * broker_close). Outside the broker the loop thread may READ every field
 * and WRITE only the schema block, which the replication glue fills from
 * the cluster's registration and heartbeats (a validator swapped here
 * lands between two PUBLISHes; the broker takes the reference it is given
 * and unrefs the one it replaces: see gateway/replication.c).
 */
/* The life of a slot (docs/design/RELOAD.md 4.1). The gateway's retirement
 * (gateway/retire.c) moves it past RETIRING with broker_topic_set_life; a
 * reload routing to the name again makes it LIVE (broker_plan_commit). */
typedef enum {
    BROKER_LIFE_LIVE,            /* some rule of the current generation routes to it */
    BROKER_LIFE_RETIRING,        /* no rule routes to it; its backlog is being replicated */
    BROKER_LIFE_REMOVING,        /* drained: its lanes released, its log being retired (a reload
                                    routing to it is refused until this ends: a moment) */
    BROKER_LIFE_RETIRED,         /* its log removed (wal_topic_retire; the RETIRED file keeps its
                                    next offset and counters); t->wal is the old handle, unused */
    BROKER_LIFE_KEPT,            /* drained, wal.retire: keep: its log kept, not replicated */
    BROKER_LIFE__COUNT
} broker_topic_life_t;
const char *broker_topic_life_name(broker_topic_life_t l);

typedef struct broker_topic {
    char *name;
    uint32_t id;                 /* slot id == index (broker_topic(b, id)), for the process's life */
    bool routed;                 /* some rule of the current generation routes to it; false: no
                                    mapping any more, its backlog still replicates (reload) */
    broker_topic_life_t life;    /* LIVE exactly when routed */
    wal_topic_t *wal;
    char *schema_subject;        /* its mappings' schema_subject; NULL: raw bytes */
    cfg_encoding_t encoding;     /* the Avro payload encoding of those mappings */
    cfg_on_full_t on_full;       /* its mappings' on_full (they must agree): its log's overflow policy */
    uint64_t max_age_ms;         /* its mappings' max_age (they must agree; 0: none): the replicator's */
    cfg_durability_t durability; /* its mappings' durability (they must agree): its log's (wal.h MEMORY TIER) */
    uint8_t priority;            /* its mappings' priority (they must agree): the replicator's pacing */
    /* the schema block (written by the replication glue) */
    sch_validator_t *validator;  /* NULL until resolved (or on compile failure); owned */
    bool has_schema;
    uint64_t schema_id;
    uint32_t schema_version;
    bool schema_failed;          /* the resolved schema did not compile: fail closed */
    bool registered;
    /* counters */
    uint64_t received;           /* PUBLISHes routed to this topic */
    uint64_t stored;             /* durable in the log */
    uint64_t rejected[BROKER_REJ__COUNT];
    uint64_t dead_letters[METRICS_DL__COUNT]; /* records of it stored in the dead-letter log, by reason */
    uint64_t batched;            /* messages in the open batch or at the writer: accepted, no completion yet */
    uint64_t log_end;            /* one past the highest offset the log confirmed (completions); 0: none yet */
    uint64_t batches[METRICS_BATCH__COUNT]; /* batches submitted, by why (tributary_wal_batches_total) */
    /* the broker's own: never touched outside gateway/broker/ */
    broker_t *srv;
    wal_batch_t *batch;          /* open batch, NULL when none */
    struct broker_batch_ctx *ctx; /* acks waiting on the open batch */
    uv_timer_t timer;            /* batch timeout / idle flush, armed at the batch's first message */
    uint64_t batch_first_ms;     /* loop time of the open batch's first message */
    uint64_t batch_quiet_ms;     /* when every sender in it will have been quiet long enough (pace.c) */
    uint32_t inflight;           /* batches at the writer */
    bool journal_dep;            /* its open batch holds a QoS 2 message the journal's open batch says STORED */
    bool turn_listed;            /* memory_first, in memory: its open batch goes at the end of this loop turn */
    uint32_t nwaiters, cap_waiters;
    struct broker_conn **waiters; /* on_full block: connections not read until its log has room (ingest.c) */
    uint64_t blocked_pauses;     /* times a publisher of it was paused so (on_full block) */
} broker_topic_t;

/* The clients that publish most (the operator's page, /stats connections.top_talkers). */
#define BROKER_TOP_TALKERS 5
#define BROKER_TALK_WINDOW_MS 5000
typedef struct broker_talker {
    char client_id[64];          /* truncated to 63 bytes */
    double messages_per_second;  /* PUBLISHes over the window */
} broker_talker_t;

/*
 * Up to n (<= BROKER_TOP_TALKERS) connected clients by PUBLISHes per second,
 * busiest first, over a window of at least BROKER_TALK_WINDOW_MS between one
 * call and a later one: a call that ends a window scans the connections
 * once (each keeps a counter and its value at the window's start: 8 bytes);
 * a call within it returns the last window's list. *window_s: its length
 * (0 before the first window has ended). A client connected during a
 * window counts from the window's start (a low estimate). Clients that
 * published nothing are left out.
 */
size_t broker_top_talkers(broker_t *b, uint64_t now_ms, broker_talker_t *out /* OUT */, size_t n, double *window_s);

/* Connection counters (tributary_mqtt_*). */
typedef struct broker_stats {
    bool listening;
    uint32_t connections;        /* past CONNECT */
    uint64_t accepted;           /* sockets accepted */
    uint64_t refused[METRICS_REFUSE__COUNT]; /* CONNACK refusals, by reason */
    uint64_t closed[METRICS_CLOSE__COUNT];   /* closed by us, by reason */
    uint64_t unmatched;          /* PUBLISHes no mapping matched */
    uint64_t publish_denied;     /* PUBLISHes auth.acl_file refused */
    uint32_t sessions_persistent; /* persistent sessions, connected or not (mqtt.max_sessions) */
    uint32_t sessions_remembered; /* of them, with no connection */
    uint32_t wills_pending;      /* delayed wills waiting */
    uint64_t journal_bytes;      /* the session journal on disk */
    uint64_t will_bytes;         /* memory the wills hold (mqtt.max_will_bytes) */
} broker_stats_t;

/*
 * A broker on `loop` with its loop handles set up (the WAL's wake-up
 * first). Returns 0 and *out, or -errno from libuv (nothing is left to
 * close then). From here on it ends with broker_close().
 */
int broker_new(uv_loop_t *loop, broker_t **out /* OUT */);
/* The WAL's notify callback (wal_opts_t.notify, arg: the broker). Any thread. */
void broker_wal_notify(void *broker);
/*
 * Compiles the rules, opens the dead-letter log, the session journal and
 * every upstream topic's log. cfg and wal must outlive the broker. Returns
 * 0, or TB_ECONFIG / -errno with a message in err (file, line, key where it
 * is the configuration); then drain (nothing to wait for) and close.
 */
int broker_init(broker_t *b, const cfg_t *cfg, wal_t *wal, char *err, size_t errlen);
/*
 * The rules broker_init holds the configuration to beyond config/'s own
 * (they need the router's topics): the mappings of one upstream topic
 * agree on schema_subject and on_full. Opens nothing. 0, or TB_ECONFIG
 * with err = "mqtt.topic_mappings[i].KEY (line N): why". Any thread.
 */
int broker_check_config(const cfg_t *cfg, char *err, size_t errlen);
/*
 * Opens every listener: mqtt.listeners, or mqtt.listener alone; each is
 * logged "mqtt listening" with its bound address (addr), its index
 * (listener) and tls true/false. 0, or -errno / TB_ECONFIG (logged); then
 * those already open are closed by broker_drain.
 */
int broker_listen(broker_t *b);
/* Listeners (0 before broker_listen) and the address listener i bound, port
 * 0 resolved (borrowed; NULL when it is not listening). */
size_t broker_nlisteners(const broker_t *b);
const char *broker_listener_addr(const broker_t *b, size_t i);
/* Listener i's own counts (zeros past the last). */
typedef struct broker_listener_stats {
    bool tls;                    /* its connections speak TLS */
    uint32_t connections;        /* past CONNECT */
    uint64_t publish_denied;     /* PUBLISHes and wills auth.acl_file refused */
    uint64_t tls_read_pauses;    /* tls.read_coalesce_ms: times a connection's reading was paused */
} broker_listener_stats_t;
void broker_listener_stats(const broker_t *b, size_t i, broker_listener_stats_t *out /* OUT */);
/*
 * Stops accepting, finishes in-flight batches and acks, closes the
 * connections (their wills are stored); then cb(arg), from a later loop
 * turn or at once when nothing is in flight. Call once.
 */
void broker_drain(broker_t *b, void (*cb)(void *arg), void *arg);
/*
 * POST /admin/drain (RELOAD.md 6.4), the part of broker_drain before the
 * log closes: stops accepting (listeners closed: new connections are
 * refused by the kernel, a CONNECT already read is refused "server
 * unavailable"), pauses reading, flushes every open batch, waits for every
 * pending ack, then closes the connections with MQTT 5 0x8B (server
 * shutting down) so devices go elsewhere or wait; then cb(arg). Unlike
 * broker_drain, held `block` batches are not released: the replication
 * that empties the log makes their room. broker_drain after it finds
 * nothing open and goes on with its own steps. Once, until broker_unquiesce.
 */
void broker_quiesce(broker_t *b, void (*cb)(void *arg), void *arg);
/*
 * POST /admin/drain/cancel: after broker_quiesce's cb has run, accepting
 * again: every listener opens anew (its address from the configuration: a
 * port 0 binds another port, logged "mqtt listening" again). TB_EBUSY
 * while the quiesce is still closing connections or listeners (nothing
 * changed: ask again), TB_EINVALID when not quiesced; else 0 or the
 * listen's error (logged; those that opened stay open).
 */
int broker_unquiesce(broker_t *b);
/* After wal_close (its thread joined): closes the loop handles, frees b, then cb(arg). */
void broker_close(broker_t *b, void (*cb)(void *arg), void *arg);

/*
 * The output seam: fn(arg, topic) runs each time a completed batch made
 * new records of upstream topic `topic` readable in its log (never for the
 * local dead-letter and journal logs). It must be quick: a wake-up, not
 * work. NULL fn: nobody is told.
 */
void broker_on_stored(broker_t *b, void (*fn)(void *arg, size_t topic), void *arg);

/* Upstream topics, in router order (0 before broker_init). */
size_t broker_ntopics(const broker_t *b);
broker_topic_t *broker_topic(broker_t *b, size_t i); /* NULL out of range */

/*
 * A batch the cluster refused for good (docs/design/RELOAD.md 5.5): its
 * records go to the dead-letter log, each with its payload, MQTT topic and
 * attributes plus dead_letter.error, .topic, .offset, .source ("cluster")
 * and .attempts (original attributes past 250 are left out: a record holds
 * at most 255). Counted in the topic's dead_letters[reason] when durable.
 * Returns 0 and calls done(arg, rc) once every record is durable (rc 0) or
 * one write failed (rc < 0), from a later completion on the loop; or
 * TB_EUNSUPPORTED (mqtt.dead_letter off) / the log's error at once, done
 * never called. n may be 0 (every record deleted by a bound meanwhile).
 */
typedef struct broker_dl_batch {
    size_t topic;                /* broker_topic index */
    const wal_record_t *recs;
    size_t n;
    const char *error;           /* "INVALID_ARGUMENT: <the cluster's text>" */
    uint32_t attempts;
    metrics_dl_reason_t reason;
    const char *source;          /* dead_letter.source: NULL "cluster"; an output's "output:<name>" */
} broker_dl_batch_t;
int broker_dead_letter_batch(broker_t *b, const broker_dl_batch_t *d, void (*done)(void *arg, int rc), void *arg);
/* The dead-letter log (NULL with mqtt.dead_letter off): `tributary dlq` reads and purges it. */
wal_topic_t *broker_dead_letter_log(broker_t *b);

/*
 * Replays one dead letter (docs/design/RELOAD.md 5.7, `tributary dlq replay`):
 * routed again by its MQTT topic through the current rules, its mapping's
 * policy and validation applied (the ACL is not consulted: an operator's
 * action), the captures recomputed, its mqtt.* attributes kept (its
 * dead_letter.* ones left out) plus tributary.dlq_offset. STORED: handed to
 * the topic's log (*topic it; counted received and stored like any
 * message); REFUSED: why says (not dead-lettered again); UNMATCHED: no
 * mapping matches it now.
 */
typedef enum { BROKER_REPLAY_STORED, BROKER_REPLAY_REFUSED, BROKER_REPLAY_UNMATCHED } broker_replay_t;
broker_replay_t broker_replay(broker_t *b, const wal_record_t *rec, broker_topic_t **topic /* OUT */, char *why,
                              size_t whylen);
/* Submits t's open batch now, if it has one (a replay's last record need not
 * wait for the batch timeout). Loop thread. */
void broker_topic_flush(broker_topic_t *t);
void broker_stats(const broker_t *b, broker_stats_t *out /* OUT */);

/* Sockets the broker holds at most (mqtt.max_connections unless the
 * process's descriptor budget allows fewer: gateway/fdbudget.c). Before broker_listen. */
void broker_set_max_connections(broker_t *b, uint32_t n);

/* Mapping rules of the generation in force (mqtt.topic_mappings, config order). */
size_t broker_nrules(const broker_t *b);
/* The generation in force: 1 at boot, +1 per reload whose mappings were applied. */
uint64_t broker_generation(const broker_t *b);
/* The registry's capacity, fixed at broker_init: BROKER_TOPIC_HEADROOM of the
 * boot's topics (never fewer than them: past 10,000 topics at boot a reload
 * gets no headroom). A reload that would need more slots is refused. */
#define BROKER_TOPIC_HEADROOM(n)                                                                                 \
    TB_MAX((size_t)(n), (size_t)TB_MIN((size_t)10000, TB_MAX(2 * (size_t)(n), (size_t)(n) + 64)))
size_t broker_topic_cap(const broker_t *b);

/*
 * A live mapping reload (docs/design/RELOAD.md 2.1-2.5), on the loop thread,
 * in three steps so that the caller can refuse whole before anything moves:
 *
 *   broker_plan_new     compiles next's mappings (router, rules, per-topic
 *                       attributes that must agree) off to the side, and
 *                       settles them against the registry by name: which
 *                       slots are added, which stay (and which of their
 *                       attributes change), which no rule routes to any
 *                       more. No I/O, nothing changed. TB_ECONFIG with err
 *                       ("file:line: key: why"), or TB_EFULL when the new
 *                       topics exceed broker_topic_cap.
 *   broker_plan_open    opens the logs of the added topics (wal_topic_open:
 *                       a writer round trip). A failure: nothing is routed
 *                       to them (an empty directory is left for the next
 *                       boot), the running generation stays.
 *   broker_plan_commit  links the added slots (their ids are plan->added[]),
 *                       applies changed on_full / schema subject / max_age
 *                       to their slots (a changed subject resets the schema
 *                       block: enforce refuses until the new one resolves),
 *                       swaps srv->gen in one store, submits the open batches
 *                       of the topics that left (routed = false; their logs
 *                       stay, their backlog is replicated) and frees the old
 *                       generation. After it, give the added ids to the
 *                       replicator before returning to the loop.
 *
 * next is borrowed until broker_plan_commit or broker_plan_free.
 */
enum {
    BROKER_CHANGED_SUBJECT = 1u << 0,  /* schema_subject (or encoding) */
    BROKER_CHANGED_ON_FULL = 1u << 1,
    BROKER_CHANGED_MAX_AGE = 1u << 2,
    BROKER_CHANGED_KEPT = 1u << 3,     /* durability or priority differ: kept until a restart */
};
typedef struct broker_plan {
    struct broker_gen *gen;      /* the next generation (private) */
    size_t *added;               /* slot ids the commit creates, in order */
    size_t nadded;
    size_t *revived;             /* slots not routed before, routed again */
    broker_topic_life_t *revived_life; /* revived[k]'s life before the commit: RETIRING (its lanes
                                    still run), KEPT or RETIRED (the replicator needs new lanes:
                                    rep_engine_readd_topic; a RETIRED one has a new log) */
    wal_topic_t **revived_wal;    /* RETIRED: the re-created log broker_plan_open opened */
    size_t nrevived;
    size_t *leaving;             /* slots routed before, not by the plan */
    size_t nleaving;
    size_t *changed;             /* slots that stay with changes (changed_how[k]: BROKER_CHANGED_*) */
    unsigned *changed_how;
    size_t nchanged;
    size_t rules_before, rules_after;
    /* private */
    struct broker_topic **fresh; /* the added slots (not linked yet) */
    struct broker_topic **stage; /* by new router topic id: the settled attributes */
    size_t nstage;
} broker_plan_t;
int broker_plan_new(broker_t *b, const cfg_t *next, broker_plan_t **out /* OUT */, char *err, size_t errlen);
int broker_plan_open(broker_t *b, broker_plan_t *p, char *err, size_t errlen);
void broker_plan_commit(broker_t *b, broker_plan_t *p);
void broker_plan_free(broker_plan_t *p /* NULL: nothing */);
/* The gateway's retirement (loop thread): RETIRING -> REMOVING -> RETIRED or KEPT. */
void broker_topic_set_life(broker_t *b, size_t id, broker_topic_life_t life);

/*
 * The password file and ACL in force (either NULL: none) and cfg's auth.*
 * settings (copied: cfg may be freed after), at start and on reload.
 * Takes a reference of each file; checks already running keep the old ones
 * until they end. Without a call: no authentication, anonymous allowed.
 */
void broker_set_auth(broker_t *b, const cfg_t *cfg, auth_passwd_t *pw, auth_acl_t *acl);

/*
 * The certificates and keys of every listener with tls in cfg
 * (mqtt.listeners[i].tls), loaded into one OpenSSL context each: read
 * without touching any broker, so that a file that does not load is found
 * before anything changes. 0 and *out (NULL when no listener has tls), or
 * TB_ECONFIG with err = "mqtt.listeners[i].tls.KEY (line N): FILE: why".
 * Any thread.
 */
typedef struct broker_tls broker_tls_t;
int broker_tls_load(const cfg_t *cfg, broker_tls_t **out /* OUT */, char *err, size_t errlen);
size_t broker_tls_count(const broker_tls_t *t); /* TLS listeners in it */
void broker_tls_free(broker_tls_t *t /* NULL: nothing */);
/*
 * Gives b the contexts of t (taken over, t freed; NULL: none), at start
 * before broker_listen, and on reload: each TLS listener's next handshakes
 * use its new context; established connections keep theirs. Logged, with
 * each certificate's subject and expiry (a warning once expired). t must
 * come from the configuration b runs on, or one with the same listeners.
 */
void broker_set_tls(broker_t *b, broker_tls_t *t);

/*
 * The runtime QoS 2 journal's file (mqtt.qos2_state: runtime; rtjournal.c
 * has the format), parsed: fn gets each well-formed record in file order,
 * up to the first that is not (a tail cut short). Returns the records
 * given, or BROKER_RTJ_OTHER_BOOT (the header names another boot than
 * boot_id: nothing given) or BROKER_RTJ_BAD_HEADER. *end: bytes of buf
 * that are well formed. Public for its fuzz target.
 */
#define BROKER_RTJ_OTHER_BOOT (-1)
#define BROKER_RTJ_BAD_HEADER (-2)
#define BROKER_RTJ_BOOT_ID_LEN 36
typedef struct broker_rtj_rec {
    bool stored;            /* STORED, else RELEASED */
    uint16_t packet_id;
    uint64_t nonce;         /* the session's (its OPEN record in the session journal) */
    const char *client_id;  /* not NUL-terminated, in buf */
    size_t client_id_len;
} broker_rtj_rec_t;
long broker_rtj_parse(const uint8_t *buf, size_t len, const char boot_id[BROKER_RTJ_BOOT_ID_LEN],
                      void (*fn)(void *arg, const broker_rtj_rec_t *r), void *arg, size_t *end /* OUT */);

#endif
