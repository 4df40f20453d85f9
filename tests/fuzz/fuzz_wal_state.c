/* fuzz-lib: tb_wal */
/*
 * fuzz_wal_state.c: an output state blob, <wal.dir>/$outputs/<id>/<key>
 * (wal_format.h OUTPUT STATE BLOBS: "TBOS", version, length, CRC32C, payload).
 *
 * Input: byte 0 is a mode, the rest the file.
 *   bit 0  set the crc field to what the bytes call for, so the fuzzer gets
 *          past the checksum to the length and version checks
 *   bit 1  set the length field to the bytes after the head (before bit 0)
 * Checked, for every input: wal_output_state_get answers 0, TB_ECORRUPT or
 * TB_EUNSUPPORTED, and 0 exactly when the file is framed as the format says
 * (checked here independently of the library), with the payload the file
 * holds; a put of that payload (or of the raw bytes, when the file was not
 * valid) reads back the same, and wal check agrees.
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

#define FAIL(why) (fprintf(stderr, "fuzz_wal_state: %s (line %d)\n", why, __LINE__), abort())

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}



static void init_once(void)
{
    fz_scratch_init("fuzzstate");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    init_once();
    uint8_t mode = data[0];
    size_t n = size - 1;
    uint8_t *file = malloc(n + 1);
    memcpy(file, data + 1, n);
    if ((mode & 2) && n >= 16)
        st32(file + 8, (uint32_t)(n - 16));
    if ((mode & 1) && n >= 16)
        st32(file + 12, fz_crc32c(fz_crc32c(0, file, 12), file + 16, n - 16));

    /* what the format says of these bytes, decided here */
    bool framed = n >= 16 && memcmp(file, "TBOS", 4) == 0 && ld32(file + 8) <= (1u << 20) &&
                  n == 16 + (size_t)ld32(file + 8) && fz_crc32c(fz_crc32c(0, file, 12), file + 16, n - 16) == ld32(file + 12);
    bool valid = framed && file[4] == 1 && file[5] == 0;

    char path[512];
    snprintf(path, sizeof path, "%s/OUTPUTS", fz_root);
    const char outputs[] = "0 danube\n1 spb\n";
    char reg[64];
    int rl = snprintf(reg, sizeof reg, "%scrc %08x\n", outputs, fz_crc32c(0, (const uint8_t *)outputs, strlen(outputs)));
    fz_write_file(path, reg, (size_t)rl);
    snprintf(path, sizeof path, "%s/$outputs", fz_root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/$outputs/1", fz_root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/$outputs/1/bdseq", fz_root);
    fz_write_file(path, file, n);

    wal_t *w;
    if (fz_open_wal(&w) != 0)
        FAIL("open");
    void *p = NULL;
    size_t pn = 0;
    int rc = wal_output_state_get(w, 1, "bdseq", &p, &pn);
    if (rc != 0 && rc != TB_ECORRUPT && rc != TB_EUNSUPPORTED)
        FAIL("get answers 0, TB_ECORRUPT or TB_EUNSUPPORTED");
    if ((rc == 0) != valid)
        FAIL("get and the format disagree on validity");
    if (rc == TB_EUNSUPPORTED && !framed)
        FAIL("unsupported for a file that is not framed");
    if (rc == 0 && (pn != n - 16 || (pn && memcmp(p, file + 16, pn) != 0)))
        FAIL("the payload is not the file's");
    if (rc != 0 && (p || pn))
        FAIL("a failed get left its outputs set");
    /* a put replaces whatever was there, and reads back */
    const void *put = rc == 0 ? p : file;
    size_t put_n = rc == 0 ? pn : (n > (1u << 20) ? (1u << 20) : n);
    if (wal_output_state_put(w, 1, "bdseq", put, put_n) != 0)
        FAIL("put");
    void *q;
    size_t qn;
    if (wal_output_state_get(w, 1, "bdseq", &q, &qn) != 0 || qn != put_n || (qn && memcmp(q, put, qn) != 0))
        FAIL("a put does not read back");
    free(q);
    free(p);
    if (wal_close(w) != 0)
        FAIL("close");
    FILE *devnull = fopen("/dev/null", "w");
    if (wal_check(fz_root, devnull) != 0)
        FAIL("wal check finds damage after a put");
    fclose(devnull);
    fz_empty_dir(fz_root);
    free(file);
    return 0;
}
