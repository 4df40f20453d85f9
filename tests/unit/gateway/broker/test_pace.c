/* How long a batch waits for a quiet client (gateway/pace.c). */
#include <criterion/criterion.h>

#include "gateway/broker/broker_int.h"

#define PACE_IDLE 2
#define PACE_MAX 25

/* n PUBLISHes every gap ms from start, each preceded by an ack or not, each
 * asked for its quiet time as the batch would; returns the time of the last */
static uint64_t publish_every(broker_pace_t *p, uint64_t start, uint64_t gap, int n, bool acked)
{
    uint64_t t = start;
    for (int i = 0; i < n; i++, t += gap) {
        if (acked)
            broker__pace_acked(p);
        broker__pace_publish(p, t);
        broker__pace_quiet_ms(p, t, PACE_IDLE, PACE_MAX);
    }
    return t - gap;
}

static uint64_t quiet(broker_pace_t *p, uint64_t now)
{
    return broker__pace_quiet_ms(p, now, PACE_IDLE, PACE_MAX);
}

Test(pace, a_client_never_measured_is_waited_for_idle_flush_ms)
{
    broker_pace_t p = { 0 };
    broker__pace_publish(&p, 1000); /* one message: no gap yet */
    cr_assert_eq(quiet(&p, 1000), PACE_IDLE);
    cr_assert_eq(broker__pace_quiet_ms(NULL, 1000, PACE_IDLE, PACE_MAX), PACE_IDLE, "a will has no client");
}

Test(pace, a_client_paced_without_waiting_for_acks_is_waited_for_twice_its_gap)
{
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 5, 20, false);
    cr_assert_eq(quiet(&p, t), 10);
}

Test(pace, gaps_that_an_ack_separated_are_not_learnt)
{
    /* a synchronous client: each PUBLISH follows the ack of the one before,
     * so its gaps are our own delay and must not make us wait longer */
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 7, 50, true);
    cr_assert_eq(quiet(&p, t), PACE_IDLE);
}

Test(pace, the_wait_is_clamped_between_idle_flush_ms_and_its_maximum)
{
    broker_pace_t fast = { 0 }, slow = { 0 };
    uint64_t t1 = publish_every(&fast, 1000, 1, 20, false);
    uint64_t t2 = publish_every(&slow, 1000, 100, 20, false);
    cr_assert_eq(quiet(&fast, t1), PACE_IDLE);
    cr_assert_eq(quiet(&slow, t2), PACE_MAX);
}

Test(pace, bursts_within_one_loop_turn_do_not_shorten_the_pace)
{
    /* a client catching up after a full window sends several at once */
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 6, 20, false);
    t = publish_every(&p, t, 0, 10, false);
    cr_assert_eq(quiet(&p, t), 12);
}

Test(pace, a_maximum_not_above_idle_flush_ms_turns_pacing_and_probes_off)
{
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 5, 20, false);
    cr_assert_eq(broker__pace_quiet_ms(&p, t, PACE_IDLE, 0), PACE_IDLE);
    cr_assert_eq(broker__pace_quiet_ms(&p, t, PACE_IDLE, PACE_IDLE), PACE_IDLE);
    cr_assert_eq(broker__pace_quiet_ms(&p, t, 0, 0), 0, "idle flush off stays off");
    broker_pace_t s = { 0 };
    for (uint64_t now = 1000; now < 70000; now += 7) {
        broker__pace_acked(&s);
        broker__pace_publish(&s, now);
        cr_assert_eq(broker__pace_quiet_ms(&s, now, PACE_IDLE, 0), PACE_IDLE, "probed at %llu", (unsigned long long)now);
    }
}

Test(pace, a_changed_pace_is_learnt_within_a_few_messages)
{
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 20, 20, false);
    cr_assert_eq(quiet(&p, t), PACE_MAX);
    t = publish_every(&p, t + 4, 4, 12, false);
    uint64_t q = quiet(&p, t);
    cr_assert(q >= 8 && q <= 10, "quiet %llu ms after 12 gaps of 4 ms", (unsigned long long)q);
}

Test(pace, a_client_that_turns_synchronous_is_forgotten_after_eight_acked_gaps)
{
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 5, 20, false);
    t = publish_every(&p, t + 30, 30, 7, true);
    cr_assert_eq(quiet(&p, t), 10, "seven acked gaps: the pace still holds");
    t = publish_every(&p, t + 30, 30, 1, true);
    cr_assert_eq(quiet(&p, t), PACE_IDLE);
}

Test(pace, one_free_gap_between_acked_ones_keeps_the_pace)
{
    /* a windowed client: most gaps free, one after each batch's acks */
    broker_pace_t p = { 0 };
    uint64_t t = 1000;
    for (int round = 0; round < 20; round++) {
        t = publish_every(&p, t, 5, 9, false) + 5;
        broker__pace_acked(&p);
    }
    cr_assert_eq(quiet(&p, t), 10);
}

Test(pace, a_client_acked_before_each_message_is_probed_and_its_pace_learnt)
{
    /* alone on its topic and slower than idle_flush_ms, each message is
     * acked before the next: only a probe can show its gap of 5 ms */
    broker_pace_t p = { 0 };
    uint64_t t = publish_every(&p, 1000, 5, 200, true); /* 1 s: the first probe is due */
    broker__pace_acked(&p);
    t += 5;
    broker__pace_publish(&p, t);
    cr_assert_eq(quiet(&p, t), PACE_MAX, "this message is the probe");
    t += 5;
    broker__pace_publish(&p, t); /* came before the probe's ack */
    cr_assert_eq(quiet(&p, t), 10);
}

Test(pace, a_synchronous_client_is_probed_ever_more_rarely)
{
    broker_pace_t p = { 0 };
    uint64_t probes[16];
    int n = 0;
    for (uint64_t now = 1000; now < 1000 + 200000 && n < 16; now += 3) {
        broker__pace_acked(&p);
        broker__pace_publish(&p, now);
        uint64_t q = quiet(&p, now);
        if (q == PACE_MAX)
            probes[n++] = now;
        else
            cr_assert_eq(q, PACE_IDLE);
    }
    /* 1 s after its first message, then 2, 4, 8 ... 64 s apart (plus up to two gaps of 3 ms) */
    cr_assert_geq(n, 7);
    uint64_t expect[] = { 2000, 4000, 8000, 16000, 32000, 64000, 64000 };
    for (int i = 1; i < 7; i++) {
        uint64_t d = probes[i] - probes[i - 1];
        cr_assert(d >= expect[i - 1] && d <= expect[i - 1] + 6, "probe %d after %llu ms", i,
                  (unsigned long long)d);
    }
    cr_assert(probes[0] >= 2000 && probes[0] <= 2003);
}

Test(pace, a_probe_answered_only_within_the_same_turn_is_not_a_success)
{
    /* a client that sends pairs at once every 100 ms, the second of each
     * refused before it reaches a batch (so never asked for its wait): it
     * is no gap, so the probe goes on, fails at the next pair, backs off */
    broker_pace_t p = { 0 };
    uint64_t t = 1000, first_probe = 0, probes = 0;
    for (int pair = 0; pair < 40; pair++, t += 100) {
        broker__pace_acked(&p);
        broker__pace_publish(&p, t);
        uint64_t q1 = quiet(&p, t);
        broker__pace_publish(&p, t);
        if (q1 == PACE_MAX) {
            probes++;
            if (!first_probe)
                first_probe = t;
        }
    }
    /* 4 s of pairs: probes 1 s after the first message, then 2 s later; not one per pair */
    cr_assert_eq(probes, 2, "%llu probes", (unsigned long long)probes);
    cr_assert_eq(first_probe, 2000);
    cr_assert_eq(quiet(&p, t), PACE_IDLE, "never learnt");
}
