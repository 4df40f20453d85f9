"""Retiring and forgetting a topic through the admin API (issue 19,
docs/design/RELOAD.md 4.6): a reload removes /e1/b's mapping while the mock
cluster is away, so its backlog stays; `tributary admin retire` is refused
409 with that backlog, `tributary admin forget --delete-unreplicated` deletes
it (the directory goes, the RETIRED entry is flagged forgot with the count,
/stats says retired and counts the messages as dropped, reason forgotten, so
the accounting invariant holds). A still-mapped topic is refused 409, an
unknown one 404, and the offline `tributary wal retire|forget` name the admin
commands while the gateway holds the LOCK. With `wal.retire: keep` a kept
topic is retired through the admin API."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import run_cli, wait_for  # noqa: E402
from tlib.replication import publish_all  # noqa: E402
from tlib.reloads import A, B, WAIT, RetireCase, ask  # noqa: E402


class AdminRetire(RetireCase):
    def admin(self, g, *args):
        return run_cli("admin", *args, "--http", f"127.0.0.1:{g.http_port()}")

    def test_retire_refuses_a_backlog_and_forget_deletes_it(self):
        g = self.start_gateway([A, B])
        port = g.mqtt_port()
        self.mc.control.fault(mode="unavailable")
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(40)], client_id="f1")
        ans = self.reload(g, [A])
        self.assertEqual([t["topic"] for t in ans["topics"]["retiring"]], ["/e1/b"], ans)

        # the offline commands, while the gateway holds the LOCK, name the admin ones
        wal = os.path.join(g.dir, "wal")
        r = run_cli("wal", "forget", "/e1/b", "--dir", wal, "--delete-unreplicated")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("tributary admin forget /e1/b --delete-unreplicated", r.stderr)
        r = run_cli("wal", "retire", "/e1/b", "--dir", wal)
        self.assertIn("tributary admin retire /e1/b", r.stderr)

        # retire: refused with its backlog (the cluster is away: every b message)
        r = self.admin(g, "retire", "/e1/b")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("answered 409", r.stderr)
        doc = json.loads(r.stderr.split(": ", 2)[2])
        self.assertEqual((doc["state"], doc["backlog_messages"]), ("retiring", 40), doc)
        self.assertGreater(doc["backlog_bytes"], 0, doc)
        # still mapped, unknown, no flag, no confirm=yes: refused, nothing changes
        r = self.admin(g, "retire", "/e1/a")
        self.assertEqual(r.returncode, 1)
        self.assertIn("409", r.stderr)
        self.assertIn("still mapped: remove its mapping and reload first", r.stderr)
        self.assertEqual(ask(g.http_port(), "POST", "/admin/topics/e1/a/forget?confirm=yes")[0], 409)
        self.assertEqual(ask(g.http_port(), "POST", "/admin/topics/e1/nope/retire")[0], 404)
        self.assertEqual(self.admin(g, "forget", "/e1/b").returncode, 2)
        status, body = ask(g.http_port(), "POST", "/admin/topics/e1/b/forget")
        self.assertEqual(status, 400, body)
        self.assertEqual(self.topics(g)[0]["/e1/b"]["state"], "retiring")
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))

        # forget: accepted (202 "removing"), then retired with its backlog deleted
        r = self.admin(g, "forget", "/e1/b", "--delete-unreplicated")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["topic"], doc["was"], doc["backlog_messages"]), ("/e1/b", "retiring", 40), doc)
        self.assertIn(doc["state"], ("removing", "retired"), doc)
        tp = self.wait_state(g, "/e1/b", "retired", "/e1/b forgotten")
        b = tp["/e1/b"]
        self.assertEqual((b["received"], b["replicated"], b["queued"]), (40, 0, 0), b)
        self.assertEqual(b["dropped_by_reason"]["forgotten"], 40, b)
        self.assertEqual(b["dropped"], 40, b)
        self.assertTrue(b["invariant_ok"], b)
        self.assertFalse(os.path.exists(self.wal_dir(g, "/e1/b")), "its directory removed")
        e = self.tomb(g, "/e1/b")
        self.assertEqual((e["next"], e["checkpoint"], e["forgotten"], e["forgot"]), (41, 0, 40, True), e)
        self.assertIn("retire: topic forgotten", g.log())
        _, metrics = ask(g.http_port(), "GET", "/metrics")
        self.assertIn('tributary_messages_dropped_total{topic="/e1/b",reason="forgotten"} 40\n', metrics)
        self.assertIn("tributary_wal_topics_retired_total 1\n", metrics)
        # again: already retired, 200
        r = self.admin(g, "retire", "/e1/b")
        self.assertEqual((r.returncode, json.loads(r.stdout)["state"]), (0, "retired"), r.stderr)

        # the other topic is untouched: the cluster back, /e1/a replicates
        self.mc.control.fault(mode="normal")
        publish_all(port, [("a/d1", json.dumps({"n": n})) for n in range(10)], client_id="f2")
        wait_for(lambda: len(self.mc.store_records("/e1/a")) >= 10, timeout=WAIT, what="/e1/a replicated")
        self.assertEqual(self.mc.store_records("/e1/b"), [], "nothing of the forgotten topic was sent")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])

    def test_forget_while_batches_are_in_flight(self):
        """The cluster takes the batches but acknowledges them late: /e1/b's are in flight
        when it is forgotten. Its lane lets go of them; the gateway runs on, /e1/a replicates,
        and the stop is clean (the sanitizer build checks nothing is used after it is freed)."""
        g = self.start_gateway([A, B])
        port = g.mqtt_port()
        self.mc.control.fault(ack_delay_ms=2000)
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(30)], client_id="i1")
        wait_for(lambda: self.topics(g)[0]["/e1/b"]["batches_in_flight"] > 0, timeout=WAIT, what="b in flight")
        self.reload(g, [A])
        r = self.admin(g, "forget", "/e1/b", "--delete-unreplicated")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(json.loads(r.stdout)["backlog_messages"], 0, r.stdout)
        tp = self.wait_state(g, "/e1/b", "retired", "/e1/b forgotten with batches in flight")
        b = tp["/e1/b"]
        self.assertEqual(b["received"], 30, b)
        self.assertEqual(b["replicated"] + b["dropped"], 30, b)
        self.assertEqual(b["queued"], 0, b)
        self.assertTrue(b["invariant_ok"], b)
        e = self.tomb(g, "/e1/b")
        self.assertEqual((e["next"], e["checkpoint"] + e["forgotten"]), (31, 30), e)
        self.assertGreater(e["forgotten"], 0, e)
        self.mc.control.fault(ack_delay_ms=0)
        publish_all(port, [("a/d1", json.dumps({"n": n})) for n in range(10)], client_id="i2")
        wait_for(lambda: len(self.mc.store_records("/e1/a")) >= 10, timeout=WAIT, what="/e1/a replicated")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])

    def test_a_kept_topic_is_retired_through_the_admin_api(self):
        g = self.start_gateway([A, B], retire="keep")
        publish_all(g.mqtt_port(), [("b/d1", json.dumps({"n": n})) for n in range(20)], client_id="k")
        wait_for(lambda: len(self.mc.store_records("/e1/b")) >= 20, timeout=WAIT, what="every b message")
        self.reload(g, [A], retire="keep")
        self.wait_state(g, "/e1/b", "kept", "/e1/b drained and kept")
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))
        r = self.admin(g, "retire", "/e1/b")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["was"], doc["backlog_messages"]), ("kept", 0), doc)
        tp = self.wait_state(g, "/e1/b", "retired", "the kept topic retired")
        self.assertEqual((tp["/e1/b"]["received"], tp["/e1/b"]["replicated"]), (20, 20), tp["/e1/b"])
        self.assertFalse(os.path.exists(self.wal_dir(g, "/e1/b")), "its directory removed")
        e = self.tomb(g, "/e1/b")
        self.assertEqual((e["next"], e["checkpoint"], e["forgotten"], e["forgot"]), (21, 20, 0, False), e)
        self.assertEqual(len(self.mc.store_records("/e1/b")), 20, "nothing sent twice")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
