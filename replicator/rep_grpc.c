/*
 * rep_grpc.c: the gRPC C core plumbing the protocol files share: cluster
 * URLs, one-batch unary calls with a deadline and the bearer token, byte
 * buffers, status names, and gRPC's own log lines routed into ours.
 *
 * Facts this relies on (GRPC-NOTES.md, gRPC 1.51 on Debian 12):
 *   - a unary call is one grpc_call_start_batch with all six ops and one
 *     tag; RECV_STATUS_ON_CLIENT always completes, so the tag always comes
 *     back, whether the call succeeded, failed, timed out or was cancelled;
 *   - grpc_raw_byte_buffer_create takes its own reference to the slice; the
 *     buffer is ours until the batch completes, then destroyed;
 *   - metadata keys are lower case and must outlive the batch: the
 *     authorization entry lives in the rep_t.
 * Unary calls carry no WAIT_FOR_READY: during an outage they fail at once
 * (UNAVAILABLE) instead of holding a deadline's worth of time, and the
 * caller's backoff (or the channel turning READY, rep_chan.c) decides
 * when to try again.
 */
#include "replicator/rep_int.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/log.h>
#include <stdlib.h>
#include <string.h>

int rep__parse_url(const char *url, char **target, bool *tls)
{
    *target = NULL;
    const char *rest;
    if (strncmp(url, "http://", 7) == 0) {
        rest = url + 7;
        *tls = false;
    } else if (strncmp(url, "https://", 8) == 0) {
        rest = url + 8;
        *tls = true;
    } else {
        return TB_ECONFIG;
    }
    size_t n = strcspn(rest, "/");
    if (n == 0 || !memchr(rest, ':', n))
        return TB_ECONFIG;
    *target = tb_strndup(rest, n);
    return 0;
}

grpc_metadata *rep__call_md(rep_t *r, size_t *n)
{
    *n = r->nmd;
    return r->nmd ? r->md : NULL;
}

static void unary_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)ok; /* RECV_STATUS_ON_CLIENT: the status says how it went */
    rep__unary_t *u = TB_CONTAINER_OF(op, rep__unary_t, op);
    r->outstanding--;
    if (u->prev)
        u->prev->next = u->next;
    else
        r->unaries = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
    u->done(r, u);
}

rep__unary_t *rep__unary_start(rep_t *r, grpc_channel *ch, const char *method, const uint8_t *req, size_t len,
                               void (*done)(rep_t *r, rep__unary_t *u), void *arg)
{
    rep__unary_t *u = tb_calloc(1, sizeof *u);
    u->op.cb = unary_cb;
    u->done = done;
    u->arg = arg;
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(r->o.rpc_timeout_ms, GPR_TIMESPAN));
    u->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq,
                                       grpc_slice_from_static_string(method), NULL, deadline, NULL);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)req, len);
    u->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_metadata_array_init(&u->init_md);
    grpc_metadata_array_init(&u->trail_md);
    u->details = grpc_empty_slice();

    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.metadata = rep__call_md(r, &ops[0].data.send_initial_metadata.count);
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trail_md;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    grpc_call_error e = grpc_call_start_batch(u->call, ops, 6, &u->op, NULL);
    if (e != GRPC_CALL_OK) {
        /* a fresh call with one batch cannot be refused unless we misuse the API */
        tb_error("replicator: grpc refused a unary call batch", TB_S("method", method), TB_I("grpc_call_error", e));
        abort();
    }
    r->outstanding++;
    u->next = r->unaries;
    if (u->next)
        u->next->prev = u;
    r->unaries = u;
    return u;
}

void rep__unary_free(rep_t *r, rep__unary_t *u)
{
    (void)r;
    if (!u)
        return;
    if (u->send)
        grpc_byte_buffer_destroy(u->send);
    if (u->recv)
        grpc_byte_buffer_destroy(u->recv);
    grpc_metadata_array_destroy(&u->init_md);
    grpc_metadata_array_destroy(&u->trail_md);
    grpc_slice_unref(u->details);
    grpc_call_unref(u->call);
    free(u);
}

uint8_t *rep__bb_read(grpc_byte_buffer *bb, size_t *len)
{
    grpc_byte_buffer_reader rd;
    if (!bb || !grpc_byte_buffer_reader_init(&rd, bb)) {
        *len = 0;
        return NULL;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    *len = GRPC_SLICE_LENGTH(s);
    uint8_t *out = tb_malloc(*len ? *len : 1);
    memcpy(out, GRPC_SLICE_START_PTR(s), *len);
    grpc_slice_unref(s);
    return out;
}

uint8_t *rep__unary_response(rep__unary_t *u, size_t *len)
{
    return rep__bb_read(u->recv, len);
}

char *rep__status_details(grpc_slice details)
{
    return tb_strndup((const char *)GRPC_SLICE_START_PTR(details), GRPC_SLICE_LENGTH(details));
}

const char *rep__status_name(grpc_status_code c)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
        "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    };
    return (unsigned)c < TB_ARRAY_LEN(names) ? names[c] : "?";
}

/* gRPC's own log lines (connection errors, TLS handshakes...) in our format. */
static void grpc_log(gpr_log_func_args *a)
{
    tb_log_level_t lvl = a->severity == GPR_LOG_SEVERITY_ERROR ? TB_LOG_WARN : TB_LOG_DEBUG;
    if (!tb_log_enabled(lvl))
        return;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped = 0;
    if (lvl == TB_LOG_WARN && !tb_ratelimit(&rl, &skipped))
        return;
    tb_log(lvl, "grpc", TB_S("said", a->message), TB_S("at", a->file), TB_I("line", a->line),
           TB_U("suppressed", skipped));
}

void rep__grpc_log_setup(void)
{
    gpr_set_log_function(grpc_log);
    gpr_set_log_verbosity(tb_log_enabled(TB_LOG_DEBUG) ? GPR_LOG_SEVERITY_INFO : GPR_LOG_SEVERITY_ERROR);
}
