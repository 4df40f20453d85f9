/* bench-lib: PkgConfig::MOSQ */
/*
 * bench_mosq_pub.c: the floor of a libmosquitto MQTT output (issue 17,
 * docs/design/OUTPUTS.md 2.5 and 4.10, commit O0), measured before the
 * output is built.
 *
 *   bench_mosq_pub pub  --port P [--host H] [--count N] [--size B] [--qos Q]
 *                       [--window W] [--topics T] [--prefix S] [--id ID] [--v5]
 *                       [--nodelay]
 *   bench_mosq_pub raw  --port P [--host H] [--count N] [--size B] [--window W]
 *                       [--topics T] [--prefix S] [--id ID]
 *   bench_mosq_pub sink --port P [--host H] --expect N [--filter F] [--qos Q]
 *                       [--id ID] [--timeout-s S]
 *
 * pub: one handle in mosquitto_threaded_set mode, driven by our own poll()
 * loop (mosquitto_loop_read / loop_write / loop_misc on its socket, no
 * libmosquitto thread), as the MQTT output's thread will drive it. It keeps
 * at most W PUBLISHes unacknowledged (QoS 1: PUBACK; QoS 2: PUBCOMP) and
 * publishes N messages of B bytes round-robin over T topics
 * "<prefix>/<i>", each payload starting with its sequence number. At the
 * end it prints
 *   pub sent=N acked=N window=W secs=.. rate=.. cpu_s=..
 * (secs from the first publish to the last ack; cpu_s: user+sys of this
 * process, getrusage).
 *
 * raw: the ceiling of a publisher of our own (design 4.10, lever 3): no
 * libmosquitto; MQTT 3.1.1 CONNECT, then the same N QoS 1 PUBLISHes
 * encoded by this program into one buffer and written with one write()
 * per turn (up to 64 KiB), at most W unacknowledged, PUBACKs parsed from
 * what is read. Prints the same "pub ..." line. A figure to decide with,
 * not a client: it handles no session, no error but a lost connection.
 *
 * sink: subscribes F (default "#") at QoS Q (default 1), counts messages
 * and prints "sink ready" once the SUBACK came (the bench script waits for
 * that line), then, once N messages arrived,
 *   sink got=N first_to_last_s=.. rate=.. out_of_order=..
 * (out_of_order: a payload sequence number not greater than the last one
 * seen on that topic). Exits 1 without N within --timeout-s (default 600)
 * of its subscription.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <mosquitto.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#define MAX_TOPICS 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static const char *g_host = "127.0.0.1";
static int g_port = 0;
static long g_count = 100000;
static int g_size = 100;
static int g_qos = 1;
static long g_window = 100;
static int g_topics = 1;
static const char *g_prefix = "bench";
static const char *g_id = NULL;
static const char *g_filter = "#";
static long g_expect = 0;
static int g_timeout_s = 600;
static bool g_v5 = false;
static bool g_nodelay = false;

/* pub state */
static bool g_connected;
static int g_connack = -1;
static long g_sent, g_acked;
static double g_t_first, g_t_last;

/* sink state */
static bool g_subscribed;
static long g_got, g_ooo;
static double g_s_first, g_s_last;
static long long *g_last_seq; /* per topic index, sink */
static char **g_seen_topics;
static int g_n_seen;

static void on_connect(struct mosquitto *m, void *arg, int rc)
{
    (void)m; (void)arg;
    g_connack = rc;
    g_connected = rc == 0;
}

static void on_publish(struct mosquitto *m, void *arg, int mid)
{
    (void)m; (void)arg; (void)mid;
    g_acked++;
    g_t_last = now_s();
}

static void on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *granted)
{
    (void)m; (void)arg; (void)mid;
    if (n < 1 || granted[0] > 2) {
        fprintf(stderr, "bench_mosq_pub: subscription refused\n");
        exit(1);
    }
    g_subscribed = true;
    printf("sink ready\n");
    fflush(stdout);
}

static int topic_index(const char *t)
{
    for (int i = 0; i < g_n_seen; i++)
        if (strcmp(g_seen_topics[i], t) == 0)
            return i;
    if (g_n_seen == MAX_TOPICS)
        return -1;
    g_seen_topics[g_n_seen] = strdup(t);
    g_last_seq[g_n_seen] = -1;
    return g_n_seen++;
}

static void on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    (void)m; (void)arg;
    double t = now_s();
    if (g_got == 0)
        g_s_first = t;
    g_s_last = t;
    g_got++;
    char num[24];
    int n = msg->payloadlen < (int)sizeof num - 1 ? msg->payloadlen : (int)sizeof num - 1;
    memcpy(num, msg->payload, (size_t)n);
    num[n] = 0;
    long long seq = strtoll(num, NULL, 10);
    int i = topic_index(msg->topic);
    if (i >= 0) {
        if (seq <= g_last_seq[i])
            g_ooo++;
        g_last_seq[i] = seq;
    }
}

/* One turn of our loop: poll the socket (POLLOUT only when libmosquitto
 * has bytes queued), then read, write and misc. Returns false on a lost
 * connection. */
static bool turn(struct mosquitto *m, int timeout_ms)
{
    struct pollfd p = { .fd = mosquitto_socket(m), .events = POLLIN };
    if (p.fd < 0)
        return false;
    if (mosquitto_want_write(m))
        p.events |= POLLOUT;
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR)
        return false;
    if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        int rc = mosquitto_loop_read(m, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "bench_mosq_pub: read: %s\n", mosquitto_strerror(rc));
            return false;
        }
    }
    if (mosquitto_want_write(m)) {
        int rc = mosquitto_loop_write(m, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "bench_mosq_pub: write: %s\n", mosquitto_strerror(rc));
            return false;
        }
    }
    mosquitto_loop_misc(m);
    return true;
}

static struct mosquitto *connect_handle(const char *id, bool clean)
{
    struct mosquitto *m = mosquitto_new(id, clean, NULL);
    if (!m) {
        fprintf(stderr, "bench_mosq_pub: mosquitto_new failed\n");
        exit(1);
    }
    mosquitto_threaded_set(m, true);
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, g_v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
    /* Our window, not libmosquitto's, bounds what is in flight. */
    mosquitto_max_inflight_messages_set(m, 0);
    if (g_nodelay)
        mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_publish_callback_set(m, on_publish);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_callback_set(m, on_message);
    int rc = mosquitto_connect(m, g_host, g_port, 60);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "bench_mosq_pub: connect %s:%d: %s\n", g_host, g_port, mosquitto_strerror(rc));
        exit(1);
    }
    double deadline = now_s() + 10;
    while (!g_connected && g_connack <= 0 && now_s() < deadline)
        if (!turn(m, 100))
            break;
    if (!g_connected) {
        fprintf(stderr, "bench_mosq_pub: no CONNACK (%s)\n",
                g_connack > 0 ? mosquitto_connack_string(g_connack) : "timeout");
        exit(1);
    }
    return m;
}

static int run_pub(void)
{
    char *payload = malloc((size_t)g_size + 24);
    if (!payload)
        return 1;
    memset(payload, 'x', (size_t)g_size + 24);
    char (*topics)[128] = calloc((size_t)g_topics, 128);
    if (!topics)
        return 1;
    for (int i = 0; i < g_topics; i++)
        snprintf(topics[i], 128, "%s/%d", g_prefix, i);
    char id[96];
    snprintf(id, sizeof id, "%s", g_id ? g_id : "bench-mosq-pub");
    struct mosquitto *m = connect_handle(id, true);
    double c0 = cpu_s();
    g_t_first = now_s();
    long seq = 0;
    while (g_acked < g_count) {
        long target = g_qos == 0 ? g_count : g_acked + g_window;
        while (g_sent < g_count && g_sent < target) {
            int n = snprintf(payload, 24, "%ld ", seq / g_topics);
            payload[n] = 'x';
            int rc = mosquitto_publish(m, NULL, topics[seq % g_topics], g_size, payload, g_qos, false);
            if (rc != MOSQ_ERR_SUCCESS) {
                fprintf(stderr, "bench_mosq_pub: publish: %s\n", mosquitto_strerror(rc));
                return 1;
            }
            seq++;
            g_sent++;
            if (g_qos == 0)
                break; /* QoS 0: let the loop write between publishes */
        }
        if (g_qos == 0 && g_sent == g_count && !mosquitto_want_write(m)) {
            g_acked = g_sent; /* QoS 0: done once every byte left */
            g_t_last = now_s();
            break;
        }
        if (!turn(m, 1000)) {
            fprintf(stderr, "bench_mosq_pub: connection lost after %ld acks\n", g_acked);
            return 1;
        }
    }
    double secs = g_t_last - g_t_first;
    printf("pub sent=%ld acked=%ld window=%ld secs=%.3f rate=%.0f cpu_s=%.2f\n", g_sent, g_acked, g_window,
           secs, secs > 0 ? (double)g_acked / secs : 0.0, cpu_s() - c0);
    mosquitto_disconnect(m);
    mosquitto_destroy(m);
    free(topics);
    free(payload);
    return 0;
}

static int run_sink(void)
{
    if (g_expect <= 0) {
        fprintf(stderr, "bench_mosq_pub sink: --expect N is required\n");
        return 2;
    }
    g_last_seq = calloc(MAX_TOPICS, sizeof *g_last_seq);
    g_seen_topics = calloc(MAX_TOPICS, sizeof *g_seen_topics);
    if (!g_last_seq || !g_seen_topics)
        return 1;
    struct mosquitto *m = connect_handle(g_id ? g_id : "bench-mosq-sink", true);
    mosquitto_subscribe(m, NULL, g_filter, g_qos);
    double deadline = now_s() + 10;
    while (!g_subscribed && now_s() < deadline)
        if (!turn(m, 100))
            return 1;
    if (!g_subscribed) {
        fprintf(stderr, "bench_mosq_pub sink: no SUBACK\n");
        return 1;
    }
    deadline = now_s() + g_timeout_s;
    while (g_got < g_expect) {
        if (now_s() > deadline) {
            fprintf(stderr, "bench_mosq_pub sink: timeout with %ld of %ld\n", g_got, g_expect);
            printf("sink got=%ld timeout\n", g_got);
            return 1;
        }
        if (!turn(m, 1000)) {
            fprintf(stderr, "bench_mosq_pub sink: connection lost with %ld\n", g_got);
            return 1;
        }
    }
    double secs = g_s_last - g_s_first;
    printf("sink got=%ld first_to_last_s=%.3f rate=%.0f out_of_order=%ld\n", g_got, secs,
           secs > 0 ? (double)g_got / secs : 0.0, g_ooo);
    fflush(stdout);
    mosquitto_disconnect(m);
    mosquitto_destroy(m);
    return 0;
}

/* ---- raw: our own encoder, batched writes ---------------------------------- */

static size_t put_str(uint8_t *p, const char *s, size_t n)
{
    p[0] = (uint8_t)(n >> 8);
    p[1] = (uint8_t)n;
    memcpy(p + 2, s, n);
    return n + 2;
}

static size_t put_varint(uint8_t *p, size_t v)
{
    size_t i = 0;
    do {
        uint8_t b = v % 128;
        v /= 128;
        p[i++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return i;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static int run_raw(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)g_port) };
    if (fd < 0 || inet_pton(AF_INET, g_host, &sa.sin_addr) != 1 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        fprintf(stderr, "bench_mosq_pub raw: connect %s:%d: %s\n", g_host, g_port, strerror(errno));
        return 1;
    }
    const char *id = g_id ? g_id : "bench-raw-pub";
    uint8_t pkt[512], *q = pkt + 8;
    q += put_str(q, "MQTT", 4);
    *q++ = 4;    /* 3.1.1 */
    *q++ = 0x02; /* clean session */
    *q++ = 0;
    *q++ = 60;
    q += put_str(q, id, strlen(id));
    size_t body = (size_t)(q - (pkt + 8));
    uint8_t head[5] = { 0x10 };
    size_t hl = 1 + put_varint(head + 1, body);
    memcpy(pkt + 8 - hl, head, hl);
    if (!write_all(fd, pkt + 8 - hl, hl + body))
        return 1;
    uint8_t ack[4];
    if (read(fd, ack, 4) != 4 || ack[0] != 0x20 || ack[3] != 0) {
        fprintf(stderr, "bench_mosq_pub raw: no CONNACK\n");
        return 1;
    }
    char topics[MAX_TOPICS][128];
    for (int i = 0; i < g_topics; i++)
        snprintf(topics[i], 128, "%s/%d", g_prefix, i);
    enum { OUT = 65536 };
    uint8_t *out = malloc(OUT + 4096), in[65536];
    size_t inlen = 0;
    if (!out)
        return 1;
    double c0 = cpu_s();
    g_t_first = now_s();
    uint16_t mid = 0;
    while (g_acked < g_count) {
        size_t olen = 0;
        while (g_sent < g_count && g_sent < g_acked + g_window && olen < OUT) {
            const char *t = topics[g_sent % g_topics];
            size_t tl = strlen(t), rl = 2 + tl + 2 + (size_t)g_size;
            uint8_t *o = out + olen;
            o[0] = 0x32; /* PUBLISH, QoS 1 */
            size_t k = 1 + put_varint(o + 1, rl);
            k += put_str(o + k, t, tl);
            if (++mid == 0)
                mid = 1;
            o[k++] = (uint8_t)(mid >> 8);
            o[k++] = (uint8_t)mid;
            int n = snprintf((char *)o + k, 24, "%ld ", g_sent / g_topics);
            memset(o + k + n, 'x', (size_t)g_size - (size_t)n);
            olen += k + (size_t)g_size;
            g_sent++;
        }
        if (olen && !write_all(fd, out, olen)) {
            fprintf(stderr, "bench_mosq_pub raw: write failed after %ld acks\n", g_acked);
            return 1;
        }
        ssize_t r = read(fd, in + inlen, sizeof in - inlen);
        if (r <= 0) {
            fprintf(stderr, "bench_mosq_pub raw: connection lost after %ld acks\n", g_acked);
            return 1;
        }
        inlen += (size_t)r;
        size_t i = 0;
        while (inlen - i >= 4 && in[i] == 0x40 && in[i + 1] == 2) { /* PUBACK */
            g_acked++;
            i += 4;
        }
        if (inlen - i >= 2 && !(in[i] == 0x40 && in[i + 1] == 2)) {
            fprintf(stderr, "bench_mosq_pub raw: unexpected packet 0x%02x\n", in[i]);
            return 1;
        }
        memmove(in, in + i, inlen - i);
        inlen -= i;
        g_t_last = now_s();
    }
    double secs = g_t_last - g_t_first;
    printf("pub sent=%ld acked=%ld window=%ld secs=%.3f rate=%.0f cpu_s=%.2f\n", g_sent, g_acked, g_window,
           secs, secs > 0 ? (double)g_acked / secs : 0.0, cpu_s() - c0);
    static const uint8_t disc[2] = { 0xe0, 0 };
    write_all(fd, disc, 2);
    close(fd);
    free(out);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_mosq_pub pub|raw|sink --port P [--host H] [--count N] [--size B] [--qos Q]\n"
                    "       [--window W] [--topics T] [--prefix S] [--id ID] [--v5] [--nodelay] [--expect N]\n"
                    "       [--filter F] [--timeout-s S]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--v5") == 0) { g_v5 = true; continue; }
        if (strcmp(a, "--nodelay") == 0) { g_nodelay = true; continue; }
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--host") == 0) g_host = v;
        else if (strcmp(a, "--port") == 0) g_port = atoi(v);
        else if (strcmp(a, "--count") == 0) g_count = atol(v);
        else if (strcmp(a, "--size") == 0) g_size = atoi(v);
        else if (strcmp(a, "--qos") == 0) g_qos = atoi(v);
        else if (strcmp(a, "--window") == 0) g_window = atol(v);
        else if (strcmp(a, "--topics") == 0) g_topics = atoi(v);
        else if (strcmp(a, "--prefix") == 0) g_prefix = v;
        else if (strcmp(a, "--id") == 0) g_id = v;
        else if (strcmp(a, "--expect") == 0) g_expect = atol(v);
        else if (strcmp(a, "--filter") == 0) g_filter = v;
        else if (strcmp(a, "--timeout-s") == 0) g_timeout_s = atoi(v);
        else usage();
    }
    if (g_port <= 0 || g_count <= 0 || g_size < 24 || g_qos < 0 || g_qos > 2 || g_window < 1 ||
        g_topics < 1 || g_topics > MAX_TOPICS)
        usage();
    mosquitto_lib_init();
    int rc = strcmp(mode, "pub") == 0    ? run_pub()
             : strcmp(mode, "raw") == 0  ? run_raw()
             : strcmp(mode, "sink") == 0 ? run_sink()
                                         : (usage(), 2);
    mosquitto_lib_cleanup();
    return rc;
}
