/* bench-lib: tb_wal */
/*
 * bench_wal.c: what the WAL costs on this machine's disk, printed as tables
 * (never pass/fail). bench/bench_wal.sh runs it beside dd's raw rates.
 *
 *   throughput  100-byte payloads, fsync never/interval/always, batch sizes
 *               1..1000, 8 batches in flight (as the loop would keep them)
 *   replay      a reader over 1,000,000 records (page cache warm)
 *   fsync       fdatasync latency of a 148-byte and a 4 KiB append
 *   paced       2,000 msg/s in batches every 50 ms (and 10/100 ms) for
 *               --seconds, per fsync mode, the cluster acknowledging once a
 *               second: bytes the process caused to be
 *               written (/proc/self/io write_bytes) per message, against the
 *               record's own size; plus the whole device's written sectors
 *               (/sys/dev/block/M:m/stat), which include the file system
 *               journal and anyone else writing to that disk
 *
 * Usage: bench_wal --dir DIR [--seconds N] [--only NAME] [--quick]
 * The record: 100-byte payload, 16-byte MQTT topic, no attributes, no
 * schema: 28 + 16 + 100 = 144 bytes on disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "wal/wal.h"

#define PAYLOAD 100
#define TOPIC "plant/line1/temp"
#define RECORD (28 + 16 + PAYLOAD)

static const char *g_dir;
static int g_seconds = 60;
static bool g_quick;

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wakes;
} waiter_t;

static void notify(void *arg)
{
    waiter_t *wt = arg;
    pthread_mutex_lock(&wt->mu);
    wt->wakes++;
    pthread_cond_signal(&wt->cv);
    pthread_mutex_unlock(&wt->mu);
}

static void wait_wake(waiter_t *wt, uint64_t *seen)
{
    pthread_mutex_lock(&wt->mu);
    while (wt->wakes == *seen)
        pthread_cond_wait(&wt->cv, &wt->mu);
    *seen = wt->wakes;
    pthread_mutex_unlock(&wt->mu);
}

/* Frees completed batches; returns how many came back, counts errors. */
static int drain(wal_t *w, int *errors)
{
    int n = 0;
    for (wal_batch_t *b = wal_take_done(w), *next; b; b = next) {
        next = wal_batch_next(b);
        if (wal_batch_completion(b)->rc != 0)
            (*errors)++;
        wal_batch_free(b);
        n++;
    }
    return n;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static char *wal_path(void)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/bench-wal", g_dir);
    return p;
}

static void wipe(void)
{
    nftw(wal_path(), rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static wal_t *open_wal(wal_fsync_t mode, waiter_t *wt, wal_topic_t **t, uint64_t segment_bytes)
{
    wipe();
    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = wal_path();
    o.fsync = mode;
    o.segment_bytes = segment_bytes;
    o.max_topic_bytes = 8ull << 30;
    o.max_total_bytes = 8ull << 30;
    o.notify = notify;
    o.notify_arg = wt;
    wal_t *w;
    int rc = wal_open(&o, &w);
    if (rc != 0 || (rc = wal_topic_open(w, "/bench/t", t)) != 0) {
        fprintf(stderr, "bench_wal: cannot open the WAL in %s: %s\n", o.dir, tb_strerror(rc));
        exit(1);
    }
    return w;
}

static uint8_t payload[PAYLOAD];
static const wal_msg_t msg = {
    .payload = payload, .payload_len = PAYLOAD, .mqtt_topic = TOPIC, .mqtt_topic_len = 16, .qos = 1,
};

static wal_batch_t *make_batch(wal_topic_t *t, int n)
{
    wal_batch_t *b = wal_batch_new(t);
    for (int i = 0; i < n; i++)
        if (wal_batch_add(b, &msg) != 0)
            abort();
    return b;
}

static double now_s(void) { return (double)tb_mono_ns() / 1e9; }

/* ---- throughput ---------------------------------------------------------- */

static void throughput(void)
{
    static const int batches[] = { 1, 10, 100, 1000 };
    static const wal_fsync_t modes[] = { WAL_FSYNC_NEVER, WAL_FSYNC_INTERVAL, WAL_FSYNC_ALWAYS };
    double secs = g_quick ? 0.5 : 2.0;
    printf("\n## append throughput (100-byte payload, %d-byte records, 8 batches in flight, %.1f s each)\n\n", RECORD, secs);
    printf("| fsync    | batch | msgs/s     | MB/s   | fdatasync/s | msgs/fdatasync | errors |\n");
    printf("|----------|------:|-----------:|-------:|------------:|---------------:|-------:|\n");
    for (size_t m = 0; m < 3; m++) {
        for (size_t bi = 0; bi < 4; bi++) {
            waiter_t wt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
            wal_topic_t *t;
            wal_t *w = open_wal(modes[m], &wt, &t, 16u << 20);
            wal_fsync_hist_t h0, h1;
            wal_fsync_hist(w, &h0);
            uint64_t seen = 0, msgs = 0;
            int inflight = 0, errors = 0;
            double t0 = now_s(), end = t0 + secs;
            while (now_s() < end) {
                while (inflight < 8) {
                    wal_submit(make_batch(t, batches[bi]), NULL);
                    inflight++;
                }
                wait_wake(&wt, &seen);
                int n = drain(w, &errors);
                inflight -= n;
                msgs += (uint64_t)n * (uint64_t)batches[bi];
            }
            wal_sync(w);
            int n = drain(w, &errors);
            msgs += (uint64_t)n * (uint64_t)batches[bi];
            double el = now_s() - t0;
            wal_fsync_hist(w, &h1);
            uint64_t syncs = h1.count - h0.count;
            wal_close(w);
            printf("| %-8s | %5d | %10.0f | %6.1f | %11.0f | %14.1f | %6d |\n", wal_fsync_name(modes[m]), batches[bi],
                   (double)msgs / el, (double)msgs * RECORD / el / 1e6, (double)syncs / el,
                   syncs ? (double)msgs / (double)syncs : 0.0, errors);
            fflush(stdout);
        }
    }
    wipe();
}

/* ---- replay -------------------------------------------------------------- */

static void replay(void)
{
    uint64_t total = g_quick ? 200000 : 1000000;
    waiter_t wt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    wal_topic_t *t;
    wal_t *w = open_wal(WAL_FSYNC_NEVER, &wt, &t, 64u << 20);
    uint64_t seen = 0, written = 0;
    int inflight = 0, errors = 0;
    while (written < total || inflight > 0) {
        while (inflight < 8 && written < total) {
            wal_submit(make_batch(t, 1000), NULL);
            written += 1000;
            inflight++;
        }
        wait_wake(&wt, &seen);
        inflight -= drain(w, &errors);
    }
    wal_sync(w);
    drain(w, &errors);
    wal_reader_t *r;
    wal_reader_open(t, 1, &r);
    double t0 = now_s();
    uint64_t n = 0, bytes = 0;
    wal_record_t rec;
    while (wal_reader_next(r, &rec) == 0) {
        n++;
        bytes += rec.payload_len;
    }
    double el = now_s() - t0;
    wal_reader_close(r);
    wal_close(w);
    wipe();
    printf("\n## replay (reader, page cache warm)\n\n");
    printf("| records | seconds | records/s | payload MB/s | errors |\n|--:|--:|--:|--:|--:|\n");
    printf("| %" PRIu64 " | %.3f | %.0f | %.1f | %d |\n", n, el, (double)n / el, (double)bytes / el / 1e6, errors);
}

/* ---- fdatasync latency ----------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void fsync_latency(void)
{
    mkdir(wal_path(), 0755);
    char p[4200];
    snprintf(p, sizeof p, "%s/fsync.tmp", wal_path());
    printf("\n## fdatasync latency (append then fdatasync, same file system)\n\n");
    printf("| append | samples | p50 us | p90 us | p99 us | max us |\n|--:|--:|--:|--:|--:|--:|\n");
    static const size_t sizes[] = { RECORD, 4096 };
    for (int s = 0; s < 2; s++) {
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = g_quick ? 100 : 500;
        uint64_t *lat = calloc((size_t)n, sizeof *lat);
        char buf[4096] = { 0 };
        off_t off = 0;
        for (int i = 0; i < n; i++) {
            if (pwrite(fd, buf, sizes[s], off) < 0)
                abort();
            off += (off_t)sizes[s];
            uint64_t t0 = tb_mono_ns();
            if (fdatasync(fd) < 0)
                abort();
            lat[i] = (tb_mono_ns() - t0) / 1000;
        }
        close(fd);
        qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
        printf("| %zu B | %d | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " |\n", sizes[s], n, lat[n / 2],
               lat[n * 9 / 10], lat[n * 99 / 100], lat[n - 1]);
        free(lat);
    }
    unlink(p);
}

/* ---- paced: bytes written per message ------------------------------------- */

static uint64_t proc_io(const char *key)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            v = strtoull(line + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* Sectors written by the whole block device holding dir (all writers). */
static uint64_t device_bytes(void)
{
    struct stat st;
    if (stat(g_dir, &st) < 0)
        return 0;
    char p[128];
    snprintf(p, sizeof p, "/sys/dev/block/%u:%u/stat", major(st.st_dev), minor(st.st_dev));
    FILE *f = fopen(p, "r");
    unsigned long long v[8] = { 0 };
    if (f) {
        if (fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 7)
            v[6] = 0;
        fclose(f);
    }
    return v[6] * 512;
}

static void paced_one(wal_fsync_t mode, int interval_ms)
{
    const int rate = 2000;
    int per_batch = rate * interval_ms / 1000;
    waiter_t wt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    wal_topic_t *t;
    wal_t *w = open_wal(mode, &wt, &t, 16u << 20);
    wal_fsync_hist_t h0, h1;
    wal_fsync_hist(w, &h0);
    uint64_t wb0 = proc_io("write_bytes"), cw0 = proc_io("cancelled_write_bytes"), dev0 = device_bytes();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t msgs = 0;
    int errors = 0;
    int ticks = g_seconds * 1000 / interval_ms;
    for (int i = 0; i < ticks; i++) {
        wal_submit(make_batch(t, per_batch), NULL);
        msgs += (uint64_t)per_batch;
        drain(w, &errors);
        /* the cluster acknowledges everything once a second, as a live uplink would */
        if (i % (1000 / interval_ms) == 0 && wal_topic_readable_end(t) > 1)
            wal_checkpoint(t, wal_topic_readable_end(t) - 1);
        next.tv_nsec += interval_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL); /* pacing, not synchronisation */
    }
    wal_sync(w);
    drain(w, &errors);
    uint64_t wb = proc_io("write_bytes") - wb0, cw = proc_io("cancelled_write_bytes") - cw0;
    uint64_t dev = device_bytes() - dev0;
    wal_fsync_hist(w, &h1);
    wal_close(w);
    wipe();
    double per = (double)(wb - cw) / (double)msgs;
    printf("| %-8s | %5d ms | %5d | %7" PRIu64 " | %8.1f | %5.2f | %6.2f | %9.1f | %6" PRIu64 " | %d |\n",
           wal_fsync_name(mode), interval_ms, per_batch, msgs, per, per / RECORD, per / (PAYLOAD + 28),
           (double)dev / (double)msgs, h1.count - h0.count, errors);
    fflush(stdout);
}

static void paced(void)
{
    printf("\n## bytes written per message at 2,000 msg/s for %d s (/proc/self/io write_bytes - cancelled)\n\n",
           g_seconds);
    printf("record = %d B on disk (payload 100 + head 28 + MQTT topic 16); 'x rec' = bytes/msg / record, "
           "'x p+h' = bytes/msg / (payload + 28-byte head);\n'device B/msg' = the whole disk's written sectors "
           "(journal and other processes included) / msgs\n\n", RECORD);
    printf("| fsync    | batch every | msgs/batch | msgs | bytes/msg | x rec | x p+h | device B/msg | syncs | errors |\n");
    printf("|----------|------:|------:|--------:|---------:|------:|-------:|----------:|-------:|---|\n");
    paced_one(WAL_FSYNC_ALWAYS, 50);
    if (!g_quick) {
        paced_one(WAL_FSYNC_ALWAYS, 100);
        paced_one(WAL_FSYNC_ALWAYS, 10);
    }
    paced_one(WAL_FSYNC_INTERVAL, 50);
    paced_one(WAL_FSYNC_NEVER, 50);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            g_dir = argv[++i];
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            g_seconds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            g_quick = true;
        else {
            fprintf(stderr, "usage: bench_wal --dir DIR [--seconds N] [--only throughput|replay|fsync|paced] [--quick]\n");
            return 2;
        }
    }
    if (!g_dir || g_seconds < 1) {
        fprintf(stderr, "bench_wal: --dir is required; --seconds must be >= 1\n");
        return 2;
    }
    tb_log_set_level(TB_LOG_WARN);
    memset(payload, 'x', sizeof payload);
    if (!only || strcmp(only, "throughput") == 0)
        throughput();
    if (!only || strcmp(only, "replay") == 0)
        replay();
    if (!only || strcmp(only, "fsync") == 0)
        fsync_latency();
    if (!only || strcmp(only, "paced") == 0)
        paced();
    return 0;
}
