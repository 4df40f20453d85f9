"""Persistent sessions survive a restart of the gateway (clean or SIGKILL):
Session Present stays 1, and a QoS 2 message whose PUBREC was sent before
the restart is answered again after it without being stored twice."""
import json
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, run_cli, wal_dump  # noqa: E402
from tlib import mqttraw as m  # noqa: E402

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {batch_timeout_ms: 2}
  topic_mappings:
    - {mqtt_pattern: "s/#", danube_topic: /e1/s}
wal: {dir: ./wal}
http: {listener: "127.0.0.1:0"}
"""


class SessionsRestart(unittest.TestCase):
    def connect(self, port, cid, version=4, clean=False):
        c = m.Raw(port)
        c.send(m.connect(cid, version=version, clean=clean, session_expiry=3600 if version == 5 else None))
        ack = c.expect(m.CONNACK)
        self.assertEqual(ack.reason(), 0)
        return c, bool(ack.body[0] & 1)

    def restart(self, gw, how):
        self.assertEqual(gw.stop(how), 0 if how == signal.SIGTERM else -signal.SIGKILL, gw.log())
        gw.start()
        return gw.mqtt_port()

    def qos2_across_restart(self, how, version):
        gw = Gateway(CONFIG)
        with gw:
            port = gw.mqtt_port()
            c, present = self.connect(port, f"dev-{how}-{version}", version)
            self.assertFalse(present)
            c.send(m.publish("s/q2", "exactly-once", qos=2, pid=5, version=version))
            self.assertEqual(c.expect(m.PUBREC).packet_id, 5)
            c.close()
            port = self.restart(gw, how)
            c, present = self.connect(port, f"dev-{how}-{version}", version)
            self.assertTrue(present, "persistent session lost across the restart")
            c.send(m.publish("s/q2", "exactly-once", qos=2, pid=5, version=version, dup=True))
            self.assertEqual(c.expect(m.PUBREC).packet_id, 5)
            c.send(m.pubrel(5))
            comp = c.expect(m.PUBCOMP)
            self.assertEqual((comp.packet_id, comp.reason()), (5, 0))
            c.close()
            # released: a third run knows nothing of id 5 any more
            port = self.restart(gw, how)
            c, present = self.connect(port, f"dev-{how}-{version}", version)
            self.assertTrue(present)
            c.send(m.pubrel(5))
            self.assertEqual(c.expect(m.PUBCOMP).reason(), 0x92 if version == 5 else 0)
            c.close()
            self.assertEqual(gw.stop(), 0, gw.log())
            recs = [r for r in wal_dump(os.path.join(gw.dir, "wal"), "/e1/s") if r["payload"] == "exactly-once"]
            self.assertEqual(len(recs), 1, "stored twice")

    def test_qos2_after_clean_restart_v311(self):
        self.qos2_across_restart(signal.SIGTERM, 4)

    def test_qos2_after_sigkill_v5(self):
        self.qos2_across_restart(signal.SIGKILL, 5)

    def test_clean_session_is_not_restored(self):
        gw = Gateway(CONFIG)
        with gw:
            port = gw.mqtt_port()
            c, _ = self.connect(port, "clean-one", clean=True)
            c.close()
            c, _ = self.connect(port, "ended", clean=False)
            c.close()
            c, _ = self.connect(port, "ended", clean=True)  # ends the persistent one
            c.close()
            port = self.restart(gw, signal.SIGTERM)
            for cid in ("clean-one", "ended"):
                c, present = self.connect(port, cid, clean=False)
                self.assertFalse(present, cid)
                c.close()

    def test_journal_is_compacted_and_state_kept(self):
        gw = Gateway(CONFIG)
        with gw:
            port = gw.mqtt_port()
            c, _ = self.connect(port, "busy")
            for pid in range(1, 801):  # 800 x (stored + released) journal records
                c.send(m.publish("s/busy", f"m{pid}", qos=2, pid=pid))
                c.expect(m.PUBREC)
                c.send(m.pubrel(pid))
                c.expect(m.PUBCOMP)
            c.send(m.publish("s/busy", "held", qos=2, pid=900))
            c.expect(m.PUBREC)
            c.close()
            port = self.restart(gw, signal.SIGTERM)
            self.assertIn("sessions restored", gw.log())
            c, present = self.connect(port, "busy")
            self.assertTrue(present)
            c.send(m.publish("s/busy", "held", qos=2, pid=900, dup=True))
            c.expect(m.PUBREC)
            c.close()
            self.assertEqual(gw.stop(), 0, gw.log())
            check = run_cli("wal", "check", "--dir", os.path.join(gw.dir, "wal"))
            journal = [json.loads(line) for line in check.stdout.splitlines() if '"$sessions"' in line][0]
            # compacted while running (past 2 x live + 1024 records) or at the restart
            self.assertGreater(journal["checkpoint"], 1000, "journal was not compacted")
            recs = wal_dump(os.path.join(gw.dir, "wal"), "/e1/s")
            self.assertEqual(sum(r["payload"] == "held" for r in recs), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
