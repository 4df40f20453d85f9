/*
 * test_state.c: output state blobs (wal.h OUTPUT STATE, wal_format.h OUTPUT
 * STATE BLOBS). A put reads back after a reopen; a replace is atomic under
 * a power loss at every sync of a workload of puts (the old blob or the new
 * one, whole, and never older than a put that returned); a damaged file is
 * told apart from a missing one; a newer version is unsupported, not
 * damage; bad keys and unknown ids are refused; wal check lists the blobs;
 * and forget-output removes them, so a reused id starts with none.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(state, .init = setup, .fini = teardown);

static uint16_t output(th_t *k, const char *name)
{
    uint16_t id;
    cr_assert_eq(wal_output_id(k->w, name, &id), 0, "%s", name);
    return id;
}

static char *blob_path(const th_t *k, uint16_t id, const char *key)
{
    char *p;
    cr_assert_geq(asprintf(&p, "%s/$outputs/%u/%s", k->wal_dir, (unsigned)id, key), 0);
    return p;
}

static void file_put(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static size_t file_get(const char *path, uint8_t *b, size_t cap)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    size_t n = fread(b, 1, cap, f);
    fclose(f);
    return n;
}

Test(state, put_then_get_round_trips_across_a_reopen)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id = output(&h, "spb");
    const uint8_t bdseq[] = { 7, 0, 0, 0, 42 };
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", bdseq, sizeof bdseq), 0);
    uint8_t *big = malloc(70000);
    for (size_t i = 0; i < 70000; i++)
        big[i] = (uint8_t)(i * 31 + 5);
    cr_assert_eq(wal_output_state_put(h.w, id, "aliases", big, 70000), 0);
    cr_assert_eq(wal_output_state_put(h.w, id, "empty", NULL, 0), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(output(&h, "spb"), id);
    void *p;
    size_t n;
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), 0);
    cr_assert_eq(n, sizeof bdseq);
    cr_assert_arr_eq(p, bdseq, n);
    free(p);
    cr_assert_eq(wal_output_state_get(h.w, id, "aliases", &p, &n), 0);
    cr_assert_eq(n, 70000);
    cr_assert_arr_eq(p, big, n);
    free(p);
    cr_assert_eq(wal_output_state_get(h.w, id, "empty", &p, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(p);
    /* the file is the documented frame: 16 bytes of head, then the payload */
    char *path = blob_path(&h, id, "bdseq");
    uint8_t raw[64];
    cr_assert_eq(file_get(path, raw, sizeof raw), 16 + sizeof bdseq);
    cr_assert_arr_eq(raw, "TBOS\1\0\0\0\5\0\0\0", 12);
    cr_assert_eq(wal__ld32(raw + 12), wal__crc32c(wal__crc32c(0, raw, 12), raw + 16, sizeof bdseq));
    free(path);
    /* a replace replaces */
    const uint8_t next[] = { 8 };
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", next, 1), 0);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(((uint8_t *)p)[0], 8);
    free(p);
    free(big);
}

Test(state, missing_damaged_and_newer_blobs_are_told_apart)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id = output(&h, "spb");
    void *p = (void *)1;
    size_t n = 1;
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), -ENOENT, "never put: missing");
    cr_assert_null(p);
    cr_assert_eq(n, 0);
    const char payload[] = "bdseq-17";
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", payload, sizeof payload), 0);
    char *path = blob_path(&h, id, "bdseq");
    uint8_t raw[64];
    size_t len = file_get(path, raw, sizeof raw);

    uint8_t bad[64];
    memcpy(bad, raw, len);
    bad[20] ^= 0x01; /* one payload bit: the CRC fails */
    file_put(path, bad, len);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), TB_ECORRUPT);
    cr_assert_null(p);
    file_put(path, raw, len - 1); /* torn: shorter than its length says */
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), TB_ECORRUPT);
    file_put(path, raw, 3);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), TB_ECORRUPT);
    memcpy(bad, raw, len);
    bad[len] = 0; /* one byte more than its length says */
    file_put(path, bad, len + 1);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), TB_ECORRUPT);
    /* a newer version, framed and checksummed: unsupported, not damage */
    memcpy(bad, raw, len);
    wal__st16(bad + 4, 2);
    wal__st32(bad + 12, wal__crc32c(wal__crc32c(0, bad, 12), bad + 16, len - 16));
    file_put(path, bad, len);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), TB_EUNSUPPORTED);
    /* a put over a damaged file makes it good again */
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", payload, sizeof payload), 0);
    cr_assert_eq(wal_output_state_get(h.w, id, "bdseq", &p, &n), 0);
    cr_assert_str_eq(p, payload);
    free(p);
    free(path);
}

Test(state, bad_keys_unknown_ids_and_oversized_blobs_are_refused)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id = output(&h, "spb");
    void *p;
    size_t n;
    const char *bad_keys[] = { "", "../meta", "a/b", "a b", ".", "$x",
                               "k12345678901234567890123456789012345678901234567890123456789012345" };
    for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
        cr_assert_eq(wal_output_state_put(h.w, id, bad_keys[i], "x", 1), TB_EINVALID, "%s", bad_keys[i]);
        cr_assert_eq(wal_output_state_get(h.w, id, bad_keys[i], &p, &n), TB_EINVALID, "%s", bad_keys[i]);
    }
    cr_assert_eq(wal_output_state_put(h.w, 77, "bdseq", "x", 1), TB_EINVALID, "an id OUTPUTS does not name");
    cr_assert_eq(wal_output_state_get(h.w, 77, "bdseq", &p, &n), TB_EINVALID);
    uint8_t *big = calloc(1, WAL_STATE_MAX + 1);
    cr_assert_eq(wal_output_state_put(h.w, id, "big", big, WAL_STATE_MAX + 1), TB_EINVALID);
    free(big);
    struct stat st;
    char *dir;
    cr_assert_geq(asprintf(&dir, "%s/$outputs", h.wal_dir), 0);
    cr_assert_neq(stat(dir, &st), 0, "nothing refused was written");
    free(dir);
}

static int count_topic(wal_topic_t *t, void *arg)
{
    (void)t;
    (*(size_t *)arg)++;
    return 0;
}

Test(state, the_blob_directory_is_not_taken_for_a_topic)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id = output(&h, "spb");
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", "x", 1), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    size_t topics = 0;
    wal_topic_foreach(h.w, count_topic, &topics);
    cr_assert_eq(topics, 0);
}

Test(state, forget_output_removes_its_state_and_a_reused_id_has_none)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t spb = output(&h, "spb"), keep = output(&h, "keep");
    cr_assert_eq(wal_output_state_put(h.w, spb, "bdseq", "1", 1), 0);
    cr_assert_eq(wal_output_state_put(h.w, spb, "aliases", "22", 2), 0);
    cr_assert_eq(wal_output_state_put(h.w, keep, "bdseq", "3", 1), 0);
    cr_assert_eq(th_close(&h), 0);

    char *report = NULL;
    size_t rlen = 0;
    FILE *f = open_memstream(&report, &rlen);
    cr_assert_eq(wal_forget_output(h.wal_dir, "spb", f), 0);
    fclose(f);
    cr_assert(strstr(report, "state removed (2 file(s))"), "%s", report);
    free(report);
    char *dir;
    cr_assert_geq(asprintf(&dir, "%s/$outputs/%u", h.wal_dir, (unsigned)spb), 0);
    struct stat st;
    cr_assert_neq(stat(dir, &st), 0, "the state directory is gone");
    free(dir);

    cr_assert_eq(th_open(&h), 0);
    uint16_t fresh = output(&h, "newcomer");
    cr_assert_eq(fresh, spb, "the freed id is reused");
    void *p;
    size_t n;
    cr_assert_eq(wal_output_state_get(h.w, fresh, "bdseq", &p, &n), -ENOENT, "it inherits nothing");
    cr_assert_eq(wal_output_state_get(h.w, keep, "bdseq", &p, &n), 0, "the other output's stays");
    cr_assert_eq(n, 1);
    free(p);
}

Test(state, wal_check_lists_blobs_and_reports_a_damaged_one)
{
    cr_assert_eq(th_open(&h), 0);
    uint16_t id = output(&h, "spb");
    cr_assert_eq(wal_output_state_put(h.w, id, "bdseq", "abcd", 4), 0);
    cr_assert_eq(wal_output_state_put(h.w, id, "aliases", "x", 1), 0);
    cr_assert_eq(th_close(&h), 0);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    cr_assert_eq(wal_check(h.wal_dir, f), 0);
    fclose(f);
    cr_assert(strstr(out, "{\"output\":\"spb\",\"id\":1,\"state\":{\"aliases\":{\"bytes\":17,\"status\":\"ok\"},"
                          "\"bdseq\":{\"bytes\":20,\"status\":\"ok\"}}}"),
              "%s", out);
    free(out);
    char *path = blob_path(&h, id, "bdseq");
    uint8_t raw[64];
    size_t len = file_get(path, raw, sizeof raw);
    raw[17] ^= 0xff;
    file_put(path, raw, len);
    free(path);
    f = open_memstream(&out, &olen);
    cr_assert_eq(wal_check(h.wal_dir, f), 1, "damage is reported");
    fclose(f);
    cr_assert(strstr(out, "\"bdseq\":{\"bytes\":20,\"status\":\"corrupt\"}"), "%s", out);
    free(out);
}

/* ---- power losses at every sync of a workload of puts --------------------------- */

#define PUTS 6
#define KILL_POINTS 20

/* Blob i: i * 300 bytes (so replaces change the length), each byte from i. */
static size_t blob(int i, uint8_t *b)
{
    size_t n = (size_t)i * 300;
    for (size_t k = 0; k < n; k++)
        b[k] = (uint8_t)(i * 17 + k);
    return n;
}

typedef struct {
    bool crashed;
    int durable;   /* the last put that returned 0 before the crash (0: none) */
    int tried;     /* the last put attempted */
    int got;       /* the blob read back after the reopen (0: missing, -1: neither) */
    int get_rc;
} kill_t;

static void kill_run(int n, kill_t *out)
{
    th_t k;
    th_init(&k, WAL_FSYNC_ALWAYS);
    crashio_t *c = crashio_new((unsigned)n * 7919u + 3);
    k.o.io = crashio_io(c);
    *out = (kill_t){ .got = -1 };
    uint8_t *b = malloc(PUTS * 300 + 1), *want = malloc(PUTS * 300 + 1);
    wal_topic_t *t;
    uint16_t id = 0;
    if (th_open(&k) != 0 || wal_output_id(k.w, "spb", &id) != 0 || wal_topic_open(k.w, "/e/t", &t) != 0)
        goto done;
    crashio_crash_at_sync(c, n);
    for (int i = 1; i <= PUTS && !crashio_crashed(c); i++) {
        /* a batch between the puts: the blob's syncs interleave with the log's */
        th_submit(&k, t, (uint64_t)i * 10, 2, 50);
        out->tried = i;
        size_t len = blob(i, b);
        if (wal_output_state_put(k.w, id, "bdseq", b, len) == 0 && !crashio_crashed(c))
            out->durable = i;
    }
    out->crashed = crashio_crashed(c);
    th_close(&k);
    k.o.io = NULL;
    if (th_open(&k) != 0)
        goto done;
    void *p;
    size_t len;
    out->get_rc = wal_output_state_get(k.w, id, "bdseq", &p, &len);
    if (out->get_rc == -ENOENT)
        out->got = 0;
    for (int i = 1; out->get_rc == 0 && i <= PUTS; i++) {
        size_t wl = blob(i, want);
        if (wl == len && memcmp(p, want, len) == 0)
            out->got = i;
    }
    if (out->get_rc == 0)
        free(p);
done:
    free(b);
    free(want);
    th_cleanup(&k);
    crashio_free(c);
}

Test(state, power_loss_at_every_sync_leaves_the_old_blob_or_the_new_one_whole)
{
    int crashed = 0, lost_unreturned = 0, kept_unreturned = 0;
    for (int n = 1; n <= KILL_POINTS; n++) {
        kill_t r;
        kill_run(n, &r);
        crashed += r.crashed;
        cr_assert(r.get_rc == 0 || r.get_rc == -ENOENT, "N=%d: get %d: never a damaged blob", n, r.get_rc);
        cr_assert_geq(r.got, 0, "N=%d: the blob read back is none of those put", n);
        cr_assert_geq(r.got, r.durable, "N=%d: older than a put that returned", n);
        cr_assert_leq(r.got, r.tried, "N=%d", n);
        cr_assert(r.got == r.durable || r.got == r.durable + 1, "N=%d: at most the put in flight", n);
        lost_unreturned += r.crashed && r.got == r.durable;
        kept_unreturned += r.crashed && r.got == r.durable + 1;
    }
    cr_assert_gt(crashed, KILL_POINTS / 2, "the crash points are inside the workload");
    cr_assert_gt(lost_unreturned + kept_unreturned, 0);
}
