/*
 * helper_rep.h: what the replicator's unit tests share: a scratch WAL with
 * one topic that a test appends to synchronously (the completion is waited
 * for with a deadline, never a sleep), an encoder setup, and the decoding
 * of a built batch with protobuf-c's generated code, the independent
 * reading of our hand-written wire format.
 */
#ifndef HELPER_REP_H
#define HELPER_REP_H

#include <pthread.h>

#include "proto/EdgeReplicator.pb-c.h"
#include "replicator/rep_int.h"

typedef struct rt {
    char *dir;
    wal_t *w;
    wal_topic_t *t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    rep__enc_t enc;
} rt_t;

#define RT_TOPIC "/edge1/telemetry"
#define RT_PRODUCER "tributary-edge1"

/* A WAL under a fresh temp dir with topic RT_TOPIC; enc with batch_size 100, 1 MiB, 2 s window. */
void rt_open(rt_t *h);
/* The same with a small log (0: the default), so the bound deletes what a reader has not read. */
void rt_open_bounded(rt_t *h, uint64_t segment_bytes, uint64_t max_topic_bytes);
void rt_close(rt_t *h);
/* Closes the WAL cleanly and opens it again on the same directory (default
 * sizes, fsync never), h->t the reopened topic: for what a restart does. */
void rt_reopen(rt_t *h);

typedef struct rt_msg {
    const char *payload;     /* NUL-terminated unless payload_len is set */
    size_t payload_len;
    uint64_t publish_time_ms; /* 0: now */
    const char *const *attrs; /* key, value, key, value, ..., NULL */
    bool has_schema;
    uint64_t schema_id;
    uint32_t schema_version;
} rt_msg_t;

/* Appends one message and waits until it is durable. Returns its offset. */
uint64_t rt_append(rt_t *h, const rt_msg_t *m);
/* Appends n messages "m<i>" with payload_len bytes each (one batch). */
void rt_append_n(rt_t *h, uint32_t n, size_t payload_len);

/* A source reading RT_TOPIC from `from`. */
void rt_src(rt_t *h, rep__src_t *s, uint64_t from);

/* Decodes a finished batch; cr_asserts it parses. Free with danube__edge__replicate_batch__free_unpacked. */
Danube__Edge__ReplicateBatch *rt_decode(const rep__batch_t *b);
/* The attribute value of key in a decoded message, or NULL. */
const char *rt_attr(const Danube__StreamMessage *m, const char *key);

#endif
