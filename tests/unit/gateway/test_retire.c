/*
 * gateway/retire.c's one pure rule (RELOAD.md 4.3 step 1): a topic no
 * mapping routes to is drained only when nothing of it waits anywhere: not
 * in the broker (open batch, batches at the writer, publishers blocked for
 * room) and not in its log (the checkpoint, the minimum over every active
 * output's cursor, short of the last offset; the memory tier holding some).
 * The flow around it (release, wal_topic_retire, re-creation) runs against
 * the real binary in tests/integration/test_retire.py.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "gateway/gateway_int.h"

static broker_topic_t quiet(void)
{
    broker_topic_t t;
    memset(&t, 0, sizeof t);
    return t;
}

static wal_topic_stats_t log_at(uint64_t next, uint64_t checkpoint)
{
    wal_topic_stats_t ws;
    memset(&ws, 0, sizeof ws);
    ws.next_offset = next;
    ws.checkpoint = checkpoint;
    return ws;
}

Test(retire, drained_when_the_checkpoint_passed_the_last_offset)
{
    broker_topic_t t = quiet();
    wal_topic_stats_t ws = log_at(101, 100);
    cr_assert(gw__retire_drained(&t, &ws), "offsets 1..100, checkpoint 100");
    ws = log_at(1, 0);
    cr_assert(gw__retire_drained(&t, &ws), "a topic that never had a message");
    ws = log_at(101, 99);
    cr_assert_not(gw__retire_drained(&t, &ws), "offset 100 not acknowledged by every output yet");
}

Test(retire, not_drained_while_the_broker_or_the_memory_tier_holds_some)
{
    wal_topic_stats_t ws = log_at(101, 100);
    broker_topic_t t = quiet();
    t.inflight = 1; /* the batch flushed at the swap, not completed: its offsets are not in next yet */
    cr_assert_not(gw__retire_drained(&t, &ws));
    t = quiet();
    t.batch = (wal_batch_t *)&t; /* any non-NULL: an open batch */
    cr_assert_not(gw__retire_drained(&t, &ws));
    t = quiet();
    t.nwaiters = 1; /* on_full block: a publisher waiting for room */
    cr_assert_not(gw__retire_drained(&t, &ws));
    t = quiet();
    ws.held_msgs = 3; /* memory_first: held, answered or not, not in the log's checkpoint yet */
    cr_assert_not(gw__retire_drained(&t, &ws));
}

Test(retire, every_life_has_a_name)
{
    for (int l = 0; l < BROKER_LIFE__COUNT; l++)
        cr_assert_str_neq(broker_topic_life_name((broker_topic_life_t)l), "?");
    cr_assert_str_eq(broker_topic_life_name(BROKER_LIFE__COUNT), "?");
}
