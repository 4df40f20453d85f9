/* helper_rep.c: the shared scaffolding declared in helper_rep.h. */
#include "helper_rep.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void notify(void *arg)
{
    rt_t *h = arg;
    pthread_mutex_lock(&h->mu);
    h->done = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void rt_open(rt_t *h)
{
    rt_open_bounded(h, 0, 0);
}

void rt_open_bounded(rt_t *h, uint64_t segment_bytes, uint64_t max_topic_bytes)
{
    memset(h, 0, sizeof *h);
    tb_log_set_level(getenv("REP_TEST_LOG") ? TB_LOG_DEBUG : TB_LOG_OFF);
    const char *tmp = getenv("TMPDIR");
    char *tmpl = tb_asprintf("%s/rept-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    h->dir = mkdtemp(tmpl);
    cr_assert_not_null(h->dir);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    wal_opts_t o;
    wal_opts_default(&o);
    char *wdir = tb_asprintf("%s/wal", h->dir);
    o.dir = wdir;
    o.fsync = WAL_FSYNC_NEVER;
    if (segment_bytes)
        o.segment_bytes = segment_bytes;
    if (max_topic_bytes)
        o.max_topic_bytes = max_topic_bytes;
    o.notify = notify;
    o.notify_arg = h;
    cr_assert_eq(wal_open(&o, &h->w), 0);
    free(wdir);
    cr_assert_eq(wal_topic_open(h->w, RT_TOPIC, &h->t), 0);
    h->enc = (rep__enc_t){
        .topic = RT_TOPIC, .topic_len = strlen(RT_TOPIC), .producer = RT_PRODUCER,
        .producer_len = strlen(RT_PRODUCER), .batch_size = 100, .max_bytes = 1 << 20,
        .live_window_ms = 2000, .live_base = 1,
    };
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void rt_reopen(rt_t *h)
{
    for (wal_batch_t *b = wal_take_done(h->w), *n; b; b = n) {
        n = wal_batch_next(b);
        wal_batch_free(b);
    }
    cr_assert_eq(wal_close(h->w), 0);
    wal_opts_t o;
    wal_opts_default(&o);
    char *wdir = tb_asprintf("%s/wal", h->dir);
    o.dir = wdir;
    o.fsync = WAL_FSYNC_NEVER;
    o.notify = notify;
    o.notify_arg = h;
    cr_assert_eq(wal_open(&o, &h->w), 0);
    free(wdir);
    cr_assert_eq(wal_topic_open(h->w, RT_TOPIC, &h->t), 0);
}

void rt_close(rt_t *h)
{
    for (wal_batch_t *b = wal_take_done(h->w), *n; b; b = n) {
        n = wal_batch_next(b);
        wal_batch_free(b);
    }
    cr_assert_eq(wal_close(h->w), 0);
    nftw(h->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(h->dir);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

/* Submits b and waits (10 s deadline) for its completion. */
static uint64_t submit_wait(rt_t *h, wal_batch_t *b)
{
    pthread_mutex_lock(&h->mu);
    h->done = false;
    pthread_mutex_unlock(&h->mu);
    wal_submit(b, NULL);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    uint64_t first = 0;
    for (;;) {
        wal_batch_t *d = wal_take_done(h->w);
        if (d) {
            const wal_completion_t *c = wal_batch_completion(d);
            cr_assert_eq(c->rc, 0, "append failed: %s", tb_strerror(c->rc));
            first = c->first_offset;
            cr_assert_null(wal_batch_next(d));
            wal_batch_free(d);
            return first;
        }
        pthread_mutex_lock(&h->mu);
        int rc = 0;
        while (!h->done && rc == 0)
            rc = pthread_cond_timedwait(&h->cv, &h->mu, &dl);
        h->done = false;
        pthread_mutex_unlock(&h->mu);
        cr_assert_eq(rc, 0, "no WAL completion within 10 s");
    }
}

uint64_t rt_append(rt_t *h, const rt_msg_t *m)
{
    wal_attr_t attrs[32];
    size_t n = 0;
    for (size_t i = 0; m->attrs && m->attrs[i]; i += 2, n++)
        attrs[n] = (wal_attr_t){ (const uint8_t *)m->attrs[i], strlen(m->attrs[i]), (const uint8_t *)m->attrs[i + 1],
                                 strlen(m->attrs[i + 1]) };
    wal_msg_t wm = {
        .payload = (const uint8_t *)m->payload,
        .payload_len = m->payload_len ? m->payload_len : (m->payload ? strlen(m->payload) : 0),
        .attrs = attrs, .nattrs = n,
        .mqtt_topic = "dev/1/tele", .mqtt_topic_len = 10,
        .publish_time_ms = m->publish_time_ms ? m->publish_time_ms : tb_wall_ms(),
        .qos = 1,
        .has_schema = m->has_schema, .schema_id = m->schema_id, .schema_version = m->schema_version,
    };
    wal_batch_t *b = wal_batch_new(h->t);
    cr_assert_eq(wal_batch_add(b, &wm), 0);
    return submit_wait(h, b);
}

void rt_append_n(rt_t *h, uint32_t n, size_t payload_len)
{
    static uint8_t payload[1 << 16];
    memset(payload, 'x', sizeof payload);
    wal_batch_t *b = wal_batch_new(h->t);
    uint64_t now = tb_wall_ms();
    for (uint32_t i = 0; i < n; i++) {
        wal_msg_t wm = { .payload = payload, .payload_len = payload_len, .mqtt_topic = "t", .mqtt_topic_len = 1,
                         .publish_time_ms = now };
        int rc = wal_batch_add(b, &wm);
        if (rc == TB_EFULL) {
            submit_wait(h, b);
            b = wal_batch_new(h->t);
            rc = wal_batch_add(b, &wm);
        }
        cr_assert_eq(rc, 0);
    }
    submit_wait(h, b);
}

void rt_src(rt_t *h, rep__src_t *s, uint64_t from)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(wal_reader_open(h->t, from, &s->rd), 0);
}

Danube__Edge__ReplicateBatch *rt_decode(const rep__batch_t *b)
{
    Danube__Edge__ReplicateBatch *d = danube__edge__replicate_batch__unpack(NULL, b->len, b->buf);
    cr_assert_not_null(d, "the batch does not decode with protobuf-c");
    return d;
}

const char *rt_attr(const Danube__StreamMessage *m, const char *key)
{
    for (size_t i = 0; i < m->n_attributes; i++)
        if (strcmp(m->attributes[i]->key, key) == 0)
            return m->attributes[i]->value;
    return NULL;
}
