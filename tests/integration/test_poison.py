#!/usr/bin/python3
"""test_poison.py: poison batches and refused credentials (issue 19, docs/design/RELOAD.md 5).

The real binary replicates to the mock cluster (tests/mock_cluster):

  - Poison: the mock's poison knob refuses for good every batch holding a
    message whose payload contains POISON (INVALID_ARGUMENT). After
    replicator.max_attempts attempts the batch's messages are in the
    dead-letter log (payload, MQTT topic, offset, the cluster's reason,
    attempts), the topic moves on (later messages reach the cluster),
    tributary_dead_letters_total{reason="cluster_invalid_argument"} counts
    them and the accounting invariant still holds. The per-batch form (an
    offset range) the same way, with FAILED_PRECONDITION.
  - INTERNAL (the real cluster's storage failure) is never dead-lettered,
    however many attempts it takes.
  - mqtt.dead_letter off: the poison batch is held (nothing dropped) and
    /stats says why in words.
  - Credentials: the mock wants a token the edge does not have: /readyz stays
    200 and says "cluster: credentials refused (UNAUTHENTICATED: ...)",
    /stats has it in cluster.problem, the warning is logged once (not per
    attempt), and registration is retried at the backoff's maximum (the
    mock counts the refused calls over a period).

Every wait is a condition with a deadline.
"""
import http.client
import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway, wal_dump  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

WAIT = 60  # sanitizer builds are slow
TELE = "/edge1/tele"
MAPS = [{"mqtt_pattern": "t/+", "danube_topic": TELE}]
REP = {"max_attempts": 3, "retry_initial_ms": 50, "retry_max_ms": 300}


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def metric(text, name, **labels):
    """The value of one sample, or None."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split(" ")[0]))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


class Base(unittest.TestCase):
    dead_letter = True
    token = None

    def yaml_of(self, rep, edge_token=None):
        yaml = edge_yaml(self.mc.grpc_url, MAPS, replicator=rep, token=edge_token)
        if self.dead_letter:
            yaml = yaml.replace('  listener: "127.0.0.1:0"\n', '  listener: "127.0.0.1:0"\n  dead_letter: true\n', 1)
        return yaml

    def start(self, rep=REP, mock_token=None, edge_token=None):
        self.mc = MockCluster(token=mock_token).start()
        self.gw = Gateway(self.yaml_of(rep, edge_token)).start()
        self.port = self.gw.mqtt_port()
        self.http = self.gw.http_port()

    def tearDown(self):
        if getattr(self, "gw", None) and self.gw.proc and self.gw.proc.poll() is None:
            self.gw.proc.kill()
            self.gw.proc.wait(30)
        if getattr(self, "mc", None):
            self.mc.stop()

    def publish(self, topic, payloads, cid="poison-pub"):
        c = m.Raw(self.port)
        c.send(m.connect(cid))
        c.expect(m.CONNACK)
        for i, p in enumerate(payloads, 1):
            c.send(m.publish(topic, p, qos=1, pid=i))
            c.expect(m.PUBACK)
        c.send(m.disconnect())
        c.close()

    def stats(self):
        status, body = http_get(self.http, "/stats")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def topic(self, doc=None):
        return next(t for t in (doc or self.stats())["topics"] if t["topic"] == TELE)

    def metrics(self):
        status, body = http_get(self.http, "/metrics")
        self.assertEqual(status, 200)
        return body

    def stored_payloads(self):
        return [r["payload"] for r in self.mc.store_records(TELE)]

    def dead_letters(self):
        return wal_dump(os.path.join(self.gw.dir, "wal"), "$dead-letter")


class Poison(Base):
    def test_poison_batch_dead_lettered_and_topic_moves_on(self):
        self.start()
        self.mc.control.poison({"payload_contains": "POISON", "topic": TELE})
        self.publish("t/a", [b"good-1"])
        wait_until(lambda: self.stored_payloads() == ["good-1"], WAIT, "good-1 at the cluster")
        self.publish("t/a", [b"bad POISON 1"], cid="poison-bad")
        # the poison batch alone on its streams: refused exactly max_attempts times, then dead-lettered
        wait_until(lambda: self.mc.control.get_fault()["poisoned_batches"] >= 1, WAIT, "the poison batch refused")
        self.publish("t/b", [b"after-%d" % i for i in range(1, 6)], cid="poison-after")
        wait_until(lambda: self.stored_payloads() == ["good-1"] + ["after-%d" % i for i in range(1, 6)], WAIT,
                   "the messages after the poison batch at the cluster (the topic moved on)")
        # charged only on a stream that carried it alone (RELOAD.md 5.3): the first refusal came on the
        # stream that had acknowledged good-1, so it is not charged; then max_attempts charged ones
        self.assertIn(self.mc.control.get_fault()["poisoned_batches"], (REP["max_attempts"], REP["max_attempts"] + 1))
        dead = wait_until(lambda: self.dead_letters() or None, WAIT, "the dead letter")
        self.assertEqual(len(dead), 1, dead)
        d = dead[0]
        self.assertEqual(d["payload"], "bad POISON 1")
        self.assertEqual(d["mqtt_topic"], "t/a")
        a = d["attributes"]
        self.assertEqual(a["dead_letter.topic"], TELE)
        self.assertEqual(a["dead_letter.offset"], "2")  # good-1 was 1
        self.assertEqual(a["dead_letter.source"], "cluster")
        self.assertEqual(a["dead_letter.attempts"], str(REP["max_attempts"]))
        self.assertTrue(a["dead_letter.error"].startswith("INVALID_ARGUMENT: mock cluster: message at offset 2 "),
                        a["dead_letter.error"])

        def settled():
            body = self.metrics()
            ok = metric(body, "tributary_topic_invariant_ok", topic=TELE) == 1
            dl = metric(body, "tributary_dead_letters_total", topic=TELE, reason="cluster_invalid_argument")
            return body if ok and dl == 1 else None
        body = wait_until(settled, WAIT, "the dead letter counted and the invariant holding")
        self.assertEqual(metric(body, "tributary_messages_dead_lettered_total", topic=TELE), 1)
        self.assertEqual(metric(body, "tributary_messages_replicated_total", topic=TELE), 6)
        self.assertEqual(metric(body, "tributary_messages_received_total", topic=TELE), 7)
        self.assertEqual(metric(body, "tributary_dead_letters_total", topic=TELE, reason="invalid_schema"), 0)
        self.assertGreaterEqual(metric(body, "tributary_replication_retries_total", topic=TELE, reason="permanent"),
                                REP["max_attempts"])
        t = self.topic()
        self.assertEqual(t["dead_lettered"], 1)
        self.assertEqual(t["acked_offset"], 7)
        self.assertIsNone(t["problem"])
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_sigkill_after_dead_lettering_keeps_every_dead_letter(self):
        """A kill between the dead-letter write and the checkpoint's persistence replays the batch:
        duplicates in the dead-letter log are allowed, a missing dead letter or message is not."""
        self.start()
        self.mc.control.poison({"payload_contains": "POISON"})
        self.publish("t/a", [b"POISON k"])
        wait_until(lambda: self.dead_letters() or None, WAIT, "the dead letter")
        self.gw.kill()
        self.gw.proc.wait(30)
        self.gw.start()
        self.port = self.gw.mqtt_port()
        self.publish("t/a", [b"after-kill"], cid="after-kill")
        wait_until(lambda: self.stored_payloads() == ["after-kill"], WAIT, "the topic moving on after the restart")
        dead = self.dead_letters()
        self.assertGreaterEqual(len(dead), 1)
        self.assertTrue(all(d["payload"] == "POISON k" and d["attributes"]["dead_letter.offset"] == "1" for d in dead),
                        dead)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_per_batch_error_by_offsets(self):
        self.start()
        self.mc.control.poison({"offsets": [3, 4], "status": "FAILED_PRECONDITION"})
        self.publish("t/a", [b"m-1", b"m-2"])
        wait_until(lambda: self.stored_payloads() == ["m-1", "m-2"], WAIT, "m-1, m-2 at the cluster")
        self.publish("t/a", [b"m-3", b"m-4"], cid="p2")  # one QoS 1 client: may be one batch or two
        wait_until(lambda: self.mc.control.get_fault()["poisoned_batches"] >= 1, WAIT, "the batch refused")
        self.publish("t/a", [b"m-5"], cid="p3")
        wait_until(lambda: self.stored_payloads() == ["m-1", "m-2", "m-5"], WAIT, "m-5 past the refused batch")
        dead = wait_until(lambda: (lambda d: d if len(d) == 2 else None)(self.dead_letters()), WAIT, "two dead letters")
        self.assertEqual([d["payload"] for d in dead], ["m-3", "m-4"])
        self.assertEqual([d["attributes"]["dead_letter.offset"] for d in dead], ["3", "4"])
        self.assertTrue(all(d["attributes"]["dead_letter.error"].startswith("FAILED_PRECONDITION: ") for d in dead))
        wait_until(lambda: metric(self.metrics(), "tributary_dead_letters_total", topic=TELE,
                                  reason="cluster_failed_precondition") == 2, WAIT, "counted by reason")

    def test_max_attempts_lowered_by_a_reload_dead_letters_the_held_batch(self):
        """replicator.max_attempts is live: a batch refused under a bound of 1000 is held (retried, not
        dead-lettered); a reload to 2 sends it to the dead-letter log at its next refusal."""
        self.start(rep={**REP, "max_attempts": 1000})
        self.mc.control.poison({"payload_contains": "POISON", "topic": TELE})
        self.publish("t/a", [b"held POISON"])
        wait_until(lambda: self.mc.control.get_fault()["poisoned_batches"] >= 3, WAIT, "the batch refused 3 times")
        self.assertEqual(self.dead_letters(), [])  # 3 of 1000: still held
        self.assertEqual(self.topic()["acked_offset"], 0)
        self.gw.write_config(self.yaml_of({**REP, "max_attempts": 2}))
        c = http.client.HTTPConnection("127.0.0.1", self.http, timeout=10)
        try:
            c.request("POST", "/admin/reload")
            r = c.getresponse()
            status, ans = r.status, json.loads(r.read().decode())
        finally:
            c.close()
        self.assertEqual(status, 200, ans)
        self.assertIn("replicator.max_attempts", ans["applied"])
        self.assertNotIn("replicator.max_attempts", ans["restart_needed"])
        dead = wait_until(lambda: self.dead_letters() or None, WAIT, "the dead letter after the reload")
        self.assertEqual([d["payload"] for d in dead], ["held POISON"])
        self.assertGreaterEqual(int(dead[0]["attributes"]["dead_letter.attempts"]), 3)
        self.publish("t/b", [b"after"], cid="after-reload")
        wait_until(lambda: self.stored_payloads() == ["after"], WAIT, "the topic moved on")
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_internal_is_never_dead_lettered(self):
        self.start(rep={**REP, "max_attempts": 1})
        self.publish("t/a", [b"first"])
        wait_until(lambda: self.stored_payloads() == ["first"], WAIT, "first at the cluster")
        opened = self.mc.control.stats()["totals"]["streams_opened"]
        self.mc.control.fault("internal")
        self.publish("t/a", [b"during-1", b"during-2"])
        wait_until(lambda: self.mc.control.stats()["totals"]["streams_opened"] >= opened + 4, WAIT,
                   "several streams ended with INTERNAL")
        self.mc.control.fault("normal")
        wait_until(lambda: self.stored_payloads() == ["first", "during-1", "during-2"], WAIT, "all at the cluster")
        self.assertEqual(self.dead_letters(), [])
        self.assertEqual(metric(self.metrics(), "tributary_messages_dead_lettered_total", topic=TELE), 0)


class PoisonWithoutDeadLetterLog(Base):
    dead_letter = False

    def test_poison_batch_held_and_said(self):
        self.start(rep={**REP, "max_attempts": 2})
        self.mc.control.poison({"payload_contains": "POISON"})
        self.publish("t/a", [b"x POISON"])
        t = wait_until(lambda: (lambda t: t if t["problem"] else None)(self.topic()), WAIT, "the problem in /stats")
        self.assertIn("poison batch at offsets 1..1 (INVALID_ARGUMENT: mock cluster: message at offset 1", t["problem"])
        self.assertIn("enable mqtt.dead_letter", t["problem"])
        self.assertEqual(t["acked_offset"], 0)  # held: nothing dropped
        self.gw.wait_log("mqtt.dead_letter is off", WAIT)
        self.mc.control.poison(None)  # the cluster takes it after all: never lost


class Credentials(Base):
    def test_refused_credentials_are_not_an_outage(self):
        self.start(mock_token="the-right-one", edge_token="a-wrong-one")
        self.publish("t/a", [b"kept-1"])  # accepted and logged while refused

        def refused():
            status, body = http_get(self.http, "/readyz")
            return (status, body) if "credentials refused" in body else None
        status, body = wait_until(refused, WAIT, "/readyz saying the credentials are refused")
        self.assertEqual(status, 200, body)
        self.assertRegex(body, r"cluster: credentials refused \(UNAUTHENTICATED: missing or invalid authorization "
                               r"bearer token\) since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n")
        doc = self.stats()
        self.assertTrue(doc["ready"])
        self.assertIn("credentials refused (UNAUTHENTICATED", doc["cluster"]["problem"])
        self.assertIs(doc["cluster"]["credentials_refused"], True)
        self.assertIn("tributary_cluster_credentials_refused 1\n", self.metrics())
        # retried at the maximum (registration: 60 s, equal jitter, so >= 30 s): over 12 s after the first
        # refusal no second call, where the normal schedule (1 s, 2 s, 4 s ...) would have made three more
        first = self.mc.control.stats()["totals"]["unauthenticated_calls"]
        self.assertGreaterEqual(first, 1)
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:  # an observation period, not a synchronisation
            self.assertLessEqual(self.mc.control.stats()["totals"]["unauthenticated_calls"], first)
            time.sleep(0.5)
        lines = [ln for ln in self.gw.log().splitlines() if "refuses this edge's credentials" in ln]
        self.assertEqual(len(lines), 1, lines)  # once a minute, not per attempt
        self.assertIn("edge.token", lines[0])
        self.assertEqual(self.topic()["queued"], 1)  # kept in the log
        self.assertEqual(self.gw.stop(), 0, self.gw.log())
        # edge.token is restart-class: restarted with the right one, the kept message goes and the state clears
        with open(self.gw.config) as f:
            text = f.read()
        self.gw.write_config(text.replace("a-wrong-one", "the-right-one"))
        self.gw.start()
        self.http = self.gw.http_port()
        wait_until(lambda: self.stored_payloads() == ["kept-1"], WAIT, "the kept message at the cluster")
        doc = self.stats()
        self.assertIsNone(doc["cluster"]["problem"])
        self.assertIs(doc["cluster"]["credentials_refused"], False)
        status, body = http_get(self.http, "/readyz")
        self.assertEqual((status, body), (200, "ready\ncluster: connected\n"))
        self.assertEqual(self.gw.stop(), 0, self.gw.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
