/* bench-lib: tb_proto tb_base PkgConfig::GRPC */
/*
 * bench_sink.c: a ReplicateData sink in C, to measure the replicator rather
 * than the Python mock cluster (which tops out near one core at ~380,000
 * messages/s in count mode: docs/MOCK-CLUSTER.md, docs/REPLICATION.md).
 *
 *   bench_sink [--port P] [--expect N]
 *
 * Serves danube.edge.EdgeReplicatorService/ReplicateData only (every other
 * method: UNIMPLEMENTED); the Python mock keeps answering RegisterEdge,
 * heartbeats and TopicLookup, and its lookup answer (`--lookup connect
 * --lookup-url http://127.0.0.1:P`) sends the gateway's streams here.
 * Like the cluster: each batch is decoded whole with protobuf-c (so a batch
 * the real decoder would refuse is counted in `bad`), one dedup marker per
 * topic (a batch at or below it is acked, not counted), one ack per
 * non-empty batch echoing batch_last_offset, acks sent one SEND_MESSAGE at a
 * time in order. No auth, no storage.
 *
 * Prints "bench-sink listening port=P" when ready. With --expect N it
 * prints "stored=N first_ms=.. last_ms=.. rate=.. bad=.." and exits 0 once
 * N messages are stored (times from tb_mono_ms(): the span between the
 * first stored batch and the N-th message). SIGTERM/SIGINT print the same
 * and exit. One thread, one completion queue, a small state machine per call.
 */
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/byte_buffer_reader.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "proto/EdgeReplicator.pb-c.h"

#define METHOD "/danube.edge.EdgeReplicatorService/ReplicateData"

typedef enum { T_NEW, T_CLOSE, T_META, T_RECV, T_SEND, T_STATUS } tagkind_t;

typedef struct call call_t;
typedef struct tag {
    tagkind_t kind;
    call_t *c;
} tag_t;

typedef struct ack {
    struct ack *next;
    uint8_t *buf;
    size_t len;
} ack_t;

struct call {
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    tag_t t_new, t_close, t_meta, t_recv, t_send, t_status;
    int pending;
    int cancelled;
    bool replicate, eof, status_sent, send_busy;
    grpc_byte_buffer *recv, *send;
    ack_t *acks, *acks_tail;
};

typedef struct marker {
    struct marker *next;
    char *topic;
    uint64_t last;
} marker_t;

static grpc_server *g_server;
static grpc_completion_queue *g_cq;
static marker_t *g_markers;
static uint64_t g_stored, g_batches, g_dups, g_bad, g_expect, g_first_ms, g_last_ms;
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void start(call_t *c, grpc_op *ops, size_t n, tag_t *t)
{
    if (grpc_call_start_batch(c->call, ops, n, t, NULL) != GRPC_CALL_OK)
        abort();
    c->pending++;
}

static void request_call(void)
{
    call_t *c = tb_calloc(1, sizeof *c);
    c->t_new = (tag_t){ T_NEW, c };
    c->t_close = (tag_t){ T_CLOSE, c };
    c->t_meta = (tag_t){ T_META, c };
    c->t_recv = (tag_t){ T_RECV, c };
    c->t_send = (tag_t){ T_SEND, c };
    c->t_status = (tag_t){ T_STATUS, c };
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_call(g_server, &c->call, &c->details, &c->md, g_cq, g_cq, &c->t_new) != GRPC_CALL_OK)
        abort();
}

static void send_status(call_t *c, grpc_status_code code)
{
    if (c->status_sent)
        return;
    c->status_sent = true;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = code;
    start(c, &op, 1, &c->t_status);
}

static void arm_recv(call_t *c)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv;
    start(c, &op, 1, &c->t_recv);
}

static void send_next_ack(call_t *c)
{
    if (c->send_busy || c->cancelled)
        return;
    ack_t *a = c->acks;
    if (!a) {
        if (c->eof)
            send_status(c, GRPC_STATUS_OK);
        return;
    }
    c->acks = a->next;
    if (!c->acks)
        c->acks_tail = NULL;
    grpc_slice s = grpc_slice_new(a->buf, a->len, free);
    free(a);
    c->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    c->send_busy = true;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = c->send;
    start(c, &op, 1, &c->t_send);
}

static marker_t *marker(const char *topic)
{
    for (marker_t *m = g_markers; m; m = m->next)
        if (strcmp(m->topic, topic) == 0)
            return m;
    marker_t *m = tb_calloc(1, sizeof *m);
    m->topic = tb_strdup(topic);
    m->next = g_markers;
    g_markers = m;
    return m;
}

/* One batch: decode, dedup, count, queue its ack. */
static void on_batch(call_t *c, const uint8_t *buf, size_t len)
{
    Danube__Edge__ReplicateBatch *b = danube__edge__replicate_batch__unpack(NULL, len, buf);
    if (!b) {
        g_bad++;
        return;
    }
    g_batches++;
    if (b->n_messages) {
        marker_t *m = marker(b->topic_name);
        if (m->last && b->batch_last_offset <= m->last) {
            g_dups += b->n_messages;
        } else {
            if (!g_stored)
                g_first_ms = tb_mono_ms();
            m->last = b->batch_last_offset;
            g_stored += b->n_messages;
            if (g_expect && g_stored >= g_expect && !g_last_ms)
                g_last_ms = tb_mono_ms();
        }
        Danube__Edge__ReplicateAck ack = DANUBE__EDGE__REPLICATE_ACK__INIT;
        ack.topic_name = b->topic_name;
        ack.acked_offset = b->batch_last_offset;
        ack_t *a = tb_calloc(1, sizeof *a);
        a->len = danube__edge__replicate_ack__get_packed_size(&ack);
        a->buf = tb_malloc(a->len ? a->len : 1);
        danube__edge__replicate_ack__pack(&ack, a->buf);
        if (c->acks_tail)
            c->acks_tail->next = a;
        else
            c->acks = a;
        c->acks_tail = a;
    }
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

static void maybe_free(call_t *c)
{
    if (c->pending)
        return;
    for (ack_t *a = c->acks, *n; a; a = n) {
        n = a->next;
        free(a->buf);
        free(a);
    }
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    grpc_call_unref(c->call);
    free(c);
}

static void on_new(call_t *c)
{
    request_call(); /* the next call */
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    start(c, &op, 1, &c->t_close);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    start(c, &op, 1, &c->t_meta);
    size_t n = GRPC_SLICE_LENGTH(c->details.method);
    c->replicate = n == strlen(METHOD) && memcmp(GRPC_SLICE_START_PTR(c->details.method), METHOD, n) == 0;
    if (c->replicate)
        arm_recv(c);
    else
        send_status(c, GRPC_STATUS_UNIMPLEMENTED);
}

static void on_recv(call_t *c, bool ok)
{
    if (!ok || !c->recv) {
        c->eof = true; /* the client half-closed (or the call is gone) */
        send_next_ack(c);
        return;
    }
    grpc_byte_buffer_reader rd;
    grpc_byte_buffer_reader_init(&rd, c->recv);
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    grpc_byte_buffer_destroy(c->recv);
    c->recv = NULL;
    on_batch(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
    grpc_slice_unref(s);
    arm_recv(c);
    send_next_ack(c);
}

static void report(void)
{
    double secs = g_last_ms > g_first_ms ? (double)(g_last_ms - g_first_ms) / 1000.0 : 0;
    printf("stored=%llu first_ms=%llu last_ms=%llu seconds=%.3f rate=%.0f batches=%llu duplicates=%llu bad=%llu\n",
           (unsigned long long)g_stored, (unsigned long long)g_first_ms, (unsigned long long)g_last_ms, secs,
           secs > 0 ? (double)g_stored / secs : 0, (unsigned long long)g_batches, (unsigned long long)g_dups,
           (unsigned long long)g_bad);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--expect") == 0)
            g_expect = strtoull(argv[i + 1], NULL, 10);
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    grpc_init();
    g_server = grpc_server_create(NULL, NULL);
    g_cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(g_server, g_cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    port = grpc_server_add_http2_port(g_server, addr, creds);
    grpc_server_credentials_release(creds);
    if (port <= 0) {
        fprintf(stderr, "bench_sink: cannot bind %s\n", addr);
        return 2;
    }
    grpc_server_start(g_server);
    request_call();
    printf("bench-sink listening port=%d\n", port);
    fflush(stdout);
    while (!g_stop && !(g_expect && g_last_ms)) {
        grpc_event ev = grpc_completion_queue_next(
            g_cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            continue; /* a deadline, to look at g_stop: a signal cannot wake the queue */
        tag_t *t = ev.tag;
        call_t *c = t->c;
        if (t->kind == T_NEW) {
            if (!ev.success)
                break;
            on_new(c);
            continue;
        }
        c->pending--;
        switch (t->kind) {
        case T_RECV: on_recv(c, ev.success); break;
        case T_SEND:
            grpc_byte_buffer_destroy(c->send);
            c->send = NULL;
            c->send_busy = false;
            send_next_ack(c);
            break;
        default: break; /* CLOSE, META, STATUS */
        }
        maybe_free(c);
    }
    report();
    /* shut down: cancel what is open, drain every tag, free */
    static int shutdown_tag;
    grpc_server_shutdown_and_notify(g_server, g_cq, &shutdown_tag);
    grpc_server_cancel_all_calls(g_server);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            g_cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5000, GPR_TIMESPAN)), NULL);
        if (ev.type != GRPC_OP_COMPLETE || ev.tag == &shutdown_tag)
            break;
        tag_t *t = ev.tag;
        if (t->kind == T_NEW) {
            if (ev.success) {
                grpc_call_cancel(t->c->call, NULL);
                grpc_call_unref(t->c->call);
            }
            grpc_call_details_destroy(&t->c->details);
            grpc_metadata_array_destroy(&t->c->md);
            free(t->c);
            continue;
        }
        t->c->pending--;
        if (t->kind == T_RECV && t->c->recv)
            grpc_byte_buffer_destroy(t->c->recv);
        if (t->kind == T_SEND && t->c->send)
            grpc_byte_buffer_destroy(t->c->send);
        t->c->recv = t->c->send = NULL;
        maybe_free(t->c);
    }
    grpc_server_destroy(g_server);
    grpc_completion_queue_shutdown(g_cq);
    while (grpc_completion_queue_next(g_cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(g_cq);
    for (marker_t *m = g_markers, *n; m; m = n) {
        n = m->next;
        free(m->topic);
        free(m);
    }
    grpc_shutdown();
    return 0;
}
