/*
 * gateway.h: the gateway process (the gateway/ folder's one public header).
 *
 * gw_run() owns the event loop thread: it opens the log, starts the MQTT
 * listener and the other services from the configuration, and returns when
 * an orderly shutdown (SIGTERM/SIGINT) has finished.
 *
 * Prefix: gw_ (public), gw__ (internal to gateway/).
 */
#ifndef GW_GATEWAY_H
#define GW_GATEWAY_H

#include "config/config.h"
#include "gateway/auth/auth.h"

/* Exit codes of the `tributary` binary (docs/CLI.md). */
enum {
    GW_EXIT_OK = 0,      /* clean stop, or command succeeded */
    GW_EXIT_FAILURE = 1, /* runtime failure (cannot listen, cannot open the log, ...) */
    GW_EXIT_USAGE = 2,   /* bad command line or invalid configuration */
};

/* Runs the gateway until shutdown. Returns a GW_EXIT_* code. */
int gw_run(const cfg_t *cfg);

/* Loads cfg's auth.password_file and auth.acl_file (either NULL when not
 * set). 0, or TB_ECONFIG with err = "auth.KEY: FILE:LINE: why". */
int gw_auth_load(const cfg_t *cfg, auth_passwd_t **pw, auth_acl_t **acl, char *err, size_t errlen);
/* Reads cfg's http.auth_token_file (its first line, blanks trimmed): *token
 * (malloc'd; NULL when not set), 0; or TB_ECONFIG with err naming the file. */
int gw_http_token_load(const cfg_t *cfg, char **token, char *err, size_t errlen);
/* The same for http.admin_token_file (the admin API's token). */
int gw_admin_token_load(const cfg_t *cfg, char **token, char *err, size_t errlen);

/* The mapping rules that need the router's topics (broker_check_config):
 * 0, or TB_ECONFIG with err = "mqtt.topic_mappings[i].KEY (line N): why". */
int gw_topics_check(const cfg_t *cfg, char *err, size_t errlen);

/* Loads the certificate, key and CAs of every TLS listener of cfg and of
 * the HTTP endpoint (http.tls), and frees them: 0, or TB_ECONFIG with err =
 * "mqtt.listeners[i].tls.KEY (line N): FILE: why" / "http.tls.KEY: FILE: why". */
int gw_tls_check(const cfg_t *cfg, char *err, size_t errlen);

/*
 * Everything a configuration names beyond edge.yaml itself, checked the
 * one way `tributary check`, `tributary run` and a reload (SIGHUP; later
 * the admin API and the file watcher) all use: the auth files, the token
 * files, the mapping rules that need the router (gw_topics_check), the TLS
 * files (gw_tls_check); nothing is kept. 0, or TB_ECONFIG with e filled:
 * file = cfg->source, key and line from the check's own text ("KEY (line
 * N): why" or "KEY: why"), message = why, and text = "SOURCE: the check's
 * text", the line `tributary check` has always printed.
 */
int gw_check(const cfg_t *cfg, cfg_err_t *e /* OUT */);

#endif
