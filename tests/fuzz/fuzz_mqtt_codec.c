/* fuzz-lib: tb_mqtt */
/*
 * fuzz_mqtt_codec.c: libFuzzer target for the MQTT codec, the code that
 * reads device bytes.
 *
 * Input: one selector byte, then a byte stream as a connection would see it.
 * Selector bits 0-1 pick the session version (0: before CONNECT, 1: 3.1.1,
 * 2: 5.0, 3: 3.1), bit 2 a 128-byte maximum packet size. Packets are decoded
 * one after another, switching version after a CONNECT as the connection
 * layer will. Besides "no crash, no sanitizer report", every decoded packet
 * must satisfy the codec's promises, each checked with abort():
 *   - every strict prefix of it decodes as "need more";
 *   - its lists iterate exactly `count` items;
 *   - it encodes to exactly mqtt_encoded_size() bytes, which decode back
 *     whole to an equal packet (mqtt_packet_equal), and re-encoding that
 *     gives the same bytes (one canonical form);
 *   - an error carries a reason >= 0x80 and a reason string.
 */
#include "gateway/mqtt/mqtt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "fuzz_mqtt_codec: check failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lists(const mqtt_packet_t *p)
{
    mqtt_iter_t it;
    mqtt_bytes_t a, b;
    uint32_t id, n = 0;
    uint8_t o;
    mqtt_iter_init(&it, &p->props.user);
    while (mqtt_next_user_prop(&it, &a, &b))
        n++;
    CHECK(n == p->props.user.count);
    n = 0;
    mqtt_iter_init(&it, &p->props.sub_ids);
    while (mqtt_next_sub_id(&it, &id))
        n++;
    CHECK(n == p->props.sub_ids.count);
    if (p->type == MQTT_SUBSCRIBE || p->type == MQTT_UNSUBSCRIBE) {
        n = 0;
        mqtt_iter_init(&it, &p->u.sub.filters);
        while (p->type == MQTT_SUBSCRIBE ? mqtt_next_sub(&it, &a, &o) : mqtt_next_unsub(&it, &a)) {
            (void)mqtt_topic_filter_valid(a, p->version);
            n++;
        }
        CHECK(n == p->u.sub.filters.count && n > 0);
    }
}

static void check_roundtrip(const mqtt_packet_t *p)
{
    int size = mqtt_encoded_size(p);
    CHECK(size > 0);
    uint8_t *out = malloc((size_t)size), *again = malloc((size_t)size);
    CHECK(out && again);
    CHECK(mqtt_encode(p, out, (size_t)size - 1) < 0);
    CHECK(mqtt_encode(p, out, (size_t)size) == size);
    mqtt_packet_t back;
    mqtt_diag_t d;
    uint8_t version = p->type == MQTT_CONNECT ? 0 : p->version;
    CHECK(mqtt_decode(out, (size_t)size, version, 0, &back, &d) == size);
    CHECK(mqtt_packet_equal(p, &back));
    CHECK(mqtt_encoded_size(&back) == size);
    CHECK(mqtt_encode(&back, again, (size_t)size) == size);
    CHECK(memcmp(out, again, (size_t)size) == 0);
    free(out);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t versions[4] = { 0, MQTT_V311, MQTT_V5, MQTT_V31 };
    if (size < 1)
        return 0;
    uint8_t version = versions[data[0] & 3];
    uint32_t max = (data[0] & 4) ? 128 : 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    while (n) {
        mqtt_packet_t pkt;
        mqtt_diag_t d;
        int rc = mqtt_decode(p, n, version, max, &pkt, &d);
        if (rc == 0) {
            CHECK(d.need == 0 || d.need > n);
            break;
        }
        if (rc < 0) {
            CHECK(d.why != NULL && d.reason >= 0x80);
            CHECK(mqtt_reason_name(d.reason) != NULL);
            break;
        }
        CHECK((size_t)rc <= n);
        mqtt_packet_t tmp;
        CHECK(mqtt_decode(p, (size_t)rc - 1, version, max, &tmp, &d) == 0);
        CHECK(mqtt_decode(p, (size_t)rc / 2, version, max, &tmp, &d) == 0);
        check_lists(&pkt);
        check_roundtrip(&pkt);
        if (pkt.type == MQTT_CONNECT)
            version = pkt.version;
        p += rc;
        n -= (size_t)rc;
    }
    return 0;
}
