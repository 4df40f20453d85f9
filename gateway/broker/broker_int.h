/*
 * broker_int.h: what the broker's files share (internal to gateway/broker/;
 * the rest of the process goes through broker.h). Prefix broker__.
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
#ifndef BROKER_BROKER_INT_H
#define BROKER_BROKER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/base.h"
#include "config/config.h"
#include "gateway/auth/auth.h"
#include "gateway/broker/broker.h"
#include "gateway/metrics/metrics.h"
#include "gateway/mqtt/mqtt.h"
#include "gateway/router/router.h"
#include "gateway/tls/tls.h"
#include "schema/schema.h"
#include "wal/wal.h"

typedef struct broker_conn broker_conn_t;

/* A peer's address, kept in 20 bytes rather than as text (a connection
 * carries one; broker__conn_peer formats it for the logs). */
typedef struct broker_addr {
    uint16_t port;
    uint8_t family;                 /* 0: unknown, 4, 6 */
    uint8_t ip[16];
} broker_addr_t;
typedef struct broker_session broker_session_t;

/* A client's pace (pace.c): its usual gap between PUBLISHes when it is
 * not waiting for an ack, which says how long its batch may wait for it. */
typedef struct broker_pace {
    uint64_t last_ms;     /* loop time of its latest PUBLISH; 0: none yet */
    uint64_t probe_at_ms; /* not before then is an unknown pace probed again */
    uint32_t gap_x16;     /* moving average of its free gaps, ms x 16 */
    uint8_t clocked;      /* ack-separated gaps in a row since the last free one */
    uint8_t probe_s;      /* seconds between probes: 1, doubled per failed probe, at most 64 */
    bool sampled : 1;     /* gap_x16 holds a measurement */
    bool acked : 1;       /* an ack went to it since last_ms */
    bool probing : 1;     /* its latest message is waited for idle_flush_max_ms to see if more come */
} broker_pace_t;

/* Per mapping rule: what the router does not know. */
typedef struct broker_rule {
    cfg_policy_t policy;
} broker_rule_t;

/*
 * A generation (docs/design/RELOAD.md 2.1): the compiled router, its rules,
 * and which registry slot each router topic id stores into. Owned by
 * srv->gen alone, replaced whole on the loop thread by broker_plan_commit
 * (between two loop callbacks); route_and_store and will.c read srv->gen
 * once per message and use only that, so a message is routed wholly by the
 * old rules or wholly by the new (RELOAD.md 2.4). Nothing keeps a pointer
 * into it past the callback that read it: attributes are copied at
 * wal_batch_add.
 */
typedef struct broker_gen {
    uint64_t id;                 /* 1 at boot; +1 per applied reload */
    router_t *router;            /* owned */
    broker_rule_t *rules;        /* by router rule index (mqtt.topic_mappings order) */
    size_t nrules;
    uint32_t *topic_of;          /* router topic id -> slot id (srv->topics) */
    size_t ntopic_of;
    cfg_unmatched_t unmatched;   /* mqtt.unmatched */
} broker_gen_t;

/* One QoS 1/2 PUBLISH waiting for its answer, in a connection's FIFO. */
typedef struct broker_pending {
    struct broker_pending *next;
    broker_conn_t *conn;     /* whose FIFO this is in (holds a reference) */
    broker_session_t *session; /* QoS 2: the session to update when ready (holds a reference) */
    struct broker_pending *follower; /* a DUP resend on another connection waiting for this one */
    broker_topic_t *topic;   /* the upstream topic whose batch took the message (NULL: none yet) */
    uint16_t packet_id;
    uint8_t qos;
    uint8_t waits;       /* completions still needed before it is ready */
    uint8_t reason;      /* MQTT 5 reason code to send (0 = success) */
    bool close;          /* 3.1.1 cannot say "refused": close instead of acking */
    uint8_t refused;     /* broker_refuse_t + 1 when refused (broker__refuse), 0 otherwise */
    bool stored_journaled; /* QoS 2: its STORED record went to the session journal */
    bool stored_deferred; /* QoS 2 to a memory_first topic: its STORED is journaled at the message's
                             completion (the cluster's ack), never before (ingest.c) */
    bool qos2_record;    /* on success, remember packet_id until PUBREL */
    bool stored_rt;      /* QoS 2: its STORED went to the runtime journal (rtjournal.c), not the session journal */
    bool pubcomp;        /* this entry answers a PUBREL (PUBCOMP), not a PUBLISH */
} broker_pending_t;

/*
 * Every way a PUBLISH is refused (refuse.c): one MQTT 5 reason code and one
 * MQTT 3.1.1 behaviour each, decided in one place.
 */
typedef enum {
    BROKER_REFUSE_TOPIC_INVALID,       /* no mapping matched (mqtt.unmatched: reject) */
    BROKER_REFUSE_NOT_AUTHORIZED,      /* the client may not publish there */
    BROKER_REFUSE_SCHEMA_UNAVAILABLE,  /* enforce, and the topic's schema is not resolved */
    BROKER_REFUSE_SCHEMA_INVALID,      /* the payload fails its schema under enforce */
    BROKER_REFUSE_PAYLOAD_TOO_LARGE,   /* over mqtt.max_payload_size */
    BROKER_REFUSE_TOO_MANY_ATTRIBUTES, /* more attributes than a record holds */
    BROKER_REFUSE_QUOTA,               /* a disk bound refused the write */
    BROKER_REFUSE_LOG_UNAVAILABLE,     /* the log cannot be written (failed fsync, I/O error) */
    BROKER_REFUSE__COUNT
} broker_refuse_t;

typedef struct broker_refusal {
    const char *why;    /* for logs */
    uint8_t reason5;    /* the MQTT 5 reason code: in the PUBACK/PUBREC, or the DISCONNECT */
    bool disconnect;    /* every version: close the connection with reason5 instead of answering */
    bool close311;      /* MQTT 3.1.1: close the connection instead of acknowledging */
} broker_refusal_t;

/* The row of `why` (a static table). */
const broker_refusal_t *broker__refusal(broker_refuse_t why);
/*
 * Refuses the message whose pending ack is p (NULL: QoS 0, nobody to
 * answer) on connection c: sets p's reason, and whether 3.1.1 closes
 * instead, for p's connection's version; or closes c at once for a
 * DISCONNECT refusal (p, not waiting for the log, is freed by the close).
 */
void broker__refuse(broker_conn_t *c, broker_pending_t *p, broker_refuse_t why);

/* What the gateway keeps with a batch while the log has it: the pending
 * ack of every message that has one (each holds a connection reference). */
/* broker_dead_letter_batch's wait for its records' completions (ingest.c). */
typedef struct broker_dl_job {
    uint32_t waits;       /* batches holding some of its records, not completed */
    int rc;               /* the first failure */
    broker_topic_t *of;   /* the upstream topic counted */
    metrics_dl_reason_t reason;
    uint64_t count;
    bool submitted;       /* every record added: done may run */
    void (*done)(void *arg, int rc);
    void *arg;
} broker_dl_job_t;

typedef struct broker_batch_ctx {
    broker_topic_t *t;
    broker_dl_job_t *job; /* the dead-letter log: the cluster's poison batch it holds (some of) */
    bool compaction;      /* the session journal's snapshot (journal.c) */
    uint64_t bytes;       /* counted in server->pending_bytes */
    uint32_t n, cap;
    broker_pending_t **p;
} broker_batch_ctx_t;

/*
 * TRANSPORT: how a connection's bytes reach its socket. conn.c speaks MQTT
 * over a byte stream and never touches the socket; a transport moves the
 * stream. tcp.c (plain TCP on libuv) is the first; tls.c (OpenSSL) the
 * second, with the same operations over the same TCP handle (c->tcp), its
 * own state in c->tp_state, and tcp.c's writing and closing under its
 * records (broker__tcp_*). A listener picks its connections' transport.
 * The contract, every call on the loop thread:
 *
 *  accept      takes the next connection from a listening handle (its data
 *              is the broker_listener_t): makes it (broker__conn_new), sets
 *              its socket up, then broker__conn_start(c, peer); on failure
 *              releases it.
 *  read_start  0 or -errno. While reading, the transport asks where to put
 *  read_stop   bytes (broker__conn_rx_buf) and hands over what arrived, in
 *              order (broker__conn_rx; n < 0 for the end: UV_EOF or an error).
 *  write       takes n bytes, copying what it cannot hand to the kernel at
 *              once. 0, or a negative error when the stream cannot take them:
 *              the caller closes the connection. A write that fails later is
 *              reported with broker__conn_tx_failed.
 *  queued      bytes taken by write and not yet handed to the kernel. The
 *              transport also keeps c->tx_held, the memory its output holds
 *              (bytes, buffers, requests), and c->tx_progress_ms, when its
 *              queued bytes last moved: the limits (conn.c) read them; and
 *              calls broker__conn_tx_progress(c) when a write completes.
 *  close       sends what is queued (within mqtt.write_timeout_ms; at once
 *              and dropping it when c->abort), then releases the socket,
 *              and calls broker__conn_released(c) once, from a later loop
 *              callback (never from inside close: conn.c still uses c after).
 *  user        optional (NULL: none): a user name the transport has
 *              authenticated (tls: the client certificate's CN, with
 *              use_identity_as_username), or NULL; the transport's, valid
 *              until close. A function, not a field: a plain connection
 *              pays nothing for it.
 */
typedef struct broker_transport {
    const char *name; /* "tcp": in logs */
    void (*accept)(broker_t *srv, uv_stream_t *server);
    int (*read_start)(broker_conn_t *c);
    void (*read_stop)(broker_conn_t *c);
    int (*write)(broker_conn_t *c, const uint8_t *p, size_t n);
    size_t (*queued)(const broker_conn_t *c);
    void (*close)(broker_conn_t *c);
    const char *(*user)(const broker_conn_t *c);
} broker_transport_t;

extern const broker_transport_t broker__tcp; /* tcp.c */
extern const broker_transport_t broker__tls; /* tls.c */

/* tcp.c: the TCP half of the transports over c->tcp (tcp, and tls under its
 * record layer). Its write state is c->tcp_tx. */
/* Accepts from server into c->tcp, peer = "host:port". false: it failed, and
 * c is released from the close callback (not started: do not touch it). */
bool broker__tcp_accept(broker_t *srv, uv_stream_t *server, broker_conn_t *c, broker_addr_t *peer /* OUT */);
/* TRANSPORT's write on the socket: at once what the kernel takes, the rest
 * in one uv_write at a time; keeps tx_queued, tx_held, tx_progress_ms. */
int broker__tcp_send(broker_conn_t *c, const uint8_t *p, size_t n);
/* TRANSPORT's close on the socket (queued bytes get write_timeout_ms, none
 * when c->abort); closed(c) runs from the socket's close callback, after
 * c->tcp_tx is freed: broker__conn_released, or a transport's own that
 * frees its state and then calls it. */
void broker__tcp_close(broker_conn_t *c, void (*closed)(broker_conn_t *c));

struct broker_conn {
    /* the transport's */
    const broker_transport_t *tp;
    uv_tcp_t tcp;                   /* the socket (tcp and tls transports) */
    void *tp_state;                 /* a transport's own state (tcp: none; tls: its session) */
    struct broker_tcp_tx *tcp_tx;   /* tcp.c's write state (tcp and tls; NULL until needed) */
    size_t tx_queued;               /* bytes taken by tp->write, not yet on the socket */
    size_t tx_held;                 /* memory the transport holds for them (buffers, requests) */
    uint64_t tx_progress_ms;        /* loop time the queued bytes last moved */
    size_t mem;                     /* bytes counted in srv->partial_bytes: partial packet, aliases */
    uint64_t partial_since_ms;      /* loop time the incomplete packet in `in` began */
    broker_t *srv;
    struct broker_conn *prev, *next;    /* server->conns */
    /* before CONNECT: when it was accepted (mqtt.connect_timeout_ms); after:
     * when its latest bytes came (keep alive) */
    uint64_t last_rx_ms;
    char *client_id;                /* its own until its session is attached, then the session's */
    char *username;                 /* its CONNECT's user name (NULL: none), for the ACL */
    struct broker_auth_req *auth;   /* its password check in progress (auth.c) */
    struct broker_listener *listener; /* the one it came in by (its auth choice, its counts); NULL in unit tests */
    broker_session_t *session;          /* the client's session (persistent or not) */
    char **aliases;                 /* MQTT 5: [topic_alias_maximum + 1] */
    uint8_t *in;                    /* partial input: in_len bytes of in_cap */
    broker_pending_t *pend_head, *pend_tail; /* acks and replies */
    broker_pace_t pace;                 /* its PUBLISH pace, for the batches it is in (pace.c) */
    uint8_t *out;                   /* replies of this loop turn: out_len bytes of out_cap */
    struct broker_conn *dirty_next;     /* server->dirty: has replies to write this loop turn */
    struct broker_conn_will *will;  /* its CONNECT's will; NULL: none (most clients: kept apart) */
    /* 4-byte and smaller fields together, flags as bits: an idle connection
     * is this struct and little else (docs/MQTT.md, memory per connection) */
    uint32_t in_len, in_cap;        /* bounded by the largest packet (< 2^29) */
    uint32_t out_len, out_cap;      /* bounded by mqtt.max_unread_bytes (<= 1 GiB) */
    int refs;                       /* 1 for the socket (until broker__conn_released) + 1 per message
                                       in a batch + 1 per write in flight + 1 while dirty */
    uint32_t client_max_packet;     /* MQTT 5: the client's Maximum Packet Size (0 = none) */
    uint32_t inflight;              /* QoS 1/2 PUBLISHes until PUBACK / PUBCOMP (MQTT 5 receive maximum) */
    uint32_t unanswered;            /* QoS 1/2 PUBLISHes without their PUBACK / PUBREC yet */
    uint32_t published;             /* PUBLISHes it sent us (mod 2^32: only differences are read) */
    uint32_t published_mark;        /* `published` when the top talkers' window began (broker_top_talkers) */
    broker_addr_t peer;             /* its address (broker__conn_peer: as text) */
    uint16_t keep_alive;            /* seconds; 0 = none */
    uint8_t version;                /* 0 until CONNECT, then 4 or 5 (3 is run as 4) */
    bool tp_closed : 1;             /* tp->close was called */
    bool tx_paused : 1;             /* not read from: its unread replies reached half of max_unread_bytes */
    bool abort : 1;                 /* close without waiting for queued bytes (the client does not read) */
    bool listed : 1;                /* started (broker__conn_start): counted in nconns / nreleasing */
    bool mem_refused : 1;           /* a read buffer was refused (mqtt.max_partial_bytes) */
    bool closing : 1, connected : 1, reading : 1, got_disconnect : 1, will_suppressed : 1;
    bool request_problem_info : 1;  /* MQTT 5 */
    bool dirty : 1;                 /* in server->dirty */
    bool client_id_shared : 1;      /* client_id is its session's (attached), not its own copy */
    bool blocked : 1;               /* on_full block: it published to a topic whose log waits for room;
                                       neither read nor processed until that topic's waiters wake (ingest.c) */
};

/* A connection's will, from its CONNECT until it is published, moved to the
 * session (delayed) or dropped. */
typedef struct broker_conn_will {
    char *topic;
    uint8_t *payload;
    size_t len;
    wal_attr_t *attrs;              /* MQTT 5 will properties as attributes */
    size_t nattrs;
    size_t bytes;                   /* what it holds, in srv->will_bytes */
    uint32_t delay_s;
    uint8_t qos;
    bool retain;
} broker_conn_will_t;

struct broker_session {
    char *client_id;
    broker_conn_t *conn;                /* attached connection, or NULL */
    bool persistent;                /* clean_session=0 / session expiry > 0 */
    uint32_t expiry_s;
    uint64_t detached_ms;           /* when its connection went (for expiry) */
    /* QoS 2 packet ids stored and PUBRECed, waiting for PUBREL */
    uint16_t *qos2;
    uint8_t *qos2_rt;               /* per id: 1 when its STORED is in the runtime journal (rtjournal.c) */
    uint32_t nqos2, cap_qos2;
    uint64_t open_need;             /* srv->journal_done at which its first OPEN with this nonce is
                                       in the session journal: runtime records wait for it (journal.c) */
    uint64_t nonce;                 /* random, in its OPEN record and in each runtime journal record: a
                                       runtime record for another incarnation of the session is ignored */
    /* QoS 2 packet ids being stored right now, with their pending ack: a
     * resend meanwhile follows the first copy instead of being stored twice */
    struct broker_storing { uint16_t id; struct broker_pending *p; } *storing;
    uint32_t nstoring, cap_storing;
    int refs;                       /* pending QoS 2 entries pointing here */
    bool linked;                    /* in the server's table */
    bool journaled;                 /* an OPEN record for it is in the session journal */
    bool detach_journaled;          /* ...followed by DETACHED: its expiry runs from detached_wall_ms */
    uint64_t detached_wall_ms;      /* wall clock of its client's going (journal) */
    /* delayed will (MQTT 5 Will Delay Interval) */
    struct broker_will *will;
    struct broker_session *hnext;       /* hash chain */
};

#define BROKER_OUT_POOL 64        /* reply buffers kept for reuse between turns... */
#define BROKER_OUT_POOL_CAP 4096  /* ...each at most this big (256 KiB at most in all) */
#define BROKER_DEAD_LETTER_TOPIC "$dead-letter"
#define BROKER_JOURNAL_TOPIC "$sessions"

/* One listening socket (server.c) and what its connections get: their
 * transport and, for TLS, the context of their handshakes. */
#define BROKER_MAX_LISTENERS 16 /* mqtt.listeners' bound */
typedef struct broker_listener {
    uv_tcp_t handle;                /* data: this listener (until closed) */
    broker_t *srv;
    uint32_t index;                 /* in mqtt.listeners; 0 for mqtt.listener */
    const char *address;            /* as configured (the configuration's) */
    const cfg_listener_t *cfg;      /* its entry; NULL for mqtt.listener */
    const broker_transport_t *tp;   /* the transport of its connections */
    tls_ctx_t *tls;                 /* tls.c: the context new handshakes use (a reference; NULL: plain) */
    bool use_identity;              /* with tls: its tls.use_identity_as_username, with that context */
    bool inited;                    /* handle initialised: closed with the broker's handles */
    bool listening;
    char bound[80];                 /* the address bound (port 0 resolved) */
    uint32_t nconnected;            /* its connections past CONNECT */
    uint64_t publish_denied;        /* PUBLISHes (and wills) of its clients the ACL refused */
    uint64_t tls_read_pauses;       /* tls.c: pauses of its connections' reading (read coalescing) */
} broker_listener_t;

struct broker {
    uv_loop_t *loop;
    const cfg_t *cfg;
    broker_listener_t listeners[BROKER_MAX_LISTENERS];
    uint32_t nlisteners;
    bool listening;                 /* any listener is */
    uv_timer_t sweep;               /* connect timeout and keepalive */
    uv_async_t wal_async;           /* the WAL writer's completions */
    uv_check_t flush_check;         /* writes every connection's replies once per loop turn */
    uv_timer_t nap;                 /* tls.c: the one tick that reads again the connections pausing
                                       (tls.read_coalesce_ms); running only while one does */
    struct tls *napping;            /* tls.c: those connections */
    uint64_t naps;                  /* tls.c: pauses made since start */
    broker_conn_t *dirty;
    wal_t *wal;
    void (*on_stored)(void *arg, size_t topic); /* broker_on_stored (NULL: nobody) */
    void *on_stored_arg;
    broker_gen_t *gen;              /* the routing in force (NULL before broker_init) */
    router_t *router;               /* while building (broker_init, a plan): moved into a generation */
    broker_rule_t *rules;
    size_t nrules;
    /* The registry (RELOAD.md 2.2): one slot per upstream topic name this
     * process has routed to, allocated once, never moved or freed until
     * broker_close, so a slot's id (its index) and a pointer to it stay
     * valid through reloads: in-flight batches, held batches, pending acks,
     * the replicator's ids. A slot no rule routes to any more keeps its log
     * and is still replicated (routed = false). */
    broker_topic_t **topics;
    size_t ntopics, cap_topics;
    /* Local logs, never replicated: the dead-letter log (mqtt.dead_letter)
     * and the session journal. NULL when not in use. */
    broker_topic_t *dead_letter;
    broker_dl_job_t *dl_job;     /* broker_dead_letter_batch adding records now: tags the batches */
    broker_topic_t *journal;
    /* the runtime QoS 2 journal (rtjournal.c): -1 when off */
    int rtj_fd, rtj_lock_fd;
    char *rtj_path;
    uint64_t rtj_records, rtj_compact_at;
    /* topics whose open batch must reach the writer before the journal's
     * (ingest.c): its STORED records promise what they hold */
    broker_topic_t **turn;          /* memory_first topics in memory with an open batch: submitted at the
                                       end of the loop turn (flush_check_cb, broker__ingest_turn) */
    size_t nturn, cap_turn;
    broker_topic_t **jdeps;
    size_t njdeps, cap_jdeps;
    uint64_t journal_records;       /* since its checkpoint: compaction trigger */
    uint64_t journal_ingested, journal_done; /* records taken by the journal / completed, ever */
    bool journal_full;
    bool replaying;                 /* the journal is being replayed: nothing is written to it */              /* its last write was refused by mqtt.max_journal_bytes */
    bool compacting;                /* journal batches started now belong to the snapshot */
    bool compact_failed;
    uint32_t compact_batches;       /* snapshot batches not yet completed */
    uint64_t compact_first;         /* first offset of the snapshot (0: none yet) */
    uint64_t compact_records;       /* records in the snapshot */
    uint64_t compact_next;          /* journal_records before which no compaction is tried again */
    broker_conn_t *conns;
    uint32_t nconns;                /* accepted sockets, CONNECT or not */
    uint32_t nconnected;            /* past CONNECT */
    uint32_t max_connections;       /* mqtt.max_connections, or what the descriptor budget allows */
    uint32_t nreleasing;            /* closed, socket not yet released: still count against max_connections */
    uint64_t partial_bytes;         /* incomplete packets and alias tables of all connections (max_partial_bytes) */
    uint64_t will_bytes;            /* connected clients' wills and delayed ones (max_will_bytes) */
    /* sessions by client id */
    broker_session_t **sess_buckets;
    uint32_t sess_nbuckets, nsessions;
    uint32_t npersistent;           /* of them, persistent: bounded by mqtt.max_sessions at CONNECT */
    /* backpressure */
    uint64_t pending_bytes;
    bool paused;
    /* draining */
    bool draining;
    void (*drained_cb)(void *arg);  /* broker_drain's, until called */
    void *drained_arg;
    void (*closed_cb)(void *arg);   /* broker_close's */
    void *closed_arg;
    int closing_handles;
    /* counters */
    uint64_t conn_accepted;
    uint64_t conn_refused[METRICS_REFUSE__COUNT];  /* CONNACK refusals, by reason (metrics.h) */
    uint64_t conn_closed[METRICS_CLOSE__COUNT];    /* closed by us, by reason */
    uint64_t unmatched_dropped;
    uint64_t talk_mark_ms;          /* when the top talkers' window began (0: never) */
    broker_talker_t talkers[BROKER_TOP_TALKERS]; /* the last window's, busiest first */
    size_t ntalkers;
    double talk_window_s;           /* how long that window was */
    struct cfg_auth auth;           /* auth.* in force (broker_set_auth; the file names not kept) */
    auth_passwd_t *passwd;          /* auth.password_file in force (a reference; NULL: none) */
    auth_acl_t *acl;                /* auth.acl_file in force (NULL: every topic writable) */
    struct broker_auth_addr *auth_addrs; /* failures by address (auth.c), allocated at the first */
    unsigned auth_running;          /* password checks on the thread pool */
    struct broker_auth_req *auth_wait_head, *auth_wait_tail; /* checks waiting for one to end */
    uint64_t publish_denied;        /* PUBLISHes the ACL refused */
    uint8_t *scratch;               /* attribute keys built per PUBLISH */
    size_t scratch_cap;
    uint8_t readbuf[65536];         /* shared read buffer; leftovers go to conn->in */
    bool readbuf_busy;
    /* reply buffers between turns (conn.c): a connection holds one only
     * while it has replies to write, so an idle one holds none */
    struct { uint8_t *p; uint32_t cap; } out_pool[BROKER_OUT_POOL];
    uint32_t nout_pool;
};

/*
 * REFERENCES. A connection is freed when its last reference goes
 * (broker__conn_unref). Who holds one: its socket (from broker__conn_new
 * until the transport calls broker__conn_released), each of its pending
 * acks (broker__conn_pending_new, dropped when broker__conn_drain_acks sends
 * or discards the entry), each batch that holds one of its messages
 * (broker__ingest, dropped when the completion has marked it), each write
 * in flight in the transport (tcp.c), and the dirty list while replies wait
 * for the end of the loop turn. A session is freed when it is neither in
 * the server's table (linked) nor referenced by a pending QoS 2 entry
 * (s->refs: broker__session_unref). The server owns every topic, rule,
 * session and connection list; nothing here is freed by its caller unless
 * a function says so.
 */

/* tls.c: read coalescing (tls.read_coalesce_ms). A connection's recent
 * reads; after each read broker__nap_rule says whether to pause reading it
 * for pause_ms: when its last BROKER_NAP_STREAK reads were each smaller
 * than BROKER_NAP_SMALL and came within pause_ms + 1 ms (the loop clock's
 * tick) of the one before, and it is quiet (past CONNECT, no QoS 1/2
 * PUBLISH without its answer, nothing held). A client that sends more
 * slowly, or waits for an ack, is never paused. */
#define BROKER_NAP_STREAK 4
#define BROKER_NAP_SMALL 16384
typedef struct broker_nap {
    uint64_t last_ms;               /* loop time of its latest read */
    uint32_t streak;                /* reads in a row, small and close together */
} broker_nap_t;
bool broker__nap_rule(broker_nap_t *n, uint64_t now_ms, size_t nread, uint32_t pause_ms, bool quiet);

/* server.c (and broker.h) */
/* Fills srv->listeners from the configuration (once; broker_set_tls and broker_listen call it). */
void broker__set_listeners(broker_t *srv);
/* During broker_drain: reports drained once nothing is in flight and every
 * closed connection's socket is released (write_timeout_ms bounds that). */
void broker__check_drained(broker_t *srv);
/* Adds (or, negative, removes) bytes held in batches; pauses every
 * connection's reading past mqtt.ingestion.max_pending_bytes, resumes below half. */
void broker__pending_add(broker_t *srv, int64_t bytes);
/* The upstream topic of that name (borrowed; NULL when none). */
broker_topic_t *broker__topic(broker_t *srv, const char *name);

/* journal.c: persistent sessions and their QoS 2 packet ids, kept in the
 * log ("$sessions", never replicated) so they survive a restart. */
/* Opens and replays the journal into the session table (compacting it when
 * it holds much more than the live state). 0, or -errno / TB_E* with err. */
int broker__journal_open(broker_t *srv, char *err, size_t errlen);
/* Records that s exists with its expiry (open) or ended (END, only if it was journaled). */
void broker__journal_session(broker_t *srv, broker_session_t *s, bool open);
/* Records that s's client went now (DETACHED, wall clock): after a restart
 * its expiry keeps running from then. Only for a journaled persistent session. */
void broker__journal_detached(broker_t *srv, broker_session_t *s);
/* WILL (s->will, with its due time, payload and attributes) / WILL_DONE. */
void broker__journal_will(broker_t *srv, broker_session_t *s);
void broker__journal_will_done(broker_t *srv, broker_session_t *s);
/* Adds a record for a QoS 2 packet id (stored / released); p, when not
 * NULL, waits for it to be durable (p->waits++, p's connection gains a
 * reference until the record's completion). */
/* runtime: the record goes to the runtime journal (rtjournal.c) when it is on, written before this
 * returns (p does not wait for it); otherwise to the session journal (p waits). Returns true when it
 * went to the runtime journal. */
bool broker__journal_qos2(broker_t *srv, broker_session_t *s, uint16_t id, bool stored, broker_pending_t *p,
                          bool runtime);
/* A fresh session nonce (never 0). */
uint64_t broker__journal_nonce(void);

/* rtjournal.c: the runtime QoS 2 journal of memory_first topics (mqtt.qos2_state runtime). */
/* After the session journal's replay: checks mqtt.runtime_dir (a RAM file system, else a warning and
 * the session journal), replays its records into the restored sessions, rewrites it. Never fails the
 * start: any trouble is a warning and the session journal. */
void broker__rtj_open(broker_t *srv);
bool broker__rtj_on(const broker_t *srv);
/* Appends STORED or RELEASED for s's id (write(2), no sync: the file is in RAM). 0, or < 0 when it
 * could not be written: the runtime journal is then off, its live ids moved to the session journal. */
int broker__rtj_put(broker_t *srv, broker_session_t *s, bool stored, uint16_t id);
void broker__rtj_close(broker_t *srv);
/* Online compaction, from the sweep (see journal.c); and a snapshot batch's completion. */
void broker__journal_maybe_compact(broker_t *srv);
void broker__journal_compacted(broker_t *srv, int rc, uint64_t first_offset);
/* local topics (dead letter, journal): for loops over every topic; borrowed, NULL past the last */
broker_topic_t *broker__local_topic(broker_t *srv, size_t i);
/* Opens a local (never replicated) topic's log; *out is the server's
 * (freed at broker_close), set even on failure. 0 or -errno. */
int broker__local_open(broker_t *srv, const char *name, broker_topic_t **out /* OUT */);

/* Most attributes one record carries: captures, MQTT 5 properties, the
 * retain and will marks. The one rule for a PUBLISH and a will. */
#define BROKER_MAX_ATTRS 255u

/* Per-connection info lines ("connection closed", "session taken over"):
 * at most this many a second each, then one line with the count left out. */
#define BROKER_CONN_LOG_BURST 20u

/* The largest packet we accept (and say so in CONNACK's Maximum Packet Size):
 * the payload limit plus room for the topic and properties. */
uint32_t broker__max_packet(const cfg_t *cfg);

/* conn.c: the transports' side (see TRANSPORT above) */
/* A connection on transport tp, not yet started, with one reference: the
 * socket's, which the transport gives back with broker__conn_released. */
broker_conn_t *broker__conn_new(broker_t *srv, const broker_transport_t *tp);
/* Its socket is set up: counts it, lists it, starts reading (unless paused). peer is copied. */
void broker__conn_start(broker_conn_t *c, const broker_addr_t *peer /* NULL: unknown */);
/* c's peer as "host:port" ("[v6]:port"; "?" when unknown), for a log line:
 * one of 4 buffers used in turn (loop thread only; valid for 3 more calls). */
const char *broker__conn_peer(const broker_conn_t *c);
/* Its host part alone, into out (>= 48 bytes). */
void broker__addr_host(const broker_addr_t *a, char *out, size_t outlen);
/* Where the next bytes read should go: the loop's shared buffer, or c's own
 * behind an incomplete packet. Borrowed until the matching broker__conn_rx. */
void broker__conn_rx_buf(broker_conn_t *c, uv_buf_t *buf /* OUT */);
/* n bytes arrived in buf (from broker__conn_rx_buf); n < 0: the stream ended
 * (UV_EOF or an error) and the connection closes. */
void broker__conn_rx(broker_conn_t *c, const uv_buf_t *buf, ssize_t n);
/* A write failed after tp->write took it: closes the connection, logged and counted. */
void broker__conn_tx_failed(broker_conn_t *c, int err);
/* The transport's queued bytes moved (a write completed): a connection
 * paused for its unread replies may be read from again. */
void broker__conn_tx_progress(broker_conn_t *c);
/* The transport released the socket: drops the socket's reference (may free c). */
void broker__conn_released(broker_conn_t *c);

/* conn.c */
/*
 * Closes c: MQTT 5 gets a DISCONNECT with reason when it is >= 0x80, the
 * will is stored (or delayed), the session detached, the transport closed.
 * c stays allocated while references remain (its pending acks are freed
 * unsent as their batches complete). Idempotent. why is only logged.
 */
void broker__conn_close(broker_conn_t *c, uint8_t reason, const char *why);
/* Closes c because it broke a limit of ours: counted by why, logged at warn
 * (rate-limited); MQTT 5 gets DISCONNECT reason5 (>= 0x80) unless it does
 * not read (unread_limit, write_timeout): then its socket is released at
 * once, queued bytes and all. */
void broker__conn_give_up(broker_conn_t *c, metrics_close_t why, uint8_t reason5, const char *what);
/* Counts delta bytes (negative: gives back) of c's partial packets and
 * alias tables in the server's total. false, and nothing counted, when
 * growing would pass mqtt.max_partial_bytes: the caller closes c. */
bool broker__conn_hold(broker_conn_t *c, int64_t delta);
/* Drops one reference; the last frees c (its buffers included). */
void broker__conn_unref(broker_conn_t *c);
/* Appends reply bytes (copied) to c's output, written at the end of the
 * loop turn; puts c on the dirty list (one reference) if it was not. */
void broker__conn_send(broker_conn_t *c, const uint8_t *p, size_t n);
/* Hands c's output to the transport now (past the 4 MiB unread limit, or on
 * a failed write, c is closed instead). */
void broker__conn_flush(broker_conn_t *c);
/* Flushes every dirty connection and drops the dirty list's references. */
void broker__conn_flush_dirty(broker_t *srv);
void broker__conn_pause(broker_conn_t *c);
void broker__conn_resume(broker_conn_t *c);
/* Its authentication ended well: the packets it sent after CONNECT, then reading again. */
void broker__conn_input_resume(broker_conn_t *c);
/* Sends, in order, every ready pending ack at the head of the FIFO and
 * frees those entries (each drops its connection reference and, for QoS 2,
 * its session reference). May close c (3.1.1 refusal); holds a reference
 * of its own meanwhile, so c is valid for the caller until it drops its own. */
void broker__conn_drain_acks(broker_conn_t *c);
/* A pending ack at the tail of c's FIFO, owned by the FIFO (freed by
 * broker__conn_drain_acks); takes a reference on c. Pauses reading at a
 * full Receive Maximum window. */
broker_pending_t *broker__conn_pending_new(broker_conn_t *c, uint16_t packet_id, uint8_t qos);
/* Closes connections past the CONNECT timeout or 1.5 x their keep alive. */
void broker__conn_sweep(broker_t *srv, uint64_t now_ms);

/* connect.c: raw is the CONNECT's bytes (kept while authentication runs). */
void broker__on_connect(broker_conn_t *c, const mqtt_packet_t *pkt, const uint8_t *raw, size_t rawlen);
/* The rest of CONNECT once the client is authenticated: will, session, CONNACK. */
void broker__connect_admit(broker_conn_t *c, const mqtt_packet_t *pkt);
/* Answers a CONNECT with a refusal (counted `counted`) and closes. */
void broker__connect_refuse(broker_conn_t *c, metrics_refuse_t counted, uint8_t reason5, const char *why);

/* auth.c */
typedef enum { BROKER_AUTH_OK, BROKER_AUTH_REFUSED, BROKER_AUTH_PENDING } broker_auth_t;
/* Authenticates c's CONNECT: OK (go on now), REFUSED (answered and closing)
 * or PENDING (checked on the thread pool; c is not read meanwhile, and
 * broker__connect_admit follows when the password is right). Sets c->username. */
broker_auth_t broker__auth_connect(broker_conn_t *c, const mqtt_packet_t *pkt, const uint8_t *raw, size_t rawlen);
/* c is closing: a throttle delay in progress ends (a check on the pool finishes unused). */
void broker__auth_cancel(broker_conn_t *c);
/* May c write topic (auth.acl_file)? A denial is counted and logged. */
bool broker__acl_may_write(broker_conn_t *c, const uint8_t *topic, size_t tlen);

/* publish.c: pkt (and the buffer it points into) is borrowed for the call. */
void broker__on_publish(broker_conn_t *c, const mqtt_packet_t *pkt);
void broker__on_pubrel(broker_conn_t *c, const mqtt_packet_t *pkt);
/* Publishes a connection's will through the same routing (no ack), now or,
 * with a delay, from a timer; a delayed will takes c's will topic, payload
 * and attributes (c's fields are set to NULL), an immediate one only reads them. */
void broker__publish_will(broker_t *srv, broker_conn_t *c);

/* ingest.c: one message into the topic's batch. The message is copied
 * (wal_batch_add). `p` (NULL for QoS 0 or a will) becomes ready when the
 * message is durable (or failed): the batch holds p (p->waits++) and a
 * reference on c until its completion. Returns 0, or TB_EFULL / -errno when
 * the topic's log refuses (nothing held then). */
typedef struct broker_msg {
    const uint8_t *payload;
    size_t payload_len;
    const wal_attr_t *attrs;
    size_t nattrs;
    const char *mqtt_topic;
    size_t mqtt_topic_len;
    uint8_t qos;
    bool retain;
} broker_msg_t;
int broker__ingest(broker_topic_t *t, const broker_msg_t *m, broker_conn_t *c, broker_pending_t *p);
/* Submits t's open batch now (METRICS_BATCH_FLUSH), if any. */
void broker__ingest_flush(broker_topic_t *t);
/* End of a loop turn: submits the open batch of every memory_first topic
 * in memory (METRICS_BATCH_TURN): it is held, not written, so waiting for
 * more would only delay it. */
void broker__ingest_turn(broker_t *srv);
/* on_full block: c just published to t, whose log holds batches for room
 * (wal_topic_blocked): c is neither read nor processed further until the
 * log has written them (broker__ingest_completions wakes it). */
void broker__ingest_block(broker_topic_t *t, broker_conn_t *c);
/* c (blocked) is closing: no topic wakes it any more. */
void broker__ingest_forget(broker_conn_t *c);
/* Takes every completed batch from the WAL: marks its pending acks, drains
 * their connections, drops the batch's references, frees the batch. */
void broker__ingest_completions(broker_t *srv);

/* pace.c: a client's pace, learnt from the gaps between its PUBLISHes
 * that no ack of ours separated. broker__pace_quiet_ms is how long after its
 * latest PUBLISH a batch holding its messages waits for another: twice its
 * usual gap within [idle_ms, max_ms] once known; else idle_ms, or max_ms
 * when this message is a probe (which it may start: hence not const). */
void broker__pace_publish(broker_pace_t *p, uint64_t now_ms);
void broker__pace_acked(broker_pace_t *p);
uint64_t broker__pace_quiet_ms(broker_pace_t *p /* NULL: no client */, uint64_t now_ms, uint32_t idle_ms, uint32_t max_ms);

/* session.c: sessions are owned by the server's table (see REFERENCES). */
/* Borrowed; NULL when none. */
broker_session_t *broker__session_find(broker_t *srv, const char *client_id);
/* c's session (borrowed: the table owns it), taking over from another
 * connection of the same client (closed), ending the old one when clean,
 * journaling OPEN/END as persistence changes. */
broker_session_t *broker__session_attach(broker_t *srv, broker_conn_t *c, bool clean, uint32_t expiry_s,
                                         bool *present /* OUT */);
/* c leaves its session; a session that does not persist leaves the table
 * (and is freed once no pending QoS 2 entry refers to it). */
void broker__session_detach(broker_t *srv, broker_conn_t *c);
bool broker__session_has_qos2(const broker_session_t *s, uint16_t id);
void broker__session_add_qos2(broker_session_t *s, uint16_t id);
bool broker__session_del_qos2(broker_session_t *s, uint16_t id);
/* The same, saying which journal holds the id's STORED (runtime: rtjournal.c). */
void broker__session_add_qos2_at(broker_session_t *s, uint16_t id, bool runtime);
bool broker__session_del_qos2_at(broker_session_t *s, uint16_t id, bool *runtime /* OUT, may be NULL */);
/* The pending ack of the first copy of QoS 2 id being stored now (borrowed), or NULL. */
struct broker_pending *broker__session_storing(const broker_session_t *s, uint16_t id);
/* Remembers p (borrowed: the FIFO owns it) as the copy being stored; NULL forgets it. */
void broker__session_set_storing(broker_session_t *s, uint16_t id, struct broker_pending *p /* NULL: done */);
/* Forgets sessions past their expiry, and the one detached longest past mqtt.max_sessions. */
void broker__session_expire(broker_t *srv, uint64_t now_ms);
/* At broker_close: frees every session and delayed will. */
void broker__sessions_free(broker_t *srv);
/* Drops a pending QoS 2 entry's reference; frees s if it is out of the table too. */
void broker__session_unref(broker_session_t *s);
/* A new session in the table (borrowed: the table owns it). */
broker_session_t *broker__session_create(broker_t *srv, const char *client_id);
/* Marks s persistent or not, keeping srv->npersistent (what mqtt.max_sessions bounds). */
void broker__session_set_persistent(broker_t *srv, broker_session_t *s, bool persistent);
/* Ends a session (journaled END when it was persistent); freed unless referenced. */
void broker__session_forget(broker_t *srv, broker_session_t *s);
/* will.c: a delayed will (MQTT 5 Will Delay Interval), in its session. */
typedef struct broker_will {
    uv_timer_t timer;
    broker_t *srv;
    broker_session_t *session;
    char *client_id;
    char *topic;
    uint8_t *payload;
    size_t len;
    uint8_t qos;
    bool retain;
    wal_attr_t *attrs;              /* owned (keys and values) */
    size_t nattrs;
    uint64_t due_wall_ms;           /* when it is published, wall clock (journaled) */
    bool journaled;                 /* a WILL record for it is in the session journal */
    size_t bytes;                   /* what it holds, in srv->will_bytes */
} broker_will_t;
/* Cancels s's delayed will, if any (a reconnect, the session's end): a
 * journaled one gets WILL_DONE; freed once its timer has closed. */
void broker__will_cancel(broker_session_t *s);
/* The same without WILL_DONE (shutdown: the journal keeps it for after the restart). */
void broker__will_drop(broker_session_t *s);
/* Replay: s's will from a WILL record (copied; r's attributes too), due at
 * due_wall_ms (at once if past). */
void broker__will_restore(broker_t *srv, broker_session_t *s, uint64_t due_wall_ms, const char *topic, size_t tlen,
                          const uint8_t *payload, size_t len, uint8_t qos, bool retain, const wal_record_t *r);

#endif
