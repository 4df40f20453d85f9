/* test_tools.c: wal_dump and wal_check, the offline views, print what the CLI
 * documents. The golden files are installed by path under tests/data/wal/
 * (v2/ the current format, v1/ the frozen older one). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_wal.h"

static th_t h;
static void setup(void) { th_init(&h, WAL_FSYNC_ALWAYS); }
static void teardown(void) { th_cleanup(&h); }
TestSuite(dump, .init = setup, .fini = teardown);
TestSuite(check, .init = setup, .fini = teardown);

static char *data(const char *name)
{
    const char *env = getenv("TRIB_TESTDATA");
    if (env && *env)
        return tb_asprintf("%s/wal/%s", env, name);
    const char *f = __FILE__;
    const char *cut = strstr(f, "tests/unit/wal/");
    return tb_asprintf("%.*stests/data/wal/%s", (int)(cut - f), f, name);
}

static void install(const char *topic_dir, const char *name, unsigned long long base)
{
    char *src = data(name);
    char *cmd = tb_asprintf("mkdir -p %s/%s && cp %s %s/%s/%020llu.seg", h.wal_dir, topic_dir, src, h.wal_dir,
                            topic_dir, base);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(src);
}

typedef struct { char *buf; size_t len; FILE *f; } out_t;
static void out_open(out_t *o) { o->f = open_memstream(&o->buf, &o->len); }
static char *out_close(out_t *o) { fclose(o->f); return o->buf; }

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The n-th line (0-based) as a new string. */
static char *line(const char *s, int n)
{
    while (n-- > 0)
        s = strchr(s, '\n') + 1;
    return strndup(s, (size_t)(strchr(s, '\n') - s));
}

static char *dump_golden(const char *topic, uint64_t from, int *rc)
{
    install("+edge1+golden", "v2/features.seg", 1);
    out_t o;
    out_open(&o);
    *rc = wal_dump(h.wal_dir, topic, from, o.f);
    return out_close(&o);
}

Test(dump, prints_one_json_line_per_record)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 1, &rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(count_lines(s), 7);
    free(s);
}

Test(dump, record_with_attributes_prints_as_documented)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 1, &rc);
    char *l = line(s, 1);
    cr_assert_str_eq(l, "{\"topic\":\"/edge1/golden\",\"offset\":2,\"publish_time\":1700000000001,\"qos\":1,"
                        "\"retain\":false,\"mqtt_topic\":\"sensors/1\",\"attributes\":{\"site\":\"north\","
                        "\"mqtt.user.line\":\"2\"},\"payload\":\"{\\\"t\\\":1}\"}");
    free(l);
    free(s);
}

Test(dump, binary_payload_is_base64_and_says_so)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 1, &rc);
    char *l = line(s, 5);
    cr_assert(strstr(l, "\"payload\":\"AAECf4D+/w==\",\"payload_encoding\":\"base64\"}"), "%s", l);
    free(l);
    free(s);
}

Test(dump, utf8_payload_is_a_plain_string)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 1, &rc);
    char *l = line(s, 6);
    cr_assert(strstr(l, "\"payload\":\"temp\xC3\xA9rature\"}"), "%s", l);
    cr_assert_null(strstr(l, "payload_encoding"));
    free(l);
    free(s);
}

Test(dump, schema_fields_appear_only_when_present)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 1, &rc);
    char *with = line(s, 3), *without = line(s, 2);
    cr_assert(strstr(with, "\"schema_id\":1234567890123,\"schema_version\":7"), "%s", with);
    cr_assert_null(strstr(without, "schema_id"));
    cr_assert(strstr(without, "\"qos\":2,\"retain\":true"), "%s", without);
    free(with);
    free(without);
    free(s);
}

Test(dump, from_offset_skips_earlier_records)
{
    int rc;
    char *s = dump_golden("/edge1/golden", 5, &rc);
    cr_assert_eq(count_lines(s), 3);
    cr_assert(strncmp(s, "{\"topic\":\"/edge1/golden\",\"offset\":5,", 36) == 0, "%s", s);
    free(s);
}

Test(dump, every_topic_when_none_is_named)
{
    install("+a", "v2/features.seg", 1);
    int rc;
    char *s = dump_golden(NULL, 1, &rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(count_lines(s), 14);
    free(s);
}

Test(dump, padding_records_are_not_printed)
{
    install("+edge1+golden", "v2/padded.seg", 1);
    out_t o;
    out_open(&o);
    int rc = wal_dump(h.wal_dir, "/edge1/golden", 1, o.f);
    char *s = out_close(&o);
    cr_assert_eq(rc, 0);
    cr_assert_eq(count_lines(s), 31, "the 31 records of v2/padded.seg, not its two paddings");
    char *last = line(s, 30);
    cr_assert(strstr(last, "\"offset\":31,") != NULL, "%s", last);
    free(last);
    free(s);
}

Test(dump, version_1_segment_prints_its_records)
{
    install("+edge1+golden", "v1/features.seg", 1);
    out_t o;
    out_open(&o);
    int rc = wal_dump(h.wal_dir, "/edge1/golden", 1, o.f);
    char *s = out_close(&o);
    cr_assert_eq(rc, 0);
    cr_assert_eq(count_lines(s), 7);
    free(s);
}

static json_t *check_json(int *rc)
{
    out_t o;
    out_open(&o);
    *rc = wal_check(h.wal_dir, o.f);
    char *s = out_close(&o);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    cr_assert_not_null(j, "%s: %s", err.text, s);
    free(s);
    return j;
}

static long long jint(json_t *j, const char *k) { return json_integer_value(json_object_get(j, k)); }

Test(check, clean_log_returns_zero_and_its_offsets)
{
    install("+edge1+golden", "v2/features.seg", 1);
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(json_string_value(json_object_get(j, "topic")), "/edge1/golden");
    cr_assert(jint(j, "first_offset") == 1 && jint(j, "last_offset") == 7 && jint(j, "records") == 7);
    cr_assert_eq(jint(j, "segments"), 1);
    cr_assert_eq(json_array_size(json_object_get(j, "corrupt_segments")), 0);
    json_decref(j);
}

Test(check, corrupt_sealed_segment_returns_one_and_names_it)
{
    install("+edge1+golden", "v2/bad_crc.seg", 1);
    install("+edge1+golden", "v2/features.seg", 8); /* its base does not match: also corrupt */
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 1);
    json_t *bad = json_object_get(j, "corrupt_segments");
    cr_assert_str_eq(json_string_value(json_array_get(bad, 0)), "00000000000000000001.seg");
    json_decref(j);
}

Test(check, torn_tail_is_reported_but_not_corrupt)
{
    install("+edge1+golden", "v2/truncated_tail.seg", 1);
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(jint(j, "records"), 6);
    cr_assert_gt(jint(j, "torn_tail_bytes"), 0);
    json_decref(j);
}

Test(check, padding_bytes_are_counted_apart_and_are_not_corruption)
{
    install("+edge1+golden", "v2/padded.seg", 1);
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(jint(j, "records"), 31);
    cr_assert_eq(jint(j, "bytes"), 8409);
    cr_assert_eq(jint(j, "padding_bytes"), 809 + 841, "the two paddings of v2/padded.seg");
    cr_assert_eq(jint(j, "torn_tail_bytes"), 0);
    json_decref(j);
}

Test(check, reports_what_the_writer_persisted)
{
    wal_topic_t *t;
    cr_assert_eq(th_open(&h), 0);
    cr_assert_eq(wal_topic_open(h.w, "/e/t", &t), 0);
    cr_assert_eq(th_append(&h, t, 0, 10, 100), 0);
    cr_assert_eq(wal_checkpoint(t, 4), 0);
    cr_assert_eq(th_close(&h), 0);
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert(jint(j, "checkpoint") == 4 && jint(j, "records") == 10 && jint(j, "dropped") == 0);
    json_decref(j);
}

static void install_meta(const char *topic_dir, const char *name)
{
    char *src = data(name);
    char *cmd = tb_asprintf("mkdir -p %s/%s && cp %s %s/%s/meta", h.wal_dir, topic_dir, src, h.wal_dir, topic_dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(src);
}

Test(check, prints_the_meta_files_version_reservation_and_age_drops)
{
    install("+edge1+golden", "v2/features.seg", 1);
    install_meta("+edge1+golden", "meta/v2.bin");
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(json_string_value(json_object_get(j, "meta")), "ok");
    cr_assert_eq(jint(j, "meta_version"), 2);
    cr_assert_eq(jint(j, "reserved"), 1000);
    cr_assert_eq(jint(j, "dropped_age"), 7);
    cr_assert(jint(j, "checkpoint") == 3 && jint(j, "dropped") == 4 && jint(j, "lost") == 6);
    json_decref(j);
}

Test(check, version_1_meta_prints_zero_for_the_new_fields)
{
    install("+edge1+golden", "v2/features.seg", 1);
    install_meta("+edge1+golden", "meta/v1.bin");
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(jint(j, "meta_version"), 1);
    cr_assert(jint(j, "reserved") == 0 && jint(j, "dropped_age") == 0 && jint(j, "checkpoint") == 3);
    json_decref(j);
}

Test(check, meta_of_a_newer_version_is_unsupported_and_fails_the_check)
{
    install("+edge1+golden", "v2/features.seg", 1);
    install_meta("+edge1+golden", "meta/v2_as_v4.bin");
    int rc;
    json_t *j = check_json(&rc);
    cr_assert_eq(rc, 1);
    cr_assert_str_eq(json_string_value(json_object_get(j, "meta")), "unsupported");
    cr_assert_eq(jint(j, "meta_version"), 0);
    json_decref(j);
}
