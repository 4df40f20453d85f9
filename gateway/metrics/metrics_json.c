/*
 * metrics_json.c: one series as a JSON value, for /stats (jansson).
 *
 * A value with div 1 is an integer (counts, bytes, offsets stay exact in
 * JSON up to 2^53 and jansson keeps them as json_int_t, 64-bit); a value
 * in a divided unit (seconds) is a real. A histogram becomes
 * {"count": n, "sum": s, "buckets": {"0.001": cumulative, ..., "+Inf": n}}.
 * The /stats document's shape is built from these in http_stats.c.
 */
#include "gateway/metrics/metrics_int.h"

#include <stdio.h>

static json_t *number(int64_t raw, uint64_t div)
{
    if (div <= 1)
        return json_integer((json_int_t)raw);
    return json_real((double)raw / (double)div);
}

json_t *metrics_json_value(const metrics_family_t *f, size_t i1, size_t i2)
{
    if (f->spec.type != METRICS_HISTOGRAM) {
        size_t c1 = f->l[0] ? f->l[0]->count : 1, c2 = f->l[1] ? f->l[1]->count : 1;
        if (i1 >= c1 || i2 >= c2)
            return NULL;
        return number(metrics_get(f, i1, i2), f->spec.div);
    }
    metrics_hist_view_t h;
    if (metrics_hist_get(f, i1, i2, &h) < 0)
        return NULL;
    json_t *buckets = json_object();
    uint64_t cum = 0;
    char le[64];
    for (size_t b = 0; b < f->spec.nbounds; b++) {
        cum += h.counts[b];
        metrics_format_value(le, sizeof le, (int64_t)f->spec.bounds[b], f->spec.div);
        json_object_set_new(buckets, le, json_integer((json_int_t)cum));
    }
    json_object_set_new(buckets, "+Inf", json_integer((json_int_t)h.count));
    return json_pack("{s:I, s:o, s:o}", "count", (json_int_t)h.count, "sum", number((int64_t)h.sum, f->spec.div),
                     "buckets", buckets);
}
