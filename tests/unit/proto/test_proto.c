/*
 * test_proto.c: protobuf-c code generated from the proto/ .proto files keeps what the
 * wire contract needs: a ReplicateBatch survives pack/unpack, and presence
 * of Danube's `optional` fields (one-member oneofs here) survives with it,
 * including a present 0 or "" that proto3 would otherwise drop.
 * Byte-for-byte comparisons with Python protobuf are in test_proto_golden.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "unit/proto/helper_proto.h"

/* Packs the batch fixture and unpacks it again; caller frees with
 * danube__edge__replicate_batch__free_unpacked. */
static Danube__Edge__ReplicateBatch *batch_roundtrip(void)
{
    tp_batch_fixture_t f;
    tp_batch_fixture_init(&f);
    size_t len;
    uint8_t *buf = tp_pack(&f.batch.base, &len);
    Danube__Edge__ReplicateBatch *out = danube__edge__replicate_batch__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(out, "unpack of a freshly packed batch failed");
    cr_assert_eq(out->n_messages, 2);
    return out;
}

Test(proto, batch_roundtrip_keeps_topic_and_batch_last_offset)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    cr_expect_str_eq(b->topic_name, "/edge1/telemetry");
    cr_expect_eq(b->batch_last_offset, 41);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, batch_roundtrip_keeps_each_message_offset_in_msg_id)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    for (size_t i = 0; i < 2; i++) {
        cr_assert_not_null(b->messages[i]->msg_id);
        cr_expect_eq(b->messages[i]->msg_id->topic_offset, 40 + i);
        cr_expect_str_eq(b->messages[i]->msg_id->topic_name, "/edge1/telemetry");
    }
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, batch_roundtrip_keeps_binary_payload_bytes)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    const uint8_t want[] = { 0x00, 0xff, 0x10 };
    cr_assert_eq(b->messages[1]->payload.len, sizeof(want));
    cr_expect_eq(memcmp(b->messages[1]->payload.data, want, sizeof(want)), 0);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, batch_roundtrip_keeps_attributes)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    Danube__StreamMessage *m = b->messages[0];
    cr_assert_eq(m->n_attributes, 2);
    cr_expect_str_eq(m->attributes[0]->key, "device_id");
    cr_expect_str_eq(m->attributes[0]->value, "sensor-42");
    cr_expect_str_eq(m->attributes[1]->key, "mqtt.content_type");
    cr_expect_str_eq(m->attributes[1]->value, "application/json");
    cr_expect_eq(b->messages[1]->n_attributes, 0);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, schema_id_zero_set_arrives_present)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    cr_expect_eq(b->messages[0]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT_SCHEMA_ID);
    cr_expect_eq(b->messages[0]->schema_id, 0);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, schema_id_unset_arrives_absent)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    cr_expect_eq(b->messages[1]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT__NOT_SET);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, schema_version_presence_survives_roundtrip)
{
    Danube__Edge__ReplicateBatch *b = batch_roundtrip();
    cr_expect_eq(b->messages[0]->schema_version_opt_case,
                 DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT_SCHEMA_VERSION);
    cr_expect_eq(b->messages[0]->schema_version, 3);
    cr_expect_eq(b->messages[1]->schema_version_opt_case,
                 DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT__NOT_SET);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

Test(proto, empty_schema_subject_set_arrives_present)
{
    tp_register_fixture_t f;
    tp_register_fixture_init(&f);
    size_t len;
    uint8_t *buf = tp_pack(&f.req.base, &len);
    Danube__Edge__RegisterEdgeRequest *r = danube__edge__register_edge_request__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(r);
    cr_assert_eq(r->n_topics, 3);
    cr_expect_eq(r->topics[2]->schema_subject_opt_case,
                 DANUBE__EDGE__EDGE_TOPIC_DECLARATION__SCHEMA_SUBJECT_OPT_SCHEMA_SUBJECT);
    cr_expect_str_eq(r->topics[2]->schema_subject, "");
    cr_expect_eq(r->topics[1]->schema_subject_opt_case,
                 DANUBE__EDGE__EDGE_TOPIC_DECLARATION__SCHEMA_SUBJECT_OPT__NOT_SET);
    danube__edge__register_edge_request__free_unpacked(r, NULL);
}

/* Danube's MsgID skips field 4: topic_offset is field 5 (tag 0x28). */
Test(proto, msg_id_topic_offset_is_field_5_on_the_wire)
{
    Danube__MsgID id = DANUBE__MSG_ID__INIT;
    id.topic_offset = 1;
    size_t len;
    uint8_t *buf = tp_pack(&id.base, &len);
    cr_assert_eq(len, 2);
    cr_expect_eq(buf[0], 0x28);
    cr_expect_eq(buf[1], 0x01);
    free(buf);
}

Test(proto, message_without_msg_id_unpacks_with_null_msg_id)
{
    Danube__StreamMessage m = DANUBE__STREAM_MESSAGE__INIT;
    m.publish_time = 5;
    size_t len;
    uint8_t *buf = tp_pack(&m.base, &len);
    Danube__StreamMessage *out = danube__stream_message__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(out);
    cr_expect_null(out->msg_id);
    danube__stream_message__free_unpacked(out, NULL);
}

Test(proto, truncated_batch_is_refused_not_misread)
{
    tp_batch_fixture_t f;
    tp_batch_fixture_init(&f);
    size_t len;
    uint8_t *buf = tp_pack(&f.batch.base, &len);
    /* Cut inside the first message: its length prefix promises more bytes. */
    Danube__Edge__ReplicateBatch *b = danube__edge__replicate_batch__unpack(NULL, 40, buf);
    free(buf);
    cr_expect_null(b);
}
