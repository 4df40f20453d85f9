/* fuzz-lib: tb_http */
/*
 * fuzz_http_serve.c: a request from anyone who can reach the HTTP port,
 * through the parser and on to the endpoints' handlers, the way the
 * listener hands it over (http_service_answer): /, /table, /stats/history
 * (the operator's page), /stats, /metrics, the probes, unknown paths.
 * fuzz_http_request fuzzes the parser alone and stays pure (base only);
 * this one links the whole service, over a registry with two topics whose
 * counters and sample ring the input moves. The first byte picks: whether a
 * token is asked for (bit 0; the input may carry it: "Bearer tok"),
 * whether a sample is taken first (bit 1) and whether the admin API has a
 * token (bit 2: "Bearer admintok"; without one it serves loopback peers
 * only, and a request without a connection is none: 403). The admin ops
 * are stand-ins that answer a fixed reload document and a YAML line (and
 * pause/resume, drain: /admin/topics/NS/T/VERB, /admin/drain?wait_ms=N). Checks what the server relies
 * on: a status it can send, and a body for every answer but 204.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/base.h"
#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"

static uv_loop_t loop;
static metrics_t *m;
static http_service_t *svc;

static json_t *fake_reload(void *arg, int *status)
{
    (void)arg;
    *status = 200;
    return json_pack("{s:s, s:[s], s:[]}", "result", "applied", "applied", "log.level", "restart_needed");
}

static json_t *fake_last(void *arg)
{
    (void)arg;
    return NULL; /* no reload yet: 404 */
}

static void fake_config(void *arg, tb_buf_t *out)
{
    (void)arg;
    tb_buf_puts(out, "log:\n  level: info\n");
}

/* pause/resume and drain (http_admin_drain.c): the topic path is parsed before these are called */
static json_t *fake_pause(void *arg, const char *topic, bool paused, int *status)
{
    (void)arg;
    if (topic[0] != '/' || strchr(topic + 1, '/') == NULL)
        abort(); /* the route hands over "/NS/T" only */
    *status = strcmp(topic, "/e1/telemetry") == 0 ? 200 : 404;
    return json_pack("{s:s, s:b}", "topic", topic, "paused", paused);
}

static json_t *fake_drain(void *arg, bool start, int *status)
{
    (void)arg;
    *status = 200;
    return json_pack("{s:s}", "state", start ? "draining" : "running");
}

static json_t *fake_drain_cancel(void *arg, int *status)
{
    return fake_drain(arg, false, status);
}

static void setup(void)
{
    tb_log_setup(TB_LOG_ERROR, TB_LOG_TEXT, 2);
    uv_loop_init(&loop);
    metrics_new(&m);
    metrics_catalog_register(m, 4);
    metrics_topic_add(m, "/e1/telemetry");
    metrics_topic_add(m, "/e1/<energy>&\"quoted\"");
    http_service_opts_t o;
    http_service_opts_default(&o);
    o.render_ms = 0; /* every request renders: the renderers are what is fuzzed */
    o.edge_name = "fuzz";
    if (http_service_new(&loop, &o, m, NULL, &svc) < 0)
        abort();
    http_admin_ops_t ops = { .reload = fake_reload, .last_reload = fake_last, .config = fake_config,
                             .pause = fake_pause, .drain = fake_drain, .drain_cancel = fake_drain_cancel };
    http_service_set_admin(svc, &ops);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!svc)
        setup();
    if (size < 1 || size > 16384)
        return 0;
    uint8_t mode = data[0];
    data++, size--;
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t end = http_head_end(buf, size, 0);
    http_req_t req;
    if (end && http_parse(buf, end, &req) == 0) {
        http_service_set_token(svc, mode & 1 ? "tok" : NULL);
        http_service_set_admin_token(svc, mode & 4 ? "admintok" : NULL);
        metrics_add(metrics_fam(m, METRICS_RECEIVED), size % 2, 0, size);
        metrics_set(metrics_fam(m, METRICS_QUEUED), size % 2, 0, (int64_t)(size * 7));
        if (mode & 2)
            http_service_sample(svc);
        tb_buf_t out = TB_BUF_INIT;
        const char *ctype = NULL;
        int status = http_service_answer(svc, &req, &out, &ctype);
        if (status < 100 || status > 599 || (status != 204 && out.len == 0))
            abort();
        if (ctype && strchr(ctype, '\n'))
            abort();
        tb_buf_free(&out);
    }
    free(buf);
    return 0;
}
