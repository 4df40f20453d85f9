/*
 * The TLS transport (tls.c) and its contexts (tls_ctx.c) on a real
 * listener on 127.0.0.1: a client thread speaks TLS through memory BIOs
 * over a blocking socket (so it can put several records in one TCP write),
 * while the test's thread turns the broker's loop until it is done.
 *
 * The certificate is made here with OpenSSL (EC P-256, self-signed, CN
 * and SAN 127.0.0.1) in a directory of the test's own.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "unit/gateway/tls/helper_cert.h"
#include "helper_broker.h"

static char certdir[64], cert[128], key[128];

static void make_cert(void)
{
    snprintf(certdir, sizeof certdir, "/tmp/tb_tls_XXXXXX");
    cr_assert_not_null(mkdtemp(certdir));
    hc_make_cert(certdir, "server", "127.0.0.1", cert, key);
}

static void rm_certs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", certdir);
    cr_assert_eq(system(cmd), 0);
}

/* A broker with one TLS listener on 127.0.0.1:0 (and `extra` under mqtt:); its port. */
static int open_tls(hb_t *h, const char *extra)
{
    make_cert();
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  listeners:\n"
             "    - address: \"127.0.0.1:0\"\n"
             "      tls: {cert_file: \"%s\", key_file: \"%s\"}\n"
             "%s",
             cert, key, extra);
    hb_open_with(h, yaml);
    broker_tls_t *t;
    char err[512];
    cr_assert_eq(broker_tls_load(h->cfg, &t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(broker_tls_count(t), 1);
    broker_set_tls(h->b, t);
    cr_assert_eq(broker_listen(h->b), 0);
    const char *addr = broker_listener_addr(h->b, 0);
    cr_assert_not_null(addr);
    return atoi(strrchr(addr, ':') + 1);
}

/* ---- the client (its own thread) --------------------------------------------- */

typedef struct client {
    int port;
    bool garbage;          /* send an HTTP request instead of a ClientHello */
    int publishes;         /* QoS 1 PUBLISHes sent with the CONNECT, each its own record, one TCP write */
    bool half_close;       /* then shut the socket's sending side at once, and read until the server closes */
    int fd;
    SSL *ssl;
    BIO *rd, *wr;
    uint8_t in[4096];      /* plaintext read */
    size_t in_len;
    bool handshake_ok, closed_by_server;
    int pubacks;
    atomic_bool done;
    char why[256];
} client_t;

static void flush_out(client_t *k)
{
    char buf[16384];
    int n;
    while ((n = BIO_read(k->wr, buf, sizeof buf)) > 0)
        if (send(k->fd, buf, (size_t)n, MSG_NOSIGNAL) != n) /* no cr_assert off the test's thread */
            snprintf(k->why, sizeof k->why, "send failed");
}

/* Reads from the socket into the SSL; false at the end of the stream. */
static bool feed(client_t *k)
{
    char buf[16384];
    ssize_t n = recv(k->fd, buf, sizeof buf, 0);
    if (n <= 0)
        return false;
    BIO_write(k->rd, buf, (int)n);
    return true;
}

static void *client_main(void *arg)
{
    client_t *k = arg;
    k->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)k->port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = { 5, 0 };
    setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(k->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        snprintf(k->why, sizeof k->why, "connect failed");
        goto out;
    }
    if (k->garbage) {
        const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        send(k->fd, req, sizeof req - 1, MSG_NOSIGNAL);
        char buf[256];
        while (recv(k->fd, buf, sizeof buf, 0) > 0) {
        }
        k->closed_by_server = true;
        goto out;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, cert, NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    k->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx);
    k->rd = BIO_new(BIO_s_mem());
    k->wr = BIO_new(BIO_s_mem());
    SSL_set_bio(k->ssl, k->rd, k->wr);
    SSL_set_connect_state(k->ssl);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), "127.0.0.1");
    for (;;) {
        int r = SSL_do_handshake(k->ssl);
        flush_out(k);
        if (r == 1)
            break;
        if (SSL_get_error(k->ssl, r) != SSL_ERROR_WANT_READ || !feed(k)) {
            snprintf(k->why, sizeof k->why, "handshake: %s", ERR_reason_error_string(ERR_peek_last_error()));
            goto out;
        }
    }
    k->handshake_ok = true;
    /* MQTT 3.1.1 CONNECT, client id "tls", then the PUBLISHes: records written together */
    const uint8_t connect_[] = { 0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 3, 't', 'l', 's' };
    SSL_write(k->ssl, connect_, sizeof connect_);
    for (int i = 1; i <= k->publishes; i++) {
        const uint8_t p[] = { 0x32, 9, 0, 3, 't', '/', 'x', 0, (uint8_t)i, 'h', 'i' };
        SSL_write(k->ssl, p, sizeof p);
    }
    flush_out(k); /* one send: every record in one TCP write */
    if (k->half_close) {
        shutdown(k->fd, SHUT_WR);
        while (feed(k)) {
        }
        goto out;
    }
    /* CONNACK, then a PUBACK for each */
    while (k->pubacks < k->publishes || k->in_len < 4) {
        int n = SSL_read(k->ssl, k->in + k->in_len, (int)(sizeof k->in - k->in_len));
        if (n > 0) {
            k->in_len += (size_t)n;
            k->pubacks = 0;
            for (size_t i = 4; i + 4 <= k->in_len; i += 4)
                k->pubacks += k->in[i] == 0x40;
            continue;
        }
        flush_out(k);
        if (SSL_get_error(k->ssl, n) != SSL_ERROR_WANT_READ || !feed(k)) {
            snprintf(k->why, sizeof k->why, "read: the stream ended with %d PUBACKs", k->pubacks);
            goto out;
        }
    }
out:
    if (k->ssl)
        SSL_free(k->ssl);
    close(k->fd);
    atomic_store(&k->done, true);
    return NULL;
}

static bool client_done(void *arg)
{
    return atomic_load(&((client_t *)arg)->done);
}

static void run_client(hb_t *h, client_t *k)
{
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, client_main, k), 0);
    cr_assert(hb_run_until(h, client_done, k, 10000), "the client did not finish");
    pthread_join(th, NULL);
}

typedef struct { hb_t *h; uint64_t n; } count_t;
static bool handshakes_failed(void *arg)
{
    count_t *w = arg;
    return w->h->b->conn_closed[METRICS_CLOSE_TLS_HANDSHAKE] >= w->n;
}

/* ---- tests --------------------------------------------------------------------- */

Test(tls, mqtt_over_tls_reaches_the_broker_and_answers)
{
    hb_t h;
    client_t k = { .publishes = 1 };
    k.port = open_tls(&h, "");
    run_client(&h, &k);
    cr_assert(k.handshake_ok, "%s", k.why);
    cr_assert_eq(k.pubacks, 1, "%s", k.why);
    cr_assert_eq(memcmp(k.in, "\x20\x02\x00\x00", 4), 0, "a CONNACK first");
    cr_assert(hb_log_has(&h, "tls=true"), "the listener says it is TLS");
    hb_close(&h);
    rm_certs();
}

Test(tls, records_left_at_a_pause_are_read_when_reading_resumes)
{
    /* receive_maximum 1: the broker stops reading after each PUBLISH until
     * its PUBACK. The client's 5 PUBLISHes came in one TCP write, so the
     * 4 behind the first are already read from the socket: libuv will never
     * report them again, and only the transport's own restart answers them. */
    hb_t h;
    client_t k = { .publishes = 5 };
    k.port = open_tls(&h, "  receive_maximum: 1\n");
    run_client(&h, &k);
    cr_assert(k.handshake_ok, "%s", k.why);
    cr_assert_eq(k.pubacks, 5, "%s", k.why);
    cr_assert_eq(broker_topic(h.b, 0)->received, 5);
    hb_close(&h); /* asserts partial_bytes went back to 0: the kept ciphertext was given back */
    rm_certs();
}

static bool received5(void *arg)
{
    return broker_topic(((hb_t *)arg)->b, 0)->received >= 5;
}

Test(tls, records_before_the_end_of_the_stream_are_read_first)
{
    /* The same 5 PUBLISHes, then the client closes its side at once: the
     * end of the stream must not overtake the records kept at a pause
     * (every one is received, as over plain TCP, where the kernel keeps
     * them in order with the FIN). */
    hb_t h;
    client_t k = { .publishes = 5, .half_close = true };
    k.port = open_tls(&h, "  receive_maximum: 1\n");
    run_client(&h, &k);
    cr_assert(k.handshake_ok, "%s", k.why);
    cr_assert(hb_run_until(&h, received5, &h, 5000), "received %llu of 5",
              (unsigned long long)broker_topic(h.b, 0)->received);
    hb_close(&h);
    rm_certs();
}

Test(tls, garbage_instead_of_a_client_hello_closes_that_connection_counted)
{
    hb_t h;
    client_t bad = { .garbage = true };
    bad.port = open_tls(&h, "");
    run_client(&h, &bad);
    cr_assert(bad.closed_by_server);
    count_t w = { &h, 1 };
    cr_assert(hb_run_until(&h, handshakes_failed, &w, 5000));
    cr_assert(hb_log_has(&h, "TLS handshake failed"));
    /* the listener still serves */
    client_t good = { .publishes = 1, .port = bad.port };
    run_client(&h, &good);
    cr_assert_eq(good.pubacks, 1, "%s", good.why);
    cr_assert_eq(h.b->conn_closed[METRICS_CLOSE_TLS_HANDSHAKE], 1);
    hb_close(&h);
    rm_certs();
}

/* broker_tls_load of a listener whose tls mapping is `tls` */
static int load_tls(const char *tls, char *err, size_t errlen)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
             "mqtt:\n"
             "  listeners:\n"
             "    - address: \"127.0.0.1:0\"\n"
             "    - address: \"127.0.0.1:0\"\n"
             "      tls: %s\n"
             "  topic_mappings:\n"
             "    - {mqtt_pattern: \"t/#\", danube_topic: /edge1/t}\n",
             tls);
    cfg_t *cfg;
    char cerr[512];
    cr_assert_eq(cfg_load_string("test.yaml", yaml, strlen(yaml), NULL, &cfg, cerr, sizeof cerr), 0, "%s", cerr);
    broker_tls_t *t = NULL;
    int rc = broker_tls_load(cfg, &t, err, errlen);
    if (rc == 0) {
        cr_assert_eq(broker_tls_count(t), 1);
        broker_tls_free(t);
    } else {
        cr_assert_null(t);
    }
    cfg_free(cfg);
    return rc;
}

Test(tls, a_file_that_does_not_load_names_its_key_and_file)
{
    make_cert();
    char tls[512], err[512];
    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\"}", cert, key);
    cr_assert_eq(load_tls(tls, err, sizeof err), 0, "%s", err);

    snprintf(tls, sizeof tls, "{cert_file: \"%s/none.pem\", key_file: \"%s\"}", certdir, key);
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.cert_file (line 5): ") && strstr(err, "/none.pem: cannot open") &&
                  strstr(err, "No such file"),
              "%s", err);

    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\"}", key, key); /* a key is not a certificate */
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.cert_file") && strstr(err, "no certificate could be loaded"), "%s",
              err);

    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\"}", cert, cert); /* nor a certificate a key */
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.key_file") && strstr(err, "no private key"), "%s", err);

    /* another key than the certificate's */
    char other[160];
    snprintf(other, sizeof other, "%s/other.key", certdir);
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    FILE *f = fopen(other, "w");
    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    EVP_PKEY_free(pk);
    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\"}", cert, other);
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.key_file") && strstr(err, "is not the key of tls.cert_file"), "%s",
              err);

    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\", ciphers: \"NOT-A-CIPHER\"}", cert, key);
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.ciphers") && strstr(err, "no cipher matches"), "%s", err);

    snprintf(tls, sizeof tls, "{cert_file: \"%s\", key_file: \"%s\", ca_file: \"%s\"}", cert, key, key);
    cr_assert_eq(load_tls(tls, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "mqtt.listeners[1].tls.ca_file"), "%s", err);
    rm_certs();
}

/* ---- read coalescing (tls.read_coalesce_ms) ------------------------------------ */

Test(tls_nap, a_run_of_small_close_reads_pauses_only_when_quiet)
{
    broker_nap_t n = { 0 };
    uint64_t t = 1000;
    /* the first read has nothing before it; then BROKER_NAP_STREAK close ones */
    cr_assert_not(broker__nap_rule(&n, t, 300, 1, true));
    for (int i = 1; i < BROKER_NAP_STREAK; i++)
        cr_assert_not(broker__nap_rule(&n, ++t, 300, 1, true), "read %d", i);
    cr_assert(broker__nap_rule(&n, ++t, 300, 1, true), "a busy quiet connection pauses");
    /* the same run with a QoS 1/2 PUBLISH awaiting its ack: never */
    cr_assert_not(broker__nap_rule(&n, t + 1, 300, 1, false));
    cr_assert_not(broker__nap_rule(&n, t + 2, 300, 1, false));
    /* quiet again: pauses again at once (the run went on) */
    cr_assert(broker__nap_rule(&n, t + 3, 300, 1, true));
}

Test(tls_nap, a_slow_client_or_large_reads_or_0_never_pause)
{
    broker_nap_t slow = { 0 }, large = { 0 }, off = { 0 };
    for (uint64_t i = 0; i < 100; i++) {
        /* a read every 3 ms: more than the pause and the clock's ms apart */
        cr_assert_not(broker__nap_rule(&slow, 1000 + 3 * i, 100, 1, true), "read %llu", (unsigned long long)i);
        cr_assert_not(broker__nap_rule(&large, 1000 + i, BROKER_NAP_SMALL, 1, true));
        cr_assert_not(broker__nap_rule(&off, 1000 + i / 10, 100, 0, true));
    }
    /* a gap ends a run: the reads after it are at once again */
    broker_nap_t n = { 0 };
    uint64_t t = 1000;
    for (int i = 0; i <= BROKER_NAP_STREAK; i++)
        broker__nap_rule(&n, t++, 100, 2, true);
    cr_assert(broker__nap_rule(&n, t + 2, 100, 2, true), "3 ms after, with a 2 ms pause: still the run");
    cr_assert_not(broker__nap_rule(&n, t + 20, 100, 2, true), "after a gap");
    cr_assert_not(broker__nap_rule(&n, t + 21, 100, 2, true));
}

/* A client that streams PUBLISHes, each record its own TCP write (so the
 * broker sees small reads), gap_us apart, then a PINGREQ, and reads until
 * the PINGRESP (counting PUBACKs on the way). */
typedef struct streamer {
    int port;
    int count, qos, gap_us;
    int pubacks;
    bool pingresp;
    atomic_bool done;
    char why[256];
} streamer_t;

static void *streamer_main(void *arg)
{
    streamer_t *s = arg;
    client_t k = { .port = s->port };
    k.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)k.port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = { 5, 0 };
    setsockopt(k.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, cert, NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    k.ssl = SSL_new(ctx);
    SSL_CTX_free(ctx);
    k.rd = BIO_new(BIO_s_mem());
    k.wr = BIO_new(BIO_s_mem());
    SSL_set_bio(k.ssl, k.rd, k.wr);
    SSL_set_connect_state(k.ssl);
    if (connect(k.fd, (struct sockaddr *)&a, sizeof a) != 0) {
        snprintf(s->why, sizeof s->why, "connect failed");
        goto out;
    }
    for (;;) {
        int r = SSL_do_handshake(k.ssl);
        flush_out(&k);
        if (r == 1)
            break;
        if (SSL_get_error(k.ssl, r) != SSL_ERROR_WANT_READ || !feed(&k)) {
            snprintf(s->why, sizeof s->why, "handshake failed");
            goto out;
        }
    }
    const uint8_t connect_[] = { 0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 3, 's', 't', 'r' };
    SSL_write(k.ssl, connect_, sizeof connect_);
    flush_out(&k);
    for (int i = 1; i <= s->count; i++) {
        uint16_t id = (uint16_t)(i % 65535 + 1);
        const uint8_t q1[] = { 0x32, 9, 0, 3, 't', '/', 'x', (uint8_t)(id >> 8), (uint8_t)id, 'h', 'i' };
        const uint8_t q0[] = { 0x30, 7, 0, 3, 't', '/', 'x', 'h', 'i' };
        if (s->qos)
            SSL_write(k.ssl, q1, sizeof q1);
        else
            SSL_write(k.ssl, q0, sizeof q0);
        flush_out(&k); /* a record, a TCP write */
        if (s->gap_us) {
            struct timespec ts = { 0, (long)s->gap_us * 1000 }; /* the client's pace, not a wait for the broker */
            nanosleep(&ts, NULL);
        }
    }
    const uint8_t ping[] = { 0xc0, 0 };
    SSL_write(k.ssl, ping, sizeof ping);
    flush_out(&k);
    /* CONNACK, PUBACKs, then the PINGRESP: each packet here is < 128 bytes */
    for (;;) {
        size_t at = 0;
        while (at + 2 <= k.in_len && at + 2 + k.in[at + 1] <= k.in_len) {
            if (k.in[at] == 0x40)
                s->pubacks++;
            if (k.in[at] == 0xd0)
                s->pingresp = true;
            at += 2 + k.in[at + 1];
        }
        memmove(k.in, k.in + at, k.in_len - at);
        k.in_len -= at;
        if (s->pingresp && s->pubacks >= (s->qos ? s->count : 0))
            break; /* (a PINGRESP may pass PUBACKs waiting for the log) */
        int n = SSL_read(k.ssl, k.in + k.in_len, (int)(sizeof k.in - k.in_len));
        if (n > 0) {
            k.in_len += (size_t)n;
            continue;
        }
        flush_out(&k);
        if (SSL_get_error(k.ssl, n) != SSL_ERROR_WANT_READ || !feed(&k)) {
            snprintf(s->why, sizeof s->why, "read: the stream ended before the PINGRESP (%d PUBACKs)", s->pubacks);
            break;
        }
    }
out:
    SSL_free(k.ssl);
    close(k.fd);
    atomic_store(&s->done, true);
    return NULL;
}

static bool streamer_done(void *arg)
{
    return atomic_load(&((streamer_t *)arg)->done);
}

static void run_streamer(hb_t *h, streamer_t *s)
{
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, streamer_main, s), 0);
    cr_assert(hb_run_until(h, streamer_done, s, 60000), "the client did not finish");
    pthread_join(th, NULL);
    cr_assert(s->pingresp, "%s", s->why);
}

typedef struct { hb_t *h; uint64_t n; } want_t;
static bool received_n(void *arg)
{
    want_t *w = arg;
    return broker_topic(w->h->b, 0)->received >= w->n;
}

/* No connection pausing and the tick stopped (a pause in progress when the
 * last record arrived ends at its tick, at most read_coalesce_ms later). */
static bool none_pausing(void *arg)
{
    hb_t *h = arg;
    return !h->b->napping && !uv_is_active((uv_handle_t *)&h->b->nap);
}

/* The listener's extra keys under its tls mapping. */
static int open_tls_pause(hb_t *h, const char *tls_extra, const char *mqtt_extra)
{
    make_cert();
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  listeners:\n"
             "    - address: \"127.0.0.1:0\"\n"
             "      tls: {cert_file: \"%s\", key_file: \"%s\"%s}\n"
             "%s",
             cert, key, tls_extra, mqtt_extra);
    hb_open_with(h, yaml);
    broker_tls_t *t;
    char err[512];
    cr_assert_eq(broker_tls_load(h->cfg, &t, err, sizeof err), 0, "%s", err);
    broker_set_tls(h->b, t);
    cr_assert_eq(broker_listen(h->b), 0);
    const char *addr = broker_listener_addr(h->b, 0);
    return atoi(strrchr(addr, ':') + 1);
}

Test(tls_nap, a_busy_qos0_stream_pauses_and_loses_nothing)
{
    /* paced at ~0.1 ms a record (some 5,000 a second): each arrives as its
     * own small read, well within the pause of the one before, whichever
     * side is faster. Unpaced, a broker slower than its client (a loaded
     * CI box) reads 16 KiB at a time and rightly never pauses: CI saw it. */
    hb_t h;
    streamer_t s = { .count = 4000, .gap_us = 100 };
    s.port = open_tls_pause(&h, ", read_coalesce_ms: 1", "");
    run_streamer(&h, &s);
    want_t w = { &h, 4000 };
    cr_assert(hb_run_until(&h, received_n, &w, 10000), "received %llu of 4000",
              (unsigned long long)broker_topic(h.b, 0)->received);
    cr_assert_gt(h.b->naps, 0, "a stream of small records in small writes is coalesced");
    cr_assert(hb_run_until(&h, none_pausing, &h, 5000), "a connection still pauses, or the tick runs, after the stream");
    hb_close(&h);
    rm_certs();
}

Test(tls_nap, an_ack_is_never_waited_on_a_pause)
{
    /* the same stream at QoS 1, sent without waiting for the acks: a
     * PUBLISH is nearly always awaiting its PUBACK, and a connection with
     * one is never paused (its next ack does not wait behind a pause) */
    hb_t h;
    streamer_t s = { .count = 5000, .qos = 1 };
    s.port = open_tls_pause(&h, ", read_coalesce_ms: 10", "  receive_maximum: 65535\n");
    run_streamer(&h, &s);
    cr_assert_eq(s.pubacks, 5000, "%s", s.why);
    cr_assert_eq(h.b->naps, 0, "paused %llu times with acks owed", (unsigned long long)h.b->naps);
    hb_close(&h);
    rm_certs();
}

Test(tls_nap, a_slow_client_is_read_at_once)
{
    hb_t h;
    streamer_t s = { .count = 100, .gap_us = 5000 }; /* 200 messages a second */
    s.port = open_tls_pause(&h, ", read_coalesce_ms: 1", "");
    run_streamer(&h, &s);
    cr_assert_eq(h.b->naps, 0, "a client sending every 5 ms paused %llu times", (unsigned long long)h.b->naps);
    want_t w = { &h, 100 };
    cr_assert(hb_run_until(&h, received_n, &w, 5000));
    hb_close(&h);
    rm_certs();
}

Test(tls_nap, zero_reads_every_arrival_at_once)
{
    hb_t h;
    streamer_t s = { .count = 20000 };
    s.port = open_tls_pause(&h, ", read_coalesce_ms: 0", "");
    run_streamer(&h, &s);
    want_t w = { &h, 20000 };
    cr_assert(hb_run_until(&h, received_n, &w, 10000));
    cr_assert_eq(h.b->naps, 0);
    hb_close(&h);
    rm_certs();
}
