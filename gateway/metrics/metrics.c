/*
 * metrics.c: the registry: label sets, families, updates, collectors and
 * the lock-free histogram other threads observe into. The writers live in
 * metrics_prom.c and metrics_json.c; the gateway's table of metrics in
 * metrics_catalog.c. See metrics.h for the rules (bounded label sets,
 * loop-thread ownership, raw integer units).
 */
#include "gateway/metrics/metrics_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int metrics_new(metrics_t **out)
{
    *out = tb_calloc(1, sizeof **out);
    return 0;
}

static void labels_free(metrics_labels_t *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->values[i]);
    free(l->values);
    free(l->name);
    free(l);
}

void metrics_free(metrics_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nfams; i++) {
        free(m->fams[i]->vals);
        free(m->fams[i]->counts);
        free(m->fams[i]->sums);
        free(m->fams[i]);
    }
    for (size_t i = 0; i < m->nlabels; i++)
        labels_free(m->labels[i]);
    free(m);
}

/* ---- names -------------------------------------------------------------- */

static bool name_ok(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++) {
        bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (colon && *p == ':');
        bool digit = *p >= '0' && *p <= '9';
        if (!alpha && !(digit && p != s))
            return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- label sets --------------------------------------------------------- */

static int labels_new(metrics_t *m, const char *name, size_t cap, metrics_labels_t **out)
{
    *out = NULL;
    if (!name_ok(name, false) || strncmp(name, "__", 2) == 0 || cap == 0 || cap > METRICS_MAX_SERIES)
        return TB_EINVALID;
    if (m->nlabels == METRICS_MAX_LABELSETS)
        return TB_EFULL;
    metrics_labels_t *l = tb_calloc(1, sizeof *l);
    l->name = tb_strdup(name);
    l->values = tb_calloc(cap, sizeof *l->values);
    l->cap = cap;
    m->labels[m->nlabels++] = l;
    *out = l;
    return 0;
}

int metrics_labels_bounded(metrics_t *m, const char *name, size_t cap, metrics_labels_t **out)
{
    return labels_new(m, name, cap, out);
}

int metrics_labels_fixed(metrics_t *m, const char *name, const char *const *values, size_t n,
                            metrics_labels_t **out)
{
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!values[i] || !*values[i] || !tb_utf8_valid((const uint8_t *)values[i], strlen(values[i])))
            return TB_EINVALID;
        for (size_t j = 0; j < i; j++)
            if (strcmp(values[i], values[j]) == 0)
                return TB_EINVALID;
    }
    metrics_labels_t *l;
    int rc = labels_new(m, name, n, &l);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        l->values[i] = tb_strdup(values[i]);
    l->count = n;
    l->fixed = true;
    *out = l;
    return 0;
}

int metrics_labels_find(const metrics_labels_t *l, const char *value)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->values[i], value) == 0)
            return (int)i;
    return TB_EINVALID;
}

int metrics_labels_add(metrics_labels_t *l, const char *value)
{
    if (l->fixed || !value || !*value || !tb_utf8_valid((const uint8_t *)value, strlen(value)))
        return TB_EINVALID;
    int i = metrics_labels_find(l, value);
    if (i >= 0)
        return i;
    if (l->count == l->cap)
        return TB_EFULL;
    l->values[l->count] = tb_strdup(value);
    return (int)l->count++;
}

size_t metrics_labels_count(const metrics_labels_t *l) { return l->count; }
const char *metrics_labels_name(const metrics_labels_t *l) { return l->name; }

const char *metrics_labels_value(const metrics_labels_t *l, size_t i)
{
    return i < l->count ? l->values[i] : NULL;
}

/* ---- families ----------------------------------------------------------- */

static int spec_check(const metrics_t *m, const metrics_spec_t *s, metrics_labels_t *l1, metrics_labels_t *l2)
{
    if (!name_ok(s->name, true) || !s->help || (l2 && !l1) || (l1 && l1 == l2))
        return TB_EINVALID;
    if (l1 && l2 && strcmp(l1->name, l2->name) == 0)
        return TB_EINVALID;
    if ((s->type == METRICS_COUNTER) != ends_with(s->name, "_total"))
        return TB_EINVALID; /* counters, and only counters, end in _total */
    if (s->type == METRICS_HISTOGRAM) {
        if (s->nbounds == 0 || s->nbounds > METRICS_MAX_BUCKETS || !s->bounds)
            return TB_EINVALID;
        for (size_t i = 1; i < s->nbounds; i++)
            if (s->bounds[i] <= s->bounds[i - 1])
                return TB_EINVALID;
        if ((l1 && strcmp(l1->name, "le") == 0) || (l2 && strcmp(l2->name, "le") == 0))
            return TB_EINVALID;
    } else if (s->type != METRICS_COUNTER && s->type != METRICS_GAUGE) {
        return TB_EINVALID;
    }
    for (size_t i = 0; i < m->nfams; i++)
        if (strcmp(m->fams[i]->spec.name, s->name) == 0)
            return TB_EINVALID;
    size_t n1 = l1 ? l1->cap : 1, n2 = l2 ? l2->cap : 1;
    if (n1 * n2 > METRICS_MAX_SERIES)
        return TB_EINVALID;
    return 0;
}

int metrics_register(metrics_t *m, const metrics_spec_t *spec, metrics_labels_t *l1,
                        metrics_labels_t *l2, metrics_family_t **out)
{
    if (out)
        *out = NULL;
    int rc = spec_check(m, spec, l1, l2);
    if (rc < 0)
        return rc;
    if (m->nfams == METRICS_MAX_FAMILIES)
        return TB_EFULL;
    metrics_family_t *f = tb_calloc(1, sizeof *f);
    f->spec = *spec;
    if (f->spec.div == 0)
        f->spec.div = 1;
    f->l[0] = l1;
    f->l[1] = l2;
    f->n1 = l1 ? l1->cap : 1;
    f->n2 = l2 ? l2->cap : 1;
    size_t n = f->n1 * f->n2;
    if (spec->type == METRICS_HISTOGRAM) {
        f->counts = tb_calloc(n * (spec->nbounds + 1), sizeof *f->counts);
        f->sums = tb_calloc(n, sizeof *f->sums);
    } else {
        f->vals = tb_calloc(n, sizeof *f->vals);
    }
    m->fams[m->nfams++] = f;
    if (out)
        *out = f;
    return 0;
}

metrics_family_t *metrics_find(metrics_t *m, const char *name)
{
    for (size_t i = 0; i < m->nfams; i++)
        if (strcmp(m->fams[i]->spec.name, name) == 0)
            return m->fams[i];
    return NULL;
}

size_t metrics_nfamilies(const metrics_t *m) { return m->nfams; }
metrics_family_t *metrics_family_at(metrics_t *m, size_t i) { return i < m->nfams ? m->fams[i] : NULL; }
const metrics_spec_t *metrics_family_spec(const metrics_family_t *f) { return &f->spec; }
metrics_labels_t *metrics_family_label(const metrics_family_t *f, int which)
{
    return which == 0 || which == 1 ? f->l[which] : NULL;
}

/* ---- updates ------------------------------------------------------------ */

/* Flat index of series (i1, i2), or -1 when either is past its set's current count. */
static long slot(const metrics_family_t *f, size_t i1, size_t i2)
{
    size_t c1 = f->l[0] ? f->l[0]->count : 1, c2 = f->l[1] ? f->l[1]->count : 1;
    if (i1 >= c1 || i2 >= c2)
        return -1;
    return (long)(i1 * f->n2 + i2);
}

void metrics_add(metrics_family_t *f, size_t i1, size_t i2, uint64_t n)
{
    long s = slot(f, i1, i2);
    if (s >= 0 && f->vals)
        f->vals[s] += n;
}

void metrics_sub(metrics_family_t *f, size_t i1, size_t i2, uint64_t n)
{
    long s = slot(f, i1, i2);
    if (s >= 0 && f->vals && f->spec.type == METRICS_GAUGE)
        f->vals[s] -= n;
}

void metrics_set(metrics_family_t *f, size_t i1, size_t i2, int64_t v)
{
    long s = slot(f, i1, i2);
    if (s >= 0 && f->vals)
        f->vals[s] = (uint64_t)v;
}

int64_t metrics_get(const metrics_family_t *f, size_t i1, size_t i2)
{
    long s = slot(f, i1, i2);
    return s >= 0 && f->vals ? (int64_t)f->vals[s] : 0;
}

static size_t bucket_of(const uint64_t *bounds, size_t nbounds, uint64_t v)
{
    size_t lo = 0, hi = nbounds; /* first bound >= v, or nbounds (+Inf) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bounds[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void metrics_observe(metrics_family_t *f, size_t i1, size_t i2, uint64_t v)
{
    long s = slot(f, i1, i2);
    if (s < 0 || !f->counts)
        return;
    size_t nb = f->spec.nbounds + 1;
    f->counts[(size_t)s * nb + bucket_of(f->spec.bounds, f->spec.nbounds, v)]++;
    f->sums[s] += v;
}

int metrics_hist_get(const metrics_family_t *f, size_t i1, size_t i2, metrics_hist_view_t *out)
{
    memset(out, 0, sizeof *out);
    long s = slot(f, i1, i2);
    if (s < 0 || !f->counts)
        return TB_EINVALID;
    out->nbuckets = f->spec.nbounds + 1;
    out->counts = f->counts + (size_t)s * out->nbuckets;
    for (size_t b = 0; b < out->nbuckets; b++)
        out->count += out->counts[b];
    out->sum = f->sums[s];
    return 0;
}

/* ---- other threads ------------------------------------------------------ */

void metrics_ahist_init(metrics_ahist_t *h, const uint64_t *bounds, size_t nbounds)
{
    h->bounds = bounds;
    h->nbounds = nbounds > METRICS_MAX_BUCKETS ? METRICS_MAX_BUCKETS : nbounds;
    for (size_t i = 0; i <= METRICS_MAX_BUCKETS; i++)
        atomic_init(&h->counts[i], 0);
    atomic_init(&h->sum, 0);
}

void metrics_ahist_observe(metrics_ahist_t *h, uint64_t v)
{
    atomic_fetch_add_explicit(&h->counts[bucket_of(h->bounds, h->nbounds, v)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

int metrics_hist_load(metrics_family_t *f, size_t i1, size_t i2, const metrics_ahist_t *h)
{
    long s = slot(f, i1, i2);
    if (s < 0 || !f->counts || h->nbounds != f->spec.nbounds)
        return TB_EINVALID;
    for (size_t b = 0; b < h->nbounds; b++)
        if (h->bounds[b] != f->spec.bounds[b])
            return TB_EINVALID;
    size_t nb = f->spec.nbounds + 1;
    /* Buckets, then the sum: _count is derived from the copied buckets, so
     * the buckets and _count always agree; the sum may be a little ahead. */
    for (size_t b = 0; b < nb; b++)
        f->counts[(size_t)s * nb + b] = atomic_load_explicit(&h->counts[b], memory_order_relaxed);
    f->sums[s] = atomic_load_explicit(&h->sum, memory_order_relaxed);
    return 0;
}

/* ---- collectors --------------------------------------------------------- */

int metrics_add_collector(metrics_t *m, metrics_collect_cb cb, void *arg)
{
    if (m->ncoll == METRICS_MAX_COLLECTORS)
        return TB_EFULL;
    m->coll[m->ncoll].cb = cb;
    m->coll[m->ncoll].arg = arg;
    m->ncoll++;
    return 0;
}

void metrics_remove_collector(metrics_t *m, metrics_collect_cb cb, void *arg)
{
    for (size_t i = 0; i < m->ncoll; i++) {
        if (m->coll[i].cb == cb && m->coll[i].arg == arg) {
            memmove(&m->coll[i], &m->coll[i + 1], (m->ncoll - i - 1) * sizeof m->coll[0]);
            m->ncoll--;
            return;
        }
    }
}

void metrics_collect(metrics_t *m)
{
    for (size_t i = 0; i < m->ncoll; i++)
        m->coll[i].cb(m->coll[i].arg, m);
}
