/*
 * metrics_int.h: the registry's layout, shared by the metrics*.c files only
 * (the rest of the gateway goes through metrics.h). Storage for every
 * series is one flat array per family, allocated at registration for the
 * label sets' full capacity, so an update is an index check and an add.
 */
#ifndef GW_METRICS_INT_H
#define GW_METRICS_INT_H

#include "gateway/metrics/metrics.h"

struct gw_metrics_labels {
    char *name;
    char **values; /* count of them in use, cap allocated */
    size_t count, cap;
    bool fixed;
};

struct gw_metrics_family {
    gw_metrics_spec_t spec;
    gw_metrics_labels_t *l[2]; /* NULL when absent */
    size_t n1, n2;             /* capacities (1 for an absent label) */
    uint64_t *vals;            /* counters, gauges: n1 * n2 */
    uint64_t *counts;          /* histograms: n1 * n2 * (nbounds + 1) */
    uint64_t *sums;            /* histograms: n1 * n2 */
};

struct gw_metrics {
    gw_metrics_labels_t *labels[GW_METRICS_MAX_LABELSETS];
    size_t nlabels;
    gw_metrics_family_t *fams[GW_METRICS_MAX_FAMILIES];
    size_t nfams;
    struct {
        gw_metrics_collect_cb cb;
        void *arg;
    } coll[GW_METRICS_MAX_COLLECTORS];
    size_t ncoll;
    /* set by gw_metrics_catalog_register */
    gw_metrics_family_t *catalog[GW_M__COUNT];
    gw_metrics_labels_t *catalog_labels[GW_ML__COUNT];
};

/* The /proc/self collector (metrics_process.c), registered by the catalog. */
void gw_metrics__proc_collect(void *arg, gw_metrics_t *m);

#endif
