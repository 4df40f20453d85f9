/*
 * helper_mqtt_codec.c: the notation parser and decode/encode wrappers behind
 * helper_mqtt_codec.h. Buffers come from a pool that is never reused within
 * a test (Criterion runs each test in its own process), so views a test
 * holds stay valid to its end.
 */
#include "helper_mqtt_codec.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define POOL_SIZE (1u << 20)
static uint8_t pool[POOL_SIZE];
static size_t pool_used;

static uint8_t *pool_get(size_t n)
{
    cr_assert(pool_used + n <= POOL_SIZE, "test buffer pool exhausted");
    uint8_t *p = pool + pool_used;
    pool_used += n;
    return p;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t tmq_parse(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (*s) {
        if (*s == ' ') {
            s++;
        } else if (*s == '\'' || *s == '<') {
            char close = *s == '<' ? '>' : '\'';
            const char *e = strchr(s + 1, close);
            cr_assert(e, "unterminated %c in test notation", *s);
            size_t len = (size_t)(e - s - 1);
            size_t need = len + (close == '>' ? 2 : 0);
            cr_assert(n + need <= cap, "test notation overflows its buffer");
            if (close == '>') {
                out[n++] = (uint8_t)(len >> 8);
                out[n++] = (uint8_t)len;
            }
            memcpy(out + n, s + 1, len);
            n += len;
            s = e + 1;
        } else {
            int hi = hexval(s[0]), lo = s[1] ? hexval(s[1]) : -1;
            cr_assert(hi >= 0 && lo >= 0, "bad hex in test notation at \"%s\"", s);
            cr_assert(n < cap, "test notation overflows its buffer");
            out[n++] = (uint8_t)(hi << 4 | lo);
            s += 2;
        }
    }
    return n;
}

mqtt_bytes_t tmq_bytes(const char *text)
{
    size_t cap = strlen(text) + 2;
    uint8_t *p = pool_get(cap);
    size_t n = tmq_parse(text, p, cap);
    return (mqtt_bytes_t){ p, (uint32_t)n };
}

mqtt_bytes_t tmq_frame(uint8_t first, const char *body)
{
    mqtt_bytes_t b = tmq_bytes(body);
    uint8_t *p = pool_get(b.n + 5);
    size_t n = 0;
    p[n++] = first;
    uint32_t rem = b.n;
    do {
        uint8_t d = rem & 0x7F;
        rem >>= 7;
        p[n++] = (uint8_t)(d | (rem ? 0x80 : 0));
    } while (rem);
    memcpy(p + n, b.p, b.n);
    return (mqtt_bytes_t){ p, (uint32_t)(n + b.n) };
}

void tmq_dec_ok(uint8_t first, const char *body, uint8_t version, mqtt_packet_t *pkt)
{
    mqtt_bytes_t w = tmq_frame(first, body);
    mqtt_diag_t d;
    int rc = mqtt_decode(w.p, w.n, version, 0, pkt, &d);
    cr_assert_eq(rc, (int)w.n, "decode returned %d (%s) for a %u-byte packet", rc, d.why ? d.why : "-", w.n);
}

uint8_t tmq_raw_err(mqtt_bytes_t w, uint8_t version, uint32_t max)
{
    mqtt_packet_t pkt;
    mqtt_diag_t d;
    int rc = mqtt_decode(w.p, w.n, version, max, &pkt, &d);
    cr_assert_lt(rc, 0, "decode returned %d, expected an error", rc);
    cr_assert_not_null(d.why, "an error carries a reason string");
    return d.reason;
}

uint8_t tmq_dec_err(uint8_t first, const char *body, uint8_t version)
{
    return tmq_raw_err(tmq_frame(first, body), version, 0);
}

mqtt_bytes_t tmq_encode(const mqtt_packet_t *pkt)
{
    int size = mqtt_encoded_size(pkt);
    cr_assert_gt(size, 0, "mqtt_encoded_size returned %d", size);
    uint8_t *p = pool_get((size_t)size);
    int n = mqtt_encode(pkt, p, (size_t)size);
    cr_assert_eq(n, size, "mqtt_encode wrote %d bytes, mqtt_encoded_size said %d", n, size);
    return (mqtt_bytes_t){ p, (uint32_t)n };
}

static void hexdump(char *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%02x ", p[i]);
    out[o] = 0;
}

void tmq_assert_bytes(mqtt_bytes_t got, const char *expected)
{
    mqtt_bytes_t want = tmq_bytes(expected);
    if (got.n == want.n && memcmp(got.p, want.p, got.n) == 0)
        return;
    static char g[4096], w[4096];
    hexdump(g, sizeof g, got.p, got.n);
    hexdump(w, sizeof w, want.p, want.n);
    cr_assert_fail("bytes differ\n  got:  %s\n  want: %s", g, w);
}

void tmq_assert_roundtrip(const mqtt_packet_t *pkt)
{
    mqtt_bytes_t w = tmq_encode(pkt);
    mqtt_packet_t back;
    mqtt_diag_t d;
    uint8_t version = pkt->type == MQTT_CONNECT ? 0 : pkt->version;
    int rc = mqtt_decode(w.p, w.n, version, 0, &back, &d);
    cr_assert_eq(rc, (int)w.n, "re-decode returned %d (%s)", rc, d.why ? d.why : "-");
    cr_assert(mqtt_packet_equal(pkt, &back), "packet changed across encode -> decode");
}

bool tmq_view_is(mqtt_bytes_t v, const char *s)
{
    size_t n = strlen(s);
    return v.n == n && (n == 0 || memcmp(v.p, s, n) == 0);
}
