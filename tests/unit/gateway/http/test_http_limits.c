/*
 * Tests for the HTTP server's bounds: the request deadline (slowloris), the
 * idle and write deadlines, the connection cap (evict, then 503), one
 * buffered response per slow reader, the drain, and the listener (bound
 * address logged, IPv6). Deadlines are shortened through http_opts_t so
 * the tests are fast; each asserts the bound is honoured from both sides.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <unistd.h>

#include "base/base.h"
#include "helper_http.h"

TestSuite(http_limits, .timeout = 60);

static th_t T;

static void start(void (*tune)(http_opts_t *o))
{
    http_opts_t o;
    http_opts_default(&o);
    if (tune)
        tune(&o);
    th_start(&T);
    th_server(&T, &o);
}

/* ---- deadlines ---------------------------------------------------------- */

#define REQ_MS 600

static void short_request(http_opts_t *o)
{
    o->request_timeout_ms = REQ_MS;
}

Test(http_limits, slowloris_is_cut_off_at_the_request_deadline)
{
    start(short_request);
    const char *req = "GET /a HTTP/1.1\r\nHost: t\r\nX-Slow: 1\r\n\r\n"; /* ~40 bytes: 4 s at 10 bytes/s */
    uint64_t t0 = tb_mono_ms(); /* before connect: the server's deadline starts at accept */
    cl_t *c = cl_open(T.port, 0);
    size_t sent = 0;
    bool answered = false;
    while (!answered && sent < strlen(req)) {
        cl_sendn(c, req + sent++, 1);
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        answered = poll(&p, 1, 100) == 1; /* the client's pace: one byte per 100 ms */
    }
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    uint64_t elapsed = tb_mono_ms() - t0;
    cr_assert_eq(r.status, 408);
    cr_assert(cl_eof(c));
    cr_assert_lt(sent, strlen(req), "the whole request got through");
    /* libuv arms the timer from the loop's cached clock, which may be a few ms older than the accept */
    cr_assert_geq(elapsed, REQ_MS - 10, "cut after %llu ms, before the %d ms bound", (unsigned long long)elapsed,
                  REQ_MS);
    cr_assert_lt(elapsed, REQ_MS + 400, "cut after %llu ms, long past the %d ms bound", (unsigned long long)elapsed,
                 REQ_MS);
    cr_assert_eq(th_stats(&T).timeouts[METRICS_HTTP_TIMEOUT_REQUEST], 1);
    cl_resp_free(&r);
    cl_close(c);
    th_stop(&T);
}

Test(http_limits, silent_connection_gets_408_at_the_request_deadline)
{
    start(short_request);
    cl_t *c = cl_open(T.port, 0);
    uint64_t t0 = tb_mono_ms();
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    uint64_t elapsed = tb_mono_ms() - t0;
    cr_assert_eq(r.status, 408);
    cr_assert_geq(elapsed, REQ_MS - 10); /* the server's clock started at accept, a moment before ours */
    cr_assert_lt(elapsed, REQ_MS + 400);
    cl_resp_free(&r);
    cl_close(c);
    th_stop(&T);
}

#define IDLE_MS 400

static void short_idle(http_opts_t *o)
{
    o->idle_timeout_ms = IDLE_MS;
}

Test(http_limits, idle_keep_alive_connection_is_closed_after_the_idle_deadline)
{
    start(short_idle);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    uint64_t t0 = tb_mono_ms();
    cr_assert(cl_eof(c));
    uint64_t elapsed = tb_mono_ms() - t0;
    cr_assert_geq(elapsed, IDLE_MS - 10);
    cr_assert_lt(elapsed, IDLE_MS + 400);
    cr_assert_eq(th_stats(&T).timeouts[METRICS_HTTP_TIMEOUT_IDLE], 1);
    cl_resp_free(&r);
    cl_close(c);
    th_stop(&T);
}

/* ---- slow readers ------------------------------------------------------- */

#define BIG (16u << 20) /* larger than any loopback socket buffers */

static bool writing_blocked(th_t *t, void *arg)
{
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.out_bytes >= *(size_t *)arg;
}

static bool write_timed_out(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.timeouts[METRICS_HTTP_TIMEOUT_WRITE] == 1;
}

static void short_write(http_opts_t *o)
{
    o->write_timeout_ms = 300;
}

Test(http_limits, reader_that_never_reads_is_closed_at_the_write_deadline)
{
    th_big_size = BIG;
    start(short_write);
    cl_t *c = cl_open(T.port, 4096);
    uint64_t t0 = tb_mono_ms();
    cl_send(c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    size_t one = BIG;
    cr_assert(th_wait_until(&T, writing_blocked, &one, 5000));
    cr_assert(th_wait_until(&T, write_timed_out, NULL, 3000));
    cr_assert_geq(tb_mono_ms() - t0, 300, "closed before the write deadline");
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.conns, 0);
    cr_assert_eq(st.out_bytes, 0, "the response buffer was not freed");
    cl_close(c);
    th_stop(&T);
}

Test(http_limits, slow_reader_makes_the_server_hold_one_response_at_most)
{
    th_big_size = BIG;
    start(NULL);
    cl_t *c = cl_open(T.port, 4096);
    for (int i = 0; i < 5; i++)
        cl_send(c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    size_t one = BIG;
    cr_assert(th_wait_until(&T, writing_blocked, &one, 5000));
    /* blocked on the first response: the other four wait, unanswered, not buffered */
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.handler_calls, 1);
    cr_assert_lt(st.out_bytes, BIG + 512);
    for (int i = 0; i < 5; i++) {
        cl_resp_t r;
        cr_assert_eq(cl_read(c, &r, false), 0, "response %d", i);
        cr_assert_eq(r.body_len, BIG);
        cr_assert_eq(r.body[BIG - 1], 'a' + (BIG - 1) % 26);
        cl_resp_free(&r);
    }
    st = th_stats(&T);
    cr_assert_eq(st.handler_calls, 5);
    cr_assert_lt(st.out_high_water, BIG + 512, "held %zu bytes for one connection", st.out_high_water);
    cl_close(c);
    th_stop(&T);
}

/* ---- the connection cap ------------------------------------------------- */

static void cap3(http_opts_t *o)
{
    o->max_conns = 3;
}

static bool conns_are(th_t *t, void *arg)
{
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.conns == *(unsigned *)arg;
}

Test(http_limits, past_the_cap_the_longest_waiting_connection_is_evicted)
{
    start(cap3);
    cl_t *c1 = cl_open(T.port, 0), *c2 = cl_open(T.port, 0), *c3 = cl_open(T.port, 0);
    unsigned three = 3;
    cr_assert(th_wait_until(&T, conns_are, &three, 5000));
    cl_t *c4 = cl_open(T.port, 0);
    cl_send(c4, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c4, &r, false), 0);
    cr_assert_eq(r.status, 200, "the newcomer was not served");
    cl_resp_free(&r);
    cr_assert(cl_eof(c1), "the oldest idle connection was not the one evicted");
    cl_send(c2, "GET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_read(c2, &r, false), 0);
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.evicted, 1);
    cr_assert_leq(st.conns, 3);
    cl_close(c1), cl_close(c2), cl_close(c3), cl_close(c4);
    th_stop(&T);
}

static void cap2(http_opts_t *o)
{
    o->max_conns = 2;
}

static void cap4(http_opts_t *o)
{
    o->max_conns = 4;
}

/* The loop thread blocked until a byte arrives on a pipe (test-made barrier). */
static int barrier[2];
static void block_loop(th_t *t, void *arg)
{
    (void)t;
    (void)arg;
    char b;
    cr_assert_eq(read(barrier[0], &b, 1), 1);
}
static void *blocker(void *arg)
{
    th_call(arg, block_loop, NULL);
    return NULL;
}
static bool evicted_at_least(th_t *t, void *arg) /* on the loop thread */
{
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.evicted >= *(uint64_t *)arg;
}

Test(http_limits, a_probe_accepted_in_a_burst_of_idle_connections_is_served)
{
    /* 4 idle sockets fill the slots. With the loop held, a probe connects
     * and sends its request, and 10 idle sockets connect behind it; then
     * the loop runs: libuv accepts all 11 in one callback, before any read.
     * The probe used to be the longest waiter by the 5th accept, and
     * evicted with its request unread; now a connection whose request has
     * arrived is not evicted: it is served. */
    start(cap4);
    cl_t *idle[4];
    for (int i = 0; i < 4; i++)
        idle[i] = cl_open(T.port, 0);
    unsigned four = 4;
    cr_assert(th_wait_until(&T, conns_are, &four, 5000));
    cr_assert_eq(pipe(barrier), 0);
    pthread_t th;
    pthread_create(&th, NULL, blocker, &T);
    cl_t *probe = cl_open(T.port, 0);
    cl_send(probe, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_t *churn[10];
    for (int i = 0; i < 10; i++)
        churn[i] = cl_open(T.port, 0); /* the kernel completes the handshake; the accept waits */
    cr_assert_eq(write(barrier[1], "x", 1), 1);
    pthread_join(th, NULL);
    close(barrier[0]);
    close(barrier[1]);
    cl_resp_t r;
    cr_assert_eq(cl_read(probe, &r, false), 0, "the probe was evicted");
    cr_assert_eq(r.status, 200);
    cl_resp_free(&r);
    uint64_t many = 10;
    cr_assert(th_wait_until(&T, evicted_at_least, &many, 5000), "idle sockets made room for each other");
    for (int i = 0; i < 4; i++)
        cl_close(idle[i]);
    for (int i = 0; i < 10; i++)
        cl_close(churn[i]);
    cl_close(probe);
    th_stop(&T);
}

Test(http_limits, past_the_cap_with_every_slot_writing_the_newcomer_gets_503)
{
    th_big_size = BIG;
    start(cap2);
    cl_t *c1 = cl_open(T.port, 4096), *c2 = cl_open(T.port, 4096);
    cl_send(c1, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_send(c2, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    size_t two = 2 * (size_t)BIG;
    cr_assert(th_wait_until(&T, writing_blocked, &two, 5000));
    cl_t *c3 = cl_open(T.port, 0);
    cl_resp_t r;
    cr_assert_eq(cl_read(c3, &r, false), 0);
    cr_assert_eq(r.status, 503);
    cr_assert(cl_eof(c3));
    cl_resp_free(&r);
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(st.conns, 2);
    cl_close(c1), cl_close(c2), cl_close(c3);
    th_stop(&T);
}

/* ---- drain -------------------------------------------------------------- */

Test(http_limits, drain_finishes_the_response_in_flight_and_closes_the_rest)
{
    th_big_size = BIG;
    start(NULL);
    cl_t *busy = cl_open(T.port, 4096), *idle = cl_open(T.port, 0);
    cl_send(busy, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    size_t one = BIG;
    cr_assert(th_wait_until(&T, writing_blocked, &one, 5000));
    th_drain(&T);
    cr_assert(cl_eof(idle), "an idle connection survived the drain");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)T.port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_neq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "still accepting while draining");
    close(fd);
    cl_resp_t r;
    cr_assert_eq(cl_read(busy, &r, false), 0);
    cr_assert_eq(r.body_len, BIG);
    cr_assert(cl_eof(busy));
    cl_resp_free(&r);
    cl_close(busy), cl_close(idle);
    th_stop(&T); /* asserts the done callback ran and no handle is left */
}

/* ---- the listener ------------------------------------------------------- */

Test(http_limits, listening_logs_the_bound_address)
{
    char path[] = "/tmp/tb_http_log_XXXXXX";
    int fd = mkstemp(path);
    tb_log_setup(TB_LOG_INFO, TB_LOG_TEXT, fd);
    start(NULL);
    tb_log_setup(TB_LOG_INFO, TB_LOG_TEXT, 2);
    char buf[4096] = "";
    cr_assert_geq(pread(fd, buf, sizeof buf - 1, 0), 0);
    close(fd);
    unlink(path);
    char want[64];
    snprintf(want, sizeof want, "msg=\"http listening\" addr=127.0.0.1:%d ", T.port);
    cr_assert_not_null(strstr(buf, want), "log: %s", buf);
    th_stop(&T);
}

static void v6_fn(th_t *t, void *arg)
{
    cr_assert_eq(http_server_new(&t->loop, NULL, &t->srv), 0);
    *(int *)arg = http_listen(t->srv, "[::1]:0");
}

Test(http_limits, ipv6_listener_serves)
{
    th_start(&T);
    int rc;
    th_call(&T, v6_fn, &rc);
    if (rc == UV_EADDRNOTAVAIL || rc == UV_EAFNOSUPPORT) {
        th_stop(&T);
        cr_skip_test("no IPv6 loopback here");
    }
    cr_assert_eq(rc, 0);
    const char *b = http_bound(T.srv);
    cr_assert_eq(strncmp(b, "[::1]:", 6), 0, "bound %s", b);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)atoi(b + 6)),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *req = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    char buf[256] = "";
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    cr_assert_gt(read(fd, buf, sizeof buf - 1), 0);
    cr_assert_eq(strncmp(buf, "HTTP/1.1 404 ", 13), 0, "got %s", buf);
    close(fd);
    th_stop(&T);
}

static void bad_addr_fn(th_t *t, void *arg)
{
    cr_assert_eq(http_server_new(&t->loop, NULL, &t->srv), 0);
    *(int *)arg = http_listen(t->srv, "no-port-here");
}

Test(http_limits, listener_address_without_port_is_a_config_error)
{
    th_start(&T);
    int rc;
    th_call(&T, bad_addr_fn, &rc);
    cr_assert_eq(rc, TB_ECONFIG);
    th_stop(&T);
}
