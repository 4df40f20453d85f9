/* bench-lib: tb_http */
/*
 * bench_http_scrape.c: what one scrape costs the event loop. /metrics and
 * /stats are rendered on the loop thread that also carries MQTT ingestion,
 * so their time is time the loop does nothing else. Prints, for 10, 100
 * and 1,000 upstream topics, the body size and the median and worst time
 * of collect + render (the /proc/self reads included), over 200 renders.
 * /stats is also shown split as the listener runs it: stats@loop (the tree,
 * built on the loop) and stats@pool (dump and free, on the thread pool).
 * Then the operator's page's paths, answered by the service's own routes
 * (http_service_answer, as the listener calls them): / (the embedded page,
 * a copy), /table (rendered from the /stats document), /stats/history with
 * a full ring of 720 samples (rendered anew after a sample, then a copy
 * until the next), and the 5 s sample itself (collect + read every topic).
 * Prints figures only; never passes or fails.
 *
 *   bench_http_scrape [RUNS [TOPICS ...]]   (default 200 runs of 10, 100, 1000)
 *
 * A few runs of one size are what `valgrind --tool=callgrind` can count
 * (instructions, repeatable under any load): bench_http_scrape 3 1000.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/base.h"
#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"

#define MAX_RUNS 1000
static int RUNS = 200;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, size_t topics, size_t bytes, uint64_t *ns)
{
    qsort(ns, RUNS, sizeof *ns, cmp_u64);
    printf("%-8s topics=%-5zu body_bytes=%-8zu median_us=%-8.1f max_us=%.1f\n", what, topics, bytes,
           ns[RUNS / 2] / 1e3, ns[RUNS - 1] / 1e3);
}

/* One GET of path through the service's routes; its time in *ns, its body's size returned. */
static size_t answer(http_service_t *s, const char *path, uint64_t *ns)
{
    char head[256];
    int n = snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", path);
    http_req_t req;
    if (http_parse(head, (size_t)n, &req) != 0)
        abort();
    tb_buf_t b = TB_BUF_INIT;
    const char *ctype;
    uint64_t t0 = tb_mono_ns();
    int status = http_service_answer(s, &req, &b, &ctype);
    *ns = tb_mono_ns() - t0;
    if (status != 200)
        abort();
    size_t len = b.len;
    tb_buf_free(&b);
    return len;
}

static size_t answer_runs(http_service_t *s, const char *path, uint64_t *ns)
{
    size_t bytes = 0;
    for (int i = 0; i < RUNS; i++)
        bytes = answer(s, path, &ns[i]);
    return bytes;
}

static void bench(size_t ntopics)
{
    metrics_t *m;
    metrics_new(&m);
    metrics_catalog_register(m, ntopics);
    for (size_t t = 0; t < ntopics; t++) {
        char name[64];
        snprintf(name, sizeof name, "/edge-1/topic-%zu", t);
        metrics_topic_add(m, name);
        metrics_add(metrics_fam(m, METRICS_RECEIVED), t, 0, 1000000 + t);
        metrics_add(metrics_fam(m, METRICS_REPLICATED), t, 0, 1000000 + t);
        metrics_set(metrics_fam(m, METRICS_OLDEST_UNREPLICATED_AGE), t, 0, 1234);
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    http_service_t *s;
    http_service_opts_t o;
    http_service_opts_default(&o);
    o.render_ms = 0; /* every /table request renders: the worst case */
    http_service_new(&loop, &o, m, NULL, &s);

    uint64_t ns[MAX_RUNS];
    size_t bytes = 0;
    for (int i = 0; i < RUNS; i++) {
        tb_buf_t b = TB_BUF_INIT;
        uint64_t t0 = tb_mono_ns();
        metrics_collect(m);
        metrics_catalog_derive(m);
        metrics_write_prometheus(m, &b);
        ns[i] = tb_mono_ns() - t0;
        bytes = b.len;
        tb_buf_free(&b);
    }
    report("/metrics", ntopics, bytes, ns);
    for (int i = 0; i < RUNS; i++) {
        uint64_t t0 = tb_mono_ns();
        json_t *doc = http_stats_json(s);
        char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
        ns[i] = tb_mono_ns() - t0;
        bytes = strlen(text);
        free(text);
        json_decref(doc);
    }
    report("/stats", ntopics, bytes, ns);
    /* The same in the two parts a request to the listener runs now: the
     * tree built on the loop, the dump and the free on the thread pool
     * (http_endpoints.c). stats@loop is what the event loop still spends. */
    uint64_t pool[MAX_RUNS];
    for (int i = 0; i < RUNS; i++) {
        uint64_t t0 = tb_mono_ns();
        json_t *doc = http_stats_json(s);
        uint64_t t1 = tb_mono_ns();
        char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
        json_decref(doc);
        pool[i] = tb_mono_ns() - t1;
        ns[i] = t1 - t0;
        bytes = strlen(text);
        free(text);
    }
    report("stats@loop", ntopics, bytes, ns);
    report("stats@pool", ntopics, bytes, pool);

    bytes = answer_runs(s, "/", ns);
    report("/", ntopics, bytes, ns);
    bytes = answer_runs(s, "/table", ns);
    report("/table", ntopics, bytes, ns);
    for (int i = 0; i < 720; i++) /* a full ring: an hour of samples */
        http_service_sample(s);
    uint64_t fresh[MAX_RUNS], sample[MAX_RUNS];
    for (int i = 0; i < RUNS; i++) {
        uint64_t t0 = tb_mono_ns();
        http_service_sample(s);
        sample[i] = tb_mono_ns() - t0;
        bytes = answer(s, "/stats/history", &fresh[i]);
    }
    report("sample", ntopics, 0, sample);
    report("history", ntopics, bytes, fresh);
    bytes = answer_runs(s, "/stats/history", ns);
    report("history=", ntopics, bytes, ns);

    http_service_close(s, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    http_service_free(s);
    uv_loop_close(&loop);
    metrics_free(m);
}

int main(int argc, char **argv)
{
    tb_log_setup(TB_LOG_WARN, TB_LOG_TEXT, 2);
    if (argc > 1)
        RUNS = atoi(argv[1]);
    if (RUNS < 1 || RUNS > MAX_RUNS) {
        fprintf(stderr, "usage: bench_http_scrape [RUNS (1..%d) [TOPICS ...]]\n", MAX_RUNS);
        return 2;
    }
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            bench((size_t)strtoul(argv[i], NULL, 10));
        return 0;
    }
    bench(10);
    bench(100);
    bench(1000);
    return 0;
}
