/*
 * Tests for gateway/metrics_catalog.c: the table registers, passes
 * promtool's parser and linter, is documented in docs/OPERATIONS.md, and
 * the accounting invariant is computed right.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"
#include "unit/common/helper_promtool.h"
#include "replicator/replicator.h"
#include "wal/wal.h"

static metrics_t *M;

static void setup(void)
{
    metrics_new(&M);
    cr_assert_eq(metrics_catalog_register(M, 4), 0);
}

static void teardown(void)
{
    metrics_free(M);
}

TestSuite(metrics_catalog, .init = setup, .fini = teardown);

#define F(id) metrics_fam(M, id)

Test(metrics_catalog, every_row_registers_under_its_id)
{
    for (size_t i = 0; i < METRICS__COUNT; i++) {
        cr_assert_eq(metrics_catalog[i].id, (metrics_id_t)i, "row %zu is out of order", i);
        cr_assert_not_null(F((metrics_id_t)i), "row %zu (%s) not registered", i, metrics_catalog[i].spec.name);
    }
}

Test(metrics_catalog, topics_are_bounded_by_the_capacity_given)
{
    for (int i = 0; i < 4; i++) {
        char t[16];
        snprintf(t, sizeof t, "/e1/t%d", i);
        cr_assert_eq(metrics_topic_add(M, t), i);
    }
    cr_assert_eq(metrics_topic_add(M, "/e1/one-too-many"), TB_EFULL);
}

Test(metrics_catalog, full_exposition_passes_promtool)
{
    metrics_topic_add(M, "/e1/telemetry");
    metrics_topic_add(M, "/e1/energy");
    metrics_add(F(METRICS_RECEIVED), 0, 0, 10);
    metrics_add(F(METRICS_REJECTED), 1, METRICS_REJECT_SCHEMA_INVALID, 2);
    metrics_set(F(METRICS_OLDEST_UNREPLICATED_AGE), 0, 0, 1234);
    metrics_observe(F(METRICS_WAL_FSYNC_SECONDS), 0, 0, 3000000);
    metrics_collect(M);
    metrics_catalog_derive(M);
    tb_buf_t b = TB_BUF_INIT;
    metrics_write_prometheus(M, &b);
    char out[4096];
    int rc = promtool_check(tb_buf_str(&b), out, sizeof out);
    cr_assert_eq(rc, 0, "promtool says:\n%s\n--- on:\n%s", out, tb_buf_str(&b));
    cr_assert_str_eq(out, "", "promtool lint: %s", out);
    tb_buf_free(&b);
}

Test(metrics_catalog, promtool_is_a_real_check)
{
    char out[1024];
    cr_assert_neq(promtool_check("# TYPE x counter\nx{a=\"unterminated} 1\n", out, sizeof out), 0);
}

Test(metrics_catalog, process_metrics_are_filled_by_collect)
{
    metrics_collect(M);
    cr_assert_gt(metrics_get(F(METRICS_PROC_RSS), 0, 0), 0);
    cr_assert_geq(metrics_get(F(METRICS_PROC_OPEN_FDS), 0, 0), 3);
    int64_t start_ms = metrics_get(F(METRICS_PROC_START_TIME), 0, 0);
    int64_t now_ms = (int64_t)tb_wall_ms();
    cr_assert(start_ms <= now_ms + 1000 && start_ms > now_ms - 3600 * 1000, "start %lld now %lld",
              (long long)start_ms, (long long)now_ms);
}

Test(metrics_catalog, retry_reasons_are_the_replicators_names)
{
    cr_assert_eq(metrics_nretry_reasons, REP_RETRY__COUNT);
    for (int k = 0; k < REP_RETRY__COUNT; k++)
        cr_assert_str_eq(metrics_retry_reasons[k], rep_retry_name((rep_retry_t)k));
}

Test(metrics_catalog, dead_letter_reasons_are_the_replicators_names)
{
    cr_assert_eq(METRICS_DL__COUNT, REP_DL__COUNT);
    for (int k = 0; k < REP_DL__COUNT; k++)
        cr_assert_str_eq(metrics_dl_reasons[k], rep_dl_reason_name((rep_dl_reason_t)k));
}

Test(metrics_catalog, wal_causes_are_the_logs_names)
{
    cr_assert_eq(METRICS_WAL_CAUSE__COUNT, WAL_CAUSE__COUNT);
    for (int k = 0; k < WAL_CAUSE__COUNT; k++)
        cr_assert_str_eq(metrics_wal_causes[k], wal_cause_name((wal_cause_t)k));
}

Test(metrics_catalog, connection_counters_by_reason_pass_promtool_with_a_reason_label)
{
    metrics_set(F(METRICS_MQTT_REFUSED), METRICS_REFUSE_CLIENT_ID, 0, 3);
    metrics_set(F(METRICS_MQTT_CLOSED), METRICS_CLOSE_MALFORMED, 0, 1);
    tb_buf_t b = TB_BUF_INIT;
    metrics_write_prometheus(M, &b);
    cr_assert_not_null(strstr(tb_buf_str(&b), "tributary_mqtt_connections_refused_total{reason=\"client_id_invalid\"} 3\n"));
    cr_assert_not_null(strstr(tb_buf_str(&b), "tributary_mqtt_connections_closed_total{reason=\"malformed\"} 1\n"));
    char out[4096];
    cr_assert_eq(promtool_check(tb_buf_str(&b), out, sizeof out), 0, "%s", out);
    tb_buf_free(&b);
}

/* ---- the invariant ------------------------------------------------------ */

static void account(size_t t, uint64_t received, uint64_t replicated, uint64_t queued, uint64_t dropped,
                    uint64_t schema_rejects, uint64_t size_rejects)
{
    metrics_add(F(METRICS_RECEIVED), t, 0, received);
    metrics_add(F(METRICS_REPLICATED), t, 0, replicated);
    metrics_set(F(METRICS_QUEUED), t, 0, (int64_t)queued);
    metrics_add(F(METRICS_DROPPED), t, 0, dropped);
    metrics_add(F(METRICS_REJECTED), t, METRICS_REJECT_SCHEMA_INVALID, schema_rejects);
    metrics_add(F(METRICS_REJECTED), t, METRICS_REJECT_PAYLOAD_TOO_LARGE, size_rejects);
}

Test(metrics_catalog, invariant_holds_when_every_message_is_accounted_for)
{
    metrics_topic_add(M, "/e1/a");
    account(0, 100, 60, 25, 5, 7, 3);
    cr_assert(metrics_catalog_derive(M));
    metrics_balance_t b;
    cr_assert(metrics_topic_balance(M, 0, &b));
    cr_assert(b.ok);
    cr_assert_eq(b.rejected, 10, "rejections of every reason count");
    cr_assert_eq(metrics_get(F(METRICS_TOPIC_INVARIANT_OK), 0, 0), 1);
    cr_assert_eq(metrics_get(F(METRICS_INVARIANT_OK), 0, 0), 1);
}

Test(metrics_catalog, invariant_breaks_for_the_topic_that_lost_a_message_and_overall)
{
    metrics_topic_add(M, "/e1/a");
    metrics_topic_add(M, "/e1/b");
    account(0, 100, 60, 25, 5, 7, 3);
    account(1, 100, 60, 25, 5, 7, 2); /* one message in no bucket */
    cr_assert_not(metrics_catalog_derive(M));
    cr_assert_eq(metrics_get(F(METRICS_TOPIC_INVARIANT_OK), 0, 0), 1);
    cr_assert_eq(metrics_get(F(METRICS_TOPIC_INVARIANT_OK), 1, 0), 0);
    cr_assert_eq(metrics_get(F(METRICS_INVARIANT_OK), 0, 0), 0);
}

Test(metrics_catalog, drops_of_every_reason_are_the_invariants_dropped_term)
{
    metrics_topic_add(M, "/e1/a");
    account(0, 100, 60, 25, 5, 7, 0); /* 5 dropped by the bound */
    metrics_add(F(METRICS_DROPPED), 0, METRICS_DROP_AGE, 2);
    metrics_add(F(METRICS_DROPPED), 0, METRICS_DROP_SPILL, 1);
    metrics_balance_t b;
    cr_assert(metrics_topic_balance(M, 0, &b));
    cr_assert_eq(b.dropped, 8, "bound + age + spill");
    cr_assert(b.ok, "received 100 = 60 + 25 + 8 + 7");
    tb_buf_t buf = TB_BUF_INIT;
    metrics_write_prometheus(M, &buf);
    const char *s = tb_buf_str(&buf);
    cr_assert_not_null(strstr(s, "tributary_messages_dropped_total{topic=\"/e1/a\",reason=\"bound\"} 5\n"), "%s", s);
    cr_assert_not_null(strstr(s, "tributary_messages_dropped_total{topic=\"/e1/a\",reason=\"age\"} 2\n"), "%s", s);
    cr_assert_not_null(strstr(s, "tributary_messages_dropped_total{topic=\"/e1/a\",reason=\"spill\"} 1\n"), "%s", s);
    char out[4096];
    cr_assert_eq(promtool_check(s, out, sizeof out), 0, "%s", out);
    tb_buf_free(&buf);
}

Test(metrics_catalog, invariant_breaks_when_more_is_accounted_than_received)
{
    metrics_topic_add(M, "/e1/a");
    account(0, 10, 10, 1, 0, 0, 0); /* counted twice */
    cr_assert_not(metrics_catalog_derive(M));
}

/* ---- the docs name every metric and field ------------------------------- */

static char *read_doc(void)
{
    const char *src = getenv("TRIB_SOURCE_DIR");
    cr_assert_not_null(src, "TRIB_SOURCE_DIR is not set (run through ctest)");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/OPERATIONS.md", src);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* True when `word` appears in doc between backquotes: `word` */
static bool documented(const char *doc, const char *word)
{
    char needle[256];
    snprintf(needle, sizeof needle, "`%s`", word);
    return strstr(doc, needle) != NULL;
}

Test(metrics_catalog, operations_doc_names_every_metric)
{
    const char *doc = read_doc();
    for (size_t i = 0; i < METRICS__COUNT; i++)
        cr_expect(documented(doc, metrics_catalog[i].spec.name), "docs/OPERATIONS.md lacks `%s`",
                  metrics_catalog[i].spec.name);
}

Test(metrics_catalog, operations_doc_names_every_stats_field)
{
    const char *doc = read_doc();
    for (size_t i = 0; i < METRICS__COUNT; i++)
        if (metrics_catalog[i].json)
            cr_expect(documented(doc, metrics_catalog[i].json), "docs/OPERATIONS.md lacks the /stats field `%s`",
                      metrics_catalog[i].json);
    for (const char *const *f = http_stats_fields; *f; f++)
        cr_expect(documented(doc, *f), "docs/OPERATIONS.md lacks the /stats field `%s`", *f);
}

Test(metrics_catalog, operations_doc_names_every_label_value)
{
    const char *doc = read_doc();
    for (size_t r = 0; r < METRICS_REJECT__COUNT; r++)
        cr_expect(documented(doc, metrics_reject_reasons[r]), "docs/OPERATIONS.md lacks reason `%s`",
                  metrics_reject_reasons[r]);
    for (size_t c = 0; c < METRICS_WAL_CAUSE__COUNT; c++)
        cr_expect(documented(doc, metrics_wal_causes[c]), "docs/OPERATIONS.md lacks wal cause `%s`",
                  metrics_wal_causes[c]);
    for (size_t r = 0; r < METRICS_DROP__COUNT; r++)
        cr_expect(documented(doc, metrics_drop_reasons[r]), "docs/OPERATIONS.md lacks drop reason `%s`",
                  metrics_drop_reasons[r]);
    for (size_t s = 0; s < HTTP_TOPIC__COUNT; s++)
        cr_expect(documented(doc, http_topic_states[s]), "docs/OPERATIONS.md lacks topic state `%s`",
                  http_topic_states[s]);
    for (size_t s = 0; s < HTTP_CLUSTER__COUNT; s++)
        cr_expect(documented(doc, http_cluster_states[s]), "docs/OPERATIONS.md lacks cluster state `%s`",
                  http_cluster_states[s]);
}
