/*
 * test_mosq_lanes.c: rep_mosq_lanes.c, the lanes the mqtt and sparkplug
 * kinds share, driven directly (no connection, no thread: the test is the
 * output's thread) through a kind of the test's whose build() sends every
 * record: with max_messages_per_s the pacer refuses a record past the
 * burst, which goes back to its reader (held) with the lane parked, and
 * the turn that the pacer grants unparks it and the same record goes; an
 * ack moves the checkpoint at the turn; a lost session rewinds to it and
 * leaves the pacer; a topic added at run time becomes a lane with its
 * topic's priority once the thread takes the command, and a max_age a
 * reload changes applies from the command on.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helper_rep.h"
#include "replicator/rep_mosq_int.h"

#define OTHER_TOPIC "/edge1/other"

typedef struct lk {
    rep_output_t o;              /* first, as every kind */
    rep__mlanes_t lanes;
    uint32_t built;              /* build() calls */
} lk_t;

static int lk_build(void *kind, rep__mlane_t *ml, const wal_record_t *rec, uint64_t now_wall, rep__mlane_unit_t *u)
{
    (void)ml;
    (void)rec;
    (void)now_wall;
    ((lk_t *)kind)->built++;
    u->bytes = 100;
    if (rec->payload_len == 3 && memcmp(rec->payload, "bad", 3) == 0) {
        u->dl_reason = REP_DL_OUTPUT_UNROUTABLE;
        u->dl_error = "lanes: cannot carry bad";
        return REP__ML_DEAD;
    }
    return REP__ML_SEND;
}

static const rep__mlanes_ops_t lk_lanes_ops = { .lane_size = sizeof(rep__mlane_t), .build = lk_build };

static int lk_init(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen)
{
    (void)cfg;
    lk_t *k = (lk_t *)o;
    rep__mlanes_init(&k->lanes, o, &lk_lanes_ops, k, 64, 0);
    return rep__mlanes_setup(&k->lanes, err, errlen);
}

static void *lk_main(void *arg)
{
    (void)arg;
    return NULL;
}
static void lk_wake(rep_output_t *o) { (void)o; }
static void lk_kicked(rep_output_t *o, rep__lane_t *l) { rep__mlanes_kicked(&((lk_t *)o)->lanes, l, false); }
static void lk_stop(rep_output_t *o) { (void)o; }
static int lk_reconfigure(rep_output_t *o, const rep_output_cfg_t *next)
{
    (void)o;
    (void)next;
    return TB_EUNSUPPORTED;
}
static void lk_release(rep_output_t *o, rep__batch_t *b)
{
    (void)o;
    (void)b;
}
static void lk_fini(rep_output_t *o) { rep__mlanes_free(&((lk_t *)o)->lanes); }
static int lk_add_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    return rep__mlanes_add(&((lk_t *)o)->lanes, topic, spec);
}
static int lk_update_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    return rep__mlanes_update(&((lk_t *)o)->lanes, topic, spec);
}
static void lk_topic_cmd(rep_output_t *o, rep__topic_cmd_t *cmd) { rep__mlanes_topic_cmd(&((lk_t *)o)->lanes, cmd); }
static void lk_dl_answer(rep_output_t *o, rep__dl_cmd_t *cmd) { rep__mlanes_dl_answer(&((lk_t *)o)->lanes, cmd); }

static const rep_output_ops_t lk_ops = {
    .kind = REP_KIND_MQTT,
    .name = "lanes",
    .size = sizeof(lk_t),
    .init = lk_init,
    .main = lk_main,
    .wake = lk_wake,
    .lane_kicked = lk_kicked,
    .stop = lk_stop,
    .reconfigure = lk_reconfigure,
    .release = lk_release,
    .fini = lk_fini,
    .add_topic = lk_add_topic,
    .update_topic = lk_update_topic,
    .topic_cmd = lk_topic_cmd,
    .dl_answer = lk_dl_answer,
};

typedef struct fx {
    rt_t h;
    cfg_t *c;
    rep_engine_t *e;
    lk_t *k;
    const rep_output_ops_t *saved;
} fx_t;

static void fx_open(fx_t *f, const char *caps)
{
    f->saved = rep__kinds[REP_KIND_MQTT];
    rep__kinds[REP_KIND_MQTT] = &lk_ops;
    rt_open(&f->h);
    char *y = tb_asprintf("edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
                          "mqtt:\n  topic_mappings:\n"
                          "    - {mqtt_pattern: tele/#, danube_topic: /edge1/telemetry}\n"
                          "    - {mqtt_pattern: other/#, danube_topic: /edge1/other, priority: 9}\n"
                          "outputs:\n  - {name: out, kind: mqtt, broker: \"127.0.0.1:1\"%s}\n",
                          caps);
    char err[512] = "";
    cr_assert_eq(cfg_load_string("test.yaml", y, strlen(y), NULL, &f->c, err, sizeof err), 0, "%s", err);
    free(y);
    rep_topic_spec_t spec = { RT_TOPIC, NULL, f->h.t, 0, 0, NULL };
    rep_engine_opts_t eo = { .cfg = f->c, .wal = f->h.w, .topics = &spec, .ntopics = 1, .max_topics = 4 };
    cr_assert_eq(rep_engine_new(&eo, &f->e, err, sizeof err), 0, "%s", err);
    f->k = (lk_t *)f->e->outs[0];
}

static void fx_close(fx_t *f)
{
    rep_engine_free(f->e);
    cfg_free(f->c);
    rt_close(&f->h);
    rep__kinds[REP_KIND_MQTT] = f->saved;
}

Test(mosq_lanes, a_record_the_pacer_refuses_is_held_and_goes_when_granted)
{
    fx_t f;
    fx_open(&f, ", max_messages_per_s: 10"); /* burst: 200 ms of the rate, 2 messages */
    rt_append_n(&f.h, 5, 10);
    rep__mlanes_t *s = &f.k->lanes;
    cr_assert_eq(s->n, 1);
    rep__mlane_t *ml = s->v[0];
    rep__mlane_t *got;
    wal_record_t rec;
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
    cr_assert_eq(rec.offset, 1);
    cr_assert_eq(got, ml);
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
    cr_assert_eq(rec.offset, 2);
    /* the burst is spent: the third is built, refused, put back, the lane parked */
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 0);
    cr_assert(ml->parked);
    cr_assert(ml->lane.src.has_held, "the refused record is held by its reader");
    cr_assert_eq(ml->lane.src.held.offset, 3);
    cr_assert_eq(ml->lane.win.n, 2, "not in the window");
    cr_assert_eq(f.k->built, 3);
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 0, "parked: nothing asked again");
    cr_assert_eq(f.k->built, 3);
    /* the turn the pacer grants (150 ms on, 1.5 tokens back): unparked, and the same record goes
     * without another token */
    uint64_t now = tb_mono_ms();
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, now + 150);
    cr_assert_not(ml->parked);
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
    cr_assert_eq(rec.offset, 3, "the held record, unchanged");
    cr_assert_eq(ml->lane.pace.granted_units, 3);
    /* an ack moves the checkpoint at the turn, not before */
    rep__mlanes_acked(s, 0, 2);
    cr_assert_eq(ml->lane.win.acked, 0);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, now + 150);
    cr_assert_eq(ml->lane.win.acked, 2);
    cr_assert_eq(ml->lane.win.n, 1);
    /* a lost session: back to the checkpoint + 1, out of the pacer; offset 3 was sent: a resend */
    rep__mlanes_session_lost(s);
    cr_assert_eq(ml->lane.win.n, 0);
    cr_assert_eq(ml->resend_upto, 3);
    cr_assert_eq(ml->lane.st.stream_resets, 1);
    cr_assert_not(ml->lane.pace.waiting);
    cr_assert_not(ml->parked);
    cr_assert(ml->ready);
    cr_assert_eq(wal_reader_offset(ml->lane.src.rd), 3, "the reader reopened at the checkpoint + 1");
    fx_close(&f);
}

Test(mosq_lanes, without_caps_every_record_goes_at_once)
{
    fx_t f;
    fx_open(&f, "");
    rt_append_n(&f.h, 50, 10);
    rep__mlanes_t *s = &f.k->lanes;
    rep__mlane_t *got;
    wal_record_t rec;
    for (uint64_t i = 1; i <= 50; i++) {
        cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
        cr_assert_eq(rec.offset, i);
    }
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 0);
    cr_assert_not(s->v[0]->parked);
    cr_assert_not(s->v[0]->ready, "the log's end: not ready until a kick");
    fx_close(&f);
}

Test(mosq_lanes, a_topic_added_at_run_time_joins_with_its_priority_when_the_thread_takes_it)
{
    fx_t f;
    fx_open(&f, "");
    wal_topic_t *other;
    cr_assert_eq(wal_topic_open(f.h.w, OTHER_TOPIC, &other), 0);
    rep__mlanes_t *s = &f.k->lanes;
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms()); /* the connection is up already */
    cr_assert_eq(s->v[0]->lane.st.state, REP_TOPIC_STREAMING);
    rep_topic_spec_t spec = { OTHER_TOPIC, NULL, other, 0, 9, f.c };
    char err[256] = "";
    cr_assert_eq(rep_engine_add_topic(f.e, 1, &spec, err, sizeof err), 0, "%s", err);
    rep__lane_t *l = f.k->o.lanes[1];
    cr_assert_not_null(l, "published at once (kicks and /stats read it)");
    cr_assert_eq(l->priority, 9);
    cr_assert_eq(l->pace.priority, 9, "its pacer class: the topic's priority");
    cr_assert_eq(s->n, 1, "not in the thread's set before the thread takes the command");
    rep__output_drain(&f.k->o);
    cr_assert_eq(s->n, 2);
    cr_assert_eq(&s->v[1]->lane, l);
    cr_assert_eq(s->v[1]->idx, 1);
    cr_assert_eq(l->st.state, REP_TOPIC_STREAMING, "the connection's state, not connecting until it changes");
    wal_topic_t *t0 = f.h.t;
    f.h.t = other; /* rt_append_n writes to h->t */
    rt_append_n(&f.h, 3, 4);
    f.h.t = t0;
    rep__mlane_t *got;
    wal_record_t rec;
    for (uint64_t i = 1; i <= 3; i++) {
        cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
        cr_assert_eq(got, s->v[1]);
        cr_assert_eq(rec.offset, i);
    }
    fx_close(&f);
}

Test(mosq_lanes, a_max_age_a_reload_changes_applies_to_what_is_read_next)
{
    fx_t f;
    fx_open(&f, "");
    uint64_t old = tb_wall_ms() - 60000;
    for (int i = 0; i < 4; i++)
        (void)rt_append(&f.h, &(rt_msg_t){ .payload = "v", .publish_time_ms = old });
    rep__mlanes_t *s = &f.k->lanes;
    rep__mlane_t *got;
    wal_record_t rec;
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1, "no max_age yet: a minute-old record goes");
    cr_assert_eq(rec.offset, 1);
    rep_topic_spec_t spec = { RT_TOPIC, NULL, f.h.t, 1000, 0, f.c };
    rep_engine_update_topic(f.e, 0, &spec);
    cr_assert_eq(s->v[0]->enc.max_age_ms, 0, "the thread's, until it takes the command");
    rep__output_drain(&f.k->o);
    cr_assert_eq(s->v[0]->enc.max_age_ms, 1000);
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 0, "the rest is older than max_age: skipped, not sent");
    cr_assert_eq(s->v[0]->lane.win.acked, 0, "behind the unit in flight");
    rep__mlanes_acked(s, 0, 1);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 4, "the checkpoint passes the skipped records in order");
    cr_assert_eq(s->v[0]->lane.st.messages_acked, 1);
    cr_assert_eq(s->v[0]->lane.st.messages_dropped_age, 3);
    fx_close(&f);
}

/* The records v, bad, v: the first and the last go; bad's unit is DEAD and its copy is the one
 * event the loop gets. Returns that event (the caller frees it). */
static rep_event_t *dead_one(fx_t *f)
{
    (void)rt_append(&f->h, &(rt_msg_t){ .payload = "v" });
    (void)rt_append(&f->h, &(rt_msg_t){ .payload = "bad" });
    (void)rt_append(&f->h, &(rt_msg_t){ .payload = "v" });
    rep__mlanes_t *s = &f->k->lanes;
    rep__mlane_t *got;
    wal_record_t rec;
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
    cr_assert_eq(rec.offset, 1);
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1, "the record after the dead one goes");
    cr_assert_eq(rec.offset, 3);
    rep__mlanes_acked(s, 0, 3);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 1, "the checkpoint waits at the dead record until the log has it");
    rep_event_t *ev = rep_engine_take_events(f->e);
    cr_assert_not_null(ev);
    cr_assert_null(rep_event_next(ev), "one event");
    cr_assert_eq(ev->kind, REP_EV_DEAD_LETTER);
    cr_assert_eq(ev->topic, 0);
    cr_assert_eq(ev->dl->reason, REP_DL_OUTPUT_UNROUTABLE);
    cr_assert_str_eq(ev->dl->error, "lanes: cannot carry bad");
    cr_assert_str_eq(ev->dl->source, "output:out");
    cr_assert_eq(ev->dl->n, 1);
    cr_assert_eq(ev->dl->recs[0].rec.offset, 2);
    cr_assert_eq(ev->dl->recs[0].rec.payload_len, 3);
    cr_assert_eq(memcmp(ev->dl->recs[0].rec.payload, "bad", 3), 0);
    return ev;
}

Test(mosq_lanes, a_record_it_cannot_carry_passes_the_checkpoint_once_durable_in_the_dead_letter_log)
{
    fx_t f;
    fx_open(&f, "");
    rep_event_t *ev = dead_one(&f);
    rep__mlanes_t *s = &f.k->lanes;
    uint64_t t0 = tb_mono_ms();
    rep_engine_dead_letter_done(f.e, ev->output, ev->topic, ev->dl->token, -EIO);
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 1, "a failed write holds it");
    cr_assert_null(rep_engine_take_events(f.e), "asked again only after the delay");
    uint64_t d1 = s->v[0]->dl[0].retry_at - t0;
    cr_assert(d1 >= 1000 && d1 <= 1100, "the first delay: 1 s (%llu ms)", (unsigned long long)d1);
    s->v[0]->dl[0].retry_at = 1; /* the delay is over */
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    rep_event_t *again = rep_engine_take_events(f.e);
    cr_assert_not_null(again, "asked again");
    cr_assert_neq(again->dl->token, ev->dl->token);
    /* refused again: the delay doubles (a full disk is not asked every second) */
    uint64_t t1 = tb_mono_ms();
    rep_engine_dead_letter_done(f.e, again->output, again->topic, again->dl->token, -EIO);
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    uint64_t d2 = s->v[0]->dl[0].retry_at - t1;
    cr_assert(d2 >= 2000 && d2 <= 2100, "the second delay: 2 s (%llu ms)", (unsigned long long)d2);
    s->v[0]->dl[0].retry_at = 1;
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    rep_event_t *third = rep_engine_take_events(f.e);
    cr_assert_not_null(third, "asked a third time");
    rep_engine_dead_letter_done(f.e, ev->output, ev->topic, ev->dl->token, 0); /* a stale answer: ignored */
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 1);
    rep_engine_dead_letter_done(f.e, third->output, third->topic, third->dl->token, 0);
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 3, "durable: the checkpoint passes it and what follows");
    cr_assert_eq(s->v[0]->lane.st.messages_acked, 2);
    cr_assert_eq(s->v[0]->lane.st.messages_dead_lettered, 1);
    cr_assert_eq(s->v[0]->ndl, 0);
    rep_event_free(ev);
    rep_event_free(again);
    rep_event_free(third);
    fx_close(&f);
}

Test(mosq_lanes, without_the_dead_letter_log_a_record_it_cannot_carry_is_a_counted_skip)
{
    fx_t f;
    fx_open(&f, "");
    rep_event_t *ev = dead_one(&f);
    rep__mlanes_t *s = &f.k->lanes;
    rep_engine_dead_letter_done(f.e, ev->output, ev->topic, ev->dl->token, TB_EUNSUPPORTED);
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 3, "mqtt.dead_letter off: passed");
    cr_assert_eq(s->v[0]->lane.st.messages_acked, 2);
    cr_assert_eq(s->v[0]->lane.st.messages_dead_lettered, 0, "not in any dead-letter log");
    rep_event_free(ev);
    fx_close(&f);
}

Test(mosq_lanes, a_lost_session_reads_the_dead_record_again_without_a_second_write)
{
    fx_t f;
    fx_open(&f, "");
    rep_event_t *ev = dead_one(&f);
    rep__mlanes_t *s = &f.k->lanes;
    /* the turn flushed the ack of 1 and 3 is ACKED behind the dead one: make 3 unacked again by a
     * lost session before any answer */
    rep__mlanes_session_lost(s);
    rep__mlane_t *got;
    wal_record_t rec;
    cr_assert_eq(rep__mlanes_next(s, &got, &rec), 1);
    cr_assert_eq(rec.offset, 3, "the dead record is skipped again, its write still pending");
    cr_assert_null(rep_engine_take_events(f.e), "no second write for it");
    rep__mlanes_acked(s, 0, 3);
    rep_engine_dead_letter_done(f.e, ev->output, ev->topic, ev->dl->token, 0);
    rep__output_drain(&f.k->o);
    (void)rep__mlanes_turn(s, REP_MOSQ_UP, tb_mono_ms());
    cr_assert_eq(s->v[0]->lane.win.acked, 3);
    cr_assert_eq(s->v[0]->lane.st.messages_dead_lettered, 1);
    rep_event_free(ev);
    fx_close(&f);
}
