/*
 * rep_spb_encode.c: Sparkplug B payloads written directly in protobuf's
 * wire format, and NCMD/DCMD payloads decoded with protobuf-c.
 *
 * Why by hand (as rep_encode.c does for Danube): a message of 100 metrics
 * through protobuf-c's packer needs 100 Metric structs filled and walked
 * again; here each metric is written once, straight from the table entry
 * and the flattened value. Field numbers (the specification's payload
 * chapter, proto/sparkplug_b.proto):
 *
 *   Payload  1: timestamp (uint64)  2: metrics (repeated Metric)  3: seq (uint64)
 *   Metric   1: name  2: alias  3: timestamp  4: datatype (uint32)
 *            5: is_historical  7: is_null
 *            10: int_value (uint32)  11: long_value (uint64)  12: float_value
 *            13: double_value  14: boolean_value  15: string_value  16: bytes_value
 *
 * Fields are written in field-number order, so the bytes are the ones
 * protobuf's own serializers give (the unit tests compare with Python's).
 * Values by datatype: Int8/Int16/Int32 sign-extended to 32 bits in
 * int_value (two's complement: -7 is 0xFFFFFFF9; the specification
 * leaves the narrow ones open, and sign extension makes a decoder that
 * reads the uint32 as int32 right whatever the width); UInt8..UInt32 in
 * int_value; Int64, UInt64, DateTime in long_value
 * (two's complement for Int64); String, Text, UUID in string_value;
 * Bytes, File in bytes_value. A null metric carries is_null and no value.
 *
 * The decoder reads outside bytes (a host's command): protobuf-c's
 * unpacker, which bounds every length by the input, after a size cap.
 */
#include "replicator/rep_spb.h"
#include "replicator/rep_pb_int.h"

#include "base/base.h"
#include "proto/sparkplug_b.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(rep__spb_buf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    b->p = tb_realloc(b->p, cap);
    b->cap = cap;
}

/* Callers reserve first: these never grow the buffer. */
static void put_varint(rep__spb_buf_t *b, uint64_t v)
{
    b->len = (size_t)(pb_put_varint(b->p + b->len, v) - b->p);
}

static void put_key(rep__spb_buf_t *b, unsigned field, unsigned wt)
{
    put_varint(b, (uint64_t)field << 3 | wt);
}

static void put_fixed(rep__spb_buf_t *b, const void *v, size_t n)
{
    memcpy(b->p + b->len, v, n); /* little endian, as the targets are */
    b->len += n;
}

void rep__spb_buf_reset(rep__spb_buf_t *b)
{
    b->len = 0;
}

void rep__spb_buf_free(rep__spb_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void rep__spb_begin(rep__spb_buf_t *b, uint64_t timestamp)
{
    b->len = 0;
    reserve(b, 11);
    put_key(b, 1, PB_WT_VARINT);
    put_varint(b, timestamp);
}

void rep__spb_put_seq(rep__spb_buf_t *b, uint64_t seq)
{
    reserve(b, 11);
    put_key(b, 3, PB_WT_VARINT);
    put_varint(b, seq);
}

/* Which value field a datatype uses, and its encoded size (key included). */
typedef enum { V_INT, V_LONG, V_FLOAT, V_DOUBLE, V_BOOL, V_STRING, V_BYTES, V_NONE } vfield_t;

static vfield_t value_field(uint32_t dt)
{
    switch (dt) {
    case REP_SPB_INT8: case REP_SPB_INT16: case REP_SPB_INT32:
    case REP_SPB_UINT8: case REP_SPB_UINT16: case REP_SPB_UINT32: return V_INT;
    case REP_SPB_INT64: case REP_SPB_UINT64: case REP_SPB_DATETIME: return V_LONG;
    case REP_SPB_FLOAT: return V_FLOAT;
    case REP_SPB_DOUBLE: return V_DOUBLE;
    case REP_SPB_BOOLEAN: return V_BOOL;
    case REP_SPB_STRING: case REP_SPB_TEXT: case REP_SPB_UUID: return V_STRING;
    case REP_SPB_BYTES: case REP_SPB_FILE: return V_BYTES;
    default: return V_NONE;
    }
}

static uint64_t int_bits(const rep__spb_wire_t *m)
{
    /* sign-extended to 32 bits for the signed narrow types, then truncated */
    return (uint64_t)(uint32_t)(int32_t)m->v.i;
}

static size_t metric_size(const rep__spb_wire_t *m, vfield_t vf)
{
    size_t n = 0;
    if (m->name)
        n += 1 + pb_varint_size(m->name_len) + m->name_len;
    if (m->has_alias)
        n += 1 + pb_varint_size(m->alias);
    n += 1 + pb_varint_size(m->timestamp);
    if (m->with_datatype)
        n += 1 + pb_varint_size(m->datatype);
    if (m->is_historical)
        n += 2;
    if (m->is_null)
        return n + 2;
    switch (vf) {
    case V_INT: n += 1 + pb_varint_size(int_bits(m)); break;
    case V_LONG: n += 1 + pb_varint_size((uint64_t)m->v.i); break;
    case V_FLOAT: n += 1 + 4; break;
    case V_DOUBLE: n += 1 + 8; break;
    case V_BOOL: n += 2; break;
    case V_STRING: n += 1 + pb_varint_size(m->v.s.n) + m->v.s.n; break;
    case V_BYTES: n += 2 + pb_varint_size(m->v.s.n) + m->v.s.n; break; /* field 16: a two-byte key */
    case V_NONE: break;
    }
    return n;
}

int rep__spb_put_metric(rep__spb_buf_t *b, const rep__spb_wire_t *m)
{
    vfield_t vf = value_field(m->datatype);
    if (vf == V_NONE)
        return TB_EINVALID;
    size_t body = metric_size(m, vf);
    reserve(b, 1 + pb_varint_size(body) + body);
    put_key(b, 2, PB_WT_LEN);
    put_varint(b, body);
    size_t at = b->len;
    if (m->name) {
        put_key(b, 1, PB_WT_LEN);
        put_varint(b, m->name_len);
        put_fixed(b, m->name, m->name_len);
    }
    if (m->has_alias) {
        put_key(b, 2, PB_WT_VARINT);
        put_varint(b, m->alias);
    }
    put_key(b, 3, PB_WT_VARINT);
    put_varint(b, m->timestamp);
    if (m->with_datatype) {
        put_key(b, 4, PB_WT_VARINT);
        put_varint(b, m->datatype);
    }
    if (m->is_historical) {
        put_key(b, 5, PB_WT_VARINT);
        put_varint(b, 1);
    }
    if (m->is_null) {
        put_key(b, 7, PB_WT_VARINT);
        put_varint(b, 1);
    } else {
        switch (vf) {
        case V_INT: put_key(b, 10, PB_WT_VARINT); put_varint(b, int_bits(m)); break;
        case V_LONG: put_key(b, 11, PB_WT_VARINT); put_varint(b, (uint64_t)m->v.i); break;
        case V_FLOAT: put_key(b, 12, PB_WT_I32); put_fixed(b, &m->v.f, 4); break;
        case V_DOUBLE: put_key(b, 13, PB_WT_I64); put_fixed(b, &m->v.d, 8); break;
        case V_BOOL: put_key(b, 14, PB_WT_VARINT); put_varint(b, m->v.b ? 1 : 0); break;
        case V_STRING:
        case V_BYTES:
            put_key(b, vf == V_STRING ? 15 : 16, PB_WT_LEN);
            put_varint(b, m->v.s.n);
            if (m->v.s.n)
                put_fixed(b, m->v.s.p, m->v.s.n);
            break;
        case V_NONE: break;
        }
    }
    return b->len - at == body ? 0 : TB_EINVALID; /* a size bug would be ours: never sent */
}

/* ---- NCMD / DCMD ---------------------------------------------------------- */

int rep__spb_cmd_parse(const uint8_t *p, size_t len, rep__spb_cmd_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (err && errlen)
        err[0] = '\0';
    if (len > REP_SPB_CMD_MAX) {
        if (err && errlen)
            snprintf(err, errlen, "command payload of %zu bytes, more than %u", len, REP_SPB_CMD_MAX);
        return TB_EMALFORMED;
    }
    Spb__Payload *pl = spb__payload__unpack(NULL, len, p);
    if (!pl) {
        if (err && errlen)
            snprintf(err, errlen, "not a Sparkplug B payload (%zu bytes do not decode)", len);
        return TB_EMALFORMED;
    }
    for (size_t i = 0; i < pl->n_metrics; i++) {
        const Spb__Payload__Metric *m = pl->metrics[i];
        bool is_rebirth = m->name && strcmp(m->name, REP_SPB_REBIRTH_NAME) == 0 &&
                          (!m->has_datatype || m->datatype == REP_SPB_BOOLEAN) &&
                          m->value_case == SPB__PAYLOAD__METRIC__VALUE_BOOLEAN_VALUE && m->boolean_value;
        if (is_rebirth)
            out->rebirth = true;
        else
            out->ignored++;
    }
    spb__payload__free_unpacked(pl, NULL);
    return 0;
}
