/*
 * test_opts.c: rep_opts_from_cfg is the one mapping from cfg_t to
 * rep_opts_t and rep_opts_default goes through it: the defaults are the
 * table's, a file's values all arrive (each field checked against the
 * key table, so a field the mapping forgets keeps its default and fails),
 * every edge.* and replicator.* key is either carried or named as someone
 * else's, and the recheck rule for wal.fsync interval.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "replicator/replicator.h"

static char err[1024];

/* Every key the mapping carries, and the field it lands in. */
typedef enum { F_STR, F_U32, F_U64 } field_kind_t;
static const struct carried {
    const char *key;
    size_t off;
    field_kind_t kind;
} CARRIED[] = {
    { "edge.edge_name", offsetof(rep_opts_t, edge_name), F_STR },
    { "edge.cluster_url", offsetof(rep_opts_t, cluster_url), F_STR },
    { "edge.token", offsetof(rep_opts_t, token), F_STR },
    { "edge.tls.ca_file", offsetof(rep_opts_t, tls_ca_file), F_STR },
    { "edge.tls.cert_file", offsetof(rep_opts_t, tls_cert_file), F_STR },
    { "edge.tls.key_file", offsetof(rep_opts_t, tls_key_file), F_STR },
    { "edge.heartbeat_interval_ms", offsetof(rep_opts_t, heartbeat_interval_ms), F_U32 },
    { "replicator.batch_size", offsetof(rep_opts_t, batch_size), F_U32 },
    { "replicator.batch_timeout_ms", offsetof(rep_opts_t, batch_timeout_ms), F_U32 },
    { "replicator.max_batch_bytes", offsetof(rep_opts_t, max_batch_bytes), F_U64 },
    { "replicator.max_inflight_batches", offsetof(rep_opts_t, max_inflight_batches), F_U32 },
    { "replicator.ack_timeout_ms", offsetof(rep_opts_t, ack_timeout_ms), F_U32 },
    { "replicator.rpc_timeout_ms", offsetof(rep_opts_t, rpc_timeout_ms), F_U32 },
    { "replicator.live_window_ms", offsetof(rep_opts_t, live_window_ms), F_U32 },
    { "replicator.retry_initial_ms", offsetof(rep_opts_t, retry_initial_ms), F_U32 },
    { "replicator.retry_max_ms", offsetof(rep_opts_t, retry_max_ms), F_U32 },
    { "replicator.shutdown_grace_ms", offsetof(rep_opts_t, shutdown_grace_ms), F_U32 },
    { "health.stall_after_ms", offsetof(rep_opts_t, stall_after_ms), F_U32 },
};

/* edge.* and replicator.* keys that are deliberately not the replicator's. */
static const char *const NOT_CARRIED[] = {
    "replicator.checkpoint_interval_ms", /* the WAL's checkpoint_flush_ms (gateway/run.c) */
    "replicator.max_attempts",           /* parsed only: poison batches come in a later commit (issue 19 R7) */
};

/* Every carried key away from its default (and wal.fsync interval for recheck_ms). */
static const char *NONDEFAULT =
    "edge:\n"
    "  edge_name: e1\n"
    "  cluster_url: https://cluster.example:6651\n"
    "  token: t0ken\n"
    "  heartbeat_interval_ms: 1234\n"
    "  tls:\n"
    "    ca_file: /etc/ca.pem\n"
    "    cert_file: /etc/cert.pem\n"
    "    key_file: /etc/key.pem\n"
    "replicator:\n"
    "  batch_size: 7\n"
    "  batch_timeout_ms: 77\n"
    "  max_batch_bytes: 2MiB\n"
    "  max_inflight_batches: 9\n"
    "  ack_timeout_ms: 6001\n"
    "  rpc_timeout_ms: 12001\n"
    "  live_window_ms: 3001\n"
    "  retry_initial_ms: 201\n"
    "  retry_max_ms: 40001\n"
    "  shutdown_grace_ms: 4001\n"
    "health:\n"
    "  stall_after_ms: 50001\n"
    "wal:\n"
    "  fsync: interval\n"
    "  fsync_interval_ms: 100\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - mqtt_pattern: a/+/b\n"
    "      danube_topic: /e1/t\n";

static cfg_t *load(const char *yaml)
{
    static char *const no_env[] = { NULL };
    cfg_t *c = NULL;
    int rc = cfg_load_string("test.yaml", yaml, strlen(yaml), no_env, &c, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    return c;
}

/* A file that sets only what is required, plus `extra` (YAML, may be ""). */
static cfg_t *load_minimal(const char *extra)
{
    char *y = tb_asprintf("edge:\n  edge_name: e1\n  cluster_url: http://127.0.0.1:6650\n"
                          "mqtt:\n  topic_mappings:\n    - mqtt_pattern: a/+/b\n      danube_topic: /e1/t\n%s",
                          extra);
    cfg_t *c = load(y);
    free(y);
    return c;
}


/* The key's value in cfg and the field's in o, as text, for comparing and messages. */
static void values(const struct carried *e, const cfg_t *cfg, const rep_opts_t *o, char *cv, char *ov, size_t n)
{
    cfg_key_info_t k;
    cr_assert(cfg_key_find(e->key, &k), "%s is not in the key table", e->key);
    const char *cf = (const char *)cfg + k.offset, *of = (const char *)o + e->off;
    switch (e->kind) {
    case F_STR: {
        cr_assert(k.size == sizeof(char *) && (!strcmp(k.type, "string") || !strcmp(k.type, "url") ||
                  !strcmp(k.type, "address")), "%s: not a string key", e->key);
        const char *a = *(char *const *)cf, *b = *(const char *const *)of;
        snprintf(cv, n, "%s", a ? a : "(null)");
        snprintf(ov, n, "%s", b ? b : "(null)");
        break;
    }
    case F_U32:
        cr_assert(k.size == sizeof(uint32_t) && strcmp(k.type, "enum") != 0, "%s: not a 32-bit key", e->key);
        snprintf(cv, n, "%u", *(const uint32_t *)cf);
        snprintf(ov, n, "%u", *(const uint32_t *)of);
        break;
    case F_U64:
        cr_assert(k.size == sizeof(uint64_t), "%s: not a 64-bit key", e->key);
        snprintf(cv, n, "%llu", (unsigned long long)*(const uint64_t *)cf);
        snprintf(ov, n, "%llu", (unsigned long long)*(const uint64_t *)of);
        break;
    }
}

Test(opts, from_cfg_carries_every_key_of_a_file_over)
{
    cfg_t *c = load(NONDEFAULT);
    rep_opts_t o;
    rep_opts_default(&o); /* a field the mapping forgets keeps its default */
    rep_opts_from_cfg(c, &o);
    for (size_t i = 0; i < TB_ARRAY_LEN(CARRIED); i++) {
        char cv[256], ov[256], dv[256], unused[256];
        values(&CARRIED[i], c, &o, cv, ov, sizeof cv);
        values(&CARRIED[i], cfg_defaults(), &o, dv, unused, sizeof dv);
        cr_assert_str_neq(cv, dv, "%s: the test file must set it away from its default %s", CARRIED[i].key, dv);
        cr_expect_str_eq(ov, cv, "%s: the file says %s, the option holds %s", CARRIED[i].key, cv, ov);
    }
    cr_expect_eq(o.recheck_ms, 25, "wal.fsync interval every 100 ms: recheck %u", o.recheck_ms);
    cfg_free(c);
}

Test(opts, every_edge_and_replicator_key_is_carried_or_named_as_not)
{
    cfg_key_info_t k;
    for (size_t i = 0; cfg_key_at(i, &k); i++) {
        const char *p = k.path;
        if (strncmp(p, "edge.", 5) != 0 && strncmp(p, "replicator.", 11) != 0)
            continue;
        bool found = false;
        for (size_t j = 0; j < TB_ARRAY_LEN(CARRIED); j++)
            found |= strcmp(CARRIED[j].key, p) == 0;
        for (size_t j = 0; j < TB_ARRAY_LEN(NOT_CARRIED); j++)
            found |= strcmp(NOT_CARRIED[j], p) == 0;
        cr_expect(found, "%s: a new key; carry it in rep_opts_from_cfg (and CARRIED here) or name it in NOT_CARRIED", p);
    }
}

Test(opts, default_is_from_cfg_of_the_table_defaults)
{
    rep_opts_t a, b;
    rep_opts_default(&a);
    b = a;
    rep_opts_from_cfg(cfg_defaults(), &b);
    for (size_t i = 0; i < TB_ARRAY_LEN(CARRIED); i++) {
        char av[256], bv[256], dv[256];
        values(&CARRIED[i], cfg_defaults(), &a, dv, av, sizeof av);
        values(&CARRIED[i], cfg_defaults(), &b, dv, bv, sizeof bv);
        cr_expect_str_eq(av, dv, "%s: rep_opts_default holds %s, the table %s", CARRIED[i].key, av, dv);
    }
    cr_expect_eq(a.recheck_ms, b.recheck_ms);
    cr_expect(memcmp(&a, &b, sizeof a) == 0, "rep_opts_from_cfg(cfg_defaults()) changed a defaulted rep_opts_t");
}

Test(opts, default_keeps_the_fields_without_a_key)
{
    rep_opts_t o;
    rep_opts_default(&o);
    cr_assert_eq(o.register_retry_initial_ms, 1000);
    cr_assert_eq(o.register_retry_max_ms, 60000);
    cr_assert_null(o.topics);
    cr_assert_eq(o.ntopics, 0);
    cr_assert_null(o.notify);
    cr_assert_null(o.notify_arg);
    cr_assert_null(o.edge_name, "no default: the caller's");
    cr_assert_str_eq(o.token, "");
}

static void notify(void *arg) { (void)arg; }

Test(opts, from_cfg_leaves_the_fields_without_a_key_alone)
{
    cfg_t *c = load(NONDEFAULT);
    rep_topic_spec_t spec = { "/e1/t", NULL, NULL, 0, 0, NULL };
    int arg;
    rep_opts_t o;
    rep_opts_default(&o);
    o.register_retry_initial_ms = 11;
    o.register_retry_max_ms = 22;
    o.topics = &spec;
    o.ntopics = 1;
    o.notify = notify;
    o.notify_arg = &arg;
    rep_opts_from_cfg(c, &o);
    cr_assert_eq(o.register_retry_initial_ms, 11);
    cr_assert_eq(o.register_retry_max_ms, 22);
    cr_assert_eq(o.topics, &spec);
    cr_assert_eq(o.ntopics, 1);
    cr_assert_eq(o.notify, notify);
    cr_assert_eq(o.notify_arg, &arg);
    cfg_free(c);
}

Test(opts, recheck_is_a_quarter_of_the_fsync_interval)
{
    cfg_t *c = load_minimal("wal:\n  fsync: interval\n  fsync_interval_ms: 2000\n");
    rep_opts_t o;
    rep_opts_default(&o);
    rep_opts_from_cfg(c, &o);
    cr_assert_eq(o.recheck_ms, 500);
    cfg_free(c);
}

Test(opts, recheck_is_at_least_5_ms)
{
    cfg_t *c = load_minimal("wal:\n  fsync: interval\n  fsync_interval_ms: 8\n");
    rep_opts_t o;
    rep_opts_default(&o);
    rep_opts_from_cfg(c, &o);
    cr_assert_eq(o.recheck_ms, 5);
    cfg_free(c);
}

Test(opts, recheck_is_off_unless_fsync_interval)
{
    const char *modes[] = { "always", "never" };
    for (size_t i = 0; i < 2; i++) {
        char *extra = tb_asprintf("wal:\n  fsync: %s\n  fsync_interval_ms: 100\n", modes[i]);
        cfg_t *c = load_minimal(extra);
        free(extra);
        rep_opts_t o;
        rep_opts_default(&o);
        o.recheck_ms = 999; /* set, not left */
        rep_opts_from_cfg(c, &o);
        cr_expect_eq(o.recheck_ms, 0, "wal.fsync %s: recheck %u", modes[i], o.recheck_ms);
        cfg_free(c);
    }
}

Test(opts, the_danube_outputs_rate_caps_are_carried)
{
    cfg_t *c = load_minimal("outputs:\n  - name: danube\n    kind: danube\n    max_bytes_per_s: 64k\n"
                            "    max_messages_per_s: 300\n");
    rep_opts_t o;
    rep_opts_default(&o);
    cr_assert_eq(o.max_bytes_per_s, 0, "no cap by default");
    cr_assert_eq(o.max_messages_per_s, 0);
    rep_opts_from_cfg(c, &o);
    cr_expect_eq(o.max_bytes_per_s, 64 * 1024, "%llu", (unsigned long long)o.max_bytes_per_s);
    cr_expect_eq(o.max_messages_per_s, 300);
    cfg_free(c);
    c = load_minimal("");
    rep_opts_from_cfg(c, &o); /* the implied danube output: no caps, whatever o held */
    cr_expect_eq(o.max_bytes_per_s, 0);
    cr_expect_eq(o.max_messages_per_s, 0);
    cfg_free(c);
}
