/* fuzz-lib: tb_wal */
/*
 * fuzz_wal_outputs.c: the <wal.dir>/OUTPUTS file (docs/WAL.md, OUTPUTS):
 * lines "<id> <name>", then "crc <8 hex>" over every byte before it.
 *
 * Input: byte 0 is a mode, the rest the file.
 *   bit 0  append the crc line the file's bytes call for, so the fuzzer gets
 *          past the checksum to the lines
 * Checked, for every input: wal_open either refuses with TB_ECORRUPT or
 * opens; when it opens, "danube" is id 0 and every "<id> <name>" line of the
 * file (split here independently of the library) names that id; a new
 * output gets an id no line had; and after a close and a reopen every id
 * is the same (the rewritten file reads back).
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

#define FAIL(why) (fprintf(stderr, "fuzz_wal_outputs: %s (line %d)\n", why, __LINE__), abort())



static void init_once(void)
{
    fz_scratch_init("fuzzout");
}

static wal_t *open_wal(int *rc)
{
    wal_t *w;
    *rc = fz_open_wal(&w);
    return w;
}

typedef struct {
    unsigned id;
    char name[80];
} line_t;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    init_once();
    uint8_t mode = data[0];
    size_t n = size - 1;
    char *file = malloc(n + 32);
    memcpy(file, data + 1, n);
    if (mode & 1)
        n += (size_t)snprintf(file + n, 32, "crc %08x\n", fz_crc32c(0, (const uint8_t *)file, n));
    char path[512];
    snprintf(path, sizeof path, "%s/OUTPUTS", fz_root);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(file, 1, n, f) != n)
        FAIL("write input");
    fclose(f);

    int rc;
    wal_t *w = open_wal(&rc);
    if (rc != 0) {
        if (rc != TB_ECORRUPT)
            FAIL("a bad OUTPUTS file must be TB_ECORRUPT");
        goto out;
    }
    /* the file opened: split its lines ourselves */
    line_t *lines = calloc(1100, sizeof *lines);
    size_t nl = 0, pos = 0;
    while (pos < n && nl < 1100) {
        const char *e = memchr(file + pos, '\n', n - pos);
        if (!e)
            FAIL("opened a file whose last line has no newline");
        size_t len = (size_t)(e - (file + pos));
        if (len >= 4 && memcmp(file + pos, "crc ", 4) == 0)
            break;
        const char *sp = memchr(file + pos, ' ', len);
        if (!sp || len - (size_t)(sp - (file + pos)) - 1 >= sizeof lines[nl].name)
            FAIL("opened a line that is not <id> <name>");
        lines[nl].id = (unsigned)strtoul(file + pos, NULL, 10);
        memcpy(lines[nl].name, sp + 1, len - (size_t)(sp - (file + pos)) - 1);
        nl++;
        pos += len + 1;
    }
    uint16_t id;
    if (wal_output_id(w, "danube", &id) != 0 || id != 0)
        FAIL("danube is not id 0");
    for (size_t i = 0; i < nl; i++)
        if (wal_output_id(w, lines[i].name, &id) != 0 || id != lines[i].id)
            FAIL("a line's name does not have the line's id");
    uint16_t fresh;
    if (wal_output_id(w, "fuzz-new-output", &fresh) == 0) {
        for (size_t i = 0; i < nl; i++)
            if (lines[i].id == fresh && strcmp(lines[i].name, "fuzz-new-output") != 0)
                FAIL("a new output got an id in use");
    } else {
        fresh = UINT16_MAX;
    }
    if (wal_close(w) != 0)
        FAIL("close");
    w = open_wal(&rc);
    if (rc != 0)
        FAIL("the rewritten OUTPUTS does not open");
    for (size_t i = 0; i < nl; i++)
        if (wal_output_id(w, lines[i].name, &id) != 0 || id != lines[i].id)
            FAIL("an id changed across a reopen");
    if (fresh != UINT16_MAX && (wal_output_id(w, "fuzz-new-output", &id) != 0 || id != fresh))
        FAIL("the new output's id changed across a reopen");
    wal_close(w);
    free(lines);
out:
    fz_empty_dir(fz_root);
    free(file);
    return 0;
}
