"""SIGHUP: what can change at run time is applied, the rest is named as
needing a restart, and an invalid file changes nothing."""
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib import mqttraw as m  # noqa: E402

BASE = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {batch_timeout_ms: 5}
  topic_mappings:
    - {mqtt_pattern: "a/+", danube_topic: /e1/a, schema_subject: s1, validation_policy: %(policy)s}
wal: {dir: ./wal, fsync: %(fsync)s}
http: {listener: "127.0.0.1:0"}
log: {level: %(level)s}
"""


class Reload(unittest.TestCase):
    def write(self, gw, **kw):
        v = {"policy": "enforce", "fsync": "always", "level": "info"}
        v.update(kw)
        gw.write_config(BASE % v)  # (TLS listeners kept when the suite runs over TLS)

    def publish_v5(self, port):
        c = m.Raw(port)
        c.send(m.connect("reloader", version=5))
        c.expect(m.CONNACK)
        c.send(m.publish("a/x", "{}", qos=1, pid=1, version=5))
        reason = c.expect(m.PUBACK).reason()
        c.close()
        return reason

    def test_policy_applies_and_other_keys_need_restart(self):
        g = Gateway(BASE % {"policy": "enforce", "fsync": "always", "level": "info"})
        with g:
            port = g.mqtt_port()
            # enforce without a resolved schema: refused
            self.assertEqual(self.publish_v5(port), 0x80)
            self.write(g, policy="none", fsync="never", level="debug")
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("reload done")
            log = g.log()
            self.assertIn("validation_policy applied", log)
            self.assertIn("log.level applied", log)
            self.assertRegex(log, r"need a restart.*keys=wal\.fsync")
            # policy none: stored now
            self.assertEqual(self.publish_v5(port), 0)
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_reordered_mapping_keeps_its_policy_until_a_restart(self):
        """Mappings swapped in place: index 0 now names another rule. The old
        rule at index 0 must not take the new file's policy for index 0 (it
        did: `a/+` under enforce went to none); the policy, like the moved
        rules, needs a restart."""
        two = BASE.replace(
            "    - {mqtt_pattern: \"a/+\", danube_topic: /e1/a, schema_subject: s1, validation_policy: %(policy)s}\n",
            "%(mappings)s")
        a = '    - {mqtt_pattern: "a/+", danube_topic: /e1/a, schema_subject: s1, validation_policy: %s}\n'
        b = '    - {mqtt_pattern: "b/+", danube_topic: /e1/b, validation_policy: %s}\n'
        v = {"fsync": "always", "level": "info"}
        g = Gateway(two % dict(v, mappings=a % "enforce" + b % "none"))
        with g:
            port = g.mqtt_port()
            self.assertEqual(self.publish_v5(port), 0x80)  # enforce, no schema resolved: refused
            g.write_config(two % dict(v, mappings=b % "none" + a % "enforce"))
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("reload done")
            log = g.log()
            self.assertNotIn("validation_policy applied", log)
            self.assertRegex(log, r"need a restart.*keys=.*mqtt\.topic_mappings\[0\]\.validation_policy")
            self.assertEqual(self.publish_v5(port), 0x80, "a/+ is still under enforce")
            self.assertEqual(g.stop(), 0, g.log())

    def test_invalid_file_changes_nothing(self):
        g = Gateway(BASE % {"policy": "none", "fsync": "always", "level": "info"})
        with g:
            port = g.mqtt_port()
            with open(g.config, "w") as f:
                f.write("edge: [broken\n")
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("the configuration file is invalid; nothing changed")
            self.assertEqual(self.publish_v5(port), 0)
            self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
