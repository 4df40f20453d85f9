/*
 * The output seam (broker.h): broker_on_stored tells whoever reads the log
 * that a topic has new readable records, once per completed batch of an
 * upstream topic, and never for the local logs (the session journal).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

typedef struct {
    int calls[4];
    int other;
} seen_t;

static void on_stored(void *arg, size_t topic)
{
    seen_t *s = arg;
    if (topic < 4)
        s->calls[topic]++;
    else
        s->other++;
}

static const uint8_t CONNECT[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x00, 0, 60, 0, 2, 'c', '1' }; /* persistent */

typedef struct { hb_t *h; uint64_t n; } stored_wait_t;
static bool stored(void *arg)
{
    stored_wait_t *w = arg;
    return broker_topic(w->h->b, 0)->stored >= w->n;
}
static bool connacked(void *arg)
{
    return ((fake_t *)arg)->out.len >= 4;
}

Test(on_stored, an_output_hears_of_each_stored_batch_of_its_topic_and_of_nothing_else)
{
    hb_t h;
    hb_open(&h);
    seen_t seen = { 0 };
    broker_on_stored(h.b, on_stored, &seen);
    fake_t f;
    fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT); /* a persistent session: a journal record is written too */
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    const uint8_t pub[] = { 0x30, 7, 0, 3, 't', '/', 'x', 'h', 'i' }; /* QoS 0 */
    fake_send(&f, pub, sizeof pub);
    stored_wait_t one = { &h, 1 };
    cr_assert(hb_run_until(&h, stored, &one, 3000));
    cr_assert_geq(seen.calls[0], 1, "topic 0 had a batch stored");
    cr_assert_eq(seen.calls[0], (int)broker_topic(h.b, 0)->batches[METRICS_BATCH_TIMEOUT] +
                                    (int)broker_topic(h.b, 0)->batches[METRICS_BATCH_IDLE] +
                                    (int)broker_topic(h.b, 0)->batches[METRICS_BATCH_FULL],
                 "once per completed batch");
    cr_assert_eq(seen.other, 0, "the session journal is not an upstream topic");

    broker_on_stored(h.b, NULL, NULL); /* nobody listens any more */
    int before = seen.calls[0];
    fake_send(&f, pub, sizeof pub);
    stored_wait_t two = { &h, 2 };
    cr_assert(hb_run_until(&h, stored, &two, 3000));
    hb_close(&h);
    cr_assert_eq(seen.calls[0], before);
    fake_free(&f);
}
