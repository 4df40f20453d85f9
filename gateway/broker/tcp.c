/*
 * tcp.c: the plain TCP transport (broker_int.h, TRANSPORT): a connection's
 * byte stream on a libuv TCP handle.
 *
 * Reads go where the connection says (broker__conn_rx_buf: the loop's
 * shared buffer, or behind an incomplete packet). A write is tried at once
 * with uv_try_write when nothing is queued; what the kernel does not take
 * is copied into one uv_write request, which holds a reference to the
 * connection until its callback. Closing shuts the socket down after the
 * queued writes, so a refusal or DISCONNECT already written is delivered,
 * then closes the handle; the close callback releases the connection.
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

static void on_close(uv_handle_t *h)
{
    broker__conn_released(h->data);
}

static void tcp_accept(broker_t *srv, uv_stream_t *server)
{
    broker_conn_t *c = broker__conn_new(srv, &broker__tcp);
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        c->tp_closed = true;
        uv_close((uv_handle_t *)&c->tcp, on_close);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    char peer[64] = "";
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char host[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
        snprintf(peer, sizeof peer, "%s:%d", host, port);
    }
    broker__conn_start(c, peer);
}

static int tcp_read_start(broker_conn_t *c)
{
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void tcp_read_stop(broker_conn_t *c)
{
    uv_read_stop((uv_stream_t *)&c->tcp);
}

typedef struct {
    uv_write_t req;
    broker_conn_t *conn;
    size_t len;
    uint8_t data[];
} wreq_t;

static void on_write(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    broker_conn_t *c = w->conn;
    c->tx_queued -= w->len;
    free(w);
    if (status < 0)
        broker__conn_tx_failed(c, status);
    broker__conn_unref(c);
}

static int tcp_write(broker_conn_t *c, const uint8_t *p, size_t n)
{
    size_t off = 0;
    if (c->tx_queued == 0) {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
        int k = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (k > 0)
            off = (size_t)k;
        else if (k < 0 && k != UV_EAGAIN)
            return k;
    }
    size_t left = n - off;
    if (left == 0)
        return 0;
    wreq_t *w = tb_malloc(sizeof *w + left);
    memcpy(w->data, p + off, left);
    w->conn = c;
    w->len = left;
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)left);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc != 0) {
        free(w);
        return rc;
    }
    c->refs++;
    c->tx_queued += left;
    return 0;
}

static size_t tcp_queued(const broker_conn_t *c)
{
    return c->tx_queued;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    broker_conn_t *c = req->data;
    (void)status;
    free(req);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void tcp_close(broker_conn_t *c)
{
    uv_shutdown_t *req = tb_malloc(sizeof *req);
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
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
