/*
 * rep_spb.c: the Sparkplug B edge node's session (issue 18, S4;
 * docs/design/OUTPUTS.md 5.3 and 5.6; docs/SPARKPLUG.md): pure logic on top
 * of rep_spb_metrics.c, driven by events and pulled for messages (rep_spb.h
 * says how the engine's output maps rep_mosq's callbacks onto it).
 *
 *   DOWN --attempt--> SUBSCRIBING --SUBACK ok--> UP (births due) --> data
 *                         |            \--(primary host offline)--> WAIT_HOST --online--> UP
 *                         \--SUBACK refused--> REFUSED (no birth) --lost/attempt--> ...
 *   UP --STATE offline--> LEAVING (NDEATH farewell) --lost--> DOWN
 *   any --lost / deadline--> DOWN (source rewound)     any --stop--> STOPPED
 *
 * Confirmation: every message handed out gets a number (token). An entry per
 * message keeps the source's (lane, last token) pairs it carried; when the
 * remote confirms up to a number, those pairs are acked to the source, in
 * order. Nothing is acked before that, so a session lost with messages
 * unconfirmed (a silent cut) rewinds the source to the last confirmed
 * record and the next session, after its birth, sends them again (then
 * historical). A record read but not yet placed in a message (pending) is
 * dropped with the session: the rewind reads it again.
 */
#include "replicator/rep_spb.h"

#include "base/base.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Devices (the node counts as one) with a data message being built at
 * once: records of interleaved devices each go to their device's message,
 * so a replay packs per device; a record of one more device flushes them. */
#define REP_SPB_OPEN_MAX 64

typedef struct mark {
    uint32_t lane;
    uint64_t token;
} mark_t;

typedef struct msg_entry {
    uint64_t token;     /* message number */
    uint64_t sent;      /* now when handed out */
    mark_t *marks;      /* the source records it carried (last per lane) */
    uint32_t nmarks, cap;
} msg_entry_t;

struct rep__spb_sess {
    rep__spb_sess_opts_t o;
    const rep__spb_src_ops_t *ops;
    void *arg;
    rep__spb_node_t *node;
    char *t_nbirth, *t_ndata, *t_ndeath, *t_ncmd, *t_dcmd, *t_state;
    char *t_dbirth_prefix, *t_ddata_prefix; /* + the device's name */
    const char *subs[3];
    uint32_t nsubs;
    char topic[768];            /* a device message's topic */

    bool have_bdseq;            /* a bdSeq was ever taken (the next is +1) */
    uint8_t bdseq;
    uint32_t connects;
    rep__spb_phase_t phase;
    bool need_nbirth;
    uint32_t dbirth_next;       /* DBIRTHs due for devices [dbirth_next, ndev) */
    bool dbirth_all;
    uint32_t *dbirth_one;       /* single devices due a DBIRTH (a new metric) */
    uint32_t ndbirth_one, cap_dbirth_one;
    bool host_online;
    uint64_t host_ts;           /* the last STATE timestamp accepted */
    bool host_seen;

    rep__spb_rec_t pending;
    bool has_pending;
    bool pending_rebirth_once;  /* the pending record already caused a birth */
    msg_entry_t cur;            /* the source records of the message being built */
    bool fw_sent;               /* LEAVING: the farewell was handed out */

    msg_entry_t *q;             /* unconfirmed messages, oldest first: ring */
    uint32_t qhead, qlen, qcap;
    uint64_t next_token;

    rep__spb_buf_t buf;         /* births and deaths */
    /* the data messages being built, one per node/device met since the last
     * flush, in the order begun (packing across interleaved devices) */
    struct slot {
        rep__spb_data_t d;
        bool hist;              /* it holds historical values (historical: separate) */
    } slots[REP_SPB_OPEN_MAX];
    uint32_t nslots;
    bool flushing;              /* handing them out, one per rep__spb_next */
    uint32_t flush_at;          /* the next slot to hand out */
    uint8_t blob[REP_SPB_BDSEQ_BLOB];
    uint64_t table_saved;       /* the table generation last persisted */
    rep__spb_buf_t table;
    rep__spb_sess_stats_t st;
};

/* ---- the bdSeq blob ---------------------------------------------------------------- */

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return ~c;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void blob_make(rep__spb_sess_t *s)
{
    uint8_t *b = s->blob;
    memcpy(b, "TBSQ", 4);
    b[4] = 1;
    b[5] = s->bdseq;
    b[6] = b[7] = 0;
    put32(b + 8, s->connects);
    put32(b + 12, crc32c(b, 12));
}

static bool blob_load(rep__spb_sess_t *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (!p || n != REP_SPB_BDSEQ_BLOB || memcmp(b, "TBSQ", 4) != 0 || b[4] != 1 ||
        get32(b + 12) != crc32c(b, 12))
        return false;
    s->bdseq = b[5];
    s->connects = get32(b + 8);
    s->have_bdseq = true;
    return true;
}

/* ---- small helpers ----------------------------------------------------------------- */

static char *fmt(const char *a, const char *b, const char *c, const char *d)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + strlen(d) + 1;
    char *p = tb_malloc(n);
    snprintf(p, n, "%s%s%s%s", a, b, c, d);
    return p;
}

static void set_error(rep__spb_sess_t *s, const char *what)
{
    snprintf(s->st.last_error, sizeof s->st.last_error, "%s", what);
}

static msg_entry_t *q_at(rep__spb_sess_t *s, uint32_t i)
{
    return &s->q[(s->qhead + i) % s->qcap];
}

/* A new entry for a message about to be handed out. */
static msg_entry_t *q_push(rep__spb_sess_t *s, uint64_t now)
{
    if (s->qlen == s->qcap) {
        uint32_t ncap = s->qcap ? 2 * s->qcap : 16;
        msg_entry_t *nq = tb_calloc(ncap, sizeof *nq);
        for (uint32_t i = 0; i < s->qlen; i++)
            nq[i] = *q_at(s, i);
        free(s->q);
        s->q = nq;
        s->qhead = 0;
        s->qcap = ncap;
    }
    msg_entry_t *e = q_at(s, s->qlen++);
    e->token = ++s->next_token;
    e->sent = now;
    e->nmarks = 0; /* marks' memory is kept for reuse */
    return e;
}

static void mark_add(msg_entry_t *e, uint32_t lane, uint64_t token)
{
    for (uint32_t i = 0; i < e->nmarks; i++)
        if (e->marks[i].lane == lane) {
            if (token > e->marks[i].token)
                e->marks[i].token = token;
            return;
        }
    if (e->nmarks == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 4;
        e->marks = tb_realloc(e->marks, e->cap * sizeof *e->marks);
    }
    e->marks[e->nmarks++] = (mark_t){ lane, token };
}

static void q_clear(rep__spb_sess_t *s)
{
    s->qlen = 0;
    s->qhead = 0;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

int rep__spb_sess_new(const rep__spb_sess_opts_t *o, const rep__spb_src_ops_t *ops, void *arg, const void *stored,
                      size_t stored_len, rep__spb_sess_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *bad = NULL;
    if (!o->group_id || !*o->group_id || !o->edge_node_id || !*o->edge_node_id)
        bad = "group_id and edge_node_id are required";
    else if (strpbrk(o->group_id, "/+#") || strpbrk(o->edge_node_id, "/+#") ||
             (o->primary_host_id && strpbrk(o->primary_host_id, "/+#")))
        bad = "group_id, edge_node_id and primary_host_id must not hold '/', '+' or '#'";
    else if (o->pack < 1 || o->max_unconfirmed < 1 || o->confirm_timeout_ms < 1)
        bad = "pack, max_unconfirmed and confirm_timeout_ms must be >= 1";
    else if (!ops || !ops->read || !ops->rewind || !ops->ack || !ops->dead || !ops->persist)
        bad = "no source callbacks";
    if (bad) {
        snprintf(err, errlen, "sparkplug: %s", bad);
        return TB_ECONFIG;
    }
    rep__spb_sess_t *s = tb_calloc(1, sizeof *s);
    s->o = *o;
    s->ops = ops;
    s->arg = arg;
    s->node = rep__spb_node_new();
    const char *g = o->group_id, *e = o->edge_node_id;
    char pre[300];
    snprintf(pre, sizeof pre, "spBv1.0/%s/", g);
    s->t_nbirth = fmt(pre, "NBIRTH/", e, "");
    s->t_ndata = fmt(pre, "NDATA/", e, "");
    s->t_ndeath = fmt(pre, "NDEATH/", e, "");
    s->t_ncmd = fmt(pre, "NCMD/", e, "");
    s->t_dcmd = fmt(pre, "DCMD/", e, "/+");
    s->t_dbirth_prefix = fmt(pre, "DBIRTH/", e, "/");
    s->t_ddata_prefix = fmt(pre, "DDATA/", e, "/");
    s->o.group_id = s->o.edge_node_id = NULL;
    s->subs[s->nsubs++] = s->t_ncmd;
    if (o->devices)
        s->subs[s->nsubs++] = s->t_dcmd;
    if (o->primary_host_id && *o->primary_host_id) {
        s->t_state = fmt("spBv1.0/STATE/", o->primary_host_id, "", "");
        s->subs[s->nsubs++] = s->t_state;
    }
    s->o.primary_host_id = NULL;
    if (stored && !blob_load(s, stored, stored_len)) {
        set_error(s, "the stored bdSeq is unreadable: starting at 0");
        tb_warn("sparkplug: the stored bdSeq is unreadable, starting at 0", TB_U("bytes", stored_len));
    }
    s->st.bdseq = s->bdseq;
    s->phase = REP_SPB_DOWN;
    *out = s;
    return 0;
}

void rep__spb_sess_free(rep__spb_sess_t *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->qcap; i++)
        free(s->q[i].marks);
    free(s->q);
    free(s->dbirth_one);
    rep__spb_buf_free(&s->buf);
    rep__spb_buf_free(&s->table);
    for (uint32_t i = 0; i < REP_SPB_OPEN_MAX; i++)
        rep__spb_data_free(&s->slots[i].d);
    rep__spb_node_free(s->node);
    free(s->t_nbirth);
    free(s->t_ndata);
    free(s->t_ndeath);
    free(s->t_ncmd);
    free(s->t_dcmd);
    free(s->t_dbirth_prefix);
    free(s->t_ddata_prefix);
    free(s->cur.marks);
    free(s->t_state);
    free(s);
}

rep__spb_node_t *rep__spb_sess_node(rep__spb_sess_t *s)
{
    return s->node;
}

int rep__spb_sess_load_table(rep__spb_sess_t *s, const void *p, size_t n, char *err, size_t errlen)
{
    int rc = rep__spb_table_load(s->node, p, n, err, errlen);
    if (rc != 0) {
        rep__spb_node_free(s->node);
        s->node = rep__spb_node_new();
        set_error(s, err);
        tb_warn("sparkplug: the stored aliases are unreadable, starting with none", TB_S("error", err));
    }
    s->table_saved = rep__spb_table_gen(s->node);
    return rc;
}

void rep__spb_sess_stats(const rep__spb_sess_t *s, rep__spb_sess_stats_t *out)
{
    *out = s->st;
    out->phase = s->phase;
    out->bdseq = s->bdseq;
    out->connects = s->connects;
    out->host_online = s->host_online || !s->t_state; /* no primary host: nothing to wait for */
}

void rep__spb_subscriptions(const rep__spb_sess_t *s, const char *const **topics, uint32_t *n)
{
    *topics = s->subs;
    *n = s->nsubs;
}

/* Ends every data message being built without handing it out (those with
 * no metric use no seq; the others are dropped with their session). */
static void slots_drop(rep__spb_sess_t *s)
{
    for (uint32_t i = 0; i < s->nslots; i++)
        if (s->slots[i].d.open)
            rep__spb_data_end(s->node, &s->slots[i].d);
    s->nslots = 0;
    s->flushing = false;
    s->flush_at = 0;
}

/* ---- events ------------------------------------------------------------------------------ */

void rep__spb_lost(rep__spb_sess_t *s, uint64_t now)
{
    (void)now;
    if (s->phase == REP_SPB_DOWN || s->phase == REP_SPB_STOPPED)
        return;
    bool resend = s->qlen > 0 || s->has_pending || s->nslots > 0;
    q_clear(s);
    s->has_pending = false;
    s->pending_rebirth_once = false;
    slots_drop(s); /* built, never handed out: read again after the rewind */
    s->cur.nmarks = 0;
    s->need_nbirth = false;
    s->dbirth_all = false;
    s->ndbirth_one = 0;
    s->phase = REP_SPB_DOWN;
    /* always rewind: a record read and dropped (pending) or a message out
     * and unconfirmed must be read again, in order */
    s->ops->rewind(s->arg);
    if (resend)
        s->st.resent_sessions++;
}

int rep__spb_attempt(rep__spb_sess_t *s, uint64_t now, rep__spb_will_t *will)
{
    rep__spb_lost(s, now);
    if (s->phase == REP_SPB_STOPPED)
        return TB_EINVALID;
    /* every CONNECT takes the next bdSeq (tck-id-topics-nbirth-bdseq-increment) */
    s->bdseq = s->have_bdseq ? (uint8_t)(s->bdseq + 1) : 0;
    s->have_bdseq = true;
    s->connects++;
    blob_make(s);
    int rc = s->ops->persist(s->arg, s->blob, sizeof s->blob);
    if (rc < 0) {
        set_error(s, "the bdSeq could not be persisted");
        return rc;
    }
    rep__spb_ndeath(s->bdseq, now, &s->buf);
    *will = (rep__spb_will_t){ .topic = s->t_ndeath, .payload = s->buf.p, .len = s->buf.len };
    s->phase = REP_SPB_SUBSCRIBING;
    s->st.bdseq = s->bdseq;
    return 0;
}

static void births_due(rep__spb_sess_t *s)
{
    s->need_nbirth = true;
    s->dbirth_all = false; /* set after the NBIRTH is out */
    s->ndbirth_one = 0;
}

void rep__spb_subscribed(rep__spb_sess_t *s, uint64_t now, const char *refused_topic, int reason)
{
    (void)now;
    if (s->phase != REP_SPB_SUBSCRIBING)
        return;
    if (refused_topic) {
        char why[160];
        snprintf(why, sizeof why, "subscription to %.100s refused (0x%02x): no birth", refused_topic, reason);
        set_error(s, why);
        s->phase = REP_SPB_REFUSED;
        return;
    }
    if (s->t_state && !s->host_online) {
        s->phase = REP_SPB_WAIT_HOST; /* tck-id-message-flow-edge-node-birth-publish-phid-wait */
        return;
    }
    s->phase = REP_SPB_UP;
    births_due(s);
}

int rep__spb_state_parse(const uint8_t *p, size_t len, bool *online, uint64_t *ts)
{
    if (len > 4096)
        return TB_EMALFORMED;
    json_error_t je;
    json_t *j = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return TB_EMALFORMED;
    json_t *on = json_object_get(j, "online"), *t = json_object_get(j, "timestamp");
    int rc = TB_EMALFORMED;
    if (json_is_object(j) && json_is_boolean(on) && json_is_integer(t) && json_integer_value(t) >= 0) {
        *online = json_is_true(on);
        *ts = (uint64_t)json_integer_value(t);
        rc = 0;
    }
    json_decref(j);
    return rc;
}

static void on_state(rep__spb_sess_t *s, const uint8_t *p, size_t len)
{
    bool online;
    uint64_t ts;
    s->st.state_msgs++;
    if (rep__spb_state_parse(p, len, &online, &ts) != 0) {
        set_error(s, "a STATE payload is not {\"online\": bool, \"timestamp\": int}: ignored");
        return;
    }
    if (s->host_seen && ts < s->host_ts)
        return; /* older than the last accepted: stale (tck-id-message-flow-edge-node-birth-publish-phid-wait-timestamp) */
    s->host_seen = true;
    s->host_ts = ts;
    bool was = s->host_online;
    s->host_online = online;
    if (online && s->phase == REP_SPB_WAIT_HOST) {
        s->phase = REP_SPB_UP;
        births_due(s);
    } else if (online && !was && s->phase == REP_SPB_UP) {
        births_due(s); /* the host is back: it needs our birth */
    } else if (!online && s->phase == REP_SPB_UP) {
        s->phase = REP_SPB_LEAVING;
        s->fw_sent = false; /* NDEATH, disconnect, start over (-phid-offline) */
    }
}

void rep__spb_message(rep__spb_sess_t *s, uint64_t now, const char *topic, const uint8_t *p, size_t len,
                      bool retained)
{
    (void)now;
    if (s->t_state && strcmp(topic, s->t_state) == 0) {
        on_state(s, p, len);
        return;
    }
    if (strcmp(topic, s->t_ncmd) == 0 && !retained) {
        rep__spb_cmd_t cmd;
        char err[160];
        if (rep__spb_cmd_parse(p, len, &cmd, err, sizeof err) != 0) {
            set_error(s, err);
            s->st.cmds_ignored++;
            return;
        }
        s->st.cmds_ignored += cmd.ignored;
        if (cmd.rebirth) {
            s->st.rebirth_cmds++;
            if (s->phase == REP_SPB_UP)
                births_due(s); /* same bdSeq (tck-id-operational-behavior-data-commands-rebirth-action-*) */
        }
        return;
    }
    s->st.cmds_ignored++; /* DCMD, a retained NCMD: writing to devices is not a feature */
}

void rep__spb_confirmed(rep__spb_sess_t *s, uint64_t now, uint64_t token)
{
    (void)now;
    while (s->qlen && q_at(s, 0)->token <= token) {
        msg_entry_t *e = q_at(s, 0);
        for (uint32_t i = 0; i < e->nmarks; i++)
            s->ops->ack(s->arg, e->marks[i].lane, e->marks[i].token);
        s->st.confirmed_msgs++;
        s->qhead = (s->qhead + 1) % s->qcap;
        s->qlen--;
    }
}

int rep__spb_tick(rep__spb_sess_t *s, uint64_t now)
{
    if (!s->qlen || s->phase == REP_SPB_DOWN || s->phase == REP_SPB_STOPPED)
        return REP_SPB_TICK_OK;
    if (now - q_at(s, 0)->sent <= s->o.confirm_timeout_ms)
        return REP_SPB_TICK_OK;
    char why[120];
    snprintf(why, sizeof why, "a message unconfirmed for %u ms: session ended (silent remote)",
             s->o.confirm_timeout_ms);
    set_error(s, why);
    s->st.deadline_ends++;
    rep__spb_lost(s, now);
    return REP_SPB_TICK_END;
}

int rep__spb_stop(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out)
{
    bool up = s->phase != REP_SPB_DOWN && s->phase != REP_SPB_STOPPED && s->phase != REP_SPB_SUBSCRIBING &&
              s->phase != REP_SPB_REFUSED;
    s->phase = REP_SPB_STOPPED;
    if (!up)
        return 0;
    rep__spb_ndeath(s->bdseq, now, &s->buf);
    *out = (rep__spb_out_t){ .topic = s->t_ndeath, .payload = s->buf.p, .len = s->buf.len };
    return 1;
}

/* ---- messages out ------------------------------------------------------------------------ */

static const char *dev_topic(rep__spb_sess_t *s, const char *prefix, uint32_t dev)
{
    snprintf(s->topic, sizeof s->topic, "%s%s", prefix, rep__spb_device_name(s->node, dev));
    return s->topic;
}

static void dbirth_one_add(rep__spb_sess_t *s, uint32_t dev)
{
    for (uint32_t i = 0; i < s->ndbirth_one; i++)
        if (s->dbirth_one[i] == dev)
            return;
    if (s->ndbirth_one == s->cap_dbirth_one) {
        s->cap_dbirth_one = s->cap_dbirth_one ? 2 * s->cap_dbirth_one : 8;
        s->dbirth_one = tb_realloc(s->dbirth_one, s->cap_dbirth_one * sizeof *s->dbirth_one);
    }
    s->dbirth_one[s->ndbirth_one++] = dev;
}

static int emit(rep__spb_sess_t *s, uint64_t now, const char *topic, const rep__spb_buf_t *b, rep__spb_out_t *out)
{
    msg_entry_t *e = q_push(s, now);
    *out = (rep__spb_out_t){ .topic = topic, .payload = b->p, .len = b->len, .token = e->token };
    return REP_SPB_OUT_PUBLISH;
}

/* The table changed since it was last persisted: persist it before a birth
 * announces it (a restart then numbers every metric the same way). */
static void table_persist(rep__spb_sess_t *s)
{
    uint64_t gen = rep__spb_table_gen(s->node);
    if (!s->ops->persist_table || gen == s->table_saved)
        return;
    if (rep__spb_table_save(s->node, &s->table) != 0 ||
        s->ops->persist_table(s->arg, s->table.p, s->table.len) < 0) {
        set_error(s, "the metric table could not be persisted");
        return; /* tried again before the next birth */
    }
    s->table_saved = gen;
}

/* A birth due, if any, into *out. */
static int birth(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out)
{
    if (s->need_nbirth || s->ndbirth_one ||
        (s->dbirth_all && s->dbirth_next < rep__spb_device_count(s->node)))
        table_persist(s);
    if (s->need_nbirth) {
        s->need_nbirth = false;
        rep__spb_nbirth(s->node, s->bdseq, now, &s->buf);
        s->dbirth_all = true;
        s->dbirth_next = 1;
        s->ndbirth_one = 0;
        s->st.nbirths++;
        return emit(s, now, s->t_nbirth, &s->buf, out);
    }
    if (s->dbirth_all && s->dbirth_next < rep__spb_device_count(s->node)) {
        uint32_t dev = s->dbirth_next++;
        rep__spb_dbirth(s->node, dev, now, &s->buf);
        s->st.dbirths++;
        return emit(s, now, dev_topic(s, s->t_dbirth_prefix, dev), &s->buf, out);
    }
    s->dbirth_all = false;
    if (s->ndbirth_one) {
        uint32_t dev = s->dbirth_one[--s->ndbirth_one];
        rep__spb_dbirth(s->node, dev, now, &s->buf);
        s->st.dbirths++;
        return emit(s, now, dev_topic(s, s->t_dbirth_prefix, dev), &s->buf, out);
    }
    return REP_SPB_OUT_NONE;
}

/* Records the source's record in the message being built, or in the last
 * message out (a dead letter between messages), or acks it at once. */
static void place(rep__spb_sess_t *s, msg_entry_t *cur, const rep__spb_rec_t *r)
{
    if (cur)
        mark_add(cur, r->lane, r->token);
    else if (s->qlen)
        mark_add(q_at(s, s->qlen - 1), r->lane, r->token);
    else
        s->ops->ack(s->arg, r->lane, r->token);
}

/* A message built with dead letters only and not sent: they go with the
 * last message out, or are acked now. */
static void unplace(rep__spb_sess_t *s, msg_entry_t *cur)
{
    for (uint32_t i = 0; i < cur->nmarks; i++) {
        rep__spb_rec_t r = { .lane = cur->marks[i].lane, .token = cur->marks[i].token };
        place(s, NULL, &r);
    }
    cur->nmarks = 0;
}

static struct slot *slot_of(rep__spb_sess_t *s, uint32_t dev)
{
    for (uint32_t i = 0; i < s->nslots; i++)
        if (s->slots[i].d.dev == dev)
            return &s->slots[i];
    return NULL;
}

static bool slots_hold_metrics(const rep__spb_sess_t *s, uint32_t from)
{
    for (uint32_t i = from; i < s->nslots; i++)
        if (s->slots[i].d.metrics)
            return true;
    return false;
}

/* Hands out the next message of a flush: its seq is taken now, so seq follows
 * the order of handing out. The last one carries every source record the
 * flush read (cur's marks): confirmations come in order, so its
 * confirmation covers the whole flush, and nothing is acked before. */
static int flush_next(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out)
{
    msg_entry_t *cur = &s->cur;
    while (s->flush_at < s->nslots) {
        struct slot *sl = &s->slots[s->flush_at++];
        const rep__spb_buf_t *b = rep__spb_data_end(s->node, &sl->d);
        if (!b)
            continue; /* no metric: it held only dead letters (their marks are in cur) */
        uint32_t dev = sl->d.dev;
        int rc = emit(s, now, dev ? dev_topic(s, s->t_ddata_prefix, dev) : s->t_ndata, b, out);
        s->st.data_msgs++;
        if (!slots_hold_metrics(s, s->flush_at)) {
            msg_entry_t *e = q_at(s, s->qlen - 1);
            for (uint32_t k = 0; k < cur->nmarks; k++)
                mark_add(e, cur->marks[k].lane, cur->marks[k].token);
            cur->nmarks = 0;
            slots_drop(s); /* the rest are empty */
        }
        return rc;
    }
    slots_drop(s);
    unplace(s, cur); /* dead letters only: with the last message out, or acked */
    return REP_SPB_OUT_NONE;
}

static int data(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out)
{
    if (s->flushing)
        return flush_next(s, now, out);
    msg_entry_t *cur = &s->cur;
    cur->nmarks = 0;
    char err[200];
    for (;;) {
        if (!s->has_pending) {
            if (s->ops->read(s->arg, &s->pending) <= 0)
                break;
            s->has_pending = true;
            s->pending_rebirth_once = false;
        }
        rep__spb_rec_t *r = &s->pending;
        uint32_t dev = 0;
        int rc = rep__spb_device(s->node, r->device, &dev);
        if (rc < 0) {
            snprintf(err, sizeof err, "sparkplug: more than %d devices", REP_SPB_MAX_DEVICES);
            s->ops->dead(s->arg, r, err);
            s->st.dead++;
            place(s, s->nslots ? cur : NULL, r);
            s->has_pending = false;
            continue;
        }
        bool historical = now > r->ts && now - r->ts > s->o.live_window_ms;
        struct slot *sl = slot_of(s, dev);
        /* historical: separate: history and live never share a payload
         * (OUTPUTS.md 5.5): the messages built so far go first */
        if (sl && s->o.separate_history && historical != sl->hist) {
            if (sl->d.metrics)
                break;
            sl->hist = historical; /* nothing in it yet */
        }
        if (!sl) {
            if (s->nslots == REP_SPB_OPEN_MAX)
                break; /* one device more than messages at once: flush */
            sl = &s->slots[s->nslots++];
            rep__spb_data_begin(s->node, &sl->d, dev, now);
            sl->hist = historical;
        }
        uint32_t before = sl->d.metrics;
        rc = rep__spb_data_add(s->node, &sl->d, r->prefix, r->schema, r->payload, r->len, r->ts, historical, err,
                               sizeof err);
        if (rc == 0) {
            mark_add(cur, r->lane, r->token);
            s->has_pending = false;
            s->st.metrics += sl->d.metrics - before; /* metrics, not records: a record holds many */
            if (sl->d.metrics >= s->o.pack)
                break;
            continue;
        }
        if (rc == REP_SPB_FULL)
            break; /* a metric twice at one millisecond: flush, then this record */
        if (rc == REP_SPB_REBIRTH) {
            if (slots_hold_metrics(s, 0))
                break; /* send what is built; the birth comes next */
            if (s->pending_rebirth_once) {
                /* born and still refused: cannot happen with a sound table; never loop */
                s->ops->dead(s->arg, r, "sparkplug: a metric could not be born");
                s->st.dead++;
                place(s, NULL, r);
                s->has_pending = false;
                continue;
            }
            s->pending_rebirth_once = true;
            slots_drop(s); /* all empty: no seq used */
            unplace(s, cur);
            if (dev == 0)
                births_due(s); /* a node metric: the whole node is born again */
            else
                dbirth_one_add(s, dev);
            return birth(s, now, out);
        }
        /* a dead letter: the reason, and on with the next record */
        s->ops->dead(s->arg, r, err[0] ? err : "sparkplug: the record cannot be carried");
        s->st.dead++;
        place(s, s->nslots ? cur : NULL, r);
        s->has_pending = false;
    }
    s->flushing = true;
    s->flush_at = 0;
    return flush_next(s, now, out);
}

int rep__spb_next(rep__spb_sess_t *s, uint64_t now, rep__spb_out_t *out)
{
    if (s->phase == REP_SPB_LEAVING) {
        /* once: the farewell ends the session (rep__spb_lost follows) */
        if (s->fw_sent)
            return REP_SPB_OUT_NONE;
        s->fw_sent = true;
        rep__spb_ndeath(s->bdseq, now, &s->buf);
        *out = (rep__spb_out_t){ .topic = s->t_ndeath, .payload = s->buf.p, .len = s->buf.len };
        return REP_SPB_OUT_FAREWELL;
    }
    if (s->phase != REP_SPB_UP)
        return REP_SPB_OUT_NONE;
    int rc = birth(s, now, out);
    if (rc != REP_SPB_OUT_NONE)
        return rc;
    if (s->qlen >= s->o.max_unconfirmed)
        return REP_SPB_OUT_NONE;
    return data(s, now, out);
}
