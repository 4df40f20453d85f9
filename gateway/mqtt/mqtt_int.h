/*
 * mqtt_int.h: byte-level reading and writing shared by the mqtt_*.c files
 * (internal to gateway/mqtt/; the API is mqtt.h).
 *
 * Reading is a cursor over one packet body (mqtt__rd_t) whose end is the
 * packet's end, so every field read is bounded by the Remaining Length and a
 * field that would run past it is simply "short". The primitives are
 * static inline because the PUBLISH decode path is hot: one PUBLISH is a
 * handful of these calls and must stay well under a microsecond.
 *
 * Writing goes through mqtt__wr_t, which either counts (p == NULL) or
 * writes. The encoder runs the same code twice, once to size and once to
 * write, so the two can never disagree; the first invalid field found sets
 * err (-EINVAL) and the caller checks it once at the end.
 */
#ifndef TB_GATEWAY_MQTT_WIRE_H
#define TB_GATEWAY_MQTT_WIRE_H

#include "base/base.h"
#include "gateway/mqtt/mqtt.h"

#include <errno.h>
#include <string.h>

/* ---- reading ---------------------------------------------------------------- */

typedef struct mqtt__rd {
    const uint8_t *p, *end;
} mqtt__rd_t;

static inline size_t mqtt__left(const mqtt__rd_t *r) { return (size_t)(r->end - r->p); }

static inline bool mqtt__get_u8(mqtt__rd_t *r, uint8_t *v)
{
    if (r->p >= r->end)
        return false;
    *v = *r->p++;
    return true;
}

static inline bool mqtt__get_u16(mqtt__rd_t *r, uint16_t *v)
{
    if (mqtt__left(r) < 2)
        return false;
    *v = (uint16_t)((r->p[0] << 8) | r->p[1]);
    r->p += 2;
    return true;
}

static inline bool mqtt__get_u32(mqtt__rd_t *r, uint32_t *v)
{
    if (mqtt__left(r) < 4)
        return false;
    *v = ((uint32_t)r->p[0] << 24) | ((uint32_t)r->p[1] << 16) | ((uint32_t)r->p[2] << 8) | r->p[3];
    r->p += 4;
    return true;
}

/* Two Byte Integer length + that many bytes (UTF-8 string or binary data). */
static inline bool mqtt__get_bin(mqtt__rd_t *r, mqtt_bytes_t *v)
{
    if (mqtt__left(r) < 2)
        return false;
    uint32_t n = ((uint32_t)r->p[0] << 8) | r->p[1];
    if (mqtt__left(r) - 2 < n)
        return false;
    v->p = r->p + 2;
    v->n = n;
    r->p += 2 + n;
    return true;
}

/* Variable Byte Integer results. */
enum {
    MQTT__VI_OK = 0,
    MQTT__VI_SHORT = -1,    /* input ends before the last byte */
    MQTT__VI_TOO_LONG = -2, /* a fifth byte would be needed */
    MQTT__VI_OVERLONG = -3, /* not the minimal encoding [MQTT-1.5.5-1] */
};

/*
 * Decodes a Variable Byte Integer from p[0..n). On MQTT__VI_OK sets *v and
 * *used (1..4). A non-minimal encoding ends in a 0x00 byte after a
 * continuation byte (e.g. 0x80 0x00 for 0): MQTT 5 forbids it
 * [MQTT-1.5.5-1]; 3.1.1 (2.2.3) defines only the minimal algorithm, so we
 * refuse it in every version: then decode -> encode is byte-identical for
 * lengths and there is one spelling of every value to reason about.
 */
static inline int mqtt__varint(const uint8_t *p, size_t n, uint32_t *v, unsigned *used)
{
    uint32_t val = 0;
    for (unsigned i = 0; i < 4; i++) {
        if (i >= n)
            return MQTT__VI_SHORT;
        uint8_t b = p[i];
        val |= (uint32_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0)
                return MQTT__VI_OVERLONG;
            *v = val;
            *used = i + 1;
            return MQTT__VI_OK;
        }
    }
    return MQTT__VI_TOO_LONG;
}

static inline unsigned mqtt__varint_size(uint32_t v)
{
    return v < 128u ? 1 : v < 16384u ? 2 : v < 2097152u ? 3 : 4;
}

/*
 * UTF-8 Encoded String content rules, both versions: well-formed, no
 * surrogates ([MQTT-1.5.3-1], [MQTT-1.5.4-1]) and no U+0000 ([MQTT-1.5.3-2],
 * [MQTT-1.5.4-2]). U+0001..U+001F, U+007F..U+009F and non-characters are
 * accepted: the specs say a sender SHOULD NOT send them and a receiver MAY
 * close (1.5.3 / 1.5.4), and refusing them would drop devices that put a tab
 * in a user property; the router decides what topics it maps. A BOM is kept
 * as is [MQTT-1.5.4-3]. ASCII is checked inline; the rest goes to the strict
 * validator in base/ (U+0000 can only be the byte 0x00 there, since
 * overlongs are refused).
 */
static inline bool mqtt__utf8_ok(const uint8_t *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == 0)
            return false;
        if (c & 0x80)
            return tb_utf8_valid(p + i, n - i) && memchr(p + i, 0, n - i) == NULL;
    }
    return true;
}

/*
 * A Topic Name (PUBLISH, will topic, Response Topic): a UTF-8 string as
 * above without '+' or '#' ([MQTT-3.3.2-2], [MQTT-4.7.1-1]). Returns 0, or
 * the reason code: 0x81 for bad UTF-8 (the specs call it malformed), 0x82
 * for a wildcard (the packet parses; the value is not allowed). '+' and '#'
 * are ASCII, so they cannot hide inside a multi-byte sequence.
 */
static inline uint8_t mqtt__topic_name_check(const uint8_t *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '+' || c == '#')
            return MQTT_RC_PROTOCOL_ERROR;
        if (c == 0)
            return MQTT_RC_MALFORMED_PACKET;
        if (c & 0x80) {
            if (!tb_utf8_valid(p + i, n - i) || memchr(p + i, 0, n - i))
                return MQTT_RC_MALFORMED_PACKET;
            if (memchr(p + i, '+', n - i) || memchr(p + i, '#', n - i))
                return MQTT_RC_PROTOCOL_ERROR;
            return 0;
        }
    }
    return 0;
}

/* Records an error in diag and returns -1 (the internal failure value). */
static inline int mqtt__fail(mqtt_diag_t *diag, uint8_t rc, const char *why)
{
    diag->reason = rc;
    diag->why = why;
    return -1;
}

/* ---- writing ------------------------------------------------------------------ */

typedef struct mqtt__wr {
    uint8_t *p; /* NULL: count only */
    size_t n;   /* bytes counted or written so far */
    int err;    /* 0, or -EINVAL once a field cannot be encoded */
} mqtt__wr_t;

static inline void mqtt__put(mqtt__wr_t *w, const void *src, size_t n)
{
    if (w->p && n)
        memcpy(w->p + w->n, src, n);
    w->n += n;
}

static inline void mqtt__put_u8(mqtt__wr_t *w, uint8_t v) { mqtt__put(w, &v, 1); }

static inline void mqtt__put_u16(mqtt__wr_t *w, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
    mqtt__put(w, b, 2);
}

static inline void mqtt__put_u32(mqtt__wr_t *w, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
    mqtt__put(w, b, 4);
}

static inline void mqtt__put_varint(mqtt__wr_t *w, uint32_t v)
{
    uint8_t b[4];
    unsigned n = 0;
    if (v > MQTT_MAX_REMAINING) {
        w->err = -EINVAL;
        return;
    }
    do {
        uint8_t d = v & 0x7F;
        v >>= 7;
        b[n++] = (uint8_t)(d | (v ? 0x80 : 0));
    } while (v);
    mqtt__put(w, b, n);
}

static inline void mqtt__put_bin(mqtt__wr_t *w, mqtt_bytes_t v)
{
    if (v.n > 0xFFFF) {
        w->err = -EINVAL;
        return;
    }
    mqtt__put_u16(w, (uint16_t)v.n);
    mqtt__put(w, v.p, v.n);
}

/* ---- shared between the codec's files -------------------------------------------- */

/* Property contexts: a packet type (1..15), or 0 for the will properties. */
#define MQTT__CTX_WILL 0u

/* Reads Property Length and the properties of context ctx into *props (which
 * the caller zeroed). Returns 0 or -1 with diag set. */
int mqtt__props_decode(mqtt__rd_t *r, unsigned ctx, mqtt_props_t *props, mqtt_diag_t *diag);
/* Writes Property Length and the properties; sets w->err on what ctx does not allow. */
void mqtt__props_put(mqtt__wr_t *w, const mqtt_props_t *props, unsigned ctx);
/* True when props would encode to zero bytes (no property, no list item). */
bool mqtt__props_empty(const mqtt_props_t *props);
/* Steps over one property TLV in [*p, end): 1 with its id and value span,
 * 0 at the end, -1 when it does not parse. */
int mqtt__prop_next(const uint8_t **p, const uint8_t *end, uint8_t *id,
                    const uint8_t **val, const uint8_t **val_end);

int mqtt__decode_connect(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *diag);
int mqtt__decode_connack(mqtt__rd_t *r, mqtt_packet_t *pkt, mqtt_diag_t *diag);
void mqtt__put_connect(mqtt__wr_t *w, const mqtt_packet_t *pkt);

#endif
