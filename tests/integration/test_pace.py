"""When a topic's batch goes to the log (gateway/broker/pace.c, docs/WAL.md "Flash
wear"), checked with a real libmosquitto client (bench/loadgen.c) against
the real gateway with wal.fsync always:

  - a client publishing at its own pace with a window of unacknowledged
    messages has its messages share batches (each batch is at most one
    fdatasync: fewer syncs, less flash wear), where with pacing off
    (idle_flush_max_ms: 0) each message is its own batch;
  - a synchronous client (window of one) is never waited for its pace: its
    acks come after idle_flush_ms, not after the pace maximum or the batch
    timeout;
  - a paced client whose window fills is not left waiting for the batch
    timeout (MQTT 5).

Messages per batch come from /metrics (tributary_messages_stored_total over
tributary_wal_batches_total), ack latencies from the load generator.
"""
import os
import re
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib import tls  # noqa: E402
from tlib.gateway import Gateway, wait_for  # noqa: E402

LOADGEN = os.path.join(os.environ.get("TRIB_BUILD_DIR", "build"), "bench", "loadgen")
TOPIC = "/e1/lg"


def config(idle_max, timeout=500):
    return f"""
edge: {{edge_name: e1, cluster_url: "http://127.0.0.1:1"}}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {{idle_flush_ms: 2, idle_flush_max_ms: {idle_max}, batch_timeout_ms: {timeout}}}
  topic_mappings:
    - {{mqtt_pattern: "lg/+/tele", danube_topic: {TOPIC}}}
wal: {{dir: ./wal, fsync: always}}
http: {{listener: "127.0.0.1:0"}}
"""


def metrics(hport):
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=5) as r:
        return r.read().decode()


def topic_value(text, name, extra=""):
    total = 0.0
    for m in re.finditer(r'^%s\{topic="%s"%s[^}]*\} (\S+)$' % (re.escape(name), re.escape(TOPIC), extra), text, re.M):
        total += float(m.group(1))
    return total


def run(gw, *args, n):
    """Runs loadgen with QoS 1 on one connection; returns (its figures, messages per batch)."""
    port, hport = gw.mqtt_port(), gw.http_port()
    r = subprocess.run([LOADGEN, "-p", str(port), "-c", "1", "-n", str(n), "-s", "100", "-q", "1", "-t", "lg",
                        *tls.loadgen_args(), *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"loadgen failed: {r.stdout} {r.stderr}\n{gw.log()}")
    figures = {k: float(v) for k, v in (kv.split("=") for kv in r.stdout.split())}
    # /metrics is rendered at most every 250 ms: wait for one that has every message
    text = wait_for(lambda: (lambda t: t if topic_value(t, "tributary_messages_stored_total") >= n else None)(
        metrics(hport)), 10, what="/metrics to show every message stored")
    batches = topic_value(text, "tributary_wal_batches_total")
    return figures, n / batches


class Pace(unittest.TestCase):
    def test_a_paced_client_with_a_window_shares_batches_and_without_pacing_it_does_not(self):
        # 200 msg/s: each message 5 ms after the last, slower than idle_flush_ms,
        # so only the probe (1 s in) can learn the pace; then batches hold
        # until the window of 40 fills. Without pacing each message is synced alone.
        per_batch = {}
        for idle_max in (25, 0):
            with Gateway(config(idle_max)) as gw:
                figures, per_batch[idle_max] = run(gw, "-w", "40", "-r", "200", n=1400)
                self.assertEqual(figures["acked"], 1400)
                self.assertEqual(gw.stop(), 0, gw.log())
        print(f"messages per batch: paced {per_batch[25]:.1f}, pacing off {per_batch[0]:.1f}", file=sys.stderr)
        self.assertGreaterEqual(per_batch[25], 2.0, per_batch)
        self.assertGreaterEqual(per_batch[25], 2.0 * per_batch[0], per_batch)

    def test_a_synchronous_client_is_not_waited_for(self):
        # a pace maximum of 200 ms and a batch timeout of 5 s make a wrong wait
        # plain: a client that waits for each ack must get it after ~idle_flush_ms
        with Gateway(config(200, timeout=5000)) as gw:
            figures, per_batch = run(gw, "-w", "1", n=1000)  # ~2.5 s: one probe, at 1 s
            self.assertEqual(gw.stop(), 0, gw.log())
        print(f"synchronous: {figures}", file=sys.stderr)
        self.assertEqual(figures["acked"], 1000)
        self.assertLess(figures["ack_p50_ms"], 100, figures)   # not the pace maximum
        self.assertLess(figures["ack_max_ms"], 1000, figures)  # the probes wait 200 ms, never the timeout

    def test_a_paced_client_whose_window_fills_is_not_left_to_the_timeout(self):
        with Gateway(config(25, timeout=5000)) as gw:
            figures, per_batch = run(gw, "-w", "5", "-r", "200", "-V", "5", n=600)
            self.assertEqual(gw.stop(), 0, gw.log())
        print(f"window of 5: {figures}, {per_batch:.1f} per batch", file=sys.stderr)
        self.assertEqual(figures["acked"], 600)
        self.assertLess(figures["ack_max_ms"], 1000, figures)


if __name__ == "__main__":
    unittest.main(verbosity=2)
