/*
 * retire.c: retiring a topic no mapping routes to any more, once drained
 * (docs/design/RELOAD.md 4.1-4.5; issue 19). The glue between the reload
 * (which leaves such a slot RETIRING: no longer routed, its backlog still
 * replicated), the engine (whose outputs let go of it) and the log
 * (wal_topic_retire). On the loop thread, but the one blocking call.
 *
 *   RETIRING  each tick (the replication glue's watch timer, and at once
 *             after a reload) looks whether it is drained: the broker holds
 *             nothing of it (no open batch, none at the writer, no blocked
 *             publisher) and the log's checkpoint (the minimum over every
 *             active output's cursor) has passed its last offset with
 *             nothing held in the memory tier. Then -> REMOVING and
 *             rep_engine_release_topic: each output carrying it closes its
 *             lane (reader, cursor; Danube its stream, and declares the
 *             edge's topics again without it) and answers
 *             REP_EV_TOPIC_RELEASED.
 *   REMOVING  when the last output answered: wal_topic_retire on the libuv
 *             pool (it blocks on a writer round trip and must not run on
 *             the writer; readers and cursors are closed by then). REMOVE
 *             writes the RETIRED entry and deletes the directory; KEEP
 *             (wal.retire: keep) checks the drain and stops.
 *   RETIRED / KEPT  logged with the bytes freed and the entry's next offset;
 *             the slot keeps its id, its broker counters and the old log
 *             handle (valid memory until wal_close, whose counters /stats
 *             and /metrics keep reading), so gateway-wide totals stay
 *             honest. A reload mapping the name again re-creates the log
 *             (continuing from the entry's next offset and counters) or
 *             takes the kept one, and the engine gets new lanes
 *             (gw__retire_revived).
 *
 * The admin API (gw__retire_force; RELOAD.md 4.6): POST /admin/topics/NS/T/
 * retire takes a drained RETIRING topic (or a KEPT one) the same way now,
 * always as REMOVE; .../forget?confirm=yes takes a RETIRING or KEPT one
 * whatever its backlog, as FORGET (the RETIRED entry counts what it
 * deleted as forgotten). `forced` remembers the way for the release's
 * answer; it is cleared when the job ends.
 *
 * A reload routing to a RETIRING topic simply makes it LIVE (its lanes
 * never stopped). One routing to a REMOVING one is refused by
 * broker_plan_new (a moment: one writer round trip). A retirement the log
 * refuses as not drained after all (TB_EBUSY) gives the topic its lanes
 * back and it stays RETIRING.
 */
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct gw__retire {
    uv_loop_t *loop;
    broker_t *b;
    cfg_retire_t how;
    uint32_t *waiting;          /* per slot: outputs yet to answer the release */
    size_t cap;
    unsigned jobs;              /* wal_topic_retire calls on the pool */
    bool stopping;
    bool *kept;                 /* per slot: KEPT by wal.retire: keep (switching to remove retires it) */
    uint8_t *forced;            /* per slot: 0, or 1 + the wal_retire_t the admin API asked for */
    bool *forgot;               /* per slot: RETIRED by a forget (its backlog counts as dropped) */
    void (*job_done)(void *arg);
    gw_repl_t *repl;            /* job_done's argument; its engine gets lanes back */
    gw__retire_counts_t counts;
};

typedef struct {
    uv_work_t req;
    gw__retire_t *rt;
    size_t id;
    wal_topic_t *wal;
    wal_retire_t how;
    int rc;
    uint64_t bytes;             /* on disk before: what REMOVE frees */
    wal_retired_t entry;
} job_t;

gw__retire_t *gw__retire_new(uv_loop_t *loop, broker_t *b, cfg_retire_t how, size_t cap,
                             void (*job_done)(void *arg), gw_repl_t *repl)
{
    gw__retire_t *rt = tb_calloc(1, sizeof *rt);
    rt->loop = loop;
    rt->b = b;
    rt->how = how;
    rt->cap = cap;
    rt->waiting = tb_calloc(cap + 1, sizeof *rt->waiting);
    rt->kept = tb_calloc(cap + 1, sizeof *rt->kept);
    rt->forced = tb_calloc(cap + 1, sizeof *rt->forced);
    rt->forgot = tb_calloc(cap + 1, sizeof *rt->forgot);
    rt->job_done = job_done;
    rt->repl = repl;
    return rt;
}

void gw__retire_free(gw__retire_t *rt)
{
    if (!rt)
        return;
    free(rt->waiting);
    free(rt->kept);
    free(rt->forced);
    free(rt->forgot);
    free(rt);
}

void gw__retire_set_mode(gw__retire_t *rt, cfg_retire_t how)
{
    if (rt)
        rt->how = how;
}

void gw__retire_stop(gw__retire_t *rt)
{
    if (rt)
        rt->stopping = true;
}

bool gw__retire_busy(const gw__retire_t *rt)
{
    return rt && rt->jobs > 0;
}

void gw__retire_counts(const gw__retire_t *rt, gw__retire_counts_t *out)
{
    memset(out, 0, sizeof *out);
    if (!rt)
        return;
    *out = rt->counts;
    for (size_t i = 0; i < broker_ntopics(rt->b); i++) {
        broker_topic_life_t l = broker_topic(rt->b, i)->life;
        out->retiring += l == BROKER_LIFE_RETIRING || l == BROKER_LIFE_REMOVING;
        out->kept_now += l == BROKER_LIFE_KEPT;
        out->retired_now += l == BROKER_LIFE_RETIRED;
    }
}

/* The broker's side and the log's: nothing of it waits anywhere. */
bool gw__retire_drained(const broker_topic_t *t, const wal_topic_stats_t *ws)
{
    if (t->batch || t->inflight || t->nwaiters)
        return false;
    return ws->held_msgs == 0 && ws->next_offset <= ws->checkpoint + 1;
}

static void work_cb(uv_work_t *req)
{
    job_t *j = TB_CONTAINER_OF(req, job_t, req);
    wal_topic_stats_t ws;
    wal_topic_stats(j->wal, &ws);
    j->bytes = ws.bytes;
    j->rc = wal_topic_retire(j->wal, j->how, &j->entry); /* blocks on the writer: the pool, not the loop */
}

static void give_back(rep_engine_t *e, broker_topic_t *t)
{
    char err[512] = "";
    /* no reload's configuration here: an mqtt output whose template needs the rules takes it after a restart */
    rep_topic_spec_t spec = { t->name, t->schema_subject, t->wal, t->max_age_ms, t->priority, NULL };
    if (e && rep_engine_readd_topic(e, t->id, &spec, err, sizeof err) < 0)
        tb_error("retire: a topic's lanes could not be given back; it is replicated after a restart",
                 TB_S("topic", t->name), TB_S("why", err));
}

static void after_cb(uv_work_t *req, int status)
{
    job_t *j = TB_CONTAINER_OF(req, job_t, req);
    gw__retire_t *rt = j->rt;
    broker_topic_t *t = broker_topic(rt->b, j->id);
    int rc = status < 0 ? status : j->rc;
    rt->forced[j->id] = 0;
    if (rc == 0 && (j->how == WAL_RETIRE_REMOVE || j->how == WAL_RETIRE_FORGET)) {
        broker_topic_set_life(rt->b, j->id, BROKER_LIFE_RETIRED);
        rt->kept[j->id] = false;
        rt->counts.retired++;
        rt->forgot[j->id] = j->how == WAL_RETIRE_FORGET;
        tb_info(j->how == WAL_RETIRE_FORGET
                    ? "retire: topic forgotten: its directory removed with its backlog (counted as forgotten in RETIRED)"
                    : "retire: topic retired: its directory removed, its next offset and counters kept in RETIRED",
                TB_S("topic", t->name), TB_U("bytes_freed", j->bytes), TB_U("next_offset", j->entry.next),
                TB_U("checkpoint", j->entry.checkpoint), TB_U("dropped", j->entry.dropped),
                TB_U("forgotten", j->entry.forgotten));
    } else if (rc == 0) {
        broker_topic_set_life(rt->b, j->id, BROKER_LIFE_KEPT);
        rt->kept[j->id] = true;
        rt->counts.kept++;
        tb_info("retire: topic drained and kept (wal.retire: keep): its directory stays, not replicated",
                TB_S("topic", t->name), TB_U("bytes", j->bytes), TB_U("checkpoint", j->entry.checkpoint));
    } else if (rc == TB_EBUSY) {
        /* something came back after all (the memory tier, a held batch): replicate on */
        broker_topic_set_life(rt->b, j->id, BROKER_LIFE_RETIRING);
        tb_warn("retire: the log says the topic is not drained after all; it keeps replicating",
                TB_S("topic", t->name));
        if (!rt->kept[j->id]) /* a kept topic's lanes stay released: it is kept again */
            give_back(gw_repl_engine(rt->repl), t);
        else
            broker_topic_set_life(rt->b, j->id, BROKER_LIFE_KEPT);
    } else {
        broker_topic_set_life(rt->b, j->id, BROKER_LIFE_KEPT);
        rt->counts.failed++;
        tb_error("retire: the log could not retire the topic; its directory stays (retire it offline with "
                 "`tributary wal retire`)", TB_S("topic", t->name), TB_ERR(rc));
    }
    free(j);
    rt->jobs--;
    if (rt->job_done)
        rt->job_done(rt->repl);
}

static void start_job(gw__retire_t *rt, broker_topic_t *t, wal_retire_t how)
{
    job_t *j = tb_calloc(1, sizeof *j);
    j->rt = rt;
    j->id = t->id;
    j->wal = t->wal;
    j->how = how;
    broker_topic_set_life(rt->b, t->id, BROKER_LIFE_REMOVING);
    if (uv_queue_work(rt->loop, &j->req, work_cb, after_cb) < 0) { /* not reached: never closed here */
        broker_topic_set_life(rt->b, t->id, BROKER_LIFE_KEPT);
        free(j);
        return;
    }
    rt->jobs++;
}

static wal_retire_t mode(const gw__retire_t *rt, size_t id)
{
    if (id < rt->cap && rt->forced[id])
        return (wal_retire_t)(rt->forced[id] - 1);
    return rt->how == CFG_RETIRE_KEEP ? WAL_RETIRE_KEEP : WAL_RETIRE_REMOVE;
}

void gw__retire_tick(gw__retire_t *rt, rep_engine_t *e)
{
    if (!rt || rt->stopping || !e)
        return;
    for (size_t i = 0; i < broker_ntopics(rt->b) && i < rt->cap; i++) {
        broker_topic_t *t = broker_topic(rt->b, i);
        if (t->life == BROKER_LIFE_KEPT && rt->how == CFG_RETIRE_REMOVE && rt->kept[i]) {
            tb_info("retire: wal.retire is remove now: a kept topic is retired", TB_S("topic", t->name));
            start_job(rt, t, WAL_RETIRE_REMOVE); /* its lanes were released when it was kept */
            continue;
        }
        if (t->life != BROKER_LIFE_RETIRING)
            continue;
        wal_topic_stats_t ws;
        wal_topic_stats(t->wal, &ws);
        if (!gw__retire_drained(t, &ws))
            continue;
        broker_topic_set_life(rt->b, i, BROKER_LIFE_REMOVING);
        size_t n = rep_engine_release_topic(e, i);
        rt->waiting[i] = (uint32_t)n;
        tb_info("retire: a topic no mapping routes to is drained; its outputs let go of it", TB_S("topic", t->name),
                TB_U("last_offset", ws.next_offset - 1), TB_U("checkpoint", ws.checkpoint), TB_U("outputs", n),
                TB_S("then", rt->how == CFG_RETIRE_KEEP ? "keep" : "remove"));
        if (n == 0)
            start_job(rt, t, mode(rt, i));
    }
}

void gw__retire_released(gw__retire_t *rt, size_t id)
{
    if (!rt || id >= rt->cap || rt->waiting[id] == 0)
        return;
    if (--rt->waiting[id] > 0)
        return;
    broker_topic_t *t = broker_topic(rt->b, id);
    if (!t || t->life != BROKER_LIFE_REMOVING)
        return;
    if (rt->stopping) { /* the drain closes the log: the next boot finds the directory (RELOAD.md 4.3) */
        broker_topic_set_life(rt->b, id, BROKER_LIFE_RETIRING);
        rt->forced[id] = 0;
        return;
    }
    start_job(rt, t, mode(rt, id));
}

bool gw__retire_forgot(const gw__retire_t *rt, size_t id)
{
    return rt && id < rt->cap && rt->forgot[id];
}

int gw__retire_force(gw__retire_t *rt, rep_engine_t *e, size_t id, wal_retire_t how)
{
    if (!rt || !e || rt->stopping || id >= rt->cap || id >= broker_ntopics(rt->b))
        return TB_ECLOSED;
    broker_topic_t *t = broker_topic(rt->b, id);
    if (t->life != BROKER_LIFE_RETIRING && t->life != BROKER_LIFE_KEPT)
        return TB_EINVALID;
    if (how == WAL_RETIRE_REMOVE && t->life == BROKER_LIFE_RETIRING) {
        wal_topic_stats_t ws;
        wal_topic_stats(t->wal, &ws);
        if (!gw__retire_drained(t, &ws))
            return TB_EBUSY;
    }
    if (t->batch || t->inflight || t->nwaiters)
        return -EAGAIN; /* the broker still holds some of it (a moment: nothing routes to it) */
    rt->forced[id] = (uint8_t)(how + 1);
    tb_info(how == WAL_RETIRE_FORGET ? "retire: the admin API forgets a topic no mapping routes to, whatever its backlog"
                                     : "retire: the admin API retires a drained topic no mapping routes to",
            TB_S("topic", t->name), TB_S("was", t->life == BROKER_LIFE_KEPT ? "kept" : "retiring"));
    if (t->life == BROKER_LIFE_KEPT) { /* its lanes were released when it was kept */
        start_job(rt, t, how);
        return 0;
    }
    broker_topic_set_life(rt->b, id, BROKER_LIFE_REMOVING);
    size_t n = rep_engine_release_topic(e, id);
    rt->waiting[id] = (uint32_t)n;
    if (n == 0)
        start_job(rt, t, how);
    return 0;
}

int gw__retire_revived(gw__retire_t *rt, rep_engine_t *e, size_t id, broker_topic_life_t before,
                       const cfg_t *mappings, char *err, size_t errlen)
{
    *err = '\0';
    if (rt && id < rt->cap) {
        rt->waiting[id] = 0;
        rt->kept[id] = false;
        rt->forced[id] = 0;
        rt->forgot[id] = false; /* a new log: what was forgotten is below its first offset */
    }
    if (!rt || before == BROKER_LIFE_RETIRING || !e)
        return 0; /* its lanes never stopped */
    broker_topic_t *t = broker_topic(rt->b, id);
    rep_topic_spec_t spec = { t->name, t->schema_subject, t->wal, t->max_age_ms, t->priority, mappings };
    return rep_engine_readd_topic(e, id, &spec, err, errlen);
}
