/*
 * helper_promtool.c: runs Debian's promtool (package prometheus) over an
 * exposition, so the tests check our output with the reference parser and
 * linter rather than with our own reading of the format.
 */
#include "unit/common/helper_promtool.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int promtool_check(const char *text, char *out, size_t n)
{
    cr_assert_eq(access("/usr/bin/promtool", X_OK), 0, "promtool is missing: install the prometheus package (scripts/deps.txt)");
    char path[] = "/tmp/tb_promtool_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
