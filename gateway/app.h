/*
 * app.h: the process lifecycle on the event loop (internal to gateway/).
 *
 * Services (the MQTT listener, the log, the replicator bridge, the HTTP
 * endpoint) register a start step and a drain step. Start steps run in
 * registration order; on SIGTERM/SIGINT the drain steps run one after the
 * other in reverse order, each calling gw__app_drained() when it has
 * finished (a drain step may take several loop iterations: it waits for
 * in-flight writes and acks). A second signal, or shutdown_timeout_ms,
 * forces the exit; the WAL's record framing makes that safe.
 */
#ifndef GW_APP_H
#define GW_APP_H

#include <stdbool.h>
#include <uv.h>

#include "config/config.h"

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

void gw__app_init(gw__app_t *app, const cfg_t *cfg);
void gw__app_add(gw__app_t *app, const gw__service_t *svc);
/* Starts every service, runs the loop until the drain finishes. Returns the exit code. */
int gw__app_run(gw__app_t *app);
/* Starts the orderly shutdown (as SIGTERM does). */
void gw__app_shutdown(gw__app_t *app, const char *why);
void gw__app_drained(gw__app_t *app);

#endif
