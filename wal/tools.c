/*
 * tools.c: wal_dump and wal_check, the offline views the CLI exposes
 * ("tributary wal dump|check"). They read the directory directly with
 * plain POSIX calls, take no lock and change nothing, so they are safe to
 * run beside a live gateway (they may then see a tail being written; the
 * validity rule makes that look like a torn tail, never like a bad record).
 *
 * Output is JSON lines through jansson, one object per record (dump) or per
 * topic (check), so scripts and tests can parse it. Padding records
 * (wal_format.h) are not records: dump skips them, check reports their bytes
 * apart ("padding_bytes", included in "bytes"). Strings that are not
 * valid UTF-8 (only possible in a payload; the gateway validates MQTT
 * strings) are base64-encoded for the payload and marked
 * "payload_encoding":"base64"; other fields get U+FFFD for bad bytes.
 */
#include "wal/wal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { char **v; size_t n, cap; } strvec_t;

static void sv_push(strvec_t *s, char *x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = tb_realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = x;
}

static void sv_free(strvec_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir for which keep(name) holds. */
static int list(const char *dir, bool (*keep)(const char *dir, const char *name), strvec_t *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d)))
        if (keep(dir, e->d_name))
            sv_push(out, tb_strdup(e->d_name));
    closedir(d);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return 0;
}

static bool is_topic_dir(const char *dir, const char *name)
{
    char *t = wal__topic_decode(name);
    if (!t)
        return false;
    free(t);
    char *p = tb_asprintf("%s/%s", dir, name);
    struct stat st;
    bool ok = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return ok;
}

static bool is_segment(const char *dir, const char *name)
{
    uint64_t base;
    return wal__seg_name_parse(name, &base);
}

static bool is_quarantined(const char *dir, const char *name)
{
    size_t n = strlen(name);
    size_t m = strlen(WAL_SEG_SUFFIX WAL_CORRUPT_SUFFIX);
    return n > m && strcmp(name + n - m, WAL_SEG_SUFFIX WAL_CORRUPT_SUFFIX) == 0;
}

/* ---- JSON helpers -------------------------------------------------------- */

static char *base64(const uint8_t *p, size_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = tb_malloc((n + 2) / 3 * 4 + 1), *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = tbl[v >> 18]; *o++ = tbl[(v >> 12) & 63]; *o++ = tbl[(v >> 6) & 63]; *o++ = tbl[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *o++ = tbl[v >> 18]; *o++ = tbl[(v >> 12) & 63]; *o++ = '='; *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        *o++ = tbl[v >> 18]; *o++ = tbl[(v >> 12) & 63]; *o++ = tbl[(v >> 6) & 63]; *o++ = '=';
    }
    *o = '\0';
    return out;
}

/* A JSON string of p, with U+FFFD for each byte that is not valid UTF-8. */
static json_t *jstr(const uint8_t *p, size_t n)
{
    if (tb_utf8_valid(p, n))
        return json_stringn((const char *)p, n);
    char *s = tb_malloc(n * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = p[i] < 0x80 ? 1 : (p[i] & 0xE0) == 0xC0 ? 2 : (p[i] & 0xF0) == 0xE0 ? 3 : (p[i] & 0xF8) == 0xF0 ? 4 : 0;
        if (len && i + len <= n && tb_utf8_valid(p + i, len)) {
            memcpy(s + o, p + i, len);
            o += len;
            i += len;
        } else {
            memcpy(s + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(s, o);
    free(s);
    return j;
}

static void emit(json_t *obj, FILE *out)
{
    json_dumpf(obj, out, JSON_COMPACT);
    fputc('\n', out);
    json_decref(obj);
}

/* ---- dump ---------------------------------------------------------------- */

typedef struct {
    const char *topic;
    uint64_t from;
    FILE *out;
} dump_ctx_t;

static int dump_record(void *arg, const wal_rec_t *rec, const uint8_t *raw)
{
    dump_ctx_t *c = arg;
    if (rec->offset < c->from)
        return 0;
    wal_record_t r;
    wal__rec_view(rec, raw, &r);
    json_t *o = json_object();
    json_object_set_new(o, "topic", json_string(c->topic));
    json_object_set_new(o, "offset", json_integer((json_int_t)r.offset));
    json_object_set_new(o, "publish_time", json_integer((json_int_t)r.publish_time_ms));
    json_object_set_new(o, "qos", json_integer(r.qos));
    json_object_set_new(o, "retain", json_boolean(r.retain));
    json_object_set_new(o, "mqtt_topic", jstr((const uint8_t *)r.mqtt_topic, r.mqtt_topic_len));
    json_t *attrs = json_object();
    size_t pos = 0;
    wal_attr_t a;
    while (wal_record_attr_next(&r, &pos, &a)) {
        json_t *k = jstr(a.key, a.key_len);
        json_object_setn_new(attrs, json_string_value(k), json_string_length(k), jstr(a.val, a.val_len));
        json_decref(k);
    }
    json_object_set_new(o, "attributes", attrs);
    if (r.has_schema) {
        json_object_set_new(o, "schema_id", json_integer((json_int_t)r.schema_id));
        json_object_set_new(o, "schema_version", json_integer(r.schema_version));
    }
    if (tb_utf8_valid(r.payload, r.payload_len)) {
        json_object_set_new(o, "payload", json_stringn((const char *)r.payload, r.payload_len));
    } else {
        char *b = base64(r.payload, r.payload_len);
        json_object_set_new(o, "payload", json_string(b));
        json_object_set_new(o, "payload_encoding", json_string("base64"));
        free(b);
    }
    emit(o, c->out);
    return 0;
}

static int dump_topic(const char *root, const char *dirname, uint64_t from, FILE *out)
{
    char *dir = tb_asprintf("%s/%s", root, dirname);
    char *name = wal__topic_decode(dirname);
    strvec_t segs = { 0 };
    int rc = list(dir, is_segment, &segs);
    dump_ctx_t c = { name, from, out };
    for (size_t i = 0; rc == 0 && i < segs.n; i++) {
        uint64_t base;
        wal__seg_name_parse(segs.v[i], &base);
        /* skip segments that end before from */
        uint64_t next_base;
        if (i + 1 < segs.n && wal__seg_name_parse(segs.v[i + 1], &next_base) && next_base <= from)
            continue;
        char *p = tb_asprintf("%s/%s", dir, segs.v[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        free(p);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        wal_scan_t sc;
        rc = wal__seg_scan(wal_io_posix(), fd, base, &sc, dump_record, &c);
        close(fd);
    }
    sv_free(&segs);
    free(name);
    free(dir);
    return rc;
}

int wal_dump(const char *dir, const char *topic, uint64_t from_offset, FILE *out)
{
    if (topic) {
        char *enc = wal__topic_encode(topic);
        if (!enc)
            return TB_EINVALID;
        int rc = dump_topic(dir, enc, from_offset, out);
        free(enc);
        return rc;
    }
    strvec_t topics = { 0 };
    int rc = list(dir, is_topic_dir, &topics);
    for (size_t i = 0; rc == 0 && i < topics.n; i++)
        rc = dump_topic(dir, topics.v[i], from_offset, out);
    sv_free(&topics);
    return rc;
}

/* ---- check --------------------------------------------------------------- */

static int check_topic(const char *root, const char *dirname, FILE *out, bool *corrupt)
{
    char *dir = tb_asprintf("%s/%s", root, dirname);
    char *name = wal__topic_decode(dirname);
    strvec_t segs = { 0 }, bad = { 0 };
    int rc = list(dir, is_segment, &segs);
    if (rc == 0)
        rc = list(dir, is_quarantined, &bad);
    json_t *corrupt_list = json_array();
    uint64_t first = 0, last = 0, records = 0, bytes = 0, torn = 0, pad = 0;
    for (size_t i = 0; rc == 0 && i < segs.n; i++) {
        uint64_t base;
        wal__seg_name_parse(segs.v[i], &base);
        char *p = tb_asprintf("%s/%s", dir, segs.v[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        free(p);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        wal_scan_t sc;
        rc = wal__seg_scan(wal_io_posix(), fd, base, &sc, NULL, NULL);
        close(fd);
        if (rc < 0)
            break;
        bytes += sc.size;
        pad += sc.pad_bytes;
        bool active = i + 1 == segs.n;
        if (sc.hdr_rc != 0 || (!active && sc.valid_end != sc.size)) {
            json_array_append_new(corrupt_list, json_string(segs.v[i]));
            *corrupt = true;
        } else if (active) {
            torn = sc.size - sc.valid_end;
        }
        if (sc.count > 0) {
            if (records == 0)
                first = sc.hdr.base;
            last = sc.next - 1;
            records += sc.count;
        }
    }
    for (size_t i = 0; i < bad.n; i++) {
        json_array_append_new(corrupt_list, json_string(bad.v[i]));
        *corrupt = true;
    }
    wal_meta_t m;
    unsigned mver;
    int mrc = wal__meta_read(wal_io_posix(), dir, &m, &mver);
    if (mrc < 0 && mrc != -ENOENT)
        *corrupt = true;
    json_t *o = json_object();
    json_object_set_new(o, "topic", json_string(name));
    json_object_set_new(o, "first_offset", json_integer((json_int_t)first));
    json_object_set_new(o, "last_offset", json_integer((json_int_t)last));
    json_object_set_new(o, "records", json_integer((json_int_t)records));
    json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
    json_object_set_new(o, "padding_bytes", json_integer((json_int_t)pad));
    json_object_set_new(o, "segments", json_integer((json_int_t)segs.n));
    json_object_set_new(o, "checkpoint", json_integer((json_int_t)m.checkpoint));
    json_object_set_new(o, "dropped", json_integer((json_int_t)m.dropped));
    json_object_set_new(o, "lost", json_integer((json_int_t)m.lost));
    json_object_set_new(o, "dropped_age", json_integer((json_int_t)m.dropped_age));
    json_object_set_new(o, "reserved", json_integer((json_int_t)m.reserved));
    json_object_set_new(o, "meta", json_string(mrc == 0                 ? "ok"
                                               : mrc == -ENOENT         ? "absent"
                                               : mrc == TB_EUNSUPPORTED ? "unsupported"
                                                                        : "corrupt"));
    json_object_set_new(o, "meta_version", json_integer(mver));
    if (mrc == 0 && m.nslots > 0) {
        /* version 3: each output's checkpoint and drops, by its name in OUTPUTS */
        json_t *outs = json_object();
        for (size_t i = 0; i < m.nslots; i++) {
            const wal_meta_slot_t *sl = &m.slots[i];
            char *oname = wal__output_name(root, sl->id);
            char *key = oname ? oname : tb_asprintf("#%u", (unsigned)sl->id); /* not in OUTPUTS */
            json_t *so = json_object();
            json_object_set_new(so, "id", json_integer(sl->id));
            json_object_set_new(so, "checkpoint", json_integer((json_int_t)sl->checkpoint));
            json_object_set_new(so, "dropped", json_integer((json_int_t)sl->dropped));
            json_object_set_new(so, "dropped_age", json_integer((json_int_t)sl->dropped_age));
            json_object_set_new(outs, key, so);
            free(key);
        }
        json_object_set_new(o, "outputs", outs);
    }
    json_object_set_new(o, "corrupt_segments", corrupt_list);
    json_object_set_new(o, "torn_tail_bytes", json_integer((json_int_t)torn));
    if (rc < 0)
        json_object_set_new(o, "error", json_string(tb_strerror(rc)));
    emit(o, out);
    sv_free(&segs);
    sv_free(&bad);
    free(name);
    free(dir);
    return rc;
}

/* Reads up to max bytes of path (one more tells a longer file): 0 and *buf (malloc'd), or -errno. */
static int read_small(const char *path, char **buf, size_t *len, size_t max)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *b = tb_malloc(max + 1);
    ssize_t n = wal__pread_full(wal_io_posix(), fd, b, max + 1, 0);
    close(fd);
    if (n < 0) {
        free(b);
        return (int)n;
    }
    *buf = b;
    *len = (size_t)n;
    return 0;
}

static bool is_entry(const char *dir, const char *name)
{
    (void)dir;
    return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static bool is_id_dir(const char *dir, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 4 || strspn(name, "0123456789") != n || (n > 1 && name[0] == '0'))
        return false;
    char *p = tb_asprintf("%s/%s", dir, name);
    struct stat st;
    bool ok = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return ok;
}

/* One line per output with state blobs (after the topics' lines):
 * {"output":NAME,"id":N,"state":{KEY:{"bytes":B,"status":"ok"|"corrupt"|"unsupported"|...}}};
 * a damaged blob makes the check report damage. */
static int check_states(const char *root, FILE *out, bool *corrupt)
{
    char *top = tb_asprintf("%s/" WAL_STATES_DIR, root);
    strvec_t ids = { 0 };
    int rc = list(top, is_id_dir, &ids);
    if (rc == -ENOENT)
        rc = 0; /* no output ever kept state */
    for (size_t i = 0; rc == 0 && i < ids.n; i++) {
        char *dir = tb_asprintf("%s/%s", top, ids.v[i]);
        strvec_t keys = { 0 };
        rc = list(dir, is_entry, &keys);
        uint16_t id = (uint16_t)strtoul(ids.v[i], NULL, 10);
        char *oname = wal__output_name(root, id);
        json_t *o = json_object(), *st = json_object();
        json_object_set_new(o, "output", oname ? json_string(oname) : json_null()); /* null: not in OUTPUTS */
        json_object_set_new(o, "id", json_integer(id));
        for (size_t k = 0; rc == 0 && k < keys.n; k++) {
            char *p = tb_asprintf("%s/%s", dir, keys.v[k]);
            size_t len = 0;
            char *buf = NULL;
            int r = read_small(p, &buf, &len, WAL_STATE_HEAD + WAL_STATE_MAX);
            const uint8_t *pl;
            size_t pn;
            if (r == 0)
                r = wal__state_decode((const uint8_t *)buf, len, &pl, &pn);
            json_t *b = json_object();
            json_object_set_new(b, "bytes", json_integer((json_int_t)len));
            json_object_set_new(b, "status", json_string(r == 0                 ? "ok"
                                                         : r == TB_ECORRUPT     ? "corrupt"
                                                         : r == TB_EUNSUPPORTED ? "unsupported"
                                                                                : tb_strerror(r)));
            if (r < 0)
                *corrupt = true;
            json_object_set_new(st, keys.v[k], b);
            free(buf);
            free(p);
        }
        json_object_set_new(o, "state", st);
        emit(o, out);
        free(oname);
        sv_free(&keys);
        free(dir);
    }
    sv_free(&ids);
    free(top);
    return rc;
}

/* One line per RETIRED entry (after the others):
 * {"retired":TOPIC,"next":..,"checkpoint":..,"dropped":..,"forgotten":..,"forgot":bool,"removed_ms":..}
 * (forgot: the FORGOTTEN flag, removed with a backlog); a damaged
 * file is one line {"retired_file":"corrupt"|"unsupported"} and makes the check report damage. */
static int check_retired(const char *root, FILE *out, bool *corrupt)
{
    char *p = tb_asprintf("%s/RETIRED", root);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_small(p, &buf, &len, WAL_RETIRED_READ_MAX);
    free(p);
    if (rc == -ENOENT)
        return 0;
    wal_retired_t *v = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = wal__retired_decode((const uint8_t *)buf, len, &v, &n);
    free(buf);
    if (rc == TB_ECORRUPT || rc == TB_EUNSUPPORTED) {
        json_t *o = json_object();
        json_object_set_new(o, "retired_file", json_string(rc == TB_ECORRUPT ? "corrupt" : "unsupported"));
        emit(o, out);
        *corrupt = true;
        return 0;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "retired", json_string(v[i].name));
        json_object_set_new(o, "next", json_integer((json_int_t)v[i].next));
        json_object_set_new(o, "checkpoint", json_integer((json_int_t)v[i].checkpoint));
        json_object_set_new(o, "dropped", json_integer((json_int_t)v[i].dropped));
        json_object_set_new(o, "forgotten", json_integer((json_int_t)v[i].forgotten));
        json_object_set_new(o, "forgot", json_boolean(v[i].flags & WAL_RETIRED_FORGOTTEN));
        json_object_set_new(o, "removed_ms", json_integer((json_int_t)v[i].removed_ms));
        emit(o, out);
    }
    wal_retired_free(v, n);
    return rc;
}

int wal_check(const char *dir, FILE *out)
{
    strvec_t topics = { 0 };
    int rc = list(dir, is_topic_dir, &topics);
    bool corrupt = false;
    for (size_t i = 0; rc == 0 && i < topics.n; i++)
        rc = check_topic(dir, topics.v[i], out, &corrupt);
    sv_free(&topics);
    if (rc == 0)
        rc = check_states(dir, out, &corrupt);
    if (rc == 0)
        rc = check_retired(dir, out, &corrupt);
    if (rc < 0)
        return rc;
    return corrupt ? 1 : 0;
}
