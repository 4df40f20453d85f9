/* bench-lib: tb_replicator */
/*
 * bench_spb_encode.c: cost of making one Sparkplug B DDATA message.
 *
 * Prints ns per message, median of 7 runs of N messages, for:
 *   record   a 10-field JSON record (numbers, booleans, a string, a nested
 *            object) through rep__spb_data_add + rep__spb_data_end: jansson
 *            parsing, flattening, the metric table, type checks, encoding;
 *   wire     the same 10 metrics by alias written by rep__spb_put_metric
 *            alone (the hand encoder);
 *   pbc      the same 10 metrics packed by protobuf-c's generated packer
 *            from filled structs (the alternative rep_spb_encode.c's header
 *            argues against; same bytes, checked before timing).
 * There is no peer product for this micro-benchmark (Mosquitto carries no
 * Sparkplug encoder; a Sparkplug edge like the relay of the issue does
 * not run here), so these are figures for our own choices, not a
 * performance claim. Figures only: it never fails on time.
 *
 *   ./build/bench/bench_spb_encode [N]      (default N = 200,000)
 */
#include "replicator/rep_spb.h"

#include "base/base.h"
#include "proto/sparkplug_b.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7
#define NM 10

static const char RECORD[] = "{\"temp\":21.5,\"humidity\":40.25,\"pressure\":1013,\"on\":true,\"alarm\":false,"
                             "\"mode\":\"auto\",\"motor\":{\"rpm\":900,\"current\":1.94,\"volts\":233},"
                             "\"count\":123456}";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile size_t sink;

static rep__spb_wire_t wire[NM];

static void fill_wire(void)
{
    for (int i = 0; i < NM; i++) {
        wire[i] = (rep__spb_wire_t){ .has_alias = true, .alias = (uint64_t)i + 1, .timestamp = 1700000000000ull + (uint64_t)i };
        if (i == 3 || i == 4) {
            wire[i].datatype = REP_SPB_BOOLEAN;
            wire[i].v.b = i == 3;
        } else if (i == 5) {
            wire[i].datatype = REP_SPB_STRING;
            wire[i].v.s.p = (const uint8_t *)"auto";
            wire[i].v.s.n = 4;
        } else {
            wire[i].datatype = REP_SPB_DOUBLE;
            wire[i].v.d = 21.5 + i;
        }
    }
}

static double run_record(size_t n)
{
    rep__spb_node_t *node = rep__spb_node_new();
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    char err[256];
    uint64_t ts = 1700000000000ull;
    rep__spb_data_begin(node, &d, 0, ts);
    if (rep__spb_data_add(node, &d, "telemetry", NULL, (const uint8_t *)RECORD, sizeof RECORD - 1, ts, false, err,
                          sizeof err) != REP_SPB_REBIRTH) {
        fprintf(stderr, "bench_spb_encode: the first record did not ask for a birth: %s\n", err);
        exit(1);
    }
    rep__spb_nbirth(node, 0, ts, &b);
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        rep__spb_data_begin(node, &d, 0, ts + i);
        if (rep__spb_data_add(node, &d, "telemetry", NULL, (const uint8_t *)RECORD, sizeof RECORD - 1, ts + i, false,
                              err, sizeof err) != 0) {
            fprintf(stderr, "bench_spb_encode: %s\n", err);
            exit(1);
        }
        sink += rep__spb_data_end(node, &d)->len;
    }
    double ns = (double)(now_ns() - t0) / (double)n;
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(node);
    return ns;
}

static void encode_wire(rep__spb_buf_t *b, uint64_t seq)
{
    rep__spb_begin(b, 1700000000000ull + seq);
    for (int k = 0; k < NM; k++)
        rep__spb_put_metric(b, &wire[k]);
    rep__spb_put_seq(b, seq & 0xff);
}

static double run_wire(size_t n)
{
    rep__spb_buf_t b = { 0 };
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        encode_wire(&b, i);
        sink += b.len;
    }
    double ns = (double)(now_ns() - t0) / (double)n;
    rep__spb_buf_free(&b);
    return ns;
}

static size_t pack_pbc(uint8_t *out, uint64_t seq)
{
    Spb__Payload p;
    Spb__Payload__Metric m[NM], *mp[NM];
    spb__payload__init(&p);
    for (int k = 0; k < NM; k++) {
        spb__payload__metric__init(&m[k]);
        m[k].has_alias = 1;
        m[k].alias = wire[k].alias;
        m[k].has_timestamp = 1;
        m[k].timestamp = wire[k].timestamp;
        if (wire[k].datatype == REP_SPB_BOOLEAN) {
            m[k].value_case = SPB__PAYLOAD__METRIC__VALUE_BOOLEAN_VALUE;
            m[k].boolean_value = wire[k].v.b;
        } else if (wire[k].datatype == REP_SPB_STRING) {
            m[k].value_case = SPB__PAYLOAD__METRIC__VALUE_STRING_VALUE;
            m[k].string_value = (char *)"auto";
        } else {
            m[k].value_case = SPB__PAYLOAD__METRIC__VALUE_DOUBLE_VALUE;
            m[k].double_value = wire[k].v.d;
        }
        mp[k] = &m[k];
    }
    p.has_timestamp = 1;
    p.timestamp = 1700000000000ull + seq;
    p.n_metrics = NM;
    p.metrics = mp;
    p.has_seq = 1;
    p.seq = seq & 0xff;
    return spb__payload__pack(&p, out);
}

static double run_pbc(size_t n)
{
    static uint8_t out[4096];
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        sink += pack_pbc(out, i);
    return (double)(now_ns() - t0) / (double)n;
}

static double median(double (*f)(size_t), size_t n)
{
    double r[RUNS];
    for (int i = 0; i < RUNS; i++)
        r[i] = f(n);
    qsort(r, RUNS, sizeof r[0], cmp);
    return r[RUNS / 2];
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    if (n == 0)
        n = 1;
    fill_wire();
    /* the two encoders must agree before either is timed */
    rep__spb_buf_t b = { 0 };
    encode_wire(&b, 7);
    uint8_t out[4096];
    size_t pl = pack_pbc(out, 7);
    if (pl != b.len || memcmp(out, b.p, pl) != 0) {
        fprintf(stderr, "bench_spb_encode: the hand encoder and protobuf-c differ (%zu vs %zu bytes)\n", b.len, pl);
        return 1;
    }
    size_t bytes = b.len;
    rep__spb_buf_free(&b);
    printf("bench_spb_encode: one DDATA of %d metrics (%zu bytes), median of %d runs of %zu messages\n", NM, bytes,
           RUNS, n);
    printf("  no peer: no other Sparkplug encoder runs here; figures for our choices, not a performance claim\n");
    double rec = median(run_record, n), w = median(run_wire, n), p = median(run_pbc, n);
    printf("  record  (JSON -> flatten -> table -> wire)  %8.1f ns/message  %10.0f messages/s\n", rec, 1e9 / rec);
    printf("  wire    (hand encoder, 10 metrics)          %8.1f ns/message  %10.0f messages/s\n", w, 1e9 / w);
    printf("  pbc     (protobuf-c pack, same bytes)       %8.1f ns/message  %10.0f messages/s\n", p, 1e9 / p);
    return sink == 0;
}
