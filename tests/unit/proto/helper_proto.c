/*
 * helper_proto.c: the fixtures of helper_proto.h, written out field by field
 * so that a reader can hold them against tests/data/proto/make_golden.py.
 */
#include "unit/proto/helper_proto.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPIC "/edge1/telemetry"

static uint8_t payload0[] = "{\"t\":21.5}";
static uint8_t payload1[] = { 0x00, 0xff, 0x10 };

void tp_batch_fixture_init(tp_batch_fixture_t *f)
{
    memset(f, 0, sizeof(*f));
    for (int i = 0; i < 2; i++) {
        danube__msg_id__init(&f->id[i]);
        f->id[i].topic_name = TOPIC;
        f->id[i].topic_offset = 40 + (uint64_t)i;
        danube__stream_message__init(&f->msg[i]);
        f->msg[i].msg_id = &f->id[i];
        f->msg[i].producer_name = "tributary-edge";
        f->msgp[i] = &f->msg[i];
    }
    /* Keys in sorted order: Python encodes maps with deterministic=True. */
    danube__stream_message__attributes_entry__init(&f->attr[0]);
    f->attr[0].key = "device_id";
    f->attr[0].value = "sensor-42";
    danube__stream_message__attributes_entry__init(&f->attr[1]);
    f->attr[1].key = "mqtt.content_type";
    f->attr[1].value = "application/json";
    f->attrp[0] = &f->attr[0];
    f->attrp[1] = &f->attr[1];

    f->msg[0].payload.data = payload0;
    f->msg[0].payload.len = sizeof(payload0) - 1;
    f->msg[0].publish_time = 1700000000123ULL;
    f->msg[0].n_attributes = 2;
    f->msg[0].attributes = f->attrp;
    f->msg[0].schema_id_opt_case = DANUBE__STREAM_MESSAGE__SCHEMA_ID_OPT_SCHEMA_ID;
    f->msg[0].schema_id = 0;
    f->msg[0].schema_version_opt_case = DANUBE__STREAM_MESSAGE__SCHEMA_VERSION_OPT_SCHEMA_VERSION;
    f->msg[0].schema_version = 3;

    f->msg[1].payload.data = payload1;
    f->msg[1].payload.len = sizeof(payload1);
    f->msg[1].publish_time = 1700000000456ULL;

    danube__edge__replicate_batch__init(&f->batch);
    f->batch.topic_name = TOPIC;
    f->batch.n_messages = 2;
    f->batch.messages = f->msgp;
    f->batch.batch_last_offset = 41;
}

void tp_register_fixture_init(tp_register_fixture_t *f)
{
    static char empty[] = ""; /* a real "" (not protobuf_c_empty_string): present */
    memset(f, 0, sizeof(*f));
    for (int i = 0; i < 3; i++) {
        danube__edge__edge_topic_declaration__init(&f->topic[i]);
        f->topicp[i] = &f->topic[i];
    }
    f->topic[0].topic_name = TOPIC;
    f->topic[0].schema_subject_opt_case =
        DANUBE__EDGE__EDGE_TOPIC_DECLARATION__SCHEMA_SUBJECT_OPT_SCHEMA_SUBJECT;
    f->topic[0].schema_subject = "telemetry-v1";
    f->topic[1].topic_name = "/edge1/raw";
    f->topic[2].topic_name = "/edge1/empty";
    f->topic[2].schema_subject_opt_case =
        DANUBE__EDGE__EDGE_TOPIC_DECLARATION__SCHEMA_SUBJECT_OPT_SCHEMA_SUBJECT;
    f->topic[2].schema_subject = empty;

    danube__edge__register_edge_request__init(&f->req);
    f->req.edge_name = "edge1";
    f->req.n_topics = 3;
    f->req.topics = f->topicp;
}

static char *golden_dir(void)
{
    const char *env = getenv("TRIB_TESTDATA");
    char *dir;
    if (env && *env) {
        size_t n = strlen(env) + sizeof("/proto");
        dir = malloc(n);
        cr_assert_not_null(dir);
        snprintf(dir, n, "%s/proto", env);
        return dir;
    }
    /* __FILE__ is tests/unit/proto/helper_proto.c: up two levels, then data/proto. */
    const char *file = __FILE__;
    const char *cut = strstr(file, "unit/proto/helper_proto.c");
    cr_assert_not_null(cut, "set TRIB_TESTDATA to tests/data");
    size_t n = (size_t)(cut - file) + sizeof("data/proto");
    dir = malloc(n);
    cr_assert_not_null(dir);
    snprintf(dir, n, "%.*sdata/proto", (int)(cut - file), file);
    return dir;
}

uint8_t *tp_read_golden(const char *name, size_t *len)
{
    char *dir = golden_dir();
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
    free(dir);
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "cannot open golden file %s", path);
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    cr_assert(!ferror(fp), "read error on %s", path);
    fclose(fp);
    *len = n;
    return buf;
}

uint8_t *tp_pack(const ProtobufCMessage *msg, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n ? n : 1);
    cr_assert_not_null(buf);
    *len = protobuf_c_message_pack(msg, buf);
    cr_assert_eq(*len, n);
    return buf;
}
