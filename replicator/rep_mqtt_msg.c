/*
 * rep_mqtt_msg.c: one stored record -> the topic and MQTT 5 properties of
 * its PUBLISH to a remote broker (docs/design/OUTPUTS.md 4.3). Pure: no
 * network, no thread; the payload goes out unchanged, so only the topic
 * and the properties are built here.
 *
 * The record's attributes are what gateway/broker/publish.c:build_attrs
 * stored: extract_attributes captures by name, mqtt.content_type,
 * mqtt.response_topic, mqtt.user.<K> and mqtt.retain. They map back:
 *   mqtt.content_type     -> Content Type (3)
 *   mqtt.user.K = V       -> user property K = V
 *   mqtt.response_topic   -> left out (it names the edge's namespace)
 *   mqtt.retain           -> left out (an output's retain is off)
 *   NAME = V (a capture)  -> user property NAME = V
 *   replayed              -> user property tributary.replayed = true
 * MQTT strings must be UTF-8 without U+0000: an attribute that is not is
 * left out and counted (as rep_encode.c does for Danube). MQTT 3.1.1 has
 * no properties: topic and payload only.
 */
#include "replicator/rep_mosq_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define REPLAYED_KEY "tributary.replayed"

static bool attr_by_name(void *arg, const char *name, size_t name_len, router_slice_t *val)
{
    const wal_record_t *rec = arg;
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(rec, &pos, &a))
        if (a.key_len == name_len && memcmp(a.key, name, name_len) == 0) {
            val->p = (const char *)a.val;
            val->len = a.val_len;
            return true;
        }
    return false;
}

static bool mqtt_string_ok(const uint8_t *s, size_t n)
{
    return tb_utf8_valid(s, n) && memchr(s, 0, n) == NULL;
}

static bool key_is(const wal_attr_t *a, const char *k)
{
    size_t n = strlen(k);
    return a->key_len == n && memcmp(a->key, k, n) == 0;
}

static bool key_starts(const wal_attr_t *a, const char *k)
{
    size_t n = strlen(k);
    return a->key_len >= n && memcmp(a->key, k, n) == 0;
}

bool rep__mqtt_is_replayed(const rep_mqtt_tmpl_t *t, const wal_record_t *rec, uint64_t now_wall_ms)
{
    return now_wall_ms > rec->publish_time_ms && now_wall_ms - rec->publish_time_ms > t->live_window_ms;
}

/* Adds one property from the attribute; libmosquitto wants C strings. */
static int add_prop(mosquitto_property **props, const wal_attr_t *a, size_t key_skip, bool content_type)
{
    char *k = tb_strndup((const char *)a->key + key_skip, a->key_len - key_skip);
    char *v = tb_strndup((const char *)a->val, a->val_len);
    int rc = content_type ? mosquitto_property_add_string(props, MQTT_PROP_CONTENT_TYPE, v)
                          : mosquitto_property_add_string_pair(props, MQTT_PROP_USER_PROPERTY, k, v);
    free(k);
    free(v);
    return rc == MOSQ_ERR_SUCCESS ? 0 : -ENOMEM;
}

static int build_props(const wal_record_t *rec, bool replayed, mosquitto_property **props, uint32_t *skipped)
{
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(rec, &pos, &a)) {
        if (key_is(&a, "mqtt.response_topic") || key_is(&a, "mqtt.retain"))
            continue;
        if (!mqtt_string_ok(a.key, a.key_len) || !mqtt_string_ok(a.val, a.val_len)) {
            (*skipped)++;
            continue;
        }
        int rc;
        if (key_is(&a, "mqtt.content_type"))
            rc = add_prop(props, &a, 0, true);
        else if (key_starts(&a, "mqtt.user."))
            rc = add_prop(props, &a, strlen("mqtt.user."), false);
        else
            rc = add_prop(props, &a, 0, false);
        if (rc < 0)
            return rc;
    }
    if (replayed && mosquitto_property_add_string_pair(props, MQTT_PROP_USER_PROPERTY, REPLAYED_KEY, "true"))
        return -ENOMEM;
    return 0;
}

int rep__mqtt_build(const rep_mqtt_tmpl_t *t, const wal_record_t *rec, bool replayed, char *topic,
                    size_t cap, mosquitto_property **props, uint32_t *skipped)
{
    *props = NULL;
    if (cap == 0)
        return REP_MQTT_ETOOLONG;
    router_match_t m;
    router_out_ctx_t ctx = {
        .topic = { rec->mqtt_topic, rec->mqtt_topic_len },
        .upstream = { t->upstream, strlen(t->upstream) },
        .m = NULL,
        .attr = attr_by_name,
        .arg = (void *)rec,
    };
    if (t->router && router_out_needs_match(t->remote_topic)) {
        if (router_match(t->router, rec->mqtt_topic, rec->mqtt_topic_len, &m) >= 0)
            ctx.m = &m;
    }
    size_t room = TB_MIN(cap - 1, (size_t)ROUTER_OUT_MAX);
    int n = router_out_expand(t->remote_topic, &ctx, topic, room);
    if (n == ROUTER_OUT_ETOOLONG)
        return REP_MQTT_ETOOLONG;
    if (n < 0)
        return REP_MQTT_EVALUE;
    topic[n] = 0;
    if (t->protocol != 5)
        return n;
    int rc = build_props(rec, replayed, props, skipped);
    if (rc < 0) {
        mosquitto_property_free_all(props);
        *props = NULL;
        return rc;
    }
    return n;
}

static size_t varint_len(size_t v)
{
    return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : 4;
}

/* One property's encoded size: its identifier and its value (MQTT 5, 2.2.2.2). The
 * gateway sets only string pairs (user properties) and strings (content type); other types
 * are sized by their identifier's type for completeness. */
static size_t prop_len(const mosquitto_property *p)
{
    int id = mosquitto_property_identifier(p);
    char *k = NULL, *v = NULL;
    size_t n = 1;
    if (mosquitto_property_read_string_pair(p, id, &k, &v, false)) {
        n += 2 + strlen(k) + 2 + strlen(v);
    } else if (mosquitto_property_read_string(p, id, &v, false)) {
        n += 2 + strlen(v);
    } else {
        uint16_t blen = 0;
        void *bin = NULL;
        uint32_t vi;
        uint8_t b;
        uint16_t w;
        if (mosquitto_property_read_binary(p, id, &bin, &blen, false))
            n += 2 + blen;
        else if (mosquitto_property_read_varint(p, id, &vi, false))
            n += varint_len(vi);
        else if (mosquitto_property_read_byte(p, id, &b, false))
            n += 1;
        else if (mosquitto_property_read_int16(p, id, &w, false))
            n += 2;
        else
            n += 4;
        free(bin);
    }
    free(k);
    free(v);
    return n;
}

size_t rep__mqtt_packet_bytes(size_t topic_len, size_t payload_len, int qos, int protocol,
                              const mosquitto_property *props)
{
    size_t rest = 2 + topic_len + (qos > 0 ? 2 : 0) + payload_len;
    if (protocol == 5) {
        size_t pl = 0;
        for (const mosquitto_property *p = props; p; p = mosquitto_property_next(p))
            pl += prop_len(p);
        rest += varint_len(pl) + pl;
    }
    return 1 + varint_len(rest) + rest;
}
