/*
 * Every refusal of a PUBLISH maps, in one place (refuse.c), to one MQTT 5
 * reason code and one MQTT 3.1.1 behaviour; docs/MQTT.md shows users the
 * same table.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

Test(refuse, each_refusal_has_its_mqtt5_reason_code)
{
    static const struct { broker_refuse_t why; uint8_t code; } want[] = {
        { BROKER_REFUSE_TOPIC_INVALID, 0x90 },      { BROKER_REFUSE_NOT_AUTHORIZED, 0x87 },
        { BROKER_REFUSE_SCHEMA_UNAVAILABLE, 0x80 }, { BROKER_REFUSE_SCHEMA_INVALID, 0x99 },
        { BROKER_REFUSE_PAYLOAD_TOO_LARGE, 0x95 },  { BROKER_REFUSE_TOO_MANY_ATTRIBUTES, 0x83 },
        { BROKER_REFUSE_QUOTA, 0x97 },              { BROKER_REFUSE_LOG_UNAVAILABLE, 0x97 },
    };
    cr_assert_eq(TB_ARRAY_LEN(want), BROKER_REFUSE__COUNT, "a refusal without an expected code here");
    for (size_t i = 0; i < TB_ARRAY_LEN(want); i++) {
        const broker_refusal_t *r = broker__refusal(want[i].why);
        cr_assert_eq(r->reason5, want[i].code, "refusal %d", (int)want[i].why);
        cr_assert(r->why && *r->why);
    }
}

Test(refuse, mqtt311_is_closed_for_every_refusal_but_a_schema_failure)
{
    for (int k = 0; k < BROKER_REFUSE__COUNT; k++) {
        const broker_refusal_t *r = broker__refusal((broker_refuse_t)k);
        cr_assert_eq(r->close311, k != BROKER_REFUSE_SCHEMA_INVALID, "refusal %d", k);
        cr_assert_eq(r->disconnect, k == BROKER_REFUSE_PAYLOAD_TOO_LARGE, "refusal %d", k);
    }
}

/* MQTT 3.1.1 and 5 CONNECTs, client id "c1"; a QoS 1 PUBLISH to u/x (no mapping matches it) */
static const uint8_t CONNECT4[] = { 0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 2, 'c', '1' };
static const uint8_t CONNECT5[] = { 0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60, 0, 0, 2, 'c', '1' };
static const uint8_t PUB4[] = { 0x32, 9, 0, 3, 'u', '/', 'x', 0, 7, 'h', 'i' };
static const uint8_t PUB5[] = { 0x32, 10, 0, 3, 'u', '/', 'x', 0, 7, 0, 'h', 'i' };

/* the whole CONNACK is there (its remaining length is one byte here) */
static size_t connack_len(const fake_t *f)
{
    return f->out.len >= 2 && f->out.len >= 2u + (uint8_t)f->out.data[1] ? 2u + (uint8_t)f->out.data[1] : 0;
}
static bool connacked(void *arg)
{
    return connack_len(arg) > 0;
}
static bool got(void *arg)
{
    const fake_t *f = arg;
    return f->out.len > connack_len(f); /* more than the CONNACK */
}
static bool released(void *arg)
{
    return ((fake_t *)arg)->released;
}

Test(refuse, an_unmatched_topic_gets_0x90_in_mqtt5)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    fake_conn(&h, &f);
    fake_send(&f, CONNECT5, sizeof CONNECT5);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    size_t connack = connack_len(&f);
    fake_send(&f, PUB5, sizeof PUB5);
    cr_assert(hb_run_until(&h, got, &f, 3000), "no answer");
    const uint8_t *a = (const uint8_t *)f.out.data + connack;
    cr_assert_eq(a[0], 0x40, "a PUBACK");
    cr_assert_geq(a[1], 3);
    cr_assert_eq(a[3], 7, "for packet 7");
    cr_assert_eq(a[4], 0x90, "Topic Name invalid");
    cr_assert(!f.closed, "MQTT 5 can be told: the connection stays");
    hb_close(&h);
    fake_free(&f);
}

Test(refuse, an_unmatched_topic_closes_an_mqtt311_connection_unacknowledged)
{
    hb_t h;
    hb_open(&h);
    fake_t f;
    fake_conn(&h, &f);
    fake_send(&f, CONNECT4, sizeof CONNECT4);
    cr_assert(hb_run_until(&h, connacked, &f, 3000));
    fake_send(&f, PUB4, sizeof PUB4);
    cr_assert(hb_run_until(&h, released, &f, 3000), "3.1.1 cannot be told: closed");
    cr_assert_eq(f.out.len, 4, "nothing but the CONNACK: the refused message is not acknowledged");
    hb_close(&h);
    fake_free(&f);
}
