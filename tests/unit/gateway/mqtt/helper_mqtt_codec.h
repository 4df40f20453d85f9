/*
 * helper_mqtt_codec.h: shared fixtures for the MQTT codec unit tests.
 *
 * Packets in tests are written as a small text notation so that a test reads
 * like the spec's byte tables and lengths are never counted by hand:
 *   hex bytes        "00 0a"  (spaces optional)
 *   'raw text'       the bytes of the text
 *   <text>           an MQTT string: two-byte length, then the text
 * frame() adds the fixed header, computing the Remaining Length.
 */
#ifndef TB_TEST_HELPER_MQTT_CODEC_H
#define TB_TEST_HELPER_MQTT_CODEC_H

#include "gateway/mqtt/mqtt.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses the notation into out; returns the byte count (fails the test on bad input). */
size_t tmq_parse(const char *text, uint8_t *out, size_t cap);
/* Bytes of the notation in a buffer that lives until the test ends. */
mqtt_bytes_t tmq_bytes(const char *text);
/* A whole packet: first byte, computed Remaining Length, then the body notation. */
mqtt_bytes_t tmq_frame(uint8_t first, const char *body);

/* Decodes a framed packet and asserts it decodes whole; views stay valid for the test. */
void tmq_dec_ok(uint8_t first, const char *body, uint8_t version, mqtt_packet_t *pkt /* OUT */);
/* Decodes a framed packet, asserts an error, and returns its reason code. */
uint8_t tmq_dec_err(uint8_t first, const char *body, uint8_t version);
/* Same for raw bytes (no framing added), with a maximum packet size. */
uint8_t tmq_raw_err(mqtt_bytes_t wire, uint8_t version, uint32_t max);

/* Encodes pkt, asserting mqtt_encoded_size() matched the bytes written. */
mqtt_bytes_t tmq_encode(const mqtt_packet_t *pkt);
/* Asserts the bytes equal the notation, printing both in hex when not. */
void tmq_assert_bytes(mqtt_bytes_t got, const char *expected);
/* Encodes pkt, decodes the result and asserts the packets are equal. */
void tmq_assert_roundtrip(const mqtt_packet_t *pkt);

bool tmq_view_is(mqtt_bytes_t v, const char *s);

#endif
