/*
 * server.h: the MQTT ingestion server (internal to gateway/).
 *
 * One loop thread owns everything here. The path of a PUBLISH:
 *
 *   conn.c      bytes -> mqtt_decode -> dispatch by packet type
 *   publish.c   topic alias, route (router.h), readiness and schema check,
 *               attributes, then ingest.c
 *   ingest.c    append to the topic's open batch (wal_batch_add copies the
 *               message once, in its on-disk layout); submit on size,
 *               timeout, or once its clients are quiet (pace.c: how long
 *               each is waited for); on completion mark each pending ack
 *   conn.c      send acks from the head of the connection's FIFO while
 *               they are ready, so a connection's acks leave in the order
 *               its PUBLISHes arrived, whatever topic they went to
 *
 * Lifetimes: a connection that closes with messages still in the log's
 * hands stays allocated (refs > 0) until their completions arrive, so a
 * completion never touches freed memory; its socket is closed at once.
 *
 * Backpressure: bytes held in open and submitted batches are counted; past
 * mqtt.ingestion.max_pending_bytes every connection stops reading
 * (uv_read_stop) until they fall below half of it.
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/base.h"
#include "config/config.h"
#include "gateway/metrics/metrics.h"
#include "gateway/mqtt/mqtt.h"
#include "gateway/router/router.h"
#include "replicator/replicator.h"
#include "schema/schema.h"
#include "wal/wal.h"

typedef struct gw_server gw_server_t;
typedef struct gw_conn gw_conn_t;
typedef struct gw_session gw_session_t;

/* Why a message was not stored (a metric label; bounded set). */
typedef enum {
    GW_REJ_UNMATCHED,     /* no mapping matched the MQTT topic */
    GW_REJ_INVALID,       /* failed schema validation under enforce */
    GW_REJ_NOT_READY,     /* enforce mapping whose schema is not resolved */
    GW_REJ_TOO_LARGE,     /* payload over mqtt.max_payload_size */
    GW_REJ_QUOTA,         /* the topic's log failed (disk full, I/O error) */
    GW_REJ_COUNT
} gw_reject_t;
const char *gw_reject_name(gw_reject_t r);

/* A client's pace (pace.c): its usual gap between PUBLISHes when it is
 * not waiting for an ack, which says how long its batch may wait for it. */
typedef struct gw_pace {
    uint64_t last_ms;     /* loop time of its latest PUBLISH; 0: none yet */
    uint64_t probe_at_ms; /* not before then is an unknown pace probed again */
    uint32_t gap_x16;     /* moving average of its free gaps, ms x 16 */
    uint8_t clocked;      /* ack-separated gaps in a row since the last free one */
    uint8_t probe_s;      /* seconds between probes: 1, doubled per failed probe, at most 64 */
    bool sampled;         /* gap_x16 holds a measurement */
    bool acked;           /* an ack went to it since last_ms */
    bool probing;         /* its latest message is waited for idle_flush_max_ms to see if more come */
} gw_pace_t;

/* Per upstream topic runtime state. */
typedef struct gw_topic {
    char *name;
    uint32_t id;                 /* router topic id == index in server->topics */
    wal_topic_t *wal;
    wal_batch_t *batch;          /* open batch, NULL when none */
    struct gw_batch_ctx *ctx;    /* acks waiting on the open batch */
    uv_timer_t timer;            /* batch timeout / idle flush, armed at the batch's first message */
    uint64_t batch_first_ms;     /* loop time of the open batch's first message */
    uint64_t batch_quiet_ms;     /* when every sender in it will have been quiet long enough (pace.c) */
    gw_server_t *srv;
    uint32_t inflight;           /* batches at the writer */
    /* schema (from registration / heartbeat) */
    char *schema_subject;        /* NULL: raw bytes, no schema */
    sch_validator_t *validator;  /* NULL until resolved (or on compile failure) */
    bool has_schema;
    uint64_t schema_id;
    uint32_t schema_version;
    bool schema_failed;          /* the resolved schema did not compile: fail closed */
    bool registered;
    /* counters (loop thread) */
    uint64_t received;           /* PUBLISHes routed to this topic */
    uint64_t stored;             /* durable in the log */
    uint64_t rejected[GW_REJ_COUNT];
    uint64_t batched;            /* messages in the open batch or at the writer: accepted, no completion yet */
    uint64_t log_end;            /* one past the highest offset the log confirmed (completions); 0: none yet */
    uint64_t batches[METRICS_BATCH__COUNT]; /* batches submitted, by why (tributary_wal_batches_total) */
} gw_topic_t;

/* Per mapping rule: what the router does not know. */
typedef struct gw_rule {
    const cfg_mapping_t *m;
    cfg_policy_t policy;
} gw_rule_t;

/* One QoS 1/2 PUBLISH waiting for its answer, in a connection's FIFO. */
typedef struct gw_pending {
    struct gw_pending *next;
    gw_conn_t *conn;     /* whose FIFO this is in (holds a reference) */
    gw_session_t *session; /* QoS 2: the session to update when ready (holds a reference) */
    struct gw_pending *follower; /* a DUP resend on another connection waiting for this one */
    uint16_t packet_id;
    uint8_t qos;
    uint8_t waits;       /* completions still needed before it is ready */
    uint8_t reason;      /* MQTT 5 reason code to send (0 = success) */
    bool close;          /* 3.1.1 cannot say "refused": close instead of acking */
    bool qos2_record;    /* on success, remember packet_id until PUBREL */
    bool pubcomp;        /* this entry answers a PUBREL (PUBCOMP), not a PUBLISH */
} gw_pending_t;

/* What the gateway keeps with a batch while the log has it: the pending
 * ack of every message that has one (each holds a connection reference). */
typedef struct gw_batch_ctx {
    gw_topic_t *t;
    uint64_t bytes;       /* counted in server->pending_bytes */
    uint32_t n, cap;
    gw_pending_t **p;
} gw_batch_ctx_t;

struct gw_conn {
    uv_tcp_t tcp;
    gw_server_t *srv;
    struct gw_conn *prev, *next;    /* server->conns */
    uint64_t id;
    int refs;                       /* 1 for the socket + 1 per message in a batch */
    bool closing, connected, reading, got_disconnect, will_suppressed;
    uint8_t version;                /* 0 until CONNECT, then 4 or 5 (3 is run as 4) */
    uint16_t keep_alive;            /* seconds; 0 = none */
    uint64_t last_rx_ms, accepted_ms;
    char *client_id;
    char peer[64];
    gw_session_t *session;          /* the client's session (persistent or not) */
    /* MQTT 5 */
    uint32_t client_max_packet;     /* the client's Maximum Packet Size (0 = none) */
    bool request_problem_info;
    char **aliases;                 /* [topic_alias_maximum + 1] */
    /* partial input */
    uint8_t *in;
    size_t in_len, in_cap;
    /* acks and replies */
    gw_pending_t *pend_head, *pend_tail;
    uint32_t inflight;              /* QoS 1/2 PUBLISHes until PUBACK / PUBCOMP (MQTT 5 receive maximum) */
    uint32_t unanswered;            /* QoS 1/2 PUBLISHes without their PUBACK / PUBREC yet */
    gw_pace_t pace;                 /* its PUBLISH pace, for the batches it is in (pace.c) */
    uint8_t *out;
    size_t out_len, out_cap;
    struct gw_conn *dirty_next;     /* server->dirty: has replies to write this loop turn */
    bool dirty;
    size_t writing;                 /* bytes handed to uv_write, not yet done */
    /* will */
    bool has_will;
    uint8_t will_qos;
    bool will_retain;
    char *will_topic;
    uint8_t *will_payload;
    size_t will_len;
    uint32_t will_delay_s;
    wal_attr_t *will_attrs;         /* MQTT 5 will properties as attributes */
    size_t will_nattrs;
};

struct gw_session {
    char *client_id;
    gw_conn_t *conn;                /* attached connection, or NULL */
    bool persistent;                /* clean_session=0 / session expiry > 0 */
    uint32_t expiry_s;
    uint64_t detached_ms;           /* when its connection went (for expiry) */
    /* QoS 2 packet ids stored and PUBRECed, waiting for PUBREL */
    uint16_t *qos2;
    uint32_t nqos2, cap_qos2;
    /* QoS 2 packet ids being stored right now, with their pending ack: a
     * resend meanwhile follows the first copy instead of being stored twice */
    struct gw_storing { uint16_t id; struct gw_pending *p; } *storing;
    uint32_t nstoring, cap_storing;
    int refs;                       /* pending QoS 2 entries pointing here */
    bool linked;                    /* in the server's table */
    bool journaled;                 /* an OPEN record for it is in the session journal */
    /* delayed will (MQTT 5 Will Delay Interval) */
    struct gw_will *will;
    struct gw_session *hnext;       /* hash chain */
};

#define GW_DEAD_LETTER_TOPIC "$dead-letter"
#define GW_JOURNAL_TOPIC "$sessions"

struct gw_server {
    uv_loop_t *loop;
    const cfg_t *cfg;
    uv_tcp_t listener;
    bool listening;
    char listen_addr[80];
    uv_timer_t sweep;               /* connect timeout and keepalive */
    uv_async_t wal_async;           /* the WAL writer's completions */
    uv_check_t flush_check;         /* writes every connection's replies once per loop turn */
    gw_conn_t *dirty;
    wal_t *wal;
    rep_t *rep;                     /* told when a topic's log has new data (NULL: none) */
    router_t *router;
    gw_rule_t *rules;
    size_t nrules;
    gw_topic_t *topics;
    size_t ntopics;
    /* Local logs, never replicated: the dead-letter log (mqtt.dead_letter)
     * and the session journal. NULL when not in use. */
    gw_topic_t *dead_letter;
    gw_topic_t *journal;
    uint64_t journal_records;       /* since its checkpoint: compaction trigger */
    gw_conn_t *conns;
    uint32_t nconns;                /* accepted sockets, CONNECT or not */
    uint32_t nconnected;            /* past CONNECT */
    uint64_t next_conn_id;
    /* sessions by client id */
    gw_session_t **sess_buckets;
    uint32_t sess_nbuckets, nsessions;
    /* backpressure */
    uint64_t pending_bytes;
    bool paused;
    /* draining */
    bool draining;
    void (*drained_cb)(gw_server_t *srv);
    void (*closed_cb)(gw_server_t *srv);
    int closing_handles;
    void *owner;                    /* the service that runs this server */
    /* counters */
    uint64_t conn_accepted;
    uint64_t conn_refused[METRICS_REFUSE__COUNT];  /* CONNACK refusals, by reason (metrics.h) */
    uint64_t conn_closed[METRICS_CLOSE__COUNT];    /* closed by us, by reason */
    uint64_t unmatched_dropped;
    uint8_t *scratch;               /* attribute keys built per PUBLISH */
    size_t scratch_cap;
    uint8_t readbuf[65536];         /* shared read buffer; leftovers go to conn->in */
    bool readbuf_busy;
};

/* server.c */
int gw_server_init(gw_server_t *srv, uv_loop_t *loop, const cfg_t *cfg, wal_t *wal,
                   char *err, size_t errlen);
int gw_server_listen(gw_server_t *srv);
/* Stops accepting, finishes in-flight batches and acks, closes connections;
 * calls cb when nothing is left in flight. */
void gw_server_drain(gw_server_t *srv, void (*cb)(gw_server_t *srv));
/* Closes the server's loop handles and frees it; cb runs when done (after wal_close). */
void gw_server_close(gw_server_t *srv, void (*cb)(gw_server_t *srv));
/* Sets up the loop handles (the WAL's wake-up first: its writer thread may
 * call notify as soon as wal_open returns). Call before gw_server_init. */
int gw_server_prepare(gw_server_t *srv, uv_loop_t *loop);
void gw__server_pending_add(gw_server_t *srv, int64_t bytes);
gw_topic_t *gw__server_topic(gw_server_t *srv, const char *name);

/* journal.c: persistent sessions and their QoS 2 packet ids, kept in the
 * log ("$sessions", never replicated) so they survive a restart. */
int gw__journal_open(gw_server_t *srv, char *err, size_t errlen);
void gw__journal_session(gw_server_t *srv, gw_session_t *s, bool open);
/* Adds a record for a QoS 2 packet id (stored / released); p, when not
 * NULL, waits for it to be durable. */
void gw__journal_qos2(gw_server_t *srv, gw_session_t *s, uint16_t id, bool stored, gw_pending_t *p);
/* local topics (dead letter, journal): for loops over every topic */
gw_topic_t *gw__server_local_topic(gw_server_t *srv, size_t i);
int gw__server_local_open(gw_server_t *srv, const char *name, gw_topic_t **out);

/* reload.c: SIGHUP. Re-reads the configuration file; applies what can
 * change at run time (log level and format, each mapping's
 * validation_policy) and logs every other changed key as needing a
 * restart. An invalid file changes nothing. */
void gw__reload(gw_server_t *srv, const cfg_t *running);

/* conn.c */
void gw__conn_accept(gw_server_t *srv);
void gw__conn_close(gw_conn_t *c, uint8_t reason, const char *why);
void gw__conn_unref(gw_conn_t *c);
void gw__conn_send(gw_conn_t *c, const uint8_t *p, size_t n);
void gw__conn_flush(gw_conn_t *c);
void gw__conn_flush_dirty(gw_server_t *srv);
void gw__conn_pause(gw_conn_t *c);
void gw__conn_resume(gw_conn_t *c);
/* Sends, in order, every ready pending ack at the head of the FIFO. */
void gw__conn_drain_acks(gw_conn_t *c);
gw_pending_t *gw__conn_pending_new(gw_conn_t *c, uint16_t packet_id, uint8_t qos);
void gw__conn_sweep(gw_server_t *srv, uint64_t now_ms);

/* connect.c */
void gw__on_connect(gw_conn_t *c, const mqtt_packet_t *pkt);

/* publish.c */
void gw__on_publish(gw_conn_t *c, const mqtt_packet_t *pkt);
void gw__on_pubrel(gw_conn_t *c, const mqtt_packet_t *pkt);
/* Publishes a connection's will through the same routing (no ack). */
void gw__publish_will(gw_server_t *srv, gw_conn_t *c);

/* ingest.c: one message into the topic's batch. `p` (may be NULL for QoS
 * 0 or a will) becomes ready when the message is durable (or failed). */
typedef struct gw_msg {
    const uint8_t *payload;
    size_t payload_len;
    const wal_attr_t *attrs;
    size_t nattrs;
    const char *mqtt_topic;
    size_t mqtt_topic_len;
    uint8_t qos;
    bool retain;
} gw_msg_t;
int gw__ingest(gw_topic_t *t, const gw_msg_t *m, gw_conn_t *c, gw_pending_t *p);
void gw__ingest_flush(gw_topic_t *t);
void gw__ingest_completions(gw_server_t *srv);

/* pace.c: a client's pace, learnt from the gaps between its PUBLISHes
 * that no ack of ours separated. gw__pace_quiet_ms is how long after its
 * latest PUBLISH a batch holding its messages waits for another: twice its
 * usual gap within [idle_ms, max_ms] once known; else idle_ms, or max_ms
 * when this message is a probe (which it may start: hence not const). */
void gw__pace_publish(gw_pace_t *p, uint64_t now_ms);
void gw__pace_acked(gw_pace_t *p);
uint64_t gw__pace_quiet_ms(gw_pace_t *p /* NULL: no client */, uint64_t now_ms, uint32_t idle_ms, uint32_t max_ms);

/* session.c */
gw_session_t *gw__session_find(gw_server_t *srv, const char *client_id);
gw_session_t *gw__session_attach(gw_server_t *srv, gw_conn_t *c, bool clean, uint32_t expiry_s,
                                 bool *present /* OUT */);
void gw__session_detach(gw_server_t *srv, gw_conn_t *c);
bool gw__session_has_qos2(const gw_session_t *s, uint16_t id);
void gw__session_add_qos2(gw_session_t *s, uint16_t id);
bool gw__session_del_qos2(gw_session_t *s, uint16_t id);
struct gw_pending *gw__session_storing(const gw_session_t *s, uint16_t id);
void gw__session_set_storing(gw_session_t *s, uint16_t id, struct gw_pending *p /* NULL: done */);
void gw__session_expire(gw_server_t *srv, uint64_t now_ms);
void gw__sessions_free(gw_server_t *srv);
void gw__session_unref(gw_session_t *s);
gw_session_t *gw__session_create(gw_server_t *srv, const char *client_id);
/* Ends a session (journaled END when it was persistent). */
void gw__session_forget(gw_server_t *srv, gw_session_t *s);
/* will.c */
void gw__will_cancel(gw_session_t *s);

#endif
