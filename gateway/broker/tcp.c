/*
 * tcp.c: the plain TCP transport (broker_int.h, TRANSPORT): a connection's
 * byte stream on a libuv TCP handle; and the TCP half that the TLS
 * transport (tls.c) shares: accepting, writing, closing (broker__tcp_*).
 *
 * Reads go where the connection says (broker__conn_rx_buf: the loop's
 * shared buffer, or behind an incomplete packet). A write is tried at once
 * with uv_try_write when nothing is queued; what the kernel does not take
 * goes in one uv_write, which holds a reference to the connection until its
 * callback (see tx_t for what is written meanwhile). Closing is bounded in
 * time (broker__tcp_close); the close callback releases the connection.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    broker__conn_rx_buf(h->data, buf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    broker__conn_rx(s->data, buf, nread);
}

static void on_close(uv_handle_t *h);

bool broker__tcp_accept(broker_t *srv, uv_stream_t *server, broker_conn_t *c, broker_addr_t *peer)
{
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    c->listener = server->data; /* the broker_listener_t it came in by */
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        c->tp_closed = true;
        uv_close((uv_handle_t *)&c->tcp, on_close);
        return false;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    memset(peer, 0, sizeof *peer);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            peer->family = 6;
            peer->port = ntohs(a->sin6_port);
            memcpy(peer->ip, &a->sin6_addr, 16);
        } else if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            peer->family = 4;
            peer->port = ntohs(a->sin_port);
            memcpy(peer->ip, &a->sin_addr, 4);
        }
    }
    return true;
}

static void tcp_accept(broker_t *srv, uv_stream_t *server)
{
    broker_conn_t *c = broker__conn_new(srv, &broker__tcp);
    broker_addr_t peer;
    if (broker__tcp_accept(srv, server, c, &peer))
        broker__conn_start(c, &peer);
}

static int tcp_read_start(broker_conn_t *c)
{
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void tcp_read_stop(broker_conn_t *c)
{
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/*
 * At most one uv_write is in flight per connection. What is written while
 * it is (the next loop turns' replies) is appended to one backlog buffer
 * and goes as the next single write when the first completes, so a client
 * that does not read costs its bytes and two buffers, never one request
 * per loop turn (a 2-byte PINGRESP each in its own request once cost ~40x
 * its size). The state is allocated the first time a write cannot go out
 * at once, and freed with the connection's socket; its buffers are freed
 * whenever everything has gone, so an idle connection holds none.
 */
typedef struct broker_tcp_tx {
    uv_write_t req;
    broker_conn_t *conn;
    uint8_t *buf;          /* the write in flight */
    size_t len, cap;
    tb_buf_t backlog;      /* written since, waiting for it */
    bool busy;
    uv_timer_t *deadline;  /* while closing with writes queued: the write_timeout_ms bound */
    void (*closed)(broker_conn_t *c); /* broker__tcp_close's: after the socket is released */
} tx_t;

static size_t held(const tx_t *t)
{
    return t && (t->busy || t->backlog.len) ? t->cap + t->backlog.cap + sizeof *t : 0;
}

static void account(broker_conn_t *c)
{
    tx_t *t = c->tcp_tx;
    c->tx_queued = t ? t->len + t->backlog.len : 0;
    c->tx_held = held(t);
}

static void on_write(uv_write_t *req, int status);

static int start_write(broker_conn_t *c, tx_t *t)
{
    uv_buf_t b = uv_buf_init((char *)t->buf, (unsigned)t->len);
    int rc = uv_write(&t->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc != 0)
        return rc;
    t->busy = true;
    c->refs++;
    return 0;
}

static void on_write(uv_write_t *req, int status)
{
    tx_t *t = req->data;
    broker_conn_t *c = t->conn;
    t->busy = false;
    t->len = 0;
    c->tx_progress_ms = uv_now(c->srv->loop);
    if (status < 0) {
        tb_buf_reset(&t->backlog);
        broker__conn_tx_failed(c, status);
    } else if (t->backlog.len > 0 && !uv_is_closing((uv_handle_t *)&c->tcp)) {
        /* the backlog becomes the next write: swap the buffers */
        uint8_t *buf = t->buf;
        size_t cap = t->cap;
        t->buf = (uint8_t *)t->backlog.data;
        t->cap = t->backlog.cap;
        t->len = t->backlog.len;
        t->backlog.data = (char *)buf;
        t->backlog.cap = cap;
        t->backlog.len = 0;
        if (t->backlog.data)
            t->backlog.data[0] = '\0';
        int rc = start_write(c, t);
        if (rc < 0) {
            t->len = 0;
            broker__conn_tx_failed(c, rc);
        }
    }
    if (!t->busy) { /* everything went: an idle connection holds no output buffer */
        free(t->buf);
        t->buf = NULL;
        t->cap = 0;
        tb_buf_free(&t->backlog);
    }
    account(c);
    broker__conn_tx_progress(c);
    broker__conn_unref(c);
}

static tx_t *tx_of(broker_conn_t *c)
{
    if (!c->tcp_tx) {
        tx_t *t = tb_calloc(1, sizeof *t);
        t->conn = c;
        t->req.data = t;
        c->tcp_tx = t;
    }
    return c->tcp_tx;
}

int broker__tcp_send(broker_conn_t *c, const uint8_t *p, size_t n)
{
    tx_t *t = c->tcp_tx;
    if (t && t->busy) {
        tb_buf_append(&t->backlog, p, n); /* goes when the write in flight completes */
        account(c);
        return 0;
    }
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
    int k = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    size_t off = 0;
    if (k > 0)
        off = (size_t)k;
    else if (k < 0 && k != UV_EAGAIN)
        return k;
    if (off == n)
        return 0;
    t = tx_of(c);
    size_t left = n - off;
    if (t->cap < left) {
        t->buf = tb_realloc(t->buf, left);
        t->cap = left;
    }
    memcpy(t->buf, p + off, left);
    t->len = left;
    if (c->tx_queued == 0)
        c->tx_progress_ms = uv_now(c->srv->loop); /* the clock of write_timeout_ms starts */
    int rc = start_write(c, t);
    if (rc < 0)
        t->len = 0;
    account(c);
    return rc;
}

static int tcp_write(broker_conn_t *c, const uint8_t *p, size_t n)
{
    return broker__tcp_send(c, p, n);
}

static size_t tcp_queued(const broker_conn_t *c)
{
    return c->tx_queued;
}

static void deadline_closed(uv_handle_t *h)
{
    free(h);
}

static void on_close(uv_handle_t *h)
{
    broker_conn_t *c = h->data;
    tx_t *t = c->tcp_tx;
    void (*closed)(broker_conn_t *) = broker__conn_released;
    if (t) {
        if (t->deadline)
            uv_close((uv_handle_t *)t->deadline, deadline_closed);
        if (t->closed)
            closed = t->closed;
        free(t->buf);
        tb_buf_free(&t->backlog);
        free(t);
        c->tcp_tx = NULL;
    }
    account(c);
    closed(c);
}

static void close_now(broker_conn_t *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_close); /* writes still queued fail with ECANCELED */
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    broker_conn_t *c = req->data;
    (void)status;
    free(req);
    close_now(c);
}

static void deadline_cb(uv_timer_t *h)
{
    broker_conn_t *c = h->data;
    c->srv->conn_closed[METRICS_CLOSE_WRITE_TIMEOUT]++;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("closed connection did not take its last bytes within mqtt.write_timeout_ms: socket released",
                TB_S("peer", broker__conn_peer(c)), TB_U("unsent_bytes", c->tx_queued),
                TB_U("write_timeout_ms", c->srv->cfg->mqtt.write_timeout_ms), TB_U("suppressed", skipped));
    close_now(c);
}

/*
 * Closing: with nothing queued, or when the connection is given up on
 * (c->abort: it does not read, so it would not read a goodbye either), the
 * socket goes at once. Otherwise the queued bytes (a CONNACK refusal, a
 * DISCONNECT, the last acks) get mqtt.write_timeout_ms to leave, then a
 * shutdown; past the deadline the socket is released anyway.
 */
void broker__tcp_close(broker_conn_t *c, void (*closed)(broker_conn_t *c))
{
    tx_t *t = c->tcp_tx;
    if (closed != broker__conn_released) {
        t = tx_of(c); /* where the close callback finds it */
        t->closed = closed;
    }
    if (c->abort) {
        close_now(c);
        return;
    }
    if (t && t->busy) {
        t->deadline = tb_malloc(sizeof *t->deadline);
        uv_timer_init(c->srv->loop, t->deadline);
        t->deadline->data = c;
        uv_timer_start(t->deadline, deadline_cb, c->srv->cfg->mqtt.write_timeout_ms, 0);
    }
    uv_shutdown_t *req = tb_malloc(sizeof *req);
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        close_now(c);
    }
}

static void tcp_close(broker_conn_t *c)
{
    broker__tcp_close(c, broker__conn_released);
}

const broker_transport_t broker__tcp = {
    .name = "tcp",
    .accept = tcp_accept,
    .read_start = tcp_read_start,
    .read_stop = tcp_read_stop,
    .write = tcp_write,
    .queued = tcp_queued,
    .close = tcp_close,
};
