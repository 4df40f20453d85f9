/* test_reopen.c: offsets never go backwards across restarts, clean or not. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper_wal.h"
#include "wal/wal_int.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(reopen, .init = setup, .fini = teardown);

static uint64_t next_offset(wal_topic_t *t)
{
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st.next_offset;
}

Test(reopen, clean_close_continues_offsets)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (uint64_t i = 0; i < 12; i++)
        cr_assert_eq(th_append(&h, t, i * 5, 5, 100), 0);
    cr_assert_eq(th_close(&h), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_not_null(t, "recovered without being asked");
    cr_assert_eq(next_offset(t), 61);
    cr_assert_eq(th_append(&h, t, 60, 1, 100), 0);
    cr_assert_eq(h.done[h.ndone - 1].first_offset, 61);
}

/* The child appends, waits for the completion, and dies by SIGKILL. */
static void child_append_and_die(th_t *hh, int batches)
{
    wal_topic_t *t;
    if (th_open(hh) != 0 || wal_topic_open(hh->w, "/e/t", &t) != 0)
        _exit(2);
    for (int i = 0; i < batches; i++)
        if (th_append(hh, t, (uint64_t)i * 4, 4, 100) != 0)
            _exit(3);
    raise(SIGKILL);
    _exit(4);
}

static int run_killed_child(int batches, wal_fsync_t mode)
{
    h.o.fsync = mode;
    pid_t pid = fork();
    if (pid == 0)
        child_append_and_die(&h, batches);
    int status;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
}

Test(reopen, sigkill_continues_offsets)
{
    cr_assert_eq(run_killed_child(9, WAL_FSYNC_ALWAYS), SIGKILL);
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(next_offset(t), 37);
}

Test(reopen, sigkill_loses_nothing_acknowledged_even_in_never_mode)
{
    cr_assert_eq(run_killed_child(9, WAL_FSYNC_NEVER), SIGKILL);
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    uint64_t seqs[64];
    cr_assert_eq(th_read_all(t, 1, 100, seqs, 64, NULL), 36);
}

Test(reopen, next_offset_is_above_the_checkpoint_even_if_segments_vanish)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, 100), 0);
    cr_assert_eq(wal_checkpoint(t, 10), 0);
    cr_assert_eq(th_close(&h), 0);
    char *dir = th_topic_dir(&h, "+e+t");
    char *cmd = tb_asprintf("rm -f %s/*.seg", dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(dir);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(next_offset(t), 11);
    cr_assert_eq(wal_topic_checkpoint(t), 10);
}

Test(reopen, next_offset_comes_from_the_floor_when_every_segment_was_deleted)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    for (uint64_t i = 0; i < 10; i++)
        cr_assert_eq(th_append(&h, t, i * 10, 10, 100), 0);
    cr_assert_eq(wal_checkpoint(t, 50), 0);
    cr_assert_eq(wal_sync(h.w), 0); /* retention deletes sealed segments <= 50 */
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    uint64_t oldest = st.oldest_offset;
    cr_assert_gt(oldest, 1);
    cr_assert_eq(th_close(&h), 0);
    /* lose every segment and the checkpoint's word for it: only the floor remains */
    char *dir = th_topic_dir(&h, "+e+t");
    char *cmd = tb_asprintf("rm -f %s/*.seg", dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(dir);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_geq(next_offset(t), oldest);
    cr_assert_geq(next_offset(t), 51);
}

Test(reopen, torn_tail_is_cut_and_offsets_continue_after_last_whole_record)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 5, 100), 0);
    cr_assert_eq(th_close(&h), 0);
    char *p = tb_asprintf("%s/+e+t/00000000000000000001.seg", h.wal_dir);
    long size = th_file_size(p);
    cr_assert_eq(truncate(p, size - 10), 0);
    cr_assert_eq(th_open(&h), 0);
    t = wal_topic_find(h.w, "/e/t");
    cr_assert_eq(next_offset(t), 5);
    th_msgbuf_t mb;
    long last = (long)wal__rec_size(th_msg(&mb, 4, 100));
    cr_assert_eq(th_file_size(p), size - last, "exactly the torn record is cut");
    uint64_t seqs[8];
    cr_assert_eq(th_read_all(t, 1, 100, seqs, 8, NULL), 4);
    free(p);
}

Test(reopen, second_open_of_a_directory_in_use_is_refused)
{
    cr_assert_eq(th_open(&h), 0);
    wal_t *w2;
    cr_assert_eq(wal_open(&h.o, &w2), -EWOULDBLOCK);
    cr_assert_null(w2);
}
