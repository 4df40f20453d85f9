/*
 * http_stats.c: the /stats document, one JSON object an operator (or
 * `tributary status`) reads to see whether data flows, how far behind it
 * is and what was lost:
 *
 *   { "version", "edge", "uptime_seconds", "healthy", "unhealthy_reason",
 *     "ready", "not_ready_reason", "invariant_ok", "unmatched",
 *     "event_loop_lag_seconds", "cluster": {"state", "up"},
 *     "connections": {"mqtt", "http", ..., "top_talkers": [{"client_id",
 *                     "messages_per_second"}]}, "process": {...},
 *     "listeners": [ {"listener", "tls", "connections", "publish_denied", "tls_read_pauses"} ],
 *     "topics": [ {"topic", "state", "received", "received_per_second", "stored", "replicated",
 *                  "queued", "dropped", "dropped_by_reason": {reason: n}, "dropped_age",
 *                  "rejected": {reason: n}, "wal_bytes",
 *                  ..., "stalled", "invariant_ok"} ],
 *     "outputs": [ {"output", "kind", "state", "last_error", "up", "attempts", ...,
 *                   "topics": [ {"topic", "acked_offset", "lag_messages", "sent", "resent", ...} ]} ] }
 *
 * Metric fields come from the catalog's json names (metrics_catalog.c), so
 * /stats and /metrics are the same numbers under names kept in one table;
 * the few fields that are not metrics are listed in http_stats_fields.
 * Topics are an array in label-set order (stable, and easy to select on
 * with jq: .topics[] | select(.stalled)).
 */
#include "gateway/http/http_int.h"
#include "base/base.h"

#include <string.h>

const char *const http_stats_fields[] = {
    "version", "edge", "uptime_seconds", "healthy", "unhealthy_reason", "ready", "not_ready_reason",
    "cluster.state", "cluster.problem", "problem", "dropped", "connections.top_talkers", "connections.top_talkers_window_seconds", "topics", "topic", "state", "durability", "received_per_second", "throttled_ms", "listeners", "listener", "tls",
    "outputs", "output", "kind", "last_error", "max_bytes_per_s", "max_messages_per_s", "sparkplug", NULL,
};

/* Sets root[a][b] for path "a.b" (objects created as needed), or root[path]. Steals v. */
static void set_path(json_t *root, const char *path, json_t *v)
{
    const char *dot = strchr(path, '.');
    if (!dot) {
        json_object_set_new(root, path, v);
        return;
    }
    char head[64];
    size_t n = (size_t)(dot - path) < sizeof head - 1 ? (size_t)(dot - path) : sizeof head - 1;
    memcpy(head, path, n);
    head[n] = '\0';
    json_t *child = json_object_get(root, head);
    if (!json_is_object(child)) {
        child = json_object();
        json_object_set_new(root, head, child);
    }
    set_path(child, dot + 1, v);
}

static json_t *entry_value(const metrics_entry_t *e, metrics_family_t *f, size_t i1)
{
    if (e->json_bool)
        return json_boolean(metrics_get(f, i1, 0) != 0);
    if (e->l1 != METRICS_L_NONE && e->l1 != METRICS_L_TOPIC) { /* gateway-wide, by reason: an object keyed by it */
        json_t *o = json_object();
        metrics_labels_t *l1 = metrics_family_label(f, 0);
        for (size_t j = 0; j < metrics_labels_count(l1); j++)
            json_object_set_new(o, metrics_labels_value(l1, j), metrics_json_value(f, j, 0));
        return o;
    }
    if (e->l2 != METRICS_L_NONE) { /* an object keyed by the second label */
        json_t *o = json_object();
        metrics_labels_t *l2 = metrics_family_label(f, 1);
        for (size_t j = 0; j < metrics_labels_count(l2); j++)
            json_object_set_new(o, metrics_labels_value(l2, j), metrics_json_value(f, i1, j));
        return o;
    }
    json_t *v = metrics_json_value(f, i1, 0);
    return v ? v : json_null();
}

static json_t *topic_object(http_service_t *s, size_t t)
{
    metrics_labels_t *topics = metrics_topics(s->m);
    http_topic_state_t st = s->p.topic_state ? s->p.topic_state(s->p.arg, t) : HTTP_TOPIC_UNKNOWN;
    json_t *o = json_pack("{s:s, s:s}", "topic", metrics_labels_value(topics, t), "state",
                          (unsigned)st < HTTP_TOPIC__COUNT ? http_topic_states[st] : "unknown");
    for (size_t i = 0; i < METRICS__COUNT; i++) {
        const metrics_entry_t *e = &metrics_catalog[i];
        if (e->json && e->l1 == METRICS_L_TOPIC)
            json_object_set_new(o, e->json, entry_value(e, metrics_fam(s->m, e->id), t));
    }
    /* the durability mode the collector marked (tributary_topic_mode): "log" for a log topic */
    metrics_family_t *mode = metrics_fam(s->m, METRICS_TOPIC_MODE);
    const char *dur = metrics_modes[0];
    for (size_t j = 0; j < METRICS_MODE__COUNT; j++)
        if (metrics_get(mode, t, j) != 0)
            dur = metrics_modes[j];
    json_object_set_new(o, "durability", json_string(dur));
    /* dropped as it was before tributary_messages_dropped_total had a reason: the log's drops (bound and
     * spill, and a forget's: the admin API deleted its log); max_age's are dropped_age beside it, and the
     * invariant's term is their sum */
    metrics_family_t *drop = metrics_fam(s->m, METRICS_DROPPED);
    json_object_set_new(o, "dropped", json_integer((json_int_t)(metrics_get(drop, t, METRICS_DROP_BOUND) +
                                                               metrics_get(drop, t, METRICS_DROP_SPILL) +
                                                               metrics_get(drop, t, METRICS_DROP_FORGOTTEN))));
    /* tributary_replication_throttled_seconds_total, in its raw milliseconds */
    json_object_set_new(o, "throttled_ms", json_integer((json_int_t)metrics_get(metrics_fam(s->m, METRICS_THROTTLED), t, 0)));
    /* over the page's last sample interval (http_history.c); null before two samples saw the topic */
    double r = http__history_topic_rate(s, t);
    json_object_set_new(o, "received_per_second", r >= 0 ? json_real(r) : json_null());
    char problem[300];
    bool has = s->p.topic_problem && s->p.topic_problem(s->p.arg, t, problem, sizeof problem);
    json_object_set_new(o, "problem", has ? json_string(problem) : json_null());
    return o;
}

/* One MQTT listener: the address it bound, whether it speaks TLS, and its metrics. */
static json_t *listener_object(http_service_t *s, metrics_labels_t *listeners, size_t l)
{
    json_t *o = json_pack("{s:s}", "listener", metrics_labels_value(listeners, l));
    json_object_set_new(o, "tls", s->p.listener_tls ? json_boolean(s->p.listener_tls(s->p.arg, l)) : json_null());
    for (size_t i = 0; i < METRICS__COUNT; i++) {
        const metrics_entry_t *e = &metrics_catalog[i];
        if (e->json && e->l1 == METRICS_L_LISTENER) {
            json_t *v = metrics_json_value(metrics_fam(s->m, e->id), l, 0);
            json_object_set_new(o, e->json, v ? v : json_null());
        }
    }
    return o;
}

static json_t *fam_value(const metrics_entry_t *e, metrics_family_t *f, size_t i1, size_t i2)
{
    if (e->json_bool)
        return json_boolean(metrics_get(f, i1, i2) != 0);
    json_t *v = metrics_json_value(f, i1, i2);
    return v ? v : json_null();
}

/* One output (issue 17): its words from the provider, its metrics, and per topic it carries its
 * lane's metrics (families labelled (output, topic)). */
static json_t *output_object(http_service_t *s, metrics_labels_t *outputs, size_t o)
{
    json_t *obj = json_pack("{s:s}", "output", metrics_labels_value(outputs, o));
    http_output_info_t info;
    memset(&info, 0, sizeof info);
    bool have = s->p.output_info && s->p.output_info(s->p.arg, o, &info);
    json_object_set_new(obj, "kind", have && info.kind ? json_string(info.kind) : json_null());
    json_object_set_new(obj, "state", have && info.state ? json_string(info.state) : json_null());
    json_object_set_new(obj, "last_error", have && info.last_error[0] ? json_string(info.last_error) : json_null());
    /* its rate caps (0: none) and the time its topics waited for them (rep_pace.c) */
    json_object_set_new(obj, "max_bytes_per_s", have ? json_integer((json_int_t)info.max_bytes_per_s) : json_null());
    json_object_set_new(obj, "max_messages_per_s", have ? json_integer((json_int_t)info.max_messages_per_s) : json_null());
    json_object_set_new(obj, "throttled_ms", have ? json_integer((json_int_t)info.throttled_ms) : json_null());
    if (have && info.spb.valid) /* kind sparkplug: its session (docs/SPARKPLUG.md, "/stats") */
        json_object_set_new(
            obj, "sparkplug",
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "phase",
                      info.spb.phase ? info.spb.phase : "?", "bdseq", (json_int_t)info.spb.bdseq, "seq",
                      (json_int_t)info.spb.seq, "connects", (json_int_t)info.spb.connects, "nbirths",
                      (json_int_t)info.spb.nbirths, "dbirths", (json_int_t)info.spb.dbirths, "data_messages",
                      (json_int_t)info.spb.data_msgs, "metrics", (json_int_t)info.spb.metrics, "confirmed",
                      (json_int_t)info.spb.confirmed, "unconfirmed", (json_int_t)info.spb.unconfirmed,
                      "rebirth_commands", (json_int_t)info.spb.rebirth_cmds, "deadline_ends",
                      (json_int_t)info.spb.deadline_ends, "host_online", info.spb.host_online));
    for (size_t i = 0; i < METRICS__COUNT; i++) {
        const metrics_entry_t *e = &metrics_catalog[i];
        if (e->json && e->l1 == METRICS_L_OUTPUT && e->l2 == METRICS_L_NONE)
            json_object_set_new(obj, e->json, fam_value(e, metrics_fam(s->m, e->id), o, 0));
    }
    json_t *lanes = json_array();
    metrics_labels_t *topics = metrics_topics(s->m);
    for (size_t t = 0; topics && t < metrics_labels_count(topics); t++) {
        if (!s->p.output_carries || !s->p.output_carries(s->p.arg, o, t))
            continue;
        json_t *l = json_pack("{s:s}", "topic", metrics_labels_value(topics, t));
        for (size_t i = 0; i < METRICS__COUNT; i++) {
            const metrics_entry_t *e = &metrics_catalog[i];
            if (e->json && e->l1 == METRICS_L_OUTPUT && e->l2 == METRICS_L_TOPIC)
                json_object_set_new(l, e->json, fam_value(e, metrics_fam(s->m, e->id), o, t));
        }
        json_array_append_new(lanes, l);
    }
    json_object_set_new(obj, "topics", lanes);
    return obj;
}

json_t *http_stats_json(http_service_t *s)
{
    metrics_collect(s->m);
    metrics_catalog_derive(s->m);

    char why[200];
    json_t *root = json_object();
    json_object_set_new(root, "version", json_string(TRIB_VERSION));
    json_object_set_new(root, "edge", s->opts.edge_name ? json_string(s->opts.edge_name) : json_null());
    int64_t start_ms = metrics_get(metrics_fam(s->m, METRICS_PROC_START_TIME), 0, 0);
    uint64_t now_ms = tb_wall_ms();
    json_object_set_new(root, "uptime_seconds",
                        start_ms > 0 && now_ms >= (uint64_t)start_ms ? json_real((double)(now_ms - (uint64_t)start_ms) / 1e3)
                                                                     : json_null());
    bool healthy = http_service_healthy(s, why, sizeof why);
    json_object_set_new(root, "healthy", json_boolean(healthy));
    json_object_set_new(root, "unhealthy_reason", healthy ? json_null() : json_string(why));
    bool ready = http_service_ready(s, why, sizeof why);
    json_object_set_new(root, "ready", json_boolean(ready));
    json_object_set_new(root, "not_ready_reason", ready ? json_null() : json_string(why));
    http_cluster_state_t cs = s->p.cluster_state ? s->p.cluster_state(s->p.arg) : HTTP_CLUSTER_UNKNOWN;
    set_path(root, "cluster.state", json_string((unsigned)cs < HTTP_CLUSTER__COUNT ? http_cluster_states[cs] : "unknown"));
    char problem[300];
    bool has = s->p.cluster_problem && s->p.cluster_problem(s->p.arg, problem, sizeof problem);
    set_path(root, "cluster.problem", has ? json_string(problem) : json_null());

    for (size_t i = 0; i < METRICS__COUNT; i++) {
        const metrics_entry_t *e = &metrics_catalog[i];
        if (e->json && e->l1 != METRICS_L_TOPIC && e->l1 != METRICS_L_LISTENER && e->l1 != METRICS_L_OUTPUT)
            set_path(root, e->json, entry_value(e, metrics_fam(s->m, e->id), 0));
    }

    json_t *talkers = json_null();
    double window = 0;
    if (s->p.top_talkers) {
        http_talker_t top[HTTP_TOP_TALKERS];
        size_t k = s->p.top_talkers(s->p.arg, top, HTTP_TOP_TALKERS, &window);
        talkers = json_array();
        for (size_t i = 0; i < k && i < HTTP_TOP_TALKERS; i++)
            json_array_append_new(talkers, json_pack("{s:s, s:f}", "client_id", top[i].client_id,
                                                     "messages_per_second", top[i].messages_per_second));
    }
    set_path(root, "connections.top_talkers", talkers);
    set_path(root, "connections.top_talkers_window_seconds", s->p.top_talkers ? json_real(window) : json_null());

    json_t *ls = json_array();
    metrics_labels_t *listeners = metrics_listeners(s->m);
    for (size_t l = 0; listeners && l < metrics_labels_count(listeners); l++)
        json_array_append_new(ls, listener_object(s, listeners, l));
    json_object_set_new(root, "listeners", ls);

    json_t *arr = json_array();
    size_t n = metrics_labels_count(metrics_topics(s->m));
    for (size_t t = 0; t < n; t++)
        json_array_append_new(arr, topic_object(s, t));
    json_object_set_new(root, "topics", arr);

    json_t *outs = json_array();
    metrics_labels_t *outputs = metrics_outputs(s->m);
    for (size_t o = 0; outputs && o < metrics_labels_count(outputs); o++)
        json_array_append_new(outs, output_object(s, outputs, o));
    json_object_set_new(root, "outputs", outs);
    return root;
}
