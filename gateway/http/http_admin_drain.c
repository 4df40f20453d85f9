/*
 * http_admin_drain.c: the admin routes for planned maintenance (RELOAD.md
 * 6.3, 6.4): access and logging as http_admin.c's; the work is the ops the
 * gateway gave (gateway/admin_drain.c).
 *
 *   POST /admin/topics/NS/T/pause    replication of topic /NS/T holds
 *   POST /admin/topics/NS/T/resume   and goes on, in order
 *        {"topic", "paused"}; 404 for an unknown topic or a malformed path
 *   POST /admin/topics/NS/T/retire   a topic no mapping routes to, drained: retired now
 *   POST /admin/topics/NS/T/forget?confirm=yes   the same whatever its backlog (400
 *        without confirm=yes): {"topic", "state", "backlog_messages", "backlog_bytes"},
 *        202 "removing" (the removal runs on the pool: /stats says "retired" after),
 *        409 not drained (retire) or still mapped (RELOAD.md 4.6)
 *   POST /admin/drain[?wait_ms=N]    stop accepting, replicate what is left:
 *        {"state", "remaining_messages", "remaining_topics", "paused_not_drained"}
 *        at once, or (wait_ms) deferred until "drained" or wait_ms passed
 *   GET  /admin/drain                the same document, changing nothing
 *   POST /admin/drain/cancel         accepting again (409 while connections
 *                                    are still closing); waits answered
 *
 * A wait is checked at each health tick (tick_ms, 1 s by default), so the
 * answer comes at most a tick after the last topic emptied; wait_ms is
 * capped at the server's answer_timeout_ms less a second (the 504 bound).
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct http__drain_wait {
    struct http__drain_wait *next;
    http_pending_t *p;
    uint64_t deadline_ms; /* tb_mono_ms() */
} http__drain_wait_t;

/* A Danube topic segment: [A-Za-z0-9_-]+ (router_template.c). */
static size_t segment(const char *p)
{
    size_t n = 0;
    while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= '0' && p[n] <= '9') ||
           p[n] == '_' || p[n] == '-')
        n++;
    return n;
}

/* "/admin/topics/NS/T/VERB" -> topic "/NS/T" and verb; false when it is not that shape. */
bool http__admin_topic_path(const char *path, char *topic, size_t topiclen, const char **verb)
{
    static const char pre[] = "/admin/topics/";
    if (strncmp(path, pre, sizeof pre - 1) != 0)
        return false;
    const char *ns = path + sizeof pre - 1;
    size_t a = segment(ns);
    if (!a || ns[a] != '/')
        return false;
    const char *name = ns + a + 1;
    size_t b = segment(name);
    if (!b || name[b] != '/' || !name[b + 1] || strchr(name + b + 1, '/'))
        return false;
    if (a + b + 3 > topiclen)
        return false;
    snprintf(topic, topiclen, "/%.*s/%.*s", (int)a, ns, (int)b, name);
    *verb = name + b + 1;
    return true;
}

static int admin_topic(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = http__admin_access(s, req, out);
    if (rc)
        return http__admin_logged(req, rc);
    char topic[256];
    const char *verb;
    bool pause = false, retire = false;
    if (http__admin_topic_path(req->path, topic, sizeof topic, &verb)) {
        pause = s->admin.pause && (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0);
        retire = s->admin.retire && (strcmp(verb, "retire") == 0 || strcmp(verb, "forget") == 0);
    }
    if (!pause && !retire) {
        tb_buf_puts(out, "not found: the topic routes are POST /admin/topics/NAMESPACE/TOPIC/pause, .../resume, "
                         ".../retire and .../forget?confirm=yes (the upstream topic /NAMESPACE/TOPIC, two segments "
                         "of [A-Za-z0-9_-])\n");
        return http__admin_logged(req, 404);
    }
    bool forget = retire && strcmp(verb, "forget") == 0;
    if (forget && !http__query_has(req->query, "confirm=yes")) {
        tb_buf_puts(out, "bad request: forget deletes the topic's log whatever its backlog: add confirm=yes\n");
        return http__admin_logged(req, 400);
    }
    int status = 200;
    json_t *doc = retire ? s->admin.retire(s->admin.arg, topic, forget, &status)
                         : s->admin.pause(s->admin.arg, topic, strcmp(verb, "pause") == 0, &status);
    http__admin_put_json(out, doc);
    json_decref(doc);
    *ctype = "application/json";
    return http__admin_logged(req, status);
}

/* wait_ms=N in the query (0 when absent or malformed: no wait), capped. */
static uint64_t wait_ms(const http_service_t *s, const char *query)
{
    for (const char *q = query; q && *q;) {
        if (strncmp(q, "wait_ms=", 8) == 0) {
            char *end;
            unsigned long long v = strtoull(q + 8, &end, 10);
            if (end == q + 8 || (*end && *end != '&'))
                return 0;
            uint64_t cap = s->srv->opts.answer_timeout_ms > 1000 ? s->srv->opts.answer_timeout_ms - 1000 : 0;
            return v < cap ? v : cap;
        }
        const char *amp = strchr(q, '&');
        q = amp ? amp + 1 : NULL;
    }
    return 0;
}

/* Nothing more to wait for: drained, or running again (cancelled). */
static bool drained(json_t *doc)
{
    const char *st = json_string_value(json_object_get(doc, "state"));
    return !st || strcmp(st, "draining") != 0;
}

static int admin_drain(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = http__admin_access(s, req, out);
    if (rc)
        return http__admin_logged(req, rc);
    bool post = req->method == HTTP_POST;
    int status = 200;
    json_t *doc = s->admin.drain(s->admin.arg, post, &status);
    uint64_t wait = post && status == 200 && !drained(doc) ? wait_ms(s, req->query) : 0;
    http_pending_t *p = wait ? http_defer(req) : NULL;
    if (p) {
        json_decref(doc);
        http__drain_wait_t *w = tb_calloc(1, sizeof *w);
        w->p = p;
        w->deadline_ms = tb_mono_ms() + wait;
        w->next = s->drain_waits;
        s->drain_waits = w;
        tb_info("admin call", TB_S("method", "POST"), TB_S("path", req->path), TB_S("peer", req->peer),
                TB_S("status", "waiting"), TB_U("wait_ms", wait));
        return HTTP_DEFER;
    }
    http__admin_put_json(out, doc);
    json_decref(doc);
    *ctype = "application/json";
    return http__admin_logged(req, status);
}

static int admin_drain_cancel(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = http__admin_access(s, req, out);
    if (rc)
        return http__admin_logged(req, rc);
    int status = 200;
    json_t *doc = s->admin.drain_cancel(s->admin.arg, &status);
    http__admin_put_json(out, doc);
    json_decref(doc);
    *ctype = "application/json";
    return http__admin_logged(req, status);
}

void http__admin_tick(http_service_t *s)
{
    http__dlq_tick(s);
    if (!s->drain_waits)
        return;
    int status = 200;
    json_t *doc = s->admin.drain(s->admin.arg, false, &status);
    bool done = drained(doc);
    uint64_t now = tb_mono_ms();
    for (http__drain_wait_t **pp = &s->drain_waits, *w; (w = *pp);) {
        if (!done && now < w->deadline_ms && !http_pending_gone(w->p)) {
            pp = &w->next;
            continue;
        }
        tb_buf_t body = TB_BUF_INIT;
        http__admin_put_json(&body, doc);
        tb_info("admin answer", TB_S("path", "/admin/drain"), TB_S("state", json_string_value(json_object_get(doc, "state"))),
                TB_I("status", status), TB_B("gone", http_pending_gone(w->p)));
        http_pending_answer(w->p, status, "application/json", &body); /* a gone one is only freed */
        tb_buf_free(&body);
        *pp = w->next;
        free(w);
    }
    json_decref(doc);
}

void http__admin_free(http_service_t *s)
{
    http__dlq_free(s);
    for (http__drain_wait_t *w = s->drain_waits, *next; w; w = next) {
        next = w->next;
        tb_buf_t empty = TB_BUF_INIT;
        http_pending_answer(w->p, 503, NULL, &empty); /* gone by now (the server closed): freed */
        tb_buf_free(&empty);
        free(w);
    }
    s->drain_waits = NULL;
}

int http__admin_mount_ops(http_service_t *s)
{
    int rc;
    if ((s->admin.pause || s->admin.retire) && (rc = http_route_prefix(s->srv, HTTP_M_POST, "/admin/topics/", admin_topic, s)) < 0)
        return rc;
    if (s->admin.drain && (rc = http_route_methods(s->srv, HTTP_M_GET | HTTP_M_POST, "/admin/drain", admin_drain, s)) < 0)
        return rc;
    if (s->admin.drain_cancel &&
        (rc = http_route_methods(s->srv, HTTP_M_POST, "/admin/drain/cancel", admin_drain_cancel, s)) < 0)
        return rc;
    return 0;
}
