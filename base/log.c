/*
 * log.c: structured log lines, logfmt or JSON, one write(2) per line.
 *
 *   text: ts=2026-11-29T13:30:19.123Z level=warn msg="disk full" topic=/edge1/t
 *   json: {"ts":"2026-11-29T13:30:19.123Z","level":"warn","msg":"disk full","topic":"/edge1/t"}
 *
 * Each line is formatted into a stack buffer and written with a single
 * write(2), so lines from the loop, the WAL writer and the replicator
 * threads never interleave. Lines longer than the buffer are cut and end
 * with "...". The level is an atomic so SIGHUP can change it at run time.
 */
#include "base/base.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096

static _Atomic int g_level = TB_LOG_INFO;
static _Atomic int g_format = TB_LOG_TEXT;
static _Atomic int g_fd = 2;

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

void tb_log_setup(tb_log_level_t level, tb_log_format_t format, int fd)
{
    atomic_store(&g_level, (int)level);
    atomic_store(&g_format, (int)format);
    atomic_store(&g_fd, fd);
}

void tb_log_set_level(tb_log_level_t level) { atomic_store(&g_level, (int)level); }
tb_log_level_t tb_log_get_level(void) { return (tb_log_level_t)atomic_load(&g_level); }
bool tb_log_enabled(tb_log_level_t level) { return (int)level >= atomic_load(&g_level) && level != TB_LOG_OFF; }
const char *tb_log_level_name(tb_log_level_t l) { return l <= TB_LOG_OFF ? level_names[l] : "?"; }

int tb_log_level_parse(const char *s, tb_log_level_t *out)
{
    for (int i = 0; i <= TB_LOG_OFF; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (tb_log_level_t)i;
            return 0;
        }
    }
    return TB_ECONFIG;
}

typedef struct { char *buf; size_t len, cap; } out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->len >= o->cap)
        return;
    size_t room = o->cap - o->len;
    if (n > room) n = room;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}
static void puts_(out_t *o, const char *s) { put(o, s, strlen(s)); }
static void putc_(out_t *o, char c) { put(o, &c, 1); }

static void putf(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(out_t *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) put(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* JSON string body escape (also used for logfmt quoted values). */
static void put_escaped(out_t *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': puts_(o, "\\\""); break;
        case '\\': puts_(o, "\\\\"); break;
        case '\n': puts_(o, "\\n"); break;
        case '\r': puts_(o, "\\r"); break;
        case '\t': puts_(o, "\\t"); break;
        default:
            if (*p < 0x20) putf(o, "\\u%04x", *p);
            else putc_(o, (char)*p);
        }
    }
}

static bool needs_quotes(const char *s)
{
    if (!*s) return true;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
            return true;
    return false;
}

static void put_text_str(out_t *o, const char *s)
{
    if (!s) s = "";
    if (needs_quotes(s)) {
        putc_(o, '"');
        put_escaped(o, s);
        putc_(o, '"');
    } else {
        puts_(o, s);
    }
}

static void put_value(out_t *o, const tb_kv_t *kv, bool json)
{
    switch (kv->type) {
    case TB_KV_STR:
        if (json) { putc_(o, '"'); put_escaped(o, kv->v.s ? kv->v.s : ""); putc_(o, '"'); }
        else put_text_str(o, kv->v.s);
        break;
    case TB_KV_INT: putf(o, "%lld", kv->v.i); break;
    case TB_KV_UINT: putf(o, "%llu", kv->v.u); break;
    case TB_KV_DBL: putf(o, "%.6g", kv->v.d); break;
    case TB_KV_BOOL: puts_(o, kv->v.b ? "true" : "false"); break;
    }
}

void tb_log_kv(tb_log_level_t level, const char *msg, const tb_kv_t *const *kv, size_t n)
{
    char buf[LINE_MAX_BYTES];
    out_t o = { buf, 0, sizeof buf - 4 }; /* room for "...\n" */
    bool json = atomic_load(&g_format) == TB_LOG_JSON;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[96];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);

    if (json) {
        puts_(&o, "{\"ts\":\""); puts_(&o, when);
        puts_(&o, "\",\"level\":\""); puts_(&o, tb_log_level_name(level));
        puts_(&o, "\",\"msg\":\""); put_escaped(&o, msg); putc_(&o, '"');
        for (size_t i = 0; i < n; i++) {
            puts_(&o, ",\""); put_escaped(&o, kv[i]->key); puts_(&o, "\":");
            put_value(&o, kv[i], true);
        }
        putc_(&o, '}');
    } else {
        puts_(&o, "ts="); puts_(&o, when);
        puts_(&o, " level="); puts_(&o, tb_log_level_name(level));
        puts_(&o, " msg="); put_text_str(&o, msg);
        for (size_t i = 0; i < n; i++) {
            putc_(&o, ' '); puts_(&o, kv[i]->key); putc_(&o, '=');
            put_value(&o, kv[i], false);
        }
    }
    if (o.len >= o.cap) {
        memcpy(buf + o.len, "...", 3);
        o.len += 3;
    }
    buf[o.len++] = '\n';
    int fd = atomic_load(&g_fd);
    size_t off = 0;
    while (off < o.len) {
        ssize_t w = write(fd, buf + off, o.len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

bool tb_ratelimit(tb_ratelimit_t *rl, uint64_t *suppressed)
{
    uint64_t now = tb_mono_ms();
    bool ok = false;
    pthread_mutex_lock(&rl->mu);
    if (rl->last_ms == 0 || now - rl->last_ms >= rl->interval_ms) {
        rl->last_ms = now ? now : 1;
        rl->used = 0;
    }
    if (rl->used < (rl->burst ? rl->burst : 1)) {
        ok = true;
        rl->used++;
        *suppressed = rl->suppressed; /* the count skipped before this line */
        rl->suppressed = 0;
    } else {
        rl->suppressed++;
        *suppressed = 0;
    }
    pthread_mutex_unlock(&rl->mu);
    return ok;
}
