/* helper_golden.c: the golden-file scaffolding declared in helper_golden.h. */
#include "helper_golden.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wal/wal_int.h"

char *tg_path(const char *rel)
{
    const char *env = getenv("TRIB_TESTDATA");
    if (env && *env)
        return tb_asprintf("%s/wal/%s", env, rel);
    const char *f = __FILE__; /* .../tests/unit/wal/helper_golden.c */
    const char *cut = strstr(f, "tests/unit/wal/");
    return tb_asprintf("%.*stests/data/wal/%s", (int)(cut - f), f, rel);
}

uint8_t *tg_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

void tg_spit(const char *path, const uint8_t *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static int fixed_random(void *ctx, void *buf, size_t n)
{
    uint8_t salt[4];
    wal__st32(salt, GOLDEN_SALT);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = salt[i % 4];
    return 0;
}

static uint64_t fixed_now(void *ctx) { return GOLDEN_TIME; }

const wal_io_t *tg_io(void)
{
    static wal_io_t io;
    io = *wal_io_posix();
    io.random = fixed_random;
    io.now_ms = fixed_now;
    return &io;
}

char *tg_install(th_t *h, const char *rel, uint64_t base)
{
    char *dir = tb_asprintf("%s/" GOLDEN_DIR, h->wal_dir);
    char *src = tg_path(rel);
    char *cmd = tb_asprintf("mkdir -p %s && cp %s %s/%020llu.seg", dir, src, dir, (unsigned long long)base);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    free(cmd);
    free(src);
    char *p = tb_asprintf("%s/%020llu.seg", dir, (unsigned long long)base);
    free(dir);
    return p;
}

void tg_install_empty(th_t *h, uint64_t base)
{
    uint8_t hb[WAL_SEG_HDR_SIZE];
    wal_seghdr_t hdr = { .base = base, .created_ms = GOLDEN_TIME, .salt = 99 };
    wal__seghdr_encode(hb, &hdr);
    char *p = tb_asprintf("%s/" GOLDEN_DIR "/%020llu.seg", h->wal_dir, (unsigned long long)base);
    tg_spit(p, hb, sizeof hb);
    free(p);
}

uint8_t *tg_segment(th_t *h, uint64_t base, size_t *n)
{
    char *p = tb_asprintf("%s/" GOLDEN_DIR "/%020llu.seg", h->wal_dir, (unsigned long long)base);
    uint8_t *buf = tg_slurp(p, n);
    cr_assert_not_null(buf, "%s", p);
    free(p);
    return buf;
}

wal_topic_stats_t tg_open_stats(th_t *h)
{
    cr_assert_eq(th_open(h), 0);
    wal_topic_t *t = wal_topic_find(h->w, GOLDEN_TOPIC);
    cr_assert_not_null(t);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

long tg_readable(th_t *h)
{
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(wal_topic_find(h->w, GOLDEN_TOPIC), 1, &r), 0);
    wal_record_t rec;
    long n = 0;
    int rc;
    while ((rc = wal_reader_next(r, &rec)) == 0 || rc == WAL_GAP)
        n += rc == 0;
    wal_reader_close(r);
    return n;
}

static char *rel_in(const char *dir, const char *name)
{
    return tb_asprintf("%s/%s", dir, name);
}

void tg_compare_or_update(const char *rel, const uint8_t *buf, size_t n, const tg_variant_t *v, size_t nv,
                          const char *dir)
{
    char *gp = tg_path(rel);
    if (getenv("WAL_GOLDEN_UPDATE")) {
        tg_spit(gp, buf, n);
        for (size_t i = 0; i < nv; i++) {
            uint8_t *c = malloc(n);
            memcpy(c, buf, n);
            size_t cn = n;
            v[i].apply(c, &cn);
            char *r = rel_in(dir, v[i].name), *vp = tg_path(r);
            tg_spit(vp, c, cn);
            free(vp);
            free(r);
            free(c);
        }
    }
    size_t gn;
    uint8_t *golden = tg_slurp(gp, &gn);
    cr_assert_not_null(golden, "missing %s", gp);
    cr_assert_eq(n, gn, "size %zu, golden %zu: the format changed", n, gn);
    cr_assert_eq(memcmp(buf, golden, n), 0, "bytes differ: the format changed");
    free(golden);
    free(gp);
}

void tg_check_variants(const char *rel, const tg_variant_t *v, size_t nv, const char *dir)
{
    size_t n;
    char *gp = tg_path(rel);
    uint8_t *golden = tg_slurp(gp, &n);
    cr_assert_not_null(golden, "missing %s", gp);
    for (size_t i = 0; i < nv; i++) {
        uint8_t *c = malloc(n);
        memcpy(c, golden, n);
        size_t cn = n, fn;
        v[i].apply(c, &cn);
        char *r = rel_in(dir, v[i].name), *vp = tg_path(r);
        uint8_t *file = tg_slurp(vp, &fn);
        cr_assert_not_null(file, "missing %s", vp);
        cr_assert(fn == cn && memcmp(file, c, cn) == 0, "%s", v[i].name);
        free(file);
        free(vp);
        free(r);
        free(c);
    }
    free(golden);
    free(gp);
}

void tg_header_u16(uint8_t *buf, size_t at, uint16_t v)
{
    wal__st16(buf + at, v);
    wal__st32(buf + 28, wal__crc32c(0, buf, 28)); /* a valid header CRC: only the field is wrong */
}
