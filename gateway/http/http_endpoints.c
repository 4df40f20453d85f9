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
    if (!s->token)
        return true;
    const char *a = req->authorization;
    if (strncasecmp(a, "bearer ", 7) == 0) {
        a += 7;
        while (*a == ' ')
            a++;
        return same_token(s->token, a, strlen(a));
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
    bool ok = colon && same_token(s->token, (const char *)colon + 1, (size_t)(dec + n - colon - 1));
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

/* Copies rendering `which` into out, rendering it anew when older than render_ms. */
static void rendered(http_service_t *s, int which, tb_buf_t *out)
{
    uint64_t now = tb_mono_ms();
    if (!s->rendered[which].valid || now - s->rendered[which].at_ms >= s->opts.render_ms) {
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

static int stats(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    if (!http__token_ok(arg, req))
        return http__unauthorized(out);
    rendered(arg, strstr(req->query, "pretty") ? R_STATS_PRETTY : R_STATS, out);
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
        (rc = http__page_mount(s)) < 0)
        return rc;
    s->mounted = true;
    return 0;
}
