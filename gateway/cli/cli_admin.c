/*
 * cli_admin.c: `tributary admin reload|config [--http [https://]HOST:PORT]
 * [--url URL] [-c FILE] [--token-file FILE] [--cafile FILE] [--cert FILE
 * --key FILE]`: the admin API of a running gateway (docs/OPERATIONS.md,
 * "Admin API"), over cli_http_fetch as `tributary status` (the same
 * address, HTTPS and certificate options; --url is --http's other name).
 *
 *   admin reload   POST /admin/reload; prints the answer (JSON). Exit 0
 *                  applied or unchanged, 1 refused (the error's text on
 *                  stderr) or not reached, 2 usage
 *   admin config   GET /admin/config; prints the configuration in force
 *
 * The token: --token-file, else from -c the gateway's http.admin_token_file,
 * else its http.auth_token_file (the one a loopback caller needs when no
 * admin token is set). A reload waits up to 30 s (the gateway's own bound
 * on a deferred answer).
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADMIN_TIMEOUT_MS 30000
#define ADMIN_MAX_BODY (4u << 20)

static void usage(FILE *out)
{
    fprintf(out, "usage: tributary admin reload|config|pause TOPIC|resume TOPIC|retire TOPIC|forget TOPIC|drain [--http [https://]HOST:PORT] [-c FILE] [--token-file FILE]\n"
                 "                                     [--cafile FILE] [--cert FILE --key FILE]\n"
                 "  reload             POST /admin/reload: exit 0 applied or unchanged, 1 refused (the error printed)\n"
                 "  config             GET /admin/config: the configuration in force (secrets masked)\n"
                 "  pause|resume|retire TOPIC, forget TOPIC --delete-unreplicated,\n"
                 "  drain [--timeout 25s] [--no-wait|--status|--cancel]: `tributary admin drain --help`\n"
                 "  --http ADDR, --url ADDR  the gateway's http.listener (default %s)\n"
                 "  -c, --config FILE  the gateway's edge.yaml: its http.listener, http.tls, and the token file\n"
                 "                     (http.admin_token_file, else http.auth_token_file)\n"
                 "  --token-file FILE  the bearer token (the gateway's http.admin_token_file)\n"
                 "  --cafile FILE, --cert FILE, --key FILE  HTTPS, as for `tributary status`\n",
            cfg_defaults()->http.listener);
}

/* Prints what the answer says; returns the exit code. */
static int report(const char *verb, int status, tb_buf_t *body)
{
    if (strcmp(verb, "config") == 0) {
        if (status != 200) {
            fprintf(stderr, "tributary admin config: the gateway answered %d: %s", status, tb_buf_str(body));
            return GW_EXIT_FAILURE;
        }
        fputs(tb_buf_str(body), stdout);
        return GW_EXIT_OK;
    }
    json_error_t je;
    json_t *doc = json_loadb(tb_buf_str(body), body->len, 0, &je);
    const char *result = json_string_value(json_object_get(doc, "result"));
    if (!result) {
        fprintf(stderr, "tributary admin reload: the gateway answered %d, not with a reload's answer: %s", status,
                tb_buf_str(body));
        json_decref(doc);
        return GW_EXIT_FAILURE;
    }
    fputs(tb_buf_str(body), stdout);
    int rc = GW_EXIT_OK;
    if (strcmp(result, "refused") == 0) {
        json_t *e = json_object_get(doc, "error");
        const char *text = json_string_value(json_object_get(e, "text"));
        if (!text || !*text)
            text = json_string_value(json_object_get(e, "message"));
        fprintf(stderr, "tributary admin reload: refused: %s\n", text ? text : "(no error given)");
        rc = GW_EXIT_FAILURE;
    }
    json_decref(doc);
    return rc;
}

int cli_admin(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? GW_EXIT_USAGE : GW_EXIT_OK;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0 || strcmp(verb, "drain") == 0 ||
        strcmp(verb, "retire") == 0 || strcmp(verb, "forget") == 0)
        return cli_admin_drain(argc, argv); /* cli_admin_drain.c */
    if (strcmp(verb, "reload") != 0 && strcmp(verb, "config") != 0) {
        fprintf(stderr, "tributary admin: unknown command \"%s\" (reload, config, pause, resume, retire, forget or drain)\n", verb);
        usage(stderr);
        return GW_EXIT_USAGE;
    }
    cli_target_t t = { .cmd = "admin", .admin = true,
                       .req = { .timeout_ms = ADMIN_TIMEOUT_MS, .max_body = ADMIN_MAX_BODY } };
    for (int i = 2; i < argc; i++) {
        int taken = cli_target_opt(&t, argc, argv, &i);
        if (taken > 0)
            continue;
        if (taken == 0)
            fprintf(stderr, "tributary admin: unexpected argument \"%s\"\n", argv[i]);
        usage(stderr);
        return GW_EXIT_USAGE;
    }
    int trc = cli_target_resolve(&t);
    if (trc != GW_EXIT_OK) {
        cli_target_done(&t);
        return trc;
    }
    int status;
    tb_buf_t body = TB_BUF_INIT;
    bool reload = strcmp(verb, "reload") == 0;
    int code = cli_target_fetch(&t, verb, reload ? "POST" : "GET", reload ? "/admin/reload" : "/admin/config", 0,
                                &status, &body);
    cli_target_done(&t);
    if (code != GW_EXIT_OK) {
        tb_buf_free(&body);
        return code;
    }
    code = report(verb, status, &body);
    tb_buf_free(&body);
    return code;
}
