/*
 * app.c: start services in order, drain them in reverse on SIGTERM/SIGINT.
 * See gateway_int.h for the contract. SIGHUP calls the reload hook (reload.c).
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void signal_cb(uv_signal_t *h, int signum);

int gw__app_init(gw__app_t *app, const cfg_t *cfg)
{
    memset(app, 0, sizeof *app);
    app->cfg = cfg;
    int rc = uv_loop_init(&app->loop);
    if (rc < 0)
        return rc;
    app->loop.data = app;
    /* the signals are ours from here, before "starting" is logged: a SIGTERM
     * during the boot is a drain once the loop runs, never the default death
     * (it was: exit -15 when it came between the log line and the loop) */
    signal(SIGPIPE, SIG_IGN);
    uv_signal_init(&app->loop, &app->sigterm);
    uv_signal_init(&app->loop, &app->sigint);
    uv_signal_init(&app->loop, &app->sighup);
    uv_timer_init(&app->loop, &app->force_timer);
    app->sigterm.data = app->sigint.data = app->sighup.data = app->force_timer.data = app;
    uv_signal_start(&app->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&app->sigint, signal_cb, SIGINT);
    uv_signal_start(&app->sighup, signal_cb, SIGHUP);
    return 0;
}

void gw__app_add(gw__app_t *app, const gw__service_t *svc)
{
    if (app->nservices == (int)TB_ARRAY_LEN(app->services))
        abort();
    app->services[app->nservices++] = *svc;
}

static void close_cb(uv_handle_t *h)
{
    (void)h;
}

static void finish(gw__app_t *app)
{
    uv_signal_stop(&app->sigterm);
    uv_signal_stop(&app->sigint);
    uv_signal_stop(&app->sighup);
    uv_close((uv_handle_t *)&app->sigterm, close_cb);
    uv_close((uv_handle_t *)&app->sigint, close_cb);
    uv_close((uv_handle_t *)&app->sighup, close_cb);
    /* the watchdog stays armed (unreferenced) until the loop has really
     * ended: a handle a peer keeps open past the drain still meets it */
}

static void drain_next(gw__app_t *app)
{
    while (app->draining > 1) {
        app->draining--;
        gw__service_t *s = &app->services[app->draining - 1];
        if (s->drain) {
            tb_info("draining", TB_S("service", s->name));
            s->drain(app, s->arg);
            return;
        }
    }
    app->draining = 0;
    tb_info("shutdown complete");
    finish(app);
}

void gw__app_drained(gw__app_t *app)
{
    drain_next(app);
}

static void force_cb(uv_timer_t *t)
{
    gw__app_t *app = t->data;
    tb_error("shutdown took too long; exiting without finishing the drain",
             TB_U("timeout_ms", app->cfg->shutdown_timeout_ms));
    _exit(app->exit_code ? app->exit_code : GW_EXIT_FAILURE);
}

void gw__app_shutdown(gw__app_t *app, const char *why)
{
    if (app->stopping)
        return;
    app->stopping = true;
    tb_info("shutdown started", TB_S("reason", why));
    uv_timer_start(&app->force_timer, force_cb, app->cfg->shutdown_timeout_ms, 0);
    uv_unref((uv_handle_t *)&app->force_timer);
    app->draining = app->nservices + 1;
    drain_next(app);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    gw__app_t *app = h->data;
    if (signum == SIGHUP) {
        if (app->reload && !app->stopping)
            app->reload(app, app->reload_arg);
        else
            tb_info("SIGHUP received: nothing to reload");
        return;
    }
    if (app->stopping) {
        tb_warn("second signal: exiting now", TB_S("signal", strsignal(signum)));
        _exit(GW_EXIT_FAILURE);
    }
    gw__app_shutdown(app, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

int gw__app_run(gw__app_t *app)
{
    for (int i = 0; i < app->nservices; i++) {
        gw__service_t *s = &app->services[i];
        int rc = s->start ? s->start(app, s->arg) : 0;
        if (rc < 0) {
            tb_error("start failed", TB_S("service", s->name), TB_ERR(rc));
            app->exit_code = GW_EXIT_FAILURE;
            /* drain what did start, in reverse; the failed one's drain
             * step undoes its partial start */
            app->nservices = i + 1;
            app->stopping = true;
            app->draining = app->nservices + 1;
            drain_next(app);
            break;
        }
        tb_debug("started", TB_S("service", s->name));
    }
    uv_run(&app->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&app->force_timer, close_cb);
    uv_run(&app->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&app->loop);
    if (rc != 0)
        tb_warn("event loop closed with handles still open", TB_S("error", uv_strerror(rc)));
    return app->exit_code;
}
