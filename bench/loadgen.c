/* bench-lib: PkgConfig::MOSQ Threads::Threads */
/*
 * loadgen.c: an MQTT publish load generator on libmosquitto, for comparing
 * Tributary with Mosquitto on the same machine in the same run.
 *
 *   loadgen -p PORT -c CONNECTIONS -n MESSAGES -s PAYLOAD_BYTES -q QOS
 *           [-t TOPIC_PREFIX] [-V 311|5] [-w INFLIGHT] [-j THREADS] [-r RATE]
 *           [-u USER -P PASSWORD] [--cafile|-C CA.pem [--cert CLIENT.pem --key CLIENT.key]]
 *           [--probe K]
 *
 * The connections share MESSAGES (each takes the next one when its window
 * has room, so all run out together) and publish to TOPIC_PREFIX/<conn>/tele.
 * QoS 1/2: the next message goes when the window (-w, default 20, like
 * libmosquitto's default) has room; the run ends when every message is
 * acknowledged. QoS 0: messages are written as fast as the socket takes
 * them, then each connection sends one QoS 1 message as a barrier: when
 * every barrier is acknowledged, the broker has processed everything
 * before it (same connection, in order), so the figure is what the broker
 * ingested, not what the client wrote. -r paces the total rate (messages/s).
 *
 * Output: one line "messages=N seconds=S rate=R acked=A ack_p50_ms=.. ack_p99_ms=..
 * ack_max_ms=.. cpu_s=.." on stdout; the ack figures are, for QoS 1/2, the time from
 * mosquitto_publish to its PUBACK / PUBCOMP, in 0.1 ms steps (0 for QoS 0);
 * cpu_s is the CPU time loadgen itself spent while the clock ran (user and
 * system: on one machine, whether the client was the limit).
 * Connections are spread over -j threads, each polling its sockets.
 *
 * --probe K (QoS 0): every K-th message of a connection is sent at QoS 1
 * instead (one such probe in flight per connection; the next waits its
 * turn), and the ack figures are the probes' PUBLISH -> PUBACK times: what
 * a QoS 0 stream's reading adds to a message that wants an answer.
 *
 * --cafile makes every connection MQTT over TLS (libmosquitto's own TLS,
 * OpenSSL underneath: the server's certificate is verified against the CA
 * file and its name against -h); --cert and --key add a client
 * certificate. The connections are made, handshakes included, before the
 * clock starts, so the figure is the encrypted stream's rate alone
 * (bench/tls_handshakes.c measures handshakes).
 */
#include <errno.h>
#include <getopt.h>
#include <mosquitto.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lat_hist.h"

typedef struct conn {
    struct mosquitto *m;
    int idx;
    long total, sent, acked, inflight;
    bool connected, barrier_sent, barrier_acked, done;
    int barrier_mid;
    int probe_mid;    /* --probe: the probe in flight (0: none) */
    double probe_at;
    double *sent_at;  /* [LAT_RING] by mid: when each message in flight was published */
} conn_t;

/* Ack latency histogram: 0.1 ms buckets up to 10 s, the last one open. */
#define LAT_RING 4096   /* > any window: mids in flight never collide */

static int g_port = 1883, g_conns = 10, g_qos = 1, g_size = 100, g_inflight = 20, g_threads = 2, g_version = 4;
static long g_messages = 100000, g_probe = 0;
static double g_rate = 0;
static const char *g_user = NULL, *g_pass = NULL;
static const char *g_prefix = "bench", *g_host = "127.0.0.1";
static const char *g_cafile = NULL, *g_certfile = NULL, *g_keyfile = NULL;
static char *g_payload;
static atomic_long g_acked_total, g_sent_total, g_taken;
static double g_t0;

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_connect(struct mosquitto *m, void *arg, int rc)
{
    (void)m;
    conn_t *c = arg;
    if (rc != 0) {
        fprintf(stderr, "loadgen: connection %d refused: %s\n", c->idx, mosquitto_connack_string(rc));
        exit(1);
    }
    c->connected = true;
}

static void on_publish(struct mosquitto *m, void *arg, int mid)
{
    (void)m;
    conn_t *c = arg;
    if (c->barrier_sent && mid == c->barrier_mid) {
        c->barrier_acked = true;
        return;
    }
    if (c->probe_mid && mid == c->probe_mid) {
        lat_add(now_s() - c->probe_at);
        c->probe_mid = 0;
        return;
    }
    if (g_qos == 0)
        return; /* libmosquitto reports QoS 0 messages as written: not an ack */
    double lat = now_s() - c->sent_at[mid % LAT_RING];
    lat_add(lat);
    c->acked++;
    c->inflight--;
    atomic_fetch_add(&g_acked_total, 1);
}

/*
 * Takes one message from the run's total. Connections share the total
 * rather than each owning a fixed share, so they all run out together:
 * with fixed shares, whichever connections got more of the paced rate
 * finished first and the run ended with a few connections whose windows
 * together were smaller than the gateway's batch, each batch of that tail
 * waiting out batch_timeout_ms when mqtt.ingestion.idle_flush_ms is 0.
 */
static bool take_one(void)
{
    if (atomic_fetch_add(&g_taken, 1) < g_messages)
        return true;
    atomic_fetch_sub(&g_taken, 1);
    return false;
}

static bool allowed_by_rate(void)
{
    if (g_rate <= 0)
        return true;
    double want = (now_s() - g_t0) * g_rate;
    return (double)atomic_load(&g_sent_total) < want;
}

static void pump(conn_t *c)
{
    if (!c->connected || c->done)
        return;
    while (c->sent < c->total && allowed_by_rate()) {
        if (g_qos > 0 && c->inflight >= g_inflight)
            break;
        if (g_qos == 0 && mosquitto_want_write(c->m))
            break; /* let the socket drain first: no unbounded client queue */
        if (!take_one())
            break;
        char topic[128];
        snprintf(topic, sizeof topic, "%s/c%d/tele", g_prefix, c->idx);
        int mid = 0;
        double t = now_s();
        bool probe = g_qos == 0 && g_probe > 0 && c->sent % g_probe == g_probe - 1 && c->probe_mid == 0;
        int rc = mosquitto_publish(c->m, &mid, topic, g_size, g_payload, probe ? 1 : g_qos, false);
        if (g_qos > 0)
            c->sent_at[mid % LAT_RING] = t;
        if (probe) {
            c->probe_mid = mid;
            c->probe_at = t;
        }
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "loadgen: publish failed: %s\n", mosquitto_strerror(rc));
            exit(1);
        }
        c->sent++;
        atomic_fetch_add(&g_sent_total, 1);
        if (g_qos > 0)
            c->inflight++;
    }
    if (atomic_load(&g_taken) >= g_messages)
        c->total = c->sent; /* the run's total is all taken: this connection is finishing */
    if (c->sent == c->total) {
        if (g_qos > 0 && c->acked == c->total)
            c->done = true;
        if (g_qos == 0 && !c->barrier_sent && !mosquitto_want_write(c->m)) {
            char topic[128];
            snprintf(topic, sizeof topic, "%s/c%d/tele", g_prefix, c->idx);
            mosquitto_publish(c->m, &c->barrier_mid, topic, 1, "b", 1, false);
            c->barrier_sent = true;
        }
        if (g_qos == 0 && c->barrier_acked) {
            c->done = true;
            c->acked = c->total;
            atomic_fetch_add(&g_acked_total, c->total);
        }
    }
}

typedef struct { conn_t *conns; int n; } worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    struct pollfd *pfd = calloc((size_t)w->n, sizeof *pfd);
    for (int first = 0;; first = (first + 1) % w->n) {
        int live = 0;
        /* with -r the rate's credit goes to whoever is pumped first: rotate,
         * or the first connections finish early and the last few, with too
         * small a window between them, make the tail of the run */
        for (int k = 0; k < w->n; k++)
            pump(&w->conns[(first + k) % w->n]);
        for (int i = 0; i < w->n; i++) {
            conn_t *c = &w->conns[i];
            pfd[i].fd = c->done ? -1 : mosquitto_socket(c->m);
            pfd[i].events = POLLIN | (mosquitto_want_write(c->m) ? POLLOUT : 0);
            pfd[i].revents = 0;
            live += !c->done;
        }
        if (!live)
            break;
        int rc = poll(pfd, (nfds_t)w->n, g_rate > 0 ? 1 : 100);
        if (rc < 0 && errno != EINTR) {
            perror("poll");
            exit(1);
        }
        for (int i = 0; i < w->n; i++) {
            conn_t *c = &w->conns[i];
            if (c->done)
                continue;
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                int r = mosquitto_loop_read(c->m, 1);
                if (r != MOSQ_ERR_SUCCESS) {
                    fprintf(stderr, "loadgen: connection %d lost: %s\n", c->idx, mosquitto_strerror(r));
                    exit(1);
                }
            }
            if (pfd[i].revents & POLLOUT)
                mosquitto_loop_write(c->m, 1);
            mosquitto_loop_misc(c->m);
        }
    }
    free(pfd);
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"cafile", required_argument, NULL, 'A'},
        {"cert", required_argument, NULL, 'E'},
        {"key", required_argument, NULL, 'K'},
        {"probe", required_argument, NULL, 'R'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h:p:c:n:s:q:t:V:w:j:r:u:P:C:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': g_host = optarg; break;
        case 'p': g_port = atoi(optarg); break;
        case 'c': g_conns = atoi(optarg); break;
        case 'n': g_messages = atol(optarg); break;
        case 's': g_size = atoi(optarg); break;
        case 'q': g_qos = atoi(optarg); break;
        case 't': g_prefix = optarg; break;
        case 'V': g_version = strcmp(optarg, "5") == 0 ? 5 : 4; break;
        case 'w': g_inflight = atoi(optarg); break;
        case 'j': g_threads = atoi(optarg); break;
        case 'r': g_rate = atof(optarg); break;
        case 'u': g_user = optarg; break;
        case 'P': g_pass = optarg; break;
        case 'A':
        case 'C': g_cafile = optarg; break; /* -C: the test suite's TLS run (tests/integration/tlib/tls.py) */
        case 'E': g_certfile = optarg; break;
        case 'K': g_keyfile = optarg; break;
        case 'R': g_probe = atol(optarg); break;
        default:
            fprintf(stderr, "usage: loadgen -p PORT -c CONNS -n MSGS -s BYTES -q QOS [-h HOST] [-t PREFIX] [-V 311|5] "
                            "[-w INFLIGHT] [-j THREADS] [-r RATE] [-u USER -P PASSWORD] "
                            "[--cafile CA.pem [--cert CLIENT.pem --key CLIENT.key]] [--probe K]\n");
            return 2;
        }
    }
    if ((g_certfile || g_keyfile) && !(g_cafile && g_certfile && g_keyfile)) {
        fprintf(stderr, "loadgen: --cert and --key go together, with --cafile\n");
        return 2;
    }
    if (g_threads > g_conns) g_threads = g_conns;
    if (g_inflight < 1 || g_inflight >= LAT_RING) {
        fprintf(stderr, "loadgen: -w must be 1..%d\n", LAT_RING - 1);
        return 2;
    }
    mosquitto_lib_init();
    g_payload = malloc((size_t)g_size + 1);
    memset(g_payload, 'x', (size_t)g_size);
    conn_t *conns = calloc((size_t)g_conns, sizeof *conns);
    for (int i = 0; i < g_conns; i++) {
        conn_t *c = &conns[i];
        c->idx = i;
        c->sent_at = calloc(LAT_RING, sizeof *c->sent_at);
        c->total = g_messages; /* until the shared total runs out (take_one) */
        char id[64];
        snprintf(id, sizeof id, "loadgen-%d-%d", (int)getpid(), i);
        c->m = mosquitto_new(id, true, c);
        mosquitto_int_option(c->m, MOSQ_OPT_PROTOCOL_VERSION, g_version == 5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
        mosquitto_max_inflight_messages_set(c->m, (unsigned)g_inflight);
        mosquitto_int_option(c->m, MOSQ_OPT_TCP_NODELAY, 1);
        mosquitto_connect_callback_set(c->m, on_connect);
        mosquitto_publish_callback_set(c->m, on_publish);
        if (g_user)
            mosquitto_username_pw_set(c->m, g_user, g_pass);
        if (g_cafile) {
            int trc = mosquitto_tls_set(c->m, g_cafile, NULL, g_certfile, g_keyfile, NULL);
            if (trc != MOSQ_ERR_SUCCESS) {
                fprintf(stderr, "loadgen: TLS files: %s\n", mosquitto_strerror(trc));
                return 2;
            }
        }
        int rc = mosquitto_connect(c->m, g_host, g_port, 60);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "loadgen: connect: %s\n", mosquitto_strerror(rc));
            return 1;
        }
    }
    /* wait for every CONNACK before the clock starts; poll(), not
     * mosquitto_loop(), whose select() cannot watch descriptors past
     * FD_SETSIZE (1024): with 1,000 connections some are */
    struct pollfd *cpfd = calloc((size_t)g_conns, sizeof *cpfd);
    for (double deadline = now_s() + 30;;) {
        int ok = 0;
        for (int i = 0; i < g_conns; i++) {
            cpfd[i].fd = conns[i].connected ? -1 : mosquitto_socket(conns[i].m);
            cpfd[i].events = POLLIN | (mosquitto_want_write(conns[i].m) ? POLLOUT : 0);
            cpfd[i].revents = 0;
            ok += conns[i].connected;
        }
        if (ok == g_conns) break;
        if (now_s() > deadline) { fprintf(stderr, "loadgen: connections not accepted in 30 s\n"); return 1; }
        poll(cpfd, (nfds_t)g_conns, 10);
        for (int i = 0; i < g_conns; i++) {
            if (cpfd[i].fd < 0)
                continue;
            int r = MOSQ_ERR_SUCCESS;
            if (cpfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                r = mosquitto_loop_read(conns[i].m, 1);
            if (r == MOSQ_ERR_SUCCESS && (cpfd[i].revents & POLLOUT))
                r = mosquitto_loop_write(conns[i].m, 1);
            if (r != MOSQ_ERR_SUCCESS) { /* a refused handshake, a reset: no CONNACK will come */
                fprintf(stderr, "loadgen: connection %d lost before its CONNACK: %s\n", i, mosquitto_strerror(r));
                return 1;
            }
        }
    }
    free(cpfd);
    g_t0 = now_s();
    double cpu0 = cpu_s();
    pthread_t *th = calloc((size_t)g_threads, sizeof *th);
    worker_t *ws = calloc((size_t)g_threads, sizeof *ws);
    int per = g_conns / g_threads, off = 0;
    for (int t = 0; t < g_threads; t++) {
        ws[t].conns = conns + off;
        ws[t].n = per + (t < g_conns % g_threads);
        off += ws[t].n;
        pthread_create(&th[t], NULL, worker, &ws[t]);
    }
    for (int t = 0; t < g_threads; t++)
        pthread_join(th[t], NULL);
    double secs = now_s() - g_t0, cpu = cpu_s() - cpu0;
    long acked = atomic_load(&g_acked_total);
    printf("messages=%ld seconds=%.3f rate=%.0f acked=%ld ack_p50_ms=%.1f ack_p99_ms=%.1f ack_max_ms=%.1f cpu_s=%.3f\n",
           g_messages, secs, (double)acked / secs, acked, lat_quantile(0.5), lat_quantile(0.99), lat_quantile(1), cpu);
    for (int i = 0; i < g_conns; i++) {
        mosquitto_disconnect(conns[i].m);
        mosquitto_loop(conns[i].m, 10, 1);
        mosquitto_destroy(conns[i].m);
        free(conns[i].sent_at);
    }
    mosquitto_lib_cleanup();
    free(th);
    free(ws);
    free(conns);
    free(g_payload);
    return acked == g_messages ? 0 : 1;
}
