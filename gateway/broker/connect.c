/*
 * connect.c: the CONNECT packet: version, limits, client identifier rules,
 * session attach and takeover, the will, and the CONNACK we answer with.
 *
 * Choices (docs/MQTT.md):
 *  - Past mqtt.max_connections a CONNECT is answered with a refusal
 *    (MQTT 5 0x97 Quota exceeded, 3.1.1 return code 3) and the connection
 *    closed: never a silent drop.
 *  - An empty client identifier is given one ("tb-" + 16 hex digits) and
 *    MQTT 5 returns it as Assigned Client Identifier; 3.1.1 refuses an
 *    empty identifier without Clean Session (return code 2), as the spec
 *    says.
 *  - A second connection with the same identifier takes over: the old one
 *    is closed (MQTT 5 reason 0x8E Session taken over).
 *  - Authentication (auth.c) comes after the cheap checks and before the
 *    session: with a password file the rest waits for the check, run on
 *    the thread pool (broker__connect_admit is that rest).
 */
#include "gateway/broker/broker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_CLIENT_ID 1024

void broker__connect_refuse(broker_conn_t *c, metrics_refuse_t counted, uint8_t reason5, const char *why)
{
    c->srv->conn_refused[counted]++;
    uint8_t out[64];
    uint8_t rc = c->version == MQTT_V5 ? reason5 : mqtt_connack_v311_from_reason(reason5);
    int n = mqtt_encode_connack(out, sizeof out, c->version, false, rc, NULL);
    if (n > 0)
        broker__conn_send(c, out, (size_t)n);
    broker__conn_close(c, 0, why);
}
#define refuse broker__connect_refuse

static char *assign_id(void)
{
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = tb_mono_ns();
        memcpy(rnd, &t, sizeof rnd);
    }
    char *id = tb_malloc(3 + 16 + 1);
    snprintf(id, 20, "tb-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
             rnd[5], rnd[6], rnd[7]);
    return id;
}

static uint8_t *dup_bytes(mqtt_bytes_t b)
{
    uint8_t *p = tb_malloc(b.n ? b.n : 1);
    memcpy(p, b.p, b.n);
    return p;
}

/* What a will holds in memory: its topic, payload and properties (the
 * attributes keep_will_props makes of them), counted in mqtt.max_will_bytes. */
static size_t will_size(const mqtt_connect_t *cn, bool v5)
{
    size_t n = cn->will_topic.n + cn->will_payload.n;
    if (!v5)
        return n;
    const mqtt_props_t *wp = &cn->will_props;
    if (MQTT_HAS(wp, MQTT_PROP_CONTENT_TYPE))
        n += strlen("mqtt.content_type") + wp->content_type.n;
    if (MQTT_HAS(wp, MQTT_PROP_RESPONSE_TOPIC))
        n += strlen("mqtt.response_topic") + wp->response_topic.n;
    mqtt_iter_t it;
    mqtt_iter_init(&it, &wp->user);
    mqtt_bytes_t k, v;
    while (mqtt_next_user_prop(&it, &k, &v))
        n += 10 + k.n + v.n;
    return n;
}

/* MQTT 5 will properties become attributes, the way a PUBLISH's do. */
static void keep_will_props(broker_conn_will_t *w, const mqtt_props_t *wp)
{
    size_t cap = 2 + wp->user.count;
    w->attrs = tb_calloc(cap, sizeof *w->attrs);
    size_t n = 0;
    if (MQTT_HAS(wp, MQTT_PROP_CONTENT_TYPE)) {
        w->attrs[n].key = (uint8_t *)tb_strdup("mqtt.content_type");
        w->attrs[n].key_len = strlen("mqtt.content_type");
        w->attrs[n].val = dup_bytes(wp->content_type);
        w->attrs[n].val_len = wp->content_type.n;
        n++;
    }
    if (MQTT_HAS(wp, MQTT_PROP_RESPONSE_TOPIC)) {
        w->attrs[n].key = (uint8_t *)tb_strdup("mqtt.response_topic");
        w->attrs[n].key_len = strlen("mqtt.response_topic");
        w->attrs[n].val = dup_bytes(wp->response_topic);
        w->attrs[n].val_len = wp->response_topic.n;
        n++;
    }
    mqtt_iter_t it;
    mqtt_iter_init(&it, &wp->user);
    mqtt_bytes_t k, v;
    while (n < cap && mqtt_next_user_prop(&it, &k, &v)) {
        char *key = tb_malloc(10 + k.n + 1);
        memcpy(key, "mqtt.user.", 10);
        memcpy(key + 10, k.p, k.n);
        key[10 + k.n] = '\0';
        w->attrs[n].key = (uint8_t *)key;
        w->attrs[n].key_len = 10 + k.n;
        w->attrs[n].val = dup_bytes(v);
        w->attrs[n].val_len = v.n;
        n++;
    }
    w->nattrs = n;
}

void broker__on_connect(broker_conn_t *c, const mqtt_packet_t *pkt, const uint8_t *raw, size_t rawlen)
{
    broker_t *srv = c->srv;
    const mqtt_connect_t *cn = &pkt->u.connect;
    c->version = pkt->version == MQTT_V5 ? MQTT_V5 : MQTT_V311;

    if (srv->draining) {
        refuse(c, METRICS_REFUSE_SHUTTING_DOWN, MQTT_RC_SERVER_UNAVAILABLE, "server is shutting down");
        return;
    }
    /* every socket counts, this one included, until its descriptor is released:
     * those waiting for CONNECT and those closing too */
    if (srv->nconns + srv->nreleasing > srv->max_connections) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("connection refused: mqtt.max_connections reached",
                    TB_U("max_connections", srv->max_connections), TB_S("peer", broker__conn_peer(c)),
                    TB_U("suppressed", skipped));
        refuse(c, METRICS_REFUSE_MAX_CONNECTIONS, MQTT_RC_QUOTA_EXCEEDED,
               "mqtt.max_connections reached");
        return;
    }
    if (cn->client_id.n > MAX_CLIENT_ID) {
        refuse(c, METRICS_REFUSE_CLIENT_ID, MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID,
               "client identifier longer than 1024 bytes");
        return;
    }
    if (memchr(cn->client_id.p, '\0', cn->client_id.n)) {
        refuse(c, METRICS_REFUSE_CLIENT_ID, MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID, "client identifier contains NUL");
        return;
    }
    /* before anything touches a session: an impostor takes none over (auth.c) */
    if (broker__auth_connect(c, pkt, raw, rawlen) != BROKER_AUTH_OK)
        return;
    broker__connect_admit(c, pkt);
}

void broker__connect_admit(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    broker_t *srv = c->srv;
    const mqtt_connect_t *cn = &pkt->u.connect;
    if (srv->draining) { /* the drain began while its password was checked */
        refuse(c, METRICS_REFUSE_SHUTTING_DOWN, MQTT_RC_SERVER_UNAVAILABLE, "server is shutting down");
        return;
    }
    bool assigned = false;
    if (cn->client_id.n == 0) {
        if (c->version != MQTT_V5 && !cn->clean_start) {
            refuse(c, METRICS_REFUSE_CLIENT_ID, MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID,
                   "empty client identifier without clean session");
            return;
        }
        c->client_id = assign_id();
        assigned = true;
    } else {
        c->client_id = tb_strndup((const char *)cn->client_id.p, cn->client_id.n);
    }

    c->keep_alive = cn->keep_alive;
    uint32_t expiry = 0;
    bool expiry_capped = false;
    if (c->version == MQTT_V5) {
        if (MQTT_HAS(&pkt->props, MQTT_PROP_SESSION_EXPIRY))
            expiry = pkt->props.session_expiry;
        if (MQTT_HAS(&pkt->props, MQTT_PROP_MAXIMUM_PACKET_SIZE))
            c->client_max_packet = pkt->props.maximum_packet_size;
        c->request_problem_info = !MQTT_HAS(&pkt->props, MQTT_PROP_REQUEST_PROBLEM_INFO) ||
                                  pkt->props.request_problem_info;
        if (MQTT_HAS(&pkt->props, MQTT_PROP_AUTH_METHOD)) {
            refuse(c, METRICS_REFUSE_AUTH, MQTT_RC_BAD_AUTHENTICATION_METHOD,
                   "enhanced authentication is not supported");
            return;
        }
    } else if (!cn->clean_start) {
        expiry = UINT32_MAX; /* 3.1.1: the session lasts until the client cleans it */
    }
    if (expiry > srv->cfg->mqtt.max_session_expiry_s) {
        expiry = srv->cfg->mqtt.max_session_expiry_s;
        expiry_capped = c->version == MQTT_V5;
    }

    if (cn->has_will && cn->will_payload.n > srv->cfg->mqtt.max_payload_size) {
        refuse(c, METRICS_REFUSE_WILL_INVALID, MQTT_RC_PACKET_TOO_LARGE, "will payload over mqtt.max_payload_size");
        return;
    }
    /* the rule a PUBLISH meets (publish.c): its properties, the will and retain marks */
    if (cn->has_will && c->version == MQTT_V5 && 2u + cn->will_props.user.count + 2u > BROKER_MAX_ATTRS) {
        refuse(c, METRICS_REFUSE_WILL_INVALID, MQTT_RC_IMPLEMENTATION_SPECIFIC_ERROR,
               "will with more properties than a record holds");
        return;
    }
    if (cn->has_will && !broker__acl_may_write(c, cn->will_topic.p, cn->will_topic.n)) {
        refuse(c, METRICS_REFUSE_WILL_DENIED, MQTT_RC_NOT_AUTHORIZED, "its will's topic is not writable (auth.acl_file)");
        return;
    }
    size_t wbytes = cn->has_will ? will_size(cn, c->version == MQTT_V5) : 0;
    if (cn->has_will && srv->will_bytes + wbytes > srv->cfg->mqtt.max_will_bytes) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("connection refused: the wills held in memory would pass mqtt.max_will_bytes",
                    TB_U("max_will_bytes", srv->cfg->mqtt.max_will_bytes), TB_U("will_bytes", srv->will_bytes),
                    TB_S("peer", broker__conn_peer(c)), TB_U("suppressed", skipped));
        refuse(c, METRICS_REFUSE_MAX_WILL_BYTES, MQTT_RC_QUOTA_EXCEEDED, "mqtt.max_will_bytes reached");
        return;
    }
    if (cn->has_will) {
        broker_conn_will_t *w = c->will = tb_calloc(1, sizeof *w);
        w->bytes = wbytes;
        srv->will_bytes += wbytes;
        w->qos = cn->will_qos;
        w->retain = cn->will_retain;
        w->topic = tb_strndup((const char *)cn->will_topic.p, cn->will_topic.n);
        w->payload = dup_bytes(cn->will_payload);
        w->len = cn->will_payload.n;
        if (c->version == MQTT_V5) {
            if (MQTT_HAS(&cn->will_props, MQTT_PROP_WILL_DELAY))
                w->delay_s = cn->will_props.will_delay;
            keep_will_props(w, &cn->will_props);
        }
    }

    if (c->version == MQTT_V5 && srv->cfg->mqtt.topic_alias_maximum > 0)
        c->aliases = tb_calloc(srv->cfg->mqtt.topic_alias_maximum + 1u, sizeof *c->aliases);
    if (c->aliases && !broker__conn_hold(c, (int64_t)((srv->cfg->mqtt.topic_alias_maximum + 1u) * sizeof *c->aliases))) {
        broker__conn_give_up(c, METRICS_CLOSE_MEMORY_LIMIT, MQTT_RC_QUOTA_EXCEEDED,
                             "its topic alias table would pass mqtt.max_partial_bytes");
        return;
    }

    if (expiry > 0 && srv->npersistent >= srv->cfg->mqtt.max_sessions) {
        /* a new persistent session past the bound is refused: no remembered one is forgotten for it */
        broker_session_t *old = broker__session_find(srv, c->client_id);
        if (!old || !old->persistent) {
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
            uint64_t skipped;
            if (tb_ratelimit(&rl, &skipped))
                tb_warn("connection refused: mqtt.max_sessions persistent sessions are remembered",
                        TB_U("max_sessions", srv->cfg->mqtt.max_sessions), TB_S("peer", broker__conn_peer(c)),
                        TB_U("suppressed", skipped));
            refuse(c, METRICS_REFUSE_MAX_SESSIONS, MQTT_RC_QUOTA_EXCEEDED, "mqtt.max_sessions reached");
            return;
        }
    }
    if (expiry > 0 && srv->journal_full) {
        broker_session_t *old = broker__session_find(srv, c->client_id);
        if (!old || !old->persistent) {
            refuse(c, METRICS_REFUSE_JOURNAL_FULL, MQTT_RC_QUOTA_EXCEEDED,
                   "the session journal is full (mqtt.max_journal_bytes)");
            return;
        }
    }
    bool present = false;
    c->session = broker__session_attach(srv, c, cn->clean_start, expiry, &present);
    c->connected = true;
    c->last_rx_ms = uv_now(srv->loop); /* its keep alive runs from its CONNECT */
    srv->nconnected++;
    if (c->listener)
        c->listener->nconnected++;

    mqtt_props_t props;
    memset(&props, 0, sizeof props);
    if (c->version == MQTT_V5) {
        props.receive_maximum = (uint16_t)srv->cfg->mqtt.receive_maximum;
        MQTT_SET(&props, MQTT_PROP_RECEIVE_MAXIMUM);
        props.maximum_packet_size = broker__max_packet(srv->cfg);
        MQTT_SET(&props, MQTT_PROP_MAXIMUM_PACKET_SIZE);
        if (srv->cfg->mqtt.topic_alias_maximum) {
            props.topic_alias_maximum = (uint16_t)srv->cfg->mqtt.topic_alias_maximum;
            MQTT_SET(&props, MQTT_PROP_TOPIC_ALIAS_MAXIMUM);
        }
        props.wildcard_sub_available = 0;
        MQTT_SET(&props, MQTT_PROP_WILDCARD_SUB_AVAILABLE);
        props.sub_id_available = 0;
        MQTT_SET(&props, MQTT_PROP_SUB_ID_AVAILABLE);
        props.shared_sub_available = 0;
        MQTT_SET(&props, MQTT_PROP_SHARED_SUB_AVAILABLE);
        if (assigned) {
            props.assigned_client_id = MQTT_BYTES_STR(c->client_id);
            MQTT_SET(&props, MQTT_PROP_ASSIGNED_CLIENT_ID);
        }
        if (expiry_capped) {
            props.session_expiry = expiry;
            MQTT_SET(&props, MQTT_PROP_SESSION_EXPIRY);
        }
    }
    uint8_t out[512];
    int n = mqtt_encode_connack(out, sizeof out, c->version, present, 0, &props);
    if (n > 0)
        broker__conn_send(c, out, (size_t)n);
    tb_debug("client connected", TB_S("client", c->client_id), TB_S("peer", broker__conn_peer(c)),
             TB_I("version", c->version == MQTT_V5 ? 5 : (cn->protocol_level == MQTT_V31 ? 3 : 4)),
             TB_B("clean", cn->clean_start), TB_B("session_present", present));
}
