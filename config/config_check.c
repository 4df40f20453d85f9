/*
 * config_check.c: rules that span keys, checked after the whole file and
 * the environment are in (edge_name may come after the mappings, or from
 * TRIBUTARY_EDGE_EDGE_NAME).
 *
 * The topic-pattern rules here are the configuration's view (so errors can
 * name a line); the router in gateway/ compiles the same patterns and
 * re-validates them defensively.
 */
#include "config/config_int.h"
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const cfg_t *cfg;
    cfg__locate_fn locate;
    void *arg;
    cfg_err_t *e;
} check_t;

static int fail(check_t *c, long idx, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(check_t *c, long idx, const char *field, const char *fmt, ...)
{
    char msg[512], key[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = 0, col = 0;
    if (c->locate)
        c->locate(c->arg, idx, field, &line, &col);
    if (idx >= 0)
        snprintf(key, sizeof key, "mqtt.topic_mappings[%ld]%s%s", idx, field ? "." : "", field ? field : "");
    else
        snprintf(key, sizeof key, "%s", field);
    cfg_err_set(c->e, c->cfg->source, line, line ? col : 0, key, msg);
    return TB_ECONFIG;
}

static bool name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-';
}

static bool valid_name(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

/* Pattern shape: returns the number of '+' levels, or -1 with *why set. */
static int pattern_shape(const char *p, bool *ends_hash, const char **why)
{
    int plus = 0;
    *ends_hash = false;
    const char *lvl = p;
    for (;;) {
        const char *end = strchr(lvl, '/');
        size_t n = end ? (size_t)(end - lvl) : strlen(lvl);
        bool has_plus = memchr(lvl, '+', n) != NULL, has_hash = memchr(lvl, '#', n) != NULL;
        if (has_plus && n != 1) { *why = "'+' must fill a whole level (like a/+/b)"; return -1; }
        if (has_hash && n != 1) { *why = "'#' must fill a whole level (like a/#)"; return -1; }
        if (has_hash && end) { *why = "'#' must be the last level"; return -1; }
        if (has_plus) plus++;
        if (has_hash) *ends_hash = true;
        if (!end)
            break;
        lvl = end + 1;
    }
    return plus;
}

/* A capture reference "$N" (1..nplus) or "$#" (when the pattern ends in '#'). */
static bool valid_ref(const char *ref, int nplus, bool ends_hash)
{
    if (ref[0] != '$')
        return false;
    if (strcmp(ref + 1, "#") == 0)
        return ends_hash;
    char *end;
    long n = strtol(ref + 1, &end, 10);
    return ref[1] >= '1' && ref[1] <= '9' && *end == '\0' && n >= 1 && n <= nplus;
}

static const cfg_capvals_t *find_capvals(const cfg_mapping_t *m, const char *ref)
{
    for (size_t i = 0; i < m->ncapvals; i++)
        if (strcmp(m->capvals[i].ref, ref) == 0)
            return &m->capvals[i];
    return NULL;
}

/* danube_topic: /{edge_name}/<name>, where <name> may hold ${N} templates. */
static int check_topic(check_t *c, long idx, const cfg_mapping_t *m, int nplus, bool ends_hash)
{
    const char *edge = c->cfg->edge.edge_name;
    const char *t = m->danube_topic;
    size_t elen = strlen(edge);
    if (t[0] != '/' || strncmp(t + 1, edge, elen) != 0 || t[1 + elen] != '/')
        return fail(c, idx, "danube_topic", "\"%s\" is outside the edge's namespace: it must start with /%s/",
                    t, edge);
    const char *name = t + elen + 2;
    if (!*name)
        return fail(c, idx, "danube_topic", "\"%s\" has no topic name after /%s/", t, edge);
    for (const char *p = name; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            const char *close = strchr(p, '}');
            if (!close)
                return fail(c, idx, "danube_topic", "unterminated ${ in \"%s\"", t);
            char ref[32];
            size_t rn = (size_t)(close - (p + 2));
            if (rn == 0 || rn + 2 > sizeof ref)
                return fail(c, idx, "danube_topic", "bad capture in \"%s\"", t);
            ref[0] = '$';
            memcpy(ref + 1, p + 2, rn);
            ref[rn + 1] = '\0';
            if (!valid_ref(ref, nplus, ends_hash))
                return fail(c, idx, "danube_topic", "\"${%.*s}\" is not a capture of mqtt_pattern \"%s\"",
                            (int)rn, p + 2, m->mqtt_pattern);
            const cfg_capvals_t *cv = find_capvals(m, ref);
            if (!cv)
                return fail(c, idx, "danube_topic",
                            "template uses %s but capture_values declares no values for it: every "
                            "upstream topic must be known at startup", ref);
            for (size_t j = 0; j < cv->nvalues; j++)
                if (!valid_name(cv->values[j], strlen(cv->values[j])))
                    return fail(c, idx, "capture_values",
                                "value \"%s\" of %s would make an invalid topic name (letters, digits, _ and -)",
                                cv->values[j], ref);
            p = close + 1;
            continue;
        }
        if (!name_char(*p))
            return fail(c, idx, "danube_topic",
                        "\"%s\": a topic is /namespace/name with letters, digits, _ and - only", t);
        p++;
    }
    return 0;
}

static int check_mapping(check_t *c, long idx, const cfg_mapping_t *m)
{
    bool ends_hash;
    const char *why = NULL;
    int nplus = pattern_shape(m->mqtt_pattern, &ends_hash, &why);
    if (nplus < 0)
        return fail(c, idx, "mqtt_pattern", "malformed pattern \"%s\": %s", m->mqtt_pattern, why);
    for (size_t i = 0; i < m->nattrs; i++) {
        if (!valid_ref(m->attrs[i].ref, nplus, ends_hash)) {
            char field[300];
            snprintf(field, sizeof field, "extract_attributes.%s", m->attrs[i].name);
            return fail(c, idx, field, "\"%s\" is not a capture of \"%s\": use $1..$%d for its '+' levels%s",
                        m->attrs[i].ref, m->mqtt_pattern, nplus, ends_hash ? " or $# for its '#'" : "");
        }
    }
    for (size_t i = 0; i < m->ncapvals; i++) {
        if (!valid_ref(m->capvals[i].ref, nplus, ends_hash)) {
            char field[300];
            snprintf(field, sizeof field, "capture_values.%s", m->capvals[i].ref);
            return fail(c, idx, field, "\"%s\" is not a capture of \"%s\"", m->capvals[i].ref, m->mqtt_pattern);
        }
    }
    if (m->validation_policy == CFG_POLICY_ENFORCE && !m->schema_subject)
        return fail(c, idx, "validation_policy", "enforce needs a schema_subject");
    return check_topic(c, idx, m, nplus, ends_hash);
}

int cfg__check(const cfg_t *cfg, cfg__locate_fn locate, void *arg, cfg_err_t *e)
{
    check_t c = { cfg, locate, arg, e };
    if (!valid_name(cfg->edge.edge_name, strlen(cfg->edge.edge_name)))
        return fail(&c, -1, "edge.edge_name", "\"%s\": use letters, digits, _ and - only (it is a namespace)",
                    cfg->edge.edge_name);
    for (size_t i = 0; i < cfg->mqtt.nmappings; i++) {
        const cfg_mapping_t *m = &cfg->mqtt.mappings[i];
        int rc = check_mapping(&c, (long)i, m);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->mqtt.mappings[j].mqtt_pattern, m->mqtt_pattern) == 0 && m->ncapvals == 0 &&
                cfg->mqtt.mappings[j].ncapvals == 0)
                return fail(&c, (long)i, "mqtt_pattern",
                            "duplicate mapping: \"%s\" is already mapped by topic_mappings[%zu] (line %d), "
                            "so this rule could never match", m->mqtt_pattern, j, cfg->mqtt.mappings[j].line);
        }
    }
    if (cfg->wal.segment_bytes * 2 > cfg->wal.max_topic_bytes)
        return fail(&c, -1, "wal.max_topic_bytes",
                    "must be at least twice wal.segment_bytes (%llu), so a full segment can be dropped",
                    (unsigned long long)cfg->wal.segment_bytes);
    if (cfg->wal.segment_bytes * 2 > cfg->mqtt.max_journal_bytes)
        return fail(&c, -1, "mqtt.max_journal_bytes",
                    "must be at least twice wal.segment_bytes (%llu): the journal is a log topic",
                    (unsigned long long)cfg->wal.segment_bytes);
    if (cfg->wal.max_topic_bytes > cfg->wal.max_total_bytes)
        return fail(&c, -1, "wal.max_total_bytes", "must be at least wal.max_topic_bytes (%llu)",
                    (unsigned long long)cfg->wal.max_topic_bytes);
    if (!*cfg->edge.tls.cert_file != !*cfg->edge.tls.key_file)
        return fail(&c, -1, *cfg->edge.tls.cert_file ? "edge.tls.key_file" : "edge.tls.cert_file",
                    "edge.tls.cert_file and edge.tls.key_file go together: give both or neither");
    if (cfg->http.has_tls) {
        const cfg_tls_t *t = &cfg->http.tls;
        if (!*t->cert_file || !*t->key_file)
            return fail(&c, -1, !*t->cert_file ? "http.tls.cert_file" : "http.tls.key_file",
                        "required key missing (http.tls needs cert_file and key_file)");
        if (t->require_client_cert && !*t->ca_file)
            return fail(&c, -1, "http.tls.require_client_cert",
                        "needs http.tls.ca_file: the CAs client certificates are checked against");
    }
    if (cfg->reload.watch_ms && cfg->reload.watch_ms < 1000)
        return fail(&c, -1, "reload.watch_ms", "%u: 0 (off) or at least 1000", cfg->reload.watch_ms);
    if (cfg->replicator.retry_max_ms < cfg->replicator.retry_initial_ms)
        return fail(&c, -1, "replicator.retry_max_ms", "must be at least replicator.retry_initial_ms (%u)",
                    cfg->replicator.retry_initial_ms);
    return 0;
}
