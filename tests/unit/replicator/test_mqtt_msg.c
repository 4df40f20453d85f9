/*
 * test_mqtt_msg.c: rep_mqtt_msg.c, a stored record -> the remote topic and
 * the MQTT 5 properties of its PUBLISH (docs/design/OUTPUTS.md 4.3).
 * Records are built in the WAL's attribute layout (key len, value len,
 * little endian, then the bytes), as gateway/broker/publish.c stores them.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "replicator/rep_mosq_int.h"

typedef struct rec_buf {
    uint8_t attrs[1024];
    size_t len;
    uint8_t n;
    wal_record_t rec;
} rec_buf_t;

static void add_attr(rec_buf_t *b, const char *k, size_t kl, const char *v, size_t vl)
{
    uint8_t *p = b->attrs + b->len;
    p[0] = (uint8_t)kl;
    p[1] = (uint8_t)(kl >> 8);
    p[2] = (uint8_t)vl;
    p[3] = (uint8_t)(vl >> 8);
    memcpy(p + 4, k, kl);
    memcpy(p + 4 + kl, v, vl);
    b->len += 4 + kl + vl;
    b->n++;
}

static void add(rec_buf_t *b, const char *k, const char *v)
{
    add_attr(b, k, strlen(k), v, strlen(v));
}

static void finish(rec_buf_t *b, const char *topic)
{
    b->rec = (wal_record_t){ .offset = 7, .publish_time_ms = 1000, .qos = 1, .payload = (const uint8_t *)"p",
                             .payload_len = 1, .mqtt_topic = topic, .mqtt_topic_len = (uint16_t)strlen(topic),
                             .nattrs = b->n, .attrs_raw = b->attrs, .attrs_raw_len = (uint32_t)b->len };
}

typedef struct fixture {
    router_t *router;
    router_out_t *tmpl;
    rep_mqtt_tmpl_t t;
} fixture_t;

static void setup(fixture_t *f, const char *tmpl, int protocol)
{
    static const router_attr_spec_t attrs[] = { { "site", "$1" } };
    router_spec_t spec = { .mqtt_pattern = "plant/+/temp/#", .danube_topic = "/edge/temp", .attrs = attrs,
                           .n_attrs = 1 };
    char err[256];
    cr_assert_eq(router_compile(&spec, 1, &f->router, err, sizeof err), 0, "%s", err);
    cr_assert_eq(router_out_compile(f->router, tmpl, NULL, 0, 0, &f->tmpl, err, sizeof err), 0, "%s", err);
    f->t = (rep_mqtt_tmpl_t){ .router = f->router, .remote_topic = f->tmpl, .upstream = "/edge/temp",
                              .live_window_ms = 5000, .protocol = protocol };
}

static void teardown(fixture_t *f)
{
    router_out_free(f->tmpl);
    router_free(f->router);
}

/* The value of user property `key`, or NULL. */
static char *user_prop(const mosquitto_property *props, const char *key)
{
    char *name = NULL, *value = NULL;
    const mosquitto_property *p = mosquitto_property_read_string_pair(props, MQTT_PROP_USER_PROPERTY, &name, &value,
                                                                      false);
    while (p) {
        bool hit = strcmp(name, key) == 0;
        free(name);
        if (hit)
            return value;
        free(value);
        p = mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, true);
    }
    return NULL;
}

static int count_user_props(const mosquitto_property *props)
{
    int n = 0;
    char *name = NULL, *value = NULL;
    const mosquitto_property *p = mosquitto_property_read_string_pair(props, MQTT_PROP_USER_PROPERTY, &name, &value,
                                                                      false);
    while (p) {
        n++;
        free(name);
        free(value);
        p = mosquitto_property_read_string_pair(p, MQTT_PROP_USER_PROPERTY, &name, &value, true);
    }
    return n;
}

Test(mqtt_msg, template_expands_topic_upstream_captures_and_attributes)
{
    fixture_t f;
    setup(&f, "site1/${upstream}/${1}/${#}/${attr.site}/${topic}", 5);
    rec_buf_t b = { 0 };
    add(&b, "site", "north");
    finish(&b, "plant/north/temp/a/b");
    char topic[ROUTER_OUT_MAX + 1];
    mosquitto_property *props = NULL;
    uint32_t skipped = 0;
    int n = rep__mqtt_build(&f.t, &b.rec, false, topic, sizeof topic, &props, &skipped);
    const char *want = "site1//edge/temp/north/a/b/north/plant/north/temp/a/b";
    cr_assert_eq(n, (int)strlen(want));
    cr_assert_str_eq(topic, want);
    mosquitto_property_free_all(&props);
    teardown(&f);
}

Test(mqtt_msg, attributes_become_user_properties_and_content_type)
{
    fixture_t f;
    setup(&f, "fwd/${topic}", 5);
    rec_buf_t b = { 0 };
    add(&b, "site", "north");
    add(&b, "mqtt.content_type", "application/json");
    add(&b, "mqtt.user.unit", "C");
    add(&b, "mqtt.response_topic", "edge/reply");
    add(&b, "mqtt.retain", "true");
    finish(&b, "plant/north/temp/x");
    char topic[256];
    mosquitto_property *props = NULL;
    uint32_t skipped = 0;
    cr_assert_gt(rep__mqtt_build(&f.t, &b.rec, false, topic, sizeof topic, &props, &skipped), 0);
    cr_assert_str_eq(topic, "fwd/plant/north/temp/x");
    char *v = user_prop(props, "site");
    cr_assert_str_eq(v, "north");
    free(v);
    v = user_prop(props, "unit"); /* mqtt.user.unit -> unit */
    cr_assert_str_eq(v, "C");
    free(v);
    char *ct = NULL;
    cr_assert_not_null(mosquitto_property_read_string(props, MQTT_PROP_CONTENT_TYPE, &ct, false));
    cr_assert_str_eq(ct, "application/json");
    free(ct);
    /* response topic and retain are not forwarded, replayed absent when live */
    cr_assert_eq(count_user_props(props), 2);
    cr_assert_null(user_prop(props, "tributary.replayed"));
    cr_assert_null(mosquitto_property_read_string(props, MQTT_PROP_RESPONSE_TOPIC, &ct, false));
    cr_assert_eq(skipped, 0);
    mosquitto_property_free_all(&props);
    teardown(&f);
}

Test(mqtt_msg, replayed_record_carries_tributary_replayed)
{
    fixture_t f;
    setup(&f, "fwd/${topic}", 5);
    rec_buf_t b = { 0 };
    finish(&b, "plant/north/temp/x");
    cr_assert(rep__mqtt_is_replayed(&f.t, &b.rec, 1000 + 5001));
    cr_assert_not(rep__mqtt_is_replayed(&f.t, &b.rec, 1000 + 5000));
    cr_assert_not(rep__mqtt_is_replayed(&f.t, &b.rec, 10)); /* a clock behind the record */
    char topic[256];
    mosquitto_property *props = NULL;
    uint32_t skipped = 0;
    cr_assert_gt(rep__mqtt_build(&f.t, &b.rec, true, topic, sizeof topic, &props, &skipped), 0);
    char *v = user_prop(props, "tributary.replayed");
    cr_assert_str_eq(v, "true");
    free(v);
    mosquitto_property_free_all(&props);
    teardown(&f);
}

Test(mqtt_msg, non_utf8_attribute_is_left_out_and_counted)
{
    fixture_t f;
    setup(&f, "fwd/${topic}", 5);
    rec_buf_t b = { 0 };
    add_attr(&b, "bad", 3, "\xff\xfe", 2);
    add_attr(&b, "nul", 3, "a\0b", 3);
    add(&b, "good", "yes");
    finish(&b, "plant/north/temp/x");
    char topic[256];
    mosquitto_property *props = NULL;
    uint32_t skipped = 0;
    cr_assert_gt(rep__mqtt_build(&f.t, &b.rec, false, topic, sizeof topic, &props, &skipped), 0);
    cr_assert_eq(skipped, 2);
    cr_assert_eq(count_user_props(props), 1);
    mosquitto_property_free_all(&props);
    teardown(&f);
}

Test(mqtt_msg, mqtt311_carries_no_properties)
{
    fixture_t f;
    setup(&f, "fwd/${topic}", 4);
    rec_buf_t b = { 0 };
    add(&b, "site", "north");
    finish(&b, "plant/north/temp/x");
    char topic[256];
    mosquitto_property *props = (mosquitto_property *)&b; /* must be reset */
    uint32_t skipped = 0;
    cr_assert_gt(rep__mqtt_build(&f.t, &b.rec, true, topic, sizeof topic, &props, &skipped), 0);
    cr_assert_null(props);
    teardown(&f);
}

Test(mqtt_msg, absent_attribute_is_evalue_and_too_long_is_etoolong)
{
    fixture_t f;
    setup(&f, "fwd/${attr.site}/${topic}", 5);
    rec_buf_t b = { 0 };
    finish(&b, "plant/north/temp/x"); /* no "site" attribute stored */
    char topic[256];
    mosquitto_property *props = NULL;
    uint32_t skipped = 0;
    cr_assert_eq(rep__mqtt_build(&f.t, &b.rec, false, topic, sizeof topic, &props, &skipped), REP_MQTT_EVALUE);
    cr_assert_null(props);
    rec_buf_t b2 = { 0 };
    add(&b2, "site", "north");
    finish(&b2, "plant/north/temp/x");
    char small[8];
    cr_assert_eq(rep__mqtt_build(&f.t, &b2.rec, false, small, sizeof small, &props, &skipped), REP_MQTT_ETOOLONG);
    cr_assert_null(props);
    teardown(&f);
}
