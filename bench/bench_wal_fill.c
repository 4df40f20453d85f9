/* bench-lib: tb_wal */
/*
 * bench_wal_fill.c: writes a backlog straight into a WAL directory, for the
 * replication replay benchmark (bench/bench_replication.py): publishing a
 * million messages over MQTT would take longer than replaying them, and
 * would measure the ingest path instead.
 *
 *   bench_wal_fill DIR TOPIC N [PAYLOAD_BYTES=100] [AGE_MS=60000]
 *
 * Message i: payload of PAYLOAD_BYTES ('0'-'9' and i's digits), attribute
 * device=d<i % 10>, MQTT topic "dev/<i % 10>/tele", received AGE_MS ago
 * (so a replay marks them tributary.replayed). One batch per 1,000 messages,
 * wal.fsync never (the benchmark measures replay, not this).
 * Prints "filled N messages in S s" on stdout.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wal/wal.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int wakes;

static void notify(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    wakes++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_wal_fill DIR TOPIC N [PAYLOAD_BYTES=100] [AGE_MS=60000]\n");
        return 2;
    }
    const char *topic = argv[2];
    long n = atol(argv[3]);
    size_t plen = argc > 4 ? (size_t)atol(argv[4]) : 100;
    uint64_t age = argc > 5 ? (uint64_t)atoll(argv[5]) : 60000;
    tb_log_setup(TB_LOG_WARN, TB_LOG_TEXT, 2);
    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = argv[1];
    o.fsync = WAL_FSYNC_NEVER;
    o.notify = notify;
    wal_t *w;
    wal_topic_t *t;
    if (wal_open(&o, &w) < 0 || wal_topic_open(w, topic, &t) < 0) {
        fprintf(stderr, "cannot open the WAL under %s\n", argv[1]);
        return 1;
    }
    uint8_t *payload = malloc(plen + 1);
    char dev[16], mqtt[32];
    uint64_t t0 = tb_mono_ms(), when = tb_wall_ms() - age;
    long submitted = 0, done = 0;
    int failed = 0;
    while (done < n) {
        while (submitted < n && submitted - done < 8000) {
            wal_batch_t *b = wal_batch_new(t);
            for (int k = 0; k < 1000 && submitted < n; k++, submitted++) {
                for (size_t i = 0; i < plen; i++)
                    payload[i] = (uint8_t)('0' + (submitted + (long)i) % 10);
                snprintf(dev, sizeof dev, "d%ld", submitted % 10);
                snprintf(mqtt, sizeof mqtt, "dev/%ld/tele", submitted % 10);
                wal_attr_t a = { (const uint8_t *)"device", 6, (const uint8_t *)dev, strlen(dev) };
                wal_msg_t m = { .payload = payload, .payload_len = plen, .attrs = &a, .nattrs = 1,
                                .mqtt_topic = mqtt, .mqtt_topic_len = strlen(mqtt), .publish_time_ms = when, .qos = 1 };
                if (wal_batch_add(b, &m) < 0)
                    abort();
            }
            wal_submit(b, NULL);
        }
        pthread_mutex_lock(&mu);
        while (!wakes)
            pthread_cond_wait(&cv, &mu);
        wakes = 0;
        pthread_mutex_unlock(&mu);
        for (wal_batch_t *b = wal_take_done(w), *next; b; b = next) {
            next = wal_batch_next(b);
            failed |= wal_batch_completion(b)->rc != 0;
            done += wal_batch_completion(b)->count;
            wal_batch_free(b);
        }
        if (failed)
            break;
    }
    int rc = wal_close(w);
    free(payload);
    if (failed || rc < 0) {
        fprintf(stderr, "writing the backlog failed\n");
        return 1;
    }
    printf("filled %ld messages in %.2f s\n", n, (double)(tb_mono_ms() - t0) / 1000.0);
    return 0;
}
