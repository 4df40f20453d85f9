/*
 * test_stats.c: what rep_topic_stats tells the operator while the cluster
 * is away (127.0.0.1:1: loopback, nothing listens): the stall (messages
 * waiting and no ack progress for stall_after_ms, counted from when they
 * began to wait) and lag_bytes (the waiting records' bytes on disk).
 * Stats have no notification, so tests poll them against a deadline.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "helper_rep.h"
#include "wal/wal_format.h"

static void nop(void *arg)
{
    (void)arg;
}

static rep_t *start(rt_t *h, uint32_t stall_after_ms, rep_topic_spec_t *spec)
{
    rep_opts_t o;
    rep_opts_default(&o);
    o.edge_name = "edge1";
    o.cluster_url = "http://127.0.0.1:1";
    o.stall_after_ms = stall_after_ms;
    *spec = (rep_topic_spec_t){ RT_TOPIC, NULL, h->t, 0, 0, NULL };
    o.topics = spec;
    o.ntopics = 1;
    o.notify = nop;
    rep_t *r;
    char err[256];
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep_start(r), 0);
    return r;
}

static void stop(rep_t *r)
{
    rep_stop(r);
    rep_free(r); /* joins the thread */
}

typedef bool (*pred_t)(const rep_topic_stats_t *st, void *arg);

/* Polls topic 0's stats every millisecond until pred holds or 10 s pass. */
static rep_topic_stats_t poll_until(rep_t *r, pred_t pred, void *arg)
{
    uint64_t until = tb_mono_ms() + 10000;
    rep_topic_stats_t st;
    for (;;) {
        rep_topic_stats(r, 0, &st);
        if (pred(&st, arg) || tb_mono_ms() > until)
            return st;
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
}

static bool is_stalled(const rep_topic_stats_t *st, void *arg)
{
    (void)arg;
    return st->stalled;
}

static bool has_lag_bytes(const rep_topic_stats_t *st, void *arg)
{
    (void)arg;
    return st->lag_bytes > 0;
}

Test(stats, waiting_messages_without_acks_are_stalled_after_stall_after_ms)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 10, 10);
    uint64_t t0 = tb_mono_ms();
    rep_topic_spec_t spec;
    rep_t *r = start(&h, 1000, &spec);
    rep_topic_stats_t st;
    rep_topic_stats(r, 0, &st);
    if (tb_mono_ms() - t0 < 1000) /* (a machine this slow proves nothing here) */
        cr_assert_not(st.stalled, "not before stall_after_ms");
    st = poll_until(r, is_stalled, NULL);
    cr_assert(st.stalled);
    cr_assert_geq(tb_mono_ms() - t0, 1000, "stalled only once stall_after_ms passed");
    cr_assert_geq(st.no_progress_ms, 1000);
    cr_assert_eq(st.lag_messages, 10);
    stop(r);
    rt_close(&h);
}

Test(stats, lag_bytes_are_the_waiting_records_on_disk)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 10, 10);
    rep_topic_spec_t spec;
    rep_t *r = start(&h, 30000, &spec);
    rep_kick(r, 0); /* as the loop does at start: the replicator looks at the backlog */
    rep_topic_stats_t st = poll_until(r, has_lag_bytes, NULL);
    wal_topic_stats_t ws;
    wal_topic_stats(h.t, &ws);
    cr_assert_eq(st.lag_bytes, ws.bytes - WAL_SEG_HDR_SIZE, "every record after the checkpoint, no header");
    rt_append_n(&h, 5, 10);
    rep_topic_stats(r, 0, &st);
    wal_topic_stats(h.t, &ws);
    cr_assert_eq(st.lag_bytes, ws.bytes - WAL_SEG_HDR_SIZE, "what arrives later counts at once");
    stop(r);
    rt_close(&h);
}

static bool saw_lag(const rep_topic_stats_t *st, void *arg)
{
    return st->lag_messages == *(uint64_t *)arg && st->lag_bytes > 0;
}

Test(stats, a_topic_idle_for_long_starts_its_stall_clock_when_data_arrives)
{
    rt_t h;
    rt_open(&h);
    rep_topic_spec_t spec;
    rep_t *r = start(&h, 500, &spec);
    /* the premise is time passing with nothing to send: longer than stall_after_ms */
    uint64_t idle_until = tb_mono_ms() + 800;
    while (tb_mono_ms() < idle_until)
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    uint64_t t_data = tb_mono_ms();
    rt_append_n(&h, 5, 10);
    rep_kick(r, 0); /* what the loop does after each log completion */
    uint64_t want = 5;
    rep_topic_stats_t st = poll_until(r, saw_lag, &want);
    cr_assert_eq(st.lag_messages, 5);
    if (tb_mono_ms() - t_data < 500)
        cr_assert_not(st.stalled, "waiting for %llu ms only", (unsigned long long)st.no_progress_ms);
    st = poll_until(r, is_stalled, NULL);
    cr_assert(st.stalled);
    cr_assert_geq(tb_mono_ms() - t_data, 500, "the clock started when the data arrived, not at the last ack");
    stop(r);
    rt_close(&h);
}
