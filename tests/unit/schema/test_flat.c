/*
 * test_flat.c: sch_flatten_json, a JSON object payload as (path, value)
 * leaves for metric outputs: paths and their order, each JSON type, and
 * the payloads refused (with why) so that no two leaves share a path.
 */
#include "schema/schema.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The leaves as one line: "path=T:value;..." (T: n b i d s). */
typedef struct rec {
    char text[8192];
    int calls;
    int stop_after; /* 0: never */
} rec_t;

static int record(void *arg, const char *path, size_t plen, const sch_flat_value_t *v)
{
    rec_t *r = arg;
    cr_assert_eq(strlen(path), plen, "path_len agrees with the NUL");
    char one[512];
    switch (v->type) {
    case SCH_FLAT_NULL: snprintf(one, sizeof one, "%s=n;", path); break;
    case SCH_FLAT_BOOL: snprintf(one, sizeof one, "%s=b:%d;", path, v->b); break;
    case SCH_FLAT_INT: snprintf(one, sizeof one, "%s=i:%lld;", path, (long long)v->i); break;
    case SCH_FLAT_DOUBLE: snprintf(one, sizeof one, "%s=d:%g;", path, v->d); break;
    case SCH_FLAT_STRING: snprintf(one, sizeof one, "%s=s:%zu:%.*s;", path, v->len, (int)v->len, v->s); break;
    case SCH_FLAT_BYTES: cr_assert_fail("JSON has no bytes"); break;
    }
    strcat(r->text, one);
    r->calls++;
    return r->stop_after && r->calls == r->stop_after ? 7 : 0;
}

static char err[512];

static const char *flat(const char *json)
{
    static rec_t r;
    memset(&r, 0, sizeof r);
    int rc = sch_flatten_json((const uint8_t *)json, strlen(json), record, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", json, err);
    return r.text;
}

static const char *refused(const char *json, size_t len)
{
    rec_t r;
    memset(&r, 0, sizeof r);
    int rc = sch_flatten_json((const uint8_t *)json, len, record, &r, err, sizeof err);
    cr_assert_eq(rc, TB_EINVALID, "%.*s was accepted: %s", (int)len, json, r.text);
    cr_assert_neq(err[0], '\0');
    return err;
}

Test(flat, paths_in_document_order)
{
    cr_assert_str_eq(flat("{\"temp\":21,\"motor\":{\"rpm\":900,\"on\":true},\"a\":[1,2.5,\"x\"]}"),
                     "temp=i:21;motor/rpm=i:900;motor/on=b:1;a/0=i:1;a/1=d:2.5;a/2=s:1:x;");
    cr_assert_str_eq(flat("{\"z\":1,\"b\":2,\"m\":3}"), "z=i:1;b=i:2;m=i:3;", "document order, not sorted");
    cr_assert_str_eq(flat("{\"a\":[[1],{\"k\":null}]}"), "a/0/0=i:1;a/1/k=n;");
    cr_assert_str_eq(flat("{}"), "");
    cr_assert_str_eq(flat("{\"e\":{},\"f\":[],\"g\":0}"), "g=i:0;", "empty containers have no leaf");
}

Test(flat, types_as_written)
{
    cr_assert_str_eq(flat("{\"i\":-9007199254740993,\"d\":1e3,\"f\":false,\"n\":null}"),
                     "i=i:-9007199254740993;d=d:1000;f=b:0;n=n;");
    /* a string may hold NUL; its length is given */
    rec_t r = { 0 };
    const char j[] = "{\"s\":\"a\\u0000b\"}";
    cr_assert_eq(sch_flatten_json((const uint8_t *)j, strlen(j), record, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(r.text, "s=s:3:a", 7), 0, "%s", r.text);
}

Test(flat, refused_payloads_say_why)
{
    cr_assert(strstr(refused("not json", 8), "refused as JSON"));
    cr_assert(strstr(refused("[1,2]", 5), "not an object"));
    cr_assert(strstr(refused("42", 2), "not an object"));
    cr_assert(strstr(refused("{\"a/b\":1}", 9), "holds '/'"));
    cr_assert(strstr(refused("{\"x\":{\"\":1}}", 12), "empty key"));
    cr_assert(strstr(refused("{\"a\":1,\"a\":2}", 13), "duplicate"), "duplicate keys: %s", err);
    /* depth: SCH_FLAT_MAX_DEPTH containers is one too many, one less is fine */
    char deep[512] = "";
    for (int i = 0; i < SCH_FLAT_MAX_DEPTH + 1; i++)
        strcat(deep, i % 2 ? "[" : "{\"k\":");
    strcat(deep, "1");
    for (int i = SCH_FLAT_MAX_DEPTH; i >= 0; i--)
        strcat(deep, i % 2 ? "]" : "}");
    cr_assert(strstr(refused(deep, strlen(deep)), "deeper than 32"), "%s", err);
    char ok[512] = "";
    for (int i = 0; i < SCH_FLAT_MAX_DEPTH; i++)
        strcat(ok, i % 2 ? "[" : "{\"k\":");
    strcat(ok, "1");
    for (int i = SCH_FLAT_MAX_DEPTH - 1; i >= 0; i--)
        strcat(ok, i % 2 ? "]" : "}");
    cr_assert_neq(flat(ok)[0], '\0');
    /* path length */
    char *longkey = tb_malloc(SCH_FLAT_MAX_PATH + 32);
    int n = sprintf(longkey, "{\"");
    memset(longkey + n, 'k', SCH_FLAT_MAX_PATH + 1);
    strcpy(longkey + n + SCH_FLAT_MAX_PATH + 1, "\":1}");
    cr_assert(strstr(refused(longkey, strlen(longkey)), "at most 1024"), "%s", err);
    free(longkey);
}

Test(flat, a_nonzero_callback_stops_the_walk)
{
    rec_t r = { .stop_after = 2 };
    const char j[] = "{\"a\":1,\"b\":2,\"c\":3}";
    cr_assert_eq(sch_flatten_json((const uint8_t *)j, strlen(j), record, &r, err, sizeof err), 7);
    cr_assert_eq(r.calls, 2);
}
