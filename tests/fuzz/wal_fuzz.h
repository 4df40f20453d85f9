/*
 * wal_fuzz.h: what the fuzz targets that build WAL directories share:
 * a bitwise CRC32C (independent of the library's table and hardware paths,
 * so a target that forges a valid file does not trust the code under test)
 * and the emptying of a scratch directory between inputs.
 */
#ifndef TRIB_FUZZ_WAL_FUZZ_H
#define TRIB_FUZZ_WAL_FUZZ_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

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

/* Everything below dir, which itself stays. */
static inline void fz_empty_dir(const char *dir)
{
    nftw(dir, fz__rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
