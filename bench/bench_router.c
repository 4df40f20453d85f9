/* bench-lib: tb_router */
/*
 * bench_router.c: what one router_match costs, with 10 and with 1,000
 * rules, beside a linear scan over the same pre-split rules
 * (tests/unit/gateway/router_oracle.h) on the same topics.
 *
 * The rule sets are shaped like real configs: many literal first levels
 * (one per site), '+' for device ids, a few '#' rules, a leading-'+' rule
 * or two, "$SYS/#" and a catch-all "#" last. Topics are drawn with a fixed
 * seed from a mix that hits early rules, late rules and the catch-all, plus
 * a row of catch-all-only topics (the linear scan's worst case). Every
 * topic is also checked against the linear scan before timing, so a fast
 * wrong answer cannot be reported.
 *
 * Prints figures, never passes or fails on time. Each figure is the median
 * of 5 runs of at least 100 ms of this thread's CPU time each (CPU time, not
 * wall time, because the machine is shared). Run: build/bench/bench_router
 */
#include "base/base.h"
#include "gateway/router/router.h"
#include "tests/unit/gateway/router/router_oracle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_TOPICS 1024
#define TOPIC_MAX 96

typedef struct ruleset {
    size_t n;
    router_spec_t *specs;
    char (*pattern)[48];
    char (*upstream)[32];
} ruleset_t;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static const router_attr_spec_t dev_attr[] = { { "device_id", "$1" } };

static void add(ruleset_t *rs, const char *pattern)
{
    size_t i = rs->n++;
    snprintf(rs->pattern[i], sizeof rs->pattern[i], "%s", pattern);
    snprintf(rs->upstream[i], sizeof rs->upstream[i], "/edge1/r%zu", i);
    rs->specs[i] = (router_spec_t){ .mqtt_pattern = rs->pattern[i], .danube_topic = rs->upstream[i] };
    if (strchr(pattern, '+')) {
        rs->specs[i].attrs = dev_attr;
        rs->specs[i].n_attrs = 1;
    }
}

static void ruleset_init(ruleset_t *rs, size_t cap)
{
    rs->n = 0;
    rs->specs = tb_calloc(cap, sizeof *rs->specs);
    rs->pattern = tb_calloc(cap, sizeof *rs->pattern);
    rs->upstream = tb_calloc(cap, sizeof *rs->upstream);
}

static void ruleset_free(ruleset_t *rs)
{
    free(rs->specs);
    free(rs->pattern);
    free(rs->upstream);
}

/* The small config of one site. */
static void rules_10(ruleset_t *rs)
{
    ruleset_init(rs, 10);
    add(rs, "device/+/telemetry/+");
    add(rs, "device/+/status");
    add(rs, "device/+/events/#");
    add(rs, "plant/+/line/+");
    add(rs, "plant/+/line/+/#");
    add(rs, "$SYS/#");
    add(rs, "sensors/+/+/reading");
    add(rs, "gw/cmd/#");
    add(rs, "+/alarm/+/active");
    add(rs, "#");
}

/* A multi-site node: 320 sites with 3 rules each, lines, areas, a few
 * leading-'+' rules, $SYS and a catch-all: 1,000 rules. */
static void rules_1000(ruleset_t *rs)
{
    char p[48];
    ruleset_init(rs, 1000);
    for (int i = 0; i < 320; i++) {
        snprintf(p, sizeof p, "site%03d/+/telemetry/+", i);
        add(rs, p);
        snprintf(p, sizeof p, "site%03d/+/status/+", i);
        add(rs, p);
        snprintf(p, sizeof p, "site%03d/+/events/#", i);
        add(rs, p);
    }
    for (int i = 0; i < 24; i++) {
        snprintf(p, sizeof p, "line%02d/+/+/temp", i);
        add(rs, p);
    }
    for (int i = 0; i < 8; i++) {
        snprintf(p, sizeof p, "+/kind%02d/+/value", i);
        add(rs, p);
    }
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "area%d/#", i);
        add(rs, p);
    }
    add(rs, "$SYS/#");
    add(rs, "#");
}

/* 4-level topics for the 10-rule set: hits across the list. */
static void topics_10(char (*t)[TOPIC_MAX], bool catch_all_only)
{
    for (int i = 0; i < N_TOPICS; i++) {
        uint32_t k = catch_all_only ? 6 : rnd(7);
        switch (k) {
        case 0: snprintf(t[i], TOPIC_MAX, "device/dev%u/telemetry/temp", rnd(500)); break;
        case 1: snprintf(t[i], TOPIC_MAX, "device/dev%u/events/boot", rnd(500)); break;
        case 2: snprintf(t[i], TOPIC_MAX, "plant/p%u/line/%u", rnd(4), rnd(20)); break;
        case 3: snprintf(t[i], TOPIC_MAX, "sensors/s%u/temp/reading", rnd(100)); break;
        case 4: snprintf(t[i], TOPIC_MAX, "pump%u/alarm/%u/active", rnd(10), rnd(5)); break;
        case 5: snprintf(t[i], TOPIC_MAX, "$SYS/broker/load/%u", rnd(15)); break;
        default: snprintf(t[i], TOPIC_MAX, "legacy/unit%u/raw/value", rnd(100)); break;
        }
    }
}

/* 4-level topics for the 1,000-rule set. */
static void topics_1000(char (*t)[TOPIC_MAX], bool catch_all_only)
{
    for (int i = 0; i < N_TOPICS; i++) {
        uint32_t k = catch_all_only ? 6 : rnd(7);
        switch (k) {
        case 0: snprintf(t[i], TOPIC_MAX, "site%03u/dev%u/telemetry/temp", rnd(320), rnd(1000)); break;
        case 1: snprintf(t[i], TOPIC_MAX, "site%03u/dev%u/status/online", rnd(320), rnd(1000)); break;
        case 2: snprintf(t[i], TOPIC_MAX, "site%03u/dev%u/events/boot", rnd(320), rnd(1000)); break;
        case 3: snprintf(t[i], TOPIC_MAX, "line%02u/cell%u/probe%u/temp", rnd(24), rnd(9), rnd(9)); break;
        case 4: snprintf(t[i], TOPIC_MAX, "x%u/kind%02u/y/value", rnd(50), rnd(8)); break;
        case 5: snprintf(t[i], TOPIC_MAX, "area%u/zone/%u/level", rnd(6), rnd(40)); break;
        default: snprintf(t[i], TOPIC_MAX, "unmapped/dev%u/raw/value", rnd(1000)); break;
        }
    }
}

static volatile long sink;

/* CPU time of this thread: the machine is shared, and wall time would
 * count the time other processes held the core. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double time_trie(const router_t *r, char (*t)[TOPIC_MAX], const size_t *len)
{
    router_match_t m;
    uint64_t rounds = 0, t0 = cpu_ns(), el;
    long acc = 0;
    do {
        for (int i = 0; i < N_TOPICS; i++)
            acc += router_match(r, t[i], len[i], &m);
        rounds++;
    } while ((el = cpu_ns() - t0) < 100000000ull);
    sink = acc;
    return (double)el / (double)(rounds * N_TOPICS);
}

static double time_linear(const orc_t *o, char (*t)[TOPIC_MAX], const size_t *len)
{
    orc_match_t m;
    uint64_t rounds = 0, t0 = cpu_ns(), el;
    long acc = 0;
    do {
        for (int i = 0; i < N_TOPICS; i++)
            acc += orc_match(o, t[i], len[i], &m);
        rounds++;
    } while ((el = cpu_ns() - t0) < 100000000ull);
    sink = acc;
    return (double)el / (double)(rounds * N_TOPICS);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double v[5])
{
    qsort(v, 5, sizeof v[0], cmp_double);
    return v[2];
}

static void row(const char *name, const ruleset_t *rs, void (*gen)(char (*)[TOPIC_MAX], bool),
                bool catch_all_only)
{
    static char topics[N_TOPICS][TOPIC_MAX];
    size_t len[N_TOPICS];
    char err[256];
    router_t *r;
    uint64_t c0 = tb_mono_ns();
    if (router_compile(rs->specs, rs->n, &r, err, sizeof err) != 0) {
        fprintf(stderr, "compile: %s\n", err);
        exit(1);
    }
    double compile_us = (double)(tb_mono_ns() - c0) / 1000.0;
    orc_t o;
    orc_init(&o, rs->specs, rs->n);
    gen(topics, catch_all_only);
    for (int i = 0; i < N_TOPICS; i++) {
        len[i] = strlen(topics[i]);
        router_match_t m;
        orc_match_t w;
        if (router_match(r, topics[i], len[i], &m) != orc_match(&o, topics[i], len[i], &w)) {
            fprintf(stderr, "router and linear scan disagree on %s\n", topics[i]);
            exit(1);
        }
    }
    double tt[5], tl[5];
    for (int k = 0; k < 5; k++) {
        tt[k] = time_trie(r, topics, len);
        tl[k] = time_linear(&o, topics, len);
    }
    double mt = median5(tt), ml = median5(tl);
    printf("%6zu  %-22s %10.1f %12.1f %9.1fx %12.0f\n", rs->n, name, mt, ml, ml / mt, compile_us);
    orc_free(&o);
    router_free(r);
}

int main(void)
{
    ruleset_t small, big;
    rules_10(&small);
    rules_1000(&big);
    printf("router_match vs a linear scan over pre-split rules, same topics (4 levels)\n");
    printf("%6s  %-22s %10s %12s %10s %12s\n", "rules", "topics", "trie ns", "linear ns", "speedup",
           "compile us*");
    row("mixed", &small, topics_10, false);
    row("catch-all only", &small, topics_10, true);
    row("mixed", &big, topics_1000, false);
    row("catch-all only", &big, topics_1000, true);
    printf("* compile time is wall time of one router_compile, for scale only\n");
    ruleset_free(&small);
    ruleset_free(&big);
    return 0;
}
