#!/usr/bin/python3
"""test_operations.py: the operator's view of a real run (docs/OPERATIONS.md).

The real binary replicates to the mock cluster while a test publishes a
known number of messages, some of them refused on purpose (unmatched,
invalid under enforce, too large), and scrapes /metrics (parsed by
promtool, as Prometheus would) and /stats during the run:

  - the counts match what was sent exactly, per topic and per reason, and
    the connection counters by reason; /metrics and /stats agree;
  - lag (messages and bytes) rises during an outage and returns to zero;
  - a silent cluster longer than health.stall_after_ms sets the stall
    gauge, logs it once, and clears both when acks resume;
  - messages the disk bound drops during an outage are counted, the
    persistent counter survives a restart, and everything sent is either
    at the cluster or counted as dropped;
  - the invariant received = replicated + queued + dropped + rejected holds
    at the end of every run.

Every wait is a condition with a deadline.
"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import edge_yaml, publish_all  # noqa: E402

WAIT = 60  # the bound of the long waits (sanitizer builds are slow)
PROMTOOL = "/usr/bin/promtool"
TELE, RAW = "/edge1/tele", "/edge1/raw"
SCHEMA = {"type": "json_schema", "raw": {"type": "object", "required": ["n"]}}
MAPPINGS = [
    {"mqtt_pattern": "t/+/tele", "danube_topic": TELE, "schema_subject": "s", "validation_policy": "enforce"},
    {"mqtt_pattern": "r/+/raw", "danube_topic": RAW},
]
MAX_PAYLOAD = 1024
STALL_AFTER_MS = 1500


def http_get(port, path):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def promtool_check(text):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of every sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        mt = SAMPLE.match(line)
        assert mt, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', mt.group(2) or ""))
        out[(mt.group(1), labels)] = float(mt.group(3))
    return out


class Ops:
    """A gateway with the mock cluster; scrapes as an operator would."""

    def __init__(self, test, mc, mappings=MAPPINGS, wal="fsync: always"):
        rep = {"ack_timeout_ms": 1000, "batch_size": 50}
        health = f"health: {{stall_after_ms: {STALL_AFTER_MS}}}\n"
        self.yaml = edge_yaml(mc.grpc_url, mappings, replicator=rep, extra=health, wal=wal)
        self.yaml = self.yaml.replace('listener: "127.0.0.1:0"\n  ingestion',
                                      f'listener: "127.0.0.1:0"\n  max_payload_size: {MAX_PAYLOAD}\n  ingestion')
        self.gw = Gateway(self.yaml).start()
        test.addCleanup(self.gw.__exit__)
        self.test = test
        self.port = self.gw.mqtt_port()
        self.http = self.gw.http_port()

    def restart(self):
        self.test.assertEqual(self.gw.stop(), 0, self.gw.log())
        self.gw.start()
        self.port = self.gw.mqtt_port()
        self.http = self.gw.http_port()

    def stats(self):
        status, body = http_get(self.http, "/stats")
        self.test.assertEqual(status, 200)
        return json.loads(body)

    def topic(self, name, doc=None):
        doc = doc or self.stats()
        return next(t for t in doc["topics"] if t["topic"] == name)

    def metrics(self):
        status, body = http_get(self.http, "/metrics")
        self.test.assertEqual(status, 200)
        rc, out = promtool_check(body)
        self.test.assertEqual((rc, out), (0, ""), "promtool check metrics")
        return parse_metrics(body)

    def wait_topic(self, name, pred, what):
        return wait_until(lambda: (lambda t: t if pred(t) else None)(self.topic(name)), WAIT, what, interval=0.05)


def metric(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    if key not in samples:
        raise AssertionError(f"{name}{labels} not exposed")
    return samples[key]


def balance(t):
    return t["replicated"] + t["queued"] + t["dropped"] + sum(t["rejected"].values())


class Accounting(unittest.TestCase):
    """Known traffic, some refused on purpose; the counts must match exactly."""

    def setUp(self):
        self.mc = MockCluster(schemas={"s": SCHEMA}).start()
        self.addCleanup(self.mc.cleanup)
        self.ops = Ops(self, self.mc)
        self.ops.gw.wait_log(f'msg="topic ready" topic={TELE}', WAIT)

    def v5(self, client_id):
        c = m.Raw(self.ops.port)
        c.send(m.connect(client_id, version=5))
        self.assertEqual(c.expect(m.CONNACK).reason(), 0)
        self.addCleanup(c.close)
        return c

    def test_counts_match_what_was_sent_and_the_invariant_holds(self):
        ops = self.ops
        accepted0 = metric(ops.metrics(), "tributary_mqtt_connections_accepted_total")
        publish_all(ops.port, [(f"t/d{k % 3}/tele", json.dumps({"n": k})) for k in range(300)], client_id="tele")
        publish_all(ops.port, [(f"r/d{k % 2}/raw", f"raw {k}") for k in range(200)], client_id="raw")
        c = self.v5("refused")
        for pid in range(1, 8):  # invalid under enforce: 0x99, never stored
            c.send(m.publish("t/d1/tele", '{"x": 1}', qos=1, pid=pid, version=5))
            self.assertEqual(c.expect(m.PUBACK).reason(), 0x99)
        for pid in range(8, 13):  # no mapping: 0x90
            c.send(m.publish("nowhere/x", "u", qos=1, pid=pid, version=5))
            self.assertEqual(c.expect(m.PUBACK).reason(), 0x90)
        for k in range(3):  # over mqtt.max_payload_size: the connection is closed with 0x95
            big = self.v5(f"big{k}")
            big.send(m.publish("t/d1/tele", "x" * (MAX_PAYLOAD + 1), qos=1, pid=1, version=5))
            self.assertEqual(big.expect(m.DISCONNECT).reason(), 0x95)
        bad = m.Raw(ops.port)  # a CONNECT refused: 3.1.1, empty client id without clean session
        bad.send(m.connect("", version=4, clean=False))
        self.assertEqual(bad.expect(m.CONNACK).reason(), 0x02)
        bad.close()
        junk = m.Raw(ops.port)  # a malformed first packet
        junk.send(b"\x10\xff\xff\xff\xff\x7f")
        junk.closed()  # returns once the gateway has closed it (raises at the deadline)
        junk.close()

        wait_until(lambda: self.mc.topic_stats(TELE).get("stored") == 300 and
                   self.mc.topic_stats(RAW).get("stored") == 200, WAIT, "everything accepted replicated")
        tele = ops.wait_topic(TELE, lambda t: t["replicated"] == 300 and t["queued"] == 0, "tele acked")
        raw = ops.wait_topic(RAW, lambda t: t["replicated"] == 200 and t["queued"] == 0, "raw acked")
        doc = ops.stats()
        self.assertEqual((tele["received"], tele["stored"], tele["replicated"], tele["queued"], tele["dropped"]),
                         (310, 300, 300, 0, 0))
        self.assertEqual(tele["rejected"], {"schema_invalid": 7, "schema_unavailable": 0, "payload_too_large": 3,
                                            "wal_unavailable": 0, "full": 0})
        self.assertEqual((raw["received"], raw["stored"], raw["replicated"], sum(raw["rejected"].values())),
                         (200, 200, 200, 0))
        for t in (tele, raw):
            self.assertTrue(t["invariant_ok"], t)
            self.assertEqual(t["received"], balance(t), t)
            self.assertEqual((t["lag_messages"], t["lag_bytes"], t["stalled"]), (0, 0, False), t)
            self.assertEqual((t["wal_dropped_total"], t["wal_lost_total"], t["wal_write_errors"]), (0, 0, 0))
            self.assertEqual(t["batches_in_flight"], 0)
        self.assertEqual(tele["acked_offset"], 300)
        self.assertTrue(doc["invariant_ok"])
        self.assertEqual(doc["unmatched"], 5)
        conns = doc["connections"]
        # paho x2, the v5 client, three too-large ones, the refused CONNECT, the junk
        self.assertEqual(conns["mqtt_accepted"] - accepted0, 8)
        self.assertEqual(conns["mqtt_refused"], {"max_connections": 0, "client_id_invalid": 1, "auth_unsupported": 0,
                                                 "shutting_down": 0, "max_sessions": 0, "journal_full": 0, "will_invalid": 0,
                                                 "max_will_bytes": 0, "bad_password": 0, "unknown_user": 0,
                                                 "anonymous": 0, "auth_throttled": 0, "will_denied": 0})
        self.assertEqual(conns["mqtt_closed"]["malformed"], 1)

        # /metrics: the same numbers, and a parse by promtool
        # (a scrape within 250 ms of the last one gets that rendering again: wait for a fresh one)
        s = wait_until(lambda: (lambda s: s if metric(s, "tributary_messages_received_total", topic=TELE) == 310
                                else None)(ops.metrics()), WAIT, "a fresh rendering of /metrics", interval=0.05)
        self.assertEqual(metric(s, "tributary_messages_replicated_total", topic=TELE), 300)
        self.assertEqual(metric(s, "tributary_messages_rejected_total", topic=TELE, reason="schema_invalid"), 7)
        self.assertEqual(metric(s, "tributary_messages_rejected_total", topic=TELE, reason="payload_too_large"), 3)
        self.assertEqual(metric(s, "tributary_messages_queued", topic=RAW), 0)
        self.assertEqual(metric(s, "tributary_messages_unmatched_total"), 5)
        self.assertEqual(metric(s, "tributary_mqtt_connections_refused_total", reason="client_id_invalid"), 1)
        self.assertEqual(metric(s, "tributary_mqtt_connections_closed_total", reason="malformed"), 1)
        self.assertEqual(metric(s, "tributary_replication_acked_offset", topic=RAW), 200)
        self.assertEqual(metric(s, "tributary_topic_invariant_ok", topic=TELE), 1)
        self.assertEqual(metric(s, "tributary_invariant_ok"), 1)
        self.assertGreater(metric(s, "tributary_replication_batches_sent_total", topic=TELE), 0)
        self.assertEqual(ops.gw.stop(), 0, ops.gw.log())


class Outages(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster().start()
        self.addCleanup(self.mc.cleanup)
        self.ops = Ops(self, self.mc, mappings=[MAPPINGS[1]])
        self.ops.gw.wait_log(f'msg="topic ready" topic={RAW}', WAIT)
        publish_all(self.ops.port, [("r/d0/raw", "warm-up")], client_id="warm")
        self.ops.wait_topic(RAW, lambda t: t["replicated"] == 1, "the warm-up message replicated")

    def publish(self, n, size, client_id):
        publish_all(self.ops.port, [("r/d1/raw", "%0*d" % (size, k)) for k in range(n)], client_id=client_id)

    def test_lag_rises_during_an_outage_and_returns_to_zero(self):
        ops = self.ops
        self.mc.control.fault("refuse")
        ops.gw.wait_log("cluster unreachable", WAIT)
        self.publish(400, 200, "during")
        t = ops.wait_topic(RAW, lambda t: t["lag_messages"] == 400, "the lag to count every waiting message")
        self.assertGreaterEqual(t["lag_bytes"], 400 * 200, "every waiting payload is on disk")
        self.assertLess(t["lag_bytes"], t["wal_bytes"] + 1)
        self.assertEqual((t["replicated"], t["queued"]), (1, 400))
        self.assertGreater(t["oldest_unreplicated_age_seconds"], 0)
        self.assertTrue(t["invariant_ok"], t)
        s = ops.metrics()
        self.assertEqual(metric(s, "tributary_replication_lag_messages", topic=RAW), 400)
        self.assertEqual(metric(s, "tributary_cluster_up"), 0)
        self.mc.control.fault("normal")
        t = ops.wait_topic(RAW, lambda t: t["lag_messages"] == 0 and t["queued"] == 0, "the lag back to zero")
        self.assertEqual((t["lag_bytes"], t["replicated"], t["oldest_unreplicated_age_seconds"]), (0, 401, 0))
        self.assertTrue(t["invariant_ok"], t)
        self.assertGreater(t["stream_resets"] + sum(t["retries"].values()), 0, "the outage left a trace")
        self.assertEqual(self.mc.topic_stats(RAW)["stored"], 401)
        self.assertEqual(ops.gw.stop(), 0, ops.gw.log())

    def test_a_silent_cluster_sets_the_stall_gauge_and_logs_it_once(self):
        ops = self.ops
        self.mc.control.fault("silent")
        self.publish(50, 10, "silenced")
        t = ops.wait_topic(RAW, lambda t: t["stalled"], "the topic to be stalled")
        self.assertEqual(t["state"], "stalled")
        self.assertGreaterEqual(t["no_progress_seconds"], STALL_AFTER_MS / 1000)
        self.assertEqual(metric(ops.metrics(), "tributary_topic_stalled", topic=RAW), 1)
        ops.gw.wait_log('msg="replication stalled', WAIT)
        # a stall that lasts is logged once, however many watchdog ticks see it
        wait_until(lambda: ops.topic(RAW)["no_progress_seconds"] >= STALL_AFTER_MS / 1000 + 1.5, WAIT,
                   "the stall to outlast several watchdog ticks")
        self.assertEqual(ops.gw.run_log().count('msg="replication stalled'), 1)
        self.mc.control.fault("normal")
        t = ops.wait_topic(RAW, lambda t: not t["stalled"] and t["queued"] == 0, "the stall to end")
        self.assertEqual((t["replicated"], t["no_progress_seconds"]), (51, 0))
        self.assertEqual(metric(ops.metrics(), "tributary_topic_stalled", topic=RAW), 0)
        ops.gw.wait_log('msg="replication no longer stalled"', WAIT)
        self.assertEqual(ops.gw.run_log().count('msg="replication no longer stalled"'), 1)
        self.assertTrue(t["invariant_ok"], t)
        self.assertEqual(ops.gw.stop(), 0, ops.gw.log())


class DropsAcrossRestart(unittest.TestCase):
    """A small disk bound during an outage: drops are counted, survive a
    restart, and everything sent is at the cluster or counted dropped."""

    def test_dropped_total_survives_a_restart_and_every_message_is_accounted_for(self):
        mc = MockCluster().start()
        self.addCleanup(mc.cleanup)
        wal = "fsync: always, segment_bytes: 4096, max_topic_bytes: 16KiB, max_total_bytes: 1MiB"
        ops = Ops(self, mc, mappings=[MAPPINGS[1]], wal=wal)
        ops.gw.wait_log(f'msg="topic ready" topic={RAW}', WAIT)
        mc.control.fault("refuse")
        ops.gw.wait_log("cluster unreachable", WAIT)
        sent = 600
        publish_all(ops.port, [("r/d1/raw", "%0100d" % k) for k in range(sent)], client_id="flood")
        t = ops.wait_topic(RAW, lambda t: t["queued"] + t["dropped"] == sent, "every message stored or dropped")
        self.assertGreater(t["dropped"], 0, "the bound dropped messages")
        self.assertEqual(t["wal_dropped_total"], t["dropped"], "first run: the persistent count is this run's")
        self.assertLessEqual(t["wal_bytes"], 16 * 1024)
        self.assertTrue(t["invariant_ok"], t)
        dropped = t["dropped"]
        samples = ops.metrics()
        self.assertEqual(metric(samples, "tributary_wal_dropped_messages_total", topic=RAW), dropped)
        self.assertEqual(t["dropped_by_reason"], {"bound": dropped, "age": 0, "spill": 0, "forgotten": 0}, t)
        self.assertEqual(metric(samples, "tributary_messages_dropped_total", topic=RAW, reason="bound"), dropped)
        self.assertEqual(metric(samples, "tributary_messages_dropped_total", topic=RAW, reason="age"), 0)
        ops.gw.wait_log("dropping oldest messages", 5)

        ops.restart()
        t = ops.topic(RAW)
        self.assertEqual(t["wal_dropped_total"], dropped, "the persistent count survived the restart")
        self.assertEqual((t["received"], t["dropped"], t["replicated"], t["queued"]), (0, 0, 0, 0),
                         "this run's terms start from zero: the backlog is not this process's")
        self.assertEqual(t["lag_messages"], sent - dropped, "the backlog is still waiting")
        self.assertTrue(t["invariant_ok"], t)
        self.assertEqual(metric(ops.metrics(), "tributary_wal_dropped_messages_total", topic=RAW), dropped)

        mc.control.fault("normal")
        t = ops.wait_topic(RAW, lambda t: t["lag_messages"] == 0, "the backlog replicated after the restart")
        self.assertEqual(mc.topic_stats(RAW)["stored"] + t["wal_dropped_total"], sent,
                         "every message sent is at the cluster or counted as dropped")
        self.assertTrue(t["invariant_ok"], t)
        self.assertEqual(ops.gw.stop(), 0, ops.gw.log())


class DropsInFlight(unittest.TestCase):
    """The bound deletes records whose batch is in flight to a slow cluster,
    which then acknowledges them: counted once, as dropped (and as dropped
    in flight), never also as replicated; the invariant stays exact."""

    def test_a_batch_acked_after_the_bound_deleted_it_is_counted_once(self):
        mc = MockCluster(ack_delay_ms=400).start()
        self.addCleanup(mc.cleanup)
        wal = "fsync: always, segment_bytes: 4096, max_topic_bytes: 16KiB, max_total_bytes: 1MiB"
        ops = Ops(self, mc, mappings=[MAPPINGS[1]], wal=wal)
        ops.gw.wait_log(f'msg="topic ready" topic={RAW}', WAIT)
        sent = 600
        publish_all(ops.port, [("r/d1/raw", "%0100d" % k) for k in range(sent)], client_id="flood")
        t = ops.wait_topic(RAW, lambda t: t["queued"] == 0 and t["batches_in_flight"] == 0, "replication to finish")
        self.assertGreater(t["dropped"], 0, "the bound dropped messages")
        self.assertGreater(t["dropped_in_flight"], 0, "some were deleted while their batch was in flight")
        self.assertEqual(t["received"], t["replicated"] + t["dropped"], t)
        self.assertTrue(t["invariant_ok"], t)
        self.assertEqual(mc.topic_stats(RAW)["stored"], t["replicated"] + t["dropped_in_flight"],
                         "the cluster holds what was replicated and what was acked after its deletion")
        self.assertEqual(ops.gw.stop(), 0, ops.gw.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
