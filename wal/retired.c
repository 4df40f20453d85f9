/*
 * retired.c: retiring a topic (wal.h RETIRING A TOPIC; the file's format is
 * wal_format.h RETIRED FILE; docs/design/RELOAD.md 4).
 *
 * A topic nothing routes to any more holds disk space and, with it, a place
 * in the total bound, until someone removes it. Removing a directory alone
 * would lose two things the cluster and the operator rely on: where the
 * topic's offsets stood (the cluster skips offsets at or below the highest
 * it stored, so a topic re-created at offset 1 would be silently dropped
 * there) and its counters. The RETIRED file keeps both, one entry per name.
 *
 * The order of every step, and what a kill leaves (the design's 4.3):
 *   1. (writer) drained? (wal.h) else TB_EBUSY; KEEP stops here.
 *   2. (writer) the entry appended, RETIRED replaced (write_atomic).
 *   3. (writer) the topic's fd closed, its files unlinked, its directory
 *      fsync()ed (the unlinks durable), rmdir'd, the log's directory
 *      fsync()ed; its bytes leave the totals; the handle moves to w->gone.
 * Killed before 2: the topic is as it was. After 2: wal_open finds a
 * directory with an entry and a meta floor below the entry's next (or no
 * meta) and finishes 3 (wal__retired_recover). Re-creation (4.4) writes the
 * new directory's meta (floor = next) before it drops the entry, so the
 * same rule tells a re-created directory apart and drops the stale entry.
 */
#include "wal/wal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the format ------------------------------------------------------------ */

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const wal_retired_t *)a)->name, ((const wal_retired_t *)b)->name);
}

static int cmp_entry_ptr(const void *a, const void *b)
{
    return cmp_entry(*(const wal_retired_t *const *)a, *(const wal_retired_t *const *)b);
}

size_t wal__retired_encode(const wal_retired_t *v, size_t n, uint8_t **buf)
{
    const wal_retired_t **order = tb_malloc((n ? n : 1) * sizeof *order);
    size_t size = WAL_RETIRED_HEAD;
    for (size_t i = 0; i < n; i++) {
        order[i] = &v[i];
        size += WAL_RETIRED_ENTRY + pad8(strlen(v[i].name));
    }
    qsort(order, n, sizeof *order, cmp_entry_ptr);
    uint8_t *b = tb_calloc(1, size);
    memcpy(b, WAL_RETIRED_MAGIC, 4);
    wal__st16(b + 4, WAL_RETIRED_VERSION);
    wal__st32(b + 8, (uint32_t)n);
    size_t pos = WAL_RETIRED_HEAD;
    for (size_t i = 0; i < n; i++) {
        const wal_retired_t *e = order[i];
        size_t len = strlen(e->name);
        uint8_t *p = b + pos;
        wal__st16(p, (uint16_t)len);
        wal__st16(p + 2, e->flags);
        wal__st64(p + 8, e->next);
        wal__st64(p + 16, e->checkpoint);
        wal__st64(p + 24, e->dropped);
        wal__st64(p + 32, e->lost);
        wal__st64(p + 40, e->quarantined);
        wal__st64(p + 48, e->dropped_age);
        wal__st64(p + 56, e->forgotten);
        wal__st64(p + 64, e->removed_ms);
        memcpy(p + WAL_RETIRED_ENTRY, e->name, len);
        pos += WAL_RETIRED_ENTRY + pad8(len);
    }
    wal__st32(b + 12, wal__crc32c(wal__crc32c(0, b, 12), b + WAL_RETIRED_HEAD, size - WAL_RETIRED_HEAD));
    free(order);
    *buf = b;
    return size;
}

void wal_retired_free(wal_retired_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].name);
    free(v);
}

int wal__retired_decode(const uint8_t *in, size_t size, wal_retired_t **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (size < WAL_RETIRED_HEAD || memcmp(in, WAL_RETIRED_MAGIC, 4) != 0)
        return TB_ECORRUPT;
    if (wal__crc32c(wal__crc32c(0, in, 12), in + WAL_RETIRED_HEAD, size - WAL_RETIRED_HEAD) != wal__ld32(in + 12))
        return TB_ECORRUPT;
    if (wal__ld16(in + 4) != WAL_RETIRED_VERSION)
        return TB_EUNSUPPORTED;
    uint32_t count = wal__ld32(in + 8);
    if (count > WAL_RETIRED_MAX_ENTRIES || count > (size - WAL_RETIRED_HEAD) / WAL_RETIRED_ENTRY)
        return TB_ECORRUPT;
    wal_retired_t *v = tb_calloc(count ? count : 1, sizeof *v);
    size_t pos = WAL_RETIRED_HEAD, n = 0;
    int rc = 0;
    for (; n < count; n++) {
        if (size - pos < WAL_RETIRED_ENTRY) {
            rc = TB_ECORRUPT;
            break;
        }
        const uint8_t *p = in + pos;
        size_t len = wal__ld16(p);
        wal_retired_t e = {
            .flags = wal__ld16(p + 2),
            .next = wal__ld64(p + 8),
            .checkpoint = wal__ld64(p + 16),
            .dropped = wal__ld64(p + 24),
            .lost = wal__ld64(p + 32),
            .quarantined = wal__ld64(p + 40),
            .dropped_age = wal__ld64(p + 48),
            .forgotten = wal__ld64(p + 56),
            .removed_ms = wal__ld64(p + 64),
        };
        if (len == 0 || len > WAL_RETIRED_NAME_MAX || size - pos - WAL_RETIRED_ENTRY < pad8(len) ||
            memchr(p + WAL_RETIRED_ENTRY, 0, len) || (e.flags & ~WAL_RETIRED_FORGOTTEN) != 0 || e.next == 0 ||
            e.next > WAL_OFFSET_MAX || e.checkpoint >= e.next ||
            (!(e.flags & WAL_RETIRED_FORGOTTEN) && e.forgotten != 0) || e.forgotten >= e.next) {
            rc = TB_ECORRUPT;
            break;
        }
        e.name = tb_malloc(len + 1);
        memcpy(e.name, p + WAL_RETIRED_ENTRY, len);
        e.name[len] = '\0';
        v[n] = e;
        pos += WAL_RETIRED_ENTRY + pad8(len);
    }
    if (rc == 0 && pos != size)
        rc = TB_ECORRUPT; /* bytes after the last entry */
    if (rc == 0 && n > 1) {
        qsort(v, n, sizeof *v, cmp_entry);
        for (size_t i = 1; i < n && rc == 0; i++)
            if (strcmp(v[i - 1].name, v[i].name) == 0)
                rc = TB_ECORRUPT; /* a name twice */
    }
    if (rc < 0) {
        wal_retired_free(v, n);
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}

/* ---- the table of an open log ----------------------------------------------- */

static char *retired_path(const wal_t *w, const char *suffix)
{
    return tb_asprintf("%s/RETIRED%s", w->dir, suffix);
}

/* Reads RETIRED through io: 0 and the table, -ENOENT, TB_ECORRUPT,
 * TB_EUNSUPPORTED, or -errno. */
static int retired_read(const wal_io_t *io, const char *path, wal_retired_t **v, size_t *n)
{
    *v = NULL;
    *n = 0;
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    if (fd < 0)
        return fd;
    uint64_t size = 0;
    int rc = io->fsize(io->ctx, fd, &size);
    if (rc == 0 && size > WAL_RETIRED_READ_MAX)
        rc = TB_ECORRUPT;
    uint8_t *buf = NULL;
    if (rc == 0) {
        buf = tb_malloc((size_t)size + 1);
        ssize_t got = wal__pread_full(io, fd, buf, (size_t)size, 0);
        if (got < 0)
            rc = (int)got;
        else if ((uint64_t)got != size)
            rc = TB_ECORRUPT;
    }
    io->close(io->ctx, fd);
    if (rc == 0)
        rc = wal__retired_decode(buf, (size_t)size, v, n);
    free(buf);
    return rc;
}

int wal__retired_load(wal_t *w)
{
    char *path = retired_path(w, "");
    int rc = retired_read(w->io, path, &w->ret, &w->nret);
    if (rc == -ENOENT) {
        rc = 0;
    } else if (rc == TB_ECORRUPT || rc == TB_EUNSUPPORTED) {
        /* kept for inspection; the harm is bounded: a retired name re-created
         * from now on starts at offset 1 (the cluster may skip its first
         * records if it still remembers the old ones) */
        char *aside = retired_path(w, ".corrupt");
        int r = w->io->rename(w->io->ctx, path, aside);
        if (r == 0)
            r = wal__fsync_dir(w, WAL_CAUSE_OTHER, w->dir);
        tb_error("wal: RETIRED file is damaged or of a newer version; set aside, taken as empty (a retired "
                 "topic re-created now starts at offset 1)",
                 TB_S("file", path), TB_S("aside", aside), TB_ERR(rc));
        free(aside);
        rc = r;
    }
    free(path);
    return rc;
}

void wal__retired_free_all(wal_t *w)
{
    wal_retired_free(w->ret, w->nret);
    w->ret = NULL;
    w->nret = 0;
    pthread_mutex_destroy(&w->ret_mu);
}

const wal_retired_t *wal__retired_find(wal_t *w, const char *name)
{
    for (size_t i = 0; i < w->nret; i++)
        if (strcmp(w->ret[i].name, name) == 0)
            return &w->ret[i];
    return NULL;
}

/* Writes the table v[0..n) as RETIRED (atomic replace); on success it
 * becomes w's table (the old one freed), else v is freed. */
static int retired_commit(wal_t *w, wal_retired_t *v, size_t n)
{
    uint8_t *buf;
    size_t size = wal__retired_encode(v, n, &buf);
    char *path = retired_path(w, "");
    int rc = wal__write_atomic(w, WAL_CAUSE_OTHER, path, buf, size);
    if (rc < 0) {
        tb_warn("wal: cannot write RETIRED", TB_S("file", path), TB_ERR(rc));
        wal_retired_free(v, n);
    } else {
        if (n > 1)
            qsort(v, n, sizeof *v, cmp_entry);
        pthread_mutex_lock(&w->ret_mu);
        wal_retired_free(w->ret, w->nret);
        w->ret = v;
        w->nret = n;
        pthread_mutex_unlock(&w->ret_mu);
    }
    free(path);
    free(buf);
    return rc;
}

/* A copy of w's table with or without name, plus e if not NULL. */
static wal_retired_t *table_with(wal_t *w, const char *without, const wal_retired_t *e, size_t *n)
{
    wal_retired_t *v = tb_calloc(w->nret + 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < w->nret; i++) {
        if (without && strcmp(w->ret[i].name, without) == 0)
            continue;
        v[k] = w->ret[i];
        v[k++].name = tb_strdup(w->ret[i].name);
    }
    if (e) {
        v[k] = *e;
        v[k++].name = tb_strdup(e->name);
    }
    *n = k;
    return v;
}

int wal__retired_drop(wal_t *w, const char *name)
{
    if (!wal__retired_find(w, name))
        return 0;
    size_t n;
    wal_retired_t *v = table_with(w, name, NULL, &n);
    return retired_commit(w, v, n);
}

int wal_retired_list(wal_t *w, wal_retired_t **out, size_t *n)
{
    pthread_mutex_lock(&w->ret_mu);
    *out = table_with(w, NULL, NULL, n);
    pthread_mutex_unlock(&w->ret_mu);
    return 0;
}

/* ---- removing a directory ----------------------------------------------------- */

/* Unlinks every file in dir, fsyncs it, rmdirs it, fsyncs the log's
 * directory. What is already gone is skipped, so it finishes what an
 * interrupted run left. 0 or the first -errno. */
static int remove_dir(wal_t *w, const char *dir)
{
    const wal_io_t *io = w->io;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = tb_asprintf("%s/%s", dir, e->d_name);
        int r = io->unlink(io->ctx, p);
        if (r < 0 && r != -ENOENT && rc == 0)
            rc = r;
        free(p);
    }
    closedir(d);
    if (rc == 0)
        rc = wal__fsync_dir(w, WAL_CAUSE_OTHER, dir); /* the unlinks are durable before the name goes */
    if (rc == 0) {
        rc = io->rmdir(io->ctx, dir);
        if (rc == -ENOENT)
            rc = 0;
    }
    if (rc == 0)
        rc = wal__fsync_dir(w, WAL_CAUSE_OTHER, w->dir);
    return rc;
}

bool wal__retired_recover(wal_t *w, const char *name, const char *dir)
{
    const wal_retired_t *e = wal__retired_find(w, name);
    if (!e)
        return false;
    wal_meta_t m;
    int rc = wal__meta_read(w->io, dir, &m, NULL);
    uint64_t floor = rc == 0 ? m.floor : 0; /* no meta (or unreadable): the removal had begun */
    if (floor >= e->next) {
        /* re-created (its meta was written before the entry was to go) */
        tb_info("wal: topic re-created before its RETIRED entry was dropped; dropping it now", TB_S("topic", name),
                TB_U("next", e->next));
        if ((rc = wal__retired_drop(w, name)) < 0)
            tb_warn("wal: cannot drop a stale RETIRED entry (tried again at the next open)", TB_S("topic", name),
                    TB_ERR(rc));
        return false;
    }
    rc = remove_dir(w, dir);
    if (rc < 0)
        tb_error("wal: cannot finish removing a retired topic's directory (tried again at the next open)",
                 TB_S("topic", name), TB_S("dir", dir), TB_ERR(rc));
    else
        tb_info("wal: finished removing a retired topic", TB_S("topic", name), TB_U("next", e->next));
    return true;
}

/* ---- re-creation ------------------------------------------------------------- */

int wal__retired_seed(wal_topic_t *t, const wal_retired_t *e)
{
    wal_meta_t m = {
        .floor = e->next,
        .checkpoint = e->next - 1,
        .dropped = e->dropped + e->forgotten, /* forgotten: deleted before the cluster had them */
        .lost = e->lost,
        .quarantined = e->quarantined,
        .dropped_age = e->dropped_age,
    };
    pthread_mutex_lock(&t->acct_mu);
    t->slots[0].ck = e->next - 1; /* the default slot, as the file will say */
    t->slots[0].dropped = m.dropped;
    t->slots[0].dropped_age = m.dropped_age;
    pthread_mutex_unlock(&t->acct_mu);
    return wal__meta_write(t, &m, WAL_CAUSE_OTHER);
}

/* ---- retiring (writer) --------------------------------------------------------- */

static void unregister(wal_t *w, wal_topic_t *t)
{
    pthread_mutex_lock(&w->topics_mu);
    for (size_t i = 0; i < w->ntopics; i++) {
        if (w->topics[i] == t) {
            memmove(&w->topics[i], &w->topics[i + 1], (w->ntopics - i - 1) * sizeof *w->topics);
            w->ntopics--;
            break;
        }
    }
    w->gone = tb_realloc(w->gone, (w->ngone + 1) * sizeof *w->gone);
    w->gone[w->ngone++] = t;
    pthread_mutex_unlock(&w->topics_mu);
}

int wal__retire_apply(wal_t *w, wal_req_t *req)
{
    wal_topic_t *t = req->topic;
    if (atomic_load(&t->retired))
        return TB_ECLOSED;
    if (atomic_load(&t->state) == WAL_TOPIC_FAILED || t->needs_repair)
        return TB_ENOTREADY; /* what is on disk is not known: repair it first */
    if (t->held_head)
        return TB_EBUSY;
    pthread_mutex_lock(&t->mem.mu);
    uint64_t held = t->mem.held_msgs;
    pthread_mutex_unlock(&t->mem.mu);
    if (held)
        return TB_EBUSY;
    uint64_t ck = atomic_load(&t->ck_req);
    uint64_t end = TB_MAX(t->next, atomic_load(&t->mem_end)); /* memory's offsets were handed out too */
    uint64_t backlog = ck + 1 < end ? end - 1 - ck : 0;
    if (backlog && req->how != WAL_RETIRE_FORGET)
        return TB_EBUSY;
    /* every offset handed out (memory's, under the reservation) is below
     * res_used; the reservation itself runs half a span ahead and names no
     * offset anyone saw, so it is not carried over */
    uint64_t next = TB_MAX(TB_MAX(end, ck + 1), atomic_load(&t->res_used));
    wal_retired_t *e = &req->entry;
    *e = (wal_retired_t){
        .name = t->name,
        .flags = backlog ? WAL_RETIRED_FORGOTTEN : 0,
        .next = next,
        .checkpoint = TB_MIN(ck, next - 1),
        .dropped = atomic_load(&t->dropped),
        .lost = atomic_load(&t->lost),
        .quarantined = atomic_load(&t->quarantined),
        .dropped_age = atomic_load(&t->dropped_age),
        .forgotten = backlog,
        .removed_ms = w->io->now_ms(w->io->ctx),
    };
    if (req->how == WAL_RETIRE_KEEP)
        return 0;

    /* the entry first: from here on a kill is finished at the next open */
    size_t n;
    wal_retired_t *v = table_with(w, t->name, e, &n);
    int rc = retired_commit(w, v, n);
    if (rc < 0)
        return rc;

    /* nothing more reaches it: batches after this answer TB_ECLOSED */
    pthread_mutex_lock(&t->mem.mu);
    atomic_store(&t->retired, true);
    pthread_mutex_unlock(&t->mem.mu);
    if (t->fd >= 0) {
        w->io->close(w->io->ctx, t->fd);
        t->fd = -1;
    }
    rc = remove_dir(w, t->dir);
    if (rc < 0)
        tb_error("wal: cannot finish removing a retired topic's directory (finished at the next open)",
                 TB_S("topic", t->name), TB_S("dir", t->dir), TB_ERR(rc));
    pthread_mutex_lock(&t->mu);
    t->nsegs = 0;
    pthread_mutex_unlock(&t->mu);
    wal__topic_bytes_set(t, 0);
    wal__space_soon(w);
    unregister(w, t);
    tb_info("wal: topic retired", TB_S("topic", t->name), TB_U("next", e->next), TB_U("checkpoint", e->checkpoint),
            TB_U("dropped", e->dropped), TB_U("forgotten", e->forgotten));
    return 0;
}

int wal_topic_retire(wal_topic_t *t, wal_retire_t how, wal_retired_t *out)
{
    if ((unsigned)how > WAL_RETIRE_FORGET)
        return TB_EINVALID;
    wal_req_t req = { .item.kind = WAL_ITEM_RETIRE, .topic = t, .how = how };
    int rc = wal__request(t->w, &req);
    if (out)
        *out = rc == 0 ? req.entry : (wal_retired_t){ 0 };
    return rc;
}

/* ---- the lock, and the offline command ------------------------------------------ */

int wal_lock_dir(const char *dir, bool create, int *fd)
{
    *fd = -1;
    char *p = tb_asprintf("%s/LOCK", dir);
    int lfd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    free(p);
    if (lfd < 0)
        return -errno;
    if (flock(lfd, LOCK_EX | LOCK_NB) < 0) {
        int rc = errno == EAGAIN ? -EWOULDBLOCK : -errno;
        close(lfd);
        return rc;
    }
    *fd = lfd;
    return 0;
}

void wal_unlock_dir(int fd)
{
    if (fd >= 0)
        close(fd); /* the flock goes with the last descriptor of its open file */
}

int wal_retire_offline(const char *dir, const char *topic, wal_retire_t how, FILE *report)
{
    if (how != WAL_RETIRE_REMOVE && how != WAL_RETIRE_FORGET)
        return TB_EINVALID;
    struct stat st;
    if (stat(dir, &st) < 0)
        return -errno; /* never create a log to retire from */
    /* asked first so a running gateway is a clean answer, not an open's error
     * lines; wal_open takes the lock again (a gateway starting in between
     * still finds it taken, or takes it first and the open is refused) */
    int lfd;
    int rc = wal_lock_dir(dir, false, &lfd);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    wal_unlock_dir(lfd);
    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = dir;
    wal_t *w;
    rc = wal_open(&o, &w);
    if (rc < 0)
        return rc;
    wal_topic_t *t = wal_topic_find(w, topic);
    if (!t) {
        const wal_retired_t *e = wal__retired_find(w, topic);
        if (report && e)
            fprintf(report, "topic %s was already retired (next offset %" PRIu64 ")\n", topic, e->next);
        wal_close(w);
        return -ENOENT;
    }
    wal_topic_stats_t ts;
    wal_topic_stats(t, &ts);
    wal_retired_t e;
    rc = wal_topic_retire(t, how, &e);
    if (rc == TB_EBUSY && report) {
        uint64_t ck = wal_topic_checkpoint(t);
        fprintf(report,
                "topic %s has %" PRIu64 " unreplicated message(s) (checkpoint %" PRIu64 ", last offset %" PRIu64
                "): not retired\n",
                topic, ts.next_offset - 1 - ck, ck, ts.next_offset - 1);
    } else if (rc == 0 && report) {
        fprintf(report,
                "topic %s %s: %" PRIu64 " byte(s) freed; a topic re-created under this name starts at offset %" PRIu64
                " (checkpoint %" PRIu64 ", dropped %" PRIu64 ", forgotten %" PRIu64 ")\n",
                topic, how == WAL_RETIRE_FORGET ? "forgotten" : "retired", ts.bytes, e.next, e.checkpoint,
                e.dropped, e.forgotten);
    }
    int crc = wal_close(w);
    return rc < 0 ? rc : crc;
}
