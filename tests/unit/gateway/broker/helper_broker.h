/*
 * helper_broker.h: a broker on a loop of the test's own, over a real log
 * in a fresh directory, with connections on a fake transport (the seam of
 * broker_int.h) so a test can feed bytes, read what the broker wrote, and
 * make the socket fail, without a network.
 *
 * Everything runs on the test's thread: hb_run_until() turns the loop
 * until a condition holds or a deadline passes (a 5 ms timer bounds each
 * turn), never sleeping in place of a condition.
 */
#ifndef TEST_HELPER_BROKER_H
#define TEST_HELPER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "gateway/broker/broker_int.h"

typedef struct hb {
    uv_loop_t loop;
    uv_timer_t tick;   /* bounds each loop turn of hb_run_until */
    cfg_t *cfg;
    wal_t *wal;
    broker_t *b;
    char dir[64];
    char logpath[96];  /* what the broker logged (hb_log_has) */
    int logfd;
    struct fake *fakes[8]; /* fake_conn's, released before hb_close ends */
    int nfakes;
} hb_t;

/* A broker over one mapping t/# -> /edge1/t, the log in a new directory. */
void hb_open(hb_t *h);
/* The same with more keys under mqtt: (YAML lines indented by two spaces). */
void hb_open_with(hb_t *h, const char *mqtt_extra);
/* The same with mappings of the test's own (YAML list items indented by
 * four spaces, each "- {...}"; the edge is edge1); returns broker_init's
 * rc and message. hb_close closes it whatever the rc. */
int hb_open_mappings(hb_t *h, const char *mqtt_extra, const char *mappings, char *err, size_t errlen);
/* When set, changes the log's options before hb_open* opens it (small
 * segments and bounds, for a test at a disk bound). */
extern void (*hb_wal_tune)(wal_opts_t *o);
/* Drains (waiting until every fake connection was released), closes the log and the broker, asserts the loop closed with nothing left, removes the directory. */
void hb_close(hb_t *h);
/* Turns the loop until cond(arg) or timeout_ms; returns the last cond. */
bool hb_run_until(hb_t *h, bool (*cond)(void *arg), void *arg, int timeout_ms);
/* true when the broker's log output so far contains s. */
bool hb_log_has(hb_t *h, const char *s);

/* ---- the fake transport ---- */
typedef struct fake {
    tb_buf_t out;      /* every byte the broker wrote */
    int fail_writes;   /* 0, or the error the next writes return */
    bool reading;
    bool closed;       /* close was called */
    bool released;     /* broker__conn_released ran (from a later loop turn) */
    uv_timer_t release;
    broker_conn_t *c;
} fake_t;

/* A started connection of h's broker on fake transport f (zeroed by the call). */
broker_conn_t *fake_conn(hb_t *h, fake_t *f);
/* Hands n bytes to the connection as the transport would. */
void fake_send(fake_t *f, const void *p, size_t n);
/* Frees what f collected (its timer is closed by hb_close). */
void fake_free(fake_t *f);

#endif
