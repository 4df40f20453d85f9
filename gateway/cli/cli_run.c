/* cli_run.c: `tributary run [-c FILE]`: load the configuration, set up logging, run. */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* What `outputs` can say that this build cannot do yet (issue 17): refused
 * at start, named, rather than accepted and ignored. `tributary check`
 * accepts all of it (operators can write and check the file now). The rate
 * caps (max_bytes_per_s, max_messages_per_s) run on the danube output. */
static int cli_outputs_runnable(const cfg_t *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->noutputs; i++) {
        const cfg_output_t *o = &cfg->outputs[i];
        const char *what = NULL;
        if (o->kind == CFG_OUTPUT_DANUBE && (o->ntopics != 1 || strcmp(o->topics[0], "#") != 0))
            what = "topics other than all (\"#\") on the danube output";
        if (what) {
            snprintf(err, errlen, "%s:%d: outputs[%zu] (%s): %s is not implemented in this build yet; "
                     "`tributary check` accepts the file, `tributary run` cannot honour it",
                     cfg->source, o->line, i, o->name, what);
            return -1;
        }
    }
    return 0;
}

int cli_run(int argc, char **argv)
{
    const char *path;
    int rc = cli_parse_config_opt(argc, argv, &path);
    if (rc)
        return rc == CLI_HELP_SHOWN ? GW_EXIT_OK : rc;
    cfg_t *cfg;
    char err[1024];
    if (cfg_load(path, NULL, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return GW_EXIT_USAGE;
    }
    cfg_err_t e;
    if (gw_check(cfg, &e) < 0) {
        fprintf(stderr, "%s\n", e.text);
        cfg_free(cfg);
        return GW_EXIT_USAGE;
    }
    if (cli_outputs_runnable(cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        cfg_free(cfg);
        return GW_EXIT_USAGE;
    }
    tb_log_setup((tb_log_level_t)cfg->log.level, (tb_log_format_t)cfg->log.format, 2);
    if (!path)
        tb_info("no -c given: using the embedded default configuration (tributary check prints it)");
    rc = gw_run(cfg);
    cfg_free(cfg);
    return rc;
}
