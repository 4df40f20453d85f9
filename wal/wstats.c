/*
 * wstats.c: what the log writes, by cause (wal_stats; the block comment in
 * wal.h says what each cause is). The wear budget of a memory_first topic
 * is a few KiB an hour (docs/design/MEMORY-FIRST.md 5); /proc/<pid>/io
 * says how much was written but not why, so each write and sync site
 * names its reason here and bench/bench_wear.py prints the two side by
 * side. Relaxed atomics: counts, not an ordering.
 */
#include "wal/wal_int.h"

static const char *const cause_names[WAL_CAUSE__COUNT] = {
    [WAL_CAUSE_RECORD] = "record",         [WAL_CAUSE_PAD] = "pad",         [WAL_CAUSE_PROBE] = "probe",
    [WAL_CAUSE_SEGMENT] = "segment",       [WAL_CAUSE_CHECKPOINT] = "checkpoint",
    [WAL_CAUSE_RESERVE] = "reserve",       [WAL_CAUSE_DROP] = "drop",       [WAL_CAUSE_SWITCH] = "switch",
    [WAL_CAUSE_REPAIR] = "repair",         [WAL_CAUSE_STATE] = "state",     [WAL_CAUSE_OTHER] = "other",
};

const char *wal_cause_name(wal_cause_t c)
{
    return (unsigned)c < WAL_CAUSE__COUNT ? cause_names[c] : "?";
}

void wal__count(wal_t *w, wal_cause_t why, size_t n, unsigned syncs)
{
    if (!w || (unsigned)why >= WAL_CAUSE__COUNT)
        return;
    if (n > 0) {
        atomic_fetch_add_explicit(&w->c_bytes[why], n, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->c_writes[why], 1, memory_order_relaxed);
    }
    if (syncs > 0)
        atomic_fetch_add_explicit(&w->c_syncs[why], syncs, memory_order_relaxed);
}

int wal__pwrite_counted(wal_t *w, wal_cause_t why, int fd, const void *buf, size_t n, uint64_t off)
{
    int rc = wal__pwrite_all(w->io, fd, buf, n, off);
    if (rc == 0)
        wal__count(w, why, n, 0);
    return rc;
}

int wal__write_atomic(wal_t *w, wal_cause_t why, const char *path, const void *buf, size_t n)
{
    int rc = w->io->write_atomic(w->io->ctx, path, buf, n);
    if (rc == 0)
        wal__count(w, why, n, 2); /* the file's fsync and its directory's */
    return rc;
}

int wal__fsync_dir(wal_t *w, wal_cause_t why, const char *dir)
{
    wal__count(w, why, 0, 1);
    return w->io->fsync_dir(w->io->ctx, dir);
}

void wal_stats(wal_t *w, wal_stats_t *out)
{
    for (size_t i = 0; i < WAL_CAUSE__COUNT; i++) {
        out->bytes[i] = atomic_load_explicit(&w->c_bytes[i], memory_order_relaxed);
        out->writes[i] = atomic_load_explicit(&w->c_writes[i], memory_order_relaxed);
        out->syncs[i] = atomic_load_explicit(&w->c_syncs[i], memory_order_relaxed);
    }
}
