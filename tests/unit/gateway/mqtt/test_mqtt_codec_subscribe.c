/*
 * test_mqtt_codec_subscribe.c: SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK:
 * the filter-list iterators, subscription options rules per version, reason
 * code lists, the spec's examples, and topic-filter syntax for the session.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

Test(mqtt_subscribe, v311_spec_example_iterates_filters_in_order)
{
    /* 3.1.1 Figure 3.21: "a/b" QoS 1, "c/d" QoS 2; packet identifier 10 */
    mqtt_packet_t p;
    tmq_dec_ok(0x82, "00 0a 00 03 61 2f 62 01 00 03 63 2f 64 02", MQTT_V311, &p);
    cr_assert_eq(p.u.sub.packet_id, 10);
    cr_assert_eq(p.u.sub.filters.count, 2);
    mqtt_iter_t it;
    mqtt_bytes_t f;
    uint8_t o;
    mqtt_iter_init(&it, &p.u.sub.filters);
    cr_assert(mqtt_next_sub(&it, &f, &o));
    cr_assert(tmq_view_is(f, "a/b") && o == 1);
    cr_assert(mqtt_next_sub(&it, &f, &o));
    cr_assert(tmq_view_is(f, "c/d") && o == 2);
    cr_assert_not(mqtt_next_sub(&it, &f, &o));
}

Test(mqtt_subscribe, v5_options_and_subscription_identifier_decode)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x82, "00 0b 03 0b 80 02 <plant/+/temp> 2d", MQTT_V5, &p);
    cr_assert_eq(p.props.subscription_id, 256);
    cr_assert(MQTT_HAS(&p.props, MQTT_PROP_SUBSCRIPTION_ID));
    mqtt_iter_t it;
    mqtt_bytes_t f;
    uint8_t o;
    mqtt_iter_init(&it, &p.u.sub.filters);
    cr_assert(mqtt_next_sub(&it, &f, &o));
    cr_assert_eq(MQTT_SUBOPT_QOS(o), 1);
    cr_assert(o & MQTT_SUBOPT_NO_LOCAL);
    cr_assert(o & MQTT_SUBOPT_RETAIN_AS_PUBLISHED);
    cr_assert_eq(MQTT_SUBOPT_RETAIN_HANDLING(o), 2);
}

Test(mqtt_subscribe, no_filters_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, packet_id_zero_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 00 <a> 00", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, filter_without_options_byte_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a <a>", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, v311_reserved_bits_in_requested_qos_are_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a <a> 04", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, v311_requested_qos_3_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a <a> 03", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, v5_reserved_option_bits_are_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 00 <a> 40", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, v5_qos_3_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 00 <a> 03", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, v5_retain_handling_3_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 00 <a> 30", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, v5_no_local_on_shared_subscription_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 00 <$share/g/a> 04", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, v5_subscription_identifier_twice_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 04 0b 01 0b 02 <a> 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_subscribe, v5_subscription_identifier_overlong_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 03 0b 81 00 <a> 00", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, filter_with_bad_utf8_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x82, "00 0a 00 01 80 00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_subscribe, bad_filter_syntax_is_left_to_the_session)
{
    /* "a/b#" is an invalid filter, answered per filter (SUBACK 0x8F), not by closing */
    mqtt_packet_t p;
    tmq_dec_ok(0x82, "00 0a 00 <a/b#> 00", MQTT_V5, &p);
    cr_assert_eq(p.u.sub.filters.count, 1);
}

Test(mqtt_subscribe, encode_builds_filters_and_matches_spec_example)
{
    uint8_t region[64];
    size_t off = 0;
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_SUBSCRIBE, MQTT_V311);
    p.u.sub.packet_id = 10;
    cr_assert_eq(mqtt_put_sub(&p.u.sub.filters, region, sizeof region, &off, MQTT_BYTES("a/b"), 1), 0);
    cr_assert_eq(mqtt_put_sub(&p.u.sub.filters, region, sizeof region, &off, MQTT_BYTES("c/d"), 2), 0);
    tmq_assert_bytes(tmq_encode(&p), "82 0e 00 0a 00 03 61 2f 62 01 00 03 63 2f 64 02");
}

Test(mqtt_subscribe, encode_without_filters_is_refused)
{
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_SUBSCRIBE, MQTT_V5);
    p.u.sub.packet_id = 1;
    cr_assert_eq(mqtt_encoded_size(&p), -EINVAL);
}

Test(mqtt_subscribe, v5_roundtrips)
{
    mqtt_packet_t p;
    tmq_dec_ok(0x82, "00 0b 09 0b 05 26 <k> <v> <a/#> 1e <$share/g/b> 01", MQTT_V5, &p);
    tmq_assert_roundtrip(&p);
}

/* ---- UNSUBSCRIBE -------------------------------------------------------------------- */

Test(mqtt_unsubscribe, v311_spec_example_iterates_filters)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xA2, "00 0a <a/b> <c/d>", MQTT_V311, &p);
    cr_assert_eq(p.type, MQTT_UNSUBSCRIBE);
    cr_assert_eq(p.u.sub.filters.count, 2);
    mqtt_iter_t it;
    mqtt_bytes_t f;
    mqtt_iter_init(&it, &p.u.sub.filters);
    cr_assert(mqtt_next_unsub(&it, &f) && tmq_view_is(f, "a/b"));
    cr_assert(mqtt_next_unsub(&it, &f) && tmq_view_is(f, "c/d"));
    cr_assert_not(mqtt_next_unsub(&it, &f));
}

Test(mqtt_unsubscribe, no_filters_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0xA2, "00 0a 00", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_unsubscribe, flags_0000_are_malformed)
{
    cr_assert_eq(tmq_dec_err(0xA0, "00 0a <a>", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_unsubscribe, v5_subscription_identifier_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xA2, "00 0a 02 0b 01 <a>", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_unsubscribe, roundtrips)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xA2, "00 0a 07 26 <k> <v> <a/b> <c/+>", MQTT_V5, &p);
    tmq_assert_roundtrip(&p);
}

/* ---- SUBACK / UNSUBACK ------------------------------------------------------------------ */

Test(mqtt_suback, v311_spec_example_reason_codes)
{
    /* 3.1.1 Figure 3.26: 0x00, 0x02, 0x80 */
    mqtt_packet_t p;
    tmq_dec_ok(0x90, "00 0a 00 02 80", MQTT_V311, &p);
    cr_assert_eq(p.u.suback.packet_id, 10);
    tmq_assert_bytes(p.u.suback.reasons, "00 02 80");
}

Test(mqtt_suback, v311_code_not_listed_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x90, "00 0a 8f", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_suback, v5_code_not_listed_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x90, "00 0a 00 11", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_suback, without_codes_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0x90, "00 0a", MQTT_V311), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_suback, encode_v311_gives_spec_bytes)
{
    static const uint8_t codes[] = { 0x00, 0x02, 0x80 };
    uint8_t b[16];
    int n = mqtt_encode_suback(b, sizeof b, MQTT_V311, MQTT_SUBACK, 10, codes, 3, NULL);
    tmq_assert_bytes((mqtt_bytes_t){ b, (uint32_t)n }, "90 05 00 0a 00 02 80");
}

Test(mqtt_suback, encode_v5_has_property_length)
{
    static const uint8_t codes[] = { 0x01, 0x8f };
    uint8_t b[16];
    int n = mqtt_encode_suback(b, sizeof b, MQTT_V5, MQTT_SUBACK, 10, codes, 2, NULL);
    tmq_assert_bytes((mqtt_bytes_t){ b, (uint32_t)n }, "90 05 00 0a 00 01 8f");
}

Test(mqtt_suback, encode_v311_refuses_a_v5_only_code)
{
    static const uint8_t codes[] = { 0x8f };
    uint8_t b[16];
    cr_assert_eq(mqtt_encode_suback(b, sizeof b, MQTT_V311, MQTT_SUBACK, 10, codes, 1, NULL), -EINVAL);
}

Test(mqtt_unsuback, v311_is_packet_id_only)
{
    uint8_t b[8];
    int n = mqtt_encode_suback(b, sizeof b, MQTT_V311, MQTT_UNSUBACK, 10, NULL, 0, NULL);
    tmq_assert_bytes((mqtt_bytes_t){ b, (uint32_t)n }, "b0 02 00 0a");
}

Test(mqtt_unsuback, v311_with_codes_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0xB0, "00 0a 00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_unsuback, v5_codes_decode)
{
    mqtt_packet_t p;
    tmq_dec_ok(0xB0, "00 0a 00 00 11", MQTT_V5, &p);
    tmq_assert_bytes(p.u.suback.reasons, "00 11");
}

Test(mqtt_unsuback, v5_granted_qos_code_is_protocol_error)
{
    cr_assert_eq(tmq_dec_err(0xB0, "00 0a 00 01", MQTT_V5), MQTT_RC_PROTOCOL_ERROR);
}

/* ---- topic filter syntax (session helper) --------------------------------------------- */

Test(mqtt_topic_filter, valid_filters)
{
    static const char *ok[] = { "a", "a/b", "#", "+", "a/+/c", "a/#", "+/+", "/", "a//b", "$SYS/#" };
    for (size_t i = 0; i < TB_ARRAY_LEN(ok); i++)
        cr_assert(mqtt_topic_filter_valid(MQTT_BYTES_STR(ok[i]), MQTT_V5), "\"%s\" is valid", ok[i]);
}

Test(mqtt_topic_filter, invalid_filters)
{
    static const char *bad[] = { "", "a#", "a/#/b", "a/b+", "+a", "#/", "a/+b/c" };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++)
        cr_assert_not(mqtt_topic_filter_valid(MQTT_BYTES_STR(bad[i]), MQTT_V5), "\"%s\" is invalid", bad[i]);
}

Test(mqtt_topic_filter, shared_subscription_needs_a_name_and_a_filter)
{
    cr_assert(mqtt_topic_filter_valid(MQTT_BYTES("$share/g/a/+"), MQTT_V5));
    cr_assert_not(mqtt_topic_filter_valid(MQTT_BYTES("$share//a"), MQTT_V5));
    cr_assert_not(mqtt_topic_filter_valid(MQTT_BYTES("$share/g"), MQTT_V5));
    cr_assert_not(mqtt_topic_filter_valid(MQTT_BYTES("$share/g/"), MQTT_V5));
    cr_assert_not(mqtt_topic_filter_valid(MQTT_BYTES("$share/g+/a"), MQTT_V5));
}

Test(mqtt_topic_filter, share_prefix_is_an_ordinary_filter_in_311)
{
    cr_assert(mqtt_topic_filter_valid(MQTT_BYTES("$share/g"), MQTT_V311));
}
