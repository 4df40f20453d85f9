/*
 * sch_flat.c: a JSON payload as (path, value) leaves, for outputs whose
 * messages are metrics (Sparkplug B: docs/design/OUTPUTS.md 5.2).
 *
 * The payload is parsed with jansson (as the JSON Schema validator does),
 * duplicate keys refused, then walked depth first in document order, the
 * path built in one fixed buffer (no allocation per leaf). A path names a
 * metric, so it must be unique in the payload: keys are never empty and
 * never hold the separator '/', array indexes are decimal; with duplicate
 * keys refused, two leaves cannot share a path.
 */
#include "schema/schema.h"
#include "schema/sch_internal.h"

#include "base/base.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct walk {
    sch_flat_cb cb;
    void *arg;
    char path[SCH_FLAT_MAX_PATH + 1];
    char *err;
    size_t errlen;
} walk_t;

static int refuse(walk_t *w, const char *fmt, const char *a, const char *b) __attribute__((format(printf, 2, 0)));
static int refuse(walk_t *w, const char *fmt, const char *a, const char *b)
{
    if (w->err && w->errlen)
        snprintf(w->err, w->errlen, fmt, a, b);
    return TB_EINVALID;
}

long sch__path_push(char *path, size_t plen, const char *s, size_t n)
{
    size_t need = plen + (plen ? 1 : 0) + n;
    if (need > SCH_FLAT_MAX_PATH)
        return -1;
    if (plen)
        path[plen++] = '/';
    memcpy(path + plen, s, n);
    path[need] = '\0';
    return (long)need;
}

static long push(walk_t *w, size_t plen, const char *s, size_t n)
{
    return sch__path_push(w->path, plen, s, n);
}

static int walk(walk_t *w, const json_t *v, size_t plen, int depth)
{
    if (json_is_object(v) || json_is_array(v)) {
        if (depth >= SCH_FLAT_MAX_DEPTH)
            return refuse(w, "\"%.200s\": deeper than %s levels", w->path, "32");
        if (json_is_object(v)) {
            const char *key;
            json_t *child;
            json_object_foreach((json_t *)v, key, child) {
                size_t klen = strlen(key);
                if (klen == 0)
                    return refuse(w, "\"%.200s\": an empty key cannot name a metric%s", w->path, "");
                if (memchr(key, '/', klen))
                    return refuse(w, "key \"%.200s\" under \"%.200s\" holds '/', the metric path separator", key,
                                  w->path);
                long n = push(w, plen, key, klen);
                if (n < 0)
                    return refuse(w, "\"%.200s...\": a path is at most %s bytes", w->path, "1024");
                int rc = walk(w, child, (size_t)n, depth + 1);
                if (rc)
                    return rc;
                w->path[plen] = '\0';
            }
            return 0;
        }
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child) {
            char idx[24];
            int k = snprintf(idx, sizeof idx, "%zu", i);
            long n = push(w, plen, idx, (size_t)k);
            if (n < 0)
                return refuse(w, "\"%.200s...\": a path is at most %s bytes", w->path, "1024");
            int rc = walk(w, child, (size_t)n, depth + 1);
            if (rc)
                return rc;
            w->path[plen] = '\0';
        }
        return 0;
    }
    sch_flat_value_t fv = { .type = SCH_FLAT_NULL };
    switch (json_typeof(v)) {
    case JSON_TRUE: fv.type = SCH_FLAT_BOOL; fv.b = true; break;
    case JSON_FALSE: fv.type = SCH_FLAT_BOOL; fv.b = false; break;
    case JSON_INTEGER: fv.type = SCH_FLAT_INT; fv.i = (int64_t)json_integer_value(v); break;
    case JSON_REAL: fv.type = SCH_FLAT_DOUBLE; fv.d = json_real_value(v); break;
    case JSON_STRING:
        fv.type = SCH_FLAT_STRING;
        fv.s = json_string_value(v);
        fv.len = json_string_length(v);
        break;
    default: break; /* JSON_NULL */
    }
    return w->cb(w->arg, w->path, plen, &fv);
}

int sch_flatten_json(const uint8_t *payload, size_t len, sch_flat_cb cb, void *arg, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    json_error_t je;
    /* JSON_DECODE_INT_AS_REAL stays off: an integer is kept an integer */
    json_t *root = json_loadb((const char *)payload, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
    if (!root) {
        if (err && errlen)
            snprintf(err, errlen, "refused as JSON: %s (byte %d)", je.text, je.position);
        return TB_EINVALID;
    }
    int rc;
    if (!json_is_object(root)) {
        if (err && errlen)
            snprintf(err, errlen, "the payload is JSON but not an object: its fields are the metrics");
        rc = TB_EINVALID;
    } else {
        walk_t *w = tb_calloc(1, sizeof *w);
        w->cb = cb;
        w->arg = arg;
        w->err = err;
        w->errlen = errlen;
        rc = walk(w, root, 0, 0);
        free(w);
    }
    json_decref(root);
    return rc;
}
