/*
 * test_pace_wiring.c: the configuration's rate caps and priorities reach
 * the pacer (rep_pace.c) of every output the engine builds: each output's
 * buckets from its outputs[] entry (danube's DRR quantum is
 * replicator.max_batch_bytes), each lane's class from its topic's
 * priority, the caps in rep_output_stats; and none when nothing is set
 * (the unpaced path, every ask granted). No network: nothing is started.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helper_rep.h"

static cfg_t *load(const char *outputs)
{
    char *y = tb_asprintf("edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
                          "replicator: {max_batch_bytes: 32k}\n"
                          "mqtt:\n  topic_mappings:\n"
                          "    - {mqtt_pattern: tele/#, danube_topic: /edge1/telemetry, priority: 7}\n%s",
                          outputs);
    cfg_t *c = NULL;
    char err[512] = "";
    int rc = cfg_load_string("test.yaml", y, strlen(y), NULL, &c, err, sizeof err);
    free(y);
    cr_assert_eq(rc, 0, "%s", err);
    return c;
}

static rep_engine_t *engine(rt_t *h, const cfg_t *c, uint8_t prio)
{
    rep_topic_spec_t spec = { RT_TOPIC, NULL, h->t, 0, prio, NULL };
    rep_engine_opts_t eo = { .cfg = c, .wal = h->w, .topics = &spec, .ntopics = 1 };
    rep_engine_t *e = NULL;
    char err[512] = "";
    cr_assert_eq(rep_engine_new(&eo, &e, err, sizeof err), 0, "%s", err);
    return e;
}

Test(pace_wiring, the_danube_outputs_caps_and_the_topics_priority_reach_its_pacer)
{
    rt_t h;
    rt_open(&h);
    cfg_t *c = load("outputs:\n  - {name: danube, kind: danube, max_bytes_per_s: 2k, max_messages_per_s: 40}\n");
    rep_engine_t *e = engine(&h, c, 7);
    rep_output_t *o = e->outs[0];
    cr_assert(rep__pace_limited(&o->pace));
    cr_assert_eq(o->pace.bytes.rate, 2048);
    cr_assert_eq(o->pace.msgs.rate, 40);
    cr_assert_eq(o->pace.quantum, 32 * 1024, "danube's quantum: one full batch");
    cr_assert_eq(o->pace.bytes.burst, 2048 * 200, "200 ms of the rate, in milli-bytes");
    rep__lane_t *l = o->lanes[0];
    cr_assert_eq(l->priority, 7);
    cr_assert_eq(l->pace.priority, 7);
    rep_output_stats_t st;
    rep_output_stats(e, 0, &st);
    cr_assert_eq(st.max_bytes_per_s, 2048);
    cr_assert_eq(st.max_messages_per_s, 40);
    cr_assert_eq(st.throttled_ms, 0);
    rep_topic_stats_t ls;
    rep_lane_stats(e, 0, 0, &ls);
    cr_assert_eq(ls.throttled_ms, 0);
    rep_engine_free(e);
    cfg_free(c);
    rt_close(&h);
}

Test(pace_wiring, without_caps_nothing_is_paced)
{
    rt_t h;
    rt_open(&h);
    cfg_t *c = load("");
    rep_engine_t *e = engine(&h, c, 3);
    rep_output_t *o = e->outs[0];
    cr_assert_not(rep__pace_limited(&o->pace));
    cr_assert_eq(o->lanes[0]->pace.priority, 3);
    /* the unpaced path: any unit, any number of times, at once */
    for (int i = 0; i < 1000; i++)
        cr_assert(rep__pace_ask(&o->pace, &o->lanes[0]->pace, 1u << 24, 1000, 1));
    cr_assert_eq(rep__pace_wait(&o->pace, 1), UINT64_MAX);
    rep_output_stats_t st;
    rep_output_stats(e, 0, &st);
    cr_assert_eq(st.max_bytes_per_s, 0);
    cr_assert_eq(st.max_messages_per_s, 0);
    rep_engine_free(e);
    cfg_free(c);
    rt_close(&h);
}

Test(pace_wiring, a_standalone_replicator_takes_its_caps_from_the_options)
{
    rt_t h;
    rt_open(&h);
    rep_opts_t o;
    rep_opts_default(&o);
    o.edge_name = "edge1";
    o.cluster_url = "http://127.0.0.1:1";
    o.max_bytes_per_s = 5000;
    o.max_messages_per_s = 0;
    rep_topic_spec_t spec = { RT_TOPIC, NULL, h.t, 0, 200, NULL };
    o.topics = &spec;
    o.ntopics = 1;
    rep_t *r = NULL;
    char err[512] = "";
    cr_assert_eq(rep_new(&o, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r->out.pace.bytes.rate, 5000);
    cr_assert_eq(r->out.pace.msgs.rate, 0);
    cr_assert_eq(r->topics[0]->lane.pace.priority, 200);
    cr_assert_not_null(r->pace_timer.cb);
    rep_free(r);
    rt_close(&h);
}
