/* bench-lib: tb_mqtt */
/*
 * bench_codec.c: cost of the MQTT codec on the ingest hot path.
 *
 * Prints ns per decoded QoS 1 PUBLISH with a 100-byte payload (3.1.1, 5.0
 * without properties, 5.0 with Topic Alias + Payload Format Indicator) and
 * ns per encoded PUBACK, as the median of 7 runs of N packets each, plus the
 * packets/s one core could decode at that rate. The budget is > 200,000
 * messages/s on one core for the whole server, so the codec should be a
 * small fraction of 5 us. Figures only: it never fails on time.
 *
 *   ./build/bench/bench_codec [N]      (default N = 2,000,000)
 */
#include "base/base.h"
#include "gateway/mqtt/mqtt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 7

static size_t make_publish(uint8_t *buf, size_t cap, uint8_t version, bool props)
{
    static uint8_t payload[100];
    memset(payload, 'x', sizeof payload);
    mqtt_packet_t p;
    mqtt_packet_init(&p, MQTT_PUBLISH, version);
    p.u.publish.qos = 1;
    p.u.publish.packet_id = 4242;
    p.u.publish.topic = MQTT_BYTES("plant/line3/press7/temperature");
    p.u.publish.payload = (mqtt_bytes_t){ payload, sizeof payload };
    if (props) {
        p.props.topic_alias = 3;
        MQTT_SET(&p.props, MQTT_PROP_TOPIC_ALIAS);
        p.props.payload_format = 1;
        MQTT_SET(&p.props, MQTT_PROP_PAYLOAD_FORMAT);
    }
    int n = mqtt_encode(&p, buf, cap);
    if (n <= 0) {
        fprintf(stderr, "bench_codec: cannot encode the sample PUBLISH (%d)\n", n);
        exit(1);
    }
    return (size_t)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double bench_decode(const uint8_t *pkt, size_t len, uint8_t version, long n, uint64_t *sink)
{
    double ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = tb_mono_ns();
        for (long i = 0; i < n; i++) {
            mqtt_packet_t p;
            mqtt_diag_t d;
            int rc = mqtt_decode(pkt, len, version, 0, &p, &d);
            *sink += (uint64_t)rc + p.u.publish.payload.n + p.u.publish.packet_id;
        }
        ns[r] = (double)(tb_mono_ns() - t0) / (double)n;
    }
    qsort(ns, RUNS, sizeof ns[0], cmp_double);
    return ns[RUNS / 2];
}

static double bench_puback(uint8_t version, long n, uint64_t *sink)
{
    double ns[RUNS];
    uint8_t out[8];
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = tb_mono_ns();
        for (long i = 0; i < n; i++)
            *sink += (uint64_t)mqtt_encode_ack(out, sizeof out, version, MQTT_PUBACK, (uint16_t)(i | 1), 0, NULL) + out[3];
        ns[r] = (double)(tb_mono_ns() - t0) / (double)n;
    }
    qsort(ns, RUNS, sizeof ns[0], cmp_double);
    return ns[RUNS / 2];
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n <= 0)
        n = 2000000;
    uint8_t v311[256], v5[256], v5p[256];
    size_t l311 = make_publish(v311, sizeof v311, MQTT_V311, false);
    size_t l5 = make_publish(v5, sizeof v5, MQTT_V5, false);
    size_t l5p = make_publish(v5p, sizeof v5p, MQTT_V5, true);
    uint64_t sink = 0;

    printf("bench_codec: median of %d runs x %ld packets, one thread\n", RUNS, n);
    const struct { const char *what; const uint8_t *p; size_t len; uint8_t v; } cases[] = {
        { "decode PUBLISH QoS1 100B, 3.1.1", v311, l311, MQTT_V311 },
        { "decode PUBLISH QoS1 100B, 5.0", v5, l5, MQTT_V5 },
        { "decode PUBLISH QoS1 100B, 5.0 + 2 props", v5p, l5p, MQTT_V5 },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
        double ns = bench_decode(cases[i].p, cases[i].len, cases[i].v, n, &sink);
        printf("  %-42s %3zu B  %7.1f ns/packet  %6.1f M packets/s\n", cases[i].what, cases[i].len, ns, 1e3 / ns);
    }
    double ack311 = bench_puback(MQTT_V311, n, &sink), ack5 = bench_puback(MQTT_V5, n, &sink);
    printf("  %-42s        %7.1f ns/packet\n", "encode PUBACK, 3.1.1", ack311);
    printf("  %-42s        %7.1f ns/packet\n", "encode PUBACK, 5.0", ack5);
    printf("  (sink %llu)\n", (unsigned long long)(sink & 0xFF));
    return 0;
}
