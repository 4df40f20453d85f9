/*
 * test_fill.c: how records become batches: closed at batch_size messages
 * or before max_batch_bytes, a record that did not fit leads the next
 * batch, a record larger than the bound goes alone, a gap (records the
 * bound deleted before they were read) ends a batch so that every batch is
 * one contiguous range, and over a whole log every offset is sent once, in
 * order.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_rep.h"
#include "wal/wal_format.h"

/* Drains the log into batches; returns how many, with counts and sizes. */
static size_t drain(rt_t *h, uint32_t *counts, size_t *sizes, uint64_t *offsets, size_t max_batches)
{
    rep__src_t s;
    rt_src(h, &s, 1);
    rep__open_t o = { 0 };
    size_t nb = 0, no = 0;
    for (;;) {
        int rc = rep__fill(&o, &h->enc, &s, tb_wall_ms());
        cr_assert_geq(rc, 0);
        if (o.count == 0)
            break;
        cr_assert_lt(nb, max_batches);
        rep__batch_t b = { 0 };
        rep__open_finish(&o, &b);
        Danube__Edge__ReplicateBatch *d = rt_decode(&b);
        cr_assert_eq(d->batch_last_offset, b.last);
        cr_assert_eq(d->n_messages, b.count);
        for (size_t i = 0; i < d->n_messages && offsets; i++)
            offsets[no++] = d->messages[i]->msg_id->topic_offset;
        counts[nb] = b.count;
        sizes[nb] = b.len;
        nb++;
        danube__edge__replicate_batch__free_unpacked(d, NULL);
        free(b.buf);
        if (rc == 0)
            break;
    }
    rep__open_free(&o);
    rep__src_free(&s);
    return nb;
}

Test(fill, batch_closes_at_batch_size_messages)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 250, 10);
    uint32_t counts[8];
    size_t sizes[8];
    size_t nb = drain(&h, counts, sizes, NULL, 8);
    cr_assert_eq(nb, 3);
    cr_assert_eq(counts[0], 100);
    cr_assert_eq(counts[1], 100);
    cr_assert_eq(counts[2], 50);
    rt_close(&h);
}

Test(fill, batch_stays_within_max_bytes)
{
    rt_t h;
    rt_open(&h);
    h.enc.max_bytes = 8192;
    rt_append_n(&h, 100, 1000);
    uint32_t counts[64];
    size_t sizes[64];
    size_t nb = drain(&h, counts, sizes, NULL, 64);
    uint32_t total = 0;
    for (size_t i = 0; i < nb; i++) {
        cr_assert_leq(sizes[i], 8192, "batch %zu is %zu bytes", i, sizes[i]);
        if (i + 1 < nb) /* full batches: the last one holds what is left */
            cr_assert_geq(counts[i], 7, "batch %zu holds only %u messages of ~1 KiB", i, counts[i]);
        total += counts[i];
    }
    cr_assert_eq(total, 100);
    rt_close(&h);
}

Test(fill, every_offset_is_sent_once_in_order_across_byte_bounded_batches)
{
    rt_t h;
    rt_open(&h);
    h.enc.max_bytes = 5000;
    rt_append_n(&h, 300, 700);
    uint32_t counts[256];
    size_t sizes[256];
    uint64_t offsets[300];
    size_t nb = drain(&h, counts, sizes, offsets, 256);
    cr_assert_gt(nb, 30);
    for (uint64_t i = 0; i < 300; i++)
        cr_assert_eq(offsets[i], i + 1);
    rt_close(&h);
}

Test(fill, record_larger_than_max_bytes_goes_alone)
{
    rt_t h;
    rt_open(&h);
    h.enc.max_bytes = 4096;
    rt_append_n(&h, 2, 10);
    rt_append_n(&h, 1, 20000);
    rt_append_n(&h, 2, 10);
    uint32_t counts[8];
    size_t sizes[8];
    uint64_t offsets[5];
    size_t nb = drain(&h, counts, sizes, offsets, 8);
    cr_assert_eq(nb, 3);
    cr_assert_eq(counts[0], 2);
    cr_assert_eq(counts[1], 1);
    cr_assert_gt(sizes[1], 20000);
    cr_assert_eq(counts[2], 2);
    for (uint64_t i = 0; i < 5; i++)
        cr_assert_eq(offsets[i], i + 1);
    rt_close(&h);
}

Test(fill, end_of_log_leaves_a_partial_batch_open)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 7, 10);
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    cr_assert_eq(o.count, 7);
    cr_assert_eq(o.first, 1);
    cr_assert_eq(o.last, 7);
    rt_append_n(&h, 3, 10);
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0, "more data joins the open batch");
    cr_assert_eq(o.count, 10);
    cr_assert_eq(o.last, 10);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, resuming_from_a_checkpoint_starts_after_it)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 20, 10);
    rep__src_t s;
    rt_src(&h, &s, 13);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    cr_assert_eq(o.first, 13);
    cr_assert_eq(o.count, 8);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, count_new_counts_only_offsets_received_since_start)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 10, 10);
    h.enc.live_base = 8;
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    cr_assert_eq(o.count_new, 3);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, a_gap_closes_the_batch_so_each_batch_is_one_contiguous_range)
{
    rt_t h;
    rt_open_bounded(&h, 4096, 16384);
    rt_append_n(&h, 5, 100);
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    cr_assert_eq(o.count, 5, "the reader now holds the first segment open");
    for (int i = 0; i < 40; i++)
        rt_append_n(&h, 5, 100); /* the bound deletes the oldest segments, the reader's among them */
    wal_topic_stats_t st;
    wal_topic_stats(h.t, &st);
    cr_assert_gt(st.dropped_total, 0);
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 1, "the gap closes the batch");
    cr_assert_lt(o.count, 100, "closed before batch_size");
    cr_assert_eq(o.last - o.first + 1, o.count, "contiguous: %u messages from %llu to %llu", o.count,
                 (unsigned long long)o.first, (unsigned long long)o.last);
    uint64_t last = o.last;
    rep__batch_t b = { 0 };
    rep__open_finish(&o, &b);
    free(b.buf);
    cr_assert_eq(s.gaps, 1);
    cr_assert_eq(s.holes, 0, "records the bound deleted are a drop, not a hole");
    rep__fill(&o, &h.enc, &s, tb_wall_ms());
    cr_assert_gt(o.first, last + 1, "the next batch starts after the gap");
    cr_assert_eq(o.last - o.first + 1, o.count);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, a_dropped_gap_is_counted_as_a_drop_and_a_hole_is_not)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 5, 100); /* offsets 1..5 */
    /* offsets 6..49 handed out beyond the log (from memory) and never
     * written: a clean close keeps them reserved, so the restart continues
     * at 50 and [6, 50) is a hole behind the unacknowledged 1..5 */
    cr_assert_eq(wal_topic_reserve_wait(h.t, 50), 0);
    rt_reopen(&h);
    wal_topic_stats_t st;
    wal_topic_stats(h.t, &st);
    cr_assert_eq(st.next_offset, 50);
    cr_assert(st.hole_from == 6 && st.hole_to == 50);
    rt_append_n(&h, 3, 100); /* 50..52 */
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 1, "the hole closes the batch");
    cr_assert(o.first == 1 && o.last == 5 && o.count == 5);
    cr_assert_eq(s.holes, 1);
    cr_assert_eq(s.gaps, 0, "a hole loses nothing: not counted as a drop");
    rep__batch_t b = { 0 };
    rep__open_finish(&o, &b);
    free(b.buf);
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    cr_assert(o.first == 50 && o.last == 52 && o.count == 3);
    wal_topic_stats(h.t, &st);
    cr_assert_eq(st.dropped_total, 0);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, a_batch_knows_the_bytes_its_records_take_on_disk)
{
    rt_t h;
    rt_open(&h);
    rt_append_n(&h, 7, 50);
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, tb_wall_ms()), 0);
    wal_topic_stats_t st;
    wal_topic_stats(h.t, &st);
    cr_assert_eq(o.raw_bytes + WAL_SEG_HDR_SIZE, st.bytes, "the records and the header are the whole segment");
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

/* ---- max_age: records older than it are skipped unsent ------------------------ */

/* Appends n messages published at publish_ms. Returns the first offset. */
static uint64_t append_at(rt_t *h, uint32_t n, uint64_t publish_ms)
{
    uint64_t first = 0;
    for (uint32_t i = 0; i < n; i++) {
        rt_msg_t m = { .payload = "x", .publish_time_ms = publish_ms };
        uint64_t off = rt_append(h, &m);
        if (i == 0)
            first = off;
    }
    return first;
}

Test(fill, age_records_older_than_max_age_make_a_virtual_batch_that_is_never_encoded)
{
    rt_t h;
    rt_open(&h);
    uint64_t now = tb_wall_ms();
    append_at(&h, 5, now - 60000); /* a minute old */
    h.enc.max_age_ms = 1000;
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, now), 0);
    cr_assert_eq(o.count, 0, "nothing encoded");
    cr_assert_eq(o.aged, 5);
    cr_assert_eq(o.first, 1);
    cr_assert_eq(o.last, 5);
    rep__batch_t b = { 0 };
    rep__open_finish(&o, &b);
    cr_assert_eq(b.state, REP__B_ACKED, "a virtual batch is born acknowledged: never sent");
    cr_assert_null(b.buf);
    cr_assert_eq(b.count, 0);
    cr_assert_eq(b.aged, 5);
    cr_assert_eq(b.first, 1);
    cr_assert_eq(b.last, 5);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, age_a_batch_is_all_aged_or_all_sent_and_every_offset_is_covered_once)
{
    rt_t h;
    rt_open(&h);
    uint64_t now = tb_wall_ms();
    append_at(&h, 3, now - 60000);     /* 1..3 aged */
    append_at(&h, 4, now);             /* 4..7 fresh */
    append_at(&h, 2, now - 60000);     /* 8..9 aged (a clock step back, say) */
    append_at(&h, 1, now);             /* 10 fresh */
    h.enc.max_age_ms = 1000;
    h.enc.live_base = 3;
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    struct { uint64_t first, last; uint32_t count, aged, aged_new; } want[] = {
        { 1, 3, 0, 3, 1 }, { 4, 7, 4, 0, 0 }, { 8, 9, 0, 2, 2 }, { 10, 10, 1, 0, 0 },
    };
    uint64_t next = 1;
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        int rc = rep__fill(&o, &h.enc, &s, now);
        cr_assert_eq(rc, i + 1 < TB_ARRAY_LEN(want) ? 1 : 0, "batch %zu: rc %d", i, rc);
        rep__batch_t b = { 0 };
        rep__open_finish(&o, &b);
        cr_assert_eq(b.first, want[i].first, "batch %zu first %llu", i, (unsigned long long)b.first);
        cr_assert_eq(b.first, next, "contiguous");
        cr_assert_eq(b.last, want[i].last, "batch %zu last %llu", i, (unsigned long long)b.last);
        cr_assert_eq(b.count, want[i].count, "batch %zu count %u", i, b.count);
        cr_assert_eq(b.aged, want[i].aged, "batch %zu aged %u", i, b.aged);
        cr_assert_eq(b.aged_new, want[i].aged_new, "batch %zu aged_new %u", i, b.aged_new);
        if (b.count) {
            cr_assert_eq(b.state, REP__B_BUILT);
            Danube__Edge__ReplicateBatch *d = rt_decode(&b);
            cr_assert_eq(d->n_messages, b.count);
            for (size_t k = 0; k < d->n_messages; k++)
                cr_assert_eq(d->messages[k]->msg_id->topic_offset, b.first + k, "no aged record is sent");
            danube__edge__replicate_batch__free_unpacked(d, NULL);
        } else {
            cr_assert_eq(b.state, REP__B_ACKED);
        }
        free(b.buf);
        next = b.last + 1;
    }
    cr_assert_eq(next, 11);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, age_zero_max_age_sends_everything_however_old)
{
    rt_t h;
    rt_open(&h);
    uint64_t now = tb_wall_ms();
    append_at(&h, 4, now - 7ull * 86400000);
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__fill(&o, &h.enc, &s, now), 0);
    cr_assert_eq(o.count, 4);
    cr_assert_eq(o.aged, 0);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}

Test(fill, age_a_virtual_batch_holds_at_most_batch_size_records)
{
    rt_t h;
    rt_open(&h);
    h.enc.batch_size = 10;
    uint64_t now = tb_wall_ms();
    append_at(&h, 25, now - 60000);
    h.enc.max_age_ms = 1000;
    rep__src_t s;
    rt_src(&h, &s, 1);
    rep__open_t o = { 0 };
    uint32_t aged[3];
    for (int i = 0; i < 3; i++) {
        int rc = rep__fill(&o, &h.enc, &s, now);
        cr_assert_eq(rc, i < 2 ? 1 : 0);
        aged[i] = o.aged;
        rep__batch_t b = { 0 };
        rep__open_finish(&o, &b);
    }
    cr_assert_eq(aged[0], 10);
    cr_assert_eq(aged[1], 10);
    cr_assert_eq(aged[2], 5);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}
