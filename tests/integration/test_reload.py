"""SIGHUP: what can change at run time is applied, the rest is named as
needing a restart (from the key table's reload class), and an invalid file,
or one that fails `tributary check`, changes nothing."""
import http.client
import json
import os
import re
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, run_cli, wait_for  # noqa: E402
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

    def publish_v5(self, port, topic="a/x"):
        c = m.Raw(port)
        c.send(m.connect("reloader", version=5))
        c.expect(m.CONNACK)
        c.send(m.publish(topic, "{}", qos=1, pid=1, version=5))
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
            self.assertIn("reload: mappings applied", log)
            self.assertIn("log.level applied", log)
            self.assertRegex(log, r"need a restart.*keys=wal\.fsync")
            # policy none: stored now
            self.assertEqual(self.publish_v5(port), 0)
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_reordered_mapping_keeps_its_policy_with_its_rule(self):
        """Mappings swapped in place: index 0 now names another rule. Each
        rule keeps its own policy in the new generation (a/+ under enforce
        stayed enforce, b/+ stays none): the old by-index application moved
        `enforce` to the wrong rule (RELOAD.md 1.3 a)."""
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
            self.assertIn("reload: mappings applied", log)
            self.assertNotRegex(log, r"need a restart")
            self.assertEqual(self.publish_v5(port), 0x80, "a/+ is still under enforce")
            self.assertEqual(self.publish_v5(port, "b/x"), 0, "b/+ is still none")
            self.assertEqual(g.stop(), 0, g.log())

    def post_reload(self, g):
        c = http.client.HTTPConnection("127.0.0.1", g.http_port(), timeout=10)
        c.request("POST", "/admin/reload")
        r = c.getresponse()
        body = json.loads(r.read().decode())
        c.close()
        return r.status, body

    def test_a_key_changed_and_changed_back_is_applied_both_times(self):
        """The running configuration is replaced after an applied reload:
        log.level info -> debug -> info is applied twice (the second used to
        compare with the boot file, find nothing, and stay at debug), a
        restart-class key changed back to its boot value is no longer named,
        and a refused file in between keeps the one in force."""
        g = Gateway(BASE % {"policy": "none", "fsync": "always", "level": "info"})
        with g:
            g.wait_log("bootstrap complete")
            self.write(g, policy="none", level="debug", fsync="never")
            status, ans = self.post_reload(g)
            self.assertEqual((status, ans["result"]), (200, "applied"), ans)
            self.assertEqual(ans["applied"], ["log.level"], ans)
            self.assertEqual(ans["restart_needed"], ["wal.fsync"], ans)
            wait_for(lambda: "level=debug" in g.log(), what="debug lines after the first reload")
            with open(g.config, "w") as f:  # refused: the file in force stays (debug)
                f.write("edge: [broken\n")
            status, ans = self.post_reload(g)
            self.assertEqual((status, ans["result"]), (422, "refused"), ans)
            self.write(g, policy="none", level="info", fsync="always")
            status, ans = self.post_reload(g)
            self.assertEqual((status, ans["result"]), (200, "applied"), ans)
            self.assertEqual(ans["applied"], ["log.level"], ans)
            self.assertEqual(ans["restart_needed"], [], ans)
            self.assertEqual(g.log().count("reload: log.level applied"), 2, g.log())
            n_debug = g.log().count("level=debug")
            self.write(g, policy="none", level="info", fsync="always")  # the same again: nothing to apply
            status, ans = self.post_reload(g)
            self.assertEqual((status, ans["result"], ans["applied"]), (200, "unchanged", []), ans)
            self.assertEqual(g.log().count("level=debug"), n_debug, "info in force: no debug line since")
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

    def restart_keys(self, log):
        """The keys of the one 'need a restart' warning line."""
        lines = [ln for ln in log.splitlines() if "need a restart and were not applied" in ln]
        self.assertEqual(len(lines), 1, log)
        m_ = re.search(r'keys="?([^"]*)"?', lines[0])
        self.assertIsNotNone(m_, lines[0])
        return set(m_.group(1).split())

    def test_restart_class_changes_are_named_and_the_running_values_kept(self):
        """Restart-class keys changed in the file (mqtt.max_connections down
        to 1, wal.fsync, replicator.batch_size) are named key by key in the
        SIGHUP's one warning and not applied: two clients still connect at
        once. Live keys in the same file (log.level, replicator.max_attempts)
        are applied."""
        text = BASE % {"policy": "none", "fsync": "always", "level": "info"}
        g = Gateway(text)
        with g:
            port = g.mqtt_port()
            changed = (text.replace("  ingestion: {batch_timeout_ms: 5}\n",
                                    "  ingestion: {batch_timeout_ms: 5}\n  max_connections: 1\n")
                           .replace("fsync: always", "fsync: never").replace("level: info", "level: debug")
                       + "replicator: {max_attempts: 3, batch_size: 50}\n")
            self.assertIn("max_connections: 1", changed)
            g.write_config(changed)
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("SIGHUP: reload done")
            log = g.log()
            self.assertEqual(self.restart_keys(log),
                             {"mqtt.max_connections", "wal.fsync", "replicator.batch_size"})
            self.assertIn("log.level applied", log)
            self.assertIn("replicator.max_attempts applied", log)
            self.assertIn("restart_needed=true", log)
            # the running max_connections (10000) is kept: a second client still gets in
            first, second = m.Raw(port), m.Raw(port)
            first.send(m.connect("one", version=5))
            self.assertEqual(first.expect(m.CONNACK).reason(), 0)
            second.send(m.connect("two", version=5))
            self.assertEqual(second.expect(m.CONNACK).reason(), 0, "max_connections: 1 was applied")
            first.close()
            second.close()
            self.assertEqual(self.publish_v5(port), 0)
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_file_that_fails_check_is_refused_whole(self):
        """Two mappings of one topic that disagree on on_full: cfg_load takes
        the file, `tributary check` (gw_check) refuses it, and so does SIGHUP
        now, with the same words, file, line and key; the live change in it
        (log.level) is not applied and the running rules stay."""
        g = Gateway(BASE % {"policy": "none", "fsync": "always", "level": "info"})
        with g:
            port = g.mqtt_port()
            bad = (BASE % {"policy": "none", "fsync": "always", "level": "debug"}).replace(
                "validation_policy: none}\n",
                "validation_policy: none}\n    - {mqtt_pattern: \"b/+\", danube_topic: /e1/a, on_full: block}\n")
            g.write_config(bad)
            check = run_cli("check", "-c", g.config)
            self.assertEqual(check.returncode, 2, check.stderr)
            self.assertIn("mqtt.topic_mappings[1].on_full (line ", check.stderr)
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("fails `tributary check`; nothing changed")
            line = [ln for ln in g.log().splitlines() if "fails `tributary check`" in ln][0]
            self.assertIn("key=mqtt.topic_mappings[1].on_full", line)
            n = re.search(r"\(line (\d+)\)", check.stderr).group(1)
            self.assertIn("line=%s " % n, line)
            self.assertIn("file=" + g.config, line)
            self.assertIn(check.stderr.strip().replace('"', '\\"'), line, "the same text as `tributary check`")
            log = g.log()
            self.assertNotIn("log.level applied", log)
            self.assertNotIn("reload done", log)
            self.assertEqual(self.publish_v5(port), 0)
            self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
