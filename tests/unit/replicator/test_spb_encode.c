/*
 * test_spb_encode.c: the Sparkplug B wire writer (rep_spb_encode.c), read
 * back by protobuf-c and by Python protobuf (helper_spb.h): every datatype's
 * value field, null and historical metrics, seq last; byte-for-byte
 * equality with the independently encoded DDATA in tests/data/proto; and
 * the NCMD decoder on the known-good rebirth command and on bad bytes.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "helper_spb.h"
#include "replicator/rep_spb.h"
#include "tests/unit/proto/helper_proto.h"

static rep__spb_wire_t named(const char *name, uint32_t dt, uint64_t ts)
{
    return (rep__spb_wire_t){ .name = name, .name_len = strlen(name), .timestamp = ts, .datatype = dt,
                              .with_datatype = true };
}

Test(spb_encode, every_datatype_in_its_value_field)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, 1700000000123ull);
    rep__spb_wire_t m;
    m = named("i8", REP_SPB_INT8, 1); m.v.i = -7; cr_assert_eq(rep__spb_put_metric(&b, &m), 0);
    m = named("i16", REP_SPB_INT16, 2); m.v.i = -300; rep__spb_put_metric(&b, &m);
    m = named("i32", REP_SPB_INT32, 3); m.v.i = INT32_MIN; rep__spb_put_metric(&b, &m);
    m = named("i64", REP_SPB_INT64, 4); m.v.i = -2; rep__spb_put_metric(&b, &m);
    m = named("u8", REP_SPB_UINT8, 5); m.v.i = 255; rep__spb_put_metric(&b, &m);
    m = named("u32", REP_SPB_UINT32, 6); m.v.i = UINT32_MAX; rep__spb_put_metric(&b, &m);
    m = named("u64", REP_SPB_UINT64, 7); m.v.i = (int64_t)UINT64_MAX; rep__spb_put_metric(&b, &m);
    m = named("f", REP_SPB_FLOAT, 8); m.v.f = 0.1f; rep__spb_put_metric(&b, &m);
    m = named("d", REP_SPB_DOUBLE, 9); m.v.d = 21.5; rep__spb_put_metric(&b, &m);
    m = named("b", REP_SPB_BOOLEAN, 10); m.v.b = true; rep__spb_put_metric(&b, &m);
    m = named("s", REP_SPB_STRING, 11); m.v.s.p = (const uint8_t *)"h\xc3\xa9"; m.v.s.n = 3; rep__spb_put_metric(&b, &m);
    m = named("dt", REP_SPB_DATETIME, 12); m.v.i = 1700000000000ll; rep__spb_put_metric(&b, &m);
    m = named("t", REP_SPB_TEXT, 13); m.v.s.p = (const uint8_t *)""; m.v.s.n = 0; rep__spb_put_metric(&b, &m);
    m = named("x", REP_SPB_BYTES, 14); m.v.s.p = (const uint8_t *)"\0\xff"; m.v.s.n = 2; rep__spb_put_metric(&b, &m);
    rep__spb_put_seq(&b, 7);
    spb_expect(b.p, b.len,
               "ts=1700000000123 seq=7"
               "|i8,-,1,1,-,-,i:4294967289|i16,-,2,2,-,-,i:4294966996|i32,-,3,3,-,-,i:2147483648"
               "|i64,-,4,4,-,-,l:18446744073709551614|u8,-,5,5,-,-,i:255|u32,-,6,7,-,-,i:4294967295"
               "|u64,-,7,8,-,-,l:18446744073709551615|f,-,8,9,-,-,f:0.100000001|d,-,9,10,-,-,d:21.5"
               "|b,-,10,11,-,-,b:1|s,-,11,12,-,-,s:68c3a9|dt,-,12,13,-,-,l:1700000000000|t,-,13,14,-,-,s:"
               "|x,-,14,17,-,-,x:00ff");
    rep__spb_buf_free(&b);
}

Test(spb_encode, by_alias_null_and_historical)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, UINT64_MAX);
    rep__spb_wire_t m = { .has_alias = true, .alias = 300, .timestamp = 5, .datatype = REP_SPB_DOUBLE,
                          .is_historical = true, .v.d = -0.5 };
    rep__spb_put_metric(&b, &m);
    m = (rep__spb_wire_t){ .has_alias = true, .alias = 1, .timestamp = 6, .datatype = REP_SPB_INT64, .is_null = true };
    rep__spb_put_metric(&b, &m);
    spb_expect(b.p, b.len, "ts=18446744073709551615|-,300,5,-,1,-,d:-0.5|-,1,6,-,-,1,-");
    rep__spb_buf_free(&b);
}

Test(spb_encode, unencodable_datatype_refused_nothing_written)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, 1);
    size_t before = b.len;
    rep__spb_wire_t m = named("ds", 16 /* DataSet */, 1);
    cr_assert_eq(rep__spb_put_metric(&b, &m), TB_EINVALID);
    m = named("tpl", 19 /* Template */, 1);
    cr_assert_eq(rep__spb_put_metric(&b, &m), TB_EINVALID);
    m = named("arr", 24 /* Int32Array */, 1);
    cr_assert_eq(rep__spb_put_metric(&b, &m), TB_EINVALID);
    cr_assert_eq(b.len, before);
    rep__spb_buf_free(&b);
}

Test(spb_encode, same_bytes_as_the_independent_ddata)
{
    /* tests/data/proto/spb_ddata.bin: the spec's field numbers by hand and Python protobuf agreed on these */
    size_t glen;
    uint8_t *golden = tp_read_golden("spb_ddata", &glen);
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, 1638223074000ull);
    rep__spb_wire_t m[] = {
        { .has_alias = true, .alias = 3, .timestamp = 1638223073990ull, .datatype = REP_SPB_DOUBLE, .v.d = 21.5 },
        { .has_alias = true, .alias = 4, .timestamp = 1638223000000ull, .datatype = REP_SPB_INT64,
          .is_historical = true, .v.i = -2 },
        { .has_alias = true, .alias = 5, .timestamp = 1638223073991ull, .datatype = REP_SPB_FLOAT, .is_null = true },
        { .has_alias = true, .alias = 6, .timestamp = 1638223073992ull, .datatype = REP_SPB_STRING,
          .v.s = { (const uint8_t *)"ok \xc3\xa9", 5 } },
        { .has_alias = true, .alias = 1, .timestamp = 1638223073993ull, .datatype = REP_SPB_INT32, .v.i = -7 },
        { .has_alias = true, .alias = 7, .timestamp = 1638223073994ull, .datatype = REP_SPB_BYTES,
          .v.s = { (const uint8_t *)"\x00\xff\x10", 3 } },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        cr_assert_eq(rep__spb_put_metric(&b, &m[i]), 0);
    rep__spb_put_seq(&b, 255);
    cr_assert_eq(b.len, glen, "%zu bytes, the golden has %zu", b.len, glen);
    cr_assert_eq(memcmp(b.p, golden, glen), 0, "bytes differ from spb_ddata.bin");
    free(golden);
    rep__spb_buf_free(&b);
}

Test(spb_encode, buffer_grows_and_reset_keeps_memory)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, 1);
    char big[5000];
    memset(big, 'a', sizeof big);
    rep__spb_wire_t m = named("big", REP_SPB_STRING, 1);
    m.v.s.p = (const uint8_t *)big;
    m.v.s.n = sizeof big;
    cr_assert_eq(rep__spb_put_metric(&b, &m), 0);
    size_t cap = b.cap;
    cr_assert_gt(b.len, sizeof big);
    const char *dump = spb_dump_c(b.p, b.len);
    cr_assert(strstr(dump, "|big,-,1,12,-,-,s:6161"), "%.80s", dump);
    rep__spb_begin(&b, 2);
    cr_assert_eq(b.cap, cap);
    cr_assert_str_eq(spb_dump_c(b.p, b.len), "ts=2");
    rep__spb_buf_free(&b);
}

/* ---- NCMD ---- */

Test(spb_cmd, rebirth_from_the_known_good_ncmd)
{
    size_t len;
    uint8_t *p = tp_read_golden("spb_ncmd_rebirth", &len);
    rep__spb_cmd_t c;
    char err[256];
    cr_assert_eq(rep__spb_cmd_parse(p, len, &c, err, sizeof err), 0, "%s", err);
    cr_assert(c.rebirth);
    cr_assert_eq(c.ignored, 0);
    free(p);

    /* an NBIRTH read as a command: Rebirth is false there, the rest ignored */
    p = tp_read_golden("spb_nbirth", &len);
    cr_assert_eq(rep__spb_cmd_parse(p, len, &c, err, sizeof err), 0, "%s", err);
    cr_assert_not(c.rebirth);
    cr_assert_eq(c.ignored, 4);
    free(p);
}

Test(spb_cmd, rebirth_only_as_boolean_true)
{
    rep__spb_buf_t b = { 0 };
    rep__spb_begin(&b, 1);
    rep__spb_wire_t m = named(REP_SPB_REBIRTH_NAME, REP_SPB_STRING, 1);
    m.v.s.p = (const uint8_t *)"true";
    m.v.s.n = 4;
    rep__spb_put_metric(&b, &m);
    rep__spb_cmd_t c;
    cr_assert_eq(rep__spb_cmd_parse(b.p, b.len, &c, NULL, 0), 0);
    cr_assert_not(c.rebirth, "a String \"true\" is not a rebirth request");
    cr_assert_eq(c.ignored, 1);
    /* by alias only: our NBIRTH gives the Rebirth metric no alias, so it is not one */
    rep__spb_begin(&b, 1);
    m = (rep__spb_wire_t){ .has_alias = true, .alias = 1, .timestamp = 1, .datatype = REP_SPB_BOOLEAN, .v.b = true };
    rep__spb_put_metric(&b, &m);
    cr_assert_eq(rep__spb_cmd_parse(b.p, b.len, &c, NULL, 0), 0);
    cr_assert_not(c.rebirth);
    rep__spb_buf_free(&b);
}

Test(spb_cmd, bad_bytes_refused_with_a_reason)
{
    rep__spb_cmd_t c;
    char err[256];
    const uint8_t junk[] = { 0x12, 0x7f, 0x01 }; /* metrics: length past the end */
    cr_assert_eq(rep__spb_cmd_parse(junk, sizeof junk, &c, err, sizeof err), TB_EMALFORMED);
    cr_assert(strstr(err, "not a Sparkplug B payload"), "%s", err);
    uint8_t *big = calloc(1, REP_SPB_CMD_MAX + 1);
    cr_assert_eq(rep__spb_cmd_parse(big, REP_SPB_CMD_MAX + 1, &c, err, sizeof err), TB_EMALFORMED);
    cr_assert(strstr(err, "more than"), "%s", err);
    free(big);
    /* empty: a valid, empty payload */
    cr_assert_eq(rep__spb_cmd_parse((const uint8_t *)"", 0, &c, err, sizeof err), 0);
    cr_assert_not(c.rebirth);
}
