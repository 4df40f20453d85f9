#!/usr/bin/python3
"""test_pacing.py: paced and prioritised replay on the real binary against
the mock cluster (issue 17 "Replay control"; docs/REPLICATION.md "Pacing and
priorities").

Two upstream topics, /edge1/high (priority 9) and /edge1/low (priority 0),
one danube output with a rate cap: max_messages_per_s in one test,
max_bytes_per_s in the other. The cluster is away (fault `unavailable`)
while a publisher builds a backlog on both topics (a third high, two
thirds low) over the whole outage; then it comes back, and the test judges
what the mock recorded, each stored batch with its arrival time
(`received_at`) and its size on the wire (`batch_bytes`):

  * priority: every message of high's backlog is stored before a quarter
    of low's backlog is (the figure printed is how much of low came first).
    Not "half": high is a third of the backlog, so sharing the cap fairly
    (no priority) would finish high exactly when low is half done;
  * the cap: in every 10 s window from the first arrival to the last, the
    messages (or bytes) stored are at most 1.05 x the cap x 10 s, and for
    windows inside the drain at least 0.90 x (the cap is what limits it:
    the lower bound has a margin for a loaded 2-core box, the upper bound
    is the issue's 5%);
  * order per topic, nothing missing; /stats: the output's caps, each
    topic's throttled_ms, low's covering the time high drained.

The issue's outage is 60 s; CI uses 8 s (the backlog and the drain are the
same size either way, the outage only stretches how it was gathered):
TRIB_PACING_OUTAGE_S=60 runs the full one. Every wait has a deadline; the
only wait on time is the outage itself, a condition on the clock.
"""
import json
import os
import re
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import Publisher, check_topic, edge_yaml  # noqa: E402

OUTAGE_S = float(os.environ.get("TRIB_PACING_OUTAGE_S", "8"))
HIGH, LOW = "/edge1/high", "/edge1/low"
MAPPINGS = [{"mqtt_pattern": "hi/+", "danube_topic": HIGH, "priority": 9},
            {"mqtt_pattern": "lo/+", "danube_topic": LOW, "priority": 0}]
TOTAL = 3600            # messages of backlog: 1,200 high, 2,400 low
MSG_CAP = 150           # msg/s: a 24 s drain
BYTE_CAP = 18000        # B/s: about 130 B per message on the wire, a 25 s drain
REP = {"retry_initial_ms": 50, "retry_max_ms": 500, "batch_size": 20}
WINDOW_MS = 10000


def http_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read().decode())


def topic_stats(port, name):
    return next(t for t in http_json(port, "/stats")["topics"] if t["topic"] == name)


def batches(records):
    """(received_at, messages, bytes) per stored batch (first arrival of each
    (topic, batch_last_offset)), in arrival order."""
    seen = {}
    for r in records:
        key = (r["topic"], r["batch_last_offset"])
        if key not in seen:
            seen[key] = [r["received_at"], 0, r["batch_bytes"]]
        seen[key][1] += 1
    return sorted(tuple(v) for v in seen.values())


def windows(bs, field):
    """(max, min) of the amount stored in [a, a + 10 s) over the arrival
    times a; min only over windows that end by the last arrival."""
    end = bs[-1][0]
    mx, mn = 0, None
    j, total = 0, 0
    for i, b in enumerate(bs):
        if i:
            total -= bs[i - 1][field]
        if j < i:
            j, total = i, 0
        while j < len(bs) and bs[j][0] < b[0] + WINDOW_MS:
            total += bs[j][field]
            j += 1
        mx = max(mx, total)
        if b[0] + WINDOW_MS <= end:
            mn = total if mn is None else min(mn, total)
    return mx, mn


class Pacing(unittest.TestCase):
    def run_case(self, cap_key, cap, field, unit):
        mc = MockCluster().start()
        self.addCleanup(mc.cleanup)
        outputs = f"outputs:\n  - {{name: danube, kind: danube, {cap_key}: {cap}}}\n"
        gw = Gateway(edge_yaml(mc.grpc_url, MAPPINGS, replicator=REP, extra=outputs))
        gw.start()
        self.addCleanup(gw.__exit__)
        for t in (HIGH, LOW):
            gw.wait_log(f'msg="topic ready" topic={t}', 60)
        hp = gw.http_port()
        out = http_json(hp, "/stats")["outputs"]
        self.assertEqual([(o["output"], o["kind"], o[cap_key]) for o in out], [("danube", "danube", cap)], out)

        # the outage: a backlog on both topics, gathered over its whole length
        mc.control.fault("unavailable")
        t_down = time.monotonic()
        pub = Publisher(gw.mqtt_port(), lambda n: f"hi/d{n % 2}" if n % 3 == 0 else f"lo/d{n % 2}",
                        rate=TOTAL / max(OUTAGE_S - 1, 1)).start()
        wait_until(lambda: pub.sent >= TOTAL, OUTAGE_S + 60, f"{TOTAL} messages published")
        pub.stop()
        acked = pub.acked()
        n_high = sum(1 for n in acked if n % 3 == 0)
        n_low = len(acked) - n_high
        self.assertEqual(mc.store_records(), [], "the cluster is away: nothing stored yet")
        wait_until(lambda: time.monotonic() >= t_down + OUTAGE_S, OUTAGE_S + 5, "the outage to last")
        mc.control.fault("normal")
        t_up = time.time() * 1000

        drain_s = len(acked) * unit / cap
        wait_until(lambda: topic_stats(hp, HIGH)["acked_offset"] == n_high and
                   topic_stats(hp, LOW)["acked_offset"] == n_low, drain_s * 2 + 60, "both backlogs acknowledged")
        high = mc.store_records(HIGH)
        low = mc.store_records(LOW)
        check_topic(high, n_high, max_dups=40)
        check_topic(low, n_low, max_dups=40)

        # priority: high's whole backlog before a quarter of low's (fair sharing: half)
        high_done = max(r["received_at"] for r in high)
        low_first = {}
        for r in low:
            low_first.setdefault(r["offset"], r["received_at"])
        low_before = sum(1 for t in low_first.values() if t <= high_done)
        # the cap over every 10 s window of the drain
        bs = batches(high + low)
        mx, mn = windows(bs, field)
        cap10 = cap * WINDOW_MS / 1000
        drain = (bs[-1][0] - bs[0][0]) / 1000
        hs, ls = topic_stats(hp, HIGH), topic_stats(hp, LOW)
        print(f"\npacing {cap_key}={cap}: outage {OUTAGE_S:.0f} s, backlog high {n_high} low {n_low}; "
              f"drain {drain:.1f} s from {(bs[0][0] - t_up) / 1000:.2f} s after the cluster came back; "
              f"high done after {(high_done - bs[0][0]) / 1000:.1f} s with {low_before}/{n_low} of low before it; "
              f"10 s windows: max {mx / cap10:.3f}x, min {(mn or 0) / cap10:.3f}x the cap; "
              f"throttled_ms high {hs['throttled_ms']} low {ls['throttled_ms']}", file=sys.stderr)
        self.assertLess(low_before, n_low / 4, "high's backlog was not all stored before a quarter of low's")
        self.assertGreater(drain, WINDOW_MS / 1000, "the drain must span 10 s windows to judge the cap")
        self.assertLessEqual(mx, cap10 * 1.05, f"a 10 s window carried {mx} > 1.05 x {cap10:.0f}")
        self.assertIsNotNone(mn)
        self.assertGreaterEqual(mn, cap10 * 0.90, f"a 10 s window carried {mn} < 0.90 x {cap10:.0f}")

        # what an operator sees: time waiting for the cap, per topic; low waited while high drained
        self.assertGreater(hs["throttled_ms"], 0, hs)
        self.assertGreaterEqual(ls["throttled_ms"], 0.8 * (high_done - bs[0][0]), ls)
        text = urllib.request.urlopen(f"http://127.0.0.1:{hp}/metrics", timeout=5).read().decode()
        m = re.search(r'^tributary_replication_throttled_seconds_total\{topic="%s"\} (\S+)$' % re.escape(LOW), text,
                      re.M)
        self.assertIsNotNone(m, "the throttled-time metric")
        self.assertGreater(float(m.group(1)), 0)
        self.assertTrue(hs["invariant_ok"] and ls["invariant_ok"])
        # a clean stop after a paced drain (under ASan: its leak check runs at exit)
        self.assertEqual(gw.stop(timeout=30), 0, gw.log()[-4000:])
        self.assertNotIn("Sanitizer", gw.log())

    def test_message_cap_and_priority_after_an_outage(self):
        self.run_case("max_messages_per_s", MSG_CAP, 1, 1)

    def test_byte_cap_and_priority_after_an_outage(self):
        # unit: an estimate of a message's bytes on the wire, for the drain's deadline only
        self.run_case("max_bytes_per_s", BYTE_CAP, 2, 130)


if __name__ == "__main__":
    unittest.main()
