/* helper_wal.c: the shared test scaffolding declared in helper_wal.h. */
#include "helper_wal.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

static void notify_cb(void *arg)
{
    th_t *h = arg;
    pthread_mutex_lock(&h->mu);
    h->wakes++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void th_init(th_t *h, wal_fsync_t mode)
{
    memset(h, 0, sizeof *h);
    const char *tmp = getenv("TMPDIR");
    char *tmpl = tb_asprintf("%s/walt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    h->dir = mkdtemp(tmpl);
    if (!h->dir)
        abort();
    h->wal_dir = tb_asprintf("%s/wal", h->dir);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    wal_opts_default(&h->o);
    h->o.dir = h->wal_dir;
    h->o.segment_bytes = 4096;
    h->o.max_topic_bytes = 1 << 20;
    h->o.max_total_bytes = 4 << 20;
    h->o.fsync = mode;
    h->o.checkpoint_flush_ms = 0;
    h->o.notify = notify_cb;
    h->o.notify_arg = h;
    /* the failure tests provoke errors on purpose; WAL_TEST_LOG=1 shows them */
    tb_log_set_level(getenv("WAL_TEST_LOG") ? TB_LOG_DEBUG : TB_LOG_OFF);
}

void th_collect(th_t *h)
{
    wal_batch_t *b = wal_take_done(h->w);
    while (b) {
        wal_batch_t *next = wal_batch_next(b);
        if (h->ndone == h->cap) {
            h->cap = h->cap ? h->cap * 2 : 64;
            h->done = realloc(h->done, h->cap * sizeof *h->done);
        }
        h->done[h->ndone++] = *wal_batch_completion(b);
        wal_batch_free(b);
        b = next;
    }
}

int th_open(th_t *h)
{
    return wal_open(&h->o, &h->w);
}

int th_close(th_t *h)
{
    if (!h->w)
        return 0;
    wal_t *w = h->w;
    /* completions posted during close are freed by wal_close; take what is there */
    th_collect(h);
    int rc = wal_close(w);
    h->w = NULL;
    return rc;
}

void th_cleanup(th_t *h)
{
    if (h->w)
        th_close(h);
    th_rmrf(h->dir);
    free(h->dir);
    free(h->wal_dir);
    free(h->done);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
}

static void fill_payload(uint8_t *p, size_t n, uint64_t seq)
{
    uint64_t x = seq * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        p[i] = (uint8_t)('a' + (x * 0x2545F4914F6CDD1Dull >> 59) % 26); /* printable: dumps stay readable */
    }
}

const wal_msg_t *th_msg(th_msgbuf_t *mb, uint64_t seq, size_t payload_len)
{
    if (payload_len > sizeof mb->payload)
        abort();
    fill_payload(mb->payload, payload_len, seq);
    snprintf(mb->seqs, sizeof mb->seqs, "%llu", (unsigned long long)seq);
    snprintf(mb->topic, sizeof mb->topic, "dev/%llu", (unsigned long long)(seq % 7));
    mb->attr = (wal_attr_t){ (const uint8_t *)"seq", 3, (const uint8_t *)mb->seqs, strlen(mb->seqs) };
    mb->m = (wal_msg_t){
        .payload = mb->payload, .payload_len = payload_len,
        .attrs = &mb->attr, .nattrs = 1,
        .mqtt_topic = mb->topic, .mqtt_topic_len = strlen(mb->topic),
        .publish_time_ms = 1700000000000ull + seq,
        .qos = (uint8_t)(seq % 3), .retain = (seq & 1) != 0,
        .has_schema = seq % 4 == 0, .schema_id = seq, .schema_version = 2,
    };
    return &mb->m;
}

void th_submit(th_t *h, wal_topic_t *t, uint64_t seq0, uint32_t n, size_t payload_len)
{
    wal_batch_t *b = wal_batch_new(t);
    th_msgbuf_t mb;
    for (uint32_t i = 0; i < n; i++)
        if (wal_batch_add(b, th_msg(&mb, seq0 + i, payload_len)) != 0)
            abort();
    wal_submit(b, (void *)(uintptr_t)seq0);
}

bool th_wait(th_t *h, size_t n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        uint64_t seen = h->wakes;
        pthread_mutex_unlock(&h->mu);
        th_collect(h);
        pthread_mutex_lock(&h->mu);
        if (h->ndone >= n)
            break;
        int rc = 0;
        while (h->wakes == seen && rc == 0)
            rc = pthread_cond_timedwait(&h->cv, &h->mu, &dl);
        if (rc != 0)
            break;
    }
    pthread_mutex_unlock(&h->mu);
    th_collect(h);
    return h->ndone >= n;
}

bool th_wait_until(bool (*cond)(void *arg), void *arg)
{
    uint64_t deadline = tb_mono_ms() + 10000;
    while (!cond(arg)) {
        if (tb_mono_ms() > deadline)
            return false;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return true;
}

int th_append(th_t *h, wal_topic_t *t, uint64_t seq0, uint32_t n, size_t payload_len)
{
    size_t want = h->ndone + 1;
    th_submit(h, t, seq0, n, payload_len);
    if (!th_wait(h, want))
        return -ETIMEDOUT;
    return h->done[want - 1].rc;
}

bool th_record_ok(const wal_record_t *r, size_t payload_len, uint64_t *seq)
{
    size_t pos = 0;
    wal_attr_t a;
    if (r->nattrs != 1 || !wal_record_attr_next(r, &pos, &a) || a.key_len != 3 || memcmp(a.key, "seq", 3) != 0 ||
        a.val_len == 0 || a.val_len > 20)
        return false;
    char num[24];
    memcpy(num, a.val, a.val_len);
    num[a.val_len] = '\0';
    uint64_t s = strtoull(num, NULL, 10);
    th_msgbuf_t mb;
    const wal_msg_t *m = th_msg(&mb, s, payload_len);
    if (r->payload_len != m->payload_len || memcmp(r->payload, m->payload, m->payload_len) != 0 ||
        r->mqtt_topic_len != m->mqtt_topic_len || memcmp(r->mqtt_topic, m->mqtt_topic, m->mqtt_topic_len) != 0 ||
        r->publish_time_ms != m->publish_time_ms || r->qos != m->qos || r->retain != m->retain ||
        r->has_schema != m->has_schema || (r->has_schema && (r->schema_id != s || r->schema_version != 2)))
        return false;
    *seq = s;
    return true;
}

long th_read_all(wal_topic_t *t, uint64_t from, size_t payload_len, uint64_t *out, size_t max, int *gaps)
{
    wal_reader_t *r;
    if (wal_reader_open(t, from, &r) != 0)
        return -1;
    long n = 0;
    if (gaps)
        *gaps = 0;
    for (;;) {
        wal_record_t rec;
        int rc = wal_reader_next(r, &rec);
        if (rc == WAL_END)
            break;
        if (rc == WAL_GAP) {
            if (gaps)
                (*gaps)++;
            continue;
        }
        uint64_t seq;
        if (rc != 0 || !th_record_ok(&rec, payload_len, &seq)) {
            n = -1;
            break;
        }
        if ((size_t)n < max)
            out[n] = seq;
        n++;
    }
    wal_reader_close(r);
    return n;
}

int th_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

char *th_topic_dir(th_t *h, const char *encoded)
{
    return tb_asprintf("%s/%s", h->wal_dir, encoded);
}

long th_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

void th_rmrf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int th_fork_life(void (*body)(int fd, void *arg), void *arg, void *buf, size_t rec_size, size_t cap, size_t *n)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        body(p[1], arg);
        _exit(100); /* body returned: reported as exit status 100 */
    }
    close(p[1]);
    uint8_t rec[256];
    cr_assert_leq(rec_size, sizeof rec);
    while (read(p[0], rec, rec_size) == (ssize_t)rec_size)
        if (*n < cap)
            memcpy((uint8_t *)buf + (*n)++ * rec_size, rec, rec_size);
    close(p[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

void *th_follow(void *arg)
{
    th_follower_t *f = arg;
    wal_reader_t *r;
    if (wal_reader_open(f->t, 1, &r) != 0) {
        f->in_order = false;
        return NULL;
    }
    f->in_order = true;
    uint64_t deadline = tb_mono_ms() + 20000;
    while (f->got < f->want && tb_mono_ms() < deadline) {
        wal_record_t rec;
        int rc = wal_reader_next(r, &rec);
        if (rc == WAL_END) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL); /* polls the readable end; the deadline bounds the wait */
            continue;
        }
        uint64_t seq;
        if (rc != 0 || rec.offset != f->got + 1 || !th_record_ok(&rec, f->payload_len, &seq) || seq != f->got) {
            f->in_order = false;
            break;
        }
        f->got++;
    }
    wal_reader_close(r);
    return NULL;
}

wal_topic_t *th_topic(th_t *h, const char *name)
{
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h->w, name, &t), 0, "wal_topic_open %s", name);
    return t;
}

void th_fill(th_t *h, wal_topic_t *t, int batches, uint32_t per_batch, size_t payload_len, uint64_t *seq)
{
    for (int i = 0; i < batches; i++) {
        cr_assert_eq(th_append(h, t, *seq, per_batch, payload_len), 0, "%s batch %d", wal_topic_name(t), i);
        *seq += per_batch;
    }
}
