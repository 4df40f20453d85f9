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
 *   rep_mosq_lanes.c  one lane per topic the output carries (readers, WAL
 *                cursors, windows, stats), shared with the mqtt kind: the
 *                round robin, the pacer, acks, a lost session, lanes a
 *                reload adds.
 *
 * The session's source (rep__spb_src_ops_t) is the lanes: read() is
 * rep__mlanes_next (its record becomes one unit of the lane's window, token
 * = its offset; build gives its device); ack(lane, token) is
 * rep__mlanes_acked (the cursor moves once per turn of the loop, idle), so
 * the checkpoint moves only for records whose message the remote
 * confirmed; rewind() is rep__mlanes_session_lost (every lane back to its
 * checkpoint + 1).
 *
 * Pacing (outputs[].max_bytes_per_s, max_messages_per_s): the shared lanes
 * ask the output's pacer per record, so it applies to data only: births and
 * deaths are the session's and never wait (an NBIRTH held back would hold
 * every NDATA behind it). A record counts as one message of its stored
 * payload's bytes; one NDATA/DDATA packs up to SPB_PACK records, so the
 * PUBLISH rate is at most max_messages_per_s (docs/SPARKPLUG.md, "Pacing").
 *
 * Topics a reload adds (RELOAD.md 2.6): a lane joins at run time
 * (rep__mlanes_add); its first record names metrics not yet born, and the
 * session answers as for any new metric (rep__spb_data_add's
 * REP_SPB_REBIRTH): NBIRTH again for node metrics, the device's DBIRTH for
 * a device's, before the data that uses them (Sparkplug B: a new metric
 * requires a new birth).
 *
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

#define SPB_PACK 100         /* metrics per NDATA/DDATA at most (packed replay) */
#define SPB_LANE_CAP 8192    /* records of one lane read and not confirmed */

typedef struct slane {
    rep__mlane_t ml;            /* first: the shared lane (rep_mosq_lanes.c) */
    char *prefix;               /* the metric names' topic part */
    router_t *router;           /* a lane a reload added, with a device template using ${N}: the
                                   reload's mappings (the output's router is the start's); else NULL */
} slane_t;

typedef struct rep_sparkplug {
    rep_output_t out;           /* first */
    rep_mosq_t *conn;
    rep__spb_sess_t *sess;
    router_t *router;
    router_out_t *device;       /* NULL: node metrics */
    char *device_text;          /* its text, checked against the mappings of a reload that adds a topic */
    rep__mlanes_t lanes;        /* rep_mosq_lanes.c */
    char *edge_name;            /* edge.edge_name at init (prefix_of, also for lanes a reload adds) */
    uint32_t grace_ms;
    bool stopping, stop_sent, stopped;
    /* under out.mu: what /stats reads */
    uint64_t dead_letters;
    rep__spb_sess_stats_t pub_ss;
    uint8_t pub_seq;
    char devbuf[256];
} rep_sparkplug_t;

/* ---- the session's source: the lanes ------------------------------------------------ */

static void count_dead(rep_sparkplug_t *m, const char *lane, uint64_t offset, const char *why)
{
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t suppressed;
    if (tb_ratelimit(&rl, &suppressed))
        tb_warn("sparkplug output: a record cannot be carried: to the dead-letter log", TB_S("output", m->out.name),
                TB_S("topic", lane), TB_U("offset", offset), TB_S("reason", why), TB_U("suppressed", suppressed));
    pthread_mutex_lock(&m->out.mu);
    m->dead_letters++;
    pthread_mutex_unlock(&m->out.mu);
}

/* The device of a record into m->devbuf: 0 ("" = node metrics), or < 0 (a dead letter). */
static int device_of(rep_sparkplug_t *m, rep__mlane_t *ml, const wal_record_t *rec)
{
    m->devbuf[0] = 0;
    if (!m->device)
        return 0;
    router_match_t mt;
    router_out_ctx_t ctx = { .topic = { rec->mqtt_topic, rec->mqtt_topic_len },
                             .upstream = { ml->lane.name, strlen(ml->lane.name) } };
    const router_t *r = ((slane_t *)ml)->router ? ((slane_t *)ml)->router : m->router;
    if (router_match(r, rec->mqtt_topic, rec->mqtt_topic_len, &mt) >= 0)
        ctx.m = &mt;
    int n = router_out_expand(m->device, &ctx, m->devbuf, sizeof m->devbuf - 1);
    if (n <= 0)
        return -1;
    m->devbuf[n] = 0;
    return 0;
}

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

static int lane_setup(void *kind, rep__mlane_t *ml, const rep_topic_spec_t *spec, bool added)
{
    rep_sparkplug_t *m = kind;
    slane_t *sl = (slane_t *)ml;
    if (added && m->device && router_out_needs_match(m->device)) {
        int rc = rep__mqtt_added_router(&m->out, spec, m->device_text, ROUTER_OUT_LEVEL, &sl->router);
        if (rc < 0)
            return rc;
    }
    sl->prefix = prefix_of(ml->lane.name, m->edge_name);
    return 0;
}

static void lane_fini(void *kind, rep__mlane_t *ml)
{
    (void)kind;
    free(((slane_t *)ml)->prefix);
    router_free(((slane_t *)ml)->router);
}

/* A record goes into the session's next NDATA/DDATA: its device now (m->devbuf). The pacer
 * counts it as one message of its stored payload's size (a record is one metric set; the
 * session packs up to SPB_PACK of them in one MQTT message, so the PUBLISH rate stays at or
 * below max_messages_per_s). Births are the session's: never paced. */
static int build(void *kind, rep__mlane_t *ml, const wal_record_t *rec, uint64_t now_wall, rep__mlane_unit_t *u)
{
    (void)now_wall;
    rep_sparkplug_t *m = kind;
    if (device_of(m, ml, rec) < 0) {
        u->dl_reason = REP_DL_OUTPUT_UNROUTABLE;
        u->dl_error = "sparkplug: the device template gives no valid device id";
        count_dead(m, ml->lane.name, rec->offset, u->dl_error);
        return REP__ML_DEAD;
    }
    u->bytes = (uint32_t)TB_MIN(rec->payload_len, (size_t)UINT32_MAX);
    return REP__ML_SEND;
}

static const rep__mlanes_ops_t lanes_ops = {
    .lane_size = sizeof(slane_t), .setup = lane_setup, .build = build, .fini = lane_fini,
};

static int src_read(void *arg, rep__spb_rec_t *out)
{
    rep_sparkplug_t *m = arg;
    rep__mlane_t *ml;
    wal_record_t rec;
    if (!rep__mlanes_next(&m->lanes, &ml, &rec))
        return 0;
    *out = (rep__spb_rec_t){ .lane = ml->idx, .token = rec.offset, .device = m->devbuf,
                             .prefix = ((slane_t *)ml)->prefix, .schema = NULL, .payload = rec.payload,
                             .len = rec.payload_len, .ts = rec.publish_time_ms };
    return 1;
}

static void src_rewind(void *arg)
{
    rep_sparkplug_t *m = arg;
    rep__mlanes_session_lost(&m->lanes);
}

static void src_ack(void *arg, uint32_t lane, uint64_t token)
{
    rep_sparkplug_t *m = arg;
    rep__mlanes_acked(&m->lanes, lane, token);
}

static void src_dead(void *arg, const rep__spb_rec_t *r, const char *why)
{
    rep_sparkplug_t *m = arg;
    count_dead(m, r->lane < m->lanes.n ? m->lanes.v[r->lane]->lane.name : "?", r->token, why);
    if (r->lane < m->lanes.n) /* its unit waits in the window until the dead-letter log has it */
        rep__mlanes_dead(&m->lanes, m->lanes.v[r->lane], r->token, REP_DL_OUTPUT_TYPE_MISMATCH, why, true);
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
    rep__output_drain(&m->out); /* kicks (lane_kicked), topics added, stop */
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    int wish = rep__mlanes_turn(&m->lanes, cs.state, tb_mono_ms());
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
    rep_mosq_opts_t mo;
    int rc = rep__mqtt_conn_opts(cfg, c, host, sizeof host, &mo, err, errlen);
    if (rc < 0)
        return rc;
    mo.qos = 0;                 /* Sparkplug data is QoS 0; its delivery is confirmed by a round trip */
    mo.clean_session = true;    /* Sparkplug B 3.0: Clean Session / Clean Start true */
    if (!c->group_id || !*c->group_id) {
        snprintf(err, errlen, "outputs[%s].group_id: required for kind sparkplug", o->name);
        return TB_ECONFIG;
    }
    const char *edge_node = c->edge_node_id && *c->edge_node_id ? c->edge_node_id : cfg->edge.edge_name;
    m->grace_ms = cfg->replicator.shutdown_grace_ms;
    m->edge_name = cfg->edge.edge_name ? tb_strdup(cfg->edge.edge_name) : NULL;
    rc = rep__mqtt_router(cfg, &m->router, err, errlen);
    if (rc < 0)
        return rc;
    char why[512];
    if (c->device && *c->device) {
        size_t nr;
        uint32_t *rules = rep__mqtt_rules(o, m->router, cfg, &nr);
        m->device_text = tb_strdup(c->device);
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
    uint32_t recheck_ms = cfg->wal.fsync == CFG_FSYNC_INTERVAL ? TB_MAX(5u, cfg->wal.fsync_interval_ms / 4) : 0;
    rep__mlanes_init(&m->lanes, o, &lanes_ops, m, cap, recheck_ms);
    rc = rep__mlanes_setup(&m->lanes, err, errlen);
    if (rc < 0)
        return rc;
    if (m->lanes.n == 0) {
        tb_warn("sparkplug output carries no topic", TB_S("output", o->name));
        return 0;
    }
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
    rep__mlanes_finish(&m->lanes);
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
    rep__mlanes_kicked(&m->lanes, l, m->stopping);
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

/* ---- topics at run time (a reload: RELOAD.md 2.6, OUTPUTS.md 2.8) ------------------------- */

/* The loop thread. A device template with ${N} matches the new lane's records against the
 * reload's mappings. Refused (carried after a restart) without a connection (nothing carried at
 * start: the thread ended). The births the new metrics need are the session's
 * (rep__spb_data_add's REP_SPB_REBIRTH). */
static int sparkplug_add_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    if (!m->conn)
        return TB_EUNSUPPORTED;
    return rep__mlanes_add(&m->lanes, topic, spec);
}

/* The loop thread: a reload changed the topic's max_age. */
static int sparkplug_update_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    return rep__mlanes_update(&((rep_sparkplug_t *)o)->lanes, topic, spec);
}

static void sparkplug_dl_answer(rep_output_t *o, rep__dl_cmd_t *cmd)
{
    rep__mlanes_dl_answer(&((rep_sparkplug_t *)o)->lanes, cmd);
    rep__mosq_kick(((rep_sparkplug_t *)o)->conn); /* its unit may have left a full window */
}

static void sparkplug_topic_cmd(rep_output_t *o, rep__topic_cmd_t *cmd)
{
    rep_sparkplug_t *m = (rep_sparkplug_t *)o;
    rep__mlanes_topic_cmd(&m->lanes, cmd);
    rep__mosq_kick(m->conn);
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
    rep__mlanes_free(&m->lanes);
    free(m->edge_name);
    router_out_free(m->device);
    free(m->device_text);
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
    /* the session's words first (a refused subscription, a persist failure), then the connection's */
    rep__mqtt_conn_stats(m->conn, m->stopped, ss.last_error, st);
    st->sparkplug.unconfirmed = st->inflight;
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
    .add_topic = sparkplug_add_topic,
    .update_topic = sparkplug_update_topic,
    .topic_cmd = sparkplug_topic_cmd,
    .dl_answer = sparkplug_dl_answer,
};
