/*
 * test_golden.c: the on-disk format, pinned byte for byte.
 *
 * features.seg is what the writer produces, with a fixed salt and clock,
 * for one batch that uses every format feature. The corrupt variants are
 * features.seg with one deliberate change each (tests/data/wal/README.md).
 * A format change makes writer_output_matches_the_golden_segment fail; the
 * change must then bump WAL_FORMAT_VERSION and regenerate the files:
 *
 *   WAL_GOLDEN_UPDATE=1 TRIB_TESTDATA=$PWD/tests/data build/tests/unit_wal --filter 'golden/writer_output*'
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_wal.h"
#include "wal/wal_int.h"

#define GOLDEN_SALT 0x5A17C0DEu
#define GOLDEN_TIME 1700000000000ull
#define GOLDEN_RECORDS 7

static int fixed_random(void *ctx, void *buf, size_t n)
{
    uint8_t salt[4];
    wal__st32(salt, GOLDEN_SALT);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = salt[i % 4];
    return 0;
}

static uint64_t fixed_now(void *ctx) { return GOLDEN_TIME; }

static wal_io_t golden_io;

static th_t h;
static void setup(void)
{
    th_init(&h, WAL_FSYNC_ALWAYS);
    h.o.segment_bytes = 1 << 20;
    h.o.max_topic_bytes = 4 << 20;
    golden_io = *wal_io_posix();
    golden_io.random = fixed_random;
    golden_io.now_ms = fixed_now;
}
static void teardown(void) { th_cleanup(&h); }
TestSuite(golden, .init = setup, .fini = teardown);

static char *data_path(const char *name)
{
    const char *env = getenv("TRIB_TESTDATA");
    if (env && *env)
        return tb_asprintf("%s/wal/%s", env, name);
    const char *f = __FILE__; /* .../tests/unit/wal/test_golden.c */
    const char *cut = strstr(f, "tests/unit/wal/");
    return tb_asprintf("%.*stests/data/wal/%s", (int)(cut - f), f, name);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

static void spit(const char *path, const uint8_t *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static const wal_attr_t attrs[] = {
    { (const uint8_t *)"site", 4, (const uint8_t *)"north", 5 },
    { (const uint8_t *)"mqtt.user.line", 14, (const uint8_t *)"2", 1 },
};
static const uint8_t binary[] = { 0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF };

/* One message per format feature; record i has offset i + 1. */
static wal_msg_t feature(int i)
{
    wal_msg_t m = { .mqtt_topic = "sensors/1", .mqtt_topic_len = 9, .publish_time_ms = GOLDEN_TIME + (uint64_t)i };
    switch (i) {
    case 0: m.payload = (const uint8_t *)"hello"; m.payload_len = 5; break;
    case 1: m.payload = (const uint8_t *)"{\"t\":1}"; m.payload_len = 7; m.attrs = attrs; m.nattrs = 2; m.qos = 1; break;
    case 2: m.payload = (const uint8_t *)"kept"; m.payload_len = 4; m.qos = 2; m.retain = true; break;
    case 3: m.payload = (const uint8_t *)"{\"v\":3}"; m.payload_len = 7; m.has_schema = true;
            m.schema_id = 1234567890123ull; m.schema_version = 7; break;
    case 4: m.payload = NULL; m.payload_len = 0; break;
    case 5: m.payload = binary; m.payload_len = sizeof binary; break;
    default: m.payload = (const uint8_t *)"temp\xC3\xA9rature"; m.payload_len = 12; m.mqtt_topic = ""; m.mqtt_topic_len = 0; break;
    }
    return m;
}

/* Runs the real writer and returns the segment it produced. */
static uint8_t *produce(size_t *n)
{
    h.o.io = &golden_io;
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/edge1/golden", &t), 0);
    wal_batch_t *b = wal_batch_new(t);
    for (int i = 0; i < GOLDEN_RECORDS; i++) {
        wal_msg_t m = feature(i);
        cr_assert_eq(wal_batch_add(b, &m), 0);
    }
    wal_submit(b, NULL);
    cr_assert(th_wait(&h, 1));
    cr_assert_eq(h.done[0].rc, 0);
    cr_assert_eq(th_close(&h), 0);
    char *p = tb_asprintf("%s/+edge1+golden/00000000000000000001.seg", h.wal_dir);
    uint8_t *buf = slurp(p, n);
    free(p);
    cr_assert_not_null(buf);
    return buf;
}

/* The deliberate corruptions, applied to a copy of the features segment. */
typedef struct variant {
    const char *name;
    void (*apply)(uint8_t *buf, size_t *n);
} variant_t;

static size_t record_pos(const uint8_t *buf, int index)
{
    size_t pos = WAL_SEG_HDR_SIZE;
    for (int i = 0; i < index; i++)
        pos += wal__ld32(buf + pos);
    return pos;
}
static void cut_tail(uint8_t *buf, size_t *n) { *n -= 7; }
static void flip_payload_of_record_4(uint8_t *buf, size_t *n)
{
    size_t pos = record_pos(buf, 3);
    buf[pos + wal__ld32(buf + pos) - 1] ^= 0x01;
}
static void header_field(uint8_t *buf, size_t at, uint32_t v, int width)
{
    if (width == 2)
        wal__st16(buf + at, (uint16_t)v);
    else
        wal__st32(buf + at, v);
    wal__st32(buf + 28, wal__crc32c(0, buf, 28)); /* a valid header CRC: only the field is wrong */
}
static void version_2(uint8_t *buf, size_t *n) { header_field(buf, 4, 2, 2); }
static void other_salt(uint8_t *buf, size_t *n) { header_field(buf, 24, GOLDEN_SALT ^ 1, 4); }
static void bad_magic(uint8_t *buf, size_t *n) { buf[3] = 'X'; }

static const variant_t variants[] = {
    { "truncated_tail.seg", cut_tail },
    { "bad_crc.seg", flip_payload_of_record_4 },
    { "wrong_version.seg", version_2 },
    { "wrong_salt.seg", other_salt },
    { "bad_magic.seg", bad_magic },
};

Test(golden, writer_output_matches_the_golden_segment)
{
    size_t n, gn;
    uint8_t *buf = produce(&n);
    char *gp = data_path("features.seg");
    if (getenv("WAL_GOLDEN_UPDATE")) {
        spit(gp, buf, n);
        for (size_t i = 0; i < TB_ARRAY_LEN(variants); i++) {
            uint8_t *v = malloc(n);
            memcpy(v, buf, n);
            size_t vn = n;
            variants[i].apply(v, &vn);
            char *vp = data_path(variants[i].name);
            spit(vp, v, vn);
            free(vp);
            free(v);
        }
    }
    uint8_t *golden = slurp(gp, &gn);
    cr_assert_not_null(golden, "missing %s", gp);
    cr_assert_eq(n, gn, "size %zu, golden %zu: the format changed", n, gn);
    cr_assert_eq(memcmp(buf, golden, n), 0, "bytes differ: the format changed");
    free(golden);
    free(gp);
    free(buf);
}

Test(golden, corrupt_variants_are_the_documented_mutations_of_the_golden_segment)
{
    size_t n;
    char *gp = data_path("features.seg");
    uint8_t *golden = slurp(gp, &n);
    cr_assert_not_null(golden);
    for (size_t i = 0; i < TB_ARRAY_LEN(variants); i++) {
        uint8_t *v = malloc(n);
        memcpy(v, golden, n);
        size_t vn = n, fn;
        variants[i].apply(v, &vn);
        char *vp = data_path(variants[i].name);
        uint8_t *file = slurp(vp, &fn);
        cr_assert_not_null(file, "missing %s", vp);
        cr_assert(fn == vn && memcmp(file, v, vn) == 0, "%s", variants[i].name);
        free(file);
        free(vp);
        free(v);
    }
    free(golden);
    free(gp);
}

/* Installs golden file `name` as segment <base> of topic /edge1/golden. */
static char *install(const char *name, uint64_t base)
{
    char *dir = tb_asprintf("%s/+edge1+golden", h.wal_dir);
    char *src = data_path(name);
    char *cmd = tb_asprintf("mkdir -p %s && cp %s %s/%020llu.seg", dir, src, dir, (unsigned long long)base);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(src);
    char *p = tb_asprintf("%s/%020llu.seg", dir, (unsigned long long)base);
    free(dir);
    return p;
}

/* A valid empty segment at base, so the one before it is sealed. */
static void install_empty(uint64_t base)
{
    uint8_t hb[WAL_SEG_HDR_SIZE];
    wal_seghdr_t hdr = { .base = base, .created_ms = GOLDEN_TIME, .salt = 99 };
    wal__seghdr_encode(hb, &hdr);
    char *p = tb_asprintf("%s/+edge1+golden/%020llu.seg", h.wal_dir, (unsigned long long)base);
    spit(p, hb, sizeof hb);
    free(p);
}

static wal_topic_stats_t open_stats(void)
{
    cr_assert_eq(th_open(&h), 0);
    wal_topic_t *t = wal_topic_find(h.w, "/edge1/golden");
    cr_assert_not_null(t);
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    return st;
}

static long readable(void)
{
    wal_reader_t *r;
    wal_reader_open(wal_topic_find(h.w, "/edge1/golden"), 1, &r);
    wal_record_t rec;
    long n = 0;
    while (wal_reader_next(r, &rec) == 0)
        n++;
    wal_reader_close(r);
    return n;
}

Test(golden, features_segment_reads_back_every_feature)
{
    free(install("features.seg", 1));
    cr_assert_eq(open_stats().next_offset, 8);
    wal_reader_t *r;
    cr_assert_eq(wal_reader_open(wal_topic_find(h.w, "/edge1/golden"), 1, &r), 0);
    for (int i = 0; i < GOLDEN_RECORDS; i++) {
        wal_record_t rec;
        cr_assert_eq(wal_reader_next(r, &rec), 0);
        wal_msg_t m = feature(i);
        cr_assert_eq(rec.offset, (uint64_t)i + 1);
        cr_assert(rec.payload_len == m.payload_len && (!m.payload_len || memcmp(rec.payload, m.payload, m.payload_len) == 0));
        cr_assert(rec.qos == m.qos && rec.retain == m.retain && rec.has_schema == m.has_schema);
        cr_assert(rec.schema_id == m.schema_id && rec.schema_version == m.schema_version);
        cr_assert_eq(rec.nattrs, m.nattrs);
        cr_assert_eq(rec.publish_time_ms, m.publish_time_ms);
    }
    wal_reader_close(r);
}

Test(golden, truncated_tail_is_cut_to_the_last_whole_record)
{
    char *p = install("truncated_tail.seg", 1);
    cr_assert_eq(open_stats().next_offset, 7);
    cr_assert_eq(readable(), 6);
    size_t n;
    char *gp = data_path("features.seg");
    uint8_t *g = slurp(gp, &n);
    cr_assert_eq((size_t)th_file_size(p), record_pos(g, 6));
    free(g);
    free(gp);
    free(p);
}

Test(golden, bad_crc_in_the_active_segment_ends_the_log_there)
{
    free(install("bad_crc.seg", 1));
    cr_assert_eq(open_stats().next_offset, 4);
    cr_assert_eq(readable(), 3);
}

Test(golden, bad_crc_in_a_sealed_segment_quarantines_it_at_verified_open)
{
    free(install("bad_crc.seg", 1));
    install_empty(8);
    h.o.verify_on_open = true;
    wal_topic_stats_t st = open_stats();
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_eq(st.dropped_total, 7);
    cr_assert_eq(st.next_offset, 8);
}

Test(golden, bad_crc_in_a_sealed_segment_is_a_gap_for_readers)
{
    free(install("bad_crc.seg", 1));
    install_empty(8);
    open_stats();
    wal_reader_t *r;
    wal_reader_open(wal_topic_find(h.w, "/edge1/golden"), 1, &r);
    wal_record_t rec;
    int n = 0, rc;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        n++;
    cr_assert_eq(n, 3);
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert(from == 4 && to == 8);
    wal_reader_close(r);
}

Test(golden, offset_hole_between_segments_is_reported_as_a_gap)
{
    free(install("features.seg", 1));
    install_empty(15);
    open_stats();
    wal_reader_t *r;
    wal_reader_open(wal_topic_find(h.w, "/edge1/golden"), 1, &r);
    wal_record_t rec;
    int n = 0, rc;
    while ((rc = wal_reader_next(r, &rec)) == 0)
        n++;
    cr_assert_eq(n, 7);
    cr_assert_eq(rc, WAL_GAP);
    uint64_t from, to;
    wal_reader_gap(r, &from, &to);
    cr_assert(from == 8 && to == 15);
    cr_assert_eq(wal_reader_next(r, &rec), WAL_END);
    wal_reader_close(r);
}

Test(golden, wrong_version_is_quarantined_and_offsets_skip_past_it)
{
    char *p = install("wrong_version.seg", 1);
    wal_topic_stats_t st = open_stats();
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_gt(st.next_offset, 7, "past any offset the unreadable segment could hold");
    char *q = tb_asprintf("%s.corrupt", p);
    cr_assert_gt(th_file_size(q), 0);
    free(q);
    free(p);
}

Test(golden, wrong_salt_validates_no_record)
{
    free(install("wrong_salt.seg", 1));
    cr_assert_eq(open_stats().next_offset, 1);
    cr_assert_eq(readable(), 0);
}

Test(golden, bad_magic_is_quarantined)
{
    free(install("bad_magic.seg", 1));
    wal_topic_stats_t st = open_stats();
    cr_assert_eq(st.quarantined_segments, 1);
    cr_assert_gt(st.next_offset, 7);
}
