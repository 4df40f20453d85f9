/*
 * crc32c.c: CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for the
 * record and header checksums. Why CRC32C rather than zlib's CRC32 is
 * argued in wal_format.h.
 *
 * Three paths, chosen once at first use:
 *   - x86-64 with SSE4.2: the crc32 instruction, 8 bytes per step. Compiled
 *     with __attribute__((target("sse4.2"))) so the rest of the program
 *     keeps the baseline ISA, and used only if __builtin_cpu_supports says so.
 *   - AArch64 with the CRC extension (every ARMv8.1 core and the Cortex-A53
 *     and A72 of the Raspberry Pi 3/4): the crc32c instructions through the
 *     compiler builtins, detected with getauxval(AT_HWCAP). Only checked to
 *     compile with clang --target=aarch64 on the x86 build machine (no
 *     aarch64 gcc there): not yet run on ARM.
 *   - otherwise slice-by-8 tables: 8 bytes per step from eight 256-entry
 *     tables (8 KiB), roughly 1-2 GB/s, still far faster than an SD card.
 * All three give identical results; tests/unit/wal/test_crc32c.c checks the
 * standard vectors and compares the paths on random data.
 */
#include "wal/wal_format.h"

#include <pthread.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static uint32_t (*impl)(uint32_t, const uint8_t *, size_t);
static const char *impl_name = "table";
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t crc_table(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo = c ^ wal__ld32(p);
        uint32_t hi = wal__ld32(p + 4);
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
            table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
            table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n-- > 0)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

#if defined(__aarch64__)
/* the compilers' own builtins: arm_acle.h hides the intrinsics unless the
 * whole file is built for +crc, and we choose at run time */
#if defined(__clang__)
#define WAL_ARM_CRC_TARGET __attribute__((target("crc")))
#define ARM_CRC32CB(c, b) __builtin_arm_crc32cb((c), (b))
#define ARM_CRC32CD(c, v) __builtin_arm_crc32cd((c), (v))
#else
#define WAL_ARM_CRC_TARGET __attribute__((target("+crc")))
#define ARM_CRC32CB(c, b) __builtin_aarch64_crc32cb((c), (b))
#define ARM_CRC32CD(c, v) __builtin_aarch64_crc32cx((c), (v))
#endif
WAL_ARM_CRC_TARGET static uint32_t crc_armv8(uint32_t c, const uint8_t *p, size_t n)
{
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = ARM_CRC32CB(c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = ARM_CRC32CD(c, v);
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = ARM_CRC32CB(c, *p++);
    return c;
}
#endif

static void init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = table[0][table[t - 1][i] & 0xFF] ^ (table[t - 1][i] >> 8);
    impl = crc_table;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        impl = crc_sse42;
        impl_name = "sse4.2";
    }
#elif defined(__aarch64__)
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) {
        impl = crc_armv8;
        impl_name = "armv8-crc";
    }
#endif
}

uint32_t wal__crc32c(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&once, init);
    return ~impl(~crc, buf, n);
}

uint32_t wal__crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&once, init);
    return ~crc_table(~crc, buf, n);
}

const char *wal__crc32c_impl(void)
{
    pthread_once(&once, init);
    return impl_name;
}
