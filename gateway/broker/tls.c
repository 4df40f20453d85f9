/*
 * tls.c: the TLS transport (broker_int.h, TRANSPORT): MQTT over TLS on the
 * same libuv TCP handle as tcp.c, OpenSSL 3 in between, its SSL in
 * c->tp_state. conn.c sees the plaintext stream and nothing else.
 *
 * DESIGN. OpenSSL never touches the socket: its SSL talks to one BIO of our
 * own (bio_method), whose
 *   read   serves the ciphertext libuv just read (in place, no copy), then
 *          what an earlier read left over (t->left); when both are empty it
 *          says "retry", so SSL_do_handshake / SSL_read return WANT_READ and
 *          the loop goes on: the handshake is non-blocking by construction;
 *   write  hands the records to tcp.c (broker__tcp_send: at once what the
 *          kernel takes, the rest in its one uv_write at a time), so
 *          writing, c->tx_queued / tx_held / tx_progress_ms, the write
 *          timeout and the bounded close are tcp.c's, the same as a plain
 *          connection's: the limits in conn.c hold unchanged. During the
 *          handshake the records of a flight are gathered (t->out) and
 *          sent as one write.
 * So nothing is buffered twice and an idle connection holds no buffer of
 * ours; SSL_MODE_RELEASE_BUFFERS gives OpenSSL's record buffers back too.
 *
 * Reading: each libuv read is decrypted at once into broker__conn_rx_buf's
 * buffer, record by record, while the connection reads. When conn.c stops
 * reading (read_stop: a password check, a full Receive Maximum window,
 * unread replies, backpressure), what is left stays: the rest of that
 * ciphertext in t->left (counted in c->mem, so in mqtt.max_partial_bytes),
 * records already decrypted in the SSL. libuv will not report those bytes
 * again, so read_start schedules them (t->later, a loop turn later: never
 * from inside read_start, which conn.c calls while it is processing). The
 * end of the stream is held (t->eof) until they are read: a client that
 * sends its last PUBLISH and closes at once is answered as on plain TCP.
 *
 * Timeouts: the connection is started (broker__conn_start) at accept, so
 * mqtt.connect_timeout_ms, swept by conn.c, covers the handshake and the
 * CONNECT together. A handshake that fails (not TLS, no certificate the
 * listener trusts, an expired one, nothing in common) closes that
 * connection alone, counted tls_handshake and logged at warn with OpenSSL's
 * reason (BROKER_CONN_LOG_BURST a second, then a count); its alert is sent
 * first.
 *
 * Closing: a close_notify when the session is sound (not after a fatal
 * error, not when c->abort), then tcp.c's close; the socket's close
 * callback closes t->later, whose callback frees the SSL and releases c.
 */
#include "gateway/broker/broker_int.h"

#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct tls {
    SSL *ssl;
    broker_conn_t *c;
    uv_timer_t later;           /* input left at a pause, handled a loop turn after read_start */
    const uint8_t *in;          /* the ciphertext of the libuv read being handled (NULL outside it) */
    size_t in_len;
    tb_buf_t left;              /* ciphertext read and not yet taken by the SSL (at a pause) */
    size_t left_off;            /* of it, taken already */
    size_t held;                /* left's bytes counted in c->mem */
    tb_buf_t out;               /* a handshake flight, sent as one write */
    int write_err;              /* tcp.c refused a write: the SSL is told it failed */
    int eof;                    /* libuv's end of the stream (UV_EOF or an error), held until what came before is read */
    bool reading;               /* between read_start and read_stop */
    bool handshake_done;
    bool fatal;                 /* an SSL error: no close_notify, no more SSL calls */
    bool closed;                /* tls_close ran: writes are dropped */
    bool use_identity;          /* its listener's use_identity_as_username, when it was accepted */
    char *identity;             /* the client certificate's CN (tls_user), with use_identity */
} tls_t;

/* The ciphertext of one libuv read; the loop thread is the only reader and
 * each read is handled before the next is asked for (on_alloc, on_read). */
static uint8_t rxbuf[65536];

/* Empties the thread's error queue before an SSL call, so that SSL_get_error
 * reads that call's failure alone. It is nearly always empty already, and
 * looking is cheap where clearing is not: ERR_clear_error resets every slot
 * of the queue (on OpenSSL 3.0 some 850 instructions, 8% of what a 100-byte
 * PUBLISH over TLS costs when it ran before each record). */
static void clear_errors(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* ---- the BIO between the SSL and the socket ----------------------------------- */

static int bio_write(BIO *b, const char *p, int n)
{
    tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (t->write_err)
        return -1;
    if (t->closed)
        return n; /* the socket is going: nothing more leaves */
    if (!t->handshake_done) {
        tb_buf_append(&t->out, p, (size_t)n); /* sent whole after this step of the handshake */
        return n;
    }
    int rc = broker__tcp_send(t->c, (const uint8_t *)p, (size_t)n);
    if (rc < 0) {
        t->write_err = rc;
        return -1;
    }
    return n;
}

static int bio_read(BIO *b, char *out, int n)
{
    tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    size_t want = n > 0 ? (size_t)n : 0, got = 0;
    if (t->left.len > t->left_off) {
        got = TB_MIN(want, t->left.len - t->left_off);
        memcpy(out, t->left.data + t->left_off, got);
        t->left_off += got;
    }
    if (got < want && t->in_len > 0) {
        size_t k = TB_MIN(want - got, t->in_len);
        memcpy(out + got, t->in, k);
        t->in += k;
        t->in_len -= k;
        got += k;
    }
    if (got == 0) {
        BIO_set_retry_read(b); /* not the end: the next libuv read brings more */
        return -1;
    }
    return (int)got;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* every write is already with tcp.c */
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static void method_init(void)
{
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tributary libuv");
    if (!method || !BIO_meth_set_write(method, bio_write) || !BIO_meth_set_read(method, bio_read) ||
        !BIO_meth_set_ctrl(method, bio_ctrl) || !BIO_meth_set_create(method, bio_create))
        abort(); /* out of memory at the first TLS connection */
}

/* ---- handshake --------------------------------------------------------------- */

/* OpenSSL's reason for what just failed on t (the queue cleared). */
static void why_failed(tls_t *t, char *buf, size_t len)
{
    long v = SSL_get_verify_result(t->ssl);
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (v != X509_V_OK)
        snprintf(buf, len, "client certificate: %s", X509_verify_cert_error_string(v));
    else
        snprintf(buf, len, "%s", r ? r : "the peer closed or reset the connection");
    ERR_clear_error();
}

static void handshake_failed(broker_conn_t *c, const char *why)
{
    tls_t *t = c->tp_state;
    t->fatal = true;
    c->srv->conn_closed[METRICS_CLOSE_TLS_HANDSHAKE]++;
    /* a burst a second (an operator fixing certificates reads every reason), then a count */
    static tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, BROKER_CONN_LOG_BURST);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("TLS handshake failed: connection closed", TB_S("peer", c->peer), TB_S("why", why),
                TB_U("suppressed", skipped));
    broker__conn_close(c, 0, "TLS handshake failed");
}

/* Sends what the handshake wrote (one flight, one write). */
static void send_flight(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (t->out.len == 0)
        return;
    int rc = t->closed ? 0 : broker__tcp_send(c, (const uint8_t *)t->out.data, t->out.len);
    tb_buf_free(&t->out);
    if (rc < 0 && !c->closing) {
        t->fatal = true;
        broker__conn_tx_failed(c, rc);
    }
}

/* One step of the handshake. true once it is done (and c may read MQTT). */
static bool handshake(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    clear_errors();
    int r = SSL_do_handshake(t->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
    char why[256];
    if (r != 1 && e != SSL_ERROR_WANT_READ)
        why_failed(t, why, sizeof why); /* before anything else runs OpenSSL */
    send_flight(c); /* the next flight, or the alert that says why not */
    if (c->closing)
        return false;
    if (r != 1) {
        if (e != SSL_ERROR_WANT_READ)
            handshake_failed(c, why);
        return false;
    }
    t->handshake_done = true;
    if (t->use_identity) {
        X509 *peer = SSL_get0_peer_certificate(t->ssl);
        t->identity = broker__tls_common_name(peer);
        if (!t->identity) {
            handshake_failed(c, "its certificate has no Common Name to be its user name "
                                "(tls.use_identity_as_username)");
            return false;
        }
    }
    return true;
}

/* ---- reading ------------------------------------------------------------------ */

static void rx_end(broker_conn_t *c, ssize_t err)
{
    uv_buf_t none = uv_buf_init(NULL, 0);
    broker__conn_rx(c, &none, err);
}

/* Takes what the SSL can give while c reads: the handshake first, then
 * records, each decrypted into the buffer conn.c names. */
static void pump(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (!t->handshake_done && !handshake(c))
        return;
    while (t->reading && !c->tp_closed) {
        uv_buf_t b;
        broker__conn_rx_buf(c, &b);
        if (b.len == 0) {
            rx_end(c, UV_ENOBUFS); /* conn.c closes it: mqtt.max_partial_bytes */
            return;
        }
        clear_errors();
        int k = SSL_read(t->ssl, b.base, (int)TB_MIN(b.len, (size_t)INT_MAX));
        if (k > 0) {
            broker__conn_rx(c, &b, k);
            continue;
        }
        int e = SSL_get_error(t->ssl, k);
        broker__conn_rx(c, &b, 0); /* gives the buffer back */
        if (e == SSL_ERROR_WANT_READ)
            return;
        if (e == SSL_ERROR_ZERO_RETURN) { /* its close_notify */
            rx_end(c, UV_EOF);
            return;
        }
        char why[256];
        why_failed(t, why, sizeof why);
        t->fatal = true;
        if (c->closing)
            return;
        c->srv->conn_closed[METRICS_CLOSE_MALFORMED]++; /* a record that does not decrypt is garbage */
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("TLS error: connection closed", TB_S("client", c->client_id ? c->client_id : ""),
                    TB_S("peer", c->peer), TB_S("why", why), TB_U("suppressed", skipped));
        broker__conn_close(c, 0, "TLS error");
        return;
    }
}

/* After a pump: what of the libuv read the SSL did not take is kept, and
 * counted; what is all taken is given back. */
static void keep_rest(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (c->tp_closed) {
        t->in = NULL;
        t->in_len = 0;
        return; /* tls_close gave everything back */
    }
    if (t->left_off == t->left.len && t->left.len) {
        tb_buf_free(&t->left);
        t->left_off = 0;
    }
    if (t->in_len) {
        if (t->left_off > 0) { /* compact before growing */
            memmove(t->left.data, t->left.data + t->left_off, t->left.len - t->left_off);
            t->left.len -= t->left_off;
            t->left_off = 0;
        }
        tb_buf_append(&t->left, t->in, t->in_len);
        t->in = NULL;
        t->in_len = 0;
    }
    size_t now = t->left.len - t->left_off;
    if (now != t->held) {
        if (!broker__conn_hold(c, (int64_t)now - (int64_t)t->held)) {
            broker__conn_give_up(c, METRICS_CLOSE_MEMORY_LIMIT, MQTT_RC_QUOTA_EXCEEDED,
                                 "TLS input waiting to be read would pass mqtt.max_partial_bytes");
            return;
        }
        t->held = now;
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    *buf = uv_buf_init((char *)rxbuf, sizeof rxbuf);
}

static bool pending(const tls_t *t)
{
    return t->left.len > t->left_off || SSL_has_pending(t->ssl);
}

/* The end of the stream reaches conn.c after everything that came before
 * it: records kept at a pause are read first (a client may send its last
 * PUBLISH and close at once). */
static void settle(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (t->eof && t->reading && !c->tp_closed && !pending(t))
        rx_end(c, t->eof);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    broker_conn_t *c = s->data;
    tls_t *t = c->tp_state;
    if (c->tp_closed)
        return;
    if (nread < 0) {
        t->eof = (int)nread;
        if (t->reading && pending(t))
            pump(c);
        keep_rest(c);
        settle(c);
        return;
    }
    if (nread == 0)
        return;
    t->in = (const uint8_t *)buf->base;
    t->in_len = (size_t)nread;
    pump(c);
    keep_rest(c);
}

static void later_cb(uv_timer_t *h)
{
    broker_conn_t *c = h->data;
    tls_t *t = c->tp_state;
    if (!t->reading || c->tp_closed)
        return;
    pump(c);
    keep_rest(c);
    settle(c);
}

static int tls_read_start(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    int rc = t->eof ? 0 : uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read); /* past the end: nothing to read */
    if (rc < 0)
        return rc;
    t->reading = true;
    if (pending(t) || t->eof)
        uv_timer_start(&t->later, later_cb, 0, 0); /* libuv will not report those bytes again */
    return 0;
}

static void tls_read_stop(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (!t->eof)
        uv_read_stop((uv_stream_t *)&c->tcp);
    t->reading = false;
    uv_timer_stop(&t->later);
}

/* ---- writing and closing -------------------------------------------------------- */

static int tls_write(broker_conn_t *c, const uint8_t *p, size_t n)
{
    tls_t *t = c->tp_state;
    if (!t->handshake_done || t->fatal)
        return t->write_err ? t->write_err : UV_ENOTCONN; /* conn.c writes only after a CONNECT */
    while (n > 0) {
        clear_errors();
        int k = SSL_write(t->ssl, p, (int)TB_MIN(n, (size_t)INT_MAX));
        if (k <= 0) {
            t->fatal = true;
            ERR_clear_error();
            return t->write_err ? t->write_err : UV_EPROTO;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static size_t tls_queued(const broker_conn_t *c)
{
    return c->tx_queued;
}

static void later_closed(uv_handle_t *h)
{
    broker_conn_t *c = h->data;
    tls_t *t = c->tp_state;
    SSL_free(t->ssl); /* and its BIO */
    tb_buf_free(&t->left);
    tb_buf_free(&t->out);
    free(t->identity);
    free(t);
    c->tp_state = NULL;
    broker__conn_released(c);
}

static void socket_closed(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    uv_close((uv_handle_t *)&t->later, later_closed);
}

static void tls_close(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    uv_timer_stop(&t->later);
    if (t->handshake_done && !t->fatal && !c->abort) {
        clear_errors();
        SSL_shutdown(t->ssl); /* close_notify: the client knows the stream was not cut */
        ERR_clear_error();
    }
    t->closed = true;
    /* conn.c gave back what c->mem counted (left's bytes with it) before calling close */
    tb_buf_free(&t->left);
    t->left_off = t->held = 0;
    broker__tcp_close(c, socket_closed);
}

static void tls_accept(broker_t *srv, uv_stream_t *server)
{
    broker_listener_t *l = server->data;
    broker_conn_t *c = broker__conn_new(srv, &broker__tls);
    char peer[64];
    if (!broker__tcp_accept(srv, server, c, peer, sizeof peer))
        return;
    pthread_once(&method_once, method_init);
    tls_t *t = tb_calloc(1, sizeof *t);
    t->c = c;
    c->tp_state = t;
    uv_timer_init(srv->loop, &t->later);
    t->later.data = c;
    t->use_identity = l->tls->use_identity;
    t->ssl = SSL_new(l->tls->ctx);
    BIO *b = t->ssl ? BIO_new(method) : NULL;
    if (!b) {
        ERR_clear_error();
        t->fatal = true;
        c->abort = true;
        broker__conn_start(c, peer);
        broker__conn_close(c, 0, "out of memory for its TLS session"); /* no-op if start closed it */
        return;
    }
    BIO_set_data(b, t);
    SSL_set_bio(t->ssl, b, b); /* one BIO both ways: the SSL owns it */
    SSL_set_accept_state(t->ssl);
    broker__conn_start(c, peer); /* reads: the ClientHello */
}

static const char *tls_user(const broker_conn_t *c)
{
    const tls_t *t = c->tp_state;
    return t && t->handshake_done ? t->identity : NULL;
}

const broker_transport_t broker__tls = {
    .name = "tls",
    .accept = tls_accept,
    .read_start = tls_read_start,
    .read_stop = tls_read_stop,
    .write = tls_write,
    .queued = tls_queued,
    .close = tls_close,
    .user = tls_user,
};
