"""1,000 QoS 2 messages with the connection cut at random points of the
four-way handshake: the client resumes as MQTT says (resend PUBLISH with DUP
if it had no PUBREC, PUBREL if it had), and the log holds each message
exactly once, in order."""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wal_dump  # noqa: E402
from tlib import mqttraw as m  # noqa: E402

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {batch_timeout_ms: 2}
  topic_mappings:
    - {mqtt_pattern: "q2/#", danube_topic: /e1/q2}
wal: {dir: ./wal}
http: {listener: "127.0.0.1:0"}
"""

# The first copy of a message stays in its batch for 1.5 s: long enough for
# two reconnects to resend it while it is still on its way to the log.
SLOW_BATCH = CONFIG.replace("ingestion: {batch_timeout_ms: 2}",
                            "ingestion: {batch_timeout_ms: 1500, idle_flush_ms: 0}")

N = 1000


class Qos2Reconnect(unittest.TestCase):
    def run_version(self, version):
        rnd = random.Random(1234 + version)
        with Gateway(CONFIG) as gw:
            port = gw.mqtt_port()
            state = {}  # pid -> "published" | "pubrec" (awaiting PUBCOMP)
            payload_of = {}
            next_msg = 0
            cuts = 0

            def connect():
                c = m.Raw(port)
                c.send(m.connect("q2-client", version=version, clean=False,
                                 session_expiry=3600 if version == 5 else None))
                ack = c.expect(m.CONNACK)
                self.assertEqual(ack.reason(), 0)
                return c

            c = connect()
            first = True
            while next_msg < N or state:
                if not first:
                    # resume: resend in order what the handshake left open
                    for pid in sorted(state):
                        if state[pid] == "published":
                            c.send(m.publish("q2/t", payload_of[pid], qos=2, pid=pid, version=version, dup=True))
                        else:
                            c.send(m.pubrel(pid))
                first = False
                cut = False
                while (next_msg < N or state) and not cut:
                    if next_msg < N and len(state) < 10:
                        pid = next_msg % 65535 + 1
                        payload_of[pid] = f"msg-{next_msg:05d}"
                        state[pid] = "published"
                        c.send(m.publish("q2/t", payload_of[pid], qos=2, pid=pid, version=version))
                        next_msg += 1
                        if rnd.random() < 0.03:
                            cut = True  # cut right after a PUBLISH
                            break
                    p = c.read(timeout=10)
                    self.assertIsNotNone(p, "server closed the connection")
                    if p.type == m.PUBREC:
                        self.assertEqual(p.reason(), 0)
                        state[p.packet_id] = "pubrec"
                        if rnd.random() < 0.03:
                            cut = True  # cut between PUBREC and PUBREL
                            break
                        c.send(m.pubrel(p.packet_id))
                    elif p.type == m.PUBCOMP:
                        state.pop(p.packet_id, None)
                if cut:
                    cuts += 1
                    c.close()
                    c = connect()
            c.send(m.disconnect(version))
            c.close()
            self.assertEqual(gw.stop(), 0, gw.log())
            recs = wal_dump(os.path.join(gw.dir, "wal"), "/e1/q2")
            payloads = [r["payload"] for r in recs]
            self.assertEqual(len(payloads), len(set(payloads)), "a message was stored twice")
            self.assertEqual(payloads, [f"msg-{i:05d}" for i in range(N)])
            self.assertGreater(cuts, 10)
            offsets = [r["offset"] for r in recs]
            self.assertEqual(offsets, list(range(offsets[0], offsets[0] + N)))

    def test_v311(self):
        self.run_version(4)

    def test_v5(self):
        self.run_version(5)


class ResendWhileStoring(unittest.TestCase):
    """A client that reconnects twice and resends a QoS 2 PUBLISH each time
    while the first copy is still being stored gets its PUBREC on the last
    connection (it once went to the second, already closed, connection, and
    the client waited for ever), and the message is stored once."""

    def run_version(self, version):
        with Gateway(SLOW_BATCH) as gw:
            port = gw.mqtt_port()

            def connect():
                c = m.Raw(port)
                c.send(m.connect("q2-resender", version=version, clean=False,
                                 session_expiry=3600 if version == 5 else None))
                self.assertEqual(c.expect(m.CONNACK).reason(), 0)
                return c

            def publish_then_vanish(dup):
                c = connect()
                c.send(m.publish("q2/t", "once", qos=2, pid=7, version=version, dup=dup))
                c.send(m.packet(m.PINGREQ, 0, b""))
                c.expect(m.PINGRESP)  # in order: the server has the PUBLISH
                c.close()             # gone before the first copy is stored

            publish_then_vanish(dup=False)
            publish_then_vanish(dup=True)
            last = connect()
            last.send(m.publish("q2/t", "once", qos=2, pid=7, version=version, dup=True))
            rec = last.expect(m.PUBREC, timeout=10)
            self.assertEqual((rec.packet_id, rec.reason()), (7, 0))
            last.send(m.pubrel(7))
            self.assertEqual(last.expect(m.PUBCOMP).packet_id, 7)
            last.send(m.disconnect(version))
            last.close()
            self.assertEqual(gw.stop(), 0, gw.log())
            self.assertEqual([r["payload"] for r in wal_dump(os.path.join(gw.dir, "wal"), "/e1/q2")], ["once"])

    def test_v311(self):
        self.run_version(4)

    def test_v5(self):
        self.run_version(5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
