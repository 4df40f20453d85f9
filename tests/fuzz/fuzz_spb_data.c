/* fuzz-lib: tb_replicator */
/*
 * fuzz_spb_data.c: a device's payload (outside bytes) through the
 * Sparkplug node (rep__spb_data_add: flattening, the metric table, type
 * checks) and the hand-written encoder. The first byte picks the device
 * (node or one of two) and the record time; the rest is the payload, given
 * twice (first sight, then after the births). Aborts if a return code is
 * outside the documented ones, a refusal gives no reason, or any payload
 * we produce (births, the data message) does not decode with protobuf-c,
 * or decodes to a different number of metrics than we wrote.
 */
#include "replicator/rep_spb.h"

#include "base/base.h"
#include "proto/sparkplug_b.pb-c.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "fuzz_spb_data: " __VA_ARGS__); \
            fputc('\n', stderr);                            \
            abort();                                        \
        }                                                   \
    } while (0)

static size_t decoded_metrics(const rep__spb_buf_t *b)
{
    Spb__Payload *p = spb__payload__unpack(NULL, b->len, b->p);
    CHECK(p, "a payload we encoded (%zu bytes) does not decode", b->len);
    size_t n = p->n_metrics;
    spb__payload__free_unpacked(p, NULL);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    rep__spb_node_t *n = rep__spb_node_new();
    uint32_t devs[3] = { 0 };
    rep__spb_device(n, "d1", &devs[1]);
    rep__spb_device(n, "d2", &devs[2]);
    uint32_t dev = devs[data[0] % 3];
    uint64_t ts = 1700000000000ull + (data[0] >> 2);
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    char err[512];
    for (int round = 0; round < 3; round++) {
        rep__spb_data_begin(n, &d, dev, ts + (uint64_t)round);
        int rc = rep__spb_data_add(n, &d, "t", NULL, data + 1, size - 1, ts, round == 2, err, sizeof err);
        CHECK(rc == 0 || rc == REP_SPB_REBIRTH || rc == TB_EINVALID || rc == TB_EFULL, "rc %d", rc);
        if (rc == TB_EINVALID || rc == TB_EFULL) {
            CHECK(err[0], "refused without a reason");
            break;
        }
        if (rc == REP_SPB_REBIRTH) {
            CHECK(round == 0, "a birth is asked for again after the births (round %d)", round);
            CHECK(d.metrics == 0, "a record half added before a birth");
            rep__spb_nbirth(n, 1, ts, &b);
            size_t total = decoded_metrics(&b) - 2; /* bdSeq, Rebirth */
            for (uint32_t i = 1; i < rep__spb_device_count(n); i++) {
                rep__spb_dbirth(n, i, ts, &b);
                total += decoded_metrics(&b);
            }
            CHECK(total == rep__spb_metric_count(n), "births hold %zu metrics, the table %u", total,
                  rep__spb_metric_count(n));
            continue;
        }
        const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
        if (m)
            CHECK(decoded_metrics(m) == d.metrics, "the data message decodes to another count");
    }
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
    return 0;
}
