/*
 * journal.c: persistent MQTT sessions survive a restart.
 *
 * What must survive (session.c says why it is so little): that a persistent
 * session exists, with its expiry, so a reconnecting client hears Session
 * Present = 1 and resends what it had in flight; and its QoS 2 packet
 * identifiers between PUBREC and PUBREL, so a resend after a restart is
 * answered with PUBREC instead of being stored twice.
 *
 * The journal is a topic of the write-ahead log, "$sessions", never
 * replicated, so it has the log's framing, CRCs, recovery and durability
 * for free. Each record's MQTT-topic field holds the client identifier and
 * its payload one operation:
 *
 *   byte 0     op: 1 OPEN, 2 END, 3 QOS2_STORED, 4 QOS2_RELEASED, 5 DETACHED,
 *              6 WILL (a delayed will: see put_will), 7 WILL_DONE (published or cancelled)
 *   bytes 1-2  packet identifier (big endian; QOS2_*)
 *   bytes 3-6  session expiry in seconds (big endian; OPEN)
 *   bytes 7-14 DETACHED only: the wall clock of the disconnect, ms since
 *              the epoch (big endian), so a session's expiry runs from its
 *              client's going, not from each restart (a restart every 4 s
 *              used to keep a 6 s expiry from ever happening)
 *   bytes 15-22 OPEN only: the session's nonce (random, big endian), which
 *              each of its records in the runtime QoS 2 journal carries
 *              (rtjournal.c); bytes 7-14 are 0 there. An OPEN of 7 bytes
 *              (older journals) restores a session without one: no runtime
 *              record is taken for it
 *
 * QoS 2 ids of messages to memory_first topics go to the runtime journal
 * instead when it is on (mqtt.qos2_state runtime, rtjournal.c): no flash
 * write per message. Each id's two records are in one journal (the
 * session's qos2_rt says which).
 *
 * A persistent session's disconnect writes DETACHED; its next connect
 * writes OPEN again (which replays as "connected, expiry not running").
 * Journals written before DETACHED existed replay as before: the expiry
 * counts from the restart.
 *
 * Ordering with the acks: QOS2_STORED goes in the same loop turn as the
 * message, and the PUBREC waits for both records to be durable; PUBCOMP
 * waits for QOS2_RELEASED. OPEN is written without holding the CONNACK: a
 * crash in that window costs a client with no QoS 2 state in flight only a
 * Session Present of 0 after the restart (docs/MQTT.md).
 *
 * At start the journal is replayed from its checkpoint; when it holds many
 * more records than live state, the live state is written again and the
 * checkpoint moved before it, so retention can delete the old segments; the
 * same runs online (ONLINE COMPACTION below). The journal has its own disk
 * bound (mqtt.max_journal_bytes, wal_topic_set_own_bound): outside
 * wal.max_total_bytes, never deleted by a data bound; when it is full its
 * writes are refused, new persistent sessions are refused at CONNECT
 * (0x97), and nothing remembered is forgotten.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

enum { J_OPEN = 1, J_END = 2, J_STORED = 3, J_RELEASED = 4, J_DETACHED = 5, J_WILL = 6, J_WILL_DONE = 7 };

static void put_record(broker_t *srv, broker_session_t *s, uint8_t op, uint16_t id, uint32_t expiry,
                       broker_pending_t *p);

/* One record: payload bytes, the client id as its MQTT topic, attributes (WILL). */
static bool put(broker_t *srv, broker_session_t *s, const uint8_t *rec, size_t len, const wal_attr_t *attrs,
                size_t nattrs, broker_pending_t *p)
{
    if (srv->replaying)
        return true; /* replay applies records; the session and will calls it makes write none */
    broker_msg_t m = { rec, len, attrs, nattrs, s->client_id, strlen(s->client_id), 0, false };
    srv->journal_records++;
    if (broker__ingest(srv->journal, &m, p ? p->conn : NULL, p) == 0) {
        srv->journal_ingested++;
        return true;
    }
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_error("session journal cannot be written: session state may not survive a restart",
                 TB_S("client", s->client_id), TB_U("suppressed", skipped));
    if (p) /* the answer depends on this record: refuse rather than pretend */
        broker__refuse(p->conn, p, BROKER_REFUSE_LOG_UNAVAILABLE);
    return false;
}

static void put_u64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static void put_record_at(broker_t *srv, broker_session_t *s, uint8_t op, uint16_t id, uint32_t expiry,
                          uint64_t wall_ms, broker_pending_t *p)
{
    uint8_t rec[15] = { op, (uint8_t)(id >> 8), (uint8_t)id, (uint8_t)(expiry >> 24), (uint8_t)(expiry >> 16),
                        (uint8_t)(expiry >> 8), (uint8_t)expiry };
    uint8_t buf[23];
    size_t len = 7;
    if (op == J_DETACHED) {
        put_u64(rec + 7, wall_ms);
        len = 15;
    }
    if (op == J_OPEN) {
        memcpy(buf, rec, 7);
        memset(buf + 7, 0, 8);
        put_u64(buf + 15, s->nonce);
        put(srv, s, buf, sizeof buf, NULL, 0, p);
        return;
    }
    put(srv, s, rec, len, NULL, 0, p);
}

/* WILL: [6][0 0][0 0 0 0][due wall ms, 8][qos][retain][topic length, 2][topic][payload];
 * its MQTT 5 properties as the record's attributes. */
static void put_will(broker_t *srv, broker_session_t *s, broker_will_t *w)
{
    size_t tlen = strlen(w->topic);
    size_t len = 7 + 8 + 2 + 2 + tlen + w->len;
    uint8_t *rec = tb_calloc(1, len);
    rec[0] = J_WILL;
    put_u64(rec + 7, w->due_wall_ms);
    rec[15] = w->qos;
    rec[16] = w->retain;
    rec[17] = (uint8_t)(tlen >> 8);
    rec[18] = (uint8_t)tlen;
    memcpy(rec + 19, w->topic, tlen);
    memcpy(rec + 19 + tlen, w->payload, w->len);
    w->journaled = put(srv, s, rec, len, w->attrs, w->nattrs, NULL);
    free(rec);
}

void broker__journal_will(broker_t *srv, broker_session_t *s)
{
    if (srv->journal && s->journaled && s->will)
        put_will(srv, s, s->will);
}

void broker__journal_will_done(broker_t *srv, broker_session_t *s)
{
    if (srv->journal && s->journaled)
        put_record(srv, s, J_WILL_DONE, 0, 0, NULL);
}

static void put_record(broker_t *srv, broker_session_t *s, uint8_t op, uint16_t id, uint32_t expiry,
                       broker_pending_t *p)
{
    put_record_at(srv, s, op, id, expiry, 0, p);
}

void broker__journal_detached(broker_t *srv, broker_session_t *s)
{
    if (!srv->journal || !s->journaled || !s->persistent)
        return;
    put_record_at(srv, s, J_DETACHED, 0, s->expiry_s, tb_wall_ms(), NULL);
    s->detach_journaled = true;
}

void broker__journal_session(broker_t *srv, broker_session_t *s, bool open)
{
    if (!srv->journal)
        return;
    if (open) {
        bool fresh = !s->nonce;
        if (fresh)
            s->nonce = broker__journal_nonce();
        put_record(srv, s, J_OPEN, 0, s->expiry_s, NULL);
        if (fresh) /* its runtime records mean something only once this is in the log */
            s->open_need = srv->journal_ingested;
        s->journaled = true;
        s->detach_journaled = false;
    } else if (s->journaled) {
        put_record(srv, s, J_END, 0, 0, NULL);
        s->journaled = false;
    }
}

uint64_t broker__journal_nonce(void)
{
    uint64_t n = 0;
    while (!n) {
        if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n) /* never short for 8 bytes; EINTR at worst */
            n = tb_mono_ns() ^ (uint64_t)getpid() << 40 ^ tb_wall_ms() << 20;
    }
    return n;
}

bool broker__journal_qos2(broker_t *srv, broker_session_t *s, uint16_t id, bool stored, broker_pending_t *p,
                          bool runtime)
{
    if (!srv->journal || !s->persistent || srv->replaying)
        return false;
    if (!s->journaled || !s->nonce) /* an OPEN first: with the nonce its runtime records carry */
        broker__journal_session(srv, s, true);
    /* The runtime journal only once the session's OPEN (its nonce) is in the session journal:
     * before that a kill would leave runtime records of no known session, and the resends would be
     * stored again. Until then (the first sync after a new session's CONNECT) its QoS 2 ids go to
     * the session journal, both records of each (the session remembers where). */
    if (runtime && broker__rtj_on(srv) && (!stored || srv->journal_done >= s->open_need) &&
        broker__rtj_put(srv, s, stored, id) == 0)
        return true; /* in RAM now: nothing to wait for */
    put_record(srv, s, stored ? J_STORED : J_RELEASED, id, 0, p);
    return false;
}

/* Records the live state needs: an OPEN (and DETACHED) per persistent
 * session, a STORED per unreleased QoS 2 id. */
static uint64_t live_records(const broker_t *srv)
{
    uint64_t live = 0;
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++)
        for (const broker_session_t *s = srv->sess_buckets[i]; s; s = s->hnext)
            if (s->persistent && s->journaled)
                /* runtime ids too (they are not in this journal): a bound, for the trigger only */
                live += 1 + s->nqos2 + s->nstoring + s->detach_journaled + (s->will != NULL);
    return live;
}

static void write_live_state(broker_t *srv)
{
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i]; s; s = s->hnext) {
            if (!s->persistent || !s->journaled)
                continue;
            put_record(srv, s, J_OPEN, 0, s->expiry_s, NULL);
            for (uint32_t k = 0; k < s->nqos2; k++)
                if (!s->qos2_rt[k]) /* the runtime journal's are its own (rtjournal.c) */
                    put_record(srv, s, J_STORED, s->qos2[k], 0, NULL);
            for (uint32_t k = 0; k < s->nstoring; k++) {
                /* being stored, its STORED written here: a refusal journals RELEASED after. Not one whose
                 * STORED waits for the cluster (memory_first): a STORED now could outlive its message */
                const broker_pending_t *sp = s->storing[k].p;
                if (sp && sp->stored_journaled && !sp->stored_rt)
                    put_record(srv, s, J_STORED, s->storing[k].id, 0, NULL);
            }
            if (s->detach_journaled)
                put_record_at(srv, s, J_DETACHED, 0, s->expiry_s, s->detached_wall_ms, NULL);
            if (s->will)
                put_will(srv, s, s->will);
        }
    }
}

/*
 * ONLINE COMPACTION (from the sweep). When the journal holds far more
 * records than live state, or half its own bound, the live state is written
 * again as one run of batches and, once all of it is durable, the
 * checkpoint is moved to just before it: the log then deletes the segments
 * wholly below, and the journal's size follows the live state instead of
 * its history (it used to be compacted only at start, and a data bound
 * could delete it meanwhile). Every record's effect is in memory before
 * the record is written, so the snapshot supersedes every record before it;
 * the one exception, a QoS 2 id whose STORED record is written and whose
 * message is still being stored, goes into the snapshot as STORED too, and
 * if that message is then refused a RELEASED follows (conn.c), as it does
 * outside a compaction. The open batch is submitted first, so the snapshot
 * begins a batch of its own; checks run from the sweep and from each of
 * the journal's completions.
 */
void broker__journal_maybe_compact(broker_t *srv)
{
    broker_topic_t *j = srv->journal;
    if (!j || srv->compact_batches || srv->replaying)
        return;
    wal_topic_stats_t st;
    wal_topic_stats(j->wal, &st);
    uint64_t live = live_records(srv);
    /* a snapshot costs the whole live state: only when a quarter of the
     * journal is history, and not again until as much more has been
     * written (with 30,000 sessions, compacting per 64 records rewrote
     * 30 MB every few milliseconds, and a full journal retried at once) */
    uint64_t garbage = srv->journal_records > live ? srv->journal_records - live : 0;
    uint64_t enough = TB_MAX(live / 4, (uint64_t)64);
    bool history = srv->journal_records > 2 * live + 1024;
    bool half = st.bytes > srv->cfg->mqtt.max_journal_bytes / 2 && garbage >= enough;
    if ((!history && !half) || srv->journal_records < srv->compact_next)
        return;
    srv->compact_first = 0;
    /* the snapshot says STORED for the QoS 2 messages being stored: their
     * batches go to the writer before it (a rare flush: compactions are) */
    for (size_t i = 0; i < srv->ntopics; i++)
        if (srv->topics[i]->batch)
            broker__ingest_flush(srv->topics[i]);
    broker__ingest_flush(j); /* what is before the snapshot goes in its own batch */
    srv->compacting = true; /* batches started from here on carry the snapshot (ingest.c) */
    write_live_state(srv);
    broker__ingest_flush(j);
    srv->compacting = false;
    srv->compact_records = live;
    srv->compact_next = srv->journal_records + enough; /* the snapshot's own records counted */
    if (!srv->compact_batches) { /* no live state at all: everything up to now can go */
        uint64_t end = j->log_end;
        if (end > 1)
            wal_checkpoint(j->wal, end - 1);
        srv->journal_records = 0;
        srv->compact_next = 0;
    }
}

/* A batch of the snapshot completed (ingest.c): when it is the last, move the checkpoint. */
void broker__journal_compacted(broker_t *srv, int rc, uint64_t first_offset)
{
    if (rc < 0) {
        srv->compact_failed = true;
    } else if (!srv->compact_first) {
        srv->compact_first = first_offset;
    }
    if (--srv->compact_batches > 0)
        return;
    if (!srv->compact_failed && srv->compact_first > 1) {
        int crc = wal_checkpoint(srv->journal->wal, srv->compact_first - 1);
        if (crc == 0) {
            tb_info("session journal compacted", TB_U("live_records", srv->compact_records),
                    TB_U("records_before", srv->journal_records), TB_U("checkpoint", srv->compact_first - 1));
            srv->journal_records = srv->compact_records;
            srv->compact_next = srv->compact_records + TB_MAX(srv->compact_records / 4, (uint64_t)64);
        }
    }
    srv->compact_failed = false;
}

/* Applies one record while replaying. */
static void apply(broker_t *srv, const wal_record_t *r, uint64_t now)
{
    if (r->payload_len < 7 || r->mqtt_topic_len == 0)
        return;
    char *cid = tb_strndup(r->mqtt_topic, r->mqtt_topic_len);
    const uint8_t *b = r->payload;
    uint16_t id = (uint16_t)(b[1] << 8 | b[2]);
    uint32_t expiry = (uint32_t)b[3] << 24 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 8 | b[6];
    broker_session_t *s = broker__session_find(srv, cid);
    switch (b[0]) {
    case J_OPEN:
        if (!s)
            s = broker__session_create(srv, cid);
        broker__session_set_persistent(srv, s, true);
        s->journaled = true;
        s->detach_journaled = false; /* connected (again) when this was written */
        s->expiry_s = expiry;
        s->detached_ms = now;
        if (r->payload_len >= 23)
            s->nonce = get_u64(b + 15);
        break;
    case J_END:
        if (s)
            broker__session_forget(srv, s);
        break;
    case J_WILL:
        if (s && r->payload_len >= 19) {
            size_t tlen = (size_t)b[17] << 8 | b[18];
            if (19 + tlen <= r->payload_len)
                broker__will_restore(srv, s, get_u64(b + 7), (const char *)b + 19, tlen, b + 19 + tlen,
                                     r->payload_len - 19 - tlen, b[15], b[16] != 0, r);
        }
        break;
    case J_WILL_DONE:
        if (s)
            broker__will_drop(s);
        break;
    case J_DETACHED:
        if (!s || r->payload_len < 15)
            break;
        s->detach_journaled = true;
        s->expiry_s = expiry;
        s->detached_wall_ms = 0;
        for (int i = 0; i < 8; i++)
            s->detached_wall_ms = s->detached_wall_ms << 8 | b[7 + i];
        break;
    case J_STORED:
    case J_RELEASED:
        if (!s) { /* its OPEN was compacted into a later position: create it */
            s = broker__session_create(srv, cid);
            broker__session_set_persistent(srv, s, true);
            s->journaled = true;
            s->expiry_s = srv->cfg->mqtt.max_session_expiry_s;
            s->detached_ms = now;
        }
        if (b[0] == J_STORED)
            broker__session_add_qos2(s, id);
        else
            broker__session_del_qos2(s, id);
        break;
    default:
        break;
    }
    free(cid);
}

int broker__journal_open(broker_t *srv, char *err, size_t errlen)
{
    int rc = broker__local_open(srv, BROKER_JOURNAL_TOPIC, &srv->journal);
    if (rc < 0) {
        snprintf(err, errlen, "cannot open the session journal: %s", tb_strerror(rc));
        return rc;
    }
    wal_topic_t *wt = srv->journal->wal;
    /* its own bound, outside the data bounds: no telemetry backlog can delete it */
    rc = wal_topic_set_own_bound(srv->wal, wt, srv->cfg->mqtt.max_journal_bytes);
    if (rc < 0) {
        snprintf(err, errlen, "mqtt.max_journal_bytes: cannot bound the session journal: %s", tb_strerror(rc));
        return rc;
    }
    uint64_t ckpt = wal_topic_checkpoint(wt);
    wal_reader_t *rd;
    rc = wal_reader_open(wt, ckpt + 1, &rd);
    if (rc < 0) {
        snprintf(err, errlen, "cannot read the session journal: %s", tb_strerror(rc));
        return rc;
    }
    uint64_t now = uv_now(srv->loop), records = 0, last = ckpt;
    srv->replaying = true;
    for (;;) {
        wal_record_t r;
        rc = wal_reader_next(rd, &r);
        if (rc == WAL_GAP)
            continue;
        if (rc != 0)
            break;
        apply(srv, &r, now);
        last = r.offset;
        records++;
    }
    srv->replaying = false;
    wal_reader_close(rd);
    if (rc < 0) {
        snprintf(err, errlen, "cannot read the session journal: %s", tb_strerror(rc));
        return rc;
    }
    /* a session whose client went before the restart: its expiry ran meanwhile */
    uint64_t wall = tb_wall_ms();
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i], *next; s; s = next) {
            next = s->hnext;
            if (!s->detach_journaled)
                continue;
            uint64_t gone = wall > s->detached_wall_ms ? wall - s->detached_wall_ms : 0;
            /* loop time of the disconnect; unsigned arithmetic keeps now - detached_ms = gone
             * even when the disconnect was before this boot's clock began */
            s->detached_ms = now - gone;
        }
    }
    /* compact: write the live state again, then move the checkpoint past the old records */
    uint64_t live = live_records(srv);
    if (records > 2 * live + 1024) {
        write_live_state(srv);
        broker__ingest_flush(srv->journal);
        rc = wal_sync(srv->wal);
        if (rc == 0)
            rc = wal_checkpoint(wt, last);
        if (rc < 0)
            tb_warn("session journal compaction failed; it will be retried at the next start", TB_ERR(rc));
        srv->journal_records = live;
    } else {
        srv->journal_records = records;
    }
    if (srv->nsessions)
        tb_info("sessions restored", TB_U("sessions", srv->nsessions), TB_U("journal_records", records));
    broker__rtj_open(srv); /* memory_first topics' QoS 2 ids, after the sessions they belong to */
    return 0;
}
