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
    static char *const env[] = { "HOST=h", "TRIBUTARY_WAL_FSYNC=never", NULL };
    char err[512];
    cfg_t *cfg = NULL;
    int rc = cfg_load_string("fuzz.yaml", (const char *)data, size, env, &cfg, err, sizeof err);
    if (rc == 0) {
        if (!cfg || !cfg->edge.edge_name || cfg->mqtt.nmappings == 0)
            abort();
        cfg_free(cfg);
    } else if (cfg || !memchr(err, '\0', sizeof err) || err[0] == '\0') {
        abort();
    }
    return 0;
}
