#!/usr/bin/python3
"""test_replication.py: the real gateway replicating to the mock Danube
cluster on loopback (docs/REPLICATION.md).

  - 10,000 numbered messages over 3 topics arrive once per offset, in
    order, with their capture attributes, the schema id/version stamped
    where the topic has a schema, msg_id.topic_offset = the WAL offset;
  - a cluster that is down at boot: the gateway starts, accepts and logs,
    registers when the cluster appears, replicates the backlog;
  - heartbeat: a schema changed on the cluster changes validation without
    a restart (enforce answers 0x99), removed then re-added makes the topic
    ready again; a topic removed on the cluster is registered again;
  - the bearer token, and Discovery answers other than Connect.
Each test runs its own mock cluster and gateway; every wait has a deadline.
"""
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway, free_port, wal_dump  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import check_topic, edge_yaml, payload_numbers, publish_all  # noqa: E402
from tlib.tls_cluster import TlsCluster  # noqa: E402

WAIT = 60  # seconds: the bound of the long waits (sanitizer builds are slow)
SCHEMA_OBJ = {"type": "json_schema", "raw": {"type": "object"}}
SCHEMA_N = {"type": "json_schema", "raw": {"type": "object", "required": ["n"]}}


def mapping(pattern, topic, subject=None, policy=None):
    d = {"mqtt_pattern": pattern, "danube_topic": topic, "extract_attributes": {"device": "$1"}}
    if subject:
        d["schema_subject"] = subject
    if policy:
        d["validation_policy"] = policy
    return d


class Case(unittest.TestCase):
    def start(self, mappings, mock=None, **yaml_kw):
        self.mc = mock or MockCluster()
        if mock is None:
            self.mc.start()
        self.addCleanup(self.mc.cleanup)
        self.gw = Gateway(edge_yaml(self.mc.grpc_url, mappings, **yaml_kw)).start()
        self.addCleanup(self.gw.__exit__)
        self.port = self.gw.mqtt_port()
        return self.gw

    def stop_gateway(self):
        rc = self.gw.stop()
        self.assertEqual(rc, 0, self.gw.log())

    def raw5(self, client_id):
        c = m.Raw(self.port)
        c.send(m.connect(client_id, version=5))
        self.assertEqual(c.expect(m.CONNACK).reason(), 0)
        self.addCleanup(c.sock.close)
        return c

    def pub5(self, c, topic, payload, pid):
        """QoS 1 on MQTT 5: returns the PUBACK reason code."""
        c.send(m.publish(topic, payload, qos=1, pid=pid, version=5))
        return c.expect(m.PUBACK).reason()

    def stored(self, topic):
        return self.mc.topic_stats(topic).get("stored", 0)


class TenThousand(Case):
    def test_every_message_arrives_once_per_offset_in_order_with_attributes_and_schema(self):
        mc = MockCluster(schemas={"tele-v1": SCHEMA_N}).start()
        self.start([mapping("a/+/tele", "/edge1/alpha", "tele-v1"),
                    mapping("b/+/tele", "/edge1/beta", "tele-v1", "enforce"),
                    mapping("c/+/tele", "/edge1/gamma")], mock=mc)
        for t in ("alpha", "beta", "gamma"):
            self.gw.wait_log(f'msg="topic ready" topic=/edge1/{t}', WAIT)
        items = [(f"{'abc'[n % 3]}/d{n % 5}/tele", json.dumps({"n": n})) for n in range(10000)]
        publish_all(self.port, items, timeout=WAIT)
        topics = {"/edge1/alpha": 3334, "/edge1/beta": 3333, "/edge1/gamma": 3333}
        wait_until(lambda: all(self.stored(t) >= n for t, n in topics.items()), WAIT, "10,000 stored")
        sid = mc.control.schemas()["tele-v1"]["schema_id"]
        for idx, (topic, n) in enumerate(sorted(topics.items())):
            recs = mc.store_records(topic)
            check_topic(recs, n, max_dups=0)
            numbers = [json.loads(r["payload"])["n"] for r in recs]
            self.assertEqual(numbers, [k for k in range(10000) if k % 3 == idx], "payloads in publish order")
            for r in recs:
                self.assertEqual(r["attributes"], {"device": f"d{json.loads(r['payload'])['n'] % 5}"})
                self.assertEqual(r["producer_name"], "tributary-edge1")
                if topic == "/edge1/gamma":
                    self.assertNotIn("schema_id", r)
                else:
                    self.assertEqual((r["schema_id"], r["schema_version"]), (sid, 1))
        st = mc.control.stats()["totals"]
        self.assertEqual(st["stored"], 10000)
        # what the operator sees: everything replicated, nothing queued, the accounting holds
        http = self.gw.http_port()
        def stats():
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/stats", timeout=5) as r:
                doc = json.load(r)
            return {t["topic"]: t for t in doc["topics"]}, doc
        wait_until(lambda: all(stats()[0][t]["replicated"] == n for t, n in topics.items()), WAIT, "/stats")
        by_topic, doc = stats()
        for topic, n in topics.items():
            self.assertEqual(by_topic[topic]["queued"], 0)
            self.assertEqual(by_topic[topic]["lag_messages"], 0)
            self.assertEqual(by_topic[topic]["acked_offset"], n)
            self.assertEqual(by_topic[topic]["state"], "idle")
            self.assertTrue(by_topic[topic]["invariant_ok"])
        self.assertEqual(doc["cluster"]["state"], "connected")
        self.stop_gateway()
        # the checkpoint followed the acks: nothing is left to send
        for topic, n in topics.items():
            last = [r for r in wal_dump(os.path.join(self.gw.dir, "wal"), topic)][-1]
            self.assertEqual(last["offset"], n)


class FsyncInterval(Case):
    def test_with_fsync_interval_data_is_replicated_once_synced(self):
        # the readable end moves with the interval sync, not with a completion
        self.start([mapping("a/+/tele", "/edge1/alpha")], wal="fsync: interval, fsync_interval_ms: 200")
        self.gw.wait_log('msg="topic ready" topic=/edge1/alpha', WAIT)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(100)])
        wait_until(lambda: self.stored("/edge1/alpha") >= 100, WAIT, "replication in interval mode")
        check_topic(self.mc.store_records("/edge1/alpha"), 100)
        self.stop_gateway()


class ClusterDownAtBoot(Case):
    def test_gateway_starts_logs_then_registers_and_replicates_the_backlog(self):
        port = free_port()
        mc = MockCluster(extra_args=["--port", str(port)])
        url = f"http://127.0.0.1:{port}"
        self.gw = Gateway(edge_yaml(url, [mapping("a/+/tele", "/edge1/alpha")])).start()
        self.addCleanup(self.gw.__exit__)
        self.addCleanup(mc.cleanup)
        self.port = self.gw.mqtt_port()
        self.gw.wait_log("registration with the cluster failed", WAIT)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(500)])
        self.assertEqual(len(wal_dump(os.path.join(self.gw.dir, "wal"), "/edge1/alpha")), 500)
        mc.start()
        t0 = time.monotonic()
        wait_until(lambda: self.gw.log().count('msg="registered with the cluster"') == 1, WAIT, "registration")
        registered_after = time.monotonic() - t0
        wait_until(lambda: mc.topic_stats("/edge1/alpha").get("stored", 0) >= 500, WAIT, "backlog replicated")
        check_topic(mc.store_records("/edge1/alpha"), 500)
        # the cluster channel turning READY cuts the registration backoff short
        self.assertLess(registered_after, 5.0, f"registered {registered_after:.1f} s after the cluster came up")
        log = self.gw.log()
        self.assertEqual(log.count("registration with the cluster failed"), 1, "logged once, not per retry")
        self.assertEqual(log.count("cluster unreachable"), 1)
        self.stop_gateway()

    def test_replayed_backlog_is_marked_and_keeps_its_receive_time(self):
        port = free_port()
        mc = MockCluster(extra_args=["--port", str(port)])
        self.gw = Gateway(edge_yaml(f"http://127.0.0.1:{port}", [mapping("a/+/tele", "/edge1/alpha")],
                                    replicator={"live_window_ms": 300})).start()
        self.addCleanup(self.gw.__exit__)
        self.addCleanup(mc.cleanup)
        self.port = self.gw.mqtt_port()
        before = int(time.time() * 1000)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(20)])
        after = int(time.time() * 1000)
        wait_until(lambda: int(time.time() * 1000) > after + 400, 5, "the backlog to age past the live window")
        mc.start()
        wait_until(lambda: mc.topic_stats("/edge1/alpha").get("stored", 0) >= 20, WAIT, "backlog replicated")
        for r in mc.store_records("/edge1/alpha"):
            self.assertEqual(r["attributes"].get("tributary.replayed"), "true")
            self.assertGreaterEqual(r["publish_time"], before)
            self.assertLessEqual(r["publish_time"], after)
        # live traffic afterwards is not marked
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": 99}))], client_id="live")
        wait_until(lambda: mc.topic_stats("/edge1/alpha").get("stored", 0) >= 21, WAIT, "live message")
        self.assertNotIn("tributary.replayed", mc.store_records("/edge1/alpha")[-1]["attributes"])
        self.stop_gateway()


class Heartbeat(Case):
    def setUp(self):
        mc = MockCluster(schemas={"s": SCHEMA_OBJ}).start()
        self.start([mapping("e/+/tele", "/edge1/strict", "s", "enforce"),
                    mapping("n/+/tele", "/edge1/loose", "s")], mock=mc, heartbeat_ms=200)
        self.gw.wait_log('msg="topic ready" topic=/edge1/strict', WAIT)
        self.c = self.raw5("hb")
        self.pid = 0

    def pub(self, payload, topic="e/d1/tele"):
        self.pid += 1
        return self.pub5(self.c, topic, payload, self.pid)

    def test_a_changed_schema_changes_validation_without_restart(self):
        self.assertEqual(self.pub('{"x": 1}'), 0)
        self.mc.control.put_schema("s", "json_schema", {"type": "object", "required": ["n"]})
        wait_until(lambda: self.pub('{"x": 1}') == 0x99, WAIT, "enforce to refuse what the new schema refuses")
        self.assertEqual(self.pub('{"n": 2}'), 0)
        last = wait_until(lambda: [r for r in self.mc.store_records("/edge1/strict")
                                   if json.loads(r["payload"]) == {"n": 2}], WAIT, "replication")[0]
        self.assertEqual(last["schema_version"], 2, "stamped with the new version")
        first = self.mc.store_records("/edge1/strict")[0]
        self.assertEqual(first["schema_version"], 1, "earlier messages keep the version they were accepted under")
        self.stop_gateway()

    def test_a_schema_removed_then_added_again_makes_the_topic_ready_again(self):
        self.assertEqual(self.pub('{"n": 1}'), 0)
        self.mc.control.delete_schema("s")
        wait_until(lambda: self.pub('{"n": 1}') != 0, WAIT, "the topic to stop being ready")
        self.assertEqual(self.pub('{"n": 1}'), 0x80, "not ready: refused (enforce fails closed)")
        self.assertEqual(self.pub('{"n": 1}', topic="n/d1/tele"), 0, "a none-policy topic still logs")
        self.mc.control.put_schema("s", "json_schema", {"type": "object"})
        wait_until(lambda: self.pub('{"n": 3}') == 0, WAIT, "the topic to be ready again")
        self.gw.wait_log('msg="topic ready" topic=/edge1/strict', 1)
        self.stop_gateway()

    def test_a_schema_that_does_not_compile_fails_closed(self):
        self.mc.control.put_schema("s", "json_schema", {"type": "no-such-type"})
        wait_until(lambda: "schema does not compile" in self.gw.log(), WAIT, "the compile failure")
        self.assertEqual(self.pub('{"n": 1}'), 0x80)
        self.stop_gateway()

    def test_a_topic_removed_on_the_cluster_is_registered_again_and_replicates(self):
        self.assertEqual(self.pub('{"n": 1}'), 0)
        wait_until(lambda: self.stored("/edge1/strict") >= 1, WAIT, "first message")
        regs = self.mc.control.registrations()["edges"]["edge1"]["registrations"]
        self.mc.control.delete_topic("/edge1/strict")
        wait_until(lambda: self.mc.control.registrations()["edges"]["edge1"]["registrations"] > regs, WAIT,
                   "a new registration")
        self.gw.wait_log("it was removed on the cluster", WAIT)
        wait_until(lambda: self.pub('{"n": 5}') == 0, WAIT, "the topic to be ready again")
        wait_until(lambda: any(json.loads(r["payload"]) == {"n": 5} for r in self.mc.store_records("/edge1/strict")),
                   WAIT, "replication after re-registration")
        self.assertIn("/edge1/strict", self.mc.control.registrations()["topics"])
        self.stop_gateway()

    def test_a_cluster_that_forgot_the_edge_gets_it_registered_again(self):
        regs = self.mc.control.registrations()["edges"]["edge1"]["registrations"]
        self.mc.control.reset_edge("edge1")
        wait_until(lambda: self.mc.control.registrations()["edges"].get("edge1", {}).get("registrations", 0) >= 1,
                   WAIT, "registration after NOT_FOUND")
        self.assertGreaterEqual(regs, 1)
        self.gw.wait_log("heartbeat NOT_FOUND", 1)
        self.stop_gateway()


class Auth(Case):
    def test_the_bearer_token_is_sent_on_every_call(self):
        mc = MockCluster(token="s3cret").start()
        self.start([mapping("a/+/tele", "/edge1/alpha")], mock=mc, token="s3cret")
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(50)])
        wait_until(lambda: self.stored("/edge1/alpha") >= 50, WAIT, "replication with auth")
        wait_until(lambda: mc.control.registrations()["edges"].get("edge1"), WAIT, "registered")
        self.assertNotIn("s3cret", self.gw.log(), "the token is never logged")
        self.stop_gateway()

    def test_a_wrong_token_is_an_outage_not_a_failed_boot(self):
        mc = MockCluster(token="right").start()
        self.start([mapping("a/+/tele", "/edge1/alpha")], mock=mc, token="wrong")
        self.gw.wait_log("UNAUTHENTICATED", WAIT)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": 1}))])
        self.assertEqual(len(wal_dump(os.path.join(self.gw.dir, "wal"), "/edge1/alpha")), 1)
        self.assertEqual(self.stored("/edge1/alpha"), 0)
        self.stop_gateway()


class Tls(Case):
    def tls_gateway(self, tc, tls):
        yaml = edge_yaml(tc.url, [mapping("a/+/tele", "/edge1/alpha")]).replace(
            "heartbeat_interval_ms: 500}", "heartbeat_interval_ms: 500, tls: " + json.dumps(tls) + "}")
        self.gw = Gateway(yaml).start()
        self.addCleanup(self.gw.__exit__)
        self.port = self.gw.mqtt_port()

    def test_mutual_tls_with_the_configured_ca_and_client_certificate(self):
        with TlsCluster(self.id_dir(), require_client_cert=True) as tc:
            self.tls_gateway(tc, {"ca_file": tc.ca_file, "cert_file": tc.client_cert, "key_file": tc.client_key})
            publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(20)])
            wait_until(lambda: tc.offsets("/edge1/alpha") == list(range(1, 21)), WAIT, "replication over TLS")
            self.assertIn("tls=true", self.gw.log())
            self.stop_gateway()

    def test_without_the_client_certificate_the_cluster_is_unreachable_and_messages_wait(self):
        with TlsCluster(self.id_dir(), require_client_cert=True) as tc:
            self.tls_gateway(tc, {"ca_file": tc.ca_file})
            self.gw.wait_log("cluster unreachable", WAIT)
            publish_all(self.port, [("a/d1/tele", json.dumps({"n": 1}))])
            self.assertEqual(len(wal_dump(os.path.join(self.gw.dir, "wal"), "/edge1/alpha")), 1)
            self.assertEqual(tc.registrations, 0)
            self.stop_gateway()

    def test_an_unreadable_ca_file_refuses_to_start_naming_the_key(self):
        gw = Gateway(edge_yaml("https://127.0.0.1:1", [mapping("a/+/tele", "/edge1/alpha")]).replace(
            "heartbeat_interval_ms: 500}", 'heartbeat_interval_ms: 500, tls: {ca_file: /nonexistent/ca.pem}}')).start()
        self.addCleanup(gw.__exit__)
        self.assertEqual(gw.proc.wait(30), 1)
        self.assertIn("edge.tls.ca_file: cannot read /nonexistent/ca.pem", gw.log())

    def id_dir(self):
        d = tempfile.mkdtemp(prefix="tb-tls-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


class Discovery(Case):
    def test_connect_url_of_another_address_is_used_for_the_stream(self):
        try:  # "another address" is the name localhost; a bare chroot may have no /etc/hosts
            socket.getaddrinfo("localhost", 1)
        except OSError:
            self.skipTest("the name localhost does not resolve on this machine")
        mc = MockCluster().start()
        mc.control.lookup("connect", f"http://localhost:{mc.grpc_port}")
        self.start([mapping("a/+/tele", "/edge1/alpha")], mock=mc)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(10)])
        wait_until(lambda: self.stored("/edge1/alpha") >= 10, WAIT, "replication via the connect_url")
        self.assertGreaterEqual(mc.control.stats()["totals"]["lookups"], 1)
        self.stop_gateway()

    def test_a_failed_lookup_is_retried_until_it_answers(self):
        mc = MockCluster(lookup="failed").start()
        self.start([mapping("a/+/tele", "/edge1/alpha")], mock=mc)
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(10)])
        wait_until(lambda: mc.control.stats()["totals"]["lookups"] >= 3, WAIT, "lookups retried")
        self.assertEqual(self.stored("/edge1/alpha"), 0)
        mc.control.lookup("connect")
        wait_until(lambda: self.stored("/edge1/alpha") >= 10, WAIT, "replication after the lookup answers")
        self.stop_gateway()

    def test_a_redirect_is_followed(self):
        mc = MockCluster(lookup="redirect", lookup_url=None).start()
        mc.control.lookup("redirect", f"http://localhost:{mc.grpc_port}")
        self.start([mapping("a/+/tele", "/edge1/alpha")], mock=mc)
        wait_until(lambda: mc.control.stats()["totals"]["lookups"] >= 2, WAIT, "the redirect to be asked")
        mc.control.lookup("connect")
        publish_all(self.port, [("a/d1/tele", json.dumps({"n": n})) for n in range(10)])
        wait_until(lambda: self.stored("/edge1/alpha") >= 10, WAIT, "replication")
        self.stop_gateway()


if __name__ == "__main__":
    unittest.main(verbosity=2)
