/*
 * dlq.c: the dead-letter log through the admin API (docs/design/RELOAD.md
 * 5.7; docs/OPERATIONS.md "The dead-letter log: tributary dlq"): the ops
 * gateway/admin.c gives http_admin.c for GET /admin/dlq, POST
 * /admin/dlq/replay and POST /admin/dlq/purge. On the loop thread.
 *
 * list/show read `$dead-letter` with a wal_reader from max(from, checkpoint
 * + 1): a page is at most `limit` (<= 1000) records or 1 MiB. The read is on
 * the loop, synchronously (the design puts it on the pool: a page of a local
 * file is a few milliseconds; stated in OPERATIONS.md). Replay hands each
 * record to broker_replay (routed and validated again through the current
 * rules): its answer lists stored (topic), refused (why) and unmatched, and
 * comes once the stored copies are kept as their topic keeps a PUBLISH it
 * acknowledges (log: written and synced per wal.fsync; memory_first: in the
 * cluster or spilled to the log): "durable" true. Under wal.memory_first.ack:
 * received a memory_first topic's completion means held in memory only:
 * "durable" false whatever comes. The HTTP side waits for
 * that (op dlq_replay_settled, asked at each health tick) within its answer
 * bound; "durable" false when the bound passed first or the topic's log
 * refused messages meanwhile (a bound: they may have been these). Replay
 * does not delete; purge moves the log's checkpoint (retention deletes the
 * segments wholly at or below it).
 */
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define PAGE_BYTES (1u << 20)

static json_t *error_doc(int *status, int code, const char *msg)
{
    *status = code;
    return json_pack("{s:s}", "error", msg);
}

static bool valid_utf8(const uint8_t *p, size_t n)
{
    json_t *s = json_stringn((const char *)p, n); /* jansson checks UTF-8 (and refuses NUL-free invalid input) */
    bool ok = s != NULL;
    json_decref(s);
    return ok;
}

static char *base64(const uint8_t *p, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = tb_malloc(4 * ((n + 2) / 3) + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = A[v >> 18 & 63];
        *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? A[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static json_t *bytes_json(const uint8_t *p, size_t n)
{
    json_t *s = json_stringn((const char *)p, n);
    if (s)
        return s;
    char *b = base64(p, n);
    s = json_string(b);
    free(b);
    return s;
}

static json_t *record_json(const wal_record_t *rec)
{
    json_t *attrs = json_object();
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(rec, &pos, &a)) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)TB_MIN(a.key_len, sizeof key - 1), (const char *)a.key);
        json_object_set_new(attrs, key, bytes_json(a.val, a.val_len));
    }
    bool text = valid_utf8(rec->payload, rec->payload_len);
    json_t *o = json_pack("{s:I, s:I, s:s%, s:o}", "offset", (json_int_t)rec->offset, "publish_time",
                          (json_int_t)rec->publish_time_ms, "mqtt_topic", rec->mqtt_topic, (size_t)rec->mqtt_topic_len,
                          "attributes", attrs);
    if (!o) /* an MQTT topic is UTF-8 (mqtt_topic.c), so only out of memory */
        return json_null();
    json_object_set_new(o, "payload", bytes_json(rec->payload, rec->payload_len));
    json_object_set_new(o, "payload_encoding", json_string(text ? "utf-8" : "base64"));
    return o;
}

static wal_topic_t *dl_log(void *arg, json_t **err, int *status)
{
    gw__run_t *r = arg;
    wal_topic_t *dl = r->broker ? broker_dead_letter_log(r->broker) : NULL;
    if (!dl)
        *err = error_doc(status, 404, "no dead-letter log: mqtt.dead_letter is off");
    return dl;
}

static json_t *op_dlq_list(void *arg, uint64_t from, uint32_t limit, uint64_t offset, int *status)
{
    json_t *err = NULL;
    wal_topic_t *dl = dl_log(arg, &err, status);
    if (!dl)
        return err;
    wal_topic_stats_t ws;
    wal_topic_stats(dl, &ws);
    uint64_t start = offset ? offset : TB_MAX(from, ws.checkpoint + 1);
    if (offset && offset <= ws.checkpoint)
        return error_doc(status, 404, "that dead letter was purged");
    wal_reader_t *rd;
    int rc = wal_reader_open(dl, start, &rd);
    if (rc < 0)
        return error_doc(status, 500, tb_strerror(rc));
    json_t *recs = json_array();
    uint64_t next = start, bytes = 0;
    while (json_array_size(recs) < (offset ? 1 : limit) && bytes < PAGE_BYTES) {
        wal_record_t rec;
        int n = wal_reader_next(rd, &rec);
        if (n == WAL_GAP)
            continue;
        if (n != 0)
            break;
        if (offset && rec.offset != offset)
            break;
        json_array_append_new(recs, record_json(&rec));
        bytes += rec.payload_len + rec.attrs_raw_len;
        next = rec.offset + 1;
    }
    wal_reader_close(rd);
    if (offset) {
        json_t *one = json_incref(json_array_get(recs, 0));
        json_decref(recs);
        if (!one)
            return error_doc(status, 404, "no dead letter at that offset");
        *status = 200;
        return one;
    }
    *status = 200;
    return json_pack("{s:I, s:I, s:I, s:o}", "checkpoint", (json_int_t)ws.checkpoint, "next", (json_int_t)next,
                     "dropped_total", (json_int_t)ws.dropped_total, "records", recs);
}

/* A replay waiting for its stored copies: per topic it touched, what the
 * topic had completed and what it had accepted without completion when the
 * replay ended. Completions come in order per topic (one writer queue, acks
 * in order), so once completed - completed0 >= pending0 every copy has its
 * answer. Slots of the broker's registry are never freed before
 * broker_close, so the pointers stay valid. */
typedef struct {
    broker_topic_t *t;
    uint64_t stored0, refused0, pending0;
} dlq_mark_t;

typedef struct gw__dlq_wait {
    struct gw__dlq_wait *next;
    uint64_t id;
    bool held_only; /* a memory_first topic under wal.memory_first.ack: received: completed when held */
    size_t n;
    dlq_mark_t m[];
} dlq_wait_t;

static uint64_t refused_of(const broker_topic_t *t)
{
    return t->rejected[BROKER_REJ_FULL] + t->rejected[BROKER_REJ_QUOTA];
}

/* Adds t to the marks (once) and returns them. */
static dlq_mark_t *mark(dlq_mark_t *m, size_t *n, size_t *cap, broker_topic_t *t)
{
    for (size_t i = 0; i < *n; i++)
        if (m[i].t == t)
            return m;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 4;
        m = tb_realloc(m, *cap * sizeof *m);
    }
    m[(*n)++] = (dlq_mark_t){ .t = t };
    return m;
}

/* 1: every copy stored; -1: settled, but the topic refused messages meanwhile, or a
 * completion means only "held in memory" (ack: received); 0: waiting. */
static int settled(const dlq_wait_t *w)
{
    int rc = w->held_only ? -1 : 1;
    for (size_t i = 0; i < w->n; i++) {
        const dlq_mark_t *k = &w->m[i];
        uint64_t done = (k->t->stored - k->stored0) + (refused_of(k->t) - k->refused0);
        if (done < k->pending0)
            return 0;
        if (refused_of(k->t) != k->refused0)
            rc = -1;
    }
    return rc;
}

static int op_dlq_replay_settled(void *arg, uint64_t id, bool forget)
{
    gw__run_t *r = arg;
    for (dlq_wait_t **pp = &r->dlq_waits, *w; (w = *pp); pp = &w->next) {
        if (w->id != id)
            continue;
        int rc = forget ? -1 : settled(w);
        if (rc) {
            *pp = w->next;
            free(w);
        }
        return rc;
    }
    return -1;
}

void gw__dlq_free(gw__run_t *r)
{
    for (dlq_wait_t *w = r->dlq_waits, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    r->dlq_waits = NULL;
}

static json_t *op_dlq_replay(void *arg, uint64_t from, uint64_t to, int *status, uint64_t *wait_id)
{
    gw__run_t *r = arg;
    *wait_id = 0;
    json_t *err = NULL;
    wal_topic_t *dl = dl_log(arg, &err, status);
    if (!dl)
        return err;
    wal_topic_stats_t ws;
    wal_topic_stats(dl, &ws);
    wal_reader_t *rd;
    int rc = wal_reader_open(dl, TB_MAX(from, ws.checkpoint + 1), &rd);
    if (rc < 0)
        return error_doc(status, 500, tb_strerror(rc));
    json_t *stored = json_array(), *refused = json_array(), *unmatched = json_array();
    dlq_mark_t *marks = NULL;
    size_t nmarks = 0, cap = 0;
    for (;;) {
        wal_record_t rec;
        int n = wal_reader_next(rd, &rec);
        if (n == WAL_GAP)
            continue;
        if (n != 0 || rec.offset > to)
            break;
        broker_topic_t *topic;
        char why[256] = "";
        switch (broker_replay(r->broker, &rec, &topic, why, sizeof why)) {
        case BROKER_REPLAY_STORED:
            json_array_append_new(stored,
                                  json_pack("{s:I, s:s}", "dlq_offset", (json_int_t)rec.offset, "topic", topic->name));
            marks = mark(marks, &nmarks, &cap, topic);
            break;
        case BROKER_REPLAY_REFUSED:
            json_array_append_new(refused, json_pack("{s:I, s:s, s:s}", "dlq_offset", (json_int_t)rec.offset, "topic",
                                                     topic ? topic->name : "", "reason", why));
            break;
        case BROKER_REPLAY_UNMATCHED:
            json_array_append_new(unmatched, json_pack("{s:I}", "dlq_offset", (json_int_t)rec.offset));
            break;
        }
    }
    wal_reader_close(rd);
    /* the copies' batches go to the log now; what each topic then has
     * accepted without an answer includes every copy */
    bool durable = true;
    if (nmarks) {
        dlq_wait_t *w = tb_malloc(sizeof *w + nmarks * sizeof *marks);
        w->n = nmarks;
        w->held_only = false;
        for (size_t i = 0; i < nmarks; i++) {
            broker_topic_t *t = marks[i].t;
            w->held_only |= t->durability == CFG_DURABILITY_MEMORY_FIRST &&
                            r->app->cfg->wal.memory_first.ack == CFG_MF_ACK_RECEIVED;
            broker_topic_flush(t);
            w->m[i] = (dlq_mark_t){ .t = t, .stored0 = t->stored, .refused0 = refused_of(t), .pending0 = t->batched };
        }
        durable = settled(w) > 0;
        if (durable) {
            free(w);
        } else {
            w->id = *wait_id = ++r->dlq_seq;
            w->next = r->dlq_waits;
            r->dlq_waits = w;
        }
    }
    free(marks);
    tb_info("dead letters replayed", TB_U("from", from), TB_U("to", to), TB_U("stored", json_array_size(stored)),
            TB_U("refused", json_array_size(refused)), TB_U("unmatched", json_array_size(unmatched)));
    *status = 200;
    return json_pack("{s:o, s:o, s:o, s:b, s:s}", "stored", stored, "refused", refused, "unmatched", unmatched,
                     "durable", durable, "note", "replay does not delete: replaying again stores again; purge deletes");
}

static json_t *op_dlq_purge(void *arg, uint64_t to, int *status)
{
    json_t *err = NULL;
    wal_topic_t *dl = dl_log(arg, &err, status);
    if (!dl)
        return err;
    uint64_t end = wal_topic_readable_end(dl);
    uint64_t upto = TB_MIN(to, end ? end - 1 : 0);
    wal_topic_stats_t ws;
    wal_topic_stats(dl, &ws);
    if (upto <= ws.checkpoint) {
        *status = 200;
        return json_pack("{s:I, s:I}", "purged_to", (json_int_t)ws.checkpoint, "purged", (json_int_t)0);
    }
    int rc = wal_checkpoint(dl, upto);
    if (rc < 0)
        return error_doc(status, 500, tb_strerror(rc));
    tb_info("dead letters purged", TB_U("to", upto), TB_U("records", upto - ws.checkpoint));
    *status = 200;
    return json_pack("{s:I, s:I}", "purged_to", (json_int_t)upto, "purged",
                     (json_int_t)wal_topic_stored_between(dl, ws.checkpoint, upto + 1));
}

void gw__dlq_ops(http_admin_ops_t *ops)
{
    ops->dlq_list = op_dlq_list;
    ops->dlq_replay = op_dlq_replay;
    ops->dlq_replay_settled = op_dlq_replay_settled;
    ops->dlq_purge = op_dlq_purge;
}
