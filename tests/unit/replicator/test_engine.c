/*
 * test_engine.c: the replication engine (replicator.h "the engine",
 * rep_int.h "the engine: outputs, their vtable, lanes") without a cluster:
 * outputs built from a configuration, `topics` filters, the kick fan-out
 * reaching the lanes, a lane's acknowledgement moving its output's cursor
 * (danube: cursor 0, the log's historic checkpoint), wal_cursors_settled at
 * start, and the seam itself: a second kind registered here (a tiny ops
 * table that acknowledges what it reads up to a limit the test sets), so
 * that two outputs carrying one topic each get every record and the topic's
 * checkpoint is the minimum of their cursors. Waits poll with a deadline or
 * wait on a condition variable with one, never sleep.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helper_rep.h"
#include "replicator/rep_spb.h"

#define OTHER_TOPIC "/edge1/other"

static const char *HEAD =
    "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - {mqtt_pattern: tele/#, danube_topic: /edge1/telemetry}\n"
    "    - {mqtt_pattern: other/#, danube_topic: /edge1/other}\n";

static cfg_t *load(const char *outputs)
{
    char *y = tb_asprintf("%s%s", HEAD, outputs ? outputs : "");
    cfg_t *c = NULL;
    char err[512] = "";
    int rc = cfg_load_string("test.yaml", y, strlen(y), NULL, &c, err, sizeof err);
    free(y);
    cr_assert_eq(rc, 0, "%s", err);
    return c;
}

/* ---- the engine's notify: counted, waited for with a deadline ---------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_wakes;

static void notify(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    g_wakes++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static bool wait_wake(int *seen, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g_mu);
    while (g_wakes == *seen)
        if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) != 0)
            break;
    bool woke = g_wakes != *seen;
    *seen = g_wakes;
    pthread_mutex_unlock(&g_mu);
    return woke;
}

/* Takes events until the engine's REP_EV_STOPPED (10 s at most); counts STOPPEDs and
 * events of output `out` (REP_EV_TOPIC_REGISTERED from the fake). */
static void drain_until_stopped(rep_engine_t *e, size_t out, int *registered_of_out)
{
    int seen = 0, stopped = 0;
    uint64_t deadline = tb_mono_ms() + 10000;
    while (stopped == 0 && tb_mono_ms() < deadline) {
        for (rep_event_t *ev = rep_engine_take_events(e), *next; ev; ev = next) {
            next = rep_event_next(ev);
            if (ev->kind == REP_EV_STOPPED)
                stopped++;
            else if (ev->kind == REP_EV_TOPIC_REGISTERED && ev->output == out && registered_of_out)
                (*registered_of_out)++;
            rep_event_free(ev);
        }
        if (!stopped)
            wait_wake(&seen, 200);
    }
    cr_assert_eq(stopped, 1, "the engine's one REP_EV_STOPPED");
    /* and never a second one */
    for (rep_event_t *ev = rep_engine_take_events(e), *next; ev; ev = next) {
        next = rep_event_next(ev);
        cr_assert_neq(ev->kind, REP_EV_STOPPED);
        rep_event_free(ev);
    }
}

/* ---- a second kind: acknowledges what it reads, up to ack_limit -------------------- */

#define FAKE_TOPICS 4

typedef struct fake {
    rep_output_t o;              /* first, as every kind */
    rep__lane_t lanes[FAKE_TOPICS];
    bool has_lane[FAKE_TOPICS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken, stopping;
    _Atomic uint64_t ack_limit;  /* acknowledge offsets up to this */
    _Atomic uint64_t seen[FAKE_TOPICS];  /* records read, per topic */
    _Atomic uint64_t last[FAKE_TOPICS];  /* the last offset read */
    _Atomic uint64_t released;
} fake_t;

static int fake_init(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen)
{
    (void)cfg;
    fake_t *f = (fake_t *)o;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    atomic_store(&f->ack_limit, UINT64_MAX);
    for (size_t i = 0; i < o->e->ntopics && i < FAKE_TOPICS; i++) {
        if (!rep__output_takes(o, i))
            continue;
        int rc = rep__lane_init(&f->lanes[i], o, i, o->e->topics[i].name, o->e->topics[i].wal, 1, 1024,
                                WAL_START_EARLIEST);
        if (rc < 0) {
            snprintf(err, errlen, "fake: cursor: %s", tb_strerror(rc));
            return rc;
        }
        f->has_lane[i] = true;
    }
    return 0;
}

static void fake_wake(rep_output_t *o)
{
    fake_t *f = (fake_t *)o;
    pthread_mutex_lock(&f->mu);
    f->woken = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    for (size_t i = 0; i < FAKE_TOPICS; i++) {
        if (!f->has_lane[i])
            continue;
        rep_event_t *ev = tb_calloc(1, sizeof *ev);
        ev->kind = REP_EV_TOPIC_REGISTERED;
        ev->topic = i;
        rep__output_post(&f->o, ev);
    }
    for (;;) {
        pthread_mutex_lock(&f->mu);
        while (!f->woken)
            pthread_cond_wait(&f->cv, &f->mu); /* every command wakes it (fake_wake) */
        f->woken = false;
        pthread_mutex_unlock(&f->mu);
        rep__output_drain(&f->o);
        if (f->stopping)
            break;
    }
    for (size_t i = 0; i < FAKE_TOPICS; i++)
        if (f->has_lane[i])
            rep__lane_publish(&f->lanes[i]);
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__output_post(&f->o, ev);
    return NULL;
}

static void fake_kicked(rep_output_t *o, rep__lane_t *l)
{
    fake_t *f = (fake_t *)o;
    wal_record_t rec;
    while (l->win.n < l->win.cap && rep__lane_next(l, &rec, tb_wall_ms()) == 0) {
        atomic_fetch_add(&f->seen[l->topic], 1);
        atomic_store(&f->last[l->topic], rec.offset);
        rep__batch_t *b = rep__window_push(&l->win); /* one record a unit, as the mqtt kind will */
        b->first = b->last = rec.offset;
        b->count = 1;
        b->count_new = rec.offset >= l->st.start_offset;
        rep__window_mark_sending(&l->win, b, tb_mono_ms());
        rep__window_mark_sent(&l->win, b);
    }
    uint64_t limit = atomic_load(&f->ack_limit);
    for (uint32_t i = 0; i < l->win.n; i++) {
        rep__batch_t *b = rep__window_at(&l->win, i);
        if (b->state == REP__B_SENT && b->last <= limit)
            rep__window_ack(&l->win, b->last);
    }
    rep__lane_acked(l);
    rep__lane_publish(l);
}

static void fake_stop(rep_output_t *o)
{
    ((fake_t *)o)->stopping = true;
}

static int fake_reconfigure(rep_output_t *o, const rep_output_cfg_t *next)
{
    (void)o;
    (void)next;
    return TB_EUNSUPPORTED;
}

static void fake_release(rep_output_t *o, rep__batch_t *b)
{
    (void)b;
    atomic_fetch_add(&((fake_t *)o)->released, 1);
}

static void fake_fini(rep_output_t *o)
{
    fake_t *f = (fake_t *)o;
    for (size_t i = 0; i < FAKE_TOPICS; i++)
        if (f->has_lane[i])
            rep__lane_fini(&f->lanes[i]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

static const rep_output_ops_t fake_ops = {
    .kind = REP_KIND_MQTT,
    .name = "fake",
    .size = sizeof(fake_t),
    .init = fake_init,
    .main = fake_main,
    .wake = fake_wake,
    .lane_kicked = fake_kicked,
    .stop = fake_stop,
    .reconfigure = fake_reconfigure,
    .release = fake_release,
    .fini = fake_fini,
};

static rep_engine_t *engine(rt_t *h, const cfg_t *c, wal_topic_t *other)
{
    rep_topic_spec_t specs[2] = { { RT_TOPIC, NULL, h->t, 0, 0, NULL }, { OTHER_TOPIC, NULL, other, 0, 0, NULL } };
    rep_engine_opts_t eo = { .cfg = c, .wal = h->w, .topics = specs, .ntopics = other ? 2 : 1,
                             .notify = notify, .notify_arg = NULL };
    rep_engine_t *e = NULL;
    char err[512] = "";
    cr_assert_eq(rep_engine_new(&eo, &e, err, sizeof err), 0, "%s", err);
    return e;
}

static void stop_and_free(rep_engine_t *e)
{
    rep_engine_stop(e);
    drain_until_stopped(e, SIZE_MAX, NULL);
    rep_engine_free(e);
}

/* polls the lane stats of (out, topic) until acked_offset >= acked, for up to 10 s */
static bool lane_until(rep_engine_t *e, size_t out, size_t topic, uint64_t acked)
{
    uint64_t deadline = tb_mono_ms() + 10000;
    rep_topic_stats_t st;
    do {
        rep_lane_stats(e, out, topic, &st);
        if (st.acked_offset >= acked)
            return true;
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL); /* polling a published value, bounded by the deadline */
    } while (tb_mono_ms() < deadline);
    return false;
}

/* ---- the tests ------------------------------------------------------------------------ */

Test(engine, the_implied_danube_output_carries_every_topic_on_cursor_0_and_its_acks_move_it)
{
    rt_t h;
    rt_open(&h);
    cfg_t *c = load(NULL);
    rt_append_n(&h, 3, 10);
    rep_engine_t *e = engine(&h, c, NULL);
    cr_assert_eq(rep_engine_noutputs(e), 1);
    rep_output_info_t info;
    rep_output_info(e, 0, &info);
    cr_assert_str_eq(info.name, "danube");
    cr_assert_eq(info.kind, REP_KIND_DANUBE);
    cr_assert_eq(info.topics, 1);
    cr_assert(rep_output_carries(e, 0, 0));
    cr_assert_eq(rep_engine_primary(e, 0), 0);
    cr_assert(rep_engine_has_danube(e));
    rep_output_t *o = e->outs[0];
    cr_assert_eq(o->wal_id, 0, "danube is output id 0 in every log");
    rep__lane_t *l = o->lanes[0];
    cr_assert_not_null(l);
    cr_assert_not_null(l->cur);
    cr_assert_eq(l->win.acked, 0);

    /* the lane's ack path on Danube's lane (no thread runs: the engine is not started):
     * a unit 1..3 acknowledged moves cursor 0, which is the topic's checkpoint */
    rep__batch_t *b = rep__window_push(&l->win);
    b->first = 1;
    b->last = 3;
    b->count = b->count_new = 3;
    rep__window_mark_sending(&l->win, b, tb_mono_ms());
    rep__window_mark_sent(&l->win, b);
    cr_assert_eq(rep__window_ack(&l->win, 3), REP__ACK_IN_ORDER);
    rep__lane_acked(l);
    cr_assert_eq(wal_cursor_checkpoint(l->cur), 3);
    cr_assert_eq(wal_topic_checkpoint(h.t), 3, "slot 0 is the topic's checkpoint");
    rep_topic_stats_t st;
    rep_lane_stats(e, 0, 0, &st);
    cr_assert_eq(st.acked_offset, 3);
    cr_assert_eq(st.messages_acked, 3);
    cr_assert_eq(st.batches_acked, 1);
    rep_output_stats_t os;
    rep_output_stats(e, 0, &os);
    cr_assert_eq(os.kind, REP_KIND_DANUBE);
    cr_assert_eq(os.topics, 1);
    cr_assert_eq(os.messages_acked, 3);
    cr_assert_eq(os.danube.cluster, REP_CLUSTER_CONNECTING);

    rep_engine_stop(e); /* never started: STOPPED at once */
    drain_until_stopped(e, SIZE_MAX, NULL);
    rep_engine_free(e);
    /* the checkpoint was slot 0's: it is there after a restart */
    rt_reopen(&h);
    cr_assert_eq(wal_topic_checkpoint(h.t), 3);
    cfg_free(c);
    rt_close(&h);
}

Test(engine, a_kind_this_build_lacks_is_refused_naming_the_output)
{
    const rep_output_ops_t *saved = rep__kinds[REP_KIND_SPARKPLUG];
    rep__kinds[REP_KIND_SPARKPLUG] = NULL; /* a build without the kind */
    rt_t h;
    rt_open(&h);
    cfg_t *c = load("outputs:\n"
                    "  - name: scada\n"
                    "    kind: sparkplug\n"
                    "    broker: \"127.0.0.1:1\"\n"
                    "    group_id: G\n");
    rep_topic_spec_t spec = { RT_TOPIC, NULL, h.t, 0, 0, NULL };
    rep_engine_opts_t eo = { .cfg = c, .wal = h.w, .topics = &spec, .ntopics = 1 };
    rep_engine_t *e = (rep_engine_t *)1;
    char err[512] = "";
    int rc = rep_engine_new(&eo, &e, err, sizeof err);
    rep__kinds[REP_KIND_SPARKPLUG] = saved;
    cr_assert_eq(rc, TB_ECONFIG);
    cr_assert_null(e);
    cr_assert(strstr(err, "outputs[scada].kind") && strstr(err, "sparkplug"), "%s", err);
    cfg_free(c);
    rt_close(&h);
}

/* The Sparkplug kind (rep_sparkplug.c) is in the table: built with its session and a lane per
 * topic; with its broker unreachable it stops at once when asked (no session: no NDEATH to
 * send), its stats say sparkplug with the session's bdSeq and phase, and the bdSeq the attempts
 * took was persisted (wal_output_state "bdseq") so a new engine reads it back. */
Test(engine, a_sparkplug_output_runs_its_session_and_persists_its_bdseq, .timeout = 60)
{
    rt_t h;
    rt_open(&h);
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(h.w, OTHER_TOPIC, &other), 0);
    cfg_t *c = load("replicator: {retry_initial_ms: 50, retry_max_ms: 100}\n"
                    "outputs:\n"
                    "  - name: scada\n"
                    "    kind: sparkplug\n"
                    "    broker: \"127.0.0.1:1\"\n"
                    "    group_id: G\n"
                    "    device: \"d1\"\n"
                    "    topics: [\"/edge1/telemetry\"]\n");
    rep_engine_t *e = engine(&h, c, other);
    cr_assert_eq(rep_engine_noutputs(e), 1); /* outputs given: no implied danube entry */
    size_t sp = SIZE_MAX;
    for (size_t i = 0; i < rep_engine_noutputs(e); i++) {
        rep_output_info_t info;
        rep_output_info(e, i, &info);
        if (strcmp(info.name, "scada") == 0)
            sp = i;
    }
    cr_assert_neq(sp, SIZE_MAX);
    cr_assert(rep_output_carries(e, sp, 0));
    cr_assert_not(rep_output_carries(e, sp, 1));
    rep_output_stats_t os;
    rep_output_stats(e, sp, &os);
    cr_assert_eq(os.kind, REP_KIND_SPARKPLUG);
    cr_assert(os.sparkplug.valid);
    cr_assert_str_eq(os.sparkplug.phase, "down");
    cr_assert_eq(os.sparkplug.connects, 0);
    cr_assert_eq(rep_engine_start(e), 0);
    /* a few attempts at the closed port: each takes a bdSeq (persisted before its CONNECT) */
    uint64_t deadline = tb_mono_ms() + 20000;
    do {
        rep_output_stats(e, sp, &os);
        if (os.sparkplug.connects >= 3)
            break;
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL); /* polling a published value, bounded by the deadline */
    } while (tb_mono_ms() < deadline);
    cr_assert_geq(os.sparkplug.connects, 3, "attempts: %u (%s)", os.sparkplug.connects, os.last_error);
    cr_assert_eq(os.sparkplug.nbirths, 0);
    stop_and_free(e);
    void *blob = NULL;
    size_t n = 0;
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, "scada", &id), 0);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &blob, &n), 0);
    cr_assert_eq(n, REP_SPB_BDSEQ_BLOB);
    free(blob);
    /* a new engine continues from the stored bdSeq */
    e = engine(&h, c, other);
    rep_output_stats(e, sp, &os);
    cr_assert_geq(os.sparkplug.connects, 3, "the stored attempts are read back");
    rep_engine_free(e);
    cfg_free(c);
    rt_close(&h);
}

Test(engine, topics_filters_decide_the_lanes_and_kicks_reach_every_output_carrying_the_topic)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(h.w, OTHER_TOPIC, &other), 0);
    cfg_t *c = load("outputs:\n"
                    "  - {name: danube, kind: danube, topics: [\"/edge1/telemetry\"]}\n"
                    "  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/#\"]}\n"
                    "  - {name: fb, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/+/other\"]}\n");
    rt_append_n(&h, 5, 10);
    rep_engine_t *e = engine(&h, c, other);
    cr_assert_eq(rep_engine_noutputs(e), 3);
    /* danube: telemetry only; fa: both ("#"); fb: other only ("+" one level) */
    cr_assert(rep_output_carries(e, 0, 0));
    cr_assert_not(rep_output_carries(e, 0, 1));
    cr_assert(rep_output_carries(e, 1, 0));
    cr_assert(rep_output_carries(e, 1, 1));
    cr_assert_not(rep_output_carries(e, 2, 0));
    cr_assert(rep_output_carries(e, 2, 1));
    cr_assert_eq(rep_engine_primary(e, 0), 0);
    cr_assert_eq(rep_engine_primary(e, 1), 1);
    rep_output_info_t info;
    rep_output_info(e, 2, &info);
    cr_assert_str_eq(info.name, "fb");
    cr_assert_eq(info.kind, REP_KIND_MQTT);
    cr_assert_eq(info.topics, 1);
    fake_t *fa = (fake_t *)e->outs[1], *fb = (fake_t *)e->outs[2];
    cr_assert_neq(e->outs[1]->wal_id, 0);
    cr_assert_neq(e->outs[1]->wal_id, e->outs[2]->wal_id, "each output its own cursor id");

    cr_assert_eq(rep_engine_start(e), 0);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 1, 0, 5), "fa read and acknowledged telemetry 1..5");
    cr_assert_eq(atomic_load(&fa->seen[0]), 5);
    cr_assert_eq(atomic_load(&fb->seen[0]), 0, "fb does not carry telemetry");
    /* danube carries telemetry too and has no cluster: its cursor 0 holds the minimum */
    cr_assert_eq(wal_topic_checkpoint(h.t), 0, "the minimum over danube (0) and fa (5)");

    /* other: fa and fb each get every record; fb acknowledges only up to 1 */
    atomic_store(&fb->ack_limit, 1);
    wal_topic_t *tele = h.t;
    h.t = other; /* rt_append_n appends to h.t */
    rt_append_n(&h, 3, 10);
    h.t = tele;
    rep_engine_kick(e, 1);
    cr_assert(lane_until(e, 1, 1, 3));
    cr_assert(lane_until(e, 2, 1, 1));
    cr_assert_eq(atomic_load(&fa->seen[1]), 3);
    cr_assert_eq(atomic_load(&fb->seen[1]), 3);
    cr_assert_eq(atomic_load(&fa->last[1]), 3);
    cr_assert_eq(atomic_load(&fb->last[1]), 3);
    /* other's slot 0 was parked at start (danube does not carry it): the min is fb's */
    cr_assert_eq(wal_topic_checkpoint(other), 1, "the minimum over fa (3) and fb (1)");
    atomic_store(&fb->ack_limit, UINT64_MAX);
    rep_engine_kick(e, 1);
    cr_assert(lane_until(e, 2, 1, 3));
    cr_assert_eq(wal_topic_checkpoint(other), 3, "fb's lane acked 3 after its cursor moved");
    rep_output_stats_t os;
    rep_output_stats(e, 1, &os);
    cr_assert_eq(os.messages_acked, 8);
    cr_assert_eq(os.topics, 2);

    rep_engine_stop(e);
    int registered = 0;
    drain_until_stopped(e, 2, &registered);
    cr_assert_eq(registered, 1, "fb's event came tagged with its output");
    cr_assert_eq(atomic_load(&fa->released), 8);
    rep_engine_free(e);
    cfg_free(c);
    rt_close(&h);
}

/* Events until n REP_EV_TOPIC_RELEASED of topic came (10 s at most); their outputs in *outs (bit set). */
static int take_released(rep_engine_t *e, size_t topic, int n, unsigned *outs)
{
    int got = 0, seen = 0;
    uint64_t deadline = tb_mono_ms() + 10000;
    while (got < n && tb_mono_ms() < deadline) {
        for (rep_event_t *ev = rep_engine_take_events(e), *next; ev; ev = next) {
            next = rep_event_next(ev);
            if (ev->kind == REP_EV_TOPIC_RELEASED && ev->topic == topic) {
                got++;
                *outs |= 1u << ev->output;
            }
            rep_event_free(ev);
        }
        if (got < n)
            wait_wake(&seen, 200);
    }
    return got;
}

Test(engine, a_released_topic_lets_go_of_its_log_on_every_output_and_can_be_retired)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(h.w, OTHER_TOPIC, &other), 0);
    cfg_t *c = load("outputs:\n"
                    "  - {name: danube, kind: danube, topics: [\"/edge1/telemetry\"]}\n"
                    "  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/#\"]}\n"
                    "  - {name: fb, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/+/other\"]}\n");
    rep_engine_t *e = engine(&h, c, other);
    fake_t *fa = (fake_t *)e->outs[1];
    cr_assert_eq(rep_engine_start(e), 0);
    wal_topic_t *tele = h.t;
    h.t = other;
    rt_append_n(&h, 3, 10);
    rep_engine_kick(e, 1);
    cr_assert(lane_until(e, 1, 1, 3));
    cr_assert(lane_until(e, 2, 1, 3));
    cr_assert_eq(wal_topic_checkpoint(other), 3, "drained: both outputs acknowledged 1..3");
    cr_assert_not(rep_engine_released(e, 1));

    cr_assert_eq(rep_engine_release_topic(e, 1), 2, "the two outputs that carry it are told");
    unsigned outs = 0;
    cr_assert_eq(take_released(e, 1, 2, &outs), 2, "each answers once");
    cr_assert_eq(outs, (1u << 1) | (1u << 2));
    cr_assert(rep_engine_released(e, 1));
    cr_assert_eq(rep_engine_release_topic(e, 1), 0, "released already: nothing to wait for");
    cr_assert(rep_engine_released(e, 0) == false, "telemetry is not touched");
    rep_topic_stats_t st;
    rep_lane_stats(e, 1, 1, &st);
    cr_assert_eq(st.state, REP_TOPIC_STOPPED);
    cr_assert_eq(st.acked_offset, 3);
    cr_assert_eq(st.messages_acked, 3, "its counters stay");

    /* nothing reads it again: a record appended and kicked is not seen */
    rt_append_n(&h, 1, 10);
    rep_engine_kick(e, 1);
    h.t = tele;
    rt_append_n(&h, 2, 10);
    rep_engine_kick(e, 0); /* queued after the kick of 1 on fa's thread: once 0 is acked, 1's was seen */
    cr_assert(lane_until(e, 1, 0, 2));
    cr_assert_eq(atomic_load(&fa->seen[1]), 3, "the released lane reads nothing more");
    /* its cursors are closed: the log may retire it (4 is not acknowledged: FORGET's count) */
    wal_retired_t entry;
    cr_assert_eq(wal_topic_retire(other, WAL_RETIRE_FORGET, &entry), 0);
    cr_assert_eq(entry.next, 5);
    cr_assert_eq(entry.checkpoint, 3);
    cr_assert_eq(entry.forgotten, 1);
    stop_and_free(e);
    cfg_free(c);
    rt_close(&h);
}

Test(engine, start_settles_the_cursors_so_a_removed_outputs_slot_stops_holding_the_log)
{
    rt_t h;
    rt_open(&h);
    /* an earlier configuration had an output "old" that acknowledged nothing */
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, "old", &id), 0);
    cr_assert_neq(id, 0);
    wal_cursor_t *old;
    wal_cursor_opts_t co = { .start = WAL_START_EARLIEST };
    cr_assert_eq(wal_cursor_open(h.t, id, &co, &old), 0);
    rt_append_n(&h, 4, 10);
    cr_assert_eq(wal_checkpoint(h.t, 4), 0);
    cr_assert_eq(wal_topic_checkpoint(h.t), 0);
    wal_cursor_close(old);
    rt_reopen(&h); /* a restart: every persisted slot is waited for until settled */
    cr_assert_eq(wal_topic_checkpoint(h.t), 0);

    cfg_t *c = load(NULL);
    rep_engine_t *e = engine(&h, c, NULL);
    cr_assert_eq(e->outs[0]->lanes[0]->win.acked, 4, "danube resumes from its own cursor");
    cr_assert_eq(wal_topic_checkpoint(h.t), 0, "not settled before start");
    cr_assert_eq(rep_engine_start(e), 0);
    cr_assert_eq(wal_topic_checkpoint(h.t), 4, "old's slot is parked: the min is danube's");
    stop_and_free(e);
    cfg_free(c);
    rt_close(&h);
}

Test(engine, a_lane_restart_resends_from_its_checkpoint_in_order)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    cfg_t *c = load("outputs:\n  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\"}\n");
    rt_append_n(&h, 5, 10);
    rep_engine_t *e = engine(&h, c, NULL);
    fake_t *fa = (fake_t *)e->outs[0];
    rep__lane_t *l = e->outs[0]->lanes[0];
    cr_assert_eq(l->win.acked, 0, "a new slot at EARLIEST: everything on disk is to be sent");
    /* not started: the test is the output's thread */
    atomic_store(&fa->ack_limit, 2);
    fake_kicked(&fa->o, l);
    cr_assert_eq(atomic_load(&fa->seen[0]), 5);
    cr_assert_eq(l->win.acked, 2);
    cr_assert_eq(l->win.n, 3, "3..5 in flight");
    cr_assert_eq(wal_cursor_checkpoint(l->cur), 2);
    cr_assert_eq(atomic_load(&fa->released), 2);
    /* the session is lost: the window goes (released), the reader reopens at 3 */
    rep__lane_restart(l);
    cr_assert_eq(l->win.n, 0);
    cr_assert_eq(atomic_load(&fa->released), 5);
    atomic_store(&fa->ack_limit, UINT64_MAX);
    fake_kicked(&fa->o, l);
    cr_assert_eq(atomic_load(&fa->seen[0]), 8, "3, 4, 5 read again");
    cr_assert_eq(atomic_load(&fa->last[0]), 5);
    cr_assert_eq(l->win.acked, 5);
    rep_topic_stats_t st;
    rep_lane_stats(e, 0, 0, &st);
    cr_assert_eq(st.messages_acked, 5);
    /* slot 0 (danube's, not configured) still holds the topic until the start settles it */
    cr_assert_eq(wal_topic_checkpoint(h.t), 0);
    cr_assert_eq(rep_engine_start(e), 0); /* the fake's thread owns the lane from here */
    cr_assert_eq(wal_topic_checkpoint(h.t), 5, "fa's cursor is the only one waited for");
    stop_and_free(e);
    cfg_free(c);
    rt_close(&h);
}

/* rep_pause.c: a pause reaches every output carrying the topic through the lane's kick; a kind
 * reading with rep__lane_next reads nothing while paused, and the resume reads on in order. */
Test(engine, a_paused_topic_is_read_by_no_output_and_resume_reads_on_in_order)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(h.w, OTHER_TOPIC, &other), 0);
    cfg_t *c = load("outputs:\n"
                    "  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\"}\n"
                    "  - {name: fb, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/telemetry\"]}\n");
    rep_engine_t *e = engine(&h, c, other);
    fake_t *fa = (fake_t *)e->outs[0], *fb = (fake_t *)e->outs[1];
    cr_assert_eq(rep_engine_start(e), 0);
    cr_assert_eq(rep_engine_pause(e, 2, true), TB_EINVALID, "out of range");
    cr_assert_not(rep_engine_paused(e, 2));
    cr_assert_eq(rep_engine_pause(e, 0, true), 2, "telemetry: fa and fb carry it");
    cr_assert_eq(rep_engine_pause(e, 0, true), 2, "idempotent");
    cr_assert(rep_engine_paused(e, 0));
    cr_assert_not(rep_engine_paused(e, 1));

    rt_append_n(&h, 5, 10); /* telemetry 1..5 */
    wal_topic_t *tele = h.t;
    h.t = other;
    rt_append_n(&h, 3, 10); /* other 1..3 */
    h.t = tele;
    rep_engine_kick(e, 0);
    rep_engine_kick(e, 1);
    cr_assert(lane_until(e, 0, 1, 3), "the other topic flows on fa");
    rep_topic_stats_t st;
    rep_lane_stats(e, 0, 0, &st);
    cr_assert(st.paused);
    cr_assert_eq(st.acked_offset, 0);
    cr_assert_eq(st.lag_messages, 5, "the log holds them");
    cr_assert_not(st.stalled, "paused is never stalled");
    rep_lane_stats(e, 1, 0, &st);
    cr_assert(st.paused, "fb's lane too");
    cr_assert_eq(atomic_load(&fa->seen[0]) + atomic_load(&fb->seen[0]), 0, "nothing read while paused");

    cr_assert_eq(rep_engine_pause(e, 0, false), 2);
    cr_assert(lane_until(e, 0, 0, 5), "fa reads on after the resume");
    cr_assert(lane_until(e, 1, 0, 5), "fb too");
    cr_assert_eq(atomic_load(&fa->seen[0]), 5);
    cr_assert_eq(atomic_load(&fa->last[0]), 5, "in order, the last one last");
    rep_lane_stats(e, 0, 0, &st);
    cr_assert_not(st.paused);
    cr_assert_eq(st.lag_messages, 0);
    stop_and_free(e);
    cfg_free(c);
    rt_close(&h);
}

/* Events until output `name`'s removal finished (rep_output_info's removed and its thread joined)
 * and, when `then` is set, an output of that name runs again; 10 s at most. */
static size_t take_until_removed(rep_engine_t *e, const char *name, bool then)
{
    int seen = 0;
    uint64_t deadline = tb_mono_ms() + 10000;
    while (tb_mono_ms() < deadline) {
        for (rep_event_t *ev = rep_engine_take_events(e), *next; ev; ev = next) {
            next = rep_event_next(ev);
            rep_event_free(ev);
        }
        size_t gone = SIZE_MAX, again = SIZE_MAX;
        for (size_t i = 0; i < rep_engine_noutputs(e); i++) {
            rep_output_info_t info;
            rep_output_info(e, i, &info);
            if (strcmp(info.name, name) != 0)
                continue;
            if (info.removed && atomic_load(&e->outs[i]->life) == REP__OUT_REMOVED)
                gone = i;
            else if (!info.removed)
                again = i;
        }
        if (gone != SIZE_MAX && (!then || again != SIZE_MAX))
            return then ? again : gone;
        wait_wake(&seen, 200);
    }
    cr_assert_fail("output %s: its removal did not finish", name);
    return SIZE_MAX;
}

/* A reload adds an output (OUTPUTS.md 3.4): it starts, reads what waits for it from its slot,
 * and kicks reach it; removing one parks its cursor (the topic's checkpoint no longer waits for
 * it, its own is kept) and re-adding the name resumes from that checkpoint, in order. */
Test(engine, outputs_added_and_removed_at_run_time_resume_from_their_checkpoints)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    cfg_t *c1 = load("outputs:\n"
                     "  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/telemetry\"]}\n");
    cfg_t *c2 = load("outputs:\n"
                     "  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/telemetry\"]}\n"
                     "  - {name: fb, kind: mqtt, broker: \"127.0.0.1:1\", topics: [\"/edge1/telemetry\"]}\n");
    rep_engine_t *e = engine(&h, c1, NULL);
    cr_assert_eq(rep_engine_start(e), 0);
    char err[512];
    cr_assert_eq(rep_engine_add_output(e, c2, "fa", err, sizeof err), TB_EINVALID, "fa runs already");
    rt_append_n(&h, 4, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 0, 0, 4));

    /* added: its lane reads the log from its slot (the fake opens it at the earliest offset) */
    cr_assert_eq(rep_engine_add_output(e, c2, "fb", err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep_engine_noutputs(e), 2);
    fake_t *fb = (fake_t *)e->outs[1];
    cr_assert(lane_until(e, 1, 0, 4), "fb read what waited for it, with no kick of ours");
    rt_append_n(&h, 2, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 1, 0, 6), "kicks reach the added output");
    cr_assert(lane_until(e, 0, 0, 6));
    cr_assert_eq(atomic_load(&fb->seen[0]), 6);

    /* fb holds at 6 while fa goes on: the topic's checkpoint is fb's */
    atomic_store(&fb->ack_limit, 6);
    rt_append_n(&h, 3, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 0, 0, 9));
    cr_assert_eq(wal_topic_checkpoint(h.t), 6, "the minimum over fa (9) and fb (6)");

    /* removed: it stops, its cursor is parked, the checkpoint is fa's alone */
    cr_assert_eq(rep_engine_remove_output(e, "fb"), 0);
    cr_assert_eq(rep_engine_remove_output(e, "nope"), -ENOENT);
    cr_assert_eq(take_until_removed(e, "fb", false), 1);
    cr_assert_eq(wal_topic_checkpoint(h.t), 9, "a parked slot is not waited for");
    cr_assert_eq(rep_engine_primary(e, 0), 0);
    rep_output_info_t info;
    rep_output_info(e, 1, &info);
    cr_assert(info.removed);
    rep_engine_kick(e, 0); /* reaches no removed output */

    /* re-added: a new instance, resuming at fb's checkpoint + 1 (7, 8, 9 and what came since) */
    rt_append_n(&h, 1, 10);
    cr_assert_eq(rep_engine_add_output(e, c2, "fb", err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep_engine_noutputs(e), 3);
    fake_t *fb2 = (fake_t *)e->outs[2];
    cr_assert(lane_until(e, 2, 0, 10), "the new fb resumed and acknowledged up to 10");
    cr_assert_eq(atomic_load(&fb2->seen[0]), 4, "7..10 only: it resumed from the parked checkpoint (6)");
    cr_assert_eq(e->outs[2]->wal_id, e->outs[1]->wal_id, "the same slot");
    stop_and_free(e);
    cfg_free(c2);
    cfg_free(c1);
    rt_close(&h);
}

/* A replace (a connection key changed): the old instance is removed and the new one asked at
 * once; it starts only after the old stopped (the slot's cursor is the old one's until then),
 * from the old one's checkpoint; the cfg it needs is kept meanwhile (cfg_ref). */
Test(engine, a_replaced_output_starts_after_the_old_one_stopped_from_its_checkpoint)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    cfg_t *c1 = load("outputs:\n  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\"}\n");
    cfg_t *c2 = load("outputs:\n  - {name: fa, kind: mqtt, broker: \"127.0.0.1:2\"}\n");
    rep_engine_t *e = engine(&h, c1, NULL);
    cr_assert_eq(rep_engine_start(e), 0);
    fake_t *fa = (fake_t *)e->outs[0];
    atomic_store(&fa->ack_limit, 3);
    rt_append_n(&h, 5, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 0, 0, 3));
    char err[512];
    cr_assert_eq(rep_engine_remove_output(e, "fa"), 0);
    cr_assert_eq(rep_engine_add_output(e, c2, "fa", err, sizeof err), 1, "waits for the old one: %s", err);
    cfg_free(c2); /* the caller's copy goes (a later reload): the engine keeps its own reference */
    size_t i = take_until_removed(e, "fa", true);
    cr_assert_eq(i, 1);
    fake_t *fa2 = (fake_t *)e->outs[1];
    cr_assert(lane_until(e, 1, 0, 5), "the new instance resumed at 4");
    cr_assert_eq(atomic_load(&fa2->seen[0]), 2, "4 and 5 only");
    stop_and_free(e);
    cfg_free(c1);
    rt_close(&h);
}

/* A danube output is added or removed by a restart; so is one past the run-time room. */
Test(engine, a_danube_output_is_not_added_or_removed_at_run_time)
{
    rt_t h;
    rt_open(&h);
    cfg_t *c = load(NULL);
    rep_engine_t *e = engine(&h, c, NULL);
    cr_assert_eq(rep_engine_start(e), 0);
    char err[512];
    cr_assert_eq(rep_engine_remove_output(e, "danube"), TB_EUNSUPPORTED);
    cr_assert_eq(rep_engine_add_output(e, c, "danube", err, sizeof err), TB_EUNSUPPORTED);
    cr_assert(strstr(err, "restart"), "%s", err);
    stop_and_free(e);
    cfg_free(c);
    rt_close(&h);
}

/* An output added while a topic is retired makes no lane for it (the retirement's "released"
 * holds, and the topic can be given again to every output), and a replaced output's counters go
 * on from its predecessor's. */
Test(engine, an_added_output_skips_a_retired_topic_and_a_replace_carries_the_counters)
{
    rep__kinds[REP_KIND_MQTT] = &fake_ops;
    rt_t h;
    rt_open(&h);
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(h.w, OTHER_TOPIC, &other), 0);
    cfg_t *c1 = load("outputs:\n  - {name: fa, kind: mqtt, broker: \"127.0.0.1:1\"}\n");
    cfg_t *c2 = load("outputs:\n  - {name: fa, kind: mqtt, broker: \"127.0.0.1:2\"}\n"
                     "  - {name: fb, kind: mqtt, broker: \"127.0.0.1:1\"}\n");
    rep_engine_t *e = engine(&h, c1, other);
    cr_assert_eq(rep_engine_start(e), 0);
    rt_append_n(&h, 3, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, 0, 0, 3));
    cr_assert_eq(rep_engine_release_topic(e, 1), 1);
    unsigned outs = 0;
    cr_assert_eq(take_released(e, 1, 1, &outs), 1);
    char err[512];
    cr_assert_eq(rep_engine_add_output(e, c2, "fb", err, sizeof err), 0, "%s", err);
    cr_assert(rep_output_carries(e, 1, 0));
    cr_assert_not(rep_output_carries(e, 1, 1), "no lane on the retired topic");
    cr_assert(rep_engine_released(e, 1), "the retirement may go on");
    rep_topic_spec_t spec = { OTHER_TOPIC, NULL, other, 0, 0, NULL };
    cr_assert_eq(rep_engine_readd_topic(e, 1, &spec, err, sizeof err), TB_EUNSUPPORTED,
                 "given again: the fake kind has no run-time topics (%s)", err);

    /* fa replaced: its lane of telemetry carries messages_acked 3 into the new instance */
    cr_assert_eq(rep_engine_remove_output(e, "fa"), 0);
    cr_assert_eq(rep_engine_add_output(e, c2, "fa", err, sizeof err), 1, "%s", err);
    size_t i = take_until_removed(e, "fa", true);
    rt_append_n(&h, 2, 10);
    rep_engine_kick(e, 0);
    cr_assert(lane_until(e, i, 0, 5));
    rep_topic_stats_t st;
    rep_lane_stats(e, i, 0, &st);
    cr_assert_eq(st.messages_acked, 5, "3 by the old instance, 2 by the new: %llu",
                 (unsigned long long)st.messages_acked);
    cr_assert_neq(rep_engine_primary(e, 0), 0, "not the removed instance");
    stop_and_free(e);
    cfg_free(c2);
    cfg_free(c1);
    rt_close(&h);
}
