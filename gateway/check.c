/*
 * check.c: gw_check, the one check of a configuration's files and
 * cross-topic rules, shared by `tributary check`, `tributary run` and the
 * reload (docs/design/RELOAD.md 3.2: a file that fails it is refused whole,
 * so a reload never accepts what the next start would refuse).
 */
#include "gateway/gateway.h"
#include "base/base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The helpers' texts start with the key: "KEY (line N): why" or "KEY: why". */
static void to_err(const cfg_t *cfg, const char *text, cfg_err_t *e)
{
    size_t k = 0;
    while (text[k] && (isalnum((unsigned char)text[k]) || strchr("._[]-", text[k])))
        k++;
    char key[128] = "";
    int line = 0;
    const char *why = text;
    if (k > 0 && k < sizeof key && strchr(text, '.') && strchr(text, '.') < text + k) {
        if (strncmp(text + k, " (line ", 7) == 0) {
            char *end;
            long l = strtol(text + k + 7, &end, 10);
            if (strncmp(end, "): ", 3) == 0 && l > 0 && l < 1000000000) {
                memcpy(key, text, k);
                key[k] = '\0';
                line = (int)l;
                why = end + 3;
            }
        } else if (strncmp(text + k, ": ", 2) == 0) {
            memcpy(key, text, k);
            key[k] = '\0';
            why = text + k + 2;
        }
    }
    cfg_err_set(e, cfg->source, line, 0, key, why);
    snprintf(e->text, sizeof e->text, "%s: %s", cfg->source, text); /* as `tributary check` has always printed */
}

static void free_token(char *token)
{
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
}

int gw_check(const cfg_t *cfg, cfg_err_t *e)
{
    memset(e, 0, sizeof *e);
    char err[sizeof e->text - 256]; /* room for the source in front of it */
    auth_passwd_t *pw;
    auth_acl_t *acl;
    char *token = NULL;
    int rc = gw_auth_load(cfg, &pw, &acl, err, sizeof err);
    if (rc == 0) {
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        rc = gw_http_token_load(cfg, &token, err, sizeof err);
        free_token(token);
    }
    if (rc == 0) {
        rc = gw_admin_token_load(cfg, &token, err, sizeof err);
        free_token(token);
    }
    if (rc == 0)
        rc = gw_topics_check(cfg, err, sizeof err);
    if (rc == 0)
        rc = gw_tls_check(cfg, err, sizeof err);
    if (rc < 0) {
        to_err(cfg, err, e);
        return TB_ECONFIG;
    }
    return 0;
}
