/*
 * test_retired.c: retiring a topic (wal.h RETIRING A TOPIC, wal_format.h
 * RETIRED FILE). The file matches the golden one written from the format's
 * text alone; damaged and newer files are told apart and set aside; a
 * drained topic is removed with its entry, a topic with a backlog (for any
 * active slot) or with batches held in memory is refused; a re-created name
 * continues its offsets and counters; forget counts what it deletes;
 * interrupted retirements are finished at the next open and re-created
 * directories keep their data; power losses at every sync of a
 * retire-then-recreate workload never let a name's offsets go back; and the
 * LOCK keeps offline tools out while the log is open.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_golden.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

#define PAYLOAD 60

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(retired, .init = setup, .fini = teardown);

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static char *topic_dir(const th_t *k, const char *enc)
{
    char *p;
    cr_assert_geq(asprintf(&p, "%s/%s", k->wal_dir, enc), 0);
    return p;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* A topic with n records, all acknowledged (drained), through slot 0. */
static wal_topic_t *drained(th_t *k, const char *name, uint32_t n)
{
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(k->w, name, &t), 0);
    cr_assert_eq(th_append(k, t, 0, n, PAYLOAD), 0);
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    return t;
}

static size_t retired_list(th_t *k, wal_retired_t **v)
{
    size_t n;
    cr_assert_eq(wal_retired_list(k->w, v, &n), 0);
    return n;
}

/* ---- the format ------------------------------------------------------------ */

static const wal_retired_t golden[] = {
    { .name = "/edge1/old", .flags = 0, .next = 101, .checkpoint = 100, .dropped = 3, .lost = 1, .quarantined = 2,
      .dropped_age = 4, .forgotten = 0, .removed_ms = 1764633600000ull },
    { .name = "/edge1/stranded", .flags = WAL_RETIRED_FORGOTTEN, .next = 51, .checkpoint = 20, .forgotten = 30,
      .removed_ms = 1764633600500ull },
};

Test(retired, encoding_matches_the_golden_file_and_decodes_back)
{
    char *path = tg_path("retired/retired-v1.bin");
    size_t gn;
    uint8_t *g = tg_slurp(path, &gn);
    cr_assert(g, "%s", path);
    /* given out of name order: the file is in name order */
    wal_retired_t rev[2] = { golden[1], golden[0] };
    uint8_t *buf;
    size_t n = wal__retired_encode(rev, 2, &buf);
    cr_assert_eq(n, gn);
    cr_assert_arr_eq(buf, g, n, "the encoder and the format's text disagree");
    wal_retired_t *v;
    size_t cnt;
    cr_assert_eq(wal__retired_decode(g, gn, &v, &cnt), 0);
    cr_assert_eq(cnt, 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_str_eq(v[i].name, golden[i].name);
        cr_assert_eq(v[i].flags, golden[i].flags);
        cr_assert_eq(v[i].next, golden[i].next);
        cr_assert_eq(v[i].checkpoint, golden[i].checkpoint);
        cr_assert_eq(v[i].dropped, golden[i].dropped);
        cr_assert_eq(v[i].lost, golden[i].lost);
        cr_assert_eq(v[i].quarantined, golden[i].quarantined);
        cr_assert_eq(v[i].dropped_age, golden[i].dropped_age);
        cr_assert_eq(v[i].forgotten, golden[i].forgotten);
        cr_assert_eq(v[i].removed_ms, golden[i].removed_ms);
    }
    wal_retired_free(v, cnt);
    free(buf);
    free(g);
    free(path);
}

Test(retired, damaged_files_are_corrupt_and_a_newer_version_unsupported)
{
    static const struct { const char *file; int rc; } cases[] = {
        { "retired/empty-v1.bin", 0 },
        { "retired/bad-crc.bin", TB_ECORRUPT },
        { "retired/torn.bin", TB_ECORRUPT },
        { "retired/version-2.bin", TB_EUNSUPPORTED },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *path = tg_path(cases[i].file);
        size_t n;
        uint8_t *b = tg_slurp(path, &n);
        cr_assert(b, "%s", path);
        wal_retired_t *v = (wal_retired_t *)1;
        size_t cnt = 9;
        cr_assert_eq(wal__retired_decode(b, n, &v, &cnt), cases[i].rc, "%s", cases[i].file);
        if (cases[i].rc == 0)
            cr_assert_eq(cnt, 0);
        else
            cr_assert(v == NULL && cnt == 0);
        wal_retired_free(v, cnt);
        free(b);
        free(path);
    }
    /* rules past the checksum: each broken, the crc made good again */
    wal_retired_t bad[] = {
        { .name = "/a", .next = 5, .checkpoint = 5 },                     /* checkpoint >= next */
        { .name = "/a", .next = 0 },                                      /* next 0 */
        { .name = "/a", .next = 9, .checkpoint = 1, .forgotten = 2 },     /* forgotten without the flag */
        { .name = "/a", .flags = 4, .next = 9 },                          /* an unknown flag */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t *buf;
        size_t n = wal__retired_encode(&bad[i], 1, &buf);
        wal_retired_t *v;
        size_t cnt;
        cr_assert_eq(wal__retired_decode(buf, n, &v, &cnt), TB_ECORRUPT, "case %zu", i);
        free(buf);
    }
    wal_retired_t twice[] = { { .name = "/a", .next = 2 }, { .name = "/a", .next = 3 } };
    uint8_t *buf;
    size_t n = wal__retired_encode(twice, 2, &buf);
    wal_retired_t *v;
    size_t cnt;
    cr_assert_eq(wal__retired_decode(buf, n, &v, &cnt), TB_ECORRUPT, "a name twice");
    free(buf);
}

Test(retired, a_damaged_file_is_set_aside_and_the_log_opens)
{
    cr_assert_eq(tb_mkdir_p(h.wal_dir, 0755), 0);
    char *src = tg_path("retired/bad-crc.bin");
    size_t n;
    uint8_t *b = tg_slurp(src, &n);
    char *dst = topic_dir(&h, "RETIRED"), *aside = topic_dir(&h, "RETIRED.corrupt");
    tg_spit(dst, b, n);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    cr_assert_eq(wal_check(h.wal_dir, f), 1, "wal check reports it");
    fclose(f);
    cr_assert(strstr(out, "{\"retired_file\":\"corrupt\"}"), "%s", out);
    free(out);
    cr_assert_eq(th_open(&h), 0);
    wal_retired_t *v;
    cr_assert_eq(retired_list(&h, &v), 0);
    wal_retired_free(v, 0);
    cr_assert(!exists(dst));
    cr_assert(exists(aside), "kept for inspection");
    free(b);
    free(src);
    free(dst);
    free(aside);
}

/* ---- retiring ----------------------------------------------------------------- */

Test(retired, a_drained_topic_is_removed_and_leaves_its_entry)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = drained(&h, "/e/old", 30);
    wal_topic_t *other = drained(&h, "/e/other", 5);
    wal_topic_stats_t before = stats(t);
    cr_assert_gt(before.bytes, 0);
    uint64_t all0 = atomic_load(&h.w->all_bytes);
    wal_retired_t e;
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, &e), 0);
    cr_assert_eq(e.next, 31);
    cr_assert_eq(e.checkpoint, 30);
    cr_assert_eq(e.flags, 0);
    cr_assert_eq(e.forgotten, 0);
    char *dir = topic_dir(&h, "+e+old");
    cr_assert(!exists(dir), "the directory is gone");
    cr_assert_null(wal_topic_find(h.w, "/e/old"));
    cr_assert_eq(all0 - atomic_load(&h.w->all_bytes), before.bytes, "its bytes left the log's total");
    /* the old handle is still memory, and refuses */
    th_submit(&h, t, 100, 1, PAYLOAD);
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(h.done[2].rc, TB_ECLOSED);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL), TB_ECLOSED);
    cr_assert_eq(th_append(&h, other, 5, 1, PAYLOAD), 0, "the others go on");
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_null(wal_topic_find(h.w, "/e/old"), "not recovered");
    wal_retired_t *v;
    cr_assert_eq(retired_list(&h, &v), 1);
    cr_assert_str_eq(v[0].name, "/e/old");
    cr_assert_eq(v[0].next, 31);
    wal_retired_free(v, 1);
    cr_assert_eq(th_close(&h), 0);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    cr_assert_eq(wal_check(h.wal_dir, f), 0);
    fclose(f);
    cr_assert(strstr(out, "{\"retired\":\"/e/old\",\"next\":31,\"checkpoint\":30,\"dropped\":0,\"forgotten\":0,"),
              "%s", out);
    free(out);
    free(dir);
}

Test(retired, a_backlog_for_any_active_slot_or_in_memory_refuses_it)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, PAYLOAD), 0);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL), TB_EBUSY, "nothing acknowledged");
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_KEEP, NULL), TB_EBUSY);
    /* a second output behind: slot 0 has everything, the minimum does not */
    uint16_t id;
    cr_assert_eq(wal_output_id(h.w, "central", &id), 0);
    wal_cursor_t *c;
    wal_cursor_opts_t eo = { .start = WAL_START_EARLIEST };
    cr_assert_eq(wal_cursor_open(t, id, &eo, &c), 0);
    cr_assert_eq(wal_checkpoint(t, 10), 0);
    cr_assert_eq(wal_cursor_ack(c, 4, NULL), 0);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL), TB_EBUSY, "central has not got 5..10");
    cr_assert_eq(wal_cursor_ack(c, 10, NULL), 0);
    wal_retired_t e;
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_KEEP, &e), 0, "drained: keep says so and stops");
    cr_assert_eq(e.next, 11);
    cr_assert_not_null(wal_topic_find(h.w, "/e/t"), "kept");
    /* held in memory (acknowledged to nobody upstream yet) */
    wal_memory_opts_t mo;
    wal_memory_opts_default(&mo);
    mo.durability = WAL_DURABILITY_MEMORY_FIRST;
    cr_assert_eq(wal_topic_set_durability(t, &mo), 0);
    cr_assert_eq(wal_topic_mode(t), WAL_MODE_MEMORY);
    th_submit(&h, t, 10, 3, PAYLOAD);
    cr_assert_eq(wal_topic_held(t), 3);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL), TB_EBUSY, "held in memory");
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_FORGET, NULL), TB_EBUSY, "even for forget");
    uint64_t end = wal_topic_readable_end(t) - 1;
    cr_assert_eq(wal_checkpoint(t, end), 0);
    cr_assert_eq(wal_cursor_ack(c, end, NULL), 0);
    cr_assert_eq(wal_topic_held(t), 0);
    wal_cursor_close(c);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, &e), 0);
    cr_assert_eq(e.next, 14, "memory's offsets count: the next one is above them (got %llu)",
                 (unsigned long long)e.next);
    th_submit(&h, t, 20, 1, PAYLOAD); /* a memory topic no more: answered, not held */
    cr_assert(th_wait(&h, 3));
    cr_assert_eq(h.done[h.ndone - 1].rc, TB_ECLOSED);
}

Test(retired, a_re_created_name_continues_its_offsets_and_counters)
{
    h.o.max_topic_bytes = 2 * h.o.segment_bytes; /* a bound drops, so dropped is not 0 */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(th_append(&h, t, (uint64_t)i * 10, 10, PAYLOAD), 0);
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.dropped_total, 0);
    cr_assert_eq(wal_checkpoint_ex(t, st.next_offset - 1, 2, NULL), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    st = stats(t);
    wal_retired_t e;
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, &e), 0);
    cr_assert_eq(e.next, st.next_offset);
    cr_assert_eq(e.dropped, st.dropped_total);
    cr_assert_eq(e.dropped_age, 2);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t2;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t2), 0);
    wal_topic_stats_t s2 = stats(t2);
    cr_assert_eq(s2.next_offset, e.next, "offsets continue above every one the cluster may hold");
    cr_assert_eq(s2.checkpoint, e.next - 1);
    cr_assert_eq(s2.dropped_total, e.dropped);
    cr_assert_eq(s2.dropped_age_total, 2);
    wal_retired_t *v;
    cr_assert_eq(retired_list(&h, &v), 0, "the entry went with the re-creation");
    wal_retired_free(v, 0);
    cr_assert_eq(th_append(&h, t2, 500, 1, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, e.next);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t2 = wal_topic_find(h.w, "/e/t");
    cr_assert_not_null(t2, "the re-created topic survives a reopen");
    cr_assert_eq(stats(t2).next_offset, e.next + 1);
    cr_assert_eq(retired_list(&h, &v), 0);
    wal_retired_free(v, 0);
}

Test(retired, forget_deletes_a_backlog_and_counts_it)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 20, PAYLOAD), 0);
    cr_assert_eq(wal_checkpoint(t, 5), 0);
    wal_retired_t e;
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_FORGET, &e), 0);
    cr_assert_eq(e.flags, WAL_RETIRED_FORGOTTEN);
    cr_assert_eq(e.forgotten, 15);
    cr_assert_eq(e.next, 21);
    cr_assert_eq(e.checkpoint, 5);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.next_offset, 21);
    cr_assert_eq(st.dropped_total, 15, "forgotten messages were deleted unreplicated: dropped");
}

/* ---- interrupted retirements ------------------------------------------------------ */

static void write_retired(th_t *k, const wal_retired_t *v, size_t n)
{
    uint8_t *buf;
    size_t len = wal__retired_encode(v, n, &buf);
    char *p = topic_dir(k, "RETIRED");
    tg_spit(p, buf, len);
    free(p);
    free(buf);
}

Test(retired, an_interrupted_retirement_is_finished_at_open)
{
    cr_assert_eq(th_open(&h), 0);
    drained(&h, "/e/a", 20);
    drained(&h, "/e/b", 20);
    cr_assert_eq(th_close(&h), 0);
    /* killed after the entries were written: a's directory intact, b's meta gone already */
    wal_retired_t v[] = { { .name = "/e/a", .next = 21, .checkpoint = 20 },
                          { .name = "/e/b", .next = 21, .checkpoint = 20 } };
    write_retired(&h, v, 2);
    char *bmeta = topic_dir(&h, "+e+b/meta");
    cr_assert_eq(unlink(bmeta), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_null(wal_topic_find(h.w, "/e/a"));
    cr_assert_null(wal_topic_find(h.w, "/e/b"));
    char *a = topic_dir(&h, "+e+a"), *b = topic_dir(&h, "+e+b");
    cr_assert(!exists(a) && !exists(b), "both removals finished");
    wal_retired_t *got;
    cr_assert_eq(retired_list(&h, &got), 2, "the entries stay");
    wal_retired_free(got, 2);
    free(a);
    free(b);
    free(bmeta);
}

Test(retired, a_re_created_directory_beside_its_entry_keeps_its_data)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = drained(&h, "/e/t", 10);
    cr_assert_eq(wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 100, 5, PAYLOAD), 0);
    cr_assert_eq(th_close(&h), 0);
    /* killed between the new directory's meta and the entry's removal */
    wal_retired_t v = { .name = "/e/t", .next = 11, .checkpoint = 10 };
    write_retired(&h, &v, 1);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_not_null(t, "the re-created topic stays");
    cr_assert_eq(stats(t).next_offset, 16);
    uint64_t seqs[8];
    int gaps = 0;
    cr_assert_eq(th_read_all(t, 11, PAYLOAD, seqs, 8, &gaps), 5);
    wal_retired_t *got;
    cr_assert_eq(retired_list(&h, &got), 0, "the stale entry went");
    wal_retired_free(got, 0);
}

/* ---- power losses at every sync of retire, then re-create --------------------------- */

#define KILL_POINTS 12 /* the workload has 9 syncs: the last runs finish whole */

typedef struct {
    bool crashed, reopened;
    bool retired_returned;  /* wal_topic_retire returned 0 before the crash */
    uint64_t old_next;      /* the topic's next offset before the retirement */
    bool present;           /* the topic is there after the reopen */
    bool entry;             /* and/or its entry */
    uint64_t next_after;    /* the offset the first append after the reopen got */
    long readable;          /* a present topic: records from its checkpoint + 1, intact */
    uint64_t expect_readable;
} kill_t;

static void kill_run(int n, kill_t *out)
{
    th_t k;
    th_init(&k, WAL_FSYNC_ALWAYS);
    crashio_t *c = crashio_new((unsigned)n * 15485863u + 11);
    k.o.io = crashio_io(c);
    *out = (kill_t){ 0 };
    wal_topic_t *t;
    if (th_open(&k) != 0 || wal_topic_open(k.w, "/e/t", &t) != 0)
        goto done;
    for (int i = 0; i < 3; i++)
        th_append(&k, t, (uint64_t)i * 10, 10, PAYLOAD);
    wal_checkpoint(t, wal_topic_readable_end(t) - 1);
    wal_sync(k.w);
    out->old_next = stats(t).next_offset;
    crashio_crash_at_sync(c, n);
    if (wal_topic_retire(t, WAL_RETIRE_REMOVE, NULL) == 0 && !crashio_crashed(c)) {
        out->retired_returned = true;
        /* re-created, and written to */
        if (wal_topic_open(k.w, "/e/t", &t) == 0)
            th_append(&k, t, 1000, 4, PAYLOAD);
    }
    out->crashed = crashio_crashed(c);
    th_close(&k);
    k.o.io = NULL;
    if (th_open(&k) != 0)
        goto done;
    out->reopened = true;
    wal_retired_t *v;
    size_t nv;
    wal_retired_list(k.w, &v, &nv);
    out->entry = nv == 1;
    wal_retired_free(v, nv);
    t = wal_topic_find(k.w, "/e/t");
    out->present = t != NULL;
    if (t) {
        wal_topic_stats_t st = stats(t);
        uint64_t *seqs = calloc(64, sizeof *seqs);
        int gaps = 0;
        out->readable = th_read_all(t, st.checkpoint + 1, PAYLOAD, seqs, 64, &gaps);
        out->expect_readable = st.next_offset - 1 - st.checkpoint;
        free(seqs);
    }
    if (wal_topic_open(k.w, "/e/t", &t) == 0 && th_append(&k, t, 2000, 1, PAYLOAD) == 0)
        out->next_after = k.done[k.ndone - 1].first_offset;
done:
    th_cleanup(&k);
    crashio_free(c);
}

Test(retired, power_loss_at_every_sync_never_lets_a_names_offsets_go_back)
{
    int crashed = 0, gone = 0, kept = 0, recreated = 0;
    for (int n = 1; n <= KILL_POINTS; n++) {
        kill_t r;
        kill_run(n, &r);
        cr_assert(r.reopened, "N=%d", n);
        crashed += r.crashed;
        cr_assert_geq(r.next_after, r.old_next, "N=%d: a new record got offset %llu, below %llu", n,
                      (unsigned long long)r.next_after, (unsigned long long)r.old_next);
        cr_assert(!(r.present && r.entry), "N=%d: a directory and its entry both survived the open", n);
        if (r.present)
            cr_assert_eq((uint64_t)r.readable, r.expect_readable, "N=%d: the topic left is whole", n);
        if (r.retired_returned && !r.present)
            cr_assert(r.entry, "N=%d: retired, and its entry lost", n);
        gone += !r.present;
        kept += r.present && !r.retired_returned;
        recreated += r.present && r.retired_returned;
    }
    cr_assert_gt(crashed, KILL_POINTS / 2, "the crash points are inside the workload");
    cr_assert_gt(gone, 0, "some runs end retired");
    cr_assert_gt(kept, 0, "some end with the topic as it was (the entry never written)");
    cr_assert_gt(recreated, 0, "some end with it re-created");
}

/* ---- the lock, and the offline command ---------------------------------------------- */

Test(retired, the_lock_keeps_offline_tools_out_while_the_log_is_open)
{
    cr_assert_eq(th_open(&h), 0);
    drained(&h, "/e/t", 3);
    int fd;
    cr_assert_eq(wal_lock_dir(h.wal_dir, false, &fd), -EWOULDBLOCK);
    cr_assert_eq(fd, -1);
    cr_assert_eq(wal_retire_offline(h.wal_dir, "/e/t", WAL_RETIRE_REMOVE, NULL), -EWOULDBLOCK);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(wal_lock_dir(h.wal_dir, false, &fd), 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(wal_retire_offline(h.wal_dir, "/e/t", WAL_RETIRE_REMOVE, NULL), -EWOULDBLOCK,
                 "our own lock counts too");
    wal_unlock_dir(fd);
    char *report = NULL;
    size_t rlen = 0;
    FILE *f = open_memstream(&report, &rlen);
    cr_assert_eq(wal_retire_offline(h.wal_dir, "/e/t", WAL_RETIRE_REMOVE, f), 0);
    fclose(f);
    cr_assert(strstr(report, "topic /e/t retired:"), "%s", report);
    cr_assert(strstr(report, "starts at offset 4"), "%s", report);
    free(report);
    cr_assert_eq(wal_retire_offline(h.wal_dir, "/e/t", WAL_RETIRE_REMOVE, NULL), -ENOENT);
    char *none = topic_dir(&h, "nowhere");
    cr_assert_eq(wal_retire_offline(none, "/e/t", WAL_RETIRE_REMOVE, NULL), -ENOENT, "no log is created");
    cr_assert(!exists(none));
    free(none);
}
