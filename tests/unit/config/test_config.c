/* Tests for config/: every error class names file, line and key; defaults,
 * environment substitution and overrides; Danube's own file is accepted. */
#include <criterion/criterion.h>
#include <stddef.h>
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
    "      danube_topic: /e1/t\n";

static cfg_t *load(const char *yaml, char *const *env) { return cfgt_load(yaml, env); }

static void expect_error(const char *yaml, const char *needle1, const char *needle2)
{
    cfgt_expect_refused(load(yaml, NULL), yaml, needle1, needle2);
}

static char *cat(const char *a, const char *b)
{
    return tb_asprintf("%s%s", a, b);
}

Test(config, defaults_match_danube)
{
    cfg_t *c = load(HEAD, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->edge.heartbeat_interval_ms, 30000);
    cr_assert_eq(c->replicator.batch_size, 100);
    cr_assert_eq(c->replicator.batch_timeout_ms, 1000);
    cr_assert_str_eq(c->mqtt.listener, "0.0.0.0:1883");
    cr_assert_eq(c->mqtt.max_payload_size, 262144);
    cr_assert_eq(c->mqtt.max_connections, 10000);
    cr_assert_eq(c->mqtt.ingestion.batch_size, 100);
    cr_assert_eq(c->mqtt.ingestion.batch_timeout_ms, 500);
    cr_assert_str_eq(c->edge.token, "");
    cr_assert_eq(c->wal.fsync, CFG_FSYNC_ALWAYS);
    cr_assert_eq(c->wal.segment_bytes, 16u << 20);
    cr_assert_eq(c->mqtt.nmappings, 1);
    cr_assert_eq(c->mqtt.mappings[0].validation_policy, CFG_POLICY_NONE);
    cr_assert_null(c->mqtt.mappings[0].schema_subject);
    cr_assert_eq(c->mqtt.mappings[0].line, 6);
    cfg_free(c);
}

Test(config, danube_example_accepted_unchanged)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/danube-edge.yaml", getenv("TRIB_TESTDATA"));
    static char *const env[] = { NULL };
    cfg_t *c = NULL;
    int rc = cfg_load(path, env, &c, cfgt_err, sizeof cfgt_err);
    cr_assert_eq(rc, 0, "%s", cfgt_err);
    cr_assert_str_eq(c->edge.edge_name, "factory-1");
    cr_assert_eq(c->mqtt.nmappings, 3);
    cr_assert_eq(c->mqtt.mappings[0].validation_policy, CFG_POLICY_ENFORCE);
    cr_assert_str_eq(c->mqtt.mappings[1].attrs[1].name, "plc");
    cr_assert_str_eq(c->mqtt.mappings[1].attrs[1].ref, "$2");
    cfg_free(c);
}

Test(config, example_file_accepted)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/edge.yaml.example", getenv("TRIB_SOURCE_DIR"));
    static char *const env[] = { "EDGE_TOKEN=abc", NULL };
    cfg_t *c = NULL;
    int rc = cfg_load(path, env, &c, cfgt_err, sizeof cfgt_err);
    cr_assert_eq(rc, 0, "%s", cfgt_err);
    cfg_free(c);
}

Test(config, embedded_default_loads)
{
    static char *const env[] = { NULL };
    cfg_t *c = NULL;
    cr_assert_eq(cfg_load(NULL, env, &c, cfgt_err, sizeof cfgt_err), 0, "%s", cfgt_err);
    cr_assert_str_eq(c->mqtt.listener, "127.0.0.1:1883");
    cfg_free(c);
}

Test(config, unknown_key_names_line_and_suggests)
{
    char *y = cat(HEAD, "wal:\n  fsynk: never\n");
    expect_error(y, "test.yaml:9:3: wal.fsynk: unknown key", "did you mean \"fsync\"");
    free(y);
}

Test(config, unknown_section_is_an_error)
{
    char *y = cat(HEAD, "walx:\n  fsync: never\n");
    expect_error(y, "test.yaml:8:1: walx: unknown key", "did you mean \"wal\"");
    free(y);
}

Test(config, unknown_mapping_key_names_index)
{
    char *y = cat(HEAD, "      schema_subjekt: s\n");
    expect_error(y, "test.yaml:8:7: mqtt.topic_mappings[0].schema_subjekt: unknown key",
                 "did you mean \"schema_subject\"");
    free(y);
}

Test(config, wrong_type_integer)
{
    char *y = cat(HEAD, "replicator:\n  batch_size: lots\n");
    expect_error(y, "test.yaml:9:15: replicator.batch_size:", "expected a non-negative integer");
    free(y);
}

Test(config, wrong_type_mapping_for_scalar)
{
    char *y = cat(HEAD, "wal:\n  dir:\n    a: b\n");
    expect_error(y, "test.yaml:10:5: wal.dir:", "expected a string, got a mapping");
    free(y);
}

Test(config, enum_value_lists_choices)
{
    char *y = cat(HEAD, "wal:\n  fsync: sometimes\n");
    expect_error(y, "test.yaml:9:10: wal.fsync:", "always, interval, never");
    free(y);
}

Test(config, out_of_range)
{
    char *y = cat(HEAD, "mqtt_extra: 1\n");
    free(y);
    y = cat(HEAD, "replicator:\n  batch_size: 0\n");
    expect_error(y, "test.yaml:9:15: replicator.batch_size:", "out of range");
    free(y);
}

Test(config, byte_sizes_accept_suffixes)
{
    char *y = cat(HEAD, "wal:\n  segment_bytes: 8MiB\n  max_topic_bytes: 1GiB\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->wal.segment_bytes, 8u << 20);
    cr_assert_eq(c->wal.max_topic_bytes, 1u << 30);
    cfg_free(c);
    free(y);
}

Test(config, min_free_bytes_takes_a_size_or_a_share_of_the_file_system)
{
    static const struct { const char *text; uint64_t bytes; uint32_t permille; } ok[] = {
        { "64MiB", 64u << 20, 0 }, { "2%", 0, 20 }, { "0.5%", 0, 5 }, { "\"12.5 %\"", 0, 125 },
        { "50%", 0, 500 },         { "0", 0, 0 },   { "0%", 0, 0 },  { "1048576", 1u << 20, 0 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *tail = tb_asprintf("wal:\n  min_free_bytes: %s\n", ok[i].text);
        char *y = cat(HEAD, tail);
        cfg_t *c = load(y, NULL);
        cr_assert_not_null(c, "%s: %s", ok[i].text, cfgt_err);
        cr_assert_eq(c->wal.min_free_bytes.bytes, ok[i].bytes, "%s", ok[i].text);
        cr_assert_eq(c->wal.min_free_bytes.permille, ok[i].permille, "%s", ok[i].text);
        cfg_free(c);
        free(y);
        free(tail);
    }
    char *const env[] = { "TRIBUTARY_WAL_MIN_FREE_BYTES=10%", NULL };
    cfg_t *c = load(HEAD, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->wal.min_free_bytes.permille, 100);
    cfg_free(c);
}

Test(config, min_free_bytes_errors_name_the_key_and_what_was_expected)
{
    static const struct { const char *text, *why; } bad[] = {
        { "60%", "not within 0%..50%" },
        { "2.25%", "at most one decimal" },
        { "2x%", "a size (64MiB) or a percentage" },
        { "lots", "a size (64MiB) or a percentage" },
        { "%", "a size (64MiB) or a percentage" },
        { "5%%", "a size (64MiB) or a percentage" },
        { "2EiB", "a size (64MiB) or a percentage" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *tail = tb_asprintf("wal:\n  min_free_bytes: \"%s\"\n", bad[i].text);
        char *y = cat(HEAD, tail);
        expect_error(y, "test.yaml:9:19: wal.min_free_bytes:", bad[i].why);
        free(y);
        free(tail);
    }
}

Test(config, min_free_bytes_prints_as_it_reads)
{
    static const char *const texts[] = { "0.5%", "2%", "64MiB" };
    static const char *const printed[] = { "min_free_bytes: \"0.5%\"\n", "min_free_bytes: \"2%\"\n",
                                           "min_free_bytes: 67108864\n" };
    for (size_t i = 0; i < 3; i++) {
        char *tail = tb_asprintf("wal:\n  min_free_bytes: %s\n", texts[i]);
        char *y = cat(HEAD, tail);
        cfg_t *c = load(y, NULL);
        cr_assert_not_null(c, "%s", cfgt_err);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cfg_print(c, f);
        fclose(f);
        cr_assert(strstr(buf, printed[i]), "%s printed as:\n%s", texts[i], buf);
        cfg_t *again = load(buf, NULL);
        cr_assert_not_null(again, "%s", cfgt_err);
        cr_assert_eq(again->wal.min_free_bytes.bytes, c->wal.min_free_bytes.bytes);
        cr_assert_eq(again->wal.min_free_bytes.permille, c->wal.min_free_bytes.permille);
        cfg_free(again);
        cfg_free(c);
        free(buf);
        free(y);
        free(tail);
    }
}

Test(config, on_full_is_drop_oldest_unless_a_mapping_says_drop_newest)
{
    char *y = cat(HEAD, "    - mqtt_pattern: c/+\n      danube_topic: /e1/u\n      on_full: drop_newest\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].on_full, CFG_ON_FULL_DROP_OLDEST);
    cr_assert_eq(c->mqtt.mappings[1].on_full, CFG_ON_FULL_DROP_NEWEST);
    cfg_free(c);
    free(y);
    y = cat(HEAD, "    - mqtt_pattern: d/+\n      danube_topic: /e1/v\n      on_full: block\n");
    c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[1].on_full, CFG_ON_FULL_BLOCK);
    cfg_free(c);
    free(y);
    y = cat(HEAD, "      on_full: blocking\n");
    expect_error(y, "test.yaml:8:16: mqtt.topic_mappings[0].on_full:", "expected one of drop_oldest, drop_newest, block");
    free(y);
}

Test(config, durability_is_wal_durability_unless_a_mapping_says_its_own)
{
    /* wal.durability after the mappings in the file: still their default */
    char *y = cat(HEAD, "    - mqtt_pattern: c/+\n      danube_topic: /e1/u\n      durability: log\n"
                        "wal:\n  durability: memory_first\n"
                        "  memory_first: {ack: received, spill_after_ms: 100, memory_bytes: 1MiB}\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].durability, CFG_DURABILITY_MEMORY_FIRST, "wal.durability's");
    cr_assert_eq(c->mqtt.mappings[1].durability, CFG_DURABILITY_LOG, "its own");
    cr_assert_eq(c->wal.memory_first.ack, CFG_MF_ACK_RECEIVED);
    cr_assert_eq(c->wal.memory_first.spill_after_ms, 100);
    cr_assert_eq(c->wal.memory_first.memory_bytes, 1u << 20);
    cfg_free(c);
    free(y);
    /* the environment's wal.durability is the default too */
    static char *const env[] = { "TRIBUTARY_WAL_DURABILITY=memory_first", NULL };
    c = load(HEAD, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].durability, CFG_DURABILITY_MEMORY_FIRST);
    cfg_free(c);
    /* defaults: log, upstream, 250 ms, 8 MiB */
    c = load(HEAD, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].durability, CFG_DURABILITY_LOG);
    cr_assert_eq(c->wal.durability, CFG_DURABILITY_LOG);
    cr_assert_eq(c->wal.memory_first.ack, CFG_MF_ACK_UPSTREAM);
    cr_assert_eq(c->wal.memory_first.spill_after_ms, 250);
    cr_assert_eq(c->wal.memory_first.memory_bytes, 8u << 20);
    cfg_free(c);
    y = cat(HEAD, "      durability: memory-first\n");
    expect_error(y, "test.yaml:8:19: mqtt.topic_mappings[0].durability:", "expected one of log, memory_first");
    free(y);
    y = cat(HEAD, "wal:\n  memory_first:\n    spill_after_ms: 5\n");
    expect_error(y, "test.yaml:10:21: wal.memory_first.spill_after_ms:", "10");
    free(y);
    y = cat(HEAD, "wal:\n  memory_first:\n    ack: sent\n");
    expect_error(y, "test.yaml:10:10: wal.memory_first.ack:", "expected one of upstream, received");
    free(y);
    y = cat(HEAD, "wal:\n  memory_first:\n    memory_bytes: 4KiB\n");
    expect_error(y, "test.yaml:10:19: wal.memory_first.memory_bytes:", NULL);
    free(y);
}

Test(config, max_age_is_a_duration_in_ms_s_m_h_or_d_and_none_by_default)
{
    static const struct { const char *text; uint64_t ms; } ok[] = {
        { "500ms", 500 }, { "45s", 45000 }, { "30m", 1800000 }, { "12h", 43200000 },
        { "7d", 604800000 }, { "250", 250 }, { "0", 0 }, { "3650d", 3650ull * 86400000 },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(ok); i++) {
        char line[64];
        snprintf(line, sizeof line, "      max_age: %s\n", ok[i].text);
        char *y = cat(HEAD, line);
        cfg_t *c = load(y, NULL);
        cr_assert_not_null(c, "%s: %s", ok[i].text, cfgt_err);
        cr_assert_eq(c->mqtt.mappings[0].max_age_ms, ok[i].ms, "%s", ok[i].text);
        cfg_free(c);
        free(y);
    }
    cfg_t *c = load(HEAD, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].max_age_ms, 0, "absent: no age limit");
    cfg_free(c);
    char *y = cat(HEAD, "      max_age: 7w\n");
    expect_error(y, "test.yaml:8:16: mqtt.topic_mappings[0].max_age:", "unknown duration unit \"w\"");
    free(y);
    y = cat(HEAD, "      max_age: soon\n");
    expect_error(y, "test.yaml:8:16: mqtt.topic_mappings[0].max_age:", "expected a duration");
    free(y);
    y = cat(HEAD, "      max_age: 3651d\n");
    expect_error(y, "test.yaml:8:16: mqtt.topic_mappings[0].max_age:", "duration out of range");
    free(y);
    y = cat(HEAD, "      max_age: -1s\n");
    expect_error(y, "test.yaml:8:16: mqtt.topic_mappings[0].max_age:", "expected a duration");
    free(y);
}

Test(config, duplicate_yaml_key)
{
    char *y = cat(HEAD, "wal:\n  fsync: never\n  fsync: always\n");
    expect_error(y, "test.yaml:10:3: wal.fsync: duplicate key", "line 9");
    free(y);
}

Test(config, duplicate_mapping)
{
    char *y = cat(HEAD, "    - mqtt_pattern: a/+/b\n      danube_topic: /e1/u\n");
    expect_error(y, "test.yaml:8:21: mqtt.topic_mappings[1].mqtt_pattern: duplicate mapping", "line 6");
    free(y);
}

Test(config, topic_outside_namespace)
{
    char *y = cat(HEAD, "    - mqtt_pattern: x\n      danube_topic: /other/t\n");
    expect_error(y, "test.yaml:9:21: mqtt.topic_mappings[1].danube_topic:", "must start with /e1/");
    free(y);
}

Test(config, topic_with_bad_characters)
{
    char *y = cat(HEAD, "    - mqtt_pattern: x\n      danube_topic: /e1/a/b\n");
    expect_error(y, "mqtt.topic_mappings[1].danube_topic:", "letters, digits");
    free(y);
}

Test(config, hash_not_last)
{
    char *y = cat(HEAD, "    - mqtt_pattern: a/#/b\n      danube_topic: /e1/u\n");
    expect_error(y, "test.yaml:8:21: mqtt.topic_mappings[1].mqtt_pattern:", "'#' must be the last level");
    free(y);
}

Test(config, plus_mixed_into_level)
{
    char *y = cat(HEAD, "    - mqtt_pattern: a/b+/c\n      danube_topic: /e1/u\n");
    expect_error(y, "test.yaml:8:21: mqtt.topic_mappings[1].mqtt_pattern:", "'+' must fill a whole level");
    free(y);
}

Test(config, attribute_refers_to_missing_capture)
{
    char *y = cat(HEAD, "      extract_attributes:\n        device: \"$2\"\n");
    expect_error(y, "test.yaml:9:17: mqtt.topic_mappings[0].extract_attributes.device:",
                 "use $1..$1");
    free(y);
}

Test(config, attribute_not_a_capture)
{
    char *y = cat(HEAD, "      extract_attributes:\n        device: dev\n");
    expect_error(y, "mqtt.topic_mappings[0].extract_attributes.device:", "not a capture");
    free(y);
}

Test(config, hash_capture_needs_hash)
{
    char *y = cat(HEAD, "      extract_attributes:\n        rest: \"$#\"\n");
    expect_error(y, "extract_attributes.rest:", "not a capture");
    free(y);
    y = cat(HEAD, "    - mqtt_pattern: s/#\n      danube_topic: /e1/s\n      extract_attributes:\n"
                  "        rest: \"$#\"\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cfg_free(c);
    free(y);
}

Test(config, template_needs_capture_values)
{
    char *y = cat(HEAD, "    - mqtt_pattern: site/+/data\n      danube_topic: /e1/${1}-data\n");
    expect_error(y, "test.yaml:9:21: mqtt.topic_mappings[1].danube_topic:", "capture_values");
    free(y);
    y = cat(HEAD, "    - mqtt_pattern: site/+/data\n      danube_topic: /e1/${1}-data\n"
                  "      capture_values:\n        \"$1\": [north, south]\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[1].capvals[0].nvalues, 2);
    cfg_free(c);
    free(y);
}

Test(config, enforce_needs_subject)
{
    char *y = cat(HEAD, "      validation_policy: enforce\n");
    expect_error(y, "test.yaml:8:26: mqtt.topic_mappings[0].validation_policy:", "schema_subject");
    free(y);
}

Test(config, required_key_missing)
{
    expect_error("edge:\n  edge_name: e1\nmqtt:\n  topic_mappings:\n    - mqtt_pattern: a\n"
                 "      danube_topic: /e1/t\n",
                 "test.yaml: edge.cluster_url: required key missing", NULL);
}

Test(config, mapping_required_field_missing)
{
    expect_error("edge:\n  edge_name: e1\n  cluster_url: http://h:1\nmqtt:\n  topic_mappings:\n"
                 "    - mqtt_pattern: a\n",
                 "test.yaml:6:7: mqtt.topic_mappings[0].danube_topic: required key missing", NULL);
}

Test(config, yaml_syntax_error_names_line)
{
    expect_error("edge:\n  edge_name: [e1\n", "test.yaml:", "(yaml)");
}

Test(config, bad_listener_address)
{
    char *y = cat(HEAD, "http:\n  listener: localhost\n");
    expect_error(y, "test.yaml:9:13: http.listener:", "host:port");
    free(y);
}

Test(config, bad_cluster_url)
{
    expect_error("edge:\n  edge_name: e1\n  cluster_url: grpc://h:1\n", "test.yaml:3:16: edge.cluster_url:",
                 "http://");
}

Test(config, wal_bounds_consistent)
{
    char *y = cat(HEAD, "wal:\n  segment_bytes: 1GiB\n  max_topic_bytes: 1GiB\n");
    expect_error(y, "wal.max_topic_bytes", "twice wal.segment_bytes");
    free(y);
}

Test(config, env_substitution)
{
    const char *y = "edge:\n  edge_name: e1\n  cluster_url: http://${HOST}:6650\n  token: ${TOKEN}\n"
                    "mqtt:\n  topic_mappings:\n    - mqtt_pattern: a\n      danube_topic: /e1/t\n";
    char *const env[] = { "HOST=10.0.0.9", "TOKEN=s3cret", NULL };
    cfg_t *c = load(y, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_str_eq(c->edge.cluster_url, "http://10.0.0.9:6650");
    cr_assert_str_eq(c->edge.token, "s3cret");
    cfg_free(c);
}

Test(config, env_substitution_unset_variable_is_named)
{
    const char *y = "edge:\n  edge_name: e1\n  cluster_url: http://${NOPE_HOST}:6650\n";
    expect_error(y, "test.yaml:3:16: edge.cluster_url:", "environment variable NOPE_HOST is not set");
}

Test(config, env_override_beats_file)
{
    char *y = cat(HEAD, "wal:\n  fsync: always\n");
    char *const env[] = { "TRIBUTARY_WAL_FSYNC=interval", "TRIBUTARY_MQTT_INGESTION_BATCH_SIZE=7", NULL };
    cfg_t *c = load(y, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->wal.fsync, CFG_FSYNC_INTERVAL);
    cr_assert_eq(c->mqtt.ingestion.batch_size, 7);
    cfg_free(c);
    free(y);
}

Test(config, env_override_bad_value_is_named)
{
    char *const env[] = { "TRIBUTARY_WAL_FSYNC=maybe", NULL };
    cfg_t *c = load(HEAD, env);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "environment TRIBUTARY_WAL_FSYNC: wal.fsync:"), "%s", cfgt_err);
}

Test(config, env_override_supplies_required_key)
{
    const char *y = "edge:\n  edge_name: e1\nmqtt:\n  topic_mappings:\n    - mqtt_pattern: a\n"
                    "      danube_topic: /e1/t\n";
    char *const env[] = { "TRIBUTARY_EDGE_CLUSTER_URL=https://c:443", NULL };
    cfg_t *c = load(y, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cfg_free(c);
}

Test(config, capture_templates_left_alone_by_env_substitution)
{
    char *y = cat(HEAD, "    - mqtt_pattern: s/+\n      danube_topic: /e1/${1}\n"
                        "      capture_values:\n        \"$1\": [x]\n");
    cfg_t *c = load(y, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_str_eq(c->mqtt.mappings[1].danube_topic, "/e1/${1}");
    cfg_free(c);
    free(y);
}

Test(config, print_masks_secrets)
{
    char *y = cat(HEAD, "");
    char *const env[] = { "TRIBUTARY_EDGE_TOKEN=hunter2", NULL };
    cfg_t *c = load(y, env);
    cr_assert_not_null(c, "%s", cfgt_err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_print(c, f);
    fclose(f);
    cr_assert_null(strstr(buf, "hunter2"));
    cr_assert(strstr(buf, "token: \"***\""), "%s", buf);
    /* the printed configuration is itself a valid configuration */
    cfg_t *again = load(buf, NULL);
    cr_assert_not_null(again, "%s\n%s", cfgt_err, buf);
    cfg_free(again);
    free(buf);
    cfg_free(c);
    free(y);
}

/* The describe table and docs/CONFIG.md come from the same table. */
Test(config, docs_reference_matches_describe)
{
    char *buf = cfgt_markdown(cfg_describe);
    const char *text = cfgt_config_md();
    cr_assert(strstr(text, buf), "docs/CONFIG.md's reference table is stale: regenerate it with "
                                 "`tributary config --describe --markdown`");
    free(buf);
}

/* edge.yaml.example documents every key of the table. */
Test(config, example_mentions_every_key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/edge.yaml.example", getenv("TRIB_SOURCE_DIR"));
    FILE *ex = fopen(path, "r");
    cr_assert_not_null(ex);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, ex);
    text[n] = '\0';
    fclose(ex);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_describe(f, false);
    fclose(f);
    /* every described key's last component appears as "name:" in the example */
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == ' ' || !strchr(line, '.'))
            continue;
        char key[128];
        if (sscanf(line, "%127s", key) != 1 || !strchr(key, '.'))
            continue; /* the closing note, not a key row */
        char *last = strrchr(key, '.') + 1;
        char needle[160];
        snprintf(needle, sizeof needle, "%s:", last);
        cr_assert(strstr(text, needle), "edge.yaml.example does not mention %s", key);
    }
    free(buf);
}

Test(config, diff_names_each_changed_key)
{
    char *a = cat(HEAD, "log:\n  level: info\n");
    char *b = cat(HEAD, "      validation_policy: none\n      schema_subject: s\nlog:\n  level: debug\n"
                        "wal:\n  fsync: never\n  min_free_bytes: 1%\n");
    cfg_t *ca = load(a, NULL);
    cr_assert_not_null(ca, "%s", cfgt_err);
    char *const env[] = { "TRIBUTARY_EDGE_TOKEN=new-secret", NULL };
    cfg_t *cb = load(b, env);
    cr_assert_not_null(cb, "%s", cfgt_err);
    cr_assert_eq(cfgt_diff(ca, cb), 5);
    cr_assert_str_eq(cfgt_diffs[0], "edge.token");
    cr_assert_str_eq(cfgt_diffs[1], "mqtt.topic_mappings[0].schema_subject");
    cr_assert_str_eq(cfgt_diffs[2], "wal.fsync");
    cr_assert_str_eq(cfgt_diffs[3], "wal.min_free_bytes");
    cr_assert_str_eq(cfgt_diffs[4], "log.level");
    cr_assert_eq(cfgt_diff(ca, ca), 0);
    cfg_free(ca);
    cfg_free(cb);
    free(a);
    free(b);
}

Test(config, the_key_table_can_be_walked_and_searched)
{
    cfg_key_info_t k;
    size_t n = 0;
    while (cfg_key_at(n, &k))
        n++;
    cr_assert_gt(n, 30);
    cr_assert(cfg_key_find("wal.fsync", &k));
    cr_assert_str_eq(k.type, "enum");
    cr_assert_eq(k.offset, offsetof(cfg_t, wal.fsync));
    cr_assert(cfg_key_find("replicator.max_batch_bytes", &k));
    cr_assert_eq(k.size, sizeof(uint64_t));
    cr_assert(!cfg_key_find("wal.fsink", &k));
    cr_assert(!cfg_key_at(n, &k));
}
