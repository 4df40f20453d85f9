/*
 * pace.c: how long a quiet client is waited for before its batch goes.
 *
 * With wal.fsync always every batch costs one fdatasync, and every sync
 * that ends inside a page writes that page again with the next one: on a
 * flash card the number of syncs is the wear. A batch is submitted when it
 * is full (batch_size), when it is old (batch_timeout_ms), or when nothing
 * more is coming soon: every client with a message in it has gone quiet.
 * Acks wait for the log, so a client whose window is full stops sending
 * until the batch goes; "quiet" is how the gateway, which does not know a
 * 3.1.1 client's window, tells that such a client is waiting on it.
 *
 * DESIGN. A fixed quiet time (mqtt.ingestion.idle_flush_ms, 2 ms) cannot
 * tell a waiting client from one between two messages of its own pace: ten
 * clients publishing every 5 ms leave the topic quiet for 2 ms often enough
 * that batches at 2,000 msg/s held ~77 messages instead of 100, 1.38x the
 * bytes of payload and record header written per message instead of 1.28x
 * (docs/WAL.md), and one client publishing every 5 ms had each message
 * synced alone. So each client's own pace is learnt: the gaps between its
 * PUBLISHes that had no ack from us in between (an ack may be what let it
 * send, and our own delay must not be learnt as its pace). A client that
 * sends at a steady pace without waiting for acks is waited for twice its
 * usual gap, clamped to [idle_flush_ms, idle_flush_max_ms]; any other
 * client (not measured, ack-clocked, or a will) for idle_flush_ms.
 *
 *  - Gaps of 0 ms (the same loop turn: one read, or a burst that catches up
 *    after a full window) teach nothing: they would pull the pace below the
 *    client's real gap and end its batches early again.
 *  - A client alone on a topic and slower than idle_flush_ms is acked
 *    before its next message every time, so it would never show a free gap.
 *    Such a client is probed: one of its messages is waited for
 *    idle_flush_max_ms. If its next PUBLISH comes before the ack, the gap
 *    is learnt; if not (a synchronous client, or one slower than the
 *    maximum), the probe cost that one message idle_flush_max_ms and the
 *    next probe is twice as far off (1 s after its first message, then
 *    2 s, 4 s ... at most 64 s; a success starts again at 1 s).
 *  - After BROKER_PACE_FORGET ack-separated gaps in a row a pace is forgotten,
 *    so a client that turns synchronous stops being waited for.
 *
 * What it costs: the acks of a paced client wait longer, up to the time it
 * takes to fill its window plus twice its gap instead of idle_flush_ms
 * (never past batch_timeout_ms). A client that queues what its window
 * cannot take yet (libmosquitto, paho) keeps its rate; its latency is what
 * buys the fewer syncs. A synchronous client pays idle_flush_max_ms once
 * per probe: one message a minute once it is known. With
 * idle_flush_max_ms <= idle_flush_ms nothing is learnt or probed and every
 * client is waited for idle_flush_ms.
 */
#include "gateway/broker/broker_int.h"

#define BROKER_PACE_FORGET 8
#define BROKER_PACE_PROBE_FIRST_MS 1000u
#define BROKER_PACE_PROBE_MAX_S 64u

void broker__pace_publish(broker_pace_t *p, uint64_t now_ms)
{
    if (!p->last_ms) {
        p->probe_at_ms = now_ms + BROKER_PACE_PROBE_FIRST_MS;
        p->probe_s = 1;
    } else if (!p->acked) {
        uint64_t gap = now_ms - p->last_ms;
        if (gap > 0) { /* a 0 ms gap (same turn) says nothing: a probe goes on */
            uint32_t g16 = gap >= (UINT32_MAX >> 5) ? (UINT32_MAX >> 1) : (uint32_t)gap << 4;
            /* moving average, weight 1/4: a changed pace is learnt in a few messages */
            p->gap_x16 = p->sampled ? p->gap_x16 - (p->gap_x16 >> 2) + (g16 >> 2) : g16;
            p->sampled = true;
            p->probe_s = 1;
            p->probing = false;
        }
        p->clocked = 0;
    } else {
        if (p->probing) { /* nothing came while we waited: it waits for us */
            p->probing = false;
            p->probe_s = (uint8_t)TB_MIN(2u * p->probe_s, BROKER_PACE_PROBE_MAX_S);
            p->probe_at_ms = now_ms + 1000u * p->probe_s;
        }
        if (p->sampled && ++p->clocked >= BROKER_PACE_FORGET) {
            p->sampled = false;
            p->clocked = 0;
            p->probe_at_ms = now_ms + 1000u * p->probe_s;
        }
    }
    p->last_ms = now_ms;
    p->acked = false;
}

void broker__pace_acked(broker_pace_t *p)
{
    p->acked = true;
}

uint64_t broker__pace_quiet_ms(broker_pace_t *p, uint64_t now_ms, uint32_t idle_ms, uint32_t max_ms)
{
    if (!p || max_ms <= idle_ms)
        return idle_ms;
    if (!p->sampled) {
        if (!p->probing && p->last_ms && now_ms >= p->probe_at_ms)
            p->probing = true;
        return p->probing ? max_ms : idle_ms;
    }
    uint64_t twice = ((uint64_t)p->gap_x16 * 2 + 15) >> 4; /* rounded up to the loop's milliseconds */
    return TB_MIN(TB_MAX(twice, (uint64_t)idle_ms), (uint64_t)max_ms);
}
