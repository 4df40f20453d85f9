/*
 * metrics_prom.c: the Prometheus text exposition format, version 0.0.4.
 *
 *   # HELP tributary_messages_received_total Messages routed ...
 *   # TYPE tributary_messages_received_total counter
 *   tributary_messages_received_total{topic="/e1/t"} 42
 *   tributary_wal_fsync_duration_seconds_bucket{le="0.001"} 3
 *   ...
 *   tributary_wal_fsync_duration_seconds_bucket{le="+Inf"} 5
 *   tributary_wal_fsync_duration_seconds_sum 0.0123
 *   tributary_wal_fsync_duration_seconds_count 5
 *
 * Rules followed (and checked by promtool in the tests): one HELP and one
 * TYPE line per family before its samples; HELP escapes \ and newline;
 * label values escape \, " and newline; histogram buckets are cumulative,
 * end with le="+Inf" equal to _count. A family with no series yet (a topic
 * label set still empty) is left out entirely. Numbers: integers are
 * written exactly; a raw value divided into base units is written in the
 * shortest form that reads back to the same double.
 */
#include "gateway/metrics/metrics_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void metrics_format_value(char *dst, size_t n, int64_t raw, uint64_t div)
{
    if (div <= 1) {
        snprintf(dst, n, "%" PRId64, raw);
        return;
    }
    if (raw % (int64_t)div == 0) {
        snprintf(dst, n, "%" PRId64, raw / (int64_t)div);
        return;
    }
    double v = (double)raw / (double)div;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(dst, n, "%.*g", prec, v);
        if (strtod(dst, NULL) == v)
            return;
    }
}

static void put_escaped(tb_buf_t *out, const char *s, bool quote)
{
    const char *special = quote ? "\\\n\"" : "\\\n";
    for (;;) {
        size_t run = strcspn(s, special); /* the plain run goes in one append */
        tb_buf_append(out, s, run);
        s += run;
        if (!*s)
            return;
        tb_buf_puts(out, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
        s++;
    }
}

/* {l1="v1",l2="v2"[,le="x"]}, or nothing when there are no labels at all. */
static void put_labels(tb_buf_t *out, const metrics_family_t *f, size_t i1, size_t i2, const char *le)
{
    const size_t idx[2] = { i1, i2 };
    bool any = false;
    for (int k = 0; k < 2; k++) {
        if (!f->l[k])
            continue;
        tb_buf_putc(out, any ? ',' : '{');
        tb_buf_puts(out, f->l[k]->name);
        tb_buf_puts(out, "=\"");
        put_escaped(out, f->l[k]->values[idx[k]], true);
        tb_buf_putc(out, '"');
        any = true;
    }
    if (le) {
        tb_buf_putc(out, any ? ',' : '{');
        tb_buf_printf(out, "le=\"%s\"", le);
        any = true;
    }
    if (any)
        tb_buf_putc(out, '}');
}

static void put_sample(tb_buf_t *out, const metrics_family_t *f, const char *suffix, size_t i1, size_t i2,
                       const char *le, int64_t raw, uint64_t div)
{
    char num[64];
    metrics_format_value(num, sizeof num, raw, div);
    tb_buf_puts(out, f->spec.name);
    tb_buf_puts(out, suffix);
    put_labels(out, f, i1, i2, le);
    tb_buf_putc(out, ' ');
    tb_buf_puts(out, num);
    tb_buf_putc(out, '\n');
}

static void put_histogram(tb_buf_t *out, const metrics_family_t *f, size_t i1, size_t i2)
{
    metrics_hist_view_t h;
    if (metrics_hist_get(f, i1, i2, &h) < 0)
        return;
    uint64_t cum = 0;
    char le[64];
    for (size_t b = 0; b < f->spec.nbounds; b++) {
        cum += h.counts[b];
        metrics_format_value(le, sizeof le, (int64_t)f->spec.bounds[b], f->spec.div);
        put_sample(out, f, "_bucket", i1, i2, le, (int64_t)cum, 1);
    }
    put_sample(out, f, "_bucket", i1, i2, "+Inf", (int64_t)h.count, 1);
    put_sample(out, f, "_sum", i1, i2, NULL, (int64_t)h.sum, f->spec.div);
    put_sample(out, f, "_count", i1, i2, NULL, (int64_t)h.count, 1);
}

static const char *type_name(metrics_type_t t)
{
    return t == METRICS_COUNTER ? "counter" : t == METRICS_GAUGE ? "gauge" : "histogram";
}

void metrics_write_prometheus(metrics_t *m, tb_buf_t *out)
{
    for (size_t i = 0; i < m->nfams; i++) {
        const metrics_family_t *f = m->fams[i];
        size_t c1 = f->l[0] ? f->l[0]->count : 1, c2 = f->l[1] ? f->l[1]->count : 1;
        if (c1 == 0 || c2 == 0)
            continue;
        tb_buf_printf(out, "# HELP %s ", f->spec.name);
        put_escaped(out, f->spec.help, false);
        tb_buf_printf(out, "\n# TYPE %s %s\n", f->spec.name, type_name(f->spec.type));
        for (size_t a = 0; a < c1; a++) {
            for (size_t b = 0; b < c2; b++) {
                if (f->spec.type == METRICS_HISTOGRAM)
                    put_histogram(out, f, a, b);
                else
                    put_sample(out, f, "", a, b, NULL, metrics_get(f, a, b), f->spec.div);
            }
        }
    }
}
