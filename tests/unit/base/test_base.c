/* Tests for base/: log line formats, the rate limiter, the mailbox, UTF-8, atomic replace. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

static char *capture_log(tb_log_format_t fmt, void (*emit)(void))
{
    char path[] = "/tmp/tb_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    tb_log_setup(TB_LOG_DEBUG, fmt, fd);
    emit();
    tb_log_setup(TB_LOG_INFO, TB_LOG_TEXT, 2);
    static char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return buf;
}

static void emit_one(void)
{
    tb_warn("disk full", TB_S("topic", "/e1/t"), TB_I("rc", -28), TB_S("note", "a b=\"c\""), TB_B("ok", false));
}

Test(log, text_is_logfmt_with_quoting)
{
    char *s = capture_log(TB_LOG_TEXT, emit_one);
    cr_assert(strstr(s, " level=warn msg=\"disk full\" topic=/e1/t rc=-28 note=\"a b=\\\"c\\\"\" ok=false\n"), "%s", s);
    cr_assert(strncmp(s, "ts=", 3) == 0, "%s", s);
}

Test(log, json_is_one_object_per_line)
{
    char *s = capture_log(TB_LOG_JSON, emit_one);
    cr_assert(strstr(s, "\"level\":\"warn\",\"msg\":\"disk full\",\"topic\":\"/e1/t\",\"rc\":-28,"
                        "\"note\":\"a b=\\\"c\\\"\",\"ok\":false}\n"), "%s", s);
}

static void emit_filtered(void)
{
    tb_log_set_level(TB_LOG_WARN);
    tb_info("hidden");
    tb_error("shown");
}

Test(log, level_filters)
{
    char *s = capture_log(TB_LOG_TEXT, emit_filtered);
    cr_assert_null(strstr(s, "hidden"));
    cr_assert_not_null(strstr(s, "shown"));
}

static void emit_long(void)
{
    char big[10000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tb_info("long", TB_S("v", big));
}

Test(log, long_line_is_cut_not_split)
{
    char *s = capture_log(TB_LOG_TEXT, emit_long);
    cr_assert_eq(strchr(s, '\n'), s + strlen(s) - 1, "exactly one line");
    cr_assert(strstr(s, "...\n"));
}

Test(ratelimit, one_line_per_interval_with_count)
{
    tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t skipped;
    cr_assert(tb_ratelimit(&rl, &skipped));
    cr_assert_eq(skipped, 0);
    for (int i = 0; i < 5; i++)
        cr_assert_not(tb_ratelimit(&rl, &skipped));
    rl.last_ms -= 60000; /* as if the interval had passed */
    cr_assert(tb_ratelimit(&rl, &skipped));
    cr_assert_eq(skipped, 5);
}

Test(ratelimit, a_burst_of_lines_per_interval_then_the_count)
{
    tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, 3);
    uint64_t skipped;
    for (int i = 0; i < 3; i++)
        cr_assert(tb_ratelimit(&rl, &skipped), "line %d of the burst", i);
    for (int i = 0; i < 7; i++)
        cr_assert_not(tb_ratelimit(&rl, &skipped));
    rl.last_ms -= 1000;
    cr_assert(tb_ratelimit(&rl, &skipped));
    cr_assert_eq(skipped, 7, "the first line of the next interval says how many were left out");
    cr_assert(tb_ratelimit(&rl, &skipped));
    cr_assert_eq(skipped, 0);
}

typedef struct { tb_mnode_t node; int v; } item_t;
static int wakes;
static void wake(void *arg) { (void)arg; __atomic_add_fetch(&wakes, 1, __ATOMIC_SEQ_CST); }

Test(mailbox, fifo_and_wake_only_when_empty)
{
    tb_mbox_t mb;
    wakes = 0;
    tb_mbox_init(&mb, wake, NULL);
    item_t it[3] = { { .v = 1 }, { .v = 2 }, { .v = 3 } };
    for (int i = 0; i < 3; i++)
        tb_mbox_push(&mb, &it[i].node);
    cr_assert_eq(wakes, 1);
    int expect = 1;
    for (tb_mnode_t *n = tb_mbox_take(&mb); n; n = n->next)
        cr_assert_eq(TB_CONTAINER_OF(n, item_t, node)->v, expect++);
    cr_assert_eq(expect, 4);
    cr_assert_null(tb_mbox_take(&mb));
    tb_mbox_push(&mb, &it[0].node);
    cr_assert_eq(wakes, 2);
    tb_mbox_destroy(&mb);
}

static tb_mbox_t shared;
static void *producer(void *arg)
{
    item_t *items = arg;
    for (int i = 0; i < 10000; i++)
        tb_mbox_push(&shared, &items[i].node);
    return NULL;
}

Test(mailbox, two_producers_lose_nothing)
{
    tb_mbox_init(&shared, NULL, NULL);
    item_t *a = calloc(10000, sizeof *a), *b = calloc(10000, sizeof *b);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, producer, a);
    pthread_create(&t2, NULL, producer, b);
    int got = 0;
    while (got < 20000)
        for (tb_mnode_t *n = tb_mbox_take(&shared); n; n = n->next)
            got++;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_assert_eq(got, 20000);
    free(a);
    free(b);
}

Test(utf8, accepts_valid_and_rejects_the_rest)
{
    cr_assert(tb_utf8_valid((const uint8_t *)"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    cr_assert_not(tb_utf8_valid((const uint8_t *)"\xc0\xaf", 2), "overlong");
    cr_assert_not(tb_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3), "surrogate");
    cr_assert_not(tb_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4), "above U+10FFFF");
    cr_assert_not(tb_utf8_valid((const uint8_t *)"\xe2\x82", 2), "truncated");
    cr_assert_not(tb_utf8_valid((const uint8_t *)"\x80", 1), "lone continuation");
}

Test(fsutil, atomic_write_replaces_whole_file)
{
    char dir[] = "/tmp/tb_fs_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/a/b/ckpt", dir);
    char sub[256];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    cr_assert_eq(tb_mkdir_p(sub, 0755), 0);
    cr_assert_eq(tb_write_file_atomic(path, "one", 3), 0);
    cr_assert_eq(tb_write_file_atomic(path, "second", 6), 0);
    char buf[16] = { 0 };
    int fd = open(path, O_RDONLY);
    cr_assert_eq(read(fd, buf, sizeof buf), 6);
    close(fd);
    cr_assert_str_eq(buf, "second");
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cr_assert_eq(access(tmp, F_OK), -1, "no temporary file left behind");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(error, strerror_names_both_ranges)
{
    cr_assert_str_eq(tb_strerror(TB_ECORRUPT), "corrupt data");
    cr_assert_str_eq(tb_strerror(-28), "No space left on device");
}
