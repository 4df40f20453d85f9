/*
 * flat_check.h: what fuzz_flatten and fuzz_flatten_avro check of every
 * leaf a flattening gives (sch_flatten_json, sch_flatten_avro): a path that
 * is not empty, has no empty level, fits SCH_FLAT_MAX_PATH and its length,
 * and is not repeated within the payload; a string value that is UTF-8; and
 * a digest of the whole sequence, so that a second walk can be compared.
 * Define FUZZ_NAME before including it (the abort message's prefix).
 */
#ifndef TRIB_FUZZ_FLAT_CHECK_H
#define TRIB_FUZZ_FLAT_CHECK_H

#include "schema/schema.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond)) {                                       \
            fprintf(stderr, FUZZ_NAME ": " __VA_ARGS__);     \
            fputc('\n', stderr);                             \
            abort();                                         \
        }                                                    \
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

/* One flattening of the input, its leaves into s through leaf(). */
typedef int (*flat_walk_fn)(const void *ctx, seen_t *s, char *err, size_t errlen);

/* Walks twice: an accepted input gives the same sequence again, a refused
 * one says why. */
static void flat_check_twice(flat_walk_fn walk, const void *ctx)
{
    seen_t a = { 0 }, b = { 0 };
    char err[256];
    int rc = walk(ctx, &a, err, sizeof err);
    if (rc == 0) {
        int rc2 = walk(ctx, &b, err, sizeof err);
        CHECK(rc2 == 0 && a.n == b.n && a.digest == b.digest, "a second walk differs");
    } else {
        CHECK(rc == TB_EINVALID && err[0], "refused without a reason (rc %d)", rc);
    }
    clear(&a);
    clear(&b);
}

#endif
