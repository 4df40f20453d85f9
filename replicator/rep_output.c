/*
 * rep_output.c: what every output has, whatever its kind (rep_int.h, "the
 * engine"): its mailboxes, its thread, the coalesced kick of a lane, stop,
 * events towards the loop, and its end. The kind's behaviour is behind
 * o->ops; Danube's is rep.c/rep_thread.c/rep_topic.c.
 *
 * Kick (any thread): one atomic exchange on the lane's `queued`, and a push
 * onto the output's mailbox only when the lane was not queued already; the
 * mailbox calls ops->wake on its empty-to-non-empty transition (Danube:
 * cancel the parked waker call). The output's thread drains the mailbox
 * with rep__output_drain, which clears `queued` before ops->lane_kicked, so
 * a kick that lands during the call queues the lane again.
 */
#include "replicator/rep_int.h"

#include "gateway/router/router.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void wake_thunk(void *arg)
{
    rep_output_t *o = arg;
    o->ops->wake(o);
}

void rep__output_base_init(rep_output_t *o, const rep_output_ops_t *ops, rep_engine_t *e, uint16_t idx,
                           const char *name, size_t nlanes, void (*notify)(void *), void *notify_arg)
{
    o->ops = ops;
    o->e = e;
    o->idx = idx;
    o->name = tb_strdup(name);
    o->nlanes = nlanes;
    o->lanes = tb_calloc(nlanes ? nlanes : 1, sizeof *o->lanes);
    pthread_mutex_init(&o->mu, NULL);
    tb_mbox_init(&o->cmds, wake_thunk, o);
    tb_mbox_init(&o->events, notify, notify_arg);
    o->stop_cmd.kind = REP__CMD_STOP;
    atomic_init(&o->stop_requested, false);
}

bool rep__output_wants(const rep_output_t *o, const char *name)
{
    if (o->cfg.ntopics == 0)
        return true;
    for (size_t i = 0; i < o->cfg.ntopics; i++)
        if (router_filter_match(o->cfg.topics[i], name, strlen(name)))
            return true;
    return false;
}

bool rep__output_takes(const rep_output_t *o, size_t t)
{
    return t < o->e->ntopics && rep__output_wants(o, o->e->topics[t].name) && !rep__topic_gone(o->e, t);
}

int rep__output_start(rep_output_t *o)
{
    /* the thread takes no signals: they belong to the event loop */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&o->thread, NULL, o->ops->main, o);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    o->started = true;
    return 0;
}

void rep__output_kick(rep_output_t *o, size_t topic)
{
    if (!o || topic >= o->nlanes || !o->lanes[topic])
        return;
    rep__lane_t *l = o->lanes[topic];
    if (!atomic_exchange(&l->queued, true))
        tb_mbox_push(&o->cmds, &l->kick.node);
}

void rep__output_stop(rep_output_t *o)
{
    if (atomic_exchange(&o->stop_requested, true))
        return;
    if (o->started) {
        tb_mbox_push(&o->cmds, &o->stop_cmd.node);
        return;
    }
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__output_post(o, ev);
}

void rep__output_post(rep_output_t *o, rep_event_t *ev)
{
    ev->output = o->idx;
    tb_mbox_push(&o->events, &ev->node);
}

/* rep_engine_release_topic's command, on the output's thread (RELOAD.md 4.3 step 1): the kind
 * stops what it runs for the topic, the lane closes its reader and cursor, and the loop hears
 * REP_EV_TOPIC_RELEASED (once per output: it retires the log when every output has answered). */
static void release(rep_output_t *o, rep__topic_cmd_t *cmd)
{
    rep__lane_t *l = cmd->lane;
    if (!atomic_load(&l->released)) {
        if (o->ops->release_topic)
            o->ops->release_topic(o, l);
        rep__lane_release(l);
        tb_info("replicator: a retiring topic's lane released (drained)", TB_S("output", o->name),
                TB_S("topic", l->name), TB_U("acked_offset", l->win.acked));
    }
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_TOPIC_RELEASED;
    ev->topic = l->topic;
    rep__output_post(o, ev);
    free(cmd);
}

void rep__output_drain(rep_output_t *o)
{
    for (tb_mnode_t *n = tb_mbox_take(&o->cmds), *next; n; n = next) {
        next = n->next;
        rep__cmd_t *cmd = TB_CONTAINER_OF(n, rep__cmd_t, node);
        if (cmd->kind == REP__CMD_STOP) {
            o->ops->stop(o);
        } else if (cmd->kind == REP__CMD_TOPIC && ((rep__topic_cmd_t *)cmd)->release) {
            release(o, (rep__topic_cmd_t *)cmd);
        } else if (cmd->kind == REP__CMD_TOPIC) {
            o->ops->topic_cmd(o, (rep__topic_cmd_t *)cmd);
        } else if (cmd->kind == REP__CMD_RATES) {
            rep__rates_cmd_t *rc = (rep__rates_cmd_t *)cmd;
            rep__pace_set_rates(&o->pace, rc->max_bytes_per_s, rc->max_messages_per_s, tb_mono_ms());
            tb_info("replicator: rate caps applied", TB_S("output", o->name),
                    TB_U("max_bytes_per_s", rc->max_bytes_per_s), TB_U("max_messages_per_s", rc->max_messages_per_s));
            free(cmd);
            if (o->ops->rates_changed)
                o->ops->rates_changed(o);
        } else if (cmd->kind == REP__CMD_DL) {
            if (o->ops->dl_answer)
                o->ops->dl_answer(o, (rep__dl_cmd_t *)cmd);
            else
                free(cmd);
        } else {
            rep__lane_t *l = TB_CONTAINER_OF(cmd, rep__lane_t, kick);
            atomic_store(&l->queued, false);
            if (!atomic_load(&l->released)) /* a kick queued before the release: nothing to read */
                o->ops->lane_kicked(o, l);
        }
    }
}

void rep__output_retire(rep_output_t *o)
{
    pthread_join(o->thread, NULL);
    o->joined = true;
    /* what its thread never took: a release answers (the retirement waits for it), the rest goes */
    for (tb_mnode_t *n = tb_mbox_take(&o->cmds), *next; n; n = next) {
        next = n->next;
        rep__cmd_t *cmd = TB_CONTAINER_OF(n, rep__cmd_t, node);
        if (cmd->kind == REP__CMD_TOPIC && ((rep__topic_cmd_t *)cmd)->release) {
            release(o, (rep__topic_cmd_t *)cmd);
        } else if (cmd->kind == REP__CMD_TOPIC) {
            free(((rep__topic_cmd_t *)cmd)->subject);
            free(cmd);
        } else if (cmd->kind == REP__CMD_DL || cmd->kind == REP__CMD_RATES) {
            free(cmd); /* a dead letter's record stays past the parked checkpoint: read again if re-added */
        } else if (cmd->kind == REP__CMD_KICK) {
            atomic_store(&TB_CONTAINER_OF(cmd, rep__lane_t, kick)->queued, false);
        }
    }
    for (size_t t = 0; t < o->nlanes; t++) {
        rep__lane_t *l = __atomic_load_n(&o->lanes[t], __ATOMIC_ACQUIRE);
        if (l && !atomic_load(&l->released))
            rep__lane_release(l); /* its cursor parked: checkpoint kept, retention no longer waits */
    }
    atomic_store(&o->life, REP__OUT_REMOVED);
}

void rep__output_free(rep_output_t *o)
{
    if (!o)
        return;
    if (o->started && !o->joined)
        pthread_join(o->thread, NULL);
    for (tb_mnode_t *n = tb_mbox_take(&o->cmds), *next; n; n = next) { /* never taken by its thread */
        next = n->next;
        rep__cmd_t *cmd = TB_CONTAINER_OF(n, rep__cmd_t, node);
        if (cmd->kind == REP__CMD_TOPIC) {
            free(((rep__topic_cmd_t *)cmd)->subject);
            free(cmd);
        } else if (cmd->kind == REP__CMD_RATES) {
            free(cmd);
        } else if (cmd->kind == REP__CMD_DL) {
            free(cmd); /* the record stays in the log past the checkpoint: read again at the next start */
        }
    }
    o->ops->fini(o);
    for (tb_mnode_t *n = tb_mbox_take(&o->events), *next; n; n = next) {
        next = n->next;
        rep_event_free(TB_CONTAINER_OF(n, rep_event_t, node));
    }
    tb_mbox_destroy(&o->cmds);
    tb_mbox_destroy(&o->events);
    pthread_mutex_destroy(&o->mu);
    for (size_t i = 0; i < o->cfg.ntopics; i++)
        free(o->cfg.topics[i]);
    free(o->cfg.topics);
    free(o->cfg.name);
    free(o->lanes);
    free(o->name);
    free(o);
}
