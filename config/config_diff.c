/*
 * config_diff.c: which keys differ between two configurations, driven by
 * the same key table as everything else. SIGHUP uses it to apply what can
 * change at run time and to name what needs a restart.
 */
#include "config/config_int.h"

#include <stdio.h>
#include <string.h>

static bool same_value(const cfg__key_t *k, const void *a, const void *b)
{
    const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;
    switch (k->type) {
    case CFG__STR: case CFG__ADDR: case CFG__URL: {
        const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
        if (!sa || !sb) return sa == sb;
        return strcmp(sa, sb) == 0;
    }
    case CFG__BOOL: return *(const bool *)fa == *(const bool *)fb;
    case CFG__U32: case CFG__MS: return *(const uint32_t *)fa == *(const uint32_t *)fb;
    case CFG__U64: case CFG__BYTES: case CFG__DURATION: return *(const uint64_t *)fa == *(const uint64_t *)fb;
    case CFG__ENUM: return *(const int *)fa == *(const int *)fb;
    case CFG__SPACE: {
        const cfg_space_t *sa = (const cfg_space_t *)fa, *sb = (const cfg_space_t *)fb;
        return sa->bytes == sb->bytes && sa->permille == sb->permille;
    }
    default: return true; /* lists are compared by the caller */
    }
}

static bool same_attrs(const cfg_mapping_t *a, const cfg_mapping_t *b)
{
    if (a->nattrs != b->nattrs) return false;
    for (size_t i = 0; i < a->nattrs; i++)
        if (strcmp(a->attrs[i].name, b->attrs[i].name) || strcmp(a->attrs[i].ref, b->attrs[i].ref))
            return false;
    return true;
}

static bool same_capvals(const cfg_mapping_t *a, const cfg_mapping_t *b)
{
    if (a->ncapvals != b->ncapvals) return false;
    for (size_t i = 0; i < a->ncapvals; i++) {
        const cfg_capvals_t *x = &a->capvals[i], *y = &b->capvals[i];
        if (strcmp(x->ref, y->ref) || x->nvalues != y->nvalues) return false;
        for (size_t j = 0; j < x->nvalues; j++)
            if (strcmp(x->values[j], y->values[j])) return false;
    }
    return true;
}

static void diff_listeners(const cfg_t *a, const cfg_t *b, const char *key, void (*cb)(void *arg, const char *key),
                           void *arg)
{
    if (a->mqtt.nlisteners != b->mqtt.nlisteners) {
        cb(arg, key);
        return;
    }
    for (size_t l = 0; l < a->mqtt.nlisteners; l++) {
        const cfg_listener_t *la = &a->mqtt.listeners[l], *lb = &b->mqtt.listeners[l];
        if (la->has_tls != lb->has_tls) {
            char path[128];
            snprintf(path, sizeof path, "%s[%zu].tls", key, l);
            cb(arg, path);
        }
        for (size_t j = 0; j < cfg__nlistener_keys; j++) {
            const cfg__key_t *lk = &cfg__listener_keys[j];
            if (!same_value(lk, la, lb)) {
                char path[128];
                snprintf(path, sizeof path, "%s[%zu].%s", key, l, lk->path);
                cb(arg, path);
            }
        }
    }
}

static bool same_strlist(const cfg_output_t *a, const cfg_output_t *b)
{
    if (a->ntopics != b->ntopics) return false;
    for (size_t i = 0; i < a->ntopics; i++)
        if (strcmp(a->topics[i], b->topics[i])) return false;
    return true;
}

/* Outputs are matched by name, not position ("outputs[central].qos"); one
 * added or removed is reported as "outputs[NAME]". */
static void diff_outputs(const cfg_t *a, const cfg_t *b, void (*cb)(void *arg, const char *key), void *arg)
{
    for (size_t i = 0; i < a->noutputs; i++) {
        const cfg_output_t *oa = &a->outputs[i], *ob = NULL;
        for (size_t j = 0; j < b->noutputs && !ob; j++)
            if (strcmp(b->outputs[j].name, oa->name) == 0)
                ob = &b->outputs[j];
        char path[160];
        if (!ob) {
            snprintf(path, sizeof path, "outputs[%s]", oa->name);
            cb(arg, path);
            continue;
        }
        if (oa->kind != ob->kind || oa->has_tls != ob->has_tls) {
            snprintf(path, sizeof path, "outputs[%s].%s", oa->name, oa->kind != ob->kind ? "kind" : "tls");
            cb(arg, path);
        }
        for (size_t j = 0; j < cfg__noutputs_keys; j++) {
            const cfg__key_t *k = &cfg__output_keys[j];
            if (k->type == CFG__ENUM && strcmp(k->path, "kind") == 0)
                continue;
            bool same = k->type == CFG__STRLIST ? same_strlist(oa, ob) : same_value(k, oa, ob);
            if (!same) {
                snprintf(path, sizeof path, "outputs[%s].%s", oa->name, k->path);
                cb(arg, path);
            }
        }
    }
    for (size_t j = 0; j < b->noutputs; j++) {
        bool found = false;
        for (size_t i = 0; i < a->noutputs && !found; i++)
            found = strcmp(a->outputs[i].name, b->outputs[j].name) == 0;
        if (!found) {
            char path[160];
            snprintf(path, sizeof path, "outputs[%s]", b->outputs[j].name);
            cb(arg, path);
        }
    }
}

void cfg_diff(const cfg_t *a, const cfg_t *b, void (*cb)(void *arg, const char *key), void *arg)
{
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (k->type == CFG__OUTPUTS) {
            diff_outputs(a, b, cb, arg);
            continue;
        }
        if (k->type == CFG__LISTENERS) {
            diff_listeners(a, b, k->path, cb, arg);
            continue;
        }
        if (k->type == CFG__MAPPINGS) {
            if (a->mqtt.nmappings != b->mqtt.nmappings) {
                cb(arg, k->path);
                continue;
            }
            for (size_t m = 0; m < a->mqtt.nmappings; m++) {
                const cfg_mapping_t *ma = &a->mqtt.mappings[m], *mb = &b->mqtt.mappings[m];
                for (size_t j = 0; j < cfg__nmapping_keys; j++) {
                    const cfg__key_t *mk = &cfg__mapping_keys[j];
                    bool same = mk->type == CFG__ATTRS ? same_attrs(ma, mb)
                              : mk->type == CFG__CAPVALS ? same_capvals(ma, mb)
                              : same_value(mk, ma, mb);
                    if (!same) {
                        char path[128];
                        snprintf(path, sizeof path, "%s[%zu].%s", k->path, m, mk->path);
                        cb(arg, path);
                    }
                }
            }
            continue;
        }
        if (!same_value(k, a, b))
            cb(arg, k->path);
    }
}
