/*
 * reserve.c: the offset reservation (wal.h, OFFSET RESERVATION; the field
 * reserved of meta version 2, wal_format.h).
 *
 * DESIGN. Any thread declares the end of what it is about to hand out
 * beyond the log (wal_topic_reserve: an atomic max on res_used, then one
 * load of t->reserved). The writer thread raises the durable reservation,
 * meta.reserved, by one atomic replace of the meta file when the declared
 * end comes within half a span of it (or passes it), and publishes the new
 * value in t->reserved only after the replace returned (wal__meta_write
 * does, on success only). A caller that hands out only offsets below
 * wal_topic_reserved() therefore hands out only offsets that recovery will
 * never give to another message, whatever stops the process and when.
 *
 * One write per span: the reservation is raised to max(reserved, declared
 * end, log end) + span, so once it is ahead it grows by a whole span each
 * time the declared end reaches its last half, and stays between 1/2 and
 * 3/2 span ahead. A failed write (a full or failing disk) is retried every
 * retry_ms by the writer, or at once by wal_topic_reserve_wait; until then
 * callers get WAL_RESERVE_PENDING and must not hand out past the old value.
 *
 * CLEAN CLOSE. wal_close lowers the reservation to what is still needed:
 * min(declared end, reserved), and 0 when that is at or below the log's
 * end (every offset handed out is then in the log, or was before it). It
 * does so only when the topic is OK and synced, so that the log's end is
 * known to be durable; otherwise the reservation stays and the next open
 * jumps past it (harmless). A caller should not reserve once wal_close has
 * begun; if one does anyway, the order below keeps it safe: the close first
 * publishes 0 (no further hand-out can pass), then reads res_used, persists
 * and publishes the lower value. A caller stores res_used before it loads
 * t->reserved; with all four sequentially consistent, either the close sees
 * the caller's end or the caller sees 0.
 */
#include "wal/wal_int.h"

/* Whether a reservation r must be raised for a declared end. */
static bool due(uint64_t end, uint64_t r, uint64_t span)
{
    return end > 0 && (r < end || r - end <= span / 2);
}

/* Declares end (before looking at the reservation: see CLEAN CLOSE) and
 * returns the reservation as published. */
static uint64_t declare(wal_topic_t *t, uint64_t end)
{
    wal__atomic_max(&t->res_used, end);
    return atomic_load(&t->reserved);
}

int wal_topic_reserve(wal_topic_t *t, uint64_t end)
{
    if (end > WAL_OFFSET_MAX)
        return TB_EINVALID;
    uint64_t r = declare(t, end);
    if (due(end, r, t->w->o.reserve_span) && !atomic_exchange(&t->res_pending, true))
        wal__kick(t->w);
    return end <= r ? 0 : WAL_RESERVE_PENDING;
}

int wal_topic_reserve_wait(wal_topic_t *t, uint64_t end)
{
    if (end > WAL_OFFSET_MAX)
        return TB_EINVALID;
    uint64_t r = declare(t, end);
    if (end <= r && !due(end, r, t->w->o.reserve_span))
        return 0; /* covered, and nothing to raise: no trip to the writer */
    return wal__request_reserve(t, end);
}

uint64_t wal_topic_reserved(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->reserved);
}

int wal__reserve_apply(wal_topic_t *t, bool force)
{
    wal_t *w = t->w;
    atomic_store(&t->res_pending, false);
    uint64_t used = atomic_load(&t->res_used);
    uint64_t r = t->meta.reserved;
    if (!due(used, r, w->o.reserve_span)) {
        t->res_retry_at_ms = 0;
        return 0;
    }
    uint64_t now = tb_mono_ms();
    if (!force && t->res_retry_at_ms && now < t->res_retry_at_ms)
        return 0;
    wal_meta_t m = t->meta;
    m.reserved = TB_MIN(TB_MAX(TB_MAX(r, used), t->next) + w->o.reserve_span, WAL_OFFSET_MAX);
    int rc = wal__meta_write(t, &m, WAL_CAUSE_RESERVE); /* publishes t->reserved once the replace returned */
    if (rc < 0) {
        t->res_retry_at_ms = now + TB_MAX(w->o.retry_ms, 10u);
        return rc;
    }
    t->res_retry_at_ms = 0;
    tb_debug("wal: offsets reserved", TB_S("topic", t->name), TB_U("reserved", m.reserved), TB_U("declared", used),
             TB_U("log_next_offset", t->next));
    return 0;
}

int wal__reserve_release(wal_topic_t *t)
{
    if (t->meta.reserved == 0 || atomic_load(&t->state) != WAL_TOPIC_OK || t->fd < 0 || t->synced_next != t->next)
        return 0;
    atomic_store(&t->reserved, 0); /* first: nothing more may be handed out (see CLEAN CLOSE) */
    uint64_t keep = TB_MIN(atomic_load(&t->res_used), t->meta.reserved);
    if (keep <= t->next)
        keep = 0;
    int rc = 0;
    if (keep != t->meta.reserved) {
        wal_meta_t m = t->meta;
        m.reserved = keep;
        rc = wal__meta_write(t, &m, WAL_CAUSE_RESERVE);
    }
    atomic_store(&t->reserved, t->meta.reserved); /* what is on disk, whether or not the write worked */
    return rc;
}
