/*
 * config_parse.c: edge.yaml -> cfg_t, driven by the key table.
 *
 * The file is loaded as a libyaml document (so every node carries its line
 * and column), then walked: a key that names a table row is parsed by the
 * row's type; a key that is a prefix of rows is a section and must be a
 * mapping; anything else is an unknown key, reported with the closest
 * known sibling. Duplicate keys are errors (libyaml accepts them; a
 * duplicated durability setting must not silently win or lose).
 *
 * Order: table defaults, then the file, then TRIBUTARY_* environment
 * overrides, then required keys, then cross-key checks (config_check.c).
 */
#include "config/config_int.h"
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct pctx {
    const char *file;
    yaml_document_t *doc;
    char *const *envp;
    cfg_t *cfg;
    bool *seen; /* per cfg__keys row */
    const yaml_node_t *mappings; /* the mqtt.topic_mappings sequence, if given */
    const yaml_node_t *listeners; /* the mqtt.listeners sequence, if given (not null) */
    const yaml_node_t *outputs; /* the outputs sequence, if given */
    cfg_err_t *e;
} pctx_t;

static int fail_at(pctx_t *c, const yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_at(pctx_t *c, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cfg_err_set(c->e, c->file, n ? (int)n->start_mark.line + 1 : 0, n ? (int)n->start_mark.column + 1 : 0, key,
                msg);
    return TB_ECONFIG;
}

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

static bool is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)n->data.scalar.value;
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* Expands ${NAME} in a scalar; the result is owned by the caller. In a
 * template key ${topic} and ${upstream} are the template's, not the
 * environment's. */
static char *scalar_text(pctx_t *c, const yaml_node_t *n, const char *key, bool template)
{
    char msg[256];
    char *s = cfg__expand_env((const char *)n->data.scalar.value, c->envp, template, msg, sizeof msg);
    if (!s)
        fail_at(c, n, key, "%s%s", msg,
                template ? " (in a template: ${topic}, ${upstream}, ${1}.., ${#}, ${attr.NAME}; any other "
                           "${NAME} is the environment)" : "");
    return s;
}

static int set_leaf(pctx_t *c, const cfg__key_t *k, void *base, const yaml_node_t *n, const char *key)
{
    if (n->type != YAML_SCALAR_NODE)
        return fail_at(c, n, key, "expected %s %s, got %s",
                       k->type == CFG__ENUM ? "an" : "a", cfg__type_name(k), node_kind(n));
    if (is_null(n)) {
        if (k->flags & CFG__F_REQUIRED)
            return fail_at(c, n, key, "a value is required");
        if (k->type == CFG__STR && !k->def) {
            char **dst = (char **)((char *)base + k->off);
            free(*dst);
            *dst = NULL;
            return 0;
        }
        return fail_at(c, n, key, "expected a %s, got an empty value", cfg__type_name(k));
    }
    char *s = scalar_text(c, n, key, k->flags & CFG__F_TEMPLATE);
    if (!s)
        return TB_ECONFIG;
    char msg[256];
    int rc = cfg__set_scalar(k, base, s, msg, sizeof msg);
    free(s);
    if (rc < 0)
        return fail_at(c, n, key, "%s", msg);
    return 0;
}

/* Returns the key scalar's text, or fails when a key is not a scalar. */
static const char *key_text(pctx_t *c, const yaml_node_t *kn, const char *where)
{
    if (kn->type != YAML_SCALAR_NODE) {
        fail_at(c, kn, where, "mapping keys must be plain names, got %s", node_kind(kn));
        return NULL;
    }
    return (const char *)kn->data.scalar.value;
}

/* Fails on a key that appears twice in one mapping. */
static int check_dup(pctx_t *c, const yaml_node_t *map, yaml_node_pair_t *upto, const char *key,
                     const char *path)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < upto; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        if (kn->type == YAML_SCALAR_NODE && strcmp((const char *)kn->data.scalar.value, key) == 0) {
            yaml_node_t *dup = yaml_document_get_node(c->doc, upto->key);
            return fail_at(c, dup, path, "duplicate key (first given on line %zu)", kn->start_mark.line + 1);
        }
    }
    return 0;
}

static void suggest(const char *key, const char *const *cands, size_t n, char *out, size_t outlen)
{
    size_t best = (size_t)-1;
    const char *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t d = cfg__distance(key, cands[i]);
        if (d < best) { best = d; pick = cands[i]; }
    }
    size_t limit = strlen(key) / 3 + 1;
    if (pick && best <= (limit > 3 ? 3 : limit))
        snprintf(out, outlen, " (did you mean \"%s\"?)", pick);
    else
        out[0] = '\0';
}

/* Unknown key `name` under `prefix` ("" for the root) of table tab: names the
 * closest sibling. `shown` goes before the path in the message ("" for the
 * top-level table, "mqtt.listeners[0]." for a listener entry). */
static int unknown_key(pctx_t *c, const yaml_node_t *kn, const char *shown, const char *prefix, const char *name,
                       const cfg__key_t *tab, size_t ntab)
{
    const char *cands[128];
    size_t n = 0, plen = strlen(prefix);
    char tmp[128][64];
    for (size_t i = 0; i < ntab && n < 128; i++) {
        const char *p = tab[i].path;
        if (plen && (strncmp(p, prefix, plen) != 0 || p[plen] != '.'))
            continue;
        const char *rest = plen ? p + plen + 1 : p;
        size_t seg = strcspn(rest, ".");
        if (seg >= sizeof tmp[0]) continue;
        memcpy(tmp[n], rest, seg);
        tmp[n][seg] = '\0';
        cands[n] = tmp[n];
        n++;
    }
    char hint[128];
    suggest(name, cands, n, hint, sizeof hint);
    char full[320];
    snprintf(full, sizeof full, "%s%s%s%s", shown, prefix, plen ? "." : "", name);
    return fail_at(c, kn, full, "unknown key%s", hint);
}

static int parse_attrs(pctx_t *c, const yaml_node_t *n, const char *path, cfg_mapping_t *m)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(c, n, path, "expected a map of attribute name to capture (\"$1\"), got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    m->attrs = tb_calloc(cnt ? cnt : 1, sizeof *m->attrs);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *name = key_text(c, kn, path);
        if (!name || check_dup(c, n, p, name, path) < 0)
            return TB_ECONFIG;
        char full[512];
        snprintf(full, sizeof full, "%s.%s", path, name);
        if (vn->type != YAML_SCALAR_NODE)
            return fail_at(c, vn, full, "expected a capture such as \"$1\", got %s", node_kind(vn));
        cfg_attr_t *a = &m->attrs[m->nattrs++];
        a->name = tb_strdup(name);
        a->ref = tb_strdup((const char *)vn->data.scalar.value);
    }
    return 0;
}

static int parse_capvals(pctx_t *c, const yaml_node_t *n, const char *path, cfg_mapping_t *m)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(c, n, path, "expected a map of capture (\"$1\") to a list of values, got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    m->capvals = tb_calloc(cnt ? cnt : 1, sizeof *m->capvals);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *ref = key_text(c, kn, path);
        if (!ref || check_dup(c, n, p, ref, path) < 0)
            return TB_ECONFIG;
        char full[512];
        snprintf(full, sizeof full, "%s.%s", path, ref);
        if (vn->type != YAML_SEQUENCE_NODE || vn->data.sequence.items.top == vn->data.sequence.items.start)
            return fail_at(c, vn, full, "expected a non-empty list of values, got %s", node_kind(vn));
        cfg_capvals_t *cv = &m->capvals[m->ncapvals++];
        cv->ref = tb_strdup(ref);
        size_t nv = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
        cv->values = tb_calloc(nv, sizeof *cv->values);
        for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top; it++) {
            yaml_node_t *in = yaml_document_get_node(c->doc, *it);
            if (in->type != YAML_SCALAR_NODE || is_null(in))
                return fail_at(c, in, full, "values must be non-empty strings, got %s", node_kind(in));
            cv->values[cv->nvalues++] = tb_strdup((const char *)in->data.scalar.value);
        }
    }
    return 0;
}

static int parse_mapping(pctx_t *c, const yaml_node_t *n, size_t idx, cfg_mapping_t *m)
{
    char path[64];
    snprintf(path, sizeof path, "mqtt.topic_mappings[%zu]", idx);
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(c, n, path, "expected a mapping with mqtt_pattern and danube_topic, got %s", node_kind(n));
    m->line = (int)n->start_mark.line + 1;
    bool seen[16] = { false };
    for (size_t i = 0; i < cfg__nmapping_keys; i++) {
        const cfg__key_t *k = &cfg__mapping_keys[i];
        if (k->def) {
            char msg[128];
            cfg__set_scalar(k, m, k->def, msg, sizeof msg);
        }
    }
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *name = key_text(c, kn, path);
        if (!name || check_dup(c, n, p, name, path) < 0)
            return TB_ECONFIG;
        char full[256];
        snprintf(full, sizeof full, "%s.%s", path, name);
        size_t i;
        for (i = 0; i < cfg__nmapping_keys; i++)
            if (strcmp(cfg__mapping_keys[i].path, name) == 0)
                break;
        if (i == cfg__nmapping_keys) {
            const char *cands[16];
            for (size_t j = 0; j < cfg__nmapping_keys; j++) cands[j] = cfg__mapping_keys[j].path;
            char hint[128];
            suggest(name, cands, cfg__nmapping_keys, hint, sizeof hint);
            return fail_at(c, kn, full, "unknown key%s", hint);
        }
        const cfg__key_t *k = &cfg__mapping_keys[i];
        seen[i] = true;
        int rc;
        if (k->type == CFG__ATTRS) rc = parse_attrs(c, vn, full, m);
        else if (k->type == CFG__CAPVALS) rc = parse_capvals(c, vn, full, m);
        else rc = set_leaf(c, k, m, vn, full);
        if (rc < 0)
            return rc;
        if (strcmp(k->path, "durability") == 0)
            m->durability_given = true; /* else wal.durability, resolved once the whole file is read */
    }
    for (size_t i = 0; i < cfg__nmapping_keys; i++) {
        if ((cfg__mapping_keys[i].flags & CFG__F_REQUIRED) && !seen[i]) {
            char full[256];
            snprintf(full, sizeof full, "%s.%s", path, cfg__mapping_keys[i].path);
            return fail_at(c, n, full, "required key missing");
        }
    }
    return 0;
}

static int parse_mappings(pctx_t *c, const cfg__key_t *k, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, k->path, "expected a list of mappings, got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt < k->min)
        return fail_at(c, n, k->path, "at least %llu mapping is required", (unsigned long long)k->min);
    if (cnt > k->max)
        return fail_at(c, n, k->path, "at most %llu mappings are allowed", (unsigned long long)k->max);
    cfg_t *cfg = c->cfg;
    c->mappings = n;
    cfg->mqtt.mappings = tb_calloc(cnt, sizeof *cfg->mqtt.mappings);
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *in = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        cfg->mqtt.nmappings = i + 1;
        int rc = parse_mapping(c, in, i, &cfg->mqtt.mappings[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- mqtt.listeners ---------------------------------------------------------- */

static bool is_section_of(const cfg__key_t *tab, size_t ntab, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < ntab; i++)
        if (strncmp(tab[i].path, path, n) == 0 && tab[i].path[n] == '.')
            return true;
    return false;
}

/* The node at a dotted path under map (NULL: absent). */
static const yaml_node_t *lookup(yaml_document_t *doc, const yaml_node_t *map, const char *key, bool want_key);
static const yaml_node_t *node_at(pctx_t *c, const yaml_node_t *map, const char *dotted)
{
    char path[128];
    snprintf(path, sizeof path, "%s", dotted);
    const yaml_node_t *n = map;
    for (char *save = NULL, *tok = strtok_r(path, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save))
        n = lookup(c->doc, n, tok, false);
    return n;
}

/* An output's topics: a list of MQTT filters over upstream topic names. */
static int parse_strlist(pctx_t *c, const cfg__key_t *k, void *base, const yaml_node_t *n, const char *key)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, key, "expected a list of topic filters ([\"/edge1/#\"]), got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt < k->min || cnt > k->max)
        return fail_at(c, n, key, "expected %llu to %llu filters, got %zu", (unsigned long long)k->min,
                       (unsigned long long)k->max, cnt);
    char ***list = (char ***)((char *)base + k->off);
    size_t *count = (size_t *)((char *)base + k->off + sizeof(char **));
    for (size_t i = 0; i < *count; i++)
        free((*list)[i]);
    free(*list);
    *list = tb_calloc(cnt, sizeof **list);
    *count = 0;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *in = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        char full[320];
        snprintf(full, sizeof full, "%s[%zu]", key, i);
        if (in->type != YAML_SCALAR_NODE || is_null(in))
            return fail_at(c, in, full, "expected a topic filter, got %s", is_null(in) ? "nothing" : node_kind(in));
        char *f = scalar_text(c, in, full, false);
        if (!f)
            return TB_ECONFIG;
        (*list)[(*count)++] = f;
        const char *why = cfg__filter_check(f);
        if (why)
            return fail_at(c, in, full, "\"%s\": %s", f, why);
    }
    return 0;
}

/* An entry of a list section (a listener, an output): its keys are the
 * paths of one table relative to the entry; what was given is kept so
 * that the caller can check required and kind-specific keys after. */
typedef struct entry_seen {
    bool seen[32];
    const yaml_node_t *at[32]; /* the value node of each key given */
    const yaml_node_t *tls;    /* the tls section, if given (even empty) */
} entry_seen_t;

typedef struct entry_tab {
    const cfg__key_t *keys;
    size_t n;
} entry_tab_t;

static void entry_defaults(entry_tab_t tab, void *base)
{
    for (size_t i = 0; i < tab.n; i++) {
        const cfg__key_t *k = &tab.keys[i];
        if (k->def) {
            char msg[128];
            cfg__set_scalar(k, base, k->def, msg, sizeof msg);
        }
    }
}

/* One level of an entry: rel is "" or a section ("tls"); shown names the
 * entry in messages ("mqtt.listeners[0]", "outputs[1]"). */
static int walk_entry(pctx_t *c, const yaml_node_t *map, const char *rel, const char *shown, entry_tab_t tab,
                      void *base, entry_seen_t *es)
{
    if (tab.n > sizeof es->seen / sizeof es->seen[0])
        return fail_at(c, map, shown, "internal: key table of %zu keys is larger than the walker's", tab.n);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *name = key_text(c, kn, shown);
        if (!name)
            return TB_ECONFIG;
        char path[128], full[256];
        snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "." : "", name);
        snprintf(full, sizeof full, "%s.%s", shown, path);
        if (check_dup(c, map, p, name, full) < 0)
            return TB_ECONFIG;
        size_t i;
        for (i = 0; i < tab.n; i++)
            if (strcmp(tab.keys[i].path, path) == 0)
                break;
        int rc;
        if (i < tab.n) {
            const cfg__key_t *k = &tab.keys[i];
            es->seen[i] = true;
            es->at[i] = vn;
            rc = k->type == CFG__STRLIST ? parse_strlist(c, k, base, vn, full) : set_leaf(c, k, base, vn, full);
        } else if (is_section_of(tab.keys, tab.n, path)) {
            if (strcmp(path, "tls") == 0)
                es->tls = vn; /* even empty: then its required keys are missing */
            if (vn->type != YAML_MAPPING_NODE) {
                if (is_null(vn))
                    continue;
                return fail_at(c, vn, full, "expected a section (a mapping of keys), got %s", node_kind(vn));
            }
            rc = walk_entry(c, vn, path, shown, tab, base, es);
        } else {
            char sh[160];
            snprintf(sh, sizeof sh, "%s.", shown);
            return unknown_key(c, kn, sh, rel, name, tab.keys, tab.n);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* An entry of a list: a mapping, its defaults set, then its keys walked. */
static int read_entry(pctx_t *c, const yaml_node_t *n, const char *shown, const char *expected, entry_tab_t tab,
                      void *base, int *line, entry_seen_t *es)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(c, n, shown, "expected %s, got %s", expected, node_kind(n));
    *line = (int)n->start_mark.line + 1;
    entry_defaults(tab, base);
    memset(es, 0, sizeof *es);
    return walk_entry(c, n, "", shown, tab, base, es);
}

static unsigned addr_port(const char *a)
{
    const char *colon = strrchr(a, ':');
    return colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
}

static int parse_listener(pctx_t *c, const yaml_node_t *n, size_t idx, cfg_listener_t *l)
{
    char shown[64];
    snprintf(shown, sizeof shown, "mqtt.listeners[%zu]", idx);
    entry_seen_t es;
    int rc = read_entry(c, n, shown, "a mapping with an address (and optionally tls)",
                        (entry_tab_t){ cfg__listener_keys, cfg__nlistener_keys }, l, &l->line, &es);
    if (rc < 0)
        return rc;
    l->has_tls = es.tls != NULL;
    const bool *seen = es.seen;
    for (size_t i = 0; i < cfg__nlistener_keys; i++) {
        const cfg__key_t *k = &cfg__listener_keys[i];
        bool in_tls = strncmp(k->path, "tls.", 4) == 0;
        if ((k->flags & CFG__F_REQUIRED) && !seen[i] && (!in_tls || l->has_tls)) {
            char full[256];
            snprintf(full, sizeof full, "%s.%s", shown, k->path);
            const yaml_node_t *at = in_tls ? node_at(c, n, "tls") : n;
            return fail_at(c, at ? at : n, full, "required key missing%s",
                           in_tls ? " (tls needs cert_file and key_file)" : "");
        }
    }
    const cfg_tls_t *t = &l->tls;
    char full[256];
    if (!l->has_tls) {
        /* a tls key outside a tls mapping cannot happen: they are only under tls */
        return 0;
    }
    if (t->require_client_cert && !*t->ca_file) {
        snprintf(full, sizeof full, "%s.tls.require_client_cert", shown);
        return fail_at(c, node_at(c, n, "tls.require_client_cert"), full,
                       "needs tls.ca_file: the CAs client certificates are checked against");
    }
    if (t->use_identity_as_username && !t->require_client_cert) {
        snprintf(full, sizeof full, "%s.tls.use_identity_as_username", shown);
        return fail_at(c, node_at(c, n, "tls.use_identity_as_username"), full,
                       "needs tls.require_client_cert: true (every client then has a certificate to name it)");
    }
    return 0;
}

static int parse_listeners(pctx_t *c, const cfg__key_t *k, const yaml_node_t *n)
{
    if (is_null(n))
        return 0; /* "listeners:" with nothing: as if absent */
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, k->path, "expected a list of listeners (- address: host:port), got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt < k->min)
        return fail_at(c, n, k->path, "at least %llu listener is required", (unsigned long long)k->min);
    if (cnt > k->max)
        return fail_at(c, n, k->path, "at most %llu listeners are allowed", (unsigned long long)k->max);
    cfg_t *cfg = c->cfg;
    c->listeners = n;
    cfg->mqtt.listeners = tb_calloc(cnt, sizeof *cfg->mqtt.listeners);
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *in = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        cfg->mqtt.nlisteners = i + 1;
        cfg_listener_t *l = &cfg->mqtt.listeners[i];
        int rc = parse_listener(c, in, i, l);
        if (rc < 0)
            return rc;
        unsigned port = addr_port(l->address);
        for (size_t j = 0; port && j < i; j++) {
            if (strcmp(cfg->mqtt.listeners[j].address, l->address) == 0) {
                char full[64];
                snprintf(full, sizeof full, "mqtt.listeners[%zu].address", i);
                return fail_at(c, node_at(c, in, "address"), full, "\"%s\" is already mqtt.listeners[%zu] (line %d)",
                               l->address, j, cfg->mqtt.listeners[j].line);
            }
        }
    }
    return 0;
}

/* ---- outputs ------------------------------------------------------------------ */

static const yaml_node_t *out_at(const entry_seen_t *os, const char *path, const yaml_node_t *entry)
{
    for (size_t i = 0; i < cfg__noutputs_keys; i++)
        if (strcmp(cfg__output_keys[i].path, path) == 0 && os->at[i])
            return os->at[i];
    return entry;
}

/* Sparkplug ids are topic levels: no '+', '/', '#'. */
static const char *spb_id_why(const char *s)
{
    if (strpbrk(s, "+/#"))
        return "a Sparkplug id is one topic level: no '+', '/' or '#'";
    if (!tb_utf8_valid((const uint8_t *)s, strlen(s)))
        return "not valid UTF-8";
    return NULL;
}

static int parse_output(pctx_t *c, const yaml_node_t *n, size_t idx, cfg_output_t *o)
{
    char shown[64];
    snprintf(shown, sizeof shown, "outputs[%zu]", idx);
    entry_seen_t os;
    int rc = read_entry(c, n, shown, "a mapping with name and kind",
                        (entry_tab_t){ cfg__output_keys, cfg__noutputs_keys }, o, &o->line, &os);
    if (rc < 0)
        return rc;
    o->has_tls = os.tls != NULL;
    char full[256];
    for (size_t i = 0; i < cfg__noutputs_keys; i++) {
        const cfg__key_t *k = &cfg__output_keys[i];
        snprintf(full, sizeof full, "%s.%s", shown, k->path);
        if ((k->flags & CFG__F_REQUIRED) && !os.seen[i])
            return fail_at(c, n, full, "required key missing");
    }
    const char *kind = cfg__output_kinds[o->kind];
    unsigned kbit = o->kind == CFG_OUTPUT_DANUBE ? CFG__F_K_DANUBE
                  : o->kind == CFG_OUTPUT_MQTT   ? CFG__F_K_MQTT
                                                 : CFG__F_K_SPB;
    for (size_t i = 0; i < cfg__noutputs_keys; i++) {
        const cfg__key_t *k = &cfg__output_keys[i];
        if (os.seen[i] && !(k->flags & kbit)) {
            snprintf(full, sizeof full, "%s.%s", shown, k->path);
            return fail_at(c, os.at[i], full, "not a key of kind %s%s", kind,
                           o->kind == CFG_OUTPUT_DANUBE ? " (its connection is edge.*)" : "");
        }
    }
    if (o->has_tls && o->kind == CFG_OUTPUT_DANUBE) {
        snprintf(full, sizeof full, "%s.tls", shown);
        return fail_at(c, os.tls, full, "not a key of kind danube (its TLS is edge.tls.*)");
    }
    snprintf(full, sizeof full, "%s.name", shown);
    const char *nm = o->name;
    if (strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(nm))
        return fail_at(c, out_at(&os, "name", n), full, "\"%s\": letters, digits, _ and - only (it names files and "
                       "metrics)", nm);
    if (strcmp(nm, "danube") == 0 && o->kind != CFG_OUTPUT_DANUBE)
        return fail_at(c, out_at(&os, "name", n), full, "\"danube\" is the name of the danube output; this one is "
                       "kind %s", kind);
    if (!out_at(&os, "topics", NULL)) { /* topics: default all */
        o->topics = tb_calloc(1, sizeof *o->topics);
        o->topics[0] = tb_strdup("#");
        o->ntopics = 1;
    }
    if (o->kind == CFG_OUTPUT_DANUBE)
        return 0;
    if (!o->broker) {
        snprintf(full, sizeof full, "%s.broker", shown);
        return fail_at(c, n, full, "required key missing (kind %s needs the remote broker, host:port)", kind);
    }
    if (o->has_tls && !*o->tls.cert_file != !*o->tls.key_file) {
        snprintf(full, sizeof full, "%s.tls.%s", shown, *o->tls.cert_file ? "key_file" : "cert_file");
        return fail_at(c, os.tls, full, "tls.cert_file and tls.key_file go together: give both or neither");
    }
    if (o->kind == CFG_OUTPUT_MQTT) {
        const char *why = cfg__template_check(o->remote_topic, false);
        if (why) {
            snprintf(full, sizeof full, "%s.remote_topic", shown);
            return fail_at(c, out_at(&os, "remote_topic", n), full, "\"%s\": %s", o->remote_topic, why);
        }
        return 0;
    }
    /* sparkplug */
    if (!*o->group_id) {
        snprintf(full, sizeof full, "%s.group_id", shown);
        return fail_at(c, out_at(&os, "group_id", n), full, "required key missing (kind sparkplug)");
    }
    static const char *const ids[] = { "group_id", "edge_node_id", "primary_host_id" };
    const char *vals[] = { o->group_id, o->edge_node_id, o->primary_host_id };
    for (size_t i = 0; i < 3; i++) {
        const char *why = spb_id_why(vals[i]);
        if (why) {
            snprintf(full, sizeof full, "%s.%s", shown, ids[i]);
            return fail_at(c, out_at(&os, ids[i], n), full, "\"%s\": %s", vals[i], why);
        }
    }
    if (o->device) {
        const char *why = cfg__template_check(o->device, true);
        if (why) {
            snprintf(full, sizeof full, "%s.device", shown);
            return fail_at(c, out_at(&os, "device", n), full, "\"%s\": %s", o->device, why);
        }
    }
    return 0;
}

static int parse_outputs(pctx_t *c, const cfg__key_t *k, const yaml_node_t *n)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, k->path, "expected a list of outputs (- name: ..., kind: ...), got %s", node_kind(n));
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt < k->min)
        return fail_at(c, n, k->path, "at least %llu output is required (or leave the section out: one danube "
                       "output)", (unsigned long long)k->min);
    if (cnt > k->max)
        return fail_at(c, n, k->path, "at most %llu outputs are allowed", (unsigned long long)k->max);
    cfg_t *cfg = c->cfg;
    cfg__free_outputs(cfg); /* the implied one */
    c->outputs = n;
    cfg->outputs = tb_calloc(cnt, sizeof *cfg->outputs);
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *in = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        cfg->noutputs = i + 1;
        cfg_output_t *o = &cfg->outputs[i];
        int rc = parse_output(c, in, i, o);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const cfg_output_t *p = &cfg->outputs[j];
            char full[64];
            if (strcmp(p->name, o->name) == 0) {
                snprintf(full, sizeof full, "outputs[%zu].name", i);
                return fail_at(c, node_at(c, in, "name"), full, "\"%s\" is already outputs[%zu] (line %d)", o->name,
                               j, p->line);
            }
            if (p->kind == CFG_OUTPUT_DANUBE && o->kind == CFG_OUTPUT_DANUBE) {
                snprintf(full, sizeof full, "outputs[%zu].kind", i);
                return fail_at(c, node_at(c, in, "kind"), full, "a second danube output (outputs[%zu], line %d, is "
                               "one): there is one cluster, edge.cluster_url", j, p->line);
            }
        }
    }
    return 0;
}

/* After the file and the environment: defaults that depend on other keys,
 * and the rules across outputs that need them. */
static int finish_outputs(pctx_t *c)
{
    cfg_t *cfg = c->cfg;
    bool danube = false;
    for (size_t i = 0; i < cfg->noutputs; i++) {
        cfg_output_t *o = &cfg->outputs[i];
        danube |= o->kind == CFG_OUTPUT_DANUBE;
        if (o->kind == CFG_OUTPUT_DANUBE)
            continue;
        if (!*o->client_id) {
            char id[512];
            snprintf(id, sizeof id, "tributary-%s-%s", cfg->edge.edge_name, o->name);
            free(o->client_id);
            o->client_id = tb_strdup(id);
        }
        if (o->kind == CFG_OUTPUT_SPARKPLUG && !*o->edge_node_id) {
            free(o->edge_node_id);
            o->edge_node_id = tb_strdup(cfg->edge.edge_name);
        }
        for (size_t j = 0; j < i; j++) {
            const cfg_output_t *p = &cfg->outputs[j];
            if (p->kind != CFG_OUTPUT_DANUBE && strcmp(p->broker, o->broker) == 0 &&
                strcmp(p->client_id, o->client_id) == 0) {
                char full[64];
                snprintf(full, sizeof full, "outputs[%zu].client_id", i);
                const yaml_node_t *in = yaml_document_get_node(c->doc, c->outputs->data.sequence.items.start[i]);
                const yaml_node_t *at = node_at(c, in, "client_id");
                return fail_at(c, at ? at : in, full, "\"%s\" is already the client id of outputs[%zu] (%s, line %d) "
                               "on broker %s: the broker would disconnect one for the other", o->client_id, j,
                               p->name, p->line, o->broker);
            }
        }
    }
    if (danube && !cfg->edge.cluster_url) {
        const yaml_node_t *at = NULL;
        for (size_t i = 0; c->outputs && i < cfg->noutputs && !at; i++)
            if (cfg->outputs[i].kind == CFG_OUTPUT_DANUBE)
                at = yaml_document_get_node(c->doc, c->outputs->data.sequence.items.start[i]);
        return fail_at(c, at, "edge.cluster_url", "required key missing%s",
                       at ? " (the danube output sends to it)" : "");
    }
    return 0;
}

/* mqtt.listener (file or environment) with mqtt.listeners: which one is meant is not ours to guess. */
static int check_one_listener_key(pctx_t *c)
{
    if (!c->listeners || c->cfg->mqtt.nlisteners == 0)
        return 0;
    for (size_t i = 0; i < cfg__nkeys; i++) {
        if (strcmp(cfg__keys[i].path, "mqtt.listener") != 0 || !c->seen[i])
            continue;
        const yaml_node_t *root = yaml_document_get_root_node(c->doc);
        const yaml_node_t *kn = lookup(c->doc, lookup(c->doc, root, "mqtt", false), "listener", true);
        return fail_at(c, kn, "mqtt.listener",
                       "given with mqtt.listeners (line %zu), which replaces it: make it an entry there "
                       "(- address: \"%s\")%s",
                       c->listeners->start_mark.line + 1, c->cfg->mqtt.listener,
                       kn ? "" : " (it came from TRIBUTARY_MQTT_LISTENER)");
    }
    return 0;
}

static bool is_section(const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < cfg__nkeys; i++)
        if (strncmp(cfg__keys[i].path, path, n) == 0 && cfg__keys[i].path[n] == '.')
            return true;
    return false;
}

static int walk(pctx_t *c, const yaml_node_t *map, const char *prefix)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
        const char *name = key_text(c, kn, *prefix ? prefix : "(top level)");
        if (!name)
            return TB_ECONFIG;
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        if (check_dup(c, map, p, name, path) < 0)
            return TB_ECONFIG;
        size_t i;
        for (i = 0; i < cfg__nkeys; i++)
            if (strcmp(cfg__keys[i].path, path) == 0)
                break;
        int rc;
        if (i < cfg__nkeys) {
            const cfg__key_t *k = &cfg__keys[i];
            c->seen[i] = true;
            rc = k->type == CFG__MAPPINGS    ? parse_mappings(c, k, vn)
               : k->type == CFG__LISTENERS ? parse_listeners(c, k, vn)
               : k->type == CFG__OUTPUTS   ? parse_outputs(c, k, vn)
                                           : set_leaf(c, k, c->cfg, vn, path);
        } else if (is_section(path)) {
            if (vn->type != YAML_MAPPING_NODE) {
                if (is_null(vn))
                    continue; /* "wal:" with nothing under it: all defaults */
                return fail_at(c, vn, path, "expected a section (a mapping of keys), got %s", node_kind(vn));
            }
            if (strcmp(path, "http.tls") == 0)
                c->cfg->http.has_tls = true; /* even empty: then its required keys are missing */
            rc = walk(c, vn, path);
        } else if (strcmp(path, "http.tls.use_identity_as_username") == 0) {
            return fail_at(c, kn, path, "the HTTP endpoint has no user names, so this listener key has no "
                                        "meaning here (its credential is the bearer token, "
                                        "http.auth_token_file; a client certificate only opens the handshake)");
        } else {
            return unknown_key(c, kn, "", prefix, name, cfg__keys, cfg__nkeys);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void env_name(const char *path, char *out, size_t outlen)
{
    size_t n = (size_t)snprintf(out, outlen, "TRIBUTARY_");
    for (const char *p = path; *p && n + 1 < outlen; p++)
        out[n++] = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
    out[n] = '\0';
}

static int apply_env(pctx_t *c)
{
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (k->type == CFG__MAPPINGS || k->type == CFG__LISTENERS || k->type == CFG__OUTPUTS)
            continue; /* lists: not from the environment (their entries' strings may use ${NAME}) */
        char name[128];
        env_name(k->path, name, sizeof name);
        size_t nlen = strlen(name);
        for (char *const *e = c->envp; e && *e; e++) {
            if (strncmp(*e, name, nlen) != 0 || (*e)[nlen] != '=')
                continue;
            char msg[256];
            if (cfg__set_scalar(k, c->cfg, *e + nlen + 1, msg, sizeof msg) < 0) {
                cfg_err_set(c->e, c->file, 0, 0, k->path, msg);
                snprintf(c->e->text, sizeof c->e->text, "environment %s: %s: %s", name, k->path, msg);
                return TB_ECONFIG;
            }
            c->seen[i] = true;
            if (strncmp(k->path, "http.tls.", 9) == 0)
                c->cfg->http.has_tls = true; /* as an http.tls mapping in the file would */
        }
    }
    return 0;
}

/* Finds a node by key in a mapping node; NULL if absent. */
static const yaml_node_t *lookup(yaml_document_t *doc, const yaml_node_t *map, const char *key, bool want_key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key);
        if (kn->type == YAML_SCALAR_NODE && strcmp((const char *)kn->data.scalar.value, key) == 0)
            return want_key ? kn : yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

static void locate(void *arg, long idx, const char *field, int *line, int *col)
{
    pctx_t *c = arg;
    const yaml_node_t *n = NULL;
    *line = *col = 0;
    if (idx < 0) {
        /* top-level dotted path: walk the sections */
        char path[256];
        snprintf(path, sizeof path, "%s", field);
        n = yaml_document_get_root_node(c->doc);
        for (char *save = NULL, *tok = strtok_r(path, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save)) {
            const yaml_node_t *next = lookup(c->doc, n, tok, false);
            if (!next) break;
            n = next;
        }
    } else if (c->mappings && (size_t)idx < (size_t)(c->mappings->data.sequence.items.top -
                                                  c->mappings->data.sequence.items.start)) {
        n = yaml_document_get_node(c->doc, c->mappings->data.sequence.items.start[idx]);
        if (field) {
            char path[256];
            snprintf(path, sizeof path, "%s", field);
            for (char *save = NULL, *tok = strtok_r(path, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save)) {
                const yaml_node_t *next = lookup(c->doc, n, tok, false);
                if (!next) break;
                n = next;
            }
        }
    }
    if (n) {
        *line = (int)n->start_mark.line + 1;
        *col = (int)n->start_mark.column + 1;
    }
}

extern char **environ;

void cfg_err_set(cfg_err_t *e, const char *file, int line, int column, const char *key, const char *message)
{
    memset(e, 0, sizeof *e);
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    e->line = line > 0 ? line : 0;
    e->column = e->line && column > 0 ? column : 0;
    snprintf(e->key, sizeof e->key, "%s", key ? key : "");
    snprintf(e->message, sizeof e->message, "%s", message ? message : "");
    char where[32] = "";
    if (e->column)
        snprintf(where, sizeof where, ":%d:%d", e->line, e->column);
    else if (e->line)
        snprintf(where, sizeof where, ":%d", e->line);
    snprintf(e->text, sizeof e->text, "%s%s: %s%s%s", file ? file : "", where, key ? key : "",
             key && *key ? ": " : "", e->message);
}

static void copy_text(const cfg_err_t *e, char *err, size_t errlen)
{
    if (errlen)
        snprintf(err, errlen, "%s", e->text);
}

int cfg_load_string(const char *name, const char *yaml, size_t len, char *const *envp,
                    cfg_t **out, char *err, size_t errlen)
{
    cfg_err_t e;
    int rc = cfg_load_string_ex(name, yaml, len, envp, out, &e);
    if (rc < 0)
        copy_text(&e, err, errlen);
    return rc;
}

int cfg_load_string_ex(const char *name, const char *yaml, size_t len, char *const *envp, cfg_t **out,
                       cfg_err_t *e)
{
    *out = NULL;
    memset(e, 0, sizeof *e);
    cfg_t *cfg = tb_calloc(1, sizeof *cfg);
    cfg->source = tb_strdup(name);
    cfg__set_defaults(cfg);

    bool seen[cfg__nkeys];
    memset(seen, 0, sizeof seen);
    pctx_t c = { .file = name, .envp = envp ? envp : environ, .cfg = cfg, .seen = seen,
                 .e = e };

    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    int rc = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s%s%s", parser.problem ? parser.problem : "syntax error",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        cfg_err_set(e, name, (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1, "(yaml)", msg);
        yaml_parser_delete(&parser);
        cfg_free(cfg);
        return TB_ECONFIG;
    }
    c.doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type != YAML_MAPPING_NODE && !is_null(root))
        rc = fail_at(&c, root, "(top level)", "expected a mapping of sections, got %s", node_kind(root));
    else if (root && root->type == YAML_MAPPING_NODE)
        rc = walk(&c, root, "");
    if (rc == 0)
        rc = apply_env(&c);
    /* a mapping without its own durability takes wal.durability, wherever
     * in the file (or the environment) that was given */
    for (size_t i = 0; rc == 0 && i < cfg->mqtt.nmappings; i++)
        if (!cfg->mqtt.mappings[i].durability_given)
            cfg->mqtt.mappings[i].durability = cfg->wal.durability;
    if (rc == 0)
        rc = check_one_listener_key(&c);

    for (size_t i = 0; rc == 0 && i < cfg__nkeys; i++)
        if ((cfg__keys[i].flags & CFG__F_REQUIRED) && !seen[i])
            rc = fail_at(&c, NULL, cfg__keys[i].path, "required key missing");
    if (rc == 0)
        rc = finish_outputs(&c);
    if (rc == 0)
        rc = cfg__check(cfg, locate, &c, e);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc < 0) {
        cfg_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

int cfg_load(const char *path, char *const *envp, cfg_t **out, char *err, size_t errlen)
{
    cfg_err_t e;
    int rc = cfg_load_ex(path, envp, out, &e);
    if (rc < 0)
        copy_text(&e, err, errlen);
    return rc;
}

int cfg_load_ex(const char *path, char *const *envp, cfg_t **out, cfg_err_t *e)
{
    *out = NULL;
    memset(e, 0, sizeof *e);
    if (!path) {
        const char *y = cfg_embedded_default();
        return cfg_load_string_ex("<embedded default>", y, strlen(y), envp, out, e);
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int en = errno;
        char msg[300];
        snprintf(msg, sizeof msg, "cannot open: %s", strerror(en));
        cfg_err_set(e, path, 0, 0, NULL, msg);
        return -en;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (16u << 20)) {
                fclose(f);
                free(buf);
                cfg_err_set(e, path, 0, 0, NULL, "file larger than 16 MiB");
                return TB_ECONFIG;
            }
            buf = tb_realloc(buf, cap);
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int ioerr = ferror(f);
    fclose(f);
    if (ioerr) {
        free(buf);
        cfg_err_set(e, path, 0, 0, NULL, "read error");
        return -EIO;
    }
    int rc = cfg_load_string_ex(path, buf ? buf : "", len, envp, out, e);
    free(buf);
    return rc;
}

static void free_mapping(cfg_mapping_t *m)
{
    free(m->mqtt_pattern);
    free(m->danube_topic);
    free(m->schema_subject);
    for (size_t i = 0; i < m->nattrs; i++) {
        free(m->attrs[i].name);
        free(m->attrs[i].ref);
    }
    free(m->attrs);
    for (size_t i = 0; i < m->ncapvals; i++) {
        free(m->capvals[i].ref);
        for (size_t j = 0; j < m->capvals[i].nvalues; j++)
            free(m->capvals[i].values[j]);
        free(m->capvals[i].values);
    }
    free(m->capvals);
}

static void free_listener(cfg_listener_t *l)
{
    for (size_t i = 0; i < cfg__nlistener_keys; i++) {
        const cfg__key_t *k = &cfg__listener_keys[i];
        if (k->type == CFG__STR || k->type == CFG__ADDR)
            free(*(char **)((char *)l + k->off));
    }
}

cfg_t *cfg_ref(const cfg_t *cfg)
{
    cfg_t *c = (cfg_t *)cfg;
    __atomic_add_fetch(&c->refs_, 1, __ATOMIC_RELAXED);
    return c;
}

void cfg_free(cfg_t *cfg)
{
    if (!cfg)
        return;
    unsigned refs = __atomic_load_n(&cfg->refs_, __ATOMIC_ACQUIRE);
    while (refs) /* another owner remains: one fewer */
        if (__atomic_compare_exchange_n(&cfg->refs_, &refs, refs - 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return;
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (k->type == CFG__STR || k->type == CFG__ADDR || k->type == CFG__URL)
            free(*(char **)((char *)cfg + k->off));
    }
    for (size_t i = 0; i < cfg->mqtt.nmappings; i++)
        free_mapping(&cfg->mqtt.mappings[i]);
    free(cfg->mqtt.mappings);
    for (size_t i = 0; i < cfg->mqtt.nlisteners; i++)
        free_listener(&cfg->mqtt.listeners[i]);
    free(cfg->mqtt.listeners);
    cfg__free_outputs(cfg);
    free(cfg->source);
    free(cfg);
}

size_t cfg__distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return (size_t)-1;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof cur);
    }
    return prev[lb];
}
