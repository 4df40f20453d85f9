/*
 * rep_mqtt.c: the MQTT output kind (rep__mqtt_ops; issue 17 O6,
 * docs/design/OUTPUTS.md 4; docs/REPLICATION.md, "The MQTT output").
 *
 * One rep__mosq_t per output (rep_mosq.c: libmosquitto on a poll() loop),
 * run on the output's own thread (rep__mosq_run), and one lane per topic
 * the output carries: rep_mosq_lanes.c, shared with the sparkplug kind,
 * keeps the lanes (readers, cursors, windows, the round robin, the pacer,
 * acks, a lost session, memory_first spills, lanes added by a reload).
 * The connection pulls messages with next(), reports acks with acked() and
 * a lost session with session_lost(); idle() runs once per turn of its
 * loop and drains the output's commands (kicks, topics added, stop), so
 * everything here happens on that one thread, without a lock of ours.
 *
 * What is this kind's own: a record becomes one PUBLISH (build:
 * rep__mqtt_build makes the topic from the remote_topic template and the
 * MQTT 5 properties; its packet size is what max_bytes_per_s counts); a
 * resend (an offset up to the lane's resend_upto: sent before a lost
 * session or a restart) is marked tributary.replayed=true (MQTT 5) and
 * counted; a record whose topic cannot be made is a dead letter; the stop
 * below. The checkpoint moves only on the remote's PUBACK/PUBCOMP (QoS 0:
 * the confirming UNSUBACK), never on send.
 *
 * Stop: no new message is handed out; what is in flight has
 * replicator.shutdown_grace_ms to be acknowledged, then the loop ends
 * (anything still unacknowledged is sent again at the next start, from the
 * checkpoint).
 */
#include "replicator/rep_int.h"
#include "replicator/rep_mosq_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mlane {
    rep__mlane_t ml;            /* first: the shared lane (rep_mosq_lanes.c) */
    rep_mqtt_tmpl_t tmpl;
    router_t *router;           /* a lane a reload added, with a template using ${N}: the reload's
                                   mappings (the output's router is the start's); else NULL */
} mlane_t;

typedef struct rep_mqtt {
    rep_output_t out;           /* first */
    rep_mosq_t *conn;
    router_t *router;
    router_out_t *remote_topic;
    char *remote_topic_text;    /* its text, checked against the mappings of a reload that adds a topic */
    rep__mlanes_t lanes;        /* rep_mosq_lanes.c */
    uint32_t live_window_ms;
    uint32_t grace_ms;
    int protocol;
    int qos;
    bool stopping, stopped;
    uint64_t stop_deadline;
    uint64_t dead_letters;      /* under out.mu */
    /* what build made of the record next() hands out */
    mosquitto_property *props;
    uint32_t skipped;
    char topic[ROUTER_OUT_MAX + 1];
} rep_mqtt_t;

/* ---- what a record becomes (the shared lanes' build) ------------------------------------- */

/* A record the output cannot carry: counted, and a dead letter (rep__mlanes_dead, OUTPUTS.md 4.7). */
static void dead_letter(rep_mqtt_t *m, rep__mlane_t *ml, const wal_record_t *rec, int why, rep__mlane_unit_t *u)
{
    u->dl_reason = REP_DL_OUTPUT_UNROUTABLE;
    u->dl_error = why == REP_MQTT_ETOOLONG ? "mqtt: the remote topic would be longer than 65535 bytes"
                                           : "mqtt: remote_topic expands to no valid topic for this record";
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t suppressed;
    if (tb_ratelimit(&rl, &suppressed))
        tb_warn("mqtt output: a record cannot be carried (its remote topic is too long or invalid): to the "
                "dead-letter log",
                TB_S("output", m->out.name), REP__LOG_LANE(&ml->lane), TB_U("offset", rec->offset),
                TB_S("reason", why == REP_MQTT_ETOOLONG ? "topic_too_long" : "topic_invalid"),
                TB_U("suppressed", suppressed));
    pthread_mutex_lock(&m->out.mu);
    m->dead_letters++;
    pthread_mutex_unlock(&m->out.mu);
}

static int lane_setup(void *kind, rep__mlane_t *ml, const rep_topic_spec_t *spec, bool added)
{
    rep_mqtt_t *m = kind;
    mlane_t *me = (mlane_t *)ml;
    if (added && router_out_needs_match(m->remote_topic)) {
        int rc = rep__mqtt_added_router(&m->out, spec, m->remote_topic_text, 0, &me->router);
        if (rc < 0)
            return rc;
    }
    me->tmpl = (rep_mqtt_tmpl_t){ .router = me->router ? me->router : m->router, .remote_topic = m->remote_topic,
                                  .upstream = ml->lane.name, .live_window_ms = m->live_window_ms,
                                  .protocol = m->protocol };
    return 0;
}

static void lane_fini(void *kind, rep__mlane_t *ml)
{
    (void)kind;
    router_free(((mlane_t *)ml)->router);
}

/* The topic and the MQTT 5 properties of rec, into m->topic and m->props; the packet's size
 * is what the pacer counts (max_bytes_per_s). */
static int build(void *kind, rep__mlane_t *ml, const wal_record_t *rec, uint64_t now_wall, rep__mlane_unit_t *u)
{
    rep_mqtt_t *m = kind;
    rep__lane_t *l = &ml->lane;
    const rep_mqtt_tmpl_t *tmpl = &((mlane_t *)ml)->tmpl;
    u->resend = rec->offset <= ml->resend_upto;
    u->replayed = u->resend || rep__mqtt_is_replayed(tmpl, rec, now_wall);
    m->skipped = 0;
    m->props = NULL;
    int n = rep__mqtt_build(tmpl, rec, u->replayed, m->topic, sizeof m->topic, &m->props, &m->skipped);
    l->st.attributes_skipped += m->skipped;
    if (n == -ENOMEM) {
        tb_error("mqtt output: out of memory building a message; trying again in 1 s", REP__LOG_LANE(l));
        return REP__ML_RETRY;
    }
    if (n < 0) {
        dead_letter(m, ml, rec, n, u);
        return REP__ML_DEAD;
    }
    size_t bytes = rep__mqtt_packet_bytes((size_t)n, rec->payload_len, m->qos, m->protocol, m->props);
    u->bytes = (uint32_t)TB_MIN(bytes, (size_t)UINT32_MAX);
    return REP__ML_SEND;
}

static void unbuild(void *kind, rep__mlane_t *ml)
{
    rep_mqtt_t *m = kind;
    mosquitto_property_free_all(&m->props);
    ml->lane.st.attributes_skipped -= m->skipped; /* counted again when it is built again */
}

static const rep__mlanes_ops_t lanes_ops = {
    .lane_size = sizeof(mlane_t), .setup = lane_setup, .build = build, .unbuild = unbuild, .fini = lane_fini,
};

/* ---- the connection's owner callbacks (its thread) --------------------------------------- */

static int mq_next(void *owner, rep_mosq_msg_t *msg)
{
    rep_mqtt_t *m = owner;
    if (m->stopping)
        return 0;
    rep__mlane_t *ml;
    wal_record_t rec;
    if (!rep__mlanes_next(&m->lanes, &ml, &rec))
        return 0;
    *msg = (rep_mosq_msg_t){ .lane = ml->idx, .token = rec.offset, .topic = m->topic, .payload = rec.payload,
                             .payload_len = rec.payload_len, .props = m->props };
    m->props = NULL; /* rep_mosq frees it */
    return 1;
}

static void mq_acked(void *owner, uint32_t lane, uint64_t token)
{
    rep_mqtt_t *m = owner;
    rep__mlanes_acked(&m->lanes, lane, token);
}

static void mq_session_lost(void *owner)
{
    rep_mqtt_t *m = owner;
    rep__mlanes_session_lost(&m->lanes);
}

static void finish(rep_mqtt_t *m)
{
    m->stopped = true;
    rep__mlanes_finish(&m->lanes);
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__output_post(&m->out, ev);
    rep__mosq_request_stop(m->conn);
}

static int mq_idle(void *owner)
{
    rep_mqtt_t *m = owner;
    if (m->stopped)
        return -1;
    rep__output_drain(&m->out); /* kicks (lane_kicked), topics added, stop */
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    uint64_t now = tb_mono_ms();
    int wish = rep__mlanes_turn(&m->lanes, cs.state, now);
    if (m->stopping) {
        if (cs.inflight == 0 || cs.state != REP_MOSQ_UP || now >= m->stop_deadline) {
            if (cs.inflight && cs.state == REP_MOSQ_UP)
                tb_warn("mqtt output: stopping with messages unacknowledged after the grace; they are sent "
                        "again at the next start", TB_S("output", m->out.name), TB_U("inflight", cs.inflight));
            finish(m);
            return -1;
        }
        int left = (int)TB_MIN(m->stop_deadline - now, (uint64_t)INT32_MAX);
        wish = wish < 0 ? left : TB_MIN(wish, left);
    }
    return wish;
}

static const rep_mosq_owner_ops_t owner_ops = {
    .next = mq_next, .acked = mq_acked, .session_lost = mq_session_lost, .idle = mq_idle,
};

/* ---- the kind ----------------------------------------------------------------------------- */

/* cfg -> the router the broker compiles (gateway/broker/server.c:build_router, whose checks
 * ran at load): for ${N}, ${#} and the rules a template is expanded for. */
int rep__mqtt_router(const cfg_t *cfg, router_t **out, char *err, size_t errlen)
{
    size_t n = cfg->mqtt.nmappings;
    router_spec_t *specs = tb_calloc(n ? n : 1, sizeof *specs);
    for (size_t i = 0; i < n; i++) {
        const cfg_mapping_t *mp = &cfg->mqtt.mappings[i];
        router_attr_spec_t *a = tb_calloc(mp->nattrs ? mp->nattrs : 1, sizeof *a);
        for (size_t j = 0; j < mp->nattrs; j++)
            a[j] = (router_attr_spec_t){ mp->attrs[j].name, mp->attrs[j].ref };
        router_values_spec_t *v = tb_calloc(mp->ncapvals ? mp->ncapvals : 1, sizeof *v);
        for (size_t j = 0; j < mp->ncapvals; j++)
            v[j] = (router_values_spec_t){ mp->capvals[j].ref, (const char *const *)mp->capvals[j].values,
                                             mp->capvals[j].nvalues };
        specs[i] = (router_spec_t){ mp->mqtt_pattern, mp->danube_topic, a, mp->nattrs, v, mp->ncapvals };
    }
    char why[512];
    int rc = router_compile(specs, n, out, why, sizeof why);
    for (size_t i = 0; i < n; i++) {
        free((void *)specs[i].attrs);
        free((void *)specs[i].capture_values);
    }
    free(specs);
    if (rc < 0)
        snprintf(err, errlen, "mqtt.topic_mappings: %s", why);
    return rc;
}

/* "host:port", "[v6]:port". */
int rep__mqtt_split_broker(const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return -1;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostlen)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p <= 0 || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    *port = (int)p;
    return 0;
}

const cfg_output_t *rep__mqtt_find_cfg(const cfg_t *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->noutputs; i++)
        if (strcmp(cfg->outputs[i].name, name) == 0)
            return &cfg->outputs[i];
    return NULL;
}

int rep__mqtt_conn_opts(const cfg_t *cfg, const cfg_output_t *c, char *host, size_t hostlen, rep_mosq_opts_t *mo,
                        char *err, size_t errlen)
{
    int port = 0;
    if (!c->broker || rep__mqtt_split_broker(c->broker, host, hostlen, &port) < 0) {
        snprintf(err, errlen, "outputs[%s].broker: expected host:port, got \"%s\"", c->name,
                 c->broker ? c->broker : "");
        return TB_ECONFIG;
    }
    rep__mosq_opts_default(mo);
    mo->host = host;
    mo->port = port;
    mo->protocol = (int)c->protocol;
    mo->client_id = c->client_id;
    mo->max_inflight = c->max_inflight;
    mo->tls = c->has_tls;
    mo->ca_file = c->tls.ca_file;
    mo->cert_file = c->tls.cert_file;
    mo->key_file = c->tls.key_file;
    mo->username = c->username;
    mo->password_file = c->password_file;
    mo->connect_timeout_ms = cfg->replicator.rpc_timeout_ms;
    mo->ack_timeout_ms = cfg->replicator.ack_timeout_ms;
    mo->retry_initial_ms = cfg->replicator.retry_initial_ms;
    mo->retry_max_ms = cfg->replicator.retry_max_ms;
    return 0;
}

uint32_t *rep__mqtt_rules(const rep_output_t *o, const router_t *router, const cfg_t *cfg, size_t *nr)
{
    size_t nup;
    const char *const *names = router_upstream_topics(router, &nup);
    uint32_t *rules = tb_calloc(cfg->mqtt.nmappings + 1, sizeof *rules);
    *nr = 0;
    for (size_t r = 0; r < cfg->mqtt.nmappings; r++) {
        size_t nt;
        const uint32_t *ids = router_rule_topics(router, r, &nt);
        bool feeds = false;
        for (size_t k = 0; k < nt && !feeds; k++)
            feeds = ids[k] < nup && rep__output_wants(o, names[ids[k]]);
        if (feeds)
            rules[(*nr)++] = (uint32_t)r;
    }
    return rules;
}

void rep__mqtt_conn_stats(rep_mosq_t *conn, bool stopped, const char *own_error, rep_output_stats_t *st)
{
    if (!conn) {
        st->state = stopped ? "stopped" : "idle";
        return;
    }
    rep_mosq_stats_t cs;
    rep__mosq_stats(conn, &cs);
    st->state = rep__mosq_state_name(cs.state);
    st->up = cs.state == REP_MOSQ_UP;
    size_t k = (size_t)snprintf(st->last_error, sizeof st->last_error, "%s", own_error);
    if (cs.last_error[0] && k + 3 < sizeof st->last_error)
        snprintf(st->last_error + k, sizeof st->last_error - k, "%s%.*s", k ? "; " : "",
                 (int)(sizeof st->last_error - k - (k ? 3 : 1)), cs.last_error);
    st->attempts = cs.attempts;
    st->sessions = cs.sessions;
    st->refusals = cs.refusals;
    st->failures = cs.failures;
    st->inflight = cs.inflight;
    st->window = cs.window;
    st->backoff_ms = cs.backoff_ms;
}

int rep__mqtt_added_router(const rep_output_t *o, const rep_topic_spec_t *spec, const char *tmpl, unsigned flags,
                           router_t **out)
{
    *out = NULL;
    if (!spec->mappings)
        return TB_EUNSUPPORTED; /* no configuration to match with: carried after a restart */
    char err[512];
    router_t *r = NULL;
    int rc = rep__mqtt_router(spec->mappings, &r, err, sizeof err);
    if (rc == 0) {
        size_t nr;
        uint32_t *rules = rep__mqtt_rules(o, r, spec->mappings, &nr);
        router_out_t *check = NULL;
        rc = router_out_compile(r, tmpl, rules, nr, flags, &check, err, sizeof err);
        router_out_free(check);
        free(rules);
    }
    if (rc < 0) {
        tb_warn("output: the template does not fit the mappings of the reload; the topic is carried after a "
                "restart", TB_S("output", o->name), TB_S("topic", spec->name), TB_S("error", err));
        router_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int mqtt_init(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
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
    mo.qos = (int)c->qos;
    /* a persistent session (the issue's) at QoS 0/1; QoS 2 needs a clean one (OUTPUTS.md 4.4) */
    mo.clean_session = c->qos == 2;
    m->live_window_ms = cfg->replicator.live_window_ms;
    m->grace_ms = cfg->replicator.shutdown_grace_ms;
    m->protocol = (int)c->protocol;
    m->qos = (int)c->qos;
    rc = rep__mqtt_router(cfg, &m->router, err, errlen);
    if (rc < 0)
        return rc;
    /* the rules whose topics this output carries: the template is expanded for them */
    size_t nr;
    uint32_t *rules = rep__mqtt_rules(o, m->router, cfg, &nr);
    char why[512];
    m->remote_topic_text = tb_strdup(c->remote_topic ? c->remote_topic : "${topic}");
    rc = router_out_compile(m->router, m->remote_topic_text, rules, nr, 0, &m->remote_topic, why, sizeof why);
    free(rules);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s].remote_topic: %s", o->name, why);
        return rc;
    }
    /* the lanes: every topic the output's filters select */
    uint32_t recheck_ms = cfg->wal.fsync == CFG_FSYNC_INTERVAL ? TB_MAX(5u, cfg->wal.fsync_interval_ms / 4) : 0;
    rep__mlanes_init(&m->lanes, o, &lanes_ops, m, c->max_inflight, recheck_ms);
    rc = rep__mlanes_setup(&m->lanes, err, errlen);
    if (rc < 0)
        return rc;
    if (m->lanes.n == 0) {
        tb_warn("mqtt output carries no topic", TB_S("output", o->name));
        return 0; /* nothing to connect for */
    }
    /* a connection lane per topic the engine may ever have: a reload adds lanes (rep__mlanes_add) */
    rc = rep__mosq_new(&mo, (uint32_t)TB_MIN(o->nlanes, (size_t)UINT32_MAX), &owner_ops, m, &m->conn, why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s]: %s", o->name, why);
        return rc;
    }
    if (c->has_tls && !mo.tls_verify)
        tb_warn("mqtt output: TLS without verification", TB_S("output", o->name));
    return 0;
}

static void *mqtt_main(void *arg)
{
    rep_mqtt_t *m = arg;
    for (uint32_t i = 0; i < m->lanes.n; i++) {
        rep__mlane_t *ml = m->lanes.v[i];
        if (ml->resend_upto > ml->lane.win.acked)
            tb_info("mqtt output: resending from the checkpoint; offsets up to resend_upto may already be at "
                    "the remote (duplicates: counted in /stats resent)",
                    TB_S("output", m->out.name), REP__LOG_LANE(&ml->lane), TB_U("from", ml->lane.win.acked + 1),
                    TB_U("resend_upto", ml->resend_upto));
    }
    if (!m->conn) { /* no lane: nothing to do, stopped already (the engine counts it) */
        m->stopped = true;
        rep_event_t *ev = tb_calloc(1, sizeof *ev);
        ev->kind = REP_EV_STOPPED;
        rep__output_post(&m->out, ev);
        return NULL;
    }
    rep__mosq_run(m->conn);
    return NULL;
}

static void mqtt_wake(rep_output_t *o)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    if (m->conn)
        rep__mosq_kick(m->conn);
}

static void mqtt_lane_kicked(rep_output_t *o, rep__lane_t *l)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    rep__mlanes_kicked(&m->lanes, l, m->stopping);
}

static void mqtt_stop(rep_output_t *o)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    if (m->stopping)
        return;
    m->stopping = true;
    m->stop_deadline = tb_mono_ms() + m->grace_ms;
}

static int mqtt_reconfigure(rep_output_t *o, const rep_output_cfg_t *next)
{
    (void)o;
    (void)next;
    return TB_EUNSUPPORTED; /* replaced whole (reload, later) */
}

/* ---- topics at run time (a reload: RELOAD.md 2.6, OUTPUTS.md 2.8) ------------------------- */

/* The loop thread: a topic a reload added that this output's filters select. A remote_topic
 * with ${N}/${#} matches the new lane's records against the reload's mappings (the output's
 * router is the start's, which does not know the new mapping). Refused (carried after a
 * restart) when the output has no connection: it carried nothing at start, its thread ended. */
static int mqtt_add_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    if (!m->conn)
        return TB_EUNSUPPORTED;
    return rep__mlanes_add(&m->lanes, topic, spec);
}

/* The loop thread: a reload changed the topic's max_age. */
static int mqtt_update_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    return rep__mlanes_update(&((rep_mqtt_t *)o)->lanes, topic, spec);
}

static void mqtt_dl_answer(rep_output_t *o, rep__dl_cmd_t *cmd)
{
    rep__mlanes_dl_answer(&((rep_mqtt_t *)o)->lanes, cmd);
    rep__mosq_kick(((rep_mqtt_t *)o)->conn); /* its unit may have left a full window */
}

static void mqtt_topic_cmd(rep_output_t *o, rep__topic_cmd_t *cmd)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    rep__mlanes_topic_cmd(&m->lanes, cmd);
    rep__mosq_kick(m->conn); /* next() has a lane more */
}

static void mqtt_release(rep_output_t *o, rep__batch_t *b)
{
    (void)o;
    (void)b; /* a unit holds no bytes: libmosquitto copied the PUBLISH */
}

static void mqtt_fini(rep_output_t *o)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    rep__mosq_free(m->conn);
    m->conn = NULL;
    mosquitto_property_free_all(&m->props);
    rep__mlanes_free(&m->lanes);
    router_out_free(m->remote_topic);
    free(m->remote_topic_text);
    router_free(m->router);
}

static void mqtt_stats(rep_output_t *o, rep_output_stats_t *st)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    pthread_mutex_lock(&o->mu);
    st->dead_letters = m->dead_letters;
    pthread_mutex_unlock(&o->mu);
    rep__mqtt_conn_stats(m->conn, m->stopped, "", st);
}

const rep_output_ops_t rep__mqtt_ops = {
    .kind = REP_KIND_MQTT,
    .name = "mqtt",
    .size = sizeof(rep_mqtt_t),
    .init = mqtt_init,
    .main = mqtt_main,
    .wake = mqtt_wake,
    .lane_kicked = mqtt_lane_kicked,
    .stop = mqtt_stop,
    .reconfigure = mqtt_reconfigure,
    .release = mqtt_release,
    .fini = mqtt_fini,
    .stats = mqtt_stats,
    .add_topic = mqtt_add_topic,
    .update_topic = mqtt_update_topic,
    .topic_cmd = mqtt_topic_cmd,
    .dl_answer = mqtt_dl_answer,
};
