/* fuzz-lib: tb_replicator */
/*
 * fuzz_spb_ncmd.c: rep__spb_cmd_parse on a host's NCMD/DCMD payload
 * (outside bytes: anyone allowed to publish on the node's command topic).
 * Aborts if a refusal gives no reason or a wrong code, if a second parse
 * of the same bytes answers differently, or if it reports a rebirth that
 * protobuf-c's own reading of the bytes does not hold (a metric named
 * Node Control/Rebirth, datatype Boolean or absent, boolean_value true).
 * Sanitizers catch the rest.
 */
#include "replicator/rep_spb.h"

#include "base/base.h"
#include "proto/sparkplug_b.pb-c.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                    \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "fuzz_spb_ncmd: " __VA_ARGS__); \
            fputc('\n', stderr);                            \
            abort();                                        \
        }                                                   \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rep__spb_cmd_t a, b;
    char err[256];
    int rc = rep__spb_cmd_parse(data, size, &a, err, sizeof err);
    int rc2 = rep__spb_cmd_parse(data, size, &b, NULL, 0);
    CHECK(rc == rc2 && a.rebirth == b.rebirth && a.ignored == b.ignored, "a second parse differs");
    if (rc) {
        CHECK(rc == TB_EMALFORMED && err[0], "refused without a reason (rc %d)", rc);
        return 0;
    }
    Spb__Payload *p = spb__payload__unpack(NULL, size, data);
    CHECK(p, "accepted bytes protobuf-c refuses");
    bool seen = false;
    for (size_t i = 0; i < p->n_metrics; i++) {
        const Spb__Payload__Metric *m = p->metrics[i];
        if (m->name && strcmp(m->name, REP_SPB_REBIRTH_NAME) == 0 &&
            (!m->has_datatype || m->datatype == SPB__DATA_TYPE__Boolean) &&
            m->value_case == SPB__PAYLOAD__METRIC__VALUE_BOOLEAN_VALUE && m->boolean_value)
            seen = true;
    }
    CHECK(a.rebirth == seen, "rebirth %d but the payload says %d", a.rebirth, seen);
    CHECK(a.ignored + (a.rebirth ? 1u : 0u) <= p->n_metrics, "more metrics counted than decoded");
    spb__payload__free_unpacked(p, NULL);
    return 0;
}
