/*
 * http_service.c: the operator's endpoint as a gateway service: the server,
 * the provider the lead fills, the loop health tick, and the collector
 * that copies the server's own counters into the metrics registry.
 *
 * Loop health: a timer ticks every tick_ms and records how late it ran,
 * measured on the monotonic clock. A loop blocked for a while runs its
 * timers first when it wakes, before reading sockets, so the first /healthz
 * answered after a stall already sees the late tick and says 503. A tick
 * that has not run for tick_ms + max_lag_ms also counts as unhealthy. A
 * loop that is blocked right now cannot answer at all: the probe's own
 * timeout is the signal then.
 *
 * Drain order: the service is registered first in gw_run, so it drains
 * last: /readyz says "shutting down" while MQTT and the log drain, and
 * /healthz keeps answering until the end.
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const http_cluster_states[HTTP_CLUSTER__COUNT] = {
    [HTTP_CLUSTER_UNKNOWN] = "unknown",
    [HTTP_CLUSTER_CONNECTING] = "connecting",
    [HTTP_CLUSTER_CONNECTED] = "connected",
    [HTTP_CLUSTER_UNREACHABLE] = "unreachable",
};

const char *const http_topic_states[HTTP_TOPIC__COUNT] = {
    [HTTP_TOPIC_UNKNOWN] = "unknown",
    [HTTP_TOPIC_IDLE] = "idle",
    [HTTP_TOPIC_REPLICATING] = "replicating",
    [HTTP_TOPIC_CATCHING_UP] = "catching_up",
    [HTTP_TOPIC_STALLED] = "stalled",
    [HTTP_TOPIC_FAILED] = "failed",
    [HTTP_TOPIC_PAUSED] = "paused",
    [HTTP_TOPIC_RETIRING] = "retiring",
    [HTTP_TOPIC_RETIRED] = "retired",
    [HTTP_TOPIC_KEPT] = "kept",
};

void http_service_opts_default(http_service_opts_t *o)
{
    http_opts_default(&o->http);
    o->tick_ms = 1000;
    o->max_lag_ms = 3000;
    o->render_ms = 250;
    o->edge_name = NULL;
    o->token_probes = false;
    o->history_ms = 5000;
}

void http_service_set_token(http_service_t *s, const char *token)
{
    if (s->token)
        explicit_bzero(s->token, strlen(s->token));
    free(s->token);
    s->token = token && *token ? tb_strdup(token) : NULL;
}

void http_service_set_admin_token(http_service_t *s, const char *token)
{
    if (s->admin_token)
        explicit_bzero(s->admin_token, strlen(s->admin_token));
    free(s->admin_token);
    s->admin_token = token && *token ? tb_strdup(token) : NULL;
}

void http_service_set_admin(http_service_t *s, const http_admin_ops_t *ops)
{
    if (ops)
        s->admin = *ops;
    else
        memset(&s->admin, 0, sizeof s->admin);
}

void http_service_set_tls(http_service_t *s, tls_ctx_t *t)
{
    bool reload = s->srv->tls != NULL;
    if (t) {
        tls_ctx_info_t in;
        tls_ctx_info(t, &in);
        if (in.expired)
            tb_warn("http TLS certificate has expired: clients that check it will refuse the handshake",
                    TB_S("cert_file", in.cert_file), TB_S("subject", in.subject), TB_S("not_after", in.not_after));
        else
            tb_info(reload ? "http TLS certificate reloaded" : "http TLS certificate", TB_S("cert_file", in.cert_file),
                    TB_S("subject", in.subject), TB_S("not_after", in.not_after),
                    TB_B("client_cert_required", in.require_cert));
    }
    http_server_set_tls(s->srv, t);
}

static void tick_cb(uv_timer_t *t)
{
    http_service_t *s = t->data;
    uint64_t now = tb_mono_ns(), expected = s->last_tick_ns + s->opts.tick_ms * 1000000ull;
    s->lag_ns = now > expected ? now - expected : 0;
    s->last_tick_ns = now;
    http__admin_tick(s); /* POST /admin/drain?wait_ms: answers now due */
}

bool http_service_healthy(http_service_t *s, char *why, size_t whylen)
{
    uint64_t now = tb_mono_ns(), bound_ns = s->opts.max_lag_ms * 1000000ull;
    uint64_t since = now - s->last_tick_ns;
    if (since > s->opts.tick_ms * 1000000ull + bound_ns) {
        snprintf(why, whylen, "event loop health tick last ran %.3f s ago (bound %.3f s)", since / 1e9,
                 (s->opts.tick_ms + s->opts.max_lag_ms) / 1e3);
        return false;
    }
    if (s->lag_ns > bound_ns) {
        snprintf(why, whylen, "event loop blocked: a tick ran %.3f s late (bound %.3f s)", s->lag_ns / 1e9,
                 s->opts.max_lag_ms / 1e3);
        return false;
    }
    if (s->p.healthy && !s->p.healthy(s->p.arg, why, whylen))
        return false;
    snprintf(why, whylen, "ok");
    return true;
}

bool http_service_ready(http_service_t *s, char *why, size_t whylen)
{
    http_readiness_t r = { 0 };
    const char *no = NULL;
    if (!s->p.readiness)
        no = "no readiness provider";
    else {
        s->p.readiness(s->p.arg, &r);
        no = r.draining ? "shutting down"
           : r.quiesced ? "draining (POST /admin/drain): not accepting until the restart"
           : !r.bootstrap_done ? "bootstrap not finished"
           : !r.mqtt_listening ? "mqtt listener not started"
           : !r.wal_writable ? "write-ahead log not writable"
           : NULL;
    }
    snprintf(why, whylen, "%s", no ? no : "ready");
    return no == NULL;
}

/* Copies the server's counters and the service's own state into the catalog metrics. */
static void collect(void *arg, metrics_t *m)
{
    http_service_t *s = arg;
    http_stats_t st;
    http_get_stats(s->srv, &st);
    metrics_set(metrics_fam(m, METRICS_HTTP_CONNECTIONS), 0, 0, st.conns);
    for (size_t i = 0; i < metrics_nhttp_codes; i++)
        metrics_set(metrics_fam(m, METRICS_HTTP_REQUESTS), i, 0, (int64_t)st.by_code[i]);
    metrics_set(metrics_fam(m, METRICS_HTTP_REFUSED), 0, 0, (int64_t)st.refused);
    metrics_set(metrics_fam(m, METRICS_HTTP_EVICTED), 0, 0, (int64_t)st.evicted);
    metrics_set(metrics_fam(m, METRICS_HTTP_TLS_FAILED), 0, 0, (int64_t)st.tls_handshake_failures);
    for (size_t k = 0; k < METRICS_HTTP_TIMEOUT__COUNT; k++)
        metrics_set(metrics_fam(m, METRICS_HTTP_TIMEOUTS), k, 0, (int64_t)st.timeouts[k]);
    metrics_set(metrics_fam(m, METRICS_LOOP_LAG), 0, 0, (int64_t)s->lag_ns);
    char why[160];
    metrics_set(metrics_fam(m, METRICS_READY), 0, 0, http_service_ready(s, why, sizeof why));
    http_cluster_state_t cs = s->p.cluster_state ? s->p.cluster_state(s->p.arg) : HTTP_CLUSTER_UNKNOWN;
    metrics_set(metrics_fam(m, METRICS_CLUSTER_UP), 0, 0, cs == HTTP_CLUSTER_CONNECTED);
}

int http_service_new(uv_loop_t *loop, const http_service_opts_t *o, metrics_t *m,
                        const http_provider_t *p, http_service_t **out)
{
    *out = NULL;
    if (!metrics_fam(m, METRICS_READY))
        return TB_EINVALID; /* the catalog is not registered */
    http_service_t *s = tb_calloc(1, sizeof *s);
    s->loop = loop;
    if (o)
        s->opts = *o;
    else
        http_service_opts_default(&s->opts);
    if (s->opts.tick_ms == 0)
        s->opts.tick_ms = 1000;
    if (s->opts.history_ms == 0)
        s->opts.history_ms = 5000;
    s->m = m;
    if (p)
        s->p = *p;
    int rc = metrics_add_collector(m, collect, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    http_server_new(loop, &s->opts.http, &s->srv);
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    uv_timer_init(loop, &s->hist_timer);
    s->hist_timer.data = s;
    s->open = 3;
    s->last_tick_ns = tb_mono_ns();
    *out = s;
    return 0;
}

static void hist_cb(uv_timer_t *t)
{
    http__history_sample(t->data);
}

void http_service_sample(http_service_t *s)
{
    http__history_sample(s);
}

int http_service_listen(http_service_t *s, const char *addr)
{
    int rc = http__endpoints_mount(s);
    if (rc < 0)
        return rc;
    s->last_tick_ns = tb_mono_ns();
    uv_timer_start(&s->tick, tick_cb, s->opts.tick_ms, s->opts.tick_ms);
    http__history_sample(s); /* the baseline: the first point comes one interval later */
    uv_timer_start(&s->hist_timer, hist_cb, s->opts.history_ms, s->opts.history_ms);
    return http_listen(s->srv, addr);
}

int http_service_answer(http_service_t *s, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    int rc = http__endpoints_mount(s);
    if (rc < 0)
        return 500;
    *ctype = NULL;
    unsigned allow; /* (a 405's Allow header: not part of this answer) */
    int status = http__dispatch(s->srv, req, out, ctype, &allow);
    return status == HTTP_DEFER ? 500 : status; /* not reached: http_defer refuses a request without a connection */
}

http_server_t *http_service_server(http_service_t *s)
{
    return s->srv;
}

void http__service_one_closed(http_service_t *s)
{
    if (--s->open == 0 && s->done)
        s->done(s->done_arg);
}

static void tick_closed(uv_handle_t *h)
{
    http__service_one_closed(h->data);
}

static void server_closed(void *arg)
{
    http__service_one_closed(arg);
}

void http_service_close(http_service_t *s, void (*done)(void *arg), void *arg)
{
    if (s->closing)
        return;
    s->closing = true;
    s->done = done;
    s->done_arg = arg;
    uv_close((uv_handle_t *)&s->tick, tick_closed);
    uv_close((uv_handle_t *)&s->hist_timer, tick_closed);
    http_close(s->srv, server_closed, s);
}

void http_service_free(http_service_t *s)
{
    if (!s)
        return;
    metrics_remove_collector(s->m, collect, s);
    for (size_t i = 0; i < TB_ARRAY_LEN(s->rendered); i++)
        tb_buf_free(&s->rendered[i].body);
    tb_buf_free(&s->hist_body);
    http__history_free(s);
    http_server_free(s->srv);
    http_service_set_token(s, NULL);
    http_service_set_admin_token(s, NULL);
    http__admin_free(s);
    free(s);
}
