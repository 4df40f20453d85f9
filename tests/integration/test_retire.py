"""Retiring a topic online (issue 19, docs/design/RELOAD.md 4): a reload
removes a topic's last mapping while publishers run and the cluster is
away, so the topic has a backlog; once the cluster is back its backlog
reaches the mock cluster (every message, once, offsets 1..N in order), then
its directory is removed and <wal.dir>/RETIRED holds its next offset, while
the other topic lost nothing. Mapping the name again continues above the
retired offsets (the mock's dedup marker would swallow a reused offset).
With `wal.retire: keep` the drained directory stays, and switching to
`remove` retires it. A mapping restored before the drain ends keeps the
topic as it was (never retired)."""
import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib.replication import Publisher, publish_all  # noqa: E402
from tlib.reloads import A, B, WAIT, RetireCase, ask  # noqa: E402

CLIENTS = 2
RATE = 150         # per client: 300 msg/s in all, alternating a/cI and b/cI
STEP = 150         # messages per client between two steps of a test (~1 s)


class Retire(RetireCase):
    def stored(self, topic, expect, what):
        wait_for(lambda: len(self.mc.store_records(topic)) >= expect, timeout=WAIT, what=what)
        recs = self.mc.store_records(topic)
        self.assertEqual(len(recs), expect, f"{topic}: {what}")
        return recs

    def assert_once_in_order(self, recs, what):
        """Offsets 1..N once each, and per client the payload numbers ascending."""
        self.assertEqual(sorted(r["offset"] for r in recs), list(range(1, len(recs) + 1)), f"{what}: offsets")
        per = {}
        for r in sorted(recs, key=lambda r: r["offset"]):
            per.setdefault(r["attributes"]["dev"], []).append(json.loads(r["payload"])["n"])
        for dev, ns in per.items():
            self.assertEqual(ns, sorted(set(ns)), f"{what}: {dev} once each, in order")
        return per

    # ---- retired after the drain, under load -------------------------------------

    def test_a_removed_topic_is_retired_once_its_backlog_drained(self):
        g = self.start_gateway([A, B])
        port = g.mqtt_port()
        pubs = [Publisher(port, (lambda i: lambda n: f"{'ab'[n % 2]}/c{i}")(i), rate=RATE, client_id=f"c{i}")
                for i in range(CLIENTS)]
        for p in pubs:
            p.start()
        t0 = time.monotonic()

        def more(k):
            mark = [p.sent for p in pubs]
            wait_for(lambda: all(p.sent >= m + k for p, m in zip(pubs, mark)), timeout=WAIT, what="load")
        more(STEP)
        self.mc.control.fault(mode="unavailable")  # an outage: both topics build a backlog
        more(STEP)
        ans = self.reload(g, [A])
        retiring = ans["topics"]["retiring"]
        self.assertEqual([t["topic"] for t in retiring], ["/e1/b"], ans)
        self.assertGreater(retiring[0]["backlog_messages"], 0, f"a backlog at the reload: {ans}")
        more(STEP)  # b/+ is unmatched now
        tp, _ = self.topics(g)
        self.assertEqual(tp["/e1/b"]["state"], "retiring", "not retired while its backlog waits")
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))
        self.mc.control.fault(mode="normal")
        more(STEP)
        for p in pubs:
            p.stop(WAIT)
            self.assertEqual(len(p.acked()), p.sent, "every message acknowledged")
        elapsed = time.monotonic() - t0
        total = sum(p.sent for p in pubs)
        print(f"\n  load: {total} messages in {elapsed:.1f} s = {total / elapsed:.0f} msg/s", file=sys.stderr)

        tp = self.wait_state(g, "/e1/b", "retired", "/e1/b retired once drained")
        n_b = tp["/e1/b"]["received"]
        self.assertGreater(n_b, 0)
        self.assertEqual(tp["/e1/b"]["replicated"], n_b, "its counters stay: every message replicated")
        recs = self.stored("/e1/b", n_b, "the removed topic's whole backlog")
        per = self.assert_once_in_order(recs, "/e1/b")
        _, st = self.topics(g)
        sent_b = sum(p.sent // 2 for p in pubs)
        self.assertEqual(n_b + st["unmatched"], sent_b, "each b message routed to /e1/b or dropped as unmatched")
        for i, p in enumerate(pubs):
            ns = per[f"c{i}"]
            self.assertEqual(ns, [n for n in range(p.sent) if n % 2 == 1][:len(ns)], f"c{i}: a prefix of its b")
        n_a = sum((p.sent + 1) // 2 for p in pubs)
        self.assert_once_in_order(self.stored("/e1/a", n_a, "every a message, exactly once"), "/e1/a")

        self.assertFalse(os.path.exists(self.wal_dir(g, "/e1/b")), "its directory removed")
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/a")))
        e = self.tomb(g, "/e1/b")
        self.assertIsNotNone(e, "a RETIRED entry")
        self.assertEqual((e["next"], e["checkpoint"], e["dropped"], e["forgotten"]), (n_b + 1, n_b, 0, 0), e)
        log = g.log()
        self.assertIn("retire: a topic no mapping routes to is drained", log)
        m = re.search(r'msg="retire: topic retired[^\n]*topic=/e1/b[^\n]*bytes_freed=(\d+) next_offset=(\d+)', log)
        self.assertIsNotNone(m, log[-3000:])
        self.assertGreater(int(m.group(1)), 0)
        self.assertEqual(int(m.group(2)), n_b + 1)
        _, metrics = ask(g.http_port(), "GET", "/metrics")
        self.assertIn("tributary_wal_topics_retired_total 1\n", metrics)
        self.assertIn("tributary_wal_topics_retiring 0\n", metrics)

        # mapped again: a new log continuing above the retired offsets, and replicated
        ans = self.reload(g, [A, B])
        self.assertEqual(ans["topics"]["revived"], ["/e1/b"], ans)
        publish_all(port, [(f"b/again", json.dumps({"n": n})) for n in range(20)], client_id="again")
        recs = self.stored("/e1/b", n_b + 20, "the re-created topic's messages, none swallowed as duplicates")
        again = sorted((r for r in recs if r["attributes"]["dev"] == "again"), key=lambda r: r["offset"])
        self.assertEqual([r["offset"] for r in again], list(range(n_b + 1, n_b + 21)), "offsets continue")
        self.assertEqual([json.loads(r["payload"])["n"] for r in again], list(range(20)))
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))
        self.assertIsNone(self.tomb(g, "/e1/b"), "the entry is dropped once re-created")
        tp = self.wait_state(g, "/e1/b", "idle", "live again, caught up")
        self.assertEqual(tp["/e1/b"]["received"], n_b + 20, "its counters continue")
        self.assertEqual(tp["/e1/b"]["replicated"], n_b + 20, "its counters continue")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])

    # ---- wal.retire: keep, then remove -----------------------------------------------

    def test_keep_leaves_the_drained_directory_and_remove_retires_it(self):
        g = self.start_gateway([A, B], retire="keep")
        port = g.mqtt_port()
        publish_all(port, [(f"{'ab'[n % 2]}/d1", json.dumps({"n": n})) for n in range(200)], client_id="k")
        self.stored("/e1/b", 100, "every b message")
        self.reload(g, [A], retire="keep")
        self.wait_state(g, "/e1/b", "kept", "/e1/b drained and kept")
        self.assertIn("retire: topic drained and kept", g.log())
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")), "its directory stays")
        self.assertIsNone(self.tomb(g, "/e1/b"))
        wait_for(lambda: list(self.mc.control.registrations()["edges"]["e1"]["topics"]) == ["/e1/a"],
                 timeout=WAIT, what="the edge registered again without /e1/b")
        # mapped again while kept: the kept log is taken again and replicated on from 101
        ans = self.reload(g, [A, B], retire="keep")
        self.assertEqual(ans["topics"]["revived"], ["/e1/b"], ans)
        publish_all(port, [("b/d2", json.dumps({"n": n})) for n in range(10)], client_id="k2")
        recs = self.stored("/e1/b", 110, "the kept topic replicated again")
        self.assertEqual(sorted(r["offset"] for r in recs), list(range(1, 111)), "offsets continue, none twice")
        self.reload(g, [A], retire="keep")
        wait_for(lambda: g.log().count("retire: topic drained and kept") == 2, timeout=WAIT,
                 what="kept again once drained")  # the log: /stats may answer a render of 250 ms ago
        ans = self.reload(g, [A], retire="remove")
        self.assertIn("wal.retire", ans["applied"], ans)
        self.wait_state(g, "/e1/b", "retired", "a kept topic retired once wal.retire is remove")
        self.assertFalse(os.path.exists(self.wal_dir(g, "/e1/b")))
        e = self.tomb(g, "/e1/b")
        self.assertEqual((e["next"], e["checkpoint"]), (111, 110), e)
        self.assertEqual(len(self.mc.store_records("/e1/b")), 110, "nothing sent twice")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])

    # ---- mapped again before the drain ended ----------------------------------------

    def test_a_mapping_restored_before_the_drain_keeps_the_topic(self):
        g = self.start_gateway([A, B])
        port = g.mqtt_port()
        self.mc.control.fault(mode="unavailable")
        publish_all(port, [(f"b/d1", json.dumps({"n": n})) for n in range(50)], client_id="r1")
        self.reload(g, [A])
        tp, _ = self.topics(g)
        self.assertEqual(tp["/e1/b"]["state"], "retiring")
        ans = self.reload(g, [A, B])
        self.assertEqual(ans["topics"]["revived"], ["/e1/b"], ans)
        self.mc.control.fault(mode="normal")
        publish_all(port, [(f"b/d1", json.dumps({"n": n})) for n in range(50, 80)], client_id="r2")
        recs = self.stored("/e1/b", 80, "every message, the same topic all along")
        self.assert_once_in_order(recs, "/e1/b")
        self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))
        self.assertNotIn("retire: topic retired", g.log())
        self.assertEqual(g.stop(), 0, g.log()[-3000:])

    # ---- orphans at boot --------------------------------------------------------------

    def test_orphans_at_boot_are_replicated_until_drained_then_retired(self):
        """Mappings removed across a restart (RELOAD.md 4.7): /e1/c was replicated before
        the stop (drained: retired at once), /e1/b has a backlog (the cluster was away):
        replicated after the restart, then retired; both RETIRED entries say where they ended."""
        C = {"mqtt_pattern": "c/+", "danube_topic": "/e1/c", "extract_attributes": {"dev": "$1"}}
        g = self.start_gateway([A, B, C])
        port = g.mqtt_port()
        publish_all(port, [("c/d1", json.dumps({"n": n})) for n in range(30)], client_id="o1")
        self.stored("/e1/c", 30, "the c messages before the stop")
        self.mc.control.fault(mode="unavailable")
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(40)], client_id="o2")
        self.assertEqual(g.stop(), 0, g.log()[-3000:])
        self.assertEqual(self.mc.store_records("/e1/b"), [], "nothing of b reached the cluster")
        self.mc.control.fault(mode="normal")
        g.write_config(self.yaml([A]))
        g.start()
        wait_for(lambda: "bootstrap complete" in g.run_log(), timeout=WAIT, what="the second start")
        self.assertIn("a topic directory no mapping names: replicated until drained, then retired", g.run_log())
        self.wait_state(g, "/e1/c", "retired", "the drained orphan retired")
        self.wait_state(g, "/e1/b", "retired", "the orphan with a backlog replicated, then retired")
        self.assert_once_in_order(self.stored("/e1/b", 40, "the orphan's whole backlog"), "/e1/b")
        self.assertEqual(len(self.mc.store_records("/e1/c")), 30, "nothing of c sent again")
        for topic, n in (("/e1/b", 40), ("/e1/c", 30)):
            self.assertFalse(os.path.exists(self.wal_dir(g, topic)), topic)
        self.assertEqual(g.stop(), 0, g.log()[-3000:])
        for topic, n in (("/e1/b", 40), ("/e1/c", 30)):
            e = self.tomb(g, topic)
            self.assertEqual((e["next"], e["checkpoint"]), (n + 1, n), e)

    # ---- every output must have it ------------------------------------------------------

    def test_retired_only_once_every_output_has_the_backlog(self):
        """Two outputs carry /e1/b: the mock cluster and an MQTT output to a real Mosquitto.
        The remote is SIGSTOPped (it takes bytes, acknowledges nothing): after the reload the
        cluster has every b message but the topic stays retiring, its directory there; once
        the remote resumes it gets every b message too, and only then is the topic retired."""
        import signal
        import tempfile
        from tlib.mosq import Mosquitto, Recorder
        work = tempfile.mkdtemp(prefix="trib-retire-mq-")
        remote = Mosquitto(work).start()
        self.addCleanup(remote.stop)
        rec = Recorder(remote.port, "fwd/#")
        self.addCleanup(rec.close)
        outputs = ("outputs:\n  - {name: danube, kind: danube}\n"
                   f"  - {{name: central, kind: mqtt, broker: \"127.0.0.1:{remote.port}\", protocol: 5, qos: 1, "
                   "client_id: edge1-central, remote_topic: \"fwd${upstream}\", max_inflight: 20}\n")
        yaml = lambda maps: self.yaml(maps) + outputs  # noqa: E731
        g = Gateway(yaml([A, B]), workdir=work)
        g.start()
        self.addCleanup(lambda: g.proc.poll() is None and g.stop())
        g.wait_log("bootstrap complete", timeout=WAIT)
        port = g.mqtt_port()
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(10)], client_id="m0")
        rec.wait_unique(10, WAIT)
        remote.proc.send_signal(signal.SIGSTOP)
        try:
            publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(10, 60)], client_id="m1")
            self.stored("/e1/b", 60, "the cluster has every b message")
            g.write_config(yaml([A]))
            status, body = ask(g.http_port(), "POST", "/admin/reload")
            self.assertEqual(status, 200, body)
            deadline = time.monotonic() + 1.5  # more than a retire tick: the MQTT output still lacks them
            while time.monotonic() < deadline:
                self.assertEqual(self.topics(g)[0]["/e1/b"]["state"], "retiring")
                time.sleep(0.1)
            self.assertTrue(os.path.isdir(self.wal_dir(g, "/e1/b")))
        finally:
            remote.proc.send_signal(signal.SIGCONT)
        rec.wait_unique(60, WAIT)
        self.wait_state(g, "/e1/b", "retired", "retired once the MQTT output has them too")
        got = sorted({json.loads(p)["n"] for t, p, _ in rec.snapshot() if t == "fwd/e1/b"})
        self.assertEqual(got, list(range(60)), "the remote has every b message")
        self.assertEqual(len(self.mc.store_records("/e1/b")), 60)
        self.assertFalse(os.path.exists(self.wal_dir(g, "/e1/b")))
        self.assertEqual(self.tomb(g, "/e1/b")["next"], 61)
        # mapped again: both outputs carry the re-created topic at once (the mqtt output takes a
        # released topic back like a new one), its offsets above the retired ones
        g.write_config(yaml([A, B]))
        status, body = ask(g.http_port(), "POST", "/admin/reload")
        self.assertEqual(status, 200, body)
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(60, 80)], client_id="m2")
        rec.wait_unique(80, WAIT)
        got = sorted({json.loads(p)["n"] for t, p, _ in rec.snapshot() if t == "fwd/e1/b"})
        self.assertEqual(got, list(range(80)), "the remote has the re-created topic's messages too")
        self.stored("/e1/b", 80, "the cluster has them")
        self.assertEqual(sorted(r["offset"] for r in self.mc.store_records("/e1/b"))[60:], list(range(61, 81)))
        self.assertEqual(g.stop(), 0, g.log()[-3000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
