/*
 * rep_mosq_int.h: the MQTT output's connection layer (issue 17, O6;
 * docs/design/OUTPUTS.md 2.5 and 4.1-4.8), internal to replicator/ and its
 * unit tests. Prefix rep__mosq_ (connection) and rep__mqtt_ (messages).
 *
 * One rep__mosq_t is one connection to one remote broker, driven by a
 * thread of its own (not libmosquitto's mosquitto_loop_start): a poll()
 * over libmosquitto's socket and an eventfd, with a deadline heap for the
 * CONNACK deadline, the one-second keepalive tick, the ack deadline and
 * the reconnect backoff. docs/REPLICATION.md, "The MQTT output's
 * connection", says why.
 *
 * The owner (the engine's MQTT output) sees three callbacks, all called on
 * the connection's thread, never while a lock of this module is held:
 *
 *   next(owner, &msg)    pulled while the window has room and the session is
 *                        up: fill msg with the next message of any lane
 *                        (the owner's pacer picks the lane) and return 1,
 *                        or return 0 when nothing is ready now (call
 *                        rep__mosq_kick when something becomes ready).
 *   acked(owner, lane, token)
 *                        every message of `lane` up to and including the
 *                        one whose token is `token` is acknowledged by the
 *                        remote (PUBACK for QoS 1, PUBCOMP for QoS 2, the
 *                        confirming UNSUBACK for QoS 0); per lane, tokens
 *                        arrive in the order next() handed them out, and
 *                        only over a contiguous acknowledged prefix (a
 *                        PUBACK of a later message of that lane is held
 *                        until those before it are acked). Never on send.
 *   session_lost(owner)  the session ended with messages handed out and
 *                        not acknowledged: none of them will ever be
 *                        acked; the owner rewinds every lane to its last
 *                        acked token + 1 and hands them out again, in
 *                        order, when next() is called on the new session.
 *
 * So a lane of the engine (one topic's reader + its window ring) maps onto
 * a lane index here, and the token is the record's offset.
 */
#ifndef REP_MOSQ_INT_H
#define REP_MOSQ_INT_H

#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "gateway/router/router.h"
#include "replicator/rep_int.h"
#include "wal/wal.h"

/* ---- the connection (rep_mosq.c) --------------------------------------------- */

typedef enum rep_mosq_state {
    REP_MOSQ_IDLE,        /* created, not started */
    REP_MOSQ_CONNECTING,  /* TCP/TLS/CONNECT sent, no CONNACK yet */
    REP_MOSQ_UP,          /* CONNACK accepted: publishing */
    REP_MOSQ_BACKOFF,     /* the last attempt or session failed: waiting to retry */
    REP_MOSQ_REFUSED,     /* the remote refused CONNECT (bad credentials, not authorized,
                             ...): waiting to retry, with backoff like any failure */
    REP_MOSQ_STOPPED,     /* the thread ended */
} rep_mosq_state_t;

typedef struct rep_mosq_opts {
    const char *host;           /* remote broker */
    int port;
    int protocol;               /* 4 (MQTT 3.1.1) or 5 */
    const char *client_id;      /* required */
    bool clean_session;         /* false: a persistent session (QoS 2 requires true, 4.4) */
    uint32_t keepalive_s;       /* 5..65535; libmosquitto closes after ~1.5 x without PINGRESP */
    int qos;                    /* 0, 1 or 2, every message */
    uint32_t max_inflight;      /* messages handed out and not acked, 1..65535 */
    bool tls;                   /* TLS to the remote */
    bool tls_verify;            /* default true: peer certificate and host name checked */
    const char *ca_file;        /* "" or NULL: the system's roots */
    const char *cert_file;      /* client certificate ("" or NULL: none) */
    const char *key_file;
    const char *username;       /* NULL or "": none */
    const char *password_file;  /* its first line is the password; never logged */
    uint32_t connect_timeout_ms; /* TCP + TLS + CONNACK within this */
    uint32_t ack_timeout_ms;    /* the oldest unacked message older than this ends the session */
    uint32_t retry_initial_ms;  /* backoff: equal jitter, doubling from initial to max */
    uint32_t retry_max_ms;
    /* A session on top (the Sparkplug output, S4): topics subscribed at QoS 1
     * after every CONNACK; next() is not called before every SUBACK granted
     * (none within ack_timeout_ms ends the session). NULL/0: none. Copied. */
    const char *const *subscribe;
    uint32_t nsubscribe;
} rep_mosq_opts_t;

/* Defaults for everything but host, port and client_id. */
void rep__mosq_opts_default(rep_mosq_opts_t *o /* OUT */);

/* One message handed out by next(). */
typedef struct rep_mosq_msg {
    uint32_t lane;              /* < nlanes given at create */
    uint64_t token;             /* the owner's (a record's offset) */
    const char *topic;          /* NUL-terminated; read during the call only */
    const void *payload;        /* read during the call only */
    size_t payload_len;
    mosquitto_property *props;  /* MQTT 5 properties or NULL; freed by rep_mosq */
} rep_mosq_msg_t;

/* The will an attempt's CONNECT carries (QoS 1, retain false); libmosquitto
 * copies it. topic NULL: no will. */
typedef struct rep_mosq_will {
    const char *topic;
    const void *payload;
    size_t payload_len;
} rep_mosq_will_t;

typedef struct rep_mosq_owner_ops {
    int (*next)(void *owner, rep_mosq_msg_t *msg /* OUT */);
    void (*acked)(void *owner, uint32_t lane, uint64_t token);
    void (*session_lost)(void *owner);
    /* Optional: called once per turn of the loop, whatever the state (after
     * the socket and the timers, before next() is pulled): the owner's
     * commands, its deadlines. Returns in how many ms it wants to be called
     * again at the latest, or -1 for no wish. */
    int (*idle)(void *owner);
} rep_mosq_owner_ops_t;

/* Optional hooks of a session on top (rep__mosq_set_session_ops; each may
 * be NULL), called with the same owner on the connection's thread:
 *   connecting  before attempt n's CONNECT (n counts every attempt from 1):
 *               fill *will for this attempt (valid during the call).
 *   subscribed  after the SUBACK of opts.subscribe: topic NULL when all were
 *               granted (next() follows); else the first refused topic and
 *               its reason (>= 0x80): the session ends (DISCONNECT, so no
 *               will), state REFUSED, retried with backoff.
 *   message     an incoming PUBLISH (NCMD, DCMD, STATE), during the call. */
typedef struct rep_mosq_session_ops {
    void (*connecting)(void *owner, uint64_t attempt, rep_mosq_will_t *will /* OUT */);
    void (*subscribed)(void *owner, const char *topic, int reason);
    void (*message)(void *owner, const char *topic, const void *payload, size_t len, bool retained);
} rep_mosq_session_ops_t;

/* What /stats shows of the connection (a snapshot, any thread). */
typedef struct rep_mosq_stats {
    rep_mosq_state_t state;
    char last_error[256];       /* "" until something failed; never holds the password */
    uint64_t attempts;          /* connection attempts (each one a fresh handle) */
    uint64_t sessions;          /* CONNACKs accepted */
    uint64_t refusals;          /* CONNACKs refused */
    uint64_t failures;          /* attempts or sessions that ended in an error */
    uint64_t sent;              /* PUBLISHes handed to libmosquitto */
    uint64_t acked;             /* messages acknowledged (delivered to the owner) */
    uint64_t unsent_lost;       /* messages handed out but lost with a session (to be resent) */
    uint32_t inflight;          /* now */
    uint32_t window;            /* min(max_inflight, the remote's Receive Maximum) */
    uint32_t backoff_ms;        /* the last backoff delay chosen */
} rep_mosq_stats_t;

typedef struct rep_mosq rep_mosq_t;

/*
 * Creates a connection (not started): checks opts, reads the password
 * file. Returns 0 and *out, or TB_ECONFIG / -errno with a message in err
 * (which never holds the password). nlanes >= 1.
 */
/* What rep__mosq_new would read, read now and let go (a reload's check before it replaces an
 * output): the password file's first line, the TLS files readable. 0 or < 0 with err. */
int rep__mosq_check_files(const rep_mosq_opts_t *o, char *err, size_t errlen);
int rep__mosq_new(const rep_mosq_opts_t *opts, uint32_t nlanes, const rep_mosq_owner_ops_t *ops,
                  void *owner, rep_mosq_t **out /* OUT */, char *err, size_t errlen);
/* Before rep__mosq_start: the session hooks (ops must outlive c). */
void rep__mosq_set_session_ops(rep_mosq_t *c, const rep_mosq_session_ops_t *ops);
/* Starts the thread (which connects at once). */
int rep__mosq_start(rep_mosq_t *c);
/* Or: runs the loop on the calling thread (an output's own thread), until
 * rep__mosq_request_stop; then returns (the handle is destroyed). */
void rep__mosq_run(rep_mosq_t *c);
/* Any thread, the loop's own included (from a callback): the loop ends
 * after the turn it is in. Does not wait (rep__mosq_stop does). */
void rep__mosq_request_stop(rep_mosq_t *c);
/* Any thread: there may be more for next() to hand out. Coalesced. */
void rep__mosq_kick(rep_mosq_t *c);
/* Stops the thread and joins it (no DISCONNECT waits on the remote). */
void rep__mosq_stop(rep_mosq_t *c);
/*
 * Any thread: a last message at QoS 1 (the Sparkplug NDEATH) after what was
 * handed out; next() is no longer called. Its PUBACK confirms every QoS 0
 * message sent before it; then DISCONNECT (normal: the broker drops the
 * will) and the session ends (session_lost for anything unconfirmed). Not
 * acked within wait_ms: the session ends without DISCONNECT. final: the
 * thread then ends, and rep__mosq_farewell waits for it (rep__mosq_stop is
 * then a no-op); otherwise it returns at once and the connection retries
 * after backoff. Not up: final just stops.
 */
void rep__mosq_farewell(rep_mosq_t *c, const char *topic, const void *payload, size_t len, uint32_t wait_ms,
                        bool final);
/* Stops if needed and frees; the password's memory is cleared. */
void rep__mosq_free(rep_mosq_t *c);
void rep__mosq_stats(rep_mosq_t *c, rep_mosq_stats_t *out /* OUT */);
const char *rep__mosq_state_name(rep_mosq_state_t s); /* "connecting", "up", ... */

/* ---- one record -> one PUBLISH (rep_mqtt_msg.c, pure) ------------------------- */

typedef struct rep_mqtt_tmpl {
    const router_t *router;     /* for ${N} and ${#}; NULL when the template needs no match */
    const router_out_t *remote_topic;
    const char *upstream;       /* the lane's upstream topic, for ${upstream} */
    uint32_t live_window_ms;    /* older when first sent: tributary.replayed=true */
    int protocol;               /* 4: no properties at all */
} rep_mqtt_tmpl_t;

/* Returns of rep__mqtt_build below 0 besides -ENOMEM: the record cannot be
 * carried (a dead letter, 4.7). */
#define REP_MQTT_ETOOLONG (-1) /* the remote topic would exceed 65,535 bytes */
#define REP_MQTT_EVALUE   (-2) /* a value makes it invalid (router_out_expand's EVALUE) */

/*
 * Builds the PUBLISH of one stored record: the remote topic, expanded from
 * the template, into topic[0..cap) NUL-terminated (cap > ROUTER_OUT_MAX
 * always suffices), and for MQTT 5 its properties into *props (NULL when
 * none; the caller owns the list): mqtt.content_type -> Content Type,
 * mqtt.user.K -> user property K, other attributes (extract_attributes)
 * -> user properties by name, tributary.replayed=true when `replayed`;
 * mqtt.response_topic (the edge's namespace) and mqtt.retain (retain is
 * off) are left out; attributes not valid UTF-8 are left out and counted
 * in *skipped. Returns the topic's length, or REP_MQTT_* / -ENOMEM with
 * *props NULL.
 */
int rep__mqtt_build(const rep_mqtt_tmpl_t *t, const wal_record_t *rec, bool replayed, char *topic,
                    size_t cap, mosquitto_property **props /* OUT */, uint32_t *skipped /* OUT, += */);

/* Whether a record is replayed: older than live_window_ms at now_wall_ms. */
bool rep__mqtt_is_replayed(const rep_mqtt_tmpl_t *t, const wal_record_t *rec, uint64_t now_wall_ms);
/* The PUBLISH packet's size as the link carries it before TLS (fixed header, topic, packet
 * id at QoS 1/2, MQTT 5 properties, payload): what max_bytes_per_s counts. */
size_t rep__mqtt_packet_bytes(size_t topic_len, size_t payload_len, int qos, int protocol,
                              const mosquitto_property *props);

/* ---- shared by the kinds on this connection (rep_mqtt.c) ----------------------- */

/* cfg's mappings -> the router the broker compiles (for ${N} of templates). 0 or < 0 with err. */
int rep__mqtt_router(const cfg_t *cfg, router_t **out /* OUT */, char *err, size_t errlen);
/* "host:port", "[v6]:port" -> host, port; 0 or -1. */
int rep__mqtt_split_broker(const char *s, char *host, size_t hostlen, int *port /* OUT */);
/* The outputs[] entry named name, or NULL. */
const cfg_output_t *rep__mqtt_find_cfg(const cfg_t *cfg, const char *name);
/* The connection's options from the entry (broker into host[0..hostlen), TLS, credentials,
 * window, the replicator's deadlines and backoff); the kind sets qos, clean_session and any
 * subscription. 0 or TB_ECONFIG with err. */
int rep__mqtt_conn_opts(const cfg_t *cfg, const cfg_output_t *c, char *host, size_t hostlen,
                        rep_mosq_opts_t *mo /* OUT */, char *err, size_t errlen);
/* The mappings (rule indexes) whose topics the output carries: what its templates are checked
 * against. *nr of them; free() the array. */
uint32_t *rep__mqtt_rules(const rep_output_t *o, const router_t *router, const cfg_t *cfg, size_t *nr /* OUT */);
/* A lane a reload added, for a template (tmpl, router_out_compile's flags) that needs a match:
 * a router of the reload's mappings (spec->mappings), the template checked against the rules
 * the output carries there. 0 and *out; TB_EUNSUPPORTED without mappings; or the error (warned). */
int rep__mqtt_added_router(const rep_output_t *o, const rep_topic_spec_t *spec, const char *tmpl, unsigned flags,
                           router_t **out /* OUT */);
/* /stats: the connection's part (state, counters, window), last_error = own_error then the
 * connection's; no connection: "stopped" or "idle". Any thread. */
void rep__mqtt_conn_stats(rep_mosq_t *conn, bool stopped, const char *own_error, rep_output_stats_t *st);

/* ---- lanes over one connection (rep_mosq_lanes.c) ------------------------------
 *
 * What the mqtt and sparkplug kinds share: one lane per topic the output
 * carries (rep_lane.c), the round robin over them, the pacer (a record
 * refused goes back to its reader and the lane is parked until
 * rep__pace_next grants it), acks, a lost session, memory_first spills, a
 * lane added at run time. All on the output's thread but rep__mlanes_add
 * (the loop thread) and rep__mlanes_free (after the join). */

/* A record of the lane on its way to the dead-letter log (OUTPUTS.md 4.7): its unit waits in
 * the window, DEAD, until the loop says the write is durable (rep__mlanes_dl_answer). */
typedef struct rep__mdl {
    uint64_t offset;            /* the record's (its unit's first == last) */
    uint64_t token;             /* the event's; 0: not asked now (retry_at says when) */
    rep_dl_reason_t reason;
    char *error;                /* dead_letter.error */
    uint64_t retry_at;          /* tb_mono_ms(): a refused write is asked again then */
    uint32_t refusals;          /* writes refused so far: the delay doubles, 1 s to 30 s */
} rep__mdl_t;

/* A lane of such an output; the kind's lane struct starts with it (ops->lane_size bytes). */
typedef struct rep__mlane {
    rep__lane_t lane;           /* first */
    rep__enc_t enc;             /* only max_age_ms (rep__too_old) */
    uint32_t idx;               /* in the set (the mqtt connection's lane index); set when it joins */
    bool ready;                 /* records may be readable */
    bool parked;                /* its next record waits for the pacer (held in its reader) */
    bool dirty;                 /* stats to publish at the next turn */
    bool acked_due;             /* units ACKED since the last rep__lane_acked (once per turn) */
    uint32_t acked_n;           /* the window's leading units marked ACKED since then: an ack's walk
                                   starts there, not at the head (a turn's k acks cost k, not k^2/2) */
    uint64_t retry_at;          /* a reader error: try again then (tb_mono_ms) */
    uint64_t resend_upto;       /* offsets up to this were sent before (a lost session, or a
                                   previous process: the resend window at start) */
    rep__mdl_t *dl;             /* its records waiting for the dead-letter log (few: rare, and
                                   bounded by the window) */
    uint32_t ndl, dlcap;
} rep__mlane_t;

/* What the kind made of a record (build). */
typedef struct rep__mlane_unit {
    uint32_t bytes;             /* what max_bytes_per_s counts for it (one message of max_messages_per_s) */
    bool resend;                /* sent before (counted batches_resent) */
    bool replayed;              /* else: counted messages_replayed */
    rep_dl_reason_t dl_reason;  /* REP__ML_DEAD: why, for tributary_dead_letters_total */
    const char *dl_error;       /* REP__ML_DEAD: dead_letter.error (read during the call) */
} rep__mlane_unit_t;

#define REP__ML_SEND 0          /* build: the record goes (the unit filled) */
#define REP__ML_SKIP 1          /* not to be carried: the checkpoint passes it */
#define REP__ML_RETRY 2         /* out of memory: the lane reads it again in 1 s */
#define REP__ML_DEAD 3          /* cannot be carried (u->dl_reason, u->dl_error): a dead letter
                                   (rep__mlanes_dead) */

typedef struct rep__mlanes_ops {
    size_t lane_size;           /* the kind's lane struct, rep__mlane_t first */
    /* optional: the kind's part of a new lane: at init (added false), or on the loop thread for
     * a topic a reload added (spec->mappings: that reload's configuration); 0 or < 0 */
    int (*setup)(void *kind, rep__mlane_t *ml, const rep_topic_spec_t *spec, bool added);
    /* one record of ml about to go: REP__ML_* (SEND: *u filled, the kind keeps what it built
     * until it hands it out) */
    int (*build)(void *kind, rep__mlane_t *ml, const wal_record_t *rec, uint64_t now_wall,
                 rep__mlane_unit_t *u /* OUT */);
    /* optional: the pacer refused what build made; it is built again later */
    void (*unbuild)(void *kind, rep__mlane_t *ml);
    void (*fini)(void *kind, rep__mlane_t *ml); /* optional: frees the kind's part */
} rep__mlanes_ops_t;

typedef struct rep__mlanes {
    rep_output_t *o;
    const rep__mlanes_ops_t *ops;
    void *kind;                 /* the kind's output, given to ops */
    rep__mlane_t **v;           /* the thread's lanes, by idx (o->nlanes entries) */
    uint32_t n;
    uint32_t rr;                /* the round robin's next lane */
    rep__mlane_t **all;         /* every lane made (init, rep__mlanes_add): freed by rep__mlanes_free */
    uint32_t nall;
    uint32_t win_cap;           /* each lane's window */
    uint32_t recheck_ms;        /* wal.fsync interval: how often an idle lane looks at the readable end */
    rep_mosq_state_t seen;      /* the connection's state at the last turn */
    uint64_t dl_seq;            /* dead-letter tokens */
} rep__mlanes_t;

void rep__mlanes_init(rep__mlanes_t *s, rep_output_t *o, const rep__mlanes_ops_t *ops, void *kind, uint32_t win_cap,
                      uint32_t recheck_ms);
/* init: a lane for every topic of the engine rep__output_wants. 0 or < 0 with err. */
int rep__mlanes_setup(rep__mlanes_t *s, char *err, size_t errlen);
/* The loop thread, at a reload (ops->add_topic): the lane of a new topic (cursor, kind part),
 * o->lanes[topic] published, then a REP__CMD_TOPIC to the thread (rep__mlanes_topic_cmd). */
int rep__mlanes_add(rep__mlanes_t *s, size_t topic, const rep_topic_spec_t *spec);
/* The loop thread (ops->update_topic): a reload changed the topic's max_age; the thread applies
 * it to the records it reads from then on. */
int rep__mlanes_update(rep__mlanes_t *s, size_t topic, const rep_topic_spec_t *spec);
void rep__mlanes_topic_cmd(rep__mlanes_t *s, rep__topic_cmd_t *cmd); /* ops->topic_cmd; owns cmd */
/* The next record to send: 1 with *ml and *rec (valid until the next call; its unit is in the
 * window, SENT), or 0 when none can go now. */
int rep__mlanes_next(rep__mlanes_t *s, rep__mlane_t **ml /* OUT */, wal_record_t *rec /* OUT */);
/* Lane `lane`'s units up to token are acknowledged (the cursor moves at the next turn). */
void rep__mlanes_acked(rep__mlanes_t *s, uint32_t lane, uint64_t token);
/* The session ended with units unacknowledged: every lane back to its checkpoint + 1. */
void rep__mlanes_session_lost(rep__mlanes_t *s);
/* Once per turn of the loop (the kind's idle, after rep__output_drain): acks flushed, parked
 * lanes the pacer grants unparked, read retries, states and stats. Returns the ms the loop may
 * sleep at most (-1: no wish). */
int rep__mlanes_turn(rep__mlanes_t *s, rep_mosq_state_t state, uint64_t now);
/* ops->lane_kicked: l may have records. */
void rep__mlanes_kicked(rep__mlanes_t *s, rep__lane_t *l, bool stopping);
/* A record not carried: a virtual unit acked at once, in order (counted dropped for its age). */
void rep__mlanes_skip(rep__mlane_t *ml, const wal_record_t *rec);
/* A record of ml the output cannot carry (OUTPUTS.md 4.7): its unit (pushed, or the one already
 * in the window: in_window, the sparkplug session's) becomes DEAD and the record is read again
 * from the log and handed to the loop (REP_EV_DEAD_LETTER, source "output:<name>"); the
 * checkpoint passes it once the loop says it is durable in the dead-letter log. */
void rep__mlanes_dead(rep__mlanes_t *s, rep__mlane_t *ml, uint64_t offset, rep_dl_reason_t reason, const char *error,
                      bool in_window);
/* ops->dl_answer: rc 0, the dead unit is passed (ACKED, dead); TB_EUNSUPPORTED (mqtt.dead_letter
 * off), passed as a counted skip; another error, asked again in 1 s. Owns cmd. */
void rep__mlanes_dl_answer(rep__mlanes_t *s, rep__dl_cmd_t *cmd);
/* Stopped: acks flushed, every lane STOPPED and published. */
void rep__mlanes_finish(rep__mlanes_t *s);
/* After the join: every lane and the kind's parts. */
void rep__mlanes_free(rep__mlanes_t *s);

#endif
