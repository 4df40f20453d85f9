/*
 * gateway/tls on its own, with no socket: a client SSL over memory BIOs
 * talks to a tls_stream_t, the test carrying the bytes between them, so
 * each claim (a handshake fed one byte at a time, what keep holds, a
 * flight sent as one call, garbage instead of a ClientHello, close_notify,
 * a failing send function) is checked on the engine alone. Contexts:
 * every key's error names the key, the file, and the line when given.
 *
 * The certificate is made here with OpenSSL (EC P-256, self-signed, CN
 * "tls-unit") in a directory of the test's own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/gateway/tls/helper_cert.h"
#include "base/base.h"
#include "gateway/tls/tls.h"

static char certdir[64], cert[128], key[128];

/* ---- OpenSSL's record buffers, counted ---------------------------------------------
 * Every allocation OpenSSL makes goes through these (set before main, before
 * its first one): blocks of 16 KB or more, the record buffers, are counted as
 * they are made and tracked while they live. */

#define BIG (16 * 1024)
static int mem_set;                 /* CRYPTO_set_mem_functions took them */
static int big_allocs;              /* blocks >= BIG made */
static void *big_live[256];         /* and not yet freed */

static void big_forget(void *p)
{
    for (size_t i = 0; p && i < TB_ARRAY_LEN(big_live); i++)
        if (big_live[i] == p)
            big_live[i] = NULL;
}

static void big_note(void *p, size_t n)
{
    if (!p || n < BIG)
        return;
    big_allocs++;
    for (size_t i = 0; i < TB_ARRAY_LEN(big_live); i++)
        if (!big_live[i]) {
            big_live[i] = p;
            return;
        }
}

static int big_count(void)
{
    int n = 0;
    for (size_t i = 0; i < TB_ARRAY_LEN(big_live); i++)
        n += big_live[i] != NULL;
    return n;
}

static void *cnt_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    void *p = malloc(n);
    big_note(p, n);
    return p;
}

static void *cnt_realloc(void *old, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    void *p = realloc(old, n);
    if (p || n == 0)
        big_forget(old);
    big_note(p, n);
    return p;
}

static void cnt_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    big_forget(p);
    free(p);
}

__attribute__((constructor)) static void count_openssl_memory(void)
{
    mem_set = CRYPTO_set_mem_functions(cnt_malloc, cnt_realloc, cnt_free);
}

static void make_cert(void)
{
    snprintf(certdir, sizeof certdir, "/tmp/tb_tlsu_XXXXXX");
    cr_assert_not_null(mkdtemp(certdir));
    hc_make_cert(certdir, "server", "tls-unit", cert, key);
}

static void rm_certs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", certdir);
    cr_assert_eq(system(cmd), 0);
}

static cfg_tls_t keys(const char *c, const char *k)
{
    return (cfg_tls_t){ .cert_file = (char *)c, .key_file = (char *)k, .ca_file = "", .ciphers = "" };
}

/* ---- a pair: the server stream and a client over memory BIOs ------------------ */

typedef struct {
    tls_ctx_t *ctx;
    tls_stream_t *s;
    SSL *cl;
    BIO *cl_in, *cl_out;      /* what the client reads (the server's records), what it wrote */
    tb_buf_t to_client;       /* the server's records, as its send function got them */
    int sends;                /* calls of the send function */
    int fail_send;            /* its answer when not 0 */
} pair_t;

static int send_cb(void *arg, const uint8_t *p, size_t n)
{
    pair_t *pr = arg;
    pr->sends++;
    if (pr->fail_send)
        return pr->fail_send;
    tb_buf_append(&pr->to_client, p, n);
    return 0;
}

static void pair_open(pair_t *pr)
{
    memset(pr, 0, sizeof *pr);
    cfg_tls_t k = keys(cert, key);
    char err[512];
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "unit", &pr->ctx, err, sizeof err), 0, "%s", err);
    pr->s = tls_stream_new(pr->ctx, send_cb, pr);
    cr_assert_not_null(pr->s);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(cctx, cert, NULL);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
    pr->cl = SSL_new(cctx);
    SSL_CTX_free(cctx);
    pr->cl_in = BIO_new(BIO_s_mem());
    pr->cl_out = BIO_new(BIO_s_mem());
    SSL_set_bio(pr->cl, pr->cl_in, pr->cl_out);
    SSL_set_connect_state(pr->cl);
}

static void pair_close(pair_t *pr)
{
    tls_stream_free(pr->s);
    tls_ctx_unref(pr->ctx);
    SSL_free(pr->cl);
    tb_buf_free(&pr->to_client);
}

/* The server's records so far, to the client. */
static void to_client(pair_t *pr)
{
    if (pr->to_client.len)
        BIO_write(pr->cl_in, pr->to_client.data, (int)pr->to_client.len);
    tb_buf_reset(&pr->to_client);
}

/* What the client wrote, taken out of its BIO (caller frees). */
static size_t from_client(pair_t *pr, uint8_t **out)
{
    char *p;
    long n = BIO_get_mem_data(pr->cl_out, &p);
    *out = tb_malloc(n > 0 ? (size_t)n : 1);
    memcpy(*out, p, (size_t)n);
    (void)BIO_reset(pr->cl_out);
    return (size_t)n;
}

/* Feeds bytes to the server `step` at a time, stepping its handshake after
 * each read as a transport would; returns its last answer. */
static int feed_handshake(pair_t *pr, const uint8_t *p, size_t n, size_t step)
{
    int rc = 0;
    char why[256];
    for (size_t off = 0; off < n && rc == 0; off += step) {
        size_t k = TB_MIN(step, n - off);
        tls_stream_feed(pr->s, p + off, k);
        rc = tls_stream_handshake(pr->s, why, sizeof why);
        tls_stream_keep(pr->s);
    }
    return rc;
}

/* Runs the whole handshake, the client's flights fed to the server `step` bytes at a time. */
static void handshake(pair_t *pr, size_t step)
{
    int srv = 0;
    for (int round = 0; round < 10 && srv != 1; round++) {
        int r = SSL_do_handshake(pr->cl);
        cr_assert(r == 1 || SSL_get_error(pr->cl, r) == SSL_ERROR_WANT_READ, "client: %s",
                  ERR_reason_error_string(ERR_peek_last_error()));
        uint8_t *p;
        size_t n = from_client(pr, &p);
        srv = feed_handshake(pr, p, n, step);
        free(p);
        cr_assert_geq(srv, 0, "server handshake: %d", srv);
        to_client(pr);
    }
    cr_assert_eq(srv, 1);
    cr_assert(tls_stream_established(pr->s));
    cr_assert_eq(SSL_do_handshake(pr->cl), 1);
}

/* ---- streams ------------------------------------------------------------------ */

Test(tls_stream, a_handshake_fed_one_byte_at_a_time_completes, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 1);
    /* the client's request and the server's answer cross as records */
    cr_assert_eq(SSL_write(pr.cl, "GET /healthz", 12), 12);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    tls_stream_feed(pr.s, p, n);
    char buf[64], why[256];
    ssize_t k = tls_stream_read(pr.s, buf, sizeof buf, why, sizeof why);
    cr_assert_eq(k, 12);
    cr_assert_eq(memcmp(buf, "GET /healthz", 12), 0);
    cr_assert_eq(tls_stream_read(pr.s, buf, sizeof buf, why, sizeof why), 0, "nothing more: later");
    cr_assert_eq(tls_stream_keep(pr.s), 0, "everything taken: nothing kept");
    free(p);
    cr_assert_eq(tls_stream_write(pr.s, "ok\n", 3), 0);
    to_client(&pr);
    cr_assert_eq(SSL_read(pr.cl, buf, sizeof buf), 3);
    pair_close(&pr);
}

Test(tls_stream, a_flight_is_sent_in_one_call, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    SSL_do_handshake(pr.cl);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    tls_stream_feed(pr.s, p, n);
    char why[256];
    cr_assert_eq(tls_stream_handshake(pr.s, why, sizeof why), 0, "the server waits for the client's Finished");
    cr_assert_eq(pr.sends, 1, "ServerHello .. Finished: one flight, one send");
    cr_assert_gt(pr.to_client.len, 100);
    tls_stream_keep(pr.s);
    free(p);
    pair_close(&pr);
}

Test(tls_stream, what_a_read_leaves_is_kept_and_read_later, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 4096);
    char big[3000];
    memset(big, 'x', sizeof big);
    cr_assert_eq(SSL_write(pr.cl, big, sizeof big), (int)sizeof big);
    cr_assert_eq(SSL_write(pr.cl, "second", 6), 6);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    tls_stream_feed(pr.s, p, n);
    char buf[4096], why[256];
    cr_assert_eq(tls_stream_read(pr.s, buf, 100, why, sizeof why), 100, "the reader takes 100 bytes and stops");
    size_t kept = tls_stream_keep(pr.s);
    free(p); /* the read's buffer goes back to the transport */
    cr_assert_gt(kept, 0, "the second record stays, copied");
    cr_assert_lt(kept, n);
    cr_assert(tls_stream_pending(pr.s));
    size_t got = 100;
    for (;;) {
        ssize_t k = tls_stream_read(pr.s, buf, sizeof buf, why, sizeof why);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    cr_assert_eq(got, sizeof big + 6, "every byte, in order, with no new input");
    cr_assert_eq(tls_stream_keep(pr.s), 0);
    cr_assert(!tls_stream_pending(pr.s));
    pair_close(&pr);
}

Test(tls_stream, record_buffers_are_made_once_per_read_batch_and_given_back_after_it, .init = make_cert,
     .fini = rm_certs)
{
    cr_assert_eq(mem_set, 1, "OpenSSL's allocations are counted");
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 4096);
    cr_assert_eq(tls_stream_write(pr.s, "hello", 5), 0); /* (a ticket may follow the handshake: write once) */
    int idle = big_count();
    enum { RECORDS = 50 };
    char msg[120];
    memset(msg, 'm', sizeof msg);
    for (int i = 0; i < RECORDS; i++)
        cr_assert_eq(SSL_write(pr.cl, msg, sizeof msg), (int)sizeof msg);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    int allocs0 = big_allocs;
    tls_stream_feed(pr.s, p, n);
    char buf[4096], why[256];
    size_t got = 0;
    for (;;) {
        ssize_t k = tls_stream_read(pr.s, buf, sizeof buf, why, sizeof why);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    cr_assert_eq(got, RECORDS * sizeof msg);
    cr_assert_eq(big_count(), idle + 1, "the read buffer, while the batch is read");
    cr_assert_eq(tls_stream_keep(pr.s), 0);
    free(p);
    cr_assert_eq(big_allocs - allocs0, 1, "one read buffer for %d records, not one each", RECORDS);
    cr_assert_eq(big_count(), idle, "the batch read: the buffer is given back");
    cr_assert_eq(tls_stream_write(pr.s, "ok", 2), 0);
    cr_assert_eq(big_count(), idle, "the write buffer goes back after its record");
    pair_close(&pr);
}

Test(tls_stream, plain_http_instead_of_a_client_hello_fails_with_its_reason, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    tls_stream_feed(pr.s, (const uint8_t *)req, sizeof req - 1);
    char why[256];
    cr_assert_eq(tls_stream_handshake(pr.s, why, sizeof why), TB_EPROTO);
    cr_assert(strstr(why, "http request"), "%s", why);
    cr_assert_eq(tls_stream_write(pr.s, "x", 1), -ENOTCONN, "a failed stream writes nothing");
    tls_stream_keep(pr.s);
    pair_close(&pr);
}

Test(tls_stream, close_notify_is_the_end_of_the_stream, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 512);
    SSL_shutdown(pr.cl);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    tls_stream_feed(pr.s, p, n);
    char buf[16], why[256];
    cr_assert_eq(tls_stream_read(pr.s, buf, sizeof buf, why, sizeof why), TB_ECLOSED);
    tls_stream_keep(pr.s);
    free(p);
    /* and ours, once: the client sees a clean end */
    tls_stream_close_notify(pr.s);
    to_client(&pr);
    cr_assert_eq(SSL_read(pr.cl, buf, sizeof buf), 0);
    cr_assert_eq(SSL_get_error(pr.cl, 0), SSL_ERROR_ZERO_RETURN);
    pair_close(&pr);
}

Test(tls_stream, a_send_that_fails_fails_the_write_with_its_error, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 4096);
    pr.fail_send = -EPIPE;
    cr_assert_eq(tls_stream_write(pr.s, "data", 4), -EPIPE);
    cr_assert_eq(tls_stream_write(pr.s, "data", 4), -EPIPE, "fatal from then on, with the same error");
    pair_close(&pr);
}

Test(tls_stream, a_discarded_stream_drops_writes_and_keeps_nothing, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 4096);
    cr_assert_eq(SSL_write(pr.cl, "abc", 3), 3);
    uint8_t *p;
    size_t n = from_client(&pr, &p);
    tls_stream_feed(pr.s, p, n);
    tls_stream_discard(pr.s);
    cr_assert_eq(tls_stream_keep(pr.s), 0);
    free(p);
    int before = pr.sends;
    tls_stream_close_notify(pr.s);
    cr_assert_eq(pr.sends, before, "nothing leaves a discarded stream");
    pair_close(&pr);
}

Test(tls_stream, the_peer_cn_is_the_client_certificates, .init = make_cert, .fini = rm_certs)
{
    pair_t pr;
    pair_open(&pr);
    handshake(&pr, 4096);
    cr_assert_null(tls_stream_peer_cn(pr.s), "no client certificate: no CN");
    pair_close(&pr);
}

/* ---- contexts ------------------------------------------------------------------ */

Test(tls_ctx, errors_name_the_key_the_file_and_the_line_when_given, .init = make_cert, .fini = rm_certs)
{
    tls_ctx_t *t = NULL;
    char err[512], none[160];
    snprintf(none, sizeof none, "%s/none.pem", certdir);
    cfg_tls_t k = keys(none, key);
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert_null(t);
    cr_assert(strstr(err, "http.tls.cert_file: ") == err && strstr(err, "/none.pem: cannot open: No such file"),
              "%s", err);
    cr_assert_eq(tls_ctx_load(&k, "mqtt.listeners[2].tls", 7, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[2].tls.cert_file (line 7): ") == err, "%s", err);
    k = keys(cert, cert);
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "http.tls.key_file: ") && strstr(err, "no private key"), "%s", err);
    k = keys(key, key);
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "http.tls.cert_file: ") && strstr(err, "no certificate could be loaded"), "%s", err);
    k = keys(cert, key);
    k.ciphers = "NOT-A-CIPHER";
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "http.tls.ciphers: \"NOT-A-CIPHER\": no cipher matches"), "%s", err);
    k = keys(cert, key);
    k.ca_file = key;
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "http.tls.ca_file: "), "%s", err);
}

Test(tls_ctx, a_context_describes_its_certificate_and_is_counted, .init = make_cert, .fini = rm_certs)
{
    tls_ctx_t *t = NULL;
    char err[512];
    cfg_tls_t k = keys(cert, key);
    cr_assert_eq(tls_ctx_load(&k, "http.tls", 0, "x", &t, err, sizeof err), 0, "%s", err);
    tls_ctx_info_t in;
    tls_ctx_info(t, &in);
    cr_assert_str_eq(in.subject, "tls-unit");
    cr_assert_str_eq(in.cert_file, cert);
    cr_assert(!in.expired);
    cr_assert(!in.require_cert);
    cr_assert_neq(in.not_after[0], '\0');
    /* a stream outlives its context's last reference: the SSL holds the SSL_CTX */
    tls_stream_t *s = tls_stream_new(tls_ctx_ref(t), send_cb, NULL);
    tls_ctx_unref(t);
    tls_ctx_unref(t);
    cr_assert_not_null(s);
    tls_stream_free(s);
}
