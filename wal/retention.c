/*
 * retention.c: what leaves the disk and how it is counted (writer thread).
 *
 * Three reasons to delete or set aside a sealed segment, never the active one:
 *   - checkpoint: every record in it is at or below the cluster's checkpoint;
 *   - bound: a write would take the topic past max_topic_bytes, the WAL
 *     past max_total_bytes, or the file system's free space below the floor
 *     (min_free_bytes, space.c), and the topic's overflow policy
 *     (overflow.c) makes room; with drop_oldest the oldest sealed segment
 *     goes first (for the total bound and the floor, the oldest by creation
 *     time across all topics), even if not replicated;
 *   - corruption: a reader found a bad record in it (quarantine).
 *
 * Counting: records above the checkpoint that leave the disk are added to
 * the topic's dropped counter. A record is known by offset: a segment holds
 * [base, next segment's base). The counter and the new floor are persisted
 * (atomic replace of meta) BEFORE the unlink, so a crash in between leaves
 * files below the floor that recovery removes without counting them again;
 * the count is never lost and never doubled.
 *
 * The bounds are exact for sealed data: with segment_bytes S, a batch is at
 * most S bytes, so after deleting every sealed segment a topic holds at most
 * its active segment (<= S) plus the batch: wal_open requires
 * max_topic_bytes >= 2 * S. If only active segments are left and the total
 * bound still refuses, the policy refuses the batch (drop_oldest: TB_EFULL)
 * rather than exceed it.
 *
 * A topic with an own bound (wal_topic_set_own_bound: the broker's session
 * journal) is outside the total: its bytes are not in total_bytes, its
 * bound is its own max_bytes, the free-space floor does not hold it, and
 * neither bound ever picks its segments. Its policy is refuse, so only its
 * checkpoint deletes them.
 *
 * This file is the mechanism (how a segment leaves and is counted) and the
 * check of the bounds; which segments leave at a bound, or whether the batch
 * is refused instead, is the policy's (overflow.c).
 */
#include "wal/wal_int.h"

#include <stdlib.h>

static uint64_t unacked(uint64_t from, uint64_t to, uint64_t ck)
{
    uint64_t lo = TB_MAX(from, ck + 1);
    return to > lo ? to - lo : 0;
}

/* The end of sealed segment i's records: not the next one's base when a
 * hole lies between them (a reservation skipped after a kill holds no
 * record, and none is dropped with the segment before it) */
static uint64_t seg_end(const wal_topic_t *t, size_t i)
{
    return t->segs[i].end ? TB_MIN(t->segs[i].end, t->segs[i + 1].base) : t->segs[i + 1].base;
}

/*
 * Deletes t's n oldest segments (n < nsegs: never the active one). bound:
 * for a disk bound (not the checkpoint). The drop decision (which offsets
 * are above the checkpoint) is taken under acct_mu, where
 * wal_checkpoint_floor moves the checkpoint, and the offsets it condemns
 * are published at once (drop_floor, dropped_open): an ack that comes in
 * while the meta file is being written already knows they were counted.
 * If that write fails the decision stands (nothing is unlinked; the retry
 * counts only offsets above drop_floor again for dropped_open).
 */
static int delete_oldest(wal_topic_t *t, size_t n, bool bound)
{
    wal_t *w = t->w;
    const wal_io_t *io = w->io;
    wal_meta_t m = t->meta;
    uint64_t dropped = 0;
    pthread_mutex_lock(&t->acct_mu);
    uint64_t ck = atomic_load(&t->ck_req);
    uint64_t aged = atomic_load(&t->dropped_age); /* with ck: they move together (wal_checkpoint_ex) */
    for (size_t i = 0; i < n; i++) {
        dropped += unacked(t->segs[i].base, seg_end(t, i), ck);
        uint64_t from = TB_MAX(TB_MAX(t->segs[i].base, t->open_next), t->drop_floor);
        if (t->open_next)
            t->dropped_open += unacked(from, seg_end(t, i), ck);
    }
    if (bound && dropped > 0)
        t->drop_floor = TB_MAX(t->drop_floor, t->segs[n].base);
    /* the same per slot, with the slot's checkpoint: each output counts what
     * it had not acknowledged (a parked one too, and an active one ahead of
     * the minimum counts nothing), persisted in the same write below */
    wal__slots_fill_locked(t, &m);
    for (size_t k = 0; k < t->nslots; k++) {
        wal_slot_t *s = &t->slots[k];
        uint64_t d = 0;
        for (size_t i = 0; i < n; i++) {
            d += unacked(t->segs[i].base, seg_end(t, i), s->ck);
            uint64_t from = TB_MAX(TB_MAX(t->segs[i].base, t->open_next), s->drop_floor);
            if (t->open_next)
                s->dropped_open += unacked(from, seg_end(t, i), s->ck);
        }
        if (d > 0)
            s->drop_floor = TB_MAX(s->drop_floor, t->segs[n].base);
        if (m.nslots > 0)
            m.slots[k].dropped += d; /* fill put the table in the live slots' order */
    }
    pthread_mutex_unlock(&t->acct_mu);
    m.dropped += dropped;
    m.floor = TB_MAX(m.floor, t->segs[n].base);
    m.checkpoint = TB_MAX(m.checkpoint, ck);
    m.dropped_age = TB_MAX(m.dropped_age, aged);
    int rc = wal__meta_write(t, &m, bound ? WAL_CAUSE_DROP : WAL_CAUSE_CHECKPOINT);
    if (rc < 0)
        return rc;
    /* counted: from now on no reader may return those records, not even one
     * that still has the segment open (it would be delivered and counted) */
    if (dropped > 0)
        atomic_store_explicit(&t->read_floor, t->segs[n].base, memory_order_release);
    /* out of the list first, then off the disk: a reader that finds a
     * segment gone (ENOENT) and looks again must not find it listed still
     * (it gives up after a few looks: a deletion of many segments on a
     * loaded machine outlasted them, seen by fuzz_wal_recovery) */
    wal_seg_t *gone = tb_malloc(n * sizeof *gone);
    pthread_mutex_lock(&t->mu);
    memcpy(gone, t->segs, n * sizeof *gone);
    memmove(&t->segs[0], &t->segs[n], (t->nsegs - n) * sizeof *t->segs);
    t->nsegs -= n;
    pthread_mutex_unlock(&t->mu);
    uint64_t freed = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = wal__seg_path(t, gone[i].base, NULL);
        int u = io->unlink(io->ctx, p);
        if (u < 0)
            tb_warn("wal: cannot delete segment (recovery will)", TB_S("topic", t->name), TB_S("segment", p),
                    TB_ERR(u));
        free(p);
        freed += gone[i].bytes;
    }
    free(gone);
    wal__topic_bytes_set(t, t->bytes - freed);
    wal__space_soon(w); /* counted as freed now; the next housekeeping reads what really is */
    uint64_t suppressed;
    if (dropped > 0 && tb_ratelimit(&t->drop_rl, &suppressed))
        tb_warn("wal: bound reached, dropping oldest messages not yet replicated", TB_S("topic", t->name),
                TB_U("dropped", dropped), TB_U("dropped_total", m.dropped), TB_U("suppressed", suppressed));
    return 0;
}

int wal__drop_oldest_segment(wal_topic_t *t)
{
    return delete_oldest(t, 1, true);
}

wal_topic_t *wal__oldest_sealed(wal_t *w)
{
    wal_topic_t *best = NULL;
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (t->nsegs < 2 || atomic_load(&t->own_bound))
            continue;
        if (!best || t->segs[0].created_ms < best->segs[0].created_ms)
            best = t;
    }
    return best;
}

static uint64_t own_bound(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->own_bound);
}

void wal__topic_bytes_set(wal_topic_t *t, uint64_t bytes)
{
    wal_t *w = t->w;
    if (!own_bound(t))
        w->total_bytes = w->total_bytes - t->bytes + bytes;
    /* every topic's bytes are on the file system: the free-space estimate follows them */
    if (bytes >= t->bytes)
        atomic_fetch_add(&w->all_bytes, bytes - t->bytes);
    else
        atomic_fetch_sub(&w->all_bytes, t->bytes - bytes);
    t->bytes = bytes;
}

uint64_t wal__topic_max(const wal_topic_t *t)
{
    uint64_t own = own_bound(t);
    return own ? own : t->w->o.max_topic_bytes;
}

bool wal__room(const wal_topic_t *t, uint64_t need)
{
    const wal_t *w = t->w;
    if (t->bytes + need > wal__topic_max(t))
        return false;
    if (own_bound(t))
        return true; /* outside the total bound and the free-space floor */
    return w->total_bytes + need <= w->o.max_total_bytes && wal__space_room(w, need);
}

const char *wal__full_bound(const wal_topic_t *t, uint64_t need, uint64_t *max, uint64_t *used)
{
    const wal_t *w = t->w;
    *max = wal__topic_max(t);
    *used = t->bytes;
    if (own_bound(t))
        return "own_bound";
    if (t->bytes + need > *max)
        return "max_topic_bytes";
    if (w->total_bytes + need > w->o.max_total_bytes) {
        *max = w->o.max_total_bytes;
        *used = w->total_bytes;
        return "max_total_bytes";
    }
    if (!wal__space_room(w, need)) {
        *max = atomic_load(&((wal_t *)w)->sp_floor); /* the floor, and the free bytes left */
        *used = wal__space_free(w);
        return "min_free_bytes";
    }
    return "max_topic_bytes"; /* room now (a checkpoint moved meanwhile): name the topic's own */
}

void wal__checkpoints_apply_all(wal_t *w)
{
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        if (own_bound(t) || t->fd < 0 || t->nsegs < 2)
            continue;
        uint64_t ck = atomic_load(&t->ck_req);
        /* only where a segment would go: a meta write that frees nothing is wear for nothing,
         * and at a bound this runs for every batch */
        if (ck > t->meta.checkpoint && t->segs[1].base <= ck + 1)
            wal__checkpoint_apply(t, true); /* best effort: a failure only leaves the segments */
    }
}

void wal__own_bound_apply(wal_topic_t *t, uint64_t max_bytes)
{
    wal_t *w = t->w;
    if (!own_bound(t))
        w->total_bytes -= t->bytes; /* wal_open counted it, as it counts every topic it recovers */
    atomic_store(&t->own_bound, max_bytes);
    atomic_store(&t->overflow, (int)WAL_OVERFLOW_REFUSE);
    tb_info("wal: topic has its own bound, outside the total; it refuses writes when full",
            TB_S("topic", t->name), TB_U("max_bytes", max_bytes), TB_U("bytes", t->bytes),
            TB_U("total_bytes", w->total_bytes));
}

int wal__make_room(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need)
{
    if (wal__room(t, need))
        return 0;
    return wal__overflow_make_room(w, t, p, need);
}

int wal__checkpoint_apply(wal_topic_t *t, bool force)
{
    uint64_t now = tb_mono_ms();
    if (!force && now < t->ck_persist_at_ms)
        return 0;
    atomic_store(&t->ck_pending, false);
    /* the checkpoint and the age count it passed, from one moment (wal_checkpoint_ex) */
    pthread_mutex_lock(&t->acct_mu);
    uint64_t ck = atomic_load(&t->ck_req);
    uint64_t aged = atomic_load(&t->dropped_age);
    pthread_mutex_unlock(&t->acct_mu);
    /* a slot (output) that moved over records on disk is worth a write even
     * while the minimum stays: after a restart it resends less */
    bool slots = wal__slots_dirty(t);
    if (ck <= t->meta.checkpoint && !slots)
        return 0;
    t->ck_persist_at_ms = now + t->w->o.checkpoint_flush_ms;
    size_t n = 0;
    while (n + 1 < t->nsegs && t->segs[n + 1].base <= ck + 1)
        n++;
    if (n == 0 && t->meta.checkpoint + 1 >= t->next && !slots)
        /* nothing on disk lies above the persisted checkpoint (the memory
         * tier acknowledged offsets past the log's end): the write would
         * tell recovery nothing, which after a kill moves the checkpoint
         * over offsets that have no record anyway. Not writing it is what
         * keeps the disk idle in memory mode (a meta write is 4 KiB of
         * write_bytes, every checkpoint_flush_ms) */
        return 0;
    int rc;
    if (n > 0) {
        rc = delete_oldest(t, n, false);
    } else {
        wal_meta_t m = t->meta;
        m.checkpoint = TB_MAX(m.checkpoint, ck); /* the minimum goes down when a slot opens below it */
        m.dropped_age = TB_MAX(m.dropped_age, aged);
        rc = wal__meta_write(t, &m, WAL_CAUSE_CHECKPOINT);
    }
    if (rc < 0) /* the disk is in trouble: try again in a second, not in a loop */
        t->ck_persist_at_ms = now + TB_MAX(t->w->o.checkpoint_flush_ms, 1000u);
    return rc;
}

int wal__quarantine_file(wal_topic_t *t, uint64_t base, uint64_t next_base, uint64_t first_bad, wal_meta_t *m)
{
    const wal_io_t *io = t->w->io;
    char *from = wal__seg_path(t, base, NULL);
    char *to = wal__seg_path(t, base, WAL_CORRUPT_SUFFIX);
    int rc = io->rename(io->ctx, from, to);
    if (rc == 0)
        rc = wal__fsync_dir(t->w, WAL_CAUSE_DROP, t->dir);
    pthread_mutex_lock(&t->acct_mu);
    uint64_t ck = atomic_load(&t->ck_req);
    uint64_t lost = unacked(TB_MAX(first_bad, base), next_base, ck);
    if (rc == 0 && t->open_next) /* at run time (not in the first recovery): this process's share */
        t->dropped_open += unacked(TB_MAX(TB_MAX(first_bad, base), t->open_next), next_base, ck);
    pthread_mutex_unlock(&t->acct_mu);
    if (rc == 0 && next_base > base) {
        /* its offsets are a drop: a reader that meets them as a gap between two segments says so */
        uint64_t lo = atomic_load(&t->q_lo), hi = atomic_load(&t->q_hi);
        atomic_store(&t->q_lo, hi == 0 ? base : TB_MIN(lo, base));
        atomic_store(&t->q_hi, TB_MAX(hi, next_base));
    }
    if (rc == 0) {
        m->quarantined++;
        m->dropped += lost;
        tb_error("wal: quarantined corrupt segment", TB_S("topic", t->name), TB_S("segment", to),
                 TB_U("first_bad_offset", first_bad), TB_U("dropped", lost));
    } else {
        tb_error("wal: cannot quarantine corrupt segment", TB_S("topic", t->name), TB_S("segment", from),
                 TB_ERR(rc));
    }
    free(from);
    free(to);
    return rc;
}

void wal__quarantine(wal_topic_t *t, uint64_t base, uint64_t bad_offset)
{
    size_t i = 0;
    while (i < t->nsegs && t->segs[i].base != base)
        i++;
    if (i + 1 >= t->nsegs)
        return; /* gone already, or the active segment: not ours to set aside */
    wal_meta_t m = t->meta;
    if (wal__quarantine_file(t, base, t->segs[i + 1].base, bad_offset, &m) < 0)
        return;
    uint64_t bytes = t->segs[i].bytes;
    wal__segs_remove(t, i);
    wal__topic_bytes_set(t, t->bytes - bytes);
    wal__meta_write(t, &m, WAL_CAUSE_DROP);
}
