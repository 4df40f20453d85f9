#!/usr/bin/python3
"""test_replication_max_age.py: a mapping's max_age on the real binary with
the mock cluster (docs/REPLICATION.md "max_age", docs/OPERATIONS.md).

The cluster is away (UNAVAILABLE) while devices publish OLD messages; the
test waits on the clock until they are older than max_age (2 s), publishes
NEW ones, and brings the cluster back. None of the old messages may reach
the cluster, every new one must, and the counters say so: /stats
dropped_age and wal_dropped_age_total, /metrics
tributary_messages_dropped_age_total and
tributary_wal_dropped_age_messages_total, with the accounting invariant
holding (aged drops are dropped). Then the gateway is SIGKILLed at once
(before the checkpoint's deferred write) and restarted: the persistent
count is exact (the old records are read and counted again at most once,
never twice, never lost) and none is sent; and after a clean restart too.
A file whose two mappings of one topic disagree on max_age does not start.
Every wait has a deadline; the only wait on time is for the clock to pass
max_age, a condition on the clock.
"""
import json
import os
import re
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, run_cli  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import edge_yaml, payload_numbers, publish_all  # noqa: E402

WAIT = 60
TOPIC = "/edge1/aged"
MAX_AGE_MS = 2000
N_OLD, N_NEW = 40, 15
MAPPINGS = [{"mqtt_pattern": "d/+/t", "danube_topic": TOPIC, "max_age": f"{MAX_AGE_MS}ms"}]
# retries fast, so the new messages go out well within max_age of the cluster's return
REP = {"retry_initial_ms": 50, "retry_max_ms": 200, "batch_size": 10}


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def topic_stats(port):
    return next(t for t in json.loads(http_get(port, "/stats")[1])["topics"] if t["topic"] == TOPIC)


def metric(port, name, labels=""):
    text = http_get(port, "/metrics")[1]
    m = re.search(r'^%s\{topic="%s"%s\} (\S+)$' % (re.escape(name), re.escape(TOPIC), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


class MaxAge(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster().start()
        self.addCleanup(self.mc.cleanup)
        self.gw = Gateway(edge_yaml(self.mc.grpc_url, MAPPINGS, replicator=REP))
        self.gw.start()
        self.addCleanup(self.gw.__exit__)
        self.gw.wait_log(f'msg="topic ready" topic={TOPIC}', WAIT)
        self.mc.control.fault("unavailable")  # a batch arriving now is refused unstored (mc_grpc.py)

    def stored(self):
        return self.mc.store_records(TOPIC)

    def caught_up(self, total):
        hp = self.gw.http_port()
        wait_until(lambda: topic_stats(hp)["acked_offset"] == total, WAIT, f"the checkpoint at {total}")
        return hp

    def test_messages_older_than_max_age_are_dropped_unsent_and_counted_persistently(self):
        old = [(f"d/o{n % 3}/t", json.dumps({"n": n})) for n in range(N_OLD)]
        publish_all(self.gw.mqtt_port(), old, client_id="old")
        last_old_ms = time.time() * 1000
        self.assertEqual(self.stored(), [], "the cluster is away: nothing stored yet")
        # the condition is the clock: every old message is past max_age
        wait_until(lambda: time.time() * 1000 > last_old_ms + MAX_AGE_MS + 200, WAIT, "the old messages to age")
        new = [(f"d/n{n % 3}/t", json.dumps({"n": N_OLD + n})) for n in range(N_NEW)]
        publish_all(self.gw.mqtt_port(), new, client_id="new")
        self.mc.control.fault("normal")
        total = N_OLD + N_NEW
        wait_until(lambda: len(self.stored()) >= N_NEW, WAIT, "the new messages upstream")
        hp = self.caught_up(total)
        recs = self.stored()
        self.assertEqual(payload_numbers(recs), set(range(N_OLD, total)), "only the new messages reach the cluster")
        self.assertEqual(len(recs), N_NEW, "each once")
        self.assertEqual(sorted(r["offset"] for r in recs), list(range(N_OLD + 1, total + 1)))

        st = topic_stats(hp)
        self.assertEqual(st["dropped_age"], N_OLD, st)
        self.assertEqual(st["wal_dropped_age_total"], N_OLD, st)
        self.assertEqual(st["replicated"], N_NEW, st)
        self.assertEqual(st["dropped"], 0, "the bound dropped nothing")
        self.assertEqual(st["queued"], 0, st)
        self.assertTrue(st["invariant_ok"], st)
        self.assertEqual(st["dropped_by_reason"], {"bound": 0, "age": N_OLD, "spill": 0, "forgotten": 0}, st)
        self.assertEqual(metric(hp, "tributary_messages_dropped_age_total"), N_OLD)
        self.assertEqual(metric(hp, "tributary_messages_dropped_total", ',reason="age"'), N_OLD)
        self.assertEqual(metric(hp, "tributary_messages_dropped_total", ',reason="bound"'), 0)
        self.assertEqual(metric(hp, "tributary_wal_dropped_age_messages_total"), N_OLD)
        self.assertEqual(metric(hp, "tributary_topic_invariant_ok"), 1)

        # SIGKILL right away: the checkpoint's write may not have happened
        # (replicator.checkpoint_interval_ms); either way the count comes back exact
        self.gw.kill()
        self.gw.start()
        hp = self.caught_up(total)
        st = topic_stats(hp)
        self.assertEqual(st["wal_dropped_age_total"], N_OLD, f"exact across a SIGKILL: {st}")
        self.assertEqual(st["received"], 0)
        self.assertTrue(st["invariant_ok"], st)
        self.assertEqual(len(self.stored()), N_NEW, "nothing old was sent after the restart")

        # a clean restart keeps it too
        self.assertEqual(self.gw.stop(), 0, self.gw.log())
        self.gw.start()
        hp = self.caught_up(total)
        st = topic_stats(hp)
        self.assertEqual(st["wal_dropped_age_total"], N_OLD, st)
        self.assertEqual(st["dropped_age"], 0, "this process dropped none")
        self.assertEqual(metric(hp, "tributary_wal_dropped_age_messages_total"), N_OLD)
        self.assertEqual(len(self.stored()), N_NEW)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())


class Disagreement(unittest.TestCase):
    def test_two_mappings_of_one_topic_with_different_max_age_do_not_start(self):
        yaml = edge_yaml("http://127.0.0.1:1", [
            {"mqtt_pattern": "a/#", "danube_topic": TOPIC, "max_age": "7d"},
            {"mqtt_pattern": "b/#", "danube_topic": TOPIC, "max_age": "12h"},
        ])
        gw = Gateway(yaml)
        r = run_cli("check", "-c", gw.config)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("mqtt.topic_mappings[1].max_age", r.stdout + r.stderr)
        self.assertIn("43200000 ms, but topic /edge1/aged already has max_age 604800000 ms", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
