/*
 * test_mqtt_codec_encode.c: the encoder's contract: the size it announces is
 * the size it writes, a short buffer is refused untouched, and packets that
 * cannot exist on the wire are refused rather than produced.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

static void small_publish(mqtt_packet_t *p)
{
    mqtt_packet_init(p, MQTT_PUBLISH, MQTT_V311);
    p->u.publish.qos = 1;
    p->u.publish.packet_id = 7;
    p->u.publish.topic = MQTT_BYTES("a/b");
    p->u.publish.payload = MQTT_BYTES("xyz");
}

Test(mqtt_encode, short_buffer_is_full_and_untouched)
{
    mqtt_packet_t p;
    small_publish(&p);
    int size = mqtt_encoded_size(&p);
    uint8_t b[64];
    memset(b, 0xAA, sizeof b);
    cr_assert_eq(mqtt_encode(&p, b, (size_t)size - 1), TB_EFULL);
    for (size_t i = 0; i < sizeof b; i++)
        cr_assert_eq(b[i], 0xAA);
}

Test(mqtt_encode, exact_buffer_is_enough)
{
    mqtt_packet_t p;
    small_publish(&p);
    int size = mqtt_encoded_size(&p);
    uint8_t b[64];
    cr_assert_eq(mqtt_encode(&p, b, (size_t)size), size);
}

Test(mqtt_encode, qos3_is_refused)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.u.publish.qos = 3;
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, dup_with_qos0_is_refused)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.u.publish.qos = 0;
    p.u.publish.dup = true;
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, publish_packet_id_zero_is_refused)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.u.publish.packet_id = 0;
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, string_over_65535_bytes_is_refused)
{
    static uint8_t big[65536];
    mqtt_packet_t p;
    small_publish(&p);
    p.u.publish.topic = (mqtt_bytes_t){ big, sizeof big };
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, packet_over_the_protocol_limit_is_refused)
{
    /* the payload view is never read when the size is refused */
    static uint8_t one;
    mqtt_packet_t p;
    small_publish(&p);
    p.u.publish.payload = (mqtt_bytes_t){ &one, MQTT_MAX_REMAINING };
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, connect_password_without_user_name_is_refused_in_311)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_CONNECT, MQTT_V311);
    p.u.connect.has_password = true;
    p.u.connect.password = MQTT_BYTES("pw");
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, unknown_version_is_refused)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.version = 6;
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, v311_ignores_properties)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.props.topic_alias = 3;
    MQTT_SET(&p.props, MQTT_PROP_TOPIC_ALIAS);
    tmq_assert_bytes(tmq_encode(&p), "32 0a <a/b> 00 07 'xyz'");
}

Test(mqtt_encode, decoder_refuses_unknown_version)
{
    mqtt_packet_t p;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode((const uint8_t *)"\xc0\x00", 2, 6, 0, &p, &d), -EINVAL);
}

Test(mqtt_encode, v5_empty_topic_without_alias_is_refused)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.version = MQTT_V5;
    p.u.publish.topic = MQTT_BYTES("");
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_encode, v5_empty_topic_with_alias_encodes)
{
    mqtt_packet_t p;
    small_publish(&p);
    p.version = MQTT_V5;
    p.u.publish.topic = MQTT_BYTES("");
    p.props.topic_alias = 2;
    MQTT_SET(&p.props, MQTT_PROP_TOPIC_ALIAS);
    tmq_assert_bytes(tmq_encode(&p), "32 0b 00 00 00 07 03 23 00 02 'xyz'");
}

Test(mqtt_encode, no_local_on_shared_subscription_is_refused)
{
    uint8_t region[32];
    size_t off = 0;
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_SUBSCRIBE, MQTT_V5);
    p.u.sub.packet_id = 1;
    cr_assert_eq(mqtt_put_sub(&p.u.sub.filters, region, sizeof region, &off, MQTT_BYTES("$share/g/a"),
                              MQTT_SUBOPT_NO_LOCAL), 0);
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}
