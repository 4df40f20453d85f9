/*
 * test_window.c: batches in flight and the checkpoint. The checkpoint only
 * moves through contiguous acks; a resend after a stream ends keeps every
 * batch's boundaries (the cluster's dedup depends on it).
 */
#include <criterion/criterion.h>

#include "helper_rep.h"

/* A window of cap batches of 10 offsets each, starting after `acked`, all sent. */
static void fill(rep__window_t *w, uint32_t cap, uint32_t n, uint64_t acked)
{
    rep__window_init(w, cap, acked);
    for (uint32_t i = 0; i < n; i++) {
        rep__batch_t *b = rep__window_push(w);
        cr_assert_not_null(b);
        b->first = acked + 1 + 10 * i;
        b->last = b->first + 9;
        b->count = 10;
        rep__window_mark_sending(w, b, 1000 + i);
        rep__window_mark_sent(w, b);
    }
}

static uint64_t pop_all(rep__window_t *w)
{
    uint64_t n = 0;
    rep__batch_t b;
    while (rep__window_pop(w, &b))
        n++;
    return n;
}

Test(window, in_order_acks_advance_the_checkpoint_batch_by_batch)
{
    rep__window_t w;
    fill(&w, 4, 3, 100);
    cr_assert_eq(rep__window_ack(&w, 110), REP__ACK_IN_ORDER);
    cr_assert_eq(pop_all(&w), 1);
    cr_assert_eq(w.acked, 110);
    cr_assert_eq(rep__window_ack(&w, 120), REP__ACK_IN_ORDER);
    cr_assert_eq(pop_all(&w), 1);
    cr_assert_eq(w.acked, 120);
    cr_assert_eq(w.n, 1);
    rep__window_free(&w);
}

Test(window, a_later_ack_does_not_move_the_checkpoint_past_an_unacked_batch)
{
    rep__window_t w;
    fill(&w, 4, 3, 0);
    cr_assert_eq(rep__window_ack(&w, 20), REP__ACK_OUT_OF_ORDER);
    cr_assert_eq(pop_all(&w), 0);
    cr_assert_eq(w.acked, 0);
    cr_assert_eq(rep__window_ack(&w, 10), REP__ACK_IN_ORDER);
    cr_assert_eq(pop_all(&w), 2, "the earlier ack releases both");
    cr_assert_eq(w.acked, 20);
    rep__window_free(&w);
}

Test(window, an_ack_for_no_batch_changes_nothing)
{
    rep__window_t w;
    fill(&w, 4, 2, 0);
    cr_assert_eq(rep__window_ack(&w, 15), REP__ACK_UNKNOWN);
    cr_assert_eq(rep__window_ack(&w, 999), REP__ACK_UNKNOWN);
    cr_assert_eq(pop_all(&w), 0);
    cr_assert_eq(w.acked, 0);
    cr_assert_eq(w.sent, 2);
    rep__window_free(&w);
}

Test(window, a_repeated_ack_is_not_counted_twice)
{
    rep__window_t w;
    fill(&w, 4, 2, 0);
    cr_assert_eq(rep__window_ack(&w, 20), REP__ACK_OUT_OF_ORDER);
    cr_assert_eq(rep__window_ack(&w, 20), REP__ACK_UNKNOWN);
    cr_assert_eq(w.sent, 1);
    rep__window_free(&w);
}

Test(window, an_ack_may_arrive_before_its_send_completes)
{
    rep__window_t w;
    rep__window_init(&w, 2, 0);
    rep__batch_t *b = rep__window_push(&w);
    b->first = 1;
    b->last = 5;
    rep__window_mark_sending(&w, b, 1);
    cr_assert_eq(rep__window_ack(&w, 5), REP__ACK_IN_ORDER);
    cr_assert_eq(pop_all(&w), 1);
    cr_assert_eq(w.acked, 5);
    cr_assert_eq(w.sent, 0);
    rep__window_free(&w);
}

Test(window, rewind_resends_the_same_boundaries_in_order)
{
    rep__window_t w;
    fill(&w, 4, 3, 50);
    cr_assert_eq(rep__window_ack(&w, 60), REP__ACK_IN_ORDER);
    pop_all(&w);
    rep__window_rewind(&w);
    cr_assert_eq(w.sent, 0);
    rep__batch_t *b = rep__window_next_unsent(&w);
    cr_assert_eq(b->first, 61);
    cr_assert_eq(b->last, 70);
    rep__window_mark_sending(&w, b, 5);
    b = rep__window_next_unsent(&w);
    cr_assert_eq(b->first, 71);
    cr_assert_eq(b->last, 80);
    cr_assert_eq(rep__window_at(&w, 0)->sends, 2, "the first unacked batch was sent twice");
    rep__window_free(&w);
}

Test(window, refuses_batches_beyond_its_capacity)
{
    rep__window_t w;
    fill(&w, 4, 4, 0);
    cr_assert_null(rep__window_push(&w));
    cr_assert_eq(rep__window_ack(&w, 10), REP__ACK_IN_ORDER);
    pop_all(&w);
    cr_assert_not_null(rep__window_push(&w), "a popped batch frees its slot");
    rep__window_free(&w);
}

Test(window, oldest_unacked_gives_the_ack_deadline_batch)
{
    rep__window_t w;
    fill(&w, 4, 3, 0);
    cr_assert_eq(rep__window_oldest_unacked(&w)->sent_ms, 1000);
    rep__window_ack(&w, 10);
    pop_all(&w);
    cr_assert_eq(rep__window_oldest_unacked(&w)->sent_ms, 1001);
    rep__window_ack(&w, 20);
    rep__window_ack(&w, 30);
    pop_all(&w);
    cr_assert_null(rep__window_oldest_unacked(&w));
    rep__window_free(&w);
}

Test(window, wraps_around_the_ring)
{
    rep__window_t w;
    rep__window_init(&w, 3, 0);
    uint64_t next = 1;
    for (int round = 0; round < 10; round++) {
        rep__batch_t *b = rep__window_push(&w);
        cr_assert_not_null(b);
        b->first = next;
        b->last = next + 4;
        next += 5;
        rep__window_mark_sending(&w, b, 0);
        if (w.n == 3) {
            cr_assert_eq(rep__window_ack(&w, rep__window_at(&w, 0)->last), REP__ACK_IN_ORDER);
            pop_all(&w);
        }
    }
    cr_assert_eq(w.acked, 8 * 5);
    rep__window_free(&w);
}

/* A virtual batch (records past max_age, never sent) is pushed already ACKED. */
static void push_virtual(rep__window_t *w, uint64_t first, uint64_t last, uint32_t aged)
{
    rep__batch_t *b = rep__window_push(w);
    cr_assert_not_null(b);
    b->first = first;
    b->last = last;
    b->aged = aged;
    b->state = REP__B_ACKED;
}

Test(window, virtual_batch_moves_checkpoint_at_the_head_without_an_ack)
{
    rep__window_t w;
    rep__window_init(&w, 4, 100);
    push_virtual(&w, 101, 150, 50);
    cr_assert_null(rep__window_next_unsent(&w), "a virtual batch is never sent");
    cr_assert_null(rep__window_oldest_unacked(&w), "nor waited for");
    rep__batch_t b;
    cr_assert(rep__window_pop(&w, &b));
    cr_assert_eq(b.aged, 50);
    cr_assert_eq(w.acked, 150);
    cr_assert_eq(w.sent, 0);
    rep__window_free(&w);
}

Test(window, virtual_batch_behind_an_unacked_batch_waits_for_its_ack)
{
    rep__window_t w;
    fill(&w, 4, 1, 0); /* 1..10 sent */
    push_virtual(&w, 11, 20, 10);
    cr_assert_eq(pop_all(&w), 0, "the checkpoint never passes an unacknowledged batch");
    cr_assert_eq(w.acked, 0);
    rep__window_rewind(&w);
    cr_assert_eq(rep__window_at(&w, 1)->state, REP__B_ACKED, "a rewind leaves it alone");
    rep__batch_t *b = rep__window_next_unsent(&w);
    cr_assert_eq(b->last, 10, "only the real batch is resent");
    rep__window_mark_sending(&w, b, 1);
    cr_assert_eq(rep__window_ack(&w, 10), REP__ACK_IN_ORDER);
    cr_assert_eq(pop_all(&w), 2);
    cr_assert_eq(w.acked, 20);
    rep__window_free(&w);
}

/* RELOAD.md 5.5: a DEAD batch (refused for good, its records on their way to the dead-letter log) is
 * never resent, does not make later acks "out of order", holds the checkpoint until it is ACKED as
 * dead, and then lets it pass in order. */
Test(window, dead_batch_is_skipped_and_holds_the_checkpoint_until_kept)
{
    rep__window_t w;
    fill(&w, 4, 3, 100); /* 101..110, 111..120, 121..130 */
    rep__window_rewind(&w);
    rep__batch_t *dead = rep__window_at(&w, 0);
    dead->state = REP__B_DEAD;
    cr_assert_eq(rep__window_next_unsent(&w), rep__window_at(&w, 1), "the dead batch is not sent again");
    rep__window_mark_sending(&w, rep__window_at(&w, 1), 2000);
    rep__window_mark_sending(&w, rep__window_at(&w, 2), 2001);
    cr_assert_eq(rep__window_oldest_unacked(&w), rep__window_at(&w, 1), "the ack deadline is the live one's");
    cr_assert_eq(rep__window_ack(&w, 120), REP__ACK_IN_ORDER, "not out of order behind a dead batch");
    cr_assert_eq(rep__window_ack(&w, 110), REP__ACK_UNKNOWN, "a dead batch is not acked by the cluster");
    cr_assert_eq(pop_all(&w), 0, "the checkpoint waits for the dead-letter write");
    cr_assert_eq(w.acked, 100);
    rep__window_rewind(&w); /* a stream ends: the dead one stays dead */
    cr_assert_eq(dead->state, REP__B_DEAD);
    dead->state = REP__B_ACKED; /* durable in the dead-letter log */
    dead->dead = true;
    cr_assert_eq(pop_all(&w), 2);
    cr_assert_eq(w.acked, 120);
    rep__window_free(&w);
}
