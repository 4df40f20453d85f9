/*
 * helper_crashio.c: the crash-injection layer described in helper_crashio.h.
 *
 * Bookkeeping: an fd table (fd -> current path), a list of unsynced data
 * operations (write or truncate, with the bytes they replaced and the bytes
 * they wrote) and a list of unsynced directory operations (rename, unlink).
 * An unlink is done as a rename to a stash name until the directory is
 * synced, so a crash can bring the file back, as a real one can.
 */
#include "helper_crashio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 4096

typedef struct dop {          /* unsynced data operation */
    struct dop *next;
    char *path;
    bool trunc;
    uint64_t off, len;        /* write: region; truncate: new size in len */
    uint8_t *data;            /* write: bytes written */
    uint64_t old_size;
    uint8_t *old;             /* bytes replaced inside the old size */
    uint64_t old_len;
    bool lost;                /* a failed fdatasync "cleaned" it: never durable */
} dop_t;

typedef struct nop {          /* unsynced directory operation */
    struct nop *next;
    char *from, *to;          /* unlink: to is the stash name */
    bool unlink;
} nop_t;

struct crashio {
    wal_io_t io;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *paths[MAX_FD];
    dop_t *dops, **dops_tail;
    nop_t *nops, **nops_tail;
    unsigned rng;
    int syncs, data_syncs, crash_at;
    bool crashed;
    int write_err;
    uint64_t write_allow;
    int sync_err, sync_err_n;
    bool gate, blocked;
    unsigned stash_seq;
    uint64_t fs_total, fs_other;  /* crashio_space: 0 = the real file system */
    int statvfs_err, statvfs_calls;
};

static unsigned rnd(crashio_t *c)
{
    c->rng = c->rng * 1103515245u + 12345u;
    return (c->rng >> 16) & 0x7FFF;
}

static char *dir_of(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    return strdup(dirname(buf));
}

static void retarget(crashio_t *c, const char *from, const char *to)
{
    for (int i = 0; i < MAX_FD; i++)
        if (c->paths[i] && strcmp(c->paths[i], from) == 0) {
            free(c->paths[i]);
            c->paths[i] = strdup(to);
        }
    for (dop_t *d = c->dops; d; d = d->next)
        if (strcmp(d->path, from) == 0) {
            free(d->path);
            d->path = strdup(to);
        }
}

static void dop_free(dop_t *d)
{
    free(d->path);
    free(d->data);
    free(d->old);
    free(d);
}

static void push_dop(crashio_t *c, dop_t *d)
{
    *c->dops_tail = d;
    c->dops_tail = &d->next;
}

/* Does later operation l make d irrelevant (overwrites it whole, or cuts
 * the file below it)? */
static bool covers(const dop_t *l, const dop_t *d)
{
    if (l->trunc)
        return l->len <= d->off;
    return !d->trunc && l->off <= d->off && l->off + l->len >= d->off + d->len;
}

static void unlink_dops(crashio_t *c, bool (*drop)(crashio_t *c, dop_t *d, const char *path), const char *path)
{
    dop_t **pp = &c->dops;
    while (*pp) {
        dop_t *d = *pp;
        if (drop(c, d, path)) {
            *pp = d->next;
            dop_free(d);
        } else {
            pp = &d->next;
        }
    }
    c->dops_tail = &c->dops;
    while (*c->dops_tail)
        c->dops_tail = &(*c->dops_tail)->next;
}

/* A lost write stays lost until something later (being synced now) makes it moot. */
static bool lost_and_covered(crashio_t *c, dop_t *d, const char *path)
{
    if (!d->lost || strcmp(d->path, path) != 0)
        return false;
    for (dop_t *l = d->next; l; l = l->next)
        if (!l->lost && strcmp(l->path, path) == 0 && covers(l, d))
            return true;
    return false;
}

static bool durable_now(crashio_t *c, dop_t *d, const char *path)
{
    return !d->lost && strcmp(d->path, path) == 0;
}

/* Forgets unsynced data operations of path: they are durable now. */
static void synced_path(crashio_t *c, const char *path)
{
    unlink_dops(c, lost_and_covered, path);
    unlink_dops(c, durable_now, path);
}

/* fsyncgate: the kernel marked these pages clean without writing them. */
static void lose_path(crashio_t *c, const char *path)
{
    for (dop_t *d = c->dops; d; d = d->next)
        if (strcmp(d->path, path) == 0)
            d->lost = true;
}

static void synced_dir(crashio_t *c, const char *dir)
{
    nop_t **pp = &c->nops;
    while (*pp) {
        nop_t *n = *pp;
        char *d = dir_of(n->unlink ? n->from : n->to);
        bool match = strcmp(d, dir) == 0;
        free(d);
        if (match) {
            if (n->unlink)
                unlink(n->to);
            *pp = n->next;
            free(n->from);
            free(n->to);
            free(n);
        } else {
            pp = &n->next;
        }
    }
    c->nops_tail = &c->nops;
    while (*c->nops_tail)
        c->nops_tail = &(*c->nops_tail)->next;
}

static void raw_write(const char *path, const void *buf, uint64_t n, uint64_t off)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return;
    if (n && pwrite(fd, buf, n, (off_t)off) < 0) { /* best effort: the disk "lost power" */ }
    close(fd);
}

static void raw_truncate(const char *path, uint64_t len)
{
    if (truncate(path, (off_t)len) < 0) { /* the file may be gone: nothing to restore */ }
}

/* Power loss: back to the synced state, then a random subset of the rest. */
static void do_crash(crashio_t *c)
{
    c->crashed = true;
    size_t n = 0;
    for (dop_t *d = c->dops; d; d = d->next)
        n++;
    dop_t **v = calloc(n ? n : 1, sizeof *v);
    n = 0;
    for (dop_t *d = c->dops; d; d = d->next)
        v[n++] = d;
    for (size_t i = n; i-- > 0;) {
        dop_t *d = v[i];
        raw_truncate(d->path, d->old_size);
        if (d->old_len)
            raw_write(d->path, d->old, d->old_len, d->trunc ? d->len : d->off);
    }
    for (size_t i = 0; i < n; i++) {
        dop_t *d = v[i];
        unsigned choice = d->lost ? 0 : rnd(c) % 4;
        if (d->trunc) {
            if (choice != 0)
                raw_truncate(d->path, d->len);
            continue;
        }
        if (choice == 0)
            continue; /* lost */
        uint64_t len = d->len;
        if (choice == 2)
            len = len ? rnd(c) % len : 0; /* torn */
        uint8_t *buf = malloc(len ? len : 1);
        memcpy(buf, d->data, len);
        if (choice == 3)
            for (uint64_t k = 0; k < len; k++)
                buf[k] = (uint8_t)rnd(c); /* garbage where the blocks were allocated */
        raw_write(d->path, buf, len, d->off);
        free(buf);
    }
    for (size_t i = 0; i < n; i++)
        dop_free(v[i]);
    free(v);
    c->dops = NULL;
    c->dops_tail = &c->dops;

    /* directory operations, newest first, each kept or undone */
    size_t m = 0;
    for (nop_t *o = c->nops; o; o = o->next)
        m++;
    nop_t **u = calloc(m ? m : 1, sizeof *u);
    m = 0;
    for (nop_t *o = c->nops; o; o = o->next)
        u[m++] = o;
    for (size_t i = m; i-- > 0;) {
        nop_t *o = u[i];
        bool undo = rnd(c) % 2;
        if (undo)
            rename(o->to, o->from);
        else if (o->unlink)
            unlink(o->to);
        free(o->from);
        free(o->to);
        free(o);
    }
    free(u);
    c->nops = NULL;
    c->nops_tail = &c->nops;
}

/* Counts a sync; returns -EIO if this one is the crash. Called locked. */
static int count_sync(crashio_t *c)
{
    c->syncs++;
    if (c->crash_at > 0 && c->syncs == c->crash_at) {
        do_crash(c);
        return -EIO;
    }
    return 0;
}

/* ---- the vtable ---------------------------------------------------------- */

static int cx_open(void *ctx, const char *path, int flags, mode_t mode)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc;
    if (c->crashed && (flags & (O_CREAT | O_WRONLY | O_RDWR))) {
        rc = -EIO;
    } else {
        rc = open(path, flags | O_CLOEXEC, mode);
        if (rc < 0)
            rc = -errno;
        else if (rc < MAX_FD)
            c->paths[rc] = strdup(path);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_close(void *ctx, int fd)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    if (fd >= 0 && fd < MAX_FD) {
        free(c->paths[fd]);
        c->paths[fd] = NULL;
    }
    close(fd);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static ssize_t cx_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    ssize_t r = pread(fd, buf, n, off);
    return r < 0 ? -errno : r;
}

static uint64_t fsize_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static ssize_t cx_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    ssize_t rc;
    if (c->crashed) {
        rc = -EIO;
        goto out;
    }
    if (c->write_err) {
        if (c->write_allow == 0) {
            rc = c->write_err;
            goto out;
        }
        if (n > c->write_allow)
            n = (size_t)c->write_allow;
        c->write_allow -= n;
    }
    dop_t *d = calloc(1, sizeof *d);
    d->path = strdup(fd < MAX_FD && c->paths[fd] ? c->paths[fd] : "?");
    d->off = (uint64_t)off;
    d->len = n;
    d->data = malloc(n ? n : 1);
    memcpy(d->data, buf, n);
    d->old_size = fsize_of(fd);
    if ((uint64_t)off < d->old_size) {
        d->old_len = TB_MIN((uint64_t)n, d->old_size - (uint64_t)off);
        d->old = malloc(d->old_len);
        if (pread(fd, d->old, d->old_len, off) != (ssize_t)d->old_len)
            d->old_len = 0;
    }
    push_dop(c, d);
    rc = pwrite(fd, buf, n, off);
    if (rc < 0)
        rc = -errno;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_ftruncate(void *ctx, int fd, off_t len)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = -EIO;
    if (!c->crashed) {
        dop_t *d = calloc(1, sizeof *d);
        d->path = strdup(fd < MAX_FD && c->paths[fd] ? c->paths[fd] : "?");
        d->trunc = true;
        d->len = (uint64_t)len;
        d->old_size = fsize_of(fd);
        if (d->old_size > (uint64_t)len) {
            d->old_len = d->old_size - (uint64_t)len;
            d->old = malloc(d->old_len);
            if (pread(fd, d->old, d->old_len, len) != (ssize_t)d->old_len)
                d->old_len = 0;
        }
        push_dop(c, d);
        rc = ftruncate(fd, len) < 0 ? -errno : 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_fdatasync(void *ctx, int fd)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = -EIO;
    while (c->gate && !c->crashed) {
        c->blocked = true;
        pthread_cond_broadcast(&c->cv);
        pthread_cond_wait(&c->cv, &c->mu);
    }
    c->blocked = false;
    if (c->crashed)
        goto out;
    c->data_syncs++;
    if ((rc = count_sync(c)) < 0)
        goto out;
    if (c->sync_err_n > 0) {
        c->sync_err_n--;
        rc = c->sync_err;
        if (fd < MAX_FD && c->paths[fd])
            lose_path(c, c->paths[fd]);
        goto out;
    }
    if (fd < MAX_FD && c->paths[fd])
        synced_path(c, c->paths[fd]);
    rc = 0;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_fsize(void *ctx, int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size = (uint64_t)st.st_size;
    return 0;
}

static int cx_rename(void *ctx, const char *from, const char *to)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = -EIO;
    if (!c->crashed && (rc = rename(from, to) < 0 ? -errno : 0) == 0) {
        retarget(c, from, to);
        nop_t *o = calloc(1, sizeof *o);
        o->from = strdup(from);
        o->to = strdup(to);
        *c->nops_tail = o;
        c->nops_tail = &o->next;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_unlink(void *ctx, const char *path)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = -EIO;
    if (!c->crashed) {
        char *stash = NULL;
        if (asprintf(&stash, "%s.crashio-%u", path, c->stash_seq++) < 0)
            abort();
        rc = rename(path, stash) < 0 ? -errno : 0;
        if (rc == 0) {
            retarget(c, path, stash);
            nop_t *o = calloc(1, sizeof *o);
            o->from = strdup(path);
            o->to = stash;
            o->unlink = true;
            *c->nops_tail = o;
            c->nops_tail = &o->next;
        } else {
            free(stash);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_mkdir(void *ctx, const char *path, mode_t mode)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    /* a new directory needs a block: it fails like a write on a full disk */
    int rc = c->crashed ? -EIO : c->write_err && c->write_allow == 0 ? c->write_err
                                : (mkdir(path, mode) < 0 ? -errno : 0);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_rmdir(void *ctx, const char *path)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    /* like mkdir: applied at once (the tests' power losses keep or lose the
     * files inside, which the directory fsync before it made durable) */
    int rc = c->crashed ? -EIO : (rmdir(path) < 0 ? -errno : 0);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_fsync_dir(void *ctx, const char *path)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = c->crashed ? -EIO : count_sync(c);
    if (rc == 0)
        synced_dir(c, path);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_write_atomic(void *ctx, const char *path, const void *data, size_t len)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = -EIO;
    if (c->crashed)
        goto out;
    bool crash_now = c->crash_at > 0 && c->syncs + 1 == c->crash_at;
    /* atomic: at a crash it either happened or it did not */
    bool apply = !crash_now || rnd(c) % 2;
    if (apply) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(data, 1, len, f) != len) {
            if (f)
                fclose(f);
            rc = -EIO;
            goto out;
        }
        fclose(f);
        rename(tmp, path);
    }
    rc = count_sync(c);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int cx_random(void *ctx, void *buf, size_t n)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = (uint8_t)rnd(c);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static uint64_t cx_now_ms(void *ctx)
{
    return tb_wall_ms();
}

/* Bytes of the regular files under path (three levels: the WAL's root, its
 * topic directories, their files), stashed unlinks left out. */
static uint64_t du(const char *path, int depth)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strstr(e->d_name, ".crashio-"))
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
        else if (S_ISDIR(st.st_mode) && depth < 3)
            sum += du(p, depth + 1);
    }
    closedir(d);
    return sum;
}

static uint64_t fake_free(crashio_t *c, const char *path)
{
    uint64_t used = c->fs_other + du(path, 1);
    return used < c->fs_total ? c->fs_total - used : 0;
}

static int cx_statvfs(void *ctx, const char *path, uint64_t *avail, uint64_t *total)
{
    crashio_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->statvfs_calls++;
    int rc = c->statvfs_err;
    uint64_t ft = c->fs_total;
    if (rc == 0 && ft) {
        *avail = fake_free(c, path);
        *total = ft;
    }
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && !ft)
        rc = wal_io_posix()->statvfs(NULL, path, avail, total);
    return rc;
}

crashio_t *crashio_new(unsigned seed)
{
    crashio_t *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->dops_tail = &c->dops;
    c->nops_tail = &c->nops;
    c->rng = seed;
    c->io = (wal_io_t){
        .ctx = c, .open = cx_open, .close = cx_close, .pread = cx_pread, .pwrite = cx_pwrite,
        .fdatasync = cx_fdatasync, .ftruncate = cx_ftruncate, .fsize = cx_fsize, .rename = cx_rename,
        .unlink = cx_unlink, .mkdir = cx_mkdir, .fsync_dir = cx_fsync_dir, .write_atomic = cx_write_atomic,
        .random = cx_random, .now_ms = cx_now_ms, .statvfs = cx_statvfs, .rmdir = cx_rmdir,
    };
    return c;
}

void crashio_free(crashio_t *c)
{
    if (!c)
        return;
    while (c->dops) {
        dop_t *d = c->dops;
        c->dops = d->next;
        dop_free(d);
    }
    while (c->nops) {
        nop_t *o = c->nops;
        c->nops = o->next;
        if (o->unlink)
            unlink(o->to); /* not a crash: the unlink stands */
        free(o->from);
        free(o->to);
        free(o);
    }
    for (int i = 0; i < MAX_FD; i++)
        free(c->paths[i]);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

const wal_io_t *crashio_io(crashio_t *c) { return &c->io; }

void crashio_crash_at_sync(crashio_t *c, int n)
{
    pthread_mutex_lock(&c->mu);
    c->crash_at = n > 0 ? c->syncs + n : 0;
    pthread_mutex_unlock(&c->mu);
}

bool crashio_crashed(crashio_t *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->crashed;
    pthread_mutex_unlock(&c->mu);
    return r;
}

int crashio_syncs(crashio_t *c)
{
    pthread_mutex_lock(&c->mu);
    int r = c->syncs;
    pthread_mutex_unlock(&c->mu);
    return r;
}

int crashio_data_syncs(crashio_t *c)
{
    pthread_mutex_lock(&c->mu);
    int r = c->data_syncs;
    pthread_mutex_unlock(&c->mu);
    return r;
}

uint64_t crashio_pending_bytes(crashio_t *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = 0;
    for (dop_t *d = c->dops; d; d = d->next)
        if (!d->trunc)
            n += d->len;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void crashio_fail_writes(crashio_t *c, int err, uint64_t allow)
{
    pthread_mutex_lock(&c->mu);
    c->write_err = err;
    c->write_allow = allow;
    pthread_mutex_unlock(&c->mu);
}

void crashio_fail_syncs(crashio_t *c, int err, int n)
{
    pthread_mutex_lock(&c->mu);
    c->sync_err = err;
    c->sync_err_n = n;
    pthread_mutex_unlock(&c->mu);
}

void crashio_space(crashio_t *c, uint64_t total, uint64_t other)
{
    pthread_mutex_lock(&c->mu);
    c->fs_total = total;
    c->fs_other = other;
    pthread_mutex_unlock(&c->mu);
}

void crashio_statvfs_error(crashio_t *c, int err)
{
    pthread_mutex_lock(&c->mu);
    c->statvfs_err = err;
    pthread_mutex_unlock(&c->mu);
}

int crashio_statvfs_calls(crashio_t *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->statvfs_calls;
    pthread_mutex_unlock(&c->mu);
    return n;
}

uint64_t crashio_space_free(crashio_t *c, const char *dir)
{
    pthread_mutex_lock(&c->mu);
    uint64_t f = fake_free(c, dir);
    pthread_mutex_unlock(&c->mu);
    return f;
}

void crashio_gate(crashio_t *c, bool closed)
{
    pthread_mutex_lock(&c->mu);
    c->gate = closed;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

bool crashio_wait_blocked(crashio_t *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (!c->blocked && rc == 0)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool r = c->blocked;
    pthread_mutex_unlock(&c->mu);
    return r;
}
