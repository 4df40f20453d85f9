/* fuzz-lib: tb_replicator */
/*
 * fuzz_spb_state.c: rep__spb_state_parse on a primary host's STATE payload
 * (outside bytes: anyone allowed to publish on spBv1.0/STATE/<id>), and the
 * session fed it as a message (rep__spb_message), up and waiting for the
 * host. Aborts if the parse answers anything but 0 or TB_EMALFORMED, if a
 * second parse differs, or if an accepted payload's online does not say
 * what the session then does (a birth due when online). Sanitizers catch
 * the rest.
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
            fprintf(stderr, "fuzz_spb_state: " __VA_ARGS__); \
            fputc('\n', stderr);                             \
            abort();                                         \
        }                                                    \
    } while (0)

static int src_read(void *arg, rep__spb_rec_t *out)
{
    (void)arg;
    (void)out;
    return 0;
}
static void src_rewind(void *arg) { (void)arg; }
static void src_ack(void *arg, uint32_t lane, uint64_t token) { (void)arg; (void)lane; (void)token; }
static void src_dead(void *arg, const rep__spb_rec_t *r, const char *why) { (void)arg; (void)r; (void)why; }
static int src_persist(void *arg, const void *blob, size_t n) { (void)arg; (void)blob; (void)n; return 0; }
static const rep__spb_src_ops_t ops = { src_read, src_rewind, src_ack, src_dead, src_persist, NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool on1 = false, on2 = false;
    uint64_t ts1 = 0, ts2 = 0;
    int rc = rep__spb_state_parse(data, size, &on1, &ts1);
    int rc2 = rep__spb_state_parse(data, size, &on2, &ts2);
    CHECK(rc == 0 || rc == TB_EMALFORMED, "rc %d", rc);
    CHECK(rc == rc2 && (rc || (on1 == on2 && ts1 == ts2)), "a second parse differs");

    rep__spb_sess_opts_t o = { .group_id = "g", .edge_node_id = "e", .primary_host_id = "h",
                               .confirm_timeout_ms = 1000, .pack = 4, .max_unconfirmed = 4 };
    rep__spb_sess_t *s = NULL;
    char err[128];
    CHECK(rep__spb_sess_new(&o, &ops, NULL, NULL, 0, &s, err, sizeof err) == 0, "%s", err);
    rep__spb_will_t w;
    CHECK(rep__spb_attempt(s, 1000, &w) == 0, "attempt");
    rep__spb_subscribed(s, 1000, NULL, 0);
    rep__spb_message(s, 1000, "spBv1.0/STATE/h", data, size, true);
    rep__spb_out_t out;
    int n = rep__spb_next(s, 1000, &out);
    CHECK(n == ((rc == 0 && on1) ? REP_SPB_OUT_PUBLISH : REP_SPB_OUT_NONE), "next %d for rc %d online %d", n, rc, on1);
    rep__spb_message(s, 1000, "spBv1.0/g/NCMD/e", data, size, false);
    rep__spb_sess_free(s);
    return 0;
}
