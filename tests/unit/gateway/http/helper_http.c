/*
 * helper_http.c: the loop-in-a-thread harness and the blocking client of
 * helper_http.h.
 */
#include "helper_http.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

size_t th_big_size = 1 << 20;

/* ---- the loop thread ---------------------------------------------------- */

static void *loop_main(void *p)
{
    th_t *t = p;
    uv_run(&t->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void async_cb(uv_async_t *a)
{
    th_t *t = a->data;
    pthread_mutex_lock(&t->mu);
    th_fn fn = t->fn;
    void *arg = t->arg;
    t->fn = NULL;
    pthread_mutex_unlock(&t->mu);
    if (!fn)
        return;
    fn(t, arg);
    pthread_mutex_lock(&t->mu);
    t->called = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void th_start(th_t *t)
{
    memset(t, 0, sizeof *t);
    cr_assert_eq(uv_loop_init(&t->loop), 0);
    uv_async_init(&t->loop, &t->async, async_cb);
    t->async.data = t;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    cr_assert_eq(pthread_create(&t->thread, NULL, loop_main, t), 0);
}

void th_call(th_t *t, th_fn fn, void *arg)
{
    pthread_mutex_lock(&t->mu);
    t->fn = fn;
    t->arg = arg;
    t->called = false;
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    pthread_mutex_lock(&t->mu);
    while (!t->called)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

typedef struct {
    bool (*cond)(th_t *, void *);
    void *arg;
    bool result;
} check_t;

static void check_fn(th_t *t, void *arg)
{
    check_t *c = arg;
    c->result = c->cond(t, c->arg);
}

bool th_wait_until(th_t *t, bool (*cond)(th_t *, void *), void *arg, int timeout_ms)
{
    uint64_t deadline = tb_mono_ms() + (uint64_t)timeout_ms;
    check_t c = { cond, arg, false };
    for (;;) {
        th_call(t, check_fn, &c);
        if (c.result || tb_mono_ms() > deadline)
            return c.result;
        struct timespec ts = { 0, 2000000 }; /* poll interval, bounded by the deadline above */
        nanosleep(&ts, NULL);
    }
}

/* ---- test routes -------------------------------------------------------- */

static int route_text(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)req;
    (void)ctype;
    tb_buf_puts(out, arg);
    return 200;
}

static int route_big(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)arg;
    (void)req;
    *ctype = "application/octet-stream";
    for (size_t i = 0; i < th_big_size; i++)
        tb_buf_putc(out, (char)('a' + i % 26));
    return 200;
}

static int route_bad(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)arg;
    (void)req;
    (void)ctype;
    tb_buf_puts(out, "should not be sent");
    return 42;
}

http_pending_t *th_pending[TH_MAX_PENDING];
size_t th_npending;

/* /later: deferred (the test answers it with th_answer); "now" when http_defer refuses. */
static int route_later(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)arg;
    (void)ctype;
    http_pending_t *p = th_npending < TH_MAX_PENDING ? http_defer(req) : NULL;
    if (!p) {
        tb_buf_puts(out, "now");
        return 200;
    }
    th_pending[th_npending++] = p;
    return HTTP_DEFER;
}

typedef struct {
    size_t i;
    const char *text;
    bool gone;
} answer_args_t;

static void answer_fn(th_t *t, void *arg)
{
    (void)t;
    answer_args_t *a = arg;
    cr_assert_lt(a->i, th_npending);
    cr_assert_not_null(th_pending[a->i], "pending %zu answered twice", a->i);
    a->gone = http_pending_gone(th_pending[a->i]);
    tb_buf_t b = TB_BUF_INIT;
    tb_buf_puts(&b, a->text);
    http_pending_answer(th_pending[a->i], 200, NULL, &b);
    th_pending[a->i] = NULL;
}

bool th_answer(th_t *t, size_t i, const char *text)
{
    answer_args_t a = { i, text, false };
    th_call(t, answer_fn, &a);
    return a.gone;
}

static void port_from_bound(th_t *t, const char *bound)
{
    const char *colon = strrchr(bound, ':');
    cr_assert_not_null(colon, "bound address \"%s\"", bound);
    t->port = atoi(colon + 1);
}

static void server_fn(th_t *t, void *arg)
{
    cr_assert_eq(http_server_new(&t->loop, arg, &t->srv), 0);
    http_route(t->srv, "/a", route_text, "A");
    http_route(t->srv, "/b", route_text, "B");
    http_route(t->srv, "/big", route_big, NULL);
    http_route(t->srv, "/bad", route_bad, NULL);
    http_route(t->srv, "/later", route_later, NULL);
    /* method routes: POST only, and one path with a GET and a POST route */
    cr_assert_eq(http_route_methods(t->srv, HTTP_M_POST, "/p", route_text, "P"), 0);
    cr_assert_eq(http_route_methods(t->srv, HTTP_M_GET, "/both", route_text, "G"), 0);
    cr_assert_eq(http_route_methods(t->srv, HTTP_M_POST, "/both", route_text, "W"), 0);
    cr_assert_eq(http_route_methods(t->srv, HTTP_M_POST, "/both", route_text, "again"), TB_EINVALID);
    cr_assert_eq(http_route_methods(t->srv, 0, "/none", route_text, "x"), TB_EINVALID);
    cr_assert_eq(http_listen(t->srv, "127.0.0.1:0"), 0);
    port_from_bound(t, http_bound(t->srv));
}

void th_server(th_t *t, const http_opts_t *opts)
{
    th_call(t, server_fn, (void *)opts);
}

typedef struct {
    const http_opts_t *opts;
    tls_ctx_t *tls;
} tls_args_t;

static void server_tls_fn(th_t *t, void *arg)
{
    tls_args_t *a = arg;
    cr_assert_eq(http_server_new(&t->loop, a->opts, &t->srv), 0);
    http_server_set_tls(t->srv, a->tls);
    http_route(t->srv, "/a", route_text, "A");
    http_route(t->srv, "/b", route_text, "B");
    http_route(t->srv, "/big", route_big, NULL);
    cr_assert_eq(http_listen(t->srv, "127.0.0.1:0"), 0);
    port_from_bound(t, http_bound(t->srv));
}

void th_server_tls(th_t *t, const http_opts_t *opts, tls_ctx_t *tls)
{
    tls_args_t a = { opts, tls };
    th_call(t, server_tls_fn, &a);
}

static void set_tls_fn(th_t *t, void *arg)
{
    http_server_set_tls(t->srv, arg);
}

void th_set_tls(th_t *t, tls_ctx_t *tls)
{
    th_call(t, set_tls_fn, tls);
}

tls_ctx_t *th_tls_ctx(const char *cert, const char *key)
{
    cfg_tls_t k = { .cert_file = (char *)cert, .key_file = (char *)key, .ca_file = "", .ciphers = "" };
    tls_ctx_t *t = NULL;
    char err[512];
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "unit-http", &t, err, sizeof err), 0, "%s", err);
    return t;
}

typedef struct {
    const http_service_opts_t *o;
    const http_provider_t *p;
} svc_args_t;

const http_admin_ops_t *th_admin_ops;

static void service_fn(th_t *t, void *arg)
{
    svc_args_t *a = arg;
    cr_assert_eq(http_service_new(&t->loop, a->o, t->m, a->p, &t->svc), 0);
    http_service_set_admin(t->svc, th_admin_ops);
    cr_assert_eq(http_service_listen(t->svc, "127.0.0.1:0"), 0);
    t->srv = http_service_server(t->svc);
    port_from_bound(t, http_bound(t->srv));
}

void th_service(th_t *t, const http_service_opts_t *o, metrics_t *m, const http_provider_t *p)
{
    t->m = m;
    svc_args_t a = { o, p };
    th_call(t, service_fn, &a);
}

static void stats_fn(th_t *t, void *arg)
{
    http_get_stats(t->srv, arg);
}

http_stats_t th_stats(th_t *t)
{
    http_stats_t st;
    th_call(t, stats_fn, &st);
    return st;
}

static void closed_cb(void *arg)
{
    ((th_t *)arg)->closed = true;
}

static void drain_fn(th_t *t, void *arg)
{
    (void)arg;
    if (t->draining)
        return;
    t->draining = true;
    if (t->svc)
        http_service_close(t->svc, closed_cb, t);
    else if (t->srv)
        http_close(t->srv, closed_cb, t);
    else
        t->closed = true;
}

void th_drain(th_t *t)
{
    th_call(t, drain_fn, NULL);
}

static void stop_fn(th_t *t, void *arg)
{
    drain_fn(t, arg);
    uv_close((uv_handle_t *)&t->async, NULL);
}

void th_stop(th_t *t)
{
    th_call(t, stop_fn, NULL);
    pthread_join(t->thread, NULL);
    cr_assert(t->closed, "the drain's done callback did not run");
    if (t->svc)
        http_service_free(t->svc);
    else
        http_server_free(t->srv);
    cr_assert_eq(uv_loop_close(&t->loop), 0, "handles left open on the loop");
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

/* ---- the client --------------------------------------------------------- */

cl_t *cl_open(int port, int rcvbuf)
{
    cl_t *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(c->fd, 0);
    if (rcvbuf > 0)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct timeval tv = { 5, 0 };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    return c;
}

cl_t *cl_open_tls(int port, const char *cafile, char *why, size_t whylen)
{
    cl_t *c = cl_open(port, 0);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, cafile, NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL *ssl = SSL_new(ctx);
    SSL_CTX_free(ctx);
    SSL_set_fd(ssl, c->fd);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
    if (SSL_connect(ssl) != 1) {
        unsigned long e = ERR_peek_last_error();
        snprintf(why, whylen, "%s", e ? ERR_reason_error_string(e) : "closed");
        ERR_clear_error();
        SSL_free(ssl);
        cl_close(c);
        return NULL;
    }
    c->ssl = ssl;
    return c;
}

void cl_peer_cn(cl_t *c, char *out, size_t n)
{
    out[0] = '\0';
    X509 *x = c->ssl ? SSL_get0_peer_certificate(c->ssl) : NULL;
    if (x)
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, out, (int)n);
}

/* recv(2), or SSL_read over TLS (0 at the end of the stream, close_notify or not). */
static ssize_t cl_recv(cl_t *c, void *p, size_t n)
{
    if (!c->ssl)
        return recv(c->fd, p, n, 0);
    int k = SSL_read(c->ssl, p, (int)n);
    if (k > 0)
        return k;
    int e = SSL_get_error(c->ssl, k);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) || e == SSL_ERROR_SSL)
        return 0;
    return -1;
}

void cl_sendn(cl_t *c, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = c->ssl ? SSL_write(c->ssl, s, (int)n) : send(c->fd, s, n, MSG_NOSIGNAL);
        cr_assert_gt(w, 0, "send: %s", strerror(errno));
        s += w;
        n -= (size_t)w;
    }
}

void cl_send(cl_t *c, const char *s)
{
    cl_sendn(c, s, strlen(s));
}

static ssize_t fill(cl_t *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n = cl_recv(c, c->buf + c->len, sizeof c->buf - c->len);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

static void consume(cl_t *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

const char *cl_header(const cl_resp_t *r, const char *name, char *buf, size_t n)
{
    size_t k = strlen(name);
    buf[0] = '\0';
    for (const char *l = strstr(r->head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, k) == 0 && l[2 + k] == ':') {
            const char *v = l + 3 + k;
            while (*v == ' ')
                v++;
            size_t vl = strcspn(v, "\r");
            snprintf(buf, n, "%.*s", (int)vl, v);
            break;
        }
    }
    return buf;
}

int cl_read(cl_t *c, cl_resp_t *r, bool head_only)
{
    memset(r, 0, sizeof *r);
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        if (fill(c) <= 0)
            return -1;
    size_t hl = (size_t)(end - c->buf) + 4;
    if (hl >= sizeof r->head)
        return -1;
    memcpy(r->head, c->buf, hl);
    r->head[hl] = '\0';
    consume(c, hl);
    if (sscanf(r->head, "HTTP/1.1 %d", &r->status) != 1)
        return -1;
    char cl[32];
    size_t blen = head_only ? 0 : strtoull(cl_header(r, "Content-Length", cl, sizeof cl), NULL, 10);
    r->body = malloc(blen + 1);
    size_t got = TB_MIN(blen, c->len);
    memcpy(r->body, c->buf, got);
    consume(c, got);
    while (got < blen) {
        ssize_t n = cl_recv(c, r->body + got, blen - got);
        if (n <= 0) {
            cl_resp_free(r);
            return -1;
        }
        got += (size_t)n;
    }
    r->body[blen] = '\0';
    r->body_len = blen;
    return 0;
}

void cl_resp_free(cl_resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

bool cl_eof(cl_t *c)
{
    if (c->len > 0)
        return false;
    ssize_t n = fill(c);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

void cl_close(cl_t *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    close(c->fd);
    free(c);
}

int cl_get(int port, const char *path, char *body, size_t n)
{
    cl_t *c = cl_open(port, 0);
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
    cl_send(c, req);
    cl_resp_t r;
    int rc = cl_read(c, &r, false);
    cl_close(c);
    if (rc < 0)
        return -1;
    if (body)
        snprintf(body, n, "%s", r.body);
    cl_resp_free(&r);
    return r.status;
}
