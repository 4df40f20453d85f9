"""test_overflow.py: each mapping's on_full at the topic bound, on the real
binary with real MQTT clients on 127.0.0.1 (docs/WAL.md "overflow policy",
docs/LIMITS.md "The disk").

Two upstream topics share one gateway, each bounded at 64 KiB
(wal.max_topic_bytes), while the mock cluster is unavailable, so nothing
is acknowledged and every bound is full of unreplicated messages:

  - /edge1/keep, on_full: drop_newest. Once it is full, MQTT 5 QoS 1 gets
    PUBACK 0x97 and QoS 2 PUBREC 0x97; MQTT 3.1.1 QoS 1 and QoS 2 have
    their connection closed with no ack; QoS 0 is dropped. Every refusal
    is counted as rejected{reason="full"}, none as wal_unavailable, and
    nothing stored is deleted (dropped 0); the topic stays writable (not
    failed) and the gateway ready. When the cluster comes back and
    acknowledges the backlog, the topic takes messages again, and the
    cluster holds exactly the acknowledged messages, in order: none that
    was refused.
  - /edge1/roll, on_full: drop_oldest (the default). The same load is
    acknowledged throughout: the oldest segments go, counted as dropped.

A third topic, /edge1/blk with on_full: block, is flooded with QoS 0 by one
connection until its bound is full: the gateway stops reading that
connection (and a QoS 1 publisher of the same topic gets no PUBACK yet),
while a QoS 1 publisher of another topic (/edge1/oth) keeps getting its
PUBACKs. When the mock cluster comes back and acknowledges, room returns:
the waiting PUBACK comes, the flood is read again, and the cluster holds
every message of the flood in order, the acknowledged QoS 1 one, and every
acknowledged message of the other topic; nothing dropped, nothing refused.

A second gateway whose two mappings of one topic disagree on on_full
does not start (exit 2), naming the file, the line and the key.
Every wait has a deadline; nothing sleeps in place of a condition.
"""
import json
import os
import socket
import sys
import threading
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, run_cli, wait_for  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib import mqttraw as m  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

SANITIZED = os.environ.get("TRIB_SANITIZE", "").lower() in ("1", "on", "true")
SLOW = 4.0 if SANITIZED else 1.0
PAYLOAD = 1000
BOUND = 64 << 10
KEEP, ROLL = "/edge1/keep", "/edge1/roll"
WAL = "fsync: always, segment_bytes: 16KiB, max_topic_bytes: 64KiB, min_free_bytes: 0"
QOS0 = 5


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def topics(port):
    return {t["topic"]: t for t in json.loads(http_get(port, "/stats")[1])["topics"]}


class Client:
    """A raw MQTT client that publishes one message at a time and records the answer."""

    def __init__(self, port, name, version):
        self.name, self.version, self.seq = name, version, 0
        self.c = m.Raw(port, timeout=10 * SLOW)
        self.c.send(m.connect(name, version=version))
        assert self.c.expect(m.CONNACK).reason() == 0

    def payload(self):
        self.seq += 1
        return f"{self.name}:{self.seq:06d}:" + "p" * PAYLOAD

    def publish(self, topic, qos=1):
        """(payload, reason): reason None when the server closed the connection, and for QoS 0."""
        payload, pid = self.payload(), self.seq % 65535 + 1
        self.c.send(m.publish(topic, payload, qos=qos, pid=pid, version=self.version))
        if qos == 0:
            return payload, None
        p = self.c.read()
        if p is None:
            return payload, None
        want = m.PUBACK if qos == 1 else m.PUBREC
        assert p.type == want and p.packet_id == pid, p
        reason = p.reason(self.version)
        if qos == 2 and reason == 0:
            self.c.send(m.pubrel(pid, version=self.version))
            assert self.c.expect(m.PUBCOMP).packet_id == pid
        return payload, reason


class OnFullAtTheBound(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with MockCluster(fault="unavailable") as mc:
            cls.mc = mc
            yaml = edge_yaml(mc.grpc_url, [
                {"mqtt_pattern": "keep/+", "danube_topic": KEEP, "on_full": "drop_newest"},
                {"mqtt_pattern": "roll/+", "danube_topic": ROLL},
            ], replicator={"retry_initial_ms": 50, "retry_max_ms": 200}, wal=WAL)
            with Gateway(yaml) as gw:
                cls.gw = gw
                cls.scenario(gw.mqtt_port(), gw.http_port())
                cls.exit_code = gw.stop()
                cls.log = gw.log()

    @classmethod
    def scenario(cls, mport, hport):
        v5 = Client(mport, "v5", 5)
        cls.acked = []                                  # keep: in publish order
        cls.fill = []
        for _ in range(3 * BOUND // PAYLOAD):           # far more than the bound holds
            payload, reason = v5.publish("keep/d1")
            cls.fill.append(reason)
            if reason == 0:
                cls.acked.append(payload)
            else:
                break
        cls.more_v5 = [v5.publish("keep/d1")[1] for _ in range(2)]
        cls.v5_qos2 = v5.publish("keep/d1", qos=2)[1]
        for _ in range(QOS0):
            v5.publish("keep/d1", qos=0)
        cls.v311 = {}
        for qos in (1, 2):
            c = Client(mport, f"v311-q{qos}", 4)
            cls.v311[qos] = (c.publish("keep/d1", qos=qos)[1], c.c.closed())
            c.c.close()
        refusals = 1 + 2 + 1 + QOS0 + 2
        cls.keep_full = wait_for(lambda: (lambda t: t if t["rejected"]["full"] >= refusals else None)(
            topics(hport)[KEEP]), 5 * SLOW, what="/stats to count every refusal")
        cls.readyz_full = http_get(hport, "/readyz")

        cls.roll = [v5.publish("roll/d1")[1] for _ in range(2 * BOUND // PAYLOAD)]
        cls.roll_stats = wait_for(lambda: (lambda t: t if t["received"] == len(cls.roll) else None)(
            topics(hport)[ROLL]), 5 * SLOW, what="/stats to count the roll messages")

        cls.mc.control.fault("normal")                  # the cluster is back
        wait_for(lambda: topics(hport)[KEEP]["acked_offset"] == len(cls.acked), 20 * SLOW,
                 what="the cluster to acknowledge keep's backlog")
        cls.after, cls.after_reason = v5.publish("keep/d1")
        v5.c.close()
        wait_until(lambda: len(cls.mc.store_records(KEEP)) >= len(cls.acked) + 1, 20 * SLOW,
                   "the cluster to store the message taken after the backlog")
        cls.stored_keep = [r["payload"] for r in cls.mc.store_records(KEEP)]
        cls.keep_end = topics(hport)[KEEP]
        sys.stderr.write(f"overflow: keep acked {len(cls.acked)} then refused {refusals}; roll acked "
                         f"{cls.roll.count(0)} of {len(cls.roll)} with {cls.roll_stats['dropped']} dropped\n")

    # ---- drop_newest -------------------------------------------------------------

    def test_the_bound_takes_messages_until_it_is_full(self):
        self.assertGreater(len(self.acked), BOUND // PAYLOAD // 2)
        self.assertEqual(self.fill[-1], 0x97, self.fill[-3:])

    def test_mqtt5_qos1_and_qos2_get_quota_exceeded(self):
        self.assertEqual(self.more_v5, [0x97, 0x97])
        self.assertEqual(self.v5_qos2, 0x97)

    def test_mqtt311_qos1_and_qos2_are_closed_without_an_ack(self):
        self.assertEqual(self.v311[1], (None, []))
        self.assertEqual(self.v311[2], (None, []))

    def test_every_refusal_qos0_included_is_counted_full_not_wal_unavailable(self):
        rej = self.keep_full["rejected"]
        self.assertEqual(rej["full"], 1 + 2 + 1 + QOS0 + 2, rej)
        self.assertEqual(rej["wal_unavailable"], 0)
        self.assertEqual(self.keep_full["received"], len(self.acked) + rej["full"])

    def test_nothing_stored_is_dropped(self):
        t = self.keep_full
        self.assertEqual((t["dropped"], t["wal_dropped_total"]), (0, 0))
        self.assertEqual(t["stored"], len(self.acked))
        self.assertEqual(t["wal_oldest_offset"], 1)
        self.assertTrue(t["invariant_ok"], t)

    def test_a_full_bound_is_not_a_failure(self):
        self.assertNotEqual(self.keep_full["state"], "failed")
        self.assertEqual(self.keep_full["wal_write_errors"], 0)
        self.assertEqual(self.readyz_full[0], 200, self.readyz_full)

    def test_messages_are_taken_again_once_the_cluster_acknowledges(self):
        self.assertEqual(self.after_reason, 0)

    def test_the_cluster_holds_exactly_what_was_acknowledged_in_order(self):
        self.assertEqual(self.stored_keep, self.acked + [self.after])

    def test_the_refusals_are_logged_with_the_policy(self):
        self.assertIn("a disk bound refuses messages", self.log)
        self.assertIn("on_full=drop_newest", self.log)
        self.assertIn("policy=drop_newest", self.log)

    # ---- drop_oldest beside it ---------------------------------------------------

    def test_drop_oldest_acknowledges_everything_and_counts_what_it_drops(self):
        self.assertEqual(set(self.roll), {0})
        self.assertGreater(self.roll_stats["dropped"], 0)
        self.assertEqual(self.roll_stats["rejected"]["full"], 0)
        self.assertTrue(self.roll_stats["invariant_ok"], self.roll_stats)

    def test_the_gateway_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


BLK, OTH = "/edge1/blk", "/edge1/oth"


class Flooder(threading.Thread):
    """QoS 0 PUBLISHes to blk/d as fast as the socket takes them, until stopped.
    whole: how many were handed to the socket entirely (the last, cut off by
    the stop, is not counted: the gateway drops an incomplete packet)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.c = m.Raw(port, timeout=10 * SLOW, tls=False)
        self.c.send(m.connect("flood", version=5))
        assert self.c.expect(m.CONNACK).reason() == 0
        self.stop = threading.Event()
        self.whole = 0
        self.error = None

    @staticmethod
    def payload(i):
        return f"flood:{i:07d}:" + "q" * PAYLOAD

    def run(self):
        sock = self.c.sock
        sock.settimeout(0.05)  # to look at the stop flag while the gateway does not read
        pending = b""
        try:
            while not self.stop.is_set():
                if not pending:
                    pending = m.publish("blk/d", self.payload(self.whole + 1), qos=0, version=5)
                try:
                    pending = pending[sock.send(pending):]
                except socket.timeout:
                    continue
                if not pending:
                    self.whole += 1
        except OSError as e:
            self.error = e
        finally:
            sock.close()


class BlockAtTheBound(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with MockCluster(fault="unavailable") as mc:
            cls.mc = mc
            yaml = edge_yaml(mc.grpc_url, [
                {"mqtt_pattern": "blk/+", "danube_topic": BLK, "on_full": "block"},
                {"mqtt_pattern": "oth/+", "danube_topic": OTH},
            ], replicator={"retry_initial_ms": 50, "retry_max_ms": 200}, wal=WAL)
            with Gateway(yaml) as gw:
                cls.scenario(gw.mqtt_port(), gw.http_port())
                cls.exit_code = gw.stop()
                cls.log = gw.log()

    @classmethod
    def scenario(cls, mport, hport):
        flood = Flooder(mport)
        flood.start()
        try:
            cls.blocked = wait_for(lambda: (lambda t: t if t["blocked"] else None)(topics(hport)[BLK]),
                                   20 * SLOW, what="the flooded topic to block at its bound")
            # a QoS 1 publisher of the blocked topic: its PUBLISH waits for room
            q1 = Client(mport, "q1", 5)
            cls.q1_payload = q1.payload()
            q1.c.send(m.publish("blk/d", cls.q1_payload, qos=1, pid=1, version=5))
            # another topic's QoS 1 publisher goes on meanwhile
            other = Client(mport, "other", 5)
            cls.other = [other.publish("oth/d") for _ in range(BOUND // PAYLOAD // 2)]  # within its bound
            cls.during = topics(hport)[BLK]

            cls.mc.control.fault("normal")  # the cluster is back: its acks free room
            ack = q1.c.read(timeout=30 * SLOW)
            cls.q1_ack = (ack.type, ack.packet_id, ack.reason(5))
            cls.resumed = wait_for(
                lambda: (lambda t: t if t["received"] > cls.during["received"] + 20 else None)(topics(hport)[BLK]),
                30 * SLOW, what="the flood to be read again")
        finally:
            flood.stop.set()
            flood.join(10 * SLOW)
        cls.flood_error, cls.flood_whole = flood.error, flood.whole
        want = flood.whole + 1  # and q1's
        cls.end = wait_for(lambda: (lambda t: t if t["received"] == want and t["stored"] == want else None)(
            topics(hport)[BLK]), 30 * SLOW, what="every whole flood message to be stored")
        wait_until(lambda: len(cls.mc.store_records(BLK)) >= want, 60 * SLOW,
                   "the cluster to hold every message of the blocked topic")
        cls.stored_blk = [r["payload"] for r in cls.mc.store_records(BLK)]
        cls.stored_oth = [r["payload"] for r in cls.mc.store_records(OTH)]
        q1.c.close()
        other.c.close()
        sys.stderr.write(f"overflow: block: {cls.during['received']} read before the pause, "
                         f"{flood.whole} flooded in all, {len(cls.other)} acked on the other topic meanwhile\n")

    def test_the_flooded_topic_blocks_at_its_bound_refusing_and_dropping_nothing(self):
        t = self.blocked
        self.assertTrue(t["blocked"])
        self.assertEqual(t["rejected"]["full"], 0, t)
        self.assertEqual(t["dropped"], 0, t)
        self.assertGreaterEqual(self.during["blocked_pauses"], 1, self.during)

    def test_the_paused_publishers_are_not_read_while_it_is_blocked(self):
        self.assertTrue(self.during["blocked"], self.during)
        self.assertEqual(self.during["stored"], self.blocked["stored"], "nothing more written while blocked")
        self.assertLess(self.during["received"], self.flood_whole)

    def test_another_topics_qos1_publisher_keeps_getting_its_pubacks(self):
        self.assertEqual({r for _, r in self.other}, {0})
        self.assertEqual(self.stored_oth, [p for p, _ in self.other])

    def test_the_waiting_puback_comes_once_the_cluster_frees_room(self):
        self.assertEqual(self.q1_ack, (m.PUBACK, 1, 0))
        self.assertIn(self.q1_payload, self.stored_blk)

    def test_the_cluster_holds_the_whole_flood_in_order_nothing_dropped(self):
        self.assertIsNone(self.flood_error)
        flood = [p for p in self.stored_blk if p.startswith("flood:")]
        self.assertEqual(len(flood), self.flood_whole)
        self.assertEqual(flood, [Flooder.payload(i) for i in range(1, self.flood_whole + 1)])
        self.assertEqual(len(self.stored_blk), self.flood_whole + 1)
        t = self.end
        self.assertEqual((t["dropped"], t["wal_dropped_total"], t["rejected"]["full"]), (0, 0, 0), t)
        self.assertTrue(t["invariant_ok"], t)
        self.assertFalse(t["blocked"], t)

    def test_the_block_is_logged_and_the_gateway_stops_cleanly(self):
        self.assertIn("on_full: block", self.log)
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


class StopWhileBlocked(unittest.TestCase):
    """A stop does not wait for room that may never come: what waits was
    never acknowledged, so the gateway refuses it and exits cleanly (QoS 1/2
    are resent after the restart)."""

    def test_sigterm_while_blocked_exits_cleanly_without_waiting_for_room(self):
        with MockCluster(fault="unavailable") as mc:
            yaml = edge_yaml(mc.grpc_url, [{"mqtt_pattern": "blk/+", "danube_topic": BLK, "on_full": "block"}],
                             wal=WAL, extra="shutdown_timeout_ms: 30000\n")
            with Gateway(yaml) as gw:
                flood = Flooder(gw.mqtt_port())
                flood.start()
                try:
                    t = wait_for(lambda: (lambda t: t if t["blocked"] else None)(topics(gw.http_port())[BLK]),
                                 20 * SLOW, what="the flooded topic to block")
                finally:
                    flood.stop.set()
                    flood.join(10 * SLOW)
                code = gw.stop(timeout=20 * SLOW)  # far less than shutdown_timeout_ms
                log = gw.log()
        self.assertEqual(code, 0, log[-3000:])
        self.assertIn("shutting down: messages waiting for room (on_full: block) not taken", log)
        self.assertNotIn("shutdown took too long", log)
        self.assertEqual(t["dropped"], 0)


class MappingsThatDisagree(unittest.TestCase):
    YAML = edge_yaml("http://127.0.0.1:1", [
        {"mqtt_pattern": "a/+", "danube_topic": "/edge1/t", "on_full": "drop_newest"},
        {"mqtt_pattern": "b/+", "danube_topic": "/edge1/t"},
    ])

    def test_check_refuses_the_file_naming_file_line_and_key(self):
        gw = Gateway(self.YAML)
        r = run_cli("check", "-c", gw.config)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("edge.yaml: mqtt.topic_mappings[1].on_full (line ", r.stderr)
        self.assertIn("topic /edge1/t already has on_full drop_newest from mqtt.topic_mappings[0]", r.stderr)

    def test_run_does_not_start(self):
        gw = Gateway(self.YAML).start()
        self.assertEqual(gw.proc.wait(timeout=10 * SLOW), 2, gw.log())
        gw.logf.close()
        self.assertIn("mqtt.topic_mappings[1].on_full", gw.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
