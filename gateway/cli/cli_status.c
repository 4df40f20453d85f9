/*
 * cli_status.c: `tributary status [--http ADDR] [--json]`: asks a running
 * gateway for /stats and prints the terse view (gateway/cli/cli_status_render.c), or
 * the raw document with --json. One 3 s deadline covers the whole request,
 * so a wedged gateway makes the command fail rather than hang.
 *
 * Exit: 0 the gateway answered; 1 it could not be reached or did not answer
 * with a /stats document (the message says which); 2 bad usage.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATUS_TIMEOUT_MS 3000
#define STATUS_MAX_BODY (16u << 20)

static void usage(FILE *out)
{
    fprintf(out, "usage: tributary status [--http HOST:PORT] [--json] [--token-file FILE]\n"
                 "  --http ADDR  the gateway's http.listener (default %s)\n"
                 "  --json       print the /stats document as it came\n"
                 "  --token-file FILE  the bearer token (the gateway's http.auth_token_file)\n",
            cfg_defaults()->http.listener);
}

int cli_status(int argc, char **argv)
{
    const char *addr = cfg_defaults()->http.listener; /* http.listener's default, from the config table */
    bool raw = false;
    const char *token_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            raw = true;
        } else if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc) {
            token_file = argv[++i];
        } else if (strcmp(argv[i], "--http") == 0 && i + 1 < argc) {
            addr = argv[++i];
        } else if (strncmp(argv[i], "--http=", 7) == 0) {
            addr = argv[i] + 7;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return GW_EXIT_OK;
        } else {
            fprintf(stderr, "tributary status: unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    char *token = NULL;
    if (token_file) {
        cfg_t with = *cfg_defaults(); /* the gateway's own reader of http.auth_token_file */
        with.http.auth_token_file = (char *)token_file;
        char err[1024];
        if (gw_http_token_load(&with, &token, err, sizeof err) < 0) {
            fprintf(stderr, "tributary status: %s\n", err);
            return GW_EXIT_USAGE;
        }
    }
    int status;
    tb_buf_t body = TB_BUF_INIT;
    int rc = cli_http_get_auth(addr, "/stats", token, STATUS_TIMEOUT_MS, STATUS_MAX_BODY, &status, &body);
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    if (rc == 0 && status == 401) {
        fprintf(stderr, "tributary status: the gateway asks for its bearer token: --token-file FILE "
                        "(the file its http.auth_token_file names)\n");
        tb_buf_free(&body);
        return GW_EXIT_FAILURE;
    }
    if (rc < 0) {
        fprintf(stderr, "tributary status: cannot reach the gateway at http://%s/stats: %s\n"
                        "(is it running? is --http the address of its http.listener?)\n",
                addr, rc == TB_ECONFIG ? "bad address, expected HOST:PORT" : tb_strerror(rc));
        tb_buf_free(&body);
        return GW_EXIT_FAILURE;
    }
    json_error_t err;
    json_t *doc = status == 200 ? json_loadb(tb_buf_str(&body), body.len, 0, &err) : NULL;
    tb_buf_t view = TB_BUF_INIT;
    if (!doc || cli_status_render(doc, &view) < 0) {
        fprintf(stderr, "tributary status: http://%s/stats answered %d but not with a /stats document\n", addr, status);
        json_decref(doc);
        tb_buf_free(&body);
        tb_buf_free(&view);
        return GW_EXIT_FAILURE;
    }
    fputs(raw ? tb_buf_str(&body) : tb_buf_str(&view), stdout);
    json_decref(doc);
    tb_buf_free(&body);
    tb_buf_free(&view);
    return GW_EXIT_OK;
}
