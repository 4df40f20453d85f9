/*
 * test_on_full_block.c: on_full block at the broker, on the fake transport.
 * A topic's log at its bound holds the batches (wal/overflow.c); the
 * connection that publishes to it is then neither processed nor read (what
 * it sends meanwhile waits in its input buffer), while a connection that
 * publishes to another topic keeps being read and acknowledged. When the
 * checkpoint frees room the held messages are written in order, the paused
 * connection is read again, and every message it sent is stored: nothing
 * dropped, nothing refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

#define PAYLOAD 300
#define PER_CHUNK 10

static void small_log(wal_opts_t *o)
{
    o->segment_bytes = 4096;
    o->max_topic_bytes = 8192;
}

static const uint8_t CONNECT_A[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 2, 'c', 'a' };
static const uint8_t CONNECT_B[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 2, 'c', 'b' };

/* PER_CHUNK QoS 0 PUBLISHes to a/x of PAYLOAD bytes; returns the length. */
static size_t qos0_chunk(uint8_t *out)
{
    size_t n = 0;
    for (int i = 0; i < PER_CHUNK; i++) {
        size_t rem = 2 + 3 + PAYLOAD;
        out[n++] = 0x30;
        out[n++] = (uint8_t)(0x80 | (rem & 0x7f));
        out[n++] = (uint8_t)(rem >> 7);
        out[n++] = 0;
        out[n++] = 3;
        memcpy(out + n, "a/x", 3);
        n += 3;
        memset(out + n, 'a' + i, PAYLOAD);
        n += PAYLOAD;
    }
    return n;
}

static const uint8_t PUB_B[] = { 0x32, 9, 0, 3, 'b', '/', 'x', 0, 7, 'h', 'i' };

typedef struct ctx {
    broker_topic_t *a, *b;
    fake_t *fa, *fb;
    uint64_t stored;
} ctx_t;

static bool connacked(void *arg)
{
    return ((fake_t *)arg)->out.len >= 4;
}
static bool settled_or_blocked(void *arg)
{
    ctx_t *x = arg;
    return x->fa->c->blocked || wal_topic_blocked(x->a->wal) || x->a->batched == 0;
}
static bool b_acked(void *arg)
{
    return ((fake_t *)arg)->out.len >= 4 + 4;
}
static bool a_progress(void *arg)
{
    ctx_t *x = arg;
    return x->a->stored > x->stored || x->a->stored == x->a->received;
}
static bool a_reading(void *arg)
{
    ctx_t *x = arg;
    return x->fa->reading && !x->fa->c->blocked && x->a->batched == 0;
}

Test(on_full_block, a_publisher_of_a_blocked_topic_is_not_read_another_topics_is_and_both_resume)
{
    hb_wal_tune = small_log;
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a, on_full: block}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b}\n",
                              err, sizeof err);
    hb_wal_tune = NULL;
    cr_assert_eq(rc, 0, "%s", err);
    ctx_t x = { .a = broker__topic(h.b, "/edge1/a"), .b = broker__topic(h.b, "/edge1/b") };
    cr_assert_eq(wal_topic_overflow(x.a->wal), WAL_OVERFLOW_BLOCK);
    fake_t fa, fb;
    fake_conn(&h, &fa);
    fake_conn(&h, &fb);
    x.fa = &fa;
    x.fb = &fb;
    fake_send(&fa, CONNECT_A, sizeof CONNECT_A);
    fake_send(&fb, CONNECT_B, sizeof CONNECT_B);
    cr_assert(hb_run_until(&h, connacked, &fa, 3000));
    cr_assert(hb_run_until(&h, connacked, &fb, 3000));

    /* a QoS 0 flood to a until the log holds it and a is paused */
    static uint8_t chunk[PER_CHUNK * (PAYLOAD + 8)];
    size_t n = qos0_chunk(chunk);
    int chunks = 0;
    while (!fa.c->blocked && chunks < 100) {
        fake_send(&fa, chunk, n);
        chunks++;
        cr_assert(hb_run_until(&h, settled_or_blocked, &x, 3000));
    }
    cr_assert(fa.c->blocked, "the publisher of the full topic is paused");
    cr_assert(wal_topic_blocked(x.a->wal));
    cr_assert_not(fa.reading, "and its socket is not read");
    cr_assert_gt(x.a->blocked_pauses, 0);
    uint64_t received = x.a->received;
    cr_assert_lt(received, (uint64_t)chunks * PER_CHUNK, "what it sent after the blocking PUBLISH waits unprocessed");
    /* it sends more meanwhile: buffered, not processed */
    fake_send(&fa, chunk, n);
    chunks++;

    /* another topic's publisher goes on: read, stored, acknowledged */
    fake_send(&fb, PUB_B, sizeof PUB_B);
    cr_assert(hb_run_until(&h, b_acked, &fb, 3000), "the other topic's publisher gets its PUBACK");
    const uint8_t *ack = (const uint8_t *)fb.out.data + 4;
    cr_assert_eq(ack[0], 0x40);
    cr_assert_eq(ack[3], 7);
    cr_assert(fb.reading, "and is read");
    cr_assert_not(fb.c->blocked);
    cr_assert_eq(x.b->stored, 1);
    cr_assert_eq(x.a->received, received, "the paused publisher's buffered messages were not processed");
    cr_assert(fa.c->blocked);

    /* the cluster acknowledges what is stored: room returns, the held batches go, a is read again */
    uint64_t deadline = tb_mono_ms() + 10000;
    while ((x.a->stored < (uint64_t)chunks * PER_CHUNK || !a_reading(&x)) && tb_mono_ms() < deadline) {
        uint64_t end = wal_topic_readable_end(x.a->wal);
        if (end > 0)
            cr_assert_eq(wal_checkpoint(x.a->wal, end - 1), 0);
        x.stored = x.a->stored;
        hb_run_until(&h, a_progress, &x, 1000);
        hb_run_until(&h, a_reading, &x, 100);
    }
    cr_assert_eq(x.a->stored, (uint64_t)chunks * PER_CHUNK, "every message of the paused publisher is stored");
    cr_assert_eq(x.a->received, x.a->stored);
    cr_assert(a_reading(&x), "and it is read again");
    cr_assert_eq(x.a->rejected[BROKER_REJ_FULL], 0, "block refuses nothing");
    wal_topic_stats_t st;
    wal_topic_stats(x.a->wal, &st);
    cr_assert_eq(st.dropped_total, 0, "block drops nothing");
    cr_assert_not(fa.closed);
    hb_close(&h);
    fake_free(&fa);
    fake_free(&fb);
}

Test(on_full_block, a_drain_does_not_wait_for_room_the_waiting_messages_are_refused_unacknowledged)
{
    hb_wal_tune = small_log;
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "", "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a, on_full: block}\n"
                                      "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b}\n",
                              err, sizeof err);
    hb_wal_tune = NULL;
    cr_assert_eq(rc, 0, "%s", err);
    ctx_t x = { .a = broker__topic(h.b, "/edge1/a"), .b = broker__topic(h.b, "/edge1/b") };
    fake_t fa;
    fake_conn(&h, &fa);
    x.fa = &fa;
    fake_send(&fa, CONNECT_A, sizeof CONNECT_A);
    cr_assert(hb_run_until(&h, connacked, &fa, 3000));
    static uint8_t chunk[PER_CHUNK * (PAYLOAD + 8)];
    size_t n = qos0_chunk(chunk);
    for (int chunks = 0; !fa.c->blocked && chunks < 100; chunks++) {
        fake_send(&fa, chunk, n);
        cr_assert(hb_run_until(&h, settled_or_blocked, &x, 3000));
    }
    cr_assert(fa.c->blocked);
    uint64_t t0 = tb_mono_ms();
    hb_close(&h); /* drains: asserts it finished, every connection released */
    cr_assert_lt(tb_mono_ms() - t0, 4000, "the drain did not wait for room");
    fake_free(&fa);
}
