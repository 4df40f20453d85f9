/* bench-lib: OpenSSL::SSL Threads::Threads */
/*
 * tls_handshakes.c: new MQTT-over-TLS connections per second, for comparing
 * Tributary's TLS listener with Mosquitto's on the same machine in the same
 * run (bench/bench_tls.py).
 *
 *   tls_handshakes -p PORT --cafile CA.pem [-h HOST] [-n CONNECTIONS] [-c PARALLEL]
 *                  [--resume] [--cert CLIENT.pem --key CLIENT.key]
 *
 * PARALLEL threads (-c, default 8) share CONNECTIONS (-n, default 2000);
 * each connection is the whole life of a device that comes and goes: TCP
 * connect, TLS handshake (the server's certificate verified against
 * --cafile, its name against -h), MQTT 3.1.1 CONNECT, CONNACK, DISCONNECT,
 * close_notify, close. Blocking sockets, one connection at a time per
 * thread: the figure is how many of these PARALLEL clients get through a
 * second.
 *
 * --resume: each thread keeps the session of its last connection (a TLS
 * 1.3 ticket, or a TLS 1.2 session) and offers it on the next one, so
 * after each thread's first connection the server may skip the
 * certificate and the signature. Whether it did is counted (resumed=).
 *
 * Why not loadgen.c: libmosquitto builds one SSL_CTX per client and makes
 * the handshake inside mosquitto_connect, so a session cannot be offered
 * and every connection would also pay for loading the CA file.
 *
 * Output: one line "connections=N seconds=S rate=R resumed=K failed=F
 * p50_ms=.. p99_ms=.. max_ms=.. client_cpu_s=.."; the latencies are connect
 * to CONNACK, in 0.1 ms steps. Exit 1 if any connection failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lat_hist.h"

static atomic_long g_taken, g_done, g_resumed, g_failed;
static long g_total = 2000;
static int g_port = 0, g_parallel = 8;
static bool g_resume = false;
static const char *g_host = "127.0.0.1", *g_cafile = NULL, *g_certfile = NULL, *g_keyfile = NULL;
static SSL_CTX *g_ctx;
static struct sockaddr_storage g_addr;
static socklen_t g_addrlen;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An MQTT 3.1.1 CONNECT, clean session, keep alive 60, client id `id`. */
static size_t mqtt_connect(unsigned char *out, const char *id)
{
    size_t idlen = strlen(id), rem = 10 + 2 + idlen, n = 0;
    out[n++] = 0x10;
    out[n++] = (unsigned char)rem; /* ids here are short: one length byte */
    static const unsigned char head[] = {0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60};
    memcpy(out + n, head, sizeof head);
    n += sizeof head;
    out[n++] = (unsigned char)(idlen >> 8);
    out[n++] = (unsigned char)idlen;
    memcpy(out + n, id, idlen);
    return n + idlen;
}

static void fail(const char *what, long i)
{
    char why[256] = "";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, why, sizeof why);
    else if (errno)
        snprintf(why, sizeof why, "%s", strerror(errno));
    if (atomic_fetch_add(&g_failed, 1) < 5) /* the first few say why, the count says how many */
        fprintf(stderr, "tls_handshakes: connection %ld: %s%s%s\n", i, what, *why ? ": " : "", why);
    ERR_clear_error();
}

/* One device's visit. Returns its session for the next one (with --resume). */
static SSL_SESSION *one(long i, SSL_SESSION *sess)
{
    double t0 = now_s();
    errno = 0;
    int fd = socket(g_addr.ss_family, SOCK_STREAM, 0);
    if (fd < 0) {
        fail("socket", i);
        return sess;
    }
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    SSL *ssl = NULL;
    if (connect(fd, (struct sockaddr *)&g_addr, g_addrlen) != 0) {
        fail("connect", i);
        goto out;
    }
    errno = 0;
    ssl = SSL_new(g_ctx);
    if (!ssl) {
        fail("SSL_new", i);
        goto out;
    }
    SSL_set_fd(ssl, fd);
    struct in6_addr a6;
    struct in_addr a4;
    bool ip = inet_pton(AF_INET, g_host, &a4) == 1 || inet_pton(AF_INET6, g_host, &a6) == 1;
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    if (ip) {
        X509_VERIFY_PARAM_set1_ip_asc(vp, g_host);
    } else {
        X509_VERIFY_PARAM_set1_host(vp, g_host, 0);
        SSL_set_tlsext_host_name(ssl, g_host);
    }
    if (sess)
        SSL_set_session(ssl, sess);
    if (SSL_connect(ssl) != 1) {
        fail("TLS handshake", i);
        goto out;
    }
    unsigned char pkt[64];
    char id[32];
    snprintf(id, sizeof id, "hs-%d-%ld", (int)getpid(), i);
    size_t n = mqtt_connect(pkt, id);
    if (SSL_write(ssl, pkt, (int)n) != (int)n) {
        fail("CONNECT", i);
        goto out;
    }
    unsigned char ack[4];
    int got = 0;
    while (got < 4) {
        int k = SSL_read(ssl, ack + got, 4 - got); /* also takes the session tickets sent before it */
        if (k <= 0)
            break;
        got += k;
    }
    if (got < 4 || ack[0] != 0x20 || ack[3] != 0) {
        fail(got < 4 ? "no CONNACK" : "CONNACK refused", i);
        goto out;
    }
    double lat = now_s() - t0;
    lat_add(lat);
    if (SSL_session_reused(ssl))
        atomic_fetch_add(&g_resumed, 1);
    static const unsigned char disconnect[] = {0xe0, 0x00};
    SSL_write(ssl, disconnect, sizeof disconnect);
    if (g_resume) {
        SSL_SESSION *next = SSL_get1_session(ssl);
        if (next && SSL_SESSION_is_resumable(next)) {
            SSL_SESSION_free(sess);
            sess = next;
        } else {
            SSL_SESSION_free(next);
        }
    }
    SSL_shutdown(ssl); /* our close_notify; not waiting for theirs */
    atomic_fetch_add(&g_done, 1);
out:
    SSL_free(ssl);
    close(fd);
    return sess;
}

static void *worker(void *arg)
{
    (void)arg;
    SSL_SESSION *sess = NULL;
    long i;
    while ((i = atomic_fetch_add(&g_taken, 1)) < g_total)
        sess = one(i, sess);
    SSL_SESSION_free(sess);
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"cafile", required_argument, NULL, 'A'},
        {"cert", required_argument, NULL, 'E'},
        {"key", required_argument, NULL, 'K'},
        {"resume", no_argument, NULL, 'R'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h:p:n:c:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': g_host = optarg; break;
        case 'p': g_port = atoi(optarg); break;
        case 'n': g_total = atol(optarg); break;
        case 'c': g_parallel = atoi(optarg); break;
        case 'A': g_cafile = optarg; break;
        case 'E': g_certfile = optarg; break;
        case 'K': g_keyfile = optarg; break;
        case 'R': g_resume = true; break;
        default:
            fprintf(stderr, "usage: tls_handshakes -p PORT --cafile CA.pem [-h HOST] [-n CONNECTIONS] "
                            "[-c PARALLEL] [--resume] [--cert CLIENT.pem --key CLIENT.key]\n");
            return 2;
        }
    }
    if (!g_port || !g_cafile || g_parallel < 1 || g_total < 1 || (!g_certfile != !g_keyfile)) {
        fprintf(stderr, "tls_handshakes: -p and --cafile are needed; --cert and --key go together\n");
        return 2;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", g_port);
    int gai = getaddrinfo(g_host, port, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "tls_handshakes: %s: %s\n", g_host, gai_strerror(gai));
        return 2;
    }
    memcpy(&g_addr, ai->ai_addr, ai->ai_addrlen);
    g_addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);

    g_ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(g_ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(g_ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_file(g_ctx, g_cafile) != 1 ||
        (g_certfile && (SSL_CTX_use_certificate_chain_file(g_ctx, g_certfile) != 1 ||
                        SSL_CTX_use_PrivateKey_file(g_ctx, g_keyfile, SSL_FILETYPE_PEM) != 1))) {
        ERR_print_errors_fp(stderr);
        return 2;
    }
    /* sessions are kept by hand (SSL_get1_session), not in a client cache */
    SSL_CTX_set_session_cache_mode(g_ctx, SSL_SESS_CACHE_OFF);

    pthread_t *th = calloc((size_t)g_parallel, sizeof *th);
    double t0 = now_s();
    for (int t = 0; t < g_parallel; t++)
        pthread_create(&th[t], NULL, worker, NULL);
    for (int t = 0; t < g_parallel; t++)
        pthread_join(th[t], NULL);
    double secs = now_s() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    long done = atomic_load(&g_done);
    printf("connections=%ld seconds=%.3f rate=%.0f resumed=%ld failed=%ld p50_ms=%.1f p99_ms=%.1f max_ms=%.1f "
           "client_cpu_s=%.3f\n",
           done, secs, (double)done / secs, atomic_load(&g_resumed), atomic_load(&g_failed), lat_quantile(0.5),
           lat_quantile(0.99), lat_quantile(1), cpu);
    SSL_CTX_free(g_ctx);
    free(th);
    return atomic_load(&g_failed) ? 1 : 0;
}
