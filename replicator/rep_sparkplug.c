/*
 * rep_sparkplug.c: the Sparkplug B output kind (rep__sparkplug_ops; issue
 * 18, docs/design/OUTPUTS.md 5, docs/SPARKPLUG.md "The output in the
 * engine").
 *
 * The glue between three parts built and tested alone:
 *
 *   rep_mosq.c   one connection to the output's broker (the MQTT output's
 *                keys: broker, tls, username, password_file, client_id),
 *                run on the output's own thread (rep__mosq_run), QoS 0 with
 *                its confirming round trip, the session hooks (the will per
 *                attempt, SUBSCRIBE before next(), incoming NCMD/STATE, the
 *                QoS 1 farewell);
 *   rep_spb.c    the Sparkplug session (rep__spb_sess_t): bdSeq, births,
 *                seq, aliases, rebirth, primary host, and which source
 *                records the remote confirmed;
 *   rep_lane.c   one lane per topic the output carries: its reader, its WAL
 *                cursor, its window, its stats (as rep_mqtt.c's lanes).
 *
 * The session's source (rep__spb_src_ops_t) is the lanes: read() picks a
 * ready lane with room in its window (round robin, as rep_mqtt.c's
 * pick_lane) and hands out its next record, which becomes one unit of the
 * lane's window (token = its offset); ack(lane, token) marks the units up
 * to token acknowledged and the cursor moves once per turn of the loop
 * (idle), so the checkpoint moves only for records whose message the
 * remote confirmed; rewind() restarts every lane at its checkpoint + 1.
 * The bdSeq blob and the alias table are kept with wal_output_state_put
 * under the keys "bdseq" and "aliases" and read back at init.
 *
 * Devices: the output's `device` template (ROUTER_OUT_LEVEL) over the
 * captures of the mapping that routed the record (router_match on its
 * stored MQTT topic); absent: node metrics. A record whose device cannot be
 * expanded is a dead letter. Metric names: the upstream topic's name after
 * /<edge_name>/ (the prefix), then the field path (rep_spb_metrics.c).
 *
 * The connection's connection-level ack deadline (replicator.ack_timeout_ms)
 * is the session's confirm deadline: rep_mosq ends a session whose oldest
 * message is unconfirmed that long (session_lost -> rep__spb_lost), so
 * rep__spb_tick is not needed on top.
 *
 * Stop (SIGTERM): rep__spb_stop gives the graceful NDEATH with the current
 * bdSeq, sent as rep__mosq_farewell(final) from this thread: its PUBACK
 * confirms every QoS 0 message before it (their records are acked), then
 * DISCONNECT (the broker drops the will) and the loop ends; no PUBACK within
 * replicator.shutdown_grace_ms, or no session up: the loop ends at once
 * (the broker then publishes the will, the same NDEATH).
 */
#include "replicator/rep_int.h"
#include "replicator/rep_mosq_int.h"
#include "replicator/rep_spb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_RETRY_MS 1000
#define SPB_PACK 100         /* metrics per NDATA/DDATA at most (packed replay) */
#define SPB_LANE_CAP 8192    /* records of one lane read and not confirmed */

typedef struct slane {
    rep__lane_t lane;           /* first */
    rep__enc_t enc;             /* only max_age_ms (rep__too_old) */
    uint32_t idx;
    char *prefix;               /* the metric names' topic part */
    bool ready;
    bool dirty;
    bool acked_due;
    uint64_t retry_at;
} slane_t;

typedef struct rep_sparkplug {
    rep_output_t out;           /* first */
    rep_mosq_t *conn;
    rep__spb_sess_t *sess;
    router_t *router;
    router_out_t *device;       /* NULL: node metrics */
    slane_t **lanes;
    uint32_t nlanes;
    uint32_t rr;
    uint32_t grace_ms;
    uint32_t recheck_ms;
    bool stopping, stop_sent, stopped;
    rep_mosq_state_t seen_state;
    /* under out.mu: what /stats reads */
    uint64_t dead_letters;
    rep__spb_sess_stats_t pub_ss;
    uint8_t pub_seq;
    char devbuf[256];
} rep_sparkplug_t;

/* ---- the session's source: the lanes ------------------------------------------------ */

static slane_t *pick_lane(rep_sparkplug_t *m)
{
    for (uint32_t k = 0; k < m->nlanes; k++) {
        slane_t *sl = m->lanes[(m->rr + k) % m->nlanes];
        if (sl->ready && sl->lane.win.n < sl->lane.win.cap) {
            m->rr = (m->rr + k + 1) % m->nlanes;
            return sl;
        }
    }
    return NULL;
}

/* A record not carried (too old, or a dead letter): a unit acked at once, in order. */
static void skip_record(slane_t *sl, const wal_record_t *rec)
{
    rep__lane_t *l = &sl->lane;
    rep__batch_t *b = rep__window_push(&l->win);
    b->first = b->last = rec->offset;
    b->aged = 1;
    b->aged_new = rec->offset >= l->st.start_offset;
    b->state = REP__B_ACKED;
    rep__lane_acked(l);
}

static void count_dead(rep_sparkplug_t *m, const char *lane, uint64_t offset, const char *why)
{
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t suppressed;
    if (tb_ratelimit(&rl, &suppressed))
        tb_warn("sparkplug output: a record cannot be carried: skipped", TB_S("output", m->out.name),
                TB_S("topic", lane), TB_U("offset", offset), TB_S("reason", why), TB_U("suppressed", suppressed));
    pthread_mutex_lock(&m->out.mu);
    m->dead_letters++;
    pthread_mutex_unlock(&m->out.mu);
}

/* The device of a record into m->devbuf: 0 ("" = node metrics), or < 0 (a dead letter). */
static int device_of(rep_sparkplug_t *m, slane_t *sl, const wal_record_t *rec)
{
    m->devbuf[0] = 0;
    if (!m->device)
        return 0;
    router_match_t mt;
    router_out_ctx_t ctx = { .topic = { rec->mqtt_topic, rec->mqtt_topic_len },
                             .upstream = { sl->lane.name, strlen(sl->lane.name) } };
    if (router_match(m->router, rec->mqtt_topic, rec->mqtt_topic_len, &mt) >= 0)
        ctx.m = &mt;
    int n = router_out_expand(m->device, &ctx, m->devbuf, sizeof m->devbuf - 1);
    if (n <= 0)
        return -1;
    m->devbuf[n] = 0;
    return 0;
}

static int src_read(void *arg, rep__spb_rec_t *out)
{
    rep_sparkplug_t *m = arg;
    for (;;) {
        slane_t *sl = pick_lane(m);
        if (!sl)
            return 0;
        rep__lane_t *l = &sl->lane;
        wal_record_t rec;
        uint64_t now_wall = tb_wall_ms();
        int rc = rep__lane_next(l, &rec, now_wall);
        if (rc == WAL_END) {
            sl->ready = false;
            continue;
        }
        if (rc < 0) {
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
            uint64_t suppressed;
            if (tb_ratelimit(&rl, &suppressed))
                tb_error("sparkplug output: reading the log failed; trying again in 1 s", REP__LOG_LANE(l),
                         TB_ERR(rc), TB_U("suppressed", suppressed));
            sl->ready = false;
            sl->retry_at = tb_mono_ms() + READ_RETRY_MS;
            continue;
        }
        sl->dirty = true;
        if (rep__too_old(&sl->enc, &rec, now_wall)) {
            skip_record(sl, &rec);
            continue;
        }
        if (device_of(m, sl, &rec) < 0) {
            count_dead(m, l->name, rec.offset, "the device template gives no valid device id");
            skip_record(sl, &rec);
            continue;
        }
        rep__batch_t *b = rep__window_push(&l->win); /* pick_lane checked the room */
        b->first = b->last = rec.offset;
        b->count = 1;
        b->count_new = rec.offset >= l->st.start_offset;
        b->raw_bytes = rec.raw_len;
        b->first_publish_ms = b->last_publish_ms = rec.publish_time_ms;
        rep__window_mark_sending(&l->win, b, tb_mono_ms());
        rep__window_mark_sent(&l->win, b);
        l->st.batches_sent++;
        *out = (rep__spb_rec_t){ .lane = sl->idx, .token = rec.offset, .device = m->devbuf, .prefix = sl->prefix,
                                 .schema = NULL, .payload = rec.payload, .len = rec.payload_len,
                                 .ts = rec.publish_time_ms };
        return 1;
    }
}

static void flush_acks(slane_t *sl)
{
    if (!sl->acked_due)
        return;
    sl->acked_due = false;
    rep__lane_acked(&sl->lane);
}

/* memory_first: no confirmation comes soon; what the log holds in memory goes to disk now. */
static void output_down(rep_sparkplug_t *m)
{
    for (uint32_t i = 0; i < m->nlanes; i++)
        if (wal_topic_mode(m->lanes[i]->lane.wal) == WAL_MODE_MEMORY)
            wal_topic_spill(m->lanes[i]->lane.wal, WAL_SPILL_OUTPUT);
}

static void src_rewind(void *arg)
{
    rep_sparkplug_t *m = arg;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        slane_t *sl = m->lanes[i];
        rep__lane_t *l = &sl->lane;
        flush_acks(sl);
        if (l->win.n == 0 && !l->src.has_held)
            continue;
        l->st.stream_resets++;
        rep__lane_restart(l);
        sl->ready = true;
        sl->dirty = true;
    }
    output_down(m);
}

static void src_ack(void *arg, uint32_t lane, uint64_t token)
{
    rep_sparkplug_t *m = arg;
    if (lane >= m->nlanes)
        return;
    rep__lane_t *l = &m->lanes[lane]->lane;
    for (uint32_t i = 0; i < l->win.n; i++) {
        rep__batch_t *b = rep__window_at(&l->win, i);
        if (b->last > token)
            break;
        if (b->state == REP__B_SENT || b->state == REP__B_SENDING) {
            b->state = REP__B_ACKED;
            l->win.sent--;
        }
    }
    m->lanes[lane]->acked_due = true;
}

static void src_dead(void *arg, const rep__spb_rec_t *r, const char *why)
{
    rep_sparkplug_t *m = arg;
    count_dead(m, r->lane < m->nlanes ? m->lanes[r->lane]->lane.name : "?", r->token, why);
}

static int src_persist(void *arg, const void *blob, size_t n)
{
    rep_sparkplug_t *m = arg;
    return wal_output_state_put(m->out.e->wal, m->out.wal_id, "bdseq", blob, n);
}

static int src_persist_table(void *arg, const void *p, size_t n)
{
    rep_sparkplug_t *m = arg;
    return wal_output_state_put(m->out.e->wal, m->out.wal_id, "aliases", p, n);
}

static const rep__spb_src_ops_t src_ops = { src_read, src_rewind, src_ack, src_dead, src_persist, src_persist_table };

/* ---- the connection's owner and session hooks (its thread) ---------------------------- */

static int sp_next(void *owner, rep_mosq_msg_t *msg)
{
    rep_sparkplug_t *m = owner;
    rep__spb_out_t out;
    int rc = rep__spb_next(m->sess, tb_wall_ms(), &out);
    if (rc == REP_SPB_OUT_FAREWELL) /* the primary host went offline: NDEATH, then retry later */
        rep__mosq_farewell(m->conn, out.topic, out.payload, out.len, m->grace_ms, false);
    if (rc != REP_SPB_OUT_PUBLISH)
        return 0;
    *msg = (rep_mosq_msg_t){ .lane = 0, .token = out.token, .topic = out.topic, .payload = out.payload,
                             .payload_len = out.len };
    return 1;
}

static void sp_acked(void *owner, uint32_t lane, uint64_t token)
{
    (void)lane;
    rep_sparkplug_t *m = owner;
    rep__spb_confirmed(m->sess, tb_wall_ms(), token);
}

static void sp_lost(void *owner)
{
    rep_sparkplug_t *m = owner;
    rep__spb_lost(m->sess, tb_wall_ms());
}

static void sp_connecting(void *owner, uint64_t n, rep_mosq_will_t *will)
{
    (void)n;
    rep_sparkplug_t *m = owner;
    rep__spb_will_t w;
    int rc = rep__spb_attempt(m->sess, tb_wall_ms(), &w);
    if (rc == 0)
        *will = (rep_mosq_will_t){ .topic = w.topic, .payload = w.payload, .payload_len = w.len };
    else
        tb_error("sparkplug output: the bdSeq could not be persisted; this attempt carries no will",
                 TB_S("output", m->out.name), TB_ERR(rc));
}

static void sp_subscribed(void *owner, const char *topic, int reason)
{
    rep_sparkplug_t *m = owner;
    rep__spb_subscribed(m->sess, tb_wall_ms(), topic, reason);
    if (topic)
        tb_warn("sparkplug output: a subscription was refused; the node does not birth on this session",
                TB_S("output", m->out.name), TB_S("topic", topic), TB_I("reason", reason));
}

static void sp_message(void *owner, const char *topic, const void *p, size_t len, bool retained)
{
    rep_sparkplug_t *m = owner;
    rep__spb_message(m->sess, tb_wall_ms(), topic, p, len, retained);
    rep__mosq_kick(m->conn); /* a rebirth asked: next() has births to hand out */
}

static rep_topic_state_t lane_state(rep_mosq_state_t s)
{
    switch (s) {
    case REP_MOSQ_UP: return REP_TOPIC_STREAMING;
    case REP_MOSQ_BACKOFF:
    case REP_MOSQ_REFUSED: return REP_TOPIC_BACKOFF;
    case REP_MOSQ_STOPPED: return REP_TOPIC_STOPPED;
    default: return REP_TOPIC_CONNECTING;
    }
}

static void publish_session(rep_sparkplug_t *m)
{
    rep__spb_sess_stats_t ss;
    rep__spb_sess_stats(m->sess, &ss);
    uint8_t seq = rep__spb_seq_peek(rep__spb_sess_node(m->sess));
    pthread_mutex_lock(&m->out.mu);
    m->pub_ss = ss;
    m->pub_seq = seq;
    pthread_mutex_unlock(&m->out.mu);
}

static int sp_idle(void *owner)
{
    rep_sparkplug_t *m = owner;
    rep__output_drain(&m->out); /* kicks (lane_kicked) and stop */
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    uint64_t now = tb_mono_ms();
    if (cs.state == REP_MOSQ_BACKOFF || cs.state == REP_MOSQ_REFUSED)
        output_down(m);
    bool changed = cs.state != m->seen_state;
    m->seen_state = cs.state;
    int wish = -1;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        slane_t *sl = m->lanes[i];
        rep__lane_t *l = &sl->lane;
        flush_acks(sl);
        if (sl->retry_at && now >= sl->retry_at) {
            sl->retry_at = 0;
            sl->ready = true;
        }
        if (sl->retry_at)
            wish = wish < 0 ? READ_RETRY_MS : TB_MIN(wish, READ_RETRY_MS);
        if (!sl->ready && !sl->retry_at && l->src.rd && wal_topic_readable_end(l->wal) > wal_reader_offset(l->src.rd))
            sl->ready = true;
        if (m->recheck_ms && !sl->ready)
            wish = wish < 0 ? (int)m->recheck_ms : TB_MIN(wish, (int)m->recheck_ms);
        if (changed) {
            l->st.state = lane_state(cs.state);
            sl->dirty = true;
        }
        if (sl->dirty) {
            sl->dirty = false;
            rep__lane_publish(l);
        }
    }
    publish_session(m);
    if (m->stopping && !m->stop_sent) {
        m->stop_sent = true;
        rep__spb_out_t out;
        if (rep__spb_stop(m->sess, tb_wall_ms(), &out) == 1) {
            tb_info("sparkplug output: stopping: the graceful NDEATH", TB_S("output", m->out.name));
            /* this thread runs the loop (rep__mosq_run): final asks it to end after the
             * farewell's PUBACK (or its wait), nothing joins */
            rep__mosq_farewell(m->conn, out.topic, out.payload, out.len, m->grace_ms, true);
        } else {
            rep__mosq_request_stop(m->conn);
        }
    }
    return wish;
}

static const rep_mosq_owner_ops_t owner_ops = {
    .next = sp_next, .acked = sp_acked, .session_lost = sp_lost, .idle = sp_idle,
};
static const rep_mosq_session_ops_t session_ops = {
    .connecting = sp_connecting, .subscribed = sp_subscribed, .message = sp_message,
};

/* ---- the kind ----------------------------------------------------------------------------- */

/* The metric names' topic part: the upstream name after /<edge_name>/, else without its '/'. */
static char *prefix_of(const char *topic, const char *edge)
{
    size_t el = edge ? strlen(edge) : 0;
    if (el && topic[0] == '/' && strncmp(topic + 1, edge, el) == 0 && topic[1 + el] == '/' && topic[2 + el])
        return tb_strdup(topic + 2 + el);
    while (*topic == '/')
        topic++;
    return tb_strdup(*topic ? topic : "data");
}

static int load_state(rep_sparkplug_t *m, const char *key, void **p, size_t *n)
{
    int rc = wal_output_state_get(m->out.e->wal, m->out.wal_id, key, p, n);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        tb_warn("sparkplug output: a stored state blob cannot be read; starting without it",
                TB_S("output", m->out.name), TB_S("key", key), TB_ERR(rc));
    return rc;
}

static int sparkplug_init(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    rep_engine_t *e = o->e;
    const cfg_output_t *c = rep__mqtt_find_cfg(cfg, o->name);
    if (!c || !e) {
        snprintf(err, errlen, "outputs[%s]: not in the configuration", o->name);
        return TB_ECONFIG;
    }
    char host[256];
    int port = 0;
    if (!c->broker || rep__mqtt_split_broker(c->broker, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "outputs[%s].broker: expected host:port, got \"%s\"", o->name,
                 c->broker ? c->broker : "");
        return TB_ECONFIG;
    }
    if (!c->group_id || !*c->group_id) {
        snprintf(err, errlen, "outputs[%s].group_id: required for kind sparkplug", o->name);
        return TB_ECONFIG;
    }
    const char *edge_node = c->edge_node_id && *c->edge_node_id ? c->edge_node_id : cfg->edge.edge_name;
    m->grace_ms = cfg->replicator.shutdown_grace_ms;
    m->recheck_ms = cfg->wal.fsync == CFG_FSYNC_INTERVAL ? TB_MAX(5u, cfg->wal.fsync_interval_ms / 4) : 0;
    int rc = rep__mqtt_router(cfg, &m->router, err, errlen);
    if (rc < 0)
        return rc;
    char why[512];
    if (c->device && *c->device) {
        size_t nup;
        const char *const *names = router_upstream_topics(m->router, &nup);
        uint32_t *rules = tb_calloc(cfg->mqtt.nmappings + 1, sizeof *rules);
        size_t nr = 0;
        for (size_t r = 0; r < cfg->mqtt.nmappings; r++) {
            size_t nt;
            const uint32_t *ids = router_rule_topics(m->router, r, &nt);
            bool feeds = false;
            for (size_t k = 0; k < nt && !feeds; k++)
                feeds = ids[k] < nup && rep__output_wants(o, names[ids[k]]);
            if (feeds)
                rules[nr++] = (uint32_t)r;
        }
        rc = router_out_compile(m->router, c->device, rules, nr, ROUTER_OUT_LEVEL, &m->device, why, sizeof why);
        free(rules);
        if (rc < 0) {
            snprintf(err, errlen, "outputs[%s].device: %s", o->name, why);
            return rc;
        }
    }
    rep__spb_sess_opts_t so = {
        .group_id = c->group_id,
        .edge_node_id = edge_node,
        .primary_host_id = c->primary_host_id,
        .devices = m->device != NULL,
        .confirm_timeout_ms = cfg->replicator.ack_timeout_ms,
        .live_window_ms = cfg->replicator.live_window_ms,
        .separate_history = c->historical == CFG_SPB_HIST_SEPARATE,
        .pack = SPB_PACK,
        .max_unconfirmed = c->max_inflight ? c->max_inflight : 1,
    };
    void *blob = NULL, *table = NULL;
    size_t blob_n = 0, table_n = 0;
    (void)load_state(m, "bdseq", &blob, &blob_n);
    (void)load_state(m, "aliases", &table, &table_n);
    rc = rep__spb_sess_new(&so, &src_ops, m, blob, blob_n, &m->sess, why, sizeof why);
    free(blob);
    if (rc < 0) {
        free(table);
        snprintf(err, errlen, "outputs[%s]: %s", o->name, why);
        return rc;
    }
    if (table) {
        if (rep__spb_sess_load_table(m->sess, table, table_n, why, sizeof why) < 0)
            tb_warn("sparkplug output: the stored aliases are refused; new aliases from 1",
                    TB_S("output", o->name), TB_S("error", why));
        free(table);
    }
    uint32_t cap = (uint32_t)TB_MIN((uint64_t)so.max_unconfirmed * SPB_PACK, (uint64_t)SPB_LANE_CAP);
    m->lanes = tb_calloc(e->ntopics + 1, sizeof *m->lanes);
    for (size_t i = 0; i < e->ntopics; i++) {
        if (!rep__output_wants(o, e->topics[i].name))
            continue;
        slane_t *sl = tb_calloc(1, sizeof *sl);
        wal_topic_stats_t ws;
        wal_topic_stats(e->topics[i].wal, &ws);
        uint64_t start = ws.open_offset ? ws.open_offset : ws.next_offset;
        rc = rep__lane_init(&sl->lane, o, i, e->topics[i].name, e->topics[i].wal, start, cap, WAL_START_LATEST);
        if (rc < 0) {
            free(sl);
            snprintf(err, errlen, "outputs[%s]: topic %s: cannot open its log cursor: %s", o->name,
                     e->topics[i].name, tb_strerror(rc));
            return rc;
        }
        sl->idx = m->nlanes;
        m->lanes[m->nlanes++] = sl;
        sl->prefix = prefix_of(e->topics[i].name, cfg->edge.edge_name);
        sl->enc.max_age_ms = e->topics[i].max_age_ms;
        sl->ready = true;
        sl->lane.st.state = REP_TOPIC_CONNECTING;
        rep__lane_publish(&sl->lane);
    }
    if (m->nlanes == 0) {
        tb_warn("sparkplug output carries no topic", TB_S("output", o->name));
        return 0;
    }
    rep_mosq_opts_t mo;
    rep__mosq_opts_default(&mo);
    mo.host = host;
    mo.port = port;
    mo.protocol = (int)c->protocol;
    mo.client_id = c->client_id;
    mo.qos = 0;                 /* Sparkplug data is QoS 0; its delivery is confirmed by a round trip */
    mo.clean_session = true;    /* Sparkplug B 3.0: Clean Session / Clean Start true */
    mo.max_inflight = c->max_inflight;
    mo.tls = c->has_tls;
    mo.ca_file = c->tls.ca_file;
    mo.cert_file = c->tls.cert_file;
    mo.key_file = c->tls.key_file;
    mo.username = c->username;
    mo.password_file = c->password_file;
    mo.connect_timeout_ms = cfg->replicator.rpc_timeout_ms;
    mo.ack_timeout_ms = cfg->replicator.ack_timeout_ms;
    mo.retry_initial_ms = cfg->replicator.retry_initial_ms;
    mo.retry_max_ms = cfg->replicator.retry_max_ms;
    rep__spb_subscriptions(m->sess, &mo.subscribe, &mo.nsubscribe);
    rc = rep__mosq_new(&mo, 1, &owner_ops, m, &m->conn, why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s]: %s", o->name, why);
        return rc;
    }
    rep__mosq_set_session_ops(m->conn, &session_ops);
    if (c->has_tls && !mo.tls_verify)
        tb_warn("sparkplug output: TLS without verification", TB_S("output", o->name));
    publish_session(m);
    return 0;
}

static void finish(rep_sparkplug_t *m)
{
    m->stopped = true;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        flush_acks(m->lanes[i]);
        m->lanes[i]->lane.st.state = REP_TOPIC_STOPPED;
        rep__lane_publish(&m->lanes[i]->lane);
    }
    if (m->sess)
        publish_session(m);
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__output_post(&m->out, ev);
}

static void *sparkplug_main(void *arg)
{
    rep_sparkplug_t *m = arg;
    if (m->conn)
        rep__mosq_run(m->conn); /* until the farewell's end or request_stop (sp_idle) */
    finish(m);
    return NULL;
}

static void sparkplug_wake(rep_output_t *o)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    if (m->conn)
        rep__mosq_kick(m->conn);
}

static void sparkplug_lane_kicked(rep_output_t *o, rep__lane_t *l)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    slane_t *sl = (slane_t *)l; /* the lane is the first member */
    bool idle = l->win.n == 0 && !l->src.has_held;
    if (idle)
        l->progress_ms = tb_mono_ms();
    sl->ready = true;
    sl->dirty = true;
    if (idle && m->seen_state != REP_MOSQ_UP && !m->stopping && rep__lane_ensure_reader(l)) {
        const wal_record_t *rec;
        (void)rep__src_peek(&l->src, &rec);
    }
}

static void sparkplug_stop(rep_output_t *o)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    m->stopping = true; /* sp_idle sends the NDEATH at the end of this turn */
}

static int sparkplug_reconfigure(rep_output_t *o, const rep_output_cfg_t *next)
{
    (void)o;
    (void)next;
    return TB_EUNSUPPORTED;
}

static void sparkplug_release(rep_output_t *o, rep__batch_t *b)
{
    (void)o;
    (void)b;
}

static void sparkplug_fini(rep_output_t *o)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    rep__mosq_free(m->conn);
    m->conn = NULL;
    rep__spb_sess_free(m->sess);
    m->sess = NULL;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        rep__lane_fini(&m->lanes[i]->lane);
        free(m->lanes[i]->prefix);
        free(m->lanes[i]);
    }
    free(m->lanes);
    router_out_free(m->device);
    router_free(m->router);
}

static const char *phase_name(rep__spb_phase_t p)
{
    static const char *const n[] = { "down", "subscribing", "refused", "wait_host", "up", "leaving", "stopped" };
    return (unsigned)p < TB_ARRAY_LEN(n) ? n[p] : "?";
}

static void sparkplug_stats(rep_output_t *o, rep_output_stats_t *st)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    pthread_mutex_lock(&o->mu);
    st->dead_letters = m->dead_letters;
    rep__spb_sess_stats_t ss = m->pub_ss;
    uint8_t seq = m->pub_seq;
    pthread_mutex_unlock(&o->mu);
    st->sparkplug = (rep_spb_stats_t){ .valid = m->sess != NULL, .phase = phase_name(ss.phase), .bdseq = ss.bdseq,
                                       .connects = ss.connects, .nbirths = ss.nbirths, .dbirths = ss.dbirths,
                                       .seq = seq, .data_msgs = ss.data_msgs, .metrics = ss.metrics,
                                       .confirmed = ss.confirmed_msgs, .rebirth_cmds = ss.rebirth_cmds,
                                       .deadline_ends = ss.deadline_ends, .host_online = ss.host_online };
    if (!m->conn) {
        st->state = m->stopped ? "stopped" : "idle";
        return;
    }
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    st->state = rep__mosq_state_name(cs.state);
    st->up = cs.state == REP_MOSQ_UP;
    /* the session's words first (a refused subscription, a persist failure), then the connection's */
    size_t k = (size_t)snprintf(st->last_error, sizeof st->last_error, "%s", ss.last_error);
    if (cs.last_error[0] && k + 3 < sizeof st->last_error)
        snprintf(st->last_error + k, sizeof st->last_error - k, "%s%.*s", k ? "; " : "",
                 (int)(sizeof st->last_error - k - 3), cs.last_error);
    st->attempts = cs.attempts;
    st->sessions = cs.sessions;
    st->refusals = cs.refusals;
    st->failures = cs.failures;
    st->inflight = cs.inflight;
    st->window = cs.window;
    st->backoff_ms = cs.backoff_ms;
    st->sparkplug.unconfirmed = cs.inflight;
}

const rep_output_ops_t rep__sparkplug_ops = {
    .kind = REP_KIND_SPARKPLUG,
    .name = "sparkplug",
    .size = sizeof(rep_sparkplug_t),
    .init = sparkplug_init,
    .main = sparkplug_main,
    .wake = sparkplug_wake,
    .lane_kicked = sparkplug_lane_kicked,
    .stop = sparkplug_stop,
    .reconfigure = sparkplug_reconfigure,
    .release = sparkplug_release,
    .fini = sparkplug_fini,
    .stats = sparkplug_stats,
};
