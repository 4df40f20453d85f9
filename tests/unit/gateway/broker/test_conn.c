/*
 * A connection through the transport seam (broker_int.h, TRANSPORT): what
 * the broker writes, and what it does when the transport cannot write.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

/* MQTT 3.1.1 CONNECT, clean session, keep alive 60, client id "c1" */
static const uint8_t CONNECT[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 2, 'c', '1' };
static const uint8_t CONNACK[] = { 0x20, 2, 0, 0 };

/* QoS 1 PUBLISH to t/x, packet id `id`, payload "hi" */
static void publish(fake_t *f, uint8_t id)
{
    const uint8_t p[] = { 0x32, 9, 0, 3, 't', '/', 'x', 0, id, 'h', 'i' };
    fake_send(f, p, sizeof p);
}

static bool has_bytes(const fake_t *f, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i + n <= f->out.len; i++)
        if (memcmp(f->out.data + i, p, n) == 0)
            return true;
    return false;
}

static bool has_puback(const fake_t *f, uint8_t id)
{
    const uint8_t a[] = { 0x40, 2, 0, id };
    return has_bytes(f, a, sizeof a);
}

typedef struct { fake_t *f; uint8_t id; } ack_wait_t;
static bool acked(void *arg)
{
    ack_wait_t *w = arg;
    return has_puback(w->f, w->id);
}
static bool connacked(void *arg)
{
    return has_bytes(arg, CONNACK, sizeof CONNACK);
}
static bool closed(void *arg)
{
    return ((fake_t *)arg)->released;
}
typedef struct { hb_t *h; uint64_t n; } stored_wait_t;
static bool stored(void *arg)
{
    stored_wait_t *w = arg;
    return broker_topic(w->h->b, 0)->stored >= w->n;
}

Test(conn, replies_go_out_through_the_transport_in_order)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    fake_conn(&h, &f);
    cr_assert(f.reading, "a started connection reads");
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000), "no CONNACK");
    publish(&f, 1);
    publish(&f, 2);
    ack_wait_t w = { &f, 2 };
    cr_assert(hb_run_until(&h, acked, &w, 3000), "no PUBACK 2");
    const uint8_t both[] = { 0x20, 2, 0, 0, 0x40, 2, 0, 1, 0x40, 2, 0, 2 };
    cr_assert_eq(f.out.len, sizeof both);
    cr_assert_eq(memcmp(f.out.data, both, sizeof both), 0, "CONNACK, PUBACK 1, PUBACK 2, in that order");
    hb_close(&h);
    cr_assert(f.released, "the drain closed the connection and the transport released it");
    fake_free(&f);
}

Test(conn, a_write_the_transport_refuses_closes_the_connection_logged_and_counted)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    publish(&f, 1);
    ack_wait_t w1 = { &f, 1 };
    cr_assert(hb_run_until(&h, acked, &w1, 3000));
    size_t before = f.out.len;

    f.fail_writes = UV_EPIPE; /* the socket is gone: the next write fails */
    publish(&f, 2);
    cr_assert(hb_run_until(&h, closed, &f, 3000), "a failed write must close the connection");
    broker_stats_t st;
    broker_stats(h.b, &st);
    cr_assert_eq(st.closed[METRICS_CLOSE_WRITE_ERROR], 1, "counted in closed_total{reason=write_error}");
    cr_assert_eq(st.connections, 0);
    cr_assert(hb_log_has(&h, "cannot write to it"), "the close is logged with its reason");
    cr_assert(hb_log_has(&h, "Broken pipe"), "the log names the error");
    cr_assert_eq(f.out.len, before, "nothing of the failed write counts as sent");
    cr_assert(!has_puback(&f, 2), "message 2 stays unacknowledged: the client resends it");
    /* ...and it was stored: the resend is a duplicate, never a loss */
    stored_wait_t sw = { &h, 2 };
    cr_assert(hb_run_until(&h, stored, &sw, 3000));
    hb_close(&h);
    fake_free(&f);
}

Test(conn, a_write_that_fails_later_closes_the_connection_the_same_way)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    broker_conn_t *c = fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    broker__conn_tx_failed(c, UV_ECONNRESET); /* what tcp.c reports from uv_write's callback */
    cr_assert(f.closed);
    cr_assert(hb_run_until(&h, closed, &f, 3000));
    broker_stats_t st;
    broker_stats(h.b, &st);
    cr_assert_eq(st.closed[METRICS_CLOSE_WRITE_ERROR], 1);
    cr_assert(hb_log_has(&h, "cannot write to it"));
    hb_close(&h);
    fake_free(&f);
}

Test(conn, a_partial_packet_is_counted_while_held_and_given_back_when_the_connection_goes)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    broker_conn_t *c = fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    const uint8_t head[] = { 0x30, 0x80, 0x20, 0, 3, 't', '/', 'x' }; /* a 4096-byte PUBLISH begins */
    fake_send(&f, head, sizeof head);
    cr_assert_gt(h.b->partial_bytes, 0, "its buffer is counted in mqtt.max_partial_bytes");
    cr_assert_eq(h.b->partial_bytes, c->mem);
    cr_assert_gt(c->partial_since_ms, 0, "mqtt.packet_timeout_ms runs from now");
    broker__conn_close(c, 0, "test");
    hb_close(&h); /* asserts the count is back to 0 */
    fake_free(&f);
}

Test(conn, a_write_that_fails_while_closing_closes_once)
{
    /* close flushes what is queued; that write failing used to close the
     * connection a second time from inside the first close: it left the
     * list twice and was counted as releasing twice, so a drain never ended */
    hb_t h;
    hb_open(&h);
    fake_t f;
    broker_conn_t *c = fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    const uint8_t ping[] = { 0xC0, 0 };
    fake_send(&f, ping, sizeof ping); /* its PINGRESP waits for the end of the loop turn */
    f.fail_writes = UV_ECONNRESET;
    broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "test");
    cr_assert_eq(h.b->nreleasing, 1, "closed once");
    cr_assert(hb_run_until(&h, closed, &f, 3000));
    hb_close(&h); /* the drain ends; nothing left counted */
    fake_free(&f);
}
