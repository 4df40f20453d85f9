/*
 * rep_opts.c: the replicator's options from the configuration, in one place.
 *
 * Every option that has a configuration key takes its value, and so its
 * default, from cfg_t: rep_opts_default reads cfg_defaults() (the table's
 * defaults) through the same mapping a loaded file goes through, so neither
 * a default nor a field can be copied in one and forgotten in the other.
 * Only the options without a key (RegisterEdge's backoff) are numbers here.
 */
#include "replicator/rep_int.h"

#include <string.h>

void rep_opts_from_cfg(const cfg_t *cfg, rep_opts_t *o)
{
    o->edge_name = cfg->edge.edge_name;
    o->cluster_url = cfg->edge.cluster_url;
    o->token = cfg->edge.token;
    o->tls_ca_file = cfg->edge.tls.ca_file;
    o->tls_cert_file = cfg->edge.tls.cert_file;
    o->tls_key_file = cfg->edge.tls.key_file;
    o->heartbeat_interval_ms = cfg->edge.heartbeat_interval_ms;
    o->batch_size = cfg->replicator.batch_size;
    o->batch_timeout_ms = cfg->replicator.batch_timeout_ms;
    o->max_batch_bytes = cfg->replicator.max_batch_bytes;
    o->max_inflight_batches = cfg->replicator.max_inflight_batches;
    o->ack_timeout_ms = cfg->replicator.ack_timeout_ms;
    o->rpc_timeout_ms = cfg->replicator.rpc_timeout_ms;
    o->live_window_ms = cfg->replicator.live_window_ms;
    o->retry_initial_ms = cfg->replicator.retry_initial_ms;
    o->retry_max_ms = cfg->replicator.retry_max_ms;
    o->max_attempts = cfg->replicator.max_attempts;
    o->shutdown_grace_ms = cfg->replicator.shutdown_grace_ms;
    o->stall_after_ms = cfg->health.stall_after_ms;
    /* the danube output's caps (outputs[] entry of kind danube; the implied one has none) */
    o->max_bytes_per_s = 0;
    o->max_messages_per_s = 0;
    for (size_t i = 0; i < cfg->noutputs; i++) {
        if (cfg->outputs[i].kind == CFG_OUTPUT_DANUBE) {
            o->max_bytes_per_s = cfg->outputs[i].max_bytes_per_s;
            o->max_messages_per_s = cfg->outputs[i].max_messages_per_s;
            break;
        }
    }
    /* With wal.fsync interval the readable end moves at the writer's periodic
     * sync, without a completion to kick the topic: look again four times per
     * interval (not below 5 ms). The other modes need no timer. */
    o->recheck_ms = cfg->wal.fsync == CFG_FSYNC_INTERVAL ? TB_MAX(5u, cfg->wal.fsync_interval_ms / 4) : 0;
}

void rep_opts_default(rep_opts_t *o)
{
    memset(o, 0, sizeof *o);
    rep_opts_from_cfg(cfg_defaults(), o);
    o->register_retry_initial_ms = 1000;
    o->register_retry_max_ms = 60000;
}
