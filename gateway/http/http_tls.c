/*
 * http_tls.c: HTTPS for the endpoint's connections (http.tls): each
 * connection's gateway/tls stream, tied to http_conn.c's state machine.
 * The engine is the MQTT listeners' (gateway/tls/tls_stream.c); what is
 * HTTP's here is where the bytes go:
 *
 *   in   each libuv read (into one shared buffer, HTTP__TLS_RX bytes) is
 *        fed to the stream in place; the handshake is stepped, then
 *        plaintext is decrypted into c->in, the request head buffer, up
 *        to max_head_bytes. What the head buffer cannot take stays in the
 *        stream (at most part of a record and one read: reading stops
 *        while a response is written, and once the head buffer is full)
 *        and is read first at the next request (http_conn.c's
 *        next_request).
 *   out  the stream's records are gathered in c->tx. A response is
 *        encrypted whole into it and written with the connection's one
 *        uv_write (http_conn.c); anything else the stream writes (a
 *        handshake flight, an alert, close_notify) leaves in a write of
 *        its own (http__tls_flush), in order on the same socket.
 *
 * A failed handshake is counted (tls_handshake_failures) and logged with
 * OpenSSL's reason, a burst a second then a count, as the MQTT side does.
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_BURST 10

/* Every TLS connection's reads: the loop thread is the only reader and each
 * read is handled before the next is asked for. */
static uint8_t rxbuf[HTTP__TLS_RX];

static int collect_records(void *arg, const uint8_t *p, size_t n)
{
    http__conn_t *c = arg;
    tb_buf_append(&c->tx, p, n);
    return 0;
}

bool http__tls_open(http__conn_t *c)
{
    c->tls = tls_stream_new(c->srv->tls, collect_records, c);
    return c->tls != NULL;
}

void http__tls_rxbuf(uv_buf_t *buf)
{
    *buf = uv_buf_init((char *)rxbuf, sizeof rxbuf);
}

typedef struct {
    uv_write_t wr;
    tb_buf_t buf;
} flight_t;

static void flight_cb(uv_write_t *wr, int status)
{
    (void)status; /* a failed write shows on the connection's next read or write */
    flight_t *f = wr->data;
    tb_buf_free(&f->buf);
    free(f);
}

int http__tls_flush(http__conn_t *c)
{
    if (c->tx.len == 0)
        return 0;
    flight_t *f = tb_calloc(1, sizeof *f);
    f->buf = c->tx;
    c->tx = (tb_buf_t)TB_BUF_INIT;
    f->wr.data = f;
    uv_buf_t b = uv_buf_init(f->buf.data, (unsigned)f->buf.len);
    int rc = uv_write(&f->wr, (uv_stream_t *)&c->tcp, &b, 1, flight_cb);
    if (rc < 0) { /* the callback will not run */
        tb_buf_free(&f->buf);
        free(f);
    }
    return rc;
}

static void peer_name(http__conn_t *c, char *out, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof ss;
    char ip[64] = "?";
    unsigned port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((const struct sockaddr_in6 *)&ss, ip, sizeof ip);
            port = ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
            snprintf(out, len, "[%s]:%u", ip, port);
            return;
        }
        uv_ip4_name((const struct sockaddr_in *)&ss, ip, sizeof ip);
        port = ntohs(((const struct sockaddr_in *)&ss)->sin_port);
    }
    snprintf(out, len, "%s:%u", ip, port);
}

static void handshake_failed(http__conn_t *c, const char *why)
{
    c->srv->stats.tls_handshake_failures++;
    /* a burst a second (an operator fixing certificates reads every reason), then a count */
    static tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, LOG_BURST);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped)) {
        char peer[80];
        peer_name(c, peer, sizeof peer);
        tb_warn("http TLS handshake failed: connection closed", TB_S("peer", peer), TB_S("why", why),
                TB_U("suppressed", skipped));
    }
}

static void tls_error(http__conn_t *c, const char *why)
{
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped)) {
        char peer[80];
        peer_name(c, peer, sizeof peer);
        tb_warn("http TLS error: connection closed", TB_S("peer", peer), TB_S("why", why),
                TB_U("suppressed", skipped));
    }
}

int http__tls_pump(http__conn_t *c)
{
    char why[256];
    int rc = 0;
    if (!tls_stream_established(c->tls)) {
        int hs = tls_stream_handshake(c->tls, why, sizeof why);
        int sent = http__tls_flush(c); /* the next flight, or the alert that says why not */
        if (hs == TB_EPROTO)
            handshake_failed(c, why);
        rc = hs < 0 ? hs : sent;
        if (rc < 0 || hs == 0)
            goto out;
    }
    size_t cap = c->srv->opts.max_head_bytes;
    if (!c->in)
        c->in = tb_malloc(cap);
    while (c->in_len < cap) {
        ssize_t k = tls_stream_read(c->tls, c->in + c->in_len, cap - c->in_len, why, sizeof why);
        if (k > 0) {
            c->in_len += (size_t)k;
            continue;
        }
        if (k == TB_ECLOSED) /* its close_notify: like a FIN after its last request */
            c->tls_peer_done = true;
        else if (k < 0) {
            tls_error(c, why);
            rc = (int)k;
        }
        break;
    }
    if (rc == 0)
        rc = http__tls_flush(c); /* what reading wrote (a KeyUpdate's answer) */
out:
    tls_stream_keep(c->tls);
    return rc;
}
