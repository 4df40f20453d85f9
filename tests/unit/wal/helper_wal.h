/*
 * helper_wal.h: what most WAL tests need: a scratch directory, a WAL with
 * a notify callback that a test can wait on (deadline, no sleeps),
 * self-describing messages (each carries its sequence number, and every
 * other field derives from it, so any record read back can be checked
 * whole), and read-back helpers.
 */
#ifndef HELPER_WAL_H
#define HELPER_WAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "wal/wal.h"

typedef struct th {
    char *dir;          /* scratch directory (removed by th_cleanup) */
    char *wal_dir;      /* dir/wal */
    wal_opts_t o;
    wal_t *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wakes;
    wal_completion_t *done; /* every completion collected, in arrival order */
    size_t ndone, cap;
} th_t;

/* A scratch dir and small-log defaults (segment 4 KiB, bounds 1 MiB / 4 MiB). */
void th_init(th_t *h, wal_fsync_t mode);
/* Opens h->w with h->o (notify wired); returns wal_open's rc. */
int th_open(th_t *h);
/* Closes h->w (collecting the last completions); returns wal_close's rc. */
int th_close(th_t *h);
void th_cleanup(th_t *h);

/* Message number seq: payload of payload_len bytes derived from seq,
 * attribute "seq" = decimal seq, mqtt topic "dev/<seq % 7>", qos seq % 3,
 * retain on odd seq, time 1700000000000 + seq, schema (id seq, version 2)
 * on every 4th. */
typedef struct th_msgbuf {
    uint8_t payload[4096];
    char seqs[24];
    char topic[24];
    wal_attr_t attr;
    wal_msg_t m;
} th_msgbuf_t;
const wal_msg_t *th_msg(th_msgbuf_t *mb, uint64_t seq, size_t payload_len);

/* Submits one batch of n messages seq0 .. seq0+n-1 (user = (void*)seq0). */
void th_submit(th_t *h, wal_topic_t *t, uint64_t seq0, uint32_t n, size_t payload_len);
/* Collects the completions there are now (no waiting). */
void th_collect(th_t *h);
/* Waits (10 s deadline) until at least n completions were collected. */
bool th_wait(th_t *h, size_t n);
/* Polls cond(arg) every millisecond until true or 10 s pass: for state
 * that has no notification (a timer-driven sync). Returns the last value. */
bool th_wait_until(bool (*cond)(void *arg), void *arg);
/* Submits and waits for one batch; returns its completion rc. */
int th_append(th_t *h, wal_topic_t *t, uint64_t seq0, uint32_t n, size_t payload_len);

/* wal_topic_open(h->w, name), asserted. */
wal_topic_t *th_topic(th_t *h, const char *name);

/* `batches` th_appends of per_batch messages each, numbered from *seq on
 * (advanced); asserted, naming the topic and the batch. */
void th_fill(th_t *h, wal_topic_t *t, int batches, uint32_t per_batch, size_t payload_len, uint64_t *seq);

/* Checks that r is message seq (from its "seq" attribute) in every field.
 * Returns true and *seq when it is intact. */
bool th_record_ok(const wal_record_t *r, size_t payload_len, uint64_t *seq);

/* Reads t from `from` to the readable end; stores up to max seqs (from
 * th_record_ok) in out. Returns the number read, or -1 if a record was not
 * intact or the reader failed; *gaps counts WAL_GAP results. */
long th_read_all(wal_topic_t *t, uint64_t from, size_t payload_len, uint64_t *out, size_t max, int *gaps);

/* Runs body(fd, arg) in a forked child (body must not return: it ends in
 * _exit or a signal) and appends what the child writes to fd, as records
 * of rec_size bytes, to buf (cap records at most, *n counts them). Returns
 * the child's signal, or minus its exit status. */
int th_fork_life(void (*body)(int fd, void *arg), void *arg, void *buf, size_t rec_size, size_t cap, size_t *n);
/* A reader thread (pthread_create(..., th_follow, &f)): reads t from offset
 * 1 until want records were read or 20 s passed; in_order stays true while
 * each record is the next offset and message got (payload_len bytes). */
typedef struct th_follower {
    wal_topic_t *t;
    size_t payload_len;
    uint64_t want, got;
    bool in_order;
} th_follower_t;
void *th_follow(void *arg);
/* Files named *.seg in dir (a topic directory). */
int th_count_files(const char *dir, const char *suffix);
/* Path of a topic directory: h->wal_dir/<encoded name>. Caller frees. */
char *th_topic_dir(th_t *h, const char *encoded);
/* Size of a file, or -1. */
long th_file_size(const char *path);
/* rm -rf */
void th_rmrf(const char *path);

#endif
