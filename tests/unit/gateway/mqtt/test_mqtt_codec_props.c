/*
 * test_mqtt_codec_props.c: MQTT 5 property rules that hold for every packet:
 * placement, duplicates, ranges, lengths, the User Property list and its
 * iterator, and the region builders.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

#define CONNECT_V5(props) "<MQTT> 05 02 00 3c " props " <c>"

Test(mqtt_props, connect_client_limits_decode)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, CONNECT_V5("0f 21 00 14 27 00 00 10 00 22 00 08 17 00 19 01"), 0, &p);
    cr_assert_eq(p.props.receive_maximum, 20);
    cr_assert_eq(p.props.maximum_packet_size, 4096);
    cr_assert_eq(p.props.topic_alias_maximum, 8);
    cr_assert_eq(p.props.request_problem_info, 0);
    cr_assert_eq(p.props.request_response_info, 1);
}

Test(mqtt_props, receive_maximum_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("03 21 00 00"), 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_props, maximum_packet_size_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("05 27 00 00 00 00"), 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_props, request_problem_information_2_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("02 17 02"), 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_props, maximum_qos_2_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x20, "00 00 02 24 02", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_props, duplicate_single_property_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("06 21 00 01 21 00 02"), 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_props, unknown_identifier_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("02 04 00"), 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, identifier_not_allowed_in_the_packet_is_malformed)
{
    /* Topic Alias belongs to PUBLISH */
    cr_assert_eq(tmq_dec_err(0x10, CONNECT_V5("03 23 00 01"), 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, property_length_past_the_packet_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xE0, "00 09 11 00 00 00 00", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, value_past_the_property_length_is_malformed)
{
    /* property length 3 but Session Expiry needs 5 bytes; the rest is left over */
    cr_assert_eq(tmq_dec_err(0xE0, "00 03 11 00 00 00 00", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, property_length_varint_of_five_bytes_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xE0, "00 ff ff ff ff 01", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, string_property_with_bad_utf8_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xE0, "80 04 1f 00 01 fe", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, user_property_value_with_u0000_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xE0, "80 07 26 <k> 00 01 00", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_props, user_properties_repeat_and_iterate_in_order)
{
    /* two user properties with the same key, a reason string between them */
    mqtt_packet_t p;
    tmq_dec_ok(0xE0, "80 16 26 <k> <v1> 1f <why> 26 <k> <v2>", MQTT_V5, &p);
    cr_assert_eq(p.props.user.count, 2);
    mqtt_iter_t it;
    mqtt_bytes_t k, v;
    mqtt_iter_init(&it, &p.props.user);
    cr_assert(mqtt_next_user_prop(&it, &k, &v));
    cr_assert(tmq_view_is(k, "k") && tmq_view_is(v, "v1"));
    cr_assert(mqtt_next_user_prop(&it, &k, &v));
    cr_assert(tmq_view_is(k, "k") && tmq_view_is(v, "v2"));
    cr_assert_not(mqtt_next_user_prop(&it, &k, &v));
    cr_assert(tmq_view_is(p.props.reason_string, "why"));
}

Test(mqtt_props, interleaved_user_properties_roundtrip)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xE0, "80 16 26 <k> <v1> 1f <why> 26 <k> <v2>", MQTT_V5, &p);
    tmq_assert_roundtrip(&p);
}

Test(mqtt_props, empty_list_iterates_nothing)
{
    mqtt_list_t l = { 0 };
    mqtt_iter_t it;
    mqtt_bytes_t k, v;
    mqtt_iter_init(&it, &l);
    cr_assert_not(mqtt_next_user_prop(&it, &k, &v));
}

Test(mqtt_props, built_user_properties_encode_after_the_others)
{
    uint8_t region[64];
    size_t off = 0;
    mqtt_props_t pr = { 0 };
    cr_assert_eq(mqtt_put_user_prop(&pr.user, region, sizeof region, &off, MQTT_BYTES("site"), MQTT_BYTES("A")), 0);
    pr.reason_string = MQTT_BYTES("x");
    MQTT_SET(&pr, MQTT_PROP_REASON_STRING);
    uint8_t b[64];
    int n = mqtt_encode_disconnect(b, sizeof b, MQTT_V5, MQTT_RC_SERVER_SHUTTING_DOWN, &pr);
    tmq_assert_bytes((mqtt_bytes_t){ b, (uint32_t)n }, "e0 10 8b 0e 1f <x> 26 <site> <A>");
}

Test(mqtt_props, builder_refuses_what_does_not_fit)
{
    uint8_t region[8];
    size_t off = 0;
    mqtt_list_t l = { 0 };
    cr_assert_eq(mqtt_put_user_prop(&l, region, sizeof region, &off, MQTT_BYTES("key"), MQTT_BYTES("value")), TB_EFULL);
    cr_assert_eq(off, 0);
    cr_assert_eq(l.count, 0);
}

Test(mqtt_props, builder_refuses_subscription_identifier_zero)
{
    uint8_t region[8];
    size_t off = 0;
    mqtt_list_t l = { 0 };
    cr_assert_eq(mqtt_put_sub_id(&l, region, sizeof region, &off, 0), -EINVAL);
}

Test(mqtt_props, publish_with_built_subscription_identifiers_roundtrips)
{
    uint8_t region[16];
    size_t off = 0;
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_PUBLISH, MQTT_V5);
    p.u.publish.topic = MQTT_BYTES("t");
    cr_assert_eq(mqtt_put_sub_id(&p.props.sub_ids, region, sizeof region, &off, 1), 0);
    cr_assert_eq(mqtt_put_sub_id(&p.props.sub_ids, region, sizeof region, &off, 268435455), 0);
    tmq_assert_bytes(tmq_encode(&p), "30 0b <t> 07 0b 01 0b ff ff ff 7f");
    tmq_assert_roundtrip(&p);
}

Test(mqtt_props, encoder_refuses_a_property_the_packet_does_not_allow)
{
    mqtt_props_t pr = { 0 };
    pr.topic_alias = 1;
    MQTT_SET(&pr, MQTT_PROP_TOPIC_ALIAS);
    uint8_t b[32];
    cr_assert_eq(mqtt_encode_connack(b, sizeof b, MQTT_V5, false, 0, &pr), -EINVAL);
}

Test(mqtt_props, encoder_refuses_subscription_identifier_list_outside_publish)
{
    uint8_t region[8];
    size_t off = 0;
    mqtt_props_t pr = { 0 };
    cr_assert_eq(mqtt_put_sub_id(&pr.sub_ids, region, sizeof region, &off, 3), 0);
    uint8_t b[32];
    cr_assert_eq(mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBACK, 1, 0, &pr), -EINVAL);
}
