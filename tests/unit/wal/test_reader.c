/* test_reader.c: readers follow the writer, survive rotation and retention, and report gaps. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "helper_wal.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(reader, .init = setup, .fini = teardown);

#define PAYLOAD 100

static wal_topic_t *open_topic(void) { return th_topic(&h, "/e/t"); }

static void fill(wal_topic_t *t, int batches, uint64_t *seq) { th_fill(&h, t, batches, 10, PAYLOAD, seq); }

/* Reads one record and checks it is message `seq` at offset `offset`. */
static void expect(wal_reader_t *r, uint64_t offset, uint64_t seq)
{
    wal_record_t rec;
    uint64_t got;
    cr_assert_eq(wal_reader_next(r, &rec), 0, "offset %llu", (unsigned long long)offset);
    cr_assert_eq(rec.offset, offset);
    cr_assert(th_record_ok(&rec, PAYLOAD, &got));
    cr_assert_eq(got, seq);
}

Test(reader, returns_end_then_resumes_when_the_readable_end_moves)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 1, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    for (uint64_t i = 0; i < 10; i++)
        expect(r, i + 1, i);
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    fill(t, 1, &seq);
    expect(r, 11, 10);
    wal_reader_close(r);
}

Test(reader, follows_records_across_rotation)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 12, &seq);
    uint64_t seqs[200];
    int gaps;
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 200, &gaps), 120);
    cr_assert_eq(gaps, 0);
    for (int i = 0; i < 120; i++)
        cr_assert_eq(seqs[i], (uint64_t)i);
}

Test(reader, seek_positions_at_the_offset)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 12, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    cr_assert_eq(wal_reader_seek(r, 57), 0);
    expect(r, 57, 56);
    cr_assert_eq(wal_reader_seek(r, 3), 0);
    expect(r, 3, 2);
    wal_reader_close(r);
}

Test(reader, keeps_reading_when_retention_deletes_its_segment)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 12, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    for (uint64_t i = 0; i < 5; i++)
        expect(r, i + 1, i);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    uint64_t segs = st.segments;
    /* the first segment holds offsets 1..28 here; acknowledge a bit past it */
    cr_assert_eq(wal_checkpoint(t, 30), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    wal_topic_stats(t, &st);
    cr_assert_eq(st.segments, segs - 1, "the reader's segment is gone from the directory");
    cr_assert_gt(st.oldest_offset, 6);
    for (uint64_t i = 5; i < 120; i++)
        expect(r, i + 1, i);
    wal_reader_close(r);
}

Test(reader, jumps_forward_and_reports_the_gap_after_a_bound_dropped_its_records)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 2, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    fill(t, 30, &seq);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    wal_record_t rec;
    int rc;
    uint64_t n = 0;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        n++;
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    uint64_t skipped = wal_reader_gap(r, &from, &to);
    cr_assert_eq(from, n + 1);
    cr_assert_eq(to, st.oldest_offset);
    cr_assert_eq(skipped, to - from);
    cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_DROPPED, "below the oldest segment, unacknowledged: a drop");
    expect(r, st.oldest_offset, st.oldest_offset - 1);
    wal_reader_close(r);
}

/* Found by tests/storeforward: a reader that had the oldest segment open
 * when the bound deleted it kept returning its records from the open file,
 * so the cluster received messages that dropped_total also counted (and
 * /stats showed queued < 0). What the bound counted must not be returned. */
Test(reader, does_not_return_records_a_bound_dropped_from_the_segment_it_has_open)
{
    h.o.max_topic_bytes = 16384;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 2, &seq);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    expect(r, 1, 0); /* the first segment is now open in the reader */
    fill(t, 30, &seq);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_gt(st.dropped_total, 0, "the bound must have dropped records for this test to mean anything");
    wal_record_t rec;
    int rc;
    uint64_t returned_below = 0;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        returned_below++;
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert_eq(to, st.oldest_offset);
    /* offsets 2 .. oldest-1 were counted as dropped (nothing was acknowledged) */
    cr_assert_eq(st.dropped_total, st.oldest_offset - 1);
    cr_assert_eq(returned_below, 0, "%llu dropped records were returned anyway", (unsigned long long)returned_below);
    cr_assert_eq(from, 2);
    cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_DROPPED, "below the read floor: a drop");
    expect(r, st.oldest_offset, st.oldest_offset - 1);
    wal_reader_close(r);
}

Test(reader, concurrent_reader_sees_every_record_in_order)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    th_follower_t f = { .t = t, .payload_len = PAYLOAD, .want = 2000 };
    pthread_t th;
    pthread_create(&th, NULL, th_follow, &f);
    for (uint64_t i = 0; i < 200; i++)
        th_submit(&h, t, i * 10, 10, PAYLOAD);
    cr_assert(th_wait(&h, 200));
    pthread_join(th, NULL);
    cr_assert(f.in_order);
    cr_assert_eq(f.got, 2000);
}

static char *seg_path(uint64_t base)
{
    return tb_asprintf("%s/+e+t/%020llu.seg", h.wal_dir, (unsigned long long)base);
}

/* Flips one byte at `at` in a file. */
static void flip(const char *path, long at)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    cr_assert_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* Bases of the segments, from the first records' offsets: 10-record batches
 * of ~145 bytes put 20 records in each 4 KiB segment here. */
Test(reader, corrupt_sealed_segment_is_skipped_and_quarantined)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 8, &seq);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_geq(st.segments, 3);
    char *p = seg_path(1);
    long size = th_file_size(p);
    flip(p, size - 20); /* inside the last record of the first segment */
    uint64_t seqs[200];
    int gaps;
    long n = th_read_all(t, 1, PAYLOAD, seqs, 200, &gaps);
    cr_assert_eq(gaps, 1);
    cr_assert_eq(wal_sync(h.w), 0); /* the quarantine request is processed in order */
    wal_topic_stats(t, &st);
    cr_assert_eq(st.quarantined_segments, 1);
    char *q = tb_asprintf("%s.corrupt", p);
    cr_assert_gt(th_file_size(q), 0);
    cr_assert_eq(th_file_size(p), -1);
    /* the records after the bad one are counted as dropped */
    cr_assert_eq((uint64_t)n + st.dropped_total, 80);
    free(q);
    free(p);
}

Test(reader, verify_on_open_quarantines_a_corrupt_sealed_segment_at_start)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 8, &seq);
    cr_assert_eq(th_close(&h), 0);
    char *p = seg_path(1);
    flip(p, 200);
    h.o.verify_on_open = true;
    cr_assert_eq(th_open(&h), 0);
    wal_topic_stats_t st;
    wal_topic_stats(wal_topic_find(h.w, "/e/t"), &st);
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_eq(st.dropped_total, st.oldest_offset - 1);
    free(p);
}

Test(reader, bad_record_below_the_readable_end_of_the_active_segment_is_an_error)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 1, &seq);
    char *p = seg_path(1);
    flip(p, 100);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(r, &rec), TB_ECORRUPT);
    wal_reader_close(r);
    free(p);
}

/* Reads to the end; returns the records read and the kinds of the gaps met. */
static uint64_t read_kinds(wal_reader_t *r, int *drops, int *holes, uint64_t *hole_from, uint64_t *hole_to)
{
    *drops = *holes = 0;
    uint64_t n = 0;
    for (;;) {
        wal_record_t rec;
        int rc = wal_reader_next(r, &rec);
        if (rc == 0) {
            n++;
            continue;
        }
        if (rc != WAL_GAP)
            break;
        if (wal_reader_gap_kind(r) == WAL_GAP_HOLE) {
            (*holes)++;
            wal_reader_gap(r, hole_from, hole_to);
        } else {
            (*drops)++;
        }
    }
    return n;
}

Test(reader, offsets_skipped_for_a_reservation_are_a_hole_between_segments_not_a_drop)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 1, &seq); /* 1..10 */
    /* 11..15 handed out beyond the log and never written; the clean close
     * keeps them reserved, so the log continues at 16 */
    cr_assert_eq(wal_topic_reserve_wait(t, 16), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(th_append(&h, t, 100, 2, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 16);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    int drops, holes;
    uint64_t from = 0, to = 0;
    cr_assert_eq(read_kinds(r, &drops, &holes, &from, &to), 12);
    cr_assert_eq(holes, 1);
    cr_assert_eq(drops, 0);
    cr_assert(from == 11 && to == 16, "the hole is [%llu, %llu)", (unsigned long long)from, (unsigned long long)to);
    wal_reader_close(r);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.dropped_total, 0);
}

Test(reader, below_the_oldest_segment_but_acknowledged_is_a_hole)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 8, &seq); /* 1..80 over several segments */
    cr_assert_eq(wal_checkpoint(t, 60), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* applies it: segments wholly at or below 60 go */
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_gt(st.oldest_offset, 1);
    cr_assert_leq(st.oldest_offset, 61);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0); /* behind the checkpoint: retention's, not a loss */
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(r, &rec), WAL_GAP);
    cr_assert_eq(wal_reader_gap_kind(r), WAL_GAP_HOLE);
    wal_reader_close(r);
}

Test(reader, a_quarantined_sealed_segment_met_between_two_segments_is_a_drop)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    fill(t, 8, &seq);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_geq(st.segments, 3);
    /* corrupt the second segment; a first reader finds it, the writer quarantines it */
    pthread_mutex_lock(&t->mu);
    uint64_t second = t->segs[1].base;
    pthread_mutex_unlock(&t->mu);
    char *p = seg_path(second);
    flip(p, th_file_size(p) - 20);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    int drops, holes;
    uint64_t from, to;
    read_kinds(r, &drops, &holes, &from, &to);
    wal_reader_close(r);
    cr_assert_eq(drops, 1);
    cr_assert_eq(holes, 0);
    cr_assert_eq(wal_sync(h.w), 0);
    wal_topic_stats(t, &st);
    cr_assert_eq(st.quarantined_segments, 1);
    /* a second reader meets it as the first segment's end before the next
     * one's base: the topic knows that range was quarantined, so a drop */
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    read_kinds(r, &drops, &holes, &from, &to);
    wal_reader_close(r);
    cr_assert_eq(drops, 1);
    cr_assert_eq(holes, 0);
    free(p);
}
