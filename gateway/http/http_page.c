/*
 * http_page.c: the operator's page, for a technician with a laptop or a
 * phone on the plant floor, with no Grafana and no internet.
 *
 *   /               the page: one HTML document with its CSS and script
 *                   inlined, embedded in the binary at build time
 *                   (gateway/http/page/, embed.cmake). It never changes
 *                   while the process runs, so serving it is one copy of
 *                   ~30 KB; its script polls /stats and /stats/history and
 *                   draws the rest in the browser (tables, SVG charts).
 *   /table          the same health line, connections and topic table
 *                   rendered here from the /stats document, for a browser
 *                   with scripts off (the page's <noscript> sends it here);
 *                   rendered at most once per render_ms, like /stats.
 *   /stats/history  the sample ring (http_history.c) as JSON.
 *
 * Same access rules as /stats: with http.auth_token_file all three answer
 * 401 without the token (the TLS of http.tls covers them as every path).
 * Read-only: nothing here changes the gateway.
 *
 * The health words are decided in one place for the server-rendered table
 * (health() below) and, the same way, in page.js for the live page:
 *   not ready  /stats ready is false (its not_ready_reason)
 *   degraded   unhealthy (unhealthy_reason), the cluster not connected
 *              (messages wait in the log), the accounting invariant broken,
 *              or a topic stalled, failed or blocked
 *   healthy    otherwise
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <string.h>

/* gateway/http/page/embed.cmake's output (http_page_blob.c in the build tree) */
extern const unsigned char http__page_html[];
extern const size_t http__page_html_len;
extern const unsigned char http__page_css[];
extern const size_t http__page_css_len;

#define R_TABLE 3 /* s->rendered[] slot (http_endpoints.c uses 0..2) */
#define HTML "text/html; charset=utf-8"

static int page(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    if (!http__token_ok(arg, req))
        return http__unauthorized(out);
    tb_buf_append(out, http__page_html, http__page_html_len);
    *ctype = HTML;
    return 200;
}

static int history(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    if (!http__token_ok(s, req))
        return http__unauthorized(out);
    uint64_t seq = http__history_seq(s);
    if (!s->hist_body_valid || s->hist_body_seq != seq) { /* the ring changed: render it once */
        tb_buf_reset(&s->hist_body);
        http__history_render(s, &s->hist_body);
        s->hist_body_seq = seq;
        s->hist_body_valid = true;
    }
    tb_buf_append(out, s->hist_body.data, s->hist_body.len);
    *ctype = "application/json";
    return 200;
}

/* ---- /table ------------------------------------------------------------- */

static void esc(tb_buf_t *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': tb_buf_puts(b, "&lt;"); break;
        case '>': tb_buf_puts(b, "&gt;"); break;
        case '&': tb_buf_puts(b, "&amp;"); break;
        case '"': tb_buf_puts(b, "&quot;"); break;
        default: tb_buf_putc(b, *s);
        }
    }
}

static int64_t iv(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static const char *sv(const json_t *o, const char *k, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : dflt;
}

/* Sum of an object of counts ({reason: n}). */
static int64_t sum(const json_t *o)
{
    const char *k;
    json_t *v;
    int64_t n = 0;
    json_object_foreach((json_t *)o, k, v)
        n += json_integer_value(v);
    return n;
}

static bool topic_trouble(const json_t *t)
{
    const char *st = sv(t, "state", "");
    return !strcmp(st, "stalled") || !strcmp(st, "failed") || json_is_true(json_object_get(t, "blocked")) ||
           json_is_false(json_object_get(t, "invariant_ok"));
}

/* "healthy" / "degraded" / "not ready", and why (the reasons, "; "-separated, in why). */
static const char *health(const json_t *doc, tb_buf_t *why)
{
    if (!json_is_true(json_object_get(doc, "ready"))) {
        tb_buf_puts(why, sv(doc, "not_ready_reason", "not ready"));
        return "not ready";
    }
    const char *level = "healthy";
    if (!json_is_true(json_object_get(doc, "healthy"))) {
        tb_buf_puts(why, sv(doc, "unhealthy_reason", "unhealthy"));
        level = "degraded";
    }
    const char *cs = sv(json_object_get(doc, "cluster"), "state", "unknown");
    if (strcmp(cs, "connected") != 0) {
        tb_buf_printf(why, "%scluster %s: messages wait in the log", why->len ? "; " : "", cs);
        level = "degraded";
    }
    if (json_is_false(json_object_get(doc, "invariant_ok"))) {
        tb_buf_printf(why, "%saccounting invariant broken", why->len ? "; " : "");
        level = "degraded";
    }
    size_t i;
    json_t *t;
    size_t bad = 0;
    json_array_foreach(json_object_get(doc, "topics"), i, t) {
        if (topic_trouble(t))
            bad++;
    }
    if (bad) {
        tb_buf_printf(why, "%s%zu topic%s in trouble", why->len ? "; " : "", bad, bad == 1 ? "" : "s");
        level = "degraded";
    }
    if (!why->len)
        tb_buf_puts(why, "ready, cluster connected, every topic flowing");
    return level;
}

static void reasons(tb_buf_t *b, const json_t *o)
{
    const char *k;
    json_t *v;
    bool any = false;
    json_object_foreach((json_t *)o, k, v) {
        if (json_integer_value(v) == 0)
            continue;
        tb_buf_printf(b, "%s", any ? ", " : "");
        esc(b, k);
        tb_buf_printf(b, " %lld", (long long)json_integer_value(v));
        any = true;
    }
    if (!any)
        tb_buf_puts(b, "none");
}

static void render_table(http_service_t *s, tb_buf_t *b)
{
    json_t *doc = http_stats_json(s);
    tb_buf_t why = TB_BUF_INIT;
    const char *level = health(doc, &why);
    tb_buf_puts(b, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                   "<meta http-equiv=\"refresh\" content=\"10\"><title>Tributary ");
    esc(b, sv(doc, "edge", ""));
    tb_buf_puts(b, "</title><style>");
    tb_buf_append(b, http__page_css, http__page_css_len);
    tb_buf_puts(b, "</style></head><body><header><h1>Tributary <span class=\"edge\">");
    esc(b, sv(doc, "edge", ""));
    tb_buf_printf(b, "</span></h1><p id=\"health\" class=\"health %s\" data-level=\"%s\"><b>%s</b>: ",
                  strcmp(level, "healthy") == 0 ? "ok" : strcmp(level, "degraded") == 0 ? "warn" : "bad", level, level);
    esc(b, tb_buf_str(&why));
    json_t *up = json_object_get(doc, "uptime_seconds");
    tb_buf_printf(b, "</p><p class=\"meta\">cluster <b id=\"cluster\">%s</b> &middot; uptime %.0f s &middot; "
                     "version %s &middot; static view (scripts off), refreshed every 10 s</p></header>",
                  sv(json_object_get(doc, "cluster"), "state", "unknown"), json_is_number(up) ? json_number_value(up) : 0.0,
                  sv(doc, "version", "?"));
    tb_buf_free(&why);

    json_t *c = json_object_get(doc, "connections");
    tb_buf_printf(b, "<section><h2>Connections</h2><p>MQTT open <b id=\"conn-mqtt\">%lld</b> &middot; accepted %lld "
                     "&middot; HTTP open %lld</p><p>refused: ",
                  (long long)iv(c, "mqtt"), (long long)iv(c, "mqtt_accepted"), (long long)iv(c, "http"));
    reasons(b, json_object_get(c, "mqtt_refused"));
    tb_buf_puts(b, "</p><p>closed: ");
    reasons(b, json_object_get(c, "mqtt_closed"));
    tb_buf_puts(b, "</p></section>");

    tb_buf_puts(b, "<section><h2>Topics</h2><div class=\"scroll\"><table id=\"topics\"><thead><tr><th>topic</th>"
                   "<th>state</th><th>received</th><th>queued</th><th>lag msgs</th><th>lag bytes</th>"
                   "<th>lag age s</th><th>dropped</th><th>rejected</th><th>durability</th></tr></thead><tbody>");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "topics"), i, t) {
        bool bad = topic_trouble(t);
        int64_t dropped = iv(t, "dropped") + iv(t, "dropped_age");
        int64_t rejected = sum(json_object_get(t, "rejected"));
        tb_buf_printf(b, "<tr class=\"%s\" data-topic=\"", bad ? "bad" : dropped || rejected ? "warn" : "");
        esc(b, sv(t, "topic", ""));
        tb_buf_puts(b, "\"><td>");
        esc(b, sv(t, "topic", ""));
        json_t *age = json_object_get(t, "oldest_unreplicated_age_seconds");
        tb_buf_printf(b, "</td><td>%s%s</td><td class=\"received\">%lld</td><td class=\"queued\">%lld</td>"
                         "<td>%lld</td><td>%lld</td><td>%.1f</td><td class=\"dropped\">%lld</td>"
                         "<td class=\"rejected\">%lld</td><td>%s</td></tr>",
                      sv(t, "state", "unknown"), json_is_true(json_object_get(t, "blocked")) ? ", blocked" : "",
                      (long long)iv(t, "received"), (long long)iv(t, "queued"), (long long)iv(t, "lag_messages"),
                      (long long)iv(t, "lag_bytes"), json_is_number(age) ? json_number_value(age) : 0.0,
                      (long long)dropped, (long long)rejected, sv(t, "durability", "log"));
    }
    tb_buf_puts(b, "</tbody></table></div></section><footer>Live page with charts: <a href=\"/\">/</a> "
                   "(needs scripts) &middot; <a href=\"/stats?pretty\">/stats</a></footer></body></html>\n");
    json_decref(doc);
}

static int table(void *arg, http_req_t *req, tb_buf_t *out, const char **ctype)
{
    http_service_t *s = arg;
    if (!http__token_ok(s, req))
        return http__unauthorized(out);
    uint64_t now = tb_mono_ms();
    if (!s->rendered[R_TABLE].valid || now - s->rendered[R_TABLE].at_ms >= s->opts.render_ms) {
        tb_buf_reset(&s->rendered[R_TABLE].body);
        render_table(s, &s->rendered[R_TABLE].body);
        s->rendered[R_TABLE].at_ms = now;
        s->rendered[R_TABLE].valid = true;
    }
    tb_buf_append(out, s->rendered[R_TABLE].body.data, s->rendered[R_TABLE].body.len);
    *ctype = HTML;
    return 200;
}

int http__page_mount(http_service_t *s)
{
    int rc;
    if ((rc = http_route(s->srv, "/", page, s)) < 0 || (rc = http_route(s->srv, "/table", table, s)) < 0 ||
        (rc = http_route(s->srv, "/stats/history", history, s)) < 0)
        return rc;
    return 0;
}
