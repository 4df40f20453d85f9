/*
 * test_defaults.c: cfg_defaults() is the table's defaults and nothing else:
 * equal, key by key (walking the table), to what loading a file that sets
 * only the required keys gives; required keys unset; no environment; one
 * object for every thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_int.h"

static char err[1024];

/* The least a file must say: the required keys and one mapping, and
 * edge.cluster_url, required while a danube output exists (so always
 * without an outputs section). */
static const char *MINIMAL =
    "edge:\n"
    "  edge_name: e1\n"
    "  cluster_url: http://127.0.0.1:6650\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - mqtt_pattern: a/+/b\n"
    "      danube_topic: /e1/t\n";

static cfg_t *load_minimal(void)
{
    static char *const no_env[] = { NULL };
    cfg_t *c = NULL;
    int rc = cfg_load_string("minimal.yaml", MINIMAL, strlen(MINIMAL), no_env, &c, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    return c;
}

/* Keys the minimal file sets: the table's required ones, and cluster_url. */
static bool set_by_minimal(const cfg__key_t *k)
{
    return (k->flags & CFG__F_REQUIRED) || strcmp(k->path, "edge.cluster_url") == 0;
}

/* Compares one row's field in a and b; fills why on a difference. */
static bool same_field(const cfg__key_t *k, const cfg_t *a, const cfg_t *b, char *why, size_t whylen)
{
    const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;
    switch (k->type) {
    case CFG__STR: case CFG__ADDR: case CFG__URL: {
        const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
        snprintf(why, whylen, "\"%s\" vs \"%s\"", sa ? sa : "(null)", sb ? sb : "(null)");
        return sa && sb ? strcmp(sa, sb) == 0 : sa == sb;
    }
    case CFG__BOOL:
        snprintf(why, whylen, "%d vs %d", *(const bool *)fa, *(const bool *)fb);
        return *(const bool *)fa == *(const bool *)fb;
    case CFG__U32: case CFG__MS:
        snprintf(why, whylen, "%u vs %u", *(const uint32_t *)fa, *(const uint32_t *)fb);
        return *(const uint32_t *)fa == *(const uint32_t *)fb;
    case CFG__U64: case CFG__BYTES: case CFG__DURATION:
        snprintf(why, whylen, "%llu vs %llu", (unsigned long long)*(const uint64_t *)fa,
                 (unsigned long long)*(const uint64_t *)fb);
        return *(const uint64_t *)fa == *(const uint64_t *)fb;
    case CFG__ENUM:
        snprintf(why, whylen, "%d vs %d", *(const int *)fa, *(const int *)fb);
        return *(const int *)fa == *(const int *)fb;
    case CFG__SPACE: {
        const cfg_space_t *sa = (const cfg_space_t *)fa, *sb = (const cfg_space_t *)fb;
        snprintf(why, whylen, "%llu/%u vs %llu/%u", (unsigned long long)sa->bytes, sa->permille,
                 (unsigned long long)sb->bytes, sb->permille);
        return sa->bytes == sb->bytes && sa->permille == sb->permille;
    }
    case CFG__MAPPINGS:
        snprintf(why, whylen, "%zu vs %zu mappings", a->mqtt.nmappings, b->mqtt.nmappings);
        return a->mqtt.nmappings == b->mqtt.nmappings;
    case CFG__LISTENERS:
        snprintf(why, whylen, "%zu vs %zu listeners", a->mqtt.nlisteners, b->mqtt.nlisteners);
        return a->mqtt.nlisteners == b->mqtt.nlisteners;
    case CFG__OUTPUTS: /* the implied danube output, in both */
        snprintf(why, whylen, "%zu vs %zu outputs, first %s/%d vs %s/%d", a->noutputs, b->noutputs,
                 a->noutputs ? a->outputs[0].name : "-", a->noutputs ? (int)a->outputs[0].kind : -1,
                 b->noutputs ? b->outputs[0].name : "-", b->noutputs ? (int)b->outputs[0].kind : -1);
        return a->noutputs == 1 && b->noutputs == 1 && strcmp(a->outputs[0].name, b->outputs[0].name) == 0 &&
               a->outputs[0].kind == b->outputs[0].kind && a->outputs[0].implied && b->outputs[0].implied;
    default:
        snprintf(why, whylen, "type %d not compared", (int)k->type);
        return false;
    }
}

Test(defaults, equal_a_minimal_file_in_every_key_it_leaves_out)
{
    const cfg_t *d = cfg_defaults();
    cfg_t *c = load_minimal();
    size_t compared = 0;
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (set_by_minimal(k))
            continue;
        char why[512];
        cr_expect(same_field(k, d, c, why, sizeof why), "%s: cfg_defaults() and a minimal file differ: %s",
                  k->path, why);
        compared++;
    }
    cr_assert_gt(compared, 40, "only %zu keys compared: the walk is not covering the table", compared);
    cfg_free(c);
}

Test(defaults, differ_from_a_minimal_file_only_in_required_keys)
{
    /* the other direction: each key the file sets shows as a difference, so the
     * comparison above is not blind */
    const cfg_t *d = cfg_defaults();
    cfg_t *c = load_minimal();
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (!set_by_minimal(k))
            continue;
        char why[512];
        cr_expect(!same_field(k, d, c, why, sizeof why), "%s: set by the file, yet the defaults hold the file's %s",
                  k->path, why);
    }
    cfg_free(c);
}

Test(defaults, leave_keys_without_a_default_unset)
{
    const cfg_t *d = cfg_defaults();
    cr_assert_null(d->edge.edge_name);
    cr_assert_null(d->edge.cluster_url);
    cr_assert_null(d->mqtt.mappings);
    cr_assert_eq(d->mqtt.nmappings, 0);
    cr_assert_str_eq(d->edge.token, "");
    cr_assert_str_eq(d->edge.tls.ca_file, "");
    cr_assert_str_eq(d->edge.tls.cert_file, "");
    cr_assert_str_eq(d->edge.tls.key_file, "");
    cr_assert_str_eq(d->source, "<table defaults>");
}

Test(defaults, hold_the_table_text_as_typed_values)
{
    /* spot checks against the rows' text, one per type */
    const cfg_t *d = cfg_defaults();
    cr_assert_str_eq(d->http.listener, "127.0.0.1:9090");       /* address */
    cr_assert_eq(d->replicator.max_batch_bytes, 1u << 20);       /* bytes, "1MiB" */
    cr_assert_eq(d->edge.heartbeat_interval_ms, 30000);          /* milliseconds */
    cr_assert_eq(d->replicator.max_inflight_batches, 4);         /* integer */
    cr_assert_eq(d->wal.fsync, CFG_FSYNC_ALWAYS);                /* enum */
    cr_assert_eq(d->mqtt.dead_letter, false);                    /* bool */
    cr_assert_eq(d->wal.min_free_bytes.permille, 20);            /* bytes or %, "2%" */
    cr_assert_eq(d->wal.min_free_bytes.bytes, 0);
}

Test(defaults, ignore_environment_overrides)
{
    /* Criterion runs each test in its own process: this is the first call */
    setenv("TRIBUTARY_WAL_FSYNC", "never", 1);
    setenv("TRIBUTARY_HTTP_LISTENER", "127.0.0.1:1", 1);
    const cfg_t *d = cfg_defaults();
    cr_assert_eq(d->wal.fsync, CFG_FSYNC_ALWAYS);
    cr_assert_str_eq(d->http.listener, "127.0.0.1:9090");
}

static void *call_defaults(void *arg)
{
    (void)arg;
    return (void *)cfg_defaults();
}

Test(defaults, are_one_object_built_once_for_every_thread)
{
    pthread_t th[8];
    for (size_t i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, call_defaults, NULL), 0);
    const cfg_t *seen[8];
    for (size_t i = 0; i < 8; i++)
        pthread_join(th[i], (void **)&seen[i]);
    for (size_t i = 0; i < 8; i++)
        cr_assert_eq(seen[i], cfg_defaults(), "thread %zu got another object", i);
    cr_assert_str_eq(cfg_defaults()->http.listener, "127.0.0.1:9090");
}
