/*
 * test_cursors.c: several outputs read one log (wal.h CURSORS). Each has a
 * slot with its own persistent checkpoint; retention waits for the slowest
 * active slot; a bound's drops are counted per slot with the slot's own
 * checkpoint; the meta file becomes version 3 only when a second slot
 * exists, and keeps every slot across a reopen; the memory tier releases a
 * held batch only when every active output is past it; and power losses at
 * every sync of a two-cursor workload never lose a record a slot has not
 * acknowledged nor move a slot back below what a finished wal_sync made
 * durable.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

#define PAYLOAD 100

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(cursors, .init = setup, .fini = teardown);

static wal_topic_t *open_topic(void) { return th_topic(&h, "/e/t"); }

/* n batches of 10 (about 1.3 KB each: a 4 KiB segment holds 2 or 3 of them) */
static void fill(wal_topic_t *t, int n, uint64_t *seq) { th_fill(&h, t, n, 10, PAYLOAD, seq); }

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static wal_cursor_t *cursor(wal_topic_t *t, const char *name, wal_start_t start)
{
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, name, &id), 0);
    wal_cursor_t *c;
    wal_cursor_opts_t o = { .start = start };
    cr_assert_eq(wal_cursor_open(t, id, &o, &c), 0, "%s", name);
    return c;
}

static wal_cursor_stats_t cstats(wal_cursor_t *c)
{
    wal_cursor_stats_t st;
    wal_cursor_stats(c, &st);
    return st;
}

static unsigned meta_version(wal_topic_t *t, wal_meta_t *m)
{
    unsigned v = 0;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, m, &v), 0);
    return v;
}

Test(cursors, output_ids_are_persistent_and_danube_is_zero)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t a, b, d, again;
    cr_assert_eq(wal_output_id(h.w, "danube", &d), 0);
    cr_assert_eq(d, 0);
    cr_assert_eq(wal_output_id(h.w, "central", &a), 0);
    cr_assert_eq(wal_output_id(h.w, "backup-2", &b), 0);
    cr_assert(a != 0 && b != 0 && a != b);
    cr_assert_eq(wal_output_id(h.w, "central", &again), 0);
    cr_assert_eq(again, a);
    cr_assert_eq(wal_output_id(h.w, "bad name", &again), TB_EINVALID);
    cr_assert_eq(wal_output_id(h.w, "", &again), TB_EINVALID);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_output_id(h.w, "backup-2", &again), 0);
    cr_assert_eq(again, b, "the id survives a reopen");
    cr_assert_eq(wal_output_id(h.w, "central", &again), 0);
    cr_assert_eq(again, a);
    /* the registry file and its directory are never taken for topics */
    cr_assert_null(wal_topic_find(h.w, "OUTPUTS"));
    cr_assert_eq(h.w->ntopics, 0);
}

Test(cursors, a_damaged_outputs_file_refuses_the_open)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, "central", &id), 0);
    cr_assert_eq(th_close(&h), 0);
    char *p = tb_asprintf("%s/OUTPUTS", h.wal_dir);
    FILE *f = fopen(p, "r+");
    cr_assert_not_null(f);
    fseek(f, 2, SEEK_SET);
    fputc('X', f); /* "0 danube" -> "0 Xanube": the crc no longer matches */
    fclose(f);
    free(p);
    cr_assert_eq(th_open(&h), TB_ECORRUPT);
}

Test(cursors, outputs_parser_accepts_only_the_documented_form)
{
    char *names[1024] = { 0 };
    size_t line;
    char ok[128];
    const char *body = "0 danube\n3 central\n";
    snprintf(ok, sizeof ok, "%scrc %08x\n", body, wal__crc32c(0, body, strlen(body)));
    cr_assert_eq(wal__outputs_parse(ok, strlen(ok), names, &line), 0);
    cr_assert_str_eq(names[0], "danube");
    cr_assert_str_eq(names[3], "central");
    for (size_t i = 0; i < 1024; i++)
        free(names[i]), names[i] = NULL;
    const char *bad[] = { "0 danube\n3 central\n3 other\n", "0 danube\n03 central\n", "0 danube\n3  central\n",
                          "0 danube\n3 cen tral\n", "0 danube\n1 danube\n", "1 central\n0 other\n", "4 danube\n" };
    for (size_t k = 0; k < TB_ARRAY_LEN(bad); k++) {
        char buf[160];
        snprintf(buf, sizeof buf, "%scrc %08x\n", bad[k], wal__crc32c(0, bad[k], strlen(bad[k])));
        cr_assert_eq(wal__outputs_parse(buf, strlen(buf), names, &line), TB_ECORRUPT, "%s", bad[k]);
        for (size_t i = 0; i < 1024; i++)
            cr_assert_null(names[i]);
    }
    cr_assert_eq(wal__outputs_parse(ok, strlen(ok) - 1, names, &line), TB_ECORRUPT, "no final newline");
    cr_assert_eq(line, 3);
}

Test(cursors, one_default_slot_keeps_the_version_1_meta_file)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 4, &seq);
    cr_assert_eq(wal_checkpoint(t, 15), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    wal_meta_t m;
    cr_assert_eq(meta_version(t, &m), 1, "a Danube-only log stays readable by older builds");
    cr_assert_eq(m.checkpoint, 15);
    cr_assert_eq(m.nslots, 0);
}

Test(cursors, two_readers_at_different_speeds_retention_waits_for_the_slower)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 12, &seq); /* offsets 1..120 over several segments */
    wal_cursor_t *fast = cursor(t, "fast", WAL_START_EARLIEST);
    wal_cursor_t *slow = cursor(t, "slow", WAL_START_EARLIEST);
    cr_assert_eq(wal_cursor_checkpoint(fast), 0, "EARLIEST: before the oldest record");
    cr_assert_eq(wal_cursor_checkpoint(slow), 0);
    wal_cursors_settled(h.w); /* nobody took slot 0: parked, not waited for */
    uint32_t segs0 = stats(t).segments;
    cr_assert_gt(segs0, 4);

    /* each reads the whole log on its own */
    uint64_t seqs[256];
    int gaps;
    cr_assert_eq(th_read_all(t, wal_cursor_checkpoint(fast) + 1, PAYLOAD, seqs, 256, &gaps), 120);
    cr_assert_eq(th_read_all(t, wal_cursor_checkpoint(slow) + 1, PAYLOAD, seqs, 256, &gaps), 120);

    cr_assert_eq(wal_cursor_ack(fast, 120, NULL), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_topic_checkpoint(t), 0, "the minimum: slow acknowledged nothing");
    cr_assert_eq(stats(t).segments, segs0, "nothing deleted while the slower reader needs it");
    cr_assert_eq(stats(t).oldest_offset, 1);

    cr_assert_eq(wal_cursor_ack(slow, 60, NULL), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(wal_topic_checkpoint(t), 60);
    wal_topic_stats_t st = stats(t);
    cr_assert_lt(st.segments, segs0, "segments wholly at or below the slower checkpoint went");
    cr_assert_gt(st.oldest_offset, 1);
    cr_assert_leq(st.oldest_offset, 61, "nothing the slower reader has not acknowledged");
    cr_assert_eq(th_read_all(t, 61, PAYLOAD, seqs, 256, &gaps), 60);
    cr_assert_eq(gaps, 0);
    cr_assert_eq(st.dropped_total, 0);
    cr_assert_eq(cstats(fast).dropped_total, 0);
    cr_assert_eq(cstats(slow).dropped_total, 0);

    /* a lower ack is ignored; past the end refused */
    cr_assert_eq(wal_cursor_ack(slow, 10, NULL), 0);
    cr_assert_eq(wal_cursor_checkpoint(slow), 60);
    cr_assert_eq(wal_cursor_ack(slow, 121, NULL), TB_EINVALID);

    cr_assert_eq(wal_cursor_ack(slow, 120, NULL), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats(t).segments, 1, "both past everything: only the active segment");
    wal_cursor_close(fast);
    wal_cursor_close(slow);
}

Test(cursors, a_parked_slot_is_not_waited_for_and_a_cursor_is_exclusive)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 8, &seq);
    wal_cursor_t *a = cursor(t, "a", WAL_START_EARLIEST);
    wal_cursor_t *b = cursor(t, "b", WAL_START_LATEST);
    cr_assert_eq(wal_cursor_checkpoint(b), 80, "LATEST: from the readable end");
    uint16_t ida;
    cr_assert_eq(wal_output_id(h.w, "a", &ida), 0);
    wal_cursor_t *dup;
    cr_assert_eq(wal_cursor_open(t, ida, NULL, &dup), TB_EINVALID, "one cursor per slot");
    wal_cursors_settled(h.w);
    cr_assert_eq(wal_topic_checkpoint(t), 0);
    wal_cursor_close(a); /* parked: kept, not waited for */
    cr_assert_eq(wal_topic_checkpoint(t), 80, "the minimum over the active slots");
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats(t).segments, 1);
    /* the parked slot counted what went before it acknowledged it */
    cr_assert_eq(wal_cursor_open(t, ida, NULL, &a), 0);
    wal_cursor_stats_t sa = cstats(a);
    cr_assert_eq(sa.checkpoint, 0, "reopened at its own checkpoint");
    cr_assert(sa.active);
    cr_assert_eq(sa.dropped_total, stats(t).oldest_offset - 1, "every deleted offset was a drop for it");
    cr_assert_eq(wal_topic_checkpoint(t), 0, "active again: the minimum goes back down");
    wal_cursor_close(a);
    wal_cursor_close(b);
}

Test(cursors, a_bound_counts_drops_per_slot_with_each_slots_checkpoint)
{
    h.o.max_topic_bytes = 4 * 4096; /* drop_oldest at 16 KiB */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 2, &seq);
    wal_cursor_t *a = cursor(t, "a", WAL_START_EARLIEST);
    wal_cursor_t *b = cursor(t, "b", WAL_START_EARLIEST);
    wal_cursors_settled(h.w);
    cr_assert_eq(wal_cursor_ack(a, 15, NULL), 0); /* a is ahead; b acknowledged nothing */
    fill(t, 30, &seq);                            /* offsets to 320: far past the bound */
    cr_assert_eq(wal_sync(h.w), 0);
    wal_topic_stats_t st = stats(t);
    uint64_t gone = st.oldest_offset - 1; /* offsets 1..gone were deleted by the bound */
    cr_assert_gt(gone, 15);
    wal_cursor_stats_t sa = cstats(a), sb = cstats(b);
    cr_assert_eq(sb.dropped_total, gone, "b had acknowledged none of them");
    cr_assert_eq(sa.dropped_total, gone - 15, "a had acknowledged 1..15");
    cr_assert_eq(st.dropped_total, gone, "the topic counts with the minimum");
    cr_assert_eq(sb.dropped_since_open, gone);
    cr_assert_geq(sb.drop_floor, gone + 1);
    uint64_t floor_b;
    cr_assert_eq(wal_cursor_ack(b, 3, &floor_b), 0);
    cr_assert_eq(floor_b, sb.drop_floor, "an ack tells the slot's own drop floor");
    /* persisted per slot */
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    a = cursor(t, "a", WAL_START_LATEST);
    b = cursor(t, "b", WAL_START_LATEST);
    cr_assert_eq(cstats(a).dropped_total, gone - 15);
    cr_assert_eq(cstats(b).dropped_total, gone);
    cr_assert_eq(stats(t).dropped_total, gone);
    wal_cursor_close(a);
    wal_cursor_close(b);
}

Test(cursors, reopen_keeps_each_slots_checkpoint_in_a_version_3_meta_file)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 6, &seq);
    cr_assert_eq(wal_checkpoint(t, 20), 0); /* the default slot (Danube) */
    wal_cursor_t *a = cursor(t, "central", WAL_START_EARLIEST);
    wal_cursor_t *b = cursor(t, "backup", WAL_START_EARLIEST);
    cr_assert_eq(wal_cursor_ack(a, 45, NULL), 0);
    cr_assert_eq(wal_cursor_ack(b, 33, NULL), 0);
    cr_assert_eq(wal_topic_checkpoint(t), 20);
    cr_assert_eq(th_close(&h), 0);

    char *tdir = th_topic_dir(&h, "+e+t");
    wal_meta_t m;
    unsigned v;
    cr_assert_eq(wal__meta_read(wal_io_posix(), tdir, &m, &v), 0);
    free(tdir);
    cr_assert_eq(v, 3);
    cr_assert_eq(m.nslots, 3);
    cr_assert_eq(m.checkpoint, 20, "the header: the minimum");

    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(wal_topic_checkpoint(t), 20, "until settled: the minimum over every persisted slot");
    a = cursor(t, "central", WAL_START_LATEST);
    b = cursor(t, "backup", WAL_START_LATEST);
    cr_assert_eq(wal_cursor_checkpoint(a), 45);
    cr_assert_eq(wal_cursor_checkpoint(b), 33);
    cr_assert_eq(wal_checkpoint(t, 25), 0);
    wal_cursors_settled(h.w);
    cr_assert_eq(wal_topic_checkpoint(t), 25, "slot 0 was taken by wal_checkpoint: still waited for");

    /* wal check names each output */
    wal_cursor_close(a);
    wal_cursor_close(b);
    cr_assert_eq(th_close(&h), 0);
    char *out = NULL;
    size_t outn = 0;
    FILE *f = open_memstream(&out, &outn);
    cr_assert_eq(wal_check(h.wal_dir, f), 0);
    fclose(f);
    cr_assert_not_null(strstr(out, "\"outputs\""), "%s", out);
    cr_assert_not_null(strstr(out, "\"central\":{\"id\":1,\"checkpoint\":45"), "%s", out);
    cr_assert_not_null(strstr(out, "\"backup\":{\"id\":2,\"checkpoint\":33"), "%s", out);
    cr_assert_not_null(strstr(out, "\"danube\":{\"id\":0,\"checkpoint\":25"), "%s", out);
    free(out);
}

Test(cursors, forgetting_the_last_other_output_brings_back_version_1)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 4, &seq);
    cr_assert_eq(wal_checkpoint(t, 12), 0);
    wal_cursor_t *a = cursor(t, "central", WAL_START_EARLIEST);
    cr_assert_eq(wal_cursor_ack(a, 30, NULL), 0);
    cr_assert_eq(wal_forget_output(h.wal_dir, "central", NULL), -EWOULDBLOCK, "refused while the log is open");
    wal_cursor_close(a);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(wal_forget_output(h.wal_dir, "danube", NULL), TB_EINVALID);
    cr_assert_eq(wal_forget_output(h.wal_dir, "nobody", NULL), -ENOENT);
    char *rep = NULL;
    size_t repn = 0;
    FILE *f = open_memstream(&rep, &repn);
    cr_assert_eq(wal_forget_output(h.wal_dir, "central", f), 0);
    fclose(f);
    cr_assert_not_null(strstr(rep, "topic /e/t: slot removed (checkpoint 30, dropped 0)"), "%s", rep);
    free(rep);
    char *tdir = th_topic_dir(&h, "+e+t");
    wal_meta_t m;
    unsigned v;
    cr_assert_eq(wal__meta_read(wal_io_posix(), tdir, &m, &v), 0);
    free(tdir);
    cr_assert_eq(v, 1);
    cr_assert_eq(m.checkpoint, 12, "the default slot's checkpoint");
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(wal_topic_checkpoint(t), 12);
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, "central", &id), 0, "a new output under the old name: a new slot");
    cr_assert_eq(wal_cursor_open(t, id, NULL, &a), 0);
    cr_assert_eq(wal_cursor_checkpoint(a), 40, "LATEST, not its old checkpoint");
    wal_cursor_close(a);
}

Test(cursors, each_output_counts_its_own_aged_records_and_the_topic_shows_slot_0s)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 3, &seq);
    wal_cursor_t *a = cursor(t, "a", WAL_START_EARLIEST);
    cr_assert_eq(wal_cursor_ack_ex(a, 10, 4, NULL), 0);
    cr_assert_eq(wal_cursor_ack_ex(a, 10, 9, NULL), 0); /* no move: not counted again */
    cr_assert_eq(wal_checkpoint_ex(t, 20, 2, NULL), 0);  /* slot 0 */
    cr_assert_eq(cstats(a).dropped_age_total, 4);
    cr_assert_eq(stats(t).dropped_age_total, 2, "the topic's (meta header) is slot 0's");
    wal_cursor_close(a);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    a = cursor(t, "a", WAL_START_LATEST);
    cr_assert_eq(cstats(a).dropped_age_total, 4, "persisted in its slot");
    cr_assert_eq(cstats(a).checkpoint, 10);
    cr_assert_eq(stats(t).dropped_age_total, 2);
    wal_cursor_close(a);
}

Test(cursors, memory_tier_releases_a_batch_only_when_the_minimum_passes_it)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    wal_cursor_t *a = cursor(t, "a", WAL_START_LATEST);
    wal_cursor_t *b = cursor(t, "b", WAL_START_LATEST);
    wal_cursors_settled(h.w);
    wal_memory_opts_t o;
    wal_memory_opts_default(&o);
    o.durability = WAL_DURABILITY_MEMORY_FIRST;
    o.ack = WAL_ACK_UPSTREAM;
    cr_assert_eq(wal_topic_set_durability(t, &o), 0);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    for (uint64_t s = 0; s < 30; s += 10)
        th_submit(&h, t, s, 10, PAYLOAD); /* offsets 1..30 held, 3 batches */
    cr_assert_eq(wal_topic_held(t), 30);
    cr_assert_eq(wal_cursor_ack(a, 30, NULL), 0);
    th_collect(&h);
    cr_assert_eq(h.ndone, 0, "a has them all, b none: nothing leaves memory");
    cr_assert_eq(wal_topic_held(t), 30);
    cr_assert_eq(wal_cursor_ack(b, 20, NULL), 0);
    cr_assert(th_wait(&h, 2));
    cr_assert_eq(h.done[0].first_offset, 1);
    cr_assert_eq(h.done[1].first_offset, 11);
    cr_assert_eq(wal_topic_held(t), 10, "the third batch waits for b");
    wal_cursor_close(b); /* b goes away: a alone is waited for, and it has everything */
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(h.done[2].first_offset, 21);
    cr_assert_eq(wal_topic_held(t), 0);
    cr_assert_eq(stats(t).segments, 1);
    wal_cursor_close(a);
}

Test(cursors, a_readers_buffer_grows_for_a_backlog_and_shrinks_back_when_caught_up)
{
    h.o.segment_bytes = 1 << 20;
    h.o.max_topic_bytes = 4 << 20;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    for (uint64_t s = 0; s < 4000; s += 100)
        cr_assert_eq(th_append(&h, t, s, 100, PAYLOAD), 0); /* about 560 KB in one segment */
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    cr_assert_eq(wal_reader_buffer(r), 16 << 10, "a reader starts small");
    wal_record_t rec;
    uint64_t seq, n = 0;
    while (wal_reader_next(r, &rec) == 0) {
        cr_assert(th_record_ok(&rec, PAYLOAD, &seq));
        cr_assert_eq(seq, n++);
    }
    cr_assert_eq(n, 4000);
    cr_assert_eq(wal_reader_buffer(r), 256 << 10, "a backlog doubled it to the most");
    size_t want[] = { 128 << 10, 64 << 10, 32 << 10, 16 << 10, 16 << 10 };
    for (size_t k = 0; k < TB_ARRAY_LEN(want); k++) {
        for (int i = 0; i < 16; i++)
            cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
        cr_assert_eq(wal_reader_buffer(r), want[k], "after %zu x 16 WAL_ENDs", k + 1);
    }
    cr_assert_eq(th_append(&h, t, 4000, 10, PAYLOAD), 0); /* live: still read whole, from 16 KiB */
    for (uint64_t i = 0; i < 10; i++) {
        cr_assert_eq(wal_reader_next(r, &rec), 0);
        cr_assert(th_record_ok(&rec, PAYLOAD, &seq));
        cr_assert_eq(seq, 4000 + i);
    }
    cr_assert_eq(wal_reader_buffer(r), 16 << 10);
    wal_reader_close(r);
}

/* ---- power losses at every sync of a two-cursor workload ----------------------- */

#define KILL_POINTS 40

typedef struct {
    bool crashed, reopened;
    uint64_t durable_a, durable_b; /* acked before a wal_sync that returned 0 */
    uint64_t acked_a, acked_b;     /* the highest acked */
    uint64_t got_a, got_b;         /* the checkpoints after the reopen */
    long readable_a, readable_b;   /* records read from got + 1 */
    uint64_t end;                  /* readable end after the reopen */
    uint64_t dropped_a, dropped_b;
} kill_t;

static void kill_run(int n, kill_t *out)
{
    th_t k;
    th_init(&k, WAL_FSYNC_ALWAYS);
    crashio_t *c = crashio_new((unsigned)n * 104729u + 7);
    k.o.io = crashio_io(c);
    *out = (kill_t){ 0 };
    wal_topic_t *t;
    uint16_t ia, ib;
    wal_cursor_t *a = NULL, *b = NULL;
    wal_cursor_opts_t eo = { .start = WAL_START_EARLIEST };
    if (th_open(&k) != 0 || wal_topic_open(k.w, "/e/t", &t) != 0)
        goto done;
    crashio_crash_at_sync(c, n);
    if (wal_output_id(k.w, "a", &ia) != 0 || wal_output_id(k.w, "b", &ib) != 0 ||
        wal_cursor_open(t, ia, &eo, &a) != 0 || wal_cursor_open(t, ib, &eo, &b) != 0)
        goto closed;
    wal_cursors_settled(k.w);
    uint64_t seq = 0;
    for (int i = 0; i < 30 && !crashio_crashed(c); i++) {
        th_submit(&k, t, seq, 10, PAYLOAD);
        seq += 10;
        th_wait(&k, (size_t)i + 1);
        uint64_t end = wal_topic_readable_end(t);
        /* a acks everything it read, b lags two batches behind */
        uint64_t na = end - 1, nb = end > 21 ? end - 21 : 0;
        if (wal_cursor_ack(a, na, NULL) == 0)
            out->acked_a = TB_MAX(out->acked_a, na);
        if (nb && wal_cursor_ack(b, nb, NULL) == 0)
            out->acked_b = TB_MAX(out->acked_b, nb);
        if (i % 3 == 2 && wal_sync(k.w) == 0 && !crashio_crashed(c)) {
            out->durable_a = out->acked_a;
            out->durable_b = out->acked_b;
        }
    }
closed:
    out->crashed = crashio_crashed(c);
    wal_cursor_close(a);
    wal_cursor_close(b);
    th_close(&k);
    k.o.io = NULL;
    if (th_open(&k) != 0 || wal_topic_open(k.w, "/e/t", &t) != 0)
        goto done;
    out->reopened = true;
    a = b = NULL;
    if (wal_output_id(k.w, "a", &ia) != 0 || wal_output_id(k.w, "b", &ib) != 0 ||
        wal_cursor_open(t, ia, &eo, &a) != 0 || wal_cursor_open(t, ib, &eo, &b) != 0) {
        out->reopened = false;
        wal_cursor_close(a);
        goto done;
    }
    out->got_a = wal_cursor_checkpoint(a);
    out->got_b = wal_cursor_checkpoint(b);
    out->dropped_a = cstats(a).dropped_total;
    out->dropped_b = cstats(b).dropped_total;
    out->end = wal_topic_readable_end(t);
    uint64_t *seqs = calloc(512, sizeof *seqs);
    int gaps = 0;
    out->readable_a = th_read_all(t, out->got_a + 1, PAYLOAD, seqs, 512, &gaps);
    if (gaps)
        out->readable_a = -2;
    out->readable_b = th_read_all(t, out->got_b + 1, PAYLOAD, seqs, 512, &gaps);
    if (gaps)
        out->readable_b = -2;
    free(seqs);
    wal_cursor_close(a);
    wal_cursor_close(b);
done:
    th_cleanup(&k);
    crashio_free(c);
}

Test(cursors, power_loss_at_every_sync_keeps_each_slots_records_and_durable_checkpoint)
{
    int crashed = 0, slots_lost_ground = 0;
    for (int n = 1; n <= KILL_POINTS; n++) {
        kill_t r;
        kill_run(n, &r);
        cr_assert(r.reopened, "N=%d", n);
        crashed += r.crashed;
        cr_assert_geq(r.got_a, r.durable_a, "N=%d: a's checkpoint went below a finished sync", n);
        cr_assert_geq(r.got_b, r.durable_b, "N=%d: b's checkpoint went below a finished sync", n);
        cr_assert_leq(r.got_a, r.acked_a, "N=%d: a's checkpoint past what it acknowledged", n);
        cr_assert_leq(r.got_b, r.acked_b, "N=%d: b's checkpoint past what it acknowledged", n);
        cr_assert_eq(r.dropped_a + r.dropped_b, 0, "N=%d: no bound, no drops", n);
        /* everything from each slot's checkpoint to the end is there, in order, intact */
        cr_assert_geq(r.readable_a, 0, "N=%d: a reads a damaged or missing record", n);
        cr_assert_geq(r.readable_b, 0, "N=%d: b reads a damaged or missing record", n);
        cr_assert_eq((uint64_t)r.readable_a, r.end - 1 - r.got_a, "N=%d", n);
        cr_assert_eq((uint64_t)r.readable_b, r.end - 1 - r.got_b, "N=%d", n);
        slots_lost_ground += r.got_a < r.acked_a || r.got_b < r.acked_b;
    }
    cr_assert_gt(crashed, KILL_POINTS / 2, "the crash points are inside the workload");
    cr_assert_gt(slots_lost_ground, 0, "some power losses took unpersisted acks (resent, not lost)");
}
