/*
 * sch_avro_binary.c: checks that a payload is exactly one Avro binary datum.
 *
 * A recursive descent over the compiled nodes that moves a cursor through
 * the payload and never allocates. Every length and count read from the
 * payload is checked against the bytes left before it is used, so hostile
 * input costs at most one pass over its own bytes:
 *
 *  - varints: int takes at most 5 bytes and must fit 32 bits, long at most
 *    10 and must fit 64 bits; longer or overflowing encodings are refused
 *    (non-minimal encodings within those lengths are accepted, as Avro's
 *    reference readers do);
 *  - bytes/string/fixed: a negative length, or one past the end, is refused
 *    without touching memory; strings must be UTF-8 (tb_utf8_valid);
 *  - boolean is one byte, 0 or 1; an enum index must name a symbol; a union
 *    index must name a branch;
 *  - array/map blocks: a count whose items could not fit in the bytes left
 *    (count * minsize of an item) is refused before looping; a negative count
 *    carries a byte size, which must match what its items take; items of one
 *    fixed width with no invalid bytes (float, double, fixed, null, records
 *    of those) are stepped over in one move, so a block of 2^62 nulls or of
 *    a thousand floats costs one check;
 *  - nesting deeper than SCH__AV_MAX_DEPTH is refused (recursive schemas
 *    make depth data-driven and this walker uses the C stack);
 *  - the datum must end exactly at the end of the payload.
 *
 * A failure records what and where (byte offset); each level then prepends
 * its path segment while unwinding (sch_avro_path.c).
 */
#include "schema/sch_avro.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_internal.h"

typedef struct walk {
    const sch__av_node_t *nodes;
    const uint8_t *start, *p, *end;
    size_t fail_at;
    char why[120];
    sch__av_path_t path;
} walk_t;

#define FAIL(w, ...)                                                  \
    do {                                                              \
        (w)->fail_at = (size_t)((w)->p - (w)->start);                 \
        snprintf((w)->why, sizeof (w)->why, __VA_ARGS__);             \
        return -1;                                                    \
    } while (0)

static inline size_t left(const walk_t *w)
{
    return (size_t)(w->end - w->p);
}

/* Zigzag varint of at most `maxbytes` bytes whose raw value fits `bits`. */
static int read_varint(walk_t *w, int maxbytes, int bits, const char *what, int64_t *out)
{
    /* Fast path: most lengths, counts, indices and small numbers fit one byte. */
    if (w->p != w->end && *w->p < 0x80) {
        uint64_t b = *w->p++;
        *out = (int64_t)((b >> 1) ^ (~(b & 1) + 1));
        return 0;
    }
    uint64_t raw = 0;
    for (int i = 0;; i++) {
        if (w->p == w->end)
            FAIL(w, "truncated %s", what);
        uint8_t b = *w->p;
        if (i == maxbytes - 1) {
            /* The last byte may only carry the bits that are left. */
            if (b & 0x80)
                FAIL(w, "%s varint longer than %d bytes", what, maxbytes);
            if ((uint64_t)b >> (bits - 7 * i) != 0)
                FAIL(w, "%s varint overflows %d bits", what, bits);
        }
        w->p++;
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            break;
    }
    /* Zigzag: 0,1,2,3 -> 0,-1,1,-2. Unsigned arithmetic avoids UB. */
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

static int read_long(walk_t *w, const char *what, int64_t *out)
{
    return read_varint(w, 10, 64, what, out);
}

static int read_int(walk_t *w, const char *what, int64_t *out)
{
    /* A raw value that fits 32 bits zigzags into [INT32_MIN, INT32_MAX]. */
    return read_varint(w, 5, 32, what, out);
}

/* A length prefix (bytes, string, map key) that must fit in what is left. */
static int read_len(walk_t *w, const char *what, size_t *out)
{
    const uint8_t *at = w->p;
    int64_t n;
    if (read_long(w, what, &n))
        return -1;
    if (n < 0) {
        w->p = at;
        FAIL(w, "%s has negative length %" PRId64, what, n);
    }
    if ((uint64_t)n > left(w)) {
        size_t avail = left(w);
        w->p = at;
        FAIL(w, "truncated %s: length %" PRId64 ", %zu bytes left", what, n, avail);
    }
    *out = (size_t)n;
    return 0;
}

/* Device strings are mostly ASCII: check 8 bytes at a time for a high bit
 * and leave the full UTF-8 rules to tb_utf8_valid only when one is set. */
static bool utf8_ok(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ULL)
            return tb_utf8_valid(p + i, n - i);
    }
    for (; i < n; i++)
        if (p[i] & 0x80)
            return tb_utf8_valid(p + i, n - i);
    return true;
}

static int walk_string(walk_t *w, const char *what)
{
    size_t n;
    if (read_len(w, what, &n))
        return -1;
    if (!utf8_ok(w->p, n))
        FAIL(w, "%s is not valid UTF-8", what);
    w->p += n;
    return 0;
}

static int walk(walk_t *w, uint32_t idx, int depth);

/* Array items or map entries, block by block. */
static int walk_blocks(walk_t *w, const sch__av_node_t *n, int depth)
{
    bool is_map = n->type == SCH__AV_MAP;
    const sch__av_node_t *item = &w->nodes[n->kids[0]];
    uint64_t item_min = item->minsize + (is_map ? 1 : 0); /* a map key is >= 1 byte */
    uint64_t index = 0;
    for (;;) {
        const uint8_t *block_at = w->p;
        int64_t count;
        if (read_long(w, "block count", &count))
            return -1;
        if (count == 0)
            return 0;
        const uint8_t *items_at = NULL;
        size_t size = 0;
        if (count < 0) {
            if (count == INT64_MIN) {
                w->p = block_at;
                FAIL(w, "block count out of range");
            }
            count = -count;
            if (read_len(w, "block byte size", &size))
                return -1;
            items_at = w->p;
        }
        if (item_min > 0 && (uint64_t)count > left(w) / item_min) {
            size_t avail = left(w);
            w->p = block_at;
            FAIL(w, "block claims %" PRId64 " items, %zu bytes left", count, avail);
        }
        /* Items of one fixed width whose bytes are all valid (floats, doubles,
         * fixed, records of those; zero-byte singletons like null): the
         * check above already proved count * width fits, so step over them. */
        if (!is_map && item->width >= 0) {
            w->p += (uint64_t)count * (uint64_t)item->width;
            index += (uint64_t)count;
            if (items_at && (size_t)(w->p - items_at) != size)
                FAIL(w, "block byte size says %zu bytes, its items took %zu", size,
                     (size_t)(w->p - items_at));
            continue;
        }
        for (int64_t i = 0; i < count; i++, index++) {
            const uint8_t *key = NULL;
            size_t keylen = 0;
            if (is_map) {
                if (read_len(w, "map key", &keylen))
                    return -1;
                key = w->p;
                if (!utf8_ok(key, keylen))
                    FAIL(w, "map key is not valid UTF-8");
                w->p += keylen;
            }
            if (walk(w, n->kids[0], depth + 1)) {
                if (is_map)
                    sch__av_path_push_name(&w->path, (const char *)key, keylen);
                else
                    sch__av_path_push_index(&w->path, index);
                return -1;
            }
        }
        if (items_at && (size_t)(w->p - items_at) != size)
            FAIL(w, "block byte size says %zu bytes, its items took %zu", size,
                 (size_t)(w->p - items_at));
    }
}

static int walk(walk_t *w, uint32_t idx, int depth)
{
    const sch__av_node_t *n = &w->nodes[idx];
    int64_t v;
    if (depth > SCH__AV_MAX_DEPTH)
        FAIL(w, "nested deeper than %d levels", SCH__AV_MAX_DEPTH);
    switch (n->type) {
    case SCH__AV_NULL:
        return 0;
    case SCH__AV_BOOLEAN:
        if (w->p == w->end)
            FAIL(w, "truncated boolean");
        if (*w->p > 1)
            FAIL(w, "boolean byte is 0x%02x, not 0 or 1", *w->p);
        w->p++;
        return 0;
    case SCH__AV_INT:
        return read_int(w, "int", &v);
    case SCH__AV_LONG:
        return read_long(w, "long", &v);
    case SCH__AV_FLOAT:
    case SCH__AV_DOUBLE: {
        size_t need = n->type == SCH__AV_FLOAT ? 4 : 8;
        if (left(w) < need)
            FAIL(w, "truncated %s: needs %zu bytes, %zu left", sch__av_branch_name(n), need,
                 left(w));
        w->p += need;
        return 0;
    }
    case SCH__AV_BYTES: {
        size_t len;
        if (read_len(w, "bytes", &len))
            return -1;
        w->p += len;
        return 0;
    }
    case SCH__AV_STRING:
        return walk_string(w, "string");
    case SCH__AV_FIXED:
        if ((uint64_t)n->size > left(w))
            FAIL(w, "truncated fixed %s: needs %" PRId64 " bytes, %zu left", n->name, n->size,
                 left(w));
        w->p += n->size;
        return 0;
    case SCH__AV_ENUM: {
        const uint8_t *at = w->p;
        if (read_int(w, "enum index", &v))
            return -1;
        if (v < 0 || v >= (int64_t)n->n) {
            w->p = at;
            FAIL(w, "enum %s index %" PRId64 " out of range (%u symbols)", n->name, v, n->n);
        }
        return 0;
    }
    case SCH__AV_UNION: {
        const uint8_t *at = w->p;
        if (read_long(w, "union index", &v))
            return -1;
        if (v < 0 || v >= (int64_t)n->n) {
            w->p = at;
            FAIL(w, "union index %" PRId64 " out of range (%u branches)", v, n->n);
        }
        return walk(w, n->kids[v], depth + 1);
    }
    case SCH__AV_RECORD:
        for (uint32_t i = 0; i < n->n; i++) {
            if (walk(w, n->kids[i], depth + 1)) {
                sch__av_path_push_name(&w->path, n->names[i], strlen(n->names[i]));
                return -1;
            }
        }
        return 0;
    case SCH__AV_ARRAY:
    case SCH__AV_MAP:
        return walk_blocks(w, n, depth);
    }
    FAIL(w, "corrupt compiled schema");
}

int sch__avro_binary_validate(const sch__avro_t *s, uint32_t root, const uint8_t *p, size_t len,
                              char *err, size_t errlen)
{
    static const uint8_t empty[1];
    walk_t w = { .nodes = s->nodes, .start = p ? p : empty };
    w.p = w.start;
    w.end = w.start + (p ? len : 0);
    sch__av_path_init(&w.path);
    if (walk(&w, root, 0) == 0) {
        if (w.p == w.end)
            return 0;
        w.fail_at = (size_t)(w.p - w.start);
        snprintf(w.why, sizeof w.why, "%zu trailing bytes after the datum", left(&w));
    }
    sch__errf(err, errlen, "%s: %s (at byte %zu)", sch__av_path_str(&w.path), w.why, w.fail_at);
    return TB_EINVALID;
}
