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
#include "gateway/http/http_int.h"
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

/* pause/resume and drain (http_admin_drain.c): what the ops were asked, on the loop thread */
static char paused_topic[64];
static int pause_calls, drain_calls, drain_drained_at; /* drained from that call on (0: never) */
static bool drain_started;

static json_t *fake_pause(void *arg, const char *topic, bool paused, int *status)
{
    (void)arg;
    pause_calls++;
    snprintf(paused_topic, sizeof paused_topic, "%s", topic);
    if (strcmp(topic, "/e1/telemetry") != 0) {
        *status = 404;
        return json_pack("{s:s}", "error", "no such upstream topic");
    }
    *status = 200;
    return json_pack("{s:s, s:b}", "topic", topic, "paused", paused);
}

/* retire/forget: how many calls reached the op, the last one's forget */
static int retire_calls;
static bool retire_forget;

static json_t *fake_retire(void *arg, const char *topic, bool forget, int *status)
{
    (void)arg;
    retire_calls++;
    retire_forget = forget;
    *status = 202;
    return json_pack("{s:s, s:s}", "topic", topic, "state", "removing");
}

static json_t *fake_drain(void *arg, bool start, int *status)
{
    (void)arg;
    drain_calls++;
    drain_started |= start;
    *status = 200;
    const char *st = !drain_started ? "running" : drain_drained_at && drain_calls >= drain_drained_at ? "drained" : "draining";
    return json_pack("{s:s, s:i}", "state", st, "calls", drain_calls);
}

static json_t *fake_drain_cancel(void *arg, int *status)
{
    drain_started = false;
    return fake_drain(arg, false, status);
}

/* the dead-letter replay: its copies kept from the settle_at-th question on (0: never); loop thread's */
static int settle_calls, settle_at, settle_forgot;

static json_t *fake_dlq_list(void *arg, uint64_t from, uint32_t limit, uint64_t offset, int *status)
{
    (void)arg, (void)from, (void)limit, (void)offset;
    *status = 200;
    return json_pack("{s:[]}", "records");
}

static json_t *fake_dlq_replay(void *arg, uint64_t from, uint64_t to, int *status, uint64_t *wait_id)
{
    (void)arg, (void)from, (void)to;
    *status = 200;
    *wait_id = 7;
    return json_pack("{s:[{s:i, s:s}], s:b}", "stored", "dlq_offset", 1, "topic", "/e1/telemetry", "durable", 0);
}

static int fake_dlq_settled(void *arg, uint64_t id, bool forget)
{
    (void)arg;
    cr_assert_eq(id, 7);
    if (forget) {
        settle_forgot++;
        return -1;
    }
    return settle_at && ++settle_calls >= settle_at ? 1 : 0;
}

static json_t *fake_dlq_purge(void *arg, uint64_t to, int *status)
{
    (void)arg, (void)to;
    *status = 200;
    return json_pack("{s:i}", "purged", 0);
}

static const http_admin_ops_t OPS = { .reload = fake_reload, .last_reload = fake_last, .config = fake_config,
                                      .pause = fake_pause, .retire = fake_retire, .drain = fake_drain, .drain_cancel = fake_drain_cancel,
                                      .dlq_list = fake_dlq_list, .dlq_replay = fake_dlq_replay,
                                      .dlq_replay_settled = fake_dlq_settled, .dlq_purge = fake_dlq_purge };

static void setup(void)
{
    metrics_new(&M);
    cr_assert_eq(metrics_catalog_register(M, 4), 0);
    metrics_topic_add(M, "/e1/telemetry");
    pause_calls = drain_calls = drain_drained_at = retire_calls = 0;
    retire_forget = false;
    settle_calls = settle_at = settle_forgot = 0;
    drain_started = false;
    paused_topic[0] = '\0';
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

/* ---- pause/resume and drain (http_admin_drain.c) ---- */

static bool one_pending(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.pending == 1;
}

static void counts_fn(th_t *t, void *arg)
{
    (void)t;
    int *v = arg;
    v[0] = pause_calls;
    v[1] = drain_calls;
}

static void drained_at_fn(th_t *t, void *arg)
{
    (void)t;
    drain_drained_at = *(int *)arg;
}

Test(http_admin, topic_paths_parse_into_an_upstream_name_and_a_verb)
{
    char topic[64];
    const char *verb;
    cr_assert(http__admin_topic_path("/admin/topics/edge1/t-2_x/pause", topic, sizeof topic, &verb));
    cr_assert_str_eq(topic, "/edge1/t-2_x");
    cr_assert_str_eq(verb, "pause");
    const char *bad[] = { "/admin/topics/edge1/pause", "/admin/topics//t/pause", "/admin/topics/e1/t/",
                          "/admin/topics/e1/t/pause/x", "/admin/topics/e 1/t/pause", "/admin/topics/e1/t%41/pause",
                          "/admin/topic/e1/t/pause", "/admin/topics/e1.x/t/pause" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert(!http__admin_topic_path(bad[i], topic, sizeof topic, &verb), "%s", bad[i]);
    cr_assert(!http__admin_topic_path("/admin/topics/abcdefgh/ijklmnop/pause", topic, 8, &verb), "too long for topic");
}

static void retire_fn(th_t *t, void *arg)
{
    (void)t;
    int *v = arg;
    v[0] = retire_calls;
    v[1] = retire_forget;
}

Test(http_admin, retire_and_forget_reach_the_op_and_forget_needs_confirm)
{
    char body[512];
    int n[2];
    cr_assert_eq(ask("POST", "/admin/topics/e1/old/retire", NULL, body, sizeof body), 202);
    cr_assert(strstr(body, "\"topic\": \"/e1/old\""), "%s", body);
    th_call(&T, retire_fn, n);
    cr_assert_eq(n[0], 1);
    cr_assert(!n[1], "retire is not a forget");
    /* forget deletes: without confirm=yes (or with another value) it never reaches the op */
    cr_assert_eq(ask("POST", "/admin/topics/e1/old/forget", NULL, body, sizeof body), 400);
    cr_assert(strstr(body, "confirm=yes"), "%s", body);
    cr_assert_eq(ask("POST", "/admin/topics/e1/old/forget?confirm=no", NULL, NULL, 0), 400);
    cr_assert_eq(ask("POST", "/admin/topics/e1/old/forget?confirm=yesplease", NULL, NULL, 0), 400);
    th_call(&T, retire_fn, n);
    cr_assert_eq(n[0], 1);
    cr_assert_eq(ask("POST", "/admin/topics/e1/old/forget?x=1&confirm=yes", NULL, body, sizeof body), 202);
    th_call(&T, retire_fn, n);
    cr_assert_eq(n[0], 2);
    cr_assert(n[1], "forget");
    cr_assert_eq(ask("GET", "/admin/topics/e1/old/retire", NULL, NULL, 0), 405);
}

Test(http_admin, pause_and_resume_reach_the_ops_with_the_topic)
{
    char body[512];
    cr_assert_eq(ask("POST", "/admin/topics/e1/telemetry/pause", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"paused\": true"), "%s", body);
    cr_assert_eq(ask("POST", "/admin/topics/e1/telemetry/resume", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"paused\": false"), "%s", body);
    cr_assert_eq(ask("POST", "/admin/topics/e1/other/pause", NULL, body, sizeof body), 404);
    cr_assert(strstr(body, "no such upstream topic"), "%s", body);
    int n[2];
    th_call(&T, counts_fn, n);
    cr_assert_eq(n[0], 3);
    /* malformed or unknown verbs never reach the ops; GET is 405; exact routes keep priority */
    cr_assert_eq(ask("POST", "/admin/topics/e1/telemetry/stop", NULL, body, sizeof body), 404);
    cr_assert(strstr(body, "/admin/topics/NAMESPACE/TOPIC/pause"), "%s", body);
    cr_assert_eq(ask("POST", "/admin/topics/e1/pause", NULL, NULL, 0), 404);
    cr_assert_eq(ask("GET", "/admin/topics/e1/telemetry/pause", NULL, NULL, 0), 405);
    cr_assert_eq(ask("POST", "/admin/topicsX", NULL, NULL, 0), 404);
    th_call(&T, counts_fn, n);
    cr_assert_eq(n[0], 3);
    cr_assert_eq(ask("POST", "/admin/reload", NULL, NULL, 0), 200);
}

Test(http_admin, pause_and_drain_keep_the_access_rule)
{
    set_tokens(NULL, "admin-token-01234");
    cr_assert_eq(ask("POST", "/admin/topics/e1/telemetry/pause", NULL, NULL, 0), 401);
    cr_assert_eq(ask("POST", "/admin/drain", "wrong-token-01234", NULL, 0), 401);
    cr_assert_eq(ask("GET", "/admin/drain", NULL, NULL, 0), 401);
    int n[2];
    th_call(&T, counts_fn, n);
    cr_assert_eq(n[0] + n[1], 0, "refused calls do not reach the ops");
    cr_assert_eq(ask("POST", "/admin/topics/e1/telemetry/pause", "admin-token-01234", NULL, 0), 200);
}

Test(http_admin, drain_answers_at_once_without_wait_and_get_changes_nothing)
{
    char body[512];
    cr_assert_eq(ask("GET", "/admin/drain", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"running\""), "%s", body);
    cr_assert_eq(ask("POST", "/admin/drain", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"draining\""), "%s", body);
    cr_assert_eq(ask("POST", "/admin/drain?wait_ms=x", NULL, body, sizeof body), 200, "a malformed wait: none");
    cr_assert_eq(th_stats(&T).deferred, 0);
    cr_assert_eq(ask("DELETE", "/admin/drain", NULL, NULL, 0), 405);
}

Test(http_admin, drain_with_wait_answers_when_drained_at_a_tick)
{
    int at = 3; /* the handler's call is 1, the first tick's 2 (still draining), the second's 3 */
    th_call(&T, drained_at_fn, &at);
    char body[512];
    uint64_t t0 = tb_mono_ms();
    cr_assert_eq(ask("POST", "/admin/drain?wait_ms=20000", NULL, body, sizeof body), 200);
    uint64_t took = tb_mono_ms() - t0;
    cr_assert(strstr(body, "\"drained\""), "%s", body);
    cr_assert_eq(th_stats(&T).deferred, 1, "answered through the deferred path");
    cr_assert(took < 15000, "answered at a tick, not at the wait's end (%llu ms)", (unsigned long long)took);
}

Test(http_admin, drain_with_wait_answers_draining_when_the_wait_is_over)
{
    char body[512];
    uint64_t t0 = tb_mono_ms();
    cr_assert_eq(ask("POST", "/admin/drain?wait_ms=200", NULL, body, sizeof body), 200);
    cr_assert(tb_mono_ms() - t0 >= 200, "not before wait_ms");
    cr_assert(strstr(body, "\"draining\""), "%s", body);
    cr_assert_eq(th_stats(&T).deferred, 1);
}

Test(http_admin, a_drain_waiter_that_leaves_is_released_at_its_deadline)
{
    /* the peer's close is seen when the answer is written (http.h): at the tick after wait_ms */
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "POST /admin/drain?wait_ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert(th_wait_until(&T, one_pending, NULL, 10000), "the request waits");
    cl_close(c);
    cr_assert(th_wait_until(&T, no_conns, NULL, 10000), "the connection and its pending answer are gone");
}

static void *cancel_later(void *arg)
{
    (void)arg;
    char body[256];
    cr_assert(th_wait_until(&T, one_pending, NULL, 10000), "the drain waits");
    cr_assert_eq(ask("POST", "/admin/drain/cancel", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"running\""), "%s", body);
    return NULL;
}

Test(http_admin, a_cancel_answers_the_drain_waiters_with_running)
{
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, NULL);
    char body[256];
    cr_assert_eq(ask("POST", "/admin/drain?wait_ms=20000", NULL, body, sizeof body), 200);
    pthread_join(th, NULL);
    cr_assert(strstr(body, "\"running\""), "the wait ends with the drain: %s", body);
    cr_assert_eq(ask("GET", "/admin/drain/cancel", NULL, NULL, 0), 405);
}

/* A drain waiter when the service closes (SIGTERM during POST /admin/drain?wait_ms): the server answers
 * it 503 and the wait is freed with the service (ASan: no leak, no use after free). */
TestSuite(http_admin_close, .init = setup, .timeout = 30);

Test(http_admin_close, a_drain_waiter_at_the_close_is_answered_503_and_freed)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "POST /admin/drain?wait_ms=20000 HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert(th_wait_until(&T, one_pending, NULL, 10000), "the request waits");
    th_stop(&T);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 503);
    cl_resp_free(&r);
    cl_close(c);
    metrics_free(M);
}

static void settle_at_fn(th_t *t, void *arg)
{
    (void)t;
    settle_at = *(int *)arg;
}

Test(http_admin, a_dlq_replay_is_answered_once_its_copies_are_kept)
{
    int at = 2; /* the first tick asks (still on their way), the second's answer is yes */
    th_call(&T, settle_at_fn, &at);
    char body[512];
    cr_assert_eq(ask("POST", "/admin/dlq/replay?from=1&to=1", NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "\"durable\": true"), "%s", body);
    cr_assert(strstr(body, "/e1/telemetry"), "the replay's document: %s", body);
    cr_assert_eq(th_stats(&T).deferred, 1, "answered through the deferred path");
}

/* A replay waiting when the service closes: answered 503, the gateway told to forget the wait. */
Test(http_admin_close, a_dlq_replay_waiting_at_the_close_is_answered_503_and_forgotten)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "POST /admin/dlq/replay?from=1&to=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert(th_wait_until(&T, one_pending, NULL, 10000), "the request waits");
    th_stop(&T);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 503);
    cl_resp_free(&r);
    cl_close(c);
    cr_assert_eq(settle_forgot, 1, "the wait was dropped on the gateway's side too");
    metrics_free(M);
}
