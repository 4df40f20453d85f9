/*
 * reload.c: SIGHUP. The file named by the running configuration is read
 * again and compared key by key (cfg_diff). Applied at once: log.level,
 * log.format, mqtt.topic_mappings[i].validation_policy when every
 * other key of that mapping is unchanged (the rule keeps its place; only
 * the policy flips: in a reordered or edited mapping the index would name
 * another rule, so the policy then needs a restart with the rest), auth.*: the password and
 * ACL files are read again at every SIGHUP, changed or not, and swapped in
 * together (a check in flight ends with the old ones), and the TLS
 * listeners' certificates, keys and CAs, read again too and given to new
 * handshakes (established connections keep theirs), with their
 * mqtt.listeners[i].tls.* keys while the listeners stay the same, and so
 * the HTTP endpoint's (http.tls.*, while http.listener and whether it is
 * TLS stay the same); a file that does not load refuses the whole reload,
 * with its file (and line). Everything else is named
 * in one log line as needing a restart, so an operator never believes a
 * change took effect when it did not. An invalid file is refused with its
 * error and changes nothing.
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    broker_t *b;
    const cfg_t *next;
    bool tls_keys;          /* the listeners kept their shape: their tls.* keys were applied */
    bool http_tls_keys;     /* the HTTP endpoint kept its address and its TLS: http.tls.* applied */
    bool *edited;           /* per mapping of the running file: a key other than its policy changed */
    char restart[1024];
    size_t restart_len;
    int applied;
} reload_t;

#define MAPPINGS_PREFIX "mqtt.topic_mappings["

/* First pass of cfg_diff: which mappings changed beyond their policy. */
static void on_edit(void *arg, const char *key)
{
    reload_t *r = arg;
    if (strncmp(key, MAPPINGS_PREFIX, strlen(MAPPINGS_PREFIX)) != 0)
        return;
    char *end;
    size_t i = strtoul(key + strlen(MAPPINGS_PREFIX), &end, 10);
    if (*end == ']' && strcmp(end, "].validation_policy") != 0 && i < r->next->mqtt.nmappings)
        r->edited[i] = true;
}

static bool is(const char *key, const char *prefix, const char *suffix)
{
    size_t p = strlen(prefix), k = strlen(key), s = strlen(suffix);
    return k > p + s && strncmp(key, prefix, p) == 0 && strcmp(key + k - s, suffix) == 0;
}

static void on_diff(void *arg, const char *key)
{
    reload_t *r = arg;
    if (strcmp(key, "log.level") == 0) {
        tb_log_set_level((tb_log_level_t)r->next->log.level);
        tb_info("reload: log.level applied", TB_S("level", tb_log_level_name((tb_log_level_t)r->next->log.level)));
        r->applied++;
        return;
    }
    if (strcmp(key, "log.format") == 0) {
        tb_log_setup(tb_log_get_level(), (tb_log_format_t)r->next->log.format, 2);
        tb_info("reload: log.format applied");
        r->applied++;
        return;
    }
    if (is(key, MAPPINGS_PREFIX, "].validation_policy")) {
        size_t i = strtoul(key + strlen(MAPPINGS_PREFIX), NULL, 10);
        if (i < broker_nrules(r->b) && !r->edited[i]) {
            cfg_policy_t p = r->next->mqtt.mappings[i].validation_policy;
            if (broker_set_policy(r->b, i, p) == TB_ECONFIG) {
                tb_warn("reload: enforce needs a schema_subject; policy unchanged", TB_S("key", key));
                return;
            }
            tb_info("reload: validation_policy applied", TB_S("key", key),
                    TB_S("policy", p == CFG_POLICY_ENFORCE ? "enforce" : "none"));
            r->applied++;
            return;
        }
    }
    if (strncmp(key, "auth.", 5) == 0 || strcmp(key, "http.auth_token_file") == 0)
        return; /* applied with the files (gw__reload) */
    if (r->http_tls_keys && strncmp(key, "http.tls.", 9) == 0) {
        tb_info("reload: HTTP TLS setting applied to new handshakes", TB_S("key", key));
        r->applied++;
        return; /* with the certificate (gw__reload) */
    }
    if (r->tls_keys && is(key, "mqtt.listeners[", "") && strstr(key, "].tls.")) {
        tb_info("reload: TLS listener setting applied to new handshakes", TB_S("key", key));
        r->applied++;
        return; /* with the certificates (gw__reload) */
    }
    size_t n = strlen(key);
    if (r->restart_len + n + 2 < sizeof r->restart) {
        if (r->restart_len)
            r->restart[r->restart_len++] = ' ';
        memcpy(r->restart + r->restart_len, key, n);
        r->restart_len += n;
        r->restart[r->restart_len] = '\0';
    }
}

/* The same listeners, at the same addresses, the same ones TLS. */
static bool same_listeners(const cfg_t *a, const cfg_t *b)
{
    if (a->mqtt.nlisteners != b->mqtt.nlisteners)
        return false;
    for (size_t i = 0; i < a->mqtt.nlisteners; i++)
        if (strcmp(a->mqtt.listeners[i].address, b->mqtt.listeners[i].address) != 0 ||
            a->mqtt.listeners[i].has_tls != b->mqtt.listeners[i].has_tls)
            return false;
    return a->mqtt.nlisteners || strcmp(a->mqtt.listener, b->mqtt.listener) == 0;
}

/* The HTTP endpoint at the same address, TLS or plain as before. */
static bool same_http(const cfg_t *a, const cfg_t *b)
{
    return strcmp(a->http.listener, b->http.listener) == 0 && a->http.has_tls == b->http.has_tls;
}

static void free_token(char *token)
{
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
}

void gw__reload(broker_t *b, http_service_t *http, const cfg_t *running)
{
    if (strcmp(running->source, "<embedded default>") == 0) {
        tb_info("SIGHUP: running on the embedded default, no file to reload");
        return;
    }
    cfg_t *next;
    char err[1024];
    if (cfg_load(running->source, NULL, &next, err, sizeof err) < 0) {
        tb_error("SIGHUP: the configuration file is invalid; nothing changed", TB_S("why", err));
        return;
    }
    auth_passwd_t *pw;
    auth_acl_t *acl;
    if (gw_auth_load(next, &pw, &acl, err, sizeof err) < 0) {
        tb_error("SIGHUP: an authentication file is invalid; nothing changed, the files in force are kept",
                 TB_S("why", err));
        cfg_free(next);
        return;
    }
    char *token;
    if (gw_http_token_load(next, &token, err, sizeof err) < 0) {
        tb_error("SIGHUP: the HTTP token file is invalid; nothing changed", TB_S("why", err));
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        cfg_free(next);
        return;
    }
    /* The certificates are read again at every SIGHUP, changed or not. With
     * the same listeners (addresses, which are TLS) the new file's tls keys
     * apply too; otherwise that needs a restart, and the running file's are
     * read again (same paths, new contents: a rotation). */
    bool same = same_listeners(running, next);
    broker_tls_t *tls;
    if (broker_tls_load(same ? next : running, &tls, err, sizeof err) < 0) {
        tb_error("SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates in force "
                 "are kept", TB_S("why", err));
        free_token(token);
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        cfg_free(next);
        return;
    }
    /* The HTTP endpoint's the same way: its http.tls keys apply while it
     * keeps its address and its TLS, else the running file's are read again. */
    bool same_h = same_http(running, next);
    tls_ctx_t *http_tls = NULL;
    if (gw__http_tls_load(same_h ? next : running, &http_tls, err, sizeof err) < 0) {
        tb_error("SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates in force "
                 "are kept", TB_S("why", err));
        broker_tls_free(tls);
        free_token(token);
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        cfg_free(next);
        return;
    }
    if (http) {
        http_service_set_token(http, token);
        if (http_tls) {
            http_service_set_tls(http, http_tls); /* logs "http TLS certificate reloaded" */
            http_tls = NULL;
        }
    }
    tls_ctx_unref(http_tls);
    free_token(token);
    if (b) {
        broker_set_tls(b, tls); /* logs each listener's certificate: "mqtt TLS certificate reloaded" */
        tls = NULL;
    }
    broker_tls_free(tls);
    if (b) {
        broker_set_auth(b, next, pw, acl);
        if (*next->auth.password_file || *next->auth.acl_file)
            tb_info("reload: authentication files applied", TB_U("users", pw ? auth_passwd_count(pw) : 0),
                    TB_U("acl_rules", acl ? auth_acl_rules(acl) : 0));
    }
    auth_passwd_unref(pw);
    auth_acl_unref(acl);
    reload_t r = { .b = b, .next = next, .tls_keys = same, .http_tls_keys = same_h };
    r.edited = tb_calloc(next->mqtt.nmappings + 1, sizeof *r.edited);
    if (b) {
        cfg_diff(running, next, on_edit, &r);
        cfg_diff(running, next, on_diff, &r);
    }
    free(r.edited);
    if (r.restart_len)
        tb_warn("SIGHUP: these changes need a restart and were not applied", TB_S("keys", r.restart));
    tb_info("SIGHUP: reload done", TB_I("applied", r.applied), TB_B("restart_needed", r.restart_len > 0));
    cfg_free(next);
}
