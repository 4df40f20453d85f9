/*
 * rep.c: the replicator's public face (replicator.h): checking options,
 * creation, the thread's start and stop, events towards the loop, and the
 * stats an operator reads (the options themselves: rep_opts.c).
 *
 * rep_new() does everything that can fail for a configuration reason
 * (a bad URL, an unreadable TLS file) so that the boot can refuse to start
 * with a message naming the key, and nothing that needs the network: an
 * unreachable cluster must never fail the boot (DESIGN.md promise 6).
 *
 * Stats: the thread keeps its counters in plain fields and copies them,
 * under r->out.mu, into a published struct whenever they change (rep__publish,
 * rep__topic_publish); readers on other threads copy that struct out under
 * the same lock and add what is live (the WAL's readable end, the lag, the
 * stall). One small lock, held for a struct copy, never for I/O.
 */
#include "replicator/rep_int.h"

#include <errno.h>
#include <grpc/grpc_security.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_or_null(const char *s)
{
    return s && *s ? tb_strdup(s) : NULL;
}

/* A whole (small) file as a NUL-terminated string. */
static int read_file(const char *key, const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read %s: %s", key, path, strerror(errno));
        return TB_ECONFIG;
    }
    size_t cap = 4096, len = 0;
    char *buf = tb_malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            if (cap >= (16u << 20)) {
                fclose(f);
                free(buf);
                snprintf(err, errlen, "%s: %s is larger than 16 MiB", key, path);
                return TB_ECONFIG;
            }
            cap *= 2;
            buf = tb_realloc(buf, cap);
        }
    }
    bool bad = ferror(f);
    fclose(f);
    buf[len] = 0;
    if (bad || len == 0) {
        free(buf);
        snprintf(err, errlen, "%s: %s is %s", key, path, bad ? "unreadable" : "empty");
        return TB_ECONFIG;
    }
    *out = buf;
    return 0;
}

static int check_opts(const rep_opts_t *o, char *err, size_t errlen)
{
    char *target = NULL;
    bool tls;
    if (!o->edge_name || !*o->edge_name) {
        snprintf(err, errlen, "edge.edge_name: empty");
        return TB_ECONFIG;
    }
    if (!o->cluster_url || rep__parse_url(o->cluster_url, &target, &tls) < 0) {
        snprintf(err, errlen, "edge.cluster_url: expected http(s)://host:port, got \"%s\"",
                 o->cluster_url ? o->cluster_url : "");
        return TB_ECONFIG;
    }
    free(target);
    if (!o->batch_size || !o->max_inflight_batches || !o->max_batch_bytes || !o->ack_timeout_ms ||
        !o->stall_after_ms || !o->rpc_timeout_ms || !o->heartbeat_interval_ms || !o->register_retry_initial_ms ||
        o->register_retry_max_ms < o->register_retry_initial_ms || o->retry_max_ms < o->retry_initial_ms) {
        snprintf(err, errlen, "replicator: a count, size or interval is zero, or a backoff maximum is below its start");
        return TB_ECONFIG;
    }
    if ((o->tls_cert_file && *o->tls_cert_file) != (o->tls_key_file && *o->tls_key_file)) {
        snprintf(err, errlen, "edge.tls.cert_file and edge.tls.key_file go together: give both or neither");
        return TB_ECONFIG;
    }
    return 0;
}

static int load_tls(rep_t *r, char *err, size_t errlen)
{
    if (strncmp(r->o.cluster_url, "https://", 8) != 0)
        return 0;
    int rc = 0;
    if (r->o.tls_ca_file)
        rc = read_file("edge.tls.ca_file", r->o.tls_ca_file, &r->tls_roots, err, errlen);
    if (rc == 0 && r->o.tls_cert_file)
        rc = read_file("edge.tls.cert_file", r->o.tls_cert_file, &r->tls_cert, err, errlen);
    if (rc == 0 && r->o.tls_key_file)
        rc = read_file("edge.tls.key_file", r->o.tls_key_file, &r->tls_key, err, errlen);
    return rc;
}

/*
 * Everything rep_new did but allocating r and its mailboxes: the options
 * checked and copied, grpc_init, the TLS files, the topics (each a lane on
 * cursor r->out.wal_id, at lane index lane_idx[i], or i when NULL), the
 * completion queue. On failure r is left for danube_fini.
 */
static int danube_setup(rep_t *r, const rep_opts_t *o, const size_t *lane_idx, char *err, size_t errlen)
{
    int rc = check_opts(o, err, errlen);
    if (rc < 0)
        return rc;
    r->o = *o;
    r->o.edge_name = tb_strdup(o->edge_name);
    r->o.cluster_url = tb_strdup(o->cluster_url);
    r->o.token = dup_or_null(o->token);
    r->o.tls_ca_file = dup_or_null(o->tls_ca_file);
    r->o.tls_cert_file = dup_or_null(o->tls_cert_file);
    r->o.tls_key_file = dup_or_null(o->tls_key_file);
    r->o.topics = NULL;
    r->out.stall_after_ms = o->stall_after_ms;
    r->producer = tb_asprintf("tributary-%s", o->edge_name);
    pthread_mutex_init(&r->waker_mu, NULL);
    r->rng = (tb_mono_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    r->refused_rl = (tb_ratelimit_t)TB_RATELIMIT_INIT(60000);
    atomic_init(&r->max_attempts, r->o.max_attempts);
    r->st.cluster = REP_CLUSTER_CONNECTING;
    r->pub = r->st;
    grpc_init();
    r->grpc_up = true;
    rep__grpc_log_setup();
    if (load_tls(r, err, errlen) < 0)
        return TB_ECONFIG;
    if (r->o.token) {
        r->bearer = tb_asprintf("Bearer %s", r->o.token);
        r->md[0].key = grpc_slice_from_static_string("authorization");
        r->md[0].value = grpc_slice_from_copied_string(r->bearer);
        r->nmd = 1;
    }
    /* the output's rate caps: one pair of buckets over all its topics; DRR's
     * quantum is one full batch, so equal priorities alternate whole batches */
    rep__pace_init(&r->out.pace, o->max_bytes_per_s, o->max_messages_per_s, o->max_batch_bytes, tb_mono_ms());
    atomic_store(&r->out.caps_bytes, o->max_bytes_per_s);
    atomic_store(&r->out.caps_msgs, o->max_messages_per_s);
    r->pace_timer.cb = rep__topic_paced;
    r->ntopics = o->ntopics;
    r->topics = tb_calloc(o->ntopics ? o->ntopics : 1, sizeof *r->topics);
    r->all = tb_calloc(o->ntopics ? o->ntopics : 1, sizeof *r->all);
    for (size_t i = 0; i < o->ntopics; i++) {
        rep__topic_t *t = r->topics[i] = r->all[r->nall++] = tb_calloc(1, sizeof *t);
        t->idx = i;
        t->subject = dup_or_null(o->topics[i].schema_subject);
        wal_topic_stats_t ws;
        wal_topic_stats(o->topics[i].wal, &ws);
        rc = rep__lane_init(&t->lane, &r->out, lane_idx ? lane_idx[i] : i, o->topics[i].name, o->topics[i].wal,
                            ws.open_offset ? ws.open_offset : ws.next_offset, o->max_inflight_batches,
                            WAL_START_LATEST);
        if (rc < 0) {
            snprintf(err, errlen, "replicator: topic %s: cannot open its log cursor: %s", o->topics[i].name,
                     tb_strerror(rc));
            return rc;
        }
        rep__topic_init(r, t);
        t->enc.max_age_ms = o->topics[i].max_age_ms;
        t->lane.priority = o->topics[i].priority;
        rep__pace_lane_init(&t->lane.pace, o->topics[i].priority);
        t->lane.pub = t->lane.st;
        t->lane.pub_progress_ms = t->lane.progress_ms;
    }
    r->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    r->inert = grpc_channel_create("127.0.0.1:9", creds, NULL); /* never connects: rep_thread.c */
    grpc_channel_credentials_release(creds);
    return 0;
}

int rep_new(const rep_opts_t *o, rep_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = check_opts(o, err, errlen);
    if (rc < 0)
        return rc;
    rep_t *r = tb_calloc(1, sizeof *r);
    rep__output_base_init(&r->out, &rep__danube_ops, NULL, 0, "danube", o->ntopics, o->notify, o->notify_arg);
    rc = danube_setup(r, o, NULL, err, errlen);
    if (rc < 0) {
        rep_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int rep_start(rep_t *r)
{
    return rep__output_start(&r->out);
}

void rep_kick(rep_t *r, size_t topic)
{
    if (r)
        rep__output_kick(&r->out, topic);
}

void rep_stop(rep_t *r)
{
    rep__output_stop(&r->out);
}

static void danube_fini(rep_output_t *o)
{
    rep_t *r = (rep_t *)o;
    if (r->cq) { /* never started */
        grpc_completion_queue_shutdown(r->cq);
        while (grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(r->cq);
        r->cq = NULL;
    }
    for (size_t i = 0; i < r->nall; i++) {
        rep__topic_free(r->all[i]);
        free(r->all[i]);
    }
    free(r->all);
    r->all = NULL;
    r->nall = 0;
    free(r->topics);
    r->topics = NULL;
    rep__chans_free(r);
    rep__reg_free(r);
    rep__heap_free(&r->timers);
    if (r->inert)
        grpc_channel_destroy(r->inert);
    if (r->nmd)
        grpc_slice_unref(r->md[0].value);
    if (r->producer) /* set with the mutex (danube_setup) */
        pthread_mutex_destroy(&r->waker_mu);
    free((char *)r->o.edge_name);
    free((char *)r->o.cluster_url);
    free((char *)r->o.token);
    free((char *)r->o.tls_ca_file);
    free((char *)r->o.tls_cert_file);
    free((char *)r->o.tls_key_file);
    free(r->bearer);
    free(r->producer);
    free(r->tls_roots);
    free(r->tls_cert);
    free(r->tls_key);
    if (r->grpc_up)
        grpc_shutdown();
}

void rep_free(rep_t *r)
{
    if (r)
        rep__output_free(&r->out); /* joins, danube_fini, frees the events not taken */
}

/* ---- the danube kind (rep_int.h: rep_output_ops_t) ------------------------------------ */

/* The engine's danube output: rep_new's options from the configuration, the
 * topics its `topics` filters select (lanes at the engine's indexes). */
static int danube_init(rep_output_t *o, const cfg_t *cfg, char *err, size_t errlen)
{
    rep_t *r = (rep_t *)o;
    rep_engine_t *e = o->e;
    rep_opts_t opts;
    rep_opts_default(&opts);
    rep_opts_from_cfg(cfg, &opts);
    rep_topic_spec_t *specs = tb_calloc(e->ntopics + 1, sizeof *specs);
    size_t *idx = tb_calloc(e->ntopics + 1, sizeof *idx);
    size_t n = 0;
    for (size_t i = 0; i < e->ntopics; i++) {
        if (!rep__output_takes(o, i))
            continue;
        specs[n] = e->topics[i];
        idx[n++] = i;
    }
    opts.topics = specs;
    opts.ntopics = n;
    int rc = danube_setup(r, &opts, idx, err, errlen);
    free(specs);
    free(idx);
    return rc;
}

static void *danube_main(void *o)
{
    return rep__thread_main(o);
}

static void danube_wake(rep_output_t *o)
{
    rep__wake(o);
}

static void danube_lane_kicked(rep_output_t *o, rep__lane_t *l)
{
    rep__topic_kicked((rep_t *)o, (rep__topic_t *)l); /* the lane is the topic's first member */
}

static void danube_stop(rep_output_t *o)
{
    rep__begin_stop((rep_t *)o);
}

static void danube_rates_changed(rep_output_t *o)
{
    rep__topic_rates_changed((rep_t *)o);
}

static int danube_reconfigure(rep_output_t *o, const rep_output_cfg_t *next)
{
    (void)o;
    (void)next;
    return TB_EUNSUPPORTED; /* replaced whole (reload, later) */
}

/* ---- topics at run time (a reload: RELOAD.md 2.6) ------------------------------------ */

/* Loop thread: the topic's struct and lane (its cursor opened here, as at
 * init), then the thread appends it and declares it (RegisterEdge again). */
static int danube_add_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    rep_t *r = (rep_t *)o;
    rep__topic_t *t = tb_calloc(1, sizeof *t);
    t->subject = dup_or_null(spec->schema_subject);
    wal_topic_stats_t ws;
    wal_topic_stats(spec->wal, &ws);
    /* o->lanes[topic] is written after the lane is complete: rep__output_kick and the stats read it */
    int rc = rep__lane_init(&t->lane, o, SIZE_MAX, spec->name, spec->wal,
                            ws.open_offset ? ws.open_offset : ws.next_offset, r->o.max_inflight_batches,
                            WAL_START_LATEST);
    if (rc < 0) {
        free(t->subject);
        free(t);
        return rc;
    }
    t->lane.topic = topic;
    /* its mapping's priority, as danube_setup gives a boot topic (rep__lane_init had no index) */
    t->lane.priority = spec->priority;
    rep__pace_lane_init(&t->lane.pace, spec->priority);
    rep__topic_init(r, t);
    t->enc.max_age_ms = spec->max_age_ms;
    rep__lane_t *old = topic < o->nlanes ? o->lanes[topic] : NULL;
    if (old && atomic_load(&old->released)) /* the topic given again (rep_engine_readd_topic) */
        rep__lane_carry(&t->lane, old);
    t->lane.pub = t->lane.st;
    t->lane.pub_progress_ms = t->lane.progress_ms;
    r->all = tb_realloc(r->all, (r->nall + 1) * sizeof *r->all);
    r->all[r->nall++] = t;
    __atomic_store_n(&o->lanes[topic], &t->lane, __ATOMIC_RELEASE);
    rep__topic_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
    cmd->cmd.kind = REP__CMD_TOPIC;
    cmd->add = true;
    cmd->lane = &t->lane;
    tb_mbox_push(&o->cmds, &cmd->cmd.node);
    return 0;
}

static int danube_update_topic(rep_output_t *o, size_t topic, const rep_topic_spec_t *spec)
{
    if (topic >= o->nlanes || !o->lanes[topic])
        return TB_EINVALID;
    rep__topic_cmd_t *cmd = tb_calloc(1, sizeof *cmd);
    cmd->cmd.kind = REP__CMD_TOPIC;
    cmd->lane = o->lanes[topic];
    cmd->subject = dup_or_null(spec->schema_subject);
    cmd->max_age_ms = spec->max_age_ms;
    tb_mbox_push(&o->cmds, &cmd->cmd.node);
    return 0;
}

/* Its thread. */
static void danube_topic_cmd(rep_output_t *o, rep__topic_cmd_t *cmd)
{
    rep_t *r = (rep_t *)o;
    rep__topic_t *t = (rep__topic_t *)cmd->lane; /* the lane is the topic's first member */
    if (cmd->add) {
        r->topics = tb_realloc(r->topics, (r->ntopics + 1) * sizeof *r->topics);
        t->idx = r->ntopics;
        r->topics[r->ntopics++] = t;
        tb_info("replicator: topic added at run time", REP__LOG_TOPIC(t),
                TB_S("schema_subject", t->subject ? t->subject : ""));
        if (r->stopping)
            rep__topic_stop(r, t);
        else
            rep__reg_redeclare(r);
    } else {
        bool redeclare = (t->subject == NULL) != (cmd->subject == NULL) ||
                         (t->subject && strcmp(t->subject, cmd->subject) != 0);
        free(t->subject);
        t->subject = cmd->subject;
        cmd->subject = NULL;
        t->enc.max_age_ms = cmd->max_age_ms;
        tb_info("replicator: topic updated at run time", REP__LOG_TOPIC(t),
                TB_S("schema_subject", t->subject ? t->subject : ""), TB_U("max_age_ms", t->enc.max_age_ms));
        if (redeclare && !r->stopping)
            rep__reg_redeclare(r);
    }
    free(cmd->subject);
    free(cmd);
}

/* Its thread, before the lane closes its reader and cursor (rep_output.c: release). */
static void danube_release_topic(rep_output_t *o, rep__lane_t *l)
{
    rep__topic_release((rep_t *)o, (rep__topic_t *)l); /* the lane is the topic's first member */
}

static void danube_release(rep_output_t *o, rep__batch_t *b)
{
    (void)o;
    rep__batch_release(b);
}

const rep_output_ops_t rep__danube_ops = {
    .kind = REP_KIND_DANUBE,
    .name = "danube",
    .size = sizeof(rep_t),
    .init = danube_init,
    .main = danube_main,
    .wake = danube_wake,
    .lane_kicked = danube_lane_kicked,
    .stop = danube_stop,
    .reconfigure = danube_reconfigure,
    .release = danube_release,
    .fini = danube_fini,
    .add_topic = danube_add_topic,
    .update_topic = danube_update_topic,
    .topic_cmd = danube_topic_cmd,
    .release_topic = danube_release_topic,
    .rates_changed = danube_rates_changed,
};

/* ---- events -------------------------------------------------------------------------- */

rep_event_t *rep_take_events(rep_t *r)
{
    tb_mnode_t *n = tb_mbox_take(&r->out.events);
    return n ? TB_CONTAINER_OF(n, rep_event_t, node) : NULL;
}

rep_event_t *rep_event_next(const rep_event_t *ev)
{
    return ev->node.next ? TB_CONTAINER_OF(ev->node.next, rep_event_t, node) : NULL;
}

void rep_event_free(rep_event_t *ev)
{
    if (!ev)
        return;
    free(ev->schema.subject);
    free(ev->schema.schema_type);
    free(ev->schema.definition);
    free(ev->schema.fingerprint);
    free(ev->detail);
    if (ev->dl) {
        for (size_t i = 0; i < ev->dl->n; i++)
            free(ev->dl->recs[i].blob);
        free(ev->dl->recs);
        free(ev->dl->error);
        free(ev->dl->source);
        free(ev->dl);
    }
    free(ev);
}

void rep_event_resolved(const rep_event_t *ev, sch_resolved_t *out)
{
    *out = (sch_resolved_t){
        .subject = ev->schema.subject,
        .schema_id = ev->schema.schema_id,
        .schema_version = ev->schema.schema_version,
        .schema_type = ev->schema.schema_type,
        .definition = ev->schema.definition,
        .definition_len = ev->schema.definition_len,
        .fingerprint = ev->schema.fingerprint,
    };
}

const char *rep_event_kind_name(rep_event_kind_t k)
{
    static const char *const n[] = { "topic_registered", "topic_failed", "schema_updated", "schema_removed",
                                     "topic_removed", "stopped", "dead_letter", "topic_released" };
    return (unsigned)k < TB_ARRAY_LEN(n) ? n[k] : "?";
}

/* ---- stats ------------------------------------------------------------------------------ */

size_t rep_ntopics(const rep_t *r)
{
    return r->ntopics;
}

void rep_topic_stats(rep_t *r, size_t topic, rep_topic_stats_t *out)
{
    rep__lane_stats(topic < r->out.nlanes ? r->out.lanes[topic] : NULL, out);
}

void rep_stats(rep_t *r, rep_stats_t *out)
{
    pthread_mutex_lock(&r->out.mu);
    *out = r->pub;
    pthread_mutex_unlock(&r->out.mu);
}

const char *rep_cluster_state_name(rep_cluster_state_t s)
{
    static const char *const n[] = { "connecting", "connected", "unreachable" };
    return (unsigned)s < TB_ARRAY_LEN(n) ? n[s] : "?";
}

const char *rep_reg_state_name(rep_reg_state_t s)
{
    static const char *const n[] = { "none", "registering", "registered", "retrying" };
    return (unsigned)s < TB_ARRAY_LEN(n) ? n[s] : "?";
}

const char *rep_topic_state_name(rep_topic_state_t s)
{
    static const char *const n[] = { "unregistered", "lookup", "connecting", "streaming", "backoff", "stopped" };
    return (unsigned)s < TB_ARRAY_LEN(n) ? n[s] : "?";
}

const char *rep_retry_name(rep_retry_t x)
{
    static const char *const n[] = { "unavailable", "ack_timeout", "status", "protocol", "lookup", "permanent",
                                     "refused" };
    return (unsigned)x < TB_ARRAY_LEN(n) ? n[x] : "?";
}
