/*
 * test_flat_avro.c: sch_flatten_avro (an Avro binary record as (path,
 * value) leaves) and sch_field_types (a schema's declared leaves with
 * types, for Sparkplug births): paths, each Avro type, unions, maps, the
 * payloads refused and why, and the fields listed for JSON Schema and Avro.
 */
#include "schema/schema.h"

#include "base/base.h"
#include "helper_avro.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

typedef struct rec {
    char text[8192];
} rec_t;

static int record(void *arg, const char *path, size_t plen, const sch_flat_value_t *v)
{
    rec_t *r = arg;
    cr_assert_eq(strlen(path), plen);
    char one[512];
    switch (v->type) {
    case SCH_FLAT_NULL: snprintf(one, sizeof one, "%s=n;", path); break;
    case SCH_FLAT_BOOL: snprintf(one, sizeof one, "%s=b:%d;", path, v->b); break;
    case SCH_FLAT_INT: snprintf(one, sizeof one, "%s=i:%lld;", path, (long long)v->i); break;
    case SCH_FLAT_DOUBLE: snprintf(one, sizeof one, "%s=d:%.9g;", path, v->d); break;
    case SCH_FLAT_STRING: snprintf(one, sizeof one, "%s=s:%.*s;", path, (int)v->len, v->s); break;
    case SCH_FLAT_BYTES: snprintf(one, sizeof one, "%s=x:%zu;", path, v->len); break;
    }
    strcat(r->text, one);
    return 0;
}

static char err[512];

static const char *flat(sch_validator_t *v, const hbuf_t *h)
{
    static rec_t r;
    memset(&r, 0, sizeof r);
    int rc = sch_flatten_avro(v, h->b, h->n, record, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "refused: %s", err);
    return r.text;
}

static int refused(sch_validator_t *v, const hbuf_t *h)
{
    rec_t r = { 0 };
    int rc = sch_flatten_avro(v, h->b, h->n, record, &r, err, sizeof err);
    cr_assert_neq(rc, 0, "accepted: %s", r.text);
    cr_assert_neq(err[0], '\0', "refused without a reason");
    return rc;
}

static const char *TELEMETRY =
    "{\"type\":\"record\",\"name\":\"T\",\"fields\":["
    "{\"name\":\"temp\",\"type\":\"double\"},"
    "{\"name\":\"count\",\"type\":\"long\"},"
    "{\"name\":\"small\",\"type\":\"int\"},"
    "{\"name\":\"ratio\",\"type\":\"float\"},"
    "{\"name\":\"on\",\"type\":\"boolean\"},"
    "{\"name\":\"label\",\"type\":\"string\"},"
    "{\"name\":\"raw\",\"type\":\"bytes\"},"
    "{\"name\":\"mac\",\"type\":{\"type\":\"fixed\",\"name\":\"Mac\",\"size\":6}},"
    "{\"name\":\"mode\",\"type\":{\"type\":\"enum\",\"name\":\"Mode\",\"symbols\":[\"AUTO\",\"MANUAL\"]}},"
    "{\"name\":\"motor\",\"type\":{\"type\":\"record\",\"name\":\"M\",\"fields\":["
    "  {\"name\":\"rpm\",\"type\":[\"null\",\"int\"]}]}}"
    "]}";

static void telemetry(hbuf_t *h, bool rpm_null)
{
    memset(h, 0, sizeof *h);
    hb_double(h, 21.5);
    hb_long(h, -9000000000ll);
    hb_long(h, 7);
    hb_float(h, 0.25f);
    hb_byte(h, 1);
    hb_str(h, "pump");
    hb_bytes(h, "\0\1\2", 3);
    hb_raw(h, "abcdef", 6);
    hb_long(h, 1);
    if (rpm_null) {
        hb_long(h, 0);
    } else {
        hb_long(h, 1);
        hb_long(h, 900);
    }
}

Test(flat_avro, every_type_in_schema_order)
{
    sch_validator_t *v = h_avro(TELEMETRY);
    hbuf_t h;
    telemetry(&h, false);
    cr_assert_str_eq(flat(v, &h), "temp=d:21.5;count=i:-9000000000;small=i:7;ratio=d:0.25;on=b:1;label=s:pump;"
                                  "raw=x:3;mac=x:6;mode=s:MANUAL;motor/rpm=i:900;");
    telemetry(&h, true);
    cr_assert(strstr(flat(v, &h), "motor/rpm=n;"), "the null branch is a null leaf at the same path");
    sch_validator_unref(v);
}

Test(flat_avro, arrays_by_index_maps_by_key)
{
    sch_validator_t *v = h_avro("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
                                "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"int\"}},"
                                "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"boolean\"}}]}");
    hbuf_t h = { 0 };
    hb_long(&h, 2); /* one block of two */
    hb_long(&h, 10);
    hb_long(&h, 11);
    hb_long(&h, -1); /* a block with its byte size */
    hb_long(&h, 1);
    hb_long(&h, 12);
    hb_long(&h, 0);
    hb_long(&h, 2);
    hb_str(&h, "x");
    hb_byte(&h, 0);
    hb_str(&h, "y");
    hb_byte(&h, 1);
    hb_long(&h, 0);
    cr_assert_str_eq(flat(v, &h), "a/0=i:10;a/1=i:11;a/2=i:12;m/x=b:0;m/y=b:1;");

    /* the same key twice in one map: two values on one metric */
    hbuf_t d = { 0 };
    hb_long(&d, 0);
    hb_long(&d, 1);
    hb_str(&d, "x");
    hb_byte(&d, 0);
    hb_long(&d, 1);
    hb_str(&d, "x");
    hb_byte(&d, 1);
    hb_long(&d, 0);
    cr_assert_eq(refused(v, &d), TB_EINVALID);
    cr_assert(strstr(err, "twice"), "%s", err);

    hbuf_t s = { 0 };
    hb_long(&s, 0);
    hb_long(&s, 1);
    hb_str(&s, "a/b");
    hb_byte(&s, 0);
    hb_long(&s, 0);
    refused(v, &s);
    cr_assert(strstr(err, "'/'"), "%s", err);

    hbuf_t e = { 0 };
    hb_long(&e, 0);
    hb_long(&e, 1);
    hb_str(&e, "");
    hb_byte(&e, 0);
    hb_long(&e, 0);
    refused(v, &e);
    cr_assert(strstr(err, "empty"), "%s", err);

    hbuf_t z = { 0 };
    hb_long(&z, 0);
    hb_long(&z, 1);
    hb_bytes(&z, "a\0b", 3);
    hb_byte(&z, 0);
    hb_long(&z, 0);
    refused(v, &z);
    cr_assert(strstr(err, "NUL"), "a NUL would cut the metric name: %s", err);
    sch_validator_unref(v);
}

Test(flat_avro, invalid_datum_refused_before_any_leaf)
{
    sch_validator_t *v = h_avro(TELEMETRY);
    hbuf_t h;
    telemetry(&h, false);
    h.n -= 1; /* truncated */
    cr_assert_eq(refused(v, &h), TB_EINVALID);
    telemetry(&h, false);
    hb_byte(&h, 0); /* trailing byte */
    refused(v, &h);
    sch_validator_unref(v);
}

Test(flat_avro, not_a_record_or_not_binary)
{
    sch_validator_t *v = h_avro("\"long\"");
    hbuf_t h = { 0 };
    hb_long(&h, 5);
    cr_assert_eq(refused(v, &h), TB_EINVALID);
    cr_assert(strstr(err, "not a record"), "%s", err);
    sch_validator_unref(v);

    v = h_avro_json(TELEMETRY);
    cr_assert_eq(refused(v, &h), TB_EUNSUPPORTED);
    sch_validator_unref(v);

    sch_validator_t *j = NULL;
    cr_assert_eq(sch_compile(SCH_JSON_SCHEMA, "{}", 2, NULL, &j, err, sizeof err), 0);
    cr_assert_eq(refused(j, &h), TB_EUNSUPPORTED);
    sch_validator_unref(j);
}

Test(flat_avro, deep_nesting_refused)
{
    /* a recursive record: depth is the data's, bounded at SCH_FLAT_MAX_DEPTH */
    sch_validator_t *v = h_avro("{\"type\":\"record\",\"name\":\"N\",\"fields\":["
                                "{\"name\":\"next\",\"type\":[\"null\",\"N\"]}]}");
    hbuf_t h = { 0 };
    for (int i = 0; i < 40; i++)
        hb_long(&h, 1);
    hb_long(&h, 0);
    refused(v, &h);
    cr_assert(strstr(err, "deeper"), "%s", err);
    memset(&h, 0, sizeof h);
    hb_long(&h, 1);
    hb_long(&h, 0);
    cr_assert_str_eq(flat(v, &h), "next/next=n;");
    sch_validator_unref(v);
}

/* ---- sch_field_types ---- */

static int field(void *arg, const char *path, size_t plen, sch_field_type_t t, bool nullable)
{
    static const char *names[] = { "bool", "int32", "int64", "float", "double", "string", "bytes" };
    rec_t *r = arg;
    cr_assert_eq(strlen(path), plen);
    char one[512];
    snprintf(one, sizeof one, "%s:%s%s;", path, names[t], nullable ? "?" : "");
    strcat(r->text, one);
    return 0;
}

static const char *fields(sch_validator_t *v)
{
    static rec_t r;
    memset(&r, 0, sizeof r);
    int rc = sch_field_types(v, field, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    return r.text;
}

Test(fields, avro_record_recursively)
{
    sch_validator_t *v = h_avro(TELEMETRY);
    cr_assert_str_eq(fields(v), "temp:double;count:int64;small:int32;ratio:float;on:bool;label:string;"
                                "raw:bytes;mac:bytes;mode:string;motor/rpm:int32?;");
    sch_validator_unref(v);

    /* arrays, maps, multi-type unions and a record inside itself are not listed */
    v = h_avro("{\"type\":\"record\",\"name\":\"N\",\"fields\":["
               "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"int\"}},"
               "{\"name\":\"u\",\"type\":[\"int\",\"string\"]},"
               "{\"name\":\"opt\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"O\",\"fields\":["
               "  {\"name\":\"x\",\"type\":\"long\"}]}]},"
               "{\"name\":\"next\",\"type\":[\"null\",\"N\"]}]}");
    cr_assert_str_eq(fields(v), "opt/x:int64?;");
    sch_validator_unref(v);
}

Test(fields, json_schema_properties)
{
    const char *s = "{\"type\":\"object\",\"$defs\":{\"m\":{\"type\":\"object\",\"properties\":{"
                    "\"rpm\":{\"type\":\"integer\"}}}},"
                    "\"properties\":{"
                    "\"temp\":{\"type\":\"number\"},"
                    "\"n\":{\"type\":[\"integer\",\"null\"]},"
                    "\"on\":{\"type\":\"boolean\"},"
                    "\"name\":{\"type\":\"string\"},"
                    "\"any\":{},"
                    "\"both\":{\"type\":[\"string\",\"number\"]},"
                    "\"list\":{\"type\":\"array\"},"
                    "\"motor\":{\"$ref\":\"#/$defs/m\"}}}";
    sch_validator_t *v = NULL;
    cr_assert_eq(sch_compile(SCH_JSON_SCHEMA, s, strlen(s), NULL, &v, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(fields(v), "temp:double;n:int64?;on:bool;name:string;motor/rpm:int64;");
    sch_validator_unref(v);

}

Test(fields, other_kinds_declare_nothing)
{
    sch_validator_t *v = NULL;
    cr_assert_eq(sch_compile(SCH_STRING, NULL, 0, NULL, &v, err, sizeof err), 0);
    rec_t r = { 0 };
    cr_assert_eq(sch_field_types(v, field, &r, err, sizeof err), TB_EUNSUPPORTED);
    cr_assert(strstr(err, "String"), "%s", err);
    sch_validator_unref(v);
}
