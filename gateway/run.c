/*
 * run.c: gw_run(), the boot sequence. Each phase is logged; the services
 * it registers drain in reverse order on shutdown (app.h).
 */
#include "gateway/app.h"
#include "gateway/gateway.h"
#include "gateway/http.h"
#include "gateway/metrics.h"
#include "base/base.h"

#include <string.h>

/* ---- HTTP endpoint wiring (gateway/http*.c, gateway/metrics*.c) ----------
 * Until MQTT and the WAL are wired in, readiness says the MQTT listener has
 * not started, and the per-topic metrics stay at 0. The lead replaces
 * run_readiness() and feeds the registry: router counters on the loop with
 * gw_metrics_add(), the WAL writer's and replicator's atomics through
 * gw_metrics_add_collector(). */
typedef struct run_http {
    gw__app_t *app;
    bool booted; /* set by the "boot-complete" service, which starts last */
} run_http_t;

static void run_readiness(void *arg, gw_http_readiness_t *out)
{
    run_http_t *h = arg;
    out->bootstrap_done = h->booted;
    out->mqtt_listening = false; /* TODO(lead): the MQTT listener's state */
    out->wal_writable = false;   /* TODO(lead): the WAL's state */
    out->draining = h->app->stopping;
}

static int run_boot_complete(gw__app_t *app, void *arg)
{
    (void)app;
    ((run_http_t *)arg)->booted = true;
    tb_info("bootstrap complete");
    return 0;
}

/* Upstream topics known at startup: one per literal danube_topic, and one per
 * capture_values combination of a template (the bound of the topic label set). */
static size_t run_topic_capacity(const cfg_t *cfg)
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
/* ---- end of HTTP endpoint wiring ---- */

int gw_run(const cfg_t *cfg)
{
    gw__app_t app;
    gw__app_init(&app, cfg);
    tb_info("starting", TB_S("version", TRIB_VERSION), TB_S("config", cfg->source),
            TB_S("edge", cfg->edge.edge_name), TB_S("cluster", cfg->edge.cluster_url),
            TB_U("topic_mappings", cfg->mqtt.nmappings), TB_S("wal_fsync", cfg_fsync_name(cfg->wal.fsync)));

    /* HTTP endpoint: registered first, so it drains last (/healthz answers throughout). */
    gw_metrics_t *metrics;
    gw_metrics_new(&metrics);
    if (gw_metrics_catalog_register(metrics, run_topic_capacity(cfg)) < 0) {
        gw_metrics_free(metrics);
        return GW_EXIT_FAILURE;
    }
    gw_metrics_set(gw_metrics_fam(metrics, GW_M_WAL_TOPIC_LIMIT), 0, 0, (int64_t)cfg->wal.max_topic_bytes);
    gw_metrics_set(gw_metrics_fam(metrics, GW_M_WAL_TOTAL_LIMIT), 0, 0, (int64_t)cfg->wal.max_total_bytes);
    for (size_t i = 0; i < cfg->mqtt.nmappings; i++)
        if (!strstr(cfg->mqtt.mappings[i].danube_topic, "${")) /* templates: TODO(lead), from the router */
            gw_metrics_topic_add(metrics, cfg->mqtt.mappings[i].danube_topic);
    run_http_t rh = { &app, false };
    gw_http_provider_t provider = { .arg = &rh, .readiness = run_readiness };
    gw_http_service_opts_t hopts;
    gw_http_service_opts_default(&hopts);
    hopts.edge_name = cfg->edge.edge_name;
    gw_http_service_t *http;
    if (gw_http_service_new(&app.loop, &hopts, metrics, &provider, &http) < 0) {
        gw_metrics_free(metrics);
        return GW_EXIT_FAILURE;
    }
    gw__app_add(&app, &(gw__service_t){ "http", gw_http_service_start, gw_http_service_drain, http });

    /* (the MQTT listener, the WAL and the replicator register here) */

    gw__app_add(&app, &(gw__service_t){ "boot-complete", run_boot_complete, NULL, &rh }); /* keep last */
    int rc = gw__app_run(&app);
    gw_http_service_free(http);
    gw_metrics_free(metrics);
    tb_info("stopped", TB_I("exit_code", rc));
    return rc;
}
