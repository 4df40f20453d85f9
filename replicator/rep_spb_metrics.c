/*
 * rep_spb_metrics.c: one Sparkplug edge node's metric table and the
 * messages made from it (docs/design/OUTPUTS.md 5.2-5.3, docs/SPARKPLUG.md).
 *
 * DESIGN. A metric is (device, name), name = "<topic part>/<field path>".
 * Each gets an alias at first sight (1, 2, ... never reused, so stable
 * across rebirths; S3 persists them and rep__spb_restore brings them back)
 * and a datatype that is fixed once born: the schema's when one declared
 * the field (rep__spb_declare), else inferred from the first value. The
 * entries live in one array in creation order (a birth lists them in that
 * order), threaded per device, found by a hash of (device, name).
 *
 * A record is added in two passes: its payload is flattened into a list of
 * leaves (names and copied values), then every leaf is checked against the
 * table (a value that does not fit its metric's type makes the record a
 * dead letter; a metric unknown or not born in this session means a birth
 * must come first; the same metric at the same millisecond already in the
 * message means the message must end first), and only when all pass are
 * they written. So a record is either wholly in a message or not at all.
 *
 * seq: NBIRTH is 0; every later NDATA, DDATA, DBIRTH and DDEATH takes the
 * next value, wrapping 255 -> 0 (tck-id-topics-ndata-seq-num). NDEATH has
 * none. Timestamps: the caller's `now` for payloads and births, the
 * record's receive time for its metrics.
 */
#include "replicator/rep_spb.h"

#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint32_t dev;
    uint32_t datatype;
    uint64_t alias;
    char *name;
    size_t name_len;
    uint32_t next_in_dev; /* index + 1; 0: last */
    bool born;            /* in the birth of this session */
    bool has_value;
    uint64_t ts;          /* of the last value */
    union { int64_t i; float f; double d; bool b; } v;
    uint8_t *bytes;       /* last string/bytes value (owned) */
    size_t nbytes;
    uint64_t msg_gen;     /* the data message it was last added to */
    uint64_t msg_ts;
} entry_t;

typedef struct device {
    char *name;
    uint32_t first, last; /* index + 1 */
    bool born;
} device_t;

struct rep__spb_node {
    entry_t *e;
    uint32_t ne, cap;
    uint32_t *by_name;    /* index + 1, open addressing */
    uint32_t *by_alias;
    uint32_t hcap;        /* slots of each hash (power of 2) */
    uint64_t next_alias;
    device_t *dev;
    uint32_t ndev;
    uint8_t seq;          /* the next one */
    uint64_t msg_gen;
    uint64_t table_gen;   /* +1 when a metric or device appears or a type changes */
    /* the leaves of the record being added (reused) */
    struct leaf { size_t name_at, name_len, val_at; sch_flat_value_t v; uint32_t idx; } *leaves;
    size_t nleaves, capleaves;
    char *arena;
    size_t arena_len, arena_cap;
};

static uint64_t hash_name(uint32_t dev, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ dev;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_alias(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdull;
    return a ^ (a >> 33);
}

static uint32_t *slot_name(const rep__spb_node_t *n, uint32_t dev, const char *s, size_t len)
{
    for (uint64_t i = hash_name(dev, s, len) & (n->hcap - 1);; i = (i + 1) & (n->hcap - 1)) {
        uint32_t *sl = &n->by_name[i];
        if (!*sl)
            return sl;
        const entry_t *e = &n->e[*sl - 1];
        if (e->dev == dev && e->name_len == len && memcmp(e->name, s, len) == 0)
            return sl;
    }
}

static uint32_t *slot_alias(const rep__spb_node_t *n, uint64_t alias)
{
    for (uint64_t i = hash_alias(alias) & (n->hcap - 1);; i = (i + 1) & (n->hcap - 1)) {
        uint32_t *sl = &n->by_alias[i];
        if (!*sl || n->e[*sl - 1].alias == alias)
            return sl;
    }
}

static void rehash(rep__spb_node_t *n)
{
    free(n->by_name);
    free(n->by_alias);
    n->hcap = n->hcap ? n->hcap * 2 : 64;
    n->by_name = tb_calloc(n->hcap, sizeof *n->by_name);
    n->by_alias = tb_calloc(n->hcap, sizeof *n->by_alias);
    for (uint32_t i = 0; i < n->ne; i++) {
        *slot_name(n, n->e[i].dev, n->e[i].name, n->e[i].name_len) = i + 1;
        *slot_alias(n, n->e[i].alias) = i + 1;
    }
}

rep__spb_node_t *rep__spb_node_new(void)
{
    rep__spb_node_t *n = tb_calloc(1, sizeof *n);
    n->next_alias = 1;
    n->dev = tb_calloc(1, sizeof *n->dev);
    n->dev[0].name = tb_strdup("");
    n->ndev = 1;
    rehash(n);
    return n;
}

void rep__spb_node_free(rep__spb_node_t *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->ne; i++) {
        free(n->e[i].name);
        free(n->e[i].bytes);
    }
    for (uint32_t i = 0; i < n->ndev; i++)
        free(n->dev[i].name);
    free(n->e);
    free(n->dev);
    free(n->by_name);
    free(n->by_alias);
    free(n->leaves);
    free(n->arena);
    free(n);
}

int rep__spb_device(rep__spb_node_t *n, const char *name, uint32_t *dev)
{
    if (!name)
        name = "";
    for (uint32_t i = 0; i < n->ndev; i++) /* devices are few and looked up per message, not per metric */
        if (strcmp(n->dev[i].name, name) == 0) {
            *dev = i;
            return 0;
        }
    if (n->ndev > REP_SPB_MAX_DEVICES)
        return TB_EFULL;
    n->dev = tb_realloc(n->dev, (n->ndev + 1) * sizeof *n->dev);
    n->dev[n->ndev] = (device_t){ .name = tb_strdup(name) };
    n->table_gen++;
    *dev = n->ndev++;
    return 0;
}

uint32_t rep__spb_device_count(const rep__spb_node_t *n)
{
    return n->ndev;
}

const char *rep__spb_device_name(const rep__spb_node_t *n, uint32_t dev)
{
    return dev < n->ndev ? n->dev[dev].name : NULL;
}

uint32_t rep__spb_metric_count(const rep__spb_node_t *n)
{
    return n->ne;
}

uint8_t rep__spb_seq_peek(const rep__spb_node_t *n)
{
    return n->seq;
}

static bool reserved(uint32_t dev, const char *name, size_t len)
{
    return dev == 0 && ((len == strlen(REP_SPB_BDSEQ_NAME) && memcmp(name, REP_SPB_BDSEQ_NAME, len) == 0) ||
                        (len >= 13 && memcmp(name, "Node Control/", 13) == 0));
}

/* Adds an entry; the caller checked it is absent and the limits. */
static uint32_t add_entry(rep__spb_node_t *n, uint32_t dev, const char *name, size_t len, uint32_t dt, uint64_t alias)
{
    if ((n->ne + 1) * 2 > n->hcap)
        rehash(n);
    if (n->ne == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 64;
        n->e = tb_realloc(n->e, n->cap * sizeof *n->e);
    }
    uint32_t i = n->ne++;
    n->table_gen++;
    n->e[i] = (entry_t){ .dev = dev, .datatype = dt, .alias = alias, .name = tb_strndup(name, len), .name_len = len };
    *slot_name(n, dev, name, len) = i + 1;
    *slot_alias(n, alias) = i + 1;
    device_t *d = &n->dev[dev];
    if (d->last)
        n->e[d->last - 1].next_in_dev = i + 1;
    else
        d->first = i + 1;
    d->last = i + 1;
    if (alias >= n->next_alias)
        n->next_alias = alias + 1;
    return i;
}

int rep__spb_restore(rep__spb_node_t *n, uint32_t dev, const char *name, uint32_t datatype, uint64_t alias)
{
    size_t len = strlen(name);
    if (dev >= n->ndev || len == 0 || len > REP_SPB_MAX_NAME || alias == 0 || reserved(dev, name, len))
        return -EINVAL;
    if (n->ne >= REP_SPB_MAX_METRICS)
        return TB_EFULL;
    if (*slot_name(n, dev, name, len) || *slot_alias(n, alias))
        return -EEXIST;
    add_entry(n, dev, name, len, datatype, alias);
    return 0;
}

uint32_t rep__spb_type_of_field(sch_field_type_t t)
{
    switch (t) {
    case SCH_FIELD_BOOL: return REP_SPB_BOOLEAN;
    case SCH_FIELD_INT32: return REP_SPB_INT32;
    case SCH_FIELD_INT64: return REP_SPB_INT64;
    case SCH_FIELD_FLOAT: return REP_SPB_FLOAT;
    case SCH_FIELD_DOUBLE: return REP_SPB_DOUBLE;
    case SCH_FIELD_STRING: return REP_SPB_STRING;
    case SCH_FIELD_BYTES: return REP_SPB_BYTES;
    }
    return REP_SPB_BYTES;
}

/* "<prefix>/<path>" (or either alone) into buf; -1 if longer than REP_SPB_MAX_NAME. */
static long join(char *buf, const char *prefix, const char *path, size_t plen)
{
    size_t a = strlen(prefix);
    size_t need = a + (a && plen ? 1 : 0) + plen;
    if (need > REP_SPB_MAX_NAME || need == 0)
        return -1;
    memcpy(buf, prefix, a);
    if (a && plen)
        buf[a++] = '/';
    memcpy(buf + a, path, plen);
    buf[need] = '\0';
    return (long)need;
}

typedef struct declare {
    rep__spb_node_t *n;
    uint32_t dev;
    const char *prefix;
    int changed;
    char *err;
    size_t errlen;
} declare_t;

static int declare_one(void *arg, const char *path, size_t plen, sch_field_type_t t, bool nullable)
{
    (void)nullable;
    declare_t *d = arg;
    char name[REP_SPB_MAX_NAME + 1];
    long len = join(name, d->prefix, path, plen);
    if (len < 0 || reserved(d->dev, name, (size_t)len)) {
        if (d->err && d->errlen)
            snprintf(d->err, d->errlen, "sparkplug: %s/%s cannot name a metric (reserved, or over %d bytes)",
                     d->prefix, path, REP_SPB_MAX_NAME);
        return TB_EINVALID;
    }
    uint32_t dt = rep__spb_type_of_field(t);
    uint32_t *sl = slot_name(d->n, d->dev, name, (size_t)len);
    if (*sl) {
        entry_t *e = &d->n->e[*sl - 1];
        if (e->datatype != dt) {
            e->datatype = dt; /* the schema changed a type: announced by the next birth */
            d->n->table_gen++;
            e->has_value = false;
            e->born = false;
            d->changed = 1;
        }
        return 0;
    }
    if (d->n->ne >= REP_SPB_MAX_METRICS) {
        if (d->err && d->errlen)
            snprintf(d->err, d->errlen, "sparkplug: more than %d metrics on one node", REP_SPB_MAX_METRICS);
        return TB_EFULL;
    }
    add_entry(d->n, d->dev, name, (size_t)len, dt, d->n->next_alias);
    d->changed = 1;
    return 0;
}

int rep__spb_declare(rep__spb_node_t *n, uint32_t dev, const char *prefix, const sch_validator_t *schema,
                     char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!schema || dev >= n->ndev)
        return 0;
    sch_kind_t k = sch_validator_kind(schema);
    if (k != SCH_AVRO && k != SCH_JSON_SCHEMA)
        return 0;
    declare_t d = { .n = n, .dev = dev, .prefix = prefix, .err = err, .errlen = errlen };
    int rc = sch_field_types(schema, declare_one, &d, err, errlen);
    if (rc == TB_EUNSUPPORTED)
        rc = 0;
    return rc ? rc : d.changed;
}

/* ---- births and deaths ------------------------------------------------------ */

static void entry_wire(const entry_t *e, uint64_t now, rep__spb_wire_t *w)
{
    *w = (rep__spb_wire_t){ .name = e->name, .name_len = e->name_len, .has_alias = true, .alias = e->alias,
                            .timestamp = e->has_value ? e->ts : now, .datatype = e->datatype,
                            .with_datatype = true, .is_null = !e->has_value };
    if (!e->has_value)
        return;
    switch (e->datatype) {
    case REP_SPB_FLOAT: w->v.f = e->v.f; break;
    case REP_SPB_DOUBLE: w->v.d = e->v.d; break;
    case REP_SPB_BOOLEAN: w->v.b = e->v.b; break;
    case REP_SPB_STRING: case REP_SPB_TEXT: case REP_SPB_UUID: case REP_SPB_BYTES: case REP_SPB_FILE:
        w->v.s.p = e->bytes;
        w->v.s.n = e->nbytes;
        break;
    default: w->v.i = e->v.i; break;
    }
}

static void put_device_metrics(rep__spb_node_t *n, uint32_t dev, uint64_t now, rep__spb_buf_t *out)
{
    for (uint32_t i = n->dev[dev].first; i; i = n->e[i - 1].next_in_dev) {
        entry_t *e = &n->e[i - 1];
        rep__spb_wire_t w;
        entry_wire(e, now, &w);
        if (rep__spb_put_metric(out, &w) == 0)
            e->born = true;
    }
    n->dev[dev].born = true;
}

static void put_bdseq(rep__spb_buf_t *out, uint64_t bdseq, uint64_t now)
{
    rep__spb_wire_t w = { .name = REP_SPB_BDSEQ_NAME, .name_len = strlen(REP_SPB_BDSEQ_NAME), .timestamp = now,
                          .datatype = REP_SPB_INT64, .with_datatype = true, .v.i = (int64_t)bdseq };
    rep__spb_put_metric(out, &w);
}

void rep__spb_nbirth(rep__spb_node_t *n, uint64_t bdseq, uint64_t now, rep__spb_buf_t *out)
{
    rep__spb_begin(out, now);
    put_bdseq(out, bdseq, now);
    rep__spb_wire_t rb = { .name = REP_SPB_REBIRTH_NAME, .name_len = strlen(REP_SPB_REBIRTH_NAME), .timestamp = now,
                           .datatype = REP_SPB_BOOLEAN, .with_datatype = true, .v.b = false };
    rep__spb_put_metric(out, &rb);
    /* a new NBIRTH: every device must be born again after it */
    for (uint32_t i = 0; i < n->ne; i++)
        n->e[i].born = false;
    for (uint32_t d = 0; d < n->ndev; d++)
        n->dev[d].born = false;
    put_device_metrics(n, 0, now, out);
    rep__spb_put_seq(out, 0);
    n->seq = 1;
}

void rep__spb_dbirth(rep__spb_node_t *n, uint32_t dev, uint64_t now, rep__spb_buf_t *out)
{
    rep__spb_begin(out, now);
    if (dev < n->ndev)
        put_device_metrics(n, dev, now, out);
    rep__spb_put_seq(out, n->seq++);
}

void rep__spb_ndeath(uint64_t bdseq, uint64_t now, rep__spb_buf_t *out)
{
    rep__spb_begin(out, now);
    put_bdseq(out, bdseq, now);
}

void rep__spb_ddeath(rep__spb_node_t *n, uint32_t dev, uint64_t now, rep__spb_buf_t *out)
{
    rep__spb_begin(out, now);
    rep__spb_put_seq(out, n->seq++);
    if (dev < n->ndev)
        n->dev[dev].born = false;
}

/* ---- data messages ------------------------------------------------------------ */

void rep__spb_data_begin(rep__spb_node_t *n, rep__spb_data_t *d, uint32_t dev, uint64_t now)
{
    rep__spb_begin(&d->buf, now);
    d->dev = dev;
    d->metrics = 0;
    d->nulls_skipped = 0;
    d->open = true;
    d->gen = ++n->msg_gen;
}

const rep__spb_buf_t *rep__spb_data_end(rep__spb_node_t *n, rep__spb_data_t *d)
{
    if (!d->open)
        return NULL;
    d->open = false;
    if (d->metrics == 0)
        return NULL;
    rep__spb_put_seq(&d->buf, n->seq++);
    return &d->buf;
}

void rep__spb_data_free(rep__spb_data_t *d)
{
    rep__spb_buf_free(&d->buf);
    memset(d, 0, sizeof *d);
}

static size_t arena_put(rep__spb_node_t *n, const void *p, size_t len)
{
    if (n->arena_len + len + 1 > n->arena_cap) {
        size_t cap = n->arena_cap ? n->arena_cap : 1024;
        while (cap < n->arena_len + len + 1)
            cap *= 2;
        n->arena = tb_realloc(n->arena, cap);
        n->arena_cap = cap;
    }
    size_t at = n->arena_len;
    if (len)
        memcpy(n->arena + at, p, len);
    n->arena[at + len] = '\0';
    n->arena_len += len + 1;
    return at;
}

typedef struct collect {
    rep__spb_node_t *n;
    const char *prefix;
    char *err;
    size_t errlen;
} collect_t;

static int collect_leaf(void *arg, const char *path, size_t plen, const sch_flat_value_t *v)
{
    collect_t *c = arg;
    rep__spb_node_t *n = c->n;
    char name[REP_SPB_MAX_NAME + 1];
    long len = join(name, c->prefix, path, plen);
    if (len < 0) {
        if (c->err && c->errlen)
            snprintf(c->err, c->errlen, "sparkplug: the metric name %.100s/%.200s is over %d bytes", c->prefix,
                     path, REP_SPB_MAX_NAME);
        return TB_EINVALID;
    }
    if (n->nleaves == n->capleaves) {
        n->capleaves = n->capleaves ? n->capleaves * 2 : 32;
        n->leaves = tb_realloc(n->leaves, n->capleaves * sizeof *n->leaves);
    }
    struct leaf *l = &n->leaves[n->nleaves++];
    l->name_at = arena_put(n, name, (size_t)len);
    l->name_len = (size_t)len;
    l->v = *v;
    l->val_at = (v->type == SCH_FLAT_STRING || v->type == SCH_FLAT_BYTES) ? arena_put(n, v->s, v->len) : 0;
    l->idx = 0;
    return 0;
}

static const char *dt_name(uint32_t dt)
{
    static const char *names[] = { "Unknown", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32",
                                   "UInt64", "Float", "Double", "Boolean", "String", "DateTime", "Text", "UUID",
                                   "DataSet", "Bytes", "File" };
    return dt < sizeof names / sizeof names[0] ? names[dt] : "Unknown";
}

static const char *flat_name(sch_flat_type_t t)
{
    switch (t) {
    case SCH_FLAT_NULL: return "null";
    case SCH_FLAT_BOOL: return "boolean";
    case SCH_FLAT_INT: return "integer";
    case SCH_FLAT_DOUBLE: return "number";
    case SCH_FLAT_STRING: return "string";
    case SCH_FLAT_BYTES: return "bytes";
    }
    return "?";
}

/* The type a metric seen first with this value gets (no schema declared it). */
static uint32_t infer(sch_flat_type_t t, bool avro)
{
    switch (t) {
    case SCH_FLAT_BOOL: return REP_SPB_BOOLEAN;
    case SCH_FLAT_INT: return avro ? REP_SPB_INT64 : REP_SPB_DOUBLE; /* JSON: 21 then 21.5 is no mismatch */
    case SCH_FLAT_DOUBLE: return REP_SPB_DOUBLE;
    case SCH_FLAT_STRING: return REP_SPB_STRING;
    case SCH_FLAT_BYTES: return REP_SPB_BYTES;
    case SCH_FLAT_NULL: break;
    }
    return 0;
}

/* Does v fit datatype dt? Fills w's value (w->v) when it does. */
static bool fits(uint32_t dt, const sch_flat_value_t *v, rep__spb_wire_t *w, const uint8_t *bytes)
{
    if (v->type == SCH_FLAT_NULL) {
        w->is_null = true;
        return true;
    }
    static const struct { int64_t lo, hi; } range[] = {
        [REP_SPB_INT8] = { INT8_MIN, INT8_MAX },      [REP_SPB_INT16] = { INT16_MIN, INT16_MAX },
        [REP_SPB_INT32] = { INT32_MIN, INT32_MAX },   [REP_SPB_INT64] = { INT64_MIN, INT64_MAX },
        [REP_SPB_UINT8] = { 0, UINT8_MAX },           [REP_SPB_UINT16] = { 0, UINT16_MAX },
        [REP_SPB_UINT32] = { 0, UINT32_MAX },         [REP_SPB_UINT64] = { 0, INT64_MAX },
        [REP_SPB_DATETIME] = { 0, INT64_MAX },
    };
    switch (dt) {
    case REP_SPB_BOOLEAN:
        w->v.b = v->b;
        return v->type == SCH_FLAT_BOOL;
    case REP_SPB_FLOAT:
    case REP_SPB_DOUBLE: {
        double d = v->type == SCH_FLAT_INT ? (double)v->i : v->d;
        if (dt == REP_SPB_FLOAT)
            w->v.f = (float)d;
        else
            w->v.d = d;
        return v->type == SCH_FLAT_INT || v->type == SCH_FLAT_DOUBLE;
    }
    case REP_SPB_STRING: case REP_SPB_TEXT: case REP_SPB_UUID:
    case REP_SPB_BYTES: case REP_SPB_FILE: {
        bool is_str = dt != REP_SPB_BYTES && dt != REP_SPB_FILE;
        w->v.s.p = bytes;
        w->v.s.n = v->len;
        return v->type == (is_str ? SCH_FLAT_STRING : SCH_FLAT_BYTES);
    }
    default:
        if (dt >= sizeof range / sizeof range[0] || v->type != SCH_FLAT_INT)
            return false;
        w->v.i = v->i;
        return v->i >= range[dt].lo && v->i <= range[dt].hi;
    }
}

static void keep_value(entry_t *e, const rep__spb_wire_t *w, uint64_t ts)
{
    e->ts = ts;
    e->has_value = !w->is_null;
    if (w->is_null)
        return;
    switch (e->datatype) {
    case REP_SPB_FLOAT: e->v.f = w->v.f; break;
    case REP_SPB_DOUBLE: e->v.d = w->v.d; break;
    case REP_SPB_BOOLEAN: e->v.b = w->v.b; break;
    case REP_SPB_STRING: case REP_SPB_TEXT: case REP_SPB_UUID: case REP_SPB_BYTES: case REP_SPB_FILE:
        if (w->v.s.n > e->nbytes || !e->bytes)
            e->bytes = tb_realloc(e->bytes, w->v.s.n ? w->v.s.n : 1);
        if (w->v.s.n)
            memcpy(e->bytes, w->v.s.p, w->v.s.n);
        e->nbytes = w->v.s.n;
        break;
    default: e->v.i = w->v.i; break;
    }
}

/* Flattens the payload into n->leaves. */
static int flatten(rep__spb_node_t *n, const char *prefix, const sch_validator_t *schema, const uint8_t *payload,
                   size_t len, char *err, size_t errlen)
{
    n->nleaves = 0;
    n->arena_len = 0;
    collect_t c = { .n = n, .prefix = prefix, .err = err, .errlen = errlen };
    sch_kind_t k = schema ? sch_validator_kind(schema) : SCH_BYTES;
    if (k == SCH_AVRO)
        return sch_flatten_avro(schema, payload, len, collect_leaf, &c, err, errlen);
    size_t i = 0;
    while (i < len && (payload[i] == ' ' || payload[i] == '\t' || payload[i] == '\r' || payload[i] == '\n'))
        i++;
    if (k == SCH_JSON_SCHEMA || (i < len && payload[i] == '{'))
        return sch_flatten_json(payload, len, collect_leaf, &c, err, errlen);
    /* not an object: the whole payload, one Bytes metric named after the topic */
    sch_flat_value_t v = { .type = SCH_FLAT_BYTES, .s = (const char *)payload, .len = len };
    return collect_leaf(&c, "", 0, &v);
}

int rep__spb_data_add(rep__spb_node_t *n, rep__spb_data_t *d, const char *prefix, const sch_validator_t *schema,
                      const uint8_t *payload, size_t len, uint64_t ts, bool historical, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!d->open || d->dev >= n->ndev)
        return -EINVAL;
    int rc = flatten(n, prefix, schema, payload, len, err, errlen);
    if (rc)
        return rc < 0 ? rc : TB_EINVALID;
    bool avro = schema && sch_validator_kind(schema) == SCH_AVRO;
    /* pass 1: check every leaf against the table, changing nothing */
    bool unborn = !n->dev[d->dev].born, full = false;
    uint32_t fresh = 0;
    for (size_t i = 0; i < n->nleaves; i++) {
        struct leaf *l = &n->leaves[i];
        const char *name = n->arena + l->name_at;
        uint32_t *sl = slot_name(n, d->dev, name, l->name_len);
        if (!*sl) {
            if (reserved(d->dev, name, l->name_len)) {
                if (err && errlen)
                    snprintf(err, errlen, "sparkplug: %s is a name Sparkplug reserves", name);
                return TB_EINVALID;
            }
            if (l->v.type != SCH_FLAT_NULL)
                fresh++;
            continue;
        }
        l->idx = *sl;
        entry_t *e = &n->e[*sl - 1];
        rep__spb_wire_t w = { 0 };
        if (!fits(e->datatype, &l->v, &w, (const uint8_t *)n->arena + l->val_at)) {
            if (err && errlen)
                snprintf(err, errlen, "sparkplug: %s is %s, got %s%s", name, dt_name(e->datatype),
                         flat_name(l->v.type), l->v.type == SCH_FLAT_INT ? " out of its range" : "");
            return TB_EINVALID;
        }
        if (!e->born)
            unborn = true;
        if (e->msg_gen == d->gen && e->msg_ts == ts)
            full = true;
    }
    if (fresh) {
        if (n->ne + fresh > REP_SPB_MAX_METRICS) {
            if (err && errlen)
                snprintf(err, errlen, "sparkplug: more than %d metrics on one node", REP_SPB_MAX_METRICS);
            return TB_EFULL;
        }
        for (size_t i = 0; i < n->nleaves; i++) {
            struct leaf *l = &n->leaves[i];
            if (l->idx || l->v.type == SCH_FLAT_NULL)
                continue;
            const char *name = n->arena + l->name_at;
            if (!*slot_name(n, d->dev, name, l->name_len)) /* a path twice cannot happen; be safe */
                add_entry(n, d->dev, name, l->name_len, infer(l->v.type, avro), n->next_alias);
        }
        return REP_SPB_REBIRTH;
    }
    if (unborn)
        return REP_SPB_REBIRTH;
    if (full)
        return REP_SPB_FULL;
    /* pass 2: write */
    for (size_t i = 0; i < n->nleaves; i++) {
        struct leaf *l = &n->leaves[i];
        if (!l->idx) {
            d->nulls_skipped++; /* a null before its metric has a type */
            continue;
        }
        entry_t *e = &n->e[l->idx - 1];
        rep__spb_wire_t w = { .has_alias = true, .alias = e->alias, .timestamp = ts, .datatype = e->datatype,
                              .is_historical = historical };
        fits(e->datatype, &l->v, &w, (const uint8_t *)n->arena + l->val_at);
        if (rep__spb_put_metric(&d->buf, &w) != 0)
            continue; /* a datatype we do not encode: only a restored table could hold one */
        keep_value(e, &w, ts);
        e->msg_gen = d->gen;
        e->msg_ts = ts;
        d->metrics++;
    }
    return 0;
}

/* ---- the table on disk (OUTPUTS.md 5.4, `aliases`) ------------------------------
 *
 * "TBAL", version 1, 3 zero bytes, u32 devices, u32 metrics (little endian),
 * then each device after the node {u16 length, name}, then each metric
 * {u16 device, u16 length, name, u8 datatype, u32 alias}, then CRC32C of
 * everything before it. */

static uint32_t table_crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return ~c;
}

static void buf_put(rep__spb_buf_t *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = tb_realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_le(rep__spb_buf_t *b, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    buf_put(b, t, (size_t)bytes);
}

uint64_t rep__spb_table_gen(const rep__spb_node_t *n)
{
    return n->table_gen;
}

int rep__spb_table_save(const rep__spb_node_t *n, rep__spb_buf_t *out)
{
    out->len = 0;
    buf_put(out, "TBAL\1\0\0\0", 8);
    buf_le(out, n->ndev ? n->ndev - 1 : 0, 4);
    buf_le(out, n->ne, 4);
    for (uint32_t d = 1; d < n->ndev; d++) {
        size_t len = strlen(n->dev[d].name);
        if (len > UINT16_MAX)
            return TB_EINVALID;
        buf_le(out, len, 2);
        buf_put(out, n->dev[d].name, len);
    }
    for (uint32_t i = 0; i < n->ne; i++) {
        const entry_t *e = &n->e[i];
        if (e->alias > UINT32_MAX || e->datatype > UINT8_MAX || e->dev > UINT16_MAX)
            return TB_EINVALID;
        buf_le(out, e->dev, 2);
        buf_le(out, e->name_len, 2);
        buf_put(out, e->name, e->name_len);
        buf_le(out, e->datatype, 1);
        buf_le(out, e->alias, 4);
    }
    buf_le(out, table_crc(out->p, out->len), 4);
    return 0;
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int rep__spb_table_load(rep__spb_node_t *n, const uint8_t *p, size_t len, char *err, size_t errlen)
{
#define BAD(...)                                    \
    do {                                            \
        if (err && errlen)                          \
            snprintf(err, errlen, __VA_ARGS__);     \
        return TB_EMALFORMED;                       \
    } while (0)
    if (n->ne || n->ndev > 1)
        BAD("sparkplug aliases: the table is not empty");
    if (len < 20 || memcmp(p, "TBAL\1\0\0\0", 8) != 0)
        BAD("sparkplug aliases: not a table (%zu bytes)", len);
    if (get_le(p + len - 4, 4) != table_crc(p, len - 4))
        BAD("sparkplug aliases: checksum mismatch");
    uint64_t ndev = get_le(p + 8, 4), nmet = get_le(p + 12, 4);
    if (ndev >= REP_SPB_MAX_DEVICES || nmet > REP_SPB_MAX_METRICS)
        BAD("sparkplug aliases: %llu devices, %llu metrics: over the limits", (unsigned long long)ndev,
            (unsigned long long)nmet);
    size_t at = 16, end = len - 4;
    uint32_t dev0;
    rep__spb_device(n, NULL, &dev0);
    for (uint64_t d = 0; d < ndev; d++) {
        if (end - at < 2)
            BAD("sparkplug aliases: cut short in device %llu", (unsigned long long)d);
        size_t l = (size_t)get_le(p + at, 2);
        at += 2;
        if (l == 0 || l > REP_SPB_MAX_NAME || end - at < l || memchr(p + at, 0, l))
            BAD("sparkplug aliases: device %llu has a bad name", (unsigned long long)d);
        char name[REP_SPB_MAX_NAME + 1];
        memcpy(name, p + at, l);
        name[l] = 0;
        at += l;
        uint32_t idx;
        if (rep__spb_device(n, name, &idx) < 0 || idx != d + 1)
            BAD("sparkplug aliases: device %s twice", name);
    }
    for (uint64_t i = 0; i < nmet; i++) {
        if (end - at < 4)
            BAD("sparkplug aliases: cut short in metric %llu", (unsigned long long)i);
        uint32_t dev = (uint32_t)get_le(p + at, 2);
        size_t l = (size_t)get_le(p + at + 2, 2);
        at += 4;
        if (l == 0 || l > REP_SPB_MAX_NAME || end - at < l + 5 || memchr(p + at, 0, l))
            BAD("sparkplug aliases: metric %llu has a bad name", (unsigned long long)i);
        char name[REP_SPB_MAX_NAME + 1];
        memcpy(name, p + at, l);
        name[l] = 0;
        at += l;
        uint32_t dt = (uint32_t)get_le(p + at, 1);
        uint64_t alias = get_le(p + at + 1, 4);
        at += 5;
        rep__spb_wire_t probe = { .datatype = dt };
        rep__spb_buf_t tmp = { 0 };
        int enc = rep__spb_put_metric(&tmp, &probe);
        rep__spb_buf_free(&tmp);
        if (enc != 0)
            BAD("sparkplug aliases: %s has datatype %u, which we do not encode", name, dt);
        int rc = rep__spb_restore(n, dev, name, dt, alias);
        if (rc != 0)
            BAD("sparkplug aliases: %s (device %u, alias %llu) cannot be restored (%s)", name, dev,
                (unsigned long long)alias, rc == -EEXIST ? "name or alias taken" : "bad device, name or alias");
    }
    if (at != end)
        BAD("sparkplug aliases: %zu bytes after the last metric", end - at);
    return 0;
#undef BAD
}
