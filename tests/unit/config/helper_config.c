/* helper_config: see helper_config.h. */
#include "helper_config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

char cfgt_err[1024];

cfg_t *cfgt_load(const char *yaml, char *const *env)
{
    static char *const empty_env[] = { NULL };
    cfg_t *c = NULL;
    cfgt_err[0] = '\0';
    cfg_load_string("test.yaml", yaml, strlen(yaml), env ? env : empty_env, &c, cfgt_err, sizeof cfgt_err);
    return c;
}

cfg_t *cfgt_load_cat(const char *head, const char *extra, char *const *env)
{
    char *y = tb_asprintf("%s%s", head, extra);
    cfg_t *c = cfgt_load(y, env);
    free(y);
    return c;
}

void cfgt_expect_refused(cfg_t *c, const char *yaml, const char *needle1, const char *needle2)
{
    cr_assert_null(c, "expected an error for:\n%s", yaml);
    cr_assert(strstr(cfgt_err, needle1), "error \"%s\" lacks \"%s\"", cfgt_err, needle1);
    if (needle2)
        cr_assert(strstr(cfgt_err, needle2), "error \"%s\" lacks \"%s\"", cfgt_err, needle2);
}

const char *cfgt_config_md(void)
{
    static char text[1 << 18];
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/CONFIG.md", getenv("TRIB_SOURCE_DIR"));
    FILE *doc = fopen(path, "r");
    cr_assert_not_null(doc, "cannot open %s", path);
    size_t n = fread(text, 1, sizeof text - 1, doc);
    text[n] = '\0';
    fclose(doc);
    return text;
}

char *cfgt_markdown(void (*print)(FILE *f, bool markdown))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    print(f, true);
    fclose(f);
    cr_assert_gt(len, 0);
    return buf;
}

char cfgt_diffs[CFGT_MAX_DIFFS][160];
static int cfgt_ndiffs;

static void cfgt_collect(void *arg, const char *key)
{
    (void)arg;
    if (cfgt_ndiffs < CFGT_MAX_DIFFS)
        snprintf(cfgt_diffs[cfgt_ndiffs++], sizeof cfgt_diffs[0], "%s", key);
}

int cfgt_diff(const cfg_t *a, const cfg_t *b)
{
    cfgt_ndiffs = 0;
    cfg_diff(a, b, cfgt_collect, NULL);
    return cfgt_ndiffs;
}
