/*
 * test_status.c: rep_status.c's classification of a failed stream's status
 * (docs/design/RELOAD.md 5.2): which statuses charge the batch, which are an
 * outage, which are a refusal of the edge's credentials; the dead-letter
 * reasons and the refused words.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_rep.h"

Test(status, permanent_statuses_charge_the_batch)
{
    const grpc_status_code perm[] = { GRPC_STATUS_INVALID_ARGUMENT, GRPC_STATUS_FAILED_PRECONDITION,
                                      GRPC_STATUS_OUT_OF_RANGE };
    for (size_t i = 0; i < TB_ARRAY_LEN(perm); i++) {
        cr_assert_eq(rep__classify(perm[i], 1), REP__CLASS_PERMANENT, "status %d", perm[i]);
        cr_assert_eq(rep__classify(perm[i], 500), REP__CLASS_PERMANENT, "status %d", perm[i]);
    }
}

Test(status, internal_and_outages_are_transient)
{
    /* INTERNAL: the real cluster's answer to every storage failure (5.1) */
    const grpc_status_code tr[] = { GRPC_STATUS_OK, GRPC_STATUS_UNAVAILABLE, GRPC_STATUS_DEADLINE_EXCEEDED,
                                    GRPC_STATUS_CANCELLED, GRPC_STATUS_ABORTED, GRPC_STATUS_INTERNAL,
                                    GRPC_STATUS_UNKNOWN, GRPC_STATUS_DATA_LOSS };
    for (size_t i = 0; i < TB_ARRAY_LEN(tr); i++) {
        cr_assert_eq(rep__classify(tr[i], 1), REP__CLASS_TRANSIENT, "status %d", tr[i]);
        cr_assert_eq(rep__classify(tr[i], 100), REP__CLASS_TRANSIENT, "status %d", tr[i]);
    }
}

Test(status, resource_exhausted_is_permanent_only_for_one_message)
{
    cr_assert_eq(rep__classify(GRPC_STATUS_RESOURCE_EXHAUSTED, 1), REP__CLASS_PERMANENT);
    cr_assert_eq(rep__classify(GRPC_STATUS_RESOURCE_EXHAUSTED, 2), REP__CLASS_TRANSIENT);
    cr_assert_eq(rep__classify(GRPC_STATUS_RESOURCE_EXHAUSTED, 0), REP__CLASS_TRANSIENT);
}

Test(status, credentials_topic_gone_unimplemented)
{
    cr_assert_eq(rep__classify(GRPC_STATUS_UNAUTHENTICATED, 1), REP__CLASS_CREDENTIALS);
    cr_assert_eq(rep__classify(GRPC_STATUS_PERMISSION_DENIED, 7), REP__CLASS_CREDENTIALS);
    cr_assert_eq(rep__classify(GRPC_STATUS_NOT_FOUND, 1), REP__CLASS_TOPIC_GONE);
    cr_assert_eq(rep__classify(GRPC_STATUS_UNIMPLEMENTED, 1), REP__CLASS_UNIMPLEMENTED);
    cr_assert_str_eq(rep__class_name(REP__CLASS_CREDENTIALS), "credentials");
    cr_assert_str_eq(rep__class_name((rep__class_t)99), "?");
}

Test(status, every_code_has_a_class)
{
    for (int c = 0; c <= GRPC_STATUS_UNAUTHENTICATED; c++) {
        rep__class_t k = rep__classify((grpc_status_code)c, 1);
        cr_assert_neq(strcmp(rep__class_name(k), "?"), 0, "code %d", c);
    }
    cr_assert_eq(rep__classify((grpc_status_code)1000, 1), REP__CLASS_TRANSIENT);
}

Test(status, dead_letter_reasons)
{
    cr_assert_eq(rep__dl_reason(GRPC_STATUS_INVALID_ARGUMENT), REP_DL_CLUSTER_INVALID_ARGUMENT);
    cr_assert_eq(rep__dl_reason(GRPC_STATUS_FAILED_PRECONDITION), REP_DL_CLUSTER_FAILED_PRECONDITION);
    cr_assert_eq(rep__dl_reason(GRPC_STATUS_OUT_OF_RANGE), REP_DL_CLUSTER_OUT_OF_RANGE);
    cr_assert_eq(rep__dl_reason(GRPC_STATUS_RESOURCE_EXHAUSTED), REP_DL_CLUSTER_TOO_LARGE);
    cr_assert_eq(rep__dl_reason(GRPC_STATUS_INTERNAL), REP_DL_OPERATOR);
    const char *want[] = { "invalid_schema", "cluster_invalid_argument", "cluster_failed_precondition",
                           "cluster_out_of_range", "cluster_too_large", "operator", "output_type_mismatch",
                           "output_unroutable" };
    for (int r = 0; r < REP_DL__COUNT; r++)
        cr_assert_str_eq(rep_dl_reason_name((rep_dl_reason_t)r), want[r]);
}

Test(status, refused_words)
{
    char buf[200];
    rep__refused_words(REP_REFUSED_CREDENTIALS, "UNAUTHENTICATED", "missing or invalid authorization bearer token",
                       "http://x:1", buf, sizeof buf);
    cr_assert_str_eq(buf, "credentials refused (UNAUTHENTICATED: missing or invalid authorization bearer token)");
    rep__refused_words(REP_REFUSED_CREDENTIALS, "PERMISSION_DENIED", "", NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, "credentials refused (PERMISSION_DENIED)");
    rep__refused_words(REP_REFUSED_UNIMPLEMENTED, "UNIMPLEMENTED", NULL, "http://h:9", buf, sizeof buf);
    cr_assert_str_eq(buf, "the cluster at http://h:9 does not offer EdgeReplicatorService (UNIMPLEMENTED)");
    rep__refused_words(REP_REFUSED_NONE, "OK", "x", NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, "");
    cr_assert_str_eq(rep_refused_name(REP_REFUSED_CREDENTIALS), "credentials");
}

Test(status, retry_names_include_permanent_and_refused)
{
    cr_assert_str_eq(rep_retry_name(REP_RETRY_PERMANENT), "permanent");
    cr_assert_str_eq(rep_retry_name(REP_RETRY_REFUSED), "refused");
}
