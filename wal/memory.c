/*
 * memory.c: the memory tier (wal.h MEMORY TIER; docs/WAL.md "The memory
 * tier"; the design is docs/design/MEMORY-FIRST.md, section 2).
 *
 * DESIGN. The submitted batches themselves are what is held: their records
 * are already laid out as on disk (batch.c), so holding costs no copy and a
 * later spill (not built yet) is a plain append. Per topic, under mem.mu:
 *
 *   head ... tail        held batches, offset order, contiguous: the first
 *                        record of head is lo, the end of tail is next
 *   [disk_end, lo)       offsets released (acknowledged from memory): a
 *                        reader that asks for one gets WAL_GAP, a hole
 *   [lo, next)           held: readable from memory
 *
 *   wal_submit (loop)      declares next + count to the reservation (waits
 *                          for it in the rare case it is not covered), sets
 *                          each record's offset field in place (no CRC: the
 *                          CRC's seed belongs to a segment), appends the
 *                          batch, publishes the readable end. RECEIVED:
 *                          posts the completion now (refs 2).
 *   wal_reader_next        copies one record under the lock into the
 *                          reader's own buffer (wal_mem_cursor_t), so its
 *                          views outlive a release on another thread.
 *   wal_checkpoint_ex      wal__mem_release: every batch wholly at or below
 *                          the checkpoint leaves, in order; its completion
 *                          is posted then (UPSTREAM), or its last reference
 *                          dropped (RECEIVED).
 *
 * Completions are posted under mem.mu, so a topic's completions reach the
 * done list in offset order whichever thread moves the checkpoint.
 */
#include "wal/wal_int.h"

#include <stdlib.h>
#include <string.h>

void wal_memory_opts_default(wal_memory_opts_t *o)
{
    *o = (wal_memory_opts_t){
        .durability = WAL_DURABILITY_LOG,
        .ack = WAL_ACK_UPSTREAM,
        .memory_bytes = 8u << 20,
        .spill_after_ms = 250,
    };
}

void wal__mem_init(wal_topic_t *t)
{
    pthread_mutex_init(&t->mem.mu, NULL);
    wal_memory_opts_default(&t->mem.o);
    atomic_init(&t->mode, WAL_MODE_LOG);
    atomic_init(&t->mem_end, 0);
}

void wal__mem_destroy(wal_topic_t *t)
{
    /* wal_close emptied the tier (wal__mem_close); a topic freed without a
     * writer (a failed open) never held anything */
    pthread_mutex_destroy(&t->mem.mu);
}

void wal__batch_unref(wal_batch_t *b)
{
    if (atomic_fetch_sub(&b->refs, 1) > 1)
        return;
    free(b->buf);
    free(b);
}

void wal__publish_end(wal_topic_t *t, uint64_t disk_end)
{
    atomic_store_explicit(&t->disk_end, disk_end, memory_order_release);
    if (atomic_load(&t->mem_end) == 0) {
        atomic_store_explicit(&t->readable_end, disk_end, memory_order_release);
        return;
    }
    /* both the loop (held records) and the writer publish: only ever up */
    wal__atomic_max(&t->readable_end, disk_end);
}

/* Completes b now (under mem.mu when it is t's: completions stay in order). */
static void post(wal_topic_t *t, wal_batch_t *b)
{
    b->posted = true;
    tb_mbox_push(&t->w->done, &b->node);
}

wal_mode_t wal_topic_mode(const wal_topic_t *t)
{
    return (wal_mode_t)atomic_load(&((wal_topic_t *)t)->mode);
}

uint64_t wal_topic_held(wal_topic_t *t)
{
    pthread_mutex_lock(&t->mem.mu);
    uint64_t n = t->mem.held_msgs;
    pthread_mutex_unlock(&t->mem.mu);
    return n;
}

void wal__mem_enter(wal_topic_t *t, const wal_memory_opts_t *o)
{
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    m->o = *o;
    m->lo = m->next = t->next;
    atomic_store(&t->mem_end, t->next);
    wal__atomic_max(&t->readable_end, t->next);
    atomic_store_explicit(&t->mode, WAL_MODE_MEMORY, memory_order_release);
    pthread_mutex_unlock(&m->mu);
    tb_info("wal: durability: memory", TB_S("topic", t->name), TB_U("next_offset", t->next),
            TB_S("ack", o->ack == WAL_ACK_RECEIVED ? "received" : "upstream"),
            TB_U("reserved", atomic_load(&t->reserved)));
}

int wal_topic_set_durability(wal_topic_t *t, const wal_memory_opts_t *o)
{
    if (!o || (unsigned)o->durability > WAL_DURABILITY_MEMORY_FIRST || (unsigned)o->ack > WAL_ACK_RECEIVED ||
        o->memory_bytes == 0)
        return TB_EINVALID;
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    bool in_memory = atomic_load(&t->mode) == WAL_MODE_MEMORY;
    if (in_memory && o->durability == WAL_DURABILITY_MEMORY_FIRST) {
        m->o = *o; /* ack and memory_bytes, for the batches submitted from now on */
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    if (!in_memory && o->durability == WAL_DURABILITY_LOG) {
        m->o = *o;
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    pthread_mutex_unlock(&m->mu);
    if (in_memory)
        return TB_EUNSUPPORTED; /* back to the log: the spill writes what is held (not built yet) */
    wal_req_t req = { .item.kind = WAL_ITEM_MEMORY, .topic = t, .mo = *o };
    return wal__request(t->w, &req);
}

/* Sets the offsets of b's records in place, first at off. */
static void number(wal_batch_t *b, uint64_t off)
{
    for (size_t pos = 0; pos < b->len;) {
        uint32_t len = wal__ld32(b->buf + pos);
        wal__st64(b->buf + pos + 8, off++);
        pos += len;
    }
}

bool wal__mem_submit(wal_batch_t *b)
{
    wal_topic_t *t = b->t;
    if (atomic_load_explicit(&t->mode, memory_order_acquire) != WAL_MODE_MEMORY)
        return false;
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    if (atomic_load(&t->mode) != WAL_MODE_MEMORY) {
        pthread_mutex_unlock(&m->mu);
        return false;
    }
    b->c.first_offset = m->next;
    b->c.refused_at_bound = false;
    if (b->count == 0) {
        b->c.rc = 0;
        post(t, b);
        pthread_mutex_unlock(&m->mu);
        return true;
    }
    if (m->held_bytes + b->len > m->o.memory_bytes) {
        /* until the spill is built, a full tier refuses, as a bound does */
        b->c.rc = TB_EFULL;
        b->c.first_offset = 0;
        b->c.refused_at_bound = true;
        post(t, b);
        pthread_mutex_unlock(&m->mu);
        return true;
    }
    /* every offset handed out is below the durable reservation: declared
     * first (the writer raises it half a span ahead, off this path) */
    uint64_t end = m->next + b->count;
    int rc = wal_topic_reserve(t, end);
    if (rc == WAL_RESERVE_PENDING) {
        /* the raise is late (a slow or failing disk): wait for it. Only this
         * thread submits to t, so next does not move meanwhile; releases may. */
        pthread_mutex_unlock(&m->mu);
        rc = wal_topic_reserve_wait(t, end);
        pthread_mutex_lock(&m->mu);
        if (atomic_load(&t->mode) != WAL_MODE_MEMORY) {
            pthread_mutex_unlock(&m->mu);
            return false; /* closing: the writer's queue answers TB_ECLOSED */
        }
    }
    if (rc != 0) {
        tb_warn("wal: cannot reserve offsets for held messages; batch refused", TB_S("topic", t->name),
                TB_ERR(rc), TB_U("count", b->count));
        b->c.rc = rc;
        b->c.first_offset = 0;
        post(t, b);
        pthread_mutex_unlock(&m->mu);
        return true;
    }
    number(b, m->next);
    b->c.rc = 0;
    b->mem_next = NULL;
    b->posted = false;
    if (m->tail)
        m->tail->mem_next = b;
    else
        m->head = b;
    m->tail = b;
    m->next = end;
    m->held_bytes += b->len;
    m->held_msgs += b->count;
    atomic_store(&t->mem_end, end);
    atomic_store(&t->next_pub, end);
    wal__atomic_max(&t->readable_end, end); /* readable when wal_submit returns */
    if (m->o.ack == WAL_ACK_RECEIVED) {
        atomic_store(&b->refs, 2); /* the loop's, once posted, and the tier's */
        post(t, b);
    }
    pthread_mutex_unlock(&m->mu);
    return true;
}

void wal__mem_release(wal_topic_t *t, uint64_t ck)
{
    if (atomic_load(&t->mem_end) == 0)
        return; /* never in memory: nothing held, no lock taken on the ack path */
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    while (m->head && m->head->c.first_offset + m->head->count - 1 <= ck) {
        wal_batch_t *b = m->head;
        m->head = b->mem_next;
        if (!m->head)
            m->tail = NULL;
        m->lo = m->head ? m->head->c.first_offset : m->next;
        m->held_bytes -= b->len;
        m->held_msgs -= b->count;
        if (b->posted)
            wal__batch_unref(b); /* RECEIVED: the loop may have freed its share already */
        else
            post(t, b); /* UPSTREAM: the completion, now that the cluster has it; the loop's alone */
    }
    pthread_mutex_unlock(&m->mu);
}

void wal__mem_close(wal_topic_t *t)
{
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    atomic_store(&t->mode, WAL_MODE_LOG); /* later submits go to the writer's queue: TB_ECLOSED */
    uint64_t unanswered = 0;
    while (m->head) {
        wal_batch_t *b = m->head;
        m->head = b->mem_next;
        if (b->posted) {
            wal__batch_unref(b);
        } else {
            unanswered += b->count;
            b->c.rc = TB_ECLOSED;
            b->c.first_offset = 0;
            post(t, b);
        }
    }
    m->tail = NULL;
    m->lo = m->next;
    m->held_bytes = m->held_msgs = 0;
    pthread_mutex_unlock(&m->mu);
    if (unanswered)
        tb_warn("wal: closing with messages held in memory; they were not written (their publishers resend)",
                TB_S("topic", t->name), TB_U("messages", unanswered));
}

/* The held batch holding off (lo <= off < next), using the cursor when it
 * still points at a held batch; sets cur->b/b_first/pos/off. */
static const wal_batch_t *find(wal_mem_t *m, uint64_t off, wal_mem_cursor_t *cur)
{
    const wal_batch_t *b = cur->b;
    if (b && cur->b_first >= m->lo && b->c.first_offset == cur->b_first && cur->off == off) {
        if (off < b->c.first_offset + b->count)
            return b;
        if (b->mem_next) { /* at its end: the next one starts at off */
            cur->b = b->mem_next;
            cur->b_first = cur->b->c.first_offset;
            cur->pos = 0;
            return cur->b;
        }
    }
    for (b = m->head; b && off >= b->c.first_offset + b->count; b = b->mem_next) {
    }
    if (!b)
        return NULL;
    size_t pos = 0;
    for (uint64_t o = b->c.first_offset; o < off; o++)
        pos += wal__ld32(b->buf + pos);
    cur->b = b;
    cur->b_first = b->c.first_offset;
    cur->pos = pos;
    cur->off = off;
    return b;
}

int wal__mem_read(wal_topic_t *t, uint64_t off, wal_mem_cursor_t *cur, wal_record_t *out, uint64_t *gap_to)
{
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    if (off >= m->next || atomic_load(&t->mode) != WAL_MODE_MEMORY) {
        pthread_mutex_unlock(&m->mu);
        return WAL_END;
    }
    if (off < m->lo) {
        *gap_to = m->lo; /* acknowledged from memory and released */
        pthread_mutex_unlock(&m->mu);
        return WAL_GAP;
    }
    const wal_batch_t *b = find(m, off, cur);
    if (!b) { /* cannot be: [lo, next) is held */
        pthread_mutex_unlock(&m->mu);
        return TB_ECORRUPT;
    }
    uint32_t len = wal__ld32(b->buf + cur->pos);
    if (cur->cap < len) {
        cur->cap = TB_MAX((size_t)len, (size_t)512);
        cur->buf = tb_realloc(cur->buf, cur->cap);
    }
    memcpy(cur->buf, b->buf + cur->pos, len);
    cur->pos += len;
    cur->off = off + 1;
    if (off > m->read_hi)
        m->read_hi = off;
    pthread_mutex_unlock(&m->mu);
    wal_rec_t rec;
    if (wal__rec_parse(cur->buf, len, off, &rec) != WAL_REC_OK)
        return TB_ECORRUPT; /* our own encoding: cannot happen */
    wal__rec_view(&rec, cur->buf, out);
    return 0;
}
