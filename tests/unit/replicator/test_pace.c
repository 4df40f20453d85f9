/*
 * test_pace.c: rep_pace.c on a fake clock. A small simulator plays an
 * output's thread: every lane with a unit to send asks for it; refused
 * lanes wait; the clock jumps to when the pacer says the head can go (its
 * timer) or to the next arrival, and rep__pace_next hands out the grants.
 * Every grant is recorded with its time, so the 10 s windows, the order of
 * priorities and the byte shares are checked on what was sent.
 */
#include <criterion/criterion.h>

#include "helper_rep.h"

#define MAXL 4
#define MAXU 40000

typedef struct {
    rep__pace_lane_t pl;
    uint32_t size[MAXU], msgs[MAXU];
    uint64_t arrive[MAXU];       /* a unit can be asked for from this time on */
    size_t n, next;              /* units, the next to send */
    bool asked;                  /* waiting for a grant of unit `next` */
    uint64_t sent_bytes;
} lane_t;

typedef struct {
    uint64_t t;
    int lane;
    uint32_t bytes, msgs;
} send_t;

static send_t sends[4 * MAXU];
static size_t nsends;

typedef struct {
    rep__pace_t p;
    lane_t l[MAXL];
    int nl;
    uint64_t now;
    uint64_t waits;              /* rep__pace_next calls that found nothing to grant */
} sim_t;

static void sent(sim_t *s, int i)
{
    lane_t *l = &s->l[i];
    cr_assert_lt(nsends, TB_ARRAY_LEN(sends));
    sends[nsends++] = (send_t){ s->now, i, l->size[l->next], l->msgs[l->next] };
    l->sent_bytes += l->size[l->next];
    l->next++;
    l->asked = false;
}

/* Every lane asks for what it has, until refused. */
static void ask_all(sim_t *s)
{
    for (int i = 0; i < s->nl; i++) {
        lane_t *l = &s->l[i];
        while (l->next < l->n && l->arrive[l->next] <= s->now) {
            if (!rep__pace_ask(&s->p, &l->pl, l->size[l->next], l->msgs[l->next], s->now)) {
                l->asked = true;
                break;
            }
            sent(s, i);
        }
    }
}

static int lane_of(sim_t *s, rep__pace_lane_t *pl)
{
    for (int i = 0; i < s->nl; i++)
        if (&s->l[i].pl == pl)
            return i;
    cr_assert_fail("a grant for no lane");
    return -1;
}

/* Runs until every unit is sent or `until` (fake ms). */
static void run(sim_t *s, uint64_t until)
{
    for (int guard = 0; guard < 10000000; guard++) {
        ask_all(s);
        uint64_t wait;
        rep__pace_lane_t *pl;
        while ((pl = rep__pace_next(&s->p, s->now, &wait)) != NULL) {
            int i = lane_of(s, pl);
            lane_t *l = &s->l[i];
            cr_assert(l->asked, "a grant for a lane that did not ask");
            /* the output pumps the lane: its ask for that unit is now true */
            cr_assert(rep__pace_ask(&s->p, pl, l->size[l->next], l->msgs[l->next], s->now));
            sent(s, i);
            ask_all(s);
        }
        /* the next event: the pacer's timer or an arrival */
        uint64_t due = wait == UINT64_MAX ? UINT64_MAX : s->now + wait;
        bool left = false;
        for (int i = 0; i < s->nl; i++) {
            lane_t *l = &s->l[i];
            if (l->next < l->n) {
                left = true;
                if (!l->asked && l->arrive[l->next] > s->now)
                    due = TB_MIN(due, l->arrive[l->next]);
            }
        }
        if (!left || due == UINT64_MAX || due > until)
            return;
        cr_assert_gt(due, s->now, "the pacer asked for a wait of 0 but granted nothing");
        s->waits++;
        s->now = due;
    }
    cr_assert_fail("the simulation did not end");
}

static void sim_init(sim_t *s, uint64_t bytes_per_s, uint64_t msgs_per_s, uint64_t quantum)
{
    memset(s, 0, sizeof *s);
    nsends = 0;
    s->now = 1000000; /* not 0: a real clock never is */
    rep__pace_init(&s->p, bytes_per_s, msgs_per_s, quantum, s->now);
}

static lane_t *add_lane(sim_t *s, uint8_t prio)
{
    lane_t *l = &s->l[s->nl++];
    rep__pace_lane_init(&l->pl, prio);
    return l;
}

static void add_units(sim_t *s, lane_t *l, size_t n, uint32_t size, uint32_t msgs, uint64_t at)
{
    for (size_t k = 0; k < n && l->n < MAXU; k++) {
        l->size[l->n] = size;
        l->msgs[l->n] = msgs;
        l->arrive[l->n++] = at ? at : s->now;
    }
}

/* The largest and smallest amount (bytes or msgs) sent in any 10 s window
 * [a, a + 10 s) that starts at a send, among windows that end by `end`. */
static void windows(bool bytes, uint64_t end, uint64_t *max_out, uint64_t *min_out)
{
    uint64_t mx = 0, mn = UINT64_MAX;
    size_t j = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < nsends; i++) {
        uint64_t a = sends[i].t;
        if (i > 0) /* windows start at each distinct send time */
            sum -= bytes ? sends[i - 1].bytes : sends[i - 1].msgs;
        if (j < i) {
            j = i;
            sum = 0;
        }
        while (j < nsends && sends[j].t < a + 10000)
            sum += bytes ? sends[j].bytes : sends[j].msgs, j++;
        if (i > 0 && sends[i - 1].t == a)
            continue;
        mx = TB_MAX(mx, sum);
        if (a + 10000 <= end)
            mn = TB_MIN(mn, sum);
    }
    *max_out = mx;
    *min_out = mn;
}

Test(pace, unlimited_never_waits)
{
    rep__pace_t p;
    rep__pace_init(&p, 0, 0, 0, 5);
    cr_assert_not(rep__pace_limited(&p));
    rep__pace_lane_t a, b;
    rep__pace_lane_init(&a, 0);
    rep__pace_lane_init(&b, 200);
    for (int i = 0; i < 100000; i++) {
        cr_assert(rep__pace_ask(&p, &a, 1u << 20, 1000, 5));
        cr_assert(rep__pace_ask(&p, &b, 1u << 20, 1000, 5));
    }
    uint64_t w = 0;
    cr_assert_null(rep__pace_next(&p, 5, &w));
    cr_assert_eq(w, UINT64_MAX);
    cr_assert_eq(rep__pace_wait(&p, 5), UINT64_MAX);
    cr_assert_eq(rep__pace_throttled_ms(&a, 1000), 0);
    cr_assert_eq(a.granted_units, 100000);
}

/* A steady backlog and a bursty one (bursts after idle gaps that refill the
 * bucket): every 10 s window within 2% above the cap, and, while a backlog
 * remains, not below it by more than a burst and a unit. */
static void check_cap(bool bytes, uint64_t rate, uint32_t unit_bytes, uint32_t unit_msgs)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, bytes ? rate : 0, bytes ? 0 : rate, 64 * 1024);
    lane_t *a = add_lane(s, 0), *b = add_lane(s, 0);
    uint64_t t0 = s->now;
    /* a: 60 s worth at once; b: a burst of 3 s worth every 7 s */
    uint64_t per_unit = bytes ? unit_bytes : unit_msgs;
    add_units(s, a, (size_t)(rate * 60 / per_unit), unit_bytes, unit_msgs, t0);
    for (int k = 0; k < 12; k++)
        add_units(s, b, (size_t)(rate * 3 / per_unit), unit_bytes, unit_msgs, t0 + (uint64_t)k * 7000);
    run(s, UINT64_MAX);
    cr_assert_eq(a->next, a->n);
    cr_assert_eq(b->next, b->n);
    uint64_t end = sends[nsends - 1].t;
    uint64_t mx, mn;
    windows(bytes, end, &mx, &mn);
    double cap10 = (double)rate * 10.0;
    cr_assert_leq((double)mx, cap10 * 1.02, "max over 10 s: %llu, cap x 10 s %.0f", (unsigned long long)mx, cap10);
    cr_assert_geq((double)mn, cap10 * 0.98 - (double)per_unit, "min over 10 s: %llu, cap x 10 s %.0f",
                  (unsigned long long)mn, cap10);
    /* the whole drain took the time the cap says, give or take the first burst */
    double secs = (double)(end - t0) / 1000.0;
    double total = (double)(a->n + b->n) * (double)per_unit;
    cr_assert(secs >= total / (double)rate - 0.21 && secs <= total / (double)rate + 0.01, "%.3f s for %.0f", secs,
              total);
    free(s);
}

Test(pace, byte_cap_held_within_2_percent_over_every_10s_window)
{
    check_cap(true, 100000, 1500, 3);   /* 100 kB/s in 1.5 kB units */
    check_cap(true, 1000000, 64000, 50); /* 1 MB/s in 64 kB batches (Danube's default max_batch_bytes-ish) */
}

Test(pace, message_cap_held_within_2_percent_over_every_10s_window)
{
    check_cap(false, 500, 120, 1);  /* 500 msg/s, one message per unit (MQTT) */
    check_cap(false, 2000, 9000, 25); /* 2,000 msg/s in batches of 25 (Danube) */
}

Test(pace, a_unit_larger_than_the_budget_goes_alone)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 1000, 0, 0); /* 1,000 B/s: burst 200 B */
    lane_t *a = add_lane(s, 0);
    uint64_t t0 = s->now;
    add_units(s, a, 1, 100, 1, t0);
    add_units(s, a, 1, 5000, 1, t0); /* 5 s of budget */
    add_units(s, a, 3, 100, 1, t0);
    run(s, UINT64_MAX);
    cr_assert_eq(nsends, 5);
    cr_assert_eq(sends[0].t, t0);           /* from the full bucket */
    /* the big one waits until the bucket holds all of it: 5,000 B at 1 B/ms, 100 B left */
    cr_assert_eq(sends[1].t, t0 + 4900, "%llu", (unsigned long long)(sends[1].t - t0));
    cr_assert_eq(sends[1].bytes, 5000);
    /* then the bucket is empty: the next unit waits its own 100 ms, nothing went with it */
    cr_assert_eq(sends[2].t, t0 + 5000);
    cr_assert_eq(sends[3].t, t0 + 5100);
    cr_assert_eq(sends[4].t, t0 + 5200);
    cr_assert_eq(rep__pace_throttled_ms(&a->pl, s->now), 5200);
    free(s);
}

Test(pace, strict_priority_serves_the_highest_class_first)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 50000, 0, 0); /* 50 kB/s */
    lane_t *lo = add_lane(s, 0), *mid = add_lane(s, 5), *hi = add_lane(s, 9);
    uint64_t t0 = s->now;
    /* lo asks first (it lists first): it gets what the full bucket holds */
    add_units(s, lo, 200, 1000, 1, t0);
    add_units(s, mid, 100, 1000, 1, t0);
    add_units(s, hi, 100, 1000, 1, t0);
    /* more for hi arrives halfway through its backlog: live traffic keeps the priority */
    add_units(s, hi, 20, 1000, 1, t0 + 1000);
    run(s, UINT64_MAX);
    size_t hi_last = 0, mid_first = SIZE_MAX, mid_last = 0, lo_after_burst = SIZE_MAX;
    for (size_t i = 0; i < nsends; i++) {
        if (sends[i].lane == 2)
            hi_last = i;
        if (sends[i].lane == 1) {
            mid_first = TB_MIN(mid_first, i);
            mid_last = i;
        }
        if (sends[i].lane == 0 && sends[i].t > t0 && lo_after_burst == SIZE_MAX)
            lo_after_burst = i;
    }
    /* once the bucket was empty, nothing of a lower class went while a higher one waited */
    cr_assert_lt(hi_last, mid_first == SIZE_MAX ? nsends : TB_MAX(mid_first, hi_last + 1));
    for (size_t i = 0; i < nsends; i++) {
        if (sends[i].t == t0)
            continue; /* the initial burst: every lane asked with tokens there */
        if (i < hi_last)
            cr_assert_eq(sends[i].lane, 2, "send %zu went to lane %d while hi waited", i, sends[i].lane);
        else if (i < mid_last)
            cr_assert_neq(sends[i].lane, 0, "send %zu went to lo while mid waited", i);
    }
    cr_assert_gt(lo_after_burst, mid_last);
    cr_assert_eq(lo->next, lo->n);
    /* lo waited (throttled) the whole time the others drained */
    cr_assert_geq(rep__pace_throttled_ms(&lo->pl, s->now), (220 * 1000) * 1000 / 50000 - 300);
    free(s);
}

Test(pace, equal_priorities_share_bytes_fairly)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 200000, 0, 16 * 1024); /* 200 kB/s, quantum 16 KiB */
    lane_t *a = add_lane(s, 3), *b = add_lane(s, 3), *c = add_lane(s, 3);
    uint64_t t0 = s->now;
    add_units(s, a, 12000, 1000, 1, t0);  /* small units */
    add_units(s, b, 3000, 4000, 4, t0);   /* medium */
    add_units(s, c, 1000, 16000, 16, t0); /* each a whole quantum */
    run(s, t0 + 60000);                   /* 60 s: 12 MB of 36 MB offered: all three backlogged throughout */
    uint64_t total = a->sent_bytes + b->sent_bytes + c->sent_bytes;
    cr_assert_gt(total, 11000000);
    for (int i = 0; i < 3; i++) {
        double share = (double)s->l[i].sent_bytes / (double)total;
        cr_assert(share > 0.9 / 3 && share < 1.1 / 3, "lane %d: %.3f of the bytes", i, share);
    }
    free(s);
}

Test(pace, fairness_holds_for_units_of_many_quanta)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 1000000, 0, 1024); /* 1 MB/s, a small quantum: a 100 kB unit takes 98 rounds */
    lane_t *a = add_lane(s, 0), *b = add_lane(s, 0);
    uint64_t t0 = s->now;
    add_units(s, a, 2000, 100000, 1, t0);
    add_units(s, b, 20000, 10000, 1, t0);
    run(s, t0 + 40000);
    double share = (double)a->sent_bytes / (double)(a->sent_bytes + b->sent_bytes);
    cr_assert(share > 0.45 && share < 0.55, "a: %.3f", share);
    free(s);
}

Test(pace, a_lane_that_leaves_is_not_served_and_its_wait_is_counted)
{
    rep__pace_t p;
    rep__pace_init(&p, 1000, 0, 0, 100);
    rep__pace_lane_t a, b;
    rep__pace_lane_init(&a, 0);
    rep__pace_lane_init(&b, 0);
    cr_assert(rep__pace_ask(&p, &a, 200, 1, 100)); /* the whole burst */
    cr_assert_not(rep__pace_ask(&p, &a, 100, 1, 100));
    cr_assert_not(rep__pace_ask(&p, &b, 100, 1, 100));
    cr_assert_eq(rep__pace_wait(&p, 100), 100);
    rep__pace_leave(&p, &a, 150); /* its stream ended */
    cr_assert_eq(rep__pace_throttled_ms(&a, 1000), 50);
    uint64_t w;
    cr_assert_null(rep__pace_next(&p, 150, &w));
    cr_assert_eq(w, 50);
    rep__pace_lane_t *g = rep__pace_next(&p, 200, &w);
    cr_assert_eq(g, &b);
    cr_assert(rep__pace_ask(&p, &b, 100, 1, 200)); /* the grant, no tokens taken twice */
    cr_assert_eq(rep__pace_throttled_ms(&b, 5000), 100);
    cr_assert_null(rep__pace_next(&p, 200, &w));
    cr_assert_eq(w, UINT64_MAX);
    cr_assert_not(rep__pace_ask(&p, &b, 100, 1, 200)); /* the bucket is empty again */
    cr_assert_eq(rep__pace_wait(&p, 200), 100);
}

Test(pace, both_caps_apply_the_tighter_one_wins)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 100000, 100, 0); /* 100 kB/s and 100 msg/s; units 500 B / 5 msgs: msgs bind (10 kB/s) */
    lane_t *a = add_lane(s, 0);
    add_units(s, a, 2000, 500, 5, s->now);
    run(s, UINT64_MAX);
    uint64_t mx, mn;
    windows(false, sends[nsends - 1].t, &mx, &mn);
    cr_assert_leq(mx, 1020);
    cr_assert_geq(mn, 975);
    free(s);
}

Test(pace, many_lanes_of_one_class_take_turns_one_unit_each)
{
    enum { N = 3000 };
    rep__pace_t p;
    uint64_t now = 1000;
    rep__pace_init(&p, 1000, 0, 1000, now); /* units of 100 quanta: the rounds are credited in one step */
    rep__pace_lane_t *l = tb_calloc(N, sizeof *l);
    bool *got = tb_calloc(N, sizeof *got);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            if (round == 0)
                rep__pace_lane_init(&l[i], 4);
            cr_assert_not(rep__pace_ask(&p, &l[i], 100000, 1, now));
        }
        memset(got, 0, N * sizeof *got);
        for (int k = 0; k < N; k++) {
            uint64_t wait;
            rep__pace_lane_t *g = rep__pace_next(&p, now, &wait);
            if (!g) {
                cr_assert_neq(wait, UINT64_MAX);
                now += wait;
                g = rep__pace_next(&p, now, &wait);
            }
            cr_assert_not_null(g, "grant %d of round %d", k, round);
            size_t i = (size_t)(g - l);
            cr_assert_lt(i, N);
            cr_assert_not(got[i], "lane %zu served twice before every lane once", i);
            got[i] = true;
            cr_assert(rep__pace_ask(&p, g, 100000, 1, now));
        }
        cr_assert_eq(rep__pace_wait(&p, now), UINT64_MAX, "nobody waits");
    }
    free(got);
    free(l);
}

static size_t sends_between(uint64_t a, uint64_t b)
{
    size_t n = 0;
    for (size_t i = 0; i < nsends; i++)
        n += sends[i].t >= a && sends[i].t < b ? sends[i].msgs : 0;
    return n;
}

/* A reload changes the caps in the middle of a backlog (rep__pace_set_rates):
 * 100 msg/s, then 300, then lifted, then capped again. Each is held over
 * every 10 s window from the change on (within 5%, the bound); lifted,
 * the waiting lane goes at once and nothing stays parked. */
Test(pace, rates_changed_mid_drain_are_held_from_then_on)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 0, 100, 0);
    lane_t *a = add_lane(s, 0);
    uint64_t t0 = s->now;
    add_units(s, a, 30000, 100, 1, t0);
    run(s, t0 + 20000);
    size_t first = sends_between(t0 + 10000, t0 + 20000);
    cr_assert(first >= 950 && first <= 1050, "100 msg/s: %zu in 10 s", first);
    rep__pace_set_rates(&s->p, 0, 300, s->now);
    run(s, t0 + 40000);
    for (uint64_t w = 20000; w < 40000; w += 10000) {
        size_t n = sends_between(t0 + w, t0 + w + 10000);
        cr_assert(n >= 2850 && n <= 3150, "300 msg/s from the change on: %zu in [%llu, +10 s)", n,
                  (unsigned long long)w);
    }
    cr_assert(a->asked, "the lane waits for the pacer");
    rep__pace_set_rates(&s->p, 0, 0, s->now);
    cr_assert_not(rep__pace_limited(&s->p));
    cr_assert_eq(rep__pace_wait(&s->p, s->now), 0, "lifted: the waiting lane can go now");
    run(s, s->now);
    cr_assert_eq(a->next, a->n, "lifted: the whole backlog went at once (%zu of %zu)", a->next, a->n);
    cr_assert_eq(s->p.waiting, 0);
    free(s);
}

/* A grant rep__pace_next made just before the caps were lifted is used by the
 * lane's next ask (rep__pace_must_ask) and never carried to a cap set later. */
Test(pace, a_grant_made_before_the_caps_were_lifted_is_not_carried_to_the_next_cap)
{
    rep__pace_t p;
    uint64_t now = 1000;
    rep__pace_init(&p, 0, 10, 0, now); /* 10 msg/s: a burst of 2 */
    rep__pace_lane_t l;
    rep__pace_lane_init(&l, 0);
    int went = 0;
    while (rep__pace_ask(&p, &l, 10, 1, now))
        went++;
    cr_assert_eq(went, 2);
    uint64_t wait;
    cr_assert_null(rep__pace_next(&p, now, &wait));
    now += wait;
    cr_assert_eq(rep__pace_next(&p, now, &wait), &l);
    rep__pace_set_rates(&p, 0, 0, now); /* the reload lands before the lane is pumped */
    cr_assert(rep__pace_must_ask(&p, &l), "the grant is still to be used");
    cr_assert(rep__pace_ask(&p, &l, 10, 1, now));
    cr_assert_not(rep__pace_must_ask(&p, &l));
    rep__pace_set_rates(&p, 0, 10, now); /* capped again: starts full, as at init */
    went = 0;
    while (rep__pace_ask(&p, &l, 10, 1, now))
        went++;
    cr_assert_eq(went, 2, "the bucket's burst and no stray grant: %d", went);
}

/* A unit larger than the new burst still goes after a change (the burst keeps fitting the
 * largest unit seen). */
Test(pace, a_large_unit_waiting_through_a_rate_change_still_goes)
{
    sim_t *s = tb_calloc(1, sizeof *s);
    sim_init(s, 1000, 0, 0);
    lane_t *a = add_lane(s, 0);
    add_units(s, a, 3, 5000, 1, s->now);
    run(s, s->now + 2000);
    cr_assert_lt(a->next, a->n);
    rep__pace_set_rates(&s->p, 2000, 0, s->now);
    run(s, UINT64_MAX);
    cr_assert_eq(a->next, a->n, "%zu of %zu", a->next, a->n);
    free(s);
}
