/*
 * Tests for gateway/http/http_admin.c: the admin routes over stand-in ops,
 * and their access rule (http.h): with an admin token only that token,
 * without one loopback peers (these tests' client is one) with the metrics
 * token when it is set. The 403 to a non-loopback peer needs another
 * address than 127.0.0.1: tests/integration/test_admin.py connects over the
 * host's own interface address, and fuzz_http_serve answers requests with
 * no connection (not loopback). Also /stats answered through its deferred
 * path (the dump on the thread pool), with clients that leave first.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "helper_http.h"

static th_t T;
static metrics_t *M;
static int reloads; /* loop thread's */

static json_t *fake_reload(void *arg, int *status)
{
    (void)arg;
    reloads++;
    *status = 200;
    return json_pack("{s:s, s:[s], s:[s]}", "result", "applied", "applied", "log.level", "restart_needed",
                     "wal.fsync");
}

static json_t *fake_last(void *arg)
{
    (void)arg;
    return NULL;
}

static void fake_config(void *arg, tb_buf_t *out)
{
    (void)arg;
    tb_buf_puts(out, "log:\n  level: info\n");
}

static const http_admin_ops_t OPS = { .reload = fake_reload, .last_reload = fake_last, .config = fake_config };

static void setup(void)
{
    metrics_new(&M);
    cr_assert_eq(metrics_catalog_register(M, 4), 0);
    metrics_topic_add(M, "/e1/telemetry");
    th_admin_ops = &OPS;
    th_start(&T);
    th_service(&T, NULL, M, NULL);
}

static void teardown(void)
{
    th_stop(&T);
    metrics_free(M);
}

TestSuite(http_admin, .init = setup, .fini = teardown, .timeout = 30);

static void set_tokens_fn(th_t *t, void *arg)
{
    const char *const *tok = arg;
    http_service_set_token(t->svc, tok[0]);
    http_service_set_admin_token(t->svc, tok[1]);
}

static void set_tokens(const char *metrics, const char *admin)
{
    const char *tok[2] = { metrics, admin };
    th_call(&T, set_tokens_fn, tok);
}

/* One request; its status, the body into body. */
static int ask(const char *method, const char *path, const char *token, char *body, size_t n)
{
    cl_t *c = cl_open(T.port, 0);
    char req[512];
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\n%s%s%s\r\n", method, path,
             token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    cl_send(c, req);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0, "%s %s", method, path);
    int status = r.status;
    if (body)
        snprintf(body, n, "%s", r.body ? r.body : "");
    cl_resp_free(&r);
    cl_close(c);
    return status;
}

Test(http_admin, a_loopback_peer_without_any_token_is_served)
{
    char body[256];
    cr_assert_eq(ask("GET", "/admin/config", NULL, body, sizeof body), 200);
    cr_assert_str_eq(body, "log:\n  level: info\n");
    cr_assert_eq(ask("POST", "/admin/reload", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"restart_needed\""), "%s", body);
}

Test(http_admin, with_the_metrics_token_set_a_loopback_peer_needs_it)
{
    set_tokens("metrics-token-0123", NULL);
    cr_assert_eq(ask("GET", "/admin/config", NULL, NULL, 0), 401);
    cr_assert_eq(ask("GET", "/admin/config", "metrics-token-0124", NULL, 0), 401);
    cr_assert_eq(ask("GET", "/admin/config", "metrics-token-0123", NULL, 0), 200);
}

Test(http_admin, with_an_admin_token_only_that_token)
{
    set_tokens("metrics-token-0123", "admin-token-01234");
    char body[512];
    cr_assert_eq(ask("POST", "/admin/reload", NULL, body, sizeof body), 401);
    cr_assert(strstr(body, "http.admin_token_file"), "%s", body);
    cr_assert_eq(ask("POST", "/admin/reload", "metrics-token-0123", NULL, 0), 401, "the metrics token is not admin");
    cr_assert_eq(ask("POST", "/admin/reload", "admin-token-0123", NULL, 0), 401, "a prefix is not the token");
    cr_assert_eq(ask("POST", "/admin/reload", "admin-token-012345", NULL, 0), 401, "nor a longer one");
    cr_assert_eq(ask("POST", "/admin/reload", "admin-token-01234", body, sizeof body), 200);
    cr_assert(strstr(body, "\"applied\""), "%s", body);
    cr_assert_eq(ask("GET", "/admin/config", "admin-token-01234", NULL, 0), 200);
}

static void reloads_fn(th_t *t, void *arg)
{
    (void)t;
    *(int *)arg = reloads;
}

Test(http_admin, refused_calls_do_not_reach_the_ops)
{
    set_tokens(NULL, "admin-token-01234");
    cr_assert_eq(ask("POST", "/admin/reload", "wrong-token-01234", NULL, 0), 401);
    int n;
    th_call(&T, reloads_fn, &n);
    cr_assert_eq(n, 0);
    cr_assert_eq(ask("POST", "/admin/reload", "admin-token-01234", NULL, 0), 200);
    th_call(&T, reloads_fn, &n);
    cr_assert_eq(n, 1);
}

Test(http_admin, no_reload_yet_is_404_and_methods_are_checked)
{
    cr_assert_eq(ask("GET", "/admin/reload", NULL, NULL, 0), 404);
    cr_assert_eq(ask("POST", "/admin/config", NULL, NULL, 0), 405);
    cr_assert_eq(ask("DELETE", "/admin/reload", NULL, NULL, 0), 405);
}

/* ---- /stats through the thread pool ---- */

static bool no_conns(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.conns == 0 && st.pending == 0;
}

Test(http_admin, stats_is_answered_after_its_dump_on_the_pool)
{
    char *body = tb_malloc(1 << 16);
    cr_assert_eq(ask("GET", "/stats", NULL, body, 1 << 16), 200);
    cr_assert(strstr(body, "\"/e1/telemetry\""), "%s", body);
    cr_assert_eq(th_stats(&T).deferred, 1, "the answer came through the deferred path");
    free(body);
}

Test(http_admin, stats_clients_that_leave_before_the_answer)
{
    for (int i = 0; i < 20; i++) {
        cl_t *c = cl_open(T.port, 0);
        cl_send(c, "GET /stats?pretty HTTP/1.1\r\nHost: t\r\n\r\n");
        cl_close(c);
    }
    cr_assert(th_wait_until(&T, no_conns, NULL, 10000));
    cr_assert_eq(ask("GET", "/stats", NULL, NULL, 0), 200);
}
