/*
 * rep_poison.c: a topic's poison batches and the refused state (docs/design/
 * RELOAD.md 5.3-5.6; docs/REPLICATION.md "Poison batches and refusals"), on
 * the replicator thread. rep_topic.c calls in at three points: a stream's
 * end with a permanent status charges the batch it carried alone
 * (rep__poison_charge), a kick looks for the loop's answer to a dead-letter
 * write (rep__poison_answered), and pump asks again for a write that was
 * refused (rep__poison_retry). Kept apart from the send path so the two
 * change independently.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

/*
 * A stream that ends with a permanent status (rep_status.c) while it carried
 * one batch alone charges that batch; after replicator.max_attempts charges
 * the batch is DEAD: never sent again, later batches go on. Its records are
 * read with a reader of their own and handed to the loop (REP_EV_DEAD_LETTER),
 * which stores them in the dead-letter log; when the loop says they are
 * durable (rep_engine_dead_letter_done, through the lane's kick) the batch
 * becomes ACKED-as-dead and the checkpoint passes it. A kill in between
 * replays it: duplicates in the dead-letter log, never a silent skip. One
 * write per topic at a time; a failed one is asked again after the backoff's
 * maximum (mqtt.dead_letter off: every time, the batch held, said in words).
 */

static rep__batch_t *dead_batch(rep__topic_t *t)
{
    for (uint32_t i = 0; i < t->lane.win.n; i++) {
        rep__batch_t *b = rep__window_at(&t->lane.win, i);
        if (b->state == REP__B_DEAD)
            return b;
    }
    return NULL;
}

void rep__dl_copy_record(rep_dl_record_t *out, const wal_record_t *rec)
{
    size_t n = rec->payload_len + rec->mqtt_topic_len + rec->attrs_raw_len;
    out->blob = tb_malloc(n ? n : 1);
    out->rec = *rec;
    uint8_t *p = out->blob;
    memcpy(p, rec->payload, rec->payload_len);
    out->rec.payload = p;
    p += rec->payload_len;
    memcpy(p, rec->mqtt_topic, rec->mqtt_topic_len);
    out->rec.mqtt_topic = (const char *)p;
    p += rec->mqtt_topic_len;
    memcpy(p, rec->attrs_raw, rec->attrs_raw_len);
    out->rec.attrs_raw = p;
    out->rec.raw = NULL;
    out->rec.raw_len = 0;
}

/* Reads b's records (those still in the log) and asks the loop to keep them. */
static void ask_dead_letter(rep_t *r, rep__topic_t *t, rep__batch_t *b)
{
    rep_dead_letter_t *dl = tb_calloc(1, sizeof *dl);
    dl->first = b->first;
    dl->last = b->last;
    dl->reason = rep__dl_reason((grpc_status_code)b->last_status);
    dl->error = tb_strdup(t->dl_error ? t->dl_error : rep__status_name((grpc_status_code)b->last_status));
    dl->attempts = b->perm_fails;
    wal_reader_t *rd;
    int rc = wal_reader_open(t->lane.wal, b->first, &rd);
    size_t cap = 0;
    while (rc == 0) {
        wal_record_t rec;
        int n = wal_reader_next(rd, &rec);
        if (n == WAL_GAP)
            continue; /* deleted by a bound while the batch waited: counted dropped by the WAL */
        if (n != 0 || rec.offset > b->last)
            break;
        if (dl->n == cap) {
            cap = cap ? cap * 2 : 16;
            dl->recs = tb_realloc(dl->recs, cap * sizeof *dl->recs);
        }
        rep__dl_copy_record(&dl->recs[dl->n++], &rec);
    }
    if (rc == 0)
        wal_reader_close(rd);
    else
        tb_error("replicator: cannot read a poison batch for the dead-letter log; its messages are not kept",
                 REP__LOG_TOPIC(t), TB_U("first", b->first), TB_U("last", b->last), TB_ERR(rc));
    dl->token = t->dl_token = ++r->dl_seq;
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_DEAD_LETTER;
    ev->topic = t->lane.topic;
    ev->dl = dl;
    rep__post(r, ev);
}

/* A batch refused with a permanent status while it was alone on its stream. */
void rep__poison_charge(rep_t *r, rep__topic_t *t, rep__batch_t *b, grpc_status_code st, const char *text)
{
    b->perm_fails++;
    b->last_status = (int)st;
    t->lane.st.permanent_failures++;
    uint32_t max = atomic_load_explicit(&r->max_attempts, memory_order_relaxed);
    max = max ? max : 1;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("the cluster refuses a batch with a permanent status", REP__LOG_TOPIC(t), TB_S("status", text),
                TB_U("first", b->first), TB_U("last", b->last), TB_U("attempt", b->perm_fails),
                TB_U("max_attempts", max), TB_U("suppressed", skipped));
    if (b->perm_fails < max || t->dl_token || dead_batch(t))
        return; /* one dead-letter write at a time: a second poison batch waits for the first */
    free(t->dl_error);
    t->dl_error = tb_strdup(text);
    b->state = REP__B_DEAD;
    tb_warn("poison batch: its messages go to the dead-letter log and the topic moves on", REP__LOG_TOPIC(t),
            TB_S("status", text), TB_U("first", b->first), TB_U("last", b->last), TB_U("messages", b->count),
            TB_U("attempts", b->perm_fails));
    snprintf(t->lane.st.problem, sizeof t->lane.st.problem, "poison batch at offsets %llu..%llu (%.150s): to the dead-letter log",
             (unsigned long long)b->first, (unsigned long long)b->last, text);
    ask_dead_letter(r, t, b);
}

void rep__poison_answered(rep_t *r, rep__topic_t *t)
{
    uint64_t tok = atomic_load(&t->dl_done_token);
    if (!tok || tok != t->dl_token)
        return;
    atomic_store(&t->dl_done_token, 0);
    int rc = atomic_load(&t->dl_done_rc);
    t->dl_token = 0;
    rep__batch_t *b = dead_batch(t);
    if (!b)
        return;
    if (rc == 0) {
        tb_info("poison batch kept in the dead-letter log; the checkpoint passes it", REP__LOG_TOPIC(t),
                TB_U("first", b->first), TB_U("last", b->last), TB_U("messages", b->count));
        b->dead = true;
        b->state = REP__B_ACKED;
        t->lane.st.problem[0] = '\0';
        rep__lane_acked(&t->lane); /* rep_topic.c advance(): the checkpoint passes it */
        return;
    }
    uint32_t delay = r->o.retry_max_ms;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn(rc == TB_EUNSUPPORTED ? "poison batch held: mqtt.dead_letter is off, so its messages have nowhere to "
                                        "go; enable mqtt.dead_letter to move past it (logged once a minute)"
                                      : "poison batch held: the dead-letter log did not take its messages; asked "
                                        "again after the backoff (logged once a minute)",
                REP__LOG_TOPIC(t), TB_U("first", b->first), TB_U("last", b->last), TB_ERR(rc),
                TB_U("retry_ms", delay), TB_U("suppressed", skipped));
    snprintf(t->lane.st.problem, sizeof t->lane.st.problem, "poison batch at offsets %llu..%llu (%.120s): %s",
             (unsigned long long)b->first, (unsigned long long)b->last, t->dl_error ? t->dl_error : "",
             rc == TB_EUNSUPPORTED ? "enable mqtt.dead_letter to move past it" : "the dead-letter log refused it");
    t->dl_retry_ms = tb_mono_ms() + delay;
    rep__timer_arm(&r->timers, &t->read_timer, t->dl_retry_ms);
}

void rep__poison_retry(rep_t *r, rep__topic_t *t)
{
    if (t->dl_token || !t->dl_retry_ms || tb_mono_ms() < t->dl_retry_ms)
        return;
    rep__batch_t *b = dead_batch(t);
    t->dl_retry_ms = 0;
    if (b)
        ask_dead_letter(r, t, b);
}

void rep__topic_dead_letter_done(rep__topic_t *t, uint64_t token, int rc)
{
    atomic_store(&t->dl_done_rc, rc);
    atomic_store(&t->dl_done_token, token);
    rep__output_kick(t->lane.o, t->lane.topic);
}

void rep__refused_note(rep_t *r, rep__class_t c, grpc_status_code st, const char *details, const char *what)
{
    if (c != REP__CLASS_CREDENTIALS && c != REP__CLASS_UNIMPLEMENTED) {
        if (r->st.refused == REP_REFUSED_NONE)
            return;
        tb_info("the cluster accepts this edge again", TB_S("cluster", r->o.cluster_url), TB_S("call", what),
                TB_U("refused_ms", tb_wall_ms() - r->st.refused_since_ms));
        r->st.refused = REP_REFUSED_NONE;
        r->st.refused_words[0] = '\0';
        r->st.refused_since_ms = 0;
        rep__publish(r);
        return;
    }
    rep_refused_t k = c == REP__CLASS_CREDENTIALS ? REP_REFUSED_CREDENTIALS : REP_REFUSED_UNIMPLEMENTED;
    if (r->st.refused != k) {
        r->st.refused = k;
        r->st.refused_since_ms = tb_wall_ms();
    }
    rep__refused_words(k, rep__status_name(st), details, r->o.cluster_url, r->st.refused_words,
                       sizeof r->st.refused_words);
    rep__publish(r);
    uint64_t skipped;
    if (tb_ratelimit(&r->refused_rl, &skipped)) {
        if (k == REP_REFUSED_CREDENTIALS)
            tb_warn("the cluster refuses this edge's credentials: messages are kept in the log; check edge.token "
                    "(TRIBUTARY_EDGE_TOKEN) or edge.tls.cert_file; retrying at the backoff's maximum (logged once a "
                    "minute)",
                    TB_S("refused", r->st.refused_words), TB_S("call", what), TB_S("cluster", r->o.cluster_url),
                    TB_U("retry_max_ms", r->o.retry_max_ms), TB_U("suppressed", skipped));
        else
            tb_warn("the cluster URL has no edge service: messages are kept in the log; check edge.cluster_url "
                    "(logged once a minute)",
                    TB_S("refused", r->st.refused_words), TB_S("call", what), TB_U("suppressed", skipped));
    }
}
