/*
 * test_spb_metrics.c: one Sparkplug node's metrics and messages
 * (rep_spb_metrics.c): births with bdSeq and Node Control/Rebirth, seq from
 * 0 and its wrap, aliases (first sight, stable across rebirths, restored),
 * datatypes from a schema or the first value, fixed thereafter (a mismatch
 * is a dead letter), records all or nothing, one value per metric and
 * millisecond per message, deaths. Payloads are read back by protobuf-c
 * and Python protobuf (helper_spb.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "helper_spb.h"
#include "proto/sparkplug_b.pb-c.h"
#include "replicator/rep_spb.h"

static char err[512];

static int add(rep__spb_node_t *n, rep__spb_data_t *d, const char *prefix, const sch_validator_t *s, const char *json,
               uint64_t ts)
{
    return rep__spb_data_add(n, d, prefix, s, (const uint8_t *)json, strlen(json), ts, false, err, sizeof err);
}

/* The seq field of a payload (-1: none). */
static long seq_of(const rep__spb_buf_t *b)
{
    Spb__Payload *p = spb__payload__unpack(NULL, b->len, b->p);
    cr_assert_not_null(p);
    long s = p->has_seq ? (long)p->seq : -1;
    spb__payload__free_unpacked(p, NULL);
    return s;
}

Test(spb_metrics, nbirth_of_a_new_node)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_nbirth(n, 5, 1000, &b);
    spb_expect(b.p, b.len, "ts=1000 seq=0|bdSeq,-,1000,4,-,-,l:5|Node Control/Rebirth,-,1000,11,-,-,b:0");
    cr_assert_eq(rep__spb_seq_peek(n), 1);
    rep__spb_ndeath(5, 2000, &b);
    spb_expect(b.p, b.len, "ts=2000|bdSeq,-,2000,4,-,-,l:5");
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, new_metrics_need_a_birth_then_go_by_alias)
{
    rep__spb_node_t *n = rep__spb_node_new();
    uint32_t dev;
    cr_assert_eq(rep__spb_device(n, "pump1", &dev), 0);
    cr_assert_eq(dev, 1);
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    rep__spb_data_begin(n, &d, dev, 100);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"temp\":21,\"motor\":{\"on\":true,\"mode\":\"auto\"}}", 90),
                 REP_SPB_REBIRTH);
    cr_assert_eq(d.metrics, 0, "nothing of the record was added");
    cr_assert_null(rep__spb_data_end(n, &d), "an empty message is not sent and takes no seq");
    cr_assert_eq(rep__spb_metric_count(n), 3);

    rep__spb_nbirth(n, 0, 100, &b);
    cr_assert_eq(seq_of(&b), 0);
    rep__spb_dbirth(n, dev, 100, &b);
    /* never seen a value in this process: is_null with the inferred type */
    spb_expect(b.p, b.len,
               "ts=100 seq=1|telemetry/temp,1,100,10,-,1,-|telemetry/motor/on,2,100,11,-,1,-"
               "|telemetry/motor/mode,3,100,12,-,1,-");

    rep__spb_data_begin(n, &d, dev, 101);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"temp\":21,\"motor\":{\"on\":true,\"mode\":\"auto\"}}", 90), 0,
                 "%s", err);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"temp\":21.5}", 95), 0, "%s", err);
    const rep__spb_buf_t *msg = rep__spb_data_end(n, &d);
    cr_assert_not_null(msg);
    spb_expect(msg->p, msg->len,
               "ts=101 seq=2|-,1,90,-,-,-,d:21|-,2,90,-,-,-,b:1|-,3,90,-,-,-,s:6175746f|-,1,95,-,-,-,d:21.5");

    /* a rebirth carries the last values, with their own times and the same aliases */
    rep__spb_dbirth(n, dev, 200, &b);
    spb_expect(b.p, b.len,
               "ts=200 seq=3|telemetry/temp,1,95,10,-,-,d:21.5|telemetry/motor/on,2,90,11,-,-,b:1"
               "|telemetry/motor/mode,3,90,12,-,-,s:6175746f");
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, seq_wraps_after_255)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 1), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 3, 1, &b);
    long want = 1;
    for (int i = 0; i < 600; i++) {
        rep__spb_data_begin(n, &d, 0, 10 + (uint64_t)i);
        cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":2}", 10 + (uint64_t)i), 0, "%s", err);
        const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
        cr_assert_eq(seq_of(m), want, "message %d: seq %ld, not %ld", i, seq_of(m), want);
        want = (want + 1) % 256;
    }
    /* a rebirth starts again at 0 */
    rep__spb_nbirth(n, 3, 1, &b);
    cr_assert_eq(seq_of(&b), 0);
    cr_assert_eq(rep__spb_seq_peek(n), 1);
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, a_type_is_fixed_a_mismatch_is_a_dead_letter)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"a\":1,\"temp\":21}", 1), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 0, 1, &b);
    rep__spb_data_begin(n, &d, 0, 2);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"a\":2}", 2), 0);
    size_t len = d.buf.len;
    /* the first leaf fits, the second does not: nothing of the record is added */
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"a\":3,\"temp\":\"hot\"}", 3), TB_EINVALID);
    cr_assert_str_eq(err, "sparkplug: telemetry/temp is Double, got string");
    cr_assert_eq(d.buf.len, len);
    cr_assert_eq(d.metrics, 1);
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"temp\":true}", 4), TB_EINVALID);
    cr_assert(strstr(err, "is Double, got boolean"), "%s", err);
    /* not JSON at all, but starting as an object: a dead letter too */
    cr_assert_eq(add(n, &d, "telemetry", NULL, "{\"temp\":", 5), TB_EINVALID);
    cr_assert(strstr(err, "JSON"), "%s", err);
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, one_value_per_metric_and_millisecond_in_a_message)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 7), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 0, 1, &b);
    rep__spb_data_begin(n, &d, 0, 2);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 7), 0);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":2}", 7), REP_SPB_FULL);
    cr_assert_eq(d.metrics, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":2}", 8), 0, "another millisecond is fine");
    rep__spb_data_end(n, &d);
    rep__spb_data_begin(n, &d, 0, 3);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":3}", 8), 0, "a new message may hold it");
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, nulls_before_a_type_are_skipped_after_it_is_null)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1,\"w\":null}", 1), REP_SPB_REBIRTH);
    cr_assert_eq(rep__spb_metric_count(n), 1, "w has no type yet: not in the table");
    rep__spb_nbirth(n, 0, 1, &b);
    rep__spb_data_begin(n, &d, 0, 2);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":null,\"w\":null}", 2), 0, "%s", err);
    cr_assert_eq(d.nulls_skipped, 1);
    const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
    spb_expect(m->p, m->len, "ts=2 seq=1|-,1,2,-,-,1,-");
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, a_raw_payload_is_one_bytes_metric)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_buf_t b = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "raw", NULL, "42 not json", 1), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 1, 1, &b);
    spb_expect(b.p, b.len, "ts=1 seq=0|bdSeq,-,1,4,-,-,l:1|Node Control/Rebirth,-,1,11,-,-,b:0|raw,1,1,17,-,1,-");
    rep__spb_data_begin(n, &d, 0, 2);
    cr_assert_eq(add(n, &d, "raw", NULL, "42 not json", 1), 0, "%s", err);
    const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
    spb_expect(m->p, m->len, "ts=2 seq=1|-,1,1,-,-,-,x:3432206e6f74206a736f6e");
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, reserved_names_refused)
{
    rep__spb_node_t *n = rep__spb_node_new();
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(add(n, &d, "bdSeq", NULL, "raw", 1), TB_EINVALID);
    cr_assert(strstr(err, "reserves"), "%s", err);
    cr_assert_eq(add(n, &d, "Node Control", NULL, "{\"Rebirth\":true}", 1), TB_EINVALID);
    cr_assert_eq(rep__spb_restore(n, 0, "bdSeq", REP_SPB_INT64, 9), -EINVAL);
    /* a device may have a metric of that name: only the node's are reserved */
    uint32_t dev;
    rep__spb_device(n, "d", &dev);
    rep__spb_data_begin(n, &d, dev, 1);
    cr_assert_eq(add(n, &d, "bdSeq", NULL, "raw", 1), REP_SPB_REBIRTH);
    rep__spb_data_free(&d);
    rep__spb_node_free(n);
}

Test(spb_metrics, restored_aliases_kept_new_ones_above)
{
    rep__spb_node_t *n = rep__spb_node_new();
    uint32_t dev;
    rep__spb_device(n, "pump1", &dev);
    cr_assert_eq(rep__spb_restore(n, dev, "t/a", REP_SPB_INT32, 7), 0);
    cr_assert_eq(rep__spb_restore(n, dev, "t/b", REP_SPB_DOUBLE, 3), 0);
    cr_assert_eq(rep__spb_restore(n, dev, "t/b", REP_SPB_DOUBLE, 9), -EEXIST, "name taken");
    cr_assert_eq(rep__spb_restore(n, dev, "t/c", REP_SPB_DOUBLE, 7), -EEXIST, "alias taken");
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    rep__spb_data_begin(n, &d, dev, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"c\":1}", 1), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 0, 1, &b);
    rep__spb_dbirth(n, dev, 1, &b);
    spb_expect(b.p, b.len, "ts=1 seq=1|t/a,7,1,3,-,1,-|t/b,3,1,10,-,1,-|t/c,8,1,10,-,1,-");
    /* a restored Int32 keeps its type: a value out of its range is a dead letter */
    rep__spb_data_begin(n, &d, dev, 2);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"a\":3000000000}", 2), TB_EINVALID);
    cr_assert(strstr(err, "t/a is Int32, got integer out of its range"), "%s", err);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"a\":-5}", 2), 0, "%s", err);
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, nbirth_requires_every_dbirth_again_and_ddeath_too)
{
    rep__spb_node_t *n = rep__spb_node_new();
    uint32_t dev;
    rep__spb_device(n, "d", &dev);
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    rep__spb_data_begin(n, &d, dev, 1);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 1), REP_SPB_REBIRTH);
    rep__spb_nbirth(n, 0, 1, &b);
    rep__spb_dbirth(n, dev, 1, &b);
    rep__spb_data_begin(n, &d, dev, 2);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 2), 0);
    rep__spb_nbirth(n, 0, 3, &b); /* a host's rebirth request */
    rep__spb_data_begin(n, &d, dev, 4);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 4), REP_SPB_REBIRTH, "the device is not born in the new birth");
    rep__spb_dbirth(n, dev, 4, &b);
    cr_assert_eq(seq_of(&b), 1);
    rep__spb_data_begin(n, &d, dev, 5);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 5), 0);
    cr_assert_not_null(rep__spb_data_end(n, &d));
    rep__spb_ddeath(n, dev, 6, &b);
    spb_expect(b.p, b.len, "ts=6 seq=3");
    rep__spb_data_begin(n, &d, dev, 7);
    cr_assert_eq(add(n, &d, "t", NULL, "{\"v\":1}", 7), REP_SPB_REBIRTH, "after its DDEATH a device is born again");
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

static sch_validator_t *compile(sch_kind_t k, const char *text)
{
    sch_validator_t *v = NULL;
    cr_assert_eq(sch_compile(k, text, strlen(text), NULL, &v, err, sizeof err), 0, "%s", err);
    return v;
}

Test(spb_metrics, types_from_a_json_schema_before_any_value)
{
    sch_validator_t *s = compile(SCH_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{"
                                                  "\"count\":{\"type\":\"integer\"},\"temp\":{\"type\":\"number\"},"
                                                  "\"label\":{\"type\":\"string\"}}}");
    rep__spb_node_t *n = rep__spb_node_new();
    cr_assert_eq(rep__spb_declare(n, 0, "telemetry", s, err, sizeof err), 1, "%s", err);
    cr_assert_eq(rep__spb_declare(n, 0, "telemetry", s, err, sizeof err), 0, "the same schema again changes nothing");
    rep__spb_buf_t b = { 0 };
    rep__spb_nbirth(n, 2, 10, &b);
    spb_expect(b.p, b.len,
               "ts=10 seq=0|bdSeq,-,10,4,-,-,l:2|Node Control/Rebirth,-,10,11,-,-,b:0"
               "|telemetry/count,1,10,4,-,1,-|telemetry/temp,2,10,10,-,1,-|telemetry/label,3,10,12,-,1,-");
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, 0, 11);
    cr_assert_eq(add(n, &d, "telemetry", s, "{\"count\":-3,\"temp\":20}", 11), 0, "%s", err);
    const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
    spb_expect(m->p, m->len, "ts=11 seq=1|-,1,11,-,-,-,l:18446744073709551613|-,2,11,-,-,-,d:20");
    /* a schema that changes a type: the next birth must announce it */
    sch_validator_t *s2 = compile(SCH_JSON_SCHEMA, "{\"properties\":{\"count\":{\"type\":\"number\"}}}");
    cr_assert_eq(rep__spb_declare(n, 0, "telemetry", s2, err, sizeof err), 1);
    rep__spb_data_begin(n, &d, 0, 12);
    cr_assert_eq(add(n, &d, "telemetry", s2, "{\"count\":1.5}", 12), REP_SPB_REBIRTH);
    sch_validator_unref(s);
    sch_validator_unref(s2);
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, avro_records_with_their_declared_types)
{
    sch_validator_t *s = compile(SCH_AVRO, "{\"type\":\"record\",\"name\":\"T\",\"fields\":["
                                           "{\"name\":\"rpm\",\"type\":\"int\"},{\"name\":\"ratio\",\"type\":\"float\"},"
                                           "{\"name\":\"n\",\"type\":[\"null\",\"long\"]},"
                                           "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"}}]}");
    rep__spb_node_t *n = rep__spb_node_new();
    cr_assert_eq(rep__spb_declare(n, 0, "m", s, err, sizeof err), 1, "%s", err);
    /* rpm=-2 (zigzag 3), ratio=0.5f, n=null (branch 0), a=[5] */
    const uint8_t rec[] = { 0x03, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x02, 0x0a, 0x00 };
    rep__spb_data_t d = { 0 };
    rep__spb_buf_t b = { 0 };
    rep__spb_data_begin(n, &d, 0, 1);
    cr_assert_eq(rep__spb_data_add(n, &d, "m", s, rec, sizeof rec, 1, true, err, sizeof err), REP_SPB_REBIRTH,
                 "a/0 is new (arrays are not declared): %s", err);
    rep__spb_nbirth(n, 0, 1, &b);
    spb_expect(b.p, b.len,
               "ts=1 seq=0|bdSeq,-,1,4,-,-,l:0|Node Control/Rebirth,-,1,11,-,-,b:0"
               "|m/rpm,1,1,3,-,1,-|m/ratio,2,1,9,-,1,-|m/n,3,1,4,-,1,-|m/a/0,4,1,4,-,1,-");
    rep__spb_data_begin(n, &d, 0, 2);
    cr_assert_eq(rep__spb_data_add(n, &d, "m", s, rec, sizeof rec, 1, true, err, sizeof err), 0, "%s", err);
    const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
    spb_expect(m->p, m->len, "ts=2 seq=1|-,1,1,-,1,-,i:4294967294|-,2,1,-,1,-,f:0.5|-,3,1,-,1,1,-|-,4,1,-,1,-,l:5");
    /* bytes the schema refuses are a dead letter */
    rep__spb_data_begin(n, &d, 0, 3);
    cr_assert_eq(rep__spb_data_add(n, &d, "m", s, rec, sizeof rec - 1, 2, false, err, sizeof err), TB_EINVALID);
    sch_validator_unref(s);
    rep__spb_data_free(&d);
    rep__spb_buf_free(&b);
    rep__spb_node_free(n);
}

Test(spb_metrics, many_payloads_decoded_by_python_in_one_run)
{
    /* a mixed session, every payload read by both decoders */
    rep__spb_node_t *n = rep__spb_node_new();
    uint32_t dev;
    rep__spb_device(n, "d1", &dev);
    rep__spb_buf_t bufs[6] = { 0 };
    rep__spb_data_t d = { 0 };
    rep__spb_data_begin(n, &d, dev, 1);
    add(n, &d, "x", NULL, "{\"s\":\"\\u00e9\",\"f\":1e300,\"b\":false,\"neg\":-1.25}", 1);
    rep__spb_nbirth(n, 255, 1, &bufs[0]);
    rep__spb_dbirth(n, dev, 1, &bufs[1]);
    rep__spb_data_begin(n, &d, dev, 2);
    cr_assert_eq(add(n, &d, "x", NULL, "{\"s\":\"\\u00e9\",\"f\":1e300,\"b\":false,\"neg\":-1.25}", 2), 0, "%s", err);
    const rep__spb_buf_t *m = rep__spb_data_end(n, &d);
    bufs[2].p = malloc(m->len);
    memcpy(bufs[2].p, m->p, m->len);
    bufs[2].len = m->len;
    rep__spb_dbirth(n, dev, 3, &bufs[3]);
    rep__spb_ddeath(n, dev, 4, &bufs[4]);
    rep__spb_ndeath(255, 5, &bufs[5]);
    const uint8_t *p[6];
    size_t len[6];
    for (int i = 0; i < 6; i++) {
        p[i] = bufs[i].p;
        len[i] = bufs[i].len;
    }
    char *py[6];
    spb_dump_py(p, len, 6, py);
    for (int i = 0; i < 6; i++) {
        cr_assert_str_eq(py[i], spb_dump_c(p[i], len[i]), "payload %d: the decoders differ", i);
        free(py[i]);
        rep__spb_buf_free(&bufs[i]);
    }
    cr_assert_str_eq(spb_dump_c(m->p, m->len),
                     "ts=2 seq=2|-,1,2,-,-,-,s:c3a9|-,2,2,-,-,-,d:1.0000000000000001e+300|-,3,2,-,-,-,b:0"
                     "|-,4,2,-,-,-,d:-1.25");
    rep__spb_data_free(&d);
    rep__spb_node_free(n);
}
