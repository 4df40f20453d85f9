#!/usr/bin/python3
"""test_mock_cluster.py: the mock Danube cluster does what the real one does.

Tributary's replicator and gateway tests will trust the mock as the cluster,
so every rule of DANUBE-PROTOCOL.md ("How the real cluster behaves") it
emulates is checked here from the outside: a gRPC client built on the same
generated modules (tlib.edge_client) talks to a mock started through the
build tree's launcher (tlib.mock), and the control port and the JSON-lines
store are read back. Waits are bounded by deadlines, never fixed sleeps.

Classes share one mock where tests cannot disturb each other (each test uses
its own edge and topic names); fault tests get a mock of their own.
Run by ctest (integration.mock_cluster) with /usr/bin/python3.
"""
import base64
import hashlib
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from tlib.edge_client import EdgeClient, edge_pb, api_pb, make_batch  # noqa: E402
from tlib.mock import ControlError, MockCluster  # noqa: E402

SCHEMA_RAW = '{"type":"object","properties":{"t":{"type":"number"}}}'
AVRO_RAW = '{"type":"record","name":"R","fields":[{"name":"t","type":"double"}]}'
SCHEMAS = {
    "telemetry-v1": {"type": "json_schema", "raw": SCHEMA_RAW},
    "avro-subject": {"type": "avro", "raw": AVRO_RAW},
    "bytes-subject": {"type": "bytes"},
    "string-subject": {"type": "string"},
    "number-subject": {"type": "number"},
}
WAIT = 10  # seconds: the bound of every wait in this file


def sha256(text):
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class SharedMock(unittest.TestCase):
    """One mock for the whole class; each test names its own edge/topics."""
    mock_kwargs = {}

    @classmethod
    def setUpClass(cls):
        cls.mc = MockCluster(**cls.mock_kwargs).start()
        cls.client = EdgeClient(cls.mc.grpc_target, token=cls.mock_kwargs.get("token"))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rc = cls.mc.stop()
        cls.mc.cleanup()
        if rc != 0:
            raise AssertionError(f"mock cluster exited with {rc}")

    def edge(self):
        """An edge name unique to this test."""
        return "e" + hashlib.sha1(self.id().encode()).hexdigest()[:10]


class Auth(SharedMock):
    mock_kwargs = {"token": "s3cret"}

    def test_call_without_token_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.register(self.edge(), [], metadata=())
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_call_with_wrong_token_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.heartbeat(self.edge(), 1, metadata=(("authorization", "Bearer nope"),))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_stream_without_token_is_unauthenticated(self):
        s = self.client.open_stream(metadata=())
        s.send(make_batch("/x/t", [0]))
        self.assertEqual(s.wait_end(WAIT), grpc.StatusCode.UNAUTHENTICATED)

    def test_lookup_without_token_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.lookup("/x/t", metadata=())
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_call_with_bearer_token_is_served(self):
        resp = self.client.register(self.edge(), [])
        self.assertTrue(resp.success)


class NoAuth(SharedMock):
    def test_without_token_option_anyone_may_call(self):
        resp = self.client.register(self.edge(), [], metadata=())
        self.assertTrue(resp.success)


class Registration(SharedMock):
    mock_kwargs = {"schemas": SCHEMAS}

    def register_one(self, topic_suffix="t", subject=None, edge=None):
        edge = edge or self.edge()
        resp = self.client.register(edge, [(f"/{edge}/{topic_suffix}", subject)])
        self.assertEqual(len(resp.topics), 1)
        return resp, resp.topics[0]

    def test_success_is_true(self):
        resp, _ = self.register_one()
        self.assertTrue(resp.success)

    def test_topic_outside_edge_namespace_gets_error(self):
        resp = self.client.register(self.edge(), [("/other/t", None)])
        self.assertIn("outside", resp.topics[0].error)
        self.assertFalse(resp.topics[0].topic_created)

    def test_topic_with_bad_characters_gets_error(self):
        edge = self.edge()
        resp = self.client.register(edge, [(f"/{edge}/a.b", None)])
        self.assertNotEqual(resp.topics[0].error, "")

    def test_new_topic_is_created(self):
        _, res = self.register_one()
        self.assertTrue(res.topic_created)
        self.assertEqual(res.error, "")

    def test_existing_topic_is_not_created_again(self):
        edge = self.edge()
        self.register_one(edge=edge)
        _, res = self.register_one(edge=edge)
        self.assertFalse(res.topic_created)

    def test_topic_without_subject_is_resolved_without_schema(self):
        _, res = self.register_one()
        self.assertTrue(res.schema_resolved)
        self.assertFalse(res.HasField("schema"))

    def test_known_subject_resolves_with_latest_schema(self):
        _, res = self.register_one(subject="telemetry-v1")
        self.assertTrue(res.schema_resolved)
        s = res.schema
        self.assertEqual((s.subject, s.schema_version, s.schema_type, s.fingerprint),
                         ("telemetry-v1", 1, "json_schema", sha256(SCHEMA_RAW)))
        self.assertGreater(s.schema_id, 0)

    def test_json_schema_definition_is_danube_envelope(self):
        _, res = self.register_one(subject="telemetry-v1")
        env = json.loads(res.schema.schema_definition)
        self.assertEqual(env, {"JsonSchema": {"raw_schema": SCHEMA_RAW,
                                              "fingerprint": sha256(SCHEMA_RAW)}})

    def test_avro_definition_is_danube_envelope(self):
        _, res = self.register_one(subject="avro-subject")
        env = json.loads(res.schema.schema_definition)
        self.assertEqual(env, {"Avro": {"raw_schema": AVRO_RAW, "fingerprint": sha256(AVRO_RAW)}})

    def test_bytes_string_number_definitions_are_bare_strings(self):
        for subject, want in (("bytes-subject", "Bytes"), ("string-subject", "String"),
                              ("number-subject", "Number")):
            with self.subTest(subject=subject):
                _, res = self.register_one(topic_suffix=want, subject=subject)
                self.assertEqual(json.loads(res.schema.schema_definition), want)
                self.assertEqual(res.schema.schema_type, want.lower())

    def test_unknown_subject_is_unresolved_without_error(self):
        _, res = self.register_one(subject="no-such-subject")
        self.assertFalse(res.schema_resolved)
        self.assertEqual(res.error, "")
        self.assertFalse(res.HasField("schema"))

    def test_first_registration_has_config_version_1(self):
        resp, _ = self.register_one()
        self.assertEqual(resp.config_version, 1)

    def test_each_reregistration_adds_one_to_config_version(self):
        edge = self.edge()
        versions = [self.register_one(edge=edge)[0].config_version for _ in range(3)]
        self.assertEqual(versions, [1, 2, 3])

    def test_registrations_endpoint_reports_version_and_count(self):
        edge = self.edge()
        self.register_one(edge=edge)
        self.register_one(edge=edge)
        got = self.mc.control.registrations()["edges"][edge]
        self.assertEqual((got["config_version"], got["registrations"]), (2, 2))


class Heartbeat(SharedMock):
    """Each test changes subjects and topics of its own."""

    def register(self, topics):
        edge = self.edge()
        resp = self.client.register(edge, [(f"/{edge}/{t}", s) for t, s in topics])
        return edge, resp.config_version

    def subject(self, raw="{}"):
        name = "subj-" + self.edge()
        self.mc.control.put_schema(name, "json_schema", raw)
        return name

    def test_unknown_edge_gets_not_found(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.heartbeat("never-registered", 1)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_same_version_reports_unchanged(self):
        edge, v = self.register([("t", self.subject())])
        resp = self.client.heartbeat(edge, v)
        self.assertFalse(resp.changed)
        self.assertEqual(len(resp.changes), 0)

    def test_changed_schema_reports_schema_updated_with_new_schema(self):
        subj = self.subject('{"type":"object"}')
        edge, v = self.register([("t", subj)])
        self.mc.control.put_schema(subj, "json_schema", '{"type":"array"}')
        resp = self.client.heartbeat(edge, v)
        self.assertTrue(resp.changed)
        [ch] = resp.changes
        self.assertEqual((ch.topic_name, ch.change_type), (f"/{edge}/t", edge_pb.SCHEMA_UPDATED))
        self.assertEqual((ch.schema.schema_version, ch.schema.fingerprint),
                         (2, sha256('{"type":"array"}')))

    def test_deleted_subject_reports_schema_removed(self):
        subj = self.subject()
        edge, v = self.register([("t", subj)])
        self.mc.control.delete_schema(subj)
        [ch] = self.client.heartbeat(edge, v).changes
        self.assertEqual(ch.change_type, edge_pb.SCHEMA_REMOVED)
        self.assertFalse(ch.HasField("schema"))

    def test_deleted_topic_reports_topic_removed(self):
        edge, v = self.register([("t", None)])
        self.mc.control.delete_topic(f"/{edge}/t")
        [ch] = self.client.heartbeat(edge, v).changes
        self.assertEqual((ch.topic_name, ch.change_type), (f"/{edge}/t", edge_pb.TOPIC_REMOVED))

    def test_subject_added_after_registration_reports_schema_updated(self):
        edge, v = self.register([("t", "late-" + self.edge())])
        self.mc.control.put_schema("late-" + edge, "string")
        [ch] = self.client.heartbeat(edge, v).changes
        self.assertEqual(ch.change_type, edge_pb.SCHEMA_UPDATED)
        self.assertEqual(ch.schema.schema_type, "string")

    def test_response_carries_current_config_version(self):
        subj = self.subject()
        edge, v = self.register([("t", subj)])
        self.mc.control.put_schema(subj, "json_schema", '{"x":1}')
        self.assertEqual(self.client.heartbeat(edge, v).config_version, v + 1)

    def test_change_is_reported_once_then_unchanged_at_new_version(self):
        subj = self.subject()
        edge, v = self.register([("t", subj)])
        self.mc.control.put_schema(subj, "json_schema", '{"x":2}')
        first = self.client.heartbeat(edge, v)
        again = self.client.heartbeat(edge, first.config_version)
        self.assertFalse(again.changed)

    def test_unrelated_subject_change_leaves_edge_unchanged(self):
        edge, v = self.register([("t", self.subject())])
        self.mc.control.put_schema("unrelated-" + edge, "bytes")
        self.assertFalse(self.client.heartbeat(edge, v).changed)

    def test_reset_edge_makes_heartbeat_not_found(self):
        edge, v = self.register([("t", None)])
        self.mc.control.reset_edge(edge)
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.heartbeat(edge, v)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)


class Replicate(SharedMock):
    def topic(self, suffix="t"):
        return f"/{self.edge()}/{suffix}"

    def test_ack_echoes_batch_last_offset(self):
        t = self.topic()
        acks, code = self.client.replicate([make_batch(t, [0, 1, 2])])
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual([(a.topic_name, a.acked_offset) for a in acks], [(t, 2)])

    def test_one_ack_per_batch_in_order(self):
        t = self.topic()
        acks, _ = self.client.replicate([make_batch(t, range(i * 10, i * 10 + 10)) for i in range(5)])
        self.assertEqual([a.acked_offset for a in acks], [9, 19, 29, 39, 49])

    def test_same_batch_twice_is_stored_once(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [0, 1]), make_batch(t, [0, 1])])
        self.assertEqual([r["offset"] for r in self.mc.store_records(t)], [0, 1])

    def test_same_batch_twice_is_acked_twice(self):
        t = self.topic()
        acks, _ = self.client.replicate([make_batch(t, [0, 1]), make_batch(t, [0, 1])])
        self.assertEqual([a.acked_offset for a in acks], [1, 1])

    def test_resend_on_a_new_stream_is_not_stored_again(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [5, 6])])
        acks, _ = self.client.replicate([make_batch(t, [5, 6])])
        self.assertEqual([a.acked_offset for a in acks], [6])
        self.assertEqual(self.mc.topic_stats(t)["duplicate_batches"], 1)
        self.assertEqual(len(self.mc.store_records(t)), 2)

    def test_batch_crossing_the_marker_is_stored_whole(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [0, 1, 2]), make_batch(t, [2, 3, 4])])
        self.assertEqual([r["offset"] for r in self.mc.store_records(t)], [0, 1, 2, 2, 3, 4])

    def test_empty_batch_gets_no_ack(self):
        t = self.topic()
        s = self.client.open_stream()
        s.send(make_batch(t, [], batch_last_offset=7))
        s.send(make_batch(t, [8]))
        self.assertEqual(s.recv(WAIT).acked_offset, 8)
        self.assertEqual(s.finish(WAIT), grpc.StatusCode.OK)
        self.assertEqual(self.mc.topic_stats(t)["empty_batches"], 1)

    def test_message_without_msg_id_breaks_the_stream(self):
        t = self.topic()
        bad = make_batch(t, [0, 1])
        bad.messages[1].ClearField("msg_id")
        s = self.client.open_stream()
        s.send(bad)
        code = s.wait_end(WAIT)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("msg_id", s.error.details())

    def test_batch_with_missing_msg_id_is_not_stored(self):
        t = self.topic()
        bad = make_batch(t, [0, 1])
        bad.messages[0].ClearField("msg_id")
        s = self.client.open_stream()
        s.send(bad)
        s.wait_end(WAIT)
        self.assertEqual(self.mc.store_records(t), [])

    def test_store_is_readable_while_the_mock_runs(self):
        t = self.topic()
        s = self.client.open_stream()
        s.send(make_batch(t, [0, 1, 2]))
        self.assertEqual(s.recv(WAIT).acked_offset, 2)
        self.assertEqual(len(self.mc.store_records(t)), 3)  # stream still open
        s.finish(WAIT)

    def test_store_record_carries_message_fields(self):
        t = self.topic()
        b = make_batch(t, [3, 4], payload=b'{"t":1}', publish_time=1700000000999,
                       producer_name="edge-x", attributes={"device_id": "d1"},
                       schema_id=0, schema_version=2)
        self.client.replicate([b])
        r = self.mc.store_records(t)[0]
        want = {"topic": t, "offset": 3, "batch_last_offset": 4, "publish_time": 1700000000999,
                "producer_name": "edge-x", "attributes": {"device_id": "d1"},
                "schema_id": 0, "schema_version": 2, "payload": '{"t":1}',
                "payload_encoding": "utf-8"}
        self.assertEqual({k: r[k] for k in want}, want)

    def test_store_record_omits_absent_schema_fields(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [0])])
        r = self.mc.store_records(t)[0]
        self.assertNotIn("schema_id", r)
        self.assertNotIn("schema_version", r)

    def test_store_record_has_receive_time(self):
        t = self.topic()
        before = int(time.time() * 1000)
        self.client.replicate([make_batch(t, [0])])
        after = int(time.time() * 1000)
        r = self.mc.store_records(t)[0]
        self.assertTrue(before <= r["received_at"] <= after)

    def test_store_record_has_the_batch_size_on_the_wire(self):
        t = self.topic()
        b = make_batch(t, range(5))
        self.client.replicate([b])
        recs = self.mc.store_records(t)
        self.assertEqual(len(recs), 5)
        self.assertEqual({r["batch_bytes"] for r in recs}, {len(b.SerializeToString())})

    def test_binary_payload_is_stored_as_base64(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [0], payload=b"\x00\xff\xfe")])
        r = self.mc.store_records(t)[0]
        self.assertEqual(r["payload_encoding"], "base64")
        self.assertEqual(base64.b64decode(r["payload"]), b"\x00\xff\xfe")

    def test_stats_count_stored_duplicates_batches_and_acks(self):
        t = self.topic()
        self.client.replicate([make_batch(t, [0, 1]), make_batch(t, [2, 3]), make_batch(t, [2, 3])])
        st = self.mc.topic_stats(t)
        got = {k: st[k] for k in ("stored", "highest_offset", "marker", "duplicate_batches",
                                  "duplicate_messages", "batches", "acks")}
        self.assertEqual(got, {"stored": 4, "highest_offset": 3, "marker": 3, "duplicate_batches": 1,
                               "duplicate_messages": 2, "batches": 3, "acks": 3})

    def test_deleting_a_topic_forgets_its_dedup_marker(self):
        edge = self.edge()
        t = f"/{edge}/t"
        self.client.register(edge, [(t, None)])
        self.client.replicate([make_batch(t, [0])])
        self.mc.control.delete_topic(t)
        self.client.replicate([make_batch(t, [0])])
        self.assertEqual(len(self.mc.store_records(t)), 2)


class Lookup(SharedMock):
    def tearDown(self):
        self.mc.control.lookup("connect")

    def test_default_answer_is_connect_to_the_mock_itself(self):
        r = self.client.lookup("/e/t", request_id=42)
        self.assertEqual((r.request_id, r.response_type, r.connect_url, r.broker_url),
                         (42, api_pb.TopicLookupResponse.Connect, self.mc.grpc_url, self.mc.grpc_url))

    def test_redirect_answer_carries_the_configured_url(self):
        self.mc.control.lookup("redirect", "http://127.0.0.1:1")
        r = self.client.lookup("/e/t")
        self.assertEqual((r.response_type, r.connect_url),
                         (api_pb.TopicLookupResponse.Redirect, "http://127.0.0.1:1"))

    def test_failed_answer_has_no_url(self):
        self.mc.control.lookup("failed")
        r = self.client.lookup("/e/t")
        self.assertEqual((r.response_type, r.connect_url), (api_pb.TopicLookupResponse.Failed, ""))


class Control(SharedMock):
    def test_unknown_fault_mode_is_refused(self):
        with self.assertRaises(ControlError) as cm:
            self.mc.control.fault("explode")
        self.assertEqual(cm.exception.status, 400)

    def test_unknown_schema_type_is_refused(self):
        with self.assertRaises(ControlError) as cm:
            self.mc.control.put_schema("s", "xml", "<a/>")
        self.assertEqual(cm.exception.status, 400)

    def test_same_schema_twice_is_one_version(self):
        self.mc.control.put_schema("twice", "json_schema", "{}")
        again = self.mc.control.put_schema("twice", "json_schema", "{}")
        self.assertEqual((again["changed"], again["version"]), (False, 1))

    def test_deleting_unknown_topic_is_not_found(self):
        with self.assertRaises(ControlError) as cm:
            self.mc.control.delete_topic("/no/such")
        self.assertEqual(cm.exception.status, 404)


if __name__ == "__main__":
    unittest.main(verbosity=2)
