/*
 * rep_lane.c: one (output, topic) pair, whatever the output's kind: its WAL
 * reader, its cursor (the output's checkpoint slot in the topic, wal.h
 * CURSORS), the window of units between built and acknowledged, the exact
 * accounting of what an acknowledgement covers, and the stats an operator
 * reads. Split out of rep_topic.c (issue 17, O4); Danube's topic embeds a
 * lane and keeps its protocol (rep_topic.c).
 *
 * Acks: a unit's offsets are contiguous, first..last (rep__fill). When the
 * head of the window is acknowledged, the cursor moves first
 * (wal_cursor_ack_ex) and says below which offset a disk bound deleted
 * records meanwhile (*drop_floor, the slot's): those were counted as dropped
 * for this output when they went, so they are not counted as replicated
 * (or aged) too. Every offset is thus either acknowledged while stored or
 * dropped, never both, per output. The topic's checkpoint, which retention
 * and the memory tier go by, is the minimum over the cursors of the outputs
 * that carry it (the WAL computes it).
 */
#include "replicator/rep_int.h"

#include <stdlib.h>
#include <string.h>

int rep__lane_init(rep__lane_t *l, rep_output_t *o, size_t topic, const char *name, wal_topic_t *wal,
                   uint64_t start_offset, uint32_t cap, wal_start_t start)
{
    l->o = o;
    l->topic = topic;
    l->name = tb_strdup(name);
    l->wal = wal;
    l->st.start_offset = start_offset;
    l->kick.kind = REP__CMD_KICK;
    atomic_init(&l->queued, false);
    /* its topic's priority (the engine's topics; a standalone danube sets it itself) */
    l->priority = o->e && topic < o->e->ntopics ? o->e->topics[topic].priority : 0;
    rep__pace_lane_init(&l->pace, l->priority);
    atomic_init(&l->paused, false);
    atomic_init(&l->released, false);
    wal_cursor_opts_t co = { .start = start, .protects = o->ops->kind == REP_KIND_DANUBE };
    int rc = wal_cursor_open(wal, o->wal_id, &co, &l->cur);
    if (rc < 0)
        return rc;
    rep__window_init(&l->win, cap, wal_cursor_checkpoint(l->cur));
    l->st.acked_offset = l->win.acked;
    l->progress_ms = tb_mono_ms();
    l->pub = l->st;
    l->pub_progress_ms = l->progress_ms;
    if (topic < o->nlanes)
        o->lanes[topic] = l;
    return 0;
}

void rep__lane_fini(rep__lane_t *l)
{
    for (uint32_t i = 0; l->win.v && i < l->win.n; i++)
        l->o->ops->release(l->o, rep__window_at(&l->win, i));
    rep__window_free(&l->win);
    rep__src_free(&l->src);
    wal_cursor_close(l->cur);
    l->cur = NULL;
    free(l->name);
    l->name = NULL;
}

void rep__lane_release(rep__lane_t *l)
{
    atomic_store(&l->released, true);
    uint32_t cap = l->win.cap;
    uint64_t acked = l->win.acked;
    for (uint32_t i = 0; i < l->win.n; i++) /* none: released only once drained */
        l->o->ops->release(l->o, rep__window_at(&l->win, i));
    rep__window_free(&l->win);
    rep__window_init(&l->win, cap, acked);
    rep__src_free(&l->src);
    memset(&l->src, 0, sizeof l->src);
    rep__pace_leave(&l->o->pace, &l->pace, tb_mono_ms());
    pthread_mutex_lock(&l->o->mu);
    wal_cursor_t *cur = l->cur;
    l->cur = NULL; /* rep__lane_stats reads it under the lock */
    pthread_mutex_unlock(&l->o->mu);
    wal_cursor_close(cur);
    l->st.state = REP_TOPIC_STOPPED;
    rep__lane_publish(l);
}

void rep__lane_carry(rep__lane_t *l, const rep__lane_t *old)
{
    const rep_topic_stats_t *o = &old->st; /* its thread is done with it: released */
    rep_topic_stats_t *s = &l->st;
    s->batches_sent += o->batches_sent;
    s->batches_resent += o->batches_resent;
    s->batches_acked += o->batches_acked;
    s->messages_acked += o->messages_acked;
    s->messages_acked_new += o->messages_acked_new;
    s->messages_acked_dropped += o->messages_acked_dropped;
    s->messages_dropped_age += o->messages_dropped_age;
    s->messages_dropped_age_new += o->messages_dropped_age_new;
    s->messages_replayed += o->messages_replayed;
    s->gaps += o->gaps;
    s->holes += o->holes;
    s->attributes_skipped += o->attributes_skipped;
    for (int k = 0; k < REP_RETRY__COUNT; k++)
        s->retries[k] += o->retries[k];
    s->stream_resets += o->stream_resets;
    s->messages_dead_lettered += o->messages_dead_lettered;
    s->messages_dead_lettered_new += o->messages_dead_lettered_new;
    s->dead_letter_batches += o->dead_letter_batches;
    s->permanent_failures += o->permanent_failures;
    s->last_ack_ms = TB_MAX(s->last_ack_ms, o->last_ack_ms);
    s->start_offset = TB_MIN(s->start_offset, o->start_offset); /* received by this process from there on */
    l->pub = l->st;
}

bool rep__lane_ensure_reader(rep__lane_t *l)
{
    if (l->src.rd)
        return true;
    if (atomic_load(&l->released))
        return false; /* its log is being retired: never reopened */
    int rc = wal_reader_open(l->wal, l->win.acked + 1, &l->src.rd);
    if (rc < 0) {
        tb_error("replicator: cannot open a log reader; trying again in 1 s", REP__LOG_LANE(l), TB_ERR(rc));
        return false;
    }
    return true;
}

void rep__lane_note_gaps(rep__lane_t *l, uint64_t gaps0, uint64_t holes0)
{
    l->st.holes += l->src.holes - holes0; /* no loss: not warned about */
    if (l->src.gaps != gaps0) {
        l->st.gaps += l->src.gaps - gaps0;
        tb_warn("replicator: records were deleted from the log before being replicated (see dropped_total)",
                REP__LOG_LANE(l), TB_U("from", l->src.gap_from), TB_U("to", l->src.gap_to));
    }
}

int rep__lane_next(rep__lane_t *l, wal_record_t *rec, uint64_t now_wall)
{
    (void)now_wall;
    if (rep__lane_paused(l) || atomic_load(&l->released))
        return WAL_END; /* rep_pause.c: nothing is read while paused; the resume's kick reads on */
    if (!rep__lane_ensure_reader(l))
        return TB_ECLOSED;
    uint64_t gaps = l->src.gaps, holes = l->src.holes;
    const wal_record_t *r;
    int rc = rep__src_peek(&l->src, &r); /* gaps skipped and counted; the record is held */
    rep__lane_note_gaps(l, gaps, holes);
    if (rc != 0)
        return rc;
    *rec = *r; /* its bytes stay in the held copy until the next call */
    l->src.has_held = false;
    return 0;
}

void rep__lane_acked(rep__lane_t *l)
{
    uint64_t before = l->win.acked, upto = before, aged = 0;
    for (uint32_t i = 0; i < l->win.n && rep__window_at(&l->win, i)->state == REP__B_ACKED; i++) {
        upto = rep__window_at(&l->win, i)->last;
        aged += rep__window_at(&l->win, i)->aged;
    }
    /* The cursor moves first, and tells below which offset the disk bound
     * deleted records meanwhile (the file header) */
    uint64_t drop_floor = 0;
    if (upto > before) {
        int rc = wal_cursor_ack_ex(l->cur, upto, aged, &drop_floor);
        if (rc < 0)
            tb_error("replicator: the log refused a checkpoint", REP__LOG_LANE(l), TB_U("offset", upto), TB_ERR(rc));
    }
    bool acked = false;
    rep__batch_t b;
    while (rep__window_pop(&l->win, &b)) {
        /* a unit is contiguous (rep__fill): its new offsets are [lo, b.last] */
        uint64_t lo = TB_MAX(b.first, l->st.start_offset);
        uint64_t gone = drop_floor > lo && b.last >= lo ? TB_MIN(drop_floor, b.last + 1) - lo : 0;
        if (b.count == 0) { /* virtual: nothing was sent, nothing to release */
            l->st.messages_dropped_age += b.aged;
            l->st.messages_dropped_age_new += b.aged_new - TB_MIN(gone, (uint64_t)b.aged_new);
            continue;
        }
        if (b.dead) { /* durable in the dead-letter log: passed, not replicated */
            gone = TB_MIN(gone, (uint64_t)b.count_new);
            l->st.dead_letter_batches++;
            l->st.messages_dead_lettered += b.count;
            l->st.messages_dead_lettered_new += b.count_new - gone;
            l->st.messages_acked_dropped += gone;
            l->o->ops->release(l->o, &b);
            continue;
        }
        acked = true;
        l->st.batches_acked++;
        l->st.messages_acked += b.count;
        gone = TB_MIN(gone, (uint64_t)b.count_new);
        l->st.messages_acked_new += b.count_new - gone;
        l->st.messages_acked_dropped += gone;
        l->o->ops->release(l->o, &b);
    }
    if (l->win.acked > before) {
        if (acked)
            l->st.last_ack_ms = tb_wall_ms();
        l->progress_ms = tb_mono_ms();
        rep__lane_publish(l); /* the counts and the checkpoint together, before anything slower */
    }
}

void rep__lane_restart(rep__lane_t *l)
{
    uint32_t cap = l->win.cap;
    uint64_t acked = l->win.acked;
    for (uint32_t i = 0; i < l->win.n; i++)
        l->o->ops->release(l->o, rep__window_at(&l->win, i));
    rep__window_free(&l->win);
    rep__window_init(&l->win, cap, acked);
    rep__src_free(&l->src);
    memset(&l->src, 0, sizeof l->src);
    (void)rep__lane_ensure_reader(l);
    rep__lane_publish(l);
}

void rep__lane_publish(rep__lane_t *l)
{
    l->st.batches_in_flight = l->win.n;
    l->st.throttled_ms = rep__pace_throttled_ms(&l->pace, tb_mono_ms());
    l->st.acked_offset = l->win.acked;
    /* lag_bytes: records read and not acked are counted here (they may
     * have left the disk since); the rest is the log past the reader */
    const rep__open_t *op = l->open;
    uint64_t unacked_bytes = (op ? op->raw_bytes : 0) + (l->src.has_held ? l->src.held.raw_len : 0);
    for (uint32_t i = 0; i < l->win.n; i++)
        unacked_bytes += rep__window_at(&l->win, i)->raw_bytes;
    wal_pos_t pos = { 0 };
    if (l->src.rd)
        wal_reader_pos(l->src.rd, &pos);
    rep__batch_t *old = l->win.n ? rep__window_at(&l->win, 0) : NULL;
    if (op)
        l->st.attributes_skipped = op->skipped_attrs;
    l->st.oldest_unacked_ms = old                  ? old->first_publish_ms
                              : op && op->count     ? op->first_publish_ms
                              : l->src.has_held     ? l->src.held.publish_time_ms
                                                    : 0;
    pthread_mutex_lock(&l->o->mu);
    l->pub = l->st;
    l->pub_progress_ms = l->progress_ms;
    l->pub_unacked_bytes = unacked_bytes;
    l->pub_pos = pos;
    pthread_mutex_unlock(&l->o->mu);
}

void rep__lane_stats(rep__lane_t *l, rep_topic_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!l)
        return;
    pthread_mutex_lock(&l->o->mu);
    *out = l->pub;
    uint64_t progress = l->pub_progress_ms;
    uint64_t unacked_bytes = l->pub_unacked_bytes;
    wal_pos_t pos = l->pub_pos;
    pthread_mutex_unlock(&l->o->mu);
    out->readable_end = wal_topic_readable_end(l->wal);
    pthread_mutex_lock(&l->o->mu); /* rep__lane_release closes it */
    if (l->cur) {
        wal_cursor_stats_t cs;
        wal_cursor_stats(l->cur, &cs);
        out->slot_dropped = cs.dropped_since_open;
        out->slot_dropped_total = cs.dropped_total;
    }
    pthread_mutex_unlock(&l->o->mu);
    /* the records stored above the checkpoint, not the span of offsets:
     * after a kill in memory_first it holds a reservation skip (wal.h) */
    out->lag_messages = wal_topic_stored_between(l->wal, out->acked_offset, out->readable_end);
    /* bytes: what was read and waits for its ack, plus the log past the reader (live) */
    out->lag_bytes = pos.offset ? unacked_bytes + wal_topic_bytes_after(l->wal, &pos) : 0;
    uint64_t now = tb_mono_ms();
    out->no_progress_ms = out->lag_messages > 0 && now > progress ? now - progress : 0;
    out->paused = rep__lane_paused(l);
    out->stalled = out->lag_messages > 0 && out->state != REP_TOPIC_STOPPED && !out->paused &&
                   out->no_progress_ms >= l->o->stall_after_ms;
}
