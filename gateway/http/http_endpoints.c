/*
 * http_endpoints.c: the four handlers. Each answers from memory on the
 * loop thread: the registry (after its collectors copied other threads'
 * atomics in), the provider's flags, the health tick. Bodies are bounded by
 * the number of catalog metrics times the topic capacity.
 *
 *   /healthz  liveness: 200 "ok"; 503 "unhealthy: <why>" (loop blocked,
 *             or the provider reports a failure such as a failed fsync)
 *   /readyz   readiness: 200 "ready"; 503 "not ready: <why>"; both add
 *             "cluster: <state>" (an unreachable cluster is an outage the
 *             gateway rides out by logging to disk, so it never makes the
 *             gateway unready)
 *   /metrics  Prometheus text 0.0.4
 *   /stats    JSON; ?pretty indents it
 *
 * With a bearer token (http.auth_token_file) /metrics and /stats answer
 * 401 without "Authorization: Bearer <token>" or HTTP Basic with the token
 * as its password (a browser's prompt; compared in constant time);
 * the probes stay open unless http.auth_probes is set, so a kubelet or a
 * load balancer needs no secret to see liveness.
 *
 * Rendering /metrics or /stats costs loop time that grows with the number
 * of topics (bench/bench_http_scrape: ~7 ms for 1,000 topics). So each is
 * rendered at most once per render_ms (250 ms) and requests in between get
 * a copy of the last rendering: 64 connections asking in a tight loop
 * cannot turn the endpoint into a loop hog. Prometheus scrapes every 15 s
 * or so and always gets a fresh rendering.
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *cluster_name(http_service_t *s)
{
    http_cluster_state_t cs = s->p.cluster_state ? s->p.cluster_state(s->p.arg) : HTTP_CLUSTER_UNKNOWN;
    return (unsigned)cs < HTTP_CLUSTER__COUNT ? http_cluster_states[cs] : "unknown";
}

/* Is a equal to the token? Constant time in the token's bytes. */
static bool same_token(const char *token, const char *a, size_t m)
{
    size_t n = strlen(token);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(token[i] ^ (i < m ? a[i] : 0));
    return diff == 0;
}

/* Does req carry the token? As "Bearer <token>" (curl, Prometheus), or as
 * the password of "Basic base64(user:token)", any user name: the one form a
 * browser can send, after its own prompt, so a technician can open the
 * operator's page; the page's own fetches then carry it too. */
bool http__token_ok(const http_service_t *s, const http_req_t *req)
{
    return !s->token || http__req_has_token(s->token, req);
}

bool http__req_has_token(const char *token, const http_req_t *req)
{
    const char *a = req->authorization;
    if (strncasecmp(a, "bearer ", 7) == 0) {
        a += 7;
        while (*a == ' ')
            a++;
        return same_token(token, a, strlen(a));
    }
    if (strncasecmp(a, "basic ", 6) != 0)
        return false;
    a += 6;
    while (*a == ' ')
        a++;
    size_t len = strlen(a);
    if (len == 0 || len % 4 != 0 || len > 4 * 1024)
        return false;
    unsigned char dec[3 * 1024 + 1];
    int n = EVP_DecodeBlock(dec, (const unsigned char *)a, (int)len);
    if (n < 0)
        return false;
    /* EVP_DecodeBlock counts the padding's zero bytes: take them off */
    for (const char *e = a + len; e > a && e[-1] == '='; e--)
        n--;
    const unsigned char *colon = memchr(dec, ':', (size_t)n);
    bool ok = colon && same_token(token, (const char *)colon + 1, (size_t)(dec + n - colon - 1));
    explicit_bzero(dec, sizeof dec);
    return ok;
}

int http__unauthorized(tb_buf_t *out)
{
    tb_buf_puts(out, "unauthorized: this endpoint asks for \"Authorization: Bearer <token>\" (http.auth_token_file), "
                     "or the token as the password of HTTP Basic (a browser asks for it)\n");
    return 401;
}

static int healthz(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)ctype;
    http_service_t *s = arg;
    if (s->opts.token_probes && !http__token_ok(s, req))
        return http__unauthorized(out);
    char why[200];
    if (http_service_healthy(arg, why, sizeof why)) {
        tb_buf_puts(out, "ok\n");
        return 200;
    }
    tb_buf_printf(out, "unhealthy: %s\n", why);
    return 503;
}

static int readyz(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    (void)ctype;
    http_service_t *s = arg;
    if (s->opts.token_probes && !http__token_ok(s, req))
        return http__unauthorized(out);
    char why[200];
    bool ok = http_service_ready(arg, why, sizeof why);
    if (ok)
        tb_buf_puts(out, "ready\n");
    else
        tb_buf_printf(out, "not ready: %s\n", why);
    char problem[300];
    if (s->p.cluster_problem && s->p.cluster_problem(s->p.arg, problem, sizeof problem))
        tb_buf_printf(out, "cluster: %s\n", problem); /* a refusal is not an outage: still ready */
    else
        tb_buf_printf(out, "cluster: %s\n", cluster_name(arg));
    return ok ? 200 : 503;
}

enum { R_METRICS, R_STATS, R_STATS_PRETTY };

static void render_metrics(http_service_t *s, tb_buf_t *out)
{
    metrics_collect(s->m);
    metrics_catalog_derive(s->m);
    metrics_write_prometheus(s->m, out);
}

static int dump_cb(const char *buf, size_t size, void *data)
{
    tb_buf_append(data, buf, size);
    return 0;
}

static void render_stats(http_service_t *s, tb_buf_t *out, bool pretty)
{
    json_t *doc = http_stats_json(s);
    json_dump_callback(doc, dump_cb, out,
                       (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    tb_buf_putc(out, '\n');
    json_decref(doc);
}

static bool fresh(const http_service_t *s, int which, uint64_t now)
{
    return s->rendered[which].valid && now - s->rendered[which].at_ms < s->opts.render_ms;
}

/* Copies rendering `which` into out, rendering it anew when older than render_ms. */
static void rendered(http_service_t *s, int which, tb_buf_t *out)
{
    uint64_t now = tb_mono_ms();
    if (!fresh(s, which, now)) {
        tb_buf_t *b = &s->rendered[which].body;
        tb_buf_reset(b);
        if (which == R_METRICS)
            render_metrics(s, b);
        else
            render_stats(s, b, which == R_STATS_PRETTY);
        s->rendered[which].at_ms = now;
        s->rendered[which].valid = true;
    }
    tb_buf_append(out, s->rendered[which].body.data, s->rendered[which].body.len);
}

static int metrics(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    if (!http__token_ok(arg, req))
        return http__unauthorized(out);
    rendered(arg, R_METRICS, out);
    *ctype = METRICS_PROM_CONTENT_TYPE;
    return 200;
}

/* ---- /stats dumped on the thread pool ----------------------------------- */

struct http__render_job {
    uv_work_t work;
    http_service_t *s;
    int which;
    uint64_t at_ms;   /* when the tree was built */
    json_t *doc;      /* the job's alone once queued; NULL after the pool freed it */
    tb_buf_t text;
    http_pending_t *waiting[HTTP_MAX_PENDING];
    size_t nwaiting;
};

static void dump_work(uv_work_t *w) /* on a pool thread: touches the job only */
{
    struct http__render_job *j = w->data;
    json_dump_callback(j->doc, dump_cb, &j->text,
                       (j->which == R_STATS_PRETTY ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER |
                           JSON_REAL_PRECISION(15));
    tb_buf_putc(&j->text, '\n');
    json_decref(j->doc);
    j->doc = NULL;
}

static void dump_done(uv_work_t *w, int status) /* back on the loop */
{
    struct http__render_job *j = w->data;
    http_service_t *s = j->s;
    if (status < 0) { /* cancelled: the work did not run (not done today) */
        json_decref(j->doc);
        tb_buf_reset(&j->text);
        tb_buf_puts(&j->text, "the /stats rendering was cancelled\n");
    } else {
        tb_buf_free(&s->rendered[j->which].body);
        s->rendered[j->which].body = j->text;
        s->rendered[j->which].at_ms = j->at_ms;
        s->rendered[j->which].valid = true;
        j->text = (tb_buf_t)TB_BUF_INIT;
    }
    const tb_buf_t *src = status < 0 ? &j->text : &s->rendered[j->which].body;
    for (size_t i = 0; i < j->nwaiting; i++) {
        tb_buf_t b = TB_BUF_INIT;
        if (!http_pending_gone(j->waiting[i]))
            tb_buf_append(&b, src->data, src->len);
        http_pending_answer(j->waiting[i], status < 0 ? 503 : 200, status < 0 ? NULL : "application/json", &b);
    }
    tb_buf_free(&j->text);
    s->job[j->which] = NULL;
    free(j);
    http__service_one_closed(s);
}

/* Defers req's answer to the job dumping rendering `which` (queued now if
 * none runs). false: answer synchronously (no connection, too many waiting,
 * the service closing, the pool refused). */
static bool stats_later(http_service_t *s, int which, http_req_t *req)
{
    struct http__render_job *j = s->job[which];
    if (s->closing || (j && j->nwaiting == HTTP_MAX_PENDING))
        return false;
    http_pending_t *p = http_defer(req);
    if (!p)
        return false;
    if (!j) {
        j = tb_calloc(1, sizeof *j);
        j->s = s;
        j->which = which;
        j->work.data = j;
        j->at_ms = tb_mono_ms();
        j->doc = http_stats_json(s);
        /* fails only without a work callback (UV_EINVALID): the pool's queue is unbounded */
        if (uv_queue_work(s->loop, &j->work, dump_work, dump_done) < 0)
            abort();
        s->open++;
        s->job[which] = j;
    }
    j->waiting[j->nwaiting++] = p;
    return true;
}

static int stats(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    if (!http__token_ok(s, req))
        return http__unauthorized(out);
    int which = strstr(req->query, "pretty") ? R_STATS_PRETTY : R_STATS;
    if (!fresh(s, which, tb_mono_ms()) && stats_later(s, which, req))
        return HTTP_DEFER;
    rendered(s, which, out);
    *ctype = "application/json";
    return 200;
}

int http__endpoints_mount(http_service_t *s)
{
    if (s->mounted)
        return 0;
    int rc;
    if ((rc = http_route(s->srv, "/healthz", healthz, s)) < 0 ||
        (rc = http_route(s->srv, "/readyz", readyz, s)) < 0 ||
        (rc = http_route(s->srv, "/metrics", metrics, s)) < 0 ||
        (rc = http_route(s->srv, "/stats", stats, s)) < 0 ||
        (rc = http__page_mount(s)) < 0 ||
        (rc = http__admin_mount(s)) < 0)
        return rc;
    s->mounted = true;
    return 0;
}
