/*
 * test_timer.c: the replicator thread's deadline heap: earliest first,
 * cancel and re-arm anywhere in the heap.
 */
#include <criterion/criterion.h>

#include "helper_rep.h"

static void nop(rep_t *r, rep__timer_t *tm)
{
    (void)r;
    (void)tm;
}

Test(timer, due_timers_come_out_in_deadline_order)
{
    rep__heap_t h = { 0 };
    rep__timer_t t[200];
    uint64_t rng = 42;
    for (int i = 0; i < 200; i++) {
        t[i] = (rep__timer_t){ .cb = nop };
        rep__timer_arm(&h, &t[i], rep__rand(&rng) % 100000);
    }
    uint64_t last = 0;
    int n = 0;
    for (rep__timer_t *tm; (tm = rep__timer_pop_due(&h, UINT64_MAX)) != NULL; n++) {
        cr_assert_geq(tm->due, last);
        cr_assert_not(rep__timer_armed(tm));
        last = tm->due;
    }
    cr_assert_eq(n, 200);
    rep__heap_free(&h);
}

Test(timer, nothing_is_due_before_its_deadline)
{
    rep__heap_t h = { 0 };
    rep__timer_t a = { .cb = nop };
    rep__timer_arm(&h, &a, 500);
    cr_assert_null(rep__timer_pop_due(&h, 499));
    cr_assert_eq(rep__timer_peek(&h), &a);
    cr_assert_eq(rep__timer_pop_due(&h, 500), &a);
    rep__heap_free(&h);
}

Test(timer, cancel_removes_only_that_timer)
{
    rep__heap_t h = { 0 };
    rep__timer_t t[50];
    for (int i = 0; i < 50; i++) {
        t[i] = (rep__timer_t){ .cb = nop };
        rep__timer_arm(&h, &t[i], (uint64_t)(i * 37 % 50));
    }
    for (int i = 0; i < 50; i += 3)
        rep__timer_cancel(&h, &t[i]);
    int n = 0;
    uint64_t last = 0;
    for (rep__timer_t *tm; (tm = rep__timer_pop_due(&h, UINT64_MAX)) != NULL; n++) {
        cr_assert_neq((tm - t) % 3, 0, "a cancelled timer came out");
        cr_assert_geq(tm->due, last);
        last = tm->due;
    }
    cr_assert_eq(n, 50 - 17);
    rep__heap_free(&h);
}

Test(timer, rearming_moves_a_timer)
{
    rep__heap_t h = { 0 };
    rep__timer_t a = { .cb = nop }, b = { .cb = nop };
    rep__timer_arm(&h, &a, 10);
    rep__timer_arm(&h, &b, 20);
    rep__timer_arm(&h, &a, 30);
    cr_assert_eq(h.n, 2);
    cr_assert_eq(rep__timer_pop_due(&h, 100), &b);
    cr_assert_eq(rep__timer_pop_due(&h, 100), &a);
    rep__heap_free(&h);
}

Test(timer, cancelling_an_unarmed_timer_is_harmless)
{
    rep__heap_t h = { 0 };
    rep__timer_t a = { .cb = nop };
    rep__timer_cancel(&h, &a);
    cr_assert_eq(h.n, 0);
    rep__heap_free(&h);
}
