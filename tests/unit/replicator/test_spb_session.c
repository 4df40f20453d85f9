/*
 * test_spb_session.c: the Sparkplug B session (rep_spb.c, OUTPUTS.md 5.3 and
 * 5.6) rule by rule, on a fake clock and a fake source (no network): bdSeq
 * per attempt, its wrap and its persistence across a restart; no birth
 * before the SUBACK (nor after a refused one); the will's bdSeq is the
 * NBIRTH's; seq 0..255 per session; a new metric -> rebirth; NCMD Rebirth
 * -> NBIRTH with the same bdSeq; the graceful NDEATH; the silent cut (a
 * message unconfirmed past its deadline ends the session, nothing is acked
 * that was not confirmed, and the next session resends it after its birth,
 * in order, historical); primary host STATE (offline: farewell and hold;
 * online: birth and replay). Every payload is read back with protobuf-c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "proto/sparkplug_b.pb-c.h"
#include "replicator/rep_spb.h"

/* ---- the fake source: records in one global order, lanes acked apart ---------------- */

#define MAXREC 2048
#define LANES 2

typedef struct src {
    size_t n, cursor;
    struct {
        uint32_t lane;
        char device[16];
        char payload[64];
        uint64_t ts;
    } r[MAXREC];
    uint64_t acked[LANES];
    uint64_t ack_violations;    /* an ack backwards or of a record never read */
    size_t max_read;            /* the highest index read + 1 */
    unsigned rewinds, dead;
    char last_dead[200];
    uint8_t blob[64];
    size_t blob_len;
    unsigned persists;
    bool persist_fails;
    uint8_t *table;             /* the persisted metric table */
    size_t table_len;
    unsigned table_persists;
} src_t;

static int src_read(void *arg, rep__spb_rec_t *out)
{
    src_t *s = arg;
    while (s->cursor < s->n && s->cursor + 1 <= s->acked[s->r[s->cursor].lane])
        s->cursor++;
    if (s->cursor >= s->n)
        return 0;
    size_t i = s->cursor++;
    if (s->cursor > s->max_read)
        s->max_read = s->cursor;
    *out = (rep__spb_rec_t){ .lane = s->r[i].lane, .token = i + 1, .device = s->r[i].device,
                             .prefix = "telemetry", .payload = (const uint8_t *)s->r[i].payload,
                             .len = strlen(s->r[i].payload), .ts = s->r[i].ts };
    return 1;
}

static void src_rewind(void *arg)
{
    src_t *s = arg;
    s->rewinds++;
    s->cursor = 0; /* src_read skips what each lane acked */
}

static void src_ack(void *arg, uint32_t lane, uint64_t token)
{
    src_t *s = arg;
    if (lane >= LANES || token < s->acked[lane] || token > s->max_read)
        s->ack_violations++;
    else
        s->acked[lane] = token;
}

static void src_dead(void *arg, const rep__spb_rec_t *r, const char *why)
{
    (void)r;
    src_t *s = arg;
    s->dead++;
    snprintf(s->last_dead, sizeof s->last_dead, "%s", why);
}

static int src_persist(void *arg, const void *blob, size_t n)
{
    src_t *s = arg;
    if (s->persist_fails)
        return -5;
    cr_assert_leq(n, sizeof s->blob);
    memcpy(s->blob, blob, n);
    s->blob_len = n;
    s->persists++;
    return 0;
}

static int src_persist_table(void *arg, const void *p, size_t n)
{
    src_t *s = arg;
    free(s->table);
    s->table = malloc(n);
    memcpy(s->table, p, n);
    s->table_len = n;
    s->table_persists++;
    return 0;
}

static const rep__spb_src_ops_t src_ops = { src_read, src_rewind, src_ack, src_dead, src_persist, src_persist_table };

static void src_add(src_t *s, uint32_t lane, const char *device, uint64_t ts, const char *fmt, long v)
{
    cr_assert_lt(s->n, MAXREC);
    s->r[s->n].lane = lane;
    snprintf(s->r[s->n].device, sizeof s->r[s->n].device, "%s", device ? device : "");
    snprintf(s->r[s->n].payload, sizeof s->r[s->n].payload, fmt, v);
    s->r[s->n].ts = ts;
    s->n++;
}

/* ---- the session ------------------------------------------------------------------------ */

#define T0 1800000000000ull /* the fake wall clock's start, ms */

static rep__spb_sess_opts_t opts(void)
{
    return (rep__spb_sess_opts_t){ .group_id = "Plant1", .edge_node_id = "edge1", .confirm_timeout_ms = 2000,
                                   .live_window_ms = 5000, .pack = 10, .max_unconfirmed = 8 };
}

static rep__spb_sess_t *sess_new(const rep__spb_sess_opts_t *o, src_t *src, const void *blob, size_t n)
{
    rep__spb_sess_t *s = NULL;
    char err[200];
    cr_assert_eq(rep__spb_sess_new(o, &src_ops, src, blob, n, &s, err, sizeof err), 0, "%s", err);
    return s;
}

/* A payload read back. */
typedef struct got {
    char topic[128];
    long seq;          /* -1: none */
    long bdseq;        /* -1: no bdSeq metric */
    size_t nmetrics;
    uint64_t alias[64];
    double value[64];
    bool historical[64];
    char name[64][48];
} got_t;

static void decode(const char *topic, const uint8_t *p, size_t len, got_t *g)
{
    memset(g, 0, sizeof *g);
    snprintf(g->topic, sizeof g->topic, "%s", topic);
    Spb__Payload *pl = spb__payload__unpack(NULL, len, p);
    cr_assert_not_null(pl, "%s: not a Sparkplug payload", topic);
    g->seq = pl->has_seq ? (long)pl->seq : -1;
    g->bdseq = -1;
    for (size_t i = 0; i < pl->n_metrics && g->nmetrics < 64; i++) {
        const Spb__Payload__Metric *m = pl->metrics[i];
        if (m->name && strcmp(m->name, "bdSeq") == 0) {
            g->bdseq = (long)m->long_value;
            continue;
        }
        if (m->name && strcmp(m->name, "Node Control/Rebirth") == 0)
            continue;
        size_t k = g->nmetrics++;
        g->alias[k] = m->alias;
        g->value[k] = m->value_case == SPB__PAYLOAD__METRIC__VALUE_DOUBLE_VALUE ? m->double_value : -1;
        g->historical[k] = m->has_is_historical && m->is_historical;
        snprintf(g->name[k], sizeof g->name[k], "%s", m->name ? m->name : "");
    }
    spb__payload__free_unpacked(pl, NULL);
}

/* rep__spb_next, decoded; returns its answer. */
static int next(rep__spb_sess_t *s, uint64_t now, got_t *g, uint64_t *token)
{
    rep__spb_out_t out = { 0 };
    int rc = rep__spb_next(s, now, &out);
    if (rc != REP_SPB_OUT_NONE) {
        decode(out.topic, out.payload, out.len, g);
        if (token)
            *token = out.token;
    }
    return rc;
}

static void expect_next(rep__spb_sess_t *s, uint64_t now, const char *topic, got_t *g, uint64_t *token)
{
    int rc = next(s, now, g, token);
    cr_assert_eq(rc, REP_SPB_OUT_PUBLISH, "no message (want %s)", topic);
    cr_assert_str_eq(g->topic, topic);
}

static long will_bdseq(const rep__spb_will_t *w)
{
    got_t g;
    decode(w->topic, w->payload, w->len, &g);
    cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDEATH/edge1");
    cr_assert_eq(g.seq, -1, "NDEATH carries no seq");
    return g.bdseq;
}

/* attempt + SUBACK ok: returns the will's bdSeq */
static long session_up(rep__spb_sess_t *s, uint64_t now)
{
    rep__spb_will_t w;
    cr_assert_eq(rep__spb_attempt(s, now, &w), 0);
    long b = will_bdseq(&w);
    rep__spb_subscribed(s, now, NULL, 0);
    return b;
}

/* ---- the rules ------------------------------------------------------------------------- */

Test(spb_session, bdseq_per_attempt_wraps_and_survives_a_restart)
{
    src_t *src = calloc(1, sizeof *src);
    rep__spb_sess_opts_t o = opts();
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    rep__spb_will_t w;
    for (int k = 0; k < 300; k++) {
        cr_assert_eq(rep__spb_attempt(s, T0 + (uint64_t)k, &w), 0);
        cr_assert_eq(will_bdseq(&w), k % 256, "attempt %d", k);
        if (k % 3 == 0)
            rep__spb_subscribed(s, T0, NULL, 0); /* a session that came up changes nothing */
    }
    cr_assert_eq(src->persists, 300, "persisted on every attempt");
    cr_assert_eq(src->blob_len, REP_SPB_BDSEQ_BLOB);
    rep__spb_sess_free(s);

    /* a restart: the stored blob continues the count */
    s = sess_new(&o, src, src->blob, src->blob_len);
    cr_assert_eq(rep__spb_attempt(s, T0, &w), 0);
    cr_assert_eq(will_bdseq(&w), 300 % 256);
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_eq(st.connects, 301);
    rep__spb_sess_free(s);

    /* a damaged blob: bdSeq 0, said so */
    uint8_t bad[REP_SPB_BDSEQ_BLOB];
    memcpy(bad, src->blob, sizeof bad);
    bad[5] ^= 1;
    s = sess_new(&o, src, bad, sizeof bad);
    rep__spb_sess_stats(s, &st);
    cr_assert_not_null(strstr(st.last_error, "unreadable"), "%s", st.last_error);
    cr_assert_eq(rep__spb_attempt(s, T0, &w), 0);
    cr_assert_eq(will_bdseq(&w), 0);
    rep__spb_sess_free(s);

    /* a bdSeq that cannot be persisted: the attempt must not go on */
    s = sess_new(&o, src, NULL, 0);
    src->persist_fails = true;
    cr_assert_lt(rep__spb_attempt(s, T0, &w), 0);
    rep__spb_sess_free(s);
    free(src);
}

Test(spb_session, birth_only_after_suback_with_the_wills_bdseq)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"v\":%ld}", 1);
    rep__spb_sess_opts_t o = opts();
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    const char *const *subs;
    uint32_t nsubs;
    rep__spb_subscriptions(s, &subs, &nsubs);
    cr_assert_eq(nsubs, 1);
    cr_assert_str_eq(subs[0], "spBv1.0/Plant1/NCMD/edge1");
    got_t g;
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "nothing before an attempt");
    rep__spb_will_t w;
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(rep__spb_attempt(s, T0, &w), 0); /* three attempts that never reached SUBACK */
        cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "no birth before the SUBACK");
    }
    long b = will_bdseq(&w);
    cr_assert_eq(b, 2);
    rep__spb_subscribed(s, T0, NULL, 0);
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    cr_assert_eq(g.seq, 0);
    cr_assert_eq(g.bdseq, b, "the NBIRTH carries the will's bdSeq");
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL); /* a new metric: born again, same bdSeq */
    cr_assert_eq(g.bdseq, b);
    cr_assert_eq(g.nmetrics, 1);
    cr_assert_str_eq(g.name[0], "telemetry/v");
    expect_next(s, T0, "spBv1.0/Plant1/NDATA/edge1", &g, NULL);
    cr_assert_eq(g.seq, 1);

    /* a refused subscription: no birth on that session */
    cr_assert_eq(rep__spb_attempt(s, T0, &w), 0);
    rep__spb_subscribed(s, T0, "spBv1.0/Plant1/NCMD/edge1", 0x87);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "a birth after a refused SUBACK");
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_eq(st.phase, REP_SPB_REFUSED);
    cr_assert_not_null(strstr(st.last_error, "NCMD/edge1 refused (0x87)"), "%s", st.last_error);
    rep__spb_sess_free(s);
    free(src);
}

/* seq runs 0..255 and wraps within a session; a new session starts at 0. */
Test(spb_session, seq_per_session)
{
    src_t *src = calloc(1, sizeof *src);
    for (long i = 0; i < 600; i++)
        src_add(src, 0, NULL, T0 + (uint64_t)i, "{\"v\":%ld}", i);
    rep__spb_sess_opts_t o = opts();
    o.pack = 1;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    got_t g;
    uint64_t tok;
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok);
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok); /* telemetry/v is new */
    cr_assert_eq(g.seq, 0);
    long want = 1;
    for (int i = 0; i < 400; i++) {
        expect_next(s, T0 + 600, "spBv1.0/Plant1/NDATA/edge1", &g, &tok);
        cr_assert_eq(g.seq, want, "message %d: seq %ld, want %ld", i, g.seq, want);
        cr_assert_eq(g.value[0], (double)i);
        want = (want + 1) % 256;
        rep__spb_confirmed(s, T0 + 600, tok);
    }
    cr_assert_eq(src->acked[0], 400);
    /* a new session: NBIRTH seq 0, then data from seq 1 on, where the log was confirmed */
    session_up(s, T0 + 700);
    expect_next(s, T0 + 700, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok);
    cr_assert_eq(g.seq, 0);
    expect_next(s, T0 + 700, "spBv1.0/Plant1/NDATA/edge1", &g, &tok);
    cr_assert_eq(g.seq, 1);
    cr_assert_eq(g.value[0], 400.0);
    cr_assert_eq(src->ack_violations, 0);
    rep__spb_sess_free(s);
    free(src);
}

/* A node metric seen later: a full rebirth, aliases kept; a device metric
 * seen later: that device's DBIRTH only. */
Test(spb_session, new_metric_later_rebirths_with_stable_aliases)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"a\":%ld}", 1);
    src_add(src, 0, NULL, T0 + 1, "{\"a\":%ld,\"b\":7}", 2);
    src_add(src, 1, "pump", T0 + 2, "{\"rpm\":%ld}", 900);
    src_add(src, 1, "pump", T0 + 3, "{\"rpm\":%ld,\"temp\":40}", 901);
    rep__spb_sess_opts_t o = opts();
    o.devices = true;
    o.max_unconfirmed = 100; /* nothing is confirmed here */
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    const char *const *subs;
    uint32_t nsubs;
    rep__spb_subscriptions(s, &subs, &nsubs);
    cr_assert_eq(nsubs, 2);
    cr_assert_str_eq(subs[1], "spBv1.0/Plant1/DCMD/edge1/+");
    long b = session_up(s, T0);
    got_t g;
    expect_next(s, T0 + 10, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    expect_next(s, T0 + 10, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    cr_assert_eq(g.nmetrics, 1);
    uint64_t alias_a = g.alias[0];
    expect_next(s, T0 + 10, "spBv1.0/Plant1/NDATA/edge1", &g, NULL);
    cr_assert_eq(g.nmetrics, 1);
    cr_assert_eq(g.alias[0], alias_a);
    cr_assert_str_eq(g.name[0], "", "NDATA by alias only");
    expect_next(s, T0 + 10, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL); /* b is new */
    cr_assert_eq(g.bdseq, b);
    cr_assert_eq(g.seq, 0);
    cr_assert_eq(g.nmetrics, 2);
    cr_assert_str_eq(g.name[0], "telemetry/a");
    cr_assert_eq(g.alias[0], alias_a, "an alias is stable across rebirths");
    expect_next(s, T0 + 10, "spBv1.0/Plant1/NDATA/edge1", &g, NULL);
    cr_assert_eq(g.seq, 1);
    cr_assert_eq(g.nmetrics, 2);
    expect_next(s, T0 + 10, "spBv1.0/Plant1/DBIRTH/edge1/pump", &g, NULL);
    cr_assert_eq(g.seq, 2);
    expect_next(s, T0 + 10, "spBv1.0/Plant1/DDATA/edge1/pump", &g, NULL);
    cr_assert_eq(g.seq, 3);
    uint64_t alias_rpm = g.alias[0];
    expect_next(s, T0 + 10, "spBv1.0/Plant1/DBIRTH/edge1/pump", &g, NULL); /* temp is new: the device only */
    cr_assert_eq(g.seq, 4);
    cr_assert_eq(g.nmetrics, 2);
    cr_assert_eq(g.alias[0], alias_rpm);
    expect_next(s, T0 + 10, "spBv1.0/Plant1/DDATA/edge1/pump", &g, NULL);
    cr_assert_eq(g.seq, 5);
    cr_assert_eq(next(s, T0 + 10, &g, NULL), REP_SPB_OUT_NONE);
    rep__spb_sess_free(s);
    free(src);
}

static size_t ncmd(uint8_t *buf, size_t cap, bool rebirth)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, T0);
    rep__spb_wire_t m = { .name = "Node Control/Rebirth", .name_len = strlen("Node Control/Rebirth"),
                          .timestamp = T0, .datatype = REP_SPB_BOOLEAN, .with_datatype = true, .v.b = rebirth };
    cr_assert_eq(rep__spb_put_metric(&b, &m), 0);
    cr_assert_leq(b.len, cap);
    memcpy(buf, b.p, b.len);
    size_t n = b.len;
    rep__spb_buf_free(&b);
    return n;
}

/* NCMD Node Control/Rebirth: an NBIRTH with the same bdSeq, seq 0, then on;
 * a DCMD and a Rebirth false are ignored; the DBIRTHs follow the NBIRTH. */
Test(spb_session, ncmd_rebirth_same_bdseq)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"a\":%ld}", 1);
    src_add(src, 1, "pump", T0, "{\"rpm\":%ld}", 2);
    rep__spb_sess_opts_t o = opts();
    o.devices = true;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    session_up(s, T0); /* bdSeq 1 */
    got_t g;
    int guard = 0;
    while (next(s, T0, &g, NULL) != REP_SPB_OUT_NONE)
        cr_assert_lt(guard++, 20);
    cr_assert_str_eq(g.topic, "spBv1.0/Plant1/DDATA/edge1/pump");
    uint8_t p[256];
    size_t n = ncmd(p, sizeof p, false);
    rep__spb_message(s, T0, "spBv1.0/Plant1/NCMD/edge1", p, n, false);
    rep__spb_message(s, T0, "spBv1.0/Plant1/DCMD/edge1/pump", p, n, false);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "Rebirth false and a DCMD do nothing");
    n = ncmd(p, sizeof p, true);
    rep__spb_message(s, T0, "spBv1.0/Plant1/NCMD/edge1", p, n, true);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "a retained NCMD is ignored");
    rep__spb_message(s, T0, "spBv1.0/Plant1/NCMD/edge1", p, n, false);
    expect_next(s, T0 + 1, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    cr_assert_eq(g.bdseq, 1, "the same bdSeq");
    cr_assert_eq(g.seq, 0);
    cr_assert_eq(g.nmetrics, 1);
    cr_assert_eq(g.value[0], 1.0, "the birth carries the current value");
    expect_next(s, T0 + 1, "spBv1.0/Plant1/DBIRTH/edge1/pump", &g, NULL);
    cr_assert_eq(g.seq, 1);
    src_add(src, 0, NULL, T0 + 5, "{\"a\":%ld}", 3);
    expect_next(s, T0 + 1, "spBv1.0/Plant1/NDATA/edge1", &g, NULL);
    cr_assert_eq(g.seq, 2);
    cr_assert_eq(g.value[0], 3.0);
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_eq(st.rebirth_cmds, 1);
    cr_assert_geq(st.cmds_ignored, 2);
    /* a malformed NCMD: ignored, said so */
    rep__spb_message(s, T0, "spBv1.0/Plant1/NCMD/edge1", (const uint8_t *)"\xff\xff\xff", 3, false);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE);
    rep__spb_sess_free(s);
    free(src);
}

Test(spb_session, graceful_ndeath_on_stop)
{
    src_t *src = calloc(1, sizeof *src);
    rep__spb_sess_opts_t o = opts();
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    rep__spb_out_t out;
    cr_assert_eq(rep__spb_stop(s, T0, &out), 0, "no session: no NDEATH");
    rep__spb_sess_free(s);
    s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    long b = session_up(s, T0);
    got_t g;
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    cr_assert_eq(rep__spb_stop(s, T0, &out), 1);
    decode(out.topic, out.payload, out.len, &g);
    cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDEATH/edge1");
    cr_assert_eq(g.bdseq, b);
    cr_assert_eq(g.seq, -1);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "nothing after stop");
    rep__spb_will_t w;
    cr_assert_lt(rep__spb_attempt(s, T0, &w), 0, "no attempt after stop");
    rep__spb_sess_free(s);
    free(src);
}

/* The silent cut: the remote stops confirming. Within the deadline the
 * session is given up; nothing unconfirmed is acked; the next session (next
 * bdSeq, a new birth) resends from the first unconfirmed record, in order,
 * flagged historical; a late confirmation of the old session changes nothing. */
Test(spb_session, silent_cut_resends_after_a_new_birth)
{
    src_t *src = calloc(1, sizeof *src);
    for (long i = 0; i < 100; i++)
        src_add(src, (uint32_t)(i % 2), NULL, T0 + (uint64_t)i, i % 2 ? "{\"b\":%ld}" : "{\"a\":%ld}", i);
    rep__spb_sess_opts_t o = opts();
    o.pack = 4;
    o.max_unconfirmed = 100;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    long b1 = session_up(s, T0 + 100);
    got_t g;
    uint64_t tok, confirmed_tok = 0, last_tok = 0;
    int msgs = 0;
    double last_confirmed_value = -1;
    while (next(s, T0 + 100, &g, &tok) == REP_SPB_OUT_PUBLISH) {
        msgs++;
        last_tok = tok;
        if (msgs == 6) { /* the first six are confirmed: births and a few data */
            confirmed_tok = tok;
            rep__spb_confirmed(s, T0 + 150, tok);
        }
        if (msgs <= 6 && strstr(g.topic, "NDATA"))
            last_confirmed_value = g.value[g.nmetrics - 1];
    }
    cr_assert_gt(msgs, 10);
    uint64_t acked0 = src->acked[0], acked1 = src->acked[1];
    cr_assert_gt(acked0 + acked1, 0);
    cr_assert_lt(acked0, 99);
    /* silence: before the deadline nothing happens, past it the session ends */
    cr_assert_eq(rep__spb_tick(s, T0 + 100 + o.confirm_timeout_ms), REP_SPB_TICK_OK);
    cr_assert_eq(rep__spb_tick(s, T0 + 101 + o.confirm_timeout_ms), REP_SPB_TICK_END);
    cr_assert_eq(src->acked[0], acked0, "an unconfirmed record was acked");
    cr_assert_eq(src->acked[1], acked1);
    cr_assert_eq(next(s, T0 + 3000, &g, NULL), REP_SPB_OUT_NONE, "nothing of a dead session is sent");
    rep__spb_confirmed(s, T0 + 3000, last_tok); /* a late answer of the old session */
    cr_assert_eq(src->acked[0], acked0);
    rep__spb_lost(s, T0 + 3000); /* the connection reports it too: no second rewind */
    cr_assert_eq(src->rewinds, 1);
    (void)confirmed_tok;

    /* the next session */
    uint64_t now = T0 + 10000;
    long b2 = session_up(s, now);
    cr_assert_eq(b2, (b1 + 1) % 256);
    expect_next(s, now, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok);
    cr_assert_eq(g.bdseq, b2);
    cr_assert_eq(g.seq, 0);
    double seen_a = -1, seen_b = -1;
    bool first = true;
    long seq = 1;
    while (next(s, now, &g, &tok) == REP_SPB_OUT_PUBLISH) {
        cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDATA/edge1");
        cr_assert_eq(g.seq, seq++, "seq continuity");
        for (size_t k = 0; k < g.nmetrics; k++) {
            double v = g.value[k];
            cr_assert(g.historical[k], "a resent value older than the live window is historical");
            double *seen = (long)v % 2 ? &seen_b : &seen_a;
            if (first) {
                cr_assert_gt(v, last_confirmed_value - 2, "resent from before the last confirmed (%g)", v);
                first = false;
            }
            cr_assert_gt(v, *seen, "out of order: %g after %g", v, *seen);
            *seen = v;
        }
        rep__spb_confirmed(s, now, tok);
    }
    cr_assert_eq(seen_a, 98.0);
    cr_assert_eq(seen_b, 99.0);
    cr_assert_eq(src->acked[0], 99);
    cr_assert_eq(src->acked[1], 100);
    cr_assert_eq(src->ack_violations, 0);
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_eq(st.deadline_ends, 1);
    cr_assert_eq(st.resent_sessions, 1);
    rep__spb_sess_free(s);
    free(src);
}

/* historical values and live ones in one source order, as a replay meets
 * live arrivals: lane 0 holds a backlog (older than the live window when
 * sent), lane 1 live values, read alternately. Every value arrives once, in
 * order per metric, flagged is_historical exactly when it is old; counts
 * the data messages holding both kinds (mixed), only historical and only
 * live ones. */
static void run_history(bool separate, int *mixed, int *hist_only, int *live_only)
{
    src_t *src = calloc(1, sizeof *src);
    uint64_t now = T0 + 60000;
    for (long i = 0; i < 40; i++) {
        src_add(src, 0, NULL, T0 + (uint64_t)i, "{\"a\":%ld}", i);                 /* the backlog */
        src_add(src, 1, NULL, now - 100 + (uint64_t)i, "{\"b\":%ld}", 1000 + i);  /* live */
    }
    rep__spb_sess_opts_t o = opts();
    o.pack = 10;
    o.max_unconfirmed = 1000;
    o.separate_history = separate;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, now);
    got_t g;
    uint64_t tok;
    double seen_a = -1, seen_b = 999;
    *mixed = *hist_only = *live_only = 0;
    while (next(s, now, &g, &tok) == REP_SPB_OUT_PUBLISH) {
        rep__spb_confirmed(s, now, tok);
        if (!strstr(g.topic, "/NDATA/"))
            continue;
        int h = 0, l = 0;
        for (size_t k = 0; k < g.nmetrics; k++) {
            double v = g.value[k];
            bool old = v < 1000;
            cr_assert_eq(g.historical[k], old, "value %g: is_historical %d", v, g.historical[k]);
            double *seen = old ? &seen_a : &seen_b;
            cr_assert_eq(v, *seen + 1, "value %g after %g: lost or out of order", v, *seen);
            *seen = v;
            if (old)
                h++;
            else
                l++;
        }
        *mixed += h && l;
        *hist_only += h && !l;
        *live_only += l && !h;
    }
    cr_assert_eq(seen_a, 39.0, "every historical value sent");
    cr_assert_eq(seen_b, 1039.0, "every live value sent");
    cr_assert_eq(src->acked[0], 79);
    cr_assert_eq(src->acked[1], 80);
    cr_assert_eq(src->ack_violations, 0);
    rep__spb_sess_free(s);
    free(src);
}

/* historical: flag (the default) lets a payload hold both; separate
 * (OUTPUTS.md 5.5, eclipse-sparkplug issue 594) never does, each
 * historical value still flagged for 3.0 hosts. */
Test(spb_session, historical_separate_never_mixes)
{
    int mixed, hist_only, live_only;
    run_history(false, &mixed, &hist_only, &live_only);
    cr_assert_gt(mixed, 0, "flag: the scenario mixes (else the test below proves nothing)");
    run_history(true, &mixed, &hist_only, &live_only);
    cr_assert_eq(mixed, 0, "separate: %d payloads hold historical and live values", mixed);
    cr_assert_gt(hist_only, 0);
    cr_assert_gt(live_only, 0);
}

/* A data message begun with a dead letter only (a type mismatch) and then
 * a record that must go in another message (another device; under
 * separate, the other kind of value): the record is sent, not held until
 * the next arrival, and the dead letter is acked with it. */
Test(spb_session, dead_letter_then_another_message_does_not_stall)
{
    for (int variant = 0; variant < 2; variant++) {
        src_t *src = calloc(1, sizeof *src);
        uint64_t now = T0 + 60000;
        src_add(src, 0, NULL, now, "{\"a\":%ld}", 1);
        src_add(src, 0, NULL, variant ? T0 : now, "{\"a\":\"x%ld\"}", 2); /* a is Double: dead */
        src_add(src, 0, variant ? NULL : "pump", now, "{\"b\":%ld}", 3);
        rep__spb_sess_opts_t o = opts();
        o.pack = 1;
        o.separate_history = variant == 1;
        rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
        session_up(s, now);
        got_t g;
        uint64_t tok = 0;
        bool got3 = false;
        int guard = 0;
        while (!got3 && guard++ < 20) {
            cr_assert_eq(next(s, now, &g, &tok), REP_SPB_OUT_PUBLISH, "variant %d: stalled before value 3", variant);
            rep__spb_confirmed(s, now, tok);
            got3 = strstr(g.topic, "DATA/") && g.nmetrics == 1 && g.value[0] == 3.0;
        }
        cr_assert(got3);
        cr_assert_eq(src->dead, 1);
        cr_assert_eq(src->acked[0], 3, "the dead letter acked with its neighbours");
        rep__spb_sess_free(s);
        free(src);
    }
}

/* /stats' counters: metrics are metrics, not records (a record of three
 * fields is three); without a primary host there is none to wait for. */
Test(spb_session, stats_count_metrics_and_no_host_is_online)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"a\":%ld,\"b\":2,\"c\":3}", 1);
    src_add(src, 0, NULL, T0 + 1, "{\"a\":%ld,\"b\":5,\"c\":6}", 4);
    rep__spb_sess_opts_t o = opts();
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    got_t g;
    while (next(s, T0 + 10, &g, NULL) == REP_SPB_OUT_PUBLISH)
        ;
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_eq(st.data_msgs, 1);
    cr_assert_eq(st.metrics, 6, "metrics %llu", (unsigned long long)st.metrics);
    cr_assert(st.host_online, "no primary_host_id: online");
    rep__spb_sess_free(s);
    free(src);
}

/* Records of interleaved devices (as one topic carrying many devices holds
 * them): each device's go to its own message, so a replay packs per device
 * (the "up to N historical values per NDATA"), not one record per
 * message. The messages of one flush are confirmed together: the last
 * carries the flush's records, so confirming an earlier one acks nothing. */
Test(spb_session, interleaved_devices_pack_per_device)
{
    src_t *src = calloc(1, sizeof *src);
    static const char *devs[] = { "d1", "d2", "d3" };
    rep__spb_sess_opts_t o = opts();
    o.pack = 10;
    o.max_unconfirmed = 1000;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    uint64_t now = T0 + 60000;
    session_up(s, now);
    got_t g;
    uint64_t tok;
    long seq = -1;
    /* the devices and their metric born first (a new metric ends a message) */
    for (long i = 0; i < 3; i++)
        src_add(src, 0, devs[i], T0 + (uint64_t)i, "{\"v\":%ld}", i);
    while (next(s, now, &g, &tok) == REP_SPB_OUT_PUBLISH) {
        seq = strstr(g.topic, "/NBIRTH/") ? 0 : g.seq;
        rep__spb_confirmed(s, now, tok);
    }
    cr_assert_eq(src->acked[0], 3);
    for (long i = 3; i < 303; i++)
        src_add(src, 0, devs[i % 3], T0 + (uint64_t)i, "{\"v\":%ld}", i);
    double last[3] = { 0, 1, 2 };
    unsigned ndata = 0, values = 0, small = 0;
    bool checked_partial = false;
    while (next(s, now, &g, &tok) == REP_SPB_OUT_PUBLISH) {
        if (strstr(g.topic, "/NBIRTH/"))
            seq = 0;
        else {
            cr_assert_eq(g.seq, (seq + 1) % 256, "seq %ld after %ld", g.seq, seq);
            seq = g.seq;
        }
        if (!strstr(g.topic, "/DDATA/")) {
            rep__spb_confirmed(s, now, tok);
            continue;
        }
        ndata++;
        int d = g.topic[strlen(g.topic) - 1] - '1';
        /* the flush goes when one device's message is full: the others hold at most one fewer,
         * but for the last flush (the source's tail) */
        small += g.nmetrics < 9;
        for (size_t k = 0; k < g.nmetrics; k++) {
            double v = g.value[k];
            cr_assert_eq((long)v % 3, d, "value %g in %s", v, g.topic);
            cr_assert_eq(v, last[d] + 3, "%s: %g after %g", g.topic, v, last[d]);
            last[d] = v;
            values++;
        }
        if (!checked_partial && d == 0) {
            uint64_t a = src->acked[0];
            rep__spb_confirmed(s, now, tok); /* the flush's first message: its records are not all out */
            cr_assert_eq(src->acked[0], a, "acked before the flush's last message was confirmed");
            checked_partial = true;
            continue;
        }
        rep__spb_confirmed(s, now, tok);
    }
    cr_assert(checked_partial);
    cr_assert_eq(values, 300);
    cr_assert(ndata >= 30 && ndata <= 34, "%u DDATA for 300 values, pack 10", ndata);
    cr_assert_leq(small, 3, "%u DDATA of fewer than 9 metrics: not packed", small);
    cr_assert_eq(src->acked[0], 303);
    cr_assert_eq(src->ack_violations, 0);
    rep__spb_sess_free(s);
    free(src);
}

/* max_unconfirmed holds the data; births and confirmations go on. */
Test(spb_session, unconfirmed_window_holds)
{
    src_t *src = calloc(1, sizeof *src);
    for (long i = 0; i < 50; i++)
        src_add(src, 0, NULL, T0 + (uint64_t)i, "{\"a\":%ld}", i);
    rep__spb_sess_opts_t o = opts();
    o.pack = 1;
    o.max_unconfirmed = 5;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    got_t g;
    uint64_t tok = 0;
    int n = 0;
    while (next(s, T0 + 60, &g, &tok) == REP_SPB_OUT_PUBLISH)
        n++;
    cr_assert_eq(n, 5);
    rep__spb_confirmed(s, T0 + 60, tok - 2);
    n = 0;
    while (next(s, T0 + 60, &g, &tok) == REP_SPB_OUT_PUBLISH)
        n++;
    cr_assert_eq(n, 3);
    rep__spb_sess_free(s);
    free(src);
}

/* A value of another type: a dead letter with the reason, acked with the
 * messages around it, the rest carried. */
Test(spb_session, dead_letter_is_acked_in_order)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"a\":%ld}", 1);
    src_add(src, 0, NULL, T0 + 1, "{\"a\":\"x%ld\"}", 2);
    src_add(src, 0, NULL, T0 + 2, "{\"a\":%ld}", 3);
    rep__spb_sess_opts_t o = opts();
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    got_t g;
    uint64_t tok = 0;
    while (next(s, T0 + 10, &g, &tok) == REP_SPB_OUT_PUBLISH)
        ;
    cr_assert_eq(src->dead, 1);
    cr_assert_not_null(strstr(src->last_dead, "telemetry/a is Double, got string"), "%s", src->last_dead);
    cr_assert_eq(src->acked[0], 0);
    rep__spb_confirmed(s, T0 + 10, tok);
    cr_assert_eq(src->acked[0], 3);
    cr_assert_eq(src->ack_violations, 0);
    rep__spb_sess_free(s);
    free(src);
}

static void state(rep__spb_sess_t *s, bool online, uint64_t ts)
{
    char p[96];
    int n = snprintf(p, sizeof p, "{\"online\": %s, \"timestamp\": %llu}", online ? "true" : "false",
                     (unsigned long long)ts);
    rep__spb_message(s, T0, "spBv1.0/STATE/scada", (const uint8_t *)p, (size_t)n, true);
}

/* primary_host_id: no birth until the host is online; offline -> NDEATH
 * farewell and hold; online again -> birth and replay of what was held. */
Test(spb_session, primary_host_state)
{
    src_t *src = calloc(1, sizeof *src);
    for (long i = 0; i < 10; i++)
        src_add(src, 0, NULL, T0 + (uint64_t)i, "{\"a\":%ld}", i);
    rep__spb_sess_opts_t o = opts();
    o.primary_host_id = "scada";
    o.pack = 1;
    o.max_unconfirmed = 100;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    const char *const *subs;
    uint32_t nsubs;
    rep__spb_subscriptions(s, &subs, &nsubs);
    cr_assert_eq(nsubs, 2);
    cr_assert_str_eq(subs[1], "spBv1.0/STATE/scada");
    session_up(s, T0);
    got_t g;
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "no birth before the host is online");
    state(s, false, 100);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE);
    state(s, true, 200);
    uint64_t tok = 0;
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok);
    cr_assert_eq(g.bdseq, 0);
    for (int i = 0; i < 4; i++) { /* the second NBIRTH (a is new), then a=0..2 */
        cr_assert_eq(next(s, T0, &g, &tok), REP_SPB_OUT_PUBLISH);
        rep__spb_confirmed(s, T0, tok);
    }
    cr_assert_eq(src->acked[0], 3);
    state(s, false, 150); /* older than the last accepted: stale, ignored */
    cr_assert_eq(next(s, T0, &g, &tok), REP_SPB_OUT_PUBLISH);
    cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDATA/edge1"); /* a=3, not confirmed */
    state(s, false, 300);
    rep__spb_out_t out;
    cr_assert_eq(rep__spb_next(s, T0, &out), REP_SPB_OUT_FAREWELL);
    decode(out.topic, out.payload, out.len, &g);
    cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDEATH/edge1");
    cr_assert_eq(g.bdseq, 0);
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "held while leaving");
    rep__spb_lost(s, T0); /* the farewell ended the connection */
    rep__spb_will_t w;
    cr_assert_eq(rep__spb_attempt(s, T0, &w), 0);
    cr_assert_eq(will_bdseq(&w), 1);
    rep__spb_subscribed(s, T0, NULL, 0);
    state(s, false, 300); /* the retained STATE */
    cr_assert_eq(next(s, T0, &g, NULL), REP_SPB_OUT_NONE, "held while the host is offline");
    state(s, true, 400);
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, &tok);
    cr_assert_eq(g.bdseq, 1);
    expect_next(s, T0, "spBv1.0/Plant1/NDATA/edge1", &g, &tok);
    cr_assert_eq(g.value[0], 3.0, "replayed from the first unconfirmed");
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert(st.host_online);
    /* a STATE that is not the 3.0 JSON: ignored, said so */
    rep__spb_message(s, T0, "spBv1.0/STATE/scada", (const uint8_t *)"ONLINE", 6, true);
    rep__spb_sess_stats(s, &st);
    cr_assert(st.host_online);
    cr_assert_not_null(strstr(st.last_error, "STATE"), "%s", st.last_error);
    rep__spb_sess_free(s);
    free(src);
}

Test(spb_session, bad_options_are_refused)
{
    rep__spb_sess_opts_t o = opts();
    o.group_id = "a/b";
    rep__spb_sess_t *s = NULL;
    char err[200];
    cr_assert_eq(rep__spb_sess_new(&o, &src_ops, NULL, NULL, 0, &s, err, sizeof err), TB_ECONFIG);
    cr_assert_null(s);
    cr_assert_not_null(strstr(err, "'/'"), "%s", err);
    o = opts();
    o.pack = 0;
    cr_assert_eq(rep__spb_sess_new(&o, &src_ops, NULL, NULL, 0, &s, err, sizeof err), TB_ECONFIG);
}

/* ---- random event sequences against the invariants ------------------------------------ */

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* 20,000 random events (attempts, SUBACKs ok or refused, pulls, confirmations
 * of what is outstanding, deadlines, losses, rebirth commands, STATE, new
 * records and new metrics) per seed. Held throughout: acks per lane never go
 * back nor past what was read, never past what a confirmed NDATA carried;
 * every NBIRTH has seq 0 and the last will's bdSeq; every other message of a
 * session the next seq; nothing is handed out outside UP except the farewell. */
static void run_random(uint64_t seed, bool primary, bool separate)
{
    src_t *src = calloc(1, sizeof *src);
    rep__spb_sess_opts_t o = opts();
    o.pack = 3;
    o.max_unconfirmed = 6;
    if (primary)
        o.primary_host_id = "scada";
    o.separate_history = separate;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    uint64_t x = seed, now = T0, state_ts = 1;
    long will = -1, seq = -1;
    bool up = false;                 /* the test's view: a session is live */
    uint64_t out_tok[64], out_max[64]; /* outstanding: token, highest record index carried (+1) */
    unsigned nout = 0;
    uint64_t confirmed_max = 0;      /* the highest record token a confirmed NDATA carried */
    long values = 0;
    for (int step = 0; step < 20000; step++) {
        unsigned ev = (unsigned)(rnd(&x) % 100);
        if (ev < 3) {
            rep__spb_will_t w;
            cr_assert_eq(rep__spb_attempt(s, now, &w), 0);
            will = will_bdseq(&w);
            nout = 0;
            seq = -1;
            up = true;
        } else if (ev < 6) {
            bool refuse = rnd(&x) % 8 == 0;
            rep__spb_subscribed(s, now, refuse ? "spBv1.0/Plant1/NCMD/edge1" : NULL, refuse ? 0x87 : 0);
        } else if (ev < 8) {
            rep__spb_lost(s, now);
            nout = 0;
            up = false;
        } else if (ev < 10) {
            now += rnd(&x) % 1500;
            if (rep__spb_tick(s, now) == REP_SPB_TICK_END) {
                nout = 0;
                up = false;
            }
        } else if (ev < 12) {
            uint8_t p[128];
            size_t n = ncmd(p, sizeof p, true);
            rep__spb_message(s, now, "spBv1.0/Plant1/NCMD/edge1", p, n, false);
        } else if (ev < 14 && primary) {
            state(s, rnd(&x) % 3 != 0, state_ts++);
        } else if (ev < 30) {
            if (src->n < MAXREC) {
                long v = values++;
                src_add(src, (uint32_t)(rnd(&x) % LANES), rnd(&x) % 5 ? NULL : "pump", now,
                        rnd(&x) % 10 ? "{\"v\":%ld}" : "{\"w\":%ld}", v);
            }
        } else if (ev < 40 && nout) {
            unsigned k = (unsigned)(rnd(&x) % nout);
            rep__spb_confirmed(s, now, out_tok[k]);
            for (unsigned i = 0; i <= k; i++)
                confirmed_max = TB_MAX(confirmed_max, out_max[i]);
            memmove(out_tok, out_tok + k + 1, (nout - k - 1) * sizeof *out_tok);
            memmove(out_max, out_max + k + 1, (nout - k - 1) * sizeof *out_max);
            nout -= k + 1;
        } else {
            rep__spb_out_t out;
            int rc = rep__spb_next(s, now, &out);
            if (rc == REP_SPB_OUT_NONE)
                continue;
            cr_assert(up, "step %d: a message with no session", step);
            got_t g;
            decode(out.topic, out.payload, out.len, &g);
            if (rc == REP_SPB_OUT_FAREWELL) {
                cr_assert_str_eq(g.topic, "spBv1.0/Plant1/NDEATH/edge1");
                cr_assert_eq(g.bdseq, will);
                continue;
            }
            if (strstr(g.topic, "/NBIRTH/")) {
                cr_assert_eq(g.seq, 0);
                cr_assert_eq(g.bdseq, will, "step %d: NBIRTH bdSeq %ld, the will's %ld", step, g.bdseq, will);
            } else {
                cr_assert_geq(seq, 0, "step %d: %s before the NBIRTH", step, g.topic);
                cr_assert_eq(g.seq, (seq + 1) % 256, "step %d: seq %ld after %ld", step, g.seq, seq);
            }
            seq = g.seq;
            uint64_t carried = 0;
            unsigned nhist = 0;
            if (strstr(g.topic, "DATA/"))
                for (size_t k = 0; k < g.nmetrics; k++) {
                    carried = TB_MAX(carried, (uint64_t)g.value[k] + 1);
                    nhist += g.historical[k];
                }
            if (separate && strstr(g.topic, "DATA/"))
                cr_assert(nhist == 0 || nhist == g.nmetrics, "step %d: %u of %zu values historical in one payload",
                          step, nhist, g.nmetrics);
            /* value v is the record at index v (all values distinct): token v + 1 */
            cr_assert_lt(nout, 64);
            out_tok[nout] = out.token;
            out_max[nout++] = carried;
        }
        for (unsigned l = 0; l < LANES; l++)
            cr_assert_leq(src->acked[l], confirmed_max, "step %d: lane %u acked %llu, confirmed only %llu", step, l,
                          (unsigned long long)src->acked[l], (unsigned long long)confirmed_max);
        cr_assert_eq(src->ack_violations, 0, "step %d", step);
        cr_assert_eq(src->dead, 0, "%s", src->last_dead);
    }
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_log_info("seed %llu: %llu births, %llu data, %llu confirmed, %llu deadline ends, acked %llu/%llu of %zu",
                (unsigned long long)seed, (unsigned long long)st.nbirths, (unsigned long long)st.data_msgs,
                (unsigned long long)st.confirmed_msgs, (unsigned long long)st.deadline_ends,
                (unsigned long long)src->acked[0], (unsigned long long)src->acked[1], src->n);
    cr_assert_gt(st.confirmed_msgs, 0);
    rep__spb_sess_free(s);
    free(src);
}

Test(spb_session, random_events_keep_the_invariants)
{
    for (uint64_t seed = 1; seed <= 8; seed++)
        run_random(seed * 0x9e3779b97f4a7c15ull, seed % 2 == 0, seed > 6); /* 7, 8: historical: separate */
}

/* The metric table persisted before a birth announces a change, and read
 * back after a restart: every alias is the same, a new metric gets one above
 * them, and a damaged table is refused (the session starts empty). */
Test(spb_session, aliases_survive_a_restart)
{
    src_t *src = calloc(1, sizeof *src);
    src_add(src, 0, NULL, T0, "{\"a\":%ld,\"b\":2}", 1);
    src_add(src, 1, "pump", T0, "{\"rpm\":%ld}", 900);
    rep__spb_sess_opts_t o = opts();
    o.devices = true;
    o.max_unconfirmed = 100;
    rep__spb_sess_t *s = sess_new(&o, src, NULL, 0);
    session_up(s, T0);
    got_t g, nb, db;
    int guard = 0;
    while (next(s, T0, &g, NULL) == REP_SPB_OUT_PUBLISH) {
        if (strstr(g.topic, "/NBIRTH/"))
            nb = g;
        if (strstr(g.topic, "/DBIRTH/"))
            db = g;
        cr_assert_lt(guard++, 20);
    }
    cr_assert_eq(nb.nmetrics, 2);
    cr_assert_eq(db.nmetrics, 1);
    cr_assert_geq(src->table_persists, 1);
    unsigned persists = src->table_persists;
    session_up(s, T0); /* a rebirth with nothing new writes nothing */
    while (next(s, T0, &g, NULL) == REP_SPB_OUT_PUBLISH)
        ;
    cr_assert_eq(src->table_persists, persists);
    rep__spb_sess_free(s);

    /* the restart: a new metric first, so a table not restored would number it 1 */
    src_t *src2 = calloc(1, sizeof *src2);
    src_add(src2, 0, NULL, T0, "{\"c\":%ld,\"b\":3,\"a\":4}", 1);
    src_add(src2, 1, "pump", T0, "{\"rpm\":%ld}", 901);
    s = sess_new(&o, src2, NULL, 0);
    char err[200];
    cr_assert_eq(rep__spb_sess_load_table(s, src->table, src->table_len, err, sizeof err), 0, "%s", err);
    session_up(s, T0);
    got_t nb2 = { 0 }, db2 = { 0 };
    guard = 0;
    while (next(s, T0, &g, NULL) == REP_SPB_OUT_PUBLISH) {
        if (strstr(g.topic, "/NBIRTH/"))
            nb2 = g;
        if (strstr(g.topic, "/DBIRTH/"))
            db2 = g;
        cr_assert_lt(guard++, 20);
    }
    cr_assert_eq(nb2.nmetrics, 3);
    uint64_t max_alias = 0;
    for (size_t i = 0; i < 2; i++) {
        cr_assert_str_eq(nb2.name[i], nb.name[i]);
        cr_assert_eq(nb2.alias[i], nb.alias[i], "%s: alias %llu, was %llu", nb.name[i],
                     (unsigned long long)nb2.alias[i], (unsigned long long)nb.alias[i]);
        max_alias = TB_MAX(max_alias, nb.alias[i]);
    }
    max_alias = TB_MAX(max_alias, db.alias[0]);
    cr_assert_str_eq(nb2.name[2], "telemetry/c");
    cr_assert_gt(nb2.alias[2], max_alias, "a new metric's alias is above the restored ones");
    cr_assert_eq(db2.alias[0], db.alias[0]);
    rep__spb_sess_free(s);

    /* a damaged table: refused, said so, and the session goes on with none */
    src->table[src->table_len / 2] ^= 0x40;
    s = sess_new(&o, src2, NULL, 0);
    cr_assert_eq(rep__spb_sess_load_table(s, src->table, src->table_len, err, sizeof err), TB_EMALFORMED);
    cr_assert_not_null(strstr(err, "checksum"), "%s", err);
    rep__spb_sess_stats_t st;
    rep__spb_sess_stats(s, &st);
    cr_assert_not_null(strstr(st.last_error, "checksum"), "%s", st.last_error);
    session_up(s, T0);
    expect_next(s, T0, "spBv1.0/Plant1/NBIRTH/edge1", &g, NULL);
    rep__spb_sess_free(s);
    free(src->table);
    free(src2->table);
    free(src);
    free(src2);
}
