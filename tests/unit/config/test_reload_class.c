/*
 * Tests for the reload class of config/ (cfg_reload_class, the RL flag of
 * the key table): every key has one, the known ones are right, the paths
 * cfg_diff reports are understood, docs/CONFIG.md lists the live keys; the
 * structured errors (cfg_err_t, cfg_load_string_ex); the issue 19 keys are
 * parsed and range-checked. (That reload.c applies exactly the live keys is
 * tests/unit/gateway/test_reload_keys.c: it needs the gateway.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "helper_config.h"
#include "base/base.h"

static const char *HEAD =
    "edge:\n"
    "  edge_name: e1\n"
    "  cluster_url: http://127.0.0.1:6650\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - mqtt_pattern: a/+/b\n"
    "      danube_topic: /e1/t\n"
    "      schema_subject: s\n";

static char *const NOENV[] = { NULL };

static cfg_t *load(const char *tail, cfg_err_t *e)
{
    char *y = NULL;
    y = tb_asprintf("%s%s", HEAD, tail);
    cfg_t *c = NULL;
    cfg_load_string_ex("test.yaml", y, strlen(y), NOENV, &c, e);
    free(y);
    return c;
}

Test(reload_class, every_key_has_a_class_and_live_ones_are_few)
{
    char path[192];
    cfg_reload_class_t cls;
    size_t n = 0, live = 0;
    for (size_t i = 0; cfg_key_path_at(i, path, sizeof path, &cls); i++) {
        cr_assert(cls == CFG_RELOAD_LIVE || cls == CFG_RELOAD_RESTART, "%s: class %d", path, (int)cls);
        /* the generic path is understood the same way */
        cr_assert_eq(cfg_reload_class(path), cls, "%s", path);
        n++;
        live += cls == CFG_RELOAD_LIVE;
    }
    cfg_key_info_t top;
    size_t ntop = 0;
    while (cfg_key_at(ntop, &top))
        ntop++;
    cr_assert_gt(n, ntop, "the list entries' keys are listed too");
    cr_assert_eq(live, 58, "the live keys today: 7 auth.*, http.auth_token_file, http.admin_token_file, "
                           "6 http.tls.*, 2 log.*, 7 listener tls.*, mqtt.unmatched, mqtt.topic_mappings and 9 "
                           "of its keys (all but priority and durability), replicator.max_attempts, wal.retire, "
                           "the 21 keys of outputs[] (an mqtt or sparkplug output is replaced alone, a danube "
                           "one's change is named as needing a restart by reload.c) (%zu)", live);
}

Test(reload_class, known_keys)
{
    static const char *const live[] = {
        "log.level", "log.format", "auth.password_file", "auth.acl_file", "auth.allow_anonymous",
        "auth.throttle", "http.auth_token_file", "http.admin_token_file", "http.tls.cert_file", "http.tls.min_version",
        "mqtt.listeners[0].tls.cert_file", "mqtt.listeners[3].tls.ciphers",
        "mqtt.listeners[].tls.use_identity_as_username", "mqtt.topic_mappings[12].validation_policy",
        "mqtt.topic_mappings[].validation_policy",
        /* the mappings: a new generation (docs/design/RELOAD.md 2.1) */
        "mqtt.topic_mappings", "mqtt.topic_mappings[0].mqtt_pattern", "mqtt.topic_mappings[1].danube_topic",
        "mqtt.topic_mappings[1].on_full", "mqtt.topic_mappings[1].schema_subject", "mqtt.topic_mappings[1].max_age",
        "mqtt.topic_mappings[1].extract_attributes", "mqtt.topic_mappings[1].capture_values",
        "mqtt.topic_mappings[1].encoding", "mqtt.unmatched", "replicator.max_attempts",
        "wal.retire", /* read at each retiring topic's next step (gateway/retire.c) */
        "outputs[central].max_bytes_per_s", "outputs[danube].max_messages_per_s", /* the pacer's caps */
        /* an output added, removed or changed: reload.c adds, removes or replaces it (mqtt, sparkplug) */
        "outputs[central]", "outputs[central].qos", "outputs[central].tls", "outputs[danube].topics",
    };
    static const char *const restart[] = {
        "edge.edge_name", "edge.cluster_url", "edge.token", "edge.tls.ca_file", "mqtt.listener", "mqtt.listeners",
        "mqtt.listeners[0].address", "mqtt.listeners[0].allow_anonymous", "mqtt.listeners[0].tls",
        "mqtt.topic_mappings[0]", "mqtt.topic_mappings[0].priority", "mqtt.topic_mappings[0].durability",
        "mqtt.dead_letter", "mqtt.max_connections", "mqtt.ingestion.batch_size", "wal.dir", "wal.fsync",
        "wal.max_total_bytes", "replicator.batch_size", "http.listener", "http.auth_probes",
        "shutdown_timeout_ms", "health.stall_after_ms", "outputs", "outputs[]", "outputs[central].tlsx",
        /* issue 19's keys: parsed now, used (and live where the design says so) from later commits */
        "mqtt.dead_letter_max_bytes", "reload.watch_ms",
        /* not keys: the conservative answer */
        "", "log", "log.levels", "nonsense", "mqtt.listeners[0", "mqtt.topic_mappings[0].nope",
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(live); i++)
        cr_assert_eq(cfg_reload_class(live[i]), CFG_RELOAD_LIVE, "%s should be live", live[i]);
    for (size_t i = 0; i < TB_ARRAY_LEN(restart); i++)
        cr_assert_eq(cfg_reload_class(restart[i]), CFG_RELOAD_RESTART, "%s should need a restart", restart[i]);
}

/* The paths cfg_diff reports (indexes, listener and output forms) get the class of their key. */
Test(reload_class, cfg_diff_paths_have_their_keys_class)
{
    const char *a =
        "edge: {edge_name: e1, cluster_url: \"http://127.0.0.1:6650\"}\n"
        "mqtt:\n"
        "  listeners:\n"
        "    - {address: \"127.0.0.1:1883\"}\n"
        "    - address: \"127.0.0.1:8883\"\n"
        "      tls: {cert_file: a.pem, key_file: a.key}\n"
        "  topic_mappings:\n"
        "    - {mqtt_pattern: a/+, danube_topic: /e1/a, schema_subject: s, validation_policy: %s}\n"
        "wal: {fsync: %s}\n"
        "log: {level: %s}\n";
    char *ya = NULL, *yb = NULL;
    ya = tb_asprintf(a, "none", "always", "info");
    yb = tb_asprintf(a, "enforce", "never", "debug");
    char *tb_ = strstr(yb, "a.pem");
    memcpy(tb_, "b.pem", 5);
    cfg_t *ca, *cb;
    char err[1024];
    cr_assert_eq(cfg_load_string("a.yaml", ya, strlen(ya), NOENV, &ca, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cfg_load_string("b.yaml", yb, strlen(yb), NOENV, &cb, err, sizeof err), 0, "%s", err);
    int ndiffs = cfgt_diff(ca, cb);
    static const struct {
        const char *key;
        cfg_reload_class_t cls;
    } want[] = {
        { "mqtt.listeners[1].tls.cert_file", CFG_RELOAD_LIVE },
        { "mqtt.topic_mappings[0].validation_policy", CFG_RELOAD_LIVE },
        { "wal.fsync", CFG_RELOAD_RESTART },
        { "log.level", CFG_RELOAD_LIVE },
    };
    cr_assert_eq(ndiffs, (int)TB_ARRAY_LEN(want), "diffs: %d", ndiffs);
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        bool found = false;
        for (int j = 0; j < ndiffs; j++)
            found |= strcmp(cfgt_diffs[j], want[i].key) == 0;
        cr_assert(found, "cfg_diff did not report %s", want[i].key);
        cr_assert_eq(cfg_reload_class(want[i].key), want[i].cls, "%s", want[i].key);
    }
    cfg_free(ca);
    cfg_free(cb);
    free(ya);
    free(yb);
}

/* docs/CONFIG.md's "Reload classes" list is the binary's. */
Test(reload_class, docs_list_the_live_keys)
{
    char *buf = cfgt_markdown(cfg_describe_reloadable);
    const char *text = cfgt_config_md();
    const char *at = strstr(text, "## Reload classes");
    cr_assert_not_null(at, "docs/CONFIG.md has no \"Reload classes\" section");
    cr_assert(strstr(at, buf), "docs/CONFIG.md's list of live keys is stale: regenerate it with "
                               "`tributary config --describe --reloadable --markdown`");
    free(buf);
}

Test(reload_class, errors_come_in_parts_and_as_the_old_text)
{
    cfg_err_t e;
    cfg_t *c = load("replicator:\n  batch_size: 0\n", &e);
    cr_assert_null(c);
    cr_assert_str_eq(e.file, "test.yaml");
    cr_assert_eq(e.line, 10);
    cr_assert_eq(e.column, 15);
    cr_assert_str_eq(e.key, "replicator.batch_size");
    cr_assert(strstr(e.message, "0 is not within 1..100000"), "%s", e.message);
    char *y = NULL, err[1024];
    y = tb_asprintf("%s%s", HEAD, "replicator:\n  batch_size: 0\n");
    cr_assert_lt(cfg_load_string("test.yaml", y, strlen(y), NOENV, &c, err, sizeof err), 0);
    cr_assert_str_eq(e.text, err, "cfg_load's text is the structured error's");
    cr_assert(strncmp(err, "test.yaml:10:15: replicator.batch_size: ", 40) == 0, "%s", err);
    free(y);

    /* a cross-key rule (config_check.c): line known, key named */
    c = load("replicator: {retry_initial_ms: 500, retry_max_ms: 100}\n", &e);
    cr_assert_null(c);
    cr_assert_str_eq(e.key, "replicator.retry_max_ms");
    cr_assert_gt(e.line, 0);
    /* YAML syntax */
    c = load("wal: [broken\n", &e);
    cr_assert_null(c);
    cr_assert_str_eq(e.key, "(yaml)");
    cr_assert_gt(e.line, 0);
    cr_assert(strncmp(e.text, "test.yaml:", 10) == 0, "%s", e.text);
    /* a file that cannot be opened: no line, no key */
    cr_assert_lt(cfg_load_ex("/nonexistent/edge.yaml", NOENV, &c, &e), 0);
    cr_assert_str_eq(e.file, "/nonexistent/edge.yaml");
    cr_assert_eq(e.line, 0);
    cr_assert_str_eq(e.key, "");
    cr_assert_str_eq(e.text, "/nonexistent/edge.yaml: cannot open: No such file or directory");
    /* an environment override keeps its old words */
    static char *const env[] = { "TRIBUTARY_WAL_FSYNC=sometimes", NULL };
    cr_assert_lt(cfg_load_string_ex("test.yaml", HEAD, strlen(HEAD), env, &c, &e), 0);
    cr_assert_str_eq(e.key, "wal.fsync");
    cr_assert(strncmp(e.text, "environment TRIBUTARY_WAL_FSYNC: wal.fsync: ", 44) == 0, "%s", e.text);
    /* success clears it */
    c = load("", &e);
    cr_assert_not_null(c, "%s", e.text);
    cr_assert_str_eq(e.text, "");
    cfg_free(c);
}

Test(reload_class, issue_19_keys_are_parsed_with_their_defaults_and_ranges)
{
    cfg_err_t e;
    cfg_t *c = load("", &e);
    cr_assert_not_null(c, "%s", e.text);
    cr_assert_eq(c->wal.retire, CFG_RETIRE_REMOVE);
    cr_assert_eq(c->replicator.max_attempts, 10);
    cr_assert_eq(c->mqtt.dead_letter_max_bytes, 64ull << 20);
    cr_assert_str_eq(c->http.admin_token_file, "");
    cr_assert_eq(c->reload.watch_ms, 0);
    cfg_free(c);
    cr_assert_eq(cfg_defaults()->replicator.max_attempts, 10);

    c = load("wal: {retire: keep}\nreplicator: {max_attempts: 1000}\n"
             "http: {admin_token_file: /etc/tributary/admin/token}\nreload: {watch_ms: 10000}\n", &e);
    cr_assert_not_null(c, "%s", e.text);
    cr_assert_eq(c->wal.retire, CFG_RETIRE_KEEP);
    cr_assert_eq(c->replicator.max_attempts, 1000);
    cr_assert_str_eq(c->http.admin_token_file, "/etc/tributary/admin/token");
    cr_assert_eq(c->reload.watch_ms, 10000);
    cfg_free(c);
    static char *const env[] = { "TRIBUTARY_MQTT_DEAD_LETTER_MAX_BYTES=1GiB", "TRIBUTARY_RELOAD_WATCH_MS=1000",
                                 NULL };
    cr_assert_eq(cfg_load_string_ex("test.yaml", HEAD, strlen(HEAD), env, &c, &e), 0, "%s", e.text);
    cr_assert_eq(c->mqtt.dead_letter_max_bytes, 1ull << 30);
    cr_assert_eq(c->reload.watch_ms, 1000);
    cfg_free(c);

    static const struct {
        const char *tail, *key, *why;
    } bad[] = {
        { "wal: {retire: delete}\n", "wal.retire", "remove" },
        { "replicator: {max_attempts: 0}\n", "replicator.max_attempts", "1..1000" },
        { "replicator: {max_attempts: 1001}\n", "replicator.max_attempts", "1..1000" },
        { "reload: {watch_ms: 500}\n", "reload.watch_ms", "at least 1000" },
        { "reload: {watch_ms: 3600001}\n", "reload.watch_ms", "0..3600000" },
        { "reload: {watch: 1000}\n", "reload.watch", "unknown key" },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(bad); i++) {
        c = load(bad[i].tail, &e);
        cr_assert_null(c, "%s was accepted", bad[i].tail);
        cr_assert_str_eq(e.key, bad[i].key, "%s: %s", bad[i].tail, e.text);
        cr_assert(strstr(e.message, bad[i].why), "%s: \"%s\" lacks \"%s\"", bad[i].tail, e.message, bad[i].why);
        cr_assert_gt(e.line, 8, "%s: the line is named (%s)", bad[i].tail, e.text);
    }
    /* under mqtt: (HEAD's last section) */
    c = load("  dead_letter_max_bytes: 1KiB\n", &e);
    cr_assert_null(c);
    cr_assert_str_eq(e.key, "mqtt.dead_letter_max_bytes", "%s", e.text);
    cr_assert(strstr(e.message, "65536.."), "%s", e.message);
    c = load("  dead_letter_max_bytes: 1GiB\n", &e);
    cr_assert_not_null(c, "%s", e.text);
    cr_assert_eq(c->mqtt.dead_letter_max_bytes, 1ull << 30);
    cfg_free(c);
}
