/*
 * auth_files.c: the files the broker reads besides edge.yaml:
 * auth.password_file and auth.acl_file (the parsers are gateway/auth), the
 * TLS listeners' certificates and keys (gateway/broker/tls_ctx.c), the
 * HTTP endpoint's (http.tls, gateway/tls) and its bearer token file. At start a file that does not load is
 * a configuration error that names the key and the file (`tributary check`
 * and `run` exit 2); on SIGHUP (reload.c) the same error keeps the files in
 * force.
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "gateway/broker/broker.h"
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKEN 4096

/* A bearer token file (its first line, blanks trimmed): the key names it in errors. */
static int token_file_load(const char *key, const char *path, char **token, char *err, size_t errlen)
{
    *token = NULL;
    if (!*path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s: cannot open: %s", key, path, strerror(errno));
        return TB_ECONFIG;
    }
    char buf[MAX_TOKEN + 2];
    bool got = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    size_t n = got ? strcspn(buf, "\r\n") : 0;
    if (got && n == sizeof buf - 1) {
        snprintf(err, errlen, "%s: %s:1: longer than %d bytes", key, path, MAX_TOKEN);
        return TB_ECONFIG;
    }
    buf[n] = '\0';
    char *s = buf;
    while (*s == ' ' || *s == '\t')
        s++;
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) {
            explicit_bzero(buf, sizeof buf);
            snprintf(err, errlen, "%s: %s:1: the token holds a blank or a non-printable byte",
                     key, path);
            return TB_ECONFIG;
        }
    }
    if (n < 16) {
        explicit_bzero(buf, sizeof buf);
        snprintf(err, errlen, "%s: %s:1: the token is %s (at least 16 bytes)", key, path,
                 n ? "too short" : "empty");
        return TB_ECONFIG;
    }
    *token = tb_strdup(s);
    explicit_bzero(buf, sizeof buf);
    return 0;
}

int gw_http_token_load(const cfg_t *cfg, char **token, char *err, size_t errlen)
{
    return token_file_load("http.auth_token_file", cfg->http.auth_token_file, token, err, errlen);
}

int gw_admin_token_load(const cfg_t *cfg, char **token, char *err, size_t errlen)
{
    return token_file_load("http.admin_token_file", cfg->http.admin_token_file, token, err, errlen);
}

int gw_auth_load(const cfg_t *cfg, auth_passwd_t **pw, auth_acl_t **acl, char *err, size_t errlen)
{
    *pw = NULL;
    *acl = NULL;
    auth_error_t e;
    if (*cfg->auth.password_file && auth_passwd_load(cfg->auth.password_file, pw, &e) < 0) {
        snprintf(err, errlen, "auth.password_file: %s", e.msg);
        return TB_ECONFIG;
    }
    if (*cfg->auth.acl_file && auth_acl_load(cfg->auth.acl_file, acl, &e) < 0) {
        snprintf(err, errlen, "auth.acl_file: %s", e.msg);
        auth_passwd_unref(*pw);
        *pw = NULL;
        return TB_ECONFIG;
    }
    return 0;
}

int gw__http_tls_load(const cfg_t *cfg, tls_ctx_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg->http.has_tls)
        return 0;
    /* its own session id context: a session of an MQTT listener does not resume here */
    return tls_ctx_load(&cfg->http.tls, "http.tls", 0, "tributary-http", out, err, errlen);
}

int gw_topics_check(const cfg_t *cfg, char *err, size_t errlen)
{
    return broker_check_config(cfg, err, errlen);
}

int gw_tls_check(const cfg_t *cfg, char *err, size_t errlen)
{
    broker_tls_t *t;
    int rc = broker_tls_load(cfg, &t, err, errlen);
    broker_tls_free(t);
    if (rc < 0)
        return rc;
    tls_ctx_t *h;
    rc = gw__http_tls_load(cfg, &h, err, errlen);
    tls_ctx_unref(h);
    return rc;
}
