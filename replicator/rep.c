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
 * under r->mu, into a published struct whenever they change (rep__publish,
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

int rep_new(const rep_opts_t *o, rep_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = check_opts(o, err, errlen);
    if (rc < 0)
        return rc;
    rep_t *r = tb_calloc(1, sizeof *r);
    r->o = *o;
    r->o.edge_name = tb_strdup(o->edge_name);
    r->o.cluster_url = tb_strdup(o->cluster_url);
    r->o.token = dup_or_null(o->token);
    r->o.tls_ca_file = dup_or_null(o->tls_ca_file);
    r->o.tls_cert_file = dup_or_null(o->tls_cert_file);
    r->o.tls_key_file = dup_or_null(o->tls_key_file);
    r->o.topics = NULL;
    r->producer = tb_asprintf("tributary-%s", o->edge_name);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->waker_mu, NULL);
    tb_mbox_init(&r->cmds, rep__wake, r);
    tb_mbox_init(&r->events, o->notify, o->notify_arg);
    r->stop_cmd.kind = REP__CMD_STOP;
    atomic_init(&r->stop_requested, false);
    r->rng = (tb_mono_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    r->st.cluster = REP_CLUSTER_CONNECTING;
    r->pub = r->st;
    grpc_init();
    rep__grpc_log_setup();
    if (load_tls(r, err, errlen) < 0) {
        rep_free(r);
        return TB_ECONFIG;
    }
    if (r->o.token) {
        r->bearer = tb_asprintf("Bearer %s", r->o.token);
        r->md[0].key = grpc_slice_from_static_string("authorization");
        r->md[0].value = grpc_slice_from_copied_string(r->bearer);
        r->nmd = 1;
    }
    r->ntopics = o->ntopics;
    r->topics = tb_calloc(o->ntopics ? o->ntopics : 1, sizeof *r->topics);
    for (size_t i = 0; i < o->ntopics; i++) {
        rep__topic_t *t = &r->topics[i];
        t->idx = i;
        t->name = tb_strdup(o->topics[i].name);
        t->subject = dup_or_null(o->topics[i].schema_subject);
        t->wal = o->topics[i].wal;
        wal_topic_stats_t ws;
        wal_topic_stats(t->wal, &ws);
        t->st.start_offset = ws.open_offset ? ws.open_offset : ws.next_offset;
        rep__topic_init(r, t);
        t->enc.max_age_ms = o->topics[i].max_age_ms;
        t->pub = t->st;
        t->pub_progress_ms = t->progress_ms;
    }
    r->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    r->inert = grpc_channel_create("127.0.0.1:9", creds, NULL); /* never connects: rep_thread.c */
    grpc_channel_credentials_release(creds);
    *out = r;
    return 0;
}

int rep_start(rep_t *r)
{
    /* the thread takes no signals: they belong to the event loop */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->thread, NULL, rep__thread_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    r->started = true;
    return 0;
}

void rep_kick(rep_t *r, size_t topic)
{
    if (!r || topic >= r->ntopics)
        return;
    rep__topic_t *t = &r->topics[topic];
    if (!atomic_exchange(&t->queued, true))
        tb_mbox_push(&r->cmds, &t->kick.node);
}

void rep_stop(rep_t *r)
{
    if (atomic_exchange(&r->stop_requested, true))
        return;
    if (r->started) {
        tb_mbox_push(&r->cmds, &r->stop_cmd.node);
        return;
    }
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = REP_EV_STOPPED;
    rep__post(r, ev);
}

void rep_free(rep_t *r)
{
    if (!r)
        return;
    if (r->started)
        pthread_join(r->thread, NULL);
    if (r->cq) { /* never started */
        grpc_completion_queue_shutdown(r->cq);
        while (grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(r->cq);
    }
    for (size_t i = 0; i < r->ntopics; i++)
        rep__topic_free(&r->topics[i]);
    free(r->topics);
    rep__chans_free(r);
    rep__reg_free(r);
    rep__heap_free(&r->timers);
    for (rep_event_t *ev = rep_take_events(r), *next; ev; ev = next) {
        next = rep_event_next(ev);
        rep_event_free(ev);
    }
    if (r->inert)
        grpc_channel_destroy(r->inert);
    if (r->nmd)
        grpc_slice_unref(r->md[0].value);
    tb_mbox_destroy(&r->cmds);
    tb_mbox_destroy(&r->events);
    pthread_mutex_destroy(&r->mu);
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
    free(r);
    grpc_shutdown();
}

/* ---- events -------------------------------------------------------------------------- */

rep_event_t *rep_take_events(rep_t *r)
{
    tb_mnode_t *n = tb_mbox_take(&r->events);
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
                                     "topic_removed", "stopped" };
    return (unsigned)k < TB_ARRAY_LEN(n) ? n[k] : "?";
}

/* ---- stats ------------------------------------------------------------------------------ */

size_t rep_ntopics(const rep_t *r)
{
    return r->ntopics;
}

void rep_topic_stats(rep_t *r, size_t topic, rep_topic_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (topic >= r->ntopics)
        return;
    rep__topic_t *t = &r->topics[topic];
    pthread_mutex_lock(&r->mu);
    *out = t->pub;
    uint64_t progress = t->pub_progress_ms;
    uint64_t unacked_bytes = t->pub_unacked_bytes;
    wal_pos_t pos = t->pub_pos;
    pthread_mutex_unlock(&r->mu);
    out->readable_end = wal_topic_readable_end(t->wal);
    /* the records stored above the checkpoint, not the span of offsets:
     * after a kill in memory_first it holds a reservation skip (wal.h) */
    out->lag_messages = wal_topic_stored_between(t->wal, out->acked_offset, out->readable_end);
    /* bytes: what was read and waits for its ack, plus the log past the reader (live) */
    out->lag_bytes = pos.offset ? unacked_bytes + wal_topic_bytes_after(t->wal, &pos) : 0;
    uint64_t now = tb_mono_ms();
    out->no_progress_ms = out->lag_messages > 0 && now > progress ? now - progress : 0;
    out->stalled = out->lag_messages > 0 && out->state != REP_TOPIC_STOPPED &&
                   out->no_progress_ms >= r->o.stall_after_ms;
}

void rep_stats(rep_t *r, rep_stats_t *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->pub;
    pthread_mutex_unlock(&r->mu);
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
    static const char *const n[] = { "unavailable", "ack_timeout", "status", "protocol", "lookup" };
    return (unsigned)x < TB_ARRAY_LEN(n) ? n[x] : "?";
}
