/*
 * tls_stream.c: one connection's SSL between a transport and its reader
 * (tls.h: tls_stream_*). Moved here from gateway/broker/tls.c so that the
 * MQTT listeners and the HTTP endpoint run the same record pump.
 *
 * DESIGN. OpenSSL never touches the socket: its SSL talks to one BIO of our
 * own (bio_method), whose
 *   read   serves what an earlier read left over (s->left), then the
 *          ciphertext of the read being handled (s->in, lent by the caller,
 *          not copied); when both are empty it says "retry", so
 *          SSL_do_handshake / SSL_read return WANT_READ and the caller's
 *          loop goes on: the handshake is non-blocking by construction;
 *   write  hands the records to the caller's send function at once, so the
 *          caller's write path, its accounting and its timeouts hold for
 *          TLS as for plain bytes. During the handshake the records of a
 *          flight are gathered (s->out) and sent as one call after the step.
 * So nothing is buffered twice and an idle stream holds no buffer of ours;
 * tls_stream_release gives OpenSSL's record buffers back too, once a read
 * batch is all taken (tls_stream_keep) and after each write: not per record
 * (SSL_MODE_RELEASE_BUFFERS freed and made the 16 KB read buffer again for
 * each one), so a batch of records costs one buffer. What a read leaves (its caller stopped reading: a full buffer, a
 * pause) is copied into s->left by tls_stream_keep, which says how much is
 * held so the caller can count it against its own bound.
 */
#include "gateway/tls/tls_int.h"
#include "base/base.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tls_stream {
    SSL *ssl;
    tls_send_fn send;
    void *arg;
    const uint8_t *in;          /* the ciphertext of the read being handled (NULL outside it) */
    size_t in_len;
    tb_buf_t left;              /* ciphertext read and not yet taken by the SSL */
    size_t left_off;            /* of it, taken already */
    tb_buf_t out;               /* a handshake flight, sent as one call */
    int write_err;              /* the send function refused: the SSL is told it failed */
    bool established;
    bool fatal;                 /* an SSL error: no close_notify, no more SSL calls */
    bool closed;                /* discarded: writes are dropped */
};

/* ---- the BIO between the SSL and the transport --------------------------------- */

static int bio_write(BIO *b, const char *p, int n)
{
    tls_stream_t *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (n <= 0)
        return 0;
    if (s->write_err)
        return -1;
    if (s->closed)
        return n; /* the connection is going: nothing more leaves */
    if (!s->established) {
        tb_buf_append(&s->out, p, (size_t)n); /* sent whole after this step of the handshake */
        return n;
    }
    int rc = s->send(s->arg, (const uint8_t *)p, (size_t)n);
    if (rc < 0) {
        s->write_err = rc;
        return -1;
    }
    return n;
}

static int bio_read(BIO *b, char *out, int n)
{
    tls_stream_t *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    size_t want = n > 0 ? (size_t)n : 0, got = 0;
    if (s->left.len > s->left_off) {
        got = TB_MIN(want, s->left.len - s->left_off);
        memcpy(out, s->left.data + s->left_off, got);
        s->left_off += got;
    }
    if (got < want && s->in_len > 0) {
        size_t k = TB_MIN(want - got, s->in_len);
        memcpy(out + got, s->in, k);
        s->in += k;
        s->in_len -= k;
        got += k;
    }
    if (got == 0) {
        BIO_set_retry_read(b); /* not the end: the next read brings more */
        return -1;
    }
    return (int)got;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* every write is already with the transport */
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
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tributary transport");
    if (!method || !BIO_meth_set_write(method, bio_write) || !BIO_meth_set_read(method, bio_read) ||
        !BIO_meth_set_ctrl(method, bio_ctrl) || !BIO_meth_set_create(method, bio_create))
        abort(); /* out of memory at the first TLS connection */
}

/* ---- life ------------------------------------------------------------------------ */

tls_stream_t *tls_stream_new(tls_ctx_t *t, tls_send_fn send, void *arg)
{
    pthread_once(&method_once, method_init);
    SSL *ssl = SSL_new(tls__ssl_ctx(t));
    BIO *b = ssl ? BIO_new(method) : NULL;
    if (!b) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    tls_stream_t *s = tb_calloc(1, sizeof *s);
    s->ssl = ssl;
    s->send = send;
    s->arg = arg;
    BIO_set_data(b, s);
    SSL_set_bio(ssl, b, b); /* one BIO both ways: the SSL owns it */
    SSL_set_accept_state(ssl);
    return s;
}

void tls_stream_free(tls_stream_t *s)
{
    if (!s)
        return;
    SSL_free(s->ssl); /* and its BIO */
    tb_buf_free(&s->left);
    tb_buf_free(&s->out);
    free(s);
}

/* ---- input ----------------------------------------------------------------------- */

void tls_stream_feed(tls_stream_t *s, const uint8_t *p, size_t n)
{
    s->in = p;
    s->in_len = n;
}

size_t tls_stream_keep(tls_stream_t *s)
{
    if (s->closed) {
        s->in = NULL;
        s->in_len = 0;
        return 0; /* discarded: everything was given back */
    }
    if (s->in_len == 0 && s->left.len == s->left_off)
        tls_stream_release(s); /* the read batch is over and all of it taken */
    if (s->left_off == s->left.len && s->left.len) {
        tb_buf_free(&s->left);
        s->left_off = 0;
    }
    if (s->in_len) {
        if (s->left_off > 0) { /* compact before growing */
            memmove(s->left.data, s->left.data + s->left_off, s->left.len - s->left_off);
            s->left.len -= s->left_off;
            s->left_off = 0;
        }
        tb_buf_append(&s->left, s->in, s->in_len);
    }
    s->in = NULL;
    s->in_len = 0;
    return s->left.len - s->left_off;
}

void tls_stream_release(tls_stream_t *s)
{
    /* SSL_free_buffers refuses (0) while its buffer holds a record, or
     * part of one, or plaintext not yet read: those wait for the next read */
    if (!s->fatal && !SSL_has_pending(s->ssl) && SSL_free_buffers(s->ssl) != 1)
        ERR_clear_error(); /* (it does not say why: only that something is held) */
}

bool tls_stream_pending(const tls_stream_t *s)
{
    return s->left.len > s->left_off || s->in_len > 0 || SSL_has_pending(s->ssl);
}

/* ---- the handshake and the records ---------------------------------------------------- */

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

/* OpenSSL's reason for what just failed on s (the queue cleared). */
static void why_failed(tls_stream_t *s, char *buf, size_t len)
{
    long v = SSL_get_verify_result(s->ssl);
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (v != X509_V_OK)
        snprintf(buf, len, "client certificate: %s", X509_verify_cert_error_string(v));
    else
        snprintf(buf, len, "%s", r ? r : "the peer closed or reset the connection");
    ERR_clear_error();
}

/* Sends what the handshake wrote (one flight, one call). 0 or the send function's error. */
static int send_flight(tls_stream_t *s)
{
    if (s->out.len == 0)
        return 0;
    int rc = s->closed ? 0 : s->send(s->arg, (const uint8_t *)s->out.data, s->out.len);
    tb_buf_free(&s->out);
    if (rc < 0)
        s->fatal = true;
    return rc;
}

int tls_stream_handshake(tls_stream_t *s, char *why, size_t whylen)
{
    if (whylen)
        why[0] = '\0';
    if (s->established)
        return 1;
    if (s->fatal)
        return TB_EPROTO;
    clear_errors();
    int r = SSL_do_handshake(s->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(s->ssl, r);
    bool failed = r != 1 && e != SSL_ERROR_WANT_READ;
    if (failed)
        why_failed(s, why, whylen); /* before anything else runs OpenSSL */
    int rc = send_flight(s); /* the next flight, or the alert that says why not */
    if (rc < 0)
        return rc;
    if (failed) {
        s->fatal = true;
        return TB_EPROTO;
    }
    if (r != 1)
        return 0;
    s->established = true;
    return 1;
}

bool tls_stream_established(const tls_stream_t *s)
{
    return s->established;
}

ssize_t tls_stream_read(tls_stream_t *s, void *buf, size_t len, char *why, size_t whylen)
{
    if (whylen)
        why[0] = '\0';
    if (s->fatal || !s->established)
        return TB_EPROTO;
    clear_errors();
    int k = SSL_read(s->ssl, buf, (int)TB_MIN(len, (size_t)INT_MAX));
    if (k > 0)
        return k;
    int e = SSL_get_error(s->ssl, k);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN) /* its close_notify */
        return TB_ECLOSED;
    why_failed(s, why, whylen);
    s->fatal = true;
    return TB_EPROTO;
}

int tls_stream_write(tls_stream_t *s, const void *buf, size_t n)
{
    if (!s->established || s->fatal)
        return s->write_err ? s->write_err : -ENOTCONN;
    const uint8_t *p = buf;
    while (n > 0) {
        clear_errors();
        int k = SSL_write(s->ssl, p, (int)TB_MIN(n, (size_t)INT_MAX));
        if (k <= 0) {
            s->fatal = true;
            ERR_clear_error();
            return s->write_err ? s->write_err : -EPROTO;
        }
        p += k;
        n -= (size_t)k;
    }
    tls_stream_release(s); /* the records are with the transport: an idle connection holds no buffer */
    return 0;
}

void tls_stream_close_notify(tls_stream_t *s)
{
    if (!s->established || s->fatal || s->closed)
        return;
    ERR_clear_error();
    SSL_shutdown(s->ssl); /* close_notify: the peer knows the stream was not cut */
    ERR_clear_error();
}

void tls_stream_discard(tls_stream_t *s)
{
    s->closed = true;
    tb_buf_free(&s->left);
    s->left_off = 0;
    s->in = NULL;
    s->in_len = 0;
}

char *tls_stream_peer_cn(tls_stream_t *s)
{
    return tls__common_name(SSL_get0_peer_certificate(s->ssl));
}
