/*
 * writer.c: the one thread that mutates the disk.
 *
 * DESIGN. The loop hands over batches and requests through one FIFO
 * (w->mu + w->cond). Each time the writer wakes it splices out everything
 * pending and runs a group-commit round:
 *
 *   for each item, in submission order:
 *       batch:  make room under the bounds as the topic's overflow
 *               policy says, or refuse the batch (overflow.c); assign
 *               contiguous offsets, seal each record (offset + CRC, in
 *               place in the batch buffer) and write the whole batch with
 *               one pwrite (two if a rotation splits it)
 *       request: topic open, sync barrier (ends the round first),
 *               quarantine, own bound (takes the topic out of the total),
 *               offset reservation (one meta write: reserve.c)
 *   ALWAYS: fdatasync each file written in the round once, after ending
 *           its data on a page boundary with a padding record when that
 *           saves writing the last page again (pad.c)
 *   post every completion of the round, in order, to the done list
 *   housekeeping: INTERVAL syncs, retries of failed topics, offset
 *           reservations asked for (reserve.c), checkpoints, the
 *           free-space reading when due (space.c)
 *   held batches (on_full block: overflow.c): tried again, oldest first,
 *           in a round of their own, after what housekeeping freed
 *
 * So however many batches arrive while an fdatasync is running, the next
 * round covers them all with one more fdatasync per topic.
 *
 * FAILURES. A failed write (ENOSPC, EIO, ...) is undone: the segment is cut
 * back to where the batch started (a segment created for it is deleted),
 * the batch fails with the error, and the topic enters FAILED: new batches
 * fail fast (TB_EFULL for a full disk, else the errno) until a retry, every
 * retry_ms or when the loop calls wal_topic_retry(), works. A retry works
 * when the disk takes a probe write as large as the failed batch (cut off
 * again at once): until then health keeps saying FAILED.
 *
 * A failed fdatasync is the "fsyncgate" case: Linux may already have
 * marked the dirty pages clean (the data may never reach the disk, yet a
 * second fdatasync can succeed), so we never retry it as if nothing
 * happened. Instead:
 *   - every batch of the round on that topic fails (none was acknowledged);
 *   - ALWAYS: nothing after the last successful sync was acknowledged, so the
 *     segment is cut back to that point (a client resend then cannot
 *     duplicate it) and offsets continue from there;
 *   - INTERVAL/NEVER: data after the last sync was acknowledged. Repair
 *     reopens the segment, re-reads it from the last synced point, keeps the
 *     longest valid prefix, rewrites those bytes (re-dirtying the pages so
 *     the next fdatasync really writes them), cuts the rest and syncs. What
 *     could not be kept is counted in lost_total and logged as an error;
 *     offsets continue past it (it may have been read), never reused;
 *   - the topic is FAILED until a repair (full recovery of the topic from
 *     disk, then fdatasync) succeeds: health shows it, nothing is acked.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

typedef struct round {
    wal_batch_t *head, *tail;
} round_t;

static void round_add(round_t *r, wal_batch_t *b)
{
    b->round_next = NULL;
    if (r->tail)
        r->tail->round_next = b;
    else
        r->head = b;
    r->tail = b;
}

void wal__publish(wal_topic_t *t)
{
    uint64_t end = t->w->o.fsync == WAL_FSYNC_NEVER ? t->next : t->synced_next;
    atomic_store(&t->next_pub, TB_MAX(t->next, atomic_load(&t->mem_end)));
    atomic_store(&t->log_next, t->seg_next); /* not next: past a spill it may lie after a hole */
    wal__publish_end(t, end);
}

static void set_active_bytes(wal_topic_t *t, uint64_t bytes)
{
    pthread_mutex_lock(&t->mu);
    wal_seg_t *s = &t->segs[t->nsegs - 1];
    uint64_t old = s->bytes;
    s->bytes = bytes;
    pthread_mutex_unlock(&t->mu);
    wal__topic_bytes_set(t, t->bytes - old + bytes);
}

static void synced(wal_topic_t *t)
{
    t->spos = t->wpos;
    t->synced_next = t->next;
    t->dirty = false;
    wal__publish(t);
}

/* The fsyncgate response (see DESIGN). in_round: fail this round's batches too. */
static void sync_failed(wal_topic_t *t, int rc, bool in_round)
{
    wal_t *w = t->w;
    tb_error("wal: fdatasync failed; topic stops acknowledging until repaired", TB_S("topic", t->name),
             TB_ERR(rc), TB_U("synced_end", t->synced_next), TB_U("written_end", t->next));
    if (in_round)
        t->round_sync_rc = rc;
    if (w->o.fsync == WAL_FSYNC_ALWAYS) {
        if (t->fd >= 0 && t->wpos > t->spos && w->io->ftruncate(w->io->ctx, t->fd, (off_t)t->spos) == 0) {
            set_active_bytes(t, t->spos);
            t->wpos = t->spos;
        }
        t->next = t->seg_next = t->synced_next;
        atomic_fetch_add_explicit(&t->cut_gen, 1, memory_order_release);
    } else {
        t->rewrite_unsynced = true;
    }
    t->dirty = false;
    t->needs_repair = true;
    wal__topic_set_failed(t, rc);
}

/* The topic's directory, created if missing, its name made durable. */
static int topic_mkdir(wal_t *w, const char *dir)
{
    const wal_io_t *io = w->io;
    int rc = io->mkdir(io->ctx, dir, 0755);
    if (rc < 0 && rc != -EEXIST)
        return rc;
    return wal__fsync_dir(w, WAL_CAUSE_OTHER, w->dir);
}

static bool disk_full(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT;
}

static int failfast_rc(wal_topic_t *t)
{
    int e = atomic_load(&t->last_error);
    if (disk_full(e) || e == TB_EFULL)
        return TB_EFULL;
    return e ? e : TB_ENOTREADY;
}

/* Seals the active segment (fdatasync), whose records end at prev_end, and
 * starts a new one at base. The old fd stays open in *old_fd so a failure
 * later in the batch can undo. */
static int rotate(wal_topic_t *t, uint64_t base, uint64_t prev_end, int *old_fd, bool *sync_err)
{
    int rc = wal__fdatasync(t->w, t->fd, WAL_CAUSE_RECORD);
    if (rc < 0) {
        *sync_err = true;
        return rc;
    }
    wal_seghdr_t h;
    int fd = wal__seg_create(t, base, &h);
    if (fd < 0)
        return fd;
    *old_fd = t->fd;
    t->fd = fd;
    t->seed = h.seed;
    pthread_mutex_lock(&t->mu);
    t->segs[t->nsegs - 1].end = prev_end; /* sealed: [its base, prev_end) */
    pthread_mutex_unlock(&t->mu);
    wal__segs_push(t, &(wal_seg_t){ .base = base, .bytes = WAL_SEG_HDR_SIZE, .created_ms = h.created_ms });
    wal__topic_bytes_set(t, t->bytes + WAL_SEG_HDR_SIZE);
    return 0;
}

/* Writes b at the end of t's log. On failure the log is as before the batch
 * (or t->needs_repair says it could not be put back) and the topic FAILED. */
static int append(wal_t *w, wal_topic_t *t, wal_batch_t *b)
{
    const wal_io_t *io = w->io;
    const uint64_t old_wpos = t->wpos;
    const uint32_t old_seed = t->seed;
    int old_fd = -1;
    bool sync_err = false;
    uint64_t off = t->next, rot_base = 0, wpos = t->wpos, chunk_fpos = t->wpos;
    size_t pos = 0, chunk = 0;
    int rc;

    if (off != t->seg_next) {
        /* the offsets since the active segment's last record were
         * acknowledged from memory and hold no record: a hole, which is
         * always a segment boundary (THE RULE, wal_format.h) */
        if ((rc = rotate(t, off, t->seg_next, &old_fd, &sync_err)) < 0)
            goto undo;
        rot_base = off;
        wpos = chunk_fpos = WAL_SEG_HDR_SIZE;
        wal__step(t, WAL_STEP_SEGMENT);
    }
    while (pos < b->len) {
        uint32_t len = wal__ld32(b->buf + pos);
        if (old_fd < 0 && wpos > WAL_SEG_HDR_SIZE && wpos + len > w->o.segment_bytes) {
            if (pos > chunk && (rc = wal__pwrite_counted(w, WAL_CAUSE_RECORD, t->fd, b->buf + chunk, pos - chunk, chunk_fpos)) < 0)
                goto undo;
            set_active_bytes(t, wpos);
            if ((rc = rotate(t, off, off, &old_fd, &sync_err)) < 0)
                goto undo;
            rot_base = off;
            wpos = chunk_fpos = WAL_SEG_HDR_SIZE;
            chunk = pos;
        }
        wal__rec_seal(b->buf + pos, off++, t->seed);
        pos += len;
        wpos += len;
    }
    if ((rc = wal__pwrite_counted(w, WAL_CAUSE_RECORD, t->fd, b->buf + chunk, pos - chunk, chunk_fpos)) < 0)
        goto undo;
    set_active_bytes(t, wpos);
    if (old_fd >= 0) {
        /* the old segment was synced whole when it was sealed */
        io->close(io->ctx, old_fd);
        t->spos = WAL_SEG_HDR_SIZE;
        t->synced_next = TB_MAX(t->synced_next, rot_base);
    }
    t->wpos = wpos;
    t->next = t->seg_next = off;
    return 0;

undo:
    if (old_fd >= 0) {
        /* the new segment holds nothing but this batch */
        io->close(io->ctx, t->fd);
        char *p = wal__seg_path(t, rot_base, NULL);
        if (io->unlink(io->ctx, p) < 0)
            t->needs_repair = true;
        free(p);
        pthread_mutex_lock(&t->mu);
        uint64_t nb = t->segs[t->nsegs - 1].bytes;
        t->nsegs--;
        pthread_mutex_unlock(&t->mu);
        wal__topic_bytes_set(t, t->bytes - nb);
        t->fd = old_fd;
        t->seed = old_seed;
    }
    if (io->ftruncate(io->ctx, t->fd, (off_t)old_wpos) == 0) {
        set_active_bytes(t, old_wpos);
        /* make the cut durable, so a crash cannot bring back records whose
         * batch was reported failed; not after a failed sync (see DESIGN) */
        if (!sync_err && wal__fdatasync(w, t->fd, WAL_CAUSE_RECORD) < 0)
            t->needs_repair = true;
    } else {
        t->needs_repair = true;
    }
    t->wpos = old_wpos;
    if (disk_full(rc))
        wal__space_refresh(w); /* the estimate was wrong: someone else took the space */
    atomic_fetch_add_explicit(&t->cut_gen, 1, memory_order_release); /* its offsets will be reused */
    t->probe_bytes = b->len + WAL_SEG_HDR_SIZE; /* what a retry must be able to write */
    if (sync_err)
        sync_failed(t, rc, true);
    else
        wal__topic_set_failed(t, rc);
    tb_warn("wal: write failed, batch not stored", TB_S("topic", t->name), TB_ERR(rc),
            TB_U("count", b->count), TB_U("bytes", b->len));
    return rc;
}

/*
 * Does the disk take a write (again)? Writes probe_bytes of zeros (at least a
 * page, at most 1 MiB) at t->wpos, the end of the active segment's log, and
 * cuts the file back to t->wpos (also cutting whatever a failed write left
 * past it). Without this a retry while the disk is still full would declare
 * the topic writable, health would say ready, and only the next batch would
 * find out. Zeros past the last record are a torn tail to recovery (a
 * record length of 0 is invalid), so a crash in between costs nothing.
 * Returns 0, or the write's error (the segment is as before, or
 * needs_repair is set if it could not be cut back).
 */
int wal__probe_space(wal_topic_t *t)
{
    const wal_io_t *io = t->w->io;
    size_t n = (size_t)TB_MIN(TB_MAX(t->probe_bytes, (uint64_t)4096), (uint64_t)1 << 20);
    void *zeros = tb_calloc(1, n);
    int rc = wal__pwrite_counted(t->w, WAL_CAUSE_PROBE, t->fd, zeros, n, t->wpos);
    free(zeros);
    int trc = io->ftruncate(io->ctx, t->fd, (off_t)t->wpos);
    if (trc < 0) {
        t->needs_repair = true;
        return rc < 0 ? rc : trc;
    }
    return rc;
}

static void try_repair(wal_topic_t *t, uint64_t now)
{
    bool asked = atomic_exchange(&t->retry_now, false);
    if (!asked && now < t->retry_at_ms)
        return;
    /* probe first, so a repair's fdatasync also covers the probe's cut */
    int rc = t->fd >= 0 ? wal__probe_space(t) : topic_mkdir(t->w, t->dir);
    if (rc == 0 && (t->needs_repair || t->fd < 0))
        rc = wal__topic_recover(t); /* with no segment, creating one is the probe */
    if (rc < 0) {
        uint64_t suppressed;
        if (tb_ratelimit(&t->retry_rl, &suppressed))
            tb_warn("wal: retry failed, topic still refusing messages", TB_S("topic", t->name), TB_ERR(rc),
                    TB_U("retry_ms", t->w->o.retry_ms), TB_U("suppressed", suppressed));
        wal__topic_set_failed(t, rc);
        return;
    }
    atomic_store(&t->last_error, 0);
    atomic_store(&t->state, WAL_TOPIC_OK);
    tb_info("wal: topic writable again", TB_S("topic", t->name), TB_U("next_offset", t->next));
    wal__publish(t);
}

/* BLOCK: b waits, unwritten and without offsets, behind what t holds already. */
static void hold(wal_topic_t *t, wal_batch_t *b)
{
    b->round_next = NULL;
    if (t->held_tail)
        t->held_tail->round_next = b;
    else
        t->held_head = b;
    t->held_tail = b;
    atomic_store(&t->blocked, true);
}

/* Writes b, or completes it with an error, or holds it (BLOCK: returns true;
 * it is then in no round). A batch of a topic that holds batches is held
 * behind them, so the topic's batches complete in the order they came. */
static bool process_batch(wal_t *w, wal_batch_t *b)
{
    wal_topic_t *t = b->t;
    b->c.topic = t;
    b->c.count = b->count;
    b->c.first_offset = 0;
    b->c.refused_at_bound = false;
    if (atomic_load(&t->retired)) {
        b->c.rc = TB_ECLOSED; /* wal_topic_retire removed it */
        return false;
    }
    if (t->held_head || t->spill_parked) {
        hold(t, b);
        return true;
    }
    if (b->count == 0) {
        b->c.rc = 0;
        b->c.first_offset = t->next;
        return false;
    }
    if (atomic_load(&t->state) == WAL_TOPIC_FAILED && t->round_sync_rc == 0)
        try_repair(t, tb_mono_ms());
    if (atomic_load(&t->state) == WAL_TOPIC_FAILED) {
        b->c.rc = failfast_rc(t);
        return false;
    }
    /* one policy for the whole batch, even if wal_topic_set_overflow runs now */
    wal_overflow_t policy = wal_topic_overflow(t);
    uint64_t need = b->len + WAL_SEG_HDR_SIZE;
    int rc = wal__make_room(w, t, policy, need);
    if (rc == WAL_NO_ROOM) {
        rc = wal__overflow_refuse(w, t, policy, need);
        if (rc == WAL_HOLD && atomic_load(&t->release_held)) {
            b->c.rc = TB_ECLOSED; /* wal_topic_release_held: no more waiting */
            return false;
        }
        if (rc == WAL_HOLD) {
            hold(t, b);
            return true;
        }
        b->c.rc = rc;
        b->c.refused_at_bound = true;
        return false;
    }
    if (rc < 0) {
        wal__topic_set_failed(t, rc);
        b->c.rc = rc;
        return false;
    }
    uint64_t first = t->next;
    if ((rc = append(w, t, b)) < 0) {
        b->c.rc = rc;
        return false;
    }
    b->c.rc = 0;
    b->c.first_offset = first;
    t->touched = true;
    t->dirty = true;
    atomic_store(&t->next_pub, t->next);
    atomic_store(&t->log_next, t->seg_next);
    if (w->o.fsync == WAL_FSYNC_NEVER)
        wal__publish(t);
    return false;
}


/*
 * ALWAYS, before the round's fdatasync of t: appends a padding record up to
 * the next page boundary when pad.c's rule says it pays, and when the bounds
 * have room for it (padding never makes retention delete anything). A
 * failed padding write is cut off again and the round goes on unpadded:
 * padding is an optimisation. Returns 0, or the error of a cut that failed
 * (junk may then follow the records: the caller fails the round as for a
 * failed sync, and repair's recovery cuts it).
 */
static int pad_round(wal_t *w, wal_topic_t *t)
{
    const wal_io_t *io = w->io;
    uint64_t pad = wal__pad_len(t->wpos, t->spos, w->pad_align, w->o.segment_bytes);
    if (pad == 0 || !wal__room(t, pad))
        return 0;
    wal__pad_encode(w->pad_buf, (uint32_t)pad, t->next, t->seed);
    if (wal__pwrite_counted(w, WAL_CAUSE_PAD, t->fd, w->pad_buf, (size_t)pad, t->wpos) < 0)
        return io->ftruncate(io->ctx, t->fd, (off_t)t->wpos);
    set_active_bytes(t, t->wpos + pad);
    t->wpos += pad;
    return 0;
}

static void flush_round(wal_t *w, round_t *r)
{
    if (!r->head)
        return;
    if (w->o.fsync == WAL_FSYNC_ALWAYS) {
        for (wal_batch_t *b = r->head; b; b = b->round_next) {
            wal_topic_t *t = b->t;
            if (!t->touched)
                continue;
            t->touched = false;
            if (!t->dirty || t->round_sync_rc != 0 || t->fd < 0)
                continue;
            int rc = pad_round(w, t);
            if (rc == 0)
                rc = wal__fdatasync(w, t->fd, WAL_CAUSE_RECORD);
            if (rc < 0)
                sync_failed(t, rc, true);
            else
                synced(t);
        }
    }
    for (wal_batch_t *b = r->head; b; b = b->round_next)
        if (b->c.rc == 0 && b->c.count > 0 && b->t->round_sync_rc != 0)
            b->c.rc = b->t->round_sync_rc;
    for (wal_batch_t *b = r->head; b; b = b->round_next) {
        b->t->touched = false;
        b->t->round_sync_rc = 0;
    }
    /* from here on a batch may be freed by the loop as soon as it is pushed */
    wal_batch_t *b = r->head;
    while (b) {
        wal_batch_t *next = b->round_next;
        wal__wq_done(b);
        tb_mbox_push(&w->done, &b->node);
        b = next;
    }
    r->head = r->tail = NULL;
}

static bool spill(wal_t *w, wal_topic_t *t, bool may_park);

/*
 * BLOCK: tries every held batch again, each topic's oldest first, in a round
 * of its own (one sync per topic, as for new batches); those that fit are
 * written and completed, the rest (from the first that does not fit on) held
 * again in order. A topic that holds nothing more is unblocked before the
 * completions are posted (wal_topic_blocked's promise). closing, or the
 * topic's wal_topic_release_held: what is still held completes with
 * TB_ECLOSED instead. A parked spill (memory tier) goes first: the topic's
 * held batches queued behind it.
 */
static void retry_held(wal_t *w, bool closing)
{
    round_t r = { 0 };
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        bool give_up = closing || atomic_load(&t->release_held);
        if (t->spill_parked && spill(w, t, !give_up))
            continue; /* still no room: what queued behind the spill stays held */
        wal_batch_t *b = t->held_head;
        if (!b)
            continue;
        t->held_head = t->held_tail = NULL;
        while (b) {
            wal_batch_t *next = b->round_next;
            if (give_up) {
                b->c.rc = TB_ECLOSED;
                round_add(&r, b);
            } else if (!process_batch(w, b)) {
                round_add(&r, b);
            }
            b = next;
        }
        if (!t->held_head)
            atomic_store(&t->blocked, false);
    }
    flush_round(w, &r);
}

/* fdatasyncs every topic with unsynced data; returns the first error. */
static int sync_dirty(wal_t *w)
{
    int first = 0;
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (t->fd < 0 || atomic_load(&t->state) != WAL_TOPIC_OK || (!t->dirty && t->wpos == t->spos))
            continue;
        int rc = wal__fdatasync(w, t->fd, WAL_CAUSE_RECORD);
        if (rc < 0) {
            sync_failed(t, rc, false);
            if (!first)
                first = rc;
        } else {
            synced(t);
        }
    }
    return first;
}

/* Barrier and close: sync everything, persist checkpoints. A topic still
 * FAILED (after one last repair attempt at close) makes the result its
 * error: its data is not known to be synced. */
static int sync_all(wal_t *w, bool closing)
{
    for (size_t i = 0; closing && i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (atomic_load(&t->state) == WAL_TOPIC_FAILED) {
            atomic_store(&t->retry_now, true);
            try_repair(t, tb_mono_ms());
        }
    }
    int first = sync_dirty(w);
    for (size_t i = 0; i < w->ntopics; i++) {
        int rc = wal__checkpoint_apply(w->topics[i], true);
        if (rc == 0 && closing)
            rc = wal__reserve_release(w->topics[i]); /* a clean restart need not jump */
        if (rc < 0 && !first)
            first = rc;
    }
    if (!closing)
        wal__space_refresh(w); /* a barrier: what wal_space says after it is a fresh reading */
    for (size_t i = 0; i < w->ntopics && !first; i++)
        if (atomic_load(&w->topics[i]->state) == WAL_TOPIC_FAILED)
            first = failfast_rc(w->topics[i]);
    return first;
}

static void housekeeping(wal_t *w)
{
    uint64_t now = tb_mono_ms();
    if (w->o.fsync == WAL_FSYNC_INTERVAL && now >= w->last_interval_sync_ms + w->o.fsync_interval_ms) {
        sync_dirty(w);
        w->last_interval_sync_ms = now;
    }
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (atomic_load(&t->state) == WAL_TOPIC_FAILED)
            try_repair(t, now);
        /* before the checkpoint: someone may be waiting for the reservation */
        if (atomic_load(&t->res_pending) || (t->res_retry_at_ms && now >= t->res_retry_at_ms))
            wal__reserve_apply(t, false);
        if (atomic_load(&t->ck_pending) || atomic_load(&t->ck_req) > t->meta.checkpoint)
            wal__checkpoint_apply(t, false);
        wal__mem_due(t, now); /* queues a spill: handled at the next turn, in FIFO order */
        if (wal_topic_mode(t) == WAL_MODE_DRAINING)
            wal__mem_drained(t, now); /* after the checkpoint: it may have just caught up */
    }
    wal__space_due(w, tb_mono_ms()); /* last: after what the checkpoints deleted */
}

static uint64_t next_deadline(wal_t *w)
{
    uint64_t dl = wal__space_deadline(w);
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (w->o.fsync == WAL_FSYNC_INTERVAL && t->dirty)
            dl = TB_MIN(dl, w->last_interval_sync_ms + w->o.fsync_interval_ms);
        if (atomic_load(&t->state) == WAL_TOPIC_FAILED)
            dl = TB_MIN(dl, t->retry_at_ms);
        if (atomic_load(&t->ck_pending) || atomic_load(&t->ck_req) > t->meta.checkpoint)
            dl = TB_MIN(dl, t->ck_persist_at_ms);
        if (t->res_retry_at_ms)
            dl = TB_MIN(dl, t->res_retry_at_ms);
        dl = TB_MIN(dl, wal__mem_deadline(t)); /* atomics only: called under w->mu */
    }
    return dl;
}

static void req_done(wal_t *w, wal_req_t *req, int rc)
{
    pthread_mutex_lock(&w->mu);
    req->rc = rc;
    req->done = true;
    pthread_cond_broadcast(&w->req_cond);
    pthread_mutex_unlock(&w->mu);
}

/*
 * A full disk is an outage, not a reason to refuse a topic (and with it the
 * gateway's boot, or a new mapping): the topic is registered FAILED, its
 * messages are refused with TB_EFULL, and the writer's retries create its
 * directory and first segment once space returns (try_repair). Any other
 * error (permissions, a read-only file system) is returned: someone must
 * look.
 */
int wal__topic_create(wal_t *w, const char *name, wal_topic_t **out)
{
    *out = NULL;
    char *enc = wal__topic_encode(name);
    if (!enc)
        return TB_EINVALID;
    char *dir = tb_asprintf("%s/%s", w->dir, enc);
    free(enc);
    wal_topic_t *t = NULL;
    const wal_retired_t *e = wal__retired_find(w, name);
    int rc = topic_mkdir(w, dir);
    if (rc == 0 || (disk_full(rc) && !e)) {
        t = wal__topic_new(w, name, dir);
        if (rc == 0 && e)
            rc = wal__retired_seed(t, e); /* a retired name: offsets and counters continue (RETIRED) */
        if (rc == 0)
            rc = wal__topic_recover(t);
    }
    if (rc < 0 && disk_full(rc)) {
        tb_warn("wal: disk full, new topic starts failed; it is created when space returns",
                TB_S("topic", name), TB_ERR(rc));
        t->needs_repair = true;
        wal__topic_set_failed(t, rc);
        rc = 0;
    }
    if (rc < 0) {
        tb_warn("wal: cannot create topic", TB_S("topic", name), TB_ERR(rc));
        wal__topic_free(t);
    } else {
        wal__topic_register(w, t);
        *out = t;
        if (e) {
            tb_info("wal: retired topic re-created; offsets and counters continue", TB_S("topic", name),
                    TB_U("next", e->next));
            int r = wal__retired_drop(w, name); /* e is freed here */
            if (r < 0) /* the next open drops it (the directory's floor says it was re-created) */
                tb_warn("wal: cannot drop the RETIRED entry of a re-created topic", TB_S("topic", name), TB_ERR(r));
        }
    }
    free(dir);
    return rc;
}

/* wal_topic_set_durability(MEMORY_FIRST), in FIFO order: every batch
 * submitted before it is processed, so t->next is final. The log is synced
 * (what the log holds is readable: the held records follow it), and the
 * reservation made to cover t->next before the first offset is held. */
static int mem_enter(wal_t *w, wal_topic_t *t, const wal_memory_opts_t *o)
{
    if (atomic_load(&t->state) == WAL_TOPIC_FAILED || t->fd < 0)
        return TB_ENOTREADY;
    if (t->held_head)
        return TB_ENOTREADY; /* on_full block holds batches for room: they come first */
    if (t->dirty || t->wpos != t->spos) {
        int rc = wal__fdatasync(w, t->fd, WAL_CAUSE_RECORD);
        if (rc < 0) {
            sync_failed(t, rc, false);
            return rc;
        }
        synced(t);
    }
    wal__atomic_max(&t->res_used, t->next);
    int rc = wal__reserve_apply(t, true);
    if (rc < 0)
        return rc;
    wal__mem_enter(t, o);
    return 0;
}

/*
 * THE SPILL (wal.h), in FIFO order: every batch of t submitted before it
 * was held (t was in MEMORY), every one after it comes behind. Writes
 * copies of the held batches the checkpoint has not passed (memory.c:
 * readers keep copying the originals while these are sealed), each at its
 * own offsets (append starts a new segment at a hole), syncs whatever the
 * fsync mode, publishes, and only then lets memory complete and release
 * them: a record is always readable from one of the two.
 *
 * At a bound with no room (docs/design/MEMORY-FIRST.md 2.8): under
 * on_full block, and may_park, the spill PARKS: what it wrote stays
 * written (unsynced, unpublished: readers still take those records from
 * memory), the topic stays SPILLING with its batches held and unanswered,
 * every later batch of it is held at the writer behind the spill (process_batch),
 * and wal_topic_blocked() is true, so the broker stops reading the topic's
 * publishers. retry_held calls the spill again after each wake's
 * housekeeping (a moved checkpoint frees room); a retry skips the copies
 * already written. Any other policy (or block given up: closing,
 * wal_topic_release_held) fails the spill with TB_EFULL; what it wrote
 * before is synced first and counts as spilled (those publishers are
 * answered), the rest is refused (wal__mem_spilled). Returns whether the
 * spill is parked.
 */
static bool spill(wal_t *w, wal_topic_t *t, bool may_park)
{
    size_t n;
    uint64_t end;
    wal_batch_t **v = wal__mem_snapshot(t, &n, &end);
    int rc = 0;
    bool parked = false;
    if (n > 0 && atomic_load(&t->state) == WAL_TOPIC_FAILED)
        rc = failfast_rc(t);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (v[i]->c.first_offset + v[i]->count <= t->next)
            continue; /* a parked spill wrote it already */
        wal_overflow_t policy = wal_topic_overflow(t);
        uint64_t need = v[i]->len + WAL_SEG_HDR_SIZE;
        rc = wal__make_room(w, t, policy, need);
        if (rc == WAL_NO_ROOM) {
            /* at a bound: the disk is full of unacknowledged records */
            bool hold = wal__overflow_refuse(w, t, policy, need) == WAL_HOLD;
            if (hold && may_park && !atomic_load(&t->release_held)) {
                parked = true;
                rc = 0;
                break;
            }
            rc = TB_EFULL;
        }
        if (rc == 0) {
            t->next = TB_MAX(t->next, v[i]->c.first_offset); /* the hole before it */
            rc = append(w, t, v[i]);
        }
        if (rc == 0)
            t->dirty = true;
    }
    for (size_t i = 0; i < n; i++)
        wal__batch_unref(v[i]);
    free(v);
    if (parked) {
        if (!t->spill_parked)
            wal__step(t, WAL_STEP_PARKED);
        t->spill_parked = true;
        atomic_store(&t->blocked, true);
        return true;
    }
    t->spill_parked = false;
    if (n > 0 && rc == 0)
        wal__step(t, WAL_STEP_WRITTEN);
    /* a bound refused the rest: what was written before it is kept (synced) */
    uint64_t wrote = t->next;
    if ((rc == 0 || rc == TB_EFULL) && t->dirty && t->fd >= 0) {
        int src = pad_round(w, t);
        if (src == 0)
            src = wal__fdatasync(w, t->fd, WAL_CAUSE_RECORD);
        if (src < 0) {
            sync_failed(t, src, false);
            rc = src;
        } else {
            synced(t);
            if (rc == 0)
                wal__step(t, WAL_STEP_SYNCED);
        }
    }
    /* what is durable: everything, what was written before a bound refused, or
     * (a failed write or sync) only what was synced before */
    uint64_t on_disk = rc == 0 ? end : rc == TB_EFULL ? wrote : t->synced_next;
    /* memory's offsets were handed out: the log continues after them whatever
     * happened (a hole: a segment boundary at the next append) */
    t->next = TB_MAX(t->next, end);
    if (rc == 0)
        synced(t);
    else
        wal__publish(t);
    if (!t->held_head)
        atomic_store(&t->blocked, false); /* before the completions (wal_topic_blocked) */
    wal__mem_spilled(t, rc, on_disk);
    wal__step(t, WAL_STEP_POSTED);
    return false;
}

static void handle_item(wal_t *w, round_t *r, wal_item_t *it)
{
    if (it->kind == WAL_ITEM_BATCH) {
        wal_batch_t *b = TB_CONTAINER_OF(it, wal_batch_t, item);
        if (!process_batch(w, b))
            round_add(r, b);
        return;
    }
    wal_req_t *req = TB_CONTAINER_OF(it, wal_req_t, item);
    switch (it->kind) {
    case WAL_ITEM_OPEN: {
        wal_topic_t *t = wal_topic_find(w, req->name);
        int rc = t ? 0 : wal__topic_create(w, req->name, &t);
        req->topic = t;
        req_done(w, req, rc);
        break;
    }
    case WAL_ITEM_SYNC:
        flush_round(w, r);
        req_done(w, req, sync_all(w, false));
        break;
    case WAL_ITEM_QUARANTINE:
        wal__quarantine(req->topic, req->base, req->bad_offset);
        free(req);
        break;
    case WAL_ITEM_OWN_BOUND:
        wal__own_bound_apply(req->topic, req->max_bytes);
        req_done(w, req, 0);
        break;
    case WAL_ITEM_RESERVE:
        req_done(w, req, wal__reserve_apply(req->topic, true));
        break;
    case WAL_ITEM_MEMORY:
        flush_round(w, r); /* what came before is written and completed first */
        req_done(w, req, mem_enter(w, req->topic, &req->mo));
        break;
    case WAL_ITEM_SPILL:
        flush_round(w, r);
        (void)spill(w, req->topic, true);
        free(req);
        break;
    case WAL_ITEM_RETIRE:
        flush_round(w, r); /* every batch submitted before it is written first */
        req_done(w, req, wal__retire_apply(w, req));
        break;
    case WAL_ITEM_STATE:
        flush_round(w, r); /* what was submitted before it is written first */
        req_done(w, req, wal__state_apply(w, req));
        break;
    }
}

void *wal__writer_main(void *arg)
{
    wal_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->q_head && !w->stopping && !w->kick) {
            uint64_t dl = next_deadline(w);
            if (dl == UINT64_MAX) {
                pthread_cond_wait(&w->cond, &w->mu);
                continue;
            }
            uint64_t now = tb_mono_ms();
            if (now >= dl)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (dl - now) * 1000000u;
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&w->cond, &w->mu, &ts);
        }
        wal_item_t *items = w->q_head;
        w->q_head = w->q_tail = NULL;
        bool stopping = w->stopping;
        w->kick = false;
        pthread_mutex_unlock(&w->mu);

        round_t r = { 0 };
        while (items) {
            wal_item_t *it = items;
            items = it->next;
            handle_item(w, &r, it);
        }
        flush_round(w, &r);
        housekeeping(w);
        retry_held(w, false); /* after the checkpoints housekeeping applied */

        if (stopping) {
            pthread_mutex_lock(&w->mu);
            bool empty = w->q_head == NULL;
            pthread_mutex_unlock(&w->mu);
            if (empty) {
                retry_held(w, true);
                for (size_t i = 0; i < w->ntopics; i++) {
                    wal_topic_t *t = w->topics[i];
                    if (wal_topic_mode(t) == WAL_MODE_MEMORY) { /* a clean stop writes what is held */
                        pthread_mutex_lock(&t->mem.mu);
                        t->mem.why = WAL_SPILL_SHUTDOWN;
                        t->mem.spills[WAL_SPILL_SHUTDOWN]++;
                        t->mem.sticky = true;
                        atomic_store(&t->mode, WAL_MODE_SPILLING);
                        pthread_mutex_unlock(&t->mem.mu);
                        (void)spill(w, t, false);
                    }
                    wal__mem_close(t);
                }
                w->close_rc = sync_all(w, true);
                break;
            }
        }
    }
    return NULL;
}

int wal__enqueue(wal_t *w, wal_item_t *it)
{
    it->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->stopping) {
        pthread_mutex_unlock(&w->mu);
        return TB_ECLOSED;
    }
    if (w->q_tail)
        w->q_tail->next = it;
    else
        w->q_head = it;
    w->q_tail = it;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void wal__kick(wal_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->kick = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}
