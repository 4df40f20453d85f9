/*
 * test_accounting.c: what the WAL tells the gateway's accounting invariant
 * and lag_bytes (wal.h): this process's first offset, its share of the
 * drops, the drop floor that wal_checkpoint_floor reports so an offset is
 * never both dropped and acknowledged, and byte positions (reader
 * position, bytes from it to the end of the log).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helper_wal.h"

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.max_topic_bytes = 16384; /* four 4 KiB segments */
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(accounting, .init = setup, .fini = teardown);

#define PAYLOAD 100
#define PER_BATCH 10

static wal_topic_t *topic(void)
{
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    return t;
}

static void fill(wal_topic_t *t, int batches, uint64_t *seq) { th_fill(&h, t, batches, PER_BATCH, PAYLOAD, seq); }

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

Test(accounting, a_new_log_starts_this_process_at_offset_one)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_stats_t st = stats(topic());
    cr_assert_eq(st.open_offset, 1);
    cr_assert_eq(st.dropped_since_open, 0);
    cr_assert_eq(st.drop_floor, 0);
}

Test(accounting, a_reopened_log_starts_this_process_after_what_it_holds)
{
    cr_assert_eq(th_open(&h), 0);
    uint64_t seq = 0;
    fill(topic(), 3, &seq);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    cr_assert_eq(stats(t).open_offset, 31);
    fill(t, 1, &seq);
    cr_assert_eq(stats(t).open_offset, 31, "writing does not move it");
}

Test(accounting, bound_drops_of_this_process_are_counted_and_raise_the_floor)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 30, &seq);
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.dropped_total, 0);
    cr_assert_eq(st.dropped_since_open, st.dropped_total, "a fresh log: every drop is this process's");
    cr_assert_eq(st.spill_lost_since_open, 0, "the bound's drops, none a spill's");
    cr_assert_eq(st.drop_floor, st.oldest_offset, "the floor is where the log now starts");
}

Test(accounting, drops_of_an_earlier_run_are_not_this_process_s)
{
    cr_assert_eq(th_open(&h), 0);
    uint64_t seq = 0;
    while (stats(topic()).segments < 3) /* under the bound of four */
        fill(topic(), 1, &seq);
    cr_assert_eq(stats(topic()).dropped_total, 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t open = stats(t).open_offset;
    while (stats(t).dropped_total == 0) /* until the bound pushes out the oldest segment */
        fill(t, 1, &seq);
    wal_topic_stats_t st = stats(t);
    cr_assert_gt(st.dropped_total, 0);
    cr_assert_lt(st.oldest_offset, open, "only the earlier run's records went");
    cr_assert_eq(st.dropped_since_open, 0);
}

Test(accounting, checkpoint_reports_the_floor_below_which_the_bound_deleted)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 2, &seq);
    uint64_t floor = 99;
    cr_assert_eq(wal_checkpoint_floor(t, 5, &floor), 0);
    cr_assert_eq(floor, 0, "nothing deleted yet");
    fill(t, 30, &seq); /* the bound deletes the oldest segments, records 6.. among them */
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(wal_checkpoint_floor(t, 20, &floor), 0);
    cr_assert_eq(floor, st.drop_floor);
    cr_assert_gt(floor, 21, "records 6..20, acked now, were deleted before: the caller must not count them");
}

Test(accounting, an_offset_is_dropped_or_acknowledged_never_both)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 6, &seq);
    cr_assert_eq(wal_checkpoint(t, 30), 0); /* acked before the bound comes */
    fill(t, 30, &seq);
    wal_topic_stats_t st = stats(t);
    /* everything below the floor was either acked (<= 30) or counted dropped */
    cr_assert_eq(st.dropped_since_open, st.drop_floor - 1 - 30);
}

Test(accounting, a_checkpoint_at_or_past_the_readable_end_is_refused_with_no_floor)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 1, &seq);
    uint64_t floor = 99;
    cr_assert_eq(wal_checkpoint_floor(t, 11, &floor), TB_EINVALID);
    cr_assert_eq(floor, 0);
    cr_assert_eq(wal_topic_checkpoint(t), 0);
}

/* ---- byte positions ------------------------------------------------------ */

Test(accounting, bytes_after_a_fresh_reader_count_the_whole_log)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 8, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_pos_t pos;
    wal_reader_pos(r, &pos);
    cr_assert_not(pos.exact, "nothing read yet: the segment is not open");
    cr_assert_eq(pos.offset, 1);
    cr_assert_eq(wal_topic_bytes_after(t, &pos), stats(t).bytes);
    wal_reader_close(r);
}

Test(accounting, bytes_after_the_reader_shrink_by_each_record_read)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 8, &seq); /* 80 records over several segments */
    uint64_t total = stats(t).bytes;
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    uint64_t read = 0, headers = 0, prev_seg = 0;
    for (int i = 0; i < 80; i++) {
        cr_assert_eq(wal_reader_next(r, &rec), 0);
        read += rec.raw_len;
        wal_pos_t pos;
        wal_reader_pos(r, &pos);
        cr_assert(pos.exact);
        if (pos.seg_base != prev_seg) {
            headers += pos.byte - rec.raw_len; /* the segment's header, before its first record */
            prev_seg = pos.seg_base;
        }
        cr_assert_eq(wal_topic_bytes_after(t, &pos), total - read - headers, "after record %d", i + 1);
    }
    wal_pos_t end;
    wal_reader_pos(r, &end);
    cr_assert_eq(wal_topic_bytes_after(t, &end), 0);
    wal_reader_close(r);
}

Test(accounting, a_position_in_a_deleted_segment_counts_what_is_left)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic();
    uint64_t seq = 0;
    fill(t, 2, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(r, &rec), 0);
    wal_pos_t pos;
    wal_reader_pos(r, &pos);
    fill(t, 30, &seq); /* the bound deletes the reader's segment */
    cr_assert_gt(stats(t).oldest_offset, pos.offset);
    cr_assert_eq(wal_topic_bytes_after(t, &pos), stats(t).bytes);
    wal_reader_close(r);
}
