/*
 * batch.c: building batches on the event-loop thread and getting them back.
 *
 * A message is copied exactly once, into the batch buffer, already in the
 * on-disk record layout (wal_format.h); the writer then only patches the
 * offset and CRC in place and hands the buffer to pwrite. A batch is capped
 * at segment_bytes minus a header, so it always fits in one fresh segment
 * and is split by at most one rotation.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <stdlib.h>

wal_batch_t *wal_batch_new(wal_topic_t *t)
{
    wal_batch_t *b = tb_calloc(1, sizeof *b);
    b->t = t;
    atomic_init(&b->refs, 1);
    return b;
}

int wal_batch_add(wal_batch_t *b, const wal_msg_t *m)
{
    const uint64_t limit = b->t->w->o.segment_bytes - WAL_SEG_HDR_SIZE;
    if (m->payload_len > WAL_RECORD_MAX)
        return -EMSGSIZE;
    size_t size = wal__rec_size(m);
    if (size == 0) {
        /* out of range: distinguish "too big" from "malformed" */
        bool fields_ok = m->qos <= 2 && m->nattrs <= 255 && m->mqtt_topic_len <= 0xFFFF &&
                         (m->nattrs == 0 || m->attrs);
        for (size_t i = 0; fields_ok && i < m->nattrs; i++)
            fields_ok = m->attrs[i].key_len <= 0xFFFF && m->attrs[i].val_len <= 0xFFFF;
        return fields_ok ? -EMSGSIZE : -EINVAL;
    }
    if (size > limit)
        return -EMSGSIZE;
    if (b->len + size > limit)
        return TB_EFULL;
    if (b->len + size > b->cap) {
        /* 16 KiB holds a typical 100-message batch without regrowing */
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + size)
            cap *= 2;
        b->buf = tb_realloc(b->buf, cap);
        b->cap = cap;
    }
    wal__rec_encode(b->buf + b->len, m, size);
    b->len += size;
    b->count++;
    return 0;
}

uint32_t wal_batch_count(const wal_batch_t *b)
{
    return b->count;
}

size_t wal_batch_bytes(const wal_batch_t *b)
{
    return b->len;
}

void wal_submit(wal_batch_t *b, void *user)
{
    wal_t *w = b->t->w;
    b->c.user = user;
    b->c.topic = b->t;
    b->c.count = b->count;
    b->item.kind = WAL_ITEM_BATCH;
    if (wal__mem_submit(b))
        return; /* MEMORY: held (memory.c), readable now, completed when acknowledged */
    if (atomic_load(&b->t->mem_end) != 0) { /* a READY topic waits for none at the writer */
        b->in_wq = true;
        atomic_fetch_add(&b->t->wq, 1);
    }
    if (wal__enqueue(w, &b->item) < 0) {
        wal__wq_done(b);
        b->c.rc = TB_ECLOSED;
        b->c.first_offset = 0;
        tb_mbox_push(&w->done, &b->node);
    }
}

wal_batch_t *wal_take_done(wal_t *w)
{
    tb_mnode_t *n = tb_mbox_take(&w->done);
    return n ? TB_CONTAINER_OF(n, wal_batch_t, node) : NULL;
}

wal_batch_t *wal_batch_next(const wal_batch_t *b)
{
    return b->node.next ? TB_CONTAINER_OF(b->node.next, wal_batch_t, node) : NULL;
}

const wal_completion_t *wal_batch_completion(const wal_batch_t *b)
{
    return &b->c;
}

void wal_batch_free(wal_batch_t *b)
{
    if (!b)
        return;
    wal__batch_unref(b); /* a RECEIVED batch may still be held in memory (memory.c) */
}
