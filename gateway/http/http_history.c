/*
 * http_history.c: the last hour of the gateway in a small in-process ring,
 * for the operator's page (/, http_page.c) to draw without Prometheus.
 *
 * Every history_ms (5 s) a timer on the loop runs the collectors and
 * keeps one sample: over all topics the messages received and replicated
 * per second, the messages queued, the age of the oldest unreplicated
 * message (the worst topic's) and the bytes this process wrote to disk per
 * second (/proc/self/io write_bytes, the flash wear figure); and the first
 * four figures for each of the first HTTP_HISTORY_TOPICS (8) upstream
 * topics in configuration order (and, outside the ring, every topic's
 * received/s over the last interval, /stats received_per_second: 12 bytes
 * a topic). The ring holds HTTP_HISTORY_SAMPLES (720)
 * samples: an hour at 5 s. Rates are deltas of the counters between two
 * samples, so the first sample (taken when the endpoint starts listening)
 * is only the baseline and the first point comes one interval later.
 *
 * MEMORY, fixed and allocated once at the first sample: 720 x (8 bytes of
 * time + 5 x 4 bytes of totals + 8 topics x 4 x 4 bytes) = 720 x 156 =
 * 112,320 bytes, whatever the number of topics. Why the first 8 and not the
 * busiest 8: a slot that changed topics as traffic moved would draw one
 * line out of two topics' histories; the first 8 mean a fixed, predictable
 * set (put the topics you watch first in topic_mappings). Every topic's
 * current figures are in /stats and the page's table regardless.
 *
 * Each sample also asks the provider for the top talkers, so their window
 * (at least 5 s, gateway/broker) ends every sample, read by /stats or not.
 *
 * /stats/history renders the ring as JSON (http_history_json). It changes
 * only when a sample is taken, so the rendering is kept until the next one:
 * a page polling every few seconds costs a copy, and the rendering itself
 * (~26,000 numbers with 8 topics) uses a formatter of our own rather than
 * printf's %g, into a stack buffer per series (bench/bench_http_scrape
 * times it).
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H_RECV, H_REPL, H_QUEUED, H_AGE, H_DISK, H__TOTAL };
enum { HT_RECV, HT_REPL, HT_QUEUED, HT_AGE, HT__COUNT };

struct http__history {
    size_t head;   /* next slot to write */
    size_t count;  /* samples held, <= HTTP_HISTORY_SAMPLES */
    uint64_t seq;  /* samples taken since start (the baseline not counted) */
    bool have_base;
    uint64_t base_ns;  /* monotonic time of the previous sample */
    uint64_t base_recv, base_repl, base_disk;
    uint64_t base_trecv[HTTP_HISTORY_TOPICS], base_trepl[HTTP_HISTORY_TOPICS];
    size_t ntopics;    /* topics with a series, <= HTTP_HISTORY_TOPICS */
    /* every topic's received/s over the last interval (/stats received_per_second): 12 bytes a topic */
    size_t nall;       /* topics in the two arrays (the registry's, which only grows, to its capacity) */
    uint64_t *all_base;
    float *all_rate;
    uint64_t all_ns;   /* when all_base was read */
    uint64_t t_ms[HTTP_HISTORY_SAMPLES];                        /* wall clock */
    float total[HTTP_HISTORY_SAMPLES][H__TOTAL];
    float topic[HTTP_HISTORY_SAMPLES][HTTP_HISTORY_TOPICS][HT__COUNT];
};

size_t http_history_bytes(void)
{
    return sizeof(((http__history_t *)0)->t_ms) + sizeof(((http__history_t *)0)->total) +
           sizeof(((http__history_t *)0)->topic);
}

static uint64_t u(int64_t v)
{
    return v > 0 ? (uint64_t)v : 0;
}

static float rate(uint64_t now, uint64_t before, double secs)
{
    return now >= before && secs > 0 ? (float)((double)(now - before) / secs) : 0.0f;
}

void http__history_sample(http_service_t *s)
{
    if (!s->hist)
        s->hist = tb_calloc(1, sizeof *s->hist);
    http__history_t *h = s->hist;
    metrics_t *m = s->m;
    metrics_collect(m);
    metrics_catalog_derive(m);

    metrics_family_t *recv = metrics_fam(m, METRICS_RECEIVED), *repl = metrics_fam(m, METRICS_REPLICATED);
    metrics_family_t *queued = metrics_fam(m, METRICS_QUEUED), *age = metrics_fam(m, METRICS_OLDEST_UNREPLICATED_AGE);
    size_t n = metrics_labels_count(metrics_topics(m));
    uint64_t trecv = 0, trepl = 0, tqueued = 0, tage_ms = 0;
    for (size_t t = 0; t < n; t++) {
        trecv += u(metrics_get(recv, t, 0));
        trepl += u(metrics_get(repl, t, 0));
        tqueued += u(metrics_get(queued, t, 0));
        uint64_t a = u(metrics_get(age, t, 0));
        if (a > tage_ms)
            tage_ms = a;
    }
    uint64_t disk = u(metrics_get(metrics_fam(m, METRICS_PROC_WRITE_BYTES), 0, 0));
    uint64_t now = tb_mono_ns();
    size_t nt = n < HTTP_HISTORY_TOPICS ? n : HTTP_HISTORY_TOPICS;

    if (h->have_base) {
        double secs = (double)(now - h->base_ns) / 1e9;
        size_t i = h->head;
        h->t_ms[i] = tb_wall_ms();
        h->total[i][H_RECV] = rate(trecv, h->base_recv, secs);
        h->total[i][H_REPL] = rate(trepl, h->base_repl, secs);
        h->total[i][H_QUEUED] = (float)tqueued;
        h->total[i][H_AGE] = (float)tage_ms / 1e3f;
        h->total[i][H_DISK] = rate(disk, h->base_disk, secs);
        for (size_t t = 0; t < HTTP_HISTORY_TOPICS; t++) {
            float *v = h->topic[i][t];
            if (t >= nt) {
                v[HT_RECV] = v[HT_REPL] = v[HT_QUEUED] = v[HT_AGE] = 0;
                continue;
            }
            /* a topic added since the last sample has no baseline: its rate starts at the next one */
            bool based = t < h->ntopics;
            v[HT_RECV] = based ? rate(u(metrics_get(recv, t, 0)), h->base_trecv[t], secs) : 0;
            v[HT_REPL] = based ? rate(u(metrics_get(repl, t, 0)), h->base_trepl[t], secs) : 0;
            v[HT_QUEUED] = (float)u(metrics_get(queued, t, 0));
            v[HT_AGE] = (float)u(metrics_get(age, t, 0)) / 1e3f;
        }
        h->head = (h->head + 1) % HTTP_HISTORY_SAMPLES;
        if (h->count < HTTP_HISTORY_SAMPLES)
            h->count++;
        h->seq++;
    }
    h->have_base = true;
    h->base_ns = now;
    h->base_recv = trecv;
    h->base_repl = trepl;
    h->base_disk = disk;
    for (size_t t = 0; t < nt; t++) {
        h->base_trecv[t] = u(metrics_get(recv, t, 0));
        h->base_trepl[t] = u(metrics_get(repl, t, 0));
    }
    h->ntopics = nt;
    if (n > h->nall) { /* topics added since: their rate starts at the next sample */
        h->all_base = tb_realloc(h->all_base, n * sizeof *h->all_base);
        h->all_rate = tb_realloc(h->all_rate, n * sizeof *h->all_rate);
        for (size_t t = h->nall; t < n; t++) {
            h->all_base[t] = u(metrics_get(recv, t, 0));
            h->all_rate[t] = -1;
        }
    }
    double secs = (double)(now - h->all_ns) / 1e9;
    for (size_t t = 0; t < h->nall; t++) {
        uint64_t r = u(metrics_get(recv, t, 0));
        h->all_rate[t] = rate(r, h->all_base[t], secs);
        h->all_base[t] = r;
    }
    h->nall = n;
    h->all_ns = now;
    if (s->p.top_talkers) { /* ends the top talkers' window every sample, read by /stats or not */
        http_talker_t top[HTTP_TOP_TALKERS];
        double window;
        (void)s->p.top_talkers(s->p.arg, top, HTTP_TOP_TALKERS, &window);
    }
}

double http__history_topic_rate(const http_service_t *s, size_t topic)
{
    const http__history_t *h = s->hist;
    return h && topic < h->nall ? h->all_rate[topic] : -1;
}

uint64_t http__history_seq(const http_service_t *s)
{
    return s->hist ? s->hist->seq : 0;
}

/* ---- rendering ---------------------------------------------------------- */

/* Writes v >= 0 with at most one decimal ("12", "0.5", "1234.5") ending at
 * *end (backwards); negatives and NaN as 0. Returns the first byte. */
static char *fmt_num(char *end, float v)
{
    char *p = end;
    if (!(v > 0))
        v = 0;
    if (v > 1e15f)
        v = 1e15f;
    uint64_t tenths = (uint64_t)((double)v * 10.0 + 0.5);
    unsigned frac = (unsigned)(tenths % 10);
    uint64_t whole = tenths / 10;
    if (frac) {
        *--p = (char)('0' + frac);
        *--p = '.';
    }
    do {
        *--p = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole);
    return p;
}

static void put_u64(tb_buf_t *b, uint64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    tb_buf_append(b, p, (size_t)(tmp + sizeof tmp - p));
}

/* Slot of the k-th oldest sample held. */
static size_t slot(const http__history_t *h, size_t k)
{
    return (h->head + HTTP_HISTORY_SAMPLES - h->count + k) % HTTP_HISTORY_SAMPLES;
}

/* ,"name":[v,v,...] of one series (first: no leading comma). The values of
 * sample slot i are at base + i * stride floats. Formatted into a buffer on
 * the stack and appended at once: one append per series, not per number. */
static void put_series(tb_buf_t *b, const http__history_t *h, const char *name, const float *base, size_t stride,
                       bool first)
{
    char out[HTTP_HISTORY_SAMPLES * 18 + 64]; /* a number is at most 17 bytes and its comma */
    size_t n = (size_t)snprintf(out, 64, "%s\"%s\":[", first ? "" : ",", name);
    if (n >= 64)
        n = 63;
    for (size_t k = 0; k < h->count; k++) {
        char tmp[24], *e = tmp + sizeof tmp;
        char *p = fmt_num(e, base[slot(h, k) * stride]);
        if (k)
            out[n++] = ',';
        memcpy(out + n, p, (size_t)(e - p));
        n += (size_t)(e - p);
    }
    out[n++] = ']';
    tb_buf_append(b, out, n);
}

static void series_total(tb_buf_t *b, const http__history_t *h, const char *name, int f, bool first)
{
    put_series(b, h, name, &h->total[0][f], H__TOTAL, first);
}

static void series_topic(tb_buf_t *b, const http__history_t *h, size_t t, const char *name, int f)
{
    put_series(b, h, name, &h->topic[0][t][f], (size_t)HTTP_HISTORY_TOPICS * HT__COUNT, false);
}

/* A JSON string of s (topic names: printable, but escape what JSON needs). */
static void put_str(tb_buf_t *b, const char *s)
{
    tb_buf_putc(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            tb_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            tb_buf_printf(b, "\\u%04x", c);
        else
            tb_buf_putc(b, (char)c);
    }
    tb_buf_putc(b, '"');
}

void http__history_render(http_service_t *s, tb_buf_t *b)
{
    if (!s->hist) /* before the first sample (the endpoint is not listening): an empty ring */
        s->hist = tb_calloc(1, sizeof *s->hist);
    const http__history_t *h = s->hist;
    tb_buf_printf(b, "{\"interval_seconds\":%.3g,\"capacity\":%d,\"seq\":", (double)s->opts.history_ms / 1e3,
                  HTTP_HISTORY_SAMPLES);
    put_u64(b, h->seq);
    tb_buf_puts(b, ",\"t\":[");
    for (size_t k = 0; k < h->count; k++) {
        if (k)
            tb_buf_putc(b, ',');
        put_u64(b, h->t_ms[slot(h, k)] / 1000);
    }
    tb_buf_puts(b, "],\"total\":{");
    series_total(b, h, "received_per_second", H_RECV, true);
    series_total(b, h, "replicated_per_second", H_REPL, false);
    series_total(b, h, "queued", H_QUEUED, false);
    series_total(b, h, "lag_age_seconds", H_AGE, false);
    series_total(b, h, "disk_write_bytes_per_second", H_DISK, false);
    tb_buf_puts(b, "},\"topics\":[");
    metrics_labels_t *topics = metrics_topics(s->m);
    for (size_t t = 0; t < h->ntopics; t++) {
        tb_buf_puts(b, t ? ",{\"topic\":" : "{\"topic\":");
        const char *name = metrics_labels_value(topics, t);
        put_str(b, name ? name : "");
        series_topic(b, h, t, "received_per_second", HT_RECV);
        series_topic(b, h, t, "replicated_per_second", HT_REPL);
        series_topic(b, h, t, "queued", HT_QUEUED);
        series_topic(b, h, t, "lag_age_seconds", HT_AGE);
        tb_buf_putc(b, '}');
    }
    tb_buf_puts(b, "]}\n");
}

void http__history_free(http_service_t *s)
{
    if (s->hist) {
        free(s->hist->all_base);
        free(s->hist->all_rate);
    }
    free(s->hist);
    s->hist = NULL;
}
