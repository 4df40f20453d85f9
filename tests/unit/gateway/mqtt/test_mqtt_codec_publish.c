/*
 * test_mqtt_codec_publish.c: PUBLISH in 3.1.1 and 5.0: exact decoded fields,
 * every property a PUBLISH may carry, the malformed and protocol-error
 * classes, and the spec's example bytes on encode.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

Test(mqtt_publish, v311_spec_example_decodes_topic_and_packet_id)
{
    /* 3.1.1 Figure 3.11: topic "a/b", packet identifier 10; QoS 1 */
    mqtt_packet_t p;
    tmq_dec_ok(0x32, "00 03 61 2f 62 00 0a 'hello'", MQTT_V311, &p);
    cr_assert_eq(p.type, MQTT_PUBLISH);
    cr_assert(tmq_view_is(p.u.publish.topic, "a/b"));
    cr_assert_eq(p.u.publish.packet_id, 10);
    cr_assert_eq(p.u.publish.qos, 1);
    cr_assert_not(p.u.publish.retain);
    cr_assert_not(p.u.publish.dup);
    cr_assert(tmq_view_is(p.u.publish.payload, "hello"));
}

Test(mqtt_publish, qos0_has_no_packet_id)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x31, "<plant/t> 00 0a", MQTT_V311, &p);
    cr_assert_eq(p.u.publish.qos, 0);
    cr_assert(p.u.publish.retain);
    cr_assert_eq(p.u.publish.packet_id, 0);
    cr_assert_eq(p.u.publish.payload.n, 2, "the two bytes are payload, not a packet id");
}

Test(mqtt_publish, qos2_dup_flags_decode)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x3C, "<x> 12 34", MQTT_V311, &p);
    cr_assert_eq(p.u.publish.qos, 2);
    cr_assert(p.u.publish.dup);
    cr_assert_eq(p.u.publish.packet_id, 0x1234);
    cr_assert_eq(p.u.publish.payload.n, 0);
}

Test(mqtt_publish, payload_is_a_view_into_the_input)
{
    mqtt_bytes_t w = tmq_frame(0x30, "<t> 'data'");
    mqtt_packet_t p;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode(w.p, w.n, MQTT_V311, 0, &p, &d), (int)w.n);
    cr_assert_eq(p.u.publish.payload.p, w.p + w.n - 4);
}

Test(mqtt_publish, v5_every_publish_property_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x32,
               "<a/b> 00 07 "
               "31 "                       /* property length 49 */
               "01 01 "                    /* payload format: UTF-8 */
               "02 00 00 0e 10 "           /* message expiry 3600 */
               "03 <text/plain> "          /* content type (13) */
               "08 <re/a> "                /* response topic (7) */
               "09 00 02 ab cd "           /* correlation data (5) */
               "0b 05 "                    /* subscription identifier 5 */
               "23 00 03 "                 /* topic alias 3 */
               "26 <k1> <v1> "             /* user property (9) */
               "0b 80 01 "                 /* subscription identifier 128 */
               "'{}'",
               MQTT_V5, &p);
    const mqtt_props_t *pr = &p.props;
    cr_assert_eq(pr->payload_format, 1);
    cr_assert_eq(pr->message_expiry, 3600);
    cr_assert(tmq_view_is(pr->content_type, "text/plain"));
    cr_assert(tmq_view_is(pr->response_topic, "re/a"));
    cr_assert_eq(pr->correlation_data.n, 2);
    cr_assert_eq(pr->topic_alias, 3);
    cr_assert_eq(pr->sub_ids.count, 2);
    cr_assert_eq(pr->user.count, 1);
    cr_assert(tmq_view_is(p.u.publish.payload, "{}"));
    mqtt_iter_t it;
    uint32_t id;
    mqtt_iter_init(&it, &pr->sub_ids);
    cr_assert(mqtt_next_sub_id(&it, &id) && id == 5);
    cr_assert(mqtt_next_sub_id(&it, &id) && id == 128);
    cr_assert_not(mqtt_next_sub_id(&it, &id));
}

Test(mqtt_publish, v5_spec_example_has_zero_property_length)
{
    /* 5.0 Figure 3-9: "a/b", packet identifier 10, property length 0 */
    mqtt_packet_t p;
    tmq_dec_ok(0x32, "00 03 61 2f 62 00 0a 00", MQTT_V5, &p);
    cr_assert_eq(p.props.present, 0);
    cr_assert_eq(p.u.publish.payload.n, 0);
}

Test(mqtt_publish, v5_empty_topic_with_topic_alias_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x30, "00 00 03 23 00 07 'v'", MQTT_V5, &p);
    cr_assert_eq(p.u.publish.topic.n, 0);
    cr_assert_eq(p.props.topic_alias, 7);
}

Test(mqtt_publish, qos3_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x36, "<t> 00 01", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_publish, dup_with_qos0_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x38, "<t> 'x'", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, packet_id_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x32, "<t> 00 00 'x'", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, wildcard_in_topic_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<a/+/b> 'x'", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, wildcard_after_multibyte_text_is_protocol_error)
{
    /* "é/#" */
    cr_assert_eq(tmq_dec_err(0x30, "00 04 c3 a9 2f 23", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, topic_with_bad_utf8_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x30, "00 02 ff 41 'x'", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_publish, topic_with_overlong_utf8_is_malformed)
{
    /* C0 AF: an overlong '/' */
    cr_assert_eq(tmq_dec_err(0x30, "00 03 61 c0 af 'x'", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_publish, empty_topic_is_protocol_error_in_311)
{
    cr_assert_eq(tmq_dec_err(0x30, "00 00 'x'", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, empty_topic_without_alias_is_protocol_error_in_5)
{
    cr_assert_eq(tmq_dec_err(0x30, "00 00 00 'x'", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, topic_alias_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<t> 03 23 00 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, payload_format_2_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<t> 02 01 02", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, response_topic_with_wildcard_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<t> 06 08 <r/#>", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, empty_response_topic_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<t> 03 08 00 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, subscription_identifier_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x30, "<t> 02 0b 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_publish, v5_missing_property_length_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x32, "<t> 00 01", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_publish, v311_encode_gives_spec_example_bytes)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_PUBLISH, MQTT_V311);
    p.u.publish.qos = 1;
    p.u.publish.packet_id = 10;
    p.u.publish.topic = MQTT_BYTES("a/b");
    p.u.publish.payload = MQTT_BYTES("hi");
    tmq_assert_bytes(tmq_encode(&p), "32 09 00 03 61 2f 62 00 0a 'hi'");
}

Test(mqtt_publish, v5_encode_gives_spec_example_bytes)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_PUBLISH, MQTT_V5);
    p.u.publish.qos = 1;
    p.u.publish.packet_id = 10;
    p.u.publish.topic = MQTT_BYTES("a/b");
    tmq_assert_bytes(tmq_encode(&p), "32 08 00 03 61 2f 62 00 0a 00");
}

Test(mqtt_publish, remaining_length_128_encodes_in_two_bytes)
{
    static uint8_t payload[123];
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_PUBLISH, MQTT_V311);
    p.u.publish.topic = MQTT_BYTES("abc");
    p.u.publish.payload = (mqtt_bytes_t){ payload, sizeof payload };
    mqtt_bytes_t w = tmq_encode(&p);
    cr_assert_eq(w.n, 131);
    cr_assert_eq(w.p[1], 0x80);
    cr_assert_eq(w.p[2], 0x01);
}

Test(mqtt_publish, v5_with_every_property_roundtrips)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x3b,
               "<a/b> 00 07 31 01 01 02 00 00 0e 10 03 <text/plain> 08 <re/a> 09 00 02 ab cd 0b 05 "
               "23 00 03 26 <k1> <v1> 0b 80 01 '{}'",
               MQTT_V5, &p);
    tmq_assert_roundtrip(&p);
}
