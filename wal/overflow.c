/*
 * overflow.c: the overflow policies: what a topic does at a disk bound.
 * The two decisions run on the writer thread; the names, the setter and
 * the getter on any thread.
 *
 * retention.c checks the bounds and owns the mechanism (deleting a sealed
 * segment, counting its unacknowledged records, persisting the count before
 * the unlink). When a write would pass max_topic_bytes or max_total_bytes,
 * or take the file system's free space below the floor (min_free_bytes,
 * space.c), it asks the writing topic's policy, here, to (a) make room;
 * when the policy makes none, writer.c asks it (b) how to refuse the batch.
 * Both are a switch over wal_overflow_t, and the writer reads the topic's
 * policy once per batch, so a batch is handled by one policy even if it is
 * changed meanwhile. The floor is a bound like the total: a topic inside
 * the total is held to both, a topic with an own bound to neither.
 *
 * drop_oldest, the default:
 *   (a) delete the topic's oldest sealed segments until its bound has room;
 *       if only the active segment is left, no room. Then, for the total
 *       bound, delete the oldest sealed segment across all topics inside it
 *       (by creation time; never one of a topic with an own bound) until it
 *       has room; if every such topic holds only its active segment, no
 *       room. Then the same for the floor, after first applying the
 *       checkpoints that moved and are not persisted yet (acknowledged
 *       segments go before anything unacknowledged; at the total bound they
 *       go at the next checkpoint flush anyway). A topic with an own bound
 *       is outside the total and the floor: only the first step applies.
 *   (b) TB_EFULL, with a warning at most once a minute (the topic's drop
 *       rate limit) naming the bound; the topic stays OK.
 *
 * refuse, for a log that must lose nothing to a bound (the session journal):
 *   (a) delete nothing that is not acknowledged. If the topic's checkpoint
 *       moved and the writer has not applied it yet (it does so at most
 *       every checkpoint_flush_ms), apply it now: the segments wholly at or
 *       below it go, as they would a few seconds later anyway. Then, if the
 *       topic's bound (its own bound, if it has one) has no room, no room;
 *       for a topic inside the total, if the total bound or the floor has
 *       none, apply every topic's moved checkpoint the same way (other
 *       topics' acknowledged segments cost nothing to delete) and ask again.
 *   (b) TB_EFULL, with a warning at most once a minute (the same rate
 *       limit: refuse never drops) naming the bound that is full; the topic
 *       stays OK. Its space comes back only as checkpoints move (or, at the
 *       floor, as the file system's free space returns).
 *
 * drop_newest, a data topic's choice (mqtt.topic_mappings[].on_full):
 *   refuse's (a) and (b). The two are one policy under two names: refuse
 *   is what the journal is given, drop_newest what an operator chooses, and
 *   the warnings name which (the broker counts both as "full").
 *
 * block, a data topic's choice too:
 *   (a) refuse's. (b) no refusal: WAL_HOLD, with a warning at most once a
 *   minute naming the bound; the writer holds the batch, unwritten and
 *   without offsets, behind any the topic holds already, and tries them
 *   again, oldest first, each time it wakes (writer.c). The topic's
 *   publishers are not read meanwhile (the broker asks wal_topic_blocked).
 *
 * Every refusal of (b) is marked refused_at_bound in the completion (a held
 * batch has none until it is written).
 *
 * ADDING A POLICY: a member in wal_overflow_t (wal.h, before __COUNT, with
 * its paragraph under OVERFLOW), its name in names[] below, and one case in
 * each switch here. Nothing else in wal/ changes: the compiler (-Wswitch)
 * points at each switch that lacks the case, and the build fails if a name
 * is missing. A policy that refuses rather than deletes returns WAL_NO_ROOM
 * from (a) and its completion code from (b); one that waits returns
 * WAL_HOLD from (b), as block does.
 */
#include "wal/wal_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
    [WAL_OVERFLOW_DROP_OLDEST] = "drop_oldest",
    [WAL_OVERFLOW_REFUSE] = "refuse",
    [WAL_OVERFLOW_DROP_NEWEST] = "drop_newest",
    [WAL_OVERFLOW_BLOCK] = "block",
};
_Static_assert(TB_ARRAY_LEN(names) == WAL_OVERFLOW__COUNT, "every overflow policy has a name");

int wal_overflow_parse(const char *s, wal_overflow_t *out)
{
    for (int i = 0; i < WAL_OVERFLOW__COUNT; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (wal_overflow_t)i;
            return 0;
        }
    }
    return TB_ECONFIG;
}

const char *wal_overflow_name(wal_overflow_t p)
{
    return (unsigned)p < WAL_OVERFLOW__COUNT ? names[p] : "?";
}

int wal_topic_set_overflow(wal_topic_t *t, wal_overflow_t p)
{
    if ((unsigned)p >= WAL_OVERFLOW__COUNT)
        return TB_EINVALID;
    atomic_store(&t->overflow, (int)p);
    return 0;
}

wal_overflow_t wal_topic_overflow(const wal_topic_t *t)
{
    return (wal_overflow_t)atomic_load(&((wal_topic_t *)t)->overflow);
}

bool wal_topic_blocked(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->blocked);
}

void wal_topic_release_held(wal_topic_t *t)
{
    atomic_store(&t->release_held, true);
    wal__kick(t->w);
}

/* drop_oldest's (a): see the file header. */
static int drop_oldest(wal_t *w, wal_topic_t *t, uint64_t need)
{
    int rc;
    uint64_t max = wal__topic_max(t);
    while (t->bytes + need > max && t->nsegs > 1)
        if ((rc = wal__drop_oldest_segment(t)) < 0)
            return rc;
    if (t->bytes + need > max)
        return WAL_NO_ROOM;
    if (atomic_load(&t->own_bound))
        return 0; /* outside the total bound */
    while (w->total_bytes + need > w->o.max_total_bytes) {
        wal_topic_t *v = wal__oldest_sealed(w);
        if (!v)
            return WAL_NO_ROOM;
        if ((rc = wal__drop_oldest_segment(v)) < 0)
            return rc;
    }
    if (wal__space_room(w, need))
        return 0;
    wal__checkpoints_apply_all(w); /* acknowledged data first */
    while (!wal__space_room(w, need)) {
        wal_topic_t *v = wal__oldest_sealed(w);
        if (!v)
            return WAL_NO_ROOM;
        if ((rc = wal__drop_oldest_segment(v)) < 0)
            return rc;
    }
    return 0;
}

/* refuse's (a): see the file header. */
static int refuse_room(wal_t *w, wal_topic_t *t, uint64_t need)
{
    int rc;
    if (atomic_load(&t->ck_req) > t->meta.checkpoint && (rc = wal__checkpoint_apply(t, true)) < 0)
        return rc;
    if (wal__room(t, need))
        return 0;
    if (atomic_load(&t->own_bound) || t->bytes + need > wal__topic_max(t))
        return WAL_NO_ROOM; /* its own bound: only its own checkpoint frees it */
    wal__checkpoints_apply_all(w);
    return wal__room(t, need) ? 0 : WAL_NO_ROOM;
}

/* refuse's (b): the warning names the bound that refused (wal__full_bound:
 * for the floor, max_bytes is the floor and bytes the free space left). */
static int refuse_batch(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need)
{
    (void)w;
    uint64_t max, used, suppressed;
    const char *bound = wal__full_bound(t, need, &max, &used);
    if (!tb_ratelimit(&t->drop_rl, &suppressed))
        return TB_EFULL;
    if (strcmp(bound, "min_free_bytes") == 0)
        tb_warn("wal: free space below wal.min_free_bytes; refusing batch, deleting nothing "
                "(writes are taken again when space returns)",
                TB_S("topic", t->name), TB_S("policy", names[p]), TB_S("bound", bound), TB_U("min_free_bytes", max),
                TB_U("free_bytes", used), TB_U("suppressed", suppressed));
    else
        tb_warn("wal: bound full of unacknowledged messages; refusing batch, deleting nothing "
                "(space returns as the checkpoint moves)",
                TB_S("topic", t->name), TB_S("policy", names[p]), TB_S("bound", bound), TB_U("max_bytes", max),
                TB_U("bytes", used), TB_U("checkpoint", t->meta.checkpoint), TB_U("suppressed", suppressed));
    return TB_EFULL;
}

/* block's (b): the batch waits (see the file header). */
static int hold_batch(wal_topic_t *t, uint64_t need)
{
    uint64_t max, used, suppressed;
    const char *bound = wal__full_bound(t, need, &max, &used);
    if (tb_ratelimit(&t->drop_rl, &suppressed))
        tb_warn("wal: bound full of unacknowledged messages; holding batches and not reading the topic's "
                "publishers until there is room (on_full: block)",
                TB_S("topic", t->name), TB_S("bound", bound), TB_U("max_bytes", max), TB_U("bytes", used),
                TB_U("checkpoint", t->meta.checkpoint), TB_U("suppressed", suppressed));
    return WAL_HOLD;
}

/* A value no entry point lets in (wal_open and the setter check the range). */
static _Noreturn void bad_policy(const wal_topic_t *t, wal_overflow_t p)
{
    tb_error("wal: unknown overflow policy", TB_S("topic", t->name), TB_I("policy", (int)p));
    abort();
}

int wal__overflow_make_room(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need)
{
    switch (p) {
    case WAL_OVERFLOW_DROP_OLDEST:
        return drop_oldest(w, t, need);
    case WAL_OVERFLOW_REFUSE:
    case WAL_OVERFLOW_DROP_NEWEST:
    case WAL_OVERFLOW_BLOCK:
        return refuse_room(w, t, need);
    case WAL_OVERFLOW__COUNT:
        break;
    }
    bad_policy(t, p);
}

int wal__overflow_refuse(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need)
{
    uint64_t suppressed, max, used;
    switch (p) {
    case WAL_OVERFLOW_DROP_OLDEST:
        if (tb_ratelimit(&t->drop_rl, &suppressed)) {
            const char *bound = wal__full_bound(t, need, &max, &used);
            tb_warn(strcmp(bound, "min_free_bytes") == 0
                        ? "wal: free space below wal.min_free_bytes with only active segments left; refusing batch"
                        : "wal: bound reached with only active segments left; refusing batch",
                    TB_S("topic", t->name), TB_S("bound", bound), TB_U("max_bytes", max), TB_U("bytes", used),
                    TB_U("max_total_bytes", w->o.max_total_bytes), TB_U("suppressed", suppressed));
        }
        return TB_EFULL;
    case WAL_OVERFLOW_REFUSE:
    case WAL_OVERFLOW_DROP_NEWEST:
        return refuse_batch(w, t, p, need);
    case WAL_OVERFLOW_BLOCK:
        return hold_batch(t, need);
    case WAL_OVERFLOW__COUNT:
        break;
    }
    bad_policy(t, p);
}
