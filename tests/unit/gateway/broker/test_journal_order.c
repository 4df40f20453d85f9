/*
 * The session journal's promises come after what they promise (ingest.c):
 * a journal batch saying STORED for a QoS 2 message reaches the log's
 * writer after the batch that holds the message, never before. The writer
 * writes and syncs a round's batches in the order they came, so a kill
 * between the two cannot leave a STORED whose message is missing (the
 * client's resend would then be answered as a duplicate, and lost).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

static const uint8_t CONNECT[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x00, 0, 60, 0, 2, 'c', '1' }; /* persistent */
static const uint8_t QOS2[] = { 0x34, 9, 0, 3, 't', '/', 'x', 0, 7, 'h', 'i' };                          /* id 7 */

static bool connacked(void *arg)
{
    return ((fake_t *)arg)->out.len >= 4;
}

static bool pubrec(void *arg)
{
    const fake_t *f = arg;
    return f->out.len >= 8 && ((const uint8_t *)f->out.data)[4] == 0x50;
}

Test(journal_order, a_stored_record_never_reaches_the_writer_before_its_message)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    fake_conn(&h, &f);
    fake_send(&f, CONNECT, sizeof CONNECT);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    broker_topic_t *t = broker_topic(h.b, 0);
    uint64_t flushed = t->batches[METRICS_BATCH_FLUSH];
    fake_send(&f, QOS2, sizeof QOS2); /* its message in t's open batch, its STORED in the journal's */
    cr_assert_not_null(t->batch, "the message waits in its topic's open batch (batch_timeout_ms)");
    cr_assert_not_null(h.b->journal->batch, "its STORED waits in the journal's");
    broker__ingest_flush(h.b->journal); /* the journal's batch goes first, on its own */
    cr_assert_null(t->batch, "the message's batch went to the writer before (or with) the journal's");
    cr_assert_eq(t->batches[METRICS_BATCH_FLUSH], flushed + 1);
    cr_assert(hb_run_until(&h, pubrec, &f, 3000), "and the PUBREC still comes");
    hb_close(&h);
    fake_free(&f);
}
