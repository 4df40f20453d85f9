/*
 * test_proto_golden.c: protobuf-c and Python protobuf agree on the bytes.
 *
 * The golden files in tests/data/proto were encoded by Python protobuf from
 * the same .proto files (tests/data/proto/make_golden.py, which also checks
 * that our oneof form encodes exactly like Danube's `optional` form). Here
 * protobuf-c must produce the same bytes from the same fixture (edge ->
 * cluster messages) and read every field back from Python's bytes
 * (cluster -> edge messages).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "unit/proto/helper_proto.h"

static void expect_same_bytes(const char *golden, const ProtobufCMessage *msg)
{
    size_t want_len, got_len;
    uint8_t *want = tp_read_golden(golden, &want_len);
    uint8_t *got = tp_pack(msg, &got_len);
    cr_expect_eq(got_len, want_len, "%s: %zu bytes from protobuf-c, %zu from Python",
                 golden, got_len, want_len);
    if (got_len == want_len)
        cr_expect_eq(memcmp(got, want, want_len), 0, "%s: bytes differ", golden);
    free(want);
    free(got);
}

Test(proto_golden, replicate_batch_encodes_like_python)
{
    tp_batch_fixture_t f;
    tp_batch_fixture_init(&f);
    expect_same_bytes("replicate_batch", &f.batch.base);
}

Test(proto_golden, register_edge_request_encodes_like_python)
{
    tp_register_fixture_t f;
    tp_register_fixture_init(&f);
    expect_same_bytes("register_edge_request", &f.req.base);
}

Test(proto_golden, replicate_batch_from_python_keeps_schema_id_presence)
{
    size_t len;
    uint8_t *buf = tp_read_golden("replicate_batch", &len);
    Danube__Edge__ReplicateBatch *b = danube__edge__replicate_batch__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(b);
    cr_assert_eq(b->n_messages, 2);
    cr_expect_eq(b->messages[0]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT_SCHEMA_ID);
    cr_expect_eq(b->messages[0]->schema_id, 0);
    cr_expect_eq(b->messages[1]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT__NOT_SET);
    danube__edge__replicate_batch__free_unpacked(b, NULL);
}

static Danube__Edge__EdgeHeartbeatResponse *heartbeat_from_python(void)
{
    size_t len;
    uint8_t *buf = tp_read_golden("heartbeat_response", &len);
    Danube__Edge__EdgeHeartbeatResponse *h = danube__edge__edge_heartbeat_response__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(h);
    cr_assert_eq(h->n_changes, 3);
    return h;
}

Test(proto_golden, heartbeat_response_from_python_lists_each_change_type)
{
    Danube__Edge__EdgeHeartbeatResponse *h = heartbeat_from_python();
    cr_expect(h->changed);
    cr_expect_eq(h->config_version, 5);
    cr_expect_eq(h->changes[0]->change_type, DANUBE__EDGE__EDGE_CHANGE_TYPE__SCHEMA_UPDATED);
    cr_expect_str_eq(h->changes[0]->topic_name, "/edge1/telemetry");
    cr_expect_eq(h->changes[1]->change_type, DANUBE__EDGE__EDGE_CHANGE_TYPE__SCHEMA_REMOVED);
    cr_expect_str_eq(h->changes[1]->detail, "subject deleted");
    cr_expect_eq(h->changes[2]->change_type, DANUBE__EDGE__EDGE_CHANGE_TYPE__TOPIC_REMOVED);
    danube__edge__edge_heartbeat_response__free_unpacked(h, NULL);
}

Test(proto_golden, heartbeat_response_from_python_carries_resolved_schema)
{
    Danube__Edge__EdgeHeartbeatResponse *h = heartbeat_from_python();
    const Danube__Edge__ResolvedSchema *s = h->changes[0]->schema;
    cr_assert_not_null(s);
    cr_expect_str_eq(s->subject, "telemetry-v1");
    cr_expect_eq(s->schema_id, 7);
    cr_expect_eq(s->schema_version, 2);
    cr_expect_str_eq(s->schema_type, "json_schema");
    cr_expect_str_eq(s->fingerprint, "sha256:ab");
    cr_expect_str_eq(s->compatibility_mode, "backward");
    const char *def = "{\"JsonSchema\":{\"raw_schema\":\"{\\\"type\\\":\\\"object\\\"}\","
                      "\"fingerprint\":\"sha256:ab\"}}";
    cr_assert_eq(s->schema_definition.len, strlen(def));
    cr_expect_eq(memcmp(s->schema_definition.data, def, strlen(def)), 0);
    cr_expect_null(h->changes[1]->schema, "SCHEMA_REMOVED carries no schema");
    danube__edge__edge_heartbeat_response__free_unpacked(h, NULL);
}

Test(proto_golden, topic_lookup_response_from_python_reads_connect_url)
{
    size_t len;
    uint8_t *buf = tp_read_golden("topic_lookup_response", &len);
    Danube__TopicLookupResponse *r = danube__topic_lookup_response__unpack(NULL, len, buf);
    free(buf);
    cr_assert_not_null(r);
    cr_expect_eq(r->request_id, 9);
    cr_expect_eq(r->response_type, DANUBE__TOPIC_LOOKUP_RESPONSE__LOOKUP_TYPE__Connect);
    cr_expect_str_eq(r->connect_url, "http://127.0.0.1:6650");
    cr_expect_str_eq(r->broker_url, "http://127.0.0.1:6650");
    cr_expect(!r->proxy);
    danube__topic_lookup_response__free_unpacked(r, NULL);
}
