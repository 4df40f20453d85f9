/*
 * mqtt_equal.c: semantic equality of decoded packets.
 *
 * Exists for round trips (unit tests and the fuzzer: decode -> encode ->
 * decode must give the same packet). Byte equality of the wire form is the
 * wrong test, because one packet has several spellings (MQTT 5 short-form
 * acks, properties in any order, user properties interleaved with others),
 * and struct equality is wrong too, because views and list regions point into
 * different buffers. So: fields by value, views by content, lists item by
 * item in order.
 */
#include "gateway/mqtt/mqtt_int.h"

static bool bytes_eq(mqtt_bytes_t a, mqtt_bytes_t b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static bool user_eq(const mqtt_list_t *a, const mqtt_list_t *b)
{
    mqtt_iter_t ia, ib;
    mqtt_bytes_t ka, va, kb, vb;
    mqtt_iter_init(&ia, a);
    mqtt_iter_init(&ib, b);
    for (;;) {
        bool ha = mqtt_next_user_prop(&ia, &ka, &va), hb = mqtt_next_user_prop(&ib, &kb, &vb);
        if (ha != hb)
            return false;
        if (!ha)
            return true;
        if (!bytes_eq(ka, kb) || !bytes_eq(va, vb))
            return false;
    }
}

static bool sub_ids_eq(const mqtt_list_t *a, const mqtt_list_t *b)
{
    mqtt_iter_t ia, ib;
    uint32_t x, y;
    mqtt_iter_init(&ia, a);
    mqtt_iter_init(&ib, b);
    for (;;) {
        bool ha = mqtt_next_sub_id(&ia, &x), hb = mqtt_next_sub_id(&ib, &y);
        if (ha != hb)
            return false;
        if (!ha)
            return true;
        if (x != y)
            return false;
    }
}

bool mqtt_props_equal(const mqtt_props_t *a, const mqtt_props_t *b)
{
    uint64_t p = a->present;
    if (p != b->present)
        return false;
#define NUM(id, f) if ((p & MQTT_PROP_BIT(id)) && a->f != b->f) return false
#define VIEW(id, f) if ((p & MQTT_PROP_BIT(id)) && !bytes_eq(a->f, b->f)) return false
    NUM(MQTT_PROP_PAYLOAD_FORMAT, payload_format);
    NUM(MQTT_PROP_MESSAGE_EXPIRY, message_expiry);
    VIEW(MQTT_PROP_CONTENT_TYPE, content_type);
    VIEW(MQTT_PROP_RESPONSE_TOPIC, response_topic);
    VIEW(MQTT_PROP_CORRELATION_DATA, correlation_data);
    NUM(MQTT_PROP_SUBSCRIPTION_ID, subscription_id);
    NUM(MQTT_PROP_SESSION_EXPIRY, session_expiry);
    VIEW(MQTT_PROP_ASSIGNED_CLIENT_ID, assigned_client_id);
    NUM(MQTT_PROP_SERVER_KEEP_ALIVE, server_keep_alive);
    VIEW(MQTT_PROP_AUTH_METHOD, auth_method);
    VIEW(MQTT_PROP_AUTH_DATA, auth_data);
    NUM(MQTT_PROP_REQUEST_PROBLEM_INFO, request_problem_info);
    NUM(MQTT_PROP_WILL_DELAY, will_delay);
    NUM(MQTT_PROP_REQUEST_RESPONSE_INFO, request_response_info);
    VIEW(MQTT_PROP_RESPONSE_INFO, response_info);
    VIEW(MQTT_PROP_SERVER_REFERENCE, server_reference);
    VIEW(MQTT_PROP_REASON_STRING, reason_string);
    NUM(MQTT_PROP_RECEIVE_MAXIMUM, receive_maximum);
    NUM(MQTT_PROP_TOPIC_ALIAS_MAXIMUM, topic_alias_maximum);
    NUM(MQTT_PROP_TOPIC_ALIAS, topic_alias);
    NUM(MQTT_PROP_MAXIMUM_QOS, maximum_qos);
    NUM(MQTT_PROP_RETAIN_AVAILABLE, retain_available);
    NUM(MQTT_PROP_MAXIMUM_PACKET_SIZE, maximum_packet_size);
    NUM(MQTT_PROP_WILDCARD_SUB_AVAILABLE, wildcard_sub_available);
    NUM(MQTT_PROP_SUB_ID_AVAILABLE, sub_id_available);
    NUM(MQTT_PROP_SHARED_SUB_AVAILABLE, shared_sub_available);
#undef NUM
#undef VIEW
    return user_eq(&a->user, &b->user) && sub_ids_eq(&a->sub_ids, &b->sub_ids);
}

static bool connect_eq(const mqtt_connect_t *a, const mqtt_connect_t *b)
{
    if (a->protocol_level != b->protocol_level || a->clean_start != b->clean_start ||
        a->has_will != b->has_will || a->has_username != b->has_username ||
        a->has_password != b->has_password || a->keep_alive != b->keep_alive ||
        !bytes_eq(a->client_id, b->client_id))
        return false;
    if (a->has_will && (a->will_qos != b->will_qos || a->will_retain != b->will_retain ||
                        !bytes_eq(a->will_topic, b->will_topic) || !bytes_eq(a->will_payload, b->will_payload) ||
                        !mqtt_props_equal(&a->will_props, &b->will_props)))
        return false;
    if (a->has_username && !bytes_eq(a->username, b->username))
        return false;
    return !a->has_password || bytes_eq(a->password, b->password);
}

static bool filters_eq(const mqtt_list_t *a, const mqtt_list_t *b, bool with_options)
{
    mqtt_iter_t ia, ib;
    mqtt_bytes_t fa, fb;
    uint8_t oa = 0, ob = 0;
    mqtt_iter_init(&ia, a);
    mqtt_iter_init(&ib, b);
    for (;;) {
        bool ha = with_options ? mqtt_next_sub(&ia, &fa, &oa) : mqtt_next_unsub(&ia, &fa);
        bool hb = with_options ? mqtt_next_sub(&ib, &fb, &ob) : mqtt_next_unsub(&ib, &fb);
        if (ha != hb)
            return false;
        if (!ha)
            return true;
        if (!bytes_eq(fa, fb) || oa != ob)
            return false;
    }
}

bool mqtt_packet_equal(const mqtt_packet_t *a, const mqtt_packet_t *b)
{
    if (a->type != b->type || a->version != b->version || !mqtt_props_equal(&a->props, &b->props))
        return false;
    switch (a->type) {
    case MQTT_CONNECT: return connect_eq(&a->u.connect, &b->u.connect);
    case MQTT_CONNACK:
        return a->u.connack.session_present == b->u.connack.session_present &&
               a->u.connack.reason == b->u.connack.reason;
    case MQTT_PUBLISH: {
        const mqtt_publish_t *x = &a->u.publish, *y = &b->u.publish;
        return x->qos == y->qos && x->retain == y->retain && x->dup == y->dup &&
               x->packet_id == y->packet_id && bytes_eq(x->topic, y->topic) && bytes_eq(x->payload, y->payload);
    }
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        return a->u.ack.packet_id == b->u.ack.packet_id && a->u.ack.reason == b->u.ack.reason;
    case MQTT_SUBSCRIBE:
    case MQTT_UNSUBSCRIBE:
        return a->u.sub.packet_id == b->u.sub.packet_id &&
               filters_eq(&a->u.sub.filters, &b->u.sub.filters, a->type == MQTT_SUBSCRIBE);
    case MQTT_SUBACK:
    case MQTT_UNSUBACK:
        return a->u.suback.packet_id == b->u.suback.packet_id && bytes_eq(a->u.suback.reasons, b->u.suback.reasons);
    case MQTT_PINGREQ:
    case MQTT_PINGRESP: return true;
    case MQTT_DISCONNECT:
    case MQTT_AUTH: return a->u.disconnect.reason == b->u.disconnect.reason;
    }
    return false;
}
