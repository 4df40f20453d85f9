/* fuzz-lib: tb_config */
/*
 * fuzz_config.c: the configuration parser reads a file an operator (or a
 * Helm template) wrote; it must reject anything malformed with an error
 * message and never crash, leak or read out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *const env[] = { "HOST=h", "TRIBUTARY_WAL_FSYNC=never", "topic=t", "SITE=s1", NULL };
    char err[512];
    cfg_t *cfg = NULL;
    int rc = cfg_load_string("fuzz.yaml", (const char *)data, size, env, &cfg, err, sizeof err);
    if (rc == 0) {
        if (!cfg || !cfg->edge.edge_name || cfg->mqtt.nmappings == 0)
            abort();
        /* outputs: never empty (implied danube), every entry named, a template never env-expanded away */
        if (cfg->noutputs == 0)
            abort();
        for (size_t i = 0; i < cfg->noutputs; i++) {
            const cfg_output_t *o = &cfg->outputs[i];
            if (!o->name || !*o->name || o->ntopics == 0)
                abort();
            if (o->kind == CFG_OUTPUT_MQTT && (!o->remote_topic || !*o->remote_topic || !*o->client_id))
                abort();
        }
        cfg_free(cfg);
    } else if (cfg || !memchr(err, '\0', sizeof err) || err[0] == '\0') {
        abort();
    }
    return 0;
}
