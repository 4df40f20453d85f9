/*
 * rep_mqtt.c: the MQTT output kind (rep__mqtt_ops; issue 17 O6,
 * docs/design/OUTPUTS.md 4; docs/REPLICATION.md, "The MQTT output").
 *
 * One rep__mosq_t per output (rep_mosq.c: libmosquitto on a poll() loop),
 * run on the output's own thread (rep__mosq_run), and one lane per topic
 * the output carries (rep_lane.c: its reader, its WAL cursor, its window).
 * The connection pulls messages with next(), reports acks with acked() and
 * a lost session with session_lost(); idle() runs once per turn of its
 * loop and drains the output's commands (kicks, stop), so everything here
 * happens on that one thread, without a lock of ours.
 *
 *   next()          pick_lane() chooses a ready lane with room (round
 *                   robin for now: the one function the pacer of
 *                   OUTPUTS.md 2.7 replaces), its reader gives the next
 *                   record, rep__mqtt_build makes the topic and the MQTT 5
 *                   properties; the record becomes one unit of the lane's
 *                   window (first == last == its offset). The token is the
 *                   offset.
 *   acked(lane, t)  the units up to t are ACKED; at the end of the turn
 *                   (idle) rep__lane_acked moves the lane's cursor over
 *                   them: the checkpoint moves only on the remote's
 *                   PUBACK/PUBCOMP (QoS 0: the confirming UNSUBACK), never
 *                   on send.
 *   session_lost()  every lane with units in flight restarts at its last
 *                   acked offset + 1 (rep__lane_restart); what is handed out
 *                   again up to the highest offset sent before is a resend,
 *                   marked tributary.replayed=true (MQTT 5) and counted.
 *
 * Memory-first topics (wal.h MEMORY TIER, OUTPUTS.md 4.9): while the
 * connection is not up (backoff, refused, a session lost), a topic held in
 * memory is spilled to the log (wal_topic_spill, WAL_SPILL_OUTPUT), as the
 * Danube lanes do when their stream fails: no ack will come soon, so the
 * publishers are answered from the log. The WAL releases held records when
 * the minimum over the cursors of the topic's outputs passes them.
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

#define READ_RETRY_MS 1000

typedef struct mlane {
    rep__lane_t lane;           /* first */
    rep_mqtt_tmpl_t tmpl;
    rep__enc_t enc;             /* only max_age_ms (rep__too_old) */
    uint32_t idx;               /* the connection's lane index */
    bool ready;                 /* records may be readable */
    bool parked;                /* its next record waits for the pacer (held in its reader) */
    bool dirty;                 /* stats to publish at the next idle */
    bool acked_due;             /* units ACKED since the last rep__lane_acked (once per turn) */
    uint64_t retry_at;          /* a reader error: try again then (tb_mono_ms) */
    uint64_t resend_upto;       /* offsets up to this were sent before (a lost session, or a
                                   previous process: the resend window at start) */
} mlane_t;

typedef struct rep_mqtt {
    rep_output_t out;           /* first */
    rep_mosq_t *conn;
    router_t *router;
    router_out_t *remote_topic;
    mlane_t **lanes;            /* by the connection's lane index */
    uint32_t nlanes;
    uint32_t rr;                /* the round robin's next lane */
    uint32_t live_window_ms;
    uint32_t grace_ms;
    uint32_t recheck_ms;
    int protocol;
    int qos;
    bool stopping, stopped;
    uint64_t stop_deadline;
    rep_mosq_state_t seen_state;
    uint64_t dead_letters;      /* under out.mu */
    char topic[ROUTER_OUT_MAX + 1];
} rep_mqtt_t;

/* ---- the lane picker and the pacer (rep_pace.c, OUTPUTS.md 2.7) -------------------------------
 *
 * Lanes take turns (round robin) while nothing caps the output. With max_bytes_per_s or
 * max_messages_per_s set, each PUBLISH asks the output's pacer first (take()): refused, the
 * record goes back to the lane's reader (held, read again unchanged), the lane is parked,
 * and idle() wakes the loop when the pacer says the head can go; rep__pace_next then
 * unparks the lanes it grants, highest priority first, and their next ask is true. */

/* The next lane that may have a record, is not parked and has room in its window, round
 * robin; NULL: none. */
static mlane_t *pick_lane(rep_mqtt_t *m)
{
    for (uint32_t k = 0; k < m->nlanes; k++) {
        mlane_t *ml = m->lanes[(m->rr + k) % m->nlanes];
        if (ml->ready && !ml->parked && ml->lane.win.n < ml->lane.win.cap) {
            m->rr = (m->rr + k + 1) % m->nlanes;
            return ml;
        }
    }
    return NULL;
}

/* ---- units ------------------------------------------------------------------------------ */

/* A record that is not sent (too old for max_age, or a dead letter): a virtual unit that
 * moves the checkpoint over it in order (counted as dropped for its age: the accounting
 * invariant's dropped term). */
static void skip_record(mlane_t *ml, const wal_record_t *rec)
{
    rep__lane_t *l = &ml->lane;
    rep__batch_t *b = rep__window_push(&l->win);
    b->first = b->last = rec->offset;
    b->aged = 1;
    b->aged_new = rec->offset >= l->st.start_offset;
    b->state = REP__B_ACKED;
    rep__lane_acked(l);
}

static void dead_letter(rep_mqtt_t *m, mlane_t *ml, const wal_record_t *rec, int why)
{
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t suppressed;
    if (tb_ratelimit(&rl, &suppressed))
        tb_warn("mqtt output: a record cannot be carried (its remote topic is too long or invalid): skipped",
                TB_S("output", m->out.name), REP__LOG_LANE(&ml->lane), TB_U("offset", rec->offset),
                TB_S("reason", why == REP_MQTT_ETOOLONG ? "topic_too_long" : "topic_invalid"),
                TB_U("suppressed", suppressed));
    pthread_mutex_lock(&m->out.mu);
    m->dead_letters++;
    pthread_mutex_unlock(&m->out.mu);
    skip_record(ml, rec);
}

/* One record of ml into msg: 1, or 0 when the lane has nothing now (ready cleared) or the
 * record was not to be sent (skipped: the caller asks again). */
static int take(rep_mqtt_t *m, mlane_t *ml, rep_mosq_msg_t *msg)
{
    rep__lane_t *l = &ml->lane;
    wal_record_t rec;
    uint64_t now_wall = tb_wall_ms();
    int rc = rep__lane_next(l, &rec, now_wall);
    if (rc == WAL_END) {
        ml->ready = false;
        return 0;
    }
    if (rc < 0) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t suppressed;
        if (tb_ratelimit(&rl, &suppressed))
            tb_error("mqtt output: reading the log failed; trying again in 1 s", REP__LOG_LANE(l), TB_ERR(rc),
                     TB_U("suppressed", suppressed));
        ml->ready = false;
        ml->retry_at = tb_mono_ms() + READ_RETRY_MS;
        return 0;
    }
    ml->dirty = true;
    if (rep__too_old(&ml->enc, &rec, now_wall)) {
        skip_record(ml, &rec);
        return 0;
    }
    bool resend = rec.offset <= ml->resend_upto;
    bool replayed = resend || rep__mqtt_is_replayed(&ml->tmpl, &rec, now_wall);
    uint32_t skipped = 0;
    mosquitto_property *props = NULL;
    int n = rep__mqtt_build(&ml->tmpl, &rec, replayed, m->topic, sizeof m->topic, &props, &skipped);
    l->st.attributes_skipped += skipped;
    if (n == -ENOMEM) {
        tb_error("mqtt output: out of memory building a message; trying again in 1 s", REP__LOG_LANE(l));
        rep__lane_restart(l); /* the record is read again */
        ml->ready = false;
        ml->retry_at = tb_mono_ms() + READ_RETRY_MS;
        return 0;
    }
    if (n < 0) {
        dead_letter(m, ml, &rec, n);
        return 0;
    }
    if (rep__pace_limited(&m->out.pace)) {
        size_t bytes = rep__mqtt_packet_bytes((size_t)n, rec.payload_len, m->qos, m->protocol, props);
        if (!rep__pace_ask(&m->out.pace, &l->pace, (uint32_t)TB_MIN(bytes, (size_t)UINT32_MAX), 1,
                           tb_mono_ms())) {
            mosquitto_property_free_all(&props);
            l->st.attributes_skipped -= skipped; /* counted again when it is built again */
            l->src.has_held = true;              /* rep__lane_next peeked it: read again next time */
            ml->parked = true;
            return 0;
        }
    }
    rep__batch_t *b = rep__window_push(&l->win); /* pick_lane checked the room */
    b->first = b->last = rec.offset;
    b->count = 1;
    b->count_new = rec.offset >= l->st.start_offset;
    b->replayed = replayed;
    b->raw_bytes = rec.raw_len;
    b->first_publish_ms = b->last_publish_ms = rec.publish_time_ms;
    rep__window_mark_sending(&l->win, b, tb_mono_ms());
    rep__window_mark_sent(&l->win, b);
    l->st.batches_sent++;
    if (resend)
        l->st.batches_resent++;
    else if (replayed)
        l->st.messages_replayed++;
    *msg = (rep_mosq_msg_t){ .lane = ml->idx, .token = rec.offset, .topic = m->topic, .payload = rec.payload,
                             .payload_len = rec.payload_len, .props = props };
    return 1;
}

/* ---- the connection's owner callbacks (its thread) --------------------------------------- */

static int mq_next(void *owner, rep_mosq_msg_t *msg)
{
    rep_mqtt_t *m = owner;
    if (m->stopping)
        return 0;
    for (;;) {
        mlane_t *ml = pick_lane(m);
        if (!ml)
            return 0;
        if (take(m, ml, msg))
            return 1;
    }
}

static void mq_acked(void *owner, uint32_t lane, uint64_t token)
{
    rep_mqtt_t *m = owner;
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
    /* The cursor moves (rep__lane_acked: the counts exact, the stats published) once per turn of
     * the loop, in idle(), not per PUBACK: one cursor move and one stats copy for every ack a
     * read brought, instead of one each (the publish walks the window). */
    m->lanes[lane]->acked_due = true;
}

/* The acks of this turn: the cursor, the counts, the stats. */
static void flush_acks(mlane_t *ml)
{
    if (!ml->acked_due)
        return;
    ml->acked_due = false;
    rep__lane_acked(&ml->lane);
}

/* memory_first: no ack comes soon; what the log holds in memory goes to disk now. */
static void output_down(rep_mqtt_t *m)
{
    for (uint32_t i = 0; i < m->nlanes; i++)
        if (wal_topic_mode(m->lanes[i]->lane.wal) == WAL_MODE_MEMORY)
            wal_topic_spill(m->lanes[i]->lane.wal, WAL_SPILL_OUTPUT);
}

static void mq_session_lost(void *owner)
{
    rep_mqtt_t *m = owner;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        mlane_t *ml = m->lanes[i];
        rep__lane_t *l = &ml->lane;
        flush_acks(ml); /* what was acknowledged before the loss counts */
        if (l->win.n == 0)
            continue;
        uint64_t last = rep__window_at(&l->win, l->win.n - 1)->last;
        if (last > ml->resend_upto)
            ml->resend_upto = last;
        l->st.stream_resets++;
        rep__pace_leave(&m->out.pace, &l->pace, tb_mono_ms()); /* its unit is read again */
        ml->parked = false;
        rep__lane_restart(l); /* the reader reopens at the checkpoint + 1 */
        ml->ready = true;
        ml->dirty = true;
    }
    output_down(m);
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

static void finish(rep_mqtt_t *m)
{
    m->stopped = true;
    for (uint32_t i = 0; i < m->nlanes; i++) {
        flush_acks(m->lanes[i]);
        m->lanes[i]->lane.st.state = REP_TOPIC_STOPPED;
        rep__lane_publish(&m->lanes[i]->lane);
    }
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
    rep__output_drain(&m->out); /* kicks (lane_kicked) and stop */
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    uint64_t now = tb_mono_ms();
    bool down = cs.state == REP_MOSQ_BACKOFF || cs.state == REP_MOSQ_REFUSED;
    if (down)
        output_down(m);
    bool changed = cs.state != m->seen_state;
    m->seen_state = cs.state;
    int wish = -1;
    if (rep__pace_limited(&m->out.pace)) {
        uint64_t wait = UINT64_MAX;
        rep__pace_lane_t *pl;
        while ((pl = rep__pace_next(&m->out.pace, now, &wait)))
            ((mlane_t *)TB_CONTAINER_OF(pl, rep__lane_t, pace))->parked = false; /* lane first in mlane_t */
        if (wait != UINT64_MAX)
            wish = (int)TB_MIN(wait, (uint64_t)INT32_MAX);
    }
    for (uint32_t i = 0; i < m->nlanes; i++) {
        mlane_t *ml = m->lanes[i];
        rep__lane_t *l = &ml->lane;
        flush_acks(ml);
        if (ml->retry_at && now >= ml->retry_at) {
            ml->retry_at = 0;
            ml->ready = true;
        }
        if (ml->retry_at)
            wish = wish < 0 ? READ_RETRY_MS : TB_MIN(wish, READ_RETRY_MS);
        /* wal.fsync interval: the readable end moves without a kick */
        if (!ml->ready && !ml->retry_at && l->src.rd &&
            wal_topic_readable_end(l->wal) > wal_reader_offset(l->src.rd))
            ml->ready = true;
        if (m->recheck_ms && !ml->ready)
            wish = wish < 0 ? (int)m->recheck_ms : TB_MIN(wish, (int)m->recheck_ms);
        if (changed) {
            l->st.state = lane_state(cs.state);
            ml->dirty = true;
        }
        if (ml->dirty) {
            ml->dirty = false;
            rep__lane_publish(l);
        }
    }
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
    int port = 0;
    if (!c->broker || rep__mqtt_split_broker(c->broker, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "outputs[%s].broker: expected host:port, got \"%s\"", o->name,
                 c->broker ? c->broker : "");
        return TB_ECONFIG;
    }
    m->live_window_ms = cfg->replicator.live_window_ms;
    m->grace_ms = cfg->replicator.shutdown_grace_ms;
    m->recheck_ms = cfg->wal.fsync == CFG_FSYNC_INTERVAL ? TB_MAX(5u, cfg->wal.fsync_interval_ms / 4) : 0;
    m->protocol = (int)c->protocol;
    m->qos = (int)c->qos;
    int rc = rep__mqtt_router(cfg, &m->router, err, errlen);
    if (rc < 0)
        return rc;
    /* the rules whose topics this output carries: the template is expanded for them */
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
    char why[512];
    rc = router_out_compile(m->router, c->remote_topic ? c->remote_topic : "${topic}", rules, nr, 0,
                            &m->remote_topic, why, sizeof why);
    free(rules);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s].remote_topic: %s", o->name, why);
        return rc;
    }
    rep_mosq_opts_t mo;
    rep__mosq_opts_default(&mo);
    mo.host = host;
    mo.port = port;
    mo.protocol = (int)c->protocol;
    mo.client_id = c->client_id;
    mo.qos = (int)c->qos;
    /* a persistent session (the issue's) at QoS 0/1; QoS 2 needs a clean one (OUTPUTS.md 4.4) */
    mo.clean_session = c->qos == 2;
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
    /* the lanes: every topic the output's filters select */
    m->lanes = tb_calloc(e->ntopics + 1, sizeof *m->lanes);
    for (size_t i = 0; i < e->ntopics; i++) {
        if (!rep__output_wants(o, e->topics[i].name))
            continue;
        mlane_t *ml = tb_calloc(1, sizeof *ml);
        wal_topic_stats_t ws;
        wal_topic_stats(e->topics[i].wal, &ws);
        uint64_t start = ws.open_offset ? ws.open_offset : ws.next_offset;
        rc = rep__lane_init(&ml->lane, o, i, e->topics[i].name, e->topics[i].wal, start, c->max_inflight,
                            WAL_START_LATEST);
        if (rc < 0) {
            free(ml);
            snprintf(err, errlen, "outputs[%s]: topic %s: cannot open its log cursor: %s", o->name,
                     e->topics[i].name, tb_strerror(rc));
            return rc;
        }
        ml->idx = m->nlanes;
        m->lanes[m->nlanes++] = ml;
        ml->tmpl = (rep_mqtt_tmpl_t){ .router = m->router, .remote_topic = m->remote_topic,
                                      .upstream = ml->lane.name, .live_window_ms = m->live_window_ms,
                                      .protocol = m->protocol };
        ml->enc.max_age_ms = e->topics[i].max_age_ms;
        ml->ready = true;
        /* the resend window (OUTPUTS.md 4.8): what was readable before this start and is past
         * the checkpoint may already be at the remote */
        uint64_t end = wal_topic_readable_end(ml->lane.wal);
        ml->resend_upto = end ? end - 1 : 0;
        ml->lane.st.state = REP_TOPIC_CONNECTING;
        rep__lane_publish(&ml->lane);
    }
    if (m->nlanes == 0) {
        tb_warn("mqtt output carries no topic", TB_S("output", o->name));
        return 0; /* nothing to connect for */
    }
    rc = rep__mosq_new(&mo, m->nlanes, &owner_ops, m, &m->conn, why, sizeof why);
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
    for (uint32_t i = 0; i < m->nlanes; i++) {
        mlane_t *ml = m->lanes[i];
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
    mlane_t *ml = (mlane_t *)l; /* the lane is the first member */
    bool idle = l->win.n == 0 && !l->src.has_held;
    if (idle)
        l->progress_ms = tb_mono_ms(); /* caught up until now: a stall counts from here */
    ml->ready = true;
    ml->dirty = true;
    /* not sending: learn the oldest waiting message's age (it stays held for next()) */
    if (idle && m->seen_state != REP_MOSQ_UP && !m->stopping && rep__lane_ensure_reader(l)) {
        const wal_record_t *rec;
        (void)rep__src_peek(&l->src, &rec);
    }
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
    for (uint32_t i = 0; i < m->nlanes; i++) {
        rep__lane_fini(&m->lanes[i]->lane);
        free(m->lanes[i]);
    }
    free(m->lanes);
    router_out_free(m->remote_topic);
    router_free(m->router);
}

static void mqtt_stats(rep_output_t *o, rep_output_stats_t *st)
{
    rep_mqtt_t *m = (rep_mqtt_t *)o;
    pthread_mutex_lock(&o->mu);
    st->dead_letters = m->dead_letters;
    pthread_mutex_unlock(&o->mu);
    if (!m->conn) {
        st->state = m->stopped ? "stopped" : "idle";
        return;
    }
    rep_mosq_stats_t cs;
    rep__mosq_stats(m->conn, &cs);
    st->state = rep__mosq_state_name(cs.state);
    st->up = cs.state == REP_MOSQ_UP;
    snprintf(st->last_error, sizeof st->last_error, "%s", cs.last_error);
    st->attempts = cs.attempts;
    st->sessions = cs.sessions;
    st->refusals = cs.refusals;
    st->failures = cs.failures;
    st->inflight = cs.inflight;
    st->window = cs.window;
    st->backoff_ms = cs.backoff_ms;
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
};
