/*
 * admin.c: the admin API's ops over the running process (http_admin_ops_t;
 * the routes and the access rule are gateway/http/http_admin.c's).
 *
 * POST /admin/reload runs the reload SIGHUP runs (reload.c), on the loop
 * thread, synchronously: today's live keys are applied in place, without
 * waiting on anything (the deferred path is for the mapping reload of
 * RELOAD.md 2.3, whose registrations take the cluster's time). 503 before
 * the boot completes and once the shutdown has begun.
 *
 * GET /admin/config prints the configuration in force. A reload applies a
 * key only when its class is live (and its structure kept its shape); the
 * rest of the boot file stays in force until a restart. So the document is
 * the boot configuration with the keys the last applied reload named in
 * "applied" taken from that reload's file: exactly what runs, not what the
 * file on disk says (that may name restart keys, or be invalid).
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* key is PREFIX<i>SUFFIX*: i, else (size_t)-1. rest: what follows SUFFIX. */
static size_t indexed(const char *key, const char *prefix, const char *suffix, const char **rest)
{
    size_t n = strlen(prefix);
    if (strncmp(key, prefix, n) != 0)
        return (size_t)-1;
    char *end;
    unsigned long i = strtoul(key + n, &end, 10);
    if (end == key + n || strncmp(end, suffix, strlen(suffix)) != 0)
        return (size_t)-1;
    *rest = end + strlen(suffix);
    return i;
}

void gw__config_in_force(const cfg_t *boot, const gw__reload_state_t *st, FILE *out)
{
    if (!st || !st->in_force) {
        cfg_print(boot, out);
        return;
    }
    const cfg_t *nx = st->in_force;
    cfg_t view = *boot; /* shallow: its strings are boot's or nx's, both alive while it is printed */
    cfg_listener_t *lis = NULL;
    size_t k;
    json_t *v;
    json_array_foreach(st->in_force_keys, k, v) {
        const char *key = json_string_value(v), *rest;
        cfg_key_info_t info;
        size_t i;
        if (cfg_key_find(key, &info)) {
            memcpy((char *)&view + info.offset, (const char *)nx + info.offset, info.size);
        } else if (strncmp(key, "mqtt.topic_mappings", 19) == 0) {
            /* the mappings are applied whole (a generation): those of the file in force */
            view.mqtt.mappings = nx->mqtt.mappings;
            view.mqtt.nmappings = nx->mqtt.nmappings;
        } else if ((i = indexed(key, "mqtt.listeners[", "].tls.", &rest)) < boot->mqtt.nlisteners &&
                   i < nx->mqtt.nlisteners) {
            /* applied only while the listeners kept their shape: every tls key but read_coalesce_ms is live */
            if (!lis) {
                lis = tb_calloc(boot->mqtt.nlisteners, sizeof *lis);
                memcpy(lis, boot->mqtt.listeners, boot->mqtt.nlisteners * sizeof *lis);
                view.mqtt.listeners = lis;
            }
            uint32_t coalesce = lis[i].tls.read_coalesce_ms;
            lis[i].tls = nx->mqtt.listeners[i].tls;
            lis[i].tls.read_coalesce_ms = coalesce;
        } else {
            tb_warn("admin config: an applied key not shown as in force", TB_S("key", key));
        }
    }
    cfg_print(&view, out);
    free(lis);
}

static json_t *op_reload(void *arg, int *status)
{
    gw__run_t *r = arg;
    if (r->app->stopping || !r->booted) {
        *status = 503;
        return json_pack("{s:s, s:{s:s}}", "result", "refused", "error", "message",
                         r->app->stopping ? "shutting down" : "the gateway is still starting");
    }
    json_t *ans = gw__reload(r->broker, r->http, r->app->cfg, r->reload);
    *status = strcmp(json_string_value(json_object_get(ans, "result")), "refused") == 0 ? 422 : 200;
    return ans;
}

static json_t *op_last_reload(void *arg)
{
    gw__run_t *r = arg;
    return json_incref(r->reload->last);
}

static void op_config(void *arg, tb_buf_t *out)
{
    gw__run_t *r = arg;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        tb_buf_puts(out, "# cannot print the configuration: out of memory\n");
        return;
    }
    gw__config_in_force(r->app->cfg, r->reload, f);
    fclose(f);
    tb_buf_append(out, text, len);
    free(text);
}

void gw__admin_ops(gw__run_t *r, http_admin_ops_t *out)
{
    *out = (http_admin_ops_t){ .arg = r, .reload = op_reload, .last_reload = op_last_reload, .config = op_config };
    gw__admin_drain_ops(r, out); /* pause, resume, drain */
    gw__dlq_ops(out); /* dlq.c */
}
