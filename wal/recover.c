/*
 * recover.c: making a topic's in-memory state agree with its directory.
 *
 * Runs at wal_open for every topic directory, and on the writer thread to
 * repair a topic after a failed write or fdatasync. It never refuses to
 * start because of bad data; it repairs and reports:
 *
 *   1. *.seg.tmp and meta.tmp are leftovers of an interrupted creation or
 *      meta replace: deleted.
 *   2. Segments entirely below meta.floor were being deleted when the process
 *      stopped (the floor is persisted before the unlink): deleted again,
 *      without counting them as dropped a second time.
 *   3. Sealed segments (all but the newest): the header is checked (and,
 *      with verify_on_open, every record). A bad one is renamed to
 *      *.seg.corrupt, counted in "quarantined", and its records above the
 *      checkpoint are counted as dropped: they can no longer be delivered,
 *      and the dropped counter is the one number that says how much the
 *      cluster will never see. Readers find corruption the open-time check
 *      skipped and ask the writer to quarantine (retention.c).
 *   4. The active (newest) segment is scanned to its longest valid prefix;
 *      anything after it is a torn tail, cut with ftruncate and logged with
 *      the number of bytes. Its header cannot be torn (segments are created
 *      whole); if it is bad anyway the segment is quarantined, and since its
 *      record count is then unknown the next offset is put past any offset
 *      it could have held (one per 28 bytes), so offsets never go back.
 *      Those records are not counted as dropped: their number is unknown
 *      (the log line says so).
 *   5. The next offset is the largest of: the active segment's last record
 *      + 1, the persisted floor, the checkpoint + 1, the newest segment
 *      name, and the reservation (meta.reserved: offsets below it may have
 *      been handed out without reaching the log; those between the log's
 *      end and it hold no record, and when nothing on disk is above the
 *      checkpoint, the checkpoint moves over them). If that is not where
 *      the active segment continues, or the active segment is of an older
 *      format version (a segment is written in one version only: padding
 *      must not land in a version 1 file), a new segment starts there.
 *   6. The active segment is fdatasync()ed, so that after recovery the synced
 *      end is the end of the log (a kill -9 leaves written but unsynced data
 *      in the page cache; it is made durable before anyone reads it).
 */
#include "wal/wal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

typedef struct { uint64_t *v; size_t n, cap; } u64vec_t;

static void vec_push(u64vec_t *v, uint64_t x)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->v = tb_realloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = x;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Lists segment bases (sorted) and removes creation leftovers. */
static int list_dir(wal_topic_t *t, u64vec_t *out)
{
    const wal_io_t *io = t->w->io;
    DIR *d = opendir(t->dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t base;
        if (wal__seg_name_parse(e->d_name, &base)) {
            vec_push(out, base);
        } else if (strcmp(e->d_name, "meta.tmp") == 0 ||
                   (ends_with(e->d_name, WAL_SEG_SUFFIX ".tmp") && strlen(e->d_name) == WAL_SEG_NAME_LEN + 4)) {
            char *p = tb_asprintf("%s/%s", t->dir, e->d_name);
            io->unlink(io->ctx, p);
            free(p);
        }
    }
    closedir(d);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_u64);
    return 0;
}

/* The offset after the last record of a sealed segment of size bytes with
 * header h (its records are [h->base, end): THE RULE makes them
 * contiguous), without reading the whole file: a sealed segment ends
 * exactly at the end of its last record (rotation syncs it whole), so the
 * last record is the one at position p whose length field is size - p and
 * whose salted CRC holds. The tail is read 4 KiB first, four times more
 * while no such record is in it (a long record, a padding record up to
 * 64 KiB). A padding record names the offset that follows it. Returns 0
 * and *end, 1 when no record was found (*end 0: not known), or -errno.
 * Only counts use it (the backlog, a bound's drops; readers and recovery
 * go by THE RULE): a record forged inside the last one's payload with this
 * segment's salted CRC would be taken, and its users clamp the end to the
 * next segment's base. */
static int sealed_end(const wal_io_t *io, int fd, const wal_seghdr_t *h, uint64_t size, uint64_t *end)
{
    *end = 0;
    if (size <= WAL_SEG_HDR_SIZE) {
        *end = h->base; /* no record */
        return 0;
    }
    uint64_t body = size - WAL_SEG_HDR_SIZE, win = 4096;
    uint8_t *buf = NULL;
    int rc = 1;
    for (;;) {
        uint64_t n = TB_MIN(win, TB_MIN(body, (uint64_t)WAL_RECORD_MAX));
        buf = tb_realloc(buf, n);
        ssize_t r = wal__pread_full(io, fd, buf, n, size - n);
        if (r < 0 || (uint64_t)r != n || n < WAL_REC_HEAD) {
            rc = r < 0 ? (int)r : -EIO;
            break;
        }
        for (uint64_t q = n - WAL_REC_HEAD + 1; q-- > 0 && rc == 1;) { /* shortest first */
            if (wal__ld32(buf + q) != n - q)
                continue;
            uint64_t off = wal__ld64(buf + q + 8);
            wal_rec_t rec;
            int k = wal__rec_decode(buf + q, n - q, n - q, h->seed, h->version, off, &rec);
            if ((k == WAL_REC_OK || k == WAL_REC_PAD) && off >= h->base) {
                *end = k == WAL_REC_OK ? off + 1 : off;
                rc = 0;
            }
        }
        if (rc != 1 || n == body || n >= WAL_RECORD_MAX)
            break;
        win *= 4;
    }
    free(buf);
    return rc;
}

/* Checks a sealed segment; fills *s. Returns 0 good, 1 corrupt, or -errno. */
static int check_sealed(wal_topic_t *t, uint64_t base, wal_seg_t *s)
{
    const wal_io_t *io = t->w->io;
    char *path = wal__seg_path(t, base, NULL);
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    free(path);
    if (fd < 0)
        return fd;
    wal_scan_t sc;
    int rc;
    if (t->w->o.verify_on_open) {
        rc = wal__seg_scan(io, fd, base, &sc, NULL, NULL);
    } else {
        memset(&sc, 0, sizeof sc);
        uint8_t hb[WAL_SEG_HDR_SIZE];
        ssize_t n = wal__pread_full(io, fd, hb, sizeof hb, 0);
        rc = n < 0 ? (int)n : io->fsize(io->ctx, fd, &sc.size);
        if (rc == 0) {
            sc.hdr_rc = (size_t)n < sizeof hb ? TB_ECORRUPT : wal__seghdr_decode(hb, &sc.hdr);
            if (sc.hdr_rc == 0 && sc.hdr.base != base)
                sc.hdr_rc = TB_ECORRUPT;
            sc.valid_end = sc.size;
            /* not found or unreadable: not known (0); damage there is the
             * readers' to find, as without this look */
            if (sc.hdr_rc != 0 || sealed_end(io, fd, &sc.hdr, sc.size, &sc.next) != 0)
                sc.next = 0;
        }
    }
    io->close(io->ctx, fd);
    if (rc < 0)
        return rc;
    s->base = base;
    s->bytes = sc.size;
    s->created_ms = sc.hdr.created_ms;
    s->end = sc.hdr_rc == 0 ? sc.next : 0;
    if (sc.hdr_rc != 0 || sc.valid_end != sc.size) {
        tb_warn("wal: corrupt sealed segment", TB_S("topic", t->name), TB_U("segment", base),
                TB_ERR(sc.hdr_rc ? sc.hdr_rc : TB_ECORRUPT), TB_U("valid_bytes", sc.valid_end),
                TB_U("bytes", sc.size));
        return 1;
    }
    return 0;
}

/* Re-dirties [from, to) of fd by reading it and writing it back, so the next
 * fdatasync writes it even if a failed one marked those pages clean. */
static int rewrite_range(wal_t *w, int fd, uint64_t from, uint64_t to)
{
    const wal_io_t *io = w->io;
    uint8_t *buf = tb_malloc(1u << 20);
    int rc = 0;
    while (from < to && rc == 0) {
        size_t n = (size_t)TB_MIN((uint64_t)(1u << 20), to - from);
        ssize_t r = wal__pread_full(io, fd, buf, n, from);
        if (r < 0 || (size_t)r != n)
            rc = r < 0 ? (int)r : -EIO;
        else
            rc = wal__pwrite_counted(w, WAL_CAUSE_REPAIR, fd, buf, n, from);
        from += n;
    }
    free(buf);
    return rc;
}

typedef struct {
    int fd;
    wal_scan_t sc;
    bool ok;              /* a usable active segment */
    uint64_t next_bound;  /* offsets below this may have been used */
} active_t;

static int recover_active(wal_topic_t *t, uint64_t base, wal_seg_t *s, active_t *a)
{
    const wal_io_t *io = t->w->io;
    char *path = wal__seg_path(t, base, NULL);
    a->fd = io->open(io->ctx, path, O_RDWR, 0);
    free(path);
    if (a->fd < 0)
        return a->fd;
    int rc = wal__seg_scan(io, a->fd, base, &a->sc, NULL, NULL);
    if (rc < 0)
        goto fail;
    s->base = base;
    s->bytes = a->sc.size;
    s->created_ms = a->sc.hdr.created_ms;
    s->end = a->sc.next; /* used once it is sealed (below, when offsets do not continue in it) */
    if (a->sc.hdr_rc != 0) {
        a->next_bound = base + (a->sc.size > WAL_SEG_HDR_SIZE ? (a->sc.size - WAL_SEG_HDR_SIZE) / WAL_REC_HEAD + 1 : 0);
        tb_error("wal: active segment has a bad header; quarantined, its records are lost (count unknown)",
                 TB_S("topic", t->name), TB_U("segment", base), TB_ERR(a->sc.hdr_rc),
                 TB_U("bytes", a->sc.size), TB_U("next_offset_at_least", a->next_bound));
        io->close(io->ctx, a->fd);
        a->fd = -1;
        return 0;
    }
    if (t->rewrite_unsynced && t->spos < a->sc.valid_end &&
        (rc = rewrite_range(t->w, a->fd, t->spos, a->sc.valid_end)) < 0)
        goto fail;
    if (a->sc.valid_end < a->sc.size) {
        if ((rc = io->ftruncate(io->ctx, a->fd, (off_t)a->sc.valid_end)) < 0)
            goto fail;
        tb_warn("wal: cut torn tail", TB_S("topic", t->name), TB_U("segment", base),
                TB_U("bytes", a->sc.size - a->sc.valid_end), TB_U("records", a->sc.count));
        s->bytes = a->sc.valid_end;
    }
    if ((rc = wal__fdatasync(t->w, a->fd, WAL_CAUSE_REPAIR)) < 0)
        goto fail;
    a->ok = true;
    a->next_bound = a->sc.next;
    return 0;
fail:
    io->close(io->ctx, a->fd);
    a->fd = -1;
    return rc;
}

int wal__topic_recover(wal_topic_t *t)
{
    wal_t *w = t->w;
    const wal_io_t *io = w->io;
    uint64_t prev_next = t->next;
    bool repairing = t->nsegs > 0 || t->fd >= 0;
    if (t->fd >= 0) {
        io->close(io->ctx, t->fd);
        t->fd = -1;
    }

    wal_meta_t m;
    int rc = wal__meta_read(io, t->dir, &m, NULL);
    if (rc == -ENOENT) {
        memset(&m, 0, sizeof m);
    } else if (rc < 0) {
        tb_error("wal: topic meta unreadable; using what is known (counters may restart)",
                 TB_S("topic", t->name), TB_ERR(rc));
        m = t->meta;
    }
    if (repairing)
        m = t->meta; /* what this process persisted last is authoritative */
    if (m.floor == 0)
        m.floor = 1;
    wal_meta_t m0 = m;
    uint64_t ck = TB_MAX(atomic_load(&t->ck_req), m.checkpoint);
    if (!repairing) /* a repair keeps the live slots and their minimum */
        wal__slots_load(t, &m); /* the outputs' slots; ck_req is their minimum (cursor.c) */
    t->meta = m;

    u64vec_t bases = { 0 };
    if ((rc = list_dir(t, &bases)) < 0)
        goto out;

    /* 2: finish interrupted deletions (never the newest) */
    size_t first = 0;
    while (first + 1 < bases.n && bases.v[first + 1] <= m.floor) {
        char *p = wal__seg_path(t, bases.v[first], NULL);
        io->unlink(io->ctx, p);
        free(p);
        first++;
    }

    size_t cap = bases.n - first + 1;
    wal_seg_t *segs = tb_calloc(cap, sizeof *segs);
    size_t nsegs = 0;
    active_t a = { .fd = -1 };
    uint64_t newest_base = bases.n ? bases.v[bases.n - 1] : 0;

    /* 3: sealed segments */
    for (size_t i = first; i + 1 < bases.n; i++) {
        wal_seg_t s;
        rc = check_sealed(t, bases.v[i], &s);
        if (rc < 0)
            goto out_segs;
        if (rc == 1)
            rc = wal__quarantine_file(t, bases.v[i], bases.v[i + 1], bases.v[i], &m);
        else
            segs[nsegs++] = s;
        if (rc < 0)
            goto out_segs;
        rc = 0;
    }

    /* 4: the active segment */
    if (bases.n > first) {
        wal_seg_t s;
        rc = recover_active(t, newest_base, &s, &a);
        if (rc < 0)
            goto out_segs;
        if (a.ok) {
            segs[nsegs++] = s;
        } else {
            /* the number of its records is unknown: nothing counted as dropped */
            if ((rc = wal__quarantine_file(t, newest_base, newest_base, newest_base, &m)) < 0)
                goto out_segs;
        }
    }

    /* 5: where offsets continue: past the log, and past every offset the
     * reservation covers (they may have been handed out from memory) */
    uint64_t disk_next = TB_MAX(TB_MAX(m.floor, ck + 1), TB_MAX(newest_base, a.next_bound));
    for (size_t i = 0; i < m.nslots; i++) /* no output's checkpoint names an offset to come */
        disk_next = TB_MAX(disk_next, m.slots[i].checkpoint + 1);
    uint64_t next = TB_MAX(disk_next, m.reserved);
    if (repairing && w->o.fsync != WAL_FSYNC_ALWAYS && t->rewrite_unsynced && disk_next < prev_next) {
        /* acknowledged after write(2), then lost to a failed fdatasync */
        m.lost += prev_next - disk_next;
        tb_error("wal: acknowledged messages lost to an fdatasync failure", TB_S("topic", t->name),
                 TB_U("first_offset", disk_next), TB_U("count", prev_next - disk_next));
    }
    if (next > disk_next && !repairing) {
        /* [disk_next, next) holds no record. With nothing on disk above the
         * checkpoint there is nothing to replicate before it either: the
         * checkpoint moves over it (in memory; the next checkpoint write
         * persists it), so readers start past it and the lag is not a span.
         * Behind a backlog it stays a hole until the checkpoint passes it. */
        bool trailing = disk_next == ck + 1;
        if (trailing) {
            wal__slots_raise(t, ck, next - 1); /* every slot at the end of the log moves over it */
            ck = next - 1;
        } else {
            atomic_store(&t->hole_from, disk_next);
            atomic_store(&t->hole_to, next);
        }
        tb_info("wal: offsets continue past the reservation", TB_S("topic", t->name),
                TB_U("log_next_offset", disk_next), TB_U("next_offset", next),
                TB_S("hole", trailing ? "acknowledged" : "behind a backlog"), TB_U("checkpoint", ck));
    }
    if (repairing && w->o.fsync != WAL_FSYNC_ALWAYS)
        next = TB_MAX(next, prev_next); /* they may have been read: never reuse */
    /* a segment is written in one format version: an older active one is
     * sealed here (recover_active synced it whole) and a new one started */
    bool old_version = a.ok && a.sc.hdr.version < WAL_FORMAT_VERSION;
    if (old_version)
        tb_info("wal: sealing a segment of an older format; new records go to a new segment",
                TB_S("topic", t->name), TB_U("segment", newest_base), TB_U("version", a.sc.hdr.version),
                TB_U("records", a.sc.count));
    if (a.ok && (next != a.sc.next || old_version)) {
        if (a.sc.count == 0) {
            /* empty: remove it; under the same name the new segment's rename replaces it */
            if (next != newest_base) {
                char *p = wal__seg_path(t, newest_base, NULL);
                io->unlink(io->ctx, p);
                free(p);
            }
            nsegs--;
        }
        io->close(io->ctx, a.fd);
        a.ok = false;
        a.fd = -1;
    }
    if (!a.ok) {
        wal_seghdr_t h;
        int fd = wal__seg_create(t, next, &h);
        if (fd < 0) {
            rc = fd;
            goto out_segs;
        }
        a.fd = fd;
        a.sc.hdr = h;
        a.sc.valid_end = WAL_SEG_HDR_SIZE;
        segs[nsegs++] = (wal_seg_t){ .base = next, .bytes = WAL_SEG_HDR_SIZE, .created_ms = h.created_ms };
    }

    if (memcmp(&m, &m0, sizeof m) != 0 && (rc = wal__meta_write(t, &m, WAL_CAUSE_REPAIR)) < 0) {
        io->close(io->ctx, a.fd);
        goto out_segs;
    }

    /* commit the new state */
    uint64_t bytes = 0;
    for (size_t i = 0; i < nsegs; i++)
        bytes += segs[i].bytes;
    pthread_mutex_lock(&t->mu);
    free(t->segs);
    t->segs = segs;
    t->nsegs = nsegs;
    t->segs_cap = cap;
    pthread_mutex_unlock(&t->mu);
    segs = NULL;
    wal__topic_bytes_set(t, bytes);
    t->fd = a.fd;
    t->wpos = t->spos = a.sc.valid_end;
    t->seed = a.sc.hdr.seed;
    t->next = t->synced_next = t->seg_next = next;
    atomic_fetch_add_explicit(&t->cut_gen, 1, memory_order_release);
    t->dirty = false;
    t->needs_repair = false;
    t->rewrite_unsynced = false;
    t->meta = m;
    atomic_store(&t->dropped, m.dropped);
    atomic_store(&t->lost, m.lost);
    atomic_store(&t->quarantined, m.quarantined);
    wal__atomic_max(&t->dropped_age, m.dropped_age); /* a repair keeps what was added, like ck_req */
    atomic_store(&t->reserved, m.reserved);
    atomic_store(&t->next_pub, next);
    atomic_store(&t->log_next, next);
    wal__publish_end(t, next);
    pthread_mutex_lock(&t->acct_mu);
    if (t->open_next == 0)
        t->open_next = next; /* the first recovery of this process: where its writes start */
    pthread_mutex_unlock(&t->acct_mu);
    rc = 0;
out_segs:
    free(segs);
out:
    free(bases.v);
    return rc;
}
