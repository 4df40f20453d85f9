/*
 * wal_fuzz.h: what the fuzz targets that build WAL directories share:
 * a bitwise CRC32C (independent of the library's table and hardware paths,
 * so a target that forges a valid file does not trust the code under test)
 * and a scratch directory, made once per process under $TMPDIR, removed at
 * exit and emptied between inputs.
 */
#ifndef TRIB_FUZZ_WAL_FUZZ_H
#define TRIB_FUZZ_WAL_FUZZ_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "wal/wal.h"

static inline uint32_t fz_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static inline int fz__rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    return ftw->level == 0 ? 0 : remove(path);
}

static char fz_root[256]; /* the scratch directory, once fz_scratch_init made it */

static inline void fz__remove_root(void)
{
    rmdir(fz_root);
}

/* Makes fz_root (<$TMPDIR or /tmp>/<prefix>-XXXXXX) and silences the log,
 * the first time; true then. Aborts when the directory cannot be made. */
static inline bool fz_scratch_init(const char *prefix)
{
    if (fz_root[0])
        return false;
    const char *t = getenv("TMPDIR");
    snprintf(fz_root, sizeof fz_root, "%s/%s-XXXXXX", t && *t ? t : "/tmp", prefix);
    if (!mkdtemp(fz_root)) {
        fprintf(stderr, "%s: mkdtemp %s failed\n", prefix, fz_root);
        abort();
    }
    atexit(fz__remove_root);
    tb_log_set_level(TB_LOG_OFF);
    return true;
}

/* A small log in fz_root (4 KiB segments, 1 MiB a topic, 4 MiB in all):
 * wal_open's answer, *w the log when 0. */
static inline int fz_open_wal(wal_t **w)
{
    wal_opts_t o;
    wal_opts_default(&o);
    o.dir = fz_root;
    o.segment_bytes = 4096;
    o.max_topic_bytes = 1 << 20;
    o.max_total_bytes = 1 << 22;
    *w = NULL;
    return wal_open(&o, w);
}

/* path := the n bytes at p; aborts when it cannot be written. */
static inline void fz_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
    fclose(f);
}

/* Everything below dir, which itself stays. */
static inline void fz_empty_dir(const char *dir)
{
    nftw(dir, fz__rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
