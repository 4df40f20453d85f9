/*
 * Tests for gateway/http_service.c, http_endpoints.c and http_stats.c:
 * /healthz, /readyz, /metrics and /stats served by the real service over a
 * fake provider (the lead's real state plugs in the same way).
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "helper_http.h"
#include "unit/common/helper_promtool.h"

/* ---- the fake provider -------------------------------------------------- */

typedef struct fake {
    http_readiness_t r;
    http_cluster_state_t cluster;
    http_topic_state_t topic[4];
    const char *failure; /* NULL: healthy */
} fake_t;

static void fake_readiness(void *arg, http_readiness_t *out) { *out = ((fake_t *)arg)->r; }
static http_cluster_state_t fake_cluster(void *arg) { return ((fake_t *)arg)->cluster; }
static http_topic_state_t fake_topic(void *arg, size_t t) { return ((fake_t *)arg)->topic[t]; }
static bool fake_listener_tls(void *arg, size_t l) { (void)arg; return l == 1; }
static size_t fake_talkers(void *arg, http_talker_t *out, size_t n, double *window)
{
    (void)arg;
    static const http_talker_t top[] = { { "plc-7", 120.5 }, { "meter-2", 3 } };
    size_t k = n < 2 ? n : 2;
    memcpy(out, top, k * sizeof *out);
    *window = 5.0;
    return k;
}
static bool fake_healthy(void *arg, char *why, size_t n)
{
    fake_t *f = arg;
    if (f->failure)
        snprintf(why, n, "%s", f->failure);
    return f->failure == NULL;
}

static th_t T;
static fake_t FK;
static metrics_t *M;

static int renders;

static void count_renders(void *arg, metrics_t *m)
{
    (void)arg, (void)m;
    renders++; /* runs on the loop thread; read there too (renders_are) */
}

static void start_tuned(void (*tune)(http_service_opts_t *o))
{
    FK = (fake_t){ .r = { .bootstrap_done = true, .mqtt_listening = true, .wal_writable = true }, .cluster = HTTP_CLUSTER_CONNECTED,
                   .topic = { HTTP_TOPIC_REPLICATING, HTTP_TOPIC_STALLED } };
    metrics_new(&M);
    cr_assert_eq(metrics_catalog_register(M, 4), 0);
    metrics_topic_add(M, "/e1/telemetry");
    metrics_topic_add(M, "/e1/energy");
    metrics_listener_add(M, "0.0.0.0:1883");
    metrics_listener_add(M, "0.0.0.0:8883");
    metrics_add_collector(M, count_renders, NULL);
    http_provider_t p = { .arg = &FK, .readiness = fake_readiness, .healthy = fake_healthy, .cluster_state = fake_cluster,
                          .topic_state = fake_topic, .listener_tls = fake_listener_tls, .top_talkers = fake_talkers };
    http_service_opts_t o;
    http_service_opts_default(&o);
    o.edge_name = "e1";
    if (tune)
        tune(&o);
    th_start(&T);
    th_service(&T, &o, M, &p);
}

static void setup(void) { start_tuned(NULL); }
static void teardown(void)
{
    th_stop(&T);
    metrics_free(M);
}

TestSuite(http_endpoints, .init = setup, .fini = teardown, .timeout = 30);

/* Changes the fake's state on the loop thread, where the provider is read. */
typedef void (*mutate_fn)(fake_t *f);
static void mutate_on_loop(th_t *t, void *arg)
{
    (void)t;
    ((mutate_fn)arg)(&FK);
}
#define MUTATE(fn) th_call(&T, mutate_on_loop, (void *)(fn))

/* ---- /healthz ----------------------------------------------------------- */

Test(http_endpoints, healthz_is_ok_while_the_loop_ticks)
{
    char body[256];
    cr_assert_eq(cl_get(T.port, "/healthz", body, sizeof body), 200);
    cr_assert_str_eq(body, "ok\n");
}

static void fail_fsync(fake_t *f) { f->failure = "fsync failed on /e1/telemetry"; }

Test(http_endpoints, healthz_reports_the_providers_failure)
{
    MUTATE(fail_fsync);
    char body[256];
    cr_assert_eq(cl_get(T.port, "/healthz", body, sizeof body), 503);
    cr_assert_str_eq(body, "unhealthy: fsync failed on /e1/telemetry\n");
}

/* ---- /readyz ------------------------------------------------------------ */

Test(http_endpoints, readyz_is_200_when_bootstrapped_listening_and_writable)
{
    char body[256];
    cr_assert_eq(cl_get(T.port, "/readyz", body, sizeof body), 200);
    cr_assert_str_eq(body, "ready\ncluster: connected\n");
}

static void mqtt_down(fake_t *f) { f->r.mqtt_listening = false; }
static void wal_down(fake_t *f) { f->r.wal_writable = false; }
static void not_booted(fake_t *f) { f->r.bootstrap_done = false; }
static void draining(fake_t *f) { f->r.draining = true; }
static void cluster_away(fake_t *f) { f->cluster = HTTP_CLUSTER_UNREACHABLE; }

Test(http_endpoints, readyz_is_503_naming_what_is_missing)
{
    char body[256];
    MUTATE(mqtt_down);
    cr_assert_eq(cl_get(T.port, "/readyz", body, sizeof body), 503);
    cr_assert_str_eq(body, "not ready: mqtt listener not started\ncluster: connected\n");
    MUTATE(wal_down);
    MUTATE(not_booted);
    cr_assert_eq(cl_get(T.port, "/readyz", body, sizeof body), 503);
    cr_assert_str_eq(body, "not ready: bootstrap not finished\ncluster: connected\n");
}

Test(http_endpoints, readyz_is_503_while_draining)
{
    MUTATE(draining);
    char body[256];
    cr_assert_eq(cl_get(T.port, "/readyz", body, sizeof body), 503);
    cr_assert_not_null(strstr(body, "shutting down"));
}

Test(http_endpoints, unreachable_cluster_is_reported_but_does_not_make_unready)
{
    MUTATE(cluster_away);
    char body[256];
    cr_assert_eq(cl_get(T.port, "/readyz", body, sizeof body), 200);
    cr_assert_str_eq(body, "ready\ncluster: unreachable\n");
}

/* ---- /metrics ----------------------------------------------------------- */

static char *get_big(const char *path, int *status, char *ctype, size_t ctn)
{
    cl_t *c = cl_open(T.port, 0);
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    cl_send(c, req);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    *status = r.status;
    cl_header(&r, "Content-Type", ctype, ctn);
    cl_close(c);
    return r.body;
}

Test(http_endpoints, metrics_is_prometheus_text_004_that_promtool_accepts)
{
    int status;
    char ctype[128], out[4096];
    cl_get(T.port, "/nope", NULL, 0);
    char *body = get_big("/metrics", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(ctype, "text/plain; version=0.0.4; charset=utf-8");
    cr_assert_eq(promtool_check(body, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(body, "\ntributary_http_requests_total{code=\"404\"} 1\n"), "%s", body);
    cr_assert_not_null(strstr(body, "\ntributary_ready 1\n"));
    cr_assert_not_null(strstr(body, "\ntributary_cluster_up 1\n"));
    cr_assert_not_null(strstr(body, "\ntributary_messages_received_total{topic=\"/e1/energy\"} 0\n"));
    free(body);
}

static bool renders_are(th_t *t, void *arg)
{
    (void)t;
    return renders == *(int *)arg;
}

static void render_always(http_service_opts_t *o)
{
    o->render_ms = 0;
}

TestSuite(http_render, .fini = teardown, .timeout = 30);

static void render_rarely(http_service_opts_t *o)
{
    o->render_ms = 60000;
}

Test(http_render, metrics_and_stats_are_rendered_at_most_once_per_render_period)
{
    start_tuned(render_rarely);
    int status;
    char ctype[128];
    for (int i = 0; i < 5; i++) {
        free(get_big("/metrics", &status, ctype, sizeof ctype));
        free(get_big("/stats", &status, ctype, sizeof ctype));
    }
    int three = 3; /* the sample ring's baseline at listen, one /metrics rendering, one /stats rendering */
    cr_assert(th_wait_until(&T, renders_are, &three, 0));
}

Test(http_render, with_no_render_period_every_request_is_fresh)
{
    start_tuned(render_always);
    int status;
    char ctype[128];
    for (int i = 0; i < 3; i++)
        free(get_big("/metrics", &status, ctype, sizeof ctype));
    int four = 4; /* the sample ring's baseline at listen, then one per request */
    cr_assert(th_wait_until(&T, renders_are, &four, 0));
}

/* ---- /stats ------------------------------------------------------------- */

static json_t *stats(void)
{
    int status;
    char ctype[128];
    char *body = get_big("/stats", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(ctype, "application/json");
    json_error_t err;
    json_t *doc = json_loads(body, 0, &err);
    cr_assert_not_null(doc, "not JSON (%s): %s", err.text, body);
    free(body);
    return doc;
}

typedef struct {
    size_t t;
    uint64_t received, replicated, queued, dropped, rejected;
} acct_t;

static void account_on_loop(th_t *t, void *arg)
{
    (void)t;
    acct_t *a = arg;
    metrics_add(metrics_fam(M, METRICS_RECEIVED), a->t, 0, a->received);
    metrics_add(metrics_fam(M, METRICS_REPLICATED), a->t, 0, a->replicated);
    metrics_set(metrics_fam(M, METRICS_QUEUED), a->t, 0, (int64_t)a->queued);
    metrics_add(metrics_fam(M, METRICS_DROPPED), a->t, 0, a->dropped);
    metrics_add(metrics_fam(M, METRICS_REJECTED), a->t, METRICS_REJECT_SCHEMA_INVALID, a->rejected);
    metrics_set(metrics_fam(M, METRICS_OLDEST_UNREPLICATED_AGE), a->t, 0, 2500);
}

Test(http_endpoints, stats_has_one_object_per_topic_with_its_numbers)
{
    acct_t a = { 0, 100, 80, 15, 2, 3 };
    th_call(&T, account_on_loop, &a);
    json_t *doc = stats();
    json_t *topics = json_object_get(doc, "topics");
    cr_assert_eq(json_array_size(topics), 2);
    json_t *t0 = json_array_get(topics, 0);
    cr_assert_str_eq(json_string_value(json_object_get(t0, "topic")), "/e1/telemetry");
    cr_assert_str_eq(json_string_value(json_object_get(t0, "state")), "replicating");
    cr_assert_eq(json_integer_value(json_object_get(t0, "received")), 100);
    cr_assert_eq(json_integer_value(json_object_get(t0, "queued")), 15);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(t0, "rejected"), "schema_invalid")), 3);
    cr_assert_eq(json_real_value(json_object_get(t0, "oldest_unreplicated_age_seconds")), 2.5);
    cr_assert(json_is_false(json_object_get(t0, "stalled")));
    json_t *t1 = json_array_get(topics, 1);
    cr_assert_str_eq(json_string_value(json_object_get(t1, "state")), "stalled");
    cr_assert_str_eq(json_string_value(json_object_get(doc, "edge")), "e1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "cluster"), "state")), "connected");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(doc, "connections"), "http")), 1);
    cr_assert_gt(json_integer_value(json_object_get(json_object_get(doc, "process"), "resident_memory_bytes")), 0);
    cr_assert(json_is_true(json_object_get(doc, "ready")));
    cr_assert(json_is_null(json_object_get(doc, "not_ready_reason")));
    json_decref(doc);
}

Test(http_endpoints, stats_invariant_is_true_when_every_message_is_accounted_for)
{
    acct_t a = { 0, 100, 80, 15, 2, 3 };
    th_call(&T, account_on_loop, &a);
    json_t *doc = stats();
    cr_assert(json_is_true(json_object_get(json_array_get(json_object_get(doc, "topics"), 0), "invariant_ok")));
    cr_assert(json_is_true(json_object_get(doc, "invariant_ok")));
    json_decref(doc);
}

Test(http_endpoints, stats_invariant_is_false_for_the_topic_and_overall_when_one_is_lost)
{
    acct_t a = { 1, 100, 80, 15, 2, 2 };
    th_call(&T, account_on_loop, &a);
    json_t *doc = stats();
    json_t *topics = json_object_get(doc, "topics");
    cr_assert(json_is_true(json_object_get(json_array_get(topics, 0), "invariant_ok")));
    cr_assert(json_is_false(json_object_get(json_array_get(topics, 1), "invariant_ok")));
    cr_assert(json_is_false(json_object_get(doc, "invariant_ok")));
    json_decref(doc);
}

static void reasons_on_loop(th_t *t, void *arg)
{
    (void)t;
    (void)arg;
    metrics_set(metrics_fam(M, METRICS_MQTT_REFUSED), METRICS_REFUSE_MAX_CONNECTIONS, 0, 4);
    metrics_set(metrics_fam(M, METRICS_MQTT_CLOSED), METRICS_CLOSE_KEEPALIVE_TIMEOUT, 0, 2);
    metrics_set(metrics_fam(M, METRICS_RETRIES), 1, 1 /* ack_timeout */, 6);
}

Test(http_endpoints, stats_shows_counts_by_reason_as_objects_keyed_by_reason)
{
    th_call(&T, reasons_on_loop, NULL);
    json_t *doc = stats();
    json_t *conns = json_object_get(doc, "connections");
    json_t *refused = json_object_get(conns, "mqtt_refused");
    cr_assert_eq(json_object_size(refused), METRICS_REFUSE__COUNT);
    cr_assert_eq(json_integer_value(json_object_get(refused, "max_connections")), 4);
    cr_assert_eq(json_integer_value(json_object_get(refused, "shutting_down")), 0);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(conns, "mqtt_closed"), "keepalive_timeout")), 2);
    json_t *t1 = json_array_get(json_object_get(doc, "topics"), 1);
    json_t *retries = json_object_get(t1, "retries");
    cr_assert_eq(json_object_size(retries), metrics_nretry_reasons);
    cr_assert_eq(json_integer_value(json_object_get(retries, "ack_timeout")), 6);
    cr_assert_eq(json_integer_value(json_object_get(retries, "unavailable")), 0);
    json_decref(doc);
}

static void listeners_on_loop(th_t *t, void *arg)
{
    (void)t;
    (void)arg;
    metrics_set(metrics_fam(M, METRICS_PUBLISH_DENIED), 1, 0, 7);
    metrics_set(metrics_fam(M, METRICS_MQTT_LISTENER_CONNECTIONS), 0, 0, 3);
}

Test(http_endpoints, stats_has_one_object_per_listener_with_its_address_tls_and_counts)
{
    th_call(&T, listeners_on_loop, NULL);
    json_t *doc = stats();
    json_t *ls = json_object_get(doc, "listeners");
    cr_assert_eq(json_array_size(ls), 2);
    json_t *plain = json_array_get(ls, 0), *tls = json_array_get(ls, 1);
    cr_assert_str_eq(json_string_value(json_object_get(plain, "listener")), "0.0.0.0:1883");
    cr_assert(json_is_false(json_object_get(plain, "tls")));
    cr_assert_eq(json_integer_value(json_object_get(plain, "connections")), 3);
    cr_assert_eq(json_integer_value(json_object_get(plain, "publish_denied")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(tls, "listener")), "0.0.0.0:8883");
    cr_assert(json_is_true(json_object_get(tls, "tls")));
    cr_assert_eq(json_integer_value(json_object_get(tls, "publish_denied")), 7);
    cr_assert_null(json_object_get(doc, "publish_denied"), "by listener only: not also at the root");
    json_decref(doc);
    int status;
    char ctype[128];
    char *body = get_big("/metrics", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert(strstr(body, "tributary_mqtt_publish_denied_total{listener=\"0.0.0.0:8883\"} 7\n"), "%s", body);
    cr_assert(strstr(body, "tributary_mqtt_listener_connections{listener=\"0.0.0.0:1883\"} 3\n"));
    free(body);
}

Test(http_endpoints, head_on_stats_announces_the_get_length)
{
    int status;
    char ctype[128];
    char *body = get_big("/stats", &status, ctype, sizeof ctype);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "HEAD /stats HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, true), 0);
    char len[32];
    /* the same document, give or take digits of changing numbers (uptime, memory) */
    long diff = strtol(cl_header(&r, "Content-Length", len, sizeof len), NULL, 10) - (long)strlen(body);
    cr_assert(diff > -16 && diff < 16, "HEAD says %s, GET sent %zu", len, strlen(body));
    cl_resp_free(&r);
    cl_close(c);
    free(body);
}

/* ---- loop health -------------------------------------------------------- */

static int block_route(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)arg, (void)req, (void)ctype;
    struct timespec ts = { 0, 400 * 1000000 }; /* the stall under test, not a wait */
    nanosleep(&ts, NULL);
    tb_buf_puts(out, "blocked\n");
    return 200;
}

static void add_block_route(th_t *t, void *arg)
{
    (void)arg;
    http_route(http_service_server(t->svc), "/block", block_route, NULL);
}

TestSuite(http_health, .fini = teardown, .timeout = 30);

static void fast_ticks(http_service_opts_t *o)
{
    o->tick_ms = 20;    /* tick every 20 ms */
    o->max_lag_ms = 100; /* 100 ms late is unhealthy */
}

Test(http_health, healthz_is_503_after_the_loop_was_blocked_then_recovers)
{
    start_tuned(fast_ticks);
    th_call(&T, add_block_route, NULL);
    cr_assert_eq(cl_get(T.port, "/block", NULL, 0), 200);
    char body[256];
    cr_assert_eq(cl_get(T.port, "/healthz", body, sizeof body), 503);
    cr_assert_not_null(strstr(body, "event loop blocked"), "%s", body);
    int status = 0;
    for (uint64_t deadline = tb_mono_ms() + 2000; status != 200 && tb_mono_ms() < deadline;)
        status = cl_get(T.port, "/healthz", NULL, 0);
    cr_assert_eq(status, 200, "did not recover once the loop ran freely");
}

/* ---- the operator's page: /, /table, /stats/history ------------------- */

Test(http_endpoints, page_is_one_html_document_with_its_css_and_script_inlined)
{
    int status;
    char ctype[128];
    char *body = get_big("/", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(ctype, "text/html; charset=utf-8");
    cr_assert_lt(strlen(body), 100 * 1024, "the page must stay small: %zu bytes", strlen(body));
    cr_assert_not_null(strstr(body, "<!doctype html>"));
    cr_assert_not_null(strstr(body, "--badbg"), "page.css is inlined");
    cr_assert_not_null(strstr(body, "function health(doc)"), "page.js is inlined");
    cr_assert_null(strstr(body, "/*@CSS@*/"), "the markers are replaced");
    cr_assert_null(strstr(body, "/*@JS@*/"));
    cr_assert_not_null(strstr(body, "<noscript><meta http-equiv=\"refresh\" content=\"0; url=/table\"></noscript>"));
    /* nothing fetched from elsewhere (the SVG namespace URI is a name, not a fetch) */
    const char *outside[] = { "src=\"http", "href=\"http", "href=\"//", "url(", "@import", "fetch('http" };
    for (size_t i = 0; i < TB_ARRAY_LEN(outside); i++)
        cr_assert_null(strstr(body, outside[i]), "%s", outside[i]);
    free(body);
}

static json_t *history(void)
{
    int status;
    char ctype[128];
    char *body = get_big("/stats/history", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(ctype, "application/json");
    json_error_t err;
    json_t *doc = json_loads(body, 0, &err);
    cr_assert_not_null(doc, "not JSON (%s): %s", err.text, body);
    free(body);
    return doc;
}

static void sample_on_loop(th_t *t, void *arg)
{
    for (int i = 0, n = *(int *)arg; i < n; i++)
        http_service_sample(t->svc);
}

static double last_of(json_t *o, const char *key)
{
    json_t *a = json_object_get(o, key);
    cr_assert(json_is_array(a) && json_array_size(a) > 0, "%s", key);
    return json_number_value(json_array_get(a, json_array_size(a) - 1));
}

Test(http_endpoints, history_keeps_rates_and_gauges_per_sample_in_total_and_per_topic)
{
    json_t *doc = history(); /* the baseline sample at listen: no point yet */
    cr_assert_eq(json_integer_value(json_object_get(doc, "seq")), 0);
    cr_assert_eq(json_array_size(json_object_get(doc, "t")), 0);
    cr_assert_eq(json_integer_value(json_object_get(doc, "capacity")), 720);
    cr_assert_eq(json_number_value(json_object_get(doc, "interval_seconds")), 5);
    json_decref(doc);

    int one = 1;
    th_call(&T, sample_on_loop, &one); /* a baseline with both topics */
    acct_t a = { 0, 100, 80, 15, 0, 0 };
    th_call(&T, account_on_loop, &a);
    th_call(&T, sample_on_loop, &one);
    doc = history();
    cr_assert_eq(json_integer_value(json_object_get(doc, "seq")), 2);
    cr_assert_eq(json_array_size(json_object_get(doc, "t")), 2);
    json_t *total = json_object_get(doc, "total");
    cr_assert_gt(last_of(total, "received_per_second"), 0);
    cr_assert_gt(last_of(total, "replicated_per_second"), 0);
    cr_assert_eq(last_of(total, "queued"), 15);
    cr_assert_eq(last_of(total, "lag_age_seconds"), 2.5);
    cr_assert_geq(last_of(total, "disk_write_bytes_per_second"), 0);
    json_t *topics = json_object_get(doc, "topics");
    cr_assert_eq(json_array_size(topics), 2);
    json_t *tele = json_array_get(topics, 0), *energy = json_array_get(topics, 1);
    cr_assert_str_eq(json_string_value(json_object_get(tele, "topic")), "/e1/telemetry");
    cr_assert_eq(last_of(tele, "received_per_second"), last_of(total, "received_per_second"));
    cr_assert_eq(last_of(tele, "queued"), 15);
    cr_assert_eq(last_of(energy, "received_per_second"), 0, "only telemetry received");
    cr_assert_eq(last_of(energy, "queued"), 0);
    json_decref(doc);
}

Test(http_endpoints, history_is_bounded_to_an_hour_of_samples)
{
    int many = 730;
    th_call(&T, sample_on_loop, &many);
    json_t *doc = history();
    cr_assert_eq(json_integer_value(json_object_get(doc, "seq")), 730);
    cr_assert_eq(json_array_size(json_object_get(doc, "t")), 720, "the ring keeps the last 720");
    cr_assert_eq(json_array_size(json_object_get(json_object_get(doc, "total"), "queued")), 720);
    json_decref(doc);
    cr_assert_eq(http_history_bytes(), 720u * (8 + 5 * 4 + 8 * 4 * 4), "the bytes docs/OPERATIONS.md states");
}

Test(http_endpoints, table_is_the_server_rendered_view_with_the_same_health_words)
{
    acct_t a = { 0, 100, 80, 15, 2, 3 };
    th_call(&T, account_on_loop, &a);
    int status;
    char ctype[128];
    char *body = get_big("/table", &status, ctype, sizeof ctype);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(ctype, "text/html; charset=utf-8");
    /* the fake's /e1/energy is stalled: degraded, and its row stands out */
    cr_assert_not_null(strstr(body, "data-level=\"degraded\"><b>degraded</b>: 1 topic in trouble"), "%s", body);
    cr_assert_not_null(strstr(body, "<tr class=\"bad\" data-topic=\"/e1/energy\"><td>/e1/energy</td><td>stalled"));
    cr_assert_not_null(strstr(body, "<tr class=\"warn\" data-topic=\"/e1/telemetry\">"), "dropped and rejected: amber");
    cr_assert_not_null(strstr(body, "<td class=\"received\">100</td><td class=\"queued\">15</td>"), "%s", body);
    cr_assert_not_null(strstr(body, "<td class=\"dropped\">2</td><td class=\"rejected\">3</td><td>log</td>"));
    cr_assert_null(strstr(body, "<script"), "no script on the static view");
    free(body);
}

static void set_token(th_t *t, void *arg)
{
    http_service_set_token(t->svc, arg);
}

Test(http_endpoints, page_table_and_history_ask_for_the_token_as_stats_does)
{
    th_call(&T, set_token, "s3cret");
    const char *paths[] = { "/", "/table", "/stats/history", "/stats" };
    for (size_t i = 0; i < TB_ARRAY_LEN(paths); i++) {
        cr_assert_eq(cl_get(T.port, paths[i], NULL, 0), 401, "%s", paths[i]);
        cl_t *c = cl_open(T.port, 0);
        char req[256];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer s3cret\r\n\r\n", paths[i]);
        cl_send(c, req);
        cl_resp_t r;
        cr_assert_eq(cl_read(c, &r, false), 0);
        cr_assert_eq(r.status, 200, "%s", paths[i]);
        free(r.body);
        cl_close(c);
    }
}

Test(http_endpoints, stats_names_the_top_talkers_the_provider_reports)
{
    json_t *doc = stats();
    json_t *c = json_object_get(doc, "connections");
    json_t *top = json_object_get(c, "top_talkers");
    cr_assert_eq(json_array_size(top), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(top, 0), "client_id")), "plc-7");
    cr_assert_eq(json_real_value(json_object_get(json_array_get(top, 0), "messages_per_second")), 120.5);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(top, 1), "client_id")), "meter-2");
    cr_assert_eq(json_real_value(json_object_get(c, "top_talkers_window_seconds")), 5.0);
    json_decref(doc);
}

/* One GET with an Authorization header; the response (its head kept). */
static int get_auth(const char *path, const char *auth, cl_resp_t *r)
{
    cl_t *c = cl_open(T.port, 0);
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: %s\r\n\r\n", path, auth);
    cl_send(c, req);
    int rc = cl_read(c, r, false);
    cl_close(c);
    cr_assert_eq(rc, 0);
    return r->status;
}

Test(http_endpoints, a_browser_may_send_the_token_as_the_password_of_basic_auth)
{
    th_call(&T, set_token, "s3cret");
    cl_resp_t r;
    /* the challenge offers Basic, so a browser prompts instead of showing a bare 401 */
    cr_assert_eq(get_auth("/", "Bearer wrong", &r), 401);
    cr_assert_not_null(strstr(r.head, "WWW-Authenticate: Basic realm=\"tributary\""), "%s", r.head);
    cr_assert_not_null(strstr(r.head, "WWW-Authenticate: Bearer realm=\"tributary\""), "%s", r.head);
    free(r.body);
    const struct { const char *auth; int status; } cases[] = {
        { "Basic dGVjaDpzM2NyZXQ=", 200 },     /* tech:s3cret */
        { "basic  OnMzY3JldA==", 200 },        /* :s3cret, any (or no) user name */
        { "Basic YTpiOnMzY3JldA==", 401 },     /* a:b:s3cret: the password is what follows the first colon */
        { "Basic dGVjaDpzM2NyZXQx", 401 },     /* tech:s3cret1 */
        { "Basic dGVjaDpzM2NyZQ==", 401 },     /* tech:s3cre */
        { "Basic czNjcmV0", 401 },             /* s3cret, no colon */
        { "Basic dGVjaDpzM2NyZXQ", 401 },      /* not a multiple of 4 */
        { "Basic ****", 401 },                 /* not base64 */
        { "Basic ", 401 },
    };
    for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
        cr_assert_eq(get_auth("/stats", cases[i].auth, &r), cases[i].status, "%s", cases[i].auth);
        free(r.body);
    }
}
