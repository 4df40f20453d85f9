/*
 * helper_http.h: test harness for the HTTP server and endpoints.
 *
 * The server runs on a libuv loop in its own thread, as in the gateway;
 * the test thread is the client, with blocking sockets whose every read has
 * a timeout. Anything that touches the server (creating it, reading its
 * counters, draining it) runs on the loop thread through th_call(), which
 * waits until it has run: no sleeps stand in for synchronisation, and
 * th_wait_until() polls a condition on the loop thread with a deadline.
 */
#ifndef TEST_HELPER_HTTP_H
#define TEST_HELPER_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "gateway/http/http.h"

typedef struct th th_t;
typedef void (*th_fn)(th_t *t, void *arg);

struct th {
    uv_loop_t loop;
    uv_async_t async;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    th_fn fn;
    void *arg;
    bool called;
    http_server_t *srv;  /* th_server() */
    http_service_t *svc; /* th_service() */
    metrics_t *m;
    bool draining;          /* th_drain() was called */
    bool closed;            /* the drain's done callback ran */
    int port;
};

void th_start(th_t *t);
void th_call(th_t *t, th_fn fn, void *arg);
/* Polls cond on the loop thread every few ms until it is true or timeout_ms passes; returns the last value. */
bool th_wait_until(th_t *t, bool (*cond)(th_t *t, void *arg), void *arg, int timeout_ms);
/* A server on 127.0.0.1:0 with the test routes (see helper_http.c); opts NULL: defaults. */
void th_server(th_t *t, const http_opts_t *opts);
/* The same serving HTTPS with tls (taken over). */
void th_server_tls(th_t *t, const http_opts_t *opts, tls_ctx_t *tls);
/* http_server_set_tls on the loop thread (a reload). */
void th_set_tls(th_t *t, tls_ctx_t *tls);

/* A context from cert and key (asserted to load). */
tls_ctx_t *th_tls_ctx(const char *cert, const char *key);
/* The admin ops th_service gives the service (NULL: none). */
extern const http_admin_ops_t *th_admin_ops;
/* The endpoint service over registry m with provider p on 127.0.0.1:0. */
void th_service(th_t *t, const http_service_opts_t *o, metrics_t *m, const http_provider_t *p);
http_stats_t th_stats(th_t *t);
/* Starts draining the server or service (on the loop thread) and returns. */
void th_drain(th_t *t);
/* Drains the server or service (unless th_drain did), stops the loop, joins, and asserts the loop closed with no handle left. */
void th_stop(th_t *t);

/* Test routes mounted by th_server: /a -> "A", /b -> "B", /big -> th_big_size bytes, /bad -> status 42,
 * /later -> a deferred answer. */
extern size_t th_big_size;
/* /later defers its answer: the pendings, in arrival order (loop thread's; read them through th_call). */
#define TH_MAX_PENDING 16
extern http_pending_t *th_pending[TH_MAX_PENDING];
extern size_t th_npending;
/* Answers pending i with 200 text on the loop thread; returns whether it was gone already. */
bool th_answer(th_t *t, size_t i, const char *text);

/* ---- a blocking client ---- */
typedef struct cl {
    int fd;
    void *ssl;      /* an OpenSSL SSL over fd (cl_open_tls); NULL: plain */
    char buf[1 << 16];
    size_t len;
} cl_t;

typedef struct cl_resp {
    int status;
    char head[8192];  /* status line and headers */
    char *body;       /* malloc'd, NUL-terminated */
    size_t body_len;
} cl_resp_t;

/* Connects to 127.0.0.1:port with a receive timeout of 5 s (rcvbuf > 0: SO_RCVBUF before connecting). */
cl_t *cl_open(int port, int rcvbuf);
/* Connects and completes a TLS handshake trusting cafile (the server's
 * name checked as IP 127.0.0.1); NULL when the handshake fails (why says). */
cl_t *cl_open_tls(int port, const char *cafile, char *why, size_t whylen);
/* The CN of the certificate the server sent ("" without TLS). */
void cl_peer_cn(cl_t *c, char *out, size_t n);
void cl_send(cl_t *c, const char *s);
void cl_sendn(cl_t *c, const void *p, size_t n);
/* Reads one response (head_only: a HEAD response, no body). 0, or -1 on EOF/timeout/garbage. */
int cl_read(cl_t *c, cl_resp_t *r, bool head_only);
void cl_resp_free(cl_resp_t *r);
/* A header's value in r ("" when absent). */
const char *cl_header(const cl_resp_t *r, const char *name, char *buf, size_t n);
/* True when the server closed the connection (read returns 0 or a reset) within the receive timeout. */
bool cl_eof(cl_t *c);
void cl_close(cl_t *c);
/* One GET on a new connection; returns the status, body copied into body (may be NULL). */
int cl_get(int port, const char *path, char *body, size_t n);

#endif
