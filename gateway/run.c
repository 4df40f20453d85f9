/*
 * run.c: gw_run(), the boot sequence. Each phase is logged; the services
 * registered here drain in reverse order on shutdown (app.h).
 *
 * Phases: validate (done by the config loader) -> open the log (recovery)
 * -> rules and topics -> MQTT listener.
 */
#include "gateway/app.h"
#include "gateway/gateway.h"
#include "gateway/server.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    gw__app_t *app;
    gw_server_t *srv;
    wal_t *wal;
} ingest_t;

static void wal_notify(void *arg)
{
    uv_async_send(arg);
}

static int ingest_start(gw__app_t *app, void *arg)
{
    ingest_t *in = arg;
    const cfg_t *cfg = app->cfg;
    in->app = app;
    in->srv = tb_calloc(1, sizeof *in->srv);
    in->srv->owner = in;
    gw_server_prepare(in->srv, &app->loop);

    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = cfg->wal.dir;
    o.segment_bytes = cfg->wal.segment_bytes;
    o.max_topic_bytes = cfg->wal.max_topic_bytes;
    o.max_total_bytes = cfg->wal.max_total_bytes;
    o.fsync = (wal_fsync_t)cfg->wal.fsync;
    o.fsync_interval_ms = cfg->wal.fsync_interval_ms;
    o.notify = wal_notify;
    o.notify_arg = &in->srv->wal_async;
    uint64_t t0 = tb_mono_ms();
    int rc = wal_open(&o, &in->wal);
    if (rc < 0) {
        tb_error("cannot open the write-ahead log", TB_S("dir", cfg->wal.dir), TB_ERR(rc));
        return rc;
    }
    tb_info("log opened", TB_S("dir", cfg->wal.dir), TB_S("fsync", cfg_fsync_name(cfg->wal.fsync)),
            TB_U("ms", tb_mono_ms() - t0));
    char err[1024];
    rc = gw_server_init(in->srv, &app->loop, cfg, in->wal, err, sizeof err);
    if (rc < 0) {
        tb_error("cannot set up the MQTT server", TB_S("why", err));
        return rc;
    }
    for (size_t i = 0; i < in->srv->ntopics; i++) {
        wal_topic_stats_t st;
        wal_topic_stats(in->srv->topics[i].wal, &st);
        tb_info("topic", TB_S("topic", in->srv->topics[i].name), TB_U("next_offset", st.next_offset),
                TB_U("checkpoint", st.checkpoint), TB_U("bytes", st.bytes), TB_U("dropped_total", st.dropped_total),
                TB_S("schema_subject", in->srv->topics[i].schema_subject ? in->srv->topics[i].schema_subject : ""));
    }
    return gw_server_listen(in->srv);
}

static void server_closed(gw_server_t *srv)
{
    ingest_t *in = srv->owner;
    free(srv);
    in->srv = NULL;
    gw__app_drained(in->app);
}

static void server_drained(gw_server_t *srv)
{
    ingest_t *in = srv->owner;
    for (size_t i = 0; i < srv->ntopics; i++) {
        gw_topic_t *t = &srv->topics[i];
        tb_info("topic totals", TB_S("topic", t->name), TB_U("received", t->received), TB_U("stored", t->stored),
                TB_U("batches_full", t->batches_full), TB_U("batches_timeout", t->batches_timeout),
                TB_U("batches_idle", t->batches_idle));
    }
    int rc = wal_close(in->wal);
    in->wal = NULL;
    if (rc < 0)
        tb_error("closing the log reported an error", TB_ERR(rc));
    else
        tb_info("log closed: everything synced");
    gw_server_close(srv, server_closed);
}

static void ingest_drain(gw__app_t *app, void *arg)
{
    ingest_t *in = arg;
    (void)app;
    if (!in->srv) {
        gw__app_drained(app);
        return;
    }
    if (!in->wal) { /* failed before the log opened */
        gw_server_close(in->srv, server_closed);
        return;
    }
    gw_server_drain(in->srv, server_drained);
}

int gw_run(const cfg_t *cfg)
{
    gw__app_t app;
    gw__app_init(&app, cfg);
    tb_info("starting", TB_S("version", TRIB_VERSION), TB_S("config", cfg->source),
            TB_S("edge", cfg->edge.edge_name), TB_S("cluster", cfg->edge.cluster_url),
            TB_U("topic_mappings", cfg->mqtt.nmappings), TB_S("wal_fsync", cfg_fsync_name(cfg->wal.fsync)));
    ingest_t ingest = { 0 };
    gw__app_add(&app, &(gw__service_t){ "mqtt", ingest_start, ingest_drain, &ingest });
    int rc = gw__app_run(&app);
    tb_info("stopped", TB_I("exit_code", rc));
    return rc;
}
