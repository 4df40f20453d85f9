/*
 * sch_flat_avro.c: an Avro binary record as (path, value) leaves, for
 * metric outputs (Sparkplug B: docs/design/OUTPUTS.md 5.2).
 *
 * avro-c parsed the schema (sch_avro_compile.c); the payload is not read
 * with avro-c's own reader, which allocates lengths before checking them
 * and accepts trailing bytes (the measurements in sch_avro.h). Instead the
 * payload is first checked by the validator's bounded walker, and only a
 * datum that passed is decoded here, over the same compiled nodes: so every
 * length, count and index below is known to fit, and the reads still check
 * the end (a second line of defence, cheap). Paths are built in one buffer
 * as in sch_flat.c; a map's keys are checked for uniqueness with a small
 * hash set per map, so a hostile map costs linear time.
 */
#include "schema/sch_avro.h"

#include "base/base.h"
#include "schema/sch_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fwalk {
    const sch__av_node_t *nodes;
    const uint8_t *p, *end;
    sch_flat_cb cb;
    void *arg;
    char path[SCH_FLAT_MAX_PATH + 1];
    char *err;
    size_t errlen;
} fwalk_t;

#define BROKEN(w) refuse((w), "\"%.200s\": the datum ends early", (w)->path, "")

static int refuse(fwalk_t *w, const char *fmt, const char *a, const char *b) __attribute__((format(printf, 2, 0)));
static int refuse(fwalk_t *w, const char *fmt, const char *a, const char *b)
{
    sch__errf(w->err, w->errlen, fmt, a, b);
    return TB_EINVALID;
}

static int varint(fwalk_t *w, int64_t *out)
{
    uint64_t raw = 0;
    for (int i = 0; i < 10; i++) {
        if (w->p == w->end)
            return -1;
        uint8_t b = *w->p++;
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
            return 0;
        }
    }
    return -1;
}

static int take(fwalk_t *w, size_t n, const uint8_t **at)
{
    if ((size_t)(w->end - w->p) < n)
        return -1;
    *at = w->p;
    w->p += n;
    return 0;
}

static long push(fwalk_t *w, size_t plen, const char *s, size_t n)
{
    return sch__path_push(w->path, plen, s, n);
}

/* Keys seen in one map: open addressing over (pointer, length) into the payload. */
typedef struct keyset {
    const uint8_t **k;
    size_t *n;
    size_t cap, used;
} keyset_t;

static bool keyset_add(keyset_t *s, const uint8_t *k, size_t n)
{
    if ((s->used + 1) * 2 > s->cap) {
        keyset_t g = { .cap = s->cap ? s->cap * 2 : 16 };
        g.k = tb_calloc(g.cap, sizeof *g.k);
        g.n = tb_calloc(g.cap, sizeof *g.n);
        for (size_t i = 0; i < s->cap; i++)
            if (s->k[i])
                keyset_add(&g, s->k[i], s->n[i]);
        free(s->k);
        free(s->n);
        *s = g;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->k[i]) {
            s->k[i] = k;
            s->n[i] = n;
            s->used++;
            return true;
        }
        if (s->n[i] == n && memcmp(s->k[i], k, n) == 0)
            return false;
    }
}

static int walk(fwalk_t *w, uint32_t ni, size_t plen, int depth);

static int leaf(fwalk_t *w, size_t plen, const sch_flat_value_t *v)
{
    if (plen == 0)
        return refuse(w, "the datum is not a record: its fields are the metrics%s%s", "", "");
    return w->cb(w->arg, w->path, plen, v);
}

/* Array items or map entries, block by block. */
static int blocks(fwalk_t *w, const sch__av_node_t *n, size_t plen, int depth)
{
    bool is_map = n->type == SCH__AV_MAP;
    keyset_t keys = { 0 };
    uint64_t index = 0;
    int rc = 0;
    for (;;) {
        int64_t count, bytes;
        if (varint(w, &count)) {
            rc = BROKEN(w);
            break;
        }
        if (count == 0)
            break;
        if (count < 0) {
            if (varint(w, &bytes)) {
                rc = BROKEN(w);
                break;
            }
            count = -count;
        }
        for (int64_t i = 0; i < count && !rc; i++, index++) {
            char idx[24];
            const char *seg = idx;
            size_t slen;
            if (is_map) {
                int64_t klen;
                const uint8_t *k;
                if (varint(w, &klen) || klen < 0 || take(w, (size_t)klen, &k)) {
                    rc = BROKEN(w);
                    break;
                }
                slen = (size_t)klen;
                seg = (const char *)k;
                if (slen == 0) {
                    rc = refuse(w, "\"%.200s\": an empty map key cannot name a metric%s", w->path, "");
                    break;
                }
                if (memchr(k, '\0', slen)) {
                    rc = refuse(w, "a map key under \"%.200s\" holds a NUL byte, which cannot name a metric%s", w->path,
                                "");
                    break;
                }
                if (memchr(k, '/', slen)) {
                    rc = refuse(w, "a map key under \"%.200s\" holds '/', the metric path separator%s", w->path, "");
                    break;
                }
                if (!keyset_add(&keys, k, slen)) {
                    rc = refuse(w, "\"%.200s\": a map key appears twice (two values on one metric)%s", w->path, "");
                    break;
                }
            } else {
                slen = (size_t)snprintf(idx, sizeof idx, "%llu", (unsigned long long)index);
            }
            long m = push(w, plen, seg, slen);
            if (m < 0) {
                rc = refuse(w, "\"%.200s...\": a path is at most %s bytes", w->path, "1024");
                break;
            }
            rc = walk(w, n->kids[0], (size_t)m, depth + 1);
            w->path[plen] = '\0';
        }
        if (rc)
            break;
    }
    free(keys.k);
    free(keys.n);
    return rc;
}

static int walk(fwalk_t *w, uint32_t ni, size_t plen, int depth)
{
    const sch__av_node_t *n = &w->nodes[ni];
    sch_flat_value_t v = { .type = SCH_FLAT_NULL };
    int64_t x;
    const uint8_t *at;
    switch (n->type) {
    case SCH__AV_NULL: return leaf(w, plen, &v);
    case SCH__AV_BOOLEAN:
        if (take(w, 1, &at))
            return BROKEN(w);
        v.type = SCH_FLAT_BOOL;
        v.b = *at != 0;
        return leaf(w, plen, &v);
    case SCH__AV_INT:
    case SCH__AV_LONG:
        if (varint(w, &x))
            return BROKEN(w);
        v.type = SCH_FLAT_INT;
        v.i = x;
        return leaf(w, plen, &v);
    case SCH__AV_FLOAT: {
        float f;
        if (take(w, 4, &at))
            return BROKEN(w);
        memcpy(&f, at, 4); /* little endian, as the targets are */
        v.type = SCH_FLAT_DOUBLE;
        v.d = f;
        return leaf(w, plen, &v);
    }
    case SCH__AV_DOUBLE:
        if (take(w, 8, &at))
            return BROKEN(w);
        memcpy(&v.d, at, 8);
        v.type = SCH_FLAT_DOUBLE;
        return leaf(w, plen, &v);
    case SCH__AV_BYTES:
    case SCH__AV_STRING:
        if (varint(w, &x) || x < 0 || take(w, (size_t)x, &at))
            return BROKEN(w);
        v.type = n->type == SCH__AV_STRING ? SCH_FLAT_STRING : SCH_FLAT_BYTES;
        v.s = (const char *)at;
        v.len = (size_t)x;
        return leaf(w, plen, &v);
    case SCH__AV_FIXED:
        if (take(w, (size_t)n->size, &at))
            return BROKEN(w);
        v.type = SCH_FLAT_BYTES;
        v.s = (const char *)at;
        v.len = (size_t)n->size;
        return leaf(w, plen, &v);
    case SCH__AV_ENUM:
        if (varint(w, &x) || x < 0 || (uint64_t)x >= n->n)
            return BROKEN(w);
        v.type = SCH_FLAT_STRING;
        v.s = n->names[x];
        v.len = strlen(v.s);
        return leaf(w, plen, &v);
    case SCH__AV_UNION:
        if (varint(w, &x) || x < 0 || (uint64_t)x >= n->n)
            return BROKEN(w);
        return walk(w, n->kids[x], plen, depth);
    case SCH__AV_RECORD:
    case SCH__AV_ARRAY:
    case SCH__AV_MAP:
        break;
    }
    if (plen == 0 && n->type != SCH__AV_RECORD)
        return refuse(w, "the datum is not a record: its fields are the metrics%s%s", "", "");
    if (depth >= SCH_FLAT_MAX_DEPTH)
        return refuse(w, "\"%.200s\": deeper than %s levels", w->path, "32");
    if (n->type != SCH__AV_RECORD)
        return blocks(w, n, plen, depth);
    for (uint32_t f = 0; f < n->n; f++) {
        long m = push(w, plen, n->names[f], strlen(n->names[f]));
        if (m < 0)
            return refuse(w, "\"%.200s...\": a path is at most %s bytes", w->path, "1024");
        int rc = walk(w, n->kids[f], (size_t)m, depth + 1);
        w->path[plen] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

int sch_flatten_avro(const sch_validator_t *v, const uint8_t *payload, size_t len, sch_flat_cb cb, void *arg,
                     char *err, size_t errlen)
{
    sch__errf(err, errlen, "%s", "");
    const sch__avro_t *s = sch__validator_avro(v);
    if (!s) {
        sch__errf(err, errlen, "the schema is not Avro: nothing to flatten a record with");
        return TB_EUNSUPPORTED;
    }
    if (s->encoding != SCH_AVRO_BINARY) {
        sch__errf(err, errlen, "Avro's JSON encoding is not flattened (binary only)");
        return TB_EUNSUPPORTED;
    }
    if (s->nodes[s->root].type != SCH__AV_RECORD) {
        sch__errf(err, errlen, "the schema's root is not a record: its fields are the metrics");
        return TB_EINVALID;
    }
    int rc = sch__avro_validate(s, payload, len, err, errlen);
    if (rc)
        return rc;
    fwalk_t *w = tb_calloc(1, sizeof *w);
    w->nodes = s->nodes;
    w->p = payload;
    w->end = payload + len;
    w->cb = cb;
    w->arg = arg;
    w->err = err;
    w->errlen = errlen;
    rc = walk(w, s->root, 0, 0);
    free(w);
    return rc;
}
