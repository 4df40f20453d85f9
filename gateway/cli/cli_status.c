/*
 * cli_status.c: `tributary status [--http ADDR] [-c FILE] [--cafile FILE]
 * [--cert FILE --key FILE] [--token-file FILE] [--json]`: asks a running
 * gateway for /stats and prints the terse view (gateway/cli/cli_status_render.c), or
 * the raw document with --json. One 3 s deadline covers the whole request
 * (the TLS handshake included), so a wedged gateway makes the command fail
 * rather than hang.
 *
 * HTTP or HTTPS: --http https://HOST:PORT says HTTPS; -c names the
 * gateway's own edge.yaml, whose http.listener (a wildcard host as
 * loopback), http.tls (HTTPS when set) and http.auth_token_file are used
 * unless --http or --token-file say otherwise. The server's certificate is
 * checked against --cafile, or the system's CAs, and must name the host
 * connected to.
 *
 * Exit: 0 the gateway answered; 1 it could not be reached, TLS failed, or
 * it did not answer with a /stats document (the message says which); 2 bad
 * usage (a --cafile or --cert that does not load, a -c file that is not valid).
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
    fprintf(out, "usage: tributary status [--http [https://]HOST:PORT] [-c FILE] [--cafile FILE]\n"
                 "                        [--cert FILE --key FILE] [--token-file FILE] [--json]\n"
                 "  --http ADDR        the gateway's http.listener (default %s);\n"
                 "                     https://HOST:PORT when it serves HTTPS (http.tls)\n"
                 "  -c, --config FILE  the gateway's edge.yaml: its http.listener (0.0.0.0 as 127.0.0.1),\n"
                 "                     HTTPS when http.tls is set, its http.auth_token_file\n"
                 "  --cafile FILE      HTTPS: the CA that signed its http.tls.cert_file (default: the system's)\n"
                 "  --cert FILE, --key FILE  HTTPS: a client certificate (http.tls.require_client_cert)\n"
                 "  --token-file FILE  the bearer token (the gateway's http.auth_token_file)\n"
                 "  --json             print the /stats document as it came\n",
            cfg_defaults()->http.listener);
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *opt, bool *missing)
{
    size_t n = strlen(opt);
    if (strncmp(argv[*i], opt, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

void cli_connectable(const char *listener, char *out, size_t len)
{
    if (strncmp(listener, "0.0.0.0:", 8) == 0)
        snprintf(out, len, "127.0.0.1:%s", listener + 8);
    else if (strncmp(listener, "[::]:", 5) == 0)
        snprintf(out, len, "[::1]:%s", listener + 5);
    else
        snprintf(out, len, "%s", listener);
}

int cli_status(int argc, char **argv)
{
    cli_target_t t = { .cmd = "status",
                       .req = { .path = "/stats", .timeout_ms = STATUS_TIMEOUT_MS, .max_body = STATUS_MAX_BODY } };
    bool raw = false;
    for (int i = 1; i < argc; i++) {
        int taken = cli_target_opt(&t, argc, argv, &i);
        if (taken > 0)
            continue;
        if (taken == 0 && strcmp(argv[i], "--json") == 0) {
            raw = true;
        } else if (taken == 0 && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
            usage(stdout);
            return GW_EXIT_OK;
        } else {
            if (taken == 0)
                fprintf(stderr, "tributary status: unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    int trc = cli_target_resolve(&t);
    if (trc != GW_EXIT_OK) {
        cli_target_done(&t);
        return trc;
    }
    bool https = t.req.https;
    const char *hostport = t.hostport;
    char url[320];
    snprintf(url, sizeof url, "%s://%s/stats", https ? "https" : "http", hostport);
    int status;
    char why[512];
    tb_buf_t body = TB_BUF_INIT;
    int rc = cli_http_fetch(&t.req, &status, &body, why, sizeof why);
    cli_target_done(&t);
    if (rc == 0 && status == 401) {
        fprintf(stderr, "tributary status: the gateway asks for its bearer token: --token-file FILE "
                        "(the file its http.auth_token_file names)\n");
        tb_buf_free(&body);
        return GW_EXIT_FAILURE;
    }
    if (rc == TB_ECONFIG && *why) { /* --cafile or --cert */
        fprintf(stderr, "tributary status: %s\n", why);
        tb_buf_free(&body);
        return GW_EXIT_USAGE;
    }
    if (rc == TB_EPROTO) {
        fprintf(stderr, "tributary status: TLS with the gateway at %s failed: %s\n"
                        "(is --cafile the CA that signed its http.tls.cert_file, and does that certificate name %s?)\n",
                url, why, hostport);
        tb_buf_free(&body);
        return GW_EXIT_FAILURE;
    }
    if (rc < 0) {
        fprintf(stderr, "tributary status: cannot reach the gateway at %s: %s\n%s\n", url,
                rc == TB_ECONFIG ? "bad address, expected HOST:PORT" : tb_strerror(rc),
                !https && rc == TB_EMALFORMED
                    ? "(it closed without an HTTP answer: if it has http.tls, --http https://HOST:PORT --cafile FILE)"
                    : "(is it running? is --http the address of its http.listener?)");
        tb_buf_free(&body);
        return GW_EXIT_FAILURE;
    }
    json_error_t err;
    json_t *doc = status == 200 ? json_loadb(tb_buf_str(&body), body.len, 0, &err) : NULL;
    tb_buf_t view = TB_BUF_INIT;
    if (!doc || cli_status_render(doc, &view) < 0) {
        fprintf(stderr, "tributary status: %s answered %d but not with a /stats document\n", url, status);
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
