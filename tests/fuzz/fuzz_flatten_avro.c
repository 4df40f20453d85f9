/* fuzz-lib: tb_schema */
/*
 * fuzz_flatten_avro.c: sch_flatten_avro on a device's Avro payload (outside
 * bytes). The first byte picks one of a few writer schemas (flat telemetry,
 * nested records with unions, arrays and maps, a recursive record); the rest
 * is the datum. Aborts if an accepted datum yields an empty, overlong or
 * repeated path, a string that is not UTF-8, or differs on a second walk;
 * or if a refusal gives no reason.
 */
#include "schema/schema.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            fprintf(stderr, "fuzz_flatten_avro: " __VA_ARGS__); \
            fputc('\n', stderr);                                \
            abort();                                            \
        }                                                       \
    } while (0)

static const char *SCHEMAS[] = {
    ("{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"temp\",\"type\":\"double\"},"
    "{\"name\":\"n\",\"type\":\"long\"},{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"on\",\"type\":\"boolean\"},{\"name\":\"s\",\"type\":\"string\"},{\"name\":\"b\",\"type\":\"bytes\"},"
    "{\"name\":\"x\",\"type\":{\"type\":\"fixed\",\"name\":\"X\",\"size\":2}},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}}]}"),
    ("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":"
    "[\"null\",\"int\",{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":\"v\",\"type\":\"double\"}]}]}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"map\",\"values\":\"string\"}}}]}"),
    ("{\"type\":\"record\",\"name\":\"N\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"
    "{\"name\":\"next\",\"type\":[\"null\",\"N\"]},{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"N\"}}]}"),
};
#define NSCHEMAS (sizeof SCHEMAS / sizeof SCHEMAS[0])

typedef struct seen {
    char **paths;
    size_t n, cap;
    uint64_t digest;
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
    static sch_validator_t *v[NSCHEMAS];
    if (!v[0]) {
        for (size_t i = 0; i < NSCHEMAS; i++) {
            char err[256];
            CHECK(sch_compile(SCH_AVRO, SCHEMAS[i], strlen(SCHEMAS[i]), NULL, &v[i], err, sizeof err) == 0,
                  "schema %zu: %s", i, err);
        }
    }
    if (size < 1 || size > 16384) /* paths are compared pairwise: keep a case fast */
        return 0;
    sch_validator_t *s = v[data[0] % NSCHEMAS];
    seen_t a = { 0 }, b = { 0 };
    char err[256];
    int rc = sch_flatten_avro(s, data + 1, size - 1, leaf, &a, err, sizeof err);
    if (rc == 0) {
        int rc2 = sch_flatten_avro(s, data + 1, size - 1, leaf, &b, err, sizeof err);
        CHECK(rc2 == 0 && a.n == b.n && a.digest == b.digest, "a second walk differs");
    } else {
        CHECK(rc == TB_EINVALID && err[0], "refused without a reason (rc %d)", rc);
    }
    clear(&a);
    clear(&b);
    return 0;
}
