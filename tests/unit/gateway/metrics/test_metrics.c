/*
 * Tests for gateway/metrics.c, metrics_prom.c and metrics_json.c: the
 * registry's rules (bounded label sets, registration checks), updates, the
 * exact Prometheus exposition, collectors and the cross-thread histogram.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "base/base.h"
#include "gateway/metrics/metrics.h"

static metrics_t *M;

static void setup(void)
{
    metrics_new(&M);
}

static void teardown(void)
{
    metrics_free(M);
}

TestSuite(metrics, .init = setup, .fini = teardown);

static const char *prom(void)
{
    static tb_buf_t b = TB_BUF_INIT;
    tb_buf_reset(&b);
    metrics_write_prometheus(M, &b);
    return tb_buf_str(&b);
}

static metrics_family_t *reg(const char *name, metrics_type_t type, metrics_labels_t *l1, metrics_labels_t *l2)
{
    metrics_spec_t s = { name, type, "Help.", 1, NULL, 0 };
    metrics_family_t *f;
    cr_assert_eq(metrics_register(M, &s, l1, l2, &f), 0, "registering %s", name);
    return f;
}

/* ---- exposition --------------------------------------------------------- */

Test(metrics, counter_exposition_is_exact)
{
    static const char *const vals[] = { "/e1/a", "/e1/b" };
    metrics_labels_t *t;
    metrics_labels_fixed(M, "topic", vals, 2, &t);
    metrics_family_t *f = reg("x_received_total", METRICS_COUNTER, t, NULL);
    metrics_add(f, 0, 0, 3);
    metrics_add(f, 1, 0, 1);
    metrics_add(f, 1, 0, 1);
    cr_assert_str_eq(prom(), "# HELP x_received_total Help.\n"
                             "# TYPE x_received_total counter\n"
                             "x_received_total{topic=\"/e1/a\"} 3\n"
                             "x_received_total{topic=\"/e1/b\"} 2\n");
}

Test(metrics, gauge_without_labels_and_negative_values)
{
    metrics_family_t *f = reg("x_level", METRICS_GAUGE, NULL, NULL);
    metrics_set(f, 0, 0, 5);
    metrics_sub(f, 0, 0, 7);
    cr_assert_str_eq(prom(), "# HELP x_level Help.\n# TYPE x_level gauge\nx_level -2\n");
}

Test(metrics, divisor_turns_raw_units_into_base_units)
{
    metrics_spec_t s = { "x_age_seconds", METRICS_GAUGE, "Age.", 1000, NULL, 0 };
    metrics_family_t *f;
    metrics_register(M, &s, NULL, NULL, &f);
    metrics_set(f, 0, 0, 1250); /* ms */
    cr_assert_not_null(strstr(prom(), "\nx_age_seconds 1.25\n"));
    metrics_set(f, 0, 0, 3000);
    cr_assert_not_null(strstr(prom(), "\nx_age_seconds 3\n"));
}

Test(metrics, two_labels_expose_every_combination_in_order)
{
    static const char *const topics[] = { "/e1/a", "/e1/b" }, *const reasons[] = { "schema", "size" };
    metrics_labels_t *t, *r;
    metrics_labels_fixed(M, "topic", topics, 2, &t);
    metrics_labels_fixed(M, "reason", reasons, 2, &r);
    metrics_family_t *f = reg("x_rejected_total", METRICS_COUNTER, t, r);
    metrics_add(f, 1, 0, 4);
    cr_assert_str_eq(prom(), "# HELP x_rejected_total Help.\n"
                             "# TYPE x_rejected_total counter\n"
                             "x_rejected_total{topic=\"/e1/a\",reason=\"schema\"} 0\n"
                             "x_rejected_total{topic=\"/e1/a\",reason=\"size\"} 0\n"
                             "x_rejected_total{topic=\"/e1/b\",reason=\"schema\"} 4\n"
                             "x_rejected_total{topic=\"/e1/b\",reason=\"size\"} 0\n");
}

Test(metrics, histogram_exposition_is_cumulative_with_inf_sum_and_count)
{
    static const uint64_t bounds[] = { 1000000, 10000000, 100000000 }; /* ns: 1 ms, 10 ms, 100 ms */
    static const char *const vals[] = { "/e1/a" };
    metrics_labels_t *t;
    metrics_labels_fixed(M, "topic", vals, 1, &t);
    metrics_spec_t s = { "x_sync_seconds", METRICS_HISTOGRAM, "Sync time.", 1000000000, bounds, 3 };
    metrics_family_t *f;
    cr_assert_eq(metrics_register(M, &s, t, NULL, &f), 0);
    metrics_observe(f, 0, 0, 500000);     /* 0.5 ms */
    metrics_observe(f, 0, 0, 1000000);    /* exactly 1 ms: le is inclusive */
    metrics_observe(f, 0, 0, 50000000);   /* 50 ms */
    metrics_observe(f, 0, 0, 2000000000); /* 2 s */
    cr_assert_str_eq(prom(), "# HELP x_sync_seconds Sync time.\n"
                             "# TYPE x_sync_seconds histogram\n"
                             "x_sync_seconds_bucket{topic=\"/e1/a\",le=\"0.001\"} 2\n"
                             "x_sync_seconds_bucket{topic=\"/e1/a\",le=\"0.01\"} 2\n"
                             "x_sync_seconds_bucket{topic=\"/e1/a\",le=\"0.1\"} 3\n"
                             "x_sync_seconds_bucket{topic=\"/e1/a\",le=\"+Inf\"} 4\n"
                             "x_sync_seconds_sum{topic=\"/e1/a\"} 2.0515\n"
                             "x_sync_seconds_count{topic=\"/e1/a\"} 4\n");
}

Test(metrics, label_values_escape_backslash_quote_and_newline)
{
    metrics_labels_t *l;
    metrics_labels_bounded(M, "path", 1, &l);
    cr_assert_eq(metrics_labels_add(l, "a\\b\"c\nd"), 0);
    metrics_family_t *f = reg("x_hits_total", METRICS_COUNTER, l, NULL);
    metrics_add(f, 0, 0, 1);
    cr_assert_not_null(strstr(prom(), "\nx_hits_total{path=\"a\\\\b\\\"c\\nd\"} 1\n"), "%s", prom());
}

Test(metrics, help_escapes_backslash_and_newline_but_not_quotes)
{
    metrics_spec_t s = { "x_g", METRICS_GAUGE, "a \"q\" \\ b\nc", 1, NULL, 0 };
    metrics_register(M, &s, NULL, NULL, NULL);
    cr_assert_not_null(strstr(prom(), "# HELP x_g a \"q\" \\\\ b\\nc\n# TYPE"), "%s", prom());
}

Test(metrics, family_whose_label_set_is_empty_is_left_out)
{
    metrics_labels_t *l;
    metrics_labels_bounded(M, "topic", 4, &l);
    reg("x_empty_total", METRICS_COUNTER, l, NULL);
    cr_assert_str_eq(prom(), "");
    metrics_labels_add(l, "/e1/a");
    cr_assert_not_null(strstr(prom(), "x_empty_total{topic=\"/e1/a\"} 0\n"));
}

Test(metrics, format_value_is_exact_for_integers_and_shortest_for_fractions)
{
    char b[64];
    metrics_format_value(b, sizeof b, 18446744073709551615ull / 2, 1);
    cr_assert_str_eq(b, "9223372036854775807");
    metrics_format_value(b, sizeof b, 100000, 1000000000);
    cr_assert_str_eq(b, "0.0001");
    metrics_format_value(b, sizeof b, 2500000000, 1000000000);
    cr_assert_str_eq(b, "2.5");
    metrics_format_value(b, sizeof b, 1, 3);
    cr_assert_str_eq(b, "0.3333333333333333");
}

/* ---- bounded label sets ------------------------------------------------- */

Test(metrics, fixed_label_set_refuses_new_values)
{
    static const char *const vals[] = { "a", "b" };
    metrics_labels_t *l;
    metrics_labels_fixed(M, "reason", vals, 2, &l);
    cr_assert_eq(metrics_labels_add(l, "c"), TB_EINVALID);
    cr_assert_eq(metrics_labels_count(l), 2);
    cr_assert_eq(metrics_labels_find(l, "b"), 1);
    cr_assert_eq(metrics_labels_find(l, "c"), TB_EINVALID);
}

Test(metrics, bounded_label_set_refuses_values_past_its_capacity)
{
    metrics_labels_t *l;
    metrics_labels_bounded(M, "topic", 2, &l);
    cr_assert_eq(metrics_labels_add(l, "x"), 0);
    cr_assert_eq(metrics_labels_add(l, "y"), 1);
    cr_assert_eq(metrics_labels_add(l, "x"), 0, "an existing value keeps its index");
    cr_assert_eq(metrics_labels_add(l, "z"), TB_EFULL);
    cr_assert_eq(metrics_labels_count(l), 2);
}

Test(metrics, label_values_must_be_nonempty_utf8)
{
    metrics_labels_t *l;
    metrics_labels_bounded(M, "topic", 4, &l);
    cr_assert_eq(metrics_labels_add(l, ""), TB_EINVALID);
    cr_assert_eq(metrics_labels_add(l, "bad\xff"), TB_EINVALID);
    static const char *const dup[] = { "a", "a" };
    metrics_labels_t *d;
    cr_assert_eq(metrics_labels_fixed(M, "r", dup, 2, &d), TB_EINVALID);
}

Test(metrics, update_past_the_label_count_is_ignored)
{
    metrics_labels_t *l;
    metrics_labels_bounded(M, "topic", 3, &l);
    metrics_labels_add(l, "a");
    metrics_family_t *f = reg("x_total", METRICS_COUNTER, l, NULL);
    metrics_add(f, 1, 0, 5); /* capacity 3, but only one value yet */
    metrics_add(f, 0, 7, 5); /* no second label */
    metrics_labels_add(l, "b");
    cr_assert_eq(metrics_get(f, 1, 0), 0);
    cr_assert_eq(metrics_get(f, 0, 0), 0);
}

/* ---- registration ------------------------------------------------------- */

Test(metrics, registration_enforces_names_types_and_labels)
{
    static const uint64_t unsorted[] = { 5, 3 }, sorted[] = { 1, 2 };
    static const char *const le[] = { "x" };
    metrics_labels_t *lel, *a, *b;
    metrics_labels_fixed(M, "le", le, 1, &lel);
    metrics_labels_fixed(M, "a", le, 1, &a);
    metrics_labels_fixed(M, "a", le, 1, &b);
    struct {
        metrics_spec_t s;
        metrics_labels_t *l1, *l2;
    } bad[] = {
        { { "x_count", METRICS_COUNTER, "h", 1, NULL, 0 }, NULL, NULL },       /* counter without _total */
        { { "x_total", METRICS_GAUGE, "h", 1, NULL, 0 }, NULL, NULL },         /* gauge with _total */
        { { "9x", METRICS_GAUGE, "h", 1, NULL, 0 }, NULL, NULL },              /* bad name */
        { { "x-y", METRICS_GAUGE, "h", 1, NULL, 0 }, NULL, NULL },
        { { "x", METRICS_GAUGE, NULL, 1, NULL, 0 }, NULL, NULL },              /* no help */
        { { "x", METRICS_GAUGE, "h", 1, NULL, 0 }, NULL, a },                  /* l2 without l1 */
        { { "x", METRICS_GAUGE, "h", 1, NULL, 0 }, a, b },                     /* same label name twice */
        { { "x", METRICS_HISTOGRAM, "h", 1, unsorted, 2 }, NULL, NULL },       /* bounds not ascending */
        { { "x", METRICS_HISTOGRAM, "h", 1, NULL, 0 }, NULL, NULL },           /* no bounds */
        { { "x", METRICS_HISTOGRAM, "h", 1, sorted, 2 }, lel, NULL },          /* "le" label */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(metrics_register(M, &bad[i].s, bad[i].l1, bad[i].l2, NULL), TB_EINVALID, "case %zu", i);
    cr_assert_eq(metrics_nfamilies(M), 0);
}

Test(metrics, duplicate_names_are_refused)
{
    reg("x_total", METRICS_COUNTER, NULL, NULL);
    metrics_spec_t s = { "x_total", METRICS_COUNTER, "again", 1, NULL, 0 };
    cr_assert_eq(metrics_register(M, &s, NULL, NULL, NULL), TB_EINVALID);
}

Test(metrics, invalid_label_names_are_refused)
{
    metrics_labels_t *l;
    cr_assert_eq(metrics_labels_bounded(M, "__reserved", 1, &l), TB_EINVALID);
    cr_assert_eq(metrics_labels_bounded(M, "a:b", 1, &l), TB_EINVALID);
    cr_assert_eq(metrics_labels_bounded(M, "ok", 0, &l), TB_EINVALID);
}

/* ---- collectors and other threads --------------------------------------- */

static _Atomic uint64_t other_thread_total;
static int order[4], norder;

static void copy_total(void *arg, metrics_t *m)
{
    order[norder++] = 1;
    metrics_set(arg, 0, 0, (int64_t)atomic_load(&other_thread_total));
    (void)m;
}

static void second(void *arg, metrics_t *m)
{
    (void)arg;
    (void)m;
    order[norder++] = 2;
}

Test(metrics, collectors_copy_other_threads_values_at_collect_in_order)
{
    metrics_family_t *f = reg("x_replicated_total", METRICS_COUNTER, NULL, NULL);
    metrics_add_collector(M, copy_total, f);
    metrics_add_collector(M, second, NULL);
    atomic_store(&other_thread_total, 42);
    cr_assert_eq(metrics_get(f, 0, 0), 0, "nothing is copied before collect");
    metrics_collect(M);
    cr_assert_eq(metrics_get(f, 0, 0), 42);
    cr_assert_eq(norder, 2);
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 2);
}

Test(metrics, removed_collector_no_longer_runs)
{
    metrics_add_collector(M, second, NULL);
    metrics_remove_collector(M, second, NULL);
    metrics_collect(M);
    cr_assert_eq(norder, 0);
}

static const uint64_t hb[] = { 10, 100, 1000 };
static metrics_ahist_t H;

static void *observer(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < 100000; i++)
        metrics_ahist_observe(&H, i % 2000);
    return NULL;
}

Test(metrics, atomic_histogram_observed_from_two_threads_loads_every_observation)
{
    metrics_spec_t s = { "x_h", METRICS_HISTOGRAM, "h", 1, hb, 3 };
    metrics_family_t *f;
    metrics_register(M, &s, NULL, NULL, &f);
    metrics_ahist_init(&H, hb, 3);
    pthread_t a, b;
    pthread_create(&a, NULL, observer, NULL);
    pthread_create(&b, NULL, observer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_assert_eq(metrics_hist_load(f, 0, 0, &H), 0);
    metrics_hist_view_t v;
    metrics_hist_get(f, 0, 0, &v);
    cr_assert_eq(v.count, 200000);
    cr_assert_eq(v.counts[0], 2 * 50 * 11);   /* 0..10 in each 2000-cycle */
    cr_assert_eq(v.counts[3], 2 * 50 * 999);  /* 1001..1999 */
    cr_assert_eq(v.sum, 2 * 50 * (1999ull * 2000 / 2));
}

Test(metrics, histogram_load_refuses_other_bounds)
{
    static const uint64_t other[] = { 10, 100, 999 };
    metrics_spec_t s = { "x_h", METRICS_HISTOGRAM, "h", 1, hb, 3 };
    metrics_family_t *f;
    metrics_register(M, &s, NULL, NULL, &f);
    metrics_ahist_t h;
    metrics_ahist_init(&h, other, 3);
    cr_assert_eq(metrics_hist_load(f, 0, 0, &h), TB_EINVALID);
}

/* ---- JSON --------------------------------------------------------------- */

Test(metrics, json_values_are_integers_or_reals_by_unit)
{
    metrics_family_t *n = reg("x_n", METRICS_GAUGE, NULL, NULL);
    metrics_spec_t s = { "x_s", METRICS_GAUGE, "h", 1000, NULL, 0 };
    metrics_family_t *sec;
    metrics_register(M, &s, NULL, NULL, &sec);
    metrics_set(n, 0, 0, 7);
    metrics_set(sec, 0, 0, 1500);
    json_t *a = metrics_json_value(n, 0, 0), *b = metrics_json_value(sec, 0, 0);
    cr_assert(json_is_integer(a) && json_integer_value(a) == 7);
    cr_assert(json_is_real(b) && json_real_value(b) == 1.5);
    json_decref(a);
    json_decref(b);
    cr_assert_null(metrics_json_value(n, 1, 0));
}

Test(metrics, json_histogram_has_count_sum_and_cumulative_buckets)
{
    metrics_spec_t s = { "x_h", METRICS_HISTOGRAM, "h", 1, hb, 3 };
    metrics_family_t *f;
    metrics_register(M, &s, NULL, NULL, &f);
    metrics_observe(f, 0, 0, 5);
    metrics_observe(f, 0, 0, 50);
    json_t *v = metrics_json_value(f, 0, 0);
    char *s2 = json_dumps(v, JSON_COMPACT);
    cr_assert_str_eq(s2, "{\"count\":2,\"sum\":55,\"buckets\":{\"10\":1,\"100\":2,\"1000\":2,\"+Inf\":2}}");
    free(s2);
    json_decref(v);
}

/* The registry's limits (raised for issue 19 and the branches beside it:
 * docs/design/RELOAD.md 2.9, 8.4) hold exactly: the last family, label set
 * and series fit, one more is refused. The limits allocate nothing: a
 * family's series are its label sets' capacities multiplied. */
Test(metrics, limits_are_128_families_24_label_sets_131072_series)
{
    cr_assert_eq(METRICS_MAX_FAMILIES, 128);
    cr_assert_eq(METRICS_MAX_LABELSETS, 24);
    cr_assert_eq(METRICS_MAX_SERIES, 131072);
    static char names[METRICS_MAX_FAMILIES + 1][32];
    for (size_t i = 0; i < METRICS_MAX_FAMILIES; i++) {
        snprintf(names[i], sizeof names[i], "fam_%zu", i);
        reg(names[i], METRICS_GAUGE, NULL, NULL);
    }
    metrics_spec_t s = { "one_too_many", METRICS_GAUGE, "Help.", 1, NULL, 0 };
    cr_assert_eq(metrics_register(M, &s, NULL, NULL, NULL), TB_EFULL);

    metrics_labels_t *l[METRICS_MAX_LABELSETS + 1];
    for (size_t i = 0; i < METRICS_MAX_LABELSETS; i++) {
        char name[16];
        snprintf(name, sizeof name, "l%zu", i);
        cr_assert_eq(metrics_labels_bounded(M, name, i == 0 ? 512 : i == 1 ? 256 : i == 2 ? 257 : 1, &l[i]), 0);
    }
    cr_assert_eq(metrics_labels_bounded(M, "extra", 1, &l[METRICS_MAX_LABELSETS]), TB_EFULL);
    cr_assert_eq(metrics_labels_bounded(M, "huge", METRICS_MAX_SERIES + 1, &l[METRICS_MAX_LABELSETS]),
                 TB_EINVALID);
    metrics_t *m2;
    metrics_new(&m2);
    metrics_labels_t *a, *b, *c;
    cr_assert_eq(metrics_labels_bounded(m2, "topic", 512, &a), 0);
    cr_assert_eq(metrics_labels_bounded(m2, "reason", 256, &b), 0);
    cr_assert_eq(metrics_labels_bounded(m2, "other", 257, &c), 0);
    metrics_spec_t full = { "full_total", METRICS_COUNTER, "Help.", 1, NULL, 0 };
    metrics_family_t *f;
    cr_assert_eq(metrics_register(m2, &full, a, b, &f), 0, "512 x 256 = 131072 series fit");
    metrics_spec_t over = { "over_total", METRICS_COUNTER, "Help.", 1, NULL, 0 };
    cr_assert_eq(metrics_register(m2, &over, a, c, NULL), TB_EINVALID, "512 x 257 does not");
    metrics_free(m2);
}
