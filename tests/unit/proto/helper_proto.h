/*
 * helper_proto.h: fixtures shared by the proto/ unit tests.
 *
 * The fixtures mirror, field by field, the messages that
 * tests/data/proto/make_golden.py encodes with Python protobuf, so a test can
 * compare protobuf-c's bytes with the committed golden files. Change both
 * together. Fixtures live in caller-owned storage (no heap) so a test frees
 * nothing it did not unpack.
 */
#ifndef TP_HELPER_PROTO_H
#define TP_HELPER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "proto/EdgeReplicator.pb-c.h"

/* make_golden.py's "replicate_batch": two messages on /edge1/telemetry,
 * offsets 40 and 41; the first carries schema_id 0 (present) and
 * schema_version 3 and two attributes, the second no optional field. */
typedef struct tp_batch_fixture {
    Danube__Edge__ReplicateBatch batch;
    Danube__StreamMessage msg[2];
    Danube__StreamMessage *msgp[2];
    Danube__MsgID id[2];
    Danube__StreamMessage__AttributesEntry attr[2];
    Danube__StreamMessage__AttributesEntry *attrp[2];
} tp_batch_fixture_t;

void tp_batch_fixture_init(tp_batch_fixture_t *f /* OUT */);

/* make_golden.py's "register_edge_request": a subject, no subject, and an
 * empty subject that is present. */
typedef struct tp_register_fixture {
    Danube__Edge__RegisterEdgeRequest req;
    Danube__Edge__EdgeTopicDeclaration topic[3];
    Danube__Edge__EdgeTopicDeclaration *topicp[3];
} tp_register_fixture_t;

void tp_register_fixture_init(tp_register_fixture_t *f /* OUT */);

/* Reads tests/data/proto/<name>.bin into a malloc'd buffer (caller frees).
 * The directory is $TRIB_TESTDATA/proto (set by ctest), else found from this
 * source file's path. Aborts the test with a message if the file is missing. */
uint8_t *tp_read_golden(const char *name, size_t *len /* OUT */);

/* Packs any message into a malloc'd buffer (caller frees). */
uint8_t *tp_pack(const ProtobufCMessage *msg, size_t *len /* OUT */);

#endif
