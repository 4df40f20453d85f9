/*
 * config_defaults.c: the key table's defaults, applied and published.
 *
 * A default lives in one place, its row of config_table.c. cfg__set_defaults
 * writes the rows into a cfg_t; cfg_load_string calls it before reading a
 * file, and cfg_defaults() calls it once to give other folders (the
 * replicator's options, the status command's --http) the same values as
 * typed fields, so they need not copy a number that could drift.
 *
 * DESIGN. The published cfg_t is built once, under pthread_once, in static
 * storage, and never changed or freed after: any thread may read it without
 * a lock, and its strings stay valid for the life of the process (they are
 * reachable from the static, so LeakSanitizer does not count them). It reads
 * no environment and no file: it is the table, not an effective
 * configuration.
 */
#include "config/config_int.h"

#include <pthread.h>
#include <stdlib.h>

void cfg__set_defaults(cfg_t *cfg)
{
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (!k->def)
            continue;
        char msg[128];
        if (cfg__set_scalar(k, cfg, k->def, msg, sizeof msg) < 0)
            abort(); /* a bad default in the table is a programming error; the unit tests catch it */
    }
    cfg__implied_output(cfg); /* a file's outputs section replaces it */
}

static cfg_t defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;

static void build_defaults(void)
{
    static char source[] = "<table defaults>";
    defaults.source = source;
    cfg__set_defaults(&defaults);
}

const cfg_t *cfg_defaults(void)
{
    pthread_once(&defaults_once, build_defaults);
    return &defaults;
}
