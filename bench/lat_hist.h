/*
 * lat_hist.h: the latency histogram of the load generators (loadgen.c,
 * tls_handshakes.c): 0.1 ms buckets up to 10 s, the last one open, counted
 * with atomics from every worker thread. A header because every .c file in bench/
 * is a program of its own (bench/CMakeLists.txt).
 */
#ifndef TRIB_BENCH_LAT_HIST_H
#define TRIB_BENCH_LAT_HIST_H

#include <stdatomic.h>

#define LAT_BUCKETS 100001

static atomic_uint g_lat[LAT_BUCKETS];

/* Counts one latency of lat seconds. */
static inline void lat_add(double lat)
{
    long b = lat <= 0 ? 0 : (long)(lat * 1e4);
    atomic_fetch_add(&g_lat[b < LAT_BUCKETS ? b : LAT_BUCKETS - 1], 1);
}

/* The q-quantile of what was counted, in ms (the upper edge of its bucket). */
static inline double lat_quantile(double q)
{
    unsigned long total = 0, seen = 0;
    for (long b = 0; b < LAT_BUCKETS; b++)
        total += atomic_load(&g_lat[b]);
    if (total == 0)
        return 0;
    unsigned long want = (unsigned long)(q * (double)total + 0.5);
    if (want < 1)
        want = 1;
    for (long b = 0; b < LAT_BUCKETS; b++) {
        seen += atomic_load(&g_lat[b]);
        if (seen >= want)
            return (double)(b + 1) / 10.0;
    }
    return (double)LAT_BUCKETS / 10.0;
}

#endif
