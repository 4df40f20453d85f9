/*
 * rep_stream.c: one ReplicateData call, the bidi stream of a topic.
 *
 * The call is driven exactly as GRPC-NOTES.md found works with gRPC 1.51:
 *   1. RECV_STATUS_ON_CLIENT in its own batch, first: however the call
 *      ends (server status, our cancel, a broken connection), this tag
 *      comes back, so the end is always learnt;
 *   2. SEND_INITIAL_METADATA (the bearer token);
 *   3. RECV_INITIAL_METADATA + RECV_MESSAGE, then RECV_MESSAGE re-armed
 *      after each ack;
 *   4. one SEND_MESSAGE per batch, the next started when the previous
 *      one's tag returns: only one send and one receive may be pending
 *      per call (a second is GRPC_CALL_ERROR_TOO_MANY_OPERATIONS). Several
 *      batches are in flight because a send completes long before its ack.
 * A RECV_MESSAGE that completes with no buffer is the end of the stream;
 * the status tag follows. The stream is over when the status is in AND
 * every other tag is back; only then is the call unreferenced and the topic
 * told (rep__topic_on_stream_end), which decides what comes next.
 *
 * Batches are sent without a copy: the encoded buffer becomes a
 * refcounted slice the first time it is sent (grpc_slice_new), each send
 * wraps it in a byte buffer that takes its own reference, and the batch
 * keeps one reference until it is acked, so a resend on the next stream
 * reuses the same bytes (same boundaries, same batch_last_offset).
 */
#include "replicator/rep_int.h"
#include "proto/EdgeReplicator.pb-c.h"

#include <stdlib.h>
#include <string.h>

#define REPLICATE_METHOD "/danube.edge.EdgeReplicatorService/ReplicateData"

struct rep__stream {
    rep__topic_t *t;
    grpc_call *call;
    rep__op_t status_op, meta_op, recv_op, send_op, close_op;
    int pending;                 /* our tags not yet returned */
    bool status_done;
    bool send_busy;
    bool cancelled;
    bool closing;                /* WritesDone sent */
    bool eos;                    /* the server's side of the stream ended */
    rep_retry_t why;             /* why we cancelled */
    grpc_byte_buffer *send_bb, *recv_bb;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
};

static void start(rep__stream_t *s, grpc_op *ops, size_t n, rep__op_t *tag)
{
    rep_t *r = s->t->r;
    grpc_call_error e = grpc_call_start_batch(s->call, ops, n, tag, NULL);
    if (e != GRPC_CALL_OK) {
        tb_error("replicator: grpc refused a stream operation", REP__LOG_TOPIC(s->t), TB_I("grpc_call_error", e));
        abort(); /* one send and one receive at a time is our invariant: a bug if broken */
    }
    s->pending++;
    r->outstanding++;
}

static void arm_recv(rep__stream_t *s, bool with_initial_md)
{
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (with_initial_md) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &s->recv_bb;
    start(s, ops, n, &s->recv_op);
}

/* Every tag is back and the status is in: free the call, tell the topic. */
static void maybe_finish(rep_t *r, rep__stream_t *s)
{
    if (!s->status_done || s->pending > 0)
        return;
    rep__topic_t *t = s->t;
    rep_retry_t why = s->why;
    if (!s->cancelled)
        why = s->status == GRPC_STATUS_UNAVAILABLE ? REP_RETRY_UNAVAILABLE
              : s->status == GRPC_STATUS_OK        ? REP_RETRY_PROTOCOL
                                                   : REP_RETRY_STATUS;
    grpc_status_code st = s->status;
    char *details = rep__status_details(s->details);
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_slice_unref(s->details);
    grpc_call_unref(s->call);
    t->stream = NULL;
    free(s);
    rep__topic_on_stream_end(r, t, why, st, details);
    free(details);
}

static void status_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)ok;
    rep__stream_t *s = TB_CONTAINER_OF(op, rep__stream_t, status_op);
    r->outstanding--;
    s->pending--;
    s->status_done = true;
    maybe_finish(r, s);
}

static void meta_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)ok;
    rep__stream_t *s = TB_CONTAINER_OF(op, rep__stream_t, meta_op);
    r->outstanding--;
    s->pending--;
    maybe_finish(r, s);
}

static void close_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)ok;
    rep__stream_t *s = TB_CONTAINER_OF(op, rep__stream_t, close_op);
    r->outstanding--;
    s->pending--;
    maybe_finish(r, s);
}

static void send_cb(rep_t *r, rep__op_t *op, bool ok)
{
    rep__stream_t *s = TB_CONTAINER_OF(op, rep__stream_t, send_op);
    r->outstanding--;
    s->pending--;
    s->send_busy = false;
    grpc_byte_buffer_destroy(s->send_bb);
    s->send_bb = NULL;
    if (ok && !s->cancelled && !s->status_done)
        rep__topic_on_sent(r, s->t);
    maybe_finish(r, s);
}

static void recv_cb(rep_t *r, rep__op_t *op, bool ok)
{
    rep__stream_t *s = TB_CONTAINER_OF(op, rep__stream_t, recv_op);
    r->outstanding--;
    s->pending--;
    if (!ok || !s->recv_bb) {
        s->eos = true; /* the status tag tells why */
        maybe_finish(r, s);
        return;
    }
    size_t len;
    uint8_t *buf = rep__bb_read(s->recv_bb, &len);
    grpc_byte_buffer_destroy(s->recv_bb);
    s->recv_bb = NULL;
    Danube__Edge__ReplicateAck *ack = danube__edge__replicate_ack__unpack(NULL, len, buf);
    free(buf);
    if (!ack) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("replicator: the cluster sent an ack that does not parse; rebuilding the stream",
                    REP__LOG_TOPIC(s->t), TB_U("suppressed", skipped));
        rep__stream_cancel(s, REP_RETRY_PROTOCOL);
        maybe_finish(r, s);
        return;
    }
    uint64_t off = ack->acked_offset;
    danube__edge__replicate_ack__free_unpacked(ack, NULL);
    if (!s->cancelled)
        arm_recv(s, false);
    rep__topic_on_ack(r, s->t, off);
    /* the topic may have cancelled us; its pending tags keep s alive */
}

rep__stream_t *rep__stream_open(rep_t *r, rep__topic_t *t)
{
    rep__stream_t *s = tb_calloc(1, sizeof *s);
    s->t = t;
    s->status_op.cb = status_cb;
    s->meta_op.cb = meta_cb;
    s->recv_op.cb = recv_cb;
    s->send_op.cb = send_cb;
    s->close_op.cb = close_cb;
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->details = grpc_empty_slice();
    s->call = grpc_channel_create_call(t->chan->ch, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq,
                                       grpc_slice_from_static_string(REPLICATE_METHOD), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &s->trail_md;
    op.data.recv_status_on_client.status = &s->status;
    op.data.recv_status_on_client.status_details = &s->details;
    start(s, &op, 1, &s->status_op);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    op.data.send_initial_metadata.metadata = rep__call_md(r, &op.data.send_initial_metadata.count);
    start(s, &op, 1, &s->meta_op);
    arm_recv(s, true);
    return s;
}

bool rep__stream_send_busy(const rep__stream_t *s)
{
    return s->send_busy || s->cancelled || s->closing || s->status_done;
}

void rep__stream_send(rep__stream_t *s, rep__batch_t *b)
{
    if (!b->wire) {
        grpc_slice *sl = tb_malloc(sizeof *sl);
        *sl = grpc_slice_new(b->buf, b->len, free);
        b->buf = NULL;
        b->wire = sl;
    }
    s->send_bb = grpc_raw_byte_buffer_create(b->wire, 1);
    s->send_busy = true;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->send_bb;
    start(s, &op, 1, &s->send_op);
}

void rep__stream_close_send(rep__stream_t *s)
{
    if (s->closing || s->cancelled || s->send_busy)
        return;
    s->closing = true;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    start(s, &op, 1, &s->close_op);
}

void rep__stream_cancel(rep__stream_t *s, rep_retry_t why)
{
    if (s->cancelled)
        return;
    s->cancelled = true;
    s->why = why;
    grpc_call_cancel(s->call, NULL);
}

void rep__batch_release(rep__batch_t *b)
{
    if (b->wire) {
        grpc_slice_unref(*(grpc_slice *)b->wire);
        free(b->wire);
        b->wire = NULL;
    }
    free(b->buf);
    b->buf = NULL;
}
