/*
 * http_admin.c: the admin API's routes (RELOAD.md 6; access rule in
 * http.h). The handlers check access, call the ops the gateway gave
 * (http_admin_ops_t: gateway/admin.c fills them; http/ includes neither the
 * broker nor the replicator) and log the call.
 *
 *   GET  /admin/config   text/yaml: the configuration in force
 *   POST /admin/reload   application/json: the reload's answer (200, 422, 503)
 *   GET  /admin/reload   the last answer (404 before the first reload)
 *   POST /admin/topics/NS/T/pause|resume|retire|forget, POST|GET /admin/drain[/cancel]: http_admin_drain.c
 *   GET  /admin/dlq?from=N&limit=K | ?offset=N    the dead-letter log (a page, one record)
 *   POST /admin/dlq/replay?from=N&to=M            route and validate them again
 *   POST /admin/dlq/purge?to=M&confirm=yes        delete them up to M
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* A replay's answer waiting for its copies to be kept (op dlq_replay_settled, at each tick). */
typedef struct http__dlq_wait {
    struct http__dlq_wait *next;
    http_pending_t *p;
    uint64_t id;
    json_t *doc;
    int status;
    uint64_t deadline_ms; /* tb_mono_ms(): answered "durable": false then */
} http__dlq_wait_t;

/* 0 when req may call the admin API, else the status, its words in out. */
static int admin_access(const http_service_t *s, const http_req_t *req, tb_buf_t *out)
{
    if (s->admin_token) {
        if (http__req_has_token(s->admin_token, req))
            return 0;
        tb_buf_puts(out, "unauthorized: the admin API asks for \"Authorization: Bearer <token>\" with the token of "
                         "http.admin_token_file\n");
        return 401;
    }
    if (!req->peer_loopback) {
        tb_buf_puts(out, "forbidden: without http.admin_token_file the admin API serves loopback peers only "
                         "(127.0.0.0/8, ::1); set http.admin_token_file to call it from elsewhere\n");
        return 403;
    }
    if (s->token && !http__req_has_token(s->token, req)) {
        tb_buf_puts(out, "unauthorized: without http.admin_token_file the admin API asks loopback peers for the "
                         "token of http.auth_token_file (\"Authorization: Bearer <token>\")\n");
        return 401;
    }
    return 0;
}

static int logged(const http_req_t *req, int status)
{
    tb_info("admin call", TB_S("method", req->method == HTTP_POST ? "POST" : req->method == HTTP_HEAD ? "HEAD" : "GET"),
            TB_S("path", req->path), TB_S("peer", req->peer), TB_I("status", status));
    return status;
}

static void put_json(tb_buf_t *out, json_t *doc)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) {
        tb_buf_puts(out, text);
        tb_buf_putc(out, '\n');
        free(text);
    }
}

static int admin_config(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = admin_access(s, req, out);
    if (rc)
        return logged(req, rc);
    s->admin.config(s->admin.arg, out);
    *ctype = "text/yaml; charset=utf-8";
    return logged(req, 200);
}

static int admin_reload(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = admin_access(s, req, out);
    if (rc)
        return logged(req, rc);
    int status = 200;
    json_t *doc = req->method == HTTP_POST ? s->admin.reload(s->admin.arg, &status) : s->admin.last_reload(s->admin.arg);
    if (!doc) {
        tb_buf_puts(out, "no reload yet: POST /admin/reload runs one (SIGHUP does too)\n");
        return logged(req, 404);
    }
    put_json(out, doc);
    json_decref(doc);
    *ctype = "application/json";
    return logged(req, status);
}

static bool query_has(const char *query, const char *pair)
{
    size_t n = strlen(pair);
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, pair, n) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

static int answer_json(const http_req_t *req, tb_buf_t *out, const char **ctype, json_t *doc, int status)
{
    put_json(out, doc);
    json_decref(doc);
    *ctype = "application/json";
    return logged(req, status);
}

static int bad_request(const http_req_t *req, tb_buf_t *out, const char *what)
{
    tb_buf_printf(out, "bad request: %s\n", what);
    return logged(req, 400);
}

static int admin_dlq(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = admin_access(s, req, out);
    if (rc)
        return logged(req, rc);
    uint64_t from = 0, limit = 100, offset = 0;
    const char *q = req->query;
    if ((strstr(q, "from=") && !http_query_u64(q, "from", &from)) ||
        (strstr(q, "limit=") && !http_query_u64(q, "limit", &limit)) ||
        (strstr(q, "offset=") && !http_query_u64(q, "offset", &offset)))
        return bad_request(req, out, "from, limit and offset are decimal numbers");
    if (limit == 0 || limit > 1000)
        return bad_request(req, out, "limit is 1..1000");
    int status = 200;
    json_t *doc = s->admin.dlq_list(s->admin.arg, from, (uint32_t)limit, offset, &status);
    return answer_json(req, out, ctype, doc, status);
}

static int admin_dlq_replay(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = admin_access(s, req, out);
    if (rc)
        return logged(req, rc);
    uint64_t from, to;
    if (!http_query_u64(req->query, "from", &from) || !http_query_u64(req->query, "to", &to) || from == 0 ||
        to < from)
        return bad_request(req, out, "give from=N&to=M, 1 <= N <= M");
    if (to - from >= 10000)
        return bad_request(req, out, "at most 10000 records per replay");
    int status = 200;
    uint64_t id = 0;
    json_t *doc = s->admin.dlq_replay(s->admin.arg, from, to, &status, &id);
    http_pending_t *p = id ? http_defer(req) : NULL;
    if (!p) {
        if (id) /* no room to wait (or draining): answered now, "durable" false */
            s->admin.dlq_replay_settled(s->admin.arg, id, true);
        return answer_json(req, out, ctype, doc, status);
    }
    http__dlq_wait_t *w = tb_calloc(1, sizeof *w);
    w->p = p;
    w->id = id;
    w->doc = doc;
    w->status = status;
    uint64_t bound = s->srv->opts.answer_timeout_ms > 1000 ? s->srv->opts.answer_timeout_ms - 1000 : 0;
    w->deadline_ms = tb_mono_ms() + bound;
    w->next = s->dlq_waits;
    s->dlq_waits = w;
    tb_info("admin call", TB_S("method", "POST"), TB_S("path", req->path), TB_S("peer", req->peer),
            TB_S("status", "waiting for the copies to be kept"));
    return HTTP_DEFER;
}

void http__dlq_tick(http_service_t *s)
{
    uint64_t now = tb_mono_ms();
    for (http__dlq_wait_t **pp = &s->dlq_waits, *w; (w = *pp);) {
        bool gone = http_pending_gone(w->p);
        int rc = s->admin.dlq_replay_settled(s->admin.arg, w->id, gone || now >= w->deadline_ms);
        if (!rc) {
            pp = &w->next;
            continue;
        }
        json_object_set_new(w->doc, "durable", json_boolean(rc > 0));
        tb_buf_t body = TB_BUF_INIT;
        put_json(&body, w->doc);
        tb_info("admin answer", TB_S("path", "/admin/dlq/replay"), TB_B("durable", rc > 0), TB_I("status", w->status),
                TB_B("gone", gone));
        http_pending_answer(w->p, w->status, "application/json", &body); /* a gone one is only freed */
        tb_buf_free(&body);
        json_decref(w->doc);
        *pp = w->next;
        free(w);
    }
}

void http__dlq_free(http_service_t *s)
{
    for (http__dlq_wait_t *w = s->dlq_waits, *next; w; w = next) {
        next = w->next;
        s->admin.dlq_replay_settled(s->admin.arg, w->id, true);
        tb_buf_t empty = TB_BUF_INIT;
        http_pending_answer(w->p, 503, NULL, &empty); /* gone by now (the server closed): freed */
        tb_buf_free(&empty);
        json_decref(w->doc);
        free(w);
    }
    s->dlq_waits = NULL;
}

static int admin_dlq_purge(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    int rc = admin_access(s, req, out);
    if (rc)
        return logged(req, rc);
    uint64_t to;
    if (!http_query_u64(req->query, "to", &to) || to == 0)
        return bad_request(req, out, "give to=M (the last offset to delete)");
    if (!query_has(req->query, "confirm=yes"))
        return bad_request(req, out, "purge deletes dead letters: add confirm=yes");
    int status = 200;
    json_t *doc = s->admin.dlq_purge(s->admin.arg, to, &status);
    return answer_json(req, out, ctype, doc, status);
}

int http__admin_mount(http_service_t *s)
{
    if (!s->admin.reload || !s->admin.last_reload || !s->admin.config)
        return 0;
    int rc;
    if ((rc = http_route(s->srv, "/admin/config", admin_config, s)) < 0 ||
        (rc = http_route_methods(s->srv, HTTP_M_GET | HTTP_M_POST, "/admin/reload", admin_reload, s)) < 0)
        return rc;
    if (s->admin.dlq_list && s->admin.dlq_replay && s->admin.dlq_replay_settled && s->admin.dlq_purge &&
        ((rc = http_route(s->srv, "/admin/dlq", admin_dlq, s)) < 0 ||
         (rc = http_route_methods(s->srv, HTTP_M_POST, "/admin/dlq/replay", admin_dlq_replay, s)) < 0 ||
         (rc = http_route_methods(s->srv, HTTP_M_POST, "/admin/dlq/purge", admin_dlq_purge, s)) < 0))
        return rc;
    return http__admin_mount_ops(s);
}

/* For http_admin_drain.c: the access rule, the log line and the JSON body above. */
int http__admin_access(const http_service_t *s, const http_req_t *req, tb_buf_t *out)
{
    return admin_access(s, req, out);
}

int http__admin_logged(const http_req_t *req, int status)
{
    return logged(req, status);
}

void http__admin_put_json(tb_buf_t *out, json_t *doc)
{
    put_json(out, doc);
}

bool http__query_has(const char *query, const char *pair)
{
    return query_has(query, pair);
}
