/*
 * rep_int.h: the replicator's internals, shared by replicator/'s files and
 * its unit tests (never by other folders). Prefix rep__.
 *
 * The layering, bottom up (docs/REPLICATION.md, "Engine, outputs, lanes"):
 *   pure logic      rep_backoff.c (delays), rep_timer.c (deadline heap),
 *                   rep_encode.c (WAL records -> ReplicateBatch bytes),
 *                   rep_fill.c (a batch from the WAL reader, byte bound),
 *                   rep_window.c (in-flight batches, contiguous acks)
 *                   -- no gRPC, no threads: unit-tested directly
 *   gRPC plumbing   rep_grpc.c (URLs, credentials, unary calls, buffers),
 *                   rep_chan.c (channels by URL, connectivity watches)
 *   the protocol    rep_register.c (RegisterEdge, heartbeat),
 *                   rep_lookup.c (Discovery), rep_stream.c (one
 *                   ReplicateData call), rep_topic.c (a topic's state
 *                   machine: reading the WAL, sending, acks, retries),
 *                   rep_poison.c (batches refused for good, the refused
 *                   state), over rep_status.c (what a status means: pure)
 *   the thread      rep_thread.c (the completion-queue loop, the waker,
 *                   commands, stop), rep.c (public API, events, stats,
 *                   and rep__danube_ops: Danube as an output kind)
 *   the engine      rep_lane.c (one (output, topic): reader, cursor, window,
 *                   ack accounting, stats), rep_output.c (what every output
 *                   has: mailboxes, thread, kick, stop, events),
 *                   rep_engine.c (the outputs of the configuration, kick
 *                   fan-out, events merged, stats) -- no gRPC
 *
 * Everything below the public API runs on the output's thread only (for
 * Danube: the replicator thread), except what is marked "any thread".
 */
#ifndef REP_INT_H
#define REP_INT_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>

#include "replicator/replicator.h"

/* ---- completion-queue tags ------------------------------------------------ */

/* Every tag given to gRPC is one of these; the loop calls cb(ok). */
typedef struct rep__op {
    void (*cb)(rep_t *r, struct rep__op *op, bool ok);
} rep__op_t;

/* ---- timers (rep_timer.c): a binary heap of deadlines ---------------------- */

typedef struct rep__timer {
    uint64_t due;        /* tb_mono_ms() */
    size_t pos;          /* heap index + 1; 0: not armed */
    void (*cb)(rep_t *r, struct rep__timer *tm);
} rep__timer_t;

typedef struct rep__heap {
    rep__timer_t **v;
    size_t n, cap;
} rep__heap_t;

/* Arms (or re-arms) tm for `due`. */
void rep__timer_arm(rep__heap_t *h, rep__timer_t *tm, uint64_t due);
void rep__timer_cancel(rep__heap_t *h, rep__timer_t *tm);
static inline bool rep__timer_armed(const rep__timer_t *tm) { return tm->pos != 0; }
/* The earliest armed timer, or NULL. */
rep__timer_t *rep__timer_peek(const rep__heap_t *h);
/* Removes and returns the earliest timer if it is due at `now`, else NULL. */
rep__timer_t *rep__timer_pop_due(rep__heap_t *h, uint64_t now);
void rep__heap_free(rep__heap_t *h);

/* ---- backoff (rep_backoff.c) -------------------------------------------------- */

typedef struct rep__backoff {
    uint32_t initial_ms;
    uint32_t max_ms;
    uint32_t attempt;    /* failures since the last reset */
    bool full_jitter;    /* true: uniform in [0, cap]; false: uniform in [cap/2, cap] */
} rep__backoff_t;

/* xorshift64* step; *state must be non-zero. */
uint64_t rep__rand(uint64_t *state);
/* The cap of the next delay: min(max, initial * 2^attempt). */
uint32_t rep__backoff_cap(const rep__backoff_t *b);
/* The next delay (ms) and one more attempt counted. */
uint32_t rep__backoff_next(rep__backoff_t *b, uint64_t *rng);
void rep__backoff_reset(rep__backoff_t *b);
/* ms scaled by a uniform factor in [1 - pct/100, 1 + pct/100]. */
uint32_t rep__jitter(uint32_t ms, uint32_t pct, uint64_t *rng);

/* ==== pacing and priorities (rep_pace.c) =======================================
 *
 * Output-generic and pure: no threads, no clock of its own (now_ms is passed
 * in, tb_mono_ms() in production, a fake clock in tests/unit/replicator/
 * test_pace.c). One rep__pace_t per output, one rep__pace_lane_t embedded in
 * each lane of it (whatever the kind: the pacer only sees the embedded
 * struct and its priority). docs/REPLICATION.md "Pacing and priorities".
 *
 * Two token buckets per output, bytes and messages (max_bytes_per_s,
 * max_messages_per_s; rate 0: unlimited). Tokens are kept in milli-units,
 * so a rate of R units/s adds exactly R milli-units per ms. Burst =
 * max(200 ms of the rate, the largest unit asked so far): a unit larger than
 * the budget still goes (alone, once the bucket has filled to its size),
 * and over any 10 s window at most rate x 10.2 s goes (plus, only after a
 * unit larger than 200 ms of the rate, that unit's excess).
 *
 * Who goes when the output is constrained: strict priority (the highest
 * class with a lane waiting is served first; a lane of a lower class is
 * granted nothing while one of a higher class waits), and deficit round
 * robin on bytes among lanes of one class (quantum: rep__pace_init's). A
 * lane asks for each unit (rep__pace_ask); when refused it waits in its
 * class and the output asks rep__pace_next when the time it gave has come
 * (a timer); next grants the unit (tokens taken) and returns the lane,
 * whose next ask for that unit then answers true without taking more.
 *
 * Usage from an output's thread:
 *   if (!rep__pace_ask(&o->pace, &l->pace, bytes, msgs, now)) {
 *       arm the output's pace timer at now + rep__pace_wait(&o->pace, now);  park the lane
 *   }
 *   timer: while ((pl = rep__pace_next(&o->pace, now, &wait))) pump(the lane of pl);
 *          if (wait != UINT64_MAX) re-arm at now + wait
 *   the lane stops wanting to send (stream ended, stopping): rep__pace_leave
 */

#define REP__PACE_BURST_MS 200u
#define REP__PACE_CLASSES 256

typedef struct rep__bucket {
    uint64_t rate;               /* units per second = milli-units per ms; 0: unlimited */
    uint64_t burst;              /* milli-units: max(rate x 200 ms, the largest unit x 1000) */
    uint64_t unit_max;           /* milli-units: the largest unit asked so far (kept across a rate change) */
    uint64_t tokens;             /* milli-units */
    uint64_t last_ms;            /* when tokens were last refilled */
} rep__bucket_t;

typedef struct rep__pace_lane {
    struct rep__pace_lane *prev, *next; /* its class's ring while in_ring */
    uint8_t priority;            /* 0..255, higher first */
    bool in_ring;                /* in its class: waiting, or served this turn */
    bool waiting;                /* refused; want_* is its unit */
    bool credited;               /* given its quantum for the current turn */
    bool granted;                /* rep__pace_next took the tokens for want_*: the next ask is true */
    uint32_t want_bytes, want_msgs;
    uint64_t deficit;            /* DRR: bytes it may still send this turn */
    uint64_t wait_since_ms;      /* while waiting: when it was first refused */
    uint64_t throttled_ms;       /* cumulative time waiting for tokens (finished waits) */
    uint64_t granted_units;      /* units granted (tests, stats) */
    uint64_t granted_bytes;
} rep__pace_lane_t;

typedef struct rep__pace {
    rep__bucket_t bytes, msgs;
    uint64_t quantum;            /* DRR quantum in bytes (Danube: max_batch_bytes) */
    rep__pace_lane_t *classes[REP__PACE_CLASSES]; /* ring heads, by priority */
    uint32_t members[REP__PACE_CLASSES];          /* lanes in each ring */
    uint64_t used[REP__PACE_CLASSES / 64];        /* bit set: the class's ring is not empty */
    uint32_t waiting;            /* lanes waiting, all classes */
} rep__pace_t;

/* Rates in units per second (0: unlimited), the DRR quantum (0: 16 KiB); the buckets start full. */
void rep__pace_init(rep__pace_t *p, uint64_t max_bytes_per_s, uint64_t max_messages_per_s, uint64_t quantum,
                    uint64_t now_ms);
/*
 * New rates (a reload: outputs[].max_bytes_per_s / max_messages_per_s), the
 * output's thread. Held from now on: a bucket keeps the tokens it has up to
 * the new burst (a bucket that was unlimited starts full, as at init); the
 * burst still fits the largest unit seen. Lanes waiting keep their place;
 * the caller then asks rep__pace_next (rates lifted: each waiting lane is
 * granted at once, nothing stays parked).
 */
void rep__pace_set_rates(rep__pace_t *p, uint64_t max_bytes_per_s, uint64_t max_messages_per_s, uint64_t now_ms);
/* Whether any rate is set (false: every ask is granted at once, nothing queues). */
static inline bool rep__pace_limited(const rep__pace_t *p) { return p->bytes.rate || p->msgs.rate; }
/* Whether a lane must ask before it sends: a cap is set, or rep__pace_next granted it a unit
 * (caps lifted since: the grant is used up by that ask, never carried to a later cap). */
static inline bool rep__pace_must_ask(const rep__pace_t *p, const rep__pace_lane_t *pl)
{
    return rep__pace_limited(p) || pl->granted;
}
void rep__pace_lane_init(rep__pace_lane_t *pl, uint8_t priority);
/*
 * Asks for one unit (bytes, messages) now. true: granted (tokens taken, or
 * taken already by rep__pace_next for this lane). false: the lane waits in
 * its class (its unit recorded; asking again only updates it) until
 * rep__pace_next grants it. Granted at once only when no lane of its
 * priority or higher waits (or it is the one whose DRR turn it is) and
 * the tokens are there.
 */
bool rep__pace_ask(rep__pace_t *p, rep__pace_lane_t *pl, uint32_t bytes, uint32_t msgs, uint64_t now_ms);
/*
 * The lane to serve now: the highest class with a lane waiting, DRR inside
 * it; its unit is granted (tokens taken; its next ask answers true). NULL
 * when none can go now: *wait_ms (may be NULL) is then how long until the
 * head can go, UINT64_MAX when no lane waits.
 */
rep__pace_lane_t *rep__pace_next(rep__pace_t *p, uint64_t now_ms, uint64_t *wait_ms /* OUT */);
/* How long until the lane rep__pace_next would pick can go: 0 now, UINT64_MAX when none waits. */
uint64_t rep__pace_wait(rep__pace_t *p, uint64_t now_ms);
/* The lane no longer wants to send (its stream ended, it stops): out of its
 * class, an unused grant dropped, its wait ended (counted in throttled_ms). */
void rep__pace_leave(rep__pace_t *p, rep__pace_lane_t *pl, uint64_t now_ms);
/* Cumulative time the lane waited for tokens, the current wait included. */
uint64_t rep__pace_throttled_ms(const rep__pace_lane_t *pl, uint64_t now_ms);

/* ==== end of pacing ============================================================ */

/* ---- batches: encoding (rep_encode.c) ----------------------------------------- */

#define REP__REPLAYED_KEY "tributary.replayed"

/* What every message of a topic's batches shares. */
typedef struct rep__enc {
    const char *topic;
    size_t topic_len;
    const char *producer;        /* producer_name */
    size_t producer_len;
    uint32_t batch_size;
    uint64_t max_bytes;
    uint32_t live_window_ms;
    uint64_t live_base;          /* offsets >= this were received since start (stats) */
    uint64_t max_age_ms;         /* records older than this (publish_time_ms) at fill time are
                                    skipped unsent (0: none) */
} rep__enc_t;

/* The batch being filled: an encoded ReplicateBatch without its trailer. */
typedef struct rep__open {
    uint8_t *buf;
    size_t len, cap;
    uint32_t count;
    uint32_t count_new;          /* offsets >= live_base */
    uint32_t replayed;           /* messages marked tributary.replayed */
    uint32_t skipped_attrs;      /* attributes left out: not valid UTF-8 */
    uint64_t raw_bytes;          /* on-disk size of its records (lag_bytes) */
    uint64_t first, last;        /* WAL offsets */
    uint64_t first_publish_ms;
    uint64_t last_publish_ms;    /* the newest publish_time_ms of its messages */
    uint64_t started_ms;         /* tb_mono_ms() when its first message was added */
    /* A batch holds either messages to send or only records older than
     * max_age (aged), never both: an aged-only batch becomes a "virtual"
     * batch, never sent, that moves the checkpoint over them. */
    uint32_t aged;               /* records skipped for their age (count is then 0) */
    uint32_t aged_new;           /* of those, offsets >= live_base */
} rep__open_t;

enum { REP__ADD_FULL = 1 }; /* the record would take the batch past max_bytes: not added */

/* The encoded size of one StreamMessage for rec (without its field header). */
size_t rep__msg_size(const rep__enc_t *e, const wal_record_t *rec, bool replayed);
/*
 * Appends rec as a StreamMessage. Returns 0, or REP__ADD_FULL when the
 * batch already holds a message and this one would take it past
 * max_bytes (an empty batch takes any message, however large).
 */
int rep__open_add(rep__open_t *o, const rep__enc_t *e, const wal_record_t *rec, uint64_t now_wall_ms);
static inline bool rep__open_full(const rep__open_t *o, const rep__enc_t *e) { return o->count + o->aged >= e->batch_size; }
static inline bool rep__open_empty(const rep__open_t *o) { return o->count == 0 && o->aged == 0; }
/* Whether rec is older than e->max_age_ms at now_wall_ms (records without a publish time never are). */
static inline bool rep__too_old(const rep__enc_t *e, const wal_record_t *rec, uint64_t now_wall_ms)
{
    return e->max_age_ms && rec->publish_time_ms && now_wall_ms > rec->publish_time_ms &&
           now_wall_ms - rec->publish_time_ms > e->max_age_ms;
}
void rep__open_free(rep__open_t *o);

/* ---- filling a batch from the log (rep_fill.c) ------------------------------- */

typedef struct rep__src {
    wal_reader_t *rd;
    wal_record_t held;           /* read, did not fit the last batch: leads the next */
    bool has_held;
    uint8_t *held_buf;
    size_t held_cap;
    uint64_t gaps;               /* WAL_GAP_DROPPED gaps skipped (records lost before being read) */
    uint64_t holes;              /* WAL_GAP_HOLE gaps skipped (offsets without records: no loss) */
    uint64_t gap_from, gap_to;   /* the latest drop */
} rep__src_t;

/*
 * Adds records (the held one first) to o. A record older than max_age is
 * not encoded: it extends the range of an aged-only batch (o->aged). Returns
 * 1 when o is complete (batch_size reached, the next record did not fit and
 * is now held, a WAL_GAP followed its records, or the next record is aged
 * after messages or fresh after aged ones: it is held and leads the next), 0 when nothing more is readable (WAL_END),
 * or a reader error (< 0). WAL_GAPs are skipped and counted in s, drops
 * (gaps) apart from holes (holes: nothing was lost there). So a
 * batch's offsets are always contiguous, first..last: the ack accounting
 * (rep_topic.c) counts them by range.
 */
int rep__fill(rep__open_t *o, const rep__enc_t *e, rep__src_t *s, uint64_t now_wall_ms);
/* The next record without consuming it (it becomes the held one): 0 and
 * *out, WAL_END, or an error. For the age of the oldest unreplicated
 * message while nothing is being sent. */
int rep__src_peek(rep__src_t *s, const wal_record_t **out /* OUT */);
/* Closes the reader and frees the held copy. */
void rep__src_free(rep__src_t *s);

/* ---- batches in flight (rep_window.c) ---------------------------------------- */

typedef enum {
    REP__B_BUILT,    /* encoded, not sent on the current stream */
    REP__B_SENDING,  /* its SEND_MESSAGE is pending */
    REP__B_SENT,     /* sent, waiting for its ack */
    REP__B_ACKED,    /* acked, waiting for earlier batches' acks */
    REP__B_DEAD,     /* refused for good (replicator.max_attempts): never sent again, its records on
                        their way to the dead-letter log; later batches still go. ACKED (with
                        dead set) once they are durable there */
} rep__bstate_t;

typedef struct rep__batch {
    uint64_t first, last;        /* WAL offsets; last is batch_last_offset */
    uint32_t count, count_new, replayed;
    uint32_t aged, aged_new;     /* a virtual batch (count 0): records skipped for their age */
    uint64_t raw_bytes;          /* on-disk size of its records */
    uint64_t first_publish_ms;
    uint64_t last_publish_ms;    /* the newest publish_time_ms of its messages (max_age at resend) */
    uint8_t *buf;                /* the encoded ReplicateBatch (until `wire` takes it) */
    size_t len;
    void *wire;                  /* rep_stream.c: the refcounted grpc_slice holding buf */
    rep__bstate_t state;
    uint64_t sent_ms;            /* tb_mono_ms() of its latest send */
    uint32_t sends;
    uint16_t perm_fails;         /* streams that ended with a permanent status while carrying it alone */
    bool dead;                   /* dead-lettered: the checkpoint passes it uncounted as replicated */
    int last_status;             /* grpc_status_code of its latest permanent failure */
} rep__batch_t;

/* Closes the open batch into *out: appends batch_last_offset and hands over the buffer. An
 * aged-only batch becomes a virtual one: no buffer, already REP__B_ACKED (never sent; the
 * window pops it like an acknowledged batch, so it moves the checkpoint in order). */
void rep__open_finish(rep__open_t *o, rep__batch_t *out /* OUT */);

typedef struct rep__window {
    rep__batch_t *v;
    uint32_t cap, head, n;
    uint32_t sent;               /* batches SENDING or SENT */
    uint64_t acked;              /* highest offset covered by contiguous acks */
} rep__window_t;

void rep__window_init(rep__window_t *w, uint32_t cap, uint64_t acked);
void rep__window_free(rep__window_t *w); /* the batches' buffers are the caller's to free first */
/* The i-th batch from the oldest (i < n). */
rep__batch_t *rep__window_at(rep__window_t *w, uint32_t i);
/* A free slot at the tail, or NULL when full. */
rep__batch_t *rep__window_push(rep__window_t *w);
/* The oldest BUILT batch (batches go out in order), or NULL. */
rep__batch_t *rep__window_next_unsent(rep__window_t *w);
void rep__window_mark_sending(rep__window_t *w, rep__batch_t *b, uint64_t now_ms);
void rep__window_mark_sent(rep__window_t *w, rep__batch_t *b);

typedef enum {
    REP__ACK_IN_ORDER,     /* the oldest unacked batch */
    REP__ACK_OUT_OF_ORDER, /* a later batch while an earlier one is unacked */
    REP__ACK_UNKNOWN,      /* no batch in flight ends at that offset (or acked already) */
} rep__ack_t;

rep__ack_t rep__window_ack(rep__window_t *w, uint64_t acked_offset);
/* Pops the oldest batch if acked (copied to *out) and advances w->acked. */
bool rep__window_pop(rep__window_t *w, rep__batch_t *out /* OUT */);
/* After a stream ended: every batch not acked goes back to BUILT, same boundaries. */
void rep__window_rewind(rep__window_t *w);
/* The oldest batch not acked (for its deadline), or NULL. */
rep__batch_t *rep__window_oldest_unacked(rep__window_t *w);

/* ---- what a failed stream's status means (rep_status.c, pure) ------------------ */

typedef enum {
    REP__CLASS_TRANSIENT,     /* rewind, backoff, rebuild (as any outage) */
    REP__CLASS_PERMANENT,     /* the batch is refused for good: charged to it (rep_topic.c), dead-lettered
                                 after replicator.max_attempts */
    REP__CLASS_TOPIC_GONE,    /* NOT_FOUND: the cluster forgot the topic: register again */
    REP__CLASS_CREDENTIALS,   /* UNAUTHENTICATED, PERMISSION_DENIED: the refused state, maximal backoff */
    REP__CLASS_UNIMPLEMENTED, /* no EdgeReplicatorService there: the refused state too */
} rep__class_t;

/* The class of a stream (or call) that ended with st while carrying a batch of batch_msgs
 * messages (RESOURCE_EXHAUSTED is permanent only for a single message). */
rep__class_t rep__classify(grpc_status_code st, uint32_t batch_msgs);
const char *rep__class_name(rep__class_t c);
/* The dead-letter reason of a permanent status (REP_DL_OPERATOR for any other). */
rep_dl_reason_t rep__dl_reason(grpc_status_code st);
/* The words /readyz and /stats show for a refused state ("" for none); snprintf's result. */
int rep__refused_words(rep_refused_t r, const char *status, const char *detail, const char *url, char *buf,
                       size_t len);

/* ---- gRPC plumbing (rep_grpc.c) ----------------------------------------------- */

/* "http://h:p" -> target "h:p", tls false; "https://..." -> tls true. 0 or TB_ECONFIG. */
int rep__parse_url(const char *url, char **target /* OUT */, bool *tls /* OUT */);

/* A unary call: one batch with every op, one tag. */
typedef struct rep__unary {
    rep__op_t op;
    struct rep__unary *prev, *next; /* r->unaries */
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    void (*done)(rep_t *r, struct rep__unary *u); /* status, details, recv filled */
    void *arg;
} rep__unary_t;

/*
 * Starts method on ch with the packed request (copied), a deadline of
 * rpc_timeout_ms and the bearer token. done runs on completion, whatever
 * the outcome (u->status says); the caller frees u with rep__unary_free.
 */
rep__unary_t *rep__unary_start(rep_t *r, grpc_channel *ch, const char *method, const uint8_t *req, size_t len,
                               void (*done)(rep_t *r, rep__unary_t *u), void *arg);
void rep__unary_free(rep_t *r, rep__unary_t *u);
/* The response bytes (NULL, 0 when none); free with free(). */
uint8_t *rep__unary_response(rep__unary_t *u, size_t *len /* OUT */);
/* The status details as a new string ("" when none). */
char *rep__status_details(grpc_slice details);
const char *rep__status_name(grpc_status_code c);
/* Reads a received byte buffer into one malloc'd block. */
uint8_t *rep__bb_read(grpc_byte_buffer *bb, size_t *len /* OUT */);
/* The metadata every call carries (authorization), or NULL/0 without a token. */
grpc_metadata *rep__call_md(rep_t *r, size_t *n /* OUT */);

/* ---- channels (rep_chan.c) -------------------------------------------------- */

typedef struct rep__chan {
    struct rep__chan *next;
    char *url;                   /* as given (cluster_url or a lookup answer) */
    char *target;
    bool tls;
    grpc_channel *ch;
    grpc_connectivity_state state;
    rep__op_t watch_op;
    bool watching;
    bool logged_down;            /* "unreachable" was logged for this outage */
} rep__chan_t;

/* The channel for url (created on first use). NULL with a log line if the URL is bad. */
rep__chan_t *rep__chan_get(rep_t *r, const char *url);
/* Asks an IDLE channel to connect, and resets its reconnect backoff. */
void rep__chan_connect(rep_t *r, rep__chan_t *c);
/* Destroys every channel (pending watches then complete). */
void rep__chans_close(rep_t *r);
void rep__chans_free(rep_t *r);

/* ---- the engine: outputs, their vtable, lanes (rep_engine.c, rep_output.c, rep_lane.c) ----
 *
 * An output is one destination of the log (today: the Danube cluster). Its
 * kind is a vtable (rep_output_ops_t); its struct starts with a rep_output_t
 * (ops->size bytes in all, zeroed). Per (output, topic) it carries, it has a
 * lane (rep__lane_t): its own WAL reader and cursor (wal.h CURSORS), the
 * window of units between built and acknowledged, and the stats an operator
 * reads. A kind's per-topic struct starts with its lane (Danube's
 * rep__topic_t). Everything in a lane but `kick`/`queued` and the published
 * copies (under o->mu) belongs to the output's thread.
 */

typedef struct rep_output rep_output_t;
typedef struct rep__lane rep__lane_t;

typedef enum { REP__CMD_KICK, REP__CMD_STOP, REP__CMD_TOPIC, REP__CMD_DL, REP__CMD_RATES } rep__cmd_kind_t;

typedef struct rep__cmd {
    tb_mnode_t node;
    rep__cmd_kind_t kind;
} rep__cmd_t;

/* A topic given at run time (rep_engine_add_topic / rep_engine_update_topic,
 * a reload): made on the loop thread, pushed to the output's mailbox, freed
 * by its thread (ops->topic_cmd) or, never taken, by rep__output_free. */
typedef struct rep__topic_cmd {
    rep__cmd_t cmd;              /* first; kind REP__CMD_TOPIC */
    bool add;                    /* true: lane (the kind's topic struct) is new; false: an update */
    bool release;                /* rep_engine_release_topic: the lane is released (any kind: rep_output.c) */
    rep__lane_t *lane;           /* the output's lane of the topic */
    char *subject;               /* update: the new schema subject (NULL: none) */
    uint64_t max_age_ms;         /* update */
} rep__topic_cmd_t;

/* The loop's answer to a dead-letter write of a kind other than danube (rep_engine_dead_letter_done):
 * pushed to the output's mailbox, freed by its thread (ops->dl_answer) or rep__output_free. */
typedef struct rep__dl_cmd {
    rep__cmd_t cmd;              /* first; kind REP__CMD_DL */
    size_t topic;
    uint64_t token;
    int rc;
} rep__dl_cmd_t;

/* rep_engine_set_rates: new caps for the output's pacer, applied on its thread */
typedef struct rep__rates_cmd {
    rep__cmd_t cmd;              /* first; kind REP__CMD_RATES */
    uint64_t max_bytes_per_s, max_messages_per_s;
} rep__rates_cmd_t;

/* What the engine keeps of an outputs[] entry (owned); the kind's own keys
 * are read by its init from the configuration. */
typedef struct rep_output_cfg {
    char *name;
    rep_kind_t kind;
    char **topics;               /* upstream topic filters it carries (router_filter_match) */
    size_t ntopics;
} rep_output_cfg_t;

struct rep__lane {
    rep_output_t *o;
    size_t topic;                /* index in the engine's topics (rep_new: in opts.topics) */
    char *name;
    wal_topic_t *wal;
    wal_cursor_t *cur;           /* its checkpoint slot: the output's id (o->wal_id) */
    rep__src_t src;              /* reader + held record (rep_fill.c) */
    rep__window_t win;           /* units between built and acked (rep_window.c) */
    const rep__open_t *open;     /* the unit being built, if the kind builds one; NULL: none */
    uint8_t priority;            /* rep_topic_spec_t.priority */
    rep__pace_lane_t pace;       /* its place in o->pace (rep_pace.c) */
    rep__cmd_t kick;             /* any thread: queued by rep__output_kick */
    atomic_bool queued;
    atomic_bool paused;          /* POST /admin/topics/T/pause (rep_pause.c): set by any thread, then
                                    kicked; the kind builds and sends nothing new while set */
    atomic_bool released;        /* rep_engine_release_topic (a retired topic): its reader and cursor are
                                    closed, it reads nothing more; set on its thread, read by any */
    /* stats: st is the thread's, pub the copy readers see (under o->mu) */
    rep_topic_stats_t st, pub;
    uint64_t progress_ms;        /* tb_mono_ms() of the last ack (or when data began to wait) */
    uint64_t pub_progress_ms;    /* its copy under o->mu */
    /* lag_bytes: what was read and not acked, and where the reader is */
    uint64_t pub_unacked_bytes;  /* under o->mu */
    wal_pos_t pub_pos;           /* under o->mu; offset 0: no reader yet */
};

typedef struct rep_output_ops {
    rep_kind_t kind;
    const char *name;                                   /* "danube", "mqtt", "sparkplug" */
    size_t size;                                        /* the kind's struct; rep_output_t first */
    /* caller's thread, inside rep_engine_new: files, TLS, templates, its lanes
     * (rep__lane_init for each topic rep__output_wants); no network */
    int (*init)(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen);
    void *(*main)(void *o);                             /* the thread body */
    void (*wake)(rep_output_t *o);                      /* any thread: cmds went non-empty */
    void (*lane_kicked)(rep_output_t *o, rep__lane_t *l); /* its thread */
    void (*stop)(rep_output_t *o);                      /* its thread: begin the drain */
    int (*reconfigure)(rep_output_t *o, const rep_output_cfg_t *next); /* its thread;
                                                           TB_EUNSUPPORTED: the engine replaces it */
    void (*release)(rep_output_t *o, rep__batch_t *b);  /* a unit left the window (acked or
                                                           dropped): Danube unrefs its grpc_slice */
    void (*fini)(rep_output_t *o);                      /* after the join; frees what init made
                                                           (not o itself, not o->lanes) */
    /* optional, any thread: the kind's part of rep_output_stats (state, last_error,
     * the connection's counters); the engine has summed the lanes already */
    void (*stats)(rep_output_t *o, rep_output_stats_t *st);
    /* A topic at run time (NULL: this kind carries new topics only after a restart).
     * add_topic: the loop thread: its lane (rep__lane_init at index topic) and
     * struct, then a REP__CMD_TOPIC to its thread; update_topic likewise for a
     * changed schema subject or max_age. topic_cmd: its thread, owns cmd. */
    int (*add_topic)(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec);
    int (*update_topic)(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec);
    void (*topic_cmd)(rep_output_t *o, rep__topic_cmd_t *cmd);
    /* Optional, its thread: a drained topic's lane is released (rep_engine_release_topic): the
     * kind stops what it runs for it (Danube: its stream, timers, declaration) before the
     * generic part closes the lane's reader and cursor (rep__lane_release). */
    void (*release_topic)(rep_output_t *o, rep__lane_t *l);
    /* Optional, its thread: the loop's answer to a REP_EV_DEAD_LETTER this output posted (owns
     * cmd). NULL: the kind posts none (danube answers through its topic, rep_poison.c). */
    void (*dl_answer)(rep_output_t *o, rep__dl_cmd_t *cmd);
    /* Optional, its thread: o->pace's rates were changed (rep_engine_set_rates): what waits on
     * the pacer is looked at again (Danube: its pace timer). NULL: the kind asks the pacer at
     * each turn of its loop anyway (the mqtt and sparkplug lanes). */
    void (*rates_changed)(rep_output_t *o);
} rep_output_ops_t;

extern const rep_output_ops_t rep__danube_ops;
extern const rep_output_ops_t rep__mqtt_ops; /* rep_mqtt.c */
extern const rep_output_ops_t rep__sparkplug_ops; /* rep_sparkplug.c */

/* An output's life in the engine (rep_engine_add_output / rep_engine_remove_output). */
enum { REP__OUT_RUNNING, REP__OUT_REMOVING, REP__OUT_REMOVED };

struct rep_output {
    const rep_output_ops_t *ops;
    rep_engine_t *e;             /* NULL: standalone (rep_new) */
    uint16_t idx;                /* in the engine */
    uint16_t wal_id;             /* the output's id in <wal.dir>/OUTPUTS (danube: 0) */
    char *name;
    rep_output_cfg_t cfg;        /* owned; empty when standalone */
    rep__lane_t **lanes;         /* by topic index; NULL: not carried. An entry is written once, on the
                                    loop thread (init, or add_topic at a reload: a release store) */
    size_t nlanes;               /* the length of lanes: the engine's topic capacity (max_topics) */
    tb_mbox_t cmds;              /* -> its thread; wake-up = ops->wake */
    rep__pace_t pace;            /* its rate caps and priorities (rep_pace.c); its thread's */
    _Atomic uint64_t caps_bytes, caps_msgs; /* the caps in force, for the stats (any thread) */
    rep__cmd_t stop_cmd;
    tb_mbox_t events;            /* -> the loop (the engine's notify) */
    pthread_t thread;
    bool started;
    atomic_bool stop_requested;
    atomic_int life;             /* REP__OUT_*: REMOVING from rep_engine_remove_output until its thread
                                    stopped; REMOVED: joined, its lanes released (cursors parked), kept
                                    until the engine is freed (its stats may still be read) */
    bool joined;                 /* REMOVED: its thread was joined already */
    bool stopped_seen;           /* its REP_EV_STOPPED was taken (rep_engine_take_events) */
    pthread_mutex_t mu;          /* st -> pub copies of its lanes and of the kind */
    uint32_t stall_after_ms;     /* health.stall_after_ms */
};

/* The kinds' table (rep_engine.c): NULL where this build has none. Tests may set an entry. */
extern const rep_output_ops_t *rep__kinds[REP_KIND__COUNT];

/* rep_output.c */
/* The common part of a new output (o zeroed, ops->size bytes): mailboxes, lock, lanes array. */
void rep__output_base_init(rep_output_t *o, const rep_output_ops_t *ops, rep_engine_t *e, uint16_t idx,
                           const char *name, size_t nlanes, void (*notify)(void *), void *notify_arg);
/* Whether the output's configuration carries topic `name` (no filters: every topic). */
bool rep__output_wants(const rep_output_t *o, const char *name);
/* What a kind's init asks of each engine topic t: wanted, and not retired (an output added at run
 * time makes no lane on a topic being retired; rep_engine_readd_topic gives it one). */
bool rep__output_takes(const rep_output_t *o, size_t t);
int rep__output_start(rep_output_t *o);              /* its thread, signals blocked */
void rep__output_kick(rep_output_t *o, size_t topic); /* any thread; coalesced per lane */
void rep__output_stop(rep_output_t *o);              /* any thread; idempotent */
void rep__output_post(rep_output_t *o, rep_event_t *ev); /* its thread: ev->output is set */
/* Its thread: the commands waiting, in order (ops->lane_kicked, ops->stop). */
void rep__output_drain(rep_output_t *o);
/* A removed output whose REP_EV_STOPPED came (the loop thread): joins its thread, answers the
 * lane releases it never took, releases every lane (its cursors parked), life REMOVED. */
void rep__output_retire(rep_output_t *o);
/* Joins, ops->fini, frees the events left, the lanes array and o. NULL is allowed. */
void rep__output_free(rep_output_t *o);

/* rep_lane.c */
/* Sets up l for topic (index, name, log) of o: opens the cursor o->wal_id
 * (start for a slot that never existed), the window of cap units from the
 * cursor's checkpoint, o->lanes[topic] = l. The reader opens later. 0 or
 * wal_cursor_open's error. */
int rep__lane_init(rep__lane_t *l, rep_output_t *o, size_t topic, const char *name, wal_topic_t *wal,
                   uint64_t start_offset, uint32_t cap, wal_start_t start);
/* Closes the reader and the cursor, frees the window (units: ops->release) and the name. */
void rep__lane_fini(rep__lane_t *l);
bool rep__lane_ensure_reader(rep__lane_t *l);        /* a reader at win.acked + 1; false: logged */
/* The gaps and holes the reader met since the counts were gaps0/holes0:
 * counted in the stats, drops warned about. */
void rep__lane_note_gaps(rep__lane_t *l, uint64_t gaps0, uint64_t holes0);
/* One record (valid until the next call): 0, WAL_END, or an error; gaps counted. */
int rep__lane_next(rep__lane_t *l, wal_record_t *rec /* OUT */, uint64_t now_wall);
/* Pops the ACKED units at the head of the window, moves the cursor over them
 * (wal_cursor_ack_ex, their aged count with it), counts them exactly (acked
 * new vs dropped meanwhile by a bound), ops->release, publishes. */
void rep__lane_acked(rep__lane_t *l);
/* Session lost: the window emptied (ops->release), the reader reopened at win.acked + 1 (not Danube). */
void rep__lane_restart(rep__lane_t *l);
void rep__lane_publish(rep__lane_t *l);              /* refresh l->pub */
/* Its thread: a drained topic's lane lets go of the log (RELOAD.md 4.3 step 1): released set,
 * the window emptied, the reader and the cursor closed (the cursor under o->mu: the stats read it),
 * state STOPPED published. Nothing reads it again (rep__lane_next answers WAL_END). */
void rep__lane_release(rep__lane_t *l);
/* Loop thread, before l is published: a released lane's cumulative counters carried into l (the
 * same topic given again, rep_engine_readd_topic), so its series never go backwards. */
void rep__lane_carry(rep__lane_t *l, const rep__lane_t *old);
/* Any thread: the published stats plus what is live (readable end, lag, stall). */
void rep__lane_stats(rep__lane_t *l, rep_topic_stats_t *out /* OUT */);
/* rep_pause.c: whether the lane's topic is paused (any thread; a kind's pump checks it before
 * sending what it built; rep__lane_next answers WAL_END while it is set). */
static inline bool rep__lane_paused(rep__lane_t *l) { return atomic_load(&l->paused); }

/* The engine (rep_engine.c). */
#define REP__RUNTIME_OUTPUTS REP_RUNTIME_OUTPUTS
/* Whether topic t is being retired or was (an output's init, at a run-time add, skips it). */
static inline bool rep__topic_gone(const struct rep_engine *e, size_t t);
struct rep_engine {
    wal_t *wal;
    rep_topic_spec_t *topics;    /* owned copies of the names and subjects */
    bool *gone;                  /* by topic: rep_engine_release_topic was asked (a retirement), until
                                    rep_engine_readd_topic: an output added at run time makes no lane */
    size_t ntopics;              /* grows at a reload (rep_engine_add_topic), loop thread */
    size_t cap;                  /* max_topics: the length of topics[] and of every output's lanes[] */
    rep_output_t **outs;         /* outs_cap long: a run-time output is appended (the pointer, then
                                    nouts with a release store), never moved */
    size_t nouts;
    size_t outs_cap;
    /* rep_engine_add_output of a name still REMOVING: started once the old one stopped */
    struct rep__pending_add {
        char *name;
        cfg_t *cfg;              /* cfg_ref'd */
    } *pending;
    size_t npending;
    void (*notify)(void *arg);
    void *notify_arg;
    bool started;
    atomic_bool stop_asked;      /* rep_engine_stop was called */
    pthread_mutex_t ev_mu;       /* rep_engine_take_events callers */
    size_t nstopped;             /* outputs whose REP_EV_STOPPED was taken */
    bool stop_posted;            /* the engine's one REP_EV_STOPPED was handed out */
};

static inline bool rep__topic_gone(const struct rep_engine *e, size_t t) { return e->gone && e->gone[t]; }


/* ---- a topic -------------------------------------------------------------------- */

typedef struct rep__stream rep__stream_t;

/* Danube's topic: the generic lane first (reader, window, cursor, stats), then the protocol. */
typedef struct rep__topic {
    rep__lane_t lane;            /* first; lane.topic is the engine's index, idx the output's */
    rep_t *r;
    size_t idx;                  /* in r->topics */
    char *subject;               /* NULL: none */
    rep__enc_t enc;
    rep__open_t open;            /* the batch being filled (lane.open points here) */
    rep_topic_state_t state;
    bool registered;
    /* lookup and stream */
    rep__chan_t *chan;           /* the broker's channel; NULL: look it up first */
    rep__chan_t *wait;           /* CONNECTING: the channel we wait to be READY */
    rep__unary_t *lookup;
    int hops;
    rep__stream_t *stream;
    uint32_t acks_this_stream;
    rep__backoff_t backoff;
    bool outage_logged;          /* "replication interrupted" logged for this outage */
    /* poison batches (RELOAD.md 5.4, 5.5): one dead-letter write at a time */
    char *dl_error;              /* the status and text of the batch being dead-lettered */
    uint64_t dl_token;           /* of the write asked for; 0: none pending */
    atomic_uint_fast64_t dl_done_token; /* any thread: the loop's answer (rep_engine_dead_letter_done) */
    atomic_int dl_done_rc;
    uint64_t dl_retry_ms;        /* tb_mono_ms() when a refused dead-letter write is asked again; 0: none */
    rep_refused_t refused;       /* this topic's stream is refused (credentials) */
    rep__timer_t batch_timer, retry_timer, ack_timer, read_timer;
    bool released;               /* rep__topic_release: out of r->topics; whatever comes back for it
                                    (a stream's end, a lookup) leaves it STOPPED */
} rep__topic_t;

/* rep_topic.c */
void rep__topic_init(rep_t *r, rep__topic_t *t);
void rep__topic_registered(rep_t *r, rep__topic_t *t);    /* start (or keep) replicating */
void rep__topic_unregistered(rep_t *r, rep__topic_t *t);  /* TOPIC_REMOVED: stop the stream */
void rep__topic_kicked(rep_t *r, rep__topic_t *t);        /* new data may be readable */
void rep__topic_chan_ready(rep_t *r, rep__topic_t *t);    /* its channel became READY */
void rep__topic_stop(rep_t *r, rep__topic_t *t);          /* rep_stop: drain then close */
void rep__topic_grace_over(rep_t *r, rep__topic_t *t);    /* cancel whatever is left */
/* Drained and retired (rep_engine_release_topic): its timers cancelled, its stream cancelled,
 * STOPPED; out of r->topics and declared no more (RegisterEdge again). */
void rep__topic_release(rep_t *r, rep__topic_t *t);
void rep__topic_free(rep__topic_t *t);
void rep__topic_publish(rep_t *r, rep__topic_t *t);       /* refresh t->lane.pub */
/* Its thread: the pacer's rates changed (a reload): the pace timer re-armed for the head's new wait */
void rep__topic_rates_changed(rep_t *r);
/* r->pace_timer's callback: tokens are back; the lanes the pacer grants are pumped */
void rep__topic_paced(rep_t *r, rep__timer_t *tm);
/* called by rep_stream.c */
void rep__topic_on_ack(rep_t *r, rep__topic_t *t, uint64_t acked_offset);
void rep__topic_on_sent(rep_t *r, rep__topic_t *t);
void rep__topic_on_stream_end(rep_t *r, rep__topic_t *t, rep_retry_t why, grpc_status_code st, const char *details);
/* called by rep_lookup.c */
void rep__topic_on_lookup(rep_t *r, rep__topic_t *t, rep__chan_t *chan /* NULL: failed */, const char *why);

/* rep_poison.c (RELOAD.md 5.3-5.6): b ended a stream it carried alone with a permanent status st
 * (text: "STATUS: details"): charged; at replicator.max_attempts DEAD, its records to the loop. */
void rep__poison_charge(rep_t *r, rep__topic_t *t, rep__batch_t *b, grpc_status_code st, const char *text);
/* After a kick: the loop's answer to the topic's dead-letter write, if it came (the checkpoint passes). */
void rep__poison_answered(rep_t *r, rep__topic_t *t);
/* From pump: a dead-letter write the loop refused, asked again once its delay is over. */
void rep__poison_retry(rep_t *r, rep__topic_t *t);
/* The loop's answer to a dead-letter write (any thread): recorded, the lane kicked. */
void rep__topic_dead_letter_done(rep__topic_t *t, uint64_t token, int rc);
/* An owned copy of rec (its pointers into out->blob, raw left out): a dead-letter event's record. */
void rep__dl_copy_record(rep_dl_record_t *out, const wal_record_t *rec);
/* The cluster refused the edge (c: REP__CLASS_CREDENTIALS or _UNIMPLEMENTED) in a call of `what`, or
 * (c == REP__CLASS_TRANSIENT) a call succeeded: the refused state set (logged once a minute) or cleared. */
void rep__refused_note(rep_t *r, rep__class_t c, grpc_status_code st, const char *details, const char *what);

/* rep_lookup.c: Discovery.TopicLookup for t, on url (NULL: the cluster's). */
void rep__lookup_start(rep_t *r, rep__topic_t *t, const char *url);

/* rep_stream.c: one ReplicateData call */
rep__stream_t *rep__stream_open(rep_t *r, rep__topic_t *t);
/* Starts sending b (no other send pending). */
void rep__stream_send(rep__stream_t *s, rep__batch_t *b);
bool rep__stream_send_busy(const rep__stream_t *s);
/* WritesDone: the server ends the call once it has answered everything. */
void rep__stream_close_send(rep__stream_t *s);
/* Cancels; rep__topic_on_stream_end follows when every op is back. */
void rep__stream_cancel(rep__stream_t *s, rep_retry_t why);
/* Drops the batch's wire slice (after its ack). */
void rep__batch_release(rep__batch_t *b);

/* rep_register.c */
void rep__reg_start(rep_t *r);
/* Its thread: the declared topics changed (a topic added or its subject changed at a reload):
 * the request is packed again and sent now when registered (else at the next attempt). */
void rep__reg_redeclare(rep_t *r);
void rep__reg_chan_ready(rep_t *r);   /* the cluster channel became READY */
void rep__reg_stop(rep_t *r);
void rep__reg_free(rep_t *r);

/* ---- the replicator ---------------------------------------------------------------- */

/* The Danube output (kind danube: rep__danube_ops, rep.c). rep_new makes one
 * standalone (its own events, lanes indexed like opts.topics); the engine
 * makes one from the configuration (rep_engine.c). */
struct rep {
    rep_output_t out;            /* first: the engine sees a rep_output_t */
    rep_opts_t o;                /* strings below are owned copies */
    char *bearer;                /* "Bearer <token>" or NULL */
    grpc_metadata md[1];
    size_t nmd;
    char *producer;              /* "tributary-<edge_name>" */
    char *tls_roots, *tls_key, *tls_cert;
    grpc_completion_queue *cq;
    uint64_t rng;
    rep__heap_t timers;
    rep__timer_t pace_timer;     /* when the pacer's head lane can go (rep__topic_paced) */
    /* the waker: a parked call that other threads cancel to wake the thread */
    grpc_channel *inert;
    grpc_call *waker;
    rep__op_t waker_op;
    grpc_metadata_array waker_md;
    grpc_status_code waker_status;
    grpc_slice waker_details;
    pthread_mutex_t waker_mu;
    /* channels and calls */
    rep__chan_t *chans;
    rep__chan_t *cluster;
    rep__unary_t *unaries;
    int outstanding;             /* tags given to gRPC and not returned (waker excluded) */
    /* topics: the thread's (run-time additions are appended by REP__CMD_TOPIC) */
    rep__topic_t **topics;
    size_t ntopics;
    /* every topic struct made (loop thread: setup, add_topic); freed by fini */
    rep__topic_t **all;
    size_t nall;
    bool reg_dirty;              /* the declared set changed while a RegisterEdge was in flight */
    /* registration and heartbeat (rep_register.c) */
    rep_reg_state_t reg_state;
    rep__backoff_t reg_backoff;
    rep__timer_t reg_timer, hb_timer;
    rep__unary_t *reg_call, *hb_call;
    uint64_t config_version;
    bool reregister;             /* register again at the next heartbeat tick */
    bool hb_failing;             /* logged once per failing stretch */
    uint8_t *reg_req;
    size_t reg_req_len;
    uint64_t lookup_seq;
    /* stop */
    bool stopping;
    bool chans_closed;
    rep__timer_t grace_timer;
    bool grpc_up;                /* grpc_init() was called (balanced in fini) */
    /* stats (under out.mu) */
    rep_stats_t st, pub;
    uint64_t dl_seq;             /* dead-letter tokens */
    tb_ratelimit_t refused_rl;   /* the refused warning: once a minute */
    atomic_uint max_attempts;    /* replicator.max_attempts: from o at rep_new, then a reload's
                                    (rep_engine_set_max_attempts, the loop); read by rep_poison.c */
};

/* rep_thread.c */
void *rep__thread_main(void *arg);
void rep__wake(void *arg); /* any thread */
void rep__begin_stop(rep_t *r); /* the stop command, on the thread */
void rep__post(rep_t *r, rep_event_t *ev);
void rep__publish(rep_t *r); /* refresh r->pub */
void rep__grpc_log_setup(void);

#define REP__LOG_TOPIC(t) TB_S("topic", (t)->lane.name)
#define REP__LOG_LANE(l) TB_S("topic", (l)->name)

#endif
