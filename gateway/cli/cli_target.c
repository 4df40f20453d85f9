/*
 * cli_target.c: the running gateway an HTTP command talks to (`tributary
 * status`, `tributary admin`): the options they share (--http, -c/--config,
 * --token-file, --cafile, --cert, --key; admin also --url), what -c's
 * edge.yaml says (its http.listener with a wildcard host as loopback, HTTPS
 * when http.tls is set, its token file), the checks of those options
 * together, and the token read by the gateway's own reader of token files.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_target_opt(cli_target_t *t, int argc, char **argv, int *i)
{
    bool missing = false;
    const char *v;
    if ((v = cli_opt_value(argc, argv, i, "--token-file", &missing)))
        t->token_file = v;
    else if ((v = cli_opt_value(argc, argv, i, "--http", &missing)) ||
             (t->admin && (v = cli_opt_value(argc, argv, i, "--url", &missing))))
        t->addr = v;
    else if ((v = cli_opt_value(argc, argv, i, "--config", &missing)) ||
             (v = cli_opt_value(argc, argv, i, "-c", &missing)))
        t->config = v;
    else if ((v = cli_opt_value(argc, argv, i, "--cafile", &missing)))
        t->req.cafile = v;
    else if ((v = cli_opt_value(argc, argv, i, "--cert", &missing)))
        t->req.cert_file = v;
    else if ((v = cli_opt_value(argc, argv, i, "--key", &missing)))
        t->req.key_file = v;
    else if (missing) {
        fprintf(stderr, "tributary %s: %s needs a value\n", t->cmd, argv[*i]);
        return -1;
    } else
        return 0;
    return 1;
}

int cli_target_resolve(cli_target_t *t)
{
    char *token_path = NULL;
    if (t->config) {
        cfg_t *cfg;
        char err[1024];
        if (cfg_load(t->config, NULL, &cfg, err, sizeof err) < 0) {
            fprintf(stderr, "tributary %s: %s\n", t->cmd, err);
            return GW_EXIT_USAGE;
        }
        cli_connectable(cfg->http.listener, t->from_cfg, sizeof t->from_cfg);
        if (!t->addr) {
            t->addr = t->from_cfg;
            t->req.https = cfg->http.has_tls;
        }
        const char *f = t->admin && *cfg->http.admin_token_file ? cfg->http.admin_token_file : cfg->http.auth_token_file;
        if (!t->token_file && *f)
            token_path = tb_strdup(f);
        cfg_free(cfg);
    }
    if (!t->addr)
        t->addr = cfg_defaults()->http.listener; /* http.listener's default, from the config table */
    const char *token_file = t->token_file ? t->token_file : token_path;
    bool https = false;
    int rc = GW_EXIT_OK;
    if (cli_http_url(t->addr, &https, t->hostport, sizeof t->hostport) < 0) {
        fprintf(stderr, "tributary %s: --http %s: bad address, expected [https://]HOST:PORT\n", t->cmd, t->addr);
        rc = GW_EXIT_USAGE;
    } else if (!(t->req.https = https || t->req.https) && (t->req.cafile || t->req.cert_file || t->req.key_file)) {
        fprintf(stderr, "tributary %s: --cafile, --cert and --key are for HTTPS: --http https://%s "
                        "(or -c with the gateway's http.tls)\n", t->cmd, t->hostport);
        rc = GW_EXIT_USAGE;
    } else if (t->req.key_file && !t->req.cert_file) {
        fprintf(stderr, "tributary %s: --key goes with --cert\n", t->cmd);
        rc = GW_EXIT_USAGE;
    } else if (token_file) {
        cfg_t with = *cfg_defaults(); /* the gateway's own reader of token files */
        with.http.auth_token_file = (char *)token_file;
        char err[1024];
        if (gw_http_token_load(&with, &t->token, err, sizeof err) < 0) {
            fprintf(stderr, "tributary %s: %s\n", t->cmd, err);
            rc = GW_EXIT_USAGE;
        }
    }
    free(token_path);
    t->req.url = t->addr;
    t->req.token = t->token;
    return rc;
}

void cli_target_done(cli_target_t *t)
{
    if (t->token) {
        explicit_bzero(t->token, strlen(t->token));
        free(t->token);
        t->token = NULL;
    }
    t->req.token = NULL;
}

int cli_target_fetch(cli_target_t *t, const char *verb, const char *method, const char *path, uint64_t timeout_ms,
                     int *status, tb_buf_t *body)
{
    cli_http_req_t req = t->req;
    req.method = method;
    req.path = path;
    if (timeout_ms)
        req.timeout_ms = (int)TB_MIN(timeout_ms, (uint64_t)3600000);
    char why[512] = "";
    tb_buf_reset(body);
    int rc = cli_http_fetch(&req, status, body, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "tributary %s %s: cannot reach the gateway at %s: %s%s%s\n", t->cmd, verb, t->hostport,
                rc == TB_ECONFIG ? "bad address or certificate option" : tb_strerror(rc), *why ? ": " : "", why);
        return rc == TB_ECONFIG ? GW_EXIT_USAGE : GW_EXIT_FAILURE;
    }
    if (t->admin && (*status == 401 || *status == 403)) {
        fprintf(stderr, "tributary %s %s: %d: %s(--token-file FILE: the file the gateway's http.admin_token_file "
                        "names; without one, the admin API answers loopback callers only)\n",
                t->cmd, verb, *status, tb_buf_str(body));
        return GW_EXIT_FAILURE;
    }
    return GW_EXIT_OK;
}
