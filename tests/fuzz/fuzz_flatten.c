/* fuzz-lib: tb_schema */
/*
 * fuzz_flatten.c: sch_flatten_json on a device's payload (outside bytes).
 * Aborts if an accepted payload yields a path that is empty, has an empty
 * level, is longer than SCH_FLAT_MAX_PATH, disagrees with its length, or
 * repeats within the payload (two leaves on one metric name); if a string
 * value is not valid UTF-8; or if a second walk of the same bytes gives a
 * different sequence. Refusals must say why.
 */
#include "schema/schema.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "fuzz_flatten: " __VA_ARGS__);  \
            fputc('\n', stderr);                            \
            abort();                                        \
        }                                                   \
    } while (0)

typedef struct seen {
    char **paths;
    size_t n, cap;
    uint64_t digest; /* of the whole sequence */
} seen_t;

static int leaf(void *arg, const char *path, size_t plen, const sch_flat_value_t *v)
{
    seen_t *s = arg;
    CHECK(plen > 0 && plen <= SCH_FLAT_MAX_PATH && strlen(path) == plen, "bad path length %zu", plen);
    CHECK(path[0] != '/' && path[plen - 1] != '/' && !strstr(path, "//"), "empty level in \"%s\"", path);
    if (v->type == SCH_FLAT_STRING)
        CHECK(tb_utf8_valid((const uint8_t *)v->s, v->len), "string at \"%s\" is not UTF-8", path);
    for (size_t i = 0; i < s->n; i++)
        CHECK(strcmp(s->paths[i], path) != 0, "\"%s\" twice in one payload", path);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->paths = realloc(s->paths, s->cap * sizeof *s->paths);
    }
    s->paths[s->n++] = strdup(path);
    for (size_t i = 0; i < plen; i++)
        s->digest = (s->digest ^ (uint8_t)path[i]) * 1099511628211ull;
    s->digest = (s->digest ^ (uint64_t)v->type) * 1099511628211ull;
    return 0;
}

static void clear(seen_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    memset(s, 0, sizeof *s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    seen_t a = { 0 }, b = { 0 };
    char err[256];
    int rc = sch_flatten_json(data, size, leaf, &a, err, sizeof err);
    if (rc == 0) {
        int rc2 = sch_flatten_json(data, size, leaf, &b, err, sizeof err);
        CHECK(rc2 == 0 && a.n == b.n && a.digest == b.digest, "a second walk differs");
    } else {
        CHECK(rc == TB_EINVALID && err[0], "refused without a reason (rc %d)", rc);
    }
    clear(&a);
    clear(&b);
    return 0;
}
