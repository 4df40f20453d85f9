/*
 * rep_mosq_lanes.c: lanes over one rep_mosq connection, the part the mqtt
 * kind (rep_mqtt.c) and the sparkplug kind (rep_sparkplug.c) share
 * (docs/design/OUTPUTS.md 2.8): one lane (rep_lane.c: reader, cursor,
 * window, stats) per topic the output carries, the choice of the lane to
 * send from, the pacer, acks, a lost session, and adding a lane at run
 * time (a reload). Each kind keeps what is its own: what a record becomes
 * (rep__mlanes_ops_t.build: an MQTT PUBLISH from rep_mqtt_msg.c's template,
 * or a Sparkplug record for rep_spb.c's session), its connection's hooks,
 * its stop.
 *
 * Everything here runs on the output's thread (the one running
 * rep__mosq_run), except rep__mlanes_add (the loop thread, at a reload)
 * and rep__mlanes_free (after the join).
 *
 *   next            the lane: round robin over the lanes that may have a
 *                   record, are not parked and have room in their window;
 *                   its reader gives the record, the kind builds it; with
 *                   max_bytes_per_s / max_messages_per_s set the output's
 *                   pacer is asked for it (rep_pace.c): refused, the record
 *                   goes back to the lane's reader (held, read again
 *                   unchanged) and the lane is parked until rep__pace_next
 *                   grants it (rep__mlanes_turn). Granted: one unit of the
 *                   lane's window (first == last == the record's offset,
 *                   the token).
 *   acked           the units up to the token are ACKED; the cursor moves
 *                   at the end of the turn (rep__mlanes_turn): only on the
 *                   remote's confirmation, never on send.
 *   session_lost    every lane with units in flight restarts at its last
 *                   acked offset + 1, leaves the pacer (its unit is read
 *                   again), and what it hands out again up to the highest
 *                   offset sent before is a resend (resend_upto).
 *
 * Dead letters (OUTPUTS.md 4.7): a record the kind cannot carry (build says
 * REP__ML_DEAD, or the sparkplug session finds a type mismatch in a unit it
 * read) keeps its unit in the window, DEAD, while the loop writes a copy to
 * the dead-letter log (REP_EV_DEAD_LETTER, as Danube's poison batches); its
 * answer (rep__mlanes_dl_answer) makes the unit ACKED, so the checkpoint
 * never passes a record that is neither at the remote nor durable there. A
 * kill in between replays it: a duplicate in the dead-letter log at worst.
 *
 * Memory-first topics (wal.h MEMORY TIER, OUTPUTS.md 4.9): while the
 * connection is not up, a topic held in memory is spilled to the log
 * (WAL_SPILL_OUTPUT), as the Danube lanes do when their stream fails.
 */
#include "replicator/rep_int.h"
#include "replicator/rep_mosq_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_RETRY_MS 1000

void rep__mlanes_init(rep__mlanes_t *s, rep_output_t *o, const rep__mlanes_ops_t *ops, void *kind, uint32_t win_cap,
                      uint32_t recheck_ms)
{
    *s = (rep__mlanes_t){ .o = o, .ops = ops, .kind = kind, .win_cap = win_cap, .recheck_ms = recheck_ms,
                          .seen = REP_MOSQ_IDLE };
    s->v = tb_calloc(o->nlanes + 1, sizeof *s->v);
    s->all = tb_calloc(o->nlanes + 1, sizeof *s->all);
}

static rep_topic_state_t lane_state(rep_mosq_state_t st)
{
    switch (st) {
    case REP_MOSQ_UP: return REP_TOPIC_STREAMING;
    case REP_MOSQ_BACKOFF:
    case REP_MOSQ_REFUSED: return REP_TOPIC_BACKOFF;
    case REP_MOSQ_STOPPED: return REP_TOPIC_STOPPED;
    default: return REP_TOPIC_CONNECTING;
    }
}

/* A lane of topic (the engine's index): its cursor and the kind's part; not yet in s->v. */
static int lane_new(rep__mlanes_t *s, size_t topic, const rep_topic_spec_t *spec, bool added, rep__mlane_t **out)
{
    rep_output_t *o = s->o;
    rep__mlane_t *ml = tb_calloc(1, s->ops->lane_size);
    wal_topic_stats_t ws;
    wal_topic_stats(spec->wal, &ws);
    uint64_t start = ws.open_offset ? ws.open_offset : ws.next_offset;
    /* SIZE_MAX: o->lanes[topic] is written by the caller once the lane is complete */
    int rc = rep__lane_init(&ml->lane, o, SIZE_MAX, spec->name, spec->wal, start, s->win_cap, WAL_START_LATEST);
    if (rc < 0) {
        free(ml);
        return rc;
    }
    ml->lane.topic = topic;
    ml->lane.priority = spec->priority;
    rep__pace_lane_init(&ml->lane.pace, spec->priority);
    ml->enc.max_age_ms = spec->max_age_ms;
    ml->ready = true;
    /* the resend window (OUTPUTS.md 4.8): what was readable before this lane began and is past
     * the checkpoint may already be at the remote */
    uint64_t end = wal_topic_readable_end(spec->wal);
    ml->resend_upto = end ? end - 1 : 0;
    ml->lane.st.state = REP_TOPIC_CONNECTING;
    rc = s->ops->setup ? s->ops->setup(s->kind, ml, spec, added) : 0;
    if (rc < 0) {
        rep__lane_fini(&ml->lane);
        free(ml);
        return rc;
    }
    ml->lane.pub = ml->lane.st;
    ml->lane.pub_progress_ms = ml->lane.progress_ms;
    s->all[s->nall++] = ml;
    *out = ml;
    return 0;
}

/* Its thread (or before it starts): the lane takes part in next() from now on. */
static void lane_join(rep__mlanes_t *s, rep__mlane_t *ml)
{
    ml->idx = s->n;
    s->v[s->n++] = ml;
}

int rep__mlanes_setup(rep__mlanes_t *s, char *err, size_t errlen)
{
    rep_output_t *o = s->o;
    rep_engine_t *e = o->e;
    for (size_t i = 0; i < e->ntopics; i++) {
        if (!rep__output_takes(o, i))
            continue;
        rep__mlane_t *ml;
        int rc = lane_new(s, i, &e->topics[i], false, &ml);
        if (rc < 0) {
            snprintf(err, errlen, "outputs[%s]: topic %s: cannot open its log cursor: %s", o->name,
                     e->topics[i].name, tb_strerror(rc));
            return rc;
        }
        o->lanes[i] = &ml->lane; /* the thread has not started: no reader yet */
        lane_join(s, ml);
        rep__lane_publish(&ml->lane);
    }
    return 0;
}

int rep__mlanes_add(rep__mlanes_t *s, size_t topic, const rep_topic_spec_t *spec)
{
    rep_output_t *o = s->o;
    rep__lane_t *old = topic < o->nlanes ? o->lanes[topic] : NULL;
    /* a lane already there is refused, unless released: the topic given again after its
     * retirement (rep_engine_readd_topic); the new lane carries the old one's counters, and the
     * old one stays in s->v, released: it has no reader and is never picked */
    if (topic >= o->nlanes || (old && !atomic_load(&old->released)))
        return TB_EINVALID;
    rep__mlane_t *ml;
    int rc = lane_new(s, topic, spec, true, &ml);
    if (rc < 0)
        return rc;
    if (old)
        rep__lane_carry(&ml->lane, old);
    /* complete before it is seen: rep__output_kick and the stats read o->lanes from other threads */
    __atomic_store_n(&o->lanes[topic], &ml->lane, __ATOMIC_RELEASE);
    rep__topic_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
    cmd->cmd.kind = REP__CMD_TOPIC;
    cmd->add = true;
    cmd->lane = &ml->lane;
    tb_mbox_push(&o->cmds, &cmd->cmd.node);
    return 0;
}

int rep__mlanes_update(rep__mlanes_t *s, size_t topic, const rep_topic_spec_t *spec)
{
    rep_output_t *o = s->o;
    rep__lane_t *l = topic < o->nlanes ? __atomic_load_n(&o->lanes[topic], __ATOMIC_ACQUIRE) : NULL;
    if (!l)
        return TB_EINVALID;
    rep__topic_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
    cmd->cmd.kind = REP__CMD_TOPIC;
    cmd->lane = l;
    cmd->max_age_ms = spec->max_age_ms; /* the schema subject: neither kind sends one */
    tb_mbox_push(&o->cmds, &cmd->cmd.node);
    return 0;
}

void rep__mlanes_topic_cmd(rep__mlanes_t *s, rep__topic_cmd_t *cmd)
{
    rep__mlane_t *ml = (rep__mlane_t *)cmd->lane; /* the lane is the first member */
    if (cmd->add) {
        lane_join(s, ml);
        ml->lane.st.state = lane_state(s->seen); /* the turn sets it only when the connection's changes */
        tb_info("output: topic added at run time", TB_S("output", s->o->name), REP__LOG_LANE(&ml->lane),
                TB_U("priority", ml->lane.priority));
        ml->dirty = true;
    } else {
        ml->enc.max_age_ms = cmd->max_age_ms;
        tb_info("output: topic updated at run time", TB_S("output", s->o->name), REP__LOG_LANE(&ml->lane),
                TB_U("max_age_ms", ml->enc.max_age_ms));
    }
    free(cmd->subject);
    free(cmd);
}

void rep__mlanes_free(rep__mlanes_t *s)
{
    for (uint32_t i = 0; i < s->nall; i++) {
        for (uint32_t k = 0; k < s->all[i]->ndl; k++)
            free(s->all[i]->dl[k].error);
        free(s->all[i]->dl);
        if (s->ops->fini)
            s->ops->fini(s->kind, s->all[i]);
        rep__lane_fini(&s->all[i]->lane);
        free(s->all[i]);
    }
    free(s->all);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- units ------------------------------------------------------------------------------ */

/* The next lane that may have a record, is not parked and has room in its window, round
 * robin; NULL: none. */
static rep__mlane_t *pick_lane(rep__mlanes_t *s)
{
    for (uint32_t k = 0; k < s->n; k++) {
        rep__mlane_t *ml = s->v[(s->rr + k) % s->n];
        if (ml->ready && !ml->parked && ml->lane.win.n < ml->lane.win.cap) {
            s->rr = (s->rr + k + 1) % s->n;
            return ml;
        }
    }
    return NULL;
}

void rep__mlanes_skip(rep__mlane_t *ml, const wal_record_t *rec)
{
    rep__lane_t *l = &ml->lane;
    rep__batch_t *b = rep__window_push(&l->win);
    b->first = b->last = rec->offset;
    b->aged = 1;
    b->aged_new = rec->offset >= l->st.start_offset;
    b->state = REP__B_ACKED;
    rep__lane_acked(l);
}

/* ---- dead letters ------------------------------------------------------------------------ */

#define DL_RETRY_MS 1000      /* the first delay after a refused dead-letter write */
#define DL_RETRY_MAX_MS 30000 /* doubled at each refusal up to this (a full disk is not asked every second) */

/* The unit of offset in ml's window, or NULL (a lost session emptied it meanwhile). */
static rep__batch_t *unit_at(rep__lane_t *l, uint64_t offset)
{
    for (uint32_t i = 0; i < l->win.n; i++) {
        rep__batch_t *b = rep__window_at(&l->win, i);
        if (b->first == offset)
            return b;
    }
    return NULL;
}

/* The record of d read again from the log (the lane's own reader is elsewhere by now) and handed
 * to the loop. A record a disk bound deleted meanwhile goes as none: the loop answers at once. */
static void dl_ask(rep__mlanes_t *s, rep__mlane_t *ml, rep__mdl_t *d)
{
    rep__lane_t *l = &ml->lane;
    rep_dead_letter_t *dl = tb_calloc(1, sizeof *dl);
    dl->first = dl->last = d->offset;
    dl->reason = d->reason;
    dl->error = tb_strdup(d->error);
    size_t n = strlen(s->o->name) + 8;
    dl->source = tb_malloc(n);
    snprintf(dl->source, n, "output:%s", s->o->name);
    dl->attempts = 1;
    wal_reader_t *rd;
    int rc = wal_reader_open(l->wal, d->offset, &rd);
    if (rc == 0) {
        wal_record_t rec;
        if (wal_reader_next(rd, &rec) == 0 && rec.offset == d->offset) {
            dl->recs = tb_calloc(1, sizeof *dl->recs);
            rep__dl_copy_record(&dl->recs[0], &rec);
            dl->n = 1;
        }
        wal_reader_close(rd);
    } else {
        tb_error("output: cannot read a record for the dead-letter log; it is not kept there",
                 TB_S("output", s->o->name), REP__LOG_LANE(l), TB_U("offset", d->offset), TB_ERR(rc));
    }
    dl->token = d->token = ++s->dl_seq;
    d->retry_at = 0;
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_DEAD_LETTER;
    ev->topic = l->topic;
    ev->dl = dl;
    rep__output_post(s->o, ev);
}

void rep__mlanes_dead(rep__mlanes_t *s, rep__mlane_t *ml, uint64_t offset, rep_dl_reason_t reason, const char *error,
                      bool in_window)
{
    rep__lane_t *l = &ml->lane;
    rep__batch_t *b = in_window ? unit_at(l, offset) : NULL;
    if (!b && !in_window) {
        b = rep__window_push(&l->win); /* pick_lane checked the room */
        b->first = b->last = offset;
        b->count = 1;
        b->count_new = offset >= l->st.start_offset;
    }
    if (!b)
        return; /* not reached: the session's record is in the window until acked */
    if (b->state == REP__B_SENT || b->state == REP__B_SENDING)
        l->win.sent--;
    b->state = REP__B_DEAD;
    ml->dirty = true;
    for (uint32_t k = 0; k < ml->ndl; k++)
        if (ml->dl[k].offset == offset)
            return; /* read again after a lost session: its write is already asked (or due) */
    if (ml->ndl == ml->dlcap) {
        ml->dlcap = ml->dlcap ? ml->dlcap * 2 : 4;
        ml->dl = tb_realloc(ml->dl, ml->dlcap * sizeof *ml->dl);
    }
    rep__mdl_t *d = &ml->dl[ml->ndl++];
    *d = (rep__mdl_t){ .offset = offset, .reason = reason, .error = tb_strdup(error ? error : "") };
    dl_ask(s, ml, d);
}

void rep__mlanes_dl_answer(rep__mlanes_t *s, rep__dl_cmd_t *cmd)
{
    rep__lane_t *lp = cmd->topic < s->o->nlanes ? __atomic_load_n(&s->o->lanes[cmd->topic], __ATOMIC_ACQUIRE) : NULL;
    rep__mlane_t *ml = (rep__mlane_t *)lp; /* the lane is the first member */
    uint32_t k = 0;
    while (ml && k < ml->ndl && ml->dl[k].token != cmd->token)
        k++;
    if (!ml || k == ml->ndl) {
        free(cmd); /* a lane given again since (a reload): its records are read again */
        return;
    }
    rep__mdl_t *d = &ml->dl[k];
    rep__lane_t *l = &ml->lane;
    int rc = cmd->rc;
    free(cmd);
    if (rc < 0 && rc != TB_EUNSUPPORTED) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
        uint64_t suppressed;
        uint64_t delay = TB_MIN((uint64_t)DL_RETRY_MS << TB_MIN(d->refusals, 5u), (uint64_t)DL_RETRY_MAX_MS);
        d->refusals++;
        if (tb_ratelimit(&rl, &suppressed))
            tb_warn("output: the dead-letter log did not take a record it cannot carry; held, asked again after "
                    "a delay that doubles (1 s to 30 s; logged once a minute)",
                    TB_S("output", s->o->name), REP__LOG_LANE(l), TB_U("offset", d->offset), TB_ERR(rc),
                    TB_U("retry_ms", delay), TB_U("suppressed", suppressed));
        d->token = 0;
        d->retry_at = tb_mono_ms() + delay;
        return;
    }
    rep__batch_t *b = unit_at(l, d->offset);
    if (b && b->state == REP__B_DEAD) {
        if (rc == 0) {
            b->dead = true; /* rep__lane_acked: counted messages_dead_lettered, not replicated */
        } else {
            /* mqtt.dead_letter off: nowhere to keep it; passed as a skip (the kind counted it) */
            static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
            uint64_t suppressed;
            if (tb_ratelimit(&rl, &suppressed))
                tb_warn("output: a record it cannot carry is skipped: mqtt.dead_letter is off, so it has nowhere to "
                        "go (logged once a minute)",
                        TB_S("output", s->o->name), REP__LOG_LANE(l), TB_U("offset", d->offset),
                        TB_S("error", d->error), TB_U("suppressed", suppressed));
            b->aged = 1;
            b->aged_new = b->count_new;
            b->count = b->count_new = 0;
        }
        b->state = REP__B_ACKED;
        ml->acked_due = true;
        ml->dirty = true;
    }
    free(d->error);
    ml->dl[k] = ml->dl[--ml->ndl];
}

static void dl_retry(rep__mlanes_t *s, rep__mlane_t *ml, uint64_t now, int *wish)
{
    for (uint32_t k = 0; k < ml->ndl; k++) {
        rep__mdl_t *d = &ml->dl[k];
        if (!d->retry_at)
            continue;
        if (now >= d->retry_at) {
            dl_ask(s, ml, d);
        } else {
            int left = (int)TB_MIN(d->retry_at - now, (uint64_t)DL_RETRY_MAX_MS);
            *wish = *wish < 0 ? left : TB_MIN(*wish, left);
        }
    }
}

/* One record of ml: 1 (*rec, its unit in the window), or 0 when the lane has nothing now
 * (ready cleared, or parked) or the record was not to be sent (the caller asks again). */
static int take(rep__mlanes_t *s, rep__mlane_t *ml, wal_record_t *rec)
{
    rep__lane_t *l = &ml->lane;
    uint64_t now_wall = tb_wall_ms();
    int rc = rep__lane_next(l, rec, now_wall);
    if (rc == WAL_END) {
        ml->ready = false;
        return 0;
    }
    if (rc < 0) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t suppressed;
        if (tb_ratelimit(&rl, &suppressed))
            tb_error("output: reading the log failed; trying again in 1 s", TB_S("output", s->o->name),
                     REP__LOG_LANE(l), TB_ERR(rc), TB_U("suppressed", suppressed));
        ml->ready = false;
        ml->retry_at = tb_mono_ms() + READ_RETRY_MS;
        return 0;
    }
    ml->dirty = true;
    if (rep__too_old(&ml->enc, rec, now_wall)) {
        rep__mlanes_skip(ml, rec);
        return 0;
    }
    rep__mlane_unit_t u = { 0 };
    rc = s->ops->build(s->kind, ml, rec, now_wall, &u);
    if (rc == REP__ML_RETRY) {
        rep__lane_restart(l); /* the record is read again */
        ml->ready = false;
        ml->retry_at = tb_mono_ms() + READ_RETRY_MS;
        return 0;
    }
    if (rc == REP__ML_SKIP) {
        rep__mlanes_skip(ml, rec);
        return 0;
    }
    if (rc == REP__ML_DEAD) {
        rep__mlanes_dead(s, ml, rec->offset, u.dl_reason, u.dl_error, false);
        return 0;
    }
    rep_output_t *o = s->o;
    if (rep__pace_must_ask(&o->pace, &l->pace) && !rep__pace_ask(&o->pace, &l->pace, u.bytes, 1, tb_mono_ms())) {
        if (s->ops->unbuild)
            s->ops->unbuild(s->kind, ml);
        l->src.has_held = true; /* rep__lane_next peeked it: read again next time */
        ml->parked = true;
        return 0;
    }
    rep__batch_t *b = rep__window_push(&l->win); /* pick_lane checked the room */
    b->first = b->last = rec->offset;
    b->count = 1;
    b->count_new = rec->offset >= l->st.start_offset;
    b->replayed = u.replayed;
    b->raw_bytes = rec->raw_len;
    b->first_publish_ms = b->last_publish_ms = rec->publish_time_ms;
    rep__window_mark_sending(&l->win, b, tb_mono_ms());
    rep__window_mark_sent(&l->win, b);
    l->st.batches_sent++;
    if (u.resend)
        l->st.batches_resent++;
    else if (u.replayed)
        l->st.messages_replayed++;
    return 1;
}

int rep__mlanes_next(rep__mlanes_t *s, rep__mlane_t **ml_out, wal_record_t *rec)
{
    for (;;) {
        rep__mlane_t *ml = pick_lane(s);
        if (!ml)
            return 0;
        if (take(s, ml, rec)) {
            *ml_out = ml;
            return 1;
        }
    }
}

void rep__mlanes_acked(rep__mlanes_t *s, uint32_t lane, uint64_t token)
{
    if (lane >= s->n)
        return;
    rep__mlane_t *ml = s->v[lane];
    rep__lane_t *l = &ml->lane;
    /* acks come in order per lane (rep_mosq reports a contiguous prefix): the units before
     * acked_n are ACKED already; from the head again if the window changed under the hint */
    uint32_t i = ml->acked_n <= l->win.n ? ml->acked_n : 0;
    if (i && rep__window_at(&l->win, i - 1)->state != REP__B_ACKED)
        i = 0;
    for (; i < l->win.n; i++) {
        rep__batch_t *b = rep__window_at(&l->win, i);
        if (b->last > token)
            break;
        if (b->state == REP__B_SENT || b->state == REP__B_SENDING) {
            b->state = REP__B_ACKED;
            l->win.sent--;
        }
    }
    ml->acked_n = i;
    /* The cursor moves (rep__lane_acked: the counts exact, the stats published) once per turn of
     * the loop (rep__mlanes_turn), not per ack: one cursor move and one stats copy for every ack
     * a read brought, instead of one each (the publish walks the window). */
    s->v[lane]->acked_due = true;
}

/* The acks of this turn: the cursor, the counts, the stats. */
static void flush_acks(rep__mlane_t *ml)
{
    if (!ml->acked_due)
        return;
    ml->acked_due = false;
    ml->acked_n = 0; /* the ACKED prefix leaves the window */
    rep__lane_acked(&ml->lane);
}

/* memory_first: no ack comes soon; what the log holds in memory goes to disk now. */
static void output_down(rep__mlanes_t *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (wal_topic_mode(s->v[i]->lane.wal) == WAL_MODE_MEMORY)
            wal_topic_spill(s->v[i]->lane.wal, WAL_SPILL_OUTPUT);
}

void rep__mlanes_session_lost(rep__mlanes_t *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        rep__mlane_t *ml = s->v[i];
        rep__lane_t *l = &ml->lane;
        flush_acks(ml); /* what was acknowledged before the loss counts */
        if (l->win.n == 0)
            continue;
        uint64_t last = rep__window_at(&l->win, l->win.n - 1)->last;
        if (last > ml->resend_upto)
            ml->resend_upto = last;
        l->st.stream_resets++;
        rep__pace_leave(&s->o->pace, &l->pace, tb_mono_ms()); /* its unit is read again */
        ml->parked = false;
        rep__lane_restart(l); /* the reader reopens at the checkpoint + 1 */
        ml->acked_n = 0;
        ml->ready = true;
        ml->dirty = true;
    }
    output_down(s);
}

static int wish_min(int wish, int ms)
{
    return wish < 0 ? ms : TB_MIN(wish, ms);
}

int rep__mlanes_turn(rep__mlanes_t *s, rep_mosq_state_t state, uint64_t now)
{
    if (state == REP_MOSQ_BACKOFF || state == REP_MOSQ_REFUSED)
        output_down(s);
    bool changed = state != s->seen;
    s->seen = state;
    int wish = -1;
    if (rep__pace_limited(&s->o->pace) || s->o->pace.waiting) { /* caps lifted by a reload: the waiting go now */
        uint64_t wait = UINT64_MAX;
        rep__pace_lane_t *pl;
        while ((pl = rep__pace_next(&s->o->pace, now, &wait)))
            ((rep__mlane_t *)TB_CONTAINER_OF(pl, rep__lane_t, pace))->parked = false; /* lane first */
        if (wait != UINT64_MAX)
            wish = (int)TB_MIN(wait, (uint64_t)INT32_MAX);
    }
    for (uint32_t i = 0; i < s->n; i++) {
        rep__mlane_t *ml = s->v[i];
        rep__lane_t *l = &ml->lane;
        if (ml->ndl)
            dl_retry(s, ml, now, &wish);
        flush_acks(ml);
        if (ml->retry_at && now >= ml->retry_at) {
            ml->retry_at = 0;
            ml->ready = true;
        }
        if (ml->retry_at)
            wish = wish_min(wish, READ_RETRY_MS);
        /* wal.fsync interval: the readable end moves without a kick */
        if (!ml->ready && !ml->retry_at && l->src.rd && wal_topic_readable_end(l->wal) > wal_reader_offset(l->src.rd))
            ml->ready = true;
        if (s->recheck_ms && !ml->ready)
            wish = wish_min(wish, (int)s->recheck_ms);
        if (changed) {
            l->st.state = lane_state(state);
            ml->dirty = true;
        }
        /* a backlog but nothing of it in the window (other lanes hold the connection's window,
         * the pacer, the connection down): its oldest record's age is learnt from the log, or
         * /stats would say 0 s (the record stays held for next()) */
        if (ml->dirty && l->win.n == 0 && !l->src.has_held && !atomic_load(&l->released) &&
            wal_topic_readable_end(l->wal) > l->win.acked + 1 && rep__lane_ensure_reader(l)) {
            const wal_record_t *rec;
            (void)rep__src_peek(&l->src, &rec);
        }
        if (ml->dirty) {
            ml->dirty = false;
            rep__lane_publish(l);
        }
    }
    return wish;
}

void rep__mlanes_kicked(rep__mlanes_t *s, rep__lane_t *l, bool stopping)
{
    rep__mlane_t *ml = (rep__mlane_t *)l; /* the lane is the first member */
    bool idle = l->win.n == 0 && !l->src.has_held;
    if (idle)
        l->progress_ms = tb_mono_ms(); /* caught up until now: a stall counts from here */
    ml->ready = true;
    ml->dirty = true;
    /* not sending: learn the oldest waiting message's age (it stays held for next()) */
    if (idle && s->seen != REP_MOSQ_UP && !stopping && rep__lane_ensure_reader(l)) {
        const wal_record_t *rec;
        (void)rep__src_peek(&l->src, &rec);
    }
}

void rep__mlanes_finish(rep__mlanes_t *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        flush_acks(s->v[i]);
        s->v[i]->lane.st.state = REP_TOPIC_STOPPED;
        rep__lane_publish(&s->v[i]->lane);
    }
}
