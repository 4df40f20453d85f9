/*
 * wal.c: the WAL's lifetime: options, open (lock, recover every topic,
 * start the writer), the requests the loop waits on (topic open, sync
 * barrier, own bound) and close (drain, sync, persist, join, free).
 *
 * wal_open recovers every topic directory it finds, not only configured
 * ones: a topic dropped from the configuration still holds disk space, and
 * the total bound must see it.
 */
#include "wal/wal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void wal_opts_default(wal_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->segment_bytes = 16u << 20;
    o->max_topic_bytes = 1ull << 30;
    o->max_total_bytes = 4ull << 30;
    o->fsync = WAL_FSYNC_ALWAYS;
    o->overflow = WAL_OVERFLOW_DROP_OLDEST;
    o->fsync_interval_ms = 1000;
    o->min_free_bytes = 0;
    o->min_free_permille = 20; /* 2% of the file system */
    o->space_check_ms = 1000;
    o->retry_ms = 1000;
    o->checkpoint_flush_ms = 5000;
    o->reserve_span = WAL_RESERVE_SPAN_DEFAULT;
}

int wal_fsync_parse(const char *s, wal_fsync_t *out)
{
    static const char *const names[] = { "always", "interval", "never" };
    for (int i = 0; i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (wal_fsync_t)i;
            return 0;
        }
    }
    return TB_ECONFIG;
}

const char *wal_fsync_name(wal_fsync_t m)
{
    switch (m) {
    case WAL_FSYNC_ALWAYS: return "always";
    case WAL_FSYNC_INTERVAL: return "interval";
    case WAL_FSYNC_NEVER: return "never";
    }
    return "?";
}

static int check_opts(const wal_opts_t *o)
{
    const char *why = NULL;
    if (!o->dir || !*o->dir)
        why = "wal.dir is empty";
    else if (o->segment_bytes < 4096 || o->segment_bytes > (1ull << 32))
        why = "wal.segment_bytes must be 4 KiB .. 4 GiB";
    else if (o->max_topic_bytes < 2 * o->segment_bytes)
        why = "wal.max_topic_bytes must be at least 2 * wal.segment_bytes";
    else if (o->max_total_bytes < 2 * o->segment_bytes)
        why = "wal.max_total_bytes must be at least 2 * wal.segment_bytes";
    else if ((unsigned)o->fsync > WAL_FSYNC_NEVER)
        why = "wal.fsync must be always, interval or never";
    else if ((unsigned)o->overflow >= WAL_OVERFLOW__COUNT)
        why = "overflow is not a wal_overflow_t policy";
    else if (o->fsync == WAL_FSYNC_INTERVAL && o->fsync_interval_ms == 0)
        why = "wal.fsync_interval_ms must be > 0";
    else if (o->min_free_permille > 500)
        why = "wal.min_free_bytes as a percentage must be 0% .. 50%";
    else if (o->space_check_ms == 0)
        why = "space_check_ms must be > 0";
    else if (o->pad_align > WAL_PAD_MAX || (o->pad_align & (o->pad_align - 1)) != 0)
        why = "pad_align must be 0, or a power of two up to 64 KiB";
    else if (o->reserve_span < 2 || o->reserve_span > (1ull << 40))
        why = "reserve_span must be 2 .. 2^40";
    if (why) {
        tb_error("wal: bad configuration", TB_S("reason", why));
        return TB_ECONFIG;
    }
    return 0;
}

static int lock_dir(wal_t *w)
{
    int rc = wal_lock_dir(w->dir, true, &w->lock_fd);
    if (rc < 0)
        tb_error("wal: directory is in use by another process", TB_S("dir", w->dir), TB_ERR(rc));
    return rc;
}

/* Recovers every topic directory under w->dir (before the writer starts). */
static int open_topics(wal_t *w)
{
    DIR *d = opendir(w->dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *name = wal__topic_decode(e->d_name);
        if (!name)
            continue;
        char *dir = tb_asprintf("%s/%s", w->dir, e->d_name);
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && !wal__retired_recover(w, name, dir)) {
            wal_topic_t *t = wal__topic_new(w, name, dir);
            int rc = wal__topic_recover(t);
            if (rc < 0) {
                /* I/O trouble, not bad data: keep the topic, let the writer retry */
                tb_error("wal: topic recovery failed; will retry", TB_S("topic", name), TB_ERR(rc));
                t->needs_repair = true;
                wal__topic_set_failed(t, rc);
            } else if (t->fd >= 0 && (rc = wal__probe_space(t)) < 0) {
                /* recovery writes nothing: without a probe a topic would
                 * say OK on a full disk until its first batch failed */
                tb_error("wal: topic not writable at open; will retry", TB_S("topic", name), TB_ERR(rc));
                wal__topic_set_failed(t, rc);
            }
            wal__topic_register(w, t);
        }
        free(dir);
        free(name);
    }
    closedir(d);
    return 0;
}

static void free_wal(wal_t *w)
{
    wal_batch_t *b = wal_take_done(w);
    while (b) {
        wal_batch_t *next = wal_batch_next(b);
        wal_batch_free(b);
        b = next;
    }
    for (size_t i = 0; i < w->ntopics; i++)
        wal__topic_free(w->topics[i]);
    free(w->topics);
    for (size_t i = 0; i < w->ngone; i++)
        wal__topic_free(w->gone[i]);
    free(w->gone);
    wal__retired_free_all(w);
    if (w->lock_fd >= 0)
        close(w->lock_fd);
    tb_mbox_destroy(&w->done);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->req_cond);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->topics_mu);
    pthread_mutex_destroy(&w->sp_rl.mu);
    pthread_mutex_destroy(&w->sp_err_rl.mu);
    free(w->pad_buf);
    wal__outputs_free(w);
    free(w->dir);
    free(w);
}

int wal_open(const wal_opts_t *opts, wal_t **out)
{
    *out = NULL;
    int rc = check_opts(opts);
    if (rc < 0)
        return rc;
    wal_t *w = tb_calloc(1, sizeof *w);
    w->o = *opts;
    w->dir = tb_strdup(opts->dir);
    w->o.dir = w->dir;
    w->io = opts->io ? opts->io : wal_io_posix();
    w->lock_fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->topics_mu, NULL);
    pthread_mutex_init(&w->ret_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->req_cond, NULL);
    tb_mbox_init(&w->done, opts->notify, opts->notify_arg);
    w->last_interval_sync_ms = tb_mono_ms();
    w->sp_rl = (tb_ratelimit_t)TB_RATELIMIT_INIT(60000);
    pthread_mutex_init(&w->sp_rl.mu, NULL);
    w->sp_err_rl = (tb_ratelimit_t)TB_RATELIMIT_INIT(60000);
    pthread_mutex_init(&w->sp_err_rl.mu, NULL);

    if ((rc = tb_mkdir_p(w->dir, 0755)) < 0 || (rc = lock_dir(w)) < 0 || (rc = wal__outputs_load(w)) < 0 ||
        (rc = wal__retired_load(w)) < 0 || (rc = open_topics(w)) < 0)
        goto fail;
    wal__space_refresh(w); /* after recovery: the reading includes what the log holds */
    w->pad_align = opts->pad_align ? opts->pad_align : wal__pad_align(w->dir);
    if (w->pad_align > 1)
        w->pad_buf = tb_malloc(w->pad_align);
    if ((rc = -pthread_create(&w->thread, NULL, wal__writer_main, w)) < 0)
        goto fail;
    w->thread_started = true;
    wal_space_t sp;
    wal_space(w, &sp);
    tb_info("wal: open", TB_S("dir", w->dir), TB_U("topics", w->ntopics), TB_S("fsync", wal_fsync_name(w->o.fsync)),
            TB_U("total_bytes", w->total_bytes), TB_S("crc32c", wal__crc32c_impl()),
            TB_U("pad_align", w->o.fsync == WAL_FSYNC_ALWAYS ? w->pad_align : 1), TB_B("free_known", sp.known),
            TB_U("free_bytes", sp.free_bytes), TB_U("min_free_bytes", sp.min_free_bytes));
    *out = w;
    return 0;
fail:
    tb_error("wal: cannot open", TB_S("dir", w->dir), TB_ERR(rc));
    free_wal(w);
    return rc;
}

int wal_close(wal_t *w)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
    if (w->thread_started)
        pthread_join(w->thread, NULL);
    int rc = w->close_rc;
    free_wal(w);
    return rc;
}

/* Queues req and waits until the writer marks it done. */
int wal__request(wal_t *w, wal_req_t *req)
{
    int rc = wal__enqueue(w, &req->item);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&w->mu);
    while (!req->done)
        pthread_cond_wait(&w->req_cond, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return req->rc;
}

int wal_sync(wal_t *w)
{
    wal_req_t req = { .item.kind = WAL_ITEM_SYNC };
    return wal__request(w, &req);
}

wal_topic_t *wal_topic_find(wal_t *w, const char *name)
{
    wal_topic_t *found = NULL;
    pthread_mutex_lock(&w->topics_mu);
    size_t lo = 0, hi = w->ntopics;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(w->topics[mid]->name, name);
        if (c == 0) {
            found = w->topics[mid];
            break;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    pthread_mutex_unlock(&w->topics_mu);
    return found;
}

int wal_topic_open(wal_t *w, const char *name, wal_topic_t **out)
{
    *out = wal_topic_find(w, name);
    if (*out)
        return 0;
    char *enc = wal__topic_encode(name);
    if (!enc)
        return TB_EINVALID;
    free(enc);
    wal_req_t req = { .item.kind = WAL_ITEM_OPEN, .name = name };
    int rc = wal__request(w, &req);
    if (rc == 0)
        *out = req.topic;
    return rc;
}

int wal_topic_set_own_bound(wal_t *w, wal_topic_t *t, uint64_t max_bytes)
{
    if (!t || t->w != w || max_bytes < 2 * w->o.segment_bytes)
        return TB_EINVALID;
    /* on the writer thread, between two items: the total and the topic's
     * bytes are the writer's, and no batch sees half of the change */
    wal_req_t req = { .item.kind = WAL_ITEM_OWN_BOUND, .topic = t, .max_bytes = max_bytes };
    return wal__request(w, &req);
}

int wal__request_reserve(wal_topic_t *t, uint64_t end)
{
    /* on the writer thread, in FIFO order: the meta file is the writer's */
    wal_req_t req = { .item.kind = WAL_ITEM_RESERVE, .topic = t, .end = end };
    return wal__request(t->w, &req);
}

void wal_topic_foreach(wal_t *w, int (*fn)(wal_topic_t *t, void *arg), void *arg)
{
    pthread_mutex_lock(&w->topics_mu);
    size_t n = w->ntopics;
    wal_topic_t **copy = tb_malloc((n ? n : 1) * sizeof *copy);
    if (n) /* w->topics is NULL in a log with no topic: memcpy's pointers must not be */
        memcpy(copy, w->topics, n * sizeof *copy);
    pthread_mutex_unlock(&w->topics_mu);
    for (size_t i = 0; i < n; i++)
        if (fn(copy[i], arg))
            break;
    free(copy);
}
