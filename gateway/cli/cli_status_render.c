/*
 * cli_status_render.c: the terse human view of /stats that `tributary status`
 * prints. One header line answers "is it up, is data flowing, was
 * anything lost"; then one line per upstream topic:
 *
 *   tributary 0.1.0  edge e1  up 2h03m  ready  healthy  cluster connected  mqtt 12  http 1  invariant ok
 *   TOPIC          STATE        DURABILITY  QUEUED  LAG AGE  DROPPED  REJECTED
 *   /e1/telemetry  replicating  memory          12     0.4s        0         3
 *
 * DURABILITY is /stats `durability`: `log`, or for a memory_first topic
 * where its messages are now (`memory`, `spilling`, `draining`, `ready`:
 * docs/WAL.md "The memory tier").
 *
 * DROPPED is the log's persistent count of what it lost, to the bound
 * (wal_dropped_total) and to max_age (wal_dropped_age_total): after a
 * restart the operator still sees what an earlier outage cost.
 *
 * It lives in the library (not in cli_status.c) so the unit tests can feed
 * it documents. Missing fields print as "?" rather than failing: a newer
 * or older gateway may not have them.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void duration(char *dst, size_t n, const json_t *v)
{
    if (!json_is_number(v)) {
        snprintf(dst, n, "?");
        return;
    }
    double s = json_number_value(v);
    if (s < 0)
        s = 0;
    uint64_t whole = (uint64_t)s;
    if (s < 10)
        snprintf(dst, n, "%.1fs", s);
    else if (s < 60)
        snprintf(dst, n, "%" PRIu64 "s", whole);
    else if (s < 3600)
        snprintf(dst, n, "%" PRIu64 "m%02" PRIu64 "s", whole / 60, whole % 60);
    else if (s < 86400)
        snprintf(dst, n, "%" PRIu64 "h%02" PRIu64 "m", whole / 3600, whole / 60 % 60);
    else
        snprintf(dst, n, "%" PRIu64 "d%02" PRIu64 "h", whole / 86400, whole / 3600 % 24);
}

static void integer(char *dst, size_t n, const json_t *v)
{
    if (json_is_integer(v))
        snprintf(dst, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(dst, n, "?");
}

static const char *str(const json_t *v, const char *dflt)
{
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static json_int_t sum_object(const json_t *o)
{
    const char *k;
    json_t *v;
    json_int_t total = 0;
    json_object_foreach((json_t *)o, k, v)
        total += json_is_integer(v) ? json_integer_value(v) : 0;
    return total;
}

static void header(const json_t *doc, tb_buf_t *out)
{
    char up[32], mqtt[32], http[32];
    duration(up, sizeof up, json_object_get(doc, "uptime_seconds"));
    const json_t *conns = json_object_get(doc, "connections");
    integer(mqtt, sizeof mqtt, json_object_get(conns, "mqtt"));
    integer(http, sizeof http, json_object_get(conns, "http"));
    tb_buf_printf(out, "tributary %s  edge %s  up %s  ", str(json_object_get(doc, "version"), "?"),
                  str(json_object_get(doc, "edge"), "-"), up);
    if (json_is_true(json_object_get(doc, "ready")))
        tb_buf_puts(out, "ready  ");
    else
        tb_buf_printf(out, "NOT READY (%s)  ", str(json_object_get(doc, "not_ready_reason"), "?"));
    if (json_is_false(json_object_get(doc, "healthy")))
        tb_buf_printf(out, "UNHEALTHY (%s)  ", str(json_object_get(doc, "unhealthy_reason"), "?"));
    else
        tb_buf_puts(out, "healthy  ");
    tb_buf_printf(out, "cluster %s  mqtt %s  http %s  ", str(json_object_get(json_object_get(doc, "cluster"), "state"), "?"),
                  mqtt, http);
    const json_t *inv = json_object_get(doc, "invariant_ok");
    tb_buf_printf(out, "invariant %s\n", json_is_true(inv) ? "ok" : json_is_false(inv) ? "BROKEN" : "?");
}

/* "listeners 0.0.0.0:1883 2 conns  0.0.0.0:8883 tls 36 conns 4 denied" (none: nothing) */
static void listeners(const json_t *doc, tb_buf_t *out)
{
    const json_t *ls = json_object_get(doc, "listeners");
    if (!json_is_array(ls) || json_array_size(ls) == 0)
        return;
    tb_buf_puts(out, "listeners");
    size_t i;
    const json_t *l;
    json_array_foreach(ls, i, l) {
        char conns[32];
        integer(conns, sizeof conns, json_object_get(l, "connections"));
        tb_buf_printf(out, "  %s%s %s conns", str(json_object_get(l, "listener"), "?"),
                      json_is_true(json_object_get(l, "tls")) ? " tls" : "", conns);
        const json_t *denied = json_object_get(l, "publish_denied");
        if (json_is_integer(denied) && json_integer_value(denied) > 0)
            tb_buf_printf(out, " %lld denied", (long long)json_integer_value(denied));
    }
    tb_buf_puts(out, "\n");
}

int cli_status_render(const json_t *doc, tb_buf_t *out)
{
    const json_t *topics = json_object_get(doc, "topics");
    if (!json_is_object(doc) || !json_is_array(topics))
        return TB_EMALFORMED;
    header(doc, out);
    listeners(doc, out);
    int w = 5; /* "TOPIC" */
    size_t i;
    const json_t *t;
    json_array_foreach(topics, i, t) {
        int n = (int)strlen(str(json_object_get(t, "topic"), "?"));
        w = n > w ? n : w;
    }
    if (json_array_size(topics) == 0) {
        tb_buf_puts(out, "no upstream topics\n");
        return 0;
    }
    tb_buf_printf(out, "%-*s  %-11s  %-10s  %8s  %7s  %8s  %8s\n", w, "TOPIC", "STATE", "DURABILITY", "QUEUED",
                  "LAG AGE", "DROPPED", "REJECTED");
    json_array_foreach(topics, i, t) {
        char queued[32], age[32], dropped[32], rejected[32];
        integer(queued, sizeof queued, json_object_get(t, "queued"));
        duration(age, sizeof age, json_object_get(t, "oldest_unreplicated_age_seconds"));
        /* what the log lost over its whole life (survives restarts), to the bound and to max_age;
         * an older gateway has only `dropped` */
        const json_t *lost = json_object_get(t, "wal_dropped_total");
        const json_t *aged = json_object_get(t, "wal_dropped_age_total");
        if (json_is_integer(lost) && json_is_integer(aged))
            snprintf(dropped, sizeof dropped, "%" JSON_INTEGER_FORMAT,
                     json_integer_value(lost) + json_integer_value(aged));
        else
            integer(dropped, sizeof dropped, lost ? lost : json_object_get(t, "dropped"));
        const json_t *rej = json_object_get(t, "rejected");
        if (json_is_object(rej))
            snprintf(rejected, sizeof rejected, "%" JSON_INTEGER_FORMAT, sum_object(rej));
        else
            snprintf(rejected, sizeof rejected, "?");
        const char *state = str(json_object_get(t, "state"), "?");
        bool broken = json_is_false(json_object_get(t, "invariant_ok"));
        const char *durability = str(json_object_get(t, "durability"), "?");
        tb_buf_printf(out, "%-*s  %-11s  %-10s  %8s  %7s  %8s  %8s%s\n", w, str(json_object_get(t, "topic"), "?"),
                      state, durability, queued, age, dropped, rejected, broken ? "  INVARIANT BROKEN" : "");
    }
    return 0;
}
