/*
 * test_age.c: the max_age count the replicator hands over with a checkpoint
 * (wal_checkpoint_ex): it moves with the checkpoint, is persisted in the
 * same meta write as the checkpoint that passes those records, and so comes
 * back after a reopen exactly, and after a SIGKILL either with that
 * checkpoint or not at all (the records are then read, and counted, again).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helper_wal.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(age, .init = setup, .fini = teardown);

static wal_topic_stats_t stats(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static wal_topic_t *topic_with(uint64_t records)
{
    wal_topic_t *t;
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (uint64_t i = 0; i < records; i += 10)
        cr_assert_eq(th_append(&h, t, i, 10, 50), 0);
    return t;
}

Test(age, the_count_moves_with_the_checkpoint_and_persists_across_reopen)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic_with(40);
    cr_assert_eq(wal_checkpoint_ex(t, 10, 10, NULL), 0);
    cr_assert_eq(wal_checkpoint_ex(t, 25, 5, NULL), 0);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.checkpoint, 25);
    cr_assert_eq(st.dropped_age_total, 15);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_not_null(t);
    st = stats(t);
    cr_assert_eq(st.checkpoint, 25);
    cr_assert_eq(st.dropped_age_total, 15, "persistent");
    unsigned v;
    wal_meta_t m;
    cr_assert_eq(wal__meta_read(wal_io_posix(), t->dir, &m, &v), 0);
    cr_assert_eq(v, 2, "dropped_age needs meta version 2");
    cr_assert_eq(m.dropped_age, 15);
    cr_assert_eq(m.checkpoint, 25);
}

Test(age, a_checkpoint_that_does_not_move_adds_nothing)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic_with(20);
    cr_assert_eq(wal_checkpoint_ex(t, 10, 10, NULL), 0);
    cr_assert_eq(wal_checkpoint_ex(t, 10, 10, NULL), 0); /* the same records again: not twice */
    cr_assert_eq(wal_checkpoint_ex(t, 5, 3, NULL), 0);
    cr_assert_eq(stats(t).dropped_age_total, 10);
    cr_assert_eq(wal_checkpoint_ex(t, 30, 1, NULL), TB_EINVALID, "past the readable end");
    cr_assert_eq(stats(t).dropped_age_total, 10);
}

Test(age, a_plain_checkpoint_keeps_the_count)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = topic_with(30);
    cr_assert_eq(wal_checkpoint_ex(t, 10, 4, NULL), 0);
    cr_assert_eq(wal_checkpoint(t, 20), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).checkpoint, 20);
    cr_assert_eq(stats(t).dropped_age_total, 4);
}

/* Waits (bounded) until the meta file holds checkpoint ck. */
static bool meta_reaches(wal_topic_t *t, uint64_t ck)
{
    uint64_t until = tb_mono_ms() + 10000;
    while (tb_mono_ms() < until) {
        wal_meta_t m;
        if (wal__meta_read(wal_io_posix(), t->dir, &m, NULL) == 0 && m.checkpoint >= ck)
            return true;
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
    return false;
}

/* The child persists (checkpoint 10, aged 10), then asks for (20, +5) and
 * dies by SIGKILL before the deferred write (checkpoint_flush_ms). */
static void child(th_t *hh)
{
    wal_topic_t *t;
    if (th_open(hh) != 0 || wal_topic_open(hh->w, "/e/t", &t) != 0)
        _exit(2);
    for (uint64_t i = 0; i < 30; i += 10)
        if (th_append(hh, t, i, 10, 50) != 0)
            _exit(3);
    if (wal_checkpoint_ex(t, 10, 10, NULL) != 0 || !meta_reaches(t, 10))
        _exit(4);
    if (wal_checkpoint_ex(t, 20, 5, NULL) != 0)
        _exit(5);
    raise(SIGKILL);
    _exit(6);
}

Test(age, a_sigkill_keeps_the_count_with_the_checkpoint_it_was_written_with)
{
    h.o.checkpoint_flush_ms = 60000; /* the second checkpoint is not due before the kill */
    pid_t pid = fork();
    if (pid == 0)
        child(&h);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/e/t");
    cr_assert_not_null(t);
    wal_topic_stats_t st = stats(t);
    cr_assert_eq(st.checkpoint, 10, "the unwritten checkpoint is lost");
    cr_assert_eq(st.dropped_age_total, 10, "and its count with it: never counted twice, never lost");
    /* the replicator reads 11..20 again and counts them again, once */
    cr_assert_eq(wal_checkpoint_ex(t, 20, 5, NULL), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(stats(t).checkpoint, 20);
    cr_assert_eq(stats(t).dropped_age_total, 15);
}
