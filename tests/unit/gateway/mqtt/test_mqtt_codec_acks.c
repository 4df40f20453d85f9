/*
 * test_mqtt_codec_acks.c: PUBACK, PUBREC, PUBREL, PUBCOMP, PINGREQ,
 * PINGRESP, DISCONNECT and AUTH: both versions, the MQTT 5 short forms, the
 * reason-code tables, and the one-call encoders a server uses.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

static mqtt_bytes_t view(const uint8_t *b, int n)
{
    cr_assert_gt(n, 0, "encoder returned %d", n);
    return (mqtt_bytes_t){ b, (uint32_t)n };
}

Test(mqtt_ack, v311_puback_decodes_packet_id)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x40, "00 0a", MQTT_V311, &p);
    cr_assert_eq(p.type, MQTT_PUBACK);
    cr_assert_eq(p.u.ack.packet_id, 10);
    cr_assert_eq(p.u.ack.reason, 0);
}

Test(mqtt_ack, v311_each_ack_type_decodes)
{
    static const uint8_t first[] = { 0x40, 0x50, 0x62, 0x70 };
    static const mqtt_type_t type[] = { MQTT_PUBACK, MQTT_PUBREC, MQTT_PUBREL, MQTT_PUBCOMP };
    for (size_t i = 0; i < 4; i++) {
        mqtt_packet_t p;
        tmq_dec_ok(first[i], "12 34", MQTT_V311, &p);
        cr_assert_eq(p.type, type[i]);
        cr_assert_eq(p.u.ack.packet_id, 0x1234);
    }
}

Test(mqtt_ack, v311_ack_with_a_reason_byte_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x40, "00 0a 00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_ack, ack_packet_id_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x40, "00 00", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_ack, ack_shorter_than_packet_id_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x40, "0a", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_ack, pubrel_with_flags_0000_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x60, "00 0a", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_ack, v5_short_form_means_success)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x40, "00 0a", MQTT_V5, &p);
    cr_assert_eq(p.u.ack.reason, MQTT_RC_SUCCESS);
}

Test(mqtt_ack, v5_reason_without_properties_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x40, "00 0a 10", MQTT_V5, &p);
    cr_assert_eq(p.u.ack.reason, MQTT_RC_NO_MATCHING_SUBSCRIBERS);
    cr_assert_eq(p.props.present, 0);
}

Test(mqtt_ack, v5_reason_string_and_user_property_decode)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x50, "00 0a 97 0e 1f <full> 26 <a> <b>", MQTT_V5, &p);
    cr_assert_eq(p.type, MQTT_PUBREC);
    cr_assert_eq(p.u.ack.reason, MQTT_RC_QUOTA_EXCEEDED);
    cr_assert(tmq_view_is(p.props.reason_string, "full"));
    cr_assert_eq(p.props.user.count, 1);
}

Test(mqtt_ack, v5_reason_not_listed_for_puback_is_protocol_error)
{
    /* 0x92 Packet Identifier not found belongs to PUBREL/PUBCOMP */
    cr_assert_eq(tmq_dec_err(0x40, "00 0a 92", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_ack, v5_pubrel_reason_92_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x62, "00 0a 92", MQTT_V5, &p);
    cr_assert_eq(p.u.ack.reason, MQTT_RC_PACKET_IDENTIFIER_NOT_FOUND);
}

Test(mqtt_ack, v5_topic_alias_in_puback_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x40, "00 0a 00 03 23 00 01", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_ack, encode_v311_puback_is_four_bytes)
{
    uint8_t b[8];
    tmq_assert_bytes(view(b, mqtt_encode_ack(b, sizeof b, MQTT_V311, MQTT_PUBACK, 10, 0, NULL)), "40 02 00 0a");
}

Test(mqtt_ack, encode_v311_pubrel_carries_flags_0010)
{
    uint8_t b[8];
    tmq_assert_bytes(view(b, mqtt_encode_ack(b, sizeof b, MQTT_V311, MQTT_PUBREL, 10, 0, NULL)), "62 02 00 0a");
}

Test(mqtt_ack, encode_v311_refuses_a_failure_reason)
{
    uint8_t b[8];
    cr_assert_eq(mqtt_encode_ack(b, sizeof b, MQTT_V311, MQTT_PUBACK, 10, MQTT_RC_PAYLOAD_FORMAT_INVALID, NULL),
                 -EINVAL);
}

Test(mqtt_ack, encode_v5_success_uses_the_short_form)
{
    uint8_t b[8];
    tmq_assert_bytes(view(b, mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBACK, 10, 0, NULL)), "40 02 00 0a");
}

Test(mqtt_ack, encode_v5_failure_omits_property_length)
{
    uint8_t b[8];
    tmq_assert_bytes(view(b, mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBACK, 10, MQTT_RC_PAYLOAD_FORMAT_INVALID, NULL)),
                     "40 03 00 0a 99");
}

Test(mqtt_ack, encode_v5_with_reason_string)
{
    mqtt_props_t pr = { 0 };
    pr.reason_string = MQTT_BYTES("schema");
    MQTT_SET(&pr, MQTT_PROP_REASON_STRING);
    uint8_t b[32];
    tmq_assert_bytes(view(b, mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBACK, 10, MQTT_RC_PAYLOAD_FORMAT_INVALID, &pr)),
                     "40 0d 00 0a 99 09 1f <schema>");
}

Test(mqtt_ack, encode_ack_refuses_a_non_ack_type)
{
    uint8_t b[8];
    cr_assert_eq(mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBLISH, 10, 0, NULL), -EINVAL);
}

Test(mqtt_ack, encode_ack_refuses_packet_id_zero)
{
    uint8_t b[8];
    cr_assert_eq(mqtt_encode_ack(b, sizeof b, MQTT_V5, MQTT_PUBACK, 0, 0, NULL), -EINVAL);
}

/* ---- PINGREQ / PINGRESP ------------------------------------------------------------ */

Test(mqtt_ping, pingreq_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xC0, "", MQTT_V311, &p);
    cr_assert_eq(p.type, MQTT_PINGREQ);
}

Test(mqtt_ping, pingresp_encodes_to_d0_00)
{
    uint8_t b[2];
    tmq_assert_bytes(view(b, mqtt_encode_pingresp(b, sizeof b)), "d0 00");
}

Test(mqtt_ping, pingresp_into_one_byte_is_full)
{
    uint8_t b[1];
    cr_assert_eq(mqtt_encode_pingresp(b, sizeof b), TB_EFULL);
}

/* ---- DISCONNECT ------------------------------------------------------------------------ */

Test(mqtt_disconnect, v311_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xE0, "", MQTT_V311, &p);
    cr_assert_eq(p.type, MQTT_DISCONNECT);
}

Test(mqtt_disconnect, v311_with_a_body_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xE0, "00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_disconnect, v5_empty_means_normal_disconnection)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xE0, "", MQTT_V5, &p);
    cr_assert_eq(p.u.disconnect.reason, 0);
}

Test(mqtt_disconnect, v5_with_will_and_session_expiry)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xE0, "04 05 11 00 00 00 00", MQTT_V5, &p);
    cr_assert_eq(p.u.disconnect.reason, MQTT_RC_DISCONNECT_WITH_WILL);
    cr_assert(MQTT_HAS(&p.props, MQTT_PROP_SESSION_EXPIRY));
    cr_assert_eq(p.props.session_expiry, 0);
}

Test(mqtt_disconnect, v5_reason_not_listed_is_protocol_error)
{
    /* 0x84 Unsupported Protocol Version is CONNACK only */
    cr_assert_eq(tmq_dec_err(0xE0, "84", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_disconnect, encode_v5_with_reason_and_string)
{
    mqtt_props_t pr = { 0 };
    pr.reason_string = MQTT_BYTES("bad topic");
    MQTT_SET(&pr, MQTT_PROP_REASON_STRING);
    uint8_t b[32];
    tmq_assert_bytes(view(b, mqtt_encode_disconnect(b, sizeof b, MQTT_V5, MQTT_RC_MALFORMED_PACKET, &pr)),
                     "e0 0e 81 0c 1f <bad topic>");
}

Test(mqtt_disconnect, encode_v5_normal_is_two_bytes)
{
    uint8_t b[8];
    tmq_assert_bytes(view(b, mqtt_encode_disconnect(b, sizeof b, MQTT_V5, 0, NULL)), "e0 00");
}

/* ---- AUTH ------------------------------------------------------------------------------------ */

Test(mqtt_auth, v5_continue_with_method_and_data)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xF0, "18 0e 15 <SCRAM> 16 00 03 01 02 03", MQTT_V5, &p);
    cr_assert_eq(p.type, MQTT_AUTH);
    cr_assert_eq(p.u.disconnect.reason, MQTT_RC_CONTINUE_AUTHENTICATION);
    cr_assert(tmq_view_is(p.props.auth_method, "SCRAM"));
    cr_assert_eq(p.props.auth_data.n, 3);
}

Test(mqtt_auth, v5_data_without_method_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0xF0, "18 04 16 00 01 09", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_auth, v5_reason_not_listed_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0xF0, "87 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_auth, encode_in_311_is_refused)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_AUTH, MQTT_V311);
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_auth, roundtrips)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xF0, "19 0e 15 <SCRAM> 16 00 03 01 02 03", MQTT_V5, &p);
    tmq_assert_roundtrip(&p);
}
