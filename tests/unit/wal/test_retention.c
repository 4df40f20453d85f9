/* test_retention.c: checkpoints free the disk; bounds hold it; every drop is counted. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "helper_wal.h"

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.max_topic_bytes = 16384; /* four segments */
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(retention, .init = setup, .fini = teardown);

#define PAYLOAD 100
#define PER_BATCH 10

static wal_topic_t *open_topic(const char *name) { return th_topic(&h, name); }

/* Appends n batches of PER_BATCH messages; seq continues from *seq. */
static void fill(wal_topic_t *t, int batches, uint64_t *seq) { th_fill(&h, t, batches, PER_BATCH, PAYLOAD, seq); }

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static long disk_bytes(const char *encoded)
{
    char *dir = th_topic_dir(&h, encoded);
    DIR *d = opendir(dir);
    struct dirent *e;
    long sum = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".seg"))
            continue;
        char *p = tb_asprintf("%s/%s", dir, e->d_name);
        sum += th_file_size(p);
        free(p);
    }
    closedir(d);
    free(dir);
    return sum;
}

Test(retention, acknowledging_everything_leaves_only_the_active_segment)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 8, &seq);
    cr_assert_gt(stats(t).segments, 2);
    cr_assert_eq(wal_checkpoint(t, wal_topic_readable_end(t) - 1), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats(t).segments, 1);
    cr_assert_eq(stats(t).dropped_total, 0);
}

Test(retention, nothing_above_the_checkpoint_is_deleted)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 8, &seq);
    uint64_t ck = 37;
    cr_assert_eq(wal_checkpoint(t, ck), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_gt(stats(t).oldest_offset, 1, "segments at or below the checkpoint went");
    uint64_t seqs[128];
    int gaps;
    cr_assert_eq(th_read_all(t, ck + 1, PAYLOAD, seqs, 128, &gaps), (long)(seq - ck));
    cr_assert_eq(gaps, 0);
    cr_assert_eq(seqs[0], ck); /* offset ck + 1 holds message ck (seq starts at 0) */
}

Test(retention, checkpoint_survives_reopen)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 3, &seq);
    cr_assert_eq(wal_checkpoint(t, 17), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_checkpoint(wal_topic_find(h.w, "/e/t")), 17);
}

Test(retention, checkpoint_at_or_past_the_readable_end_is_refused)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 1, &seq);
    cr_assert_eq(wal_checkpoint(t, 11), TB_EINVALID);
    cr_assert_eq(wal_checkpoint(t, 10), 0);
}

Test(retention, topic_never_exceeds_its_bound_on_disk)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    for (int i = 0; i < 40; i++) {
        fill(t, 1, &seq);
        cr_assert_leq(stats(t).bytes, 16384);
        cr_assert_leq(disk_bytes("+e+t"), 16384);
    }
    cr_assert_gt(stats(t).dropped_total, 0);
}

Test(retention, every_message_is_on_disk_or_counted_as_dropped)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 40, &seq);
    uint64_t seqs[512];
    int gaps;
    long on_disk = th_read_all(t, 1, PAYLOAD, seqs, 512, &gaps);
    cr_assert_eq(gaps, 1, "a reader from offset 1 is told about the drop once");
    cr_assert_eq((uint64_t)on_disk + stats(t).dropped_total, seq);
    cr_assert_eq(stats(t).dropped_total, stats(t).oldest_offset - 1);
}

Test(retention, dropped_count_survives_reopen)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 40, &seq);
    uint64_t dropped = stats(t).dropped_total;
    cr_assert_gt(dropped, 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(stats(wal_topic_find(h.w, "/e/t")).dropped_total, dropped);
}

Test(retention, acknowledged_messages_are_not_counted_when_a_bound_deletes_them)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 2, &seq); /* offsets 1..20, all in the first segment */
    cr_assert_eq(wal_checkpoint(t, 15), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq(stats(t).oldest_offset, 1, "the first segment holds unacknowledged records");
    fill(t, 40, &seq); /* the bound now deletes the first segment and more */
    cr_assert_gt(stats(t).oldest_offset, 21);
    cr_assert_eq(stats(t).dropped_total, stats(t).oldest_offset - 1 - 15);
}

Test(retention, total_bound_deletes_the_oldest_topic_data_first)
{
    h.o.max_topic_bytes = 1 << 20;
    h.o.max_total_bytes = 24576; /* six segments for both topics */
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *a = open_topic("/e/a");
    wal_topic_t *b = open_topic("/e/b");
    uint64_t sa = 0, sb = 0;
    fill(a, 8, &sa);
    cr_assert_eq(stats(a).dropped_total, 0, "under the total bound so far");
    fill(b, 10, &sb);
    cr_assert_gt(stats(a).dropped_total, 0, "the older topic paid first");
    cr_assert_eq(stats(b).dropped_total, 0);
    cr_assert_leq(disk_bytes("+e+a") + disk_bytes("+e+b"), 24576);
}

Test(retention, interrupted_deletion_is_finished_without_counting_twice)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic("/e/t");
    uint64_t seq = 0;
    fill(t, 3, &seq);
    char *dir = th_topic_dir(&h, "+e+t");
    char *cmd = tb_asprintf("cp %s/00000000000000000001.seg %s/keep", dir, h.dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    fill(t, 20, &seq);
    uint64_t dropped = stats(t).dropped_total;
    cr_assert_gt(stats(t).oldest_offset, 1);
    cr_assert_eq(th_close(&h), 0);
    /* as if the process died between persisting the floor and the unlink */
    cmd = tb_asprintf("cp %s/keep %s/00000000000000000001.seg", h.dir, dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).dropped_total, dropped);
    char *p = tb_asprintf("%s/00000000000000000001.seg", dir);
    cr_assert_eq(th_file_size(p), -1, "the leftover below the floor was deleted");
    free(p);
    free(dir);
}
