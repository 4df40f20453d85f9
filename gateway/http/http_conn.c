/*
 * http_conn.c: one HTTP connection's state machine (states in http_int.h).
 *
 *   accept --> READING --head complete--> WRITING --written--> IDLE (keep-alive,
 *                 ^                          |                  nothing buffered)
 *                 |                          +--> READING (bytes of the next
 *                 +---- first byte ---- IDLE |     request already buffered)
 *                                            +--> LINGER (last response) --EOF--> closed
 *   READING --request deadline--> 408, LINGER
 *   READING --head over the limit--> 431, LINGER;  bad head --> 400/413/505, LINGER
 *   IDLE --idle deadline--> closed;  WRITING --write deadline--> closed
 *   READING --handler returned HTTP_DEFER--> WAITING --http_pending_answer--> WRITING
 *   WAITING --answer deadline--> 504, LINGER;  WAITING --drain--> 503, LINGER
 *
 * One timer per connection carries whichever deadline the state has. The
 * request deadline runs from the accept (or from the first byte of a later
 * request), not from the last byte, so trickling bytes cannot extend it.
 * While WRITING, reading is stopped: the client's further requests stay in
 * the kernel, and the server holds at most one response per connection.
 * Response buffers are freed in the write callback.
 *
 * With http.tls (http_tls.c) the same machine runs over the connection's
 * TLS stream: reads feed it and plaintext lands in c->in; a response is
 * encrypted into c->tx and written as one buffer; the final one is
 * followed by close_notify before the FIN. The handshake happens in
 * READING: the request deadline, from the accept, covers it, and closes a
 * connection whose handshake it interrupts (there is no session for a 408).
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void process(http__conn_t *c);

static void close_cb(uv_handle_t *h)
{
    http__conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    http_server_t *s = c->srv;
    tb_buf_free(&c->head);
    tb_buf_free(&c->body);
    tb_buf_free(&c->tx);
    tls_stream_free(c->tls);
    free(c->in);
    free(c);
    http__released(s);
}

static void pending_unref(http_pending_t *p)
{
    if (--p->refs == 0)
        free(p);
}

/* The connection stops waiting for its deferred answer (answered, timed
 * out, drained, closed): its reference goes, the handler's stays. */
static void detach(http__conn_t *c)
{
    http_pending_t *p = c->pending;
    if (!p)
        return;
    c->pending = NULL;
    p->conn = NULL;
    c->srv->stats.pending--;
    pending_unref(p);
}

void http__conn_close(http__conn_t *c)
{
    if (c->state == HTTP__CONN_CLOSING)
        return;
    detach(c);
    c->state = HTTP__CONN_CLOSING;
    http__list_remove(c->srv, c);
    c->srv->stats.conns--;
    uv_close((uv_handle_t *)&c->tcp, close_cb);
    uv_close((uv_handle_t *)&c->timer, close_cb);
}

static void timer_cb(uv_timer_t *t);

static void set_deadline(http__conn_t *c, uint64_t ms)
{
    uv_timer_start(&c->timer, timer_cb, ms, 0);
}

/* Enters a waiting state (READING or IDLE) as the newest waiter. */
static void wait_for_request(http__conn_t *c, http__conn_state_t st)
{
    http_server_t *s = c->srv;
    c->state = st;
    http__list_remove(s, c);
    http__list_append(s, c);
    set_deadline(c, st == HTTP__CONN_READING ? s->opts.request_timeout_ms : s->opts.idle_timeout_ms);
}

/* Fills c->peer ("ADDR:PORT") and says whether the peer is loopback:
 * 127.0.0.0/8, ::1, or an IPv4-mapped 127.0.0.0/8 (::ffff:127.x.y.z). */
static bool read_peer(http__conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        return false;
    char ip[64] = "";
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a4, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(a4->sin_port));
        return (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family != AF_INET6)
        return false;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
    uv_ip6_name(a6, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(a6->sin6_port));
    const struct in6_addr *a = &a6->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a))
        return true;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
}

void http__conn_accept(http_server_t *s)
{
    http__conn_t *c = tb_calloc(1, sizeof *c);
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    s->nalloc++;
    s->stats.conns++;
    http__list_append(s, c);
    c->state = HTTP__CONN_READING;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) < 0 || (s->tls && !http__tls_open(c)) ||
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0) {
        http__conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->peer_loopback = read_peer(c);
    s->stats.accepted++;
    set_deadline(c, s->opts.request_timeout_ms);
}

/* ---- responses ---------------------------------------------------------- */

static void linger(http__conn_t *c);
static void next_request(http__conn_t *c);

static void write_cb(uv_write_t *wr, int status)
{
    http__conn_t *c = wr->data;
    http_server_t *s = c->srv;
    s->stats.out_bytes -= c->out_len;
    c->out_len = 0;
    tb_buf_free(&c->head);
    tb_buf_free(&c->body);
    tb_buf_free(&c->tx);
    if (c->state == HTTP__CONN_CLOSING)
        return; /* closed while writing (deadline, eviction): UV_ECANCELED */
    if (status < 0)
        http__conn_close(c);
    else if (c->close_after)
        linger(c);
    else if (s->closing)
        http__conn_close(c);
    else
        next_request(c);
}

static void put_date(tb_buf_t *b)
{
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    tb_buf_printf(b, "Date: %s\r\n", date);
}

/* TLS: the response bufs[0..*n) encrypted into c->tx as one buffer, the
 * plaintext freed (a connection holds one copy of its response). 0, or
 * the stream's error (nothing to write then). */
static int encrypt(http__conn_t *c, uv_buf_t *bufs, unsigned *n)
{
    int rc = 0;
    for (unsigned i = 0; i < *n && rc == 0; i++)
        rc = tls_stream_write(c->tls, bufs[i].base, bufs[i].len);
    tb_buf_free(&c->head);
    tb_buf_free(&c->body);
    if (rc < 0) {
        tb_buf_free(&c->tx);
        return rc;
    }
    bufs[0] = uv_buf_init(c->tx.data, (unsigned)c->tx.len);
    *n = 1;
    return 0;
}

/*
 * Sends status + body (taken over: *body is left empty). head_only: HEAD,
 * the headers say what GET would send. close: the last response on this
 * connection. minor: the request's HTTP/1.x (0: say keep-alive explicitly).
 */
static void respond(http__conn_t *c, int status, const char *ctype, tb_buf_t *body, bool head_only, bool close,
                    int minor, unsigned allow)
{
    http_server_t *s = c->srv;
    close = close || s->closing;
    c->close_after = close;
    c->body = *body;
    *body = (tb_buf_t)TB_BUF_INIT;
    tb_buf_t *h = &c->head;
    tb_buf_printf(h, "HTTP/1.1 %d %s\r\n", status, http_reason(status));
    put_date(h);
    tb_buf_printf(h, "Content-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n",
                  ctype ? ctype : "text/plain; charset=utf-8", c->body.len);
    if (status == 405)
        tb_buf_printf(h, "Allow: %s%s%s\r\n", (allow & HTTP_M_GET) || !allow ? "GET, HEAD" : "",
                      (allow & HTTP_M_GET) && (allow & HTTP_M_POST) ? ", " : "", allow & HTTP_M_POST ? "POST" : "");
    if (status == 401)
        tb_buf_puts(h, "WWW-Authenticate: Bearer realm=\"tributary\"\r\n"
                       "WWW-Authenticate: Basic realm=\"tributary\", charset=\"UTF-8\"\r\n");
    if (close)
        tb_buf_puts(h, "Connection: close\r\n");
    else if (minor == 0)
        tb_buf_puts(h, "Connection: keep-alive\r\n");
    tb_buf_puts(h, "\r\n");

    uv_buf_t bufs[2] = { uv_buf_init(h->data, (unsigned)h->len), uv_buf_init(c->body.data, (unsigned)c->body.len) };
    unsigned nbufs = head_only || c->body.len == 0 ? 1 : 2;
    if (c->tls && encrypt(c, bufs, &nbufs) < 0) {
        http__conn_close(c);
        return;
    }
    c->out_len = bufs[0].len + (nbufs == 2 ? bufs[1].len : 0);
    s->stats.out_bytes += c->out_len;
    if (c->out_len > s->stats.out_high_water)
        s->stats.out_high_water = c->out_len;
    s->stats.responses++;
    s->stats.by_code[metrics_http_code_index(status)]++;

    c->state = HTTP__CONN_WRITING;
    uv_read_stop((uv_stream_t *)&c->tcp);
    set_deadline(c, s->opts.write_timeout_ms);
    c->wr.data = c;
    int rc = uv_write(&c->wr, (uv_stream_t *)&c->tcp, bufs, nbufs, write_cb);
    if (rc < 0) { /* the callback will not run */
        s->stats.out_bytes -= c->out_len;
        c->out_len = 0;
        tb_buf_free(&c->head);
        tb_buf_free(&c->body);
        tb_buf_free(&c->tx);
        http__conn_close(c);
    }
}

static void respond_error(http__conn_t *c, int status, const char *text)
{
    tb_buf_t body = TB_BUF_INIT;
    tb_buf_printf(&body, "%s\n", text);
    respond(c, status, NULL, &body, false, true, 1, 0);
}

/* ---- after a response --------------------------------------------------- */

static void shutdown_cb(uv_shutdown_t *sd, int status)
{
    http__conn_t *c = sd->data;
    if (status < 0 && c->state != HTTP__CONN_CLOSING)
        http__conn_close(c);
}

/* Sends FIN, then reads and discards until the client closes or the linger deadline. */
static void linger(http__conn_t *c)
{
    c->state = HTTP__CONN_LINGER;
    set_deadline(c, c->srv->opts.linger_ms);
    c->sd.data = c;
    if (c->tls) {
        tls_stream_close_notify(c->tls); /* the client knows the response was not cut */
        if (http__tls_flush(c) < 0) {
            http__conn_close(c);
            return;
        }
    }
    if (uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, shutdown_cb) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0)
        http__conn_close(c);
}

/* TLS: after the client's close_notify, a connection with no response
 * under way has nothing more coming: ours, then closed. */
static bool tls_peer_gone(http__conn_t *c)
{
    if (!c->tls_peer_done || (c->state != HTTP__CONN_READING && c->state != HTTP__CONN_IDLE))
        return false;
    tls_stream_close_notify(c->tls);
    (void)http__tls_flush(c); /* best effort: the socket closes now */
    http__conn_close(c);
    return true;
}

static void next_request(http__conn_t *c)
{
    /* TLS: what the last read left in the stream was not reported by libuv: read it now */
    if (c->tls && tls_stream_pending(c->tls) && http__tls_pump(c) < 0) {
        http__conn_close(c);
        return;
    }
    wait_for_request(c, c->in_len > 0 ? HTTP__CONN_READING : HTTP__CONN_IDLE);
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0) {
        http__conn_close(c);
        return;
    }
    if (c->in_len > 0)
        process(c); /* a pipelined request may already be complete */
    if (c->tls)
        tls_peer_gone(c);
}

/* ---- requests ----------------------------------------------------------- */

static void handle(http__conn_t *c, size_t head_len)
{
    http_req_t req;
    int rc = http_parse(c->in, head_len, &req);
    if (rc) {
        respond_error(c, rc, rc == 413 ? "request bodies are not accepted"
                             : rc == 505 ? "only HTTP/1.0 and HTTP/1.1" : "bad request");
        return;
    }
    req.peer_loopback = c->peer_loopback;
    req.peer = c->peer;
    req.conn = c;
    tb_buf_t body = TB_BUF_INIT;
    const char *ctype = NULL;
    unsigned allow = 0;
    int status = http__dispatch(c->srv, &req, &body, &ctype, &allow);
    bool head_only = req.method == HTTP_HEAD, keep = req.keep_alive;
    int minor = req.minor;
    /* req points into c->in: consume the head only now */
    memmove(c->in, c->in + head_len, c->in_len - head_len);
    c->in_len -= head_len;
    c->scanned = 0;
    if (status == HTTP_DEFER && c->pending) {
        tb_buf_free(&body);
        c->pending->head_only = head_only;
        c->pending->keep_alive = keep;
        c->pending->minor = minor;
        c->state = HTTP__CONN_WAITING;
        uv_read_stop((uv_stream_t *)&c->tcp);
        set_deadline(c, c->srv->opts.answer_timeout_ms);
        c->srv->stats.deferred++;
        return;
    }
    if (c->pending || status == HTTP_DEFER) { /* a handler broke the contract: it deferred, or answered, not both */
        tb_warn("http handler deferred and answered, or deferred without http_defer", TB_I("status", status));
        detach(c);
        tb_buf_reset(&body);
        tb_buf_puts(&body, "internal error\n");
        status = 500;
        ctype = NULL;
    }
    respond(c, status, ctype, &body, head_only, !keep, minor, allow);
}

/* ---- deferred answers (http.h) ------------------------------------------ */

http_pending_t *http_defer(http_req_t *req)
{
    http__conn_t *c = req->conn;
    if (!c || c->pending || c->state != HTTP__CONN_READING || c->srv->closing ||
        c->srv->stats.pending >= HTTP_MAX_PENDING)
        return NULL;
    http_pending_t *p = tb_calloc(1, sizeof *p);
    p->conn = c;
    p->refs = 2;
    c->pending = p;
    c->srv->stats.pending++;
    return p;
}

bool http_pending_gone(const http_pending_t *p)
{
    return p->conn == NULL;
}

void http_pending_answer(http_pending_t *p, int status, const char *ctype, tb_buf_t *body)
{
    http__conn_t *c = p->conn;
    bool head_only = p->head_only, keep = p->keep_alive;
    int minor = p->minor;
    if (c && c->state == HTTP__CONN_WAITING) {
        detach(c);
        if (status < 100 || status > 599) {
            tb_warn("http deferred answer with an invalid status", TB_I("status", status));
            tb_buf_reset(body);
            tb_buf_puts(body, "internal error\n");
            status = 500;
            ctype = NULL;
        }
        respond(c, status, ctype, body, head_only, !keep, minor, 0);
    }
    tb_buf_free(body); /* gone: the answer is dropped (respond took it otherwise) */
    pending_unref(p);
}

/* A TLS record's first byte (a handshake: a ClientHello) where a request line should be. */
#define TLS_HANDSHAKE_RECORD 0x16

static void process(http__conn_t *c)
{
    if (!c->tls && c->in_len > 0 && (unsigned char)c->in[0] == TLS_HANDSHAKE_RECORD) {
        /* a TLS client on the plain endpoint: say so now rather than at the request deadline */
        respond_error(c, 400, "this endpoint speaks plain HTTP, not TLS (http.tls is not set)");
        return;
    }
    size_t end = http_head_end(c->in, c->in_len, c->scanned);
    if (end) {
        handle(c, end);
    } else if (c->in_len >= c->srv->opts.max_head_bytes) {
        respond_error(c, 431, "request head too large");
    } else {
        c->scanned = c->in_len;
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    http__conn_t *c = h->data;
    size_t cap = c->srv->opts.max_head_bytes;
    (void)suggested;
    if (c->tls) {
        http__tls_rxbuf(buf); /* ciphertext: http__tls_pump decrypts it into c->in */
        return;
    }
    if (!c->in)
        c->in = tb_malloc(cap);
    if (c->state == HTTP__CONN_LINGER)
        *buf = uv_buf_init(c->in, (unsigned)cap); /* discarded */
    else
        *buf = uv_buf_init(c->in + c->in_len, (unsigned)(cap - c->in_len));
}

/* A read of a TLS connection: the handshake, then the plaintext it holds. */
static void tls_input(http__conn_t *c, const uint8_t *p, size_t n)
{
    size_t before = c->in_len;
    tls_stream_feed(c->tls, p, n);
    if (http__tls_pump(c) < 0) {
        http__conn_close(c);
        return;
    }
    if (c->in_len != before) {
        if (c->state == HTTP__CONN_IDLE)
            wait_for_request(c, HTTP__CONN_READING);
        process(c);
    } /* else a step of the handshake, or part of a record */
    tls_peer_gone(c);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    http__conn_t *c = st->data;
    if (nread == 0 || c->state == HTTP__CONN_CLOSING)
        return;
    if (nread < 0) { /* EOF, reset: nothing more will come */
        http__conn_close(c);
        return;
    }
    if (c->state == HTTP__CONN_LINGER)
        return;
    if (c->tls) {
        tls_input(c, (const uint8_t *)buf->base, (size_t)nread);
        return;
    }
    if (c->state == HTTP__CONN_IDLE)
        wait_for_request(c, HTTP__CONN_READING);
    c->in_len += (size_t)nread;
    process(c);
}

static void timer_cb(uv_timer_t *t)
{
    http__conn_t *c = t->data;
    http_stats_t *st = &c->srv->stats;
    switch (c->state) {
    case HTTP__CONN_READING:
        if (c->tls && !tls_stream_established(c->tls)) { /* no session to answer 408 in */
            st->timeouts[METRICS_HTTP_TIMEOUT_HANDSHAKE]++;
            http__conn_close(c);
            break;
        }
        st->timeouts[METRICS_HTTP_TIMEOUT_REQUEST]++;
        respond_error(c, 408, "request not received in time");
        break;
    case HTTP__CONN_IDLE:
        st->timeouts[METRICS_HTTP_TIMEOUT_IDLE]++;
        http__conn_close(c);
        break;
    case HTTP__CONN_WRITING:
        st->timeouts[METRICS_HTTP_TIMEOUT_WRITE]++;
        http__conn_close(c);
        break;
    case HTTP__CONN_WAITING:
        st->deferred_timeouts++;
        detach(c);
        respond_error(c, 504, "the answer was not ready in time");
        break;
    case HTTP__CONN_LINGER:
    case HTTP__CONN_CLOSING:
        http__conn_close(c);
        break;
    }
}

void http__conn_drain(http__conn_t *c)
{
    /* WRITING finishes its response (write_cb sees srv->closing); LINGER ends by its deadline */
    if (c->state == HTTP__CONN_READING || c->state == HTTP__CONN_IDLE) {
        http__conn_close(c);
    } else if (c->state == HTTP__CONN_WAITING) { /* its answer may come too late for the drain */
        detach(c);
        respond_error(c, 503, "shutting down");
    }
}
