"""Live mapping reload (issue 19, docs/design/RELOAD.md 2): under load from
publishers on persistent connections (~2,000 msg/s in all, QoS 1), a reload
adds, removes or reorders mappings, and the mock cluster's store is checked
message by message: every message acknowledged by the gateway is routed by
the old rules or by the new ones (never by neither), arrives exactly once on
the topic that generation routes it to, and no connection is closed. A file
that fails `check` is refused whole (file, line and key in the answer) and
the running routing stays."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib.mock import MockCluster  # noqa: E402
from tlib.replication import Publisher, edge_yaml  # noqa: E402
from tlib import tls  # noqa: E402
from tlib.reloads import ask  # noqa: E402

WAIT = 90          # seconds: the bound of the long waits (sanitizer builds on a shared box are slow)
CLIENTS = 4
RATE = 500         # per client: 2,000 msg/s in all
PHASE_S = 2.0      # load before and after the reload


class CountingPublisher(Publisher):
    """tlib's paced QoS 1 publisher that also counts its connections: paho
    reconnects on its own, so a reconnect would otherwise go unnoticed."""

    def __init__(self, port, topic_of, client_id):
        self.disconnects = 0
        super().__init__(port, topic_of, rate=RATE, client_id=client_id, inflight=400)
        self.c.on_disconnect = self._on_disconnect

    def _on_disconnect(self, client, userdata, rc, *rest):
        self.disconnects += 1


class ReloadMappings(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster().start()
        self.addCleanup(self.mc.stop)

    def yaml(self, mappings, unmatched="drop"):
        return edge_yaml(self.mc.grpc_url, mappings, edge="e1", wal="fsync: never",
                         extra="log: {level: info}\n").replace(
            "  ingestion: {batch_timeout_ms: 5}\n",
            f"  ingestion: {{batch_timeout_ms: 5}}\n  unmatched: {unmatched}\n")

    def start_gateway(self, mappings):
        g = Gateway(self.yaml(mappings))
        g.start()
        self.addCleanup(lambda: g.proc.poll() is None and g.stop())
        g.wait_log("bootstrap complete", timeout=WAIT)
        return g

    def reload(self, g, mappings=None, text=None):
        g.write_config(text if text is not None else self.yaml(mappings))
        status, body = ask(g.http_port(), "POST", "/admin/reload")
        return status, json.loads(body)

    def settle(self, g, cond, what):
        """/stats once cond(topics by name, stats) holds (its counters are a
        snapshot that may trail the last PUBACK by a collection)."""
        box = {}

        def ok():
            st = box["st"] = self.stats(g)
            return cond({t["topic"]: t for t in st["topics"]}, st)
        try:
            wait_for(ok, timeout=WAIT, interval=0.1, what=what)
        except Exception:
            self.fail(f"{what}: /stats says {json.dumps(box.get('st'))[:3000]}")
        st = box["st"]
        return {t["topic"]: t for t in st["topics"]}, st

    def stats(self, g):
        status, body = ask(g.http_port(), "GET", "/stats")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def run_load(self, g, topic_of, between):
        """CLIENTS publishers (client i publishes topic_of(i, n) for its n =
        0, 1, ...) for PHASE_S, then between() (the reload), then PHASE_S
        more; waits for every PUBACK. Returns (publishers, answer of between,
        the n each client had sent when between() began and when it returned)."""
        port = g.mqtt_port()
        pubs = [CountingPublisher(port, (lambda i: lambda n: topic_of(i, n))(i), f"c{i}") for i in range(CLIENTS)]
        for p in pubs:
            p.start()
        t0 = time.monotonic()
        wait_for(lambda: min(p.sent for p in pubs) >= RATE * PHASE_S, timeout=WAIT, what="load before the reload")
        before = [p.sent for p in pubs]
        ans = between()
        after = [p.sent for p in pubs]
        wait_for(lambda: all(p.sent >= a + RATE * PHASE_S for p, a in zip(pubs, after)), timeout=WAIT,
                 what="load after the reload")
        elapsed = time.monotonic() - t0
        for p in pubs:
            self.assertEqual(p.disconnects, 0, f"{p.c._client_id}: its connection was closed")
        st = self.stats(g)
        self.assertEqual(st["connections"]["mqtt"], CLIENTS, "every publisher's connection is still open")
        self.assertEqual(st["connections"]["mqtt_accepted"], CLIENTS, "and none was opened again")
        for p in pubs:
            p.stop(WAIT)
        total = sum(p.sent for p in pubs)
        print(f"\n  load: {total} messages from {CLIENTS} connections in {elapsed:.1f} s "
              f"= {total / elapsed:.0f} msg/s", file=sys.stderr)
        for p in pubs:
            self.assertEqual(len(p.acked()), p.sent)
        return pubs, ans, before, after

    def stored(self, topic, expect, what):
        """The mock's records of topic once it holds `expect` of them (and
        not more: a short settle after reaching it)."""
        wait_for(lambda: len(self.mc.store_records(topic)) >= expect, timeout=WAIT, what=what)
        recs = self.mc.store_records(topic)
        self.assertEqual(len(recs), expect, f"{topic}: {what}")
        return recs

    @staticmethod
    def by_client(recs):
        """{client: sorted list of n} of stored records (attribute dev = the client)."""
        out = {}
        for r in recs:
            out.setdefault(r["attributes"]["dev"], []).append(json.loads(r["payload"])["n"])
        return {k: sorted(v) for k, v in out.items()}

    def assert_once(self, recs, what):
        seen = set()
        for r in recs:
            key = (r["attributes"]["dev"], json.loads(r["payload"])["n"])
            self.assertNotIn(key, seen, f"{what}: {key} stored twice")
            seen.add(key)

    # ---- add -----------------------------------------------------------------

    def test_add_a_mapping_under_load(self):
        """Each client alternates a/cI and b/cI. Before the reload b/+ has no
        mapping (mqtt.unmatched: drop: acknowledged, dropped, counted); the
        reload adds it. /e1/a gets every a message exactly once; /e1/b gets,
        per client, exactly the b messages from some point on (a step: the
        swap falls between two messages), none of those lost, and the new
        topic is registered, replicated and has its /stats entry."""
        g = self.start_gateway([{"mqtt_pattern": "a/+", "danube_topic": "/e1/a",
                                 "extract_attributes": {"dev": "$1"}}])
        both = [{"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}},
                {"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}}]
        pubs, (status, ans), before, after = self.run_load(
            g, lambda i, n: f"{'ab'[n % 2]}/c{i}", lambda: self.reload(g, both))
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        self.assertEqual(ans["generation"], 2, ans)
        self.assertEqual(ans["rules"], {"before": 1, "after": 2}, ans)
        self.assertEqual(ans["topics"]["added"], [{"topic": "/e1/b", "registration": "pending"}], ans)
        self.assertIn("mqtt.topic_mappings", ans["applied"], ans)
        self.assertEqual(ans["restart_needed"], [], ans)
        n_a = sum((p.sent + 1) // 2 for p in pubs)
        a = self.stored("/e1/a", n_a, "every a message, exactly once")
        self.assert_once(a, "/e1/a")
        sent_b_all = sum(p.sent // 2 for p in pubs)
        topics, st = self.settle(g, lambda tp, st: "/e1/b" in tp and st["unmatched"] + tp["/e1/b"]["received"]
                                 == sent_b_all, "each b message dropped as unmatched or routed to /e1/b")
        n_b = topics["/e1/b"]["received"]
        self.assertGreater(n_b, 0)
        b = self.stored("/e1/b", n_b, "every b message routed after the reload")
        self.assert_once(b, "/e1/b")
        per = self.by_client(b)
        for i, p in enumerate(pubs):
            ns = per.get(f"c{i}", [])
            sent_b = [n for n in range(p.sent) if n % 2 == 1]
            self.assertTrue(ns, f"c{i}: no b message arrived after the reload")
            # a step: every b message from the first stored one on, none missing
            self.assertEqual(ns, [n for n in sent_b if n >= ns[0]], f"c{i}: b messages after the swap lost")
            self.assertLessEqual(ns[0], after[i] + 1, f"c{i}: routed late")
            self.assertGreaterEqual(ns[0], min(before[i], after[i]) - 400, f"c{i}: routed before the reload?")
        status, metrics = ask(g.http_port(), "GET", "/metrics")
        self.assertIn('tributary_messages_received_total{topic="/e1/b"} %d' % n_b, metrics,
                      "the new topic's series are exported")
        regs = self.mc.control.registrations()
        self.assertIn("/e1/b", json.dumps(regs), "registered with the cluster at the reload")
        self.assertEqual(g.stop(), 0, g.log())

    # ---- remove --------------------------------------------------------------

    def test_remove_a_mapping_under_load(self):
        """Both mappings at the start; the reload removes b/+. /e1/a: every
        message once. /e1/b: per client a prefix of its b messages (a step),
        every one the old rules routed reaches the cluster (its backlog
        keeps replicating), the rest are dropped as unmatched: the two
        counts add up to what was sent."""
        both = [{"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}},
                {"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}}]
        g = self.start_gateway(both)
        pubs, (status, ans), before, after = self.run_load(
            g, lambda i, n: f"{'ab'[n % 2]}/c{i}", lambda: self.reload(g, both[:1]))
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        self.assertEqual([t["topic"] for t in ans["topics"]["retiring"]], ["/e1/b"], ans)
        n_a = sum((p.sent + 1) // 2 for p in pubs)
        a = self.stored("/e1/a", n_a, "every a message, exactly once")
        self.assert_once(a, "/e1/a")
        sent_b_all = sum(p.sent // 2 for p in pubs)
        topics, st = self.settle(g, lambda tp, st: st["unmatched"] + tp["/e1/b"]["received"] == sent_b_all and
                                 tp["/e1/b"]["replicated"] == tp["/e1/b"]["received"],
                                 "each b message routed to /e1/b (and replicated) or dropped as unmatched")
        n_b = topics["/e1/b"]["received"]
        b = self.stored("/e1/b", n_b, "the removed topic's backlog, replicated")
        self.assert_once(b, "/e1/b")
        per = self.by_client(b)
        for i, p in enumerate(pubs):
            ns = per.get(f"c{i}", [])
            sent_b = [n for n in range(p.sent) if n % 2 == 1]
            self.assertTrue(ns)
            self.assertEqual(ns, sent_b[:len(ns)], f"c{i}: a prefix of its b messages")
            self.assertGreaterEqual(ns[-1], before[i] - 400, f"c{i}: stopped routing before the reload?")
        self.assertEqual(g.stop(), 0, g.log())

    # ---- reorder -------------------------------------------------------------

    def test_reorder_two_overlapping_rules_under_load(self):
        """s/cI/x matches both s/+/x (-> /e1/one) and s/# (-> /e1/two); the
        first rule in the file wins. Swapping them moves the messages from
        /e1/one to /e1/two: each message arrives on exactly one of them, and
        per client the order is one..one, two..two (old routing, then new)."""
        one = {"mqtt_pattern": "s/+/x", "danube_topic": "/e1/one", "extract_attributes": {"dev": "$1"}}
        two = {"mqtt_pattern": "s/#", "danube_topic": "/e1/two", "extract_attributes": {"dev": "$#"}}
        g = self.start_gateway([one, two])
        # s/# captures "cI/x" as $#: the attribute dev differs per rule, so use the payload's n and the client
        pubs, (status, ans), before, after = self.run_load(
            g, lambda i, n: f"s/c{i}/x", lambda: self.reload(g, [two, one]))
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        self.assertEqual(ans["topics"]["added"], [], ans)
        self.assertEqual(ans["topics"]["retiring"], [], ans)
        total = sum(p.sent for p in pubs)
        topics, st = self.settle(g, lambda tp, st: tp["/e1/one"]["received"] + tp["/e1/two"]["received"] == total,
                                 "each message routed to exactly one topic")
        n1, n2 = topics["/e1/one"]["received"], topics["/e1/two"]["received"]
        self.assertEqual(st["unmatched"], 0)
        r1 = self.stored("/e1/one", n1, "old routing")
        r2 = self.stored("/e1/two", n2, "new routing")
        c1 = {}
        for r in r1:
            c1.setdefault(r["attributes"]["dev"], []).append(json.loads(r["payload"])["n"])
        c2 = {}
        for r in r2:
            c2.setdefault(r["attributes"]["dev"].split("/")[0], []).append(json.loads(r["payload"])["n"])
        for i, p in enumerate(pubs):
            old, new = sorted(c1.get(f"c{i}", [])), sorted(c2.get(f"c{i}", []))
            self.assertEqual(old + new, list(range(p.sent)), f"c{i}: each message once, old rules then new")
            self.assertTrue(old and new, f"c{i}: both generations routed some")
        self.assertEqual(g.stop(), 0, g.log())

    # ---- a schema subject changes ------------------------------------------------

    def test_a_changed_schema_subject_is_enforced_from_the_swap(self):
        """An enforce mapping's subject goes from one requiring "n" to one
        requiring "v": after the reload a payload with only "n" is refused
        (0x99) and one with only "v" stored, with the new schema's id
        stamped; no message is checked against the old subject. A new
        topic added in the same reload is registered with its own subject."""
        from tlib import mqttraw as m
        self.mc.stop()
        self.mc = MockCluster(schemas={
            "need-n": {"type": "json_schema", "raw": {"type": "object", "required": ["n"]}},
            "need-v": {"type": "json_schema", "raw": {"type": "object", "required": ["v"]}}}).start()
        self.addCleanup(self.mc.stop)
        maps = lambda subj: [{"mqtt_pattern": "e/+", "danube_topic": "/e1/strict", "schema_subject": subj,
                              "validation_policy": "enforce", "extract_attributes": {"dev": "$1"}}]
        g = self.start_gateway(maps("need-n"))
        g.wait_log('msg="topic ready" topic=/e1/strict', WAIT)
        c = m.Raw(g.mqtt_port())
        c.send(m.connect("sub-change", version=5))
        c.expect(m.CONNACK)
        pid = [0]

        def pub(payload):
            pid[0] += 1
            c.send(m.publish("e/d1", payload, qos=1, pid=pid[0], version=5))
            return c.expect(m.PUBACK).reason()
        self.assertEqual(pub('{"n": 1}'), 0)
        self.assertEqual(pub('{"v": "x"}'), 0x99)
        more = maps("need-v") + [{"mqtt_pattern": "f/+", "danube_topic": "/e1/fresh", "schema_subject": "need-n",
                                  "validation_policy": "enforce", "extract_attributes": {"dev": "$1"}}]
        status, ans = self.reload(g, more)
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        self.assertEqual(ans["topics"]["changed"], [{"topic": "/e1/strict", "keys": ["schema_subject"]}], ans)
        self.assertEqual([t["topic"] for t in ans["topics"]["added"]], ["/e1/fresh"], ans)
        # from the swap on: the new subject or nothing (0x80 until its schema is installed), never the old one
        wait_for(lambda: pub('{"v": "y"}') == 0, timeout=WAIT, what="the new subject's schema installed")
        self.assertEqual(pub('{"n": 2}'), 0x99, "the old subject's payload is refused now")
        g.wait_log('msg="topic ready" topic=/e1/fresh', WAIT)
        pid[0] += 1
        c.send(m.publish("f/d1", '{"n": 3}', qos=1, pid=pid[0], version=5))
        self.assertEqual(c.expect(m.PUBACK).reason(), 0)
        c.close()
        recs = self.stored("/e1/strict", 2, "the n=1 payload and the last v payload")
        payloads = [json.loads(r["payload"]) for r in recs]
        self.assertEqual(payloads, [{"n": 1}, {"v": "y"}])
        self.assertNotEqual(recs[0].get("schema_id"), recs[1].get("schema_id"), "stamped with each subject's id")
        self.stored("/e1/fresh", 1, "the new topic's message")
        self.assertEqual(g.stop(), 0, g.log())

    # ---- restart keys beside a mapping change ----------------------------------

    def test_restart_keys_are_named_beside_applied_mappings(self):
        """A file that adds a mapping and also moves the listener and wal.dir:
        the mapping is applied (the new topic takes messages at once), the
        two restart keys are named and not applied (the old listener still
        answers, the log stays where it was)."""
        a = {"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}}
        b = {"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}}
        g = self.start_gateway([a])
        port = g.mqtt_port()
        text = self.yaml([a, b]).replace('listener: "127.0.0.1:0"\n  ingestion', 'listener: "127.0.0.1:1"\n  ingestion',
                                         1).replace("dir: ./wal", "dir: ./wal-elsewhere")
        status, ans = self.reload(g, text=text)
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        self.assertIn("mqtt.topic_mappings", ans["applied"], ans)
        # the TLS suite (TRIB_MQTT_TLS=1) writes the listener as listeners[0]
        listener = "mqtt.listeners[0].address" if tls.ENABLED else "mqtt.listener"
        self.assertEqual(sorted(ans["restart_needed"]), sorted([listener, "wal.dir"]), ans)
        from tlib.replication import publish_all
        publish_all(port, [("b/d1", json.dumps({"n": n})) for n in range(50)], client_id="after")
        self.stored("/e1/b", 50, "the new mapping's messages, on the listener of the start")
        self.assertFalse(os.path.exists(os.path.join(g.dir, "wal-elsewhere")), "wal.dir not applied")
        self.assertEqual(g.stop(), 0, g.log())

    # ---- refused -------------------------------------------------------------

    def test_a_bad_config_is_refused_whole_under_load(self):
        """A file whose two mappings of one topic disagree on on_full (it
        fails `tributary check`) and that also adds a mapping: refused whole,
        the answer names the file, the line and the key, the generation
        stays, nothing of it is applied (b/+ stays unmatched) and every a
        message arrives exactly once."""
        a = {"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}}
        g = self.start_gateway([a])
        bad = self.yaml([a, {"mqtt_pattern": "b/+", "danube_topic": "/e1/b"},
                         {"mqtt_pattern": "c/+", "danube_topic": "/e1/a", "on_full": "block"}])
        pubs, (status, ans), before, after = self.run_load(
            g, lambda i, n: f"{'ab'[n % 2]}/c{i}", lambda: self.reload(g, text=bad))
        with open(g.config) as f:  # the file as written (the TLS suite rewrites its listener lines)
            bad_line = next(i + 1 for i, ln in enumerate(f.read().split("\n")) if '"c/+"' in ln)
        self.assertEqual((status, ans["result"]), (422, "refused"), ans)
        self.assertEqual(ans["error"]["file"], g.config, ans)
        self.assertEqual(ans["error"]["line"], bad_line, ans)
        self.assertEqual(ans["error"]["key"], "mqtt.topic_mappings[2].on_full", ans)
        self.assertFalse(ans["file_valid"], ans)
        n_a = sum((p.sent + 1) // 2 for p in pubs)
        recs = self.stored("/e1/a", n_a, "every a message, exactly once")
        self.assert_once(recs, "/e1/a")
        sent_b_all = sum(p.sent // 2 for p in pubs)
        topics, st = self.settle(g, lambda tp, st: st["unmatched"] == sent_b_all,
                                 "every b message dropped as unmatched: the refused file's b/+ never applied")
        self.assertNotIn("/e1/b", topics, "nothing of the refused file applied")
        self.assertNotIn("reload: mappings applied", g.log())
        self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
