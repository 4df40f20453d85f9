/*
 * cli.h: the subcommands of the `tributary` binary (the gateway/cli/
 * folder's one header; tb_cli is linked into the executable and its unit
 * tests only, never into the daemon's libraries). Prefix cli_.
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/base.h"
#include "gateway/gateway.h"

/* The whole command line: `tributary <command> ...`; returns the exit code. */
int cli_main(int argc, char **argv);
void cli_usage(FILE *out);
int cli_run(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_config(int argc, char **argv);
int cli_wal(int argc, char **argv);
int cli_passwd(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_admin(int argc, char **argv);
/* `admin pause|resume TOPIC`, `admin drain [...]` (cli_admin_drain.c; argv[1] is the verb). */
int cli_admin_drain(int argc, char **argv);
int cli_dlq(int argc, char **argv);

/* Every cli_<command>(argc, argv) returns the process's exit code:
 * GW_EXIT_OK, GW_EXIT_FAILURE or GW_EXIT_USAGE (gateway.h). */

/* cli_parse_config_opt's answer when --help was asked for and printed. */
#define CLI_HELP_SHOWN (-1)

/* Parses "-c FILE" / "--config FILE" / "--config=FILE" options shared by
 * run and check (*path NULL when absent). Returns 0 to go on, CLI_HELP_SHOWN
 * after printing the usage on stdout (the command then exits GW_EXIT_OK), or
 * GW_EXIT_USAGE after printing it on stderr. */
int cli_parse_config_opt(int argc, char **argv, const char **path /* OUT */);
/* (The files a configuration names are checked by gw_check, gateway.h:
 * check, run and a reload share it.) */

/* ---- `tributary status` (cli_http.c, cli_status_render.c) --------------- */

/*
 * Blocking GET http://addr/path with one deadline for connect, send and
 * receive (for the CLI, never on the loop). On success (0) *status is the
 * HTTP status and body holds the body (at most max_body bytes, else
 * TB_EFULL). Fails with -errno (ECONNREFUSED, ETIMEDOUT, ...), TB_ECONFIG
 * (bad address) or TB_EMALFORMED (not an HTTP response).
 */
int cli_http_get(const char *addr, const char *path, int timeout_ms, size_t max_body, int *status /* OUT */,
                 tb_buf_t *body /* OUT */);
/* The same with "Authorization: Bearer <token>" (token NULL: none). */
int cli_http_get_auth(const char *addr, const char *path, const char *token, int timeout_ms, size_t max_body,
                      int *status /* OUT */, tb_buf_t *body /* OUT */);

/* An option's value: "--opt VALUE" or "--opt=VALUE"; NULL when argv[*i] is
 * not opt (*missing set when it is, without a value). cli_status.c. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *opt, bool *missing /* OUT */);
/* A listener address to connect to: a wildcard host (0.0.0.0, [::]) is this machine's loopback. */
void cli_connectable(const char *listener, char *out, size_t len);

/* A GET (or a bodiless POST), over HTTPS when the url says https:// or https is set. */
typedef struct cli_http_req {
    const char *method;     /* "GET" (NULL) or "POST" (sent with Content-Length: 0) */
    const char *url;        /* [http://|https://]HOST:PORT[/...] */
    const char *path;       /* "/stats" */
    const char *token;      /* "Authorization: Bearer <token>"; NULL: none */
    bool https;             /* TLS whatever the url says */
    const char *cafile;     /* HTTPS: the CAs that verify the server (NULL: the system's) */
    const char *cert_file;  /* HTTPS: a client certificate (NULL: none) */
    const char *key_file;   /* its key (NULL: in cert_file) */
    int timeout_ms;         /* the whole exchange */
    size_t max_body;
} cli_http_req_t;
/*
 * As cli_http_get_auth, and: TB_EPROTO when TLS failed (why: OpenSSL's
 * reason, or the server certificate's verification error), TB_ECONFIG
 * with why for a --cafile or --cert that does not load. why may be NULL.
 */
int cli_http_fetch(const cli_http_req_t *r, int *status /* OUT */, tb_buf_t *body /* OUT */, char *why,
                   size_t whylen);
/* HOST:PORT of url, and whether it says https://. 0 or TB_ECONFIG. */
int cli_http_url(const char *url, bool *https /* OUT */, char *hostport /* OUT */, size_t len);

/* The running gateway an HTTP command talks to (cli_target.c): the options
 * `status` and `admin` share, -c's edge.yaml, the token. */
typedef struct cli_target {
    const char *cmd;            /* "status", "admin": its messages' prefix */
    bool admin;                 /* --url too; -c's token: http.admin_token_file first */
    const char *addr, *config, *token_file;
    cli_http_req_t req;         /* url, https, cafile, cert_file, key_file, token set here */
    char hostport[300];         /* HOST:PORT of addr, once resolved */
    char from_cfg[300];
    char *token;                /* read by cli_target_resolve; wiped by cli_target_done */
} cli_target_t;
/* argv[*i] when it is one of those options: 1 taken (*i past its value), 0
 * not one, -1 one without its value (said on stderr). */
int cli_target_opt(cli_target_t *t, int argc, char **argv, int *i);
/* After the options: -c's listener, TLS and token file, the defaults, the
 * options checked together, the token read. GW_EXIT_OK, or the exit code
 * with the reason on stderr. */
int cli_target_resolve(cli_target_t *t);
void cli_target_done(cli_target_t *t);
/* One request to the resolved target (timeout_ms 0: t->req's): GW_EXIT_OK with *status and the body,
 * or the exit code with the reason on stderr: not reached, or (admin) refused with 401/403 and the hint
 * about --token-file. */
int cli_target_fetch(cli_target_t *t, const char *verb, const char *method, const char *path, uint64_t timeout_ms,
                     int *status, tb_buf_t *body);

/* The terse human view of a /stats document. Returns 0, or TB_EMALFORMED when it is not one. */
int cli_status_render(const json_t *stats, tb_buf_t *out);

#endif
