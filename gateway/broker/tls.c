/*
 * tls.c: the TLS transport (broker_int.h, TRANSPORT): MQTT over TLS on the
 * same libuv TCP handle as tcp.c, a gateway/tls stream in between (its
 * state in c->tp_state). conn.c sees the plaintext stream and nothing else.
 *
 * DESIGN. The SSL and its BIO are gateway/tls's (tls_stream.c: OpenSSL
 * never touches the socket; the handshake is non-blocking by
 * construction; a flight goes out as one write). This file ties a stream
 * to a connection: each libuv read is fed to it in place (no copy), and
 * what the SSL writes goes to tcp.c (broker__tcp_send: at once what the
 * kernel takes, the rest in its one uv_write at a time), so writing,
 * c->tx_queued / tx_held / tx_progress_ms, the write timeout and the
 * bounded close are tcp.c's, the same as a plain connection's: the limits
 * in conn.c hold unchanged. So nothing is buffered twice and an idle
 * connection holds no buffer of ours; tls_stream_release gives OpenSSL's
 * record buffers back too, once per read batch and after each write.
 *
 * Reading: each libuv read is decrypted at once into broker__conn_rx_buf's
 * buffer, record by record, while the connection reads. When conn.c stops
 * reading (read_stop: a password check, a full Receive Maximum window,
 * unread replies, backpressure), what is left stays: the rest of that
 * ciphertext in the stream (tls_stream_keep; counted in c->mem, so in
 * mqtt.max_partial_bytes), records already decrypted in the SSL. libuv
 * will not report those bytes again, so read_start schedules them
 * (t->later, a loop turn later: never from inside read_start, which conn.c
 * calls while it is processing). The end of the stream is held (t->eof)
 * until they are read: a client that sends its last PUBLISH and closes at
 * once is answered as on plain TCP.
 *
 * Coalescing (tls.read_coalesce_ms): read at each arrival, a busy QoS 0
 * stream costs a read, a wakeup and a pass of this file per few records.
 * After a read, broker__nap_rule (broker_int.h) may pause a connection:
 * its socket is left unread (uv_read_stop; conn.c still sees it reading)
 * and the server's one timer (srv->nap, running only while a connection
 * pauses) reads it again after pause_ms, with everything that came
 * meanwhile in one read. Only a quiet connection pauses: past CONNECT,
 * nothing kept or held, no QoS 1/2 PUBLISH awaiting its answer; so an
 * ack is never what waits, and a PINGREQ or PUBLISH that arrives during a
 * pause waits pause_ms at most (plus the loop's lateness). read_stop,
 * read_start and close end a pause.
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
 * callback closes t->later, whose callback frees the stream and releases c.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct tls {
    tls_stream_t *s;            /* NULL: no memory for it (the connection is aborted) */
    broker_conn_t *c;
    struct tls *nap_prev, *nap_next; /* srv->napping, while napping */
    uint64_t wake_ms;           /* napping: loop time it is read again */
    broker_nap_t nap;           /* its recent reads (broker__nap_rule) */
    uint32_t pause_ms;          /* its listener's tls.read_coalesce_ms (0: never pauses) */
    bool napping;               /* reading, but the socket not read until wake_ms (srv->nap's tick) */
    uv_timer_t later;           /* input left at a pause, handled a loop turn after read_start */
    size_t held;                /* the stream's kept ciphertext counted in c->mem */
    int eof;                    /* libuv's end of the stream (UV_EOF or an error), held until what came before is read */
    bool reading;               /* between read_start and read_stop */
    bool use_identity;          /* its listener's use_identity_as_username, when it was accepted */
    char *identity;             /* the client certificate's CN (tls_user), with use_identity */
} tls_t;

/* The ciphertext of one libuv read; the loop thread is the only reader and
 * each read is handled before the next is asked for (on_alloc, on_read). */
static uint8_t rxbuf[65536];

/* The stream's records, to tcp.c. */
static int send_records(void *arg, const uint8_t *p, size_t n)
{
    return broker__tcp_send(arg, p, n);
}

/* ---- handshake --------------------------------------------------------------- */

static void handshake_failed(broker_conn_t *c, const char *why)
{
    c->srv->conn_closed[METRICS_CLOSE_TLS_HANDSHAKE]++;
    /* a burst a second (an operator fixing certificates reads every reason), then a count */
    static tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, BROKER_CONN_LOG_BURST);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("TLS handshake failed: connection closed", TB_S("peer", broker__conn_peer(c)), TB_S("why", why),
                TB_U("suppressed", skipped));
    broker__conn_close(c, 0, "TLS handshake failed");
}

/* One step of the handshake. true once it is done (and c may read MQTT). */
static bool handshake(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    char why[256];
    int rc = tls_stream_handshake(t->s, why, sizeof why); /* sends the next flight, or the alert that says why not */
    if (rc < 0 && rc != TB_EPROTO) { /* tcp.c refused the flight */
        if (!c->closing)
            broker__conn_tx_failed(c, rc);
        return false;
    }
    if (c->closing)
        return false;
    if (rc == TB_EPROTO) {
        handshake_failed(c, why);
        return false;
    }
    if (rc == 0)
        return false;
    if (t->use_identity && !t->identity) {
        t->identity = tls_stream_peer_cn(t->s);
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
    if (!tls_stream_established(t->s) && !handshake(c))
        return;
    while (t->reading && !c->tp_closed) {
        uv_buf_t b;
        broker__conn_rx_buf(c, &b);
        if (b.len == 0) {
            rx_end(c, UV_ENOBUFS); /* conn.c closes it: mqtt.max_partial_bytes */
            return;
        }
        char why[256];
        ssize_t k = tls_stream_read(t->s, b.base, b.len, why, sizeof why);
        if (k > 0) {
            broker__conn_rx(c, &b, k);
            continue;
        }
        broker__conn_rx(c, &b, 0); /* gives the buffer back */
        if (k == 0)
            return;
        if (k == TB_ECLOSED) { /* its close_notify */
            rx_end(c, UV_EOF);
            return;
        }
        if (c->closing)
            return;
        c->srv->conn_closed[METRICS_CLOSE_MALFORMED]++; /* a record that does not decrypt is garbage */
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("TLS error: connection closed", TB_S("client", c->client_id ? c->client_id : ""),
                    TB_S("peer", broker__conn_peer(c)), TB_S("why", why), TB_U("suppressed", skipped));
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
        if (t->s)
            tls_stream_keep(t->s); /* tls_close gave everything back: drops the read */
        return;
    }
    size_t now = tls_stream_keep(t->s);
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
    return t->s && tls_stream_pending(t->s);
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

/* ---- read coalescing (tls.read_coalesce_ms) ------------------------------------ */

bool broker__nap_rule(broker_nap_t *n, uint64_t now_ms, size_t nread, uint32_t pause_ms, bool quiet)
{
    bool close_by = n->last_ms != 0 && now_ms - n->last_ms <= (uint64_t)pause_ms + 1; /* +1: the clock's ms */
    n->last_ms = now_ms;
    if (pause_ms == 0 || nread >= BROKER_NAP_SMALL || !close_by) {
        n->streak = 0; /* a large read, or after a gap: the next reads are at once */
        return false;
    }
    if (n->streak < BROKER_NAP_STREAK)
        n->streak++;
    return quiet && n->streak >= BROKER_NAP_STREAK;
}

static void nap_unlink(broker_conn_t *c)
{
    tls_t *t = c->tp_state;
    if (!t->napping)
        return;
    if (t->nap_prev)
        t->nap_prev->nap_next = t->nap_next;
    else
        c->srv->napping = t->nap_next;
    if (t->nap_next)
        t->nap_next->nap_prev = t->nap_prev;
    t->nap_prev = t->nap_next = NULL;
    t->napping = false;
    if (!c->srv->napping)
        uv_timer_stop(&c->srv->nap); /* nobody left to wake */
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* The tick: reads again every connection whose pause is over; runs again
 * for the earliest still pausing. */
static void nap_tick(uv_timer_t *h)
{
    broker_t *srv = h->data;
    uint64_t now = uv_now(srv->loop), next = 0;
    for (tls_t *t = srv->napping, *after; t; t = after) {
        after = t->nap_next;
        broker_conn_t *c = t->c;
        if (t->wake_ms > now) {
            next = next && next < t->wake_ms ? next : t->wake_ms;
            continue;
        }
        nap_unlink(c);
        int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        if (rc < 0) {
            t->reading = false;
            broker__conn_close(c, 0, uv_strerror(rc));
        }
    }
    if (srv->napping && next)
        uv_timer_start(&srv->nap, nap_tick, next - now, 0);
}

/* After a read was handled: pauses c's reading when broker__nap_rule says
 * so. A QoS 1/2 PUBLISH, its PUBREL, a CONNECT or a PINGREQ that arrives
 * meanwhile waits t->pause_ms at most; what is already read is answered as
 * ever (writing never waits on reading). */
static void maybe_nap(broker_conn_t *c, size_t nread)
{
    tls_t *t = c->tp_state;
    broker_t *srv = c->srv;
    uint64_t now = uv_now(srv->loop);
    bool quiet = t->reading && !t->eof && !c->tp_closed && !c->closing && c->connected && !c->auth &&
                 !c->blocked && c->unanswered == 0 && c->inflight == 0 && t->held == 0 && !pending(t);
    if (!broker__nap_rule(&t->nap, now, nread, t->pause_ms, quiet))
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    t->napping = true;
    t->wake_ms = now + t->pause_ms;
    t->nap_prev = NULL;
    t->nap_next = srv->napping;
    if (srv->napping)
        srv->napping->nap_prev = t;
    srv->napping = t;
    srv->naps++;
    if (c->listener)
        c->listener->tls_read_pauses++;
    if (!uv_is_active((uv_handle_t *)&srv->nap))
        uv_timer_start(&srv->nap, nap_tick, t->pause_ms, 0);
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
    tls_stream_feed(t->s, (const uint8_t *)buf->base, (size_t)nread);
    pump(c);
    keep_rest(c);
    if (t->pause_ms)
        maybe_nap(c, (size_t)nread);
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
    nap_unlink(c); /* (conn.c starts only what it stopped: never a napping one) */
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
    nap_unlink(c);
    if (!t->eof)
        uv_read_stop((uv_stream_t *)&c->tcp);
    t->reading = false;
    uv_timer_stop(&t->later);
}

/* ---- writing and closing -------------------------------------------------------- */

static int tls_write(broker_conn_t *c, const uint8_t *p, size_t n)
{
    tls_t *t = c->tp_state;
    /* UV_ENOTCONN before the handshake: conn.c writes only after a CONNECT */
    return t->s ? tls_stream_write(t->s, p, n) : UV_ENOTCONN;
}

static size_t tls_queued(const broker_conn_t *c)
{
    return c->tx_queued;
}

static void later_closed(uv_handle_t *h)
{
    broker_conn_t *c = h->data;
    tls_t *t = c->tp_state;
    tls_stream_free(t->s);
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
    nap_unlink(c);
    if (t->s && !c->abort)
        tls_stream_close_notify(t->s); /* when sound: the client knows the stream was not cut */
    /* conn.c gave back what c->mem counted (the kept ciphertext with it) before calling close */
    if (t->s)
        tls_stream_discard(t->s);
    t->held = 0;
    broker__tcp_close(c, socket_closed);
}

static void tls_accept(broker_t *srv, uv_stream_t *server)
{
    broker_listener_t *l = server->data;
    broker_conn_t *c = broker__conn_new(srv, &broker__tls);
    broker_addr_t peer;
    if (!broker__tcp_accept(srv, server, c, &peer))
        return;
    tls_t *t = tb_calloc(1, sizeof *t);
    t->c = c;
    c->tp_state = t;
    uv_timer_init(srv->loop, &t->later);
    t->later.data = c;
    t->use_identity = l->use_identity;
    t->pause_ms = l->cfg ? l->cfg->tls.read_coalesce_ms : 0;
    t->s = tls_stream_new(l->tls, send_records, c);
    if (!t->s) {
        c->abort = true;
        broker__conn_start(c, &peer);
        broker__conn_close(c, 0, "out of memory for its TLS session"); /* no-op if start closed it */
        return;
    }
    broker__conn_start(c, &peer); /* reads: the ClientHello */
}

static const char *tls_user(const broker_conn_t *c)
{
    const tls_t *t = c->tp_state;
    return t && t->s && tls_stream_established(t->s) ? t->identity : NULL;
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
