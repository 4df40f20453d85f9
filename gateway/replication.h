/*
 * replication.h: the replicator as a gateway service, and the loop's side
 * of it (internal to gateway/). Prefix gw_repl_.
 *
 * The replicator thread (replicator/) talks to the cluster; this file
 * turns what it reports into topic state on the loop thread, which owns
 * the validators: registration results and heartbeat changes carry
 * ResolvedSchemas that are compiled here through an sch_registry (once
 * per fingerprint) and swapped into broker_topic_t between two PUBLISHes. A
 * topic is ready when its log is open, it is registered, and its schema is
 * resolved and compiled (or it has none); publish.c refuses messages for an
 * `enforce` mapping whose topic has no validator, so a schema that did not
 * compile fails closed. It also watches for stalls and logs them (once
 * when one starts, once when it ends).
 */
#ifndef GW_REPLICATION_H
#define GW_REPLICATION_H

#include "gateway/app.h"
#include "gateway/broker/broker_int.h"
#include "replicator/replicator.h"

typedef struct gw_repl gw_repl_t;

gw_repl_t *gw_repl_new(void);
void gw_repl_free(gw_repl_t *g);
/* The server whose topics it feeds; set before the service starts. */
void gw_repl_set_server(gw_repl_t *g, broker_t *srv);
/* NULL before start and after the drain. */
rep_t *gw_repl_rep(gw_repl_t *g);
/* Topic i's replication stats: live while the replicator runs, its last
 * ones after the drain (not stalled), zeros before it started. */
void gw_repl_topic_stats(gw_repl_t *g, size_t i, rep_topic_stats_t *out /* OUT */);

/* As a gw__service_t (arg: the gw_repl_t): between the log and the listener. */
int gw_repl_start(gw__app_t *app, void *arg);
void gw_repl_drain(gw__app_t *app, void *arg);

/* Readiness of one topic as the loop sees it. */
bool gw_repl_topic_ready(const broker_topic_t *t);

#endif
