/*
 * run.c: gw_run(), the boot sequence. Each phase is logged; the services
 * registered here start in order and drain in reverse (gateway_int.h):
 *
 *   http        /metrics, /stats, /healthz, /readyz, over TLS with http.tls
 *               (drains last: probes answer throughout)
 *   log         the WAL (recovery), rules and topics (closes after everything that writes
 *               or reads it: the replicator's readers are closed before wal_close)
 *   replicator  RegisterEdge (retried with backoff while the cluster is away), then per
 *               topic lookup and replication from the checkpoint, and the heartbeat
 *               (drains after the listener: in-flight batches get a grace, the
 *               checkpoint follows their acks, streams close)
 *   mqtt        the MQTT listeners, plain and TLS    (drains first: acks, then goodbye)
 *   boot-complete                                    (marks /readyz's bootstrap step)
 *
 * The listener never waits for the cluster: registration runs on the
 * replicator's thread and an unreachable cluster is an outage the log
 * absorbs, not a failed boot (replication.c, docs/REPLICATION.md).
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef gw__run_t run_t;

/* ---- the operator's endpoint (http/) --------------------------------------- */

static int http_start(gw__app_t *app, void *arg)
{
    /* on failure the app still calls our drain step, which closes the handles */
    return http_service_listen(arg, app->cfg->http.listener);
}

static void http_closed(void *arg)
{
    gw__app_drained(arg);
}

static void http_drain(gw__app_t *app, void *arg)
{
    http_service_close(arg, http_closed, app);
}

/* ---- the log and the topics ------------------------------------------------ */

static int log_start(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    const cfg_t *cfg = app->cfg;
    int rc = broker_new(&app->loop, &r->broker);
    if (rc < 0) {
        tb_error("cannot set up the MQTT broker's loop handles", TB_ERR(rc));
        return rc;
    }

    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = cfg->wal.dir;
    o.segment_bytes = cfg->wal.segment_bytes;
    o.max_topic_bytes = cfg->wal.max_topic_bytes;
    o.max_total_bytes = cfg->wal.max_total_bytes;
    o.fsync = (wal_fsync_t)cfg->wal.fsync;
    o.fsync_interval_ms = cfg->wal.fsync_interval_ms;
    o.min_free_bytes = cfg->wal.min_free_bytes.bytes;
    o.min_free_permille = cfg->wal.min_free_bytes.permille;
    o.checkpoint_flush_ms = cfg->replicator.checkpoint_interval_ms;
    o.notify = broker_wal_notify;
    o.notify_arg = r->broker;
    uint64_t t0 = tb_mono_ms();
    rc = wal_open(&o, &r->wal);
    if (rc < 0) {
        tb_error("cannot open the write-ahead log", TB_S("dir", cfg->wal.dir), TB_ERR(rc));
        return rc;
    }
    tb_info("log opened", TB_S("dir", cfg->wal.dir), TB_S("fsync", cfg_fsync_name(cfg->wal.fsync)),
            TB_U("ms", tb_mono_ms() - t0));
    char err[1024];
    rc = broker_init(r->broker, cfg, r->wal, err, sizeof err);
    if (rc < 0) {
        tb_error("cannot set up the topics", TB_S("why", err));
        return rc;
    }
    size_t n = broker_ntopics(r->broker);
    size_t cap = TB_MAX(broker_topic_cap(r->broker), n); /* a reload adds topics (RELOAD.md 2.2) */
    r->metric_topic = tb_calloc(cap + 1, sizeof *r->metric_topic);
    for (size_t i = 0; i <= cap; i++)
        r->metric_topic[i] = -1;
    r->topics_open = true;
    for (size_t i = 0; i < n; i++) {
        broker_topic_t *t = broker_topic(r->broker, i);
        wal_topic_stats_t st;
        wal_topic_stats(t->wal, &st);
        r->metric_topic[i] = metrics_topic_add(r->metrics, t->name);
        tb_info("topic", TB_S("topic", t->name), TB_U("next_offset", st.next_offset),
                TB_U("checkpoint", st.checkpoint), TB_U("bytes", st.bytes), TB_U("dropped_total", st.dropped_total),
                TB_S("schema_subject", t->schema_subject ? t->schema_subject : ""),
                TB_S("on_full", wal_overflow_name(wal_topic_overflow(t->wal))));
    }
    /* outputs[] in config order: the engine's output indexes */
    for (size_t i = 0; i < cfg->noutputs && i < METRICS_MAX_OUTPUTS; i++)
        r->metric_output[r->nmetric_outputs++] = metrics_output_add(r->metrics, cfg->outputs[i].name);
    return 0;
}

static void broker_closed(void *arg)
{
    run_t *r = arg;
    r->broker = NULL;
    gw__app_drained(r->app);
}

static void log_drain(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    r->topics_open = false;
    if (!r->broker) {
        gw__app_drained(app);
        return;
    }
    if (r->wal) {
        int rc = wal_close(r->wal);
        r->wal = NULL;
        if (rc < 0)
            tb_error("closing the log reported an error", TB_ERR(rc));
        else
            tb_info("log closed: everything synced");
    }
    /* the writer thread is joined: the WAL's wake-up handle can close now */
    broker_close(r->broker, broker_closed, r);
}

/* ---- the replicator (replication.c) ---------------------------------------------- */

static int repl_start(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    gw_repl_set_broker(r->repl, r->broker);
    gw_repl_set_wal(r->repl, r->wal);
    return gw_repl_start(app, r->repl);
}

static void repl_drain(gw__app_t *app, void *arg)
{
    gw_repl_drain(app, ((run_t *)arg)->repl);
}

/* ---- the MQTT listener -------------------------------------------------------- */

static int mqtt_start(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    uint32_t max_conn;
    int rc = gw__fd_budget(app->cfg, broker_ntopics(r->broker), r->http_conns, &max_conn);
    if (rc < 0)
        return rc;
    broker_set_max_connections(r->broker, max_conn);
    auth_passwd_t *pw;
    auth_acl_t *acl;
    char err[1024];
    rc = gw_auth_load(app->cfg, &pw, &acl, err, sizeof err);
    if (rc < 0) {
        tb_error("cannot read the authentication files", TB_S("why", err));
        return rc;
    }
    broker_set_auth(r->broker, app->cfg, pw, acl);
    if (pw || acl || app->cfg->auth.allow_anonymous == CFG_ANON_FALSE)
        tb_info("authentication", TB_S("password_file", app->cfg->auth.password_file),
                TB_U("users", pw ? auth_passwd_count(pw) : 0), TB_S("acl_file", app->cfg->auth.acl_file),
                TB_U("acl_rules", acl ? auth_acl_rules(acl) : 0));
    auth_passwd_unref(pw);
    auth_acl_unref(acl);
    broker_tls_t *tls;
    rc = broker_tls_load(app->cfg, &tls, err, sizeof err);
    if (rc < 0) {
        tb_error("cannot load the TLS certificates", TB_S("why", err));
        return rc;
    }
    broker_set_tls(r->broker, tls);
    rc = broker_listen(r->broker);
    if (rc < 0)
        return rc;
    /* labelled by the address each bound: unique, and what clients dial */
    size_t n = TB_MIN(broker_nlisteners(r->broker), (size_t)METRICS_MAX_LISTENERS);
    for (size_t i = 0; i < n; i++)
        r->metric_listener[i] = broker_listener_addr(r->broker, i)
                                    ? metrics_listener_add(r->metrics, broker_listener_addr(r->broker, i))
                                    : -1;
    r->nmetric_listeners = n;
    return 0;
}

static void broker_drained(void *arg)
{
    run_t *r = arg;
    for (size_t i = 0; i < broker_ntopics(r->broker); i++) {
        broker_topic_t *t = broker_topic(r->broker, i);
        rep_topic_stats_t rs;
        gw_repl_topic_stats(r->repl, i, &rs);
        tb_info("topic totals", TB_S("topic", t->name), TB_U("received", t->received), TB_U("stored", t->stored),
                TB_U("replicated", rs.messages_acked), TB_U("acked_offset", rs.acked_offset),
                TB_U("batches_full", t->batches[METRICS_BATCH_FULL]), TB_U("batches_timeout", t->batches[METRICS_BATCH_TIMEOUT]),
                TB_U("batches_idle", t->batches[METRICS_BATCH_IDLE]));
    }
    gw__app_drained(r->app);
}

static void mqtt_drain(gw__app_t *app, void *arg)
{
    run_t *r = arg;
    if (!r->topics_open) {
        gw__app_drained(app);
        return;
    }
    broker_drain(r->broker, broker_drained, r);
}

static int boot_complete(gw__app_t *app, void *arg)
{
    (void)app;
    ((run_t *)arg)->booted = true;
    tb_info("bootstrap complete");
    return 0;
}

static void reload(gw__app_t *app, void *arg)
{
    json_decref(gw__reload(((run_t *)arg)->broker, ((run_t *)arg)->http, app->cfg, ((run_t *)arg)->reload));
}

static size_t topic_capacity(const cfg_t *cfg)
{
    size_t total = 0;
    for (size_t i = 0; i < cfg->mqtt.nmappings; i++) {
        size_t n = 1;
        for (size_t k = 0; k < cfg->mqtt.mappings[i].ncapvals && n < 100000; k++)
            n *= cfg->mqtt.mappings[i].capvals[k].nvalues ? cfg->mqtt.mappings[i].capvals[k].nvalues : 1;
        total += n;
    }
    return total ? TB_MIN(total, 10000) : 1;
}

int gw_run(const cfg_t *cfg)
{
    gw__app_t app;
    int rc = gw__app_init(&app, cfg);
    if (rc < 0) {
        tb_error("cannot create the event loop", TB_ERR(rc));
        return GW_EXIT_FAILURE;
    }
    tb_info("starting", TB_S("version", TRIB_VERSION), TB_S("config", cfg->source),
            TB_S("edge", cfg->edge.edge_name), TB_S("cluster", cfg->edge.cluster_url),
            TB_U("topic_mappings", cfg->mqtt.nmappings), TB_S("wal_fsync", cfg_fsync_name(cfg->wal.fsync)));

    gw__reload_state_t reloads = { .file_valid = true };
    run_t r = { .app = &app, .repl = gw_repl_new(), .reload = &reloads };
    reloads.run = &r;
    /* the label capacity a reload may add topics within: the broker's registry's (BROKER_TOPIC_HEADROOM) */
    if (metrics_new(&r.metrics) < 0 ||
        metrics_catalog_register(r.metrics, BROKER_TOPIC_HEADROOM(topic_capacity(cfg))) < 0) {
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_FAILURE;
    }
    metrics_set(metrics_fam(r.metrics, METRICS_WAL_TOPIC_LIMIT), 0, 0, (int64_t)cfg->wal.max_topic_bytes);
    metrics_set(metrics_fam(r.metrics, METRICS_WAL_TOTAL_LIMIT), 0, 0, (int64_t)cfg->wal.max_total_bytes);
    metrics_add_collector(r.metrics, gw__collect, &r);
    http_provider_t provider;
    gw__provider(&r, &provider);
    http_service_opts_t hopts;
    http_service_opts_default(&hopts);
    hopts.edge_name = cfg->edge.edge_name;
    hopts.token_probes = cfg->http.auth_probes;
    char *token = NULL;
    char terr[1024];
    if (gw_http_token_load(cfg, &token, terr, sizeof terr) < 0) {
        tb_error("cannot read the HTTP token file", TB_S("why", terr));
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_USAGE;
    }
    tls_ctx_t *http_tls;
    if (gw__http_tls_load(cfg, &http_tls, terr, sizeof terr) < 0) {
        tb_error("cannot load the HTTP endpoint's TLS certificate", TB_S("why", terr));
        if (token) {
            explicit_bzero(token, strlen(token));
            free(token);
        }
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_USAGE;
    }
    r.http_conns = hopts.http.max_conns;
    http_service_t *http;
    if (http_service_new(&app.loop, &hopts, r.metrics, &provider, &http) < 0) {
        free(token);
        tls_ctx_unref(http_tls);
        metrics_free(r.metrics);
        gw_repl_free(r.repl);
        return GW_EXIT_FAILURE;
    }
    http_service_set_tls(http, http_tls); /* NULL: plain HTTP */
    http_service_set_token(http, token);
    char *admin_token = NULL;
    if (gw_admin_token_load(cfg, &admin_token, terr, sizeof terr) < 0) /* gw_check read it a moment ago */
        tb_error("cannot read the admin token file; the admin API serves loopback peers only", TB_S("why", terr));
    http_service_set_admin_token(http, admin_token);
    tb_info(admin_token ? "http: /admin asks for the admin token" : "http: /admin serves loopback peers only",
            TB_S("file", cfg->http.admin_token_file));
    if (admin_token) {
        explicit_bzero(admin_token, strlen(admin_token));
        free(admin_token);
    }
    http_admin_ops_t admin;
    gw__admin_ops(&r, &admin);
    http_service_set_admin(http, &admin);
    if (token)
        tb_info("http: /metrics and /stats ask for a bearer token", TB_S("file", cfg->http.auth_token_file),
                TB_B("probes_too", cfg->http.auth_probes));
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    r.http = http;
    gw__app_add(&app, &(gw__service_t){ "http", http_start, http_drain, http });
    gw__app_add(&app, &(gw__service_t){ "log", log_start, log_drain, &r });
    gw__app_add(&app, &(gw__service_t){ "replicator", repl_start, repl_drain, &r });
    gw__app_add(&app, &(gw__service_t){ "mqtt", mqtt_start, mqtt_drain, &r });
    gw__watch_t *watch = gw__watch_new(&app, cfg); /* reload.watch_ms */
    gw__app_add(&app, &(gw__service_t){ "watch", gw__watch_start, gw__watch_drain, watch });
    gw__app_add(&app, &(gw__service_t){ "boot-complete", boot_complete, NULL, &r }); /* keep last */
    app.reload = reload;
    app.reload_arg = &r;

    rc = gw__app_run(&app);
    gw__watch_free(watch);
    http_service_free(http);
    gw__dlq_free(&r);
    gw__reload_state_free(&reloads);
    metrics_free(r.metrics);
    gw_repl_free(r.repl);
    free(r.metric_topic);
    tb_info("stopped", TB_I("exit_code", rc));
    return rc;
}
