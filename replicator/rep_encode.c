/*
 * rep_encode.c: WAL records to ReplicateBatch bytes, written directly in
 * protobuf's wire format.
 *
 * Why by hand and not through protobuf-c's generated packer: a batch of 100
 * messages would need 100 StreamMessage structs, 100 MsgIDs and an entry
 * struct per attribute, filled and then walked again by the packer; here a
 * record is read once from the WAL's buffer and written once into the
 * batch. The layout is simple and fixed (field numbers from
 * proto/DanubeApi.proto and proto/EdgeReplicator.proto), and the unit tests
 * decode every batch with protobuf-c's generated unpacker, so the two
 * cannot drift apart unnoticed.
 *
 *   ReplicateBatch  1: topic_name   2: messages (repeated)   3: batch_last_offset
 *   StreamMessage   2: msg_id {2: topic_name, 5: topic_offset}
 *                   3: payload (left out when empty, as proto3 does)
 *                   4: publish_time (ms, the edge's receive time)
 *                   5: producer_name
 *                   7: attributes, one {1: key, 2: value} entry each
 *                   8: schema_id, 9: schema_version (only when the record has
 *                      them; written even when 0: they are proto3 optional)
 * request_id, producer_id, broker_addr and subscription_name stay at their
 * defaults (0, ""), which proto3 encodes as nothing. msg_id is always
 * present: Danube's stream breaks on a message without one.
 *
 * Attributes are proto3 strings, which a decoder (prost, Python's) rejects
 * unless they are UTF-8: an attribute that is not is left out and counted
 * rather than break the stream. A message older than live_window_ms when it
 * is first put in a batch gets tributary.replayed=true.
 */
#include "replicator/rep_int.h"
#include "replicator/rep_pb_int.h"

#include <stdlib.h>
#include <string.h>

static uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wt)
{
    return pb_put_varint(p, (uint64_t)(field << 3 | wt));
}

/* tag + length + bytes of a length-delimited field (tags here are one byte) */
static size_t len_field_size(size_t n)
{
    return 1 + pb_varint_size(n) + n;
}

static uint8_t *put_bytes(uint8_t *p, unsigned field, const void *s, size_t n)
{
    p = put_tag(p, field, PB_WT_LEN);
    p = pb_put_varint(p, n);
    memcpy(p, s, n);
    return p + n;
}

static bool attr_ok(const wal_attr_t *a)
{
    return tb_utf8_valid(a->key, a->key_len) && tb_utf8_valid(a->val, a->val_len);
}

static size_t entry_size(size_t klen, size_t vlen)
{
    return len_field_size(klen) + len_field_size(vlen);
}

static size_t msgid_size(const rep__enc_t *e, uint64_t offset)
{
    return len_field_size(e->topic_len) + 1 + pb_varint_size(offset);
}

static bool is_replayed(const rep__enc_t *e, const wal_record_t *rec, uint64_t now_wall_ms)
{
    return now_wall_ms > rec->publish_time_ms && now_wall_ms - rec->publish_time_ms > e->live_window_ms;
}

size_t rep__msg_size(const rep__enc_t *e, const wal_record_t *rec, bool replayed)
{
    size_t n = len_field_size(msgid_size(e, rec->offset));
    if (rec->payload_len)
        n += len_field_size(rec->payload_len);
    if (rec->publish_time_ms)
        n += 1 + pb_varint_size(rec->publish_time_ms);
    n += len_field_size(e->producer_len);
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(rec, &pos, &a))
        if (attr_ok(&a))
            n += len_field_size(entry_size(a.key_len, a.val_len));
    if (replayed)
        n += len_field_size(entry_size(strlen(REP__REPLAYED_KEY), 4));
    if (rec->has_schema)
        n += 1 + pb_varint_size(rec->schema_id) + 1 + pb_varint_size(rec->schema_version);
    return n;
}

static uint8_t *put_entry(uint8_t *p, const void *k, size_t klen, const void *v, size_t vlen)
{
    p = put_tag(p, 7, PB_WT_LEN);
    p = pb_put_varint(p, entry_size(klen, vlen));
    p = put_bytes(p, 1, k, klen);
    return put_bytes(p, 2, v, vlen);
}

static uint8_t *put_msg(uint8_t *p, const rep__enc_t *e, const wal_record_t *rec, bool replayed,
                        uint32_t *skipped)
{
    p = put_tag(p, 2, PB_WT_LEN);
    p = pb_put_varint(p, msgid_size(e, rec->offset));
    p = put_bytes(p, 2, e->topic, e->topic_len);
    p = put_tag(p, 5, PB_WT_VARINT);
    p = pb_put_varint(p, rec->offset);
    if (rec->payload_len)
        p = put_bytes(p, 3, rec->payload, rec->payload_len);
    if (rec->publish_time_ms) {
        p = put_tag(p, 4, PB_WT_VARINT);
        p = pb_put_varint(p, rec->publish_time_ms);
    }
    p = put_bytes(p, 5, e->producer, e->producer_len);
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(rec, &pos, &a)) {
        if (attr_ok(&a))
            p = put_entry(p, a.key, a.key_len, a.val, a.val_len);
        else
            (*skipped)++;
    }
    if (replayed)
        p = put_entry(p, REP__REPLAYED_KEY, strlen(REP__REPLAYED_KEY), "true", 4);
    if (rec->has_schema) {
        p = put_tag(p, 8, PB_WT_VARINT);
        p = pb_put_varint(p, rec->schema_id);
        p = put_tag(p, 9, PB_WT_VARINT);
        p = pb_put_varint(p, rec->schema_version);
    }
    return p;
}

static void reserve(rep__open_t *o, size_t more)
{
    if (o->len + more <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more)
        cap *= 2;
    o->buf = tb_realloc(o->buf, cap);
    o->cap = cap;
}

#define TRAILER_MAX 11 /* field 3 tag + a 10-byte varint */

int rep__open_add(rep__open_t *o, const rep__enc_t *e, const wal_record_t *rec, uint64_t now_wall_ms)
{
    bool replayed = is_replayed(e, rec, now_wall_ms);
    size_t body = rep__msg_size(e, rec, replayed);
    size_t field = len_field_size(body);
    if (o->count > 0 && o->len + field + TRAILER_MAX > e->max_bytes)
        return REP__ADD_FULL;
    if (o->count == 0) {
        o->len = 0;
        reserve(o, len_field_size(e->topic_len) + field + TRAILER_MAX);
        o->len = (size_t)(put_bytes(o->buf, 1, e->topic, e->topic_len) - o->buf);
        o->first = rec->offset;
        o->first_publish_ms = rec->publish_time_ms;
        o->started_ms = tb_mono_ms();
    }
    reserve(o, field + TRAILER_MAX);
    uint8_t *p = o->buf + o->len;
    p = put_tag(p, 2, PB_WT_LEN);
    p = pb_put_varint(p, body);
    uint8_t *start = p;
    p = put_msg(p, e, rec, replayed, &o->skipped_attrs);
    if ((size_t)(p - start) != body)
        abort(); /* the size and the writer disagree: a bug, never bad input */
    o->len = (size_t)(p - o->buf);
    o->count++;
    o->raw_bytes += rec->raw_len;
    o->last = rec->offset;
    if (rec->publish_time_ms > o->last_publish_ms)
        o->last_publish_ms = rec->publish_time_ms;
    if (rec->offset >= e->live_base)
        o->count_new++;
    if (replayed)
        o->replayed++;
    return 0;
}

void rep__open_finish(rep__open_t *o, rep__batch_t *out)
{
    if (o->count == 0) { /* virtual: nothing to send */
        memset(out, 0, sizeof *out);
        out->first = o->first;
        out->last = o->last;
        out->aged = o->aged;
        out->aged_new = o->aged_new;
        out->raw_bytes = o->raw_bytes;
        out->first_publish_ms = o->first_publish_ms;
        out->state = REP__B_ACKED;
        uint8_t *buf = o->buf;
        size_t cap = o->cap;
        uint32_t skipped = o->skipped_attrs;
        memset(o, 0, sizeof *o);
        o->buf = buf;
        o->cap = cap;
        o->skipped_attrs = skipped;
        return;
    }
    reserve(o, TRAILER_MAX);
    uint8_t *p = o->buf + o->len;
    p = put_tag(p, 3, PB_WT_VARINT);
    p = pb_put_varint(p, o->last);
    out->buf = o->buf;
    out->len = (size_t)(p - o->buf);
    out->first = o->first;
    out->last = o->last;
    out->count = o->count;
    out->count_new = o->count_new;
    out->replayed = o->replayed;
    out->raw_bytes = o->raw_bytes;
    out->first_publish_ms = o->first_publish_ms;
    out->last_publish_ms = o->last_publish_ms;
    out->state = REP__B_BUILT;
    uint32_t skipped = o->skipped_attrs;
    memset(o, 0, sizeof *o);
    o->skipped_attrs = skipped;
}

void rep__open_free(rep__open_t *o)
{
    free(o->buf);
    memset(o, 0, sizeof *o);
}
