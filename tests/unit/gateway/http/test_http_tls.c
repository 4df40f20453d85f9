/*
 * The HTTP server over TLS (http_tls.c) on a real socket: requests and
 * keep-alive inside TLS, pipelined requests past the head buffer read
 * from what the stream kept, the limits (408 and 431 inside TLS, a stalled
 * handshake cut at the request deadline, counted as such), plain HTTP
 * instead of a ClientHello closing that connection alone, close_notify
 * after the last response, a context swapped while a connection stays,
 * and one encrypted response held per slow reader. Certificates are made
 * by the test (self-signed, IP 127.0.0.1) in a directory of its own.
 */
#include <criterion/criterion.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit/gateway/tls/helper_cert.h"
#include "base/base.h"
#include "helper_http.h"

TestSuite(http_tls, .timeout = 60);

static th_t T;
static char dir[64], cert_a[128], key_a[128], cert_b[128], key_b[128];

static void make_certs(void)
{
    snprintf(dir, sizeof dir, "/tmp/tb_https_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    hc_make_cert(dir, "a", "http-a", cert_a, key_a);
    hc_make_cert(dir, "b", "http-b", cert_b, key_b);
}

static void rm_certs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void start(void (*tune)(http_opts_t *o))
{
    make_certs();
    http_opts_t o;
    http_opts_default(&o);
    if (tune)
        tune(&o);
    th_start(&T);
    th_server_tls(&T, &o, th_tls_ctx(cert_a, key_a));
}

static void stop(void)
{
    th_stop(&T);
    rm_certs();
}

static cl_t *open_tls(void)
{
    char why[256];
    cl_t *c = cl_open_tls(T.port, cert_a, why, sizeof why);
    cr_assert_not_null(c, "handshake: %s", why);
    return c;
}

static int get(cl_t *c, const char *path, cl_resp_t *r)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    cl_send(c, req);
    return cl_read(c, r, false);
}

Test(http_tls, requests_and_keep_alive_inside_tls)
{
    start(NULL);
    cl_t *c = open_tls();
    cl_resp_t r;
    cr_assert_eq(get(c, "/a", &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "A");
    cl_resp_free(&r);
    cr_assert_eq(get(c, "/b", &r), 0, "the same connection serves the next request");
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    cl_send(c, "HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_read(c, &r, true), 0);
    char v[32];
    cr_assert_str_eq(cl_header(&r, "Content-Length", v, sizeof v), "1");
    cl_resp_free(&r);
    /* a large body crosses as many records */
    th_big_size = 300000;
    cr_assert_eq(get(c, "/big", &r), 0);
    cr_assert_eq(r.body_len, 300000);
    cr_assert_eq(r.body[299999], (char)('a' + 299999 % 26));
    cl_resp_free(&r);
    cl_close(c);
    cr_assert_eq(th_stats(&T).tls_handshake_failures, 0);
    stop();
}

Test(http_tls, pipelined_requests_past_the_head_buffer_are_all_answered)
{
    start(NULL);
    cl_t *c = open_tls();
    /* 40 requests in one write: more than the 8 KiB head buffer takes at once */
    tb_buf_t all = TB_BUF_INIT;
    for (int i = 0; i < 40; i++)
        tb_buf_printf(&all, "GET /%s HTTP/1.1\r\nHost: t\r\nX-Pad: %0200d\r\n\r\n", i % 2 ? "b" : "a", i);
    cr_assert_gt(all.len, 8192);
    cl_sendn(c, all.data, all.len);
    tb_buf_free(&all);
    for (int i = 0; i < 40; i++) {
        cl_resp_t r;
        cr_assert_eq(cl_read(c, &r, false), 0, "response %d", i);
        cr_assert_str_eq(r.body, i % 2 ? "B" : "A", "response %d", i);
        cl_resp_free(&r);
    }
    cl_close(c);
    stop();
}

#define REQ_MS 500

static void short_request(http_opts_t *o)
{
    o->request_timeout_ms = REQ_MS;
}

static bool handshake_timed_out(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.timeouts[METRICS_HTTP_TIMEOUT_HANDSHAKE] == 1;
}

Test(http_tls, a_stalled_handshake_is_cut_at_the_request_deadline)
{
    start(short_request);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"); /* the start of a ClientHello, then silence */
    uint64_t t0 = tb_mono_ms();
    cr_assert(cl_eof(c), "closed, nothing answered");
    uint64_t elapsed = tb_mono_ms() - t0;
    cr_assert_geq(elapsed, REQ_MS - 20);
    cr_assert_lt(elapsed, REQ_MS + 400);
    cr_assert(th_wait_until(&T, handshake_timed_out, NULL, 2000));
    cr_assert_eq(th_stats(&T).timeouts[METRICS_HTTP_TIMEOUT_REQUEST], 0, "not a request timeout");
    cl_close(c);
    stop();
}

Test(http_tls, a_silent_client_after_the_handshake_gets_408_inside_tls)
{
    start(short_request);
    cl_t *c = open_tls();
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 408);
    cr_assert(cl_eof(c));
    cr_assert_eq(th_stats(&T).timeouts[METRICS_HTTP_TIMEOUT_REQUEST], 1);
    cl_resp_free(&r);
    cl_close(c);
    stop();
}

Test(http_tls, a_head_over_the_limit_gets_431_inside_tls)
{
    start(NULL);
    cl_t *c = open_tls();
    char big[9000];
    memset(big, 'x', sizeof big);
    cl_send(c, "GET /a HTTP/1.1\r\nX-Big: ");
    cl_sendn(c, big, sizeof big);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 431);
    cl_resp_free(&r);
    cl_close(c);
    stop();
}

static bool one_failure(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.tls_handshake_failures == 1;
}

Test(http_tls, plain_http_on_the_tls_port_closes_that_connection_only)
{
    start(NULL);
    cl_t *good = open_tls();
    cl_t *plain = cl_open(T.port, 0);
    cl_send(plain, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    char buf[512];
    ssize_t n, total = 0;
    while ((n = recv(plain->fd, buf, sizeof buf, 0)) > 0) /* the alert, nothing in clear */
        total += n;
    cr_assert_lt(total, 64, "an alert at most, no HTTP answer");
    cr_assert(th_wait_until(&T, one_failure, NULL, 2000));
    cl_close(plain);
    cl_resp_t r;
    cr_assert_eq(get(good, "/a", &r), 0, "the TLS connection made before goes on");
    cr_assert_eq(r.status, 200);
    cl_resp_free(&r);
    cl_close(good);
    stop();
}

Test(http_tls, the_last_response_ends_with_close_notify)
{
    start(NULL);
    cl_t *c = open_tls();
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cl_resp_free(&r);
    char b[16];
    cr_assert_eq(SSL_read(c->ssl, b, sizeof b), 0);
    cr_assert_eq(SSL_get_error(c->ssl, 0), SSL_ERROR_ZERO_RETURN, "a clean end, not a cut");
    cl_close(c);
    stop();
}

Test(http_tls, a_new_context_serves_new_handshakes_and_established_ones_stay)
{
    start(NULL);
    cl_t *kept = open_tls();
    char cn[64];
    cl_peer_cn(kept, cn, sizeof cn);
    cr_assert_str_eq(cn, "http-a");
    th_set_tls(&T, th_tls_ctx(cert_b, key_b));
    char why[256];
    cl_t *fresh = cl_open_tls(T.port, cert_b, why, sizeof why);
    cr_assert_not_null(fresh, "%s", why);
    cl_peer_cn(fresh, cn, sizeof cn);
    cr_assert_str_eq(cn, "http-b");
    cl_resp_t r;
    cr_assert_eq(get(fresh, "/a", &r), 0);
    cl_resp_free(&r);
    cr_assert_eq(get(kept, "/b", &r), 0, "the connection made before keeps its session");
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    cl_close(fresh);
    cl_close(kept);
    stop();
}

static bool writing_blocked(th_t *t, void *arg)
{
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.out_bytes >= *(size_t *)arg;
}

Test(http_tls, a_slow_reader_costs_one_encrypted_response)
{
    start(NULL);
    th_big_size = 4u << 20;
    char why[256];
    cl_t *c = cl_open_tls(T.port, cert_a, why, sizeof why);
    cr_assert_not_null(c, "%s", why);
    int small = 4096;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    /* three requests at once; the client reads nothing */
    cl_send(c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\nGET /big HTTP/1.1\r\nHost: t\r\n\r\nGET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    size_t want = th_big_size;
    cr_assert(th_wait_until(&T, writing_blocked, &want, 5000), "the first response is being written");
    http_stats_t st = th_stats(&T);
    /* the ciphertext of one response: its plaintext plus 22 bytes a record at most (TLS 1.3 AES-GCM) */
    cr_assert_lt(st.out_high_water, th_big_size + th_big_size / 16384 * 64 + 4096, "%zu", st.out_high_water);
    cr_assert_lt(st.out_bytes, 2 * th_big_size, "one response held, not three");
    cl_close(c);
    stop();
}

Test(http_tls, a_client_hello_on_the_plain_endpoint_gets_400_at_once)
{
    th_start(&T);
    th_server(&T, NULL);
    cl_t *c = cl_open(T.port, 0);
    uint64_t t0 = tb_mono_ms();
    cl_send(c, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 400);
    cr_assert(strstr(r.body, "not TLS"), "%s", r.body);
    cr_assert_lt(tb_mono_ms() - t0, 1000, "not at the request deadline");
    cl_resp_free(&r);
    cl_close(c);
    th_stop(&T);
}

Test(http_tls, a_request_followed_by_close_notify_is_answered)
{
    start(NULL);
    cl_t *c = open_tls();
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    SSL_shutdown(c->ssl); /* the client is done sending, as with a FIN after its request */
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0, "what came before the close_notify is answered");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "A");
    cl_resp_free(&r);
    cr_assert(cl_eof(c), "then the connection ends");
    cl_close(c);
    stop();
}
