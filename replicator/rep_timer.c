/*
 * rep_timer.c: the replicator thread's deadlines, in a binary min-heap.
 *
 * The thread blocks in grpc_completion_queue_next() with the earliest due
 * time as its deadline, so the heap answers "what is next" in O(1) and
 * arms, re-arms and cancels in O(log n). Per topic there are a few timers
 * (batch timeout, ack deadline, backoff, read retry); scanning every topic
 * on every completion would cost O(topics) per ack, which 10,000 topics
 * cannot afford. A timer stores its heap position, so cancel needs no search.
 */
#include "replicator/rep_int.h"

#include <stdlib.h>

static void put(rep__heap_t *h, size_t i, rep__timer_t *tm)
{
    h->v[i] = tm;
    tm->pos = i + 1;
}

static void sift_up(rep__heap_t *h, size_t i)
{
    rep__timer_t *tm = h->v[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent]->due <= tm->due)
            break;
        put(h, i, h->v[parent]);
        i = parent;
    }
    put(h, i, tm);
}

static void sift_down(rep__heap_t *h, size_t i)
{
    rep__timer_t *tm = h->v[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t best = tm->due;
        if (l < h->n && h->v[l]->due < best) {
            m = l;
            best = h->v[l]->due;
        }
        if (r < h->n && h->v[r]->due < best)
            m = r;
        if (m == i)
            break;
        put(h, i, h->v[m]);
        i = m;
    }
    put(h, i, tm);
}

void rep__timer_cancel(rep__heap_t *h, rep__timer_t *tm)
{
    if (!tm->pos)
        return;
    size_t i = tm->pos - 1;
    tm->pos = 0;
    h->n--;
    if (i == h->n)
        return;
    rep__timer_t *moved = h->v[h->n];
    put(h, i, moved);
    sift_up(h, i);
    sift_down(h, moved->pos - 1);
}

void rep__timer_arm(rep__heap_t *h, rep__timer_t *tm, uint64_t due)
{
    rep__timer_cancel(h, tm);
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->v = tb_realloc(h->v, h->cap * sizeof *h->v);
    }
    tm->due = due;
    put(h, h->n++, tm);
    sift_up(h, h->n - 1);
}

rep__timer_t *rep__timer_peek(const rep__heap_t *h)
{
    return h->n ? h->v[0] : NULL;
}

rep__timer_t *rep__timer_pop_due(rep__heap_t *h, uint64_t now)
{
    rep__timer_t *tm = rep__timer_peek(h);
    if (!tm || tm->due > now)
        return NULL;
    rep__timer_cancel(h, tm);
    return tm;
}

void rep__heap_free(rep__heap_t *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}
