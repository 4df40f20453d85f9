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
    pthread_mutex_init(&t->mem.lat_mu, NULL);
    atomic_init(&t->mem.ack_lat_ms, 0); /* no evidence of a slow cluster: a restart may go back to memory */
    wal_memory_opts_default(&t->mem.o);
    atomic_init(&t->mode, WAL_MODE_LOG);
    atomic_init(&t->mem_end, 0);
}

void wal__mem_destroy(wal_topic_t *t)
{
    /* wal_close emptied the tier (wal__mem_close); a topic freed without a
     * writer (a failed open) never held anything */
    pthread_mutex_destroy(&t->mem.mu);
    pthread_mutex_destroy(&t->mem.lat_mu);
}

/* ---- T2 rule (d): how fast the cluster acknowledges what the log holds -------- */

/* The writer published the log up to end (exclusive), now. Only for a topic
 * that has been in memory: a log-only topic pays nothing. */
static void lat_push(wal_topic_t *t, uint64_t end)
{
    wal_mem_t *m = &t->mem;
    uint64_t now = tb_mono_ms();
    if (atomic_load(&t->ck_req) + 1 >= end)
        return; /* acknowledged before it was published (read from memory during a spill's
                 * write, or published again after a repair): no sample, it says nothing of how
                 * fast the cluster acknowledges the log */
    pthread_mutex_lock(&m->lat_mu);
    if (m->nlat == TB_ARRAY_LEN(m->lat)) { /* the oldest goes: the newest passed is what counts */
        memmove(&m->lat[0], &m->lat[1], (m->nlat - 1) * sizeof m->lat[0]);
        m->nlat--;
    }
    m->lat[m->nlat].end = end;
    m->lat[m->nlat].ms = now;
    m->nlat++;
    pthread_mutex_unlock(&m->lat_mu);
}

/* The checkpoint rose to ck: the newest batch it passed gives the sample. */
static void lat_sample(wal_topic_t *t, uint64_t ck)
{
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->lat_mu);
    unsigned k = 0;
    while (k < m->nlat && m->lat[k].end <= ck + 1)
        k++;
    if (k) {
        uint64_t now = tb_mono_ms(), at = m->lat[k - 1].ms;
        atomic_store(&m->ack_lat_ms, now > at ? now - at : 0);
        memmove(&m->lat[0], &m->lat[k], (m->nlat - k) * sizeof m->lat[0]);
        m->nlat -= k;
    }
    pthread_mutex_unlock(&m->lat_mu);
}

uint64_t wal__mem_ack_latency(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->mem.ack_lat_ms);
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
    lat_push(t, disk_end);
    /* both the loop (held records) and the writer publish: only ever up */
    wal__atomic_max(&t->readable_end, disk_end);
}

/* Completes b, which was never held: the loop owns it again. */
static void post(wal_topic_t *t, wal_batch_t *b)
{
    b->posted = true;
    tb_mbox_push(&t->w->done, &b->node);
}

/* Completes a held batch (under mem.mu: a topic's completions stay in
 * order): the loop gets a reference of its own; the tier keeps its own
 * until it releases the batch. */
static void post_held(wal_topic_t *t, wal_batch_t *b)
{
    atomic_fetch_add(&b->refs, 1);
    post(t, b);
}

static const char *const spill_names[WAL_SPILL__COUNT] = { "timeout", "bytes", "output", "shutdown" };

const char *wal_spill_name(wal_spill_t why)
{
    return (unsigned)why < WAL_SPILL__COUNT ? spill_names[why] : "?";
}

static void set_head_ms(wal_topic_t *t)
{
    atomic_store(&t->head_ms, t->mem.head ? t->mem.head->held_ms : 0);
}

/* MEMORY -> SPILLING (under mem.mu): the spill is queued; batches submitted
 * from now on go to the writer behind it. */
static void spill_locked(wal_topic_t *t, wal_spill_t why)
{
    wal_mem_t *m = &t->mem;
    if (atomic_load(&t->mode) != WAL_MODE_MEMORY)
        return;
    wal_req_t *req = tb_calloc(1, sizeof *req);
    req->item.kind = WAL_ITEM_SPILL;
    req->topic = t;
    if (wal__enqueue(t->w, &req->item) < 0) {
        free(req); /* closing: wal_close writes what is held itself */
        return;
    }
    m->why = why;
    m->spills[why]++;
    /* the hold-down (wal.h, WAL_MODE_*): a spill soon after a return to
     * memory doubles it; one after a quiet minute clears it */
    uint64_t now = tb_mono_ms();
    if (m->memory_ms && now < m->memory_ms + 60000)
        m->holddown_ms = TB_MIN((uint64_t)60000, m->holddown_ms ? 2 * m->holddown_ms : 1000);
    else
        m->holddown_ms = 0;
    if (why == WAL_SPILL_SHUTDOWN)
        m->sticky = true;
    atomic_store(&m->ack_lat_ms, UINT64_MAX); /* T2 (d): the way back waits for a fresh sample */
    atomic_store(&t->mode, WAL_MODE_SPILLING);
    wal__step(t, WAL_STEP_SPILL_QUEUED); /* under mem.mu: the writer's snapshot waits */
}

void wal_topic_spill(wal_topic_t *t, wal_spill_t why)
{
    if ((unsigned)why >= WAL_SPILL__COUNT)
        return;
    pthread_mutex_lock(&t->mem.mu);
    spill_locked(t, why);
    pthread_mutex_unlock(&t->mem.mu);
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
    atomic_store(&t->spill_after, o->spill_after_ms);
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
    int mode = atomic_load(&t->mode);
    if (mode == WAL_MODE_SPILLING || mode == WAL_MODE_DRAINING || mode == WAL_MODE_READY) {
        pthread_mutex_unlock(&m->mu);
        return TB_EUNSUPPORTED; /* after a spill: the return to memory is not built yet */
    }
    bool in_memory = mode == WAL_MODE_MEMORY;
    if (in_memory && o->durability == WAL_DURABILITY_MEMORY_FIRST) {
        m->o = *o; /* ack, memory_bytes, spill_after_ms, for the batches submitted from now on */
        atomic_store(&t->spill_after, o->spill_after_ms);
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

/* READY -> MEMORY (under mem.mu, no batch of t at the writer, so the log's
 * next offset is final): the offset counter comes back to memory. */
static void to_memory(wal_topic_t *t)
{
    wal_mem_t *m = &t->mem;
    uint64_t next = atomic_load(&t->next_pub);
    m->lo = m->next = next;
    m->memory_ms = tb_mono_ms();
    m->to_memory++;
    atomic_store(&t->drain_at, 0);
    atomic_store(&t->mem_end, next);
    wal__atomic_max(&t->readable_end, next);
    atomic_store(&t->mode, WAL_MODE_MEMORY);
    tb_info("wal: durability: back to memory", TB_S("topic", t->name), TB_U("next_offset", next),
            TB_U("after_ms", m->memory_ms - m->enter_ms), TB_U("holddown_ms", m->holddown_ms),
            TB_U("ack_latency_ms", wal__mem_ack_latency(t)));
    wal__step(t, WAL_STEP_MEMORY);
}

bool wal__mem_submit(wal_batch_t *b)
{
    wal_topic_t *t = b->t;
    int mode = atomic_load_explicit(&t->mode, memory_order_acquire);
    if (mode != WAL_MODE_MEMORY && (mode != WAL_MODE_READY || atomic_load(&t->wq) != 0))
        return false;
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    if (atomic_load(&t->retired)) { /* set under this lock: the writer answers it TB_ECLOSED */
        pthread_mutex_unlock(&m->mu);
        return false;
    }
    if (atomic_load(&t->mode) == WAL_MODE_READY && atomic_load(&t->wq) == 0)
        to_memory(t);
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
        /* full: what is held goes to the log, and this batch behind it */
        spill_locked(t, WAL_SPILL_BYTES);
        pthread_mutex_unlock(&m->mu);
        return false;
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
    b->held_ms = tb_mono_ms();
    bool was_empty = m->head == NULL;
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
    if (m->o.ack == WAL_ACK_RECEIVED)
        post_held(t, b); /* the loop's reference, and the tier keeps its own */
    if (was_empty)
        set_head_ms(t);
    pthread_mutex_unlock(&m->mu);
    wal__step(t, WAL_STEP_HELD);
    if (was_empty)
        wal__kick(t->w); /* the writer's spill timer counts from this batch */
    return true;
}

void wal__mem_release(wal_topic_t *t, uint64_t ck)
{
    if (atomic_load(&t->mem_end) == 0)
        return; /* never in memory: nothing held, no lock taken on the ack path */
    lat_sample(t, ck);
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    if (atomic_load(&t->mode) == WAL_MODE_SPILLING) {
        /* the spill is writing them: complete what the checkpoint passed,
         * release nothing (wal__mem_spilled does, once they are on disk) */
        for (wal_batch_t *b = m->head; b && b->c.first_offset + b->count - 1 <= ck; b = b->mem_next)
            if (!b->posted)
                post_held(t, b);
        pthread_mutex_unlock(&m->mu);
        return;
    }
    while (m->head && m->head->c.first_offset + m->head->count - 1 <= ck) {
        wal_batch_t *b = m->head;
        m->head = b->mem_next;
        if (!m->head)
            m->tail = NULL;
        m->lo = m->head ? m->head->c.first_offset : m->next;
        m->held_bytes -= b->len;
        m->held_msgs -= b->count;
        if (!b->posted)
            post_held(t, b); /* UPSTREAM: the completion, now that the cluster has it */
        wal__batch_unref(b); /* the tier's (RECEIVED: the loop may have freed its own already) */
    }
    set_head_ms(t);
    pthread_mutex_unlock(&m->mu);
}

wal_batch_t **wal__mem_snapshot(wal_topic_t *t, size_t *n, uint64_t *end)
{
    wal_mem_t *m = &t->mem;
    uint64_t ck = atomic_load(&t->ck_req);
    pthread_mutex_lock(&m->mu);
    size_t k = 0, cap = 0;
    wal_batch_t **v = NULL;
    /* SPILLING: nothing is added or unlinked meanwhile; the copies are the
     * writer's to seal (readers keep copying the originals) */
    for (const wal_batch_t *b = m->head; b; b = b->mem_next) {
        if (b->c.first_offset + b->count - 1 <= ck)
            continue; /* acknowledged already: nothing to keep */
        if (k == cap)
            v = tb_realloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
        wal_batch_t *c = tb_calloc(1, sizeof *c);
        c->t = t;
        c->buf = tb_malloc(b->len);
        memcpy(c->buf, b->buf, b->len);
        c->len = c->cap = b->len;
        c->count = b->count;
        c->c = b->c;
        atomic_init(&c->refs, 1);
        v[k++] = c;
    }
    *end = m->next;
    pthread_mutex_unlock(&m->mu);
    *n = k;
    return v;
}

/*
 * REFUSED-SPILL ACCOUNTING (docs/design/MEMORY-FIRST.md 2.8). A spill that
 * could not be written (a disk error, or a bound that refuses: drop_newest,
 * the free-space floor) leaves offsets [lo, end) that are neither in the
 * log nor held. They are taken as a bound deletes records in flight, under
 * acct_mu (where acks move the checkpoint): drop_floor rises to end, so
 * the collector's `queued` no longer counts them (they are not in the log)
 * and an ack that still comes for one (the replicator had read it) is
 * counted acked_dropped, never replicated; per output slot the same with
 * its own checkpoint. Of them, those already answered (ack received:
 * their publishers were told they were taken) are lost: counted in
 * dropped_open and dropped_total, persisted in the meta file. Those not
 * answered (ack upstream) are refused to their publishers instead
 * (TB_EFULL: the broker counts them rejected, none acknowledged), so they
 * are not counted twice. r: the failed batches' ranges, received: whether
 * each was answered.
 */
typedef struct {
    uint64_t first, count;
    bool answered;
} refused_t;

static void refused(wal_topic_t *t, const refused_t *r, size_t n, uint64_t end)
{
    if (n == 0)
        return;
    wal_meta_t meta = t->meta;
    uint64_t lost = 0;
    pthread_mutex_lock(&t->acct_mu);
    uint64_t ck = atomic_load(&t->ck_req), floor = t->drop_floor;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo = TB_MAX(TB_MAX(r[i].first, ck + 1), floor), hi = r[i].first + r[i].count;
        if (r[i].answered && hi > lo)
            lost += hi - lo;
    }
    t->dropped_open += lost;
    t->spill_lost_open += lost; /* the same drops, by cause: dropped_total{reason="spill"} */
    t->drop_floor = TB_MAX(t->drop_floor, end);
    wal__slots_fill_locked(t, &meta);
    for (size_t k = 0; k < t->nslots; k++) {
        wal_slot_t *sl = &t->slots[k];
        uint64_t d = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t lo = TB_MAX(TB_MAX(r[i].first, sl->ck + 1), sl->drop_floor), hi = r[i].first + r[i].count;
            if (r[i].answered && hi > lo)
                d += hi - lo;
        }
        sl->dropped_open += d;
        sl->drop_floor = TB_MAX(sl->drop_floor, end);
        if (meta.nslots > 0)
            meta.slots[k].dropped += d;
    }
    pthread_mutex_unlock(&t->acct_mu);
    if (lost == 0)
        return; /* refused to their publishers: nothing lost, nothing to persist */
    meta.dropped += lost;
    meta.checkpoint = TB_MAX(meta.checkpoint, ck);
    int rc = wal__meta_write(t, &meta, WAL_CAUSE_DROP);
    tb_warn("wal: durability: messages acknowledged on receipt (ack: received) were lost with a spill that "
            "could not be written; counted in dropped_total",
            TB_S("topic", t->name), TB_U("lost", lost), TB_U("dropped_total", meta.dropped),
            TB_S("persisted", rc == 0 ? "yes" : tb_strerror(rc)));
}

void wal__mem_spilled(wal_topic_t *t, int rc, uint64_t written_end)
{
    wal_mem_t *m = &t->mem;
    uint64_t ck = atomic_load(&t->ck_req), failed = 0;
    refused_t *rv = NULL;
    size_t nr = 0, cr = 0;
    pthread_mutex_lock(&m->mu);
    uint64_t end = m->next;
    uint64_t msgs = m->held_msgs, bytes = m->held_bytes;
    /* before the completions: whoever sees one sees the topic in the log */
    if (atomic_load(&t->mode) == WAL_MODE_SPILLING) {
        m->enter_ms = tb_mono_ms();
        atomic_store(&t->drain_at, m->enter_ms + m->holddown_ms);
        atomic_store(&t->mode, WAL_MODE_DRAINING);
    }
    while (m->head) {
        wal_batch_t *b = m->head;
        m->head = b->mem_next;
        bool on_disk = b->c.first_offset + b->count <= written_end;
        bool lost = !on_disk && b->c.first_offset + b->count - 1 > ck;
        if (lost) {
            if (nr == cr)
                rv = tb_realloc(rv, (cr = cr ? cr * 2 : 8) * sizeof *rv);
            rv[nr++] = (refused_t){ b->c.first_offset, b->count, b->posted };
        }
        if (!b->posted) {
            if (lost) {
                b->c.rc = rc ? rc : TB_EFULL; /* not written: the publisher is not answered */
                b->c.first_offset = 0;
                failed += b->count;
            }
            post_held(t, b);
        } else if (lost) {
            failed += b->count; /* RECEIVED, answered already, and not written: lost */
        }
        wal__batch_unref(b);
    }
    m->tail = NULL;
    m->lo = m->next;
    m->held_bytes = m->held_msgs = 0;
    set_head_ms(t);
    wal_spill_t why = m->why;
    pthread_mutex_unlock(&m->mu);
    refused(t, rv, nr, end);
    free(rv);
    if (rc == 0)
        tb_info("wal: durability: spilled to the log", TB_S("topic", t->name), TB_S("reason", wal_spill_name(why)),
                TB_U("messages", msgs), TB_U("bytes", bytes), TB_U("next_offset", written_end));
    else
        tb_error("wal: durability: the spill to the log failed; messages not written", TB_S("topic", t->name),
                 TB_S("reason", wal_spill_name(why)), TB_ERR(rc), TB_U("messages", failed));
}

void wal__mem_due(wal_topic_t *t, uint64_t now_ms)
{
    uint64_t h = atomic_load(&t->head_ms);
    if (h && atomic_load(&t->mode) == WAL_MODE_MEMORY && now_ms >= h + atomic_load(&t->spill_after))
        wal_topic_spill(t, WAL_SPILL_TIMEOUT);
}

int wal__mem_drained(wal_topic_t *t, uint64_t now_ms)
{
    wal_mem_t *m = &t->mem;
    pthread_mutex_lock(&m->mu);
    bool go = !m->sticky && now_ms >= m->enter_ms + m->holddown_ms;
    pthread_mutex_unlock(&m->mu);
    if (!go || atomic_load(&t->wq) != 0 || t->held_head || atomic_load(&t->state) != WAL_TOPIC_OK || t->fd < 0)
        return 0;
    if (atomic_load(&t->ck_req) + 1 < t->next)
        return 0; /* the cluster does not have all the log holds yet */
    if (wal__mem_ack_latency(t) >= atomic_load(&t->spill_after) / 2)
        return 0; /* T2 (d): acks as slow as this would spill again soon; the log is kept */
    /* persisted now, so memory mode finds nothing on disk above it and
     * writes no checkpoint; and the reservation ahead of the log's end */
    t->switching = true; /* wal_stats: these writes are the switch's, not routine ones */
    int rc = wal__checkpoint_apply(t, true);
    if (rc == 0) {
        wal__atomic_max(&t->res_used, t->next);
        rc = wal__reserve_apply(t, true);
    }
    t->switching = false;
    if (rc < 0)
        return rc; /* stays DRAINING; tried again at the next wake */
    wal__step(t, WAL_STEP_T2_WRITTEN);
    pthread_mutex_lock(&m->mu);
    if (atomic_load(&t->mode) == WAL_MODE_DRAINING) {
        atomic_store(&t->mode, WAL_MODE_READY);
        wal__step(t, WAL_STEP_READY); /* under mem.mu: no READY -> MEMORY before it returns */
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
}

uint64_t wal__mem_deadline(wal_topic_t *t)
{
    uint64_t da = atomic_load(&t->drain_at);
    if (da && atomic_load(&t->mode) == WAL_MODE_DRAINING && da > tb_mono_ms())
        return da; /* the hold-down ends: DRAINING may end then (never a past deadline: no spin) */
    uint64_t h = atomic_load(&t->head_ms);
    if (!h || atomic_load(&t->mode) != WAL_MODE_MEMORY)
        return UINT64_MAX;
    return h + atomic_load(&t->spill_after);
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
        if (!b->posted) {
            unanswered += b->count;
            b->c.rc = TB_ECLOSED;
            b->c.first_offset = 0;
            post_held(t, b);
        }
        wal__batch_unref(b);
    }
    atomic_store(&t->head_ms, 0);
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
    if (off >= m->next || atomic_load(&t->mode) == WAL_MODE_LOG) {
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
