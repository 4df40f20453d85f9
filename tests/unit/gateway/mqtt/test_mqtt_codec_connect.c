/*
 * test_mqtt_codec_connect.c: CONNECT (3.1, 3.1.1, 5.0) and CONNACK, decode
 * with exact field values, the CONNECT-specific malformed classes, and the
 * encoders.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

/* 3.1.1 Figure 3.6's variable header (flags 0xCE, keep alive 10) with a payload. */
#define V311_FULL "<MQTT> 04 ce 00 0a <dev-1> <dead/dev-1> <gone> <alice> <s3cret>"

Test(mqtt_connect, v311_spec_example_decodes_every_field)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, V311_FULL, 0, &p);
    const mqtt_connect_t *c = &p.u.connect;
    cr_assert_eq(p.type, MQTT_CONNECT);
    cr_assert_eq(p.version, MQTT_V311);
    cr_assert_eq(c->protocol_level, 4);
    cr_assert(c->clean_start);
    cr_assert(c->has_will && c->has_username && c->has_password);
    cr_assert_eq(c->will_qos, 1);
    cr_assert_not(c->will_retain);
    cr_assert_eq(c->keep_alive, 10);
    cr_assert(tmq_view_is(c->client_id, "dev-1"));
    cr_assert(tmq_view_is(c->will_topic, "dead/dev-1"));
    cr_assert(tmq_view_is(c->will_payload, "gone"));
    cr_assert(tmq_view_is(c->username, "alice"));
    cr_assert(tmq_view_is(c->password, "s3cret"));
}

Test(mqtt_connect, v5_spec_example_has_session_expiry_10)
{
    /* 5.0 Figure 3-5: properties length 5, Session Expiry Interval 10. */
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQTT> 05 02 00 0a 05 11 00 00 00 0a <dev-1>", 0, &p);
    cr_assert_eq(p.version, MQTT_V5);
    cr_assert(MQTT_HAS(&p.props, MQTT_PROP_SESSION_EXPIRY));
    cr_assert_eq(p.props.session_expiry, 10);
    cr_assert(tmq_view_is(p.u.connect.client_id, "dev-1"));
}

Test(mqtt_connect, v5_will_properties_are_kept_apart)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQTT> 05 2c 00 3c 00 <d> 0c 18 00 00 00 05 01 01 02 00 00 00 3c <lwt/d> <bye>", 0, &p);
    const mqtt_connect_t *c = &p.u.connect;
    cr_assert_eq(p.props.present, 0);
    cr_assert_eq(c->will_qos, 1);
    cr_assert(c->will_retain);
    cr_assert_eq(c->will_props.will_delay, 5);
    cr_assert_eq(c->will_props.payload_format, 1);
    cr_assert_eq(c->will_props.message_expiry, 60);
    cr_assert(tmq_view_is(c->will_topic, "lwt/d"));
}

Test(mqtt_connect, mqtt31_mqisdp_is_accepted_as_311)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQIsdp> 03 02 00 3c <old-plc>", 0, &p);
    cr_assert_eq(p.u.connect.protocol_level, MQTT_V31);
    cr_assert_eq(p.version, MQTT_V311);
    cr_assert(tmq_view_is(p.u.connect.client_id, "old-plc"));
}

Test(mqtt_connect, empty_client_id_decodes)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQTT> 04 02 00 00 00 00", 0, &p);
    cr_assert_eq(p.u.connect.client_id.n, 0);
}

Test(mqtt_connect, unknown_protocol_name_is_unsupported_version)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTX> 04 02 00 3c <a>", 0), MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION);
}

Test(mqtt_connect, unknown_protocol_level_is_unsupported_version)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 06 02 00 3c <a>", 0), MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION);
}

Test(mqtt_connect, mqisdp_with_level_4_is_unsupported_version)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQIsdp> 04 02 00 3c <a>", 0), MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION);
}

Test(mqtt_connect, unsupported_version_returns_tb_eunsupported)
{
    mqtt_bytes_t w = tmq_frame(0x10, "<MQTT> 03 02 00 3c <a>");
    mqtt_packet_t p;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode(w.p, w.n, 0, 0, &p, &d), TB_EUNSUPPORTED);
}

Test(mqtt_connect, reserved_flag_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 03 00 3c <a>", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, will_qos_3_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 05 1e 00 3c 00 <a> 00 <t> <p>", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, will_qos_without_will_flag_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 0a 00 3c <a>", 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connect, will_retain_without_will_flag_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 22 00 3c <a>", 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connect, password_without_user_name_is_protocol_error_in_311)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 42 00 3c <a> <pw>", 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connect, password_without_user_name_is_allowed_in_5)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQTT> 05 42 00 3c 00 <a> <token>", 0, &p);
    cr_assert(p.u.connect.has_password);
    cr_assert(tmq_view_is(p.u.connect.password, "token"));
}

Test(mqtt_connect, client_id_with_bad_utf8_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 02 00 3c 00 02 c3 28", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, client_id_with_u0000_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 02 00 3c 00 03 61 00 62", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, client_id_with_a_surrogate_is_malformed)
{
    /* U+D800 encoded as ED A0 80 */
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 02 00 3c 00 03 ed a0 80", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, control_characters_and_bom_are_accepted)
{
    /* U+0009, U+007F, U+0085 (C2 85) and a BOM: SHOULD NOT / MAY, accepted by decision */
    mqtt_packet_t p;
    tmq_dec_ok(0x10, "<MQTT> 04 02 00 3c 00 08 09 7f c2 85 ef bb bf 41", 0, &p);
    cr_assert_eq(p.u.connect.client_id.n, 8);
    cr_assert_eq(p.u.connect.client_id.p[4], 0xef, "the BOM is kept [MQTT-1.5.4-3]");
}

Test(mqtt_connect, will_topic_with_wildcard_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 06 00 3c <a> <t/#> <p>", 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connect, will_properties_reject_connect_only_properties)
{
    /* Receive Maximum (0x21) is a CONNECT property, not a will property */
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 05 06 00 3c 00 <a> 03 21 00 05 <t> <p>", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, connect_ending_inside_the_payload_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x10, "<MQTT> 04 82 00 3c <a>", 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connect, connect_roundtrips_in_each_version)
{
    static const char *bodies[] = {
        V311_FULL,
        "<MQIsdp> 03 c2 00 3c <old> <u> <p>",
        "<MQTT> 05 ee 00 0a 08 11 00 00 01 00 21 00 10 <d> 05 18 00 00 00 05 <lwt> <x> <u> <p>",
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(bodies); i++) {
        mqtt_packet_t p;
        tmq_dec_ok(0x10, bodies[i], 0, &p);
        tmq_assert_roundtrip(&p);
    }
}

Test(mqtt_connect, v31_connect_encodes_with_mqisdp)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_CONNECT, MQTT_V31);
    p.u.connect.clean_start = true;
    p.u.connect.keep_alive = 60;
    p.u.connect.client_id = MQTT_BYTES("x");
    tmq_assert_bytes(tmq_encode(&p), "10 0f <MQIsdp> 03 02 00 3c <x>");
}

/* ---- CONNACK ---------------------------------------------------------------- */

Test(mqtt_connack, v311_decodes_session_present_and_return_code)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x20, "01 00", MQTT_V311, &p);
    cr_assert(p.u.connack.session_present);
    cr_assert_eq(p.u.connack.reason, 0);
}

Test(mqtt_connack, v311_reserved_return_code_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x20, "00 06", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connack, reserved_ack_flags_are_malformed)
{
    cr_assert_eq(tmq_dec_err(0x20, "02 00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connack, session_present_on_refusal_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x20, "01 87 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connack, v5_reason_not_listed_for_connack_is_protocol_error)
{
    /* 0x8B Server shutting down exists, but only for DISCONNECT */
    cr_assert_eq(tmq_dec_err(0x20, "00 8b 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_connack, v5_without_property_length_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x20, "00 00", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_connack, encode_v311_accepted_is_four_bytes)
{
    uint8_t buf[8];
    int n = mqtt_encode_connack(buf, sizeof buf, MQTT_V311, false, MQTT_CONNACK_ACCEPTED, NULL);
    tmq_assert_bytes((mqtt_bytes_t){ buf, (uint32_t)n }, "20 02 00 00");
}

Test(mqtt_connack, encode_v311_refusal_uses_return_code)
{
    uint8_t buf[8];
    int n = mqtt_encode_connack(buf, sizeof buf, MQTT_V311, false,
                                mqtt_connack_v311_from_reason(MQTT_RC_BAD_USER_NAME_OR_PASSWORD), NULL);
    tmq_assert_bytes((mqtt_bytes_t){ buf, (uint32_t)n }, "20 02 00 04");
}

Test(mqtt_connack, encode_v311_refuses_a_v5_reason_code)
{
    uint8_t buf[8];
    cr_assert_eq(mqtt_encode_connack(buf, sizeof buf, MQTT_V311, false, MQTT_RC_NOT_AUTHORIZED, NULL), -EINVAL);
}

Test(mqtt_connack, encode_v5_with_server_properties_gives_exact_bytes)
{
    mqtt_props_t pr = { 0 };
    pr.receive_maximum = 100;
    MQTT_SET(&pr, MQTT_PROP_RECEIVE_MAXIMUM);
    pr.maximum_packet_size = 65536;
    MQTT_SET(&pr, MQTT_PROP_MAXIMUM_PACKET_SIZE);
    pr.assigned_client_id = MQTT_BYTES("auto-1");
    MQTT_SET(&pr, MQTT_PROP_ASSIGNED_CLIENT_ID);
    pr.retain_available = 0;
    MQTT_SET(&pr, MQTT_PROP_RETAIN_AVAILABLE);
    uint8_t buf[64];
    int n = mqtt_encode_connack(buf, sizeof buf, MQTT_V5, false, MQTT_RC_SUCCESS, &pr);
    /* properties in identifier order: 0x12, 0x21, 0x25, 0x27 */
    tmq_assert_bytes((mqtt_bytes_t){ buf, (uint32_t)n },
                     "20 16 00 00 13 12 <auto-1> 21 00 64 25 00 27 00 01 00 00");
}

Test(mqtt_connack, encode_v5_roundtrips_every_server_property)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_CONNACK, MQTT_V5);
    mqtt_props_t *pr = &p.props;
    pr->session_expiry = 3600; MQTT_SET(pr, MQTT_PROP_SESSION_EXPIRY);
    pr->assigned_client_id = MQTT_BYTES("auto-7"); MQTT_SET(pr, MQTT_PROP_ASSIGNED_CLIENT_ID);
    pr->server_keep_alive = 30; MQTT_SET(pr, MQTT_PROP_SERVER_KEEP_ALIVE);
    pr->receive_maximum = 64; MQTT_SET(pr, MQTT_PROP_RECEIVE_MAXIMUM);
    pr->topic_alias_maximum = 16; MQTT_SET(pr, MQTT_PROP_TOPIC_ALIAS_MAXIMUM);
    pr->maximum_qos = 1; MQTT_SET(pr, MQTT_PROP_MAXIMUM_QOS);
    pr->retain_available = 0; MQTT_SET(pr, MQTT_PROP_RETAIN_AVAILABLE);
    pr->maximum_packet_size = 1 << 20; MQTT_SET(pr, MQTT_PROP_MAXIMUM_PACKET_SIZE);
    pr->wildcard_sub_available = 0; MQTT_SET(pr, MQTT_PROP_WILDCARD_SUB_AVAILABLE);
    pr->sub_id_available = 0; MQTT_SET(pr, MQTT_PROP_SUB_ID_AVAILABLE);
    pr->shared_sub_available = 0; MQTT_SET(pr, MQTT_PROP_SHARED_SUB_AVAILABLE);
    pr->reason_string = MQTT_BYTES("welcome"); MQTT_SET(pr, MQTT_PROP_REASON_STRING);
    pr->response_info = MQTT_BYTES("resp/"); MQTT_SET(pr, MQTT_PROP_RESPONSE_INFO);
    tmq_assert_roundtrip(&p);
}
