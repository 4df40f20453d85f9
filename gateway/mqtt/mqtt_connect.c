/*
 * mqtt_connect.c: CONNECT and CONNACK, decode and encode.
 *
 * Kept apart from the other packets because CONNECT is the one packet whose
 * form is chosen by its own content: the protocol name and level decide
 * whether it is MQTT 3.1 ("MQIsdp", level 3), 3.1.1 ("MQTT", 4) or 5.0
 * ("MQTT", 5), and so whether properties follow; the connect flags then
 * decide which payload fields exist. Everything after the level is parsed in
 * the form the level names, so an unknown level is refused before anything
 * else is read (MQTT 5 [MQTT-3.1.2-2], 3.1.1 [MQTT-3.1.2-2]; the connection
 * layer answers 0x84, or return code 0x01 on 3.1.1).
 */
#include "gateway/mqtt/mqtt_int.h"

enum {
    CF_RESERVED = 0x01,
    CF_CLEAN = 0x02,
    CF_WILL = 0x04,
    CF_WILL_QOS_SHIFT = 3,
    CF_WILL_RETAIN = 0x20,
    CF_PASSWORD = 0x40,
    CF_USERNAME = 0x80,
};

static bool name_is(mqtt_bytes_t n, const char *s, uint32_t len)
{
    return n.n == len && memcmp(n.p, s, len) == 0;
}

/* Protocol name and level: "MQTT" with 4 or 5, "MQIsdp" with 3 (MQTT 3.1,
 * run as 3.1.1). Anything else is refused with 0x84 [MQTT-3.1.2-1]. */
static int decode_protocol(mqtt__rd_t *r, mqtt_connect_t *c, mqtt_diag_t *d)
{
    mqtt_bytes_t name;
    if (!mqtt__get_bin(r, &name) || !mqtt__get_u8(r, &c->protocol_level))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside protocol name or level");
    bool mqtt = name_is(name, "MQTT", 4), mqisdp = name_is(name, "MQIsdp", 6);
    if (!mqtt && !mqisdp)
        return mqtt__fail(d, MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION, "unknown protocol name");
    if ((mqtt && c->protocol_level != MQTT_V311 && c->protocol_level != MQTT_V5) ||
        (mqisdp && c->protocol_level != MQTT_V31))
        return mqtt__fail(d, MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION, "unsupported protocol level");
    return 0;
}

/* The connect flags byte (3.1.2.3). Bit-level violations the specs call
 * malformed get 0x81; combinations that parse but are not allowed get 0x82. */
static int decode_flags(uint8_t f, mqtt_connect_t *c, mqtt_diag_t *d)
{
    if (f & CF_RESERVED) /* [MQTT-3.1.2-3] */
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT reserved flag is set");
    c->clean_start = f & CF_CLEAN;
    c->has_will = f & CF_WILL;
    c->will_qos = (f >> CF_WILL_QOS_SHIFT) & 3;
    c->will_retain = f & CF_WILL_RETAIN;
    c->has_password = f & CF_PASSWORD;
    c->has_username = f & CF_USERNAME;
    if (c->will_qos == 3) /* 5: [MQTT-3.1.2-12] "a Malformed Packet"; 3.1.1 [MQTT-3.1.2-14] */
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "will QoS 3");
    if (!c->has_will && (c->will_qos || c->will_retain)) /* [MQTT-3.1.2-11], [MQTT-3.1.2-13] (5) */
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "will QoS or will retain set without will flag");
    /* 3.1.1 [MQTT-3.1.2-22]; MQTT 5 allows a password alone (3.1.2.9). */
    if (c->protocol_level != MQTT_V5 && c->has_password && !c->has_username)
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "password flag without user name flag");
    return 0;
}

static int decode_payload(mqtt__rd_t *r, mqtt_connect_t *c, mqtt_diag_t *d)
{
    bool v5 = c->protocol_level == MQTT_V5;
    if (!mqtt__get_bin(r, &c->client_id))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside client identifier");
    if (!mqtt__utf8_ok(c->client_id.p, c->client_id.n)) /* [MQTT-3.1.3-4] */
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "client identifier is not valid UTF-8");
    if (c->has_will) {
        if (v5 && mqtt__props_decode(r, MQTT__CTX_WILL, &c->will_props, d) < 0)
            return -1;
        if (!mqtt__get_bin(r, &c->will_topic) || !mqtt__get_bin(r, &c->will_payload))
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside the will");
        uint8_t bad = mqtt__topic_name_check(c->will_topic.p, c->will_topic.n); /* [MQTT-3.1.3-11] */
        if (bad)
            return mqtt__fail(d, bad, bad == MQTT_RC_MALFORMED_PACKET ? "will topic is not valid UTF-8"
                                                                      : "will topic contains a wildcard");
        if (c->will_topic.n == 0) /* [MQTT-4.7.3-1] */
            return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "will topic is empty");
    }
    if (c->has_username) {
        if (!mqtt__get_bin(r, &c->username))
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside user name");
        if (!mqtt__utf8_ok(c->username.p, c->username.n)) /* [MQTT-3.1.3-11] (3.1.1), [MQTT-3.1.3-12] (5) */
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "user name is not valid UTF-8");
    }
    if (c->has_password && !mqtt__get_bin(r, &c->password))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside password");
    return 0;
}

int mqtt__decode_connect(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_connect_t *c = &pkt->u.connect;
    memset(c, 0, sizeof *c);
    uint8_t flags;
    if (decode_protocol(r, c, d) < 0)
        return -1;
    pkt->version = c->protocol_level == MQTT_V5 ? MQTT_V5 : MQTT_V311;
    if (!mqtt__get_u8(r, &flags) || !mqtt__get_u16(r, &c->keep_alive))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNECT ends inside its variable header");
    if (decode_flags(flags, c, d) < 0)
        return -1;
    if (pkt->version == MQTT_V5 && mqtt__props_decode(r, MQTT_CONNECT, &pkt->props, d) < 0)
        return -1;
    return decode_payload(r, c, d);
}

int mqtt__decode_connack(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *d)
{
    mqtt_connack_t *a = &pkt->u.connack;
    uint8_t flags;
    if (!mqtt__get_u8(r, &flags) || !mqtt__get_u8(r, &a->reason))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNACK shorter than its variable header");
    if (flags & 0xFE) /* [MQTT-3.2.2-1] */
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "CONNACK reserved flags are set");
    a->session_present = flags & 1;
    if (!mqtt_reason_allowed(MQTT_CONNACK, pkt->version, a->reason)) /* [MQTT-3.2.2-8] (5), Table 3.1 */
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "CONNACK code not allowed");
    /* 3.1.1 [MQTT-3.2.2-4], 5 [MQTT-3.2.2-6]: no session on a refusal. */
    if (a->session_present && a->reason != 0)
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "CONNACK refuses but sets session present");
    if (pkt->version == MQTT_V5)
        return mqtt__props_decode(r, MQTT_CONNACK, &pkt->props, d);
    return 0;
}

/* ---- encode ------------------------------------------------------------------- */

void mqtt__put_connect(mqtt__wr_t *w, const mqtt_packet_t *pkt)
{
    const mqtt_connect_t *c = &pkt->u.connect;
    uint8_t level = c->protocol_level ? c->protocol_level : pkt->version;
    bool v5 = level == MQTT_V5;
    if (level != MQTT_V31 && level != MQTT_V311 && level != MQTT_V5)
        w->err = -EINVAL;
    if (v5 != (pkt->version == MQTT_V5)) /* the packet would decode as another version */
        w->err = -EINVAL;
    if (c->will_qos > 2 || (!c->has_will && (c->will_qos || c->will_retain)) ||
        (!v5 && c->has_password && !c->has_username))
        w->err = -EINVAL;
    if (level == MQTT_V31)
        mqtt__put_bin(w, MQTT_BYTES("MQIsdp"));
    else
        mqtt__put_bin(w, MQTT_BYTES("MQTT"));
    mqtt__put_u8(w, level);
    uint8_t f = (uint8_t)((c->clean_start ? CF_CLEAN : 0) | (c->has_will ? CF_WILL : 0) |
                          (uint8_t)((c->will_qos & 3) << CF_WILL_QOS_SHIFT) | (c->will_retain ? CF_WILL_RETAIN : 0) |
                          (c->has_password ? CF_PASSWORD : 0) | (c->has_username ? CF_USERNAME : 0));
    mqtt__put_u8(w, f);
    mqtt__put_u16(w, c->keep_alive);
    if (v5)
        mqtt__props_put(w, &pkt->props, MQTT_CONNECT);
    mqtt__put_bin(w, c->client_id);
    if (c->has_will) {
        if (v5)
            mqtt__props_put(w, &c->will_props, MQTT__CTX_WILL);
        mqtt__put_bin(w, c->will_topic);
        mqtt__put_bin(w, c->will_payload);
    }
    if (c->has_username)
        mqtt__put_bin(w, c->username);
    if (c->has_password)
        mqtt__put_bin(w, c->password);
}
