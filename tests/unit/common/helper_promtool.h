/* helper_promtool.h: check a Prometheus exposition with promtool. */
#ifndef TEST_HELPER_PROMTOOL_H
#define TEST_HELPER_PROMTOOL_H

#include <stddef.h>

/* Runs `promtool check metrics` on text; returns its exit code, its output in out. */
int promtool_check(const char *text, char *out, size_t n);

#endif
