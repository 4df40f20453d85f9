/*
 * rep_pb_int.h: protobuf's wire format, the two pieces both hand encoders of
 * replicator/ write with (rep_encode.c for Danube, rep_spb_encode.c for
 * Sparkplug B): a varint's size, and a varint written at p. Internal to
 * replicator/ (static inline: no symbol of its own).
 */
#ifndef TRIB_REP_PB_INT_H
#define TRIB_REP_PB_INT_H

#include <stddef.h>
#include <stdint.h>

enum { PB_WT_VARINT = 0, PB_WT_I64 = 1, PB_WT_LEN = 2, PB_WT_I32 = 5 };

static inline size_t pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p (room for pb_varint_size(v) bytes); returns the end. */
static inline uint8_t *pb_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

#endif
