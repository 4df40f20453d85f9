/*
 * test_validator.c: the dispatch (sch_compile/sch_validate/ref/unref), the
 * schema-less kinds Bytes, String, Number, and the Protobuf refusal.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_json.h"
#include "schema/schema.h"
#include "unit/schema/helper_avro.h"

static sch_validator_t *simple(sch_kind_t kind)
{
    sch_validator_t *v = NULL;
    char err[256] = "";
    cr_assert_eq(sch_compile(kind, NULL, 0, NULL, &v, err, sizeof err), 0, "%s", err);
    return v;
}

Test(validator, bytes_accepts_any_payload)
{
    sch_validator_t *v = simple(SCH_BYTES);
    const uint8_t junk[] = { 0xff, 0x00, 0xc3, 0x28 };
    cr_assert_eq(h_check_bytes(v, junk, sizeof junk), 0);
    cr_assert_eq(h_check_bytes(v, "", 0), 0);
    sch_validator_unref(v);
}

Test(validator, string_accepts_utf8)
{
    sch_validator_t *v = simple(SCH_STRING);
    cr_assert_eq(h_check_bytes(v, "h\xc3\xa9llo \xe2\x82\xac", 11), 0);
    sch_validator_unref(v);
}

Test(validator, string_accepts_empty_payload)
{
    sch_validator_t *v = simple(SCH_STRING);
    cr_assert_eq(h_check_bytes(v, "", 0), 0);
    sch_validator_unref(v);
}

Test(validator, string_rejects_invalid_utf8)
{
    sch_validator_t *v = simple(SCH_STRING);
    cr_assert_eq(h_check_bytes(v, "ab\xc3\x28", 4), TB_EINVALID);
    cr_assert(strstr(h_err(), "UTF-8"), "%s", h_err());
    sch_validator_unref(v);
}

Test(validator, string_rejects_overlong_encoding)
{
    sch_validator_t *v = simple(SCH_STRING);
    cr_assert_eq(h_check_bytes(v, "\xc0\xaf", 2), TB_EINVALID);
    sch_validator_unref(v);
}

Test(validator, number_accepts_4_bytes)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    cr_assert_eq(h_check_bytes(v, "\x00\x00\x80\x3f", 4), 0);
    sch_validator_unref(v);
}

Test(validator, number_accepts_8_bytes)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    cr_assert_eq(h_check_bytes(v, "\0\0\0\0\0\0\xf0\x3f", 8), 0);
    sch_validator_unref(v);
}

Test(validator, number_rejects_other_sizes_with_size_in_error)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    size_t sizes[] = { 0, 1, 2, 3, 5, 7, 9, 16 };
    for (size_t i = 0; i < TB_ARRAY_LEN(sizes); i++)
        cr_assert_eq(h_check_bytes(v, "0123456789abcdef", sizes[i]), TB_EINVALID, "%zu", sizes[i]);
    cr_assert(strstr(h_err(), "16"), "%s", h_err());
    sch_validator_unref(v);
}

Test(validator, protobuf_is_refused_at_compile_with_clear_error)
{
    sch_validator_t *v = (sch_validator_t *)1;
    char err[256] = "";
    const char *proto = "syntax = \"proto3\"; message M { int32 a = 1; }";
    int rc = sch_compile(SCH_PROTOBUF, proto, strlen(proto), NULL, &v, err, sizeof err);
    cr_assert_eq(rc, TB_EUNSUPPORTED);
    cr_assert_null(v);
    cr_assert_str_eq(err, "Protobuf schemas are not supported yet; topic not ready");
}

Test(validator, unknown_kind_is_refused)
{
    sch_validator_t *v = (sch_validator_t *)1;
    char err[256] = "";
    cr_assert_eq(sch_compile((sch_kind_t)42, "x", 1, NULL, &v, err, sizeof err), TB_EUNSUPPORTED);
    cr_assert_null(v);
}

Test(validator, json_schema_compile_goes_to_the_json_validator)
{
    /* Whatever the JSON Schema validator answers, the dispatch must pass it
     * through unchanged (rc and message). */
    const char *text = "{\"type\": \"object\"}";
    char err_direct[256] = "", err_dispatch[256] = "";
    sch__json_t *js = NULL;
    int rc_direct = sch__json_compile(text, strlen(text), NULL, &js, err_direct, sizeof err_direct);
    sch__json_free(js);
    sch_validator_t *v = NULL;
    int rc = sch_compile(SCH_JSON_SCHEMA, text, strlen(text), NULL, &v, err_dispatch,
                         sizeof err_dispatch);
    cr_assert_eq(rc, rc_direct);
    cr_assert_str_eq(err_dispatch, err_direct);
    cr_assert_eq(v != NULL, rc == 0);
    sch_validator_unref(v);
}

Test(validator, kind_is_reported)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    cr_assert_eq(sch_validator_kind(v), SCH_NUMBER);
    sch_validator_unref(v);
    v = h_avro("\"int\"");
    cr_assert_eq(sch_validator_kind(v), SCH_AVRO);
    sch_validator_unref(v);
}

Test(validator, kind_names_match_the_envelope_tags)
{
    cr_assert_str_eq(sch_kind_name(SCH_BYTES), "Bytes");
    cr_assert_str_eq(sch_kind_name(SCH_STRING), "String");
    cr_assert_str_eq(sch_kind_name(SCH_NUMBER), "Number");
    cr_assert_str_eq(sch_kind_name(SCH_JSON_SCHEMA), "JsonSchema");
    cr_assert_str_eq(sch_kind_name(SCH_AVRO), "Avro");
    cr_assert_str_eq(sch_kind_name(SCH_PROTOBUF), "Protobuf");
}

Test(validator, extra_reference_keeps_validator_alive)
{
    sch_validator_t *v = h_avro("{\"type\":\"array\",\"items\":\"int\"}");
    cr_assert_eq(sch_validator_ref(v), v);
    sch_validator_unref(v);
    /* Still one reference: using it must be fine (ASan would catch a free). */
    cr_assert_eq(h_check_bytes(v, "\x02\x04\x00", 3), 0);
    sch_validator_unref(v);
}

Test(validator, error_buffer_is_optional)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    cr_assert_eq(sch_validate(v, (const uint8_t *)"x", 1, NULL, 0), TB_EINVALID);
    sch_validator_unref(v);
}

Test(validator, error_message_is_truncated_to_errlen)
{
    sch_validator_t *v = simple(SCH_NUMBER);
    char err[8];
    memset(err, 'x', sizeof err);
    cr_assert_eq(sch_validate(v, (const uint8_t *)"x", 1, err, sizeof err), TB_EINVALID);
    cr_assert_eq(strlen(err), sizeof err - 1);
    sch_validator_unref(v);
}

/* ---- threads: one validator shared by threads that ref, validate, unref -- */

typedef struct shared {
    sch_validator_t *v;
    int wrong;
} shared_t;

static void *hammer(void *arg)
{
    shared_t *s = arg;
    const uint8_t good[] = { 0x02, 0x06, 'a', 'b', 'c' }; /* {1, "abc"} */
    const uint8_t bad[] = { 0x02, 0x06, 'a', 'b' };
    for (int i = 0; i < 20000; i++) {
        sch_validator_t *mine = sch_validator_ref(s->v);
        char err[128];
        if (sch_validate(mine, good, sizeof good, err, sizeof err) != 0)
            __atomic_add_fetch(&s->wrong, 1, __ATOMIC_RELAXED);
        if (sch_validate(mine, bad, sizeof bad, err, sizeof err) != TB_EINVALID)
            __atomic_add_fetch(&s->wrong, 1, __ATOMIC_RELAXED);
        sch_validator_unref(mine);
    }
    return NULL;
}

Test(validator, concurrent_validation_from_threads_gives_same_verdicts)
{
    shared_t s = { .v = h_avro("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
                               "{\"name\":\"a\",\"type\":\"int\"},{\"name\":\"b\",\"type\":\"string\"}]}") };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, &s), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(s.wrong, 0);
    sch_validator_unref(s.v);
}
