/* fuzz-lib: tb_wal */
/*
 * fuzz_wal_retired.c: the <wal.dir>/RETIRED file (wal_format.h RETIRED FILE).
 *
 * Input: byte 0 is a mode, the rest the file.
 *   bit 0  set the crc field to what the bytes call for, so the fuzzer gets
 *          past the checksum to the entries
 * Checked, for every input: wal_open opens (a bad file is set aside as
 * RETIRED.corrupt, never fatal); the table it lists is exactly what this
 * target's own reading of the format finds (valid file) or empty (else,
 * with RETIRED.corrupt beside it); a topic re-created under the first
 * entry's name gets that entry's next offset for its first record and
 * loses the entry; and a reopen lists the rest.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal/wal.h"

#include "wal_fuzz.h"

#define FAIL(why) (fprintf(stderr, "fuzz_wal_retired: %s (line %d)\n", why, __LINE__), abort())

static uint64_t ld(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}



static void init_once(void)
{
    fz_scratch_init("fuzzret");
}

typedef struct {
    char name[201];
    uint64_t next, checkpoint, dropped, forgotten;
} ent_t;

static int cmp_ent(const void *a, const void *b) { return strcmp(((const ent_t *)a)->name, ((const ent_t *)b)->name); }

/* The format's rules, read here: the number of entries, or -1 when invalid. */
static long parse(const uint8_t *f, size_t n, ent_t *out, size_t cap)
{
    if (n < 16 || memcmp(f, "TBWR", 4) != 0 || fz_crc32c(fz_crc32c(0, f, 12), f + 16, n - 16) != ld(f + 12, 4) ||
        ld(f + 4, 2) != 1)
        return -1;
    uint64_t count = ld(f + 8, 4);
    size_t pos = 16, k = 0;
    for (; k < count; k++) {
        if (k >= cap || n - pos < 72)
            return -1;
        const uint8_t *p = f + pos;
        size_t len = (size_t)ld(p, 2), padded = (len + 7) & ~(size_t)7;
        uint16_t flags = (uint16_t)ld(p + 2, 2);
        uint64_t next = ld(p + 8, 8), ck = ld(p + 16, 8), forgotten = ld(p + 56, 8);
        if (len == 0 || len > 200 || n - pos - 72 < padded || memchr(p + 72, 0, len) || (flags & ~1u) || next == 0 ||
            next > (1ull << 62) || ck >= next || (!(flags & 1) && forgotten) || forgotten >= next)
            return -1;
        memcpy(out[k].name, p + 72, len);
        out[k].name[len] = '\0';
        out[k].next = next;
        out[k].checkpoint = ck;
        out[k].dropped = ld(p + 24, 8);
        out[k].forgotten = forgotten;
        pos += 72 + padded;
    }
    if (pos != n)
        return -1;
    qsort(out, k, sizeof *out, cmp_ent);
    for (size_t i = 1; i < k; i++)
        if (strcmp(out[i - 1].name, out[i].name) == 0)
            return -1;
    return (long)k;
}

static wal_t *open_wal(void)
{
    wal_t *w;
    if (fz_open_wal(&w) != 0)
        FAIL("a RETIRED file must never stop the open");
    return w;
}

static void expect_table(wal_t *w, const ent_t *e, size_t n)
{
    wal_retired_t *v;
    size_t got;
    if (wal_retired_list(w, &v, &got) != 0 || got != n)
        FAIL("the table's size differs from the file's");
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, e[i].name) != 0 || v[i].next != e[i].next || v[i].checkpoint != e[i].checkpoint ||
            v[i].dropped != e[i].dropped)
            FAIL("an entry differs from the file's");
    wal_retired_free(v, got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 16384)
        return 0;
    init_once();
    size_t n = size - 1;
    uint8_t *file = malloc(n + 1);
    memcpy(file, data + 1, n);
    if ((data[0] & 1) && n >= 16) {
        uint32_t c = fz_crc32c(fz_crc32c(0, file, 12), file + 16, n - 16);
        for (int i = 0; i < 4; i++)
            file[12 + i] = (uint8_t)(c >> (8 * i));
    }
    ent_t *ents = calloc(256, sizeof *ents);
    long k = parse(file, n, ents, 256);
    char path[512];
    snprintf(path, sizeof path, "%s/RETIRED", fz_root);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(file, 1, n, f) != n)
        FAIL("write input");
    fclose(f);

    wal_t *w = open_wal();
    struct stat st;
    snprintf(path, sizeof path, "%s/RETIRED.corrupt", fz_root);
    if (k < 0) {
        expect_table(w, NULL, 0);
        if (stat(path, &st) != 0)
            FAIL("a bad file was not set aside");
    } else {
        expect_table(w, ents, (size_t)k);
        if (stat(path, &st) == 0)
            FAIL("a good file was set aside");
    }
    if (k > 0) {
        /* the first name comes back: its offsets continue, its entry goes */
        wal_topic_t *t;
        if (wal_topic_open(w, ents[0].name, &t) != 0)
            FAIL("re-creating a retired name");
        wal_topic_stats_t ts;
        wal_topic_stats(t, &ts);
        if (ts.next_offset != ents[0].next || ts.checkpoint != ents[0].next - 1 ||
            ts.dropped_total != ents[0].dropped + ents[0].forgotten)
            FAIL("a re-created name does not continue its entry");
        if (wal_close(w) != 0)
            FAIL("close");
        w = open_wal();
        expect_table(w, ents + 1, (size_t)k - 1);
    }
    wal_close(w);
    fz_empty_dir(fz_root);
    free(ents);
    free(file);
    return 0;
}
