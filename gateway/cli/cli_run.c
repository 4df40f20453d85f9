/* cli_run.c: `tributary run [-c FILE]`: load the configuration, set up logging, run. */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

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
    tb_log_setup((tb_log_level_t)cfg->log.level, (tb_log_format_t)cfg->log.format, 2);
    if (!path)
        tb_info("no -c given: using the embedded default configuration (tributary check prints it)");
    rc = gw_run(cfg);
    cfg_free(cfg);
    return rc;
}
