/*
 * test_mqtt_codec_framing.c: what mqtt_decode does before a packet's body is
 * looked at: Remaining Length, incremental input, the maximum packet size,
 * the first-byte checks and leftovers.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>

/* Spec examples of Remaining Length (3.1.1 Table 2.4, 5.0 1.5.5): a PUBLISH
 * header announcing each value makes the decoder ask for 1 + len + value. */
Test(mqtt_framing, remaining_length_spec_examples_announce_their_totals)
{
    static const struct { const char *hex; uint32_t value; unsigned len; } ex[] = {
        { "00", 0, 1 }, { "7f", 127, 1 }, { "80 01", 128, 2 }, { "ff 7f", 16383, 2 },
        { "80 80 01", 16384, 3 }, { "ff ff 7f", 2097151, 3 }, { "80 80 80 01", 2097152, 4 },
        { "ff ff ff 7f", 268435455, 4 },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(ex); i++) {
        uint8_t buf[8] = { 0x30 };
        size_t n = 1 + tmq_parse(ex[i].hex, buf + 1, sizeof buf - 1);
        mqtt_packet_t pkt;
        mqtt_diag_t d;
        int rc = mqtt_decode(buf, n, MQTT_V311, 0, &pkt, &d);
        if (ex[i].value == 0) {
            /* a PUBLISH of length 0 is complete, and malformed (no topic) */
            cr_assert_lt(rc, 0);
            continue;
        }
        cr_assert_eq(rc, 0, "example %zu", i);
        cr_assert_eq(d.need, 1 + ex[i].len + ex[i].value, "example %zu: need %u", i, d.need);
    }
}

Test(mqtt_framing, remaining_length_of_five_bytes_is_malformed_at_the_fourth)
{
    /* 4 continuation bytes: a fifth would be needed, refused without waiting for it. */
    cr_assert_eq(tmq_raw_err(tmq_bytes("30 ff ff ff ff"), MQTT_V311, 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, overlong_remaining_length_is_malformed)
{
    /* 0x80 0x00 spells 0 in two bytes: [MQTT-1.5.5-1] */
    cr_assert_eq(tmq_raw_err(tmq_bytes("c0 80 00"), MQTT_V5, 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, overlong_remaining_length_is_malformed_in_311_too)
{
    cr_assert_eq(tmq_raw_err(tmq_bytes("c0 80 80 00"), MQTT_V311, 0), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, empty_input_needs_more)
{
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode((const uint8_t *)"", 0, 0, 0, &pkt, &d), 0);
    cr_assert_eq(d.need, 0);
}

Test(mqtt_framing, one_byte_at_a_time_needs_more_until_the_last)
{
    mqtt_bytes_t w = tmq_frame(0x32, "<sensors/t1> 00 07 'twenty-one degrees'");
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    for (uint32_t n = 0; n < w.n; n++)
        cr_assert_eq(mqtt_decode(w.p, n, MQTT_V311, 0, &pkt, &d), 0, "prefix of %u bytes", n);
    cr_assert_eq(mqtt_decode(w.p, w.n, MQTT_V311, 0, &pkt, &d), (int)w.n);
    cr_assert(tmq_view_is(pkt.u.publish.payload, "twenty-one degrees"));
}

Test(mqtt_framing, need_is_the_whole_packet_once_the_header_is_in)
{
    mqtt_bytes_t w = tmq_frame(0x30, "<a> 'payload'");
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode(w.p, 3, MQTT_V311, 0, &pkt, &d), 0);
    cr_assert_eq(d.need, w.n);
}

Test(mqtt_framing, two_packets_in_one_buffer_decode_one_after_the_other)
{
    mqtt_bytes_t a = tmq_frame(0x30, "<a/b> 'one'");
    mqtt_bytes_t b = tmq_frame(0x40, "00 0a");
    uint8_t buf[64];
    memcpy(buf, a.p, a.n);
    memcpy(buf + a.n, b.p, b.n);
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    int n1 = mqtt_decode(buf, a.n + b.n, MQTT_V311, 0, &pkt, &d);
    cr_assert_eq(n1, (int)a.n);
    cr_assert_eq(pkt.type, MQTT_PUBLISH);
    int n2 = mqtt_decode(buf + n1, a.n + b.n - (size_t)n1, MQTT_V311, 0, &pkt, &d);
    cr_assert_eq(n2, (int)b.n);
    cr_assert_eq(pkt.type, MQTT_PUBACK);
    cr_assert_eq(pkt.u.ack.packet_id, 10);
}

Test(mqtt_framing, too_large_is_refused_from_the_fixed_header_alone)
{
    /* Announces 1 MiB; only the 4 header bytes are here. */
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    const uint8_t hdr[] = { 0x30, 0x80, 0x80, 0x40 };
    int rc = mqtt_decode(hdr, sizeof hdr, MQTT_V5, 4096, &pkt, &d);
    cr_assert_eq(rc, TB_EFULL);
    cr_assert_eq(d.reason, MQTT_RC_PACKET_TOO_LARGE);
}

Test(mqtt_framing, maximum_packet_size_counts_the_fixed_header)
{
    mqtt_bytes_t w = tmq_frame(0x30, "<t> 'abcdef'");
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    cr_assert_eq(mqtt_decode(w.p, w.n, MQTT_V311, w.n, &pkt, &d), (int)w.n);
    cr_assert_eq(mqtt_decode(w.p, w.n, MQTT_V311, w.n - 1, &pkt, &d), TB_EFULL);
}

Test(mqtt_framing, first_packet_must_be_connect)
{
    cr_assert_eq(tmq_dec_err(0x30, "<a> 'x'", 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_framing, first_packet_is_refused_on_its_first_byte)
{
    cr_assert_eq(tmq_raw_err(tmq_bytes("c0"), 0, 0), MQTT_RC_PROTOCOL_ERROR);
}

Test(mqtt_framing, packet_type_zero_is_malformed)
{
    cr_assert_eq(tmq_dec_err(0x00, "", MQTT_V5), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, auth_is_malformed_in_311)
{
    cr_assert_eq(tmq_dec_err(0xF0, "", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, reserved_flags_are_malformed)
{
    /* [MQTT-2.2.2-1]: PUBACK must carry 0000, SUBSCRIBE 0010. */
    cr_assert_eq(tmq_dec_err(0x41, "00 0a", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
    cr_assert_eq(tmq_dec_err(0x80, "00 0a <a> 00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, bytes_after_the_last_field_are_malformed)
{
    cr_assert_eq(tmq_dec_err(0xC0, "00", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, field_running_past_the_packet_is_malformed)
{
    /* topic length 5, only 2 bytes follow */
    cr_assert_eq(tmq_dec_err(0x30, "00 05 'ab'", MQTT_V311), MQTT_RC_MALFORMED_PACKET);
}

Test(mqtt_framing, error_return_codes_follow_the_reason)
{
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    mqtt_bytes_t bad = tmq_bytes("c0 01 00");
    cr_assert_eq(mqtt_decode(bad.p, bad.n, MQTT_V311, 0, &pkt, &d), TB_EMALFORMED);
    mqtt_bytes_t proto = tmq_frame(0x30, "<a> 'x'");
    cr_assert_eq(mqtt_decode(proto.p, proto.n, 0, 0, &pkt, &d), TB_EPROTO);
}
