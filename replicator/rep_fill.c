/*
 * rep_fill.c: filling a topic's open batch from its WAL reader.
 *
 * The batch closes at batch_size messages, or when the next record would
 * take it past max_batch_bytes. That record has been read already, and a
 * reader's records are views that die at the next read; seeking back would
 * reopen the segment and scan it from the start (wal/reader.c), up to 16
 * MiB per batch. So the record is copied ("held", its views rebased onto
 * the copy) and becomes the first message of the next batch. A gap (records
 * deleted by a bound before they were read, or a hole: offsets with no
 * record, which lose nothing and are not counted as drops) also closes the batch, so every
 * batch covers one contiguous range of offsets. Records older than max_age
 * (docs/REPLICATION.md) are not encoded: they make up "virtual" batches of
 * their own, never sent, that move the checkpoint over them. A held
 * record is never lost and never sent twice: the unit tests replay a log
 * through this function and check every offset arrives once, in order.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

static void hold(rep__src_t *s, const wal_record_t *rec)
{
    if (s->held_cap < rec->raw_len) {
        s->held_cap = rec->raw_len;
        s->held_buf = tb_realloc(s->held_buf, s->held_cap);
    }
    memcpy(s->held_buf, rec->raw, rec->raw_len);
    s->held = *rec;
#define REBASE(p) ((p) ? (void *)(s->held_buf + ((const uint8_t *)(p) - rec->raw)) : NULL)
    s->held.raw = s->held_buf;
    s->held.payload = REBASE(rec->payload);
    s->held.mqtt_topic = REBASE(rec->mqtt_topic);
    s->held.attrs_raw = REBASE(rec->attrs_raw);
#undef REBASE
    s->has_held = true;
}

/* After WAL_GAP: a drop is counted (and warned about by the caller), a
 * hole only noted: offsets that never held a record lose nothing. */
static void count_gap(rep__src_t *s)
{
    if (wal_reader_gap_kind(s->rd) == WAL_GAP_HOLE) {
        s->holes++;
        return;
    }
    s->gaps++;
    wal_reader_gap(s->rd, &s->gap_from, &s->gap_to);
}

/* Adds rec to o, encoded or (older than max_age) as aged. 1 when it does not
 * belong in o (it leads the next batch), else 0. An empty o takes anything. */
static int place(rep__open_t *o, const rep__enc_t *e, const wal_record_t *rec, uint64_t now_wall_ms)
{
    if (rep__too_old(e, rec, now_wall_ms)) {
        if (o->count > 0)
            return 1; /* a batch is all sent or all aged */
        if (o->aged == 0) {
            o->first = rec->offset;
            o->first_publish_ms = rec->publish_time_ms;
            o->started_ms = tb_mono_ms();
        }
        o->last = rec->offset;
        o->aged++;
        if (rec->offset >= e->live_base)
            o->aged_new++;
        o->raw_bytes += rec->raw_len;
        return 0;
    }
    if (o->aged > 0)
        return 1;
    return rep__open_add(o, e, rec, now_wall_ms) == REP__ADD_FULL; /* only when o already had messages */
}

int rep__fill(rep__open_t *o, const rep__enc_t *e, rep__src_t *s, uint64_t now_wall_ms)
{
    if (s->has_held) {
        if (place(o, e, &s->held, now_wall_ms))
            return 1; /* close o, the held one leads the next */
        s->has_held = false;
    }
    while (!rep__open_full(o, e)) {
        wal_record_t rec;
        int rc = wal_reader_next(s->rd, &rec);
        if (rc == WAL_GAP) {
            count_gap(s);
            if (!rep__open_empty(o))
                return 1; /* batches stay contiguous: the records after the gap start the next */
            continue;
        }
        if (rc != 0)
            return rc == WAL_END ? 0 : rc;
        if (place(o, e, &rec, now_wall_ms)) {
            hold(s, &rec);
            return 1;
        }
    }
    return 1;
}

int rep__src_peek(rep__src_t *s, const wal_record_t **out)
{
    *out = NULL;
    while (!s->has_held) {
        wal_record_t rec;
        int rc = wal_reader_next(s->rd, &rec);
        if (rc == WAL_GAP) {
            count_gap(s);
            continue;
        }
        if (rc != 0)
            return rc;
        hold(s, &rec);
    }
    *out = &s->held;
    return 0;
}

void rep__src_free(rep__src_t *s)
{
    if (s->rd)
        wal_reader_close(s->rd);
    free(s->held_buf);
    memset(s, 0, sizeof *s);
}
