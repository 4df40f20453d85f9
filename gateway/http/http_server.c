/*
 * http_server.c: the listener, the connection slots, routing and the drain.
 *
 * Slots: at most opts.max_conns connections are open. When one more
 * arrives, the connection that has waited longest for a request (lingering
 * after a final response first, then idle or incomplete ones, oldest
 * first) is closed to make room: an idle keep-alive or a slowloris socket
 * is worth less than a new probe, and a flood of idle sockets cannot lock
 * the liveness probe out for the request timeout. Only when every slot is
 * writing a response is the newcomer accepted, sent a fixed 503 with
 * uv_try_write (no allocation, no buffering) and closed. Accepting before
 * refusing keeps libuv's accept loop going and tells the client why.
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <string.h>
#include <sys/socket.h>

#define LISTEN_BACKLOG 511

void http_opts_default(http_opts_t *o)
{
    o->max_head_bytes = 8192;
    o->request_timeout_ms = 5000;
    o->idle_timeout_ms = 10000;
    o->write_timeout_ms = 10000;
    o->linger_ms = 2000;
    o->answer_timeout_ms = 30000;
    o->max_conns = 64;
}

int http_server_new(uv_loop_t *loop, const http_opts_t *opts, http_server_t **out)
{
    http_server_t *s = tb_calloc(1, sizeof *s);
    s->loop = loop;
    if (opts)
        s->opts = *opts;
    else
        http_opts_default(&s->opts);
    if (s->opts.max_head_bytes < 64)
        s->opts.max_head_bytes = 64;
    if (s->opts.max_conns < 1)
        s->opts.max_conns = 1;
    if (s->opts.answer_timeout_ms == 0)
        s->opts.answer_timeout_ms = 30000;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    *out = s;
    return 0;
}

int http_route(http_server_t *s, const char *path, http_handler_fn fn, void *arg)
{
    return http_route_methods(s, HTTP_M_GET, path, fn, arg);
}

static int add_route(http_server_t *s, unsigned methods, const char *path, bool prefix, http_handler_fn fn, void *arg)
{
    if (!path || path[0] != '/' || !fn || !methods || (methods & ~(unsigned)(HTTP_M_GET | HTTP_M_POST)))
        return TB_EINVALID;
    for (size_t i = 0; i < s->nroutes; i++)
        if (strcmp(s->routes[i].path, path) == 0 && s->routes[i].prefix == prefix && (s->routes[i].methods & methods))
            return TB_EINVALID;
    if (s->nroutes == HTTP_MAX_ROUTES)
        return TB_EFULL;
    s->routes[s->nroutes].path = tb_strdup(path);
    s->routes[s->nroutes].methods = methods;
    s->routes[s->nroutes].prefix = prefix;
    s->routes[s->nroutes].fn = fn;
    s->routes[s->nroutes].arg = arg;
    s->nroutes++;
    return 0;
}

int http_route_methods(http_server_t *s, unsigned methods, const char *path, http_handler_fn fn, void *arg)
{
    return add_route(s, methods, path, false, fn, arg);
}

int http_route_prefix(http_server_t *s, unsigned methods, const char *prefix, http_handler_fn fn, void *arg)
{
    return add_route(s, methods, prefix, true, fn, arg);
}

/* Route i serves path: exactly, or (a prefix route) by its start when no exact route has the path. */
static bool route_matches(const http_server_t *s, size_t i, const char *path, bool exact_exists)
{
    if (!s->routes[i].prefix)
        return strcmp(s->routes[i].path, path) == 0;
    return !exact_exists && strncmp(s->routes[i].path, path, strlen(s->routes[i].path)) == 0;
}

static const char *methods_text(unsigned m)
{
    return m == (HTTP_M_GET | HTTP_M_POST) ? "GET, HEAD and POST" : m == HTTP_M_POST ? "POST" : "GET and HEAD";
}

int http__dispatch(http_server_t *s, http_req_t *req, tb_buf_t *out, const char **ctype, unsigned *allow)
{
    unsigned want = req->method == HTTP_POST ? HTTP_M_POST : req->method == HTTP_OTHER ? 0 : HTTP_M_GET;
    unsigned has = 0;
    bool exact = false;
    for (size_t i = 0; i < s->nroutes; i++)
        exact |= !s->routes[i].prefix && strcmp(s->routes[i].path, req->path) == 0;
    for (size_t i = 0; i < s->nroutes; i++)
        if (route_matches(s, i, req->path, exact))
            has |= s->routes[i].methods;
    if (!(has & want) && (has || req->method == HTTP_OTHER)) {
        *allow = has ? has : HTTP_M_GET;
        tb_buf_printf(out, "method not allowed: this endpoint serves %s\n", methods_text(*allow));
        return 405;
    }
    for (size_t i = 0; i < s->nroutes; i++) {
        if (!route_matches(s, i, req->path, exact) || !(s->routes[i].methods & want))
            continue;
        s->stats.handler_calls++;
        int status = s->routes[i].fn(s->routes[i].arg, req, out, ctype);
        if (status == HTTP_DEFER)
            return status; /* http_conn.c checks that http_defer was called */
        if (status < 100 || status > 599) {
            tb_warn("http handler returned an invalid status", TB_S("path", s->routes[i].path), TB_I("status", status));
            tb_buf_reset(out);
            *ctype = NULL;
            tb_buf_puts(out, "internal error\n");
            return 500;
        }
        return status;
    }
    tb_buf_puts(out, "not found\n");
    return 404;
}

/* ---- the list of open connections, longest waiting first ---------------- */

void http__list_append(http_server_t *s, http__conn_t *c)
{
    c->next = NULL;
    c->prev = s->tail;
    if (s->tail)
        s->tail->next = c;
    else
        s->head = c;
    s->tail = c;
}

void http__list_remove(http_server_t *s, http__conn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        s->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->tail = c->prev;
    c->prev = c->next = NULL;
}

/* Bytes of a request waiting in the kernel, not read yet. */
static int unread(const http__conn_t *c)
{
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, FIONREAD, &n) != 0)
        return 0;
    return n;
}

/*
 * Who makes room for a newcomer: a connection lingering after its last
 * response, else the one that has waited longest without a complete
 * request, but never one whose request is already in the kernel, unread.
 * libuv accepts every pending connection in one callback, before the
 * reads of that turn: a probe (/healthz) accepted in a burst of idle
 * sockets used to be pushed out by those behind it before its request was
 * read (26% of probes failed under a churn). A slot writing a response is
 * never taken; when none can be, the newcomer gets 503.
 */
static http__conn_t *eviction_victim(http_server_t *s)
{
    http__conn_t *waiting = NULL;
    for (http__conn_t *c = s->head; c; c = c->next) {
        if (c->state == HTTP__CONN_LINGER)
            return c;
        if (!waiting && (c->state == HTTP__CONN_READING || c->state == HTTP__CONN_IDLE) && unread(c) == 0)
            waiting = c;
    }
    return waiting;
}

/* ---- refusing at the cap ------------------------------------------------ */

static void refused_close_cb(uv_handle_t *h)
{
    http_server_t *s = h->data;
    free(h);
    http__released(s);
}

static void refuse(http_server_t *s)
{
    static const char resp[] = "HTTP/1.1 503 Service Unavailable\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: 21\r\n"
                               "Retry-After: 1\r\n"
                               "Connection: close\r\n\r\n"
                               "too many connections\n";
    uv_tcp_t *t = tb_malloc(sizeof *t);
    uv_tcp_init(s->loop, t);
    t->data = s;
    s->nalloc++;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)t) == 0) {
        uv_buf_t b = uv_buf_init((char *)resp, sizeof resp - 1);
        if (!s->tls) /* to a TLS client it would be garbage: closed unanswered */
            (void)uv_try_write((uv_stream_t *)t, &b, 1); /* best effort: a fresh socket has room */
        s->stats.refused++;
    }
    uv_close((uv_handle_t *)t, refused_close_cb);
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("http connection refused: every slot is busy writing", TB_U("max_conns", s->opts.max_conns),
                TB_U("suppressed", skipped));
}

static void connection_cb(uv_stream_t *server, int status)
{
    http_server_t *s = server->data;
    if (status < 0) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("http accept failed", TB_S("error", uv_strerror(status)), TB_U("suppressed", skipped));
        return;
    }
    if (s->closing)
        return;
    if (s->stats.conns >= s->opts.max_conns) {
        http__conn_t *victim = eviction_victim(s);
        if (!victim) {
            refuse(s);
            return;
        }
        s->stats.evicted++;
        http__conn_close(victim);
    }
    http__conn_accept(s);
}

/* ---- listen ------------------------------------------------------------- */

/* Splits "host:port" / "[v6]:port" into host and port. */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon;
    const char *h = addr;
    size_t hl;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':')
            return TB_ECONFIG;
        h = addr + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return TB_ECONFIG;
        hl = (size_t)(colon - addr);
    }
    if (hl == 0 || hl >= hostlen || strlen(colon + 1) == 0 || strlen(colon + 1) >= portlen)
        return TB_ECONFIG;
    memcpy(host, h, hl);
    host[hl] = '\0';
    strcpy(port, colon + 1);
    return 0;
}

static void format_bound(http_server_t *s)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[64] = "";
    s->bound[0] = '\0';
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, ip, sizeof ip);
        snprintf(s->bound, sizeof s->bound, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof ip);
        snprintf(s->bound, sizeof s->bound, "%s:%u", ip, ntohs(a->sin_port));
    }
}

int http_listen(http_server_t *s, const char *addr)
{
    char host[256], port[16];
    if (s->listening || s->closing)
        return TB_EINVALID;
    if (split_addr(addr, host, sizeof host, port, sizeof port) < 0) {
        tb_error("http listener address must be host:port or [ipv6]:port", TB_S("addr", addr));
        return TB_ECONFIG;
    }
    /* Resolving here blocks, once, at boot: the loop serves nothing yet. */
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0 || !res) {
        tb_error("http listener address does not resolve", TB_S("addr", addr), TB_S("error", gai_strerror(gai)));
        return TB_ECONFIG;
    }
    int rc = uv_tcp_bind(&s->listener, res->ai_addr, 0);
    freeaddrinfo(res);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, LISTEN_BACKLOG, connection_cb);
    if (rc < 0) {
        tb_error("http listen failed", TB_S("addr", addr), TB_S("error", uv_strerror(rc)));
        return rc;
    }
    s->listening = true;
    format_bound(s);
    tb_info("http listening", TB_S("addr", s->bound), TB_U("max_conns", s->opts.max_conns), TB_B("tls", s->tls != NULL));
    return 0;
}

void http_server_set_tls(http_server_t *s, tls_ctx_t *t)
{
    tls_ctx_unref(s->tls); /* connections made with it keep their SSL_CTX */
    s->tls = t;
}

const char *http_bound(const http_server_t *s)
{
    return s->listening ? s->bound : "";
}

void http_get_stats(const http_server_t *s, http_stats_t *out)
{
    *out = s->stats;
}

/* ---- drain -------------------------------------------------------------- */

void http__released(http_server_t *s)
{
    s->nalloc--;
    if (s->closing && s->listener_closed && s->nalloc == 0 && s->done) {
        void (*done)(void *) = s->done;
        s->done = NULL;
        done(s->done_arg);
    }
}

static void listener_close_cb(uv_handle_t *h)
{
    http_server_t *s = h->data;
    s->listener_closed = true;
    s->nalloc++; /* balance the release below */
    http__released(s);
}

void http_close(http_server_t *s, void (*done)(void *arg), void *arg)
{
    if (s->closing)
        return;
    s->closing = true;
    s->done = done;
    s->done_arg = arg;
    uv_close((uv_handle_t *)&s->listener, listener_close_cb);
    http__conn_t *next;
    for (http__conn_t *c = s->head; c; c = next) {
        next = c->next;
        http__conn_drain(c);
    }
}

void http_server_free(http_server_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nroutes; i++)
        free(s->routes[i].path);
    tls_ctx_unref(s->tls);
    free(s);
}
