/*
 * rep_backoff.c: how long to wait before trying again.
 *
 * Two schedules share one shape, a cap that doubles from initial_ms to
 * max_ms with each failure and resets on success:
 *   - full jitter (streams: 100 ms doubling to 30 s): the delay is uniform
 *     in [0, cap], so topics that failed together (one cluster outage
 *     breaks every stream at once) do not come back in lockstep;
 *   - equal jitter (RegisterEdge: 1 s doubling to 60 s): uniform in
 *     [cap/2, cap], so the schedule an operator reads in the log still
 *     visibly doubles while two edges rebooted together still drift apart.
 * The random source is a per-replicator xorshift64* (seeded from the
 * clock and the pid): jitter needs spread, not secrecy, and a private
 * state keeps the functions pure and testable.
 */
#include "replicator/rep_int.h"

uint64_t rep__rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint32_t rep__backoff_cap(const rep__backoff_t *b)
{
    uint64_t cap = b->initial_ms;
    for (uint32_t i = 0; i < b->attempt && cap < b->max_ms; i++)
        cap *= 2;
    return (uint32_t)TB_MIN(cap, (uint64_t)b->max_ms);
}

uint32_t rep__backoff_next(rep__backoff_t *b, uint64_t *rng)
{
    uint32_t cap = rep__backoff_cap(b);
    if (b->attempt < 64)
        b->attempt++;
    if (cap == 0)
        return 0;
    uint64_t r = rep__rand(rng);
    if (b->full_jitter)
        return (uint32_t)(r % ((uint64_t)cap + 1));
    uint32_t half = cap / 2;
    return half + (uint32_t)(r % ((uint64_t)(cap - half) + 1));
}

void rep__backoff_reset(rep__backoff_t *b)
{
    b->attempt = 0;
}

uint32_t rep__jitter(uint32_t ms, uint32_t pct, uint64_t *rng)
{
    uint64_t span = (uint64_t)ms * pct / 100;
    if (span == 0)
        return ms;
    uint64_t r = rep__rand(rng) % (2 * span + 1);
    return (uint32_t)((uint64_t)ms - span + r);
}
