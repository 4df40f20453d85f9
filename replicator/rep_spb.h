/*
 * rep_spb.h: the Sparkplug B output's payloads (issue 18, docs/design/
 * OUTPUTS.md section 5, docs/SPARKPLUG.md): an internal interface of
 * replicator/, not public. Like schema/sch_avro.h it is named without _int
 * so that the fuzz target (tests/fuzz/fuzz_spb_ncmd.c) and the benchmark
 * (bench/bench_spb_encode.c) may include it; nothing outside replicator/,
 * its tests, fuzz/ and bench/ does.
 *
 * Pure: no I/O, no clock, no threads. The session (S4, rep_spb.c, on top of
 * the MQTT output) owns one rep__spb_node_t, gives it the time and the
 * bdSeq, and publishes the bytes these functions leave in a rep__spb_buf_t.
 *
 *   rep_spb_encode.c   the wire format, written by hand (one pass, no
 *                      protobuf-c structs on the hot path) and the NCMD
 *                      decoder (protobuf-c's unpacker: outside bytes)
 *   rep_spb_metrics.c  the metric table (devices, names, aliases, types,
 *                      last values), seq, and the messages: NBIRTH, DBIRTH,
 *                      NDATA/DDATA from records, NDEATH, DDEATH
 *
 * Prefix rep__spb_. Errors: 0 or a negative TB_E* code with err filled.
 */
#ifndef REP_SPB_H
#define REP_SPB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

/* Sparkplug B DataType values (the specification's payload chapter). */
enum {
    REP_SPB_INT8 = 1, REP_SPB_INT16 = 2, REP_SPB_INT32 = 3, REP_SPB_INT64 = 4,
    REP_SPB_UINT8 = 5, REP_SPB_UINT16 = 6, REP_SPB_UINT32 = 7, REP_SPB_UINT64 = 8,
    REP_SPB_FLOAT = 9, REP_SPB_DOUBLE = 10, REP_SPB_BOOLEAN = 11, REP_SPB_STRING = 12,
    REP_SPB_DATETIME = 13, REP_SPB_TEXT = 14, REP_SPB_UUID = 15, REP_SPB_BYTES = 17,
    REP_SPB_FILE = 18,
};

#define REP_SPB_BDSEQ_NAME "bdSeq"
#define REP_SPB_REBIRTH_NAME "Node Control/Rebirth"

/* ---- the wire (rep_spb_encode.c) ------------------------------------------ */

/* A growable output buffer; reuse it across messages (reset keeps the memory). */
typedef struct rep__spb_buf {
    uint8_t *p;
    size_t len, cap;
} rep__spb_buf_t;

void rep__spb_buf_reset(rep__spb_buf_t *b);
void rep__spb_buf_free(rep__spb_buf_t *b);

/* One metric as it goes on the wire. name NULL: no name (DATA by alias). */
typedef struct rep__spb_wire {
    const char *name;
    size_t name_len;
    bool has_alias;
    uint64_t alias;
    uint64_t timestamp;     /* ms since the epoch, always written */
    uint32_t datatype;      /* REP_SPB_*: selects the value field */
    bool with_datatype;     /* write it (births, and metrics without an alias) */
    bool is_historical;
    bool is_null;           /* no value written */
    union {
        int64_t i;          /* Int8..Int64, UInt8..UInt64 (as uint64 bits), DateTime */
        float f;
        double d;
        bool b;
        struct { const uint8_t *p; size_t n; } s; /* String, Text, UUID, Bytes, File */
    } v;
} rep__spb_wire_t;

/* Starts a payload in b (b reset first): field 1, timestamp. */
void rep__spb_begin(rep__spb_buf_t *b, uint64_t timestamp);
/* Appends one metric (field 2). TB_EINVALID for a datatype we do not
 * encode (DataSet, Template, PropertySet, arrays: 16, 19..), nothing written. */
int rep__spb_put_metric(rep__spb_buf_t *b, const rep__spb_wire_t *m);
/* Appends seq (field 3), last, as protobuf's canonical order has it. */
void rep__spb_put_seq(rep__spb_buf_t *b, uint64_t seq);

/* What an NCMD asked for. Only Node Control/Rebirth is acted upon; other
 * metrics are counted and ignored (writing to devices is not a feature). */
typedef struct rep__spb_cmd {
    bool rebirth;       /* Node Control/Rebirth = true (Boolean) */
    uint32_t ignored;   /* other metrics, and a Rebirth that is not Boolean true */
} rep__spb_cmd_t;

/* Decodes an NCMD/DCMD payload (outside bytes). 0 with *out set, or
 * TB_EMALFORMED with err when it is not a Sparkplug B payload. Payloads
 * larger than REP_SPB_CMD_MAX are refused before decoding. */
#define REP_SPB_CMD_MAX (256u * 1024u)
int rep__spb_cmd_parse(const uint8_t *p, size_t len, rep__spb_cmd_t *out /* OUT */, char *err, size_t errlen);

/* ---- metrics and messages (rep_spb_metrics.c) ----------------------------- */

typedef struct rep__spb_node rep__spb_node_t;

/* Limits of one node: a table larger than these is refused (dead letter),
 * not grown without bound by a device inventing names. */
#define REP_SPB_MAX_DEVICES 4096
#define REP_SPB_MAX_METRICS 65536
#define REP_SPB_MAX_NAME 512

rep__spb_node_t *rep__spb_node_new(void);
void rep__spb_node_free(rep__spb_node_t *n);

/* A device by name (NULL or "": the node itself, index 0). Created at
 * first use; TB_EFULL past REP_SPB_MAX_DEVICES. The name must be a valid
 * Sparkplug id (no '/', '+', '#'; checked by the config). */
int rep__spb_device(rep__spb_node_t *n, const char *name, uint32_t *dev /* OUT */);
uint32_t rep__spb_device_count(const rep__spb_node_t *n);
const char *rep__spb_device_name(const rep__spb_node_t *n, uint32_t dev);

/* The Sparkplug type a schema's field type gets (docs/SPARKPLUG.md's table). */
uint32_t rep__spb_type_of_field(sch_field_type_t t);

/* Declares the metrics a bound schema promises under `prefix` (the metric
 * name's topic part) for device dev: each field of sch_field_types becomes
 * "<prefix>/<path>" with its type. Returns 0 when nothing changed, 1 when
 * a metric was added or a type changed (the caller must rebirth: a type is
 * fixed at birth), or a negative code (table full, a name too long). */
int rep__spb_declare(rep__spb_node_t *n, uint32_t dev, const char *prefix, const sch_validator_t *schema,
                     char *err, size_t errlen);

/* Restores one metric from the persisted table (S3): its alias is kept, and
 * new aliases continue above the largest. 0, -EEXIST if the name or the
 * alias is taken, TB_EFULL. */
int rep__spb_restore(rep__spb_node_t *n, uint32_t dev, const char *name, uint32_t datatype, uint64_t alias);
uint32_t rep__spb_metric_count(const rep__spb_node_t *n);

/* Births. NBIRTH: seq 0; bdSeq (Int64), Node Control/Rebirth (Boolean
 * false), then every node metric with name, alias, datatype and its last
 * value (is_null when none was sent yet); the next message's seq is 1.
 * DBIRTH: the next seq, every metric of the device likewise. Both clear
 * the "needs birth" state of what they cover. */
void rep__spb_nbirth(rep__spb_node_t *n, uint64_t bdseq, uint64_t now, rep__spb_buf_t *out);
void rep__spb_dbirth(rep__spb_node_t *n, uint32_t dev, uint64_t now, rep__spb_buf_t *out);
/* NDEATH (the will and the graceful death): bdSeq only, no seq. */
void rep__spb_ndeath(uint64_t bdseq, uint64_t now, rep__spb_buf_t *out);
/* DDEATH of a device: the next seq, no metrics. */
void rep__spb_ddeath(rep__spb_node_t *n, uint32_t dev, uint64_t now, rep__spb_buf_t *out);

/* The seq the next NDATA/DDATA/DBIRTH/DDEATH gets (0..255, wraps). */
uint8_t rep__spb_seq_peek(const rep__spb_node_t *n);

/* A data message (NDATA for device 0, DDATA otherwise) built from records:
 * begin, add records, end. */
typedef struct rep__spb_data {
    rep__spb_buf_t buf;
    uint32_t dev;
    uint32_t metrics;       /* metrics in the message so far */
    uint32_t nulls_skipped; /* null leaves of metrics with no type yet */
    bool open;
    uint64_t gen;           /* this message's number: several may be open at once (one per device) */
} rep__spb_data_t;

void rep__spb_data_begin(rep__spb_node_t *n, rep__spb_data_t *d, uint32_t dev, uint64_t now);

/* One record's payload, flattened (sch_flatten_avro for an Avro schema,
 * sch_flatten_json for JSON Schema or no schema; a payload that does not
 * start as a JSON object, with no schema or a Bytes/String/Number one, is
 * one Bytes metric named `prefix`). Each leaf is the metric
 * "<prefix>/<path>", carrying the record's time ts and is_historical.
 * Returns:
 *   0               every leaf added (by alias, no name or datatype);
 *   REP_SPB_REBIRTH a leaf names a metric not yet born (now in the table,
 *                   its type inferred: JSON number -> Double, boolean,
 *                   string, Avro bytes -> Bytes) or not born in this
 *                   session: nothing of this record was added; the caller
 *                   ends and sends the message so far, sends the births
 *                   (NBIRTH + DBIRTHs for the node, the DBIRTH for a
 *                   device) and adds the record again;
 *   TB_EINVALID     the payload cannot be flattened, or a value does not
 *                   fit its metric's type ("telemetry/temp is Double, got
 *                   string"): a dead letter with err, nothing added;
 *   TB_EFULL        the table is full (err says which limit);
 *   TB_EUNSUPPORTED an Avro schema in Avro's JSON encoding (not flattened).
 * A metric appears at most once per message at one millisecond: a leaf
 * whose metric is already in this message with the same ts returns
 * REP_SPB_FULL (nothing added; send the message, begin another). */
#define REP_SPB_REBIRTH 1
#define REP_SPB_FULL 2
int rep__spb_data_add(rep__spb_node_t *n, rep__spb_data_t *d, const char *prefix, const sch_validator_t *schema,
                      const uint8_t *payload, size_t len, uint64_t ts, bool historical, char *err, size_t errlen);
/* Ends the message: appends the next seq. Returns the bytes (valid until
 * the next begin), or NULL when no metric was added (no seq consumed). */
const rep__spb_buf_t *rep__spb_data_end(rep__spb_node_t *n, rep__spb_data_t *d);
void rep__spb_data_free(rep__spb_data_t *d);

/* The table on disk (OUTPUTS.md 5.4 `aliases`): devices, metric names,
 * datatypes and aliases, so aliases survive a restart. table_gen changes
 * whenever save would write something else. load fills an empty node; on
 * TB_EMALFORMED (err says why) the node may hold part of it: free it. */
uint64_t rep__spb_table_gen(const rep__spb_node_t *n);
int rep__spb_table_save(const rep__spb_node_t *n, rep__spb_buf_t *out);
int rep__spb_table_load(rep__spb_node_t *n, const uint8_t *p, size_t len, char *err, size_t errlen);

/* ---- the session (rep_spb.c, S4): OUTPUTS.md 5.3 and 5.6 --------------------
 *
 * Pure like the rest: events in (an attempt starts, SUBACK, a message in, a
 * message confirmed, the session lost, time passing, stop), messages out
 * (pulled by rep__spb_next, as rep_mosq's next() pulls), and the source's
 * records acked back only once the remote confirmed the message that
 * carried them. `now` is the wall clock in ms (timestamps and deadlines;
 * the tests give a fake one). Not thread-safe: one caller (the connection's
 * thread). The glue (the engine's Sparkplug output) maps:
 *
 *   rep_mosq connecting(n)   -> rep__spb_attempt (the will: NDEATH, QoS 1)
 *   rep_mosq subscribed      -> rep__spb_subscribed
 *   rep_mosq message         -> rep__spb_message (then rep__mosq_kick)
 *   rep_mosq next()          -> rep__spb_next: REP_SPB_OUT_PUBLISH (lane 0,
 *                               token = out.token), REP_SPB_OUT_FAREWELL
 *                               (rep__mosq_farewell(.., final false))
 *   rep_mosq acked(0, tok)   -> rep__spb_confirmed(tok)
 *   rep_mosq session_lost    -> rep__spb_lost
 *   a timer                  -> rep__spb_tick (REP_SPB_TICK_END: end the
 *                               connection now, no DISCONNECT; the same
 *                               deadline as rep_mosq's ack_timeout_ms)
 *   SIGTERM                  -> rep__spb_stop, then rep__mosq_farewell(final)
 */

/* One stored record as the source hands it out (valid until its next read
 * or rewind). */
typedef struct rep__spb_rec {
    uint32_t lane;
    uint64_t token;                 /* the source's (an offset): acked back */
    const char *device;             /* NULL or "": node metrics */
    const char *prefix;             /* the metric names' topic part */
    const sch_validator_t *schema;  /* NULL: types inferred */
    const uint8_t *payload;
    size_t len;
    uint64_t ts;                    /* receive time, ms since the epoch */
} rep__spb_rec_t;

typedef struct rep__spb_src_ops {
    /* the next record of any lane in the source's order: 1, or 0 when none now */
    int (*read)(void *arg, rep__spb_rec_t *out /* OUT */);
    /* every lane goes back to its last acked token + 1 (the session ended) */
    void (*rewind)(void *arg);
    /* lane's records up to token are confirmed: the checkpoint may move */
    void (*ack)(void *arg, uint32_t lane, uint64_t token);
    /* a record that cannot be carried (a type mismatch, the table full):
     * a dead letter with the reason; acked with the messages around it */
    void (*dead)(void *arg, const rep__spb_rec_t *r, const char *why);
    /* persist the bdSeq blob (key "bdseq", wal_output_state_put): before
     * the attempt's CONNECT; < 0: it failed (the attempt must not go on) */
    int (*persist)(void *arg, const void *blob, size_t n);
    /* persist the metric table (key "aliases"), before any birth that
     * announces a change of it; NULL: aliases are kept for the process only.
     * < 0: said in last_error; the birth still goes (a restart may then
     * number new metrics differently) */
    int (*persist_table)(void *arg, const void *p, size_t n);
} rep__spb_src_ops_t;

typedef struct rep__spb_sess_opts {
    const char *group_id;
    const char *edge_node_id;
    const char *primary_host_id;    /* NULL or "": no STATE awareness */
    bool devices;                   /* subscribe DCMD too */
    uint32_t confirm_timeout_ms;    /* a message unconfirmed this long ends the session */
    uint32_t live_window_ms;        /* older when sent: is_historical */
    bool separate_history;          /* historical: separate (OUTPUTS.md 5.5): a data message
                                       holds historical values only or live values only */
    uint32_t pack;                  /* at most this many metrics per NDATA/DDATA (>= 1) */
    uint32_t max_unconfirmed;       /* messages out and not confirmed (>= 1) */
} rep__spb_sess_opts_t;

#define REP_SPB_BDSEQ_BLOB 16       /* "TBSQ", version 1, bdSeq, 0, 0, u32 connects, CRC32C */

typedef enum rep__spb_phase {
    REP_SPB_DOWN,          /* no session */
    REP_SPB_SUBSCRIBING,   /* CONNECT sent (bdSeq taken), no SUBACK yet */
    REP_SPB_REFUSED,       /* a subscription refused: no birth on this session */
    REP_SPB_WAIT_HOST,     /* subscribed; the primary host is not online */
    REP_SPB_UP,            /* births sent or due; data flows */
    REP_SPB_LEAVING,       /* the NDEATH farewell handed out (host offline or stop) */
    REP_SPB_STOPPED,       /* stop: nothing more */
} rep__spb_phase_t;

typedef struct rep__spb_sess_stats {
    rep__spb_phase_t phase;
    uint8_t bdseq;                  /* the current (or last) attempt's */
    uint32_t connects;              /* attempts since the blob began */
    uint64_t nbirths, dbirths, data_msgs, metrics, confirmed_msgs, dead, resent_sessions;
    uint64_t rebirth_cmds, cmds_ignored, state_msgs, deadline_ends;
    bool host_online;
    char last_error[160];
} rep__spb_sess_stats_t;

typedef struct rep__spb_sess rep__spb_sess_t;

/* stored: the persisted blob (wal_output_state_get) or NULL; a blob of the
 * wrong size, magic or CRC starts at bdSeq 0 (warned, stats say so).
 * TB_ECONFIG with err for bad opts. */
int rep__spb_sess_new(const rep__spb_sess_opts_t *o, const rep__spb_src_ops_t *ops, void *arg, const void *stored,
                      size_t stored_len, rep__spb_sess_t **out /* OUT */, char *err, size_t errlen);
void rep__spb_sess_free(rep__spb_sess_t *s);
rep__spb_node_t *rep__spb_sess_node(rep__spb_sess_t *s); /* to declare schemas */
/* Before the first attempt: the persisted table (wal_output_state_get
 * "aliases"). A bad one is refused with err (TB_EMALFORMED) and the session
 * starts with an empty table (warned). */
int rep__spb_sess_load_table(rep__spb_sess_t *s, const void *p, size_t n, char *err, size_t errlen);
void rep__spb_sess_stats(const rep__spb_sess_t *s, rep__spb_sess_stats_t *out /* OUT */);

/* The topics to subscribe (NCMD, DCMD when devices, STATE when a primary
 * host is set): rep_mosq_opts_t.subscribe. */
void rep__spb_subscriptions(const rep__spb_sess_t *s, const char *const **topics /* OUT */, uint32_t *n /* OUT */);

/* The will of an attempt (valid until the next call). */
typedef struct rep__spb_will {
    const char *topic;
    const uint8_t *payload;
    size_t len;
} rep__spb_will_t;

/* A new connection attempt: the previous session (if any) is lost; bdSeq
 * becomes the next (0 on a node's first), is persisted, and *will is the
 * NDEATH carrying it, which the NBIRTH of this session will carry too.
 * Returns 0 or the persist callback's error (then the attempt must not go
 * on; the next attempt takes the next bdSeq). */
int rep__spb_attempt(rep__spb_sess_t *s, uint64_t now, rep__spb_will_t *will /* OUT */);
/* Every SUBACK granted (refused_topic NULL), or one refused (reason >= 0x80). */
void rep__spb_subscribed(rep__spb_sess_t *s, uint64_t now, const char *refused_topic, int reason);
/* An incoming PUBLISH: NCMD (Rebirth), DCMD (ignored), STATE of the primary host. */
void rep__spb_message(rep__spb_sess_t *s, uint64_t now, const char *topic, const uint8_t *p, size_t len,
                      bool retained);
/* The session ended (connection lost, deadline, farewell done): every
 * unconfirmed message is forgotten and the source rewound. Idempotent. */
void rep__spb_lost(rep__spb_sess_t *s, uint64_t now);

#define REP_SPB_OUT_NONE 0
#define REP_SPB_OUT_PUBLISH 1   /* QoS 0, retain false */
#define REP_SPB_OUT_FAREWELL 2  /* the NDEATH at QoS 1, then DISCONNECT; the session ends */
typedef struct rep__spb_out {
    const char *topic;          /* valid until the next call */
    const uint8_t *payload;
    size_t len;
    uint64_t token;             /* PUBLISH: this message's number, for rep__spb_confirmed */
} rep__spb_out_t;

/* The next message of the session: births first (NBIRTH, then a DBIRTH per
 * device), then data built from the source's records. */
int rep__spb_next(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out /* OUT */);
/* Every message up to token is confirmed by the remote (QoS 0's round trip). */
void rep__spb_confirmed(rep__spb_sess_t *s, uint64_t now, uint64_t token);
/* The deadline: REP_SPB_TICK_END when the oldest unconfirmed message is
 * older than confirm_timeout_ms; the session is then already lost here
 * (rep__spb_lost), the caller closes the connection without DISCONNECT. */
#define REP_SPB_TICK_OK 0
#define REP_SPB_TICK_END 1
int rep__spb_tick(rep__spb_sess_t *s, uint64_t now);
/* Graceful stop: *out is the NDEATH with the current bdSeq to send as the
 * final farewell; returns 1, or 0 when no session is up (nothing to send). */
int rep__spb_stop(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out /* OUT */);

/* A STATE payload (outside bytes): {"online": bool, "timestamp": uint}
 * (3.0); 0 or TB_EMALFORMED. */
int rep__spb_state_parse(const uint8_t *p, size_t len, bool *online /* OUT */, uint64_t *ts /* OUT */);

#endif
