/*
 * rep_pace.c: paced and prioritised replay for any output (rep_int.h,
 * "pacing and priorities"): two token buckets per output, strict priority
 * classes, deficit round robin on bytes inside a class. Pure: no threads,
 * no clock (now_ms comes in), no allocation (lanes are embedded, classes are
 * intrusive rings).
 *
 * Buckets: tokens in milli-units, refilled by elapsed_ms x rate (exact:
 * a rate of R per second is R milli-units per ms), capped at the burst =
 * max(200 ms of the rate, the largest unit asked so far x 1000). A unit
 * goes when both buckets hold it. Over any window of T ms at most
 * burst + T x rate goes, so 10.2 s worth in 10 s while units stay below
 * 200 ms of the rate.
 *
 * Selection (select_lane): the highest non-empty class (a bit set finds it);
 * its ring's head is the lane whose DRR turn it is. A lane at the head is
 * credited one quantum per turn; while its deficit covers its unit it is the
 * candidate (and stays the head: a lane that is granted and asks again at
 * once keeps its turn); when it does not, its turn ends and the ring turns.
 * A ring member that is not waiting when its turn comes (it was granted and
 * has not asked again) leaves the ring: an idle lane costs nothing. When
 * every waiting lane of the class failed once in a row, the rounds that
 * would all fail are credited in one step (a unit many quanta long does not
 * cost many loops). Then the tokens decide: the candidate goes now, or
 * rep__pace_next says how long until it can. Nothing below the candidate's
 * class is served meanwhile: strict priority.
 */
#include "replicator/rep_int.h"

#include <string.h>

#define MILLI 1000u
#define DEFAULT_QUANTUM (16u * 1024u)

/* ---- buckets ------------------------------------------------------------------ */

static void bucket_init(rep__bucket_t *b, uint64_t rate, uint64_t now_ms)
{
    b->rate = rate;
    b->burst = rate * REP__PACE_BURST_MS; /* rate per s = milli-units per ms: x 200 ms */
    b->unit_max = 0;
    b->tokens = b->burst;
    b->last_ms = now_ms;
}

static void refill(rep__bucket_t *b, uint64_t now_ms)
{
    if (!b->rate || now_ms <= b->last_ms) {
        if (now_ms > b->last_ms)
            b->last_ms = now_ms;
        return;
    }
    uint64_t elapsed = now_ms - b->last_ms;
    b->last_ms = now_ms;
    uint64_t room = b->burst > b->tokens ? b->burst - b->tokens : 0;
    if (elapsed >= room / b->rate + 1) /* elapsed x rate would pass the burst (or overflow) */
        b->tokens = b->burst;
    else
        b->tokens = TB_MIN(b->burst, b->tokens + elapsed * b->rate);
}

static void bucket_saw(rep__bucket_t *b, uint32_t units)
{
    uint64_t need = (uint64_t)units * MILLI;
    if (need > b->unit_max)
        b->unit_max = need;
    if (b->rate && need > b->burst)
        b->burst = need; /* the largest unit so far still fits, alone */
}


/* ms until b holds `units` (0: now); b refilled to now. */
static uint64_t bucket_wait(const rep__bucket_t *b, uint32_t units)
{
    if (!b->rate)
        return 0;
    uint64_t need = (uint64_t)units * MILLI;
    if (b->tokens >= need)
        return 0;
    return (need - b->tokens + b->rate - 1) / b->rate;
}

static void bucket_take(rep__bucket_t *b, uint32_t units)
{
    if (!b->rate)
        return;
    uint64_t need = (uint64_t)units * MILLI;
    b->tokens = b->tokens > need ? b->tokens - need : 0;
}

/* refilled at the old rate up to now, the new rate from now on (rep__pace_set_rates) */
static void bucket_set_rate(rep__bucket_t *b, uint64_t rate, uint64_t now_ms)
{
    if (rate == b->rate)
        return;
    bool was_unlimited = !b->rate;
    refill(b, now_ms);
    b->rate = rate;
    b->last_ms = now_ms;
    b->burst = TB_MAX(rate * REP__PACE_BURST_MS, rate ? b->unit_max : 0);
    /* from unlimited: full, as at init; else what it held, within the new burst (a lower
     * cap does not let the old burst go at once; a higher one earns its tokens) */
    b->tokens = was_unlimited ? b->burst : TB_MIN(b->tokens, b->burst);
}

/* ---- classes: intrusive rings ------------------------------------------------------ */

static void mark(rep__pace_t *p, unsigned c, bool on)
{
    if (on)
        p->used[c / 64] |= 1ull << (c % 64);
    else
        p->used[c / 64] &= ~(1ull << (c % 64));
}

/* The highest class at or below `below` whose ring is not empty, or -1. */
static int highest(const rep__pace_t *p, int below)
{
    for (int w = below / 64; w >= 0; w--) {
        uint64_t bits = p->used[w];
        if (w == below / 64 && below % 64 != 63)
            bits &= (2ull << (below % 64)) - 1;
        if (bits)
            return w * 64 + 63 - __builtin_clzll(bits);
    }
    return -1;
}

static void ring_add_tail(rep__pace_t *p, rep__pace_lane_t *l)
{
    rep__pace_lane_t **head = &p->classes[l->priority];
    if (!*head) {
        l->prev = l->next = l;
        *head = l;
        mark(p, l->priority, true);
    } else {
        l->prev = (*head)->prev;
        l->next = *head;
        (*head)->prev->next = l;
        (*head)->prev = l;
    }
    l->in_ring = true;
    l->credited = false;
    p->members[l->priority]++;
}

static void ring_remove(rep__pace_t *p, rep__pace_lane_t *l)
{
    rep__pace_lane_t **head = &p->classes[l->priority];
    if (l->next == l) {
        *head = NULL;
        mark(p, l->priority, false);
    } else {
        l->prev->next = l->next;
        l->next->prev = l->prev;
        if (*head == l)
            *head = l->next;
    }
    l->prev = l->next = NULL;
    l->in_ring = false;
    l->credited = false;
    p->members[l->priority]--;
}

/* ---- the DRR turn ---------------------------------------------------------------- */

/* The candidate of class c (DRR), or NULL when it has no lane waiting (its idle members removed). */
static rep__pace_lane_t *select_in(rep__pace_t *p, unsigned c)
{
    uint64_t q = p->quantum;
    size_t failed = 0;
    for (;;) {
        rep__pace_lane_t *l = p->classes[c];
        if (!l)
            return NULL;
        if (!l->waiting) { /* its turn came and it has nothing asked: idle */
            ring_remove(p, l);
            continue;
        }
        if (!l->credited) {
            l->deficit += q;
            l->credited = true;
        }
        if (l->deficit >= l->want_bytes)
            return l;
        /* its turn is over: the next lane's */
        l->credited = false;
        p->classes[c] = l->next;
        /* a whole round failed in a row (members that were not waiting left the
         * ring when their turn came, so every one left was waiting and short):
         * credit the rounds that would fail too, in one step (O(members) once) */
        if (++failed >= p->members[c]) {
            uint64_t rounds = UINT64_MAX;
            rep__pace_lane_t *it = l;
            do {
                uint64_t short_by = it->want_bytes > it->deficit ? it->want_bytes - it->deficit : 0;
                uint64_t r = short_by / q; /* rounds it still fails after the next credit */
                if (short_by % q == 0 && r)
                    r--;
                rounds = TB_MIN(rounds, r);
                it = it->next;
            } while (it != l);
            it = l;
            do {
                it->deficit += rounds * q;
                it = it->next;
            } while (it != l);
            failed = 0;
        }
    }
}

static rep__pace_lane_t *select_lane(rep__pace_t *p)
{
    for (int c = highest(p, REP__PACE_CLASSES - 1); c >= 0; c = highest(p, c - 1)) {
        rep__pace_lane_t *l = select_in(p, (unsigned)c);
        if (l)
            return l;
    }
    return NULL;
}

static uint64_t lane_wait(rep__pace_t *p, const rep__pace_lane_t *l, uint64_t now_ms)
{
    refill(&p->bytes, now_ms);
    refill(&p->msgs, now_ms);
    return TB_MAX(bucket_wait(&p->bytes, l->want_bytes), bucket_wait(&p->msgs, l->want_msgs));
}

/* l's unit goes: tokens taken, its wait ended; it stays at its ring's head (its turn goes on). */
static void grant(rep__pace_t *p, rep__pace_lane_t *l, uint64_t now_ms)
{
    bucket_take(&p->bytes, l->want_bytes);
    bucket_take(&p->msgs, l->want_msgs);
    l->deficit = l->deficit > l->want_bytes ? l->deficit - l->want_bytes : 0;
    if (l->waiting) {
        l->waiting = false;
        p->waiting--;
        l->throttled_ms += now_ms > l->wait_since_ms ? now_ms - l->wait_since_ms : 0;
    }
    l->granted_units++;
    l->granted_bytes += l->want_bytes;
}

/* ---- the API ------------------------------------------------------------------------ */

void rep__pace_init(rep__pace_t *p, uint64_t max_bytes_per_s, uint64_t max_messages_per_s, uint64_t quantum,
                    uint64_t now_ms)
{
    memset(p, 0, sizeof *p);
    bucket_init(&p->bytes, max_bytes_per_s, now_ms);
    bucket_init(&p->msgs, max_messages_per_s, now_ms);
    p->quantum = quantum ? quantum : DEFAULT_QUANTUM;
}

void rep__pace_lane_init(rep__pace_lane_t *pl, uint8_t priority)
{
    memset(pl, 0, sizeof *pl);
    pl->priority = priority;
}

void rep__pace_set_rates(rep__pace_t *p, uint64_t max_bytes_per_s, uint64_t max_messages_per_s, uint64_t now_ms)
{
    bucket_set_rate(&p->bytes, max_bytes_per_s, now_ms);
    bucket_set_rate(&p->msgs, max_messages_per_s, now_ms);
}

bool rep__pace_ask(rep__pace_t *p, rep__pace_lane_t *pl, uint32_t bytes, uint32_t msgs, uint64_t now_ms)
{
    if (pl->granted) { /* rep__pace_next took this unit's tokens (first: caps lifted since, the grant
                          is used here and not carried to the next unit under a later cap) */
        pl->granted = false;
        return true;
    }
    if (!rep__pace_limited(p)) {
        if (pl->in_ring || pl->waiting) /* it waited when the caps were lifted: it waits no more */
            rep__pace_leave(p, pl, now_ms);
        pl->granted_units++;
        pl->granted_bytes += bytes;
        return true;
    }
    bucket_saw(&p->bytes, bytes);
    bucket_saw(&p->msgs, msgs);
    pl->want_bytes = bytes;
    pl->want_msgs = msgs;
    if (!pl->waiting) {
        pl->waiting = true;
        pl->wait_since_ms = now_ms;
        p->waiting++;
    }
    if (!pl->in_ring)
        ring_add_tail(p, pl);
    /* the lane whose turn it is, if it is this one and the tokens are there, goes now */
    rep__pace_lane_t *c = select_lane(p);
    if (c == pl && lane_wait(p, pl, now_ms) == 0) {
        grant(p, pl, now_ms);
        return true;
    }
    return false;
}

rep__pace_lane_t *rep__pace_next(rep__pace_t *p, uint64_t now_ms, uint64_t *wait_ms)
{
    rep__pace_lane_t *l = p->waiting ? select_lane(p) : NULL;
    if (!l) {
        if (wait_ms)
            *wait_ms = UINT64_MAX;
        return NULL;
    }
    uint64_t w = lane_wait(p, l, now_ms);
    if (w) {
        if (wait_ms)
            *wait_ms = w;
        return NULL;
    }
    grant(p, l, now_ms);
    l->granted = true;
    if (wait_ms)
        *wait_ms = 0;
    return l;
}

uint64_t rep__pace_wait(rep__pace_t *p, uint64_t now_ms)
{
    rep__pace_lane_t *l = p->waiting ? select_lane(p) : NULL;
    return l ? lane_wait(p, l, now_ms) : UINT64_MAX;
}

void rep__pace_leave(rep__pace_t *p, rep__pace_lane_t *pl, uint64_t now_ms)
{
    if (pl->waiting) {
        pl->waiting = false;
        p->waiting--;
        pl->throttled_ms += now_ms > pl->wait_since_ms ? now_ms - pl->wait_since_ms : 0;
    }
    if (pl->in_ring)
        ring_remove(p, pl);
    pl->granted = false;
    pl->deficit = 0;
}

uint64_t rep__pace_throttled_ms(const rep__pace_lane_t *pl, uint64_t now_ms)
{
    return pl->throttled_ms + (pl->waiting && now_ms > pl->wait_since_ms ? now_ms - pl->wait_since_ms : 0);
}
