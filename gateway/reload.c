/*
 * reload.c: SIGHUP. The file named by the running configuration is read
 * again, checked as `tributary check` checks it (gw_check: a file the next
 * start would refuse is refused now, whole, and changes nothing), and
 * compared key by key with the running configuration (cfg_diff).
 *
 * Which changed keys are applied is the key table's reload class
 * (cfg_reload_class, the RL flag in config/config_table.c): a key of class
 * LIVE goes to its applier below, any other key is named in one log line as
 * needing a restart, so an operator never believes a change took effect
 * when it did not. The appliers (a unit test holds them to the LIVE keys,
 * tests/unit/gateway/test_reload_keys.c):
 *
 * log.level, log.format: at once. mqtt.topic_mappings[i].validation_policy:
 * when every other key of that mapping is unchanged (the rule keeps its
 * place; only the policy flips: in a reordered or edited mapping the index
 * would name another rule, so the policy then needs a restart with the
 * rest). auth.* and http.auth_token_file: the password, ACL and token files
 * are read again at every SIGHUP, changed or not, and swapped in together
 * (a check in flight ends with the old ones). The TLS listeners'
 * certificates, keys and CAs, read again too and given to new handshakes
 * (established connections keep theirs), with their mqtt.listeners[i].tls.*
 * keys while the listeners stay the same, and so the HTTP endpoint's
 * (http.tls.*, while http.listener and whether it is TLS stay the same); a
 * file that does not load refuses the whole reload, with its file (and
 * line). An invalid file is refused with its error (file, line, key) and
 * changes nothing.
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <fnmatch.h>
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

static void need_restart(reload_t *r, const char *key)
{
    size_t n = strlen(key);
    if (r->restart_len + n + 2 < sizeof r->restart) {
        if (r->restart_len)
            r->restart[r->restart_len++] = ' ';
        memcpy(r->restart + r->restart_len, key, n);
        r->restart_len += n;
        r->restart[r->restart_len] = '\0';
    }
}

/* An applier: true when the change is applied (or is applied with the files
 * gw__reload loads), false when it needs a restart this time after all
 * (the structure around it changed). */
static bool apply_log_level(reload_t *r, const char *key)
{
    (void)key;
    tb_log_set_level((tb_log_level_t)r->next->log.level);
    tb_info("reload: log.level applied", TB_S("level", tb_log_level_name((tb_log_level_t)r->next->log.level)));
    r->applied++;
    return true;
}

static bool apply_log_format(reload_t *r, const char *key)
{
    (void)key;
    tb_log_setup(tb_log_get_level(), (tb_log_format_t)r->next->log.format, 2);
    tb_info("reload: log.format applied");
    r->applied++;
    return true;
}

static bool apply_policy(reload_t *r, const char *key)
{
    size_t i = strtoul(key + strlen(MAPPINGS_PREFIX), NULL, 10);
    if (i >= broker_nrules(r->b) || r->edited[i])
        return false;
    cfg_policy_t p = r->next->mqtt.mappings[i].validation_policy;
    if (broker_set_policy(r->b, i, p) == TB_ECONFIG) {
        tb_warn("reload: enforce needs a schema_subject; policy unchanged", TB_S("key", key));
        return true;
    }
    tb_info("reload: validation_policy applied", TB_S("key", key),
            TB_S("policy", p == CFG_POLICY_ENFORCE ? "enforce" : "none"));
    r->applied++;
    return true;
}

static bool apply_with_files(reload_t *r, const char *key)
{
    (void)r;
    (void)key;
    return true; /* the files were loaded and swapped in by gw__reload, changed or not */
}

static bool apply_http_tls(reload_t *r, const char *key)
{
    if (!r->http_tls_keys)
        return false;
    tb_info("reload: HTTP TLS setting applied to new handshakes", TB_S("key", key));
    r->applied++;
    return true; /* with the certificate (gw__reload) */
}

static bool apply_listener_tls(reload_t *r, const char *key)
{
    if (!r->tls_keys)
        return false;
    tb_info("reload: TLS listener setting applied to new handshakes", TB_S("key", key));
    r->applied++;
    return true; /* with the certificates (gw__reload) */
}

/* fnmatch patterns over cfg_diff's paths (a backslash makes a bracket literal). */
static const struct {
    const char *pattern;
    bool (*apply)(reload_t *r, const char *key);
} appliers[] = {
    { "log.level", apply_log_level },
    { "log.format", apply_log_format },
    { "mqtt.topic_mappings\\[*\\].validation_policy", apply_policy },
    { "auth.*", apply_with_files },
    { "http.auth_token_file", apply_with_files },
    { "http.tls.*", apply_http_tls },
    { "mqtt.listeners\\[*\\].tls.*", apply_listener_tls },
};

/* tls.* keys a reload does not apply: read when a connection is accepted
 * from the listener's configuration of the start (restart class). */
static const char *const not_applied[] = {
    "mqtt.listeners\\[*\\].tls.read_coalesce_ms",
};

static int applier_of(const char *key)
{
    for (size_t i = 0; i < TB_ARRAY_LEN(not_applied); i++)
        if (fnmatch(not_applied[i], key, 0) == 0)
            return -1;
    for (size_t i = 0; i < TB_ARRAY_LEN(appliers); i++)
        if (fnmatch(appliers[i].pattern, key, 0) == 0)
            return (int)i;
    return -1;
}

bool gw__reload_applies(const char *key)
{
    return applier_of(key) >= 0;
}

static void on_diff(void *arg, const char *key)
{
    reload_t *r = arg;
    if (cfg_reload_class(key) == CFG_RELOAD_LIVE) {
        int a = applier_of(key);
        if (a >= 0 && appliers[a].apply(r, key))
            return;
        if (a < 0) /* the unit test holds the appliers to the table: not reached */
            tb_error("reload: a key of reload class live has no applier; named as needing a restart",
                     TB_S("key", key));
    }
    need_restart(r, key);
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
    cfg_err_t e;
    if (cfg_load_ex(running->source, NULL, &next, &e) < 0) {
        tb_error("SIGHUP: the configuration file is invalid; nothing changed", TB_S("file", e.file),
                 TB_I("line", e.line), TB_S("key", e.key), TB_S("why", e.text));
        return;
    }
    if (gw_check(next, &e) < 0) {
        /* the words of the loads below, which an operator (and the tests) know */
        const char *what = strncmp(e.key, "auth.", 5) == 0
                               ? "SIGHUP: an authentication file is invalid; nothing changed, the files in force are kept"
                           : strstr(e.key, "token_file") ? "SIGHUP: the HTTP token file is invalid; nothing changed"
                           : strstr(e.key, "tls")
                               ? "SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates "
                                 "in force are kept"
                               : "SIGHUP: the configuration fails `tributary check`; nothing changed";
        tb_error(what, TB_S("file", e.file), TB_I("line", e.line), TB_S("key", e.key), TB_S("why", e.text));
        cfg_free(next);
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
