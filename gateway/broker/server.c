/*
 * server.c: the MQTT server's lifetime: rules and topics from the
 * configuration, the listener, the periodic sweep (CONNECT timeout, keep
 * alive, session expiry), the WAL's completion wake-up, backpressure, and
 * the orderly drain.
 *
 * Drain, in order (docs/OPERATIONS.md): stop accepting and stop reading;
 * submit open batches and wait for their completions, so every message
 * already received gets its ack; then close the connections (MQTT 5:
 * DISCONNECT 0x8B Server shutting down), which stores their wills; wait for
 * those too; then report drained. The WAL is closed by the caller after.
 */
#include "gateway/broker/broker_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_MS 250

static void wal_async_cb(uv_async_t *h);

static void free_specs(router_spec_t *specs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((void *)specs[i].attrs);
        free((void *)specs[i].capture_values);
    }
    free(specs);
}

/* How the configuration's errors are worded: in the log of `run` with the
 * file and line first ("edge.yaml:6: key: why"), for `tributary check`
 * (broker_check_config), which names the file itself, as "key (line 6):
 * why" like the TLS files' errors. */
static void cfg_error(const cfg_t *cfg, bool for_check, int line, const char *key, char *err, size_t errlen,
                      const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void cfg_error(const cfg_t *cfg, bool for_check, int line, const char *key, char *err, size_t errlen,
                      const char *fmt, ...)
{
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (for_check && line)
        snprintf(err, errlen, "%s (line %d): %s", key, line, why);
    else if (for_check)
        snprintf(err, errlen, "%s: %s", key, why);
    else if (line)
        snprintf(err, errlen, "%s:%d: %s: %s", cfg->source, line, key, why);
    else
        snprintf(err, errlen, "%s: %s: %s", cfg->source, key, why);
}

static int build_router(broker_t *srv, bool for_check, char *err, size_t errlen)
{
    const cfg_t *cfg = srv->cfg;
    size_t n = cfg->mqtt.nmappings;
    router_spec_t *specs = tb_calloc(n ? n : 1, sizeof *specs);
    for (size_t i = 0; i < n; i++) {
        const cfg_mapping_t *m = &cfg->mqtt.mappings[i];
        router_attr_spec_t *a = tb_calloc(m->nattrs ? m->nattrs : 1, sizeof *a);
        for (size_t j = 0; j < m->nattrs; j++)
            a[j] = (router_attr_spec_t){ m->attrs[j].name, m->attrs[j].ref };
        router_values_spec_t *v = tb_calloc(m->ncapvals ? m->ncapvals : 1, sizeof *v);
        for (size_t j = 0; j < m->ncapvals; j++)
            v[j] = (router_values_spec_t){ m->capvals[j].ref, (const char *const *)m->capvals[j].values,
                                             m->capvals[j].nvalues };
        specs[i] = (router_spec_t){ m->mqtt_pattern, m->danube_topic, a, m->nattrs, v, m->ncapvals };
    }
    char why[512];
    int rc = router_compile(specs, n, &srv->router, why, sizeof why);
    free_specs(specs, n);
    if (rc < 0)
        cfg_error(cfg, for_check, 0, "mqtt.topic_mappings", err, errlen, "%s", why);
    return rc;
}

broker_topic_t *broker__local_topic(broker_t *srv, size_t i)
{
    broker_topic_t *local[] = { srv->dead_letter, srv->journal };
    for (size_t k = 0; k < TB_ARRAY_LEN(local); k++)
        if (local[k] && i-- == 0)
            return local[k];
    return NULL;
}

int broker__local_open(broker_t *srv, const char *name, broker_topic_t **out)
{
    broker_topic_t *t = tb_calloc(1, sizeof *t);
    t->name = tb_strdup(name);
    t->id = UINT32_MAX;
    t->srv = srv;
    uv_timer_init(srv->loop, &t->timer);
    t->timer.data = t;
    *out = t;
    return wal_topic_open(srv->wal, t->name, &t->wal);
}

/* A mapping's on_full as the WAL's overflow policy. No default: a new
 * member of cfg_on_full_t fails the build here until it has one. */
static wal_overflow_t overflow_of(cfg_on_full_t f)
{
    switch (f) {
    case CFG_ON_FULL_DROP_OLDEST: return WAL_OVERFLOW_DROP_OLDEST;
    case CFG_ON_FULL_DROP_NEWEST: return WAL_OVERFLOW_DROP_NEWEST;
    case CFG_ON_FULL_BLOCK: return WAL_OVERFLOW_BLOCK;
    }
    return WAL_OVERFLOW_DROP_OLDEST; /* out of range: the parser never gives one */
}

static const char *on_full_name(cfg_on_full_t f)
{
    return wal_overflow_name(overflow_of(f));
}

/* Every mapping of one upstream topic gives it the same on_full: its log has
 * one policy, and which mapping's would win is not ours to guess. The first
 * mapping of a topic sets it (*first: its index + 1); a later one that
 * differs is an error naming the file, its line and the key. */
static int agree_on_full(const cfg_t *cfg, bool for_check, broker_topic_t *t, size_t *first, size_t r, char *err,
                         size_t errlen)
{
    const cfg_mapping_t *m = &cfg->mqtt.mappings[r];
    if (!*first) {
        t->on_full = m->on_full;
        t->max_age_ms = m->max_age_ms;
        t->durability = m->durability;
        t->priority = (uint8_t)m->priority; /* 0..255 (config_table.c) */
        *first = r + 1;
        return 0;
    }
    const cfg_mapping_t *f = &cfg->mqtt.mappings[*first - 1];
    char key[64];
    if (t->on_full != m->on_full) {
        snprintf(key, sizeof key, "mqtt.topic_mappings[%zu].on_full", r);
        cfg_error(cfg, for_check, m->line, key, err, errlen,
                  "%s, but topic %s already has on_full %s from mqtt.topic_mappings[%zu] (line %d); every mapping "
                  "of one upstream topic must say the same",
                  on_full_name(m->on_full), t->name, on_full_name(t->on_full), *first - 1, f->line);
        return TB_ECONFIG;
    }
    if (f->durability != m->durability) {
        /* one log per topic, in memory or not */
        static const char *const names[] = { "log", "memory_first" };
        snprintf(key, sizeof key, "mqtt.topic_mappings[%zu].durability", r);
        cfg_error(cfg, for_check, m->line, key, err, errlen,
                  "%s, but topic %s already has durability %s from mqtt.topic_mappings[%zu] (line %d)%s; every "
                  "mapping of one upstream topic must say the same",
                  names[m->durability], t->name, names[f->durability], *first - 1, f->line,
                  f->durability_given ? "" : " (its default, wal.durability)");
        return TB_ECONFIG;
    }
    if (f->max_age_ms != m->max_age_ms) {
        /* one replicator reads the topic's one log: which mapping's age would win is not ours to guess */
        snprintf(key, sizeof key, "mqtt.topic_mappings[%zu].max_age", r);
        cfg_error(cfg, for_check, m->line, key, err, errlen,
                  "%llu ms, but topic %s already has max_age %llu ms from mqtt.topic_mappings[%zu] (line %d); "
                  "every mapping of one upstream topic must say the same",
                  (unsigned long long)m->max_age_ms, t->name, (unsigned long long)f->max_age_ms, *first - 1,
                  f->line);
        return TB_ECONFIG;
    }
    if (f->priority != m->priority) {
        /* one log per topic, drained in one order: its priority is the topic's */
        snprintf(key, sizeof key, "mqtt.topic_mappings[%zu].priority", r);
        cfg_error(cfg, for_check, m->line, key, err, errlen,
                  "%u, but topic %s already has priority %u from mqtt.topic_mappings[%zu] (line %d); every mapping "
                  "of one upstream topic must say the same", m->priority, t->name, f->priority, *first - 1, f->line);
        return TB_ECONFIG;
    }
    return 0;
}

static int output_file(const cfg_t *cfg, bool for_check, size_t i, const char *key, const char *path, char *err,
                       size_t errlen)
{
    if (!path || !*path || access(path, R_OK) == 0)
        return 0;
    char full[96];
    snprintf(full, sizeof full, "outputs[%zu].%s", i, key);
    cfg_error(cfg, for_check, cfg->outputs[i].line, full, err, errlen, "cannot read \"%s\": %s", path,
              strerror(errno));
    return TB_ECONFIG;
}

/*
 * The outputs against the router (docs/design/OUTPUTS.md 3.3): each topic
 * filter matches an upstream topic the mappings produce; remote_topic and
 * device compile against every rule that feeds a topic the output carries
 * (a ${2} needs two '+' in each, an ${attr.NAME} is one of each's
 * extract_attributes); a mapping that enforces a schema feeds a topic a
 * danube output carries (schemas come from the cluster's registry); the
 * TLS and password files can be read.
 */
static int check_outputs(broker_t *srv, bool for_check, char *err, size_t errlen)
{
    const cfg_t *cfg = srv->cfg;
    size_t ntopics;
    const char *const *names = router_upstream_topics(srv->router, &ntopics);
    bool *danube_topic = tb_calloc(ntopics ? ntopics : 1, sizeof *danube_topic);
    uint32_t *rules = tb_calloc(cfg->mqtt.nmappings ? cfg->mqtt.nmappings : 1, sizeof *rules);
    int rc = 0;
    char full[96], why[640];
    for (size_t i = 0; i < cfg->noutputs && rc == 0; i++) {
        const cfg_output_t *o = &cfg->outputs[i];
        bool *carried = tb_calloc(ntopics ? ntopics : 1, sizeof *carried);
        for (size_t f = 0; f < o->ntopics && rc == 0; f++) {
            bool any = false;
            for (size_t t = 0; t < ntopics; t++)
                if (router_filter_match(o->topics[f], names[t], strlen(names[t])))
                    any = carried[t] = true;
            if (!any) {
                snprintf(full, sizeof full, "outputs[%zu].topics[%zu]", i, f);
                cfg_error(cfg, for_check, o->line, full, err, errlen,
                          "\"%s\" matches none of the upstream topics the mappings produce (%s%s)", o->topics[f],
                          ntopics ? names[0] : "none", ntopics > 1 ? ", ..." : "");
                rc = TB_ECONFIG;
            }
        }
        size_t nr = 0;
        for (size_t r = 0; r < cfg->mqtt.nmappings && rc == 0; r++) {
            size_t nt;
            const uint32_t *ids = router_rule_topics(srv->router, r, &nt);
            bool feeds = false;
            for (size_t k = 0; k < nt; k++)
                feeds |= carried[ids[k]];
            if (feeds)
                rules[nr++] = (uint32_t)r;
        }
        if (o->kind == CFG_OUTPUT_DANUBE)
            for (size_t t = 0; t < ntopics; t++)
                danube_topic[t] |= carried[t];
        free(carried);
        if (rc)
            break;
        const char *tmpl = o->kind == CFG_OUTPUT_MQTT ? o->remote_topic
                         : o->kind == CFG_OUTPUT_SPARKPLUG ? o->device : NULL;
        if (tmpl) {
            router_out_t *t;
            unsigned flags = o->kind == CFG_OUTPUT_SPARKPLUG ? ROUTER_OUT_LEVEL : 0;
            if (router_out_compile(srv->router, tmpl, rules, nr, flags, &t, why, sizeof why) < 0) {
                snprintf(full, sizeof full, "outputs[%zu].%s", i,
                         o->kind == CFG_OUTPUT_MQTT ? "remote_topic" : "device");
                cfg_error(cfg, for_check, o->line, full, err, errlen, "%s (rule N is mqtt.topic_mappings[N])", why);
                rc = TB_ECONFIG;
                break;
            }
            router_out_free(t);
        }
        if (o->kind != CFG_OUTPUT_DANUBE &&
            ((rc = output_file(cfg, for_check, i, "tls.ca_file", o->tls.ca_file, err, errlen)) < 0 ||
             (rc = output_file(cfg, for_check, i, "tls.cert_file", o->tls.cert_file, err, errlen)) < 0 ||
             (rc = output_file(cfg, for_check, i, "tls.key_file", o->tls.key_file, err, errlen)) < 0 ||
             (rc = output_file(cfg, for_check, i, "password_file", o->password_file, err, errlen)) < 0))
            break;
    }
    for (size_t r = 0; r < cfg->mqtt.nmappings && rc == 0; r++) {
        const cfg_mapping_t *m = &cfg->mqtt.mappings[r];
        if (m->validation_policy != CFG_POLICY_ENFORCE)
            continue;
        size_t nt;
        const uint32_t *ids = router_rule_topics(srv->router, r, &nt);
        for (size_t k = 0; k < nt && rc == 0; k++) {
            if (danube_topic[ids[k]])
                continue;
            snprintf(full, sizeof full, "mqtt.topic_mappings[%zu].validation_policy", r);
            cfg_error(cfg, for_check, m->line, full, err, errlen,
                      "enforce, but no danube output carries its topic %s: schemas come from the cluster's "
                      "registry", names[ids[k]]);
            rc = TB_ECONFIG;
        }
    }
    free(rules);
    free(danube_topic);
    return rc;
}

/*
 * The upstream topics and the rules, from the configuration and the
 * router: each topic's schema subject, encoding and on_full from its
 * mappings, which must agree. Touches no loop and no log, so `tributary
 * check` runs it too (broker_check_config). srv->topics is allocated even
 * when a rule fails.
 */
static int settle_topics(broker_t *srv, bool for_check, char *err, size_t errlen)
{
    const cfg_t *cfg = srv->cfg;
    size_t n;
    const char *const *names = router_upstream_topics(srv->router, &n);
    srv->ntopics = n;
    srv->cap_topics = BROKER_TOPIC_HEADROOM(n);
    srv->topics = tb_calloc(srv->cap_topics, sizeof *srv->topics);
    srv->nrules = cfg->mqtt.nmappings;
    srv->rules = tb_calloc(srv->nrules ? srv->nrules : 1, sizeof *srv->rules);
    for (size_t i = 0; i < n; i++) {
        broker_topic_t *t = srv->topics[i] = tb_calloc(1, sizeof *t);
        t->routed = true;
        t->name = tb_strdup(names[i]);
        t->id = (uint32_t)i;
        t->srv = srv;
    }
    size_t *on_full_from = tb_calloc(n ? n : 1, sizeof *on_full_from);
    for (size_t r = 0; r < srv->nrules; r++) {
        const cfg_mapping_t *m = &cfg->mqtt.mappings[r];
        srv->rules[r] = (broker_rule_t){ m->validation_policy };
        size_t nt;
        const uint32_t *ids = router_rule_topics(srv->router, r, &nt);
        for (size_t k = 0; k < nt; k++) {
            broker_topic_t *t = srv->topics[ids[k]];
            if (agree_on_full(cfg, for_check, t, &on_full_from[ids[k]], r, err, errlen) < 0) {
                free(on_full_from);
                return TB_ECONFIG;
            }
            const char *subj = m->schema_subject;
            if (t->schema_subject && subj && strcmp(t->schema_subject, subj) != 0) {
                char key[64];
                snprintf(key, sizeof key, "mqtt.topic_mappings[%zu].schema_subject", r);
                cfg_error(cfg, for_check, m->line, key, err, errlen,
                          "topic %s already has schema subject \"%s\" from an earlier mapping; one topic has one "
                          "schema", t->name, t->schema_subject);
                free(on_full_from);
                return TB_ECONFIG;
            }
            if (subj && !t->schema_subject)
                t->schema_subject = tb_strdup(subj);
            if (subj) /* the validator compiles for the last such mapping's encoding */
                t->encoding = m->encoding;
        }
    }
    free(on_full_from);
    return 0;
}

/* durability memory_first (not persisted: every start). A log that cannot
 * go to memory now (it failed to write at open, or holds batches for room)
 * stays a log topic, said once: nothing is lost by writing. */
static int set_memory_first(const cfg_t *cfg, broker_topic_t *t)
{
    wal_memory_opts_t mo;
    wal_memory_opts_default(&mo);
    mo.durability = WAL_DURABILITY_MEMORY_FIRST;
    mo.ack = cfg->wal.memory_first.ack == CFG_MF_ACK_RECEIVED ? WAL_ACK_RECEIVED : WAL_ACK_UPSTREAM;
    mo.spill_after_ms = cfg->wal.memory_first.spill_after_ms;
    mo.memory_bytes = cfg->wal.memory_first.memory_bytes;
    int rc = wal_topic_set_durability(t->wal, &mo);
    if (rc == TB_ENOTREADY) {
        tb_warn("durability memory_first: the topic's log is not writable now; it runs as log until a restart",
                TB_S("topic", t->name), TB_S("error", tb_strerror(wal_topic_error(t->wal))));
        t->durability = CFG_DURABILITY_LOG;
        return 0;
    }
    return rc;
}

/* wal_topic_foreach: the names of upstream topics no slot has (local logs, "$...", are not topics). */
typedef struct {
    broker_t *srv;
    char **names;
    size_t n;
} orphans_t;

static int note_orphan(wal_topic_t *w, void *arg)
{
    orphans_t *o = arg;
    const char *name = wal_topic_name(w);
    if (name[0] != '$' && !broker__topic(o->srv, name)) {
        o->names = tb_realloc(o->names, (o->n + 1) * sizeof *o->names);
        o->names[o->n++] = tb_strdup(name);
    }
    return 0;
}

/*
 * Orphans at boot (RELOAD.md 4.7): a topic directory that no mapping of
 * this file names (its mapping was removed across a restart, or a reload's
 * retirement did not finish) becomes a RETIRING slot, not routed, declared
 * without a schema subject: its backlog is replicated like that of a
 * mapping removed live, then the gateway retires it (gateway/retire.c); a
 * drained one is retired at its first tick. The capacity counts them.
 */
static void adopt_orphans(broker_t *srv)
{
    orphans_t o = { .srv = srv };
    wal_topic_foreach(srv->wal, note_orphan, &o);
    if (!o.n)
        return;
    size_t cap = BROKER_TOPIC_HEADROOM(srv->ntopics + o.n);
    if (cap > srv->cap_topics) {
        srv->topics = tb_realloc(srv->topics, cap * sizeof *srv->topics);
        memset(srv->topics + srv->cap_topics, 0, (cap - srv->cap_topics) * sizeof *srv->topics);
        srv->cap_topics = cap;
    }
    for (size_t k = 0; k < o.n; k++) {
        if (srv->ntopics >= srv->cap_topics) { /* 10,000 names: not adopted, said so */
            tb_warn("a topic directory no mapping names is left alone: the topic capacity is reached",
                    TB_S("topic", o.names[k]));
            free(o.names[k]);
            continue;
        }
        broker_topic_t *t = tb_calloc(1, sizeof *t);
        t->name = o.names[k];
        t->id = (uint32_t)srv->ntopics;
        t->srv = srv;
        t->life = BROKER_LIFE_RETIRING;
        t->wal = wal_topic_find(srv->wal, t->name);
        uv_timer_init(srv->loop, &t->timer); /* closed by broker_close with the others */
        t->timer.data = t;
        wal_topic_stats_t ws;
        wal_topic_stats(t->wal, &ws);
        tb_info("a topic directory no mapping names: replicated until drained, then retired",
                TB_S("topic", t->name), TB_U("backlog_messages", ws.next_offset - 1 - TB_MIN(ws.checkpoint,
                                                                                           ws.next_offset - 1)));
        srv->topics[srv->ntopics++] = t;
    }
    free(o.names);
}

static int build_topics(broker_t *srv, char *err, size_t errlen)
{
    const cfg_t *cfg = srv->cfg;
    int rc = settle_topics(srv, false, err, errlen);
    for (size_t i = 0; i < srv->ntopics; i++) { /* every topic's timer is closed by broker_close */
        uv_timer_init(srv->loop, &srv->topics[i]->timer);
        srv->topics[i]->timer.data = srv->topics[i];
    }
    if (rc < 0)
        return rc;
    size_t n = srv->ntopics;
    if (cfg->mqtt.dead_letter) {
        rc = broker__local_open(srv, BROKER_DEAD_LETTER_TOPIC, &srv->dead_letter);
        /* its own bound, outside wal.max_total_bytes; full: its oldest dead letters go, counted in its
         * meta's dropped (RELOAD.md 5.7) */
        if (rc == 0)
            rc = wal_topic_set_own_bound(srv->wal, srv->dead_letter->wal, cfg->mqtt.dead_letter_max_bytes);
        if (rc == 0)
            rc = wal_topic_set_overflow(srv->dead_letter->wal, WAL_OVERFLOW_DROP_OLDEST);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the dead-letter log: %s", tb_strerror(rc));
            return rc;
        }
    }
    if ((rc = broker__journal_open(srv, err, errlen)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        broker_topic_t *t = srv->topics[i];
        rc = wal_topic_open(srv->wal, t->name, &t->wal);
        if (rc == 0)
            rc = wal_topic_set_overflow(t->wal, overflow_of(t->on_full)); /* not persisted: every start */
        if (rc == 0 && t->durability == CFG_DURABILITY_MEMORY_FIRST)
            rc = set_memory_first(cfg, t);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the log of topic %s: %s", t->name, tb_strerror(rc));
            return rc;
        }
    }
    adopt_orphans(srv);
    return 0;
}

/* The build's router and rules become a generation (RELOAD.md 2.1): router
 * topic id i is slot id topic_of[i]; srv->router and srv->rules are left NULL. */
static broker_gen_t *gen_take(broker_t *srv)
{
    broker_gen_t *g = tb_calloc(1, sizeof *g);
    g->router = srv->router;
    g->rules = srv->rules;
    g->nrules = srv->nrules;
    g->unmatched = srv->cfg->mqtt.unmatched;
    size_t n = 0;
    if (g->router)
        router_upstream_topics(g->router, &n);
    g->ntopic_of = n;
    g->topic_of = tb_calloc(n ? n : 1, sizeof *g->topic_of);
    for (size_t i = 0; i < n; i++)
        g->topic_of[i] = (uint32_t)i;
    srv->router = NULL;
    srv->rules = NULL;
    srv->nrules = 0;
    return g;
}

static void gen_free(broker_gen_t *g)
{
    if (!g)
        return;
    router_free(g->router);
    free(g->rules);
    free(g->topic_of);
    free(g);
}

/* A broker_t used only to compile and check a configuration (broker_check_config, broker_plan_new). */
static void scratch_free(broker_t *srv)
{
    for (size_t i = 0; i < srv->ntopics; i++) {
        free(srv->topics[i]->name);
        free(srv->topics[i]->schema_subject);
        free(srv->topics[i]);
    }
    free(srv->topics);
    free(srv->rules);
    router_free(srv->router);
    gen_free(srv->gen);
    free(srv);
}

int broker_init(broker_t *srv, const cfg_t *cfg, wal_t *wal, char *err, size_t errlen)
{
    srv->cfg = cfg;
    srv->max_connections = cfg->mqtt.max_connections;
    srv->wal = wal;
    int rc = build_router(srv, false, err, errlen);
    if (rc == 0)
        rc = check_outputs(srv, false, err, errlen);
    if (rc == 0)
        rc = build_topics(srv, err, errlen);
    srv->gen = gen_take(srv);
    srv->gen->id = 1;
    return rc;
}

int broker_check_config(const cfg_t *cfg, char *err, size_t errlen)
{
    broker_t *srv = tb_calloc(1, sizeof *srv);
    srv->cfg = cfg;
    int rc = build_router(srv, true, err, errlen);
    if (rc == 0)
        rc = settle_topics(srv, true, err, errlen);
    if (rc == 0)
        rc = check_outputs(srv, true, err, errlen);
    scratch_free(srv);
    return rc;
}

/* The async handle must exist before the WAL's writer thread can call notify. */
static void flush_check_cb(uv_check_t *h)
{
    broker__ingest_turn(h->data); /* memory_first: the turn's held batches */
    broker__conn_flush_dirty(h->data);
}

int broker_new(uv_loop_t *loop, broker_t **out)
{
    *out = NULL;
    broker_t *srv = tb_calloc(1, sizeof *srv);
    srv->loop = loop;
    srv->rtj_fd = srv->rtj_lock_fd = -1;
    srv->wal_async.data = srv;
    int rc = uv_async_init(loop, &srv->wal_async, wal_async_cb);
    if (rc < 0) {
        free(srv);
        return rc;
    }
    uv_check_init(loop, &srv->flush_check);
    srv->flush_check.data = srv;
    uv_check_start(&srv->flush_check, flush_check_cb);
    uv_unref((uv_handle_t *)&srv->flush_check);
    uv_timer_init(loop, &srv->sweep);
    srv->sweep.data = srv;
    uv_timer_init(loop, &srv->nap); /* tls.c starts it */
    srv->nap.data = srv;
    *out = srv;
    return 0;
}

void broker_wal_notify(void *arg)
{
    broker_t *srv = arg;
    uv_async_send(&srv->wal_async);
}

static void wal_async_cb(uv_async_t *h)
{
    broker_t *srv = h->data;
    broker__ingest_completions(srv);
    if (srv->draining)
        broker__check_drained(srv);
}

static void on_connection(uv_stream_t *s, int status)
{
    broker_listener_t *l = s->data;
    if (status < 0) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("accept failed", TB_S("listener", l->bound), TB_S("error", uv_strerror(status)),
                    TB_U("suppressed", skipped));
        return;
    }
    l->tp->accept(l->srv, s);
}

static void sweep_cb(uv_timer_t *h)
{
    broker_t *srv = h->data;
    uint64_t now = uv_now(srv->loop);
    broker__conn_sweep(srv, now);
    broker__session_expire(srv, now);
    broker__journal_maybe_compact(srv);
}

static int parse_addr(const char *s, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        snprintf(host, sizeof host, "%.*s", (int)(rb - s - 1), s + 1);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        snprintf(host, sizeof host, "%.*s", (int)(colon - s), s);
    }
    int port = atoi(colon + 1);
    if (strchr(host, ':'))
        return uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss);
    return uv_ip4_addr(host, port, (struct sockaddr_in *)ss);
}

static void handle_closed(uv_handle_t *h);
static void close_handle(broker_t *srv, uv_handle_t *h);

static void bound_name(uv_tcp_t *h, char *out, size_t outlen)
{
    struct sockaddr_storage bound;
    int len = sizeof bound;
    char host[64] = "?";
    int port = 0;
    memset(&bound, 0, sizeof bound);
    uv_tcp_getsockname(h, (struct sockaddr *)&bound, &len);
    if (bound.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&bound, host, sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
        snprintf(out, outlen, "[%s]:%d", host, port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&bound, host, sizeof host);
        port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
        snprintf(out, outlen, "%s:%d", host, port);
    }
}

/* Opens listener l. 0, or -errno (logged; l's handle, if made, closes with the broker's). */
static int listen_one(broker_t *srv, broker_listener_t *l)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    int rc = parse_addr(l->address, &ss);
    if (rc < 0) {
        tb_error("bad MQTT listener address", TB_S("listener", l->address), TB_S("error", uv_strerror(rc)));
        return rc;
    }
    if (l->cfg && l->cfg->has_tls && !l->tls) {
        tb_error("TLS listener without its certificates (broker_set_tls was not given them)",
                 TB_S("listener", l->address));
        return TB_ECONFIG;
    }
    rc = uv_tcp_init(srv->loop, &l->handle);
    if (rc < 0) {
        tb_error("cannot listen for MQTT", TB_S("listener", l->address), TB_S("error", uv_strerror(rc)));
        return rc;
    }
    l->inited = true;
    l->handle.data = l;
    rc = uv_tcp_bind(&l->handle, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->handle, 1024, on_connection);
    if (rc < 0) {
        tb_error("cannot listen for MQTT", TB_S("listener", l->address), TB_S("error", uv_strerror(rc)));
        return rc;
    }
    l->listening = true;
    srv->listening = true;
    bound_name(&l->handle, l->bound, sizeof l->bound);
    /* the first line keeps its old shape (msg, addr first): tests and tools find the port in it */
    tb_info("mqtt listening", TB_S("addr", l->bound), TB_U("listener", l->index), TB_B("tls", l->tls != NULL),
            TB_U("max_connections", srv->max_connections));
    return 0;
}

/* The listeners of the configuration: mqtt.listeners, or mqtt.listener alone. */
void broker__set_listeners(broker_t *srv)
{
    const cfg_t *cfg = srv->cfg;
    if (srv->nlisteners)
        return; /* made already (broker_set_tls before broker_listen) */
    srv->nlisteners = cfg->mqtt.nlisteners ? (uint32_t)TB_MIN(cfg->mqtt.nlisteners, BROKER_MAX_LISTENERS) : 1;
    for (uint32_t i = 0; i < srv->nlisteners; i++) {
        broker_listener_t *l = &srv->listeners[i];
        l->srv = srv;
        l->index = i;
        l->cfg = cfg->mqtt.nlisteners ? &cfg->mqtt.listeners[i] : NULL;
        l->address = l->cfg ? l->cfg->address : cfg->mqtt.listener;
        l->tp = &broker__tcp;
    }
}

int broker_listen(broker_t *srv)
{
    broker__set_listeners(srv);
    for (uint32_t i = 0; i < srv->nlisteners; i++) {
        int rc = listen_one(srv, &srv->listeners[i]);
        if (rc < 0)
            return rc; /* those already open close at drain */
    }
    uv_timer_start(&srv->sweep, sweep_cb, SWEEP_MS, SWEEP_MS);
    return 0;
}

size_t broker_nlisteners(const broker_t *srv)
{
    return srv->nlisteners;
}

const char *broker_listener_addr(const broker_t *srv, size_t i)
{
    return i < srv->nlisteners && srv->listeners[i].listening ? srv->listeners[i].bound : NULL;
}

void broker_listener_stats(const broker_t *srv, size_t i, broker_listener_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (i >= srv->nlisteners)
        return;
    const broker_listener_t *l = &srv->listeners[i];
    out->tls = l->tls != NULL;
    out->connections = l->nconnected;
    out->publish_denied = l->publish_denied;
    out->tls_read_pauses = l->tls_read_pauses;
}

uint32_t broker__max_packet(const cfg_t *cfg)
{
    return cfg->mqtt.max_payload_size + 65536u + 16u;
}

broker_topic_t *broker__topic(broker_t *srv, const char *name)
{
    for (size_t i = 0; i < srv->ntopics; i++)
        if (strcmp(srv->topics[i]->name, name) == 0)
            return srv->topics[i];
    return NULL;
}

void broker__pending_add(broker_t *srv, int64_t delta)
{
    srv->pending_bytes = (uint64_t)((int64_t)srv->pending_bytes + delta);
    uint64_t max = srv->cfg->mqtt.ingestion.max_pending_bytes;
    if (!srv->paused && srv->pending_bytes > max) {
        srv->paused = true;
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("the log is behind: pausing reads from every connection", TB_U("pending_bytes", srv->pending_bytes),
                    TB_U("max_pending_bytes", max), TB_U("suppressed", skipped));
        for (broker_conn_t *c = srv->conns; c; c = c->next)
            broker__conn_pause(c);
    } else if (srv->paused && srv->pending_bytes < max / 2 && !srv->draining) {
        srv->paused = false;
        for (broker_conn_t *c = srv->conns; c; c = c->next)
            broker__conn_resume(c);
    }
}

static bool busy(broker_t *srv)
{
    if (srv->nreleasing > 0)
        return true; /* a closed connection's socket is not released yet (bounded: write_timeout_ms) */
    for (size_t i = 0; i < srv->ntopics; i++)
        if (srv->topics[i]->inflight || srv->topics[i]->batch)
            return true;
    for (size_t i = 0; broker__local_topic(srv, i); i++) {
        broker_topic_t *t = broker__local_topic(srv, i);
        if (t->inflight || t->batch)
            return true;
    }
    return false;
}

static void flush_all(broker_t *srv)
{
    for (size_t i = 0; i < srv->ntopics; i++)
        broker__ingest_flush(srv->topics[i]);
    for (size_t i = 0; broker__local_topic(srv, i); i++)
        broker__ingest_flush(broker__local_topic(srv, i));
}

void broker__check_drained(broker_t *srv)
{
    if (!srv->drained_cb || busy(srv))
        return;
    if (srv->conns) {
        /* everything received so far is acknowledged: now say goodbye */
        for (broker_conn_t *c = srv->conns, *next; c; c = next) {
            next = c->next;
            broker__conn_close(c, MQTT_RC_SERVER_SHUTTING_DOWN, "server shutting down");
        }
        flush_all(srv); /* wills */
        if (busy(srv))
            return;
    }
    void (*cb)(void *) = srv->drained_cb;
    srv->drained_cb = NULL;
    uv_timer_stop(&srv->sweep);
    cb(srv->drained_arg);
}

void broker_drain(broker_t *srv, void (*cb)(void *arg), void *arg)
{
    srv->draining = true;
    srv->drained_cb = cb;
    srv->drained_arg = arg;
    for (uint32_t i = 0; i < srv->nlisteners; i++) {
        broker_listener_t *l = &srv->listeners[i];
        if (l->inited)
            close_handle(srv, (uv_handle_t *)&l->handle); /* counted: broker_close waits for it */
        l->listening = false;
    }
    srv->listening = false;
    for (broker_conn_t *c = srv->conns; c; c = c->next)
        broker__conn_pause(c);
    flush_all(srv);
    /* memory_first: what is held is written to the log now (and synced);
     * its completions answer the publishers, and the topic stays in the
     * log until the close, so wills and anything later are written too */
    for (size_t i = 0; i < srv->ntopics; i++)
        if (srv->topics[i]->durability == CFG_DURABILITY_MEMORY_FIRST && srv->topics[i]->wal)
            wal_topic_spill(srv->topics[i]->wal, WAL_SPILL_SHUTDOWN); /* (no log: broker_init failed) */
    /* on_full block: what waits for room is not acknowledged, and the
     * cluster may never make room; refuse it (QoS 1/2 are resent after the
     * restart) rather than wait out shutdown_timeout_ms */
    for (size_t i = 0; i < srv->ntopics; i++)
        if (srv->topics[i]->on_full == CFG_ON_FULL_BLOCK)
            wal_topic_release_held(srv->topics[i]->wal);
    broker__check_drained(srv);
}

void broker_quiesce(broker_t *srv, void (*cb)(void *arg), void *arg)
{
    if (srv->draining)
        return; /* a drain (or quiesce) has begun: it answers its own caller */
    srv->draining = true; /* new CONNECTs refused, wills sent at once, the drain's checks run */
    srv->drained_cb = cb;
    srv->drained_arg = arg;
    for (uint32_t i = 0; i < srv->nlisteners; i++) {
        broker_listener_t *l = &srv->listeners[i];
        if (l->inited)
            close_handle(srv, (uv_handle_t *)&l->handle);
        l->listening = false;
    }
    srv->listening = false;
    for (broker_conn_t *c = srv->conns; c; c = c->next)
        broker__conn_pause(c);
    flush_all(srv);
    broker__check_drained(srv); /* closes the connections (0x8B) once every ack is answered */
}

int broker_unquiesce(broker_t *srv)
{
    if (!srv->draining || srv->closed_cb)
        return TB_EINVALID;
    if (srv->drained_cb || srv->closing_handles > 0)
        return TB_EBUSY; /* connections still closing, or a listener's close callback not yet run */
    for (uint32_t i = 0; i < srv->nlisteners; i++)
        srv->listeners[i].inited = false; /* closed: its handle may be initialised again */
    srv->draining = false;
    uv_timer_start(&srv->sweep, sweep_cb, SWEEP_MS, SWEEP_MS);
    for (uint32_t i = 0; i < srv->nlisteners; i++) {
        int rc = listen_one(srv, &srv->listeners[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * After the WAL is closed (its thread joined, so notify can no longer be
 * called): closes every loop handle the server owns, then frees its memory
 * and calls cb once the last close callback has run.
 */
static void handle_closed(uv_handle_t *h)
{
    broker_t *srv = h->data;
    if (--srv->closing_handles > 0 || !srv->closed_cb)
        return; /* a listener closed at drain, before broker_close */
    for (size_t i = 0;; i++) {
        broker_topic_t *t = i < srv->ntopics ? srv->topics[i] : broker__local_topic(srv, i - srv->ntopics);
        if (!t)
            break;
        if (t->batch)
            wal_batch_free(t->batch);
        if (t->ctx) {
            free(t->ctx->p);
            free(t->ctx);
        }
        if (t->validator)
            sch_validator_unref(t->validator);
        free(t->waiters);
        free(t->name);
        free(t->schema_subject);
        if (i < srv->ntopics)
            free(t); /* a slot (the local logs' structs are freed below) */
    }
    free(srv->topics);
    gen_free(srv->gen);
    free(srv->dead_letter);
    free(srv->journal);
    broker__rtj_close(srv);
    free(srv->jdeps);
    free(srv->turn);
    free(srv->scratch);
    for (uint32_t i = 0; i < srv->nout_pool; i++)
        free(srv->out_pool[i].p);
    for (uint32_t i = 0; i < srv->nlisteners; i++)
        tls_ctx_unref(srv->listeners[i].tls);
    auth_passwd_unref(srv->passwd);
    auth_acl_unref(srv->acl);
    free(srv->auth_addrs);
    void (*cb)(void *) = srv->closed_cb;
    void *arg = srv->closed_arg;
    free(srv);
    cb(arg);
}

static void close_handle(broker_t *srv, uv_handle_t *h)
{
    if (uv_is_closing(h))
        return;
    h->data = srv;
    srv->closing_handles++;
    uv_close(h, handle_closed);
}

void broker_close(broker_t *srv, void (*cb)(void *arg), void *arg)
{
    srv->closed_cb = cb;
    srv->closed_arg = arg;
    srv->closing_handles++; /* held until every close below is started (listeners may still be closing) */
    broker__sessions_free(srv);
    broker__conn_flush_dirty(srv);
    close_handle(srv, (uv_handle_t *)&srv->sweep);
    close_handle(srv, (uv_handle_t *)&srv->nap);
    close_handle(srv, (uv_handle_t *)&srv->wal_async);
    close_handle(srv, (uv_handle_t *)&srv->flush_check);
    for (uint32_t i = 0; i < srv->nlisteners; i++)
        if (srv->listeners[i].inited)
            close_handle(srv, (uv_handle_t *)&srv->listeners[i].handle); /* never listened, or no drain */
    for (size_t i = 0; i < srv->ntopics; i++)
        close_handle(srv, (uv_handle_t *)&srv->topics[i]->timer);
    for (size_t i = 0; broker__local_topic(srv, i); i++)
        close_handle(srv, (uv_handle_t *)&broker__local_topic(srv, i)->timer);
    srv->sweep.data = srv;
    handle_closed((uv_handle_t *)&srv->sweep);
}

/* ---- what the rest of the process reads and sets (broker.h) ---------------- */

void broker_on_stored(broker_t *srv, void (*fn)(void *arg, size_t topic), void *arg)
{
    srv->on_stored = fn;
    srv->on_stored_arg = arg;
}

size_t broker_ntopics(const broker_t *srv)
{
    return srv->topics ? srv->ntopics : 0;
}

broker_topic_t *broker_topic(broker_t *srv, size_t i)
{
    return srv->topics && i < srv->ntopics ? srv->topics[i] : NULL;
}

void broker_stats(const broker_t *srv, broker_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->listening = srv->listening;
    out->connections = srv->nconnected;
    out->accepted = srv->conn_accepted;
    memcpy(out->refused, srv->conn_refused, sizeof out->refused);
    memcpy(out->closed, srv->conn_closed, sizeof out->closed);
    out->unmatched = srv->unmatched_dropped;
    out->publish_denied = srv->publish_denied;
    out->sessions_persistent = srv->npersistent;
    out->will_bytes = srv->will_bytes;
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (const broker_session_t *s = srv->sess_buckets[i]; s; s = s->hnext) {
            out->sessions_remembered += s->persistent && !s->conn;
            out->wills_pending += s->will != NULL;
        }
    }
    if (srv->journal && srv->journal->wal) {
        wal_topic_stats_t st;
        wal_topic_stats(srv->journal->wal, &st);
        out->journal_bytes = st.bytes;
    }
}

size_t broker_top_talkers(broker_t *srv, uint64_t now_ms, broker_talker_t *out, size_t n, double *window_s)
{
    if (srv->talk_mark_ms == 0 || now_ms < srv->talk_mark_ms) { /* the first window starts now */
        for (broker_conn_t *c = srv->conns; c; c = c->next)
            c->published_mark = c->published;
        srv->talk_mark_ms = now_ms;
    } else if (now_ms - srv->talk_mark_ms >= BROKER_TALK_WINDOW_MS) {
        double secs = (double)(now_ms - srv->talk_mark_ms) / 1e3;
        size_t k = 0;
        broker_talker_t *top = srv->talkers;
        for (broker_conn_t *c = srv->conns; c; c = c->next) {
            uint32_t d = c->published - c->published_mark; /* mod 2^32 */
            c->published_mark = c->published;
            if (!c->connected || !c->client_id || d == 0)
                continue;
            double r = d / secs;
            if (k == BROKER_TOP_TALKERS && r <= top[k - 1].messages_per_second)
                continue;
            size_t at = k < BROKER_TOP_TALKERS ? k++ : k - 1; /* insert, busiest first */
            while (at > 0 && top[at - 1].messages_per_second < r) {
                top[at] = top[at - 1];
                at--;
            }
            snprintf(top[at].client_id, sizeof top[at].client_id, "%s", c->client_id);
            top[at].messages_per_second = r;
        }
        srv->ntalkers = k;
        srv->talk_window_s = secs;
        srv->talk_mark_ms = now_ms;
    }
    size_t m = TB_MIN(n, srv->ntalkers);
    memcpy(out, srv->talkers, m * sizeof *out);
    *window_s = srv->talk_window_s;
    return m;
}

void broker_set_max_connections(broker_t *srv, uint32_t n)
{
    srv->max_connections = n;
}

size_t broker_nrules(const broker_t *srv)
{
    return srv->gen ? srv->gen->nrules : 0;
}

uint64_t broker_generation(const broker_t *srv)
{
    return srv->gen ? srv->gen->id : 0;
}

size_t broker_topic_cap(const broker_t *srv)
{
    return srv->cap_topics;
}

/* ---- live mapping reload (broker.h: broker_plan_*; RELOAD.md 2.1-2.5) ------------- */

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void push_id(size_t **v, size_t *n, size_t id)
{
    *v = tb_realloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = id;
}

int broker_plan_new(broker_t *srv, const cfg_t *next, broker_plan_t **out, char *err, size_t errlen)
{
    *out = NULL;
    broker_t *s = tb_calloc(1, sizeof *s); /* the new rules and topics, off to the side */
    s->cfg = next;
    int rc = build_router(s, false, err, errlen);
    if (rc == 0)
        rc = settle_topics(s, false, err, errlen);
    if (rc == 0)
        rc = check_outputs(s, false, err, errlen);
    if (rc < 0) {
        scratch_free(s);
        return rc;
    }
    broker_plan_t *p = tb_calloc(1, sizeof *p);
    p->rules_before = srv->gen ? srv->gen->nrules : 0;
    p->rules_after = s->nrules;
    /* the scratch's topics are the plan's stage (by new router topic id); the generation takes the router */
    p->stage = s->topics;
    p->nstage = s->ntopics;
    s->topics = NULL;
    s->ntopics = 0;
    p->gen = gen_take(s);
    scratch_free(s);
    p->gen->id = (srv->gen ? srv->gen->id : 0) + 1;
    bool *routed = tb_calloc(srv->ntopics + 1, sizeof *routed);
    for (size_t i = 0; i < p->nstage; i++) {
        broker_topic_t *st = p->stage[i];
        broker_topic_t *t = broker__topic(srv, st->name);
        if (!t) {
            size_t id = srv->ntopics + p->nadded;
            if (id >= srv->cap_topics) {
                snprintf(err, errlen,
                         "%s: mqtt.topic_mappings: restart needed: %zu upstream topics exceed the capacity of %zu "
                         "set at start", next->source, id + 1, srv->cap_topics);
                free(routed);
                broker_plan_free(p);
                return TB_EFULL;
            }
            p->gen->topic_of[i] = (uint32_t)id;
            push_id(&p->added, &p->nadded, id);
            p->fresh = tb_realloc(p->fresh, p->nadded * sizeof *p->fresh);
            p->fresh[p->nadded - 1] = st;
            continue;
        }
        p->gen->topic_of[i] = t->id;
        routed[t->id] = true;
        if (t->life == BROKER_LIFE_REMOVING) {
            snprintf(err, errlen,
                     "%s: mqtt.topic_mappings: topic %s is being retired (drained, its log being removed): "
                     "reload again in a moment", next->source, t->name);
            free(routed);
            broker_plan_free(p);
            return TB_EBUSY;
        }
        if (!t->routed) {
            push_id(&p->revived, &p->nrevived, t->id);
            p->revived_life = tb_realloc(p->revived_life, p->nrevived * sizeof *p->revived_life);
            p->revived_life[p->nrevived - 1] = t->life;
            p->revived_wal = tb_realloc(p->revived_wal, p->nrevived * sizeof *p->revived_wal);
            p->revived_wal[p->nrevived - 1] = NULL;
        }
        unsigned how = 0;
        if (!same_str(t->schema_subject, st->schema_subject) ||
            (st->schema_subject && t->encoding != st->encoding))
            how |= BROKER_CHANGED_SUBJECT;
        if (t->on_full != st->on_full)
            how |= BROKER_CHANGED_ON_FULL;
        if (t->max_age_ms != st->max_age_ms)
            how |= BROKER_CHANGED_MAX_AGE;
        if (t->durability != st->durability)
            how |= BROKER_CHANGED_KEPT;
        if (how) {
            push_id(&p->changed, &p->nchanged, t->id);
            p->changed_how = tb_realloc(p->changed_how, p->nchanged * sizeof *p->changed_how);
            p->changed_how[p->nchanged - 1] = how;
        }
    }
    for (size_t i = 0; i < srv->ntopics; i++)
        if (srv->topics[i]->routed && !routed[i])
            push_id(&p->leaving, &p->nleaving, i);
    free(routed);
    *out = p;
    return 0;
}

int broker_plan_open(broker_t *srv, broker_plan_t *p, char *err, size_t errlen)
{
    for (size_t k = 0; k < p->nadded; k++) {
        broker_topic_t *t = p->fresh[k];
        if (t->wal)
            continue;
        int rc = wal_topic_open(srv->wal, t->name, &t->wal);
        if (rc == 0)
            rc = wal_topic_set_overflow(t->wal, overflow_of(t->on_full));
        if (rc == 0 && t->durability == CFG_DURABILITY_MEMORY_FIRST)
            rc = set_memory_first(srv->cfg, t);
        if (rc < 0) {
            snprintf(err, errlen, "cannot open the log of topic %s: %s", t->name, tb_strerror(rc));
            return rc;
        }
    }
    /* a retired name mapped again: its log re-created, continuing from its RETIRED entry (wal.h) */
    for (size_t k = 0; k < p->nrevived; k++) {
        if (p->revived_life[k] != BROKER_LIFE_RETIRED || p->revived_wal[k])
            continue;
        broker_topic_t *t = srv->topics[p->revived[k]];
        broker_topic_t tmp = { .name = t->name, .durability = t->durability };
        int rc = wal_topic_open(srv->wal, t->name, &tmp.wal);
        if (rc == 0)
            rc = wal_topic_set_overflow(tmp.wal, overflow_of(t->on_full));
        if (rc == 0 && t->durability == CFG_DURABILITY_MEMORY_FIRST)
            rc = set_memory_first(srv->cfg, &tmp);
        p->revived_wal[k] = tmp.wal;
        if (rc < 0) {
            snprintf(err, errlen, "cannot re-create the log of retired topic %s: %s", t->name, tb_strerror(rc));
            return rc;
        }
    }
    return 0;
}

const char *broker_topic_life_name(broker_topic_life_t l)
{
    static const char *const n[] = { "live", "retiring", "removing", "retired", "kept" };
    return (unsigned)l < TB_ARRAY_LEN(n) ? n[l] : "?";
}

void broker_topic_set_life(broker_t *srv, size_t id, broker_topic_life_t life)
{
    if (id < srv->ntopics && !srv->topics[id]->routed)
        srv->topics[id]->life = life; /* a routed slot is LIVE (broker_plan_commit) */
}

static void reset_schema(broker_topic_t *t)
{
    if (t->validator)
        sch_validator_unref(t->validator);
    t->validator = NULL;
    t->has_schema = false;
    t->schema_failed = false;
    t->schema_id = 0;
    t->schema_version = 0;
}

void broker_plan_commit(broker_t *srv, broker_plan_t *p)
{
    /* the new slots: linked before the swap, so every id the new generation names exists */
    for (size_t k = 0; k < p->nadded; k++) {
        broker_topic_t *t = p->fresh[k];
        for (size_t i = 0; i < p->nstage; i++)
            if (p->stage[i] == t)
                p->stage[i] = NULL; /* now the registry's */
        t->id = (uint32_t)p->added[k];
        t->srv = srv;
        t->routed = true;
        uv_timer_init(srv->loop, &t->timer);
        t->timer.data = t;
        srv->topics[srv->ntopics++] = t;
    }
    for (size_t k = 0; k < p->nchanged; k++) {
        broker_topic_t *t = srv->topics[p->changed[k]], *st = NULL;
        for (size_t i = 0; i < p->nstage && !st; i++)
            if (p->stage[i] && p->gen->topic_of[i] == t->id)
                st = p->stage[i];
        if (!st)
            continue;
        unsigned how = p->changed_how[k];
        if (how & BROKER_CHANGED_SUBJECT) {
            /* never validated against the old subject (RELOAD.md 2.7): the glue installs the new schema */
            reset_schema(t);
            free(t->schema_subject);
            t->schema_subject = st->schema_subject ? tb_strdup(st->schema_subject) : NULL;
            t->encoding = st->encoding;
        }
        if (how & BROKER_CHANGED_ON_FULL) {
            bool was_block = t->on_full == CFG_ON_FULL_BLOCK;
            t->on_full = st->on_full;
            wal_topic_set_overflow(t->wal, overflow_of(t->on_full));
            if (was_block && t->on_full != CFG_ON_FULL_BLOCK)
                wal_topic_release_held(t->wal); /* held for room: answered (refused) now, resent by QoS */
        }
        if (how & BROKER_CHANGED_MAX_AGE)
            t->max_age_ms = st->max_age_ms;
    }
    for (size_t k = 0; k < p->nrevived; k++) {
        broker_topic_t *t = srv->topics[p->revived[k]];
        if (p->revived_wal[k]) { /* re-created: the old handle is retired memory, kept to wal_close */
            t->wal = p->revived_wal[k];
            p->revived_wal[k] = NULL;
        }
        t->routed = true;
        t->life = BROKER_LIFE_LIVE;
    }
    broker_gen_t *old = srv->gen;
    srv->gen = p->gen; /* <== the swap: the next message is routed by the new rules */
    p->gen = NULL;
    for (size_t k = 0; k < p->nleaving; k++) {
        broker_topic_t *t = srv->topics[p->leaving[k]];
        t->routed = false;
        t->life = BROKER_LIFE_RETIRING;
        if (t->batch)
            broker__ingest_flush(t); /* what the old rules routed to it goes to its log now */
    }
    gen_free(old);
    free(p->fresh); /* the fresh slots are the registry's now (p->added keeps their ids) */
    p->fresh = NULL;
}

void broker_plan_free(broker_plan_t *p)
{
    if (!p)
        return;
    gen_free(p->gen);
    for (size_t i = 0; i < p->nstage; i++) {
        if (!p->stage[i])
            continue;
        /* a fresh slot not committed: its log, if opened, stays in the WAL (empty: the next boot finds it) */
        free(p->stage[i]->name);
        free(p->stage[i]->schema_subject);
        free(p->stage[i]);
    }
    free(p->stage);
    free(p->fresh);
    free(p->added);
    free(p->revived);
    free(p->revived_life);
    free(p->revived_wal); /* a re-created log not committed: an empty directory the next boot finds */
    free(p->leaving);
    free(p->changed);
    free(p->changed_how);
    free(p);
}
