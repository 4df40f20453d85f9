/*
 * mqtt_props.c: MQTT 5 properties: the one table that says, for every
 * property identifier, its data type, the packets it may appear in and where
 * it lives in mqtt_props_t; and the decode, encode and iteration that the
 * table drives.
 *
 * Table-driven so that "which property is allowed where" is written once
 * (MQTT 5 Table 2-4) and shared by the decoder (which must refuse a property
 * in the wrong packet: "A Control Packet which contains an Identifier which
 * is not valid for its packet type ... is a Malformed Packet", 2.2.2.2),
 * the encoder (which must not produce one) and the iterators (which must
 * know each type's size to step over it).
 *
 * Repeated properties (User Property everywhere, Subscription Identifier in
 * PUBLISH) are not copied anywhere: the decoder records the region from the
 * first to the last occurrence and a count, and the iterators walk it,
 * skipping any other property interleaved there.
 */
#include "gateway/mqtt/mqtt_int.h"

#include <stddef.h>

enum { PT_NONE, PT_BYTE, PT_U16, PT_U32, PT_VARINT, PT_STR, PT_BIN, PT_PAIR };

#define C(t) (1u << (t))
#define WILL C(MQTT__CTX_WILL)
#define ACKS (C(MQTT_PUBACK) | C(MQTT_PUBREC) | C(MQTT_PUBREL) | C(MQTT_PUBCOMP))
#define ALL_WITH_PROPS                                                                    \
    (WILL | C(MQTT_CONNECT) | C(MQTT_CONNACK) | C(MQTT_PUBLISH) | ACKS | C(MQTT_SUBSCRIBE) | \
     C(MQTT_SUBACK) | C(MQTT_UNSUBSCRIBE) | C(MQTT_UNSUBACK) | C(MQTT_DISCONNECT) | C(MQTT_AUTH))

typedef struct prop_def {
    uint8_t type;
    uint16_t ctx;   /* C(packet type) bits, WILL for the will properties */
    uint16_t off;   /* offset in mqtt_props_t */
} prop_def_t;

#define F(field) ((uint16_t)offsetof(mqtt_props_t, field))

static const prop_def_t defs[] = {
    [MQTT_PROP_PAYLOAD_FORMAT] = { PT_BYTE, WILL | C(MQTT_PUBLISH), F(payload_format) },
    [MQTT_PROP_MESSAGE_EXPIRY] = { PT_U32, WILL | C(MQTT_PUBLISH), F(message_expiry) },
    [MQTT_PROP_CONTENT_TYPE] = { PT_STR, WILL | C(MQTT_PUBLISH), F(content_type) },
    [MQTT_PROP_RESPONSE_TOPIC] = { PT_STR, WILL | C(MQTT_PUBLISH), F(response_topic) },
    [MQTT_PROP_CORRELATION_DATA] = { PT_BIN, WILL | C(MQTT_PUBLISH), F(correlation_data) },
    [MQTT_PROP_SUBSCRIPTION_ID] = { PT_VARINT, C(MQTT_PUBLISH) | C(MQTT_SUBSCRIBE), F(subscription_id) },
    [MQTT_PROP_SESSION_EXPIRY] = { PT_U32, C(MQTT_CONNECT) | C(MQTT_CONNACK) | C(MQTT_DISCONNECT), F(session_expiry) },
    [MQTT_PROP_ASSIGNED_CLIENT_ID] = { PT_STR, C(MQTT_CONNACK), F(assigned_client_id) },
    [MQTT_PROP_SERVER_KEEP_ALIVE] = { PT_U16, C(MQTT_CONNACK), F(server_keep_alive) },
    [MQTT_PROP_AUTH_METHOD] = { PT_STR, C(MQTT_CONNECT) | C(MQTT_CONNACK) | C(MQTT_AUTH), F(auth_method) },
    [MQTT_PROP_AUTH_DATA] = { PT_BIN, C(MQTT_CONNECT) | C(MQTT_CONNACK) | C(MQTT_AUTH), F(auth_data) },
    [MQTT_PROP_REQUEST_PROBLEM_INFO] = { PT_BYTE, C(MQTT_CONNECT), F(request_problem_info) },
    [MQTT_PROP_WILL_DELAY] = { PT_U32, WILL, F(will_delay) },
    [MQTT_PROP_REQUEST_RESPONSE_INFO] = { PT_BYTE, C(MQTT_CONNECT), F(request_response_info) },
    [MQTT_PROP_RESPONSE_INFO] = { PT_STR, C(MQTT_CONNACK), F(response_info) },
    [MQTT_PROP_SERVER_REFERENCE] = { PT_STR, C(MQTT_CONNACK) | C(MQTT_DISCONNECT), F(server_reference) },
    [MQTT_PROP_REASON_STRING] = { PT_STR, C(MQTT_CONNACK) | ACKS | C(MQTT_SUBACK) | C(MQTT_UNSUBACK) |
                                  C(MQTT_DISCONNECT) | C(MQTT_AUTH), F(reason_string) },
    [MQTT_PROP_RECEIVE_MAXIMUM] = { PT_U16, C(MQTT_CONNECT) | C(MQTT_CONNACK), F(receive_maximum) },
    [MQTT_PROP_TOPIC_ALIAS_MAXIMUM] = { PT_U16, C(MQTT_CONNECT) | C(MQTT_CONNACK), F(topic_alias_maximum) },
    [MQTT_PROP_TOPIC_ALIAS] = { PT_U16, C(MQTT_PUBLISH), F(topic_alias) },
    [MQTT_PROP_MAXIMUM_QOS] = { PT_BYTE, C(MQTT_CONNACK), F(maximum_qos) },
    [MQTT_PROP_RETAIN_AVAILABLE] = { PT_BYTE, C(MQTT_CONNACK), F(retain_available) },
    [MQTT_PROP_USER] = { PT_PAIR, ALL_WITH_PROPS, F(user) },
    [MQTT_PROP_MAXIMUM_PACKET_SIZE] = { PT_U32, C(MQTT_CONNECT) | C(MQTT_CONNACK), F(maximum_packet_size) },
    [MQTT_PROP_WILDCARD_SUB_AVAILABLE] = { PT_BYTE, C(MQTT_CONNACK), F(wildcard_sub_available) },
    [MQTT_PROP_SUB_ID_AVAILABLE] = { PT_BYTE, C(MQTT_CONNACK), F(sub_id_available) },
    [MQTT_PROP_SHARED_SUB_AVAILABLE] = { PT_BYTE, C(MQTT_CONNACK), F(shared_sub_available) },
};
#define NDEFS TB_ARRAY_LEN(defs)

/* User Property repeats everywhere; Subscription Identifier repeats in PUBLISH
 * (one per matching subscription, 3.3.2.3.8) and is single in SUBSCRIBE. */
static inline bool is_list(uint8_t id, unsigned ctx)
{
    return id == MQTT_PROP_USER || (id == MQTT_PROP_SUBSCRIPTION_ID && ctx == MQTT_PUBLISH);
}

static mqtt_list_t *list_of(mqtt_props_t *pr, uint8_t id)
{
    return id == MQTT_PROP_USER ? &pr->user : &pr->sub_ids;
}

/* Reads one value of the given type from r. Returns 0, -1 if the value runs
 * past the end, -2 for a Variable Byte Integer that is too long or overlong. */
static int get_value(mqtt__rd_t *r, uint8_t type, uint32_t *num, mqtt_bytes_t *s1, mqtt_bytes_t *s2)
{
    uint8_t b;
    uint16_t h;
    unsigned used;
    switch (type) {
    case PT_BYTE:
        if (!mqtt__get_u8(r, &b))
            return -1;
        *num = b;
        return 0;
    case PT_U16:
        if (!mqtt__get_u16(r, &h))
            return -1;
        *num = h;
        return 0;
    case PT_U32:
        return mqtt__get_u32(r, num) ? 0 : -1;
    case PT_VARINT:
        switch (mqtt__varint(r->p, mqtt__left(r), num, &used)) {
        case MQTT__VI_OK: break;
        case MQTT__VI_SHORT: return -1;
        default: return -2;
        }
        r->p += used;
        return 0;
    case PT_STR:
    case PT_BIN:
        return mqtt__get_bin(r, s1) ? 0 : -1;
    case PT_PAIR:
        return mqtt__get_bin(r, s1) && mqtt__get_bin(r, s2) ? 0 : -1;
    default:
        return -1;
    }
}

int mqtt__prop_next(const uint8_t **p, const uint8_t *end, uint8_t *id,
                    const uint8_t **val, const uint8_t **val_end)
{
    if (*p >= end)
        return 0;
    mqtt__rd_t r = { *p, end };
    uint8_t i = *r.p++;
    if (i >= NDEFS || defs[i].type == PT_NONE)
        return -1;
    uint32_t num;
    mqtt_bytes_t s1, s2;
    *val = r.p;
    if (get_value(&r, defs[i].type, &num, &s1, &s2) < 0)
        return -1;
    *val_end = r.p;
    *id = i;
    *p = r.p;
    return 1;
}

/* Value rules beyond the data type: each "It is a Protocol Error ..." of
 * 3.1.2.11, 3.2.2.3 and 3.3.2.3. Returns 0 or a reason code. */
static uint8_t check_value(uint8_t id, uint32_t num, mqtt_bytes_t s1, mqtt_bytes_t s2)
{
    switch (id) {
    case MQTT_PROP_PAYLOAD_FORMAT:        /* 0 bytes, 1 UTF-8 (3.3.2.3.2) */
    case MQTT_PROP_REQUEST_PROBLEM_INFO:  /* 3.1.2.11.7: 0 or 1 */
    case MQTT_PROP_REQUEST_RESPONSE_INFO: /* 3.1.2.11.6: 0 or 1 */
    case MQTT_PROP_MAXIMUM_QOS:           /* 3.2.2.3.4: 0 or 1 */
    case MQTT_PROP_RETAIN_AVAILABLE:      /* 3.2.2.3.5 */
    case MQTT_PROP_WILDCARD_SUB_AVAILABLE:/* 3.2.2.3.11 */
    case MQTT_PROP_SUB_ID_AVAILABLE:      /* 3.2.2.3.12 */
    case MQTT_PROP_SHARED_SUB_AVAILABLE:  /* 3.2.2.3.13 */
        return num > 1 ? MQTT_RC_PROTOCOL_ERROR : 0;
    case MQTT_PROP_SUBSCRIPTION_ID:       /* 1..268,435,455 (3.3.2.3.8, 3.8.2.1.2) */
    case MQTT_PROP_RECEIVE_MAXIMUM:       /* 3.1.2.11.3: 0 is a Protocol Error */
    case MQTT_PROP_MAXIMUM_PACKET_SIZE:   /* 3.1.2.11.4: 0 is a Protocol Error */
    case MQTT_PROP_TOPIC_ALIAS:           /* [MQTT-3.3.2-8]: 0 not permitted */
        return num == 0 ? MQTT_RC_PROTOCOL_ERROR : 0;
    case MQTT_PROP_RESPONSE_TOPIC:        /* a Topic Name [MQTT-3.3.2-13], [MQTT-3.3.2-14] */
        if (s1.n == 0)                    /* [MQTT-4.7.3-1] */
            return MQTT_RC_PROTOCOL_ERROR;
        return mqtt__topic_name_check(s1.p, s1.n);
    case MQTT_PROP_USER:                  /* [MQTT-1.5.7-1]: both UTF-8 strings */
        return mqtt__utf8_ok(s1.p, s1.n) && mqtt__utf8_ok(s2.p, s2.n) ? 0 : MQTT_RC_MALFORMED_PACKET;
    default:
        if (defs[id].type == PT_STR && !mqtt__utf8_ok(s1.p, s1.n))
            return MQTT_RC_MALFORMED_PACKET;
        return 0;
    }
}

int mqtt__props_decode(mqtt__rd_t *r, unsigned ctx, mqtt_props_t *pr, mqtt_diag_t *d)
{
    uint32_t len;
    unsigned used;
    int vr = mqtt__varint(r->p, mqtt__left(r), &len, &used);
    if (vr == MQTT__VI_SHORT)
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "packet ends inside property length");
    if (vr != MQTT__VI_OK)
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "property length is not a valid variable byte integer");
    r->p += used;
    if (len > mqtt__left(r))
        return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "property length exceeds the packet");
    mqtt__rd_t pr_r = { r->p, r->p + len };
    r->p += len;

    while (pr_r.p < pr_r.end) {
        const uint8_t *start = pr_r.p;
        uint8_t id = *pr_r.p++;
        /* Identifiers are Variable Byte Integers, but all defined ones are < 0x80. */
        if (id >= NDEFS || defs[id].type == PT_NONE)
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "unknown property identifier");
        const prop_def_t *def = &defs[id];
        if (!(def->ctx & C(ctx)))
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "property not valid in this packet type");
        uint32_t num = 0;
        mqtt_bytes_t s1 = { 0 }, s2 = { 0 };
        int gv = get_value(&pr_r, def->type, &num, &s1, &s2);
        if (gv == -2)
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "subscription identifier is not a valid variable byte integer");
        if (gv < 0)
            return mqtt__fail(d, MQTT_RC_MALFORMED_PACKET, "property value runs past the property length");
        uint8_t bad = check_value(id, num, s1, s2);
        if (bad)
            return mqtt__fail(d, bad, bad == MQTT_RC_MALFORMED_PACKET ? "property string is not valid UTF-8"
                                                                      : "property value out of range");
        if (is_list(id, ctx)) {
            mqtt_list_t *l = list_of(pr, id);
            if (l->count == 0)
                l->raw.p = start;
            l->raw.n = (uint32_t)(pr_r.p - l->raw.p);
            l->count++;
            continue;
        }
        if (pr->present & MQTT_PROP_BIT(id))
            return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "property appears more than once");
        pr->present |= MQTT_PROP_BIT(id);
        char *field = (char *)pr + def->off;
        switch (def->type) {
        case PT_BYTE: *(uint8_t *)field = (uint8_t)num; break;
        case PT_U16: *(uint16_t *)field = (uint16_t)num; break;
        case PT_U32:
        case PT_VARINT: *(uint32_t *)field = num; break;
        default: *(mqtt_bytes_t *)field = s1; break;
        }
    }
    /* 3.1.2.11.10 / 3.2.2.3.17 / 3.15.2.2.3: data without a method. */
    if (MQTT_HAS(pr, MQTT_PROP_AUTH_DATA) && !MQTT_HAS(pr, MQTT_PROP_AUTH_METHOD))
        return mqtt__fail(d, MQTT_RC_PROTOCOL_ERROR, "authentication data without authentication method");
    return 0;
}

/* Copies every TLV with identifier `want` from a list region; sets err if
 * the region does not parse. */
static void put_list(mqtt__wr_t *w, const mqtt_list_t *l, uint8_t want)
{
    const uint8_t *p = l->raw.p, *end = l->raw.p + l->raw.n;
    const uint8_t *tlv = p, *v, *ve;
    uint8_t id;
    int rc;
    if (!l->raw.n)
        return;
    while ((rc = mqtt__prop_next(&p, end, &id, &v, &ve)) == 1) {
        if (id == want)
            mqtt__put(w, tlv, (size_t)(ve - tlv));
        tlv = p;
    }
    if (rc < 0)
        w->err = -EINVAL;
}

static void put_body(mqtt__wr_t *w, const mqtt_props_t *pr, unsigned ctx)
{
    uint64_t bits = pr->present;
    if ((bits >> NDEFS) || (bits & 1)) {
        w->err = -EINVAL;
        return;
    }
    for (uint8_t id = 1; id < NDEFS; id++) {
        if (!(bits & MQTT_PROP_BIT(id)))
            continue;
        const prop_def_t *def = &defs[id];
        if (def->type == PT_NONE || def->type == PT_PAIR || is_list(id, ctx) || !(def->ctx & C(ctx))) {
            w->err = -EINVAL;
            return;
        }
        const char *field = (const char *)pr + def->off;
        mqtt__put_u8(w, id);
        switch (def->type) {
        case PT_BYTE: mqtt__put_u8(w, *(const uint8_t *)field); break;
        case PT_U16: mqtt__put_u16(w, *(const uint16_t *)field); break;
        case PT_U32: mqtt__put_u32(w, *(const uint32_t *)field); break;
        case PT_VARINT: mqtt__put_varint(w, *(const uint32_t *)field); break;
        default: mqtt__put_bin(w, *(const mqtt_bytes_t *)field); break;
        }
    }
    if (pr->user.raw.n)
        put_list(w, &pr->user, MQTT_PROP_USER);
    if (pr->sub_ids.raw.n) {
        if (ctx != MQTT_PUBLISH)
            w->err = -EINVAL;
        put_list(w, &pr->sub_ids, MQTT_PROP_SUBSCRIPTION_ID);
    }
}

void mqtt__props_put(mqtt__wr_t *w, const mqtt_props_t *pr, unsigned ctx)
{
    mqtt__wr_t count = { NULL, 0, 0 };
    put_body(&count, pr, ctx);
    if (count.err) {
        w->err = count.err;
        return;
    }
    mqtt__put_varint(w, (uint32_t)TB_MIN(count.n, (size_t)UINT32_MAX));
    put_body(w, pr, ctx);
}

bool mqtt__props_empty(const mqtt_props_t *pr)
{
    return pr->present == 0 && pr->user.raw.n == 0 && pr->sub_ids.raw.n == 0;
}

/* ---- iterators over property lists ------------------------------------------- */

void mqtt_iter_init(mqtt_iter_t *it, const mqtt_list_t *list)
{
    it->p = list->raw.p;
    it->end = list->raw.p ? list->raw.p + list->raw.n : NULL;
}

static bool next_of(mqtt_iter_t *it, uint8_t want, const uint8_t **v, const uint8_t **ve)
{
    uint8_t id;
    if (!it->p)
        return false;
    while (mqtt__prop_next(&it->p, it->end, &id, v, ve) == 1)
        if (id == want)
            return true;
    it->p = it->end;
    return false;
}

bool mqtt_next_user_prop(mqtt_iter_t *it, mqtt_bytes_t *key, mqtt_bytes_t *val)
{
    const uint8_t *v, *ve;
    if (!next_of(it, MQTT_PROP_USER, &v, &ve))
        return false;
    mqtt__rd_t r = { v, ve };
    return mqtt__get_bin(&r, key) && mqtt__get_bin(&r, val);
}

bool mqtt_next_sub_id(mqtt_iter_t *it, uint32_t *id)
{
    const uint8_t *v, *ve;
    unsigned used;
    if (!next_of(it, MQTT_PROP_SUBSCRIPTION_ID, &v, &ve))
        return false;
    return mqtt__varint(v, (size_t)(ve - v), id, &used) == MQTT__VI_OK;
}
