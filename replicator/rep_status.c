/*
 * rep_status.c: what a failed batch's status means for its topic
 * (docs/design/RELOAD.md 5.2, docs/REPLICATION.md "Poison batches").
 *
 * The protocol has no per-message rejection (DANUBE-PROTOCOL.md: an ack is
 * {topic_name, acked_offset}); the only refusal is the end of the stream
 * with a status. A per-message rejection therefore reaches us as the
 * stream's status while it carried the batch holding that message, and is
 * classified like a per-batch error. Pure: a table over gRPC status codes
 * and the batch's message count; no gRPC calls, no clock.
 *
 * INTERNAL is transient on purpose: the real cluster answers every
 * ingestion failure (a storage outage included) with it, so taking it for
 * "this batch is bad" would dead-letter healthy data during an outage.
 */
#include "replicator/rep_int.h"

rep__class_t rep__classify(grpc_status_code st, uint32_t batch_msgs)
{
    switch (st) {
    case GRPC_STATUS_INVALID_ARGUMENT:
    case GRPC_STATUS_FAILED_PRECONDITION:
    case GRPC_STATUS_OUT_OF_RANGE:
        return REP__CLASS_PERMANENT;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        /* one message larger than the cluster takes: it will never fit; a
         * batch of several may be the cluster's momentary limit */
        return batch_msgs == 1 ? REP__CLASS_PERMANENT : REP__CLASS_TRANSIENT;
    case GRPC_STATUS_NOT_FOUND:
        return REP__CLASS_TOPIC_GONE;
    case GRPC_STATUS_UNAUTHENTICATED:
    case GRPC_STATUS_PERMISSION_DENIED:
        return REP__CLASS_CREDENTIALS;
    case GRPC_STATUS_UNIMPLEMENTED:
        return REP__CLASS_UNIMPLEMENTED;
    default: /* OK with batches unacked, UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, ABORTED,
                INTERNAL, UNKNOWN, DATA_LOSS */
        return REP__CLASS_TRANSIENT;
    }
}

const char *rep__class_name(rep__class_t c)
{
    static const char *const n[] = { "transient", "permanent", "topic_gone", "credentials", "unimplemented" };
    return (unsigned)c < TB_ARRAY_LEN(n) ? n[c] : "?";
}

rep_dl_reason_t rep__dl_reason(grpc_status_code st)
{
    switch (st) {
    case GRPC_STATUS_INVALID_ARGUMENT: return REP_DL_CLUSTER_INVALID_ARGUMENT;
    case GRPC_STATUS_FAILED_PRECONDITION: return REP_DL_CLUSTER_FAILED_PRECONDITION;
    case GRPC_STATUS_OUT_OF_RANGE: return REP_DL_CLUSTER_OUT_OF_RANGE;
    case GRPC_STATUS_RESOURCE_EXHAUSTED: return REP_DL_CLUSTER_TOO_LARGE;
    default: return REP_DL_OPERATOR; /* not a permanent status: only an operator's decision */
    }
}

const char *rep_dl_reason_name(rep_dl_reason_t r)
{
    static const char *const n[] = { "invalid_schema", "cluster_invalid_argument", "cluster_failed_precondition",
                                     "cluster_out_of_range", "cluster_too_large", "operator",
                                     "output_type_mismatch", "output_unroutable" };
    _Static_assert(TB_ARRAY_LEN(n) == REP_DL__COUNT, "a name per reason");
    return (unsigned)r < TB_ARRAY_LEN(n) ? n[r] : "?";
}

const char *rep_refused_name(rep_refused_t r)
{
    static const char *const n[] = { "none", "credentials", "unimplemented" };
    return (unsigned)r < TB_ARRAY_LEN(n) ? n[r] : "?";
}

int rep__refused_words(rep_refused_t r, const char *status, const char *detail, const char *url, char *buf,
                       size_t len)
{
    switch (r) {
    case REP_REFUSED_CREDENTIALS:
        return snprintf(buf, len, "credentials refused (%s%s%s)", status, detail && *detail ? ": " : "",
                        detail ? detail : "");
    case REP_REFUSED_UNIMPLEMENTED:
        return snprintf(buf, len, "the cluster at %s does not offer EdgeReplicatorService (%s%s%s)",
                        url ? url : "?", status, detail && *detail ? ": " : "", detail ? detail : "");
    default:
        if (len)
            buf[0] = '\0';
        return 0;
    }
}
