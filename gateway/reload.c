/*
 * reload.c: SIGHUP and POST /admin/reload (one function, one answer: the
 * JSON of RELOAD.md 3.3, logged by SIGHUP and returned by the admin API).
 * The file named by the running configuration is read
 * again, checked as `tributary check` checks it (gw_check: a file the next
 * start would refuse is refused now, whole, and changes nothing), and
 * compared key by key with the running configuration (cfg_diff).
 *
 * Which changed keys are applied is the key table's reload class
 * (cfg_reload_class, the RL flag in config/config_table.c): a key of class
 * LIVE goes to its applier below, any other key is named in one log line as
 * needing a restart, so an operator never believes a change took effect
 * when it did not. The appliers (a unit test holds them to the LIVE keys,
 * tests/unit/gateway/test_reload_keys.c):
 *
 * log.level, log.format: at once. mqtt.topic_mappings[i].validation_policy:
 * when every other key of that mapping is unchanged (the rule keeps its
 * place; only the policy flips: in a reordered or edited mapping the index
 * would name another rule, so the policy then needs a restart with the
 * rest). auth.* and http.auth_token_file: the password, ACL and token files
 * are read again at every SIGHUP, changed or not, and swapped in together
 * (a check in flight ends with the old ones). The TLS listeners'
 * certificates, keys and CAs, read again too and given to new handshakes
 * (established connections keep theirs), with their mqtt.listeners[i].tls.*
 * keys while the listeners stay the same, and so the HTTP endpoint's
 * (http.tls.*, while http.listener and whether it is TLS stay the same); a
 * file that does not load refuses the whole reload, with its file (and
 * line). An invalid file is refused with its error (file, line, key) and
 * changes nothing.
 */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    broker_t *b;
    gw__run_t *run;         /* NULL: no gateway runs (check) */
    const cfg_t *next;
    const cfg_t *prev;      /* the configuration in force before this reload */
    const cfg_t *boot;      /* the file the gateway started with */
    json_t *outputs_done;   /* output name -> true (added, removed or replaced) / false (restart) */
    bool tls_keys;          /* the listeners kept their shape: their tls.* keys were applied */
    bool http_tls_keys;     /* the HTTP endpoint kept its address and its TLS: http.tls.* applied */
    bool mappings;          /* the mappings' new generation is in force */
    char restart[1024];
    size_t restart_len;
    int applied;
    json_t *applied_keys;   /* the answer's "applied": every key cfg_diff named that is in force now */
    json_t *restart_keys;   /* the answer's "restart_needed" (all of them, restart[] may be cut) */
} reload_t;

#define MAPPINGS_PREFIX "mqtt.topic_mappings["

static void need_restart(reload_t *r, const char *key)
{
    json_array_append_new(r->restart_keys, json_string(key));
    size_t n = strlen(key);
    if (r->restart_len + n + 2 < sizeof r->restart) {
        if (r->restart_len)
            r->restart[r->restart_len++] = ' ';
        memcpy(r->restart + r->restart_len, key, n);
        r->restart_len += n;
        r->restart[r->restart_len] = '\0';
    }
}

/* An applier: true when the change is applied (or is applied with the files
 * gw__reload loads), false when it needs a restart this time after all
 * (the structure around it changed). */
static bool apply_log_level(reload_t *r, const char *key)
{
    (void)key;
    tb_log_set_level((tb_log_level_t)r->next->log.level);
    tb_info("reload: log.level applied", TB_S("level", tb_log_level_name((tb_log_level_t)r->next->log.level)));
    r->applied++;
    return true;
}

static bool apply_log_format(reload_t *r, const char *key)
{
    (void)key;
    tb_log_setup(tb_log_get_level(), (tb_log_format_t)r->next->log.format, 2);
    tb_info("reload: log.format applied");
    r->applied++;
    return true;
}

/* Every key of the mappings and mqtt.unmatched: applied together, as one new
 * generation (broker_plan_commit, before the diff passes), or not at all. */
static bool apply_mappings(reload_t *r, const char *key)
{
    (void)key;
    return r->mappings;
}

static bool apply_with_files(reload_t *r, const char *key)
{
    (void)r;
    (void)key;
    return true; /* the files were loaded and swapped in by gw__reload, changed or not */
}

static bool apply_http_tls(reload_t *r, const char *key)
{
    if (!r->http_tls_keys)
        return false;
    tb_info("reload: HTTP TLS setting applied to new handshakes", TB_S("key", key));
    r->applied++;
    return true; /* with the certificate (gw__reload) */
}

static bool apply_listener_tls(reload_t *r, const char *key)
{
    if (!r->tls_keys)
        return false;
    tb_info("reload: TLS listener setting applied to new handshakes", TB_S("key", key));
    r->applied++;
    return true; /* with the certificates (gw__reload) */
}

/* Read at each refusal of a poison batch (rep_poison.c): a held batch is
 * judged by the new bound at its next refusal. */
static bool apply_max_attempts(reload_t *r, const char *key)
{
    (void)key;
    rep_engine_t *e = r->run && r->run->repl ? gw_repl_engine(r->run->repl) : NULL;
    if (e)
        rep_engine_set_max_attempts(e, r->next->replicator.max_attempts);
    /* no engine (before the boot's end, after the drain): it starts with the file in force */
    tb_info("reload: replicator.max_attempts applied", TB_U("max_attempts", r->next->replicator.max_attempts));
    r->applied++;
    return true;
}

/* Read at the next step of each retiring topic (retire.c); keep -> remove retires the kept ones. */
static bool apply_retire(reload_t *r, const char *key)
{
    (void)key;
    if (r->run && r->run->repl)
        gw_repl_set_retire(r->run->repl, r->next->wal.retire);
    tb_info("reload: wal.retire applied", TB_S("retire", r->next->wal.retire == CFG_RETIRE_KEEP ? "keep" : "remove"));
    r->applied++;
    return true;
}

/* ---- outputs (docs/design/OUTPUTS.md 3.4, 3.5) -------------------------------------- */

/* "outputs[NAME]..." -> NAME; false when key is not an output's */
static bool output_name(const char *key, char *name, size_t n)
{
    const char *close = strncmp(key, "outputs[", 8) == 0 ? strchr(key + 8, ']') : NULL;
    if (!close)
        return false;
    snprintf(name, n, "%.*s", (int)(close - key - 8), key + 8);
    return true;
}

static const cfg_output_t *find_output(const cfg_t *c, const char *name)
{
    for (size_t i = 0; c && i < c->noutputs; i++)
        if (strcmp(c->outputs[i].name, name) == 0)
            return &c->outputs[i];
    return NULL;
}

/* Whether a reload applies a change of this output's keys: mqtt and sparkplug outputs (added,
 * removed or replaced alone); a danube output's need a restart. */
static bool output_is_live(const reload_t *r, const char *key)
{
    char name[128];
    if (!output_name(key, name, sizeof name))
        return false;
    const cfg_output_t *o = find_output(r->next, name);
    if (!o)
        o = find_output(r->prev, name);
    if (!o) /* removed at an earlier reload: the boot pass still sees it */
        o = find_output(r->boot, name);
    return o && o->kind != CFG_OUTPUT_DANUBE;
}

/* outputs[NAME].max_bytes_per_s / max_messages_per_s: the running output's pacer takes both
 * (rep_engine_set_rates, on its thread), held from then on; nothing is dropped or resent. */
static bool apply_output_rates(reload_t *r, const char *key)
{
    char name[128];
    const cfg_output_t *oc = output_name(key, name, sizeof name) ? find_output(r->next, name) : NULL;
    if (!oc)
        return false;
    if (json_is_true(json_object_get(r->outputs_done, name)))
        return true; /* replaced at this reload: the new instance starts with these caps */
    rep_engine_t *e = r->run && r->run->repl ? gw_repl_engine(r->run->repl) : NULL;
    if (e && rep_engine_output_pending(e, name))
        return true; /* being replaced: the new instance starts with this file (rep_engine_pending_config) */
    if (e && rep_engine_set_rates(e, name, oc->max_bytes_per_s, oc->max_messages_per_s) < 0)
        return false; /* not an output that runs: a restart */
    tb_info("reload: output rate caps applied", TB_S("output", name), TB_S("key", key),
            TB_U("max_bytes_per_s", oc->max_bytes_per_s), TB_U("max_messages_per_s", oc->max_messages_per_s));
    r->applied++;
    return true;
}

/* Every key of an mqtt or sparkplug output but its caps: the output is added, removed or
 * replaced, once per reload whatever the number of its keys that changed. A replace removes the
 * running instance (what it has in flight gets replicator.shutdown_grace_ms, Sparkplug its
 * NDEATH) and starts the new one from its checkpoints once the old one stopped; what arrives
 * meanwhile is kept in the log (memory_first topics spill: no output confirms). The others are
 * not touched. gw__reload checked the new one's files before anything changed. */
static bool apply_output(reload_t *r, const char *key)
{
    char name[128];
    if (!output_is_live(r, key) || !output_name(key, name, sizeof name))
        return false;
    json_t *done = json_object_get(r->outputs_done, name);
    if (done)
        return json_is_true(done);
    const cfg_output_t *now = find_output(r->next, name), *before = find_output(r->prev, name);
    rep_engine_t *e = r->run && r->run->repl ? gw_repl_engine(r->run->repl) : NULL;
    bool ok = true;
    const char *what = now && before ? "replaced" : now ? "added" : "removed";
    char err[512] = "";
    if (e && now && rep_engine_output_room(e) == 0 && !rep_engine_output_pending(e, name)) {
        snprintf(err, sizeof err, "%d outputs were added or replaced since the start", REP_RUNTIME_OUTPUTS);
        tb_error("reload: the output could not be changed, nothing stopped; a restart applies the file",
                 TB_S("output", name), TB_S("error", err));
        json_object_set_new(r->outputs_done, name, json_false());
        return false;
    }
    if (e) {
        int rc = 0;
        if (before)
            rc = rep_engine_remove_output(e, name);
        if (rc == -ENOENT)
            rc = 0; /* not running (removed before, or it failed to start): nothing to stop */
        if (rc >= 0 && now)
            rc = rep_engine_add_output(e, r->next, name, err, sizeof err);
        ok = rc >= 0;
        if (!ok)
            tb_error("reload: the output could not be changed; a restart applies the file", TB_S("output", name),
                     TB_S("error", *err ? err : tb_strerror(rc)));
    }
    if (ok) {
        tb_info("reload: output changed, the others untouched", TB_S("output", name), TB_S("change", what));
        r->applied++;
    }
    json_object_set_new(r->outputs_done, name, json_boolean(ok));
    return ok;
}

/* Before anything changes: an output whose kind changed under its name is refused, and the
 * files of every mqtt or sparkplug output this reload adds or replaces must load. */
static void changed_output(void *arg, const char *key)
{
    char name[128];
    if (output_name(key, name, sizeof name))
        json_object_set_new((json_t *)arg, name, json_true());
}

static int check_outputs(const cfg_t *prev, const cfg_t *next, cfg_err_t *e)
{
    json_t *changed = json_object();
    cfg_diff(prev, next, changed_output, changed);
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(changed, name, v) {
        const cfg_output_t *a = find_output(prev, name), *b = find_output(next, name);
        char key[160], why[512];
        if (a && b && a->kind != b->kind) {
            snprintf(key, sizeof key, "outputs[%s].kind", name);
            snprintf(why, sizeof why, "an output's kind cannot change under its name (%s -> %s): rename the output",
                     cfg_output_kind_name(a->kind), cfg_output_kind_name(b->kind));
            cfg_err_set(e, next->source, 0, 0, key, why);
            rc = TB_ECONFIG;
            break;
        }
        if (b && b->kind != CFG_OUTPUT_DANUBE && rep_output_check(next, name, why, sizeof why) < 0) {
            snprintf(key, sizeof key, "outputs[%s]", name);
            cfg_err_set(e, next->source, 0, 0, key, why);
            rc = TB_ECONFIG;
            break;
        }
    }
    json_decref(changed);
    return rc;
}

/* fnmatch patterns over cfg_diff's paths (a backslash makes a bracket literal). */
static const struct {
    const char *pattern;
    bool (*apply)(reload_t *r, const char *key);
} appliers[] = {
    { "log.level", apply_log_level },
    { "log.format", apply_log_format },
    { "mqtt.topic_mappings", apply_mappings },
    { "mqtt.topic_mappings\\[*\\].*", apply_mappings },
    { "mqtt.unmatched", apply_mappings },
    { "auth.*", apply_with_files },
    { "http.auth_token_file", apply_with_files },
    { "http.admin_token_file", apply_with_files },
    { "http.tls.*", apply_http_tls },
    { "mqtt.listeners\\[*\\].tls.*", apply_listener_tls },
    { "replicator.max_attempts", apply_max_attempts },
    { "wal.retire", apply_retire },
    { "outputs\\[*\\].max_bytes_per_s", apply_output_rates },
    { "outputs\\[*\\].max_messages_per_s", apply_output_rates },
    { "outputs\\[*\\]", apply_output },   /* added or removed */
    { "outputs\\[*\\].*", apply_output }, /* any other key, "tls" on or off included */
};

/* tls.* keys a reload does not apply: read when a connection is accepted
 * from the listener's configuration of the start (restart class). */
static const char *const not_applied[] = {
    "mqtt.listeners\\[*\\].tls.read_coalesce_ms",
    "mqtt.topic_mappings\\[*\\].priority",   /* an existing topic keeps its own until a restart */
    "mqtt.topic_mappings\\[*\\].durability", /* likewise (wal_topic_set_durability: before its first batch) */
};

static int applier_of(const char *key)
{
    for (size_t i = 0; i < TB_ARRAY_LEN(not_applied); i++)
        if (fnmatch(not_applied[i], key, 0) == 0)
            return -1;
    for (size_t i = 0; i < TB_ARRAY_LEN(appliers); i++)
        if (fnmatch(appliers[i].pattern, key, 0) == 0)
            return (int)i;
    return -1;
}

bool gw__reload_applies(const char *key)
{
    return applier_of(key) >= 0;
}

/* First pass, against the configuration in force (the last applied file, or
 * the boot one): a live key that differs from what runs is applied. */
static void on_diff(void *arg, const char *key)
{
    reload_t *r = arg;
    if (cfg_reload_class(key) != CFG_RELOAD_LIVE)
        return; /* the second pass names it: against the boot file, which is what runs */
    int a = applier_of(key);
    if (a >= 0 && appliers[a].apply(r, key)) {
        json_array_append_new(r->applied_keys, json_string(key));
        return;
    }
    if (a < 0) /* the unit test holds the appliers to the table: not reached */
        tb_error("reload: a key of reload class live has no applier; named as needing a restart",
                 TB_S("key", key));
    need_restart(r, key);
}

static bool named(json_t *keys, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach(keys, i, v)
        if (strcmp(json_string_value(v), key) == 0)
            return true;
    return false;
}

/* Second pass, against the boot file: a restart-class key runs with its boot
 * value until a restart, so it is named at every reload whose file differs
 * from it there (changed back: no longer named). A live key whose structure
 * changed since the boot (the listeners' tls.* keys once the listeners
 * differ) cannot apply either, changed at this reload or before. */
static void on_diff_boot(void *arg, const char *key)
{
    reload_t *r = arg;
    if (named(r->applied_keys, key) || named(r->restart_keys, key))
        return;
    if (cfg_reload_class(key) == CFG_RELOAD_LIVE) {
        int a = applier_of(key);
        bool shape = !(a >= 0 && appliers[a].apply == apply_listener_tls && !r->tls_keys) &&
                     !(a >= 0 && appliers[a].apply == apply_http_tls && !r->http_tls_keys) &&
                     !(a >= 0 && appliers[a].apply == apply_output && !output_is_live(r, key));
        if (a >= 0 && shape)
            return;
    }
    need_restart(r, key);
}

/* The same listeners, at the same addresses, the same ones TLS. */
static bool same_listeners(const cfg_t *a, const cfg_t *b)
{
    if (a->mqtt.nlisteners != b->mqtt.nlisteners)
        return false;
    for (size_t i = 0; i < a->mqtt.nlisteners; i++)
        if (strcmp(a->mqtt.listeners[i].address, b->mqtt.listeners[i].address) != 0 ||
            a->mqtt.listeners[i].has_tls != b->mqtt.listeners[i].has_tls)
            return false;
    return a->mqtt.nlisteners || strcmp(a->mqtt.listener, b->mqtt.listener) == 0;
}

/* The HTTP endpoint at the same address, TLS or plain as before. */
static bool same_http(const cfg_t *a, const cfg_t *b)
{
    return strcmp(a->http.listener, b->http.listener) == 0 && a->http.has_tls == b->http.has_tls;
}

static void free_token(char *token)
{
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
}

/* The answer of a reload that changed nothing (RELOAD.md 3.3): refused, its
 * error as cfg_err_t's fields. Logs it (the words the operators and the
 * tests know). */
static json_t *refused(const cfg_t *running, uint64_t t0, const char *what, const cfg_err_t *e)
{
    tb_error(what, TB_S("file", e->file), TB_I("line", e->line), TB_S("key", e->key), TB_S("why", e->text));
    return json_pack("{s:s, s:s, s:I, s:{s:s, s:i, s:i, s:s, s:s, s:s}, s:[], s:[], s:b}", "result", "refused",
                     "source", running->source, "duration_ms", (json_int_t)(tb_mono_ms() - t0), "error", "file",
                     e->file, "line", e->line, "column", e->column, "key", e->key, "message", e->message, "text",
                     e->text, "applied", "restart_needed", "file_valid", 0);
}

/* A failure of the loads after gw_check (a file changed between them): err is "key: file: why". */
static json_t *refused_text(const cfg_t *running, const cfg_t *next, uint64_t t0, const char *what, const char *err)
{
    cfg_err_t e;
    char key[128] = "";
    const char *msg = err, *colon = strchr(err, ':');
    size_t n = colon ? (size_t)(colon - err) : 0;
    if (n && n < sizeof key && !memchr(err, ' ', n)) { /* "http.tls.cert_file: FILE: why" */
        memcpy(key, err, n);
        key[n] = '\0';
        for (msg = colon + 1; *msg == ' '; msg++)
            ;
    }
    cfg_err_set(&e, next->source, 0, 0, key, msg);
    return refused(running, t0, what, &e);
}

static void count_diff(void *arg, const char *key)
{
    (void)key;
    (*(size_t *)arg)++;
}

void gw__reload_state_free(gw__reload_state_t *st)
{
    cfg_free(st->in_force);
    json_decref(st->in_force_keys);
    json_decref(st->last);
    memset(st, 0, sizeof *st);
}

static json_t *remember(gw__reload_state_t *st, json_t *answer)
{
    if (st) {
        json_decref(st->last);
        st->last = json_incref(answer);
        st->file_valid = json_is_true(json_object_get(answer, "file_valid"));
    }
    return answer;
}

static void mapping_diff(void *arg, const char *key)
{
    if (strncmp(key, "mqtt.topic_mappings", 19) == 0 || strcmp(key, "mqtt.unmatched") == 0)
        *(bool *)arg = true;
}

/*
 * After broker_plan_commit: the added topics get their metrics label and are
 * given to the replicator (a lane on each output that carries them, declared
 * to the cluster); changed ones are told. The answer's "topics" (RELOAD.md
 * 3.3): a new topic's registration is "pending" (its outcome, registered or
 * refused with the cluster's text, follows in the log and /stats: the reload
 * does not wait for the cluster), or "refused" here when the replicator
 * could not take it (then it is logged, not replicated until a restart).
 */
static json_t *mappings_applied(broker_t *b, gw__reload_state_t *st, const broker_plan_t *p, const cfg_t *next)
{
    gw__run_t *run = st ? st->run : NULL;
    json_t *added = json_array(), *retiring = json_array(), *changed = json_array();
    for (size_t k = 0; k < p->nadded; k++) {
        size_t id = p->added[k];
        broker_topic_t *t = broker_topic(b, id);
        if (run && run->metric_topic)
            run->metric_topic[id] = metrics_topic_add(run->metrics, t->name);
        char err[512] = "";
        int rc = run && run->repl ? gw_repl_topic_added(run->repl, id, next, err, sizeof err) : TB_ECLOSED;
        if (rc < 0 && rc != TB_ECLOSED)
            tb_error("reload: a new topic is logged but not replicated until a restart", TB_S("topic", t->name),
                     TB_S("why", err));
        tb_info("reload: topic added", TB_S("topic", t->name), TB_U("id", id),
                TB_S("schema_subject", t->schema_subject ? t->schema_subject : ""));
        json_array_append_new(added, rc < 0 && rc != TB_ECLOSED
                                         ? json_pack("{s:s, s:s, s:s}", "topic", t->name, "registration", "refused",
                                                     "error", err)
                                         : json_pack("{s:s, s:s}", "topic", t->name, "registration", "pending"));
    }
    for (size_t k = 0; k < p->nleaving; k++) {
        broker_topic_t *t = broker_topic(b, p->leaving[k]);
        rep_topic_stats_t rs;
        memset(&rs, 0, sizeof rs);
        if (run && run->repl)
            gw_repl_topic_stats(run->repl, t->id, &rs);
        tb_info("reload: no mapping routes to this topic any more; its backlog keeps replicating, then it is "
                "retired (wal.retire)", TB_S("topic", t->name), TB_U("backlog_messages", rs.lag_messages));
        json_array_append_new(retiring, json_pack("{s:s, s:I, s:I}", "topic", t->name, "backlog_messages",
                                                  (json_int_t)rs.lag_messages, "backlog_bytes",
                                                  (json_int_t)rs.lag_bytes));
    }
    json_t *revived = json_array();
    for (size_t k = 0; k < p->nrevived; k++) {
        broker_topic_t *t = broker_topic(b, p->revived[k]);
        broker_topic_life_t before = p->revived_life[k];
        char err[512] = "";
        int rc = run && run->repl ? gw_repl_topic_revived(run->repl, t->id, before, next, err, sizeof err) : 0;
        if (rc < 0)
            tb_error("reload: a topic mapped again is logged but not replicated until a restart",
                     TB_S("topic", t->name), TB_S("why", err));
        tb_info("reload: a mapping routes to this topic again", TB_S("topic", t->name),
                TB_S("was", broker_topic_life_name(before)),
                TB_U("next_offset", wal_topic_readable_end(t->wal)));
        json_array_append_new(revived, json_string(t->name));
    }
    for (size_t k = 0; k < p->nchanged; k++) {
        broker_topic_t *t = broker_topic(b, p->changed[k]);
        unsigned how = p->changed_how[k];
        json_t *keys = json_array();
        if (how & BROKER_CHANGED_SUBJECT)
            json_array_append_new(keys, json_string("schema_subject"));
        if (how & BROKER_CHANGED_ON_FULL)
            json_array_append_new(keys, json_string("on_full"));
        if (how & BROKER_CHANGED_MAX_AGE)
            json_array_append_new(keys, json_string("max_age"));
        if (how & BROKER_CHANGED_KEPT)
            tb_warn("reload: a topic keeps its durability until a restart", TB_S("topic", t->name));
        if (run && run->repl && (how & (BROKER_CHANGED_SUBJECT | BROKER_CHANGED_MAX_AGE)))
            gw_repl_topic_changed(run->repl, t->id, how & BROKER_CHANGED_SUBJECT);
        json_array_append_new(changed, json_pack("{s:s, s:o}", "topic", t->name, "keys", keys));
    }
    if (run && run->repl)
        gw_repl_retire_tick(run->repl); /* a retiring topic already drained goes on now */
    return json_pack("{s:o, s:o, s:o, s:o}", "added", added, "revived", revived, "retiring", retiring, "changed",
                     changed);
}

json_t *gw__reload(broker_t *b, http_service_t *http, const cfg_t *running, gw__reload_state_t *st)
{
    uint64_t t0 = tb_mono_ms();
    if (strcmp(running->source, "<embedded default>") == 0) {
        tb_info("SIGHUP: running on the embedded default, no file to reload");
        cfg_err_t e;
        cfg_err_set(&e, running->source, 0, 0, "", "running on the embedded default: there is no file to reload");
        return remember(st, json_pack("{s:s, s:s, s:I, s:{s:s, s:i, s:i, s:s, s:s, s:s}, s:[], s:[], s:b}",
                                      "result", "refused", "source", running->source, "duration_ms",
                                      (json_int_t)(tb_mono_ms() - t0), "error", "file", e.file, "line", 0, "column",
                                      0, "key", "", "message", e.message, "text", e.text, "applied",
                                      "restart_needed", "file_valid", 1));
    }
    cfg_t *next;
    char err[1024];
    cfg_err_t e;
    if (cfg_load_ex(running->source, NULL, &next, &e) < 0)
        return remember(st, refused(running, t0, "SIGHUP: the configuration file is invalid; nothing changed", &e));
    if (gw_check(next, &e) < 0) {
        /* the words of the loads below, which an operator (and the tests) know */
        const char *what = strncmp(e.key, "auth.", 5) == 0
                               ? "SIGHUP: an authentication file is invalid; nothing changed, the files in force are kept"
                           : strstr(e.key, "token_file") ? "SIGHUP: the HTTP token file is invalid; nothing changed"
                           : strstr(e.key, "tls")
                               ? "SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates "
                                 "in force are kept"
                               : "SIGHUP: the configuration fails `tributary check`; nothing changed";
        cfg_free(next);
        return remember(st, refused(running, t0, what, &e));
    }
    /* The mappings (and mqtt.unmatched) against those in force: a new
     * generation compiled off to the side and the new topics' logs opened,
     * before anything else changes; a failure refuses the whole reload. */
    const cfg_t *prev = st && st->in_force ? st->in_force : running;
    if (check_outputs(prev, next, &e) < 0) {
        cfg_free(next);
        return remember(st, refused(running, t0, "SIGHUP: an output cannot be changed so; nothing changed", &e));
    }
    bool maps = false;
    cfg_diff(prev, next, mapping_diff, &maps);
    broker_plan_t *plan = NULL;
    if (b && maps && (broker_plan_new(b, next, &plan, err, sizeof err) < 0 ||
                      broker_plan_open(b, plan, err, sizeof err) < 0)) {
        broker_plan_free(plan);
        cfg_err_t pe;
        cfg_err_set(&pe, next->source, 0, 0, "mqtt.topic_mappings", err);
        cfg_free(next);
        return remember(st, refused(running, t0, "SIGHUP: the mappings cannot be applied; nothing changed", &pe));
    }
    auth_passwd_t *pw;
    auth_acl_t *acl;
    json_t *ans;
    if (gw_auth_load(next, &pw, &acl, err, sizeof err) < 0) {
        ans = refused_text(running, next, t0,
                           "SIGHUP: an authentication file is invalid; nothing changed, the files in force are kept",
                           err);
        broker_plan_free(plan);
        cfg_free(next);
        return remember(st, ans);
    }
    char *token, *admin_token = NULL;
    if (gw_http_token_load(next, &token, err, sizeof err) < 0 ||
        gw_admin_token_load(next, &admin_token, err, sizeof err) < 0) {
        free_token(token);
        ans = refused_text(running, next, t0, "SIGHUP: the HTTP token file is invalid; nothing changed", err);
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        broker_plan_free(plan);
        cfg_free(next);
        return remember(st, ans);
    }
    /* The certificates are read again at every SIGHUP, changed or not. With
     * the same listeners (addresses, which are TLS) the new file's tls keys
     * apply too; otherwise that needs a restart, and the running file's are
     * read again (same paths, new contents: a rotation). */
    bool same = same_listeners(running, next);
    broker_tls_t *tls;
    if (broker_tls_load(same ? next : running, &tls, err, sizeof err) < 0) {
        ans = refused_text(running, next, t0,
                           "SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates in "
                           "force are kept", err);
        free_token(token);
        free_token(admin_token);
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        broker_plan_free(plan);
        cfg_free(next);
        return remember(st, ans);
    }
    /* The HTTP endpoint's the same way: its http.tls keys apply while it
     * keeps its address and its TLS, else the running file's are read again. */
    bool same_h = same_http(running, next);
    tls_ctx_t *http_tls = NULL;
    if (gw__http_tls_load(same_h ? next : running, &http_tls, err, sizeof err) < 0) {
        ans = refused_text(running, next, t0,
                           "SIGHUP: a TLS certificate or key does not load; nothing changed, the certificates in "
                           "force are kept", err);
        broker_tls_free(tls);
        free_token(token);
        free_token(admin_token);
        auth_passwd_unref(pw);
        auth_acl_unref(acl);
        broker_plan_free(plan);
        cfg_free(next);
        return remember(st, ans);
    }
    if (http) {
        http_service_set_token(http, token);
        http_service_set_admin_token(http, admin_token);
        if (http_tls) {
            http_service_set_tls(http, http_tls); /* logs "http TLS certificate reloaded" */
            http_tls = NULL;
        }
    }
    tls_ctx_unref(http_tls);
    free_token(token);
    free_token(admin_token);
    if (b) {
        broker_set_tls(b, tls); /* logs each listener's certificate: "mqtt TLS certificate reloaded" */
        tls = NULL;
    }
    broker_tls_free(tls);
    if (b) {
        broker_set_auth(b, next, pw, acl);
        if (*next->auth.password_file || *next->auth.acl_file)
            tb_info("reload: authentication files applied", TB_U("users", pw ? auth_passwd_count(pw) : 0),
                    TB_U("acl_rules", acl ? auth_acl_rules(acl) : 0));
    }
    auth_passwd_unref(pw);
    auth_acl_unref(acl);
    /* "unchanged": no key differs from the file in force before (its files were read again all the same) */
    size_t changed = 0;
    cfg_diff(st && st->in_force ? st->in_force : running, next, count_diff, &changed);
    reload_t r = { .b = b, .run = st ? st->run : NULL, .next = next, .prev = prev, .boot = running, .tls_keys = same,
                   .http_tls_keys = same_h, .applied_keys = json_array(), .restart_keys = json_array(),
                   .outputs_done = json_object() };
    json_t *topics = NULL;
    uint64_t gen_before = b ? broker_generation(b) : 0;
    size_t rules_before = b ? broker_nrules(b) : 0;
    if (plan) {
        broker_plan_commit(b, plan); /* the swap: old rules or new, never neither (RELOAD.md 2.4) */
        r.mappings = true;
        topics = mappings_applied(b, st, plan, next);
        tb_info("reload: mappings applied", TB_U("generation", broker_generation(b)),
                TB_U("rules", broker_nrules(b)), TB_U("added", plan->nadded), TB_U("retiring", plan->nleaving),
                TB_U("changed", plan->nchanged), TB_U("revived", plan->nrevived));
        broker_plan_free(plan);
        plan = NULL;
    }
    if (b) {
        cfg_diff(prev, next, on_diff, &r);
        cfg_diff(running, next, on_diff_boot, &r);
        rep_engine_t *eng = r.run && r.run->repl ? gw_repl_engine(r.run->repl) : NULL;
        if (eng)
            rep_engine_pending_config(eng, next); /* an output still being replaced starts with this file */
    }
    if (r.restart_len)
        tb_warn("SIGHUP: these changes need a restart and were not applied", TB_S("keys", r.restart));
    tb_info("SIGHUP: reload done", TB_I("applied", r.applied), TB_B("restart_needed", r.restart_len > 0));
    ans = json_pack("{s:s, s:s, s:I, s:n, s:O, s:O, s:b, s:I, s:I}", "result", changed ? "applied" : "unchanged",
                    "source", running->source, "duration_ms", (json_int_t)(tb_mono_ms() - t0), "error", "applied",
                    r.applied_keys, "restart_needed", r.restart_keys, "file_valid", 1, "generation",
                    (json_int_t)(b ? broker_generation(b) : 0), "previous_generation", (json_int_t)gen_before);
    if (topics) {
        json_object_set_new(ans, "rules", json_pack("{s:I, s:I}", "before", (json_int_t)rules_before, "after",
                                                    (json_int_t)broker_nrules(b)));
        json_object_set_new(ans, "topics", topics);
    }
    if (st && b) {
        /* The configuration in force is replaced: the next reload compares its
         * live keys with this file, so a key changed and then changed back is
         * applied both times. What /admin/config shows: the boot file with
         * every key some reload applied taken from this one (a key applied
         * once and unchanged since has this file's value). */
        json_t *keys = st->in_force_keys ? json_copy(st->in_force_keys) : json_array();
        size_t i;
        json_t *v;
        json_array_foreach(r.applied_keys, i, v)
            if (!named(keys, json_string_value(v)))
                json_array_append(keys, v);
        cfg_free(st->in_force);
        json_decref(st->in_force_keys);
        st->in_force = next;
        st->in_force_keys = keys;
        next = NULL;
    }
    json_decref(r.applied_keys);
    json_decref(r.restart_keys);
    json_decref(r.outputs_done);
    cfg_free(next);
    return remember(st, ans);
}
