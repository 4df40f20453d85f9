/*
 * mqtt_decode.c: framing (fixed header, Remaining Length, maximum packet
 * size), the checks that need only the first byte, and the decoders of
 * every packet except CONNECT/CONNACK (mqtt_decode_connect.c).
 *
 * Order of work, so that a hostile peer costs as little as possible:
 *   1. first byte: packet type exists in this version, CONNECT first,
 *      reserved flag bits, PUBLISH QoS/DUP: refused on one byte;
 *   2. Remaining Length: refused at the fourth byte if it goes on, or when
 *      not minimal; the whole packet's size is then known and checked
 *      against the maximum before any of the body is waited for;
 *   3. the body, once complete, through a cursor that ends at the packet's
 *      end: a field running past it is malformed, and bytes left over after
 *      the last field are malformed too.
 * Reason codes follow MQTT 5 4.13: a packet that cannot be parsed (or that
 * the spec names "a Malformed Packet") gets 0x81; one that parses but breaks
 * a rule gets 0x82. The same codes are reported for 3.1.1 sessions, where
 * they only go to the log (3.1.1 just closes the connection).
 */
#include "gateway/mqtt/mqtt_int.h"

/* Fixed-header flags each type must carry ([MQTT-2.2.2-1], [MQTT-2.1.3-1]);
 * PUBLISH's are checked apart. */
static const uint8_t required_flags[16] = {
    [MQTT_PUBREL] = 0x2, [MQTT_SUBSCRIBE] = 0x2, [MQTT_UNSUBSCRIBE] = 0x2,
};

/* Checks what the first byte alone can tell. Returns 0 or -1 with diag set. */
static int check_first_byte(uint8_t b, uint8_t version, mqtt_diag_t *d)
{
    unsigned type = b >> 4, flags = b & 0x0F;
    if (type == 0)
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "packet type 0 is reserved");
    if (version == 0 && type != MQTT_CONNECT)
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "first packet is not CONNECT"); /* [MQTT-3.1.0-1] */
    if (type == MQTT_AUTH && version == MQTT_V311)
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "AUTH does not exist in MQTT 3.1.1");
    if (type == MQTT_PUBLISH) {
        unsigned qos = (flags >> 1) & 3;
        if (qos == 3)
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "PUBLISH with QoS 3"); /* [MQTT-3.3.1-4] */
        if (qos == 0 && (flags & 0x8))
            return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "PUBLISH with DUP set and QoS 0"); /* [MQTT-3.3.1-2] */
        return 0;
    }
    if (flags != required_flags[type])
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "reserved fixed-header flags are wrong");
    return 0;
}

static int get_packet_id(mqtt__rd_t *r, uint16_t *id, mqtt_diag_t *d)
{
    if (!mqtt__get_u16(r, id))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "packet ends inside its packet identifier");
    if (*id == 0) /* [MQTT-2.3.1-1], [MQTT-2.2.1-3]; acks echo a non-zero one */
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "packet identifier is 0");
    return 0;
}

static int decode_publish(mqtt__rd_t *r, uint8_t flags, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_publish_t *p = &pkt->u.publish;
    p->qos = (flags >> 1) & 3;
    p->retain = flags & 1;
    p->dup = (flags >> 3) & 1;
    p->packet_id = 0;
    if (!mqtt__get_bin(r, &p->topic))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "PUBLISH ends inside its topic name");
    uint8_t bad = mqtt__topic_name_check(p->topic.p, p->topic.n); /* [MQTT-3.3.2-1], [MQTT-3.3.2-2] */
    if (bad)
        return mqtt__fail(d, bad, bad == MQTT_RC_MALFORMED_PACKET ? "PUBLISH topic is not valid UTF-8"
                                                                  : "PUBLISH topic contains a wildcard");
    if (p->qos && get_packet_id(r, &p->packet_id, d) < 0)
        return -1;
    if (pkt->version == MQTT_V5 && mqtt__props_decode(r, MQTT_PUBLISH, &pkt->props, d) < 0)
        return -1;
    /* 5: "a Protocol Error if the Topic Name is zero length and there is no
     * Topic Alias" (3.3.2.1); 3.1.1: at least one character [MQTT-4.7.3-1]. */
    if (p->topic.n == 0 && !MQTT_HAS(&pkt->props, MQTT_PROP_TOPIC_ALIAS))
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "PUBLISH topic is empty and has no topic alias");
    p->payload.p = r->p;
    p->payload.n = (uint32_t)mqtt__left(r);
    r->p = r->end;
    return 0;
}

/* PUBACK, PUBREC, PUBREL, PUBCOMP. In 5 the Reason Code and Property Length
 * may be omitted (Remaining Length 2: success; 3: no properties). */
static int decode_ack(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_ack_t *a = &pkt->u.ack;
    a->reason = 0;
    if (get_packet_id(r, &a->packet_id, d) < 0)
        return -1;
    if (pkt->version != MQTT_V5 || !mqtt__get_u8(r, &a->reason))
        return 0;
    if (!mqtt_reason_allowed(pkt->type, MQTT_V5, a->reason))
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "reason code not allowed in this acknowledgement");
    if (mqtt__left(r))
        return mqtt__props_decode(r, pkt->type, &pkt->props, d);
    return 0;
}

/* SUBSCRIBE and UNSUBSCRIBE: the payload is validated once here and kept as a
 * region for mqtt_next_sub / mqtt_next_unsub. */
static int decode_subscribe(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_subscribe_t *s = &pkt->u.sub;
    bool v5 = pkt->version == MQTT_V5, sub = pkt->type == MQTT_SUBSCRIBE;
    if (get_packet_id(r, &s->packet_id, d) < 0)
        return -1;
    if (v5 && mqtt__props_decode(r, pkt->type, &pkt->props, d) < 0)
        return -1;
    s->filters.raw.p = r->p;
    s->filters.raw.n = (uint32_t)mqtt__left(r);
    s->filters.count = 0;
    while (mqtt__left(r)) {
        mqtt_bytes_t f;
        uint8_t o = 0;
        if (!mqtt__get_bin(r, &f))
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "packet ends inside a topic filter");
        if (!mqtt__utf8_ok(f.p, f.n)) /* [MQTT-3.8.3-1], [MQTT-3.10.3-1] */
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "topic filter is not valid UTF-8");
        if (sub && !mqtt__get_u8(r, &o))
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "SUBSCRIBE ends before subscription options");
        if (sub && !v5) {
            /* 3.1.1 [MQTT-3-8.3-4]: reserved bits and QoS 3 are malformed. */
            if ((o & 0xFC) || (o & 3) == 3)
                return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "requested QoS byte is not 0, 1 or 2");
        } else if (sub) {
            if (o & 0xC0) /* [MQTT-3.8.3-5] */
                return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "subscription options reserved bits set");
            if ((o & 3) == 3) /* 3.8.3.1: Maximum QoS 3 is a Protocol Error */
                return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "subscription with QoS 3");
            if (MQTT_SUBOPT_RETAIN_HANDLING(o) == 3) /* 3.8.3.1 */
                return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "subscription with retain handling 3");
            if ((o & MQTT_SUBOPT_NO_LOCAL) && mqtt_topic_filter_is_shared(f)) /* [MQTT-3.8.3-4] */
                return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "no local set on a shared subscription");
        }
        s->filters.count++;
    }
    if (s->filters.count == 0) /* [MQTT-3.8.3-2] (5), [MQTT-3.8.3-3] (3.1.1), [MQTT-3.10.3-2] */
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, sub ? "SUBSCRIBE without topic filters"
                                                          : "UNSUBSCRIBE without topic filters");
    return 0;
}

/* SUBACK and UNSUBACK: one code per filter (3.1.1's UNSUBACK has none). */
static int decode_suback(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_suback_t *s = &pkt->u.suback;
    bool v5 = pkt->version == MQTT_V5;
    if (get_packet_id(r, &s->packet_id, d) < 0)
        return -1;
    if (v5 && mqtt__props_decode(r, pkt->type, &pkt->props, d) < 0)
        return -1;
    s->reasons.p = r->p;
    s->reasons.n = 0;
    if (!v5 && pkt->type == MQTT_UNSUBACK)
        return 0; /* anything left is caught as trailing bytes */
    s->reasons.n = (uint32_t)mqtt__left(r);
    r->p = r->end;
    if (s->reasons.n == 0)
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "acknowledgement without reason codes");
    for (uint32_t i = 0; i < s->reasons.n; i++)
        if (!mqtt_reason_allowed(pkt->type, pkt->version, s->reasons.p[i]))
            return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "reason code not allowed in this acknowledgement");
    return 0;
}

/* DISCONNECT and AUTH: in 5 Remaining Length 0 means reason 0 and no
 * properties, 1 means no properties (3.14.2.1, 3.15.2.1). */
static int decode_reason_only(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    uint8_t *rc = &pkt->u.disconnect.reason;
    *rc = 0;
    if (pkt->version != MQTT_V5 || !mqtt__get_u8(r, rc))
        return 0;
    if (!mqtt_reason_allowed(pkt->type, MQTT_V5, *rc))
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, pkt->type == MQTT_AUTH ? "reason code not allowed in AUTH"
                                                                            : "reason code not allowed in DISCONNECT");
    if (mqtt__left(r))
        return mqtt__props_decode(r, pkt->type, &pkt->props, d);
    return 0;
}

static int decode_body(mqtt__rd_t *r, uint8_t first, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    switch (pkt->type) {
    case MQTT_CONNECT: return mqtt__decode_connect(r, pkt, d);
    case MQTT_CONNACK: return mqtt__decode_connack(r, pkt, d);
    case MQTT_PUBLISH: return decode_publish(r, first & 0x0F, pkt, d);
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP: return decode_ack(r, pkt, d);
    case MQTT_SUBSCRIBE:
    case MQTT_UNSUBSCRIBE: return decode_subscribe(r, pkt, d);
    case MQTT_SUBACK:
    case MQTT_UNSUBACK: return decode_suback(r, pkt, d);
    case MQTT_PINGREQ:
    case MQTT_PINGRESP: return 0;
    case MQTT_DISCONNECT:
    case MQTT_AUTH: return decode_reason_only(r, pkt, d);
    }
    return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "packet type 0 is reserved");
}

static int fail_code(uint8_t reason)
{
    switch (reason) {
    case MQTT_RC_MALFORMED_PACKET: return TB_EMALFORMED;
    case MQTT_RC_PACKET_TOO_LARGE: return TB_EFULL;
    case MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION: return TB_EUNSUPPORTED;
    default: return TB_EPROTO;
    }
}

int mqtt_decode(const uint8_t *buf, size_t len, uint8_t version, uint32_t max_packet_size,
                mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    d->need = 0;
    d->reason = 0;
    d->why = NULL;
    if (version == MQTT_V31)
        version = MQTT_V311;
    if (version != 0 && version != MQTT_V311 && version != MQTT_V5) {
        mqtt__fail(d, MQTT_RC_IMPLEMENTATION_SPECIFIC_ERROR, "decoder called with an unknown version");
        return -EINVAL;
    }
    if (len == 0)
        return 0;
    if (check_first_byte(buf[0], version, d) < 0)
        return fail_code(d->reason);

    uint32_t rem;
    unsigned used;
    switch (mqtt__varint(buf + 1, len - 1, &rem, &used)) {
    case MQTT__VI_OK: break;
    case MQTT__VI_SHORT: return 0;
    case MQTT__VI_TOO_LONG:
        mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "remaining length varint longer than 4 bytes");
        return TB_EMALFORMED;
    default:
        mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "remaining length varint is not minimally encoded");
        return TB_EMALFORMED;
    }
    /* Checked before the body arrives: a huge announced length is refused
     * without buffering it (MQTT 5 3.1.2.11.4: the whole packet counts). */
    uint32_t total = 1 + used + rem;
    if (max_packet_size == 0 || max_packet_size > MQTT_MAX_PACKET)
        max_packet_size = MQTT_MAX_PACKET;
    if (total > max_packet_size) {
        mqtt__fail(d, MQTT_RC_PACKET_TOO_LARGE, "packet exceeds the maximum packet size");
        return TB_EFULL;
    }
    if (len < total) {
        d->need = total;
        return 0;
    }

    pkt->type = (mqtt_type_t)(buf[0] >> 4);
    pkt->version = version ? version : MQTT_V311;
    memset(&pkt->props, 0, sizeof pkt->props);
    mqtt__rd_t r = { buf + 1 + used, buf + total };
    if (decode_body(&r, buf[0], pkt, d) < 0)
        return fail_code(d->reason);
    if (r.p != r.end) {
        mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "bytes left over after the last field");
        return TB_EMALFORMED;
    }
    return (int)total;
}
