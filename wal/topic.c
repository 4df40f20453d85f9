/*
 * topic.c: a topic's identity on disk (directory name, segment paths, the
 * meta file) and its lifetime in memory.
 *
 * Directory names: upstream topics look like "/edge1/telemetry". Bytes in
 * [A-Za-z0-9_-] stay as they are, '/' becomes '+', anything else '%XX'.
 * '+' and '%' never appear unescaped otherwise, so decoding is exact, and
 * since '.' is escaped no name can be "." or "..". Typical names map 1:1
 * in length, so a glance at the directory tells which topic it is.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPIC_NAME_MAX 200
#define DIRNAME_MAX 255

static bool plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

char *wal__topic_encode(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TOPIC_NAME_MAX)
        return NULL;
    char *out = tb_malloc(n * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (plain(c))
            out[o++] = (char)c;
        else if (c == '/')
            out[o++] = '+';
        else
            o += (size_t)sprintf(out + o, "%%%02X", c);
    }
    out[o] = '\0';
    if (o > DIRNAME_MAX) {
        free(out);
        return NULL;
    }
    return out;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *wal__topic_decode(const char *dirname)
{
    size_t n = strlen(dirname);
    if (n == 0)
        return NULL;
    char *out = tb_malloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)dirname[i];
        if (plain(c)) {
            out[o++] = (char)c;
        } else if (c == '+') {
            out[o++] = '/';
        } else if (c == '%' && i + 2 < n && hexval(dirname[i + 1]) >= 0 &&
                   hexval(dirname[i + 2]) >= 0) {
            int v = hexval(dirname[i + 1]) * 16 + hexval(dirname[i + 2]);
            /* only escapes the encoder would have produced: exact round trip */
            if (v == 0 || v == '/' || plain((unsigned char)v)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)v;
            i += 2;
        } else {
            free(out);
            return NULL;
        }
    }
    out[o] = '\0';
    if (o > TOPIC_NAME_MAX) {
        free(out);
        return NULL;
    }
    return out;
}

char *wal__seg_path(const wal_topic_t *t, uint64_t base, const char *suffix)
{
    return tb_asprintf("%s/%020llu%s%s", t->dir, (unsigned long long)base, WAL_SEG_SUFFIX,
                       suffix ? suffix : "");
}

bool wal__seg_name_parse(const char *name, uint64_t *base)
{
    if (strlen(name) != WAL_SEG_NAME_LEN || strcmp(name + 20, WAL_SEG_SUFFIX) != 0)
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return false;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *base = v;
    return true;
}

wal_topic_t *wal__topic_new(wal_t *w, const char *name, const char *dir)
{
    wal_topic_t *t = tb_calloc(1, sizeof *t);
    t->w = w;
    t->name = tb_strdup(name);
    t->dir = tb_strdup(dir);
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->acct_mu, NULL);
    t->fd = -1;
    t->meta.floor = 1;
    t->next = 1;
    t->synced_next = 1;
    t->seg_next = 1;
    atomic_init(&t->readable_end, 1);
    atomic_init(&t->disk_end, 1);
    wal__mem_init(t);
    atomic_init(&t->ck_req, 0);
    t->nslots = 1; /* the default slot (id 0): wal_checkpoint's (cursor.c) */
    t->slots[0] = (wal_slot_t){ .id = 0, .state = WAL_SLOT_ACTIVE };
    atomic_init(&t->ck_pending, false);
    atomic_init(&t->next_pub, 1);
    atomic_init(&t->log_next, 1);
    atomic_init(&t->dropped, 0);
    atomic_init(&t->lost, 0);
    atomic_init(&t->quarantined, 0);
    atomic_init(&t->dropped_age, 0);
    atomic_init(&t->reserved, 0);
    atomic_init(&t->res_used, 0);
    atomic_init(&t->res_pending, false);
    atomic_init(&t->hole_from, 0);
    atomic_init(&t->hole_to, 0);
    atomic_init(&t->write_errors, 0);
    atomic_init(&t->state, WAL_TOPIC_OK);
    atomic_init(&t->last_error, 0);
    atomic_init(&t->retry_now, false);
    atomic_init(&t->overflow, (int)w->o.overflow);
    atomic_init(&t->blocked, false);
    atomic_init(&t->release_held, false);
    atomic_init(&t->own_bound, 0);
    t->drop_rl = (tb_ratelimit_t)TB_RATELIMIT_INIT(60000);
    pthread_mutex_init(&t->drop_rl.mu, NULL);
    t->retry_rl = (tb_ratelimit_t)TB_RATELIMIT_INIT(60000);
    pthread_mutex_init(&t->retry_rl.mu, NULL);
    return t;
}

void wal__topic_free(wal_topic_t *t)
{
    if (!t)
        return;
    if (t->fd >= 0)
        t->w->io->close(t->w->io->ctx, t->fd);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->acct_mu);
    wal__mem_destroy(t);
    pthread_mutex_destroy(&t->drop_rl.mu);
    pthread_mutex_destroy(&t->retry_rl.mu);
    free(t->segs);
    free(t->name);
    free(t->dir);
    free(t);
}

void wal__topic_register(wal_t *w, wal_topic_t *t)
{
    pthread_mutex_lock(&w->topics_mu);
    if (w->ntopics == w->topics_cap) {
        w->topics_cap = w->topics_cap ? w->topics_cap * 2 : 8;
        w->topics = tb_realloc(w->topics, w->topics_cap * sizeof *w->topics);
    }
    size_t i = w->ntopics;
    while (i > 0 && strcmp(w->topics[i - 1]->name, t->name) > 0) {
        w->topics[i] = w->topics[i - 1];
        i--;
    }
    w->topics[i] = t;
    w->ntopics++;
    pthread_mutex_unlock(&w->topics_mu);
}

int wal__meta_write(wal_topic_t *t, const wal_meta_t *m, wal_cause_t why)
{
    /* the slot table from the live slots (ids and checkpoints), with the
     * drop counts m carries (the persisted ones plus what the caller added) */
    wal_meta_t *mm = tb_malloc(sizeof *mm);
    *mm = *m;
    pthread_mutex_lock(&t->acct_mu);
    wal__slots_fill_locked(t, mm);
    pthread_mutex_unlock(&t->acct_mu);
    uint8_t buf[WAL_META_MAX];
    size_t n = wal__meta_encode(buf, mm);
    char *path = tb_asprintf("%s/meta", t->dir);
    int rc = wal__write_atomic(t->w, t->switching ? WAL_CAUSE_SWITCH : why, path, buf, n);
    free(path);
    if (rc < 0) {
        tb_warn("wal: cannot persist topic meta", TB_S("topic", t->name), TB_ERR(rc));
        free(mm);
        return rc;
    }
    t->meta = *mm;
    wal__slots_persisted(t, mm);
    free(mm);
    atomic_store(&t->dropped, m->dropped);
    atomic_store(&t->lost, m->lost);
    atomic_store(&t->quarantined, m->quarantined);
    /* a max, not a store: what wal_checkpoint_ex added since m was taken is not persisted yet */
    wal__atomic_max(&t->dropped_age, m->dropped_age);
    atomic_store(&t->reserved, m->reserved);
    return 0;
}

int wal__meta_read(const wal_io_t *io, const char *dir, wal_meta_t *m, unsigned *version)
{
    memset(m, 0, sizeof *m);
    if (version)
        *version = 0;
    char *path = tb_asprintf("%s/meta", dir);
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    free(path);
    if (fd < 0)
        return fd;
    uint8_t *buf = tb_malloc(WAL_META_READ_MAX + 1);
    ssize_t n = wal__pread_full(io, fd, buf, WAL_META_READ_MAX + 1, 0);
    io->close(io->ctx, fd);
    int rc = n < 0 ? (int)n : wal__meta_decode(buf, (size_t)n, m, version);
    free(buf);
    return rc;
}

void wal__topic_set_failed(wal_topic_t *t, int rc)
{
    atomic_fetch_add(&t->write_errors, 1);
    atomic_store(&t->last_error, rc);
    if (atomic_exchange(&t->state, WAL_TOPIC_FAILED) != WAL_TOPIC_FAILED)
        tb_error("wal: topic failed, refusing new messages until the disk recovers",
                 TB_S("topic", t->name), TB_ERR(rc), TB_U("retry_ms", t->w->o.retry_ms));
    t->retry_at_ms = tb_mono_ms() + TB_MAX(t->w->o.retry_ms, 10u);
}

const char *wal_topic_name(const wal_topic_t *t)
{
    return t->name;
}

wal_topic_state_t wal_topic_state(const wal_topic_t *t)
{
    return (wal_topic_state_t)atomic_load(&((wal_topic_t *)t)->state);
}

int wal_topic_error(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->last_error);
}

uint64_t wal_topic_readable_end(const wal_topic_t *t)
{
    return atomic_load_explicit(&((wal_topic_t *)t)->readable_end, memory_order_acquire);
}

/* how many offsets [lo, hi) and [a, b) share */
static uint64_t overlap(uint64_t lo, uint64_t hi, uint64_t a, uint64_t b)
{
    lo = TB_MAX(lo, a);
    hi = TB_MIN(hi, b);
    return hi > lo ? hi - lo : 0;
}

uint64_t wal_topic_stored_between(wal_topic_t *t, uint64_t after, uint64_t end)
{
    if (end <= after + 1)
        return 0;
    uint64_t a = after + 1;
    /* memory first: a record only moves from memory to the log (a spill),
     * so one read before the segments is in one of the two */
    pthread_mutex_lock(&t->mem.mu);
    uint64_t mlo = t->mem.lo, mhi = atomic_load(&t->mem_end) ? t->mem.next : 0;
    pthread_mutex_unlock(&t->mem.mu);
    uint64_t n = 0, both = 0;
    pthread_mutex_lock(&t->mu);
    uint64_t log_next = atomic_load(&t->log_next);
    for (size_t i = 0; i < t->nsegs; i++) {
        const wal_seg_t *s = &t->segs[i];
        uint64_t hi = i + 1 == t->nsegs ? log_next
                      : s->end ? TB_MIN(s->end, t->segs[i + 1].base) : t->segs[i + 1].base;
        n += overlap(s->base, hi, a, end);
        both += overlap(TB_MAX(s->base, mlo), TB_MIN(hi, mhi), a, end); /* spilled, not released yet */
    }
    pthread_mutex_unlock(&t->mu);
    return n + overlap(mlo, mhi, a, end) - both;
}

uint64_t wal_topic_checkpoint(const wal_topic_t *t)
{
    return atomic_load(&((wal_topic_t *)t)->ck_req);
}

void wal_topic_retry(wal_topic_t *t)
{
    atomic_store(&t->retry_now, true);
    wal__kick(t->w);
}

void wal_topic_stats(wal_topic_t *t, wal_topic_stats_t *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->nsegs; i++)
        out->bytes += t->segs[i].bytes;
    out->segments = (uint32_t)t->nsegs;
    out->oldest_offset = t->nsegs ? t->segs[0].base : 0;
    pthread_mutex_unlock(&t->mu);
    out->next_offset = atomic_load(&t->next_pub);
    if (out->oldest_offset > out->next_offset)
        out->oldest_offset = out->next_offset;
    out->readable_end = wal_topic_readable_end(t);
    out->checkpoint = atomic_load(&t->ck_req);
    out->dropped_total = atomic_load(&t->dropped);
    out->lost_total = atomic_load(&t->lost);
    out->quarantined_segments = atomic_load(&t->quarantined);
    out->dropped_age_total = atomic_load(&t->dropped_age);
    out->reserved = atomic_load(&t->reserved);
    uint64_t hole_to = atomic_load(&t->hole_to);
    if (hole_to > out->checkpoint + 1) { /* until the checkpoint passes it */
        out->hole_from = atomic_load(&t->hole_from);
        out->hole_to = hole_to;
    }
    out->write_errors = atomic_load(&t->write_errors);
    out->mode = wal_topic_mode(t);
    pthread_mutex_lock(&t->mem.mu);
    out->held_msgs = t->mem.held_msgs;
    out->held_bytes = t->mem.held_bytes;
    memcpy(out->spills, t->mem.spills, sizeof out->spills);
    out->to_memory = t->mem.to_memory;
    out->holddown_ms = t->mem.holddown_ms;
    out->ack_latency_ms = wal__mem_ack_latency(t);
    pthread_mutex_unlock(&t->mem.mu);
    out->state = (wal_topic_state_t)atomic_load(&t->state);
    out->last_error = atomic_load(&t->last_error);
    pthread_mutex_lock(&t->acct_mu);
    out->open_offset = t->open_next;
    out->dropped_since_open = t->dropped_open;
    out->spill_lost_since_open = t->spill_lost_open;
    out->drop_floor = t->drop_floor;
    pthread_mutex_unlock(&t->acct_mu);
    uint64_t own = atomic_load(&t->own_bound);
    out->own_bound = own != 0;
    out->max_bytes = own ? own : t->w->o.max_topic_bytes;
}

uint64_t wal_topic_bytes_after(wal_topic_t *t, const wal_pos_t *pos)
{
    uint64_t total = 0;
    if (atomic_load(&t->mem_end) != 0 && pos->offset >= atomic_load(&t->disk_end))
        return 0; /* past the log, in memory: not disk (held_bytes says how much is held) */
    pthread_mutex_lock(&t->mu);
    size_t i = 0;
    if (t->nsegs > 0) {
        /* the segment holding the position: the last one whose base is at or below it */
        uint64_t key = pos->exact ? pos->seg_base : pos->offset;
        size_t k = t->nsegs;
        while (k > 0 && t->segs[k - 1].base > key)
            k--;
        bool here = k > 0 && (!pos->exact || t->segs[k - 1].base == pos->seg_base);
        i = k > 0 ? k - 1 : 0;
        if (k > 0 && !here)
            i = k; /* its segment is gone: what follows it */
        for (size_t j = i; j < t->nsegs; j++)
            total += t->segs[j].bytes;
        if (here && pos->exact)
            total -= TB_MIN(pos->byte, t->segs[i].bytes);
    }
    pthread_mutex_unlock(&t->mu);
    return total;
}
