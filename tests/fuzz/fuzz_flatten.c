/* fuzz-lib: tb_schema */
/*
 * fuzz_flatten.c: sch_flatten_json on a device's payload (outside bytes).
 * Aborts if an accepted payload yields a path that is empty, has an empty
 * level, is longer than SCH_FLAT_MAX_PATH, disagrees with its length, or
 * repeats within the payload (two leaves on one metric name); if a string
 * value is not valid UTF-8; or if a second walk of the same bytes gives a
 * different sequence. Refusals must say why.
 */
#define FUZZ_NAME "fuzz_flatten"
#include "flat_check.h"

typedef struct {
    const uint8_t *data;
    size_t size;
} input_t;

static int walk(const void *ctx, seen_t *s, char *err, size_t errlen)
{
    const input_t *in = ctx;
    return sch_flatten_json(in->data, in->size, leaf, s, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    input_t in = { data, size };
    flat_check_twice(walk, &in);
    return 0;
}
