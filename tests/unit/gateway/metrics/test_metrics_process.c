/* Tests for gateway/metrics_process.c: parsing /proc/<pid>/stat and io, and reading this process. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "gateway/metrics/metrics.h"

/* A real line's shape; comm "(tri butary) x)" has spaces and a ')' to trip a naive split. */
static const char STAT[] =
    "4242 (tri butary) x) S 1 4242 4242 0 -1 4194560 1200 0 3 0 "
    "250 50 0 0 20 0 3 0 1000 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

Test(metrics_process, stat_fields_are_read_after_the_last_parenthesis)
{
    metrics_proc_t p = { 0 };
    cr_assert_eq(metrics_proc_parse_stat(STAT, 100, 4096, 1700000000, &p), 0);
    cr_assert_eq(p.cpu_ns, 3000000000ull, "utime 250 + stime 50 ticks at 100 Hz = 3 s");
    cr_assert_eq(p.start_time_ms, 1700000000ull * 1000 + 10000, "starttime 1000 ticks after boot");
    cr_assert_eq(p.vsize_bytes, 104857600);
    cr_assert_eq(p.rss_bytes, 2560ull * 4096);
}

Test(metrics_process, truncated_stat_is_malformed)
{
    metrics_proc_t p = { 0 };
    cr_assert_eq(metrics_proc_parse_stat("4242 (x) S 1 2 3", 100, 4096, 0, &p), TB_EMALFORMED);
    cr_assert_eq(metrics_proc_parse_stat("no parenthesis", 100, 4096, 0, &p), TB_EMALFORMED);
}

Test(metrics_process, io_reads_storage_bytes_not_syscall_bytes)
{
    const char *io = "rchar: 999\nwchar: 888\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\n"
                     "cancelled_write_bytes: 12\n";
    metrics_proc_t p = { 0 };
    cr_assert_eq(metrics_proc_parse_io(io, &p), 0);
    cr_assert_eq(p.read_bytes, 4096);
    cr_assert_eq(p.write_bytes, 8192);
    cr_assert(p.have_io);
    cr_assert_eq(metrics_proc_parse_io("rchar: 1\n", &p), TB_EMALFORMED);
}

Test(metrics_process, this_process_has_memory_cpu_and_descriptors)
{
    metrics_proc_t p;
    metrics_proc_read(&p);
    cr_assert_gt(p.rss_bytes, 0);
    cr_assert_gt(p.vsize_bytes, p.rss_bytes);
    cr_assert_geq(p.open_fds, 3);
    cr_assert_gt(p.max_fds, p.open_fds);
}

Test(metrics_process, open_fds_counts_a_new_descriptor)
{
    metrics_proc_t before, after;
    metrics_proc_read(&before);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    metrics_proc_read(&after);
    cr_assert_eq(after.open_fds, before.open_fds + 2);
    close(fds[0]);
    close(fds[1]);
}
