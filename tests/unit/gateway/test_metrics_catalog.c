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

static gw_metrics_t *M;

static void setup(void)
{
    gw_metrics_new(&M);
    cr_assert_eq(gw_metrics_catalog_register(M, 4), 0);
}

static void teardown(void)
{
    gw_metrics_free(M);
}

TestSuite(metrics_catalog, .init = setup, .fini = teardown);

#define F(id) gw_metrics_fam(M, id)

Test(metrics_catalog, every_row_registers_under_its_id)
{
    for (size_t i = 0; i < GW_M__COUNT; i++) {
        cr_assert_eq(gw_metrics_catalog[i].id, (gw_metric_id_t)i, "row %zu is out of order", i);
        cr_assert_not_null(F((gw_metric_id_t)i), "row %zu (%s) not registered", i, gw_metrics_catalog[i].spec.name);
    }
}

Test(metrics_catalog, topics_are_bounded_by_the_capacity_given)
{
    for (int i = 0; i < 4; i++) {
        char t[16];
        snprintf(t, sizeof t, "/e1/t%d", i);
        cr_assert_eq(gw_metrics_topic_add(M, t), i);
    }
    cr_assert_eq(gw_metrics_topic_add(M, "/e1/one-too-many"), TB_EFULL);
}

Test(metrics_catalog, full_exposition_passes_promtool)
{
    gw_metrics_topic_add(M, "/e1/telemetry");
    gw_metrics_topic_add(M, "/e1/energy");
    gw_metrics_add(F(GW_M_RECEIVED), 0, 0, 10);
    gw_metrics_add(F(GW_M_REJECTED), 1, GW_REJECT_SCHEMA_INVALID, 2);
    gw_metrics_set(F(GW_M_OLDEST_UNREPLICATED_AGE), 0, 0, 1234);
    gw_metrics_observe(F(GW_M_WAL_FSYNC_SECONDS), 0, 0, 3000000);
    gw_metrics_collect(M);
    gw_metrics_catalog_derive(M);
    tb_buf_t b = TB_BUF_INIT;
    gw_metrics_write_prometheus(M, &b);
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
    gw_metrics_collect(M);
    cr_assert_gt(gw_metrics_get(F(GW_M_PROC_RSS), 0, 0), 0);
    cr_assert_geq(gw_metrics_get(F(GW_M_PROC_OPEN_FDS), 0, 0), 3);
    int64_t start_ms = gw_metrics_get(F(GW_M_PROC_START_TIME), 0, 0);
    int64_t now_ms = (int64_t)tb_wall_ms();
    cr_assert(start_ms <= now_ms + 1000 && start_ms > now_ms - 3600 * 1000, "start %lld now %lld",
              (long long)start_ms, (long long)now_ms);
}

Test(metrics_catalog, retry_reasons_are_the_replicators_names)
{
    cr_assert_eq(gw_metrics_nretry_reasons, REP_RETRY__COUNT);
    for (int k = 0; k < REP_RETRY__COUNT; k++)
        cr_assert_str_eq(gw_metrics_retry_reasons[k], rep_retry_name((rep_retry_t)k));
}

Test(metrics_catalog, connection_counters_by_reason_pass_promtool_with_a_reason_label)
{
    gw_metrics_set(F(GW_M_MQTT_REFUSED), GW_MQTT_REFUSE_CLIENT_ID, 0, 3);
    gw_metrics_set(F(GW_M_MQTT_CLOSED), GW_MQTT_CLOSE_MALFORMED, 0, 1);
    tb_buf_t b = TB_BUF_INIT;
    gw_metrics_write_prometheus(M, &b);
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
    gw_metrics_add(F(GW_M_RECEIVED), t, 0, received);
    gw_metrics_add(F(GW_M_REPLICATED), t, 0, replicated);
    gw_metrics_set(F(GW_M_QUEUED), t, 0, (int64_t)queued);
    gw_metrics_add(F(GW_M_DROPPED), t, 0, dropped);
    gw_metrics_add(F(GW_M_REJECTED), t, GW_REJECT_SCHEMA_INVALID, schema_rejects);
    gw_metrics_add(F(GW_M_REJECTED), t, GW_REJECT_PAYLOAD_TOO_LARGE, size_rejects);
}

Test(metrics_catalog, invariant_holds_when_every_message_is_accounted_for)
{
    gw_metrics_topic_add(M, "/e1/a");
    account(0, 100, 60, 25, 5, 7, 3);
    cr_assert(gw_metrics_catalog_derive(M));
    gw_metrics_balance_t b;
    cr_assert(gw_metrics_topic_balance(M, 0, &b));
    cr_assert(b.ok);
    cr_assert_eq(b.rejected, 10, "rejections of every reason count");
    cr_assert_eq(gw_metrics_get(F(GW_M_TOPIC_INVARIANT_OK), 0, 0), 1);
    cr_assert_eq(gw_metrics_get(F(GW_M_INVARIANT_OK), 0, 0), 1);
}

Test(metrics_catalog, invariant_breaks_for_the_topic_that_lost_a_message_and_overall)
{
    gw_metrics_topic_add(M, "/e1/a");
    gw_metrics_topic_add(M, "/e1/b");
    account(0, 100, 60, 25, 5, 7, 3);
    account(1, 100, 60, 25, 5, 7, 2); /* one message in no bucket */
    cr_assert_not(gw_metrics_catalog_derive(M));
    cr_assert_eq(gw_metrics_get(F(GW_M_TOPIC_INVARIANT_OK), 0, 0), 1);
    cr_assert_eq(gw_metrics_get(F(GW_M_TOPIC_INVARIANT_OK), 1, 0), 0);
    cr_assert_eq(gw_metrics_get(F(GW_M_INVARIANT_OK), 0, 0), 0);
}

Test(metrics_catalog, invariant_breaks_when_more_is_accounted_than_received)
{
    gw_metrics_topic_add(M, "/e1/a");
    account(0, 10, 10, 1, 0, 0, 0); /* counted twice */
    cr_assert_not(gw_metrics_catalog_derive(M));
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
    for (size_t i = 0; i < GW_M__COUNT; i++)
        cr_expect(documented(doc, gw_metrics_catalog[i].spec.name), "docs/OPERATIONS.md lacks `%s`",
                  gw_metrics_catalog[i].spec.name);
}

Test(metrics_catalog, operations_doc_names_every_stats_field)
{
    const char *doc = read_doc();
    for (size_t i = 0; i < GW_M__COUNT; i++)
        if (gw_metrics_catalog[i].json)
            cr_expect(documented(doc, gw_metrics_catalog[i].json), "docs/OPERATIONS.md lacks the /stats field `%s`",
                      gw_metrics_catalog[i].json);
    for (const char *const *f = gw_http_stats_fields; *f; f++)
        cr_expect(documented(doc, *f), "docs/OPERATIONS.md lacks the /stats field `%s`", *f);
}

Test(metrics_catalog, operations_doc_names_every_label_value)
{
    const char *doc = read_doc();
    for (size_t r = 0; r < GW_REJECT__COUNT; r++)
        cr_expect(documented(doc, gw_metrics_reject_reasons[r]), "docs/OPERATIONS.md lacks reason `%s`",
                  gw_metrics_reject_reasons[r]);
    for (size_t s = 0; s < GW_TOPIC__COUNT; s++)
        cr_expect(documented(doc, gw_http_topic_states[s]), "docs/OPERATIONS.md lacks topic state `%s`",
                  gw_http_topic_states[s]);
    for (size_t s = 0; s < GW_CLUSTER__COUNT; s++)
        cr_expect(documented(doc, gw_http_cluster_states[s]), "docs/OPERATIONS.md lacks cluster state `%s`",
                  gw_http_cluster_states[s]);
}
