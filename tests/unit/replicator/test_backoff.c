/*
 * test_backoff.c: the retry schedules. Streams: 100 ms doubling to 30 s,
 * full jitter; registration: 1 s doubling to 60 s, equal jitter; reset on
 * success; the heartbeat's +-10%.
 */
#include <criterion/criterion.h>

#include "helper_rep.h"

Test(backoff, stream_cap_doubles_from_100ms_to_30s)
{
    rep__backoff_t b = { 100, 30000, 0, true };
    uint64_t rng = 12345;
    const uint32_t want[] = { 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000 };
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        cr_assert_eq(rep__backoff_cap(&b), want[i], "attempt %zu", i);
        rep__backoff_next(&b, &rng);
    }
}

Test(backoff, registration_cap_doubles_from_1s_to_60s)
{
    rep__backoff_t b = { 1000, 60000, 0, false };
    uint64_t rng = 1;
    const uint32_t want[] = { 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000 };
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        cr_assert_eq(rep__backoff_cap(&b), want[i], "attempt %zu", i);
        rep__backoff_next(&b, &rng);
    }
}

Test(backoff, full_jitter_spreads_over_zero_to_cap)
{
    uint64_t rng = 99;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < 10000; i++) {
        rep__backoff_t b = { 100, 30000, 9, true }; /* cap 30000 */
        uint32_t d = rep__backoff_next(&b, &rng);
        cr_assert_leq(d, 30000);
        lo = TB_MIN(lo, d);
        hi = TB_MAX(hi, d);
    }
    cr_assert_lt(lo, 3000, "full jitter reaches near zero");
    cr_assert_gt(hi, 27000, "and near the cap");
}

Test(backoff, equal_jitter_stays_between_half_cap_and_cap)
{
    uint64_t rng = 7;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < 10000; i++) {
        rep__backoff_t b = { 1000, 60000, 2, false }; /* cap 4000 */
        uint32_t d = rep__backoff_next(&b, &rng);
        cr_assert_geq(d, 2000);
        cr_assert_leq(d, 4000);
        lo = TB_MIN(lo, d);
        hi = TB_MAX(hi, d);
    }
    cr_assert_lt(lo, 2200);
    cr_assert_gt(hi, 3800);
}

Test(backoff, reset_starts_again_from_the_initial_delay)
{
    rep__backoff_t b = { 100, 30000, 0, true };
    uint64_t rng = 5;
    for (int i = 0; i < 20; i++)
        rep__backoff_next(&b, &rng);
    cr_assert_eq(rep__backoff_cap(&b), 30000);
    rep__backoff_reset(&b);
    cr_assert_eq(rep__backoff_cap(&b), 100);
}

Test(backoff, many_failures_never_overflow_the_cap)
{
    rep__backoff_t b = { 100, 30000, 0, true };
    uint64_t rng = 5;
    for (int i = 0; i < 1000; i++)
        cr_assert_leq(rep__backoff_next(&b, &rng), 30000);
}

Test(backoff, heartbeat_jitter_stays_within_ten_percent)
{
    uint64_t rng = 3;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < 10000; i++) {
        uint32_t d = rep__jitter(30000, 10, &rng);
        cr_assert_geq(d, 27000);
        cr_assert_leq(d, 33000);
        lo = TB_MIN(lo, d);
        hi = TB_MAX(hi, d);
    }
    cr_assert_lt(lo, 27300);
    cr_assert_gt(hi, 32700);
}
