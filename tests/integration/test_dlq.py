#!/usr/bin/python3
"""test_dlq.py: `tributary dlq list|show|replay|purge` and GET/POST /admin/dlq (issue 19,
docs/design/RELOAD.md 5.7, docs/OPERATIONS.md "The dead-letter log").

A payload the topic's schema refuses (enforce, MQTT 3.1.1: acknowledged and
kept in the dead-letter log) is listed and shown (CLI over the admin API, and
offline with --dir), counted in tributary_dead_letters_total{reason=
"invalid_schema"}; replayed while the schema still refuses it: refused (and
not dead-lettered again); the schema fixed in the cluster's registry; replayed:
it reaches the cluster with tributary.dlq_offset. Purge needs --yes (and
confirm=yes on the API), then the list is empty.

Every wait is a condition with a deadline.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway, run_cli, wal_dump  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.reloads import ask  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

WAIT = 60
TELE = "/edge1/tele"
STRICT = {"type": "object", "required": ["temperature"], "properties": {"temperature": {"type": "number"}}}
LOOSE = {"type": "object"}


class Dlq(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster(schemas={"tele": {"type": "json_schema", "raw": STRICT}}).start()
        maps = [{"mqtt_pattern": "t/+", "danube_topic": TELE, "schema_subject": "tele",
                 "validation_policy": "enforce"}]
        yaml = edge_yaml(self.mc.grpc_url, maps).replace('  listener: "127.0.0.1:0"\n',
                                                         '  listener: "127.0.0.1:0"\n  dead_letter: true\n', 1)
        self.gw = Gateway(yaml).start()
        self.port = self.gw.mqtt_port()
        self.http = self.gw.http_port()
        self.gw.wait_log(f'msg="topic ready" topic={TELE}', WAIT)

    def tearDown(self):
        if self.gw.proc and self.gw.proc.poll() is None:
            self.gw.proc.kill()
            self.gw.proc.wait(30)
        self.mc.stop()

    def publish(self, payload, version=4, cid="dlq-pub"):
        c = m.Raw(self.port)
        c.send(m.connect(cid, version=version))
        c.expect(m.CONNACK)
        c.send(m.publish("t/d1", payload, qos=1, pid=1, version=version))
        reason = c.expect(m.PUBACK).reason()
        c.send(m.disconnect(version))
        c.close()
        return reason

    def cli(self, *args):
        return run_cli("dlq", *args, "--http", f"127.0.0.1:{self.http}")

    def test_list_show_replay_after_schema_fix_and_purge(self):
        self.assertEqual(self.publish(b'{"temp": 1}'), 0)  # 3.1.1: acknowledged, kept as a dead letter
        r = wait_until(lambda: (lambda r: r if r.returncode == 0 and json.loads(r.stdout)["records"] else None)(
            self.cli("list")), WAIT, "the dead letter listed")
        page = json.loads(r.stdout)
        self.assertEqual(page["checkpoint"], 0)
        self.assertEqual(page["dropped_total"], 0)
        self.assertEqual(len(page["records"]), 1)
        rec = page["records"][0]
        self.assertEqual(rec["payload"], '{"temp": 1}')
        self.assertEqual(rec["payload_encoding"], "utf-8")
        self.assertEqual(rec["mqtt_topic"], "t/d1")
        self.assertEqual(rec["attributes"]["dead_letter.topic"], TELE)
        self.assertEqual(rec["attributes"]["dead_letter.source"], "schema")
        self.assertIn("temperature", rec["attributes"]["dead_letter.error"])
        off = rec["offset"]
        # show, over the API and offline
        r = self.cli("show", str(off))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["payload"], '{"temp": 1}')
        r = run_cli("dlq", "show", str(off), "--dir", os.path.join(self.gw.dir, "wal"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["offset"], off)
        self.assertEqual(self.cli("show", str(off + 5)).returncode, 1)
        status, body = ask(self.http, "GET", "/metrics")
        self.assertIn(f'tributary_dead_letters_total{{topic="{TELE}",reason="invalid_schema"}} 1', body)
        # replay while the schema still refuses it: refused, not dead-lettered a second time
        r = self.cli("replay", "--from", str(off), "--to", str(off))
        self.assertEqual(r.returncode, 0, r.stderr)
        ans = json.loads(r.stdout)
        self.assertEqual(ans["stored"], [])
        self.assertTrue(ans["durable"], ans)  # nothing stored: nothing to wait for
        self.assertEqual([x["dlq_offset"] for x in ans["refused"]], [off])
        self.assertIn("temperature", ans["refused"][0]["reason"])
        self.assertEqual([x["offset"] for x in json.loads(self.cli("list").stdout)["records"]], [off])
        # the schema fixed in the registry: the heartbeat brings it; a canary (MQTT 5) says when it is in force
        self.mc.control.put_schema("tele", "json_schema", raw=LOOSE)
        wait_until(lambda: self.publish(b'{"canary": 1}', version=5, cid="canary") == 0, WAIT, "the new schema in force")
        r = self.cli("replay", "--from", str(off), "--to", str(off))
        self.assertEqual(r.returncode, 0, r.stderr)
        ans = json.loads(r.stdout)
        self.assertEqual(ans["stored"], [{"dlq_offset": off, "topic": TELE}])
        self.assertEqual(ans["refused"], [])
        # answered once the copy is kept (fsync always: written and synced): in the topic's log now
        self.assertTrue(ans["durable"], ans)
        copies = [x for x in wal_dump(os.path.join(self.gw.dir, "wal"), TELE)
                  if x["attributes"].get("tributary.dlq_offset") == str(off)]
        self.assertEqual(len(copies), 1, "the replayed copy in the topic's log when the answer came")
        got = wait_until(lambda: [x for x in self.mc.store_records(TELE) if x["payload"] == '{"temp": 1}'] or None,
                         WAIT, "the replayed message at the cluster")
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["attributes"]["tributary.dlq_offset"], str(off))
        self.assertNotIn("dead_letter.error", got[0]["attributes"])
        # purge: needs the flag (CLI) and confirm=yes (API); the canaries the old schema refused are dead
        # letters too (MQTT 5: 0x99, kept)
        before = json.loads(self.cli("list").stdout)["records"]
        self.assertGreaterEqual(len(before), 1)
        self.assertTrue(all(x["payload"] == '{"canary": 1}' for x in before[1:]), before)
        last = before[-1]["offset"]
        r = self.cli("purge", "--to", str(last))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--yes", r.stderr)
        status, body = ask(self.http, "POST", f"/admin/dlq/purge?to={last}")
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(self.cli("list").stdout)["records"], before)  # nothing deleted
        r = self.cli("purge", "--to", str(last), "--yes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["purged_to"], last)
        page = json.loads(self.cli("list").stdout)
        self.assertEqual(page["records"], [])
        self.assertEqual(page["checkpoint"], last)
        self.assertEqual(self.cli("show", str(off)).returncode, 1)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_bad_requests(self):
        for method, path in (("GET", "/admin/dlq?limit=0"), ("GET", "/admin/dlq?from=x"),
                             ("POST", "/admin/dlq/replay?from=5&to=2"), ("POST", "/admin/dlq/replay?from=1&to=20000"),
                             ("POST", "/admin/dlq/purge?confirm=yes")):
            status, body = ask(self.http, method, path)
            self.assertEqual(status, 400, (path, body))
        self.assertEqual(run_cli("dlq", "replay", "--from", "1", "--to", "2", "--dir", "/tmp").returncode, 2)
        self.assertEqual(run_cli("dlq", "bogus").returncode, 2)


class DlqBound(unittest.TestCase):
    """mqtt.dead_letter_max_bytes: the dead-letter log's own bound drops its oldest entries, counted."""

    def test_the_bound_drops_the_oldest_and_counts_them(self):
        self.mc = MockCluster(schemas={"tele": {"type": "json_schema", "raw": STRICT}}).start()
        self.addCleanup(self.mc.stop)
        maps = [{"mqtt_pattern": "t/+", "danube_topic": TELE, "schema_subject": "tele",
                 "validation_policy": "enforce"}]
        yaml = edge_yaml(self.mc.grpc_url, maps, wal="fsync: always, segment_bytes: 8KiB").replace(
            '  listener: "127.0.0.1:0"\n', '  listener: "127.0.0.1:0"\n  dead_letter: true\n'
            '  dead_letter_max_bytes: 64KiB\n', 1)
        gw = Gateway(yaml).start()
        self.addCleanup(lambda: gw.proc.poll() is None and (gw.proc.kill(), gw.proc.wait(30)))
        port, http = gw.mqtt_port(), gw.http_port()
        gw.wait_log(f'msg="topic ready" topic={TELE}', WAIT)
        c = m.Raw(port)
        c.send(m.connect("bound"))
        c.expect(m.CONNACK)
        n = 60
        for i in range(1, n + 1):  # 60 x ~2 KiB refused by the schema: ~120 KiB of dead letters for a 64 KiB bound
            c.send(m.publish("t/d1", b'{"temp": %d, "pad": "%s"}' % (i, b"x" * 2000), qos=1, pid=i))
            c.expect(m.PUBACK)
        c.send(m.disconnect())
        c.close()

        def dropped():
            status, body = ask(http, "GET", "/admin/dlq?limit=1000")
            page = json.loads(body)
            return page if status == 200 and page["dropped_total"] > 0 else None
        page = wait_until(dropped, WAIT, "the bound dropping the oldest dead letters")
        offs = [r["offset"] for r in page["records"]]
        self.assertGreater(offs[0], 1, "the oldest went first")
        self.assertEqual(offs, list(range(offs[0], n + 1)), "the newest are all kept, in order")
        self.assertEqual(page["dropped_total"] + len(offs), n, "each dead letter kept or counted dropped")
        status, body = ask(http, "GET", "/metrics")
        self.assertIn(f"tributary_dead_letter_log_dropped_total {page['dropped_total']}\n", body)
        self.assertEqual(gw.stop(), 0, gw.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
