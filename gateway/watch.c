/*
 * watch.c: reload.watch_ms. Every period, on the libuv pool (never on the
 * loop: a slow or hung file system stalls one pool thread, not MQTT), the
 * configuration file's bytes are read and the files the running
 * configuration names and a reload reads again (auth.password_file,
 * auth.acl_file, http.auth_token_file, http.admin_token_file, the TLS
 * certificates, keys and CAs of the listeners and of http.tls) are stat()ed.
 * Back on the loop, a difference from the previous look (other bytes, or a
 * file's device, inode, size or modification time, or whether it can be
 * read) starts the reload SIGHUP starts (app->reload), so a Kubernetes
 * ConfigMap or Secret mounted as a directory applies by itself: the
 * kubelet's atomic writer renames a new `..data` symlink over the old one,
 * which a path-based read and stat() follow (docs/OPERATIONS.md).
 *
 * A content the reload refuses is logged by the reload, once: the next look
 * finds the same bytes and does nothing until they change again. stat()
 * follows symbolic links, so the swap of a Secret's `..data` changes the
 * inode seen. The files are those of the configuration the gateway started
 * with (a path a reload changes needs a restart anyway, except auth.* and
 * the token files: a new path there is read by that reload, and watched
 * from the next start). Restart class: the period is the start's.
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    int err;                 /* 0, or the errno of stat() */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} stamp_t;

typedef struct {
    int err;                 /* 0, or the errno of reading the configuration file */
    char *bytes;
    size_t len;
    stamp_t *stamps;         /* one per gw__watch_t.files */
} look_t;

struct gw__watch {
    gw__app_t *app;
    uv_timer_t timer;
    uv_work_t work;
    const char *path;        /* the configuration file (cfg->source) */
    char **files;
    size_t nfiles;
    look_t last, next;
    bool on, started, busy, closing, timer_closed;
};

static void add_file(gw__watch_t *w, const char *f)
{
    if (!f || !*f)
        return;
    for (size_t i = 0; i < w->nfiles; i++)
        if (strcmp(w->files[i], f) == 0)
            return;
    w->files = tb_realloc(w->files, (w->nfiles + 1) * sizeof *w->files);
    w->files[w->nfiles++] = tb_strdup(f);
}

static void add_tls(gw__watch_t *w, const cfg_tls_t *t)
{
    add_file(w, t->cert_file);
    add_file(w, t->key_file);
    add_file(w, t->ca_file);
}

gw__watch_t *gw__watch_new(gw__app_t *app, const cfg_t *cfg)
{
    gw__watch_t *w = tb_calloc(1, sizeof *w);
    w->app = app;
    w->path = cfg->source;
    w->on = cfg->reload.watch_ms > 0 && strcmp(cfg->source, "<embedded default>") != 0 &&
            strcmp(cfg->source, "<table defaults>") != 0;
    add_file(w, cfg->auth.password_file);
    add_file(w, cfg->auth.acl_file);
    add_file(w, cfg->http.auth_token_file);
    add_file(w, cfg->http.admin_token_file);
    if (cfg->http.has_tls)
        add_tls(w, &cfg->http.tls);
    for (size_t i = 0; i < cfg->mqtt.nlisteners; i++)
        if (cfg->mqtt.listeners[i].has_tls)
            add_tls(w, &cfg->mqtt.listeners[i].tls);
    return w;
}

static void look_free(look_t *l)
{
    free(l->bytes);
    free(l->stamps);
    memset(l, 0, sizeof *l);
}

void gw__watch_free(gw__watch_t *w)
{
    if (!w)
        return;
    look_free(&w->last);
    look_free(&w->next);
    for (size_t i = 0; i < w->nfiles; i++)
        free(w->files[i]);
    free(w->files);
    free(w);
}

/* Any thread: the file's bytes and the files' stamps, now. */
static void take_look(const gw__watch_t *w, look_t *l)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(w->path, "rb");
    if (!f) {
        l->err = errno ? errno : EIO;
    } else {
        size_t cap = 4096;
        l->bytes = tb_malloc(cap);
        for (;;) {
            if (l->len == cap)
                l->bytes = tb_realloc(l->bytes, cap *= 2);
            size_t n = fread(l->bytes + l->len, 1, cap - l->len, f);
            l->len += n;
            if (n == 0)
                break;
        }
        if (ferror(f))
            l->err = EIO;
        fclose(f);
    }
    l->stamps = tb_calloc(w->nfiles + 1, sizeof *l->stamps);
    for (size_t i = 0; i < w->nfiles; i++) {
        struct stat st;
        if (stat(w->files[i], &st) < 0) {
            l->stamps[i].err = errno ? errno : EIO;
            continue;
        }
        l->stamps[i] = (stamp_t){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = st.st_mtim };
    }
}

/* NULL when the two looks agree, else what differs (for the log line). */
static const char *difference(const gw__watch_t *w, const look_t *a, const look_t *b)
{
    if (a->err != b->err || a->len != b->len || (a->len && memcmp(a->bytes, b->bytes, a->len) != 0))
        return w->path;
    for (size_t i = 0; i < w->nfiles; i++) {
        const stamp_t *x = &a->stamps[i], *y = &b->stamps[i];
        if (x->err != y->err || x->dev != y->dev || x->ino != y->ino || x->size != y->size ||
            x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec)
            return w->files[i];
    }
    return NULL;
}

static void timer_closed(uv_handle_t *h)
{
    gw__watch_t *w = h->data;
    w->timer_closed = true;
    if (!w->busy)
        gw__app_drained(w->app);
}

static void work_cb(uv_work_t *req)
{
    gw__watch_t *w = req->data;
    take_look(w, &w->next);
}

static void after_work_cb(uv_work_t *req, int status)
{
    gw__watch_t *w = req->data;
    w->busy = false;
    if (w->closing) {
        look_free(&w->next);
        if (w->timer_closed)
            gw__app_drained(w->app);
        return;
    }
    if (status < 0) {
        look_free(&w->next);
        return;
    }
    const char *what = difference(w, &w->last, &w->next);
    look_free(&w->last);
    w->last = w->next;
    memset(&w->next, 0, sizeof w->next);
    if (!what)
        return;
    if (!w->app->reload || w->app->stopping)
        return;
    tb_info("reload.watch: a change was seen; reloading as SIGHUP does", TB_S("file", what));
    w->app->reload(w->app, w->app->reload_arg);
}

static void timer_cb(uv_timer_t *t)
{
    gw__watch_t *w = t->data;
    if (w->busy || w->closing)
        return; /* the last look is still on the pool (a slow file system): skip a period */
    w->busy = true;
    w->work.data = w;
    int rc = uv_queue_work(&w->app->loop, &w->work, work_cb, after_work_cb);
    if (rc < 0) {
        w->busy = false;
        tb_warn("reload.watch: cannot queue a look at the configuration", TB_S("error", uv_strerror(rc)));
    }
}

int gw__watch_start(gw__app_t *app, void *arg)
{
    gw__watch_t *w = arg;
    (void)app;
    if (!w->on)
        return 0;
    w->started = true;
    take_look(w, &w->last); /* the baseline: what the boot read, give or take the boot's few ms */
    uv_timer_init(&w->app->loop, &w->timer);
    w->timer.data = w;
    uint64_t ms = w->app->cfg->reload.watch_ms;
    uv_timer_start(&w->timer, timer_cb, ms, ms);
    tb_info("reload.watch: watching the configuration and the files it names", TB_S("file", w->path),
            TB_U("files", w->nfiles), TB_U("every_ms", ms));
    return 0;
}

void gw__watch_drain(gw__app_t *app, void *arg)
{
    gw__watch_t *w = arg;
    if (!w->started || w->closing) {
        gw__app_drained(app);
        return;
    }
    w->closing = true;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, timer_closed); /* drained once the timer and any look in flight end */
}
