/*
 * publish.c: a PUBLISH from a device, from topic alias to the log.
 *
 *   alias -> QoS 2 duplicate check -> receive maximum -> route -> policy
 *   (enforce: validate) -> attributes -> ingest (the ack waits for the log)
 *
 * Every refusal is counted by reason and answered honestly: MQTT 5 gets a
 * PUBACK/PUBREC reason code; MQTT 3.1.1, which has no negative ack, has its
 * connection closed for QoS 1/2 (so the device retries later) except for a
 * payload that fails its schema, which is acknowledged, counted and kept
 * out of the log (docs/MQTT.md has the table). A refusal takes its place in
 * the connection's ack FIFO, so acks still leave in arrival order.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>


const char *broker_reject_name(broker_reject_t r)
{
    static const char *const names[] = { "unmatched", "invalid_schema", "not_ready", "too_large", "quota", "full" };
    _Static_assert(sizeof names / sizeof names[0] == BROKER_REJ__COUNT, "every reject reason has a name");
    return (unsigned)r < BROKER_REJ__COUNT ? names[r] : "?";
}

static void *scratch(broker_t *srv, size_t n)
{
    if (srv->scratch_cap < n) {
        srv->scratch_cap = TB_MAX(n, (size_t)4096);
        srv->scratch = tb_realloc(srv->scratch, srv->scratch_cap);
    }
    return srv->scratch;
}

/* Builds the attributes: captures, then MQTT 5 properties the way Danube's
 * edge names them, then the retain flag. Returns the count, or -1 if too many. */
static int build_attrs(broker_t *srv, const router_t *router, const router_match_t *m, const mqtt_packet_t *pkt,
                       wal_attr_t *out)
{
    int n = 0;
    size_t it = 0;
    const char *name;
    router_slice_t v;
    while (router_attr_next(router, m, &it, &name, &v)) {
        out[n].key = (const uint8_t *)name;
        out[n].key_len = strlen(name);
        out[n].val = (const uint8_t *)v.p;
        out[n].val_len = v.len;
        n++;
    }
    const mqtt_props_t *pr = &pkt->props;
    if (pkt->version == MQTT_V5) {
        if (MQTT_HAS(pr, MQTT_PROP_CONTENT_TYPE)) {
            out[n] = (wal_attr_t){ (const uint8_t *)"mqtt.content_type", 17, pr->content_type.p, pr->content_type.n };
            n++;
        }
        if (MQTT_HAS(pr, MQTT_PROP_RESPONSE_TOPIC)) {
            out[n] = (wal_attr_t){ (const uint8_t *)"mqtt.response_topic", 19, pr->response_topic.p,
                                   pr->response_topic.n };
            n++;
        }
        if (pr->user.count) {
            if (n + pr->user.count + 1 > BROKER_MAX_ATTRS)
                return -1;
            /* keys "mqtt.user.<key>" are built in one scratch buffer */
            uint8_t *buf = scratch(srv, pr->user.raw.n + 10u * pr->user.count);
            size_t off = 0;
            mqtt_iter_t iu;
            mqtt_iter_init(&iu, &pr->user);
            mqtt_bytes_t k, val;
            while (mqtt_next_user_prop(&iu, &k, &val)) {
                memcpy(buf + off, "mqtt.user.", 10);
                memcpy(buf + off + 10, k.p, k.n);
                out[n] = (wal_attr_t){ buf + off, 10u + k.n, val.p, val.n };
                off += 10u + k.n;
                n++;
            }
        }
    }
    if (pkt->u.publish.retain) {
        out[n] = (wal_attr_t){ (const uint8_t *)"mqtt.retain", 11, (const uint8_t *)"true", 4 };
        n++;
    }
    return n;
}

/* Resolves the topic alias; returns the topic or an empty view after closing. */
static mqtt_bytes_t resolve_alias(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    mqtt_bytes_t topic = pkt->u.publish.topic;
    if (pkt->version != MQTT_V5 || !MQTT_HAS(&pkt->props, MQTT_PROP_TOPIC_ALIAS))
        return topic;
    uint16_t a = pkt->props.topic_alias;
    if (!c->aliases || a == 0 || a > c->srv->cfg->mqtt.topic_alias_maximum) {
        broker__conn_close(c, MQTT_RC_TOPIC_ALIAS_INVALID, "topic alias above the advertised maximum");
        return (mqtt_bytes_t){ NULL, 0 };
    }
    if (topic.n > 0) {
        size_t old = c->aliases[a] ? strlen(c->aliases[a]) + 1 : 0;
        if (!broker__conn_hold(c, (int64_t)(topic.n + 1) - (int64_t)old)) {
            broker__conn_give_up(c, METRICS_CLOSE_MEMORY_LIMIT, MQTT_RC_QUOTA_EXCEEDED,
                                 "its topic aliases would pass mqtt.max_partial_bytes");
            return (mqtt_bytes_t){ NULL, 0 };
        }
        free(c->aliases[a]);
        c->aliases[a] = tb_strndup((const char *)topic.p, topic.n);
        return topic;
    }
    if (!c->aliases[a]) {
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "topic alias used before it was set");
        return (mqtt_bytes_t){ NULL, 0 };
    }
    return MQTT_BYTES_STR(c->aliases[a]);
}

/*
 * Keeps a payload its schema refused in the dead-letter log, with why, the
 * upstream topic and the client; the ack (MQTT 5: 0x99; 3.1.1: a plain
 * PUBACK, the only answer it has) waits until that record is stored, so a
 * 3.1.1 device's refused message is acknowledged only once it is kept.
 */
static void dead_letter(broker_conn_t *c, const mqtt_packet_t *pkt, mqtt_bytes_t topic, const broker_topic_t *t,
                        const char *why, broker_pending_t *p)
{
    const mqtt_publish_t *pub = &pkt->u.publish;
    wal_attr_t attrs[4] = {
        { (const uint8_t *)"dead_letter.error", 17, (const uint8_t *)why, strlen(why) },
        { (const uint8_t *)"dead_letter.topic", 17, (const uint8_t *)t->name, strlen(t->name) },
        { (const uint8_t *)"mqtt.client_id", 14, (const uint8_t *)c->client_id, strlen(c->client_id) },
        { (const uint8_t *)"dead_letter.source", 18, (const uint8_t *)"schema", 6 },
    };
    broker_msg_t msg = {
        .payload = pub->payload.p, .payload_len = pub->payload.n, .attrs = attrs, .nattrs = 4,
        .mqtt_topic = (const char *)topic.p, .mqtt_topic_len = topic.n, .qos = pub->qos, .retain = pub->retain,
    };
    if (broker__ingest(c->srv->dead_letter, &msg, c, p) < 0)
        broker__refuse(c, p, BROKER_REFUSE_LOG_UNAVAILABLE); /* not kept: do not say it was */
    else
        ((broker_topic_t *)t)->dead_letters[METRICS_DL_INVALID_SCHEMA]++; /* tributary_dead_letters_total */
}

/* Routes and stores one message. p: its pending ack (NULL for QoS 0). */
static void route_and_store(broker_conn_t *c, const mqtt_packet_t *pkt, mqtt_bytes_t topic, broker_pending_t *p)
{
    broker_t *srv = c->srv;
    const mqtt_publish_t *pub = &pkt->u.publish;
    c->published++; /* for the top talkers, whatever becomes of it */
    if (!broker__acl_may_write(c, topic.p, topic.n)) {
        broker__refuse(c, p, BROKER_REFUSE_NOT_AUTHORIZED); /* 3.1.1 QoS 1/2: closed; QoS 0: dropped, counted */
        return;
    }
    router_match_t m;
    const broker_gen_t *g = srv->gen; /* read once: this message is routed wholly by it (RELOAD.md 2.4) */
    int rule = router_match(g->router, (const char *)topic.p, topic.n, &m);
    if (rule < 0) {
        srv->unmatched_dropped++;
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        bool drop = g->unmatched == CFG_UNMATCHED_DROP;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("PUBLISH to a topic no mapping matches", TB_S("client", c->client_id),
                    TB_I("qos", pub->qos), TB_S("action", drop ? "dropped (mqtt.unmatched: drop)" : "refused"),
                    TB_U("suppressed", skipped));
        if (!drop)
            broker__refuse(c, p, BROKER_REFUSE_TOPIC_INVALID);
        else if (p)
            p->qos2_record = true; /* acknowledged and dropped: a QoS 2 resend is answered, not stored */
        return;
    }
    broker_topic_t *t = srv->topics[g->topic_of[m.topic_id]];
    const broker_rule_t *r = &g->rules[rule];
    t->received++;
    if (pub->payload.n > srv->cfg->mqtt.max_payload_size) {
        t->rejected[BROKER_REJ_TOO_LARGE]++;
        broker__refuse(c, p, BROKER_REFUSE_PAYLOAD_TOO_LARGE);
        return;
    }
    if (r->policy == CFG_POLICY_ENFORCE) {
        if (!t->validator) {
            t->rejected[BROKER_REJ_NOT_READY]++;
            broker__refuse(c, p, BROKER_REFUSE_SCHEMA_UNAVAILABLE);
            return;
        }
        char why[256];
        if (sch_validate(t->validator, pub->payload.p, pub->payload.n, why, sizeof why) != 0) {
            t->rejected[BROKER_REJ_INVALID]++;
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
            uint64_t skipped;
            if (tb_ratelimit(&rl, &skipped))
                tb_info("payload refused by schema", TB_S("topic", t->name), TB_S("client", c->client_id),
                        TB_S("why", why), TB_U("suppressed", skipped));
            broker__refuse(c, p, BROKER_REFUSE_SCHEMA_INVALID); /* 3.1.1: acked, counted (refuse.c) */
            if (srv->dead_letter)
                dead_letter(c, pkt, topic, t, why, p);
            return;
        }
    }
    wal_attr_t attrs[BROKER_MAX_ATTRS];
    int nattrs = build_attrs(srv, g->router, &m, pkt, attrs);
    if (nattrs < 0) {
        t->rejected[BROKER_REJ_TOO_LARGE]++;
        broker__refuse(c, p, BROKER_REFUSE_TOO_MANY_ATTRIBUTES);
        return;
    }
    broker_msg_t msg = {
        .payload = pub->payload.p, .payload_len = pub->payload.n,
        .attrs = attrs, .nattrs = (size_t)nattrs,
        .mqtt_topic = (const char *)topic.p, .mqtt_topic_len = topic.n,
        .qos = pub->qos, .retain = pub->retain,
    };
    int rc = broker__ingest(t, &msg, c, p);
    if (rc < 0) {
        t->rejected[BROKER_REJ_QUOTA]++;
        broker__refuse(c, p, BROKER_REFUSE_LOG_UNAVAILABLE); /* the topic's log is failed or refuses */
        return;
    }
    if (wal_topic_blocked(t->wal))
        broker__ingest_block(t, c); /* on_full block: read no more of it until the log has room */
    if (p)
        p->qos2_record = pub->qos == 2;
}

wal_topic_t *broker_dead_letter_log(broker_t *srv)
{
    return srv->dead_letter ? srv->dead_letter->wal : NULL;
}

broker_replay_t broker_replay(broker_t *srv, const wal_record_t *rec, broker_topic_t **topic, char *why,
                              size_t whylen)
{
    *topic = NULL;
    router_match_t m;
    const broker_gen_t *g = srv->gen; /* the rules in force (a reload swaps them: RELOAD.md 2.1) */
    int rule = router_match(g->router, rec->mqtt_topic, rec->mqtt_topic_len, &m);
    if (rule < 0) {
        snprintf(why, whylen, "no mapping matches its MQTT topic");
        return BROKER_REPLAY_UNMATCHED;
    }
    broker_topic_t *t = srv->topics[g->topic_of[m.topic_id]];
    const broker_rule_t *r = &g->rules[rule];
    *topic = t;
    if (r->policy == CFG_POLICY_ENFORCE) {
        if (!t->validator) {
            snprintf(why, whylen, "its topic's schema is not resolved yet");
            return BROKER_REPLAY_REFUSED;
        }
        if (sch_validate(t->validator, rec->payload, rec->payload_len, why, whylen) != 0)
            return BROKER_REPLAY_REFUSED;
    }
    wal_attr_t attrs[BROKER_MAX_ATTRS];
    size_t n = 0, it = 0, pos = 0;
    const char *name;
    router_slice_t v;
    while (n < BROKER_MAX_ATTRS - 1 && router_attr_next(g->router, &m, &it, &name, &v))
        attrs[n++] = (wal_attr_t){ (const uint8_t *)name, strlen(name), (const uint8_t *)v.p, v.len };
    wal_attr_t a;
    while (n < BROKER_MAX_ATTRS - 1 && wal_record_attr_next(rec, &pos, &a))
        if (a.key_len > 5 && memcmp(a.key, "mqtt.", 5) == 0)
            attrs[n++] = a;
    char off[24];
    snprintf(off, sizeof off, "%llu", (unsigned long long)rec->offset);
    attrs[n++] = (wal_attr_t){ (const uint8_t *)"tributary.dlq_offset", 20, (const uint8_t *)off, strlen(off) };
    broker_msg_t msg = {
        .payload = rec->payload, .payload_len = rec->payload_len, .attrs = attrs, .nattrs = n,
        .mqtt_topic = rec->mqtt_topic, .mqtt_topic_len = rec->mqtt_topic_len, .qos = rec->qos, .retain = rec->retain,
    };
    t->received++;
    if (broker__ingest(t, &msg, NULL, NULL) < 0) {
        t->rejected[BROKER_REJ_QUOTA]++;
        snprintf(why, whylen, "the topic's log refused it");
        return BROKER_REPLAY_REFUSED;
    }
    return BROKER_REPLAY_STORED;
}

void broker_topic_flush(broker_topic_t *t)
{
    broker__ingest_flush(t);
}

void broker__on_publish(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    broker_t *srv = c->srv;
    const mqtt_publish_t *pub = &pkt->u.publish;
    broker__pace_publish(&c->pace, uv_now(srv->loop));
    if (pkt->version == MQTT_V5 && pkt->props.sub_ids.count > 0) {
        /* a client's PUBLISH must not carry one [MQTT-3.3.4-6] */
        srv->conn_closed[METRICS_CLOSE_MALFORMED]++;
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "Subscription Identifier in a client's PUBLISH");
        return;
    }
    mqtt_bytes_t topic = resolve_alias(c, pkt);
    if (c->closing)
        return;
    broker_session_t *s = c->session;
    broker_pending_t *p = NULL;
    if (pub->qos == 2) {
        if (broker__session_has_qos2(s, pub->packet_id)) {
            /* stored and PUBRECed already: answer again, store nothing [MQTT-4.3.3-10] */
            broker__conn_pending_new(c, pub->packet_id, 2);
            broker__conn_drain_acks(c);
            return;
        }
        broker_pending_t *first = broker__session_storing(s, pub->packet_id);
        if (first) {
            /* the first copy is still on its way to the log: answer when it lands */
            if (first->conn == c || (first->follower && first->follower->conn == c))
                return; /* one answer is already on its way to this client */
            if (first->follower) {
                if (!first->follower->conn->closing)
                    return; /* cannot happen: a session has one live connection */
                /* The client reconnected again before the first copy landed:
                 * the connection that was to get the answer is gone, so this
                 * one gets it instead (else it would wait for ever). */
                broker_pending_t *gone = first->follower;
                first->follower = NULL;
                gone->waits--; /* its connection is closing: freed unsent */
                broker__conn_drain_acks(gone->conn);
            }
            p = broker__conn_pending_new(c, pub->packet_id, 2);
            p->waits = 1;
            first->follower = p;
            return;
        }
    }
    if (pub->qos > 0) {
        /* Receive Maximum: reading pauses at the limit (conn.c), so a client
         * only gets past it by sending before it could read our CONNACK, or by
         * ignoring it; the second is refused, with a grace of one window for
         * the first [MQTT-3.3.4-9]. */
        if (c->version == MQTT_V5 && c->inflight >= 2u * srv->cfg->mqtt.receive_maximum) {
            broker__conn_close(c, MQTT_RC_RECEIVE_MAXIMUM_EXCEEDED, "more QoS 1/2 PUBLISHes in flight than Receive Maximum");
            return;
        }
        c->inflight++;
        p = broker__conn_pending_new(c, pub->packet_id, pub->qos);
        if (pub->qos == 2) {
            p->session = s;
            s->refs++;
            broker__session_set_storing(s, pub->packet_id, p);
        }
    }
    route_and_store(c, pkt, topic, p);
    if (c->closing)
        return; /* closed while routing (a payload over the limit): broker__conn_close drained the acks
                   that were not waiting for the log, p among them, so p is gone */
    if (p && p->qos2_record && p->waits > 0) {
        if (p->topic && p->topic->durability == CFG_DURABILITY_MEMORY_FIRST && s->persistent && srv->journal) {
            /* held in memory, not in the log: a STORED now could outlive the
             * message in a kill, and the client's resend would then be taken
             * for a duplicate. It is journaled at the completion instead
             * (the cluster has the message), and the PUBREC waits for both. */
            p->stored_deferred = true;
        } else {
            broker__journal_qos2(srv, s, pub->packet_id, true, p, false); /* the PUBREC also waits for this */
            p->stored_journaled = s->persistent && srv->journal;
        }
    }
    if (p && p->waits == 0)
        broker__conn_drain_acks(c);
}

void broker__on_pubrel(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    uint16_t id = pkt->u.ack.packet_id;
    broker_session_t *s = c->session;
    bool runtime = false; /* its STORED is in the runtime journal: so is its RELEASED */
    bool known = s && broker__session_del_qos2_at(s, id, &runtime);
    /* the PUBCOMP takes its place in the ack FIFO; for a persistent session
     * it waits until the release is in the journal, so a crash before then
     * leaves the id known and the client's resent PUBREL still answered */
    broker_pending_t *p = broker__conn_pending_new(c, id, 2);
    p->pubcomp = true;
    p->reason = known || c->version != MQTT_V5 ? 0 : MQTT_RC_PACKET_IDENTIFIER_NOT_FOUND;
    if (known)
        broker__journal_qos2(c->srv, s, id, false, p, runtime);
    if (p->waits == 0)
        broker__conn_drain_acks(c);
}
