/*
 * metrics_int.h: the registry's layout, shared by the metrics*.c files only
 * (the rest of the gateway goes through metrics.h). Storage for every
 * series is one flat array per family, allocated at registration for the
 * label sets' full capacity, so an update is an index check and an add.
 */
#ifndef METRICS_METRICS_INT_H
#define METRICS_METRICS_INT_H

#include "gateway/metrics/metrics.h"

struct metrics_labels {
    char *name;
    char **values; /* count of them in use, cap allocated */
    size_t count, cap;
    bool fixed;
};

struct metrics_family {
    metrics_spec_t spec;
    metrics_labels_t *l[2]; /* NULL when absent */
    size_t n1, n2;             /* capacities (1 for an absent label) */
    uint64_t *vals;            /* counters, gauges: n1 * n2 */
    uint64_t *counts;          /* histograms: n1 * n2 * (nbounds + 1) */
    uint64_t *sums;            /* histograms: n1 * n2 */
};

struct metrics {
    metrics_labels_t *labels[METRICS_MAX_LABELSETS];
    size_t nlabels;
    metrics_family_t *fams[METRICS_MAX_FAMILIES];
    size_t nfams;
    struct {
        metrics_collect_cb cb;
        void *arg;
    } coll[METRICS_MAX_COLLECTORS];
    size_t ncoll;
    /* set by metrics_catalog_register */
    metrics_family_t *catalog[METRICS__COUNT];
    metrics_labels_t *catalog_labels[METRICS_L__COUNT];
};

/* The /proc/self collector (metrics_process.c), registered by the catalog. */
void metrics__proc_collect(void *arg, metrics_t *m);

#endif
