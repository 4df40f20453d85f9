/* fuzz-lib: tb_broker */
/*
 * fuzz_broker_rtj.c: the runtime QoS 2 journal's file (mqtt.qos2_state
 * runtime; gateway/broker/rtjournal.c has the format), read back at start
 * from a directory anyone with access to the machine's RAM file system
 * could have written.
 *
 * Input: byte 0 is a mode, the rest the file.
 *   bit 0  put the boot id this target passes into the header
 *   bit 1  set every check field (header, then each record in turn) to what
 *          the bytes call for, so the fuzzer gets past them to the records
 * Checked, for every input: no crash or out-of-bounds read; every record
 * given lies inside the input, with a client id of 1..65,535 bytes; *end
 * is within the input and, when records were given, past the header;
 * parsing just the first *end bytes gives the same records and the same
 * end (a damaged tail never changes what comes before it); a header for
 * another boot gives nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/broker/broker.h"

#define FAIL(why) (fprintf(stderr, "fuzz_broker_rtj: %s (line %d)\n", why, __LINE__), abort())

static const char BOOT[BROKER_RTJ_BOOT_ID_LEN + 1] = "0f8e6c3a-1b2d-4e5f-8a9b-0c1d2e3f4a5b";

static uint32_t fnv(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static void be32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

typedef struct {
    const uint8_t *buf;
    size_t len, n;
    uint64_t sum;
} seen_t;

static void on_rec(void *arg, const broker_rtj_rec_t *r)
{
    seen_t *s = arg;
    const uint8_t *c = (const uint8_t *)r->client_id;
    if (r->client_id_len == 0 || r->client_id_len > 65535)
        FAIL("client id length out of range");
    if (c < s->buf || c + r->client_id_len > s->buf + s->len)
        FAIL("client id outside the input");
    s->n++;
    s->sum = s->sum * 31 + r->packet_id + r->nonce + r->stored + c[0] + r->client_id_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    uint8_t *buf = malloc(len ? len : 1);
    memcpy(buf, data + 1, len);
    if ((mode & 1) && len >= 44)
        memcpy(buf + 8, BOOT, BROKER_RTJ_BOOT_ID_LEN);
    if ((mode & 2) && len >= 48) {
        be32(buf + 44, fnv(buf, 44));
        for (size_t at = 48; len - at >= 8;) {
            uint32_t blen = (uint32_t)buf[at] << 24 | (uint32_t)buf[at + 1] << 16 | (uint32_t)buf[at + 2] << 8 |
                            buf[at + 3];
            if (blen > len - at - 8)
                break;
            be32(buf + at + 4, fnv(buf + at + 8, blen));
            at += 8 + blen;
        }
    }
    seen_t a = { buf, len, 0, 0 };
    size_t end = (size_t)-1;
    long n = broker_rtj_parse(buf, len, BOOT, on_rec, &a, &end);
    if (end > len)
        FAIL("end past the input");
    if (n < 0) {
        if (a.n != 0 || end != 0)
            FAIL("records given from a header refused");
    } else {
        if ((size_t)n != a.n)
            FAIL("count differs from the records given");
        if (end < 48)
            FAIL("end inside the header");
        seen_t b = { buf, end, 0, 0 };
        size_t end2 = 0;
        long n2 = broker_rtj_parse(buf, end, BOOT, on_rec, &b, &end2);
        if (n2 != n || end2 != end || b.sum != a.sum)
            FAIL("the well-formed prefix parses differently");
    }
    if (len >= 48) { /* the same file for another boot: nothing */
        char other[BROKER_RTJ_BOOT_ID_LEN];
        memcpy(other, buf + 8, sizeof other);
        other[0] ^= 1;
        seen_t c = { buf, len, 0, 0 };
        size_t e3;
        long n3 = broker_rtj_parse(buf, len, other, on_rec, &c, &e3);
        if (n >= 0 && (n3 != BROKER_RTJ_OTHER_BOOT || c.n != 0))
            FAIL("a file of another boot was taken");
    }
    free(buf);
    return 0;
}
