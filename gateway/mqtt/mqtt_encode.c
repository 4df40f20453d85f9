/*
 * mqtt_encode.c: packets to bytes, and the one-call encoders for what a
 * server sends (CONNACK, acks, SUBACK/UNSUBACK, DISCONNECT, PINGRESP).
 *
 * Every body is produced by one function per packet type that writes
 * through mqtt__wr_t. mqtt_encoded_size runs it in counting mode; mqtt_encode
 * runs it once to count, then writes the fixed header and runs it again to
 * write. One code path for both means the size announced is always the size
 * written.
 *
 * The encoder refuses (-EINVAL) what the decoder would reject for its
 * structure (flags, packet ids, lists, reason codes, property placement,
 * lengths, an empty topic without alias, No Local on a shared filter). It
 * does not re-validate strings (UTF-8, wildcards) or property values: those
 * are the caller's to get right, and the server only encodes its own. 3.1.1
 * has no properties: pkt->props is ignored for it.
 */
#include "gateway/mqtt/mqtt_int.h"

static uint8_t norm_version(uint8_t v)
{
    return v == MQTT_V5 ? MQTT_V5 : MQTT_V311;
}

void mqtt_packet_init(mqtt_packet_t *pkt, mqtt_type_t type, uint8_t version)
{
    memset(pkt, 0, sizeof *pkt);
    pkt->type = type;
    pkt->version = norm_version(version);
    if (type == MQTT_CONNECT)
        pkt->u.connect.protocol_level = version;
}

static void put_packet_id(mqtt__wr_t *w, uint16_t id)
{
    if (id == 0)
        w->err = -EINVAL;
    mqtt__put_u16(w, id);
}

static void put_publish(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    const mqtt_publish_t *p = &pkt->u.publish;
    mqtt__put_bin(w, p->topic);
    if (p->qos)
        put_packet_id(w, p->packet_id);
    if (pkt->version == MQTT_V5)
        mqtt__props_put(w, &pkt->props, MQTT_PUBLISH);
    /* an empty topic needs a Topic Alias (5) and is never valid in 3.1.1 */
    if (p->topic.n == 0 && (pkt->version != MQTT_V5 || !MQTT_HAS(&pkt->props, MQTT_PROP_TOPIC_ALIAS)))
        w->err = -EINVAL;
    mqtt__put(w, p->payload.p, p->payload.n);
}

/* Acks, DISCONNECT and AUTH share the MQTT 5 short forms: the reason code is
 * left out when it is 0 and there are no properties, the property length when
 * there are no properties. */
static void put_reason_tail(mqtt__wr_t *w, const mqtt_packet_t *pkt, uint8_t reason)
{
    if (!mqtt_reason_allowed(pkt->type, pkt->version, reason)) {
        w->err = -EINVAL;
        return;
    }
    if (pkt->version != MQTT_V5)
        return;
    bool empty = mqtt__props_empty(&pkt->props);
    if (reason == 0 && empty)
        return;
    mqtt__put_u8(w, reason);
    if (!empty)
        mqtt__props_put(w, &pkt->props, pkt->type);
}

static void put_subscribe(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    const mqtt_subscribe_t *s = &pkt->u.sub;
    put_packet_id(w, s->packet_id);
    if (pkt->version == MQTT_V5)
        mqtt__props_put(w, &pkt->props, pkt->type);
    mqtt_iter_t it;
    mqtt_bytes_t f;
    uint8_t o;
    uint32_t n = 0;
    mqtt_iter_init(&it, &s->filters);
    if (pkt->type == MQTT_SUBSCRIBE) {
        uint8_t reserved = pkt->version == MQTT_V5 ? 0xC0 : 0xFC;
        while (mqtt_next_sub(&it, &f, &o)) {
            if ((o & reserved) || (o & 3) == 3 || MQTT_SUBOPT_RETAIN_HANDLING(o) == 3)
                w->err = -EINVAL;
            if (pkt->version == MQTT_V5 && (o & MQTT_SUBOPT_NO_LOCAL) && mqtt_topic_filter_is_shared(f))
                w->err = -EINVAL; /* [MQTT-3.8.3-4] */
            mqtt__put_bin(w, f);
            mqtt__put_u8(w, o);
            n++;
        }
    } else {
        while (mqtt_next_unsub(&it, &f)) {
            mqtt__put_bin(w, f);
            n++;
        }
    }
    if (n == 0 || it.p != it.end)
        w->err = -EINVAL;
}

static void put_suback(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    const mqtt_suback_t *s = &pkt->u.suback;
    put_packet_id(w, s->packet_id);
    if (pkt->version == MQTT_V5)
        mqtt__props_put(w, &pkt->props, pkt->type);
    if (pkt->version != MQTT_V5 && pkt->type == MQTT_UNSUBACK) {
        if (s->reasons.n)
            w->err = -EINVAL;
        return;
    }
    if (s->reasons.n == 0)
        w->err = -EINVAL;
    for (uint32_t i = 0; i < s->reasons.n; i++)
        if (!mqtt_reason_allowed(pkt->type, pkt->version, s->reasons.p[i]))
            w->err = -EINVAL;
    mqtt__put(w, s->reasons.p, s->reasons.n);
}

static void put_connack(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    const mqtt_connack_t *a = &pkt->u.connack;
    if (!mqtt_reason_allowed(MQTT_CONNACK, pkt->version, a->reason) || (a->session_present && a->reason))
        w->err = -EINVAL;
    mqtt__put_u8(w, a->session_present ? 1 : 0);
    mqtt__put_u8(w, a->reason);
    if (pkt->version == MQTT_V5)
        mqtt__props_put(w, &pkt->props, MQTT_CONNACK);
}

static void put_body(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    if (pkt->version != MQTT_V311 && pkt->version != MQTT_V5) {
        w->err = -EINVAL;
        return;
    }
    switch (pkt->type) {
    case MQTT_CONNECT: mqtt__put_connect(w, pkt); return;
    case MQTT_CONNACK: put_connack(w, pkt); return;
    case MQTT_PUBLISH: put_publish(w, pkt); return;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        put_packet_id(w, pkt->u.ack.packet_id);
        put_reason_tail(w, pkt, pkt->u.ack.reason);
        return;
    case MQTT_SUBSCRIBE:
    case MQTT_UNSUBSCRIBE: put_subscribe(w, pkt); return;
    case MQTT_SUBACK:
    case MQTT_UNSUBACK: put_suback(w, pkt); return;
    case MQTT_PINGREQ:
    case MQTT_PINGRESP: return;
    case MQTT_AUTH:
        if (pkt->version != MQTT_V5)
            w->err = -EINVAL;
        /* fall through */
    case MQTT_DISCONNECT: put_reason_tail(w, pkt, pkt->u.disconnect.reason); return;
    }
    w->err = -EINVAL;
}

static uint8_t first_byte(const mqtt_packet_t *pkt, int *err)
{
    uint8_t flags = 0;
    if (pkt->type == MQTT_PUBLISH) {
        const mqtt_publish_t *p = &pkt->u.publish;
        if (p->qos > 2 || (p->dup && p->qos == 0))
            *err = -EINVAL;
        flags = (uint8_t)((p->dup ? 8 : 0) | ((p->qos & 3) << 1) | (p->retain ? 1 : 0));
    } else if (pkt->type == MQTT_PUBREL || pkt->type == MQTT_SUBSCRIBE || pkt->type == MQTT_UNSUBSCRIBE) {
        flags = 2;
    }
    return (uint8_t)((pkt->type << 4) | flags);
}

/* Body size, or -EINVAL. */
static int body_size(const mqtt_packet_t *pkt, uint32_t *rem)
{
    mqtt__wr_t w = { NULL, 0, 0 };
    put_body(&w, pkt);
    first_byte(pkt, &w.err);
    if (w.err)
        return w.err;
    if (w.n > MQTT_MAX_REMAINING)
        return -EINVAL;
    *rem = (uint32_t)w.n;
    return 0;
}

int mqtt_encoded_size(const mqtt_packet_t *pkt)
{
    uint32_t rem = 0;
    int rc = body_size(pkt, &rem);
    return rc < 0 ? rc : (int)(1 + mqtt__varint_size(rem) + rem);
}

int mqtt_encode(const mqtt_packet_t *pkt, uint8_t *buf, size_t cap)
{
    uint32_t rem = 0;
    int rc = body_size(pkt, &rem);
    if (rc < 0)
        return rc;
    size_t total = 1 + mqtt__varint_size(rem) + rem;
    if (cap < total)
        return TB_EFULL;
    int err = 0;
    mqtt__wr_t w = { buf, 0, 0 };
    mqtt__put_u8(&w, first_byte(pkt, &err));
    mqtt__put_varint(&w, rem);
    put_body(&w, pkt);
    return (int)w.n;
}

/* ---- one-call encoders ----------------------------------------------------------- */

static void set_props(mqtt_packet_t *pkt, const mqtt_props_t *props)
{
    if (props && pkt->version == MQTT_V5)
        pkt->props = *props;
}

int mqtt_encode_connack(uint8_t *buf, size_t cap, uint8_t version, bool session_present,
                        uint8_t reason, const mqtt_props_t *props)
{
    mqtt_packet_t pkt;
    mqtt_packet_init(&pkt, MQTT_CONNACK, version);
    pkt.u.connack.session_present = session_present;
    pkt.u.connack.reason = reason;
    set_props(&pkt, props);
    return mqtt_encode(&pkt, buf, cap);
}

int mqtt_encode_ack(uint8_t *buf, size_t cap, uint8_t version, mqtt_type_t type,
                    uint16_t packet_id, uint8_t reason, const mqtt_props_t *props)
{
    if (type != MQTT_PUBACK && type != MQTT_PUBREC && type != MQTT_PUBREL && type != MQTT_PUBCOMP)
        return -EINVAL;
    mqtt_packet_t pkt;
    mqtt_packet_init(&pkt, type, version);
    pkt.u.ack.packet_id = packet_id;
    pkt.u.ack.reason = reason;
    set_props(&pkt, props);
    return mqtt_encode(&pkt, buf, cap);
}

int mqtt_encode_suback(uint8_t *buf, size_t cap, uint8_t version, mqtt_type_t type,
                       uint16_t packet_id, const uint8_t *reasons, uint32_t n,
                       const mqtt_props_t *props)
{
    if (type != MQTT_SUBACK && type != MQTT_UNSUBACK)
        return -EINVAL;
    mqtt_packet_t pkt;
    mqtt_packet_init(&pkt, type, version);
    pkt.u.suback.packet_id = packet_id;
    pkt.u.suback.reasons = (mqtt_bytes_t){ reasons, n };
    set_props(&pkt, props);
    return mqtt_encode(&pkt, buf, cap);
}

int mqtt_encode_disconnect(uint8_t *buf, size_t cap, uint8_t version, uint8_t reason,
                           const mqtt_props_t *props)
{
    mqtt_packet_t pkt;
    mqtt_packet_init(&pkt, MQTT_DISCONNECT, version);
    pkt.u.disconnect.reason = reason;
    set_props(&pkt, props);
    return mqtt_encode(&pkt, buf, cap);
}

int mqtt_encode_pingresp(uint8_t *buf, size_t cap)
{
    if (cap < 2)
        return TB_EFULL;
    buf[0] = MQTT_PINGRESP << 4;
    buf[1] = 0;
    return 2;
}
