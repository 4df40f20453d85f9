/* fuzz-lib: tb_replicator */
/*
 * fuzz_spb_table.c: rep__spb_table_load on the persisted metric table
 * (<wal.dir>/$outputs/<id>/aliases: our own bytes, but off a disk that may
 * hand back anything). Aborts if a refusal gives no reason or another code,
 * or if a table it accepts does not save back to exactly the same bytes.
 * Sanitizers catch the rest.
 */
#include "replicator/rep_spb.h"

#include "base/base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond)) {                                       \
            fprintf(stderr, "fuzz_spb_table: " __VA_ARGS__); \
            fputc('\n', stderr);                             \
            abort();                                         \
        }                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rep__spb_node_t *n = rep__spb_node_new();
    char err[256] = "";
    int rc = rep__spb_table_load(n, data, size, err, sizeof err);
    if (rc != 0) {
        CHECK(rc == TB_EMALFORMED && err[0], "refused without a reason (rc %d)", rc);
        rep__spb_node_free(n);
        return 0;
    }
    rep__spb_buf_t b = { 0 };
    CHECK(rep__spb_table_save(n, &b) == 0, "an accepted table does not save");
    CHECK(b.len == size && memcmp(b.p, data, size) == 0, "saved back differently (%zu bytes, was %zu)", b.len, size);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
    return 0;
}
