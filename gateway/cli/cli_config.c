/* cli_config.c: `tributary check` and `tributary config --describe`. */
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

int cli_check_files(const cfg_t *cfg, char *err, size_t errlen)
{
    auth_passwd_t *pw;
    auth_acl_t *acl;
    if (gw_auth_load(cfg, &pw, &acl, err, errlen) < 0)
        return -1;
    auth_passwd_unref(pw);
    auth_acl_unref(acl);
    char *token;
    if (gw_http_token_load(cfg, &token, err, errlen) < 0)
        return -1;
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    if (gw_topics_check(cfg, err, errlen) < 0)
        return -1;
    return gw_tls_check(cfg, err, errlen) < 0 ? -1 : 0;
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
    if (cli_check_files(cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cfg->source, err);
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
    bool describe = false, markdown = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--describe") == 0) describe = true;
        else if (strcmp(argv[i], "--markdown") == 0) markdown = true;
        else {
            fprintf(stderr, "tributary config: unknown option \"%s\"\n\n", argv[i]);
            cli_usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    if (!describe) {
        fprintf(stderr, "usage: tributary config --describe [--markdown]\n");
        return GW_EXIT_USAGE;
    }
    cfg_describe(stdout, markdown);
    return GW_EXIT_OK;
}
