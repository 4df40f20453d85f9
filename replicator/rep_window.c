/*
 * rep_window.c: a topic's batches between "built" and "acknowledged", and
 * the one rule that makes replication safe: the checkpoint only moves
 * through contiguous acks.
 *
 * A ring of at most max_inflight_batches batches, oldest first. Batches
 * are sent in ring order; an ack names a batch by its batch_last_offset;
 * the oldest batches are popped while they are acked, and w->acked (the
 * value handed to wal_checkpoint) becomes the last popped batch's last
 * offset. So an ack for batch 3 while batch 2 is unanswered advances
 * nothing until batch 2's ack arrives: a checkpoint never covers an offset
 * the cluster has not confirmed.
 *
 * When a stream ends, rewind() turns every unacked batch back into BUILT
 * with its bytes and boundaries untouched: the next stream resends exactly
 * the same batches, so the cluster's dedup (one marker per topic, the
 * highest batch_last_offset stored: GRPC-NOTES.md) skips what it already
 * has and never stores a batch that straddles its marker.
 *
 * Pure bookkeeping: no gRPC, no clock (callers pass times). The buffers
 * and wire slices are owned by the caller, who frees what pop() returns.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

void rep__window_init(rep__window_t *w, uint32_t cap, uint64_t acked)
{
    memset(w, 0, sizeof *w);
    w->cap = cap ? cap : 1;
    w->v = tb_calloc(w->cap, sizeof *w->v);
    w->acked = acked;
}

void rep__window_free(rep__window_t *w)
{
    free(w->v);
    w->v = NULL;
    w->n = 0;
}

rep__batch_t *rep__window_at(rep__window_t *w, uint32_t i)
{
    return &w->v[(w->head + i) % w->cap];
}

rep__batch_t *rep__window_push(rep__window_t *w)
{
    if (w->n == w->cap)
        return NULL;
    rep__batch_t *b = rep__window_at(w, w->n++);
    memset(b, 0, sizeof *b);
    b->state = REP__B_BUILT;
    return b;
}

rep__batch_t *rep__window_next_unsent(rep__window_t *w)
{
    for (uint32_t i = 0; i < w->n; i++) {
        rep__batch_t *b = rep__window_at(w, i);
        if (b->state == REP__B_BUILT)
            return b;
    }
    return NULL;
}

void rep__window_mark_sending(rep__window_t *w, rep__batch_t *b, uint64_t now_ms)
{
    b->state = REP__B_SENDING;
    b->sent_ms = now_ms;
    b->sends++;
    w->sent++;
}

void rep__window_mark_sent(rep__window_t *w, rep__batch_t *b)
{
    (void)w;
    if (b->state == REP__B_SENDING)
        b->state = REP__B_SENT;
}

rep__ack_t rep__window_ack(rep__window_t *w, uint64_t acked_offset)
{
    bool earlier_unacked = false;
    for (uint32_t i = 0; i < w->n; i++) {
        rep__batch_t *b = rep__window_at(w, i);
        if (b->last == acked_offset && (b->state == REP__B_SENT || b->state == REP__B_SENDING)) {
            b->state = REP__B_ACKED;
            w->sent--;
            return earlier_unacked ? REP__ACK_OUT_OF_ORDER : REP__ACK_IN_ORDER;
        }
        if (b->state != REP__B_ACKED && b->state != REP__B_DEAD) /* a dead one is not waited for */
            earlier_unacked = true;
    }
    return REP__ACK_UNKNOWN;
}

bool rep__window_pop(rep__window_t *w, rep__batch_t *out)
{
    if (w->n == 0)
        return false;
    rep__batch_t *b = rep__window_at(w, 0);
    if (b->state != REP__B_ACKED)
        return false;
    *out = *b;
    memset(b, 0, sizeof *b);
    w->head = (w->head + 1) % w->cap;
    w->n--;
    if (out->last > w->acked)
        w->acked = out->last;
    return true;
}

void rep__window_rewind(rep__window_t *w)
{
    for (uint32_t i = 0; i < w->n; i++) {
        rep__batch_t *b = rep__window_at(w, i);
        if (b->state == REP__B_SENDING || b->state == REP__B_SENT)
            b->state = REP__B_BUILT;
    }
    w->sent = 0;
}

rep__batch_t *rep__window_oldest_unacked(rep__window_t *w)
{
    for (uint32_t i = 0; i < w->n; i++) {
        rep__batch_t *b = rep__window_at(w, i);
        if (b->state != REP__B_ACKED && b->state != REP__B_DEAD)
            return b;
    }
    return NULL;
}
