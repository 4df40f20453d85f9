/* test_rotation.c: segments are bounded, named by base offset, and sealed whole. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(rotation, .init = setup, .fini = teardown);

Test(rotation, no_segment_grows_past_segment_bytes)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (uint64_t i = 0; i < 40; i++)
        cr_assert_eq(th_append(&h, t, i * 5, 5, 100), 0);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_gt(st.segments, 5);
    char *dir = th_topic_dir(&h, "+e+t");
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".seg"))
            continue;
        char *p = tb_asprintf("%s/%s", dir, e->d_name);
        cr_assert_leq(th_file_size(p), 4096, "%s", e->d_name);
        free(p);
    }
    closedir(d);
    free(dir);
}

Test(rotation, batch_split_by_rotation_reads_back_in_order)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 20, 100), 0); /* ~2.8 KiB */
    cr_assert_eq(th_append(&h, t, 20, 20, 100), 0); /* cannot fit: split */
    uint64_t seqs[64];
    cr_assert_eq(th_read_all(t, 1, 100, seqs, 64, NULL), 40);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(seqs[i], (uint64_t)i);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.segments, 2);
}

Test(rotation, segment_name_is_its_first_offset)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (uint64_t i = 0; i < 10; i++)
        cr_assert_eq(th_append(&h, t, i * 7, 7, 100), 0);
    char *dir = th_topic_dir(&h, "+e+t");
    DIR *d = opendir(dir);
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(d))) {
        uint64_t base;
        if (!wal__seg_name_parse(e->d_name, &base))
            continue;
        char *p = tb_asprintf("%s/%s", dir, e->d_name);
        int fd = open(p, O_RDONLY);
        uint8_t hb[WAL_SEG_HDR_SIZE + 16];
        cr_assert_eq(read(fd, hb, sizeof hb), (ssize_t)sizeof hb);
        close(fd);
        cr_assert_eq(wal__ld64(hb + 8), base, "header base");
        cr_assert_eq(wal__ld64(hb + WAL_SEG_HDR_SIZE + 8), base, "first record offset");
        free(p);
        checked++;
    }
    closedir(d);
    free(dir);
    cr_assert_gt(checked, 2);
}

Test(rotation, sealed_segment_is_synced_before_the_next_one_exists)
{
    crashio_t *c = crashio_new(3);
    h.o.io = crashio_io(c);
    h.o.fsync = WAL_FSYNC_NEVER; /* even without per-batch syncs */
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 25, 100), 0);
    cr_assert_gt(crashio_pending_bytes(c), 0);
    cr_assert_eq(th_append(&h, t, 25, 5, 100), 0); /* rotates */
    cr_assert_lt(crashio_pending_bytes(c), 5 * 160, "only records in the new segment are unsynced");
    th_close(&h);
    crashio_free(c);
}
