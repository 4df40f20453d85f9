/* helper_config: YAML text loaded the way config/'s tests load it (no
 * environment unless given), with the last load's error kept for the
 * assertions. */
#ifndef TRIB_TEST_HELPER_CONFIG_H
#define TRIB_TEST_HELPER_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"

extern char cfgt_err[1024]; /* the error of the last load, "" if none */

/* yaml as "test.yaml"; env NULL means an empty environment. */
cfg_t *cfgt_load(const char *yaml, char *const *env);

/* head, then extra, as one file. */
cfg_t *cfgt_load_cat(const char *head, const char *extra, char *const *env);

/* c must be NULL (a refused load of yaml) and the error must hold needle1
 * and, if not NULL, needle2. */
void cfgt_expect_refused(cfg_t *c, const char *yaml, const char *needle1, const char *needle2);

/* docs/CONFIG.md as text (a static buffer; the test fails if it cannot be read). */
const char *cfgt_config_md(void);

/* What print(f, true) writes (cfg_describe, cfg_describe_reloadable), as a
 * malloc'd string. */
char *cfgt_markdown(void (*print)(FILE *f, bool markdown));

/* What cfg_diff(a, b) reports, in its order: cfgt_diffs[0..returned). */
#define CFGT_MAX_DIFFS 32
extern char cfgt_diffs[CFGT_MAX_DIFFS][160];
int cfgt_diff(const cfg_t *a, const cfg_t *b);

#endif
