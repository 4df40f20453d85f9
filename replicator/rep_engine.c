/*
 * rep_engine.c: the engine (replicator.h, "the engine"): the outputs of the
 * configuration, each of a kind from rep__kinds, the kick fan-out, start and
 * stop of every output, their events merged towards the loop, and the stats
 * an operator reads.
 *
 * Which output carries which topic is decided once, in rep_engine_new: a
 * kind's init makes a lane for each topic rep__output_wants (its `topics`
 * filters against the upstream name; none: every topic). Each lane opens the
 * output's cursor (wal_output_id: danube is 0). rep_engine_start then calls
 * wal_cursors_settled: slots of outputs no longer configured are parked
 * (kept, not waited for), so they stop holding retention and memory.
 *
 * Events: each output posts to its own mailbox, whose wake-up is the
 * engine's notify; rep_engine_take_events splices them (per output in
 * order), each tagged with its output, and turns the outputs' REP_EV_STOPPED
 * into one, handed out when the last output has stopped.
 */
#include "replicator/rep_int.h"
#include "replicator/rep_mosq_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const rep_output_ops_t *rep__kinds[REP_KIND__COUNT] = { [REP_KIND_DANUBE] = &rep__danube_ops,
                                                        [REP_KIND_MQTT] = &rep__mqtt_ops,
                                                        [REP_KIND_SPARKPLUG] = &rep__sparkplug_ops };

static rep_kind_t kind_of(cfg_output_kind_t k)
{
    switch (k) {
    case CFG_OUTPUT_MQTT:
        return REP_KIND_MQTT;
    case CFG_OUTPUT_SPARKPLUG:
        return REP_KIND_SPARKPLUG;
    default:
        return REP_KIND_DANUBE;
    }
}

const char *rep_kind_name(rep_kind_t k)
{
    static const char *const n[] = { "danube", "mqtt", "sparkplug" };
    return (unsigned)k < TB_ARRAY_LEN(n) ? n[k] : "?";
}

static char *dup_or_null(const char *s)
{
    return s ? tb_strdup(s) : NULL;
}

static int no_room(const char *name, char *err, size_t errlen)
{
    snprintf(err, errlen, "outputs[%s]: %zu outputs were added or replaced since the start: restart to apply it",
             name, (size_t)REP__RUNTIME_OUTPUTS);
    return TB_EFULL;
}

/* Output c of cfg, appended to e->outs once its init succeeded (init: its files, templates and
 * lanes, their cursors opened; nothing on the network). 0 or < 0 with err. */
static int make_output(rep_engine_t *e, const cfg_t *cfg, const cfg_output_t *c, char *err, size_t errlen)
{
    rep_kind_t k = kind_of(c->kind);
    const rep_output_ops_t *ops = rep__kinds[k];
    if (!ops) {
        snprintf(err, errlen, "outputs[%s].kind: %s is not implemented in this build", c->name, rep_kind_name(k));
        return TB_ECONFIG;
    }
    if (e->nouts >= e->outs_cap)
        return no_room(c->name, err, errlen);
    uint16_t id;
    int rc = wal_output_id(e->wal, c->name, &id);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s]: cannot record the output in the log: %s", c->name, tb_strerror(rc));
        return rc;
    }
    rep_output_t *ot = tb_calloc(1, ops->size);
    rep__output_base_init(ot, ops, e, (uint16_t)e->nouts, c->name, e->cap, e->notify, e->notify_arg);
    ot->wal_id = id;
    ot->stall_after_ms = cfg->health.stall_after_ms;
    /* every kind's pacer from its entry's caps (rep_pace.c; a kind may re-init it with its
     * own quantum: danube's is max_batch_bytes); lanes take their topic's priority */
    rep__pace_init(&ot->pace, c->max_bytes_per_s, c->max_messages_per_s, 0, tb_mono_ms());
    atomic_store(&ot->caps_bytes, c->max_bytes_per_s);
    atomic_store(&ot->caps_msgs, c->max_messages_per_s);
    ot->cfg.name = tb_strdup(c->name);
    ot->cfg.kind = k;
    ot->cfg.ntopics = c->ntopics;
    ot->cfg.topics = tb_calloc(c->ntopics + 1, sizeof *ot->cfg.topics);
    for (size_t f = 0; f < c->ntopics; f++)
        ot->cfg.topics[f] = tb_strdup(c->topics[f]);
    rc = ops->init(ot, cfg, err, errlen);
    if (rc < 0) {
        rep__output_free(ot); /* not started: fini undoes what init made */
        return rc;
    }
    e->outs[e->nouts] = ot;
    __atomic_store_n(&e->nouts, e->nouts + 1, __ATOMIC_RELEASE); /* kicks from other threads see it whole */
    return 0;
}

int rep_engine_new(const rep_engine_opts_t *o, rep_engine_t **out, char *err, size_t errlen)
{
    *out = NULL;
    const cfg_t *cfg = o->cfg;
    if (!o->wal || !cfg) {
        snprintf(err, errlen, "replicator: the engine needs the configuration and the log");
        return TB_EINVALID;
    }
    rep_engine_t *e = tb_calloc(1, sizeof *e);
    e->wal = o->wal;
    e->notify = o->notify;
    e->notify_arg = o->notify_arg;
    pthread_mutex_init(&e->ev_mu, NULL);
    atomic_init(&e->stop_asked, false);
    e->ntopics = o->ntopics;
    e->cap = TB_MAX(o->max_topics, o->ntopics);
    e->topics = tb_calloc(e->cap + 1, sizeof *e->topics);
    e->gone = tb_calloc(e->cap + 1, sizeof *e->gone);
    for (size_t i = 0; i < o->ntopics; i++) {
        e->topics[i] = o->topics[i];
        e->topics[i].name = tb_strdup(o->topics[i].name);
        e->topics[i].schema_subject = dup_or_null(o->topics[i].schema_subject);
    }
    e->outs_cap = cfg->noutputs + REP__RUNTIME_OUTPUTS;
    e->outs = tb_calloc(e->outs_cap, sizeof *e->outs);
    for (size_t i = 0; i < cfg->noutputs; i++) {
        int rc = make_output(e, cfg, &cfg->outputs[i], err, errlen);
        if (rc < 0) {
            rep_engine_free(e);
            return rc;
        }
    }
    *out = e;
    return 0;
}

int rep_engine_start(rep_engine_t *e)
{
    /* every cursor of this configuration is open: the others stop holding the log */
    wal_cursors_settled(e->wal);
    for (size_t t = 0; t < e->ntopics; t++)
        if (rep_engine_primary(e, t) == SIZE_MAX)
            tb_warn("no output carries this topic: its messages are logged and kept to the disk bounds only",
                    TB_S("topic", e->topics[t].name));
    e->started = true;
    for (size_t i = 0; i < e->nouts; i++) {
        int rc = rep__output_start(e->outs[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void rep_engine_kick(rep_engine_t *e, size_t topic)
{
    if (!e)
        return;
    size_t n = __atomic_load_n(&e->nouts, __ATOMIC_ACQUIRE); /* an output added by a reload */
    for (size_t i = 0; i < n; i++)
        if (atomic_load(&e->outs[i]->life) == REP__OUT_RUNNING)
            rep__output_kick(e->outs[i], topic);
}

/* ---- outputs at run time (a reload: OUTPUTS.md 3.4) ------------------------------------ */

static void removed(rep_engine_t *e, rep_output_t *o);

static rep_output_t *alive(rep_engine_t *e, const char *name)
{
    for (size_t i = 0; i < e->nouts; i++)
        if (atomic_load(&e->outs[i]->life) != REP__OUT_REMOVED && strcmp(e->outs[i]->name, name) == 0)
            return e->outs[i];
    return NULL;
}

static int start_added(rep_engine_t *e, const cfg_t *cfg, const char *name, char *err, size_t errlen)
{
    const cfg_output_t *c = rep__mqtt_find_cfg(cfg, name);
    if (!c) {
        snprintf(err, errlen, "outputs[%s]: not in the configuration", name);
        return TB_ECONFIG;
    }
    int rc = make_output(e, cfg, c, err, errlen);
    if (rc < 0)
        return rc;
    rep_output_t *o = e->outs[e->nouts - 1];
    /* a replaced or re-added output's series go on: each lane carries its predecessor's counters
     * (final: that one was retired), before the thread runs and before its stats are read */
    for (size_t i = e->nouts - 1; i-- > 0;) {
        rep_output_t *old = e->outs[i];
        if (atomic_load(&old->life) != REP__OUT_REMOVED || strcmp(old->name, name) != 0)
            continue;
        for (size_t t = 0; t < o->nlanes && t < old->nlanes; t++)
            if (o->lanes[t] && old->lanes[t]) {
                rep__lane_carry(o->lanes[t], old->lanes[t]);
                rep__lane_publish(o->lanes[t]);
            }
        break;
    }
    rc = rep__output_start(o);
    if (rc < 0) {
        snprintf(err, errlen, "outputs[%s]: its thread: %s", name, tb_strerror(rc));
        /* never ran: no REP_EV_STOPPED will come (counted here, as take_events would), no stop to
         * ask, its cursors parked at once */
        atomic_store(&o->stop_requested, true);
        for (size_t t = 0; t < o->nlanes; t++)
            if (o->lanes[t] && !atomic_load(&o->lanes[t]->released))
                rep__lane_release(o->lanes[t]);
        atomic_store(&o->life, REP__OUT_REMOVED);
        o->stopped_seen = true;
        e->nstopped++;
        return rc;
    }
    for (size_t t = 0; t < e->ntopics; t++)
        rep__output_kick(o, t); /* what waits in the log for it: from its checkpoint + 1 */
    tb_info("replicator: output added at run time", TB_S("output", name), TB_S("kind", rep_kind_name(o->ops->kind)),
            TB_U("topics", o->cfg.ntopics ? o->cfg.ntopics : 0));
    return 0;
}

int rep_engine_add_output(rep_engine_t *e, const cfg_t *cfg, const char *name, char *err, size_t errlen)
{
    *err = '\0';
    if (!e->started || atomic_load(&e->stop_asked)) {
        snprintf(err, errlen, "outputs[%s]: the replicator is not running", name);
        return TB_ECLOSED;
    }
    const cfg_output_t *c = rep__mqtt_find_cfg(cfg, name);
    if (c && c->kind == CFG_OUTPUT_DANUBE) {
        snprintf(err, errlen, "outputs[%s]: a danube output is added by a restart", name);
        return TB_EUNSUPPORTED;
    }
    rep_output_t *old = alive(e, name);
    if (old && atomic_load(&old->life) == REP__OUT_RUNNING) {
        snprintf(err, errlen, "outputs[%s]: it runs already", name);
        return TB_EINVALID;
    }
    if (!old && rep_engine_output_room(e) == 0) /* the adds waiting for a stop are counted too */
        return no_room(name, err, errlen);
    if (old) { /* REMOVING: its cursors are still open; this one starts once it stopped */
        for (size_t i = 0; i < e->npending; i++)
            if (strcmp(e->pending[i].name, name) == 0) {
                cfg_free(e->pending[i].cfg);
                e->pending[i].cfg = cfg_ref(cfg);
                return 1;
            }
        e->pending = tb_realloc(e->pending, (e->npending + 1) * sizeof *e->pending);
        e->pending[e->npending++] = (struct rep__pending_add){ .name = tb_strdup(name), .cfg = cfg_ref(cfg) };
        return 1;
    }
    return start_added(e, cfg, name, err, errlen);
}

int rep_output_check(const cfg_t *cfg, const char *name, char *err, size_t errlen)
{
    const cfg_output_t *c = rep__mqtt_find_cfg(cfg, name);
    if (!c) {
        snprintf(err, errlen, "outputs[%s]: not in the configuration", name);
        return TB_ECONFIG;
    }
    if (c->kind == CFG_OUTPUT_DANUBE)
        return 0;
    char host[256], why[512] = "";
    rep_mosq_opts_t mo;
    int rc = rep__mqtt_conn_opts(cfg, c, host, sizeof host, &mo, err, errlen);
    if (rc < 0)
        return rc;
    rc = rep__mosq_check_files(&mo, why, sizeof why);
    if (rc < 0)
        snprintf(err, errlen, "outputs[%s].%s", name, why);
    return rc;
}

size_t rep_engine_output_room(const rep_engine_t *e)
{
    size_t used = e->nouts + e->npending;
    return used < e->outs_cap ? e->outs_cap - used : 0;
}

bool rep_engine_output_pending(const rep_engine_t *e, const char *name)
{
    for (size_t i = 0; i < e->npending; i++)
        if (strcmp(e->pending[i].name, name) == 0)
            return true;
    return false;
}

void rep_engine_pending_config(rep_engine_t *e, const cfg_t *cfg)
{
    for (size_t i = 0; i < e->npending; i++) {
        if (!rep__mqtt_find_cfg(cfg, e->pending[i].name) || e->pending[i].cfg == cfg)
            continue; /* a later reload that removed it called rep_engine_remove_output */
        cfg_free(e->pending[i].cfg);
        e->pending[i].cfg = cfg_ref(cfg);
    }
}

int rep_engine_remove_output(rep_engine_t *e, const char *name)
{
    for (size_t i = 0; i < e->npending; i++) /* an add still waiting for this name is given up */
        if (strcmp(e->pending[i].name, name) == 0) {
            free(e->pending[i].name);
            cfg_free(e->pending[i].cfg);
            e->pending[i] = e->pending[--e->npending];
            break;
        }
    rep_output_t *o = alive(e, name);
    if (!o)
        return -ENOENT;
    if (o->ops->kind == REP_KIND_DANUBE)
        return TB_EUNSUPPORTED;
    int expect = REP__OUT_RUNNING;
    if (!atomic_compare_exchange_strong(&o->life, &expect, REP__OUT_REMOVING))
        return 0; /* removing already */
    tb_info("replicator: output removed at run time: it drains what is in flight, its checkpoints are kept",
            TB_S("output", name));
    if (o->stopped_seen) { /* its thread ended already (it carried nothing): nothing to wait for */
        pthread_mutex_lock(&e->ev_mu);
        removed(e, o);
        pthread_mutex_unlock(&e->ev_mu);
        return 0;
    }
    rep__output_stop(o);
    return 0;
}

/* Its REP_EV_STOPPED came (take_events): joined, lanes released, and an add that waited for the
 * name started. */
static void removed(rep_engine_t *e, rep_output_t *o)
{
    if (o->started)
        rep__output_retire(o);
    else
        atomic_store(&o->life, REP__OUT_REMOVED);
    tb_info("replicator: removed output stopped; its cursors are parked", TB_S("output", o->name));
    for (size_t i = 0; i < e->npending; i++) {
        if (strcmp(e->pending[i].name, o->name) != 0)
            continue;
        struct rep__pending_add p = e->pending[i];
        e->pending[i] = e->pending[--e->npending];
        char err[512];
        if (!atomic_load(&e->stop_asked) && start_added(e, p.cfg, p.name, err, sizeof err) < 0)
            tb_error("replicator: the output could not start after its change; a restart applies the file",
                     TB_S("output", p.name), TB_S("error", err));
        free(p.name);
        cfg_free(p.cfg);
        break;
    }
}

void rep_engine_dead_letter_done(rep_engine_t *e, uint16_t output, size_t topic, uint64_t token, int rc)
{
    if (!e || output >= e->nouts)
        return;
    rep_output_t *o = e->outs[output];
    if (topic >= o->nlanes || !__atomic_load_n(&o->lanes[topic], __ATOMIC_ACQUIRE))
        return;
    if (o->ops->kind == REP_KIND_DANUBE) {
        rep__topic_dead_letter_done((rep__topic_t *)o->lanes[topic], token, rc); /* the lane is its first member */
        return;
    }
    if (!o->ops->dl_answer)
        return;
    /* mqtt, sparkplug: several records of a lane may wait at once; each answer goes to the thread */
    rep__dl_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
    *cmd = (rep__dl_cmd_t){ .cmd = { .kind = REP__CMD_DL }, .topic = topic, .token = token, .rc = rc };
    tb_mbox_push(&o->cmds, &cmd->cmd.node);
}

void rep_engine_stop(rep_engine_t *e)
{
    if (atomic_exchange(&e->stop_asked, true))
        return;
    for (size_t i = 0; i < e->nouts; i++)
        rep__output_stop(e->outs[i]);
    if (e->nouts == 0 && e->notify)
        e->notify(e->notify_arg); /* nothing to wait for: STOPPED at the next take */
}

void rep_engine_free(rep_engine_t *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nouts; i++)
        rep__output_free(e->outs[i]); /* joins; lanes close their readers and cursors */
    free(e->outs);
    for (size_t i = 0; i < e->npending; i++) {
        free(e->pending[i].name);
        cfg_free(e->pending[i].cfg);
    }
    free(e->pending);
    for (size_t i = 0; i < e->ntopics; i++) {
        free((char *)e->topics[i].name);
        free((char *)e->topics[i].schema_subject);
    }
    free(e->topics);
    free(e->gone);
    pthread_mutex_destroy(&e->ev_mu);
    free(e);
}

rep_event_t *rep_engine_take_events(rep_engine_t *e)
{
    tb_mnode_t *head = NULL, **tail = &head;
    pthread_mutex_lock(&e->ev_mu);
    for (size_t i = 0; i < e->nouts; i++) {
        for (tb_mnode_t *n = tb_mbox_take(&e->outs[i]->events), *next; n; n = next) {
            next = n->next;
            rep_event_t *ev = TB_CONTAINER_OF(n, rep_event_t, node);
            if (ev->kind == REP_EV_STOPPED) {
                e->nstopped++;
                e->outs[i]->stopped_seen = true;
                rep_event_free(ev);
                if (atomic_load(&e->outs[i]->life) == REP__OUT_REMOVING) {
                    removed(e, e->outs[i]); /* may post its lanes' releases and append an output */
                    tb_mnode_t **end = &next; /* its last words: the releases it answered now */
                    while (*end)
                        end = &(*end)->next;
                    *end = tb_mbox_take(&e->outs[i]->events);
                }
                continue;
            }
            n->next = NULL;
            *tail = n;
            tail = &n->next;
        }
    }
    if (!e->stop_posted && atomic_load(&e->stop_asked) && e->nstopped == e->nouts) {
        e->stop_posted = true;
        rep_event_t *ev = tb_calloc(1, sizeof *ev);
        ev->kind = REP_EV_STOPPED;
        *tail = &ev->node;
    }
    pthread_mutex_unlock(&e->ev_mu);
    return head ? TB_CONTAINER_OF(head, rep_event_t, node) : NULL;
}

/* ---- what an operator reads ------------------------------------------------------ */

/* Every output that wants spec->name gets a lane at index topic (add_topic: its loop-thread part). */
static int give_lanes(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec, char *err, size_t errlen)
{
    int first = 0;
    for (size_t i = 0; i < e->nouts; i++) {
        rep_output_t *o = e->outs[i];
        if (atomic_load(&o->life) != REP__OUT_RUNNING || !rep__output_wants(o, spec->name))
            continue; /* one being removed gets no new lane */
        int rc = o->ops->add_topic ? o->ops->add_topic(o, topic, spec) : TB_EUNSUPPORTED;
        if (rc < 0 && !first) {
            first = rc;
            snprintf(err, errlen, "outputs[%s]: topic %s: %s", o->name, spec->name,
                     rc == TB_EUNSUPPORTED ? "this kind carries a new topic after a restart" : tb_strerror(rc));
        }
    }
    if (rep_engine_primary(e, topic) == SIZE_MAX)
        tb_warn("no output carries this topic: its messages are logged and kept to the disk bounds only",
                TB_S("topic", spec->name));
    return first;
}

int rep_engine_add_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec, char *err, size_t errlen)
{
    *err = '\0';
    if (topic != e->ntopics || topic >= e->cap) {
        snprintf(err, errlen, "replicator: topic %s: index %zu is not the next one below the capacity %zu",
                 spec->name, topic, e->cap);
        return TB_EFULL;
    }
    e->topics[topic] = *spec;
    e->topics[topic].name = tb_strdup(spec->name);
    e->topics[topic].schema_subject = dup_or_null(spec->schema_subject);
    e->ntopics++;
    return give_lanes(e, topic, spec, err, errlen);
}

int rep_engine_readd_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec, char *err, size_t errlen)
{
    *err = '\0';
    if (topic >= e->ntopics || !rep_engine_released(e, topic)) {
        snprintf(err, errlen, "replicator: topic %s: index %zu is not a released topic", spec->name, topic);
        return TB_EINVALID;
    }
    free((char *)e->topics[topic].schema_subject);
    e->gone[topic] = false;
    const char *name = e->topics[topic].name; /* the same name: its index is its identity */
    e->topics[topic] = *spec;
    e->topics[topic].name = name;
    e->topics[topic].schema_subject = dup_or_null(spec->schema_subject);
    return give_lanes(e, topic, spec, err, errlen);
}

size_t rep_engine_release_topic(rep_engine_t *e, size_t topic)
{
    size_t n = 0;
    if (topic < e->cap)
        e->gone[topic] = true;
    for (size_t i = 0; i < e->nouts; i++) {
        rep_output_t *o = e->outs[i];
        if (!rep_output_carries(e, i, topic) || atomic_load(&o->lanes[topic]->released))
            continue;
        rep__topic_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
        cmd->cmd.kind = REP__CMD_TOPIC;
        cmd->release = true;
        cmd->lane = o->lanes[topic];
        tb_mbox_push(&o->cmds, &cmd->cmd.node);
        n++;
    }
    return n;
}

bool rep_engine_released(const rep_engine_t *e, size_t topic)
{
    for (size_t i = 0; i < e->nouts; i++)
        if (rep_output_carries(e, i, topic) && !atomic_load(&e->outs[i]->lanes[topic]->released))
            return false;
    return true;
}

void rep_engine_update_topic(rep_engine_t *e, size_t topic, const rep_topic_spec_t *spec)
{
    if (topic >= e->ntopics)
        return;
    free((char *)e->topics[topic].schema_subject);
    e->topics[topic].schema_subject = dup_or_null(spec->schema_subject);
    e->topics[topic].max_age_ms = spec->max_age_ms;
    for (size_t i = 0; i < e->nouts; i++)
        if (rep_output_carries(e, i, topic) && e->outs[i]->ops->update_topic)
            e->outs[i]->ops->update_topic(e->outs[i], topic, spec);
}

size_t rep_engine_ntopics(const rep_engine_t *e)
{
    return e->ntopics;
}

size_t rep_engine_noutputs(const rep_engine_t *e)
{
    return e->nouts;
}

static size_t carried(const rep_output_t *o)
{
    size_t n = 0;
    for (size_t t = 0; t < o->nlanes; t++)
        n += o->lanes[t] != NULL;
    return n;
}

void rep_output_info(const rep_engine_t *e, size_t out, rep_output_info_t *info)
{
    memset(info, 0, sizeof *info);
    if (out >= e->nouts)
        return;
    const rep_output_t *o = e->outs[out];
    info->name = o->name;
    info->kind = o->ops->kind;
    info->topics = carried(o);
    info->removed = rep_output_removed(e, out);
}

bool rep_output_removed(const rep_engine_t *e, size_t out)
{
    return out < e->nouts && atomic_load(&e->outs[out]->life) != REP__OUT_RUNNING;
}

bool rep_output_carries(const rep_engine_t *e, size_t out, size_t topic)
{
    /* a removed output carries nothing (its lanes are released); one still stopping does */
    return out < e->nouts && topic < e->outs[out]->nlanes && e->outs[out]->lanes[topic] != NULL &&
           atomic_load(&e->outs[out]->life) != REP__OUT_REMOVED;
}

void rep_output_stats(rep_engine_t *e, size_t out, rep_output_stats_t *st)
{
    memset(st, 0, sizeof *st);
    if (out >= e->nouts)
        return;
    rep_output_t *o = e->outs[out];
    st->kind = o->ops->kind;
    for (size_t t = 0; t < o->nlanes; t++) {
        if (!o->lanes[t])
            continue;
        rep_topic_stats_t ls;
        rep__lane_stats(o->lanes[t], &ls);
        st->topics++;
        st->messages_acked += ls.messages_acked;
        st->lag_messages += ls.lag_messages;
        st->lag_bytes += ls.lag_bytes;
        st->batches_in_flight += ls.batches_in_flight;
        st->messages_sent += ls.batches_sent;
        st->messages_resent += ls.batches_resent;
        st->throttled_ms += ls.throttled_ms;
    }
    st->max_bytes_per_s = atomic_load(&o->caps_bytes); /* the pacer's are its thread's */
    st->max_messages_per_s = atomic_load(&o->caps_msgs);
    if (o->ops == &rep__danube_ops) {
        rep_stats((rep_t *)o, &st->danube);
        st->state = rep_cluster_state_name(st->danube.cluster);
        st->up = st->danube.cluster == REP_CLUSTER_CONNECTED && st->danube.registration == REP_REG_REGISTERED;
        st->messages_sent = st->messages_resent = 0; /* danube's are batches: per topic in /stats */
    }
    if (o->ops->stats)
        o->ops->stats(o, st);
    if (!st->state)
        st->state = "?";
}

void rep_lane_stats(rep_engine_t *e, size_t out, size_t topic, rep_topic_stats_t *st)
{
    rep__lane_stats(rep_output_carries(e, out, topic) ? e->outs[out]->lanes[topic] : NULL, st);
}

size_t rep_engine_primary(const rep_engine_t *e, size_t topic)
{
    for (size_t i = 0; i < e->nouts; i++)
        if (atomic_load(&e->outs[i]->life) == REP__OUT_RUNNING && rep_output_carries(e, i, topic))
            return i;
    for (size_t i = 0; i < e->nouts; i++) /* one still stopping (being replaced): its counters hold */
        if (rep_output_carries(e, i, topic))
            return i;
    return SIZE_MAX;
}

bool rep_engine_has_danube(const rep_engine_t *e)
{
    for (size_t i = 0; i < e->nouts; i++)
        if (e->outs[i]->ops == &rep__danube_ops)
            return true;
    return false;
}

size_t rep_engine_set_max_attempts(rep_engine_t *e, uint32_t max_attempts)
{
    size_t n = 0;
    for (size_t i = 0; i < e->nouts; i++)
        if (e->outs[i]->ops == &rep__danube_ops) {
            atomic_store_explicit(&((rep_t *)e->outs[i])->max_attempts, max_attempts, memory_order_relaxed);
            n++;
        }
    return n;
}

int rep_engine_set_rates(rep_engine_t *e, const char *name, uint64_t max_bytes_per_s, uint64_t max_messages_per_s)
{
    for (size_t i = 0; i < e->nouts; i++) {
        rep_output_t *o = e->outs[i];
        if (atomic_load(&o->life) != REP__OUT_RUNNING || strcmp(o->name, name) != 0)
            continue;
        atomic_store(&o->caps_bytes, max_bytes_per_s);
        atomic_store(&o->caps_msgs, max_messages_per_s);
        if (!o->started) { /* not running yet (or never will: nothing to carry): in place */
            rep__pace_set_rates(&o->pace, max_bytes_per_s, max_messages_per_s, tb_mono_ms());
            return 0;
        }
        rep__rates_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
        *cmd = (rep__rates_cmd_t){ .cmd = { .kind = REP__CMD_RATES }, .max_bytes_per_s = max_bytes_per_s,
                                   .max_messages_per_s = max_messages_per_s };
        tb_mbox_push(&o->cmds, &cmd->cmd.node); /* wakes its thread */
        return 0;
    }
    return -ENOENT;
}

void rep_engine_stats(rep_engine_t *e, rep_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < e->nouts; i++) {
        if (e->outs[i]->ops == &rep__danube_ops) {
            rep_stats((rep_t *)e->outs[i], out);
            return;
        }
    }
}
