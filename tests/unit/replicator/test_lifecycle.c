/*
 * test_lifecycle.c: the replicator's public lifecycle without a cluster:
 * what rep_new refuses (naming the key), stop before and after start, the
 * waker under kicks from other threads, and the registration state while
 * the cluster refuses connections (127.0.0.1:1: loopback, nothing listens).
 * Waits use a condition variable with a deadline, never sleeps.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "helper_rep.h"

typedef struct ev_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wakes;
} ev_wait_t;

static ev_wait_t g_ev = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void notify(void *arg)
{
    ev_wait_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->wakes++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void opts(rt_t *h, rep_opts_t *o, rep_topic_spec_t *spec)
{
    rep_opts_default(o);
    o->edge_name = "edge1";
    o->cluster_url = "http://127.0.0.1:1";
    *spec = (rep_topic_spec_t){ RT_TOPIC, NULL, h->t, 0, 0, NULL };
    o->topics = spec;
    o->ntopics = 1;
    o->notify = notify;
    o->notify_arg = &g_ev;
}

/* Waits (10 s) until REP_EV_STOPPED arrives; frees the events. */
static bool wait_stopped(rep_t *r)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    for (;;) {
        bool stopped = false;
        for (rep_event_t *ev = rep_take_events(r), *n; ev; ev = n) {
            n = rep_event_next(ev);
            stopped |= ev->kind == REP_EV_STOPPED;
            rep_event_free(ev);
        }
        if (stopped)
            return true;
        pthread_mutex_lock(&g_ev.mu);
        int rc = 0;
        while (g_ev.wakes == 0 && rc == 0)
            rc = pthread_cond_timedwait(&g_ev.cv, &g_ev.mu, &dl);
        g_ev.wakes = 0;
        pthread_mutex_unlock(&g_ev.mu);
        if (rc != 0)
            return false;
    }
}

Test(lifecycle, a_cluster_url_without_scheme_is_refused)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    o.cluster_url = "127.0.0.1:6650";
    rep_t *r = (rep_t *)1;
    char err[256] = "";
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), TB_ECONFIG);
    cr_assert_null(r);
    cr_assert(strstr(err, "edge.cluster_url"), "%s", err);
    rt_close(&h);
}

Test(lifecycle, a_client_certificate_without_its_key_is_refused)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    o.cluster_url = "https://127.0.0.1:6650";
    o.tls_cert_file = "/etc/hostname";
    rep_t *r;
    char err[256] = "";
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "key_file"), "%s", err);
    rt_close(&h);
}

Test(lifecycle, an_unreadable_ca_file_is_refused_naming_the_key)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    o.cluster_url = "https://127.0.0.1:6650";
    o.tls_ca_file = "/nonexistent/ca.pem";
    rep_t *r;
    char err[256] = "";
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "edge.tls.ca_file: cannot read /nonexistent/ca.pem"), "%s", err);
    rt_close(&h);
}

Test(lifecycle, stop_before_start_posts_stopped_at_once)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    rep_t *r;
    char err[256];
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), 0, "%s", err);
    rep_stop(r);
    cr_assert(wait_stopped(r));
    rep_free(r);
    rt_close(&h);
}

Test(lifecycle, an_absent_cluster_leaves_registration_retrying_and_stop_still_finishes)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 10, 10);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    rep_t *r;
    char err[256];
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep_start(r), 0);
    uint64_t until = tb_mono_ms() + 10000;
    rep_stats_t st;
    /* stats have no notification: poll every millisecond until the deadline */
    for (;;) {
        rep_stats(r, &st);
        if ((st.registration == REP_REG_RETRYING && st.cluster == REP_CLUSTER_UNREACHABLE) || tb_mono_ms() > until)
            break;
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
    cr_assert_eq(st.registration, REP_REG_RETRYING);
    cr_assert_eq(st.cluster, REP_CLUSTER_UNREACHABLE);
    cr_assert_geq(st.registration_failures, 1);
    rep_topic_stats_t ts;
    rep_topic_stats(r, 0, &ts);
    cr_assert_eq(ts.state, REP_TOPIC_UNREGISTERED);
    cr_assert_eq(ts.lag_messages, 10);
    cr_assert_eq(ts.acked_offset, 0);
    rep_stop(r);
    cr_assert(wait_stopped(r), "no REP_EV_STOPPED within 10 s");
    rep_free(r);
    rt_close(&h);
}

static void *kicker(void *arg)
{
    rep_t *r = arg;
    for (int i = 0; i < 20000; i++)
        rep_kick(r, 0);
    return NULL;
}

Test(lifecycle, kicks_from_other_threads_while_running_and_stopping)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_topic_spec_t spec;
    opts(&h, &o, &spec);
    rep_t *r;
    char err[256];
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep_start(r), 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, kicker, r);
    rep_kick(r, 99); /* out of range: ignored */
    rep_stop(r);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    cr_assert(wait_stopped(r), "no REP_EV_STOPPED within 10 s");
    rep_free(r);
    rt_close(&h);
}
