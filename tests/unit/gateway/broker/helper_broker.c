/* helper_broker.c: see helper_broker.h. */
#include "helper_broker.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void (*hb_wal_tune)(wal_opts_t *o);

static void tick_cb(uv_timer_t *t)
{
    (void)t;
}

void hb_open(hb_t *h)
{
    hb_open_with(h, "");
}

void hb_open_with(hb_t *h, const char *mqtt_extra)
{
    char err[512];
    int rc = hb_open_mappings(h, mqtt_extra, "    - {mqtt_pattern: \"t/#\", danube_topic: /edge1/t}\n", err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
}

int hb_open_mappings(hb_t *h, const char *mqtt_extra, const char *mappings, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "/tmp/tb_broker_XXXXXX");
    cr_assert_not_null(mkdtemp(h->dir));
    snprintf(h->logpath, sizeof h->logpath, "%s.log", h->dir);
    h->logfd = open(h->logpath, O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0600);
    cr_assert_geq(h->logfd, 0);
    tb_log_setup(TB_LOG_DEBUG, TB_LOG_TEXT, h->logfd);
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
             "mqtt:\n"
             "  ingestion: {batch_timeout_ms: 5}\n"
             "%s"
             "  topic_mappings:\n"
             "%s"
             "wal: {dir: \"%s/wal\", fsync: never}\n",
             mqtt_extra, mappings, h->dir);
    cr_assert_eq(cfg_load_string("test", yaml, strlen(yaml), NULL, &h->cfg, err, errlen), 0, "%s", err);
    cr_assert_eq(uv_loop_init(&h->loop), 0);
    uv_timer_init(&h->loop, &h->tick);
    cr_assert_eq(broker_new(&h->loop, &h->b), 0);
    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = h->cfg->wal.dir;
    o.fsync = WAL_FSYNC_NEVER;
    o.notify = broker_wal_notify;
    o.notify_arg = h->b;
    if (hb_wal_tune)
        hb_wal_tune(&o);
    cr_assert_eq(wal_open(&o, &h->wal), 0);
    return broker_init(h->b, h->cfg, h->wal, err, errlen);
}

bool hb_run_until(hb_t *h, bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    uint64_t deadline = tb_mono_ms() + (uint64_t)timeout_ms;
    uv_timer_start(&h->tick, tick_cb, 5, 5);
    bool ok;
    while (!(ok = cond(arg)) && tb_mono_ms() < deadline)
        uv_run(&h->loop, UV_RUN_ONCE);
    uv_timer_stop(&h->tick);
    return ok;
}

static bool flag(void *arg)
{
    return *(bool *)arg;
}

static void drained(void *arg)
{
    *(bool *)arg = true;
}

static void close_rest(uv_handle_t *handle, void *arg)
{
    (void)arg;
    if (!uv_is_closing(handle))
        uv_close(handle, NULL);
}

void hb_close(hb_t *h)
{
    bool done = false;
    broker_drain(h->b, drained, &done);
    cr_assert(hb_run_until(h, flag, &done, 5000), "the broker did not drain");
    for (int i = 0; i < h->nfakes; i++)
        cr_assert(hb_run_until(h, flag, &h->fakes[i]->released, 5000), "a connection was never released");
    cr_assert_eq(h->b->partial_bytes, 0, "partial packets and aliases not given back: %llu bytes",
                 (unsigned long long)h->b->partial_bytes);
    cr_assert_eq(h->b->nreleasing, 0, "a closed connection still counted as releasing");
    cr_assert_eq(wal_close(h->wal), 0);
    done = false;
    broker_close(h->b, drained, &done);
    uv_walk(&h->loop, close_rest, NULL); /* the tick and the fakes' timers */
    uv_run(&h->loop, UV_RUN_DEFAULT);
    cr_assert(done, "broker_close did not call back");
    cr_assert_eq(uv_loop_close(&h->loop), 0, "a handle was left open");
    cfg_free(h->cfg);
    tb_log_setup(TB_LOG_INFO, TB_LOG_TEXT, 2);
    close(h->logfd);
    unlink(h->logpath);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", h->dir);
    cr_assert_eq(system(cmd), 0);
}

bool hb_log_has(hb_t *h, const char *s)
{
    FILE *f = fopen(h->logpath, "r");
    cr_assert_not_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, s) != NULL;
    fclose(f);
    return found;
}

/* ---- the fake transport ---- */

static void fake_accept(broker_t *srv, uv_stream_t *server)
{
    (void)srv;
    (void)server;
    cr_assert_fail("the fake transport has no listener");
}

static int fake_read_start(broker_conn_t *c)
{
    ((fake_t *)c->tp_state)->reading = true;
    return 0;
}

static void fake_read_stop(broker_conn_t *c)
{
    ((fake_t *)c->tp_state)->reading = false;
}

static int fake_write(broker_conn_t *c, const uint8_t *p, size_t n)
{
    fake_t *f = c->tp_state;
    if (f->fail_writes)
        return f->fail_writes;
    tb_buf_append(&f->out, p, n);
    return 0;
}

static size_t fake_queued(const broker_conn_t *c)
{
    (void)c;
    return 0;
}

static void release_cb(uv_timer_t *t)
{
    fake_t *f = t->data;
    f->released = true;
    broker__conn_released(f->c);
}

static void fake_close(broker_conn_t *c)
{
    fake_t *f = c->tp_state;
    cr_assert(!f->closed, "close called twice");
    f->closed = true;
    uv_timer_start(&f->release, release_cb, 0, 0); /* released from a later loop turn, as the contract says */
}

static const broker_transport_t fake_tp = {
    .name = "fake",
    .accept = fake_accept,
    .read_start = fake_read_start,
    .read_stop = fake_read_stop,
    .write = fake_write,
    .queued = fake_queued,
    .close = fake_close,
};

broker_conn_t *fake_conn(hb_t *h, fake_t *f)
{
    memset(f, 0, sizeof *f);
    cr_assert_lt(h->nfakes, (int)TB_ARRAY_LEN(h->fakes));
    h->fakes[h->nfakes++] = f;
    uv_timer_init(&h->loop, &f->release);
    f->release.data = f;
    broker_conn_t *c = broker__conn_new(h->b, &fake_tp);
    c->tp_state = f;
    f->c = c;
    broker__conn_start(c, NULL); /* no address: "?" in the logs */
    return c;
}

void fake_send(fake_t *f, const void *p, size_t n)
{
    uv_buf_t b;
    broker__conn_rx_buf(f->c, &b);
    cr_assert_geq(b.len, n);
    memcpy(b.base, p, n);
    broker__conn_rx(f->c, &b, (ssize_t)n);
}

void fake_free(fake_t *f)
{
    tb_buf_free(&f->out);
}
