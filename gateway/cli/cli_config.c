/* cli_config.c: `tributary check` and `tributary config --describe [--reloadable]`. */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int cli_parse_config_opt(int argc, char **argv, const char **path)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *path = NULL;
    optind = 1;
    opterr = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': *path = optarg; break;
        case 'h': cli_usage(stdout); return CLI_HELP_SHOWN;
        default: cli_usage(stderr); return GW_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tributary %s: unexpected argument \"%s\"\n\n", argv[0], argv[optind]);
        cli_usage(stderr);
        return GW_EXIT_USAGE;
    }
    return 0;
}

int cli_check(int argc, char **argv)
{
    const char *path;
    int rc = cli_parse_config_opt(argc, argv, &path);
    if (rc)
        return rc == CLI_HELP_SHOWN ? GW_EXIT_OK : rc;
    if (!path) {
        fprintf(stderr, "tributary check: -c FILE is required\n");
        return GW_EXIT_USAGE;
    }
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
    cfg_print(cfg, stdout);
    fprintf(stderr, "%s: configuration is valid (%zu topic mappings; %zu output%s:", path, cfg->mqtt.nmappings,
            cfg->noutputs, cfg->noutputs == 1 ? "" : "s");
    for (size_t i = 0; i < cfg->noutputs; i++)
        fprintf(stderr, " %s (%s%s)", cfg->outputs[i].name, cfg_output_kind_name(cfg->outputs[i].kind),
                cfg->outputs[i].implied ? ", implied" : "");
    fputs(")\n", stderr);
    cfg_free(cfg);
    return GW_EXIT_OK;
}

int cli_config(int argc, char **argv)
{
    bool describe = false, markdown = false, reloadable = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--describe") == 0) describe = true;
        else if (strcmp(argv[i], "--markdown") == 0) markdown = true;
        else if (strcmp(argv[i], "--reloadable") == 0) reloadable = true;
        else {
            fprintf(stderr, "tributary config: unknown option \"%s\"\n\n", argv[i]);
            cli_usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    if (!describe) {
        fprintf(stderr, "usage: tributary config --describe [--reloadable] [--markdown]\n");
        return GW_EXIT_USAGE;
    }
    if (reloadable)
        cfg_describe_reloadable(stdout, markdown); /* the keys a reload applies (their reload class) */
    else
        cfg_describe(stdout, markdown);
    return GW_EXIT_OK;
}
