/*
 * cursor.c: several outputs, one log (wal.h CURSORS). Each output has a
 * slot per topic: its own checkpoint and drop counts, under the topic's
 * acct_mu, persisted in the topic's one meta file (version 3, wal_format.h).
 *
 * The topic's checkpoint ck_req, which retention (retention.c), the bounds'
 * drop accounting, the refusing policies (overflow.c), recovery and the
 * memory tier (memory.c) go by, is the MINIMUM of ck over the ACTIVE slots,
 * recomputed under acct_mu whenever a slot moves, opens or parks. It only
 * goes down when a slot opens below it. With no active slot it stays where
 * it was (only a bound deletes then). The memory tier's release
 * (wal__mem_release) is called when the minimum goes up, with the minimum:
 * a held batch leaves memory only when every active output has it.
 *
 * Slot 0 (id 0, "danube") exists in every topic from its creation: the
 * single-reader API (wal_checkpoint*) acts on it, and while it is the only
 * slot the meta file stays version 1 or 2, byte for byte as before.
 *
 * OUTPUTS: <wal.dir>/OUTPUTS names the ids, lines "<id> <name>" in id
 * order, then "crc <8 hex digits>", the CRC32C of every byte before that
 * line; replaced atomically (the io vtable's write_atomic) when an output
 * first appears or is forgotten. Absent: only "danube" (id 0), implied.
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

#define OUTPUT_NAME_MAX 64u
#define OUTPUT_IDS 1024u /* outputs a log ever had, until forgotten */

/* ---- slots ------------------------------------------------------------------- */

/* acct_mu held: ck_req = the minimum over the ACTIVE slots (kept when none
 * is). Returns whether it went up (the memory tier may release). */
static bool min_locked(wal_topic_t *t)
{
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i].state == WAL_SLOT_ACTIVE)
            min = TB_MIN(min, t->slots[i].ck);
    if (min == UINT64_MAX)
        return false;
    uint64_t cur = atomic_load(&t->ck_req);
    atomic_store(&t->ck_req, min);
    return min > cur;
}

static size_t find_locked(const wal_topic_t *t, uint16_t id)
{
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i].id == id)
            return i;
    return SIZE_MAX;
}

/* acct_mu held: a new ACTIVE slot for id at ck, or SIZE_MAX when t is full. */
static size_t add_locked(wal_topic_t *t, uint16_t id, uint64_t ck)
{
    if (t->nslots >= WAL_MAX_CURSORS)
        return SIZE_MAX;
    size_t i = t->nslots++;
    t->slots[i] = (wal_slot_t){ .id = id, .state = WAL_SLOT_ACTIVE, .ck = ck };
    return i;
}

const wal_meta_slot_t *wal__meta_slot(const wal_meta_t *m, uint16_t id, wal_meta_slot_t *tmp)
{
    if (m->nslots == 0) {
        if (id != 0)
            return NULL;
        *tmp = (wal_meta_slot_t){ .id = 0, .checkpoint = m->checkpoint, .dropped = m->dropped,
                                  .dropped_age = m->dropped_age };
        return tmp;
    }
    for (size_t i = 0; i < m->nslots; i++)
        if (m->slots[i].id == id)
            return &m->slots[i];
    return NULL;
}

void wal__slots_load(wal_topic_t *t, const wal_meta_t *m)
{
    pthread_mutex_lock(&t->acct_mu);
    memset(t->slots, 0, sizeof t->slots);
    if (m->nslots == 0) {
        t->nslots = 1;
        t->slots[0] = (wal_slot_t){ .id = 0, .state = WAL_SLOT_ACTIVE, .ck = m->checkpoint,
                                    .dropped = m->dropped, .dropped_age = m->dropped_age };
    } else {
        t->nslots = TB_MIN(m->nslots, WAL_MAX_CURSORS);
        for (size_t i = 0; i < t->nslots; i++) {
            const wal_meta_slot_t *e = &m->slots[i];
            t->slots[i] = (wal_slot_t){ .id = e->id, .state = WAL_SLOT_ACTIVE,
                                        .protects = (e->flags & WAL_SLOT_F_PROTECTS) != 0, .ck = e->checkpoint,
                                        .dropped = e->dropped, .dropped_age = e->dropped_age };
        }
    }
    min_locked(t);
    pthread_mutex_unlock(&t->acct_mu);
}

void wal__slots_raise(wal_topic_t *t, uint64_t from, uint64_t to)
{
    pthread_mutex_lock(&t->acct_mu);
    for (size_t i = 0; i < t->nslots; i++)
        if (t->slots[i].ck >= from && t->slots[i].ck < to)
            t->slots[i].ck = to;
    min_locked(t);
    pthread_mutex_unlock(&t->acct_mu);
}

void wal__slots_fill_locked(wal_topic_t *t, wal_meta_t *m)
{
    wal_meta_t old = *m;
    memset(m->slots, 0, sizeof m->slots);
    m->nslots = (uint16_t)t->nslots;
    for (size_t i = 0; i < t->nslots; i++) {
        const wal_slot_t *s = &t->slots[i];
        wal_meta_slot_t tmp;
        const wal_meta_slot_t *e = wal__meta_slot(&old, s->id, &tmp);
        m->slots[i] = (wal_meta_slot_t){
            .id = s->id,
            .flags = s->protects ? WAL_SLOT_F_PROTECTS : 0,
            .checkpoint = e ? TB_MAX(e->checkpoint, s->ck) : s->ck,
            .dropped = e ? e->dropped : 0,
            .dropped_age = TB_MAX(e ? e->dropped_age : 0, s->dropped_age),
        };
    }
    /* only the default slot: the table is implied (version 1 or 2, as before) */
    if (m->nslots == 1 && m->slots[0].id == 0) {
        m->nslots = 0;
        memset(m->slots, 0, sizeof m->slots);
    }
}

void wal__slots_persisted(wal_topic_t *t, const wal_meta_t *m)
{
    pthread_mutex_lock(&t->acct_mu);
    for (size_t i = 0; i < t->nslots; i++) {
        wal_meta_slot_t tmp;
        const wal_meta_slot_t *e = wal__meta_slot(m, t->slots[i].id, &tmp);
        if (!e)
            continue;
        t->slots[i].dropped = e->dropped;
        t->slots[i].dropped_age = TB_MAX(t->slots[i].dropped_age, e->dropped_age);
    }
    pthread_mutex_unlock(&t->acct_mu);
}

bool wal__slots_dirty(wal_topic_t *t)
{
    bool dirty = false;
    pthread_mutex_lock(&t->acct_mu);
    for (size_t i = 0; i < t->nslots && !dirty; i++) {
        wal_meta_slot_t tmp;
        const wal_meta_slot_t *e = wal__meta_slot(&t->meta, t->slots[i].id, &tmp);
        /* a new slot, or one that passed records on disk the file does not say it has */
        dirty = !e || (t->slots[i].ck > e->checkpoint && e->checkpoint + 1 < t->next);
    }
    pthread_mutex_unlock(&t->acct_mu);
    return dirty;
}

/* Moves slot idx of t to acked (the heart of wal_checkpoint_ex and wal_cursor_ack). */
static int slot_ack(wal_topic_t *t, size_t idx, bool by_id0, uint64_t acked, uint64_t aged, uint64_t *drop_floor)
{
    if (drop_floor)
        *drop_floor = 0;
    if (acked >= wal_topic_readable_end(t))
        return TB_EINVALID;
    pthread_mutex_lock(&t->acct_mu);
    if (by_id0) {
        /* the single-reader API: slot 0, opened on first use (reactivated if parked) */
        idx = find_locked(t, 0);
        if (idx == SIZE_MAX)
            idx = add_locked(t, 0, atomic_load(&t->ck_req));
        if (idx == SIZE_MAX) {
            pthread_mutex_unlock(&t->acct_mu);
            return TB_EFULL;
        }
        t->slots[idx].opened = true;
        t->slots[idx].state = WAL_SLOT_ACTIVE;
    }
    wal_slot_t *s = &t->slots[idx];
    bool moved = acked > s->ck, min_up = false;
    if (moved) {
        s->ck = acked;
        if (aged) {
            s->dropped_age += aged;
            if (s->id == 0)
                atomic_fetch_add(&t->dropped_age, aged); /* the topic's is slot 0's (meta header) */
        }
        min_up = min_locked(t);
    } else if (by_id0) {
        min_up = min_locked(t); /* a reactivation may move it either way */
    }
    if (drop_floor)
        *drop_floor = s->drop_floor;
    pthread_mutex_unlock(&t->acct_mu);
    if (min_up)
        wal__mem_release(t, atomic_load(&t->ck_req)); /* held batches every output passed: completed now */
    /* wake the writer only when it does not know yet: acks come often;
     * but every one while DRAINING (the writer decides the return to memory) */
    if (moved && (!atomic_exchange(&t->ck_pending, true) || wal_topic_mode(t) == WAL_MODE_DRAINING))
        wal__kick(t->w);
    return 0;
}

int wal_checkpoint(wal_topic_t *t, uint64_t acked_offset)
{
    return wal_checkpoint_floor(t, acked_offset, NULL);
}

int wal_checkpoint_floor(wal_topic_t *t, uint64_t acked_offset, uint64_t *drop_floor)
{
    return wal_checkpoint_ex(t, acked_offset, 0, drop_floor);
}

int wal_checkpoint_ex(wal_topic_t *t, uint64_t acked_offset, uint64_t aged, uint64_t *drop_floor)
{
    return slot_ack(t, 0, true, acked_offset, aged, drop_floor);
}

int wal_cursor_open(wal_topic_t *t, uint16_t id, const wal_cursor_opts_t *o, wal_cursor_t **out)
{
    static const wal_cursor_opts_t defaults = { .start = WAL_START_LATEST };
    if (!o)
        o = &defaults;
    *out = NULL;
    pthread_mutex_lock(&t->mu);
    uint64_t oldest = t->nsegs ? t->segs[0].base : atomic_load(&t->next_pub);
    pthread_mutex_unlock(&t->mu);
    uint64_t end = wal_topic_readable_end(t);
    oldest = TB_MAX(oldest, atomic_load(&t->read_floor));
    pthread_mutex_lock(&t->acct_mu);
    size_t idx = find_locked(t, id);
    if (idx == SIZE_MAX)
        idx = add_locked(t, id, o->start == WAL_START_EARLIEST ? TB_MIN(oldest, end) - 1 : end - 1);
    if (idx == SIZE_MAX || t->slots[idx].cur) {
        pthread_mutex_unlock(&t->acct_mu);
        return idx == SIZE_MAX ? TB_EFULL : TB_EINVALID;
    }
    wal_cursor_t *c = tb_calloc(1, sizeof *c);
    c->t = t;
    c->id = id;
    c->idx = idx;
    wal_slot_t *s = &t->slots[idx];
    s->cur = c;
    s->opened = true;
    s->state = WAL_SLOT_ACTIVE;
    s->protects = o->protects;
    bool min_up = min_locked(t);
    pthread_mutex_unlock(&t->acct_mu);
    if (min_up)
        wal__mem_release(t, atomic_load(&t->ck_req));
    atomic_store(&t->ck_pending, true); /* a new slot is persisted at the next checkpoint write */
    wal__kick(t->w);
    *out = c;
    return 0;
}

void wal_cursors_settled(wal_t *w)
{
    pthread_mutex_lock(&w->topics_mu);
    for (size_t i = 0; i < w->ntopics; i++) {
        wal_topic_t *t = w->topics[i];
        pthread_mutex_lock(&t->acct_mu);
        for (size_t k = 0; k < t->nslots; k++)
            if (!t->slots[k].opened)
                t->slots[k].state = WAL_SLOT_PARKED;
        bool min_up = min_locked(t);
        pthread_mutex_unlock(&t->acct_mu);
        if (min_up) {
            wal__mem_release(t, atomic_load(&t->ck_req));
            atomic_store(&t->ck_pending, true);
        }
    }
    pthread_mutex_unlock(&w->topics_mu);
    wal__kick(w);
}

uint64_t wal_cursor_checkpoint(const wal_cursor_t *c)
{
    wal_topic_t *t = c->t;
    pthread_mutex_lock(&t->acct_mu);
    uint64_t ck = t->slots[c->idx].ck;
    pthread_mutex_unlock(&t->acct_mu);
    return ck;
}

int wal_cursor_ack(wal_cursor_t *c, uint64_t acked, uint64_t *drop_floor)
{
    return slot_ack(c->t, c->idx, false, acked, 0, drop_floor);
}

int wal_cursor_ack_ex(wal_cursor_t *c, uint64_t acked, uint64_t aged, uint64_t *drop_floor)
{
    return slot_ack(c->t, c->idx, false, acked, aged, drop_floor);
}

void wal_cursor_stats(wal_cursor_t *c, wal_cursor_stats_t *out)
{
    wal_topic_t *t = c->t;
    pthread_mutex_lock(&t->acct_mu);
    const wal_slot_t *s = &t->slots[c->idx];
    *out = (wal_cursor_stats_t){
        .checkpoint = s->ck,
        .dropped_total = s->dropped,
        .dropped_since_open = s->dropped_open,
        .drop_floor = s->drop_floor,
        .dropped_age_total = s->dropped_age,
        .protects = s->protects,
        .active = s->state == WAL_SLOT_ACTIVE,
    };
    pthread_mutex_unlock(&t->acct_mu);
}

void wal_cursor_close(wal_cursor_t *c)
{
    if (!c)
        return;
    wal_topic_t *t = c->t;
    pthread_mutex_lock(&t->acct_mu);
    t->slots[c->idx].cur = NULL;
    t->slots[c->idx].state = WAL_SLOT_PARKED;
    bool min_up = min_locked(t);
    pthread_mutex_unlock(&t->acct_mu);
    if (min_up) {
        wal__mem_release(t, atomic_load(&t->ck_req));
        atomic_store(&t->ck_pending, true);
        wal__kick(t->w);
    }
    free(c);
}

/* ---- OUTPUTS ----------------------------------------------------------------- */

bool wal__output_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > OUTPUT_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Parses an OUTPUTS file (n bytes) into names[OUTPUT_IDS] (strdup'd).
 * Returns 0, or TB_ECORRUPT with *line the bad line (1-based). */
int wal__outputs_parse(const char *buf, size_t n, char **names, size_t *line)
{
    *line = 0;
    size_t pos = 0;
    int rc = TB_ECORRUPT;
    for (;;) {
        (*line)++;
        const char *nl = memchr(buf + pos, '\n', n - pos);
        if (!nl)
            break; /* every line ends with a newline; the crc line comes last */
        size_t len = (size_t)(nl - (buf + pos));
        char l[OUTPUT_NAME_MAX + 16];
        if (len >= sizeof l)
            break;
        memcpy(l, buf + pos, len);
        l[len] = '\0';
        unsigned long id;
        char name[OUTPUT_NAME_MAX + 2], extra;
        unsigned crc;
        if (strncmp(l, "crc ", 4) == 0) {
            if (len != 12 || sscanf(l + 4, "%8x%c", &crc, &extra) != 1 || nl + 1 != buf + n ||
                crc != wal__crc32c(0, buf, pos))
                break;
            if (!names[0])
                names[0] = tb_strdup("danube");
            else if (strcmp(names[0], "danube") != 0)
                break;
            rc = 0;
            break;
        }
        if (sscanf(l, "%5lu %65s%c", &id, name, &extra) != 2 || id >= OUTPUT_IDS || !wal__output_name_ok(name) ||
            names[id] || (strcmp(name, "danube") == 0) != (id == 0))
            break; /* danube is 0 and 0 is danube */
        char idtxt[8];
        snprintf(idtxt, sizeof idtxt, "%lu", id);
        if (strncmp(l, idtxt, strlen(idtxt)) != 0 || l[strlen(idtxt)] != ' ' ||
            strcmp(l + strlen(idtxt) + 1, name) != 0)
            break; /* exactly "<id> <name>": one space, no leading zeros or signs */
        for (size_t k = 0; k < OUTPUT_IDS && rc != 0; k++)
            if (names[k] && strcmp(names[k], name) == 0)
                goto out; /* a name twice */
        names[id] = tb_strdup(name);
        pos += len + 1;
    }
out:
    if (rc < 0)
        for (size_t k = 0; k < OUTPUT_IDS; k++) {
            free(names[k]);
            names[k] = NULL;
        }
    return rc;
}

/* Reads <dir>/OUTPUTS through io into names[OUTPUT_IDS]. 0 (absent: only
 * danube), or TB_ECORRUPT (logged with the line) or -errno. */
static int outputs_read(const wal_io_t *io, const char *dir, char **names)
{
    char *path = tb_asprintf("%s/OUTPUTS", dir);
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    int rc = 0;
    if (fd < 0) {
        rc = fd == -ENOENT ? 0 : fd;
        if (rc == 0)
            names[0] = tb_strdup("danube");
        free(path);
        return rc;
    }
    size_t cap = (OUTPUT_NAME_MAX + 8) * OUTPUT_IDS + 64;
    char *buf = tb_malloc(cap);
    ssize_t n = wal__pread_full(io, fd, buf, cap, 0);
    io->close(io->ctx, fd);
    size_t line = 0;
    if (n < 0)
        rc = (int)n;
    else if ((size_t)n == cap)
        rc = TB_ECORRUPT, line = 0;
    else
        rc = wal__outputs_parse(buf, (size_t)n, names, &line);
    if (rc == TB_ECORRUPT)
        tb_error("wal: OUTPUTS file is damaged (see docs/WAL.md, OUTPUTS)", TB_S("file", path), TB_U("line", line));
    free(buf);
    free(path);
    return rc;
}

/* w: the running log, whose wal_stats count the write (NULL offline) */
static int outputs_write(wal_t *w, const wal_io_t *io, const char *dir, char *const *names)
{
    size_t cap = 64, len = 0;
    char *buf = tb_malloc(cap);
    for (size_t id = 0; id < OUTPUT_IDS; id++) {
        if (!names[id])
            continue;
        size_t need = strlen(names[id]) + 16;
        if (len + need + 16 > cap) {
            cap = (len + need + 16) * 2;
            buf = tb_realloc(buf, cap);
        }
        len += (size_t)snprintf(buf + len, cap - len, "%zu %s\n", id, names[id]);
    }
    if (len + 16 > cap)
        buf = tb_realloc(buf, cap = len + 16);
    len += (size_t)snprintf(buf + len, cap - len, "crc %08x\n", wal__crc32c(0, buf, len));
    char *path = tb_asprintf("%s/OUTPUTS", dir);
    int rc = io->write_atomic(io->ctx, path, buf, len);
    if (rc == 0)
        wal__count(w, WAL_CAUSE_OTHER, len, 2);
    if (rc < 0)
        tb_warn("wal: cannot write OUTPUTS", TB_S("file", path), TB_ERR(rc));
    free(path);
    free(buf);
    return rc;
}

int wal__outputs_load(wal_t *w)
{
    pthread_mutex_init(&w->out_mu, NULL);
    w->out_names = tb_calloc(OUTPUT_IDS, sizeof *w->out_names);
    w->out_n = OUTPUT_IDS;
    return outputs_read(w->io, w->dir, w->out_names);
}

void wal__outputs_free(wal_t *w)
{
    if (!w->out_names)
        return;
    for (size_t i = 0; i < w->out_n; i++)
        free(w->out_names[i]);
    free(w->out_names);
    w->out_names = NULL;
    pthread_mutex_destroy(&w->out_mu);
}

bool wal__output_known(wal_t *w, uint16_t id)
{
    pthread_mutex_lock(&w->out_mu);
    bool known = id < w->out_n && w->out_names[id] != NULL;
    pthread_mutex_unlock(&w->out_mu);
    return known;
}

int wal_output_id(wal_t *w, const char *name, uint16_t *id)
{
    if (!wal__output_name_ok(name))
        return TB_EINVALID;
    pthread_mutex_lock(&w->out_mu);
    size_t free_id = SIZE_MAX;
    for (size_t i = 0; i < OUTPUT_IDS; i++) {
        if (w->out_names[i] && strcmp(w->out_names[i], name) == 0) {
            *id = (uint16_t)i;
            pthread_mutex_unlock(&w->out_mu);
            return 0;
        }
        if (!w->out_names[i] && free_id == SIZE_MAX && i > 0)
            free_id = i;
    }
    int rc = TB_EFULL;
    if (free_id != SIZE_MAX) {
        w->out_names[free_id] = tb_strdup(name);
        rc = outputs_write(w, w->io, w->dir, w->out_names);
        if (rc < 0) {
            free(w->out_names[free_id]);
            w->out_names[free_id] = NULL;
        } else {
            *id = (uint16_t)free_id;
            tb_info("wal: new output", TB_S("output", name), TB_U("id", free_id));
        }
    }
    pthread_mutex_unlock(&w->out_mu);
    return rc;
}

/* ---- forget ------------------------------------------------------------------ */

/* Removes slot id from the meta file of topic directory tdir; *found if it had one. */
static int forget_in_topic(const char *tdir, const char *topic, uint16_t id, FILE *report, bool *found)
{
    const wal_io_t *io = wal_io_posix();
    wal_meta_t *m = tb_calloc(1, sizeof *m);
    int rc = wal__meta_read(io, tdir, m, NULL);
    *found = false;
    if (rc == -ENOENT || (rc == 0 && m->nslots == 0)) {
        free(m);
        return 0; /* no table: only the default slot */
    }
    if (rc < 0) {
        if (report)
            fprintf(report, "topic %s: meta unreadable (%s), left as it is\n", topic, tb_strerror(rc));
        free(m);
        return rc;
    }
    size_t k = 0;
    for (size_t i = 0; i < m->nslots; i++) {
        if (m->slots[i].id == id) {
            *found = true;
            if (report)
                fprintf(report, "topic %s: slot removed (checkpoint %" PRIu64 ", dropped %" PRIu64 ")\n", topic,
                        m->slots[i].checkpoint, m->slots[i].dropped);
            continue;
        }
        m->slots[k++] = m->slots[i];
    }
    if (!*found) {
        free(m);
        return 0;
    }
    memset(&m->slots[k], 0, (WAL_MAX_CURSORS - k) * sizeof m->slots[0]);
    m->nslots = (uint16_t)k;
    if (k == 1 && m->slots[0].id == 0) {
        /* back to the single default slot: versions 1/2 carry it in the header */
        m->checkpoint = m->slots[0].checkpoint;
        m->dropped_age = m->slots[0].dropped_age;
        m->nslots = 0;
        memset(m->slots, 0, sizeof m->slots);
    }
    uint8_t buf[WAL_META_MAX];
    size_t n = wal__meta_encode(buf, m);
    char *path = tb_asprintf("%s/meta", tdir);
    rc = io->write_atomic(io->ctx, path, buf, n);
    free(path);
    free(m);
    return rc;
}

int wal_forget_output(const char *dir, const char *name, FILE *report)
{
    if (!wal__output_name_ok(name) || strcmp(name, "danube") == 0)
        return TB_EINVALID;
    int lfd;
    int lrc = wal_lock_dir(dir, false, &lfd);
    if (lrc < 0 && lrc != -ENOENT)
        return lrc; /* -EWOULDBLOCK: a gateway runs (no LOCK file: none ever did) */
    const wal_io_t *io = wal_io_posix();
    char **names = tb_calloc(OUTPUT_IDS, sizeof *names);
    int rc = outputs_read(io, dir, names);
    size_t id = OUTPUT_IDS;
    for (size_t i = 0; rc == 0 && i < OUTPUT_IDS; i++)
        if (names[i] && strcmp(names[i], name) == 0)
            id = i;
    if (rc == 0 && id == OUTPUT_IDS)
        rc = -ENOENT;
    DIR *d = rc == 0 ? opendir(dir) : NULL;
    if (rc == 0 && !d)
        rc = -errno;
    struct dirent *e;
    size_t topics = 0;
    while (d && (e = readdir(d))) {
        char *topic = wal__topic_decode(e->d_name);
        if (!topic)
            continue;
        char *tdir = tb_asprintf("%s/%s", dir, e->d_name);
        struct stat st;
        bool found = false;
        if (stat(tdir, &st) == 0 && S_ISDIR(st.st_mode)) {
            int r = forget_in_topic(tdir, topic, (uint16_t)id, report, &found);
            if (r < 0 && rc == 0)
                rc = r;
            topics += found;
        }
        free(tdir);
        free(topic);
    }
    if (d)
        closedir(d);
    if (rc == 0)
        rc = wal__state_remove(dir, (uint16_t)id, report); /* before the id is free for another output */
    if (rc == 0) {
        /* last: a crash before leaves the name with fewer slots; forgetting again finishes */
        free(names[id]);
        names[id] = NULL;
        rc = outputs_write(NULL, io, dir, names);
        if (rc == 0 && report)
            fprintf(report, "output %s (id %zu) forgotten: %zu topic(s) had a slot\n", name, id, topics);
    }
    for (size_t i = 0; i < OUTPUT_IDS; i++)
        free(names[i]);
    free(names);
    wal_unlock_dir(lfd);
    return rc;
}

/* The name of output id in dir's OUTPUTS (for wal_check), or NULL. */
char *wal__output_name(const char *dir, uint16_t id)
{
    char **names = tb_calloc(OUTPUT_IDS, sizeof *names);
    char *out = NULL;
    if (outputs_read(wal_io_posix(), dir, names) == 0 && names[id])
        out = tb_strdup(names[id]);
    for (size_t i = 0; i < OUTPUT_IDS; i++)
        free(names[i]);
    free(names);
    return out;
}
