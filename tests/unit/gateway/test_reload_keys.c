/*
 * The reload classes of the key table (config/, cfg_reload_class) and what
 * gateway/reload.c really applies at SIGHUP (its appliers) are one list:
 * this fails when a key is marked live without an applier (SIGHUP would
 * name it as needing a restart while `config --describe --reloadable` and
 * docs/CONFIG.md say it is applied: the chart would then leave it out of its
 * restart checksum and the change would never take effect), or when reload.c
 * applies a key the table calls restart-class. And gw_check, the one check
 * of `tributary check`, `run` and SIGHUP, fills a structured error.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "config/config.h"
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"

/* "mqtt.topic_mappings[].x" -> "mqtt.topic_mappings[<idx>].x", as cfg_diff reports it */
static void concrete(const char *generic, const char *idx, char *out, size_t n)
{
    const char *b = strstr(generic, "[]");
    if (!b) {
        snprintf(out, n, "%s", generic);
        return;
    }
    snprintf(out, n, "%.*s[%s]%s", (int)(b - generic), generic, idx, b + 2);
}

Test(reload_keys, the_live_keys_are_exactly_those_reload_applies)
{
    char generic[192], path[224];
    cfg_reload_class_t cls;
    size_t live = 0;
    for (size_t i = 0; cfg_key_path_at(i, generic, sizeof generic, &cls); i++) {
        const char *idx = strncmp(generic, "outputs[", 8) == 0 ? "central" : "3";
        concrete(generic, idx, path, sizeof path);
        cr_assert_eq(cfg_reload_class(path), cls, "%s", path);
        if (cls == CFG_RELOAD_LIVE)
            cr_assert(gw__reload_applies(path), "%s is live in the key table but reload.c has no applier: "
                                                "SIGHUP would call it restart-needed", path);
        else
            cr_assert(!gw__reload_applies(path), "reload.c applies %s but the key table says it needs a "
                                                 "restart: mark it RL in config/config_table.c", path);
        live += cls == CFG_RELOAD_LIVE;
    }
    cr_assert_gt(live, 0);
    /* a mapping added or removed (cfg_diff names the list): a new generation, applied live */
    cr_assert(gw__reload_applies("mqtt.topic_mappings"));
    cr_assert_eq(cfg_reload_class("mqtt.topic_mappings"), CFG_RELOAD_LIVE);
    /* an output added or removed, or its TLS turned on or off: added, removed or replaced */
    for (size_t i = 0; i < 2; i++) {
        const char *k = i ? "outputs[central].tls" : "outputs[central]";
        cr_assert(gw__reload_applies(k), "%s", k);
        cr_assert_eq(cfg_reload_class(k), CFG_RELOAD_LIVE, "%s", k);
    }
    /* what cfg_diff reports that is not a key is never applied */
    static const char *const not_keys[] = { "mqtt.listeners[0].tls", "mqtt.listeners", "auth", "log" };
    for (size_t i = 0; i < TB_ARRAY_LEN(not_keys); i++) {
        cr_assert(!gw__reload_applies(not_keys[i]), "%s", not_keys[i]);
        cr_assert_eq(cfg_reload_class(not_keys[i]), CFG_RELOAD_RESTART, "%s", not_keys[i]);
    }
}

static cfg_t *load(const char *dir, const char *tail)
{
    char *y = tb_asprintf("edge: {edge_name: e1, cluster_url: \"http://127.0.0.1:6650\"}\n"
                          "mqtt:\n  topic_mappings:\n    - {mqtt_pattern: a/+, danube_topic: /e1/a}\n"
                          "wal: {dir: %s/wal}\n%s", dir, tail);
    static char *const env[] = { NULL };
    cfg_t *c = NULL;
    char err[1024];
    char name[512];
    snprintf(name, sizeof name, "%s/edge.yaml", dir);
    cr_assert_eq(cfg_load_string(name, y, strlen(y), env, &c, err, sizeof err), 0, "%s", err);
    free(y);
    return c;
}

Test(reload_keys, gw_check_names_file_key_and_line)
{
    char dir[] = "/tmp/trib-reload-keys-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cfg_err_t e;
    cfg_t *c = load(dir, "");
    cr_assert_eq(gw_check(c, &e), 0, "%s", e.text);
    cfg_free(c);

    /* a token file that does not exist: the admin token is checked as the metrics one */
    c = load(dir, "http: {admin_token_file: /nonexistent/admin-token}\n");
    cr_assert_eq(gw_check(c, &e), TB_ECONFIG);
    cr_assert(strstr(e.file, "/edge.yaml"), "%s", e.file);
    cr_assert_str_eq(e.key, "http.admin_token_file");
    cr_assert_eq(e.line, 0);
    cr_assert(strstr(e.message, "/nonexistent/admin-token: cannot open"), "%s", e.message);
    char want[1024];
    snprintf(want, sizeof want, "%s/edge.yaml: http.admin_token_file: /nonexistent/admin-token: cannot open: "
                                "No such file or directory", dir);
    cr_assert_str_eq(e.text, want);
    cfg_free(c);

    /* a short token */
    char tok[600];
    snprintf(tok, sizeof tok, "%s/token", dir);
    FILE *f = fopen(tok, "w");
    fputs("short\n", f);
    fclose(f);
    char *tail = tb_asprintf("http: {auth_token_file: %s}\n", tok);
    c = load(dir, tail);
    free(tail);
    cr_assert_eq(gw_check(c, &e), TB_ECONFIG);
    cr_assert_str_eq(e.key, "http.auth_token_file");
    cr_assert(strstr(e.message, "too short"), "%s", e.message);
    cfg_free(c);

    /* a TLS listener whose certificate is missing: key and line of the entry */
    c = load(dir, "");
    cfg_free(c);
    char *y = tb_asprintf("edge: {edge_name: e1, cluster_url: \"http://127.0.0.1:6650\"}\n"
                          "mqtt:\n"
                          "  listeners:\n"
                          "    - address: \"127.0.0.1:8883\"\n"
                          "      tls: {cert_file: %s/none.pem, key_file: %s/none.key}\n"
                          "  topic_mappings:\n    - {mqtt_pattern: a/+, danube_topic: /e1/a}\n", dir, dir);
    static char *const env[] = { NULL };
    char err[1024];
    cr_assert_eq(cfg_load_string("tls.yaml", y, strlen(y), env, &c, err, sizeof err), 0, "%s", err);
    free(y);
    cr_assert_eq(gw_check(c, &e), TB_ECONFIG);
    cr_assert(strncmp(e.key, "mqtt.listeners[0].tls.", 22) == 0, "%s", e.text);
    cr_assert_eq(e.line, 4, "%s", e.text);
    cr_assert(strncmp(e.text, "tls.yaml: mqtt.listeners[0].tls.", 32) == 0, "%s", e.text);
    cfg_free(c);
    unlink(tok);
    rmdir(dir);
}
