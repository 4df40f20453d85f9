/*
 * segment.c: one segment file: creating it whole, scanning its valid
 * prefix, and the timed fdatasync every data sync goes through.
 *
 * Creation follows the atomic-file recipe so that a segment's final name
 * always carries a whole, synced header: write the header to <name>.tmp,
 * fdatasync, rename, fsync the directory. A crash before the rename leaves
 * a .tmp that recovery deletes; after it, a valid empty segment.
 *
 * The scan reads in 1 MiB chunks and stops at the first record that breaks
 * the rule in wal_format.h; recovery, wal_check and wal_dump share it.
 * Padding records are part of the valid prefix but are not records: they
 * move valid_end, are counted in pad_bytes and never reach the callback.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#define SCAN_CHUNK (1u << 20)

int wal__seg_scan(const wal_io_t *io, int fd, uint64_t name_base, wal_scan_t *out, wal_scan_cb cb,
                  void *arg)
{
    memset(out, 0, sizeof *out);
    int rc = io->fsize(io->ctx, fd, &out->size);
    if (rc < 0)
        return rc;
    uint8_t hb[WAL_SEG_HDR_SIZE];
    ssize_t n = wal__pread_full(io, fd, hb, sizeof hb, 0);
    if (n < 0)
        return (int)n;
    if ((size_t)n < sizeof hb) {
        out->hdr_rc = TB_ECORRUPT;
        return 0;
    }
    out->hdr_rc = wal__seghdr_decode(hb, &out->hdr);
    if (out->hdr_rc == 0 && out->hdr.base != name_base)
        out->hdr_rc = TB_ECORRUPT;
    if (out->hdr_rc != 0)
        return 0;

    out->valid_end = WAL_SEG_HDR_SIZE;
    out->next = out->hdr.base;
    size_t cap = SCAN_CHUNK;
    uint8_t *buf = tb_malloc(cap);
    uint64_t buf_pos = WAL_SEG_HDR_SIZE; /* file position of buf[0] */
    size_t len = 0, off = 0;
    rc = 0;
    for (;;) {
        uint64_t pos = buf_pos + off;
        wal_rec_t rec;
        int d = wal__rec_decode(buf + off, len - off, out->size - pos, out->hdr.seed, out->hdr.version,
                                out->next, &rec);
        if (d == WAL_REC_PAD) {
            off += rec.len;
            out->valid_end = pos + rec.len;
            out->pad_bytes += rec.len;
            continue;
        }
        if (d == WAL_REC_OK) {
            if (cb && (rc = cb(arg, &rec, buf + off)) != 0)
                break;
            off += rec.len;
            out->valid_end = pos + rec.len;
            out->next++;
            out->count++;
            continue;
        }
        if (d == WAL_REC_BAD)
            break;
        /* SHORT: slide what is left to the front and read more */
        size_t need = TB_MAX((size_t)WAL_REC_HEAD, (size_t)wal__rec_len(buf + off, len - off));
        memmove(buf, buf + off, len - off);
        len -= off;
        buf_pos = pos;
        off = 0;
        if (need > cap) {
            cap = need;
            buf = tb_realloc(buf, cap);
        }
        ssize_t r = wal__pread_full(io, fd, buf + len, cap - len, buf_pos + len);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if (r == 0)
            break; /* the file ended under us: what we have is the prefix */
        len += (size_t)r;
    }
    free(buf);
    return rc;
}

int wal__fdatasync(wal_t *w, int fd, wal_cause_t why)
{
    wal__count(w, why, 0, 1);
    uint64_t t0 = tb_mono_ns();
    int rc = w->io->fdatasync(w->io->ctx, fd);
    uint64_t us = (tb_mono_ns() - t0) / 1000u;
    unsigned b = 0;
    while (b + 1 < WAL_FSYNC_HIST_BUCKETS && (us >> (b + 1)) != 0)
        b++;
    atomic_fetch_add_explicit(&w->h_buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->h_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->h_sum_us, us, memory_order_relaxed);
    uint64_t max = atomic_load_explicit(&w->h_max_us, memory_order_relaxed);
    while (us > max && !atomic_compare_exchange_weak(&w->h_max_us, &max, us)) {
    }
    return rc;
}

int wal__seg_create(wal_topic_t *t, uint64_t base, wal_seghdr_t *hdr)
{
    const wal_io_t *io = t->w->io;
    memset(hdr, 0, sizeof *hdr);
    hdr->version = WAL_FORMAT_VERSION;
    hdr->base = base;
    hdr->created_ms = io->now_ms(io->ctx);
    int rc = io->random(io->ctx, &hdr->salt, sizeof hdr->salt);
    if (rc < 0)
        return rc;
    uint8_t hb[WAL_SEG_HDR_SIZE];
    wal__seghdr_encode(hb, hdr);
    hdr->seed = wal__crc32c(0, hb + 24, 4);

    char *final = wal__seg_path(t, base, NULL);
    char *tmp = wal__seg_path(t, base, ".tmp");
    int fd = io->open(io->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        rc = fd;
        goto out;
    }
    if ((rc = wal__pwrite_counted(t->w, WAL_CAUSE_SEGMENT, fd, hb, sizeof hb, 0)) < 0 ||
        (rc = wal__fdatasync(t->w, fd, WAL_CAUSE_SEGMENT)) < 0 ||
        (rc = io->rename(io->ctx, tmp, final)) < 0) {
        io->close(io->ctx, fd);
        io->unlink(io->ctx, tmp);
        goto out;
    }
    if ((rc = wal__fsync_dir(t->w, WAL_CAUSE_SEGMENT, t->dir)) < 0) {
        /* the name may or may not survive a crash; either way is consistent,
         * but we cannot promise it, so undo and report */
        io->close(io->ctx, fd);
        io->unlink(io->ctx, final);
        goto out;
    }
    rc = fd;
out:
    if (rc < 0)
        tb_warn("wal: cannot create segment", TB_S("topic", t->name), TB_S("segment", final), TB_ERR(rc));
    free(final);
    free(tmp);
    return rc;
}

void wal__segs_push(wal_topic_t *t, const wal_seg_t *s)
{
    pthread_mutex_lock(&t->mu);
    if (t->nsegs == t->segs_cap) {
        t->segs_cap = t->segs_cap ? t->segs_cap * 2 : 8;
        t->segs = tb_realloc(t->segs, t->segs_cap * sizeof *t->segs);
    }
    t->segs[t->nsegs++] = *s;
    pthread_mutex_unlock(&t->mu);
}

void wal__segs_remove(wal_topic_t *t, size_t i)
{
    pthread_mutex_lock(&t->mu);
    memmove(&t->segs[i], &t->segs[i + 1], (t->nsegs - i - 1) * sizeof *t->segs);
    t->nsegs--;
    pthread_mutex_unlock(&t->mu);
}

void wal_fsync_hist(wal_t *w, wal_fsync_hist_t *out)
{
    for (int i = 0; i < WAL_FSYNC_HIST_BUCKETS; i++)
        out->buckets[i] = atomic_load_explicit(&w->h_buckets[i], memory_order_relaxed);
    out->count = atomic_load_explicit(&w->h_count, memory_order_relaxed);
    out->sum_us = atomic_load_explicit(&w->h_sum_us, memory_order_relaxed);
    out->max_us = atomic_load_explicit(&w->h_max_us, memory_order_relaxed);
}

uint64_t wal_fsync_hist_quantile(const wal_fsync_hist_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < WAL_FSYNC_HIST_BUCKETS; i++)
        total += h->buckets[i];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total + 0.999999);
    if (want == 0)
        want = 1;
    uint64_t seen = 0;
    for (int i = 0; i < WAL_FSYNC_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= want)
            return (uint64_t)1 << (i + 1);
    }
    return h->max_us;
}
