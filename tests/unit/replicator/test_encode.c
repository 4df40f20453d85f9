/*
 * test_encode.c: what one StreamMessage carries, read back with protobuf-c
 * (the generated decoder is the independent judge of our hand-written
 * wire format): msg_id with the WAL offset, payload, publish time, the
 * fixed producer name, attributes, schema stamps, the replayed flag.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_rep.h"

/* Everything readable from offset 1, as one batch, decoded. */
static Danube__Edge__ReplicateBatch *build(rt_t *h, uint64_t now_wall, rep__open_t *keep)
{
    rep__src_t s;
    rt_src(h, &s, 1);
    rep__open_t o = { 0 };
    cr_assert_geq(rep__fill(&o, &h->enc, &s, now_wall), 0);
    cr_assert_gt(o.count, 0);
    if (keep)
        *keep = o;
    rep__batch_t b = { 0 };
    rep__open_finish(&o, &b);
    Danube__Edge__ReplicateBatch *d = rt_decode(&b);
    free(b.buf);
    rep__src_free(&s);
    return d;
}

Test(encode, batch_carries_topic_and_its_last_offset)
{
    rt_t h;
    rt_open(&h);
    for (int i = 0; i < 3; i++)
        rt_append(&h, &(rt_msg_t){ .payload = "x" });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    cr_assert_str_eq(d->topic_name, RT_TOPIC);
    cr_assert_eq(d->n_messages, 3);
    cr_assert_eq(d->batch_last_offset, 3);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, every_message_has_msg_id_with_the_wal_offset)
{
    rt_t h;
    rt_open(&h);
    for (int i = 0; i < 5; i++)
        rt_append(&h, &(rt_msg_t){ .payload = "x" });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    for (size_t i = 0; i < d->n_messages; i++) {
        cr_assert_not_null(d->messages[i]->msg_id);
        cr_assert_eq(d->messages[i]->msg_id->topic_offset, i + 1);
        cr_assert_str_eq(d->messages[i]->msg_id->topic_name, RT_TOPIC);
        cr_assert_eq(d->messages[i]->msg_id->producer_id, 0);
        cr_assert_str_eq(d->messages[i]->msg_id->broker_addr, "");
    }
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, payload_and_publish_time_are_the_records)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "{\"t\":21.5}", .publish_time_ms = 1700000000123 });
    Danube__Edge__ReplicateBatch *d = build(&h, 1700000000200, NULL);
    Danube__StreamMessage *m = d->messages[0];
    cr_assert_eq(m->payload.len, 10);
    cr_assert_eq(memcmp(m->payload.data, "{\"t\":21.5}", 10), 0);
    cr_assert_eq(m->publish_time, 1700000000123);
    cr_assert_eq(m->request_id, 0);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, empty_payload_decodes_as_empty)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "" });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    cr_assert_eq(d->messages[0]->payload.len, 0);
    cr_assert_eq(d->messages[0]->msg_id->topic_offset, 1);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, producer_name_is_the_fixed_edge_name)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x" });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    cr_assert_str_eq(d->messages[0]->producer_name, RT_PRODUCER);
    cr_assert_str_eq(d->messages[0]->subscription_name, "");
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, attributes_are_the_records)
{
    rt_t h;
    rt_open(&h);
    const char *attrs[] = { "device_id", "d-17", "mqtt.user.site", "north", "mqtt.content_type", "application/json",
                            NULL };
    rt_append(&h, &(rt_msg_t){ .payload = "x", .attrs = attrs });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    Danube__StreamMessage *m = d->messages[0];
    cr_assert_eq(m->n_attributes, 3);
    cr_assert_str_eq(rt_attr(m, "device_id"), "d-17");
    cr_assert_str_eq(rt_attr(m, "mqtt.user.site"), "north");
    cr_assert_str_eq(rt_attr(m, "mqtt.content_type"), "application/json");
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, attribute_that_is_not_utf8_is_left_out_and_counted)
{
    rt_t h;
    rt_open(&h);
    const char *attrs[] = { "good", "yes", "bad", "\xff\xfe", NULL };
    rt_append(&h, &(rt_msg_t){ .payload = "x", .attrs = attrs });
    rep__open_t o;
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), &o);
    cr_assert_eq(d->messages[0]->n_attributes, 1);
    cr_assert_str_eq(rt_attr(d->messages[0], "good"), "yes");
    cr_assert_eq(o.skipped_attrs, 1);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, schema_id_and_version_are_stamped_when_the_record_has_them)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x", .has_schema = true, .schema_id = 42, .schema_version = 3 });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    Danube__StreamMessage *m = d->messages[0];
    cr_assert_eq(m->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT_SCHEMA_ID);
    cr_assert_eq(m->schema_id, 42);
    cr_assert_eq(m->schema_version_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT_SCHEMA_VERSION);
    cr_assert_eq(m->schema_version, 3);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, schema_id_zero_is_still_present)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x", .has_schema = true, .schema_id = 0, .schema_version = 0 });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    cr_assert_eq(d->messages[0]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT_SCHEMA_ID);
    cr_assert_eq(d->messages[0]->schema_version_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT_SCHEMA_VERSION);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, no_schema_fields_without_a_schema)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x" });
    Danube__Edge__ReplicateBatch *d = build(&h, tb_wall_ms(), NULL);
    cr_assert_eq(d->messages[0]->schema_id_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT__NOT_SET);
    cr_assert_eq(d->messages[0]->schema_version_opt_case, DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT__NOT_SET);
    cr_assert_eq(d->messages[0]->routing_key_opt_case, DANUBE__STREAM_MESSAGE__ROUTING_KEY_OPT__NOT_SET);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, message_older_than_the_live_window_is_marked_replayed)
{
    rt_t h;
    rt_open(&h);
    const char *attrs[] = { "device_id", "d-1", NULL };
    rt_append(&h, &(rt_msg_t){ .payload = "x", .publish_time_ms = 1700000000000, .attrs = attrs });
    rep__open_t o;
    Danube__Edge__ReplicateBatch *d = build(&h, 1700000000000 + 2001, &o);
    cr_assert_str_eq(rt_attr(d->messages[0], REP__REPLAYED_KEY), "true");
    cr_assert_str_eq(rt_attr(d->messages[0], "device_id"), "d-1");
    cr_assert_eq(d->messages[0]->publish_time, 1700000000000, "a replayed message keeps its receive time");
    cr_assert_eq(o.replayed, 1);
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, message_within_the_live_window_is_not_marked)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x", .publish_time_ms = 1700000000000 });
    Danube__Edge__ReplicateBatch *d = build(&h, 1700000000000 + 2000, NULL);
    cr_assert_null(rt_attr(d->messages[0], REP__REPLAYED_KEY));
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, message_from_the_future_is_not_marked)
{
    rt_t h;
    rt_open(&h);
    rt_append(&h, &(rt_msg_t){ .payload = "x", .publish_time_ms = 1700000009000 });
    Danube__Edge__ReplicateBatch *d = build(&h, 1700000000000, NULL);
    cr_assert_null(rt_attr(d->messages[0], REP__REPLAYED_KEY));
    danube__edge__replicate_batch__free_unpacked(d, NULL);
    rt_close(&h);
}

Test(encode, size_function_matches_what_is_written)
{
    rt_t h;
    rt_open(&h);
    const char *attrs[] = { "a", "1", "long.attribute.name", "a value with some length to it", NULL };
    rt_append(&h, &(rt_msg_t){ .payload = "payload", .attrs = attrs, .has_schema = true, .schema_id = 1ull << 40,
                               .schema_version = 7 });
    rep__src_t s;
    rt_src(&h, &s, 1);
    wal_record_t rec;
    cr_assert_eq(wal_reader_next(s.rd, &rec), 0);
    rep__open_t o = { 0 };
    cr_assert_eq(rep__open_add(&o, &h.enc, &rec, rec.publish_time_ms + 5000), 0);
    size_t head = 2 + strlen(RT_TOPIC); /* field 1: tag, length, topic */
    size_t body = rep__msg_size(&h.enc, &rec, true);
    cr_assert_eq(o.len, head + 1 + (body < 128 ? 1 : 2) + body);
    rep__open_free(&o);
    rep__src_free(&s);
    rt_close(&h);
}
