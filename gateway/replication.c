/*
 * replication.c: the replicator service and the loop's half of the
 * replicator's mailboxes. See gateway_int.h for what it is for.
 *
 * Start (after the log, before the MQTT listener): the wake-up handle
 * first (the threads may post as soon as they run), then rep_engine_new
 * with the configuration's outputs and every upstream topic in server order
 * (so a topic's index is the same on both sides), then rep_engine_start (the
 * cursors settled, one thread per output). Nothing here waits for the
 * cluster. /stats and /metrics show each topic's lane in its primary output
 * (the first that carries it: today the one Danube output).
 *
 * Drain (after the MQTT server has drained, before the log closes):
 * rep_engine_stop gives batches in flight replicator.shutdown_grace_ms to be
 * acknowledged, then closes the streams; the engine's one REP_EV_STOPPED
 * (every output stopped) arrives through the mailbox; then the thread is joined (its WAL readers are closed by then)
 * and the wake-up handle closed. Only then may wal_close run.
 *
 * Schemas: one sch_registry per Avro payload encoding (a registry compiles
 * with one set of options), each keyed by subject and fingerprint, so a
 * heartbeat that repeats a schema compiles nothing.
 *
 * Stalls: a timer on the loop looks at every topic's stats a few times per
 * health.stall_after_ms (at most every second) and logs a topic once when
 * it becomes stalled (messages waiting, no ack progress for that long; the
 * replicator computes it, replicator.h) and once when it is not any more,
 * with how long it lasted. The gauge and /stats read the same flag live.
 *
 * After the drain the replicator is freed; its last stats are kept
 * (gw_repl_topic_stats) so /metrics and /stats, which answer until the
 * very end, still account for what it replicated.
 */
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

struct gw_repl {
    gw__app_t *app;
    broker_t *b;
    wal_t *wal;
    rep_engine_t *rep;          /* the engine: every output of the configuration */
    sch_registry_t *reg[2];     /* by cfg_encoding_t */
    uint8_t *encoding;          /* per topic: which registry */
    bool *was_ready;            /* per topic: for logging transitions */
    uint64_t *stalled_since;    /* per topic: tb_mono_ms() when logged stalled; 0: not stalled */
    rep_topic_stats_t *final;   /* per topic: the last stats, once the replicator is freed */
    size_t ntopics;
    uv_async_t async;
    uv_timer_t watch;
    bool async_open, watch_open;
    int open_handles;           /* of the two, not yet closed */
    bool draining;
    gw__retire_t *retire;       /* topics no mapping routes to, retired once drained (retire.c) */
};

gw_repl_t *gw_repl_new(void)
{
    return tb_calloc(1, sizeof(gw_repl_t));
}

void gw_repl_set_broker(gw_repl_t *g, broker_t *b)
{
    g->b = b;
}

void gw_repl_set_wal(gw_repl_t *g, wal_t *w)
{
    g->wal = w;
}

rep_engine_t *gw_repl_engine(gw_repl_t *g)
{
    return g ? g->rep : NULL;
}

/* The topic's lane in its primary output (the first that carries it): what /stats and /metrics show. */
static void topic_stats(rep_engine_t *e, size_t i, rep_topic_stats_t *out)
{
    rep_lane_stats(e, rep_engine_primary(e, i), i, out);
}

void gw_repl_topic_stats(gw_repl_t *g, size_t i, rep_topic_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (g && g->rep)
        topic_stats(g->rep, i, out);
    else if (g && g->final && i < g->ntopics)
        *out = g->final[i];
}

void gw_repl_free(gw_repl_t *g)
{
    if (!g)
        return;
    for (int i = 0; i < 2; i++)
        sch_registry_free(g->reg[i]);
    free(g->encoding);
    free(g->was_ready);
    free(g->stalled_since);
    free(g->final);
    gw__retire_free(g->retire);
    free(g);
}

static bool topic_ready(const broker_topic_t *t)
{
    return t->wal && t->registered && (!t->schema_subject || t->validator);
}

static void set_validator(broker_topic_t *t, sch_validator_t *v)
{
    sch_validator_t *old = t->validator;
    t->validator = v; /* the loop is the only reader: the swap lands between two PUBLISHes */
    if (old)
        sch_validator_unref(old);
}

static void log_readiness(gw_repl_t *g, broker_topic_t *t, const char *why)
{
    bool ready = topic_ready(t);
    if (ready == g->was_ready[t->id])
        return;
    g->was_ready[t->id] = ready;
    if (ready)
        tb_info("topic ready", TB_S("topic", t->name), TB_S("schema_subject", t->schema_subject ? t->schema_subject : ""),
                TB_U("schema_id", t->schema_id), TB_U("schema_version", t->schema_version));
    else
        tb_warn("topic not ready: enforce mappings refuse its messages, others are still logged",
                TB_S("topic", t->name), TB_S("why", why));
}

static void apply_schema(gw_repl_t *g, broker_topic_t *t, const rep_event_t *ev)
{
    sch_resolved_t rs;
    rep_event_resolved(ev, &rs);
    if (rs.subject && *rs.subject && t->schema_subject && strcmp(rs.subject, t->schema_subject) != 0) {
        /* an answer about the subject a reload replaced (it was in the mailbox at the swap): never
         * installed, so no message is checked against the old schema (RELOAD.md 2.7) */
        tb_debug("schema event for a subject the topic no longer has: ignored", TB_S("topic", t->name),
                 TB_S("subject", rs.subject), TB_S("schema_subject", t->schema_subject));
        return;
    }
    const char *subject = rs.subject && *rs.subject ? rs.subject : t->schema_subject;
    rs.subject = subject;
    sch_registry_t *reg = g->reg[g->encoding[t->id]];
    char err[512] = "";
    sch_registry_apply(reg, &rs, err, sizeof err);
    sch_lookup_t lk;
    char why[512] = "";
    int rc = sch_registry_lookup(reg, subject, &lk, why, sizeof why);
    if (rc == 0) {
        set_validator(t, lk.validator);
        t->schema_failed = false;
    } else {
        set_validator(t, NULL);
        t->schema_failed = true;
        tb_error("schema does not compile: topic not ready (fail closed)", TB_S("topic", t->name),
                 TB_S("subject", subject), TB_U("schema_id", rs.schema_id), TB_U("schema_version", rs.schema_version),
                 TB_S("why", why[0] ? why : err));
    }
    /* the schema is known either way: stamp it on every message, whatever the policy */
    t->has_schema = true;
    t->schema_id = rs.schema_id;
    t->schema_version = rs.schema_version;
}

static void forget_schema(broker_topic_t *t)
{
    set_validator(t, NULL);
    t->has_schema = false;
    t->schema_failed = false;
    t->schema_id = 0;
    t->schema_version = 0;
}

/* ---- poison batches: the replicator's records into the dead-letter log (RELOAD.md 5.5) ---- */

typedef struct dl_wait {
    gw_repl_t *g;
    uint16_t output;
    size_t topic;
    uint64_t token;
} dl_wait_t;

static void dead_letter_done(void *arg, int rc)
{
    dl_wait_t *w = arg;
    if (w->g->rep) /* freed after the drain: nothing to tell */
        rep_engine_dead_letter_done(w->g->rep, w->output, w->topic, w->token, rc);
    free(w);
}

static void dead_letter(gw_repl_t *g, const rep_event_t *ev)
{
    const rep_dead_letter_t *dl = ev->dl;
    _Static_assert((int)METRICS_DL__COUNT == (int)REP_DL__COUNT, "metrics_dl_reason_t follows rep_dl_reason_t");
    wal_record_t *recs = tb_calloc(dl->n + 1, sizeof *recs);
    for (size_t i = 0; i < dl->n; i++)
        recs[i] = dl->recs[i].rec;
    broker_dl_batch_t d = { .topic = ev->topic, .recs = recs, .n = dl->n, .error = dl->error,
                            .attempts = dl->attempts, .reason = (metrics_dl_reason_t)dl->reason,
                            .source = dl->source };
    dl_wait_t *w = tb_malloc(sizeof *w);
    *w = (dl_wait_t){ g, ev->output, ev->topic, dl->token };
    int rc = broker_dead_letter_batch(g->b, &d, dead_letter_done, w); /* copies the records */
    free(recs);
    if (rc < 0) {
        rep_engine_dead_letter_done(g->rep, ev->output, ev->topic, dl->token, rc); /* held, said by the replicator */
        free(w);
    }
}

static void apply(gw_repl_t *g, const rep_event_t *ev)
{
    if (ev->kind == REP_EV_DEAD_LETTER) {
        dead_letter(g, ev);
        return;
    }
    if (ev->kind == REP_EV_TOPIC_RELEASED) {
        gw__retire_released(g->retire, ev->topic);
        return;
    }
    broker_topic_t *t = broker_topic(g->b, ev->topic);
    if (!t && ev->kind != REP_EV_STOPPED)
        return; /* not reached: a slot is linked before the replicator hears of it */
    const char *why = "";
    switch (ev->kind) {
    case REP_EV_TOPIC_REGISTERED:
        t->registered = true;
        if (!t->schema_subject) {
            forget_schema(t);
        } else if (ev->has_schema) {
            apply_schema(g, t, ev);
            why = "its schema does not compile";
        } else {
            forget_schema(t);
            why = "its schema subject is not in the cluster's registry";
        }
        break;
    case REP_EV_TOPIC_FAILED:
        t->registered = false;
        why = "the cluster refused its registration";
        break;
    case REP_EV_SCHEMA_UPDATED:
        if (t->schema_subject)
            apply_schema(g, t, ev);
        why = "its new schema does not compile";
        break;
    case REP_EV_SCHEMA_REMOVED:
        if (t->schema_subject)
            sch_registry_remove(g->reg[g->encoding[t->id]], t->schema_subject);
        forget_schema(t);
        why = "its schema was removed from the cluster's registry";
        break;
    case REP_EV_TOPIC_REMOVED:
        t->registered = false;
        forget_schema(t);
        why = "it was removed on the cluster (it is registered again at the next heartbeat)";
        break;
    case REP_EV_STOPPED:
    case REP_EV_DEAD_LETTER:
    case REP_EV_TOPIC_RELEASED:
        return;
    }
    log_readiness(g, t, why);
}

static void handle_closed(uv_handle_t *h)
{
    gw_repl_t *g = h->data;
    if (--g->open_handles == 0 && g->draining && !gw__retire_busy(g->retire))
        gw__app_drained(g->app);
}

/* A wal_topic_retire finished on the pool: the drain may have been waiting for it (the log closes next). */
static void retire_done(void *arg)
{
    gw_repl_t *g = arg;
    if (g->draining && g->open_handles == 0 && !gw__retire_busy(g->retire))
        gw__app_drained(g->app);
}

static void close_handles(gw_repl_t *g)
{
    if (g->watch_open) {
        g->watch_open = false;
        uv_close((uv_handle_t *)&g->watch, handle_closed);
    }
    if (g->async_open) {
        g->async_open = false;
        uv_close((uv_handle_t *)&g->async, handle_closed);
    }
}

static void stopped(gw_repl_t *g)
{
    broker_on_stored(g->b, NULL, NULL);
    g->final = tb_calloc(g->ntopics + 1, sizeof *g->final);
    for (size_t i = 0; i < g->ntopics; i++) {
        topic_stats(g->rep, i, &g->final[i]);
        g->final[i].stalled = false; /* stopped: nothing is expected of it any more */
        g->final[i].no_progress_ms = 0;
    }
    rep_engine_free(g->rep); /* joins the threads; their WAL readers and cursors are closed */
    g->rep = NULL;
    close_handles(g);
}

/* ---- the stall watchdog ---------------------------------------------------------- */

static void watch_cb(uv_timer_t *h)
{
    gw_repl_t *g = h->data;
    if (!g->rep)
        return;
    gw__retire_tick(g->retire, g->rep);
    uint64_t now = tb_mono_ms();
    for (size_t i = 0; i < g->ntopics; i++) {
        rep_topic_stats_t st;
        topic_stats(g->rep, i, &st);
        const char *name = broker_topic(g->b, i)->name;
        if (st.stalled && !g->stalled_since[i]) {
            g->stalled_since[i] = now;
            tb_warn("replication stalled: messages are waiting and no acknowledgement has moved them for "
                    "health.stall_after_ms (logged once until it ends)",
                    TB_S("topic", name), TB_U("lag_messages", st.lag_messages), TB_U("acked_offset", st.acked_offset),
                    TB_U("no_progress_ms", st.no_progress_ms), TB_S("replicator_state", rep_topic_state_name(st.state)),
                    TB_U("stall_after_ms", g->app->cfg->health.stall_after_ms));
        } else if (!st.stalled && g->stalled_since[i]) {
            tb_info("replication no longer stalled", TB_S("topic", name),
                    TB_U("stalled_ms", now - g->stalled_since[i]), TB_U("lag_messages", st.lag_messages),
                    TB_U("acked_offset", st.acked_offset));
            g->stalled_since[i] = 0;
        }
    }
}

static void async_cb(uv_async_t *h)
{
    gw_repl_t *g = h->data;
    if (!g->rep)
        return;
    bool stop = false;
    for (rep_event_t *ev = rep_engine_take_events(g->rep), *next; ev; ev = next) {
        next = rep_event_next(ev);
        if (ev->kind == REP_EV_STOPPED)
            stop = true;
        else
            apply(g, ev);
        rep_event_free(ev);
    }
    if (stop)
        stopped(g);
}

static void notify(void *arg)
{
    uv_async_send(arg);
}

/* Per topic state of the glue; which Avro encoding its schema compiles for: its mappings'. */
static void topic_arrays(gw_repl_t *g)
{
    size_t n = broker_ntopics(g->b), cap = TB_MAX(broker_topic_cap(g->b), n); /* a reload adds topics */
    g->encoding = tb_calloc(cap + 1, 1);
    g->was_ready = tb_calloc(cap + 1, sizeof *g->was_ready);
    g->stalled_since = tb_calloc(cap + 1, sizeof *g->stalled_since);
    g->ntopics = n;
    for (size_t i = 0; i < n; i++) {
        const broker_topic_t *t = broker_topic(g->b, i);
        g->encoding[i] = t->schema_subject && t->encoding == CFG_ENC_JSON ? 1 : 0;
    }
}

/* broker_on_stored: new records of topic i are readable. */
static void kick(void *arg, size_t topic)
{
    rep_engine_kick(arg, topic);
}

int gw_repl_start(gw__app_t *app, void *arg)
{
    gw_repl_t *g = arg;
    g->app = app;
    const cfg_t *cfg = app->cfg;
    if (!g->b)
        return TB_ECLOSED;
    size_t n = broker_ntopics(g->b);
    for (int i = 0; i < 2; i++) {
        sch_opts_t so = { .avro_encoding = i ? SCH_AVRO_JSON : SCH_AVRO_BINARY };
        g->reg[i] = sch_registry_new(&so);
    }
    topic_arrays(g);
    g->retire = gw__retire_new(&app->loop, g->b, cfg->wal.retire, TB_MAX(broker_topic_cap(g->b), n), retire_done, g);
    int rc = uv_async_init(&app->loop, &g->async, async_cb);
    if (rc < 0)
        return rc;
    g->async.data = g;
    uv_timer_init(&app->loop, &g->watch);
    g->watch.data = g;
    g->async_open = g->watch_open = true;
    g->open_handles = 2;

    rep_opts_t o; /* for the log line below: what the danube output runs with */
    rep_opts_default(&o);
    rep_opts_from_cfg(cfg, &o);
    rep_topic_spec_t *specs = tb_calloc(n + 1, sizeof *specs);
    for (size_t i = 0; i < n; i++) {
        const broker_topic_t *t = broker_topic(g->b, i);
        specs[i] = (rep_topic_spec_t){ t->name, t->schema_subject, t->wal, t->max_age_ms, t->priority, NULL };
    }
    rep_engine_opts_t eo = { .cfg = cfg, .wal = g->wal, .topics = specs, .ntopics = n,
                             .max_topics = broker_topic_cap(g->b), .notify = notify, .notify_arg = &g->async };
    char err[512];
    rc = rep_engine_new(&eo, &g->rep, err, sizeof err);
    free(specs);
    if (rc < 0) {
        tb_error("cannot set up replication", TB_S("config", cfg->source), TB_S("why", err));
        return rc;
    }
    rc = rep_engine_start(g->rep);
    if (rc < 0) {
        tb_error("cannot start the replicator thread", TB_ERR(rc));
        return rc;
    }
    broker_on_stored(g->b, kick, g->rep);
    for (size_t i = 0; i < n; i++)
        rep_engine_kick(g->rep, i); /* a backlog from before the restart */
    uint64_t every = TB_MAX(TB_MIN(1000u, cfg->health.stall_after_ms / 4), 25u);
    uv_timer_start(&g->watch, watch_cb, every, every);
    if (rep_engine_has_danube(g->rep))
        tb_info("replication started", TB_S("cluster", cfg->edge.cluster_url), TB_U("topics", n),
                TB_U("batch_size", o.batch_size), TB_U("max_inflight_batches", o.max_inflight_batches),
                TB_U("ack_timeout_ms", o.ack_timeout_ms),
                TB_B("tls", o.cluster_url && strncmp(o.cluster_url, "https://", 8) == 0),
                TB_B("token", o.token && *o.token));
    for (size_t i = 0; i < cfg->noutputs; i++) {
        const cfg_output_t *oc = &cfg->outputs[i];
        if (oc->kind == CFG_OUTPUT_DANUBE)
            continue;
        rep_output_info_t info;
        rep_output_info(g->rep, i, &info);
        tb_info("output started", TB_S("output", oc->name), TB_S("kind", cfg_output_kind_name(oc->kind)),
                TB_S("broker", oc->broker ? oc->broker : ""), TB_U("topics", info.topics), TB_U("qos", oc->qos),
                TB_U("max_inflight", oc->max_inflight), TB_B("tls", oc->has_tls));
    }
    return 0;
}

/* ---- topics at run time (a reload: RELOAD.md 2.6, 2.7) ---------------------------- */

static void encoding_of(gw_repl_t *g, const broker_topic_t *t)
{
    g->encoding[t->id] = t->schema_subject && t->encoding == CFG_ENC_JSON ? 1 : 0;
}

int gw_repl_topic_added(gw_repl_t *g, size_t id, const cfg_t *mappings, char *err, size_t errlen)
{
    *err = '\0';
    broker_topic_t *t = broker_topic(g->b, id);
    if (!t || !g->encoding)
        return TB_EINVALID;
    encoding_of(g, t);
    g->was_ready[id] = false;
    g->ntopics = broker_ntopics(g->b);
    if (!g->rep)
        return TB_ECLOSED;
    rep_topic_spec_t spec = { t->name, t->schema_subject, t->wal, t->max_age_ms, t->priority, mappings };
    return rep_engine_add_topic(g->rep, id, &spec, err, errlen);
}

void gw_repl_topic_changed(gw_repl_t *g, size_t id, bool subject)
{
    broker_topic_t *t = broker_topic(g->b, id);
    if (!t || !g->encoding)
        return;
    if (subject) {
        encoding_of(g, t);
        /* its schema block was reset (never checked against the old subject): one the registry already
         * compiled for this subject is installed at once, else the registration brings it */
        sch_lookup_t lk;
        char why[256];
        if (t->schema_subject && sch_registry_lookup(g->reg[g->encoding[id]], t->schema_subject, &lk, why,
                                                     sizeof why) == 0) {
            set_validator(t, lk.validator);
            t->has_schema = true;
            t->schema_id = lk.schema_id;
            t->schema_version = lk.schema_version;
        }
        log_readiness(g, t, "its schema subject changed: waiting for the cluster's schema");
    }
    if (g->rep) {
        rep_topic_spec_t spec = { t->name, t->schema_subject, t->wal, t->max_age_ms, t->priority, NULL };
        rep_engine_update_topic(g->rep, id, &spec);
    }
}

int gw_repl_topic_revived(gw_repl_t *g, size_t id, broker_topic_life_t before, const cfg_t *mappings, char *err,
                          size_t errlen)
{
    *err = '\0';
    return g->retire ? gw__retire_revived(g->retire, g->rep, id, before, mappings, err, errlen) : 0;
}

void gw_repl_retire_tick(gw_repl_t *g)
{
    if (g && !g->draining)
        gw__retire_tick(g->retire, g->rep);
}

int gw_repl_retire_force(gw_repl_t *g, size_t id, wal_retire_t how)
{
    return g && g->retire ? gw__retire_force(g->retire, g->rep, id, how) : TB_ECLOSED;
}

bool gw_repl_topic_forgot(gw_repl_t *g, size_t id)
{
    return g && gw__retire_forgot(g->retire, id);
}

void gw_repl_set_retire(gw_repl_t *g, cfg_retire_t how)
{
    if (g)
        gw__retire_set_mode(g->retire, how);
}

void gw_repl_retire_counts(gw_repl_t *g, gw__retire_counts_t *out)
{
    gw__retire_counts(g ? g->retire : NULL, out);
}

void gw_repl_drain(gw__app_t *app, void *arg)
{
    gw_repl_t *g = arg;
    g->app = app;
    g->draining = true;
    gw__retire_stop(g->retire);
    if (g->rep) {
        /* REP_EV_STOPPED comes back through async_cb (at once if the thread never started) */
        rep_engine_stop(g->rep);
        return;
    }
    if (g->open_handles > 0) {
        close_handles(g);
        return;
    }
    if (!gw__retire_busy(g->retire))
        gw__app_drained(app);
}
