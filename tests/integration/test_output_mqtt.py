"""The MQTT output (issue 17, docs/REPLICATION.md "The MQTT output"): the
real gateway forwarding to a real Mosquitto 2 on 127.0.0.1 (tlib/mosq.py),
with a real MQTT 5 subscriber (paho) recording what arrives there.

  * 10,000 messages over 3 topics arrive once, in order per topic, the
    remote_topic template applied (${topic}, ${upstream}, ${1},
    ${attr.NAME}) and the MQTT 5 user properties rebuilt from the
    attributes (extract_attributes, the device's own user properties);
  * the remote stopped (10 s here; the issue says 30: TRIB_OUTAGE_S=30)
    and restarted: nothing acknowledged is lost, duplicates only from the
    window in flight, counted;
  * the gateway SIGKILLed mid-drain: nothing lost; the duplicates come only
    from the resend window (offsets from the persisted checkpoint + 1, as
    the restarted output logs it, up to what the remote had taken before
    the kill), are counted and marked tributary.replayed. The window is the
    in-flight messages (max_inflight) plus what was acknowledged but not yet
    persisted (checkpoint_interval_ms 0 here: the writer's meta-write
    latency times the drain rate; docs/REPLICATION.md, "Duplicates");
  * the checkpoint moves on the remote's PUBACK, never on send: a remote
    SIGSTOPped takes our PUBLISHes into its socket and acknowledges none,
    and no acked_offset moves until it is resumed;
  * memory_first topics (issue 16) with this output: held records confirmed
    by its acks, spilled (reason output) while its remote is down;
  * TLS to the remote with verification: a CA made by openssl here; a
    server certificate of another CA is refused and said in /stats;
  * a wrong password: /stats says refused with the CONNACK's words, and the
    attempts over 6 s are bounded by the backoff (not a spin).

Each message's payload is "<topic index>:<sequence>", so the recorder's
view is judged on its own: no hard-coded result, every assertion can fail.
Waits poll a condition under a deadline."""
import json
import os
import signal
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, json_log_lines, wait_for, wal_dump  # noqa: E402
from tlib.mosq import DUP, Mosquitto, Recorder, publish_all  # noqa: E402
from tlib.tls import Certs  # noqa: E402

OUTAGE_S = float(os.environ.get("TRIB_OUTAGE_S", "10"))  # the 30 s, shortened for CI
MAX_INFLIGHT = 100
TOPICS = ["temp", "hum", "press"]


def edge_yaml(remote_port, extra_output="", replicator="", password_file=None, tls=None):
    out = f"""
edge: {{edge_name: edge1}}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {{mqtt_pattern: "site/+/temp", danube_topic: /edge1/temp, extract_attributes: {{dev: "$1"}}}}
    - {{mqtt_pattern: "site/+/hum", danube_topic: /edge1/hum, extract_attributes: {{dev: "$1"}}}}
    - {{mqtt_pattern: "site/+/press", danube_topic: /edge1/press, extract_attributes: {{dev: "$1"}}}}
wal: {{dir: ./wal, fsync: interval, fsync_interval_ms: 20}}
http: {{listener: "127.0.0.1:0"}}
replicator: {{retry_initial_ms: 100, retry_max_ms: 1000, ack_timeout_ms: 3000, rpc_timeout_ms: 3000{replicator}}}
log: {{format: json}}
outputs:
  - name: central
    kind: mqtt
    broker: "127.0.0.1:{remote_port}"
    protocol: 5
    qos: 1
    client_id: "edge1-central"
    remote_topic: "fwd/${{attr.dev}}/${{1}}${{upstream}}/${{topic}}"
    max_inflight: {MAX_INFLIGHT}
"""
    if password_file:
        out += f"    username: edge1\n    password_file: {password_file}\n"
    if tls:
        out += f"    tls: {{ca_file: {tls}}}\n"
    return out + extra_output


def items(n_per_topic, start=0, devs=("d1", "d2")):
    """(mqtt topic, payload) in publish order: round robin over the topics."""
    out = []
    for i in range(start, start + n_per_topic):
        for k, t in enumerate(TOPICS):
            out.append((f"site/{devs[i % len(devs)]}/{t}", f"{k}:{i}".encode()))
    return out


def stats(g):
    with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/stats", timeout=5) as r:
        return json.loads(r.read())


def output(g, name="central"):
    for o in stats(g)["outputs"]:
        if o["output"] == name:
            return o
    raise AssertionError(f"no output {name} in /stats")


def judge(tc, msgs, n_per_topic, start=0):
    """Every (topic, seq) in [start, start + n) arrived, first receipts in order per topic, the
    template and properties right; returns the duplicates per topic index."""
    seen = [set() for _ in TOPICS]
    last = [start - 1] * len(TOPICS)
    dups = [0] * len(TOPICS)
    for topic, payload, props in msgs:
        k, seq = (int(x) for x in payload.decode().split(":"))
        dev = "d1" if seq % 2 == 0 else "d2"
        up = f"/edge1/{TOPICS[k]}"
        tc.assertEqual(topic, f"fwd/{dev}/{dev}{up}/site/{dev}/{TOPICS[k]}", "remote_topic template")
        tc.assertEqual(props.get("dev"), dev, "extract_attributes -> user property")
        tc.assertEqual(props.get("src"), "test", "the device's user property carried")
        if seq in seen[k]:
            dups[k] += 1
            # sent twice by the gateway (marked), or delivered twice by the remote itself (its DUP
            # flag: a QoS 1 redelivery to the recorder after the remote restarted)
            tc.assertTrue(props.get("tributary.replayed") == "true" or DUP in props,
                          f"a second copy of {payload!r} is a marked resend or the remote's redelivery")
            continue
        tc.assertEqual(seq, last[k] + 1, f"first receipts in order on topic {k}: {seq} after {last[k]}")
        seen[k].add(seq)
        last[k] = seq
    for k in range(len(TOPICS)):
        tc.assertEqual(len(seen[k]), n_per_topic, f"topic {k}: {n_per_topic - len(seen[k])} missing")
    return dups


class OutputMqtt(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-out-mqtt-")
        self.remote = None
        self.rec = None
        self.g = None

    def tearDown(self):
        if self.rec:
            self.rec.close()
        if self.g and self.g.proc and self.g.proc.poll() is None:
            self.g.proc.kill()
            self.g.proc.wait()
        if self.remote:
            self.remote.stop()

    def gateway(self, yaml_text):
        self.g = Gateway(yaml_text, workdir=self.dir)
        self.g.start()
        return self.g

    def test_ten_thousand_messages_over_three_topics_arrive_once_in_order_with_templates(self):
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        g = self.gateway(edge_yaml(self.remote.port))
        n = 3334  # x 3 topics: 10,002 messages
        publish_all(g.mqtt_port(), items(n), props={"src": "test"})
        self.rec.wait_unique(3 * n, 120)
        wait_for(lambda: all(t["lag_messages"] == 0 for t in output(g)["topics"]), 30, what="lag 0 at the output")
        msgs = self.rec.snapshot()
        dups = judge(self, msgs, n)
        self.assertEqual(dups, [0, 0, 0], "a clean run sends each message once")
        o = output(g)
        self.assertEqual(o["state"], "up")
        self.assertTrue(o["up"])
        self.assertEqual(o["kind"], "mqtt")
        self.assertIsNone(o["last_error"])
        self.assertEqual(sorted(t["topic"] for t in o["topics"]), ["/edge1/hum", "/edge1/press", "/edge1/temp"])
        for t in o["topics"]:
            self.assertEqual(t["acked"], n, t)
            self.assertEqual(t["sent"], n, t)
            self.assertEqual(t["resent"], 0, t)
        # the per-topic families report the primary output (the only one here): the invariant holds
        s = stats(g)
        self.assertEqual(s["cluster"]["state"], "unknown", "no danube output: no cluster to speak of")
        self.assertTrue(s["invariant_ok"], s["topics"])
        for t in s["topics"]:
            self.assertEqual(t["replicated"], n, t)
        self.assertEqual(g.stop(), 0, g.log())

    def test_a_capped_output_drains_the_high_priority_topic_first_within_the_cap(self):
        """max_messages_per_s on the MQTT output (rep_pace.c, docs/REPLICATION.md "Pacing and
        priorities"): a backlog of three topics, temp at priority 9 and the others at 0, published
        faster than the cap: temp's backlog reaches the remote before a quarter of the others'
        (strict priority; fair sharing would give them half), and the drain's rate, past the
        bucket's 200 ms burst, stays within 5% of the cap."""
        cap = 200
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        y = edge_yaml(self.remote.port, extra_output=f"    max_messages_per_s: {cap}\n")
        y = y.replace('danube_topic: /edge1/temp, extract_attributes: {dev: "$1"}}',
                      'danube_topic: /edge1/temp, extract_attributes: {dev: "$1"}, priority: 9}')
        g = self.gateway(y)
        n = 400  # x 3 topics, six seconds at the cap
        publish_all(g.mqtt_port(), items(n), props={"src": "test"})
        self.rec.wait_unique(3 * n, 60)
        judge(self, self.rec.snapshot(), n)
        timed = self.rec.timed()
        last_temp = max(i for i, (_, _, p) in enumerate(timed) if p.startswith(b"0:"))
        low_before = sum(1 for _, _, p in timed[:last_temp] if not p.startswith(b"0:"))
        self.assertLess(low_before, (2 * n) // 4,
                        f"{low_before} of {2 * n} low-priority messages went before the high-priority backlog")
        burst = cap // 5  # 200 ms of the rate
        span = timed[-1][0] - timed[0][0]
        rate = (len(timed) - burst) / span
        self.assertLess(rate, cap * 1.05, f"{rate:.1f} msg/s over {span:.1f} s with a cap of {cap}")
        self.assertGreater(rate, cap * 0.8, f"{rate:.1f} msg/s: far below the cap of {cap}")
        o = output(g)
        self.assertEqual(o["max_messages_per_s"], cap)
        self.assertGreater(o["throttled_ms"], 0, "the cap held the output back")
        print(f"\ncapped MQTT output: {rate:.1f} msg/s (cap {cap}), {low_before} of {2 * n} low-priority "
              f"messages before the high-priority backlog was through", file=sys.stderr)
        self.assertEqual(g.stop(), 0, g.log())

    def test_a_topic_added_by_a_live_reload_reaches_the_remote_without_a_restart(self):
        """A reload that adds a mapping (RELOAD.md 2.6): the new topic's lane joins the running
        MQTT output (rep_mosq_lanes.c), its remote_topic's ${1} taken from the reload's rule, and
        every message on it arrives at the remote once, in order; the old topics carry on. A key of
        the output changed in the same file is applied at the same reload: the output is replaced
        (OUTPUTS.md 3.5), the new instance carrying the new topic too."""
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        y = edge_yaml(self.remote.port)
        g = self.gateway(y)
        publish_all(g.mqtt_port(), items(20), props={"src": "test"})
        self.rec.wait_unique(60, 30)
        wind = '    - {mqtt_pattern: "site/+/wind", danube_topic: /edge1/wind, extract_attributes: {dev: "$1"}}\n'
        # and a key of the output itself: applied, by replacing the output
        g.write_config(y.replace("wal: {", wind + "wal: {", 1).replace(f"max_inflight: {MAX_INFLIGHT}", "max_inflight: 7"))
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port()}/admin/reload", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            ans = json.loads(r.read())
        self.assertEqual([(t["topic"], t["registration"]) for t in ans["topics"]["added"]],
                         [("/edge1/wind", "pending")], ans)
        self.assertEqual(ans["restart_needed"], [], ans)
        self.assertIn("outputs[central].max_inflight", ans["applied"], ans)
        n = 200
        publish_all(g.mqtt_port(), [(f"site/d{i % 2 + 1}/wind", f"3:{i}".encode()) for i in range(n)]
                    + items(20, start=20), props={"src": "test"})
        self.rec.wait_unique(60 + n + 60, 30)
        got = [(t, p) for t, p, _ in self.rec.snapshot() if p.startswith(b"3:")]
        self.assertEqual([p for _, p in got], [f"3:{i}".encode() for i in range(n)], "once each, in order")
        for i, (topic, _) in enumerate(got):
            dev = f"d{i % 2 + 1}"
            self.assertEqual(topic, f"fwd/{dev}/{dev}/edge1/wind/site/{dev}/wind", "the template, ${1} of the new rule")
        judge(self, [m for m in self.rec.snapshot() if not m[1].startswith(b"3:")], 40)
        wait_for(lambda: {t["topic"]: t["acked"] for t in output(g)["topics"]}.get("/edge1/wind") == n, 30,
                 what="the new lane's acks")
        self.assertIn("topic added at run time", g.log())
        self.assertEqual(g.stop(), 0, g.log())

    def unroutable_run(self, dead_letter):
        """remote_topic fwd/${topic}/${topic}: the one record published to a 40,000-byte topic would
        need a remote topic longer than MQTT allows (OUTPUTS.md 4.7); the others arrive in order
        around it."""
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        y = f"""
edge: {{edge_name: edge1}}
mqtt:
  listener: "127.0.0.1:0"
{"  dead_letter: true" if dead_letter else ""}
  topic_mappings:
    - {{mqtt_pattern: "site/+/temp", danube_topic: /edge1/temp}}
wal: {{dir: ./wal, fsync: interval, fsync_interval_ms: 20}}
http: {{listener: "127.0.0.1:0"}}
log: {{format: json}}
outputs:
  - name: central
    kind: mqtt
    broker: "127.0.0.1:{self.remote.port}"
    protocol: 5
    qos: 1
    client_id: "edge1-central"
    remote_topic: "fwd/${{topic}}/${{topic}}"
"""
        g = self.gateway(y)
        publish_all(g.mqtt_port(), [("site/a/temp", b"%d" % i) for i in range(3)] + [("site/%s/temp" % ("x" * 40000), b"too-long")] +
                    [("site/a/temp", b"%d" % i) for i in range(3, 6)])
        self.rec.wait_unique(6, 30)
        wait_for(lambda: all(t["lag_messages"] == 0 for t in output(g)["topics"]), 30, what="lag 0 at the output")
        self.assertEqual([(t, p) for t, p, _ in self.rec.snapshot()], [("fwd/site/a/temp/site/a/temp", b"%d" % i) for i in range(6)],
                         "every carryable record once, in order")
        o = output(g)
        self.assertEqual(o["dead_letters"], 1, o)
        return g

    def test_a_record_without_a_remote_topic_is_a_dead_letter(self):
        g = self.unroutable_run(dead_letter=True)
        dead = wal_dump(os.path.join(g.dir, "wal"), "$dead-letter")
        self.assertEqual([d["payload"] for d in dead], ["too-long"], dead)
        a = dead[0]["attributes"]
        self.assertEqual(a["dead_letter.source"], "output:central")
        self.assertEqual(a["dead_letter.topic"], "/edge1/temp")
        self.assertEqual(a["dead_letter.offset"], "4")
        self.assertIn("longer than 65535", a["dead_letter.error"])
        with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/metrics", timeout=5) as r:
            body = r.read().decode()
        self.assertIn('tributary_dead_letters_total{topic="/edge1/temp",reason="output_unroutable"} 1', body)
        self.assertEqual(g.stop(), 0, g.log())

    def test_without_the_dead_letter_log_such_a_record_is_a_counted_skip(self):
        """mqtt.dead_letter off: nowhere to keep it; skipped (the checkpoint passes it), counted in
        /stats dead_letters, said in the log."""
        g = self.unroutable_run(dead_letter=False)
        wait_for(lambda: any("mqtt.dead_letter is off" in (e.get("msg") or "") for e in json_log_lines(g.log())), 10,
                 what="the skip said in the log")
        self.assertEqual(g.stop(), 0, g.log())

    def test_the_checkpoint_moves_on_the_remotes_ack_never_on_send(self):
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        g = self.gateway(edge_yaml(self.remote.port))
        port = g.mqtt_port()
        publish_all(port, items(10), props={"src": "test"})
        wait_for(lambda: all(t["acked_offset"] == 10 for t in output(g)["topics"]), 30, what="10 acked per topic")
        # a silent remote: its socket still takes our bytes, nothing is acknowledged
        self.remote.proc.send_signal(signal.SIGSTOP)
        try:
            publish_all(port, items(10, start=10), props={"src": "test"})
            wait_for(lambda: sum(t["sent"] for t in output(g)["topics"]) > 30, 30, what="PUBLISHes sent")
            # for as long as the remote says nothing (ack_timeout_ms 3000 here), no checkpoint moves
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                o = output(g)
                self.assertEqual([t["acked_offset"] for t in o["topics"]], [10, 10, 10], "moved on send")
                self.assertGreater(sum(t["lag_messages"] for t in o["topics"]), 0)
                time.sleep(0.1)
            # the ack deadline ends the session; the state says why
            wait_for(lambda: "silent remote" in (output(g)["last_error"] or ""), 20, what="the silent remote noticed")
        finally:
            self.remote.proc.send_signal(signal.SIGCONT)
        self.rec.wait_unique(60, 60)
        wait_for(lambda: all(t["acked_offset"] == 20 for t in output(g)["topics"]), 30, what="20 acked per topic")
        judge(self, self.rec.snapshot(), 20)
        self.assertEqual(g.stop(), 0, g.log())

    def test_memory_first_topics_work_with_the_mqtt_output(self):
        """durability: memory_first (issue 16): a held record is confirmed to its device when the
        MQTT output's remote acknowledged it; with the remote down the output spills the topics to
        the log (reason output), so devices are answered, and nothing is lost."""
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        y = edge_yaml(self.remote.port).replace('extract_attributes: {dev: "$1"}}',
                                                 'extract_attributes: {dev: "$1"}, durability: memory_first}')
        g = self.gateway(y)
        port = g.mqtt_port()
        wait_for(lambda: all(t["durability"] == "memory" for t in stats(g)["topics"]), 20, what="topics in memory")
        publish_all(port, items(200), props={"src": "test"})
        self.rec.wait_unique(600, 60)
        self.remote.stop()
        wait_for(lambda: not output(g)["up"], 20, what="the output down")
        t0 = time.monotonic()
        publish_all(port, items(200, start=200), props={"src": "test"}, timeout=60)  # answered: spilled
        answered_s = time.monotonic() - t0
        s = stats(g)
        spilled = sum(t["spills"]["output"] for t in s["topics"])
        self.assertGreaterEqual(spilled, 1, "the output going down spilled its memory topics")
        self.assertTrue(all(t["held_messages"] == 0 for t in s["topics"]), "nothing waits in memory")
        self.remote.start()
        self.rec.wait_unique(1200, 120)
        wait_for(lambda: all(t["lag_messages"] == 0 for t in output(g)["topics"]), 30, what="drained")
        judge(self, self.rec.snapshot(), 400)
        print(f"\nmemory_first, remote down: 600 publishes answered in {answered_s:.1f} s, spills(output) "
              f"{spilled}", file=sys.stderr)
        self.assertEqual(g.stop(), 0, g.log())

    def test_remote_stopped_then_restarted_loses_nothing_acknowledged(self):
        self.remote = Mosquitto(self.dir).start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        g = self.gateway(edge_yaml(self.remote.port))
        port = g.mqtt_port()
        publish_all(port, items(500), props={"src": "test"})
        self.rec.wait_count(1500, 60)
        # the remote goes away; the devices keep publishing into the log
        self.remote.stop()
        t_down = time.monotonic()
        publish_all(port, items(1000, start=500), props={"src": "test"})
        wait_for(lambda: output(g)["state"] in ("backoff", "connecting"), 20, what="the output notices")
        o = output(g)
        self.assertFalse(o["up"])
        self.assertIsNotNone(o["last_error"])
        self.assertGreater(sum(t["lag_messages"] for t in o["topics"]), 0, "the backlog waits in the log")
        left = OUTAGE_S - (time.monotonic() - t_down)
        if left > 0:
            time.sleep(left)  # the scenario: how long the remote stays away
        failures = output(g)["failures"]
        self.assertLess(failures, 4 + OUTAGE_S * 2 + 2, "reconnects at the backoff's pace (max 1 s)")
        self.remote.start()
        publish_all(port, items(500, start=1500), props={"src": "test"})
        self.rec.wait_unique(3 * 2000, 120)
        wait_for(lambda: all(t["lag_messages"] == 0 for t in output(g)["topics"]), 30, what="drained")
        dups = judge(self, self.rec.snapshot(), 2000)
        o = output(g)
        for k, t in enumerate(TOPICS):
            self.assertLessEqual(dups[k], MAX_INFLIGHT, f"{t}: duplicates only from the window in flight")
        resent = sum(t["resent"] for t in o["topics"])
        ours = [0] * len(TOPICS)
        seen = [set() for _ in TOPICS]
        for _, payload, props in self.rec.snapshot():
            k, seq = (int(x) for x in payload.decode().split(":"))
            if seq in seen[k] and DUP not in props:
                ours[k] += 1
            seen[k].add(seq)
        self.assertGreaterEqual(resent, sum(ours), "every second copy the gateway sent was a counted resend")
        self.assertEqual(o["state"], "up")
        print(f"\nremote outage {OUTAGE_S:.0f} s: 6000 messages, second copies per topic {dups} (of them the "
              f"gateway's {ours}, the rest the remote's own redeliveries), resent {resent}, "
              f"failures {o['failures']}", file=sys.stderr)
        self.assertEqual(g.stop(), 0, g.log())

    def test_gateway_sigkilled_mid_drain_loses_nothing_and_duplicates_are_bounded(self):
        # the recorder's persistent session exists at the remote (saved at its stop), so what the
        # drain delivers before the recorder is back is queued for it
        self.remote = Mosquitto(self.dir).start()
        Recorder(self.remote.port, "fwd/#").close()
        self.remote.stop()
        g = self.gateway(edge_yaml(self.remote.port, replicator=", checkpoint_interval_ms: 0"))
        n = 5000
        publish_all(g.mqtt_port(), items(n), props={"src": "test"})  # a backlog: the remote is not there yet
        self.remote.start()
        self.rec = Recorder(self.remote.port, "fwd/#")
        wait_for(lambda: output(g)["sessions"] >= 1, 30, what="the output connected")
        self.assertTrue(self.rec.first.wait(60), "the drain began")
        g.kill()  # mid-drain
        # what the remote had taken before the kill reaches the recorder: wait until it is quiet
        last = [-1, time.monotonic()]

        def quiet():
            c = self.rec.count()
            if c != last[0]:
                last[0], last[1] = c, time.monotonic()
            return time.monotonic() - last[1] >= 0.5
        wait_for(quiet, 20, what="the recorder quiet after the kill")
        pre = [set() for _ in TOPICS]
        for _, payload, _ in self.rec.snapshot():
            k, seq = (int(x) for x in payload.decode().split(":"))
            pre[k].add(seq)
        got = sum(len(p) for p in pre)
        self.assertLess(got, 3 * n, "the kill landed before the drain finished")
        g.start()
        self.rec.wait_unique(3 * n, 120)
        wait_for(lambda: all(t["lag_messages"] == 0 for t in output(g)["topics"]), 60, what="drained")
        msgs = self.rec.snapshot()
        dups = judge(self, msgs, n)
        # the resend window of each topic, as the restarted output logged it: offsets from its
        # persisted checkpoint + 1 (offset = seq + 1: one fresh log per topic, published in order)
        start = {ln["topic"]: ln["from"] for ln in json_log_lines(g.run_log())
                 if ln.get("msg", "").startswith("mqtt output: resending from the checkpoint")}
        window = []
        for k, t in enumerate(TOPICS):
            frm = start.get(f"/edge1/{t}", n + 1)  # no line: nothing was past the checkpoint
            seen, again = set(), []
            for _, payload, _ in msgs:
                kk, seq = (int(x) for x in payload.decode().split(":"))
                if kk != k:
                    continue
                if seq in seen:
                    again.append(seq)
                seen.add(seq)
            # nothing below the persisted checkpoint is sent again, and only what the remote had
            # taken before the kill can arrive twice: the window is [from, what it had]
            for seq in again:
                self.assertGreaterEqual(seq + 1, frm, f"{t}: offset {seq + 1} resent below the checkpoint {frm}")
                self.assertIn(seq, pre[k], f"{t}: {seq} arrived twice but was not at the remote before the kill")
            w = len([x for x in pre[k] if x + 1 >= frm])
            self.assertLessEqual(dups[k], w, f"{t}: duplicates only from the resend window")
            window.append(w)
        print(f"\nSIGKILL after {got} of {3 * n} arrived: duplicates per topic {dups}, resend windows "
              f"(persisted checkpoint .. what the remote had) {window}, max_inflight {MAX_INFLIGHT}", file=sys.stderr)
        self.assertEqual(g.stop(), 0, g.log())

    def test_tls_to_the_remote_is_verified(self):
        certs = Certs(self.dir)
        certs.make_ca("ca")
        cert, key = certs.sign("remote", "ca", san="IP:127.0.0.1,DNS:localhost")
        certs.make_ca("other")
        self.remote = Mosquitto(self.dir, tls=(certs.path("ca.pem"), cert, key)).start()
        self.rec = Recorder(self.remote.port, "fwd/#", tls_ca=certs.path("ca.pem"))
        # a CA that did not sign the remote's certificate: refused, said, nothing sent
        g = self.gateway(edge_yaml(self.remote.port, tls=certs.path("other.pem")))
        publish_all(g.mqtt_port(), items(10), props={"src": "test"})
        wait_for(lambda: output(g)["failures"] >= 2, 20, what="the handshake refused")
        o = output(g)
        self.assertFalse(o["up"])
        self.assertIn("certificate verify failed", o["last_error"])
        self.assertEqual(self.rec.count(), 0)
        self.assertEqual(g.stop(), 0, g.log())
        # the right CA: verified, delivered, the backlog first
        g = self.gateway(edge_yaml(self.remote.port, tls=certs.path("ca.pem")))
        publish_all(g.mqtt_port(), items(10, start=10), props={"src": "test"})
        self.rec.wait_unique(60, 60)
        judge(self, self.rec.snapshot(), 20)
        self.assertEqual(output(g)["state"], "up")
        self.assertEqual(g.stop(), 0, g.log())

    def test_a_wrong_password_is_reported_and_retried_with_backoff(self):
        self.remote = Mosquitto(self.dir, users={"edge1": "right-pass"}).start()
        pw = os.path.join(self.dir, "central.pw")
        with open(pw, "w") as f:
            f.write("wrong-s3cret\n")
        g = self.gateway(edge_yaml(self.remote.port, password_file=pw))
        wait_for(lambda: output(g)["state"] == "refused", 20, what="state refused")
        o = output(g)
        self.assertIn("CONNACK", o["last_error"])
        self.assertRegex(o["last_error"], "Not authorized|Bad user name or password")
        self.assertGreaterEqual(o["refusals"], 1)
        a0 = o["attempts"]
        time.sleep(6)  # the period the attempts are counted over
        a1 = output(g)["attempts"]
        # equal-jitter backoff from 100 ms doubling to retry_max_ms 1 s: at least 500 ms apart
        # after the fourth attempt, so at most ~16 in 6 s; a spin would be thousands
        self.assertGreaterEqual(a1 - a0, 2, "it keeps retrying")
        self.assertLessEqual(a1 - a0, 16, "backoff, not a spin")
        m = urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/metrics", timeout=5).read().decode()
        self.assertIn('tributary_output_state{output="central",state="refused"} 1', m)
        self.assertNotIn("wrong-s3cret", g.log(), "the password is never logged")
        self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main()
