/*
 * broker_quiesce and broker_unquiesce (server.c; POST /admin/drain and its
 * cancel, RELOAD.md 6.4): the listener closes, a PUBLISH read before is
 * still acknowledged, then the connection gets DISCONNECT 0x8B and the
 * callback runs; broker_unquiesce refuses before (EINVALID) and opens the
 * listener again after; broker_drain afterwards (hb_close) finds nothing
 * open. Real log, fake transport, a real listener on 127.0.0.1:0.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

static const uint8_t CONNECT5[] = { 0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60, 0, 0, 2, 'c', '1' };
/* QoS 1 PUBLISH to t/x (mapped to /edge1/t), packet id 7, no properties, payload "hi" */
static const uint8_t PUB5[] = { 0x32, 10, 0, 3, 't', '/', 'x', 0, 7, 0, 'h', 'i' };

static bool flag(void *arg)
{
    return *(bool *)arg;
}

static void set(void *arg)
{
    *(bool *)arg = true;
}

static bool connacked(void *arg)
{
    const fake_t *f = arg;
    return f->out.len >= 2 && f->out.data[0] == 0x20;
}

/* a packet of type byte t0 whose variable header starts with b0 b1 (b1 < 0: one byte) was written */
static bool wrote(const fake_t *f, uint8_t t0, int b0, int b1)
{
    const uint8_t *o = (const uint8_t *)f->out.data;
    for (size_t i = 0; i + 3 < f->out.len + 1 && i + 2 < f->out.len; i++)
        if (o[i] == t0 && o[i + 2] == b0 && (b1 < 0 || (i + 3 < f->out.len && o[i + 3] == b1)))
            return true;
    return false;
}

static bool closed(void *arg)
{
    return ((fake_t *)arg)->closed;
}

Test(quiesce, answers_what_was_read_closes_with_0x8b_and_unquiesce_listens_again)
{
    hb_t h;
    hb_open_with(&h, "  listener: \"127.0.0.1:0\"\n");
    cr_assert_eq(broker_listen(h.b), 0);
    cr_assert_not_null(broker_listener_addr(h.b, 0));
    cr_assert_eq(broker_unquiesce(h.b), TB_EINVALID, "not quiesced");
    fake_t f;
    fake_conn(&h, &f);
    h.fakes[h.nfakes++] = &f;
    fake_send(&f, CONNECT5, sizeof CONNECT5);
    cr_assert(hb_run_until(&h, connacked, &f, 5000));
    fake_send(&f, PUB5, sizeof PUB5); /* read, its batch not yet written (batch_timeout_ms 5) */
    bool done = false;
    broker_quiesce(h.b, set, &done);
    cr_assert_null(broker_listener_addr(h.b, 0), "the listener closes at once");
    broker_stats_t bs;
    broker_stats(h.b, &bs);
    cr_assert_not(bs.listening);
    cr_assert_eq(broker_unquiesce(h.b), TB_EBUSY, "still closing: nothing changes");
    cr_assert(hb_run_until(&h, flag, &done, 5000), "the quiesce completes");
    cr_assert(wrote(&f, 0x40, 0, 7), "the PUBLISH read before was acknowledged (PUBACK id 7)");
    cr_assert(wrote(&f, 0xE0, 0x8B, -1), "DISCONNECT 0x8B (server shutting down)");
    cr_assert(hb_run_until(&h, closed, &f, 5000));
    bool again = false;
    broker_quiesce(h.b, set, &again); /* once: a second call changes nothing */
    cr_assert_not(again);
    /* the cancel: a new listener once the old one's close callback ran */
    int rc = TB_EBUSY;
    for (int i = 0; i < 100 && rc == TB_EBUSY; i++) {
        hb_run_until(&h, flag, &again, 10);
        rc = broker_unquiesce(h.b);
    }
    cr_assert_eq(rc, 0, "%s", tb_strerror(rc));
    cr_assert_not_null(broker_listener_addr(h.b, 0), "listening again");
    broker_stats(h.b, &bs);
    cr_assert(bs.listening);
    hb_close(&h);
    fake_free(&f);
}
