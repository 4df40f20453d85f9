/*
 * run.c: gw_run(), the boot sequence. Each phase is logged; the services
 * it registers drain in reverse order on shutdown (app.h).
 */
#include "gateway/app.h"
#include "gateway/gateway.h"
#include "base/base.h"

int gw_run(const cfg_t *cfg)
{
    gw__app_t app;
    gw__app_init(&app, cfg);
    tb_info("starting", TB_S("version", TRIB_VERSION), TB_S("config", cfg->source),
            TB_S("edge", cfg->edge.edge_name), TB_S("cluster", cfg->edge.cluster_url),
            TB_U("topic_mappings", cfg->mqtt.nmappings), TB_S("wal_fsync", cfg_fsync_name(cfg->wal.fsync)));
    int rc = gw__app_run(&app);
    tb_info("stopped", TB_I("exit_code", rc));
    return rc;
}
