/*
 * test_pad.c: padding synced writes to a page boundary (wal/pad.c and its
 * use in writer.c): the rule on its own, then what the writer does with it
 * on real files, counted with an I/O layer that remembers how far each file
 * was synced and notices a write into a page a sync already covered.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper_crashio.h"
#include "helper_wal.h"
#include "wal/wal_int.h"

#define PAGE 4096u
#define SEG (1u << 20)
#define PAYLOAD 100
/* Messages per round in the writer tests: 25 records of this harness take
 * 3,624 bytes, so a round's padding (under 500 bytes, whether it starts on
 * a boundary or after the segment header) is shorter than its data and
 * than half a page: every round is padded. */
#define ROUND 25

/* ---- the rule ----------------------------------------------------------- */

Test(pad_rule, pads_a_round_whose_padding_is_shorter_than_its_data)
{
    cr_assert_eq(wal__pad_len(32 + 3000, 32, PAGE, SEG), PAGE - 3032);
}

Test(pad_rule, leaves_a_round_shorter_than_its_padding)
{
    cr_assert_eq(wal__pad_len(32 + 500, 32, PAGE, SEG), 0);
    cr_assert_eq(wal__pad_len(2 * PAGE + 100, 2 * PAGE, PAGE, SEG), 0, "one small record after a padded round");
}

Test(pad_rule, leaves_a_round_whose_padding_is_over_half_its_data)
{
    /* 2,000 bytes since the last sync, 1,096 of padding: more disk than the
     * round is worth (small rounds would pay up to 45% more disk) */
    cr_assert_eq(wal__pad_len(2 * PAGE + 3000, 2 * PAGE + 1000, PAGE, SEG), 0);
    cr_assert_eq(wal__pad_len(2 * PAGE + 3000, 2 * PAGE + 200, PAGE, SEG), PAGE - 3000);
}

Test(pad_rule, leaves_a_page_less_than_half_full)
{
    /* 9,160 bytes of data, but 3,096 of padding: more than half a page of disk
     * for a page write saved only if the next round crosses the boundary */
    cr_assert_eq(wal__pad_len(2 * PAGE + 1000, 32, PAGE, SEG), 0);
    cr_assert_eq(wal__pad_len(2 * PAGE + 2049, 32, PAGE, SEG), PAGE - 2049);
}

Test(pad_rule, needs_nothing_on_a_boundary)
{
    cr_assert_eq(wal__pad_len(2 * PAGE, 100, PAGE, SEG), 0);
}

Test(pad_rule, leaves_a_gap_too_small_for_a_record_head)
{
    cr_assert_eq(wal__pad_len(2 * PAGE - 27, 32, PAGE, SEG), 0);
    cr_assert_eq(wal__pad_len(2 * PAGE - 28, 32, PAGE, SEG), 28);
}

Test(pad_rule, never_pads_the_last_page_of_a_segment)
{
    cr_assert_eq(wal__pad_len(16 * PAGE - 1000, 32, PAGE, 16 * PAGE), 0);
    cr_assert_eq(wal__pad_len(PAGE - 1000, 32, PAGE, PAGE), 0, "a one-page segment is never padded");
}

Test(pad_rule, counts_only_the_data_since_the_last_sync)
{
    /* 3,000 bytes in the segment, but only 200 of them since the last sync */
    cr_assert_eq(wal__pad_len(32 + 3000, 32 + 2800, PAGE, SEG), 0);
}

Test(pad_rule, alignment_one_turns_it_off)
{
    cr_assert_eq(wal__pad_len(32 + 3000, 32, 1, SEG), 0);
}

Test(pad_rule, follows_the_alignment_it_is_given)
{
    cr_assert_eq(wal__pad_len(32 + 30000, 32, 16384, SEG), 2 * 16384 - 30032);
}

Test(pad_rule, default_alignment_is_a_power_of_two_from_the_page_size_to_64_kib)
{
    uint32_t a = wal__pad_align("/tmp");
    cr_assert_geq(a, (uint32_t)sysconf(_SC_PAGESIZE));
    cr_assert_leq(a, WAL_PAD_MAX);
    cr_assert_eq(a & (a - 1), 0);
}

/* ---- a layer that notices writes into synced pages ------------------------- */

#define MAX_FD 1024

static struct {
    pthread_mutex_t mu;
    uint64_t synced[MAX_FD];  /* file size at its last fdatasync */
    long rewrites;            /* writes into a page a sync covered (header page aside) */
    long writes;
} rec = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int rec_open(void *ctx, const char *path, int flags, mode_t mode)
{
    int fd = wal_io_posix()->open(NULL, path, flags, mode);
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&rec.mu);
        struct stat st;
        rec.synced[fd] = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        pthread_mutex_unlock(&rec.mu);
    }
    return fd;
}

static ssize_t rec_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    pthread_mutex_lock(&rec.mu);
    uint64_t s = fd < MAX_FD ? rec.synced[fd] : 0;
    /* the page holding the synced end, when partly filled, is the one at risk;
     * the segment header's page is written twice per segment by design */
    if (s > WAL_SEG_HDR_SIZE && s % PAGE != 0 && (uint64_t)off < (s + PAGE - 1) / PAGE * PAGE)
        rec.rewrites++;
    rec.writes++;
    pthread_mutex_unlock(&rec.mu);
    return wal_io_posix()->pwrite(NULL, fd, buf, n, off);
}

static int rec_fdatasync(void *ctx, int fd)
{
    int rc = wal_io_posix()->fdatasync(NULL, fd);
    struct stat st;
    if (rc == 0 && fd < MAX_FD && fstat(fd, &st) == 0) {
        pthread_mutex_lock(&rec.mu);
        rec.synced[fd] = (uint64_t)st.st_size;
        pthread_mutex_unlock(&rec.mu);
    }
    return rc;
}

static wal_io_t rec_io;

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.segment_bytes = SEG;
    h.o.max_topic_bytes = 4u << 20;
    h.o.pad_align = PAGE;
    rec_io = *wal_io_posix();
    rec_io.open = rec_open;
    rec_io.pwrite = rec_pwrite;
    rec_io.fdatasync = rec_fdatasync;
    memset(rec.synced, 0, sizeof rec.synced);
    rec.rewrites = rec.writes = 0;
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(pad, .init = setup, .fini = teardown);

static wal_topic_t *open_topic(void)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    return t;
}

static char *segment_path(uint64_t base)
{
    return tb_asprintf("%s/+e+t/%020llu.seg", h.wal_dir, (unsigned long long)base);
}

static long segment_size(uint64_t base)
{
    char *p = segment_path(base);
    long n = th_file_size(p);
    free(p);
    return n;
}

/* Bytes the records of one batch of n messages from seq0 take. */
static size_t batch_bytes(wal_topic_t *t, uint64_t seq0, uint32_t n)
{
    wal_batch_t *b = wal_batch_new(t);
    th_msgbuf_t mb;
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(wal_batch_add(b, th_msg(&mb, seq0 + i, PAYLOAD)), 0);
    size_t bytes = wal_batch_bytes(b);
    wal_batch_free(b);
    return bytes;
}

Test(pad, always_mode_ends_a_large_round_on_a_page_boundary)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    long size = segment_size(1);
    cr_assert_gt((size_t)size, WAL_SEG_HDR_SIZE + batch_bytes(t, 0, ROUND));
    cr_assert_eq(size % PAGE, 0, "size %ld", size);
}

Test(pad, always_mode_leaves_a_round_smaller_than_its_padding_unpadded)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 2, PAYLOAD), 0);
    cr_assert_eq((size_t)segment_size(1), WAL_SEG_HDR_SIZE + batch_bytes(t, 0, 2));
}

static void append_unpadded_in(wal_fsync_t mode)
{
    th_init(&h, mode); /* pad_modes has no setup: the mode is the test's */
    h.o.segment_bytes = SEG;
    h.o.max_topic_bytes = 4u << 20;
    h.o.pad_align = PAGE;
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    cr_assert_eq(wal_sync(h.w), 0);
    cr_assert_eq((size_t)segment_size(1), WAL_SEG_HDR_SIZE + batch_bytes(t, 0, ROUND));
}

Test(pad_modes, interval_mode_never_pads, .fini = teardown)
{
    append_unpadded_in(WAL_FSYNC_INTERVAL);
}

Test(pad_modes, never_mode_never_pads, .fini = teardown)
{
    append_unpadded_in(WAL_FSYNC_NEVER);
}

/* 40 rounds of ROUND messages, each synced before the next is submitted. */
static void forty_rounds(wal_topic_t *t)
{
    for (uint64_t i = 0; i < 40; i++)
        cr_assert_eq(th_append(&h, t, i * ROUND, ROUND, PAYLOAD), 0);
}

Test(pad, no_write_lands_in_a_page_an_fdatasync_already_covered)
{
    h.o.io = &rec_io;
    forty_rounds(open_topic());
    cr_assert_gt(rec.writes, 40);
    cr_assert_eq(rec.rewrites, 0);
}

/* The control: the same load unpadded writes into the synced tail page
 * nearly every round, so the test above can fail. */
Test(pad, without_padding_rounds_write_again_into_the_synced_tail_page)
{
    h.o.io = &rec_io;
    h.o.pad_align = 1;
    forty_rounds(open_topic());
    cr_assert_geq(rec.rewrites, 35);
}

Test(pad, offsets_stay_contiguous_and_every_record_reads_back)
{
    wal_topic_t *t = open_topic();
    forty_rounds(t);
    for (size_t i = 0; i < 40; i++)
        cr_assert_eq(h.done[i].first_offset, 1 + ROUND * i);
    uint64_t seqs[40 * ROUND];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, 40 * ROUND, NULL), 40 * ROUND);
    for (uint64_t i = 0; i < 40 * ROUND; i++)
        cr_assert_eq(seqs[i], i);
}

Test(pad, reader_position_after_the_last_record_is_past_its_padding)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t recd;
    for (int i = 0; i < ROUND; i++)
        cr_assert_eq(wal_reader_next(r, &recd), 0);
    wal_pos_t pos;
    wal_reader_pos(r, &pos);
    cr_assert_eq(pos.byte, (uint64_t)segment_size(1));
    cr_assert_eq(wal_topic_bytes_after(t, &pos), 0, "nothing waits behind a caught-up reader");
    wal_reader_close(r);
}

Test(pad, padding_counts_in_the_topic_bytes)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    cr_assert_eq(st.bytes, (uint64_t)segment_size(1));
}

Test(pad, reopened_log_appends_after_the_padding)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    long padded = segment_size(1);
    cr_assert_eq(th_close(&h), 0);
    t = open_topic();
    cr_assert_eq(th_append(&h, t, ROUND, 1, PAYLOAD), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, ROUND + 1);
    cr_assert_eq((size_t)segment_size(1), (size_t)padded + batch_bytes(t, ROUND, 1));
    uint64_t seqs[ROUND + 10];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, ROUND + 10, NULL), ROUND + 1);
}

/* Appends rounds of ROUND until the bound has deleted segments for a while;
 * returns the largest topic size seen after a round. */
static uint64_t largest_under_bound(wal_topic_t *t)
{
    uint64_t most = 0;
    for (uint64_t i = 0; i < 150; i++) {
        cr_assert_eq(th_append(&h, t, i * ROUND, ROUND, PAYLOAD), 0);
        wal_topic_stats_t st;
        wal_topic_stats(t, &st);
        most = TB_MAX(most, st.bytes);
    }
    return most;
}

Test(pad, padding_never_takes_a_topic_past_its_bound)
{
    h.o.segment_bytes = 64 << 10;
    h.o.max_topic_bytes = 128 << 10;
    wal_topic_t *t = open_topic();
    cr_assert_leq(largest_under_bound(t), h.o.max_topic_bytes);
}

Test(pad, padding_never_takes_the_wal_past_its_total_bound)
{
    h.o.segment_bytes = 64 << 10;
    h.o.max_topic_bytes = 1 << 20;
    h.o.max_total_bytes = 128 << 10;
    wal_topic_t *t = open_topic();
    cr_assert_leq(largest_under_bound(t), h.o.max_total_bytes);
}

Test(pad, a_failed_padding_write_leaves_the_round_acknowledged_and_unpadded)
{
    crashio_t *c = crashio_new(5);
    h.o.io = crashio_io(c);
    wal_topic_t *t = open_topic();
    size_t bytes = batch_bytes(t, 0, ROUND);
    crashio_fail_writes(c, -ENOSPC, bytes); /* the batch goes through, its padding does not */
    cr_assert_eq(th_append(&h, t, 0, ROUND, PAYLOAD), 0);
    cr_assert_eq((size_t)segment_size(1), WAL_SEG_HDR_SIZE + bytes, "the failed padding was cut off");
    cr_assert_eq(wal_topic_state(t), WAL_TOPIC_OK);
    crashio_fail_writes(c, 0, 0);
    cr_assert_eq(th_close(&h), 0);
    crashio_free(c);
    h.o.io = NULL; /* reopen on the real files */
    t = open_topic();
    uint64_t seqs[ROUND];
    cr_assert_eq(th_read_all(t, 1, PAYLOAD, seqs, ROUND, NULL), ROUND);
}

/* round sizes that vary, so some round ends within a page of the bound */
Test(pad, varied_rounds_never_exceed_the_topic_bound)
{
    h.o.segment_bytes = 64 << 10;
    h.o.max_topic_bytes = (150 << 10) + 77;
    wal_topic_t *t = open_topic();
    uint64_t seq = 0;
    for (uint64_t i = 0; i < 400; i++) {
        uint32_t n = 1 + (uint32_t)((i * 7919u) % 40);
        cr_assert_eq(th_append(&h, t, seq, n, PAYLOAD), 0);
        seq += n;
        wal_topic_stats_t st;
        wal_topic_stats(t, &st);
        cr_assert_leq(st.bytes, h.o.max_topic_bytes, "round %llu: %llu bytes", (unsigned long long)i, (unsigned long long)st.bytes);
    }
}

/* a reader whose buffer was filled after a round's records were
 * written but before its padding: caught up, lag bytes stay at the padding */
static struct {
    wal_reader_t *r;
    bool armed;
    int read;
} lag;

static ssize_t lag_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    const uint8_t *p = buf;
    if (lag.armed && n >= 28 && p[24] == WAL_FLAG_PAD && wal__ld32(p) == n) {
        lag.armed = false;
        wal_record_t one;
        while (wal_reader_next(lag.r, &one) == 0) /* the records readable so far */
            lag.read++;
    }
    return wal_io_posix()->pwrite(NULL, fd, buf, n, off);
}

/* Two small records, then a padded round during whose padding write
 * lag.r reads 1..2 (its buffer then holds the round but not the padding). */
static wal_topic_t *reader_read_before_the_padding(void)
{
    rec_io = *wal_io_posix();
    rec_io.pwrite = lag_pwrite;
    h.o.io = &rec_io;
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 2, PAYLOAD), 0); /* too small to pad */
    cr_assert_eq(wal_reader_open(t, 1, &lag.r), 0);
    lag.armed = true;
    cr_assert_eq(th_append(&h, t, 2, ROUND, PAYLOAD), 0);
    cr_assert_eq(lag.read, 2);
    return t;
}

/* Reads r to its end; every record must be whole when returned (the one
 * before a padding too) and carry the next seq from first_seq on. Returns
 * how many it read. */
static uint64_t read_whole_records(wal_reader_t *r, uint64_t first_seq)
{
    wal_record_t recd;
    uint64_t n = 0, seq;
    while (wal_reader_next(r, &recd) == 0) {
        cr_assert(th_record_ok(&recd, PAYLOAD, &seq), "offset %llu", (unsigned long long)recd.offset);
        cr_assert_eq(seq, first_seq + n);
        n++;
    }
    return n;
}

Test(pad, a_caught_up_reader_reports_no_lag_bytes)
{
    wal_topic_t *t = reader_read_before_the_padding();
    cr_assert_eq(read_whole_records(lag.r, 2), ROUND);
    wal_pos_t pos;
    wal_reader_pos(lag.r, &pos);
    cr_assert_eq(wal_topic_bytes_after(t, &pos), 0, "caught up, yet %llu bytes after the reader (segment %ld bytes, pos %llu)",
                 (unsigned long long)wal_topic_bytes_after(t, &pos), segment_size(1), (unsigned long long)pos.byte);
    wal_reader_close(lag.r);
}

/* the record returned before a padding that runs past the reader's buffer
 * stays whole until the next call (a read past the padding would overwrite
 * it: the replicator sent such a record's payload clobbered) */
Test(pad, a_record_before_padding_stays_whole_when_the_padding_is_not_in_the_buffer)
{
    wal_topic_t *t = reader_read_before_the_padding();
    /* a next round behind the padding, so a read past the padding would
     * overwrite the buffer where the record before it lies */
    cr_assert_eq(th_append(&h, t, 2 + ROUND, 40, PAYLOAD), 0);
    cr_assert_eq(read_whole_records(lag.r, 2), ROUND + 40);
    wal_reader_close(lag.r);
}

/* a reader's buffer keeps records of a
 * round whose fdatasync failed; the writer cuts them and reuses the offsets */
Test(pad, a_reader_never_returns_records_of_a_failed_round)
{
    h.o.pad_align = 1;
    crashio_t *c = crashio_new(3);
    h.o.io = crashio_io(c);
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 2, PAYLOAD), 0);           /* offsets 1..2, seq 0..1 */
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    crashio_gate(c, true);
    th_submit(&h, t, 1000, 5, PAYLOAD);                           /* offsets 3..7, seq 1000.. */
    cr_assert(crashio_wait_blocked(c));                           /* written, its sync held */
    wal_record_t recd;
    uint64_t seq;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(wal_reader_next(r, &recd), 0);               /* the refill reads the held round too */
    cr_assert_eq(wal_reader_next(r, &recd), WAL_END);
    crashio_fail_syncs(c, -EIO, 1);
    crashio_gate(c, false);
    cr_assert(th_wait(&h, 2));
    cr_assert_neq(h.done[1].rc, 0, "the round failed");
    wal_topic_retry(t);
    cr_assert_eq(th_append(&h, t, 2000, 5, PAYLOAD), 0);          /* offsets 3..7 again, seq 2000.. */
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 3);
    cr_assert_eq(wal_reader_next(r, &recd), 0);
    cr_assert_eq(recd.offset, 3);
    cr_assert(th_record_ok(&recd, PAYLOAD, &seq));
    cr_assert_eq(seq, 2000, "offset 3 read back as seq %llu (its batch failed)", (unsigned long long)seq);
    wal_reader_close(r);
    cr_assert_eq(th_close(&h), 0);
    crashio_free(c);
}

/* the same when the padding is in the buffer and the buffer ends at it: the
 * reader must not read on past the padding before the next call */
Test(pad, a_record_before_padding_stays_whole_when_a_newer_round_follows)
{
    wal_topic_t *t = open_topic();
    cr_assert_eq(th_append(&h, t, 0, 2, PAYLOAD), 0); /* too small to pad */
    cr_assert_eq(th_append(&h, t, 2, ROUND, PAYLOAD), 0); /* padded */
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(t, 1, &r), 0);
    wal_record_t recd;
    cr_assert_eq(wal_reader_next(r, &recd), 0); /* the buffer now ends at the padding */
    cr_assert_eq(th_append(&h, t, 2 + ROUND, 40, PAYLOAD), 0);
    cr_assert_eq(read_whole_records(r, 1), 1 + ROUND + 40);
    wal_reader_close(r);
}
