/*
 * auth_files.c: the files the broker reads besides edge.yaml:
 * auth.password_file and auth.acl_file (the parsers are gateway/auth), and
 * the TLS listeners' certificates and keys (gateway/broker/tls_ctx.c). At
 * start a file that does not load is a configuration error that names the
 * key and the file (`tributary check` and `run` exit 2); on SIGHUP
 * (reload.c) the same error keeps the files in force.
 */
#include "gateway/gateway.h"
#include "gateway/broker/broker.h"
#include "base/base.h"

#include <stdio.h>

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

int gw_tls_check(const cfg_t *cfg, char *err, size_t errlen)
{
    broker_tls_t *t;
    int rc = broker_tls_load(cfg, &t, err, errlen);
    broker_tls_free(t);
    return rc;
}
