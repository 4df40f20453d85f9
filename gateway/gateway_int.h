/*
 * gateway_int.h: what the files of gateway/ itself share (the process:
 * lifecycle, boot, the replication glue, reload, metrics collection).
 * Prefix gw__. Nothing outside gateway/ includes it; the subfolders never
 * include anything of gateway/ (dependencies run from here down).
 *
 * ---- the lifecycle (app.c) ----
 *
 * Services (the MQTT listener, the log, the replicator bridge, the HTTP
 * endpoint) register a start step and a drain step. Start steps run in
 * registration order; on SIGTERM/SIGINT the drain steps run one after the
 * other in reverse order, each calling gw__app_drained() when it has
 * finished (a drain step may take several loop iterations: it waits for
 * in-flight writes and acks). A second signal, or shutdown_timeout_ms,
 * forces the exit; the WAL's record framing makes that safe.
 */
#ifndef GW_GATEWAY_INT_H
#define GW_GATEWAY_INT_H

#include <stdbool.h>
#include <stdio.h>
#include <uv.h>

#include "config/config.h"
#include "gateway/broker/broker.h"
#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"
#include "gateway/tls/tls.h"
#include "replicator/replicator.h"
#include "wal/wal.h"

typedef struct gw__app gw__app_t;

typedef struct gw__service {
    const char *name;
    int (*start)(gw__app_t *app, void *arg);   /* 0 or negative error: the boot fails */
    void (*drain)(gw__app_t *app, void *arg);  /* must call gw__app_drained(app) once done;
                                                  also called after its own start failed */
    void *arg;
} gw__service_t;

struct gw__app {
    uv_loop_t loop;
    const cfg_t *cfg;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t force_timer;
    gw__service_t services[16];
    int nservices;
    int draining;        /* index+1 of the service being drained, 0 = running */
    void (*reload)(gw__app_t *app, void *arg); /* SIGHUP; NULL: logged and ignored */
    void *reload_arg;
    bool stopping;
    int exit_code;
};

/* 0, or -errno from uv_loop_init (e.g. EMFILE): then there is nothing to close. */
int gw__app_init(gw__app_t *app, const cfg_t *cfg);
void gw__app_add(gw__app_t *app, const gw__service_t *svc);
/* Starts every service, runs the loop until the drain finishes. Returns the exit code. */
int gw__app_run(gw__app_t *app);
/* Starts the orderly shutdown (as SIGTERM does). */
void gw__app_shutdown(gw__app_t *app, const char *why);
void gw__app_drained(gw__app_t *app);

/* ---- the replicator as a service, and the loop's side of it (replication.c) ----
 *
 * The replicator thread (replicator/) talks to the cluster; this turns what
 * it reports into topic state on the loop thread, which owns the
 * validators: registration results and heartbeat changes carry
 * ResolvedSchemas that are compiled here through an sch_registry (once per
 * fingerprint) and swapped into broker_topic_t between two PUBLISHes. A
 * topic is ready when its log is open, it is registered, and its schema is
 * resolved and compiled (or it has none); the broker refuses messages for
 * an `enforce` mapping whose topic has no validator, so a schema that did
 * not compile fails closed. It also watches for stalls and logs them (once
 * when one starts, once when it ends). It drives the replication engine
 * (replicator.h: the outputs of the configuration, Danube the one kind
 * today), which hears of new records through broker_on_stored().
 */
typedef struct gw_repl gw_repl_t;

gw_repl_t *gw_repl_new(void);
void gw_repl_free(gw_repl_t *g);
/* The broker whose topics it feeds; set before the service starts. */
void gw_repl_set_broker(gw_repl_t *g, broker_t *b);
/* The log its outputs' cursors are in; set before the service starts. */
void gw_repl_set_wal(gw_repl_t *g, wal_t *w);
/* The replication engine: NULL before start and after the drain. */
rep_engine_t *gw_repl_engine(gw_repl_t *g);
/* Topic i's replication stats: live while the replicator runs, its last
 * ones after the drain (not stalled), zeros before it started. */
void gw_repl_topic_stats(gw_repl_t *g, size_t i, rep_topic_stats_t *out /* OUT */);
/* A reload linked slot id (broker_plan_commit): its lane in every output that
 * carries it, declared to the cluster (the outcome comes as its events);
 * mappings: the reload's configuration (the mqtt and sparkplug outputs' ${N}).
 * 0, or the engine's error in err (the topic is still logged). */
int gw_repl_topic_added(gw_repl_t *g, size_t id, const cfg_t *mappings, char *err, size_t errlen);
/* A reload changed slot id's schema subject (subject: its schema block was
 * reset) or max_age: the registry's compiled schema if it has one, and the
 * replicator told. */
void gw_repl_topic_changed(gw_repl_t *g, size_t id, bool subject);
/* A reload routed to slot id again (broker_plan_commit made it LIVE): a kept or
 * retired one gets its lanes back (gw__retire_revived). 0 or the engine's error in err. */
int gw_repl_topic_revived(gw_repl_t *g, size_t id, broker_topic_life_t before, const cfg_t *mappings, char *err,
                          size_t errlen);
/* After a reload's commit: retiring topics already drained go on at once. */
void gw_repl_retire_tick(gw_repl_t *g);
/* wal.retire from a reload. */
void gw_repl_set_retire(gw_repl_t *g, cfg_retire_t how);
/* As a gw__service_t (arg: the gw_repl_t): between the log and the listener. */
int gw_repl_start(gw__app_t *app, void *arg);
void gw_repl_drain(gw__app_t *app, void *arg);

/* ---- retire.c ----
 * Retiring a topic no mapping routes to once drained (RELOAD.md 4; the file
 * header says how): RETIRING -> REMOVING (its outputs release it) -> RETIRED
 * (wal_topic_retire on the pool) or KEPT (wal.retire: keep). Loop thread.
 */
typedef struct gw__retire gw__retire_t;
typedef struct gw__retire_counts {
    uint64_t retired, kept, failed; /* since start: retirements done, topics kept, refused by the log */
    size_t retiring;                /* now: RETIRING or REMOVING */
    size_t retired_now, kept_now;   /* now: slots RETIRED, KEPT */
} gw__retire_counts_t;
/* job_done(repl) after each wal_topic_retire finished (the drain waits for gw__retire_busy). */
gw__retire_t *gw__retire_new(uv_loop_t *loop, broker_t *b, cfg_retire_t how, size_t cap,
                             void (*job_done)(void *arg), gw_repl_t *repl);
void gw__retire_free(gw__retire_t *rt);
void gw__retire_set_mode(gw__retire_t *rt, cfg_retire_t how);
/* The drain began: nothing new is started (a topic left REMOVING is a boot orphan). */
void gw__retire_stop(gw__retire_t *rt);
bool gw__retire_busy(const gw__retire_t *rt);
void gw__retire_counts(const gw__retire_t *rt, gw__retire_counts_t *out /* OUT */);
/* Pure: nothing of t waits in the broker or its log (ws: its wal_topic_stats). */
bool gw__retire_drained(const broker_topic_t *t, const wal_topic_stats_t *ws);
/* Looks at every RETIRING slot (drained: its outputs are told to release it). */
void gw__retire_tick(gw__retire_t *rt, rep_engine_t *e);
/* REP_EV_TOPIC_RELEASED of slot id: the last one starts wal_topic_retire. */
void gw__retire_released(gw__retire_t *rt, size_t id);
/* The admin API's retire (how REMOVE: a drained RETIRING or a KEPT slot) or
 * forget (FORGET: a RETIRING or KEPT one, whatever its backlog): started
 * (0; it ends RETIRED, or back where it was), TB_EINVALID (not RETIRING nor
 * KEPT), TB_EBUSY (REMOVE and not drained), -EAGAIN (the broker still
 * holds a batch of it: a moment), TB_ECLOSED (stopping, no engine). */
int gw__retire_force(gw__retire_t *rt, rep_engine_t *e, size_t id, wal_retire_t how);
/* Was slot id RETIRED by a forget (its log's backlog deleted)? */
bool gw__retire_forgot(const gw__retire_t *rt, size_t id);
/* gw__retire_force on the glue's (TB_ECLOSED before it started). */
int gw_repl_retire_force(gw_repl_t *g, size_t id, wal_retire_t how);
bool gw_repl_topic_forgot(gw_repl_t *g, size_t id);
/* A reload routes to slot id again; before: its life until then. */
/* mappings: the reload's configuration (an mqtt output's template may need its rules). */
int gw__retire_revived(gw__retire_t *rt, rep_engine_t *e, size_t id, broker_topic_life_t before,
                       const cfg_t *mappings, char *err, size_t errlen);
/* The replication glue's (zeros before it started). */
void gw_repl_retire_counts(gw_repl_t *g, gw__retire_counts_t *out /* OUT */);

/* ---- the running process (run.c) and what it reports (collect.c) ---- */

typedef struct gw__run {
    gw__app_t *app;
    broker_t *broker;
    wal_t *wal;
    gw_repl_t *repl;
    metrics_t *metrics;
    int *metric_topic;           /* broker topic index -> metrics topic label index (-1: none) */
    /* engine output index (outputs[] order, then the instances reloads started) -> output label index */
    int metric_output[METRICS_MAX_OUTPUTS + REP_RUNTIME_OUTPUTS];
    size_t nmetric_outputs;
    int metric_listener[METRICS_MAX_LISTENERS]; /* broker listener index -> metrics listener label index */
    size_t nmetric_listeners;    /* listeners labelled (once listening) */
    uint64_t fsync_seen[WAL_FSYNC_HIST_BUCKETS]; /* WAL fsync samples already in the registry */
    unsigned http_conns;         /* the HTTP endpoint's connection cap (for the descriptor budget) */
    http_service_t *http;        /* the operator's endpoint (reload sets its token) */
    struct gw__reload_state *reload; /* the reloads' state (reload.c), for /admin */
    bool topics_open;            /* broker_init succeeded; until the log closes */
    bool booted;
    int drain;                   /* POST /admin/drain: 0 running, 1 closing connections, 2 replicating the rest */
    bool drain_logged;           /* "drained" was logged */
    struct gw__dlq_wait *dlq_waits; /* dead-letter replays waiting for their copies (dlq.c) */
    uint64_t dlq_seq;
} gw__run_t;

/* ---- admin.c ----
 * The admin API's ops (http_admin_ops_t) over the running process: reload
 * (gw__reload), the last answer, the configuration in force. */
void gw__admin_ops(gw__run_t *r, http_admin_ops_t *out /* OUT */);
/* admin_drain.c: the ops of pause/resume and drain (RELOAD.md 6.3, 6.4), added to out. */
void gw__admin_drain_ops(gw__run_t *r, http_admin_ops_t *out /* IN/OUT */);
/* dlq.c: the dead-letter log ops of the admin API (arg: the gw__run_t). */
void gw__dlq_ops(http_admin_ops_t *ops);
/* The replays still waiting, freed (the run's end). */
void gw__dlq_free(gw__run_t *r);
/* The configuration in force as YAML (cfg_print, secrets masked): the boot
 * file with the keys the last applied reload put in force. */
void gw__config_in_force(const cfg_t *boot, const struct gw__reload_state *st, FILE *out);

/* The metrics collector (arg: the gw__run_t), run at every scrape. */
void gw__collect(void *arg, metrics_t *m);
/* What /readyz, /stats and the topic table report that is not a metric. */
void gw__provider(gw__run_t *r, http_provider_t *out /* OUT */);

/* ---- fdbudget.c ----
 * The MQTT sockets the descriptor limit leaves once the log (ntopics of
 * them), the replicator and the HTTP endpoint (http_conns) have theirs:
 * raises the soft limit toward the hard one if that helps, else lowers
 * *max_connections (logged). 0, or TB_ECONFIG when no client would fit.
 */
int gw__fd_budget(const cfg_t *cfg, size_t ntopics, unsigned http_conns, uint32_t *max_connections /* OUT */);

/* ---- auth_files.c ----
 * The HTTP endpoint's TLS context from cfg's http.tls: 0 and *out (NULL
 * when http.tls is not set), or TB_ECONFIG with err = "http.tls.KEY: FILE:
 * why". Any thread. */
int gw__http_tls_load(const cfg_t *cfg, tls_ctx_t **out /* OUT */, char *err, size_t errlen);

/* ---- reload.c ----
 * SIGHUP and POST /admin/reload. Re-reads the configuration file; applies
 * what can change at run time (log level and format, each mapping's
 * validation_policy, auth.* with the password and ACL files read again,
 * the HTTP tokens, the TLS certificates of the listeners and of the HTTP
 * endpoint) and names every other changed key as needing a restart, by the
 * key table's reload class (cfg_reload_class). An invalid file, or one
 * gw_check refuses (as `tributary check` would), changes nothing. b may be
 * NULL (before the log service started). Returns the answer (a new
 * reference; RELOAD.md 3.3: result applied|unchanged|refused, source,
 * duration_ms, error {file, line, column, key, message, text} or null,
 * applied, restart_needed, file_valid), also kept in st (NULL: none kept).
 */
typedef struct gw__reload_state {
    cfg_t *in_force;       /* the file of the last reload that applied (NULL: none): its keys in_force_keys are */
    json_t *in_force_keys; /* the array "applied" of that reload */
    json_t *last;          /* the last answer (GET /admin/reload) */
    bool file_valid;       /* the last reload did not refuse the file */
    struct gw__run *run;   /* the running process (metrics labels and the replicator for new topics) */
} gw__reload_state_t;
json_t *gw__reload(broker_t *b, http_service_t *http, const cfg_t *running, gw__reload_state_t *st);
void gw__reload_state_free(gw__reload_state_t *st);
/* Whether reload.c has an applier for the key cfg_diff reports (its paths:
 * "mqtt.listeners[0].tls.ciphers"). Every key of reload class LIVE has
 * one and no other key has (tests/unit/gateway/test_reload_keys.c). */
bool gw__reload_applies(const char *key);

/* ---- watch.c ----
 * reload.watch_ms: every period, on the libuv pool, the configuration
 * file's bytes and the stat() of the files it names (those a reload reads
 * again); a difference calls app->reload, as SIGHUP does. Off (a service
 * that does nothing) when watch_ms is 0 or there is no file. As a
 * gw__service_t (arg: the gw__watch_t); free it after gw__app_run.
 */
typedef struct gw__watch gw__watch_t;

gw__watch_t *gw__watch_new(gw__app_t *app, const cfg_t *cfg);
void gw__watch_free(gw__watch_t *w);
int gw__watch_start(gw__app_t *app, void *arg);
void gw__watch_drain(gw__app_t *app, void *arg);

#endif
