/*
 * admin_drain.c: the admin ops for planned maintenance (RELOAD.md 6.3,
 * 6.4; the routes are gateway/http/http_admin_drain.c's).
 *
 * Pause and resume: the topic by its upstream name, paused on every output
 * that carries it (rep_engine_pause). Ingestion is untouched: the log
 * takes the topic's messages within its bounds and on_full. Not persisted:
 * a restart resumes every topic (docs/OPERATIONS.md says so).
 *
 * Drain: broker_quiesce (stop accepting, answer every pending ack, close
 * the connections with 0x8B), /readyz not ready from the first step (the
 * provider's quiesced), then "drained" once every topic that is not paused
 * has nothing unacknowledged on any output that carries it (lag_messages 0)
 * and nothing held in memory or for room. It is computed at each call, so
 * GET /admin/drain and the waits of POST /admin/drain?wait_ms see the same
 * state. A drain stays until the restart (SIGTERM follows the chart's
 * preStop) or POST /admin/drain/cancel: the listeners open again
 * (broker_unquiesce) and readiness returns.
 *
 * Retire and forget (RELOAD.md 4.6): a topic no mapping routes to, by its
 * upstream name. The work is retire.c's (gw__retire_force): its outputs
 * release it, then wal_topic_retire on the pool, so the answer is 202
 * "removing" and /stats says "retired" once done. A refusal
 * answers at once with the topic's backlog as the reload's answer counts
 * it (the most any output lacks).
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <string.h>

static json_t *refusal(gw__run_t *r, int *status)
{
    if (r->app->stopping || !r->booted || !r->topics_open || !gw_repl_engine(r->repl)) {
        *status = 503;
        return json_pack("{s:s}", "error", r->app->stopping ? "shutting down" : "the gateway is still starting");
    }
    return NULL;
}

static json_t *op_pause(void *arg, const char *topic, bool paused, int *status)
{
    gw__run_t *r = arg;
    json_t *no = refusal(r, status);
    if (no)
        return no;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        if (strcmp(broker_topic(r->broker, i)->name, topic) != 0)
            continue;
        bool was = rep_engine_paused(gw_repl_engine(r->repl), i);
        int n = rep_engine_pause(gw_repl_engine(r->repl), i, paused);
        if (was != paused)
            tb_info(paused ? "topic paused: its replication holds, the log takes its messages"
                           : "topic resumed: replication goes on from its checkpoint",
                    TB_S("topic", topic), TB_I("outputs", n));
        *status = 200;
        return json_pack("{s:s, s:b, s:i}", "topic", topic, "paused", paused, "outputs", n);
    }
    *status = 404;
    return json_pack("{s:s, s:s}", "topic", topic, "error",
                     "no such upstream topic: the names are those of mqtt.topic_mappings[].danube_topic "
                     "(see /stats .topics[].topic)");
}

static const char *life_name(broker_topic_life_t l)
{
    switch (l) {
    case BROKER_LIFE_RETIRING: return "retiring";
    case BROKER_LIFE_REMOVING: return "removing";
    case BROKER_LIFE_RETIRED: return "retired";
    case BROKER_LIFE_KEPT: return "kept";
    default: return "live";
    }
}

static json_t *op_retire(void *arg, const char *topic, bool forget, int *status)
{
    gw__run_t *r = arg;
    json_t *no = refusal(r, status);
    if (no)
        return no;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        broker_topic_t *t = broker_topic(r->broker, i);
        if (strcmp(t->name, topic) != 0)
            continue;
        rep_topic_stats_t rs;
        memset(&rs, 0, sizeof rs);
        if (t->life == BROKER_LIFE_RETIRING || t->life == BROKER_LIFE_LIVE)
            gw_repl_topic_stats(r->repl, i, &rs); /* a kept or retired one has no lanes: drained */
        const char *was = life_name(t->life), *error = NULL;
        *status = 200;
        if (t->life == BROKER_LIFE_LIVE) {
            *status = 409;
            error = "still mapped: remove its mapping and reload first";
        } else if (t->life == BROKER_LIFE_REMOVING) {
            *status = 202; /* already on its way */
        } else if (t->life != BROKER_LIFE_RETIRED) {
            int rc = gw_repl_retire_force(r->repl, i, forget ? WAL_RETIRE_FORGET : WAL_RETIRE_REMOVE);
            *status = rc == 0 ? 202 : rc == TB_ECLOSED ? 503 : 409;
            error = rc == 0                 ? NULL
                    : rc == TB_EBUSY        ? "not drained: its outputs lack the backlog below; wait until it is "
                                              "replicated (it retires by itself), or delete it: tributary admin "
                                              "forget TOPIC --delete-unreplicated"
                    : rc == TB_ECLOSED      ? "shutting down"
                                            : "a batch of it is still being written: ask again in a moment";
        }
        json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:I}", "topic", topic, "state", life_name(t->life), "was",
                                was, "backlog_messages", (json_int_t)rs.lag_messages, "backlog_bytes",
                                (json_int_t)rs.lag_bytes);
        if (error)
            json_object_set_new(doc, "error", json_string(error));
        return doc;
    }
    *status = 404;
    return json_pack("{s:s, s:s}", "topic", topic, "error",
                     "no such upstream topic: the names are those of /stats .topics[].topic");
}

static void quiesced(void *arg)
{
    gw__run_t *r = arg;
    r->drain = 2;
    tb_info("drain: connections closed; replicating what is left");
}

static json_t *op_drain(void *arg, bool start, int *status)
{
    gw__run_t *r = arg;
    json_t *no = refusal(r, status);
    if (no)
        return no;
    if (start && r->drain == 0) {
        r->drain = 1;
        tb_info("drain: not accepting any more (listeners closed, /readyz not ready); "
                "connections close once their acks are answered");
        broker_quiesce(r->broker, quiesced, r);
    }
    rep_engine_t *e = gw_repl_engine(r->repl);
    json_t *remaining = json_array(), *paused = json_array();
    uint64_t left = 0;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        broker_topic_t *t = broker_topic(r->broker, i);
        if (rep_engine_paused(e, i)) {
            json_array_append_new(paused, json_string(t->name));
            continue;
        }
        uint64_t lag = 0;
        for (size_t o = 0; o < rep_engine_noutputs(e); o++) {
            if (!rep_output_carries(e, o, i))
                continue;
            rep_topic_stats_t st;
            rep_lane_stats(e, o, i, &st);
            lag = TB_MAX(lag, st.lag_messages);
        }
        uint64_t held = wal_topic_held(t->wal);
        if (lag || held || t->inflight || t->batch) {
            left += TB_MAX(lag, held);
            json_array_append_new(remaining, json_string(t->name));
        }
    }
    const char *state = r->drain == 0 ? "running" : r->drain == 2 && !json_array_size(remaining) ? "drained" : "draining";
    if (strcmp(state, "drained") == 0 && !r->drain_logged) {
        r->drain_logged = true;
        tb_info("drain: drained: every topic's log is replicated; stop the gateway now (SIGTERM)",
                TB_I("paused_not_drained", (int64_t)json_array_size(paused)));
    }
    *status = 200;
    return json_pack("{s:s, s:I, s:o, s:o}", "state", state, "remaining_messages", (json_int_t)left,
                     "remaining_topics", remaining, "paused_not_drained", paused);
}

static json_t *op_drain_cancel(void *arg, int *status)
{
    gw__run_t *r = arg;
    json_t *no = refusal(r, status);
    if (no)
        return no;
    if (r->drain == 0)
        return op_drain(arg, false, status); /* nothing to cancel: running */
    int rc = r->drain == 1 ? TB_EBUSY : broker_unquiesce(r->broker);
    if (rc == TB_EBUSY) {
        *status = 409;
        return json_pack("{s:s, s:s}", "state", "draining", "error",
                         "the drain is still closing connections: ask again in a moment");
    }
    if (rc < 0) {
        *status = 500;
        return json_pack("{s:s, s:s}", "state", "draining", "error", tb_strerror(rc));
    }
    r->drain = 0;
    r->drain_logged = false;
    tb_info("drain cancelled: accepting again");
    return op_drain(arg, false, status);
}

void gw__admin_drain_ops(gw__run_t *r, http_admin_ops_t *out)
{
    (void)r;
    out->pause = op_pause;
    out->retire = op_retire;
    out->drain = op_drain;
    out->drain_cancel = op_drain_cancel;
}
