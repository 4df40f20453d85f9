/*
 * helper_golden.h: what the golden-file tests share: paths under
 * tests/data/wal/ (one folder per format version: v1/ is frozen, v2/ is what
 * the writer produces now), reading and writing whole files, a writer made
 * deterministic (fixed salt and clock), and installing a golden file as a
 * segment of topic /edge1/golden.
 */
#ifndef HELPER_GOLDEN_H
#define HELPER_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "helper_wal.h"

#define GOLDEN_SALT 0x5A17C0DEu
#define GOLDEN_TIME 1700000000000ull
#define GOLDEN_TOPIC "/edge1/golden"
#define GOLDEN_DIR "+edge1+golden"

/* tests/data/wal/<rel> ($TRIB_TESTDATA/wal/<rel> if set). Caller frees. */
char *tg_path(const char *rel);
/* The whole file, or NULL; *n its size. Caller frees. */
uint8_t *tg_slurp(const char *path, size_t *n);
/* Writes n bytes to path (asserts). */
void tg_spit(const char *path, const uint8_t *buf, size_t n);
/* The POSIX table with the golden salt and clock. */
const wal_io_t *tg_io(void);
/* Copies golden file rel to segment <base> of GOLDEN_TOPIC; returns its path. */
char *tg_install(th_t *h, const char *rel, uint64_t base);
/* A valid empty (current version) segment at base, so the one before it is sealed. */
void tg_install_empty(th_t *h, uint64_t base);
/* The bytes of segment <base> of GOLDEN_TOPIC. Caller frees. */
uint8_t *tg_segment(th_t *h, uint64_t base, size_t *n);
/* Opens h->w and returns GOLDEN_TOPIC's stats. */
wal_topic_stats_t tg_open_stats(th_t *h);
/* Records readable from offset 1 (gaps skipped). */
long tg_readable(th_t *h);

/* A corruption applied to a copy of a golden segment, by name. */
typedef struct tg_variant {
    const char *name;
    void (*apply)(uint8_t *buf, size_t *n);
} tg_variant_t;

/* Writes the produced segment to dir/<base> and each variant beside it when
 * WAL_GOLDEN_UPDATE is set; then asserts the produced bytes equal the file. */
void tg_compare_or_update(const char *rel, const uint8_t *buf, size_t n, const tg_variant_t *v, size_t nv,
                          const char *dir);
/* Asserts each variant file is its mutation of golden file rel. */
void tg_check_variants(const char *rel, const tg_variant_t *v, size_t nv, const char *dir);
/* Sets a 16-bit header field and recomputes the header CRC. */
void tg_header_u16(uint8_t *buf, size_t at, uint16_t v);

#endif
