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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    seen_t a = { 0 }, b = { 0 };
    char err[256];
    int rc = sch_flatten_json(data, size, leaf, &a, err, sizeof err);
    if (rc == 0) {
        int rc2 = sch_flatten_json(data, size, leaf, &b, err, sizeof err);
        CHECK(rc2 == 0 && a.n == b.n && a.digest == b.digest, "a second walk differs");
    } else {
        CHECK(rc == TB_EINVALID && err[0], "refused without a reason (rc %d)", rc);
    }
    clear(&a);
    clear(&b);
    return 0;
}
