#!/usr/bin/python3
"""test_sparkplug.py: the Sparkplug B output (issue 18) end to end.

`tributary run` with a `kind: sparkplug` output to a real Mosquitto 2
(tlib/mosq.py, logging everything so the host can read the SUBSCRIBE/SUBACK
order, persistence and queue_qos0_messages on so the host's persistent
session keeps what arrives while it reconnects after a broker restart).
Two devices publish JSON counters {"n": i} through the gateway to
plant/<dev>/telemetry; the output's `device: "${1}"` makes them Sparkplug
devices d1 and d2 with the metric telemetry/n. The host
(tlib/sparkplug_host.py) judges everything it receives as it arrives:
subscribe before birth (from the broker's log), bdSeq of each NDEATH ==
its NBIRTH's, bdSeq forward on every new session, seq continuity per
session, aliases stable across every birth (rebirths, broker restarts, the
gateway's SIGKILL restarts: the alias table is persisted), data by alias
only. On top of it the test checks: every counter value arrives, first
arrivals in order per metric; what was published while the broker was down
arrives marked historical, live values not; NCMD Node Control/Rebirth is
answered within 1 s by an NBIRTH with the same bdSeq; SIGTERM sends the
graceful NDEATH (a PUBLISH of the node, not the broker's will) and exits 0.
`historical` (OUTPUTS.md 5.5): a backlog whose last value is past the live
window followed in the log by young ones: under `flag` one DDATA holds both
kinds, under `separate` none does, each old value flagged either way.

  TRIBUTARY_BIN=build/tributary TRIB_BUILD_DIR=build TRIB_SOURCE_DIR=. \\
      /usr/bin/python3 tests/integration/test_sparkplug.py
"""
import json
import os
import re
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, wait_for, wal_dump  # noqa: E402
from tlib.mosq import Mosquitto, publish_all  # noqa: E402
from tlib.reloads import ask  # noqa: E402
from tlib.sparkplug_host import SparkplugHost, check_log  # noqa: E402

GROUP, NODE, CLIENT = "Plant1", "edge1", "edge1-scada"
DEVS = ("d1", "d2")
METRIC = "telemetry/n"
LIVE_WINDOW_MS = 1000
OUTAGE_S = 2.5  # longer than the live window: what waits it out is historical when sent


def edge_yaml(port, historical="flag", live_window_ms=LIVE_WINDOW_MS):
    return f"""
edge: {{edge_name: edge1}}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {{mqtt_pattern: "plant/+/telemetry", danube_topic: /edge1/telemetry}}
wal: {{dir: ./wal, fsync: interval, fsync_interval_ms: 20}}
http: {{listener: "127.0.0.1:0"}}
replicator: {{retry_initial_ms: 100, retry_max_ms: 500, ack_timeout_ms: 3000, rpc_timeout_ms: 3000,
             live_window_ms: {live_window_ms}, shutdown_grace_ms: 3000}}
log: {{format: json}}
outputs:
  - name: scada
    kind: sparkplug
    broker: "127.0.0.1:{port}"
    client_id: "{CLIENT}"
    group_id: "{GROUP}"
    edge_node_id: "{NODE}"
    device: "${{1}}"
    primary_host_id: ""
    historical: {historical}
    max_inflight: 100
"""


def stats(g):
    with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/stats", timeout=5) as r:
        return json.loads(r.read())


def scada(g):
    for o in stats(g)["outputs"]:
        if o["output"] == "scada":
            return o
    raise AssertionError("no output scada in /stats")


class Sparkplug(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-spb-")
        self.remote = Mosquitto(self.dir)
        with open(self.remote.conf, "a") as f:  # SUBACK and PUBLISH lines (check_log), QoS 0 kept for the host
            f.write("log_type all\nqueue_qos0_messages true\n")
        self.remote.start()
        self.host = SparkplugHost(self.remote.port, GROUP, NODE, client_id="tb-spb-host", clean_session=False)
        self.g = None
        self.next = {d: 0 for d in DEVS}  # the next counter value per device
        self.outage = set()               # (dev, n) published while the broker was down

    def tearDown(self):
        self.host.close()
        if self.g and self.g.proc and self.g.proc.poll() is None:
            self.g.proc.kill()
            self.g.proc.wait()
        self.remote.stop()

    def publish(self, n, outage=False, devs=DEVS):
        """n counter values per device, interleaved, through the gateway (stored when it returns)."""
        items = []
        for _ in range(n):
            for d in devs:
                items.append((f"plant/{d}/telemetry", json.dumps({"n": self.next[d]}).encode()))
                if outage:
                    self.outage.add((d, self.next[d]))
                self.next[d] += 1
        publish_all(self.g.mqtt_port(), items, client_id="trib-test-device")

    def arrived(self, d):
        return {int(v) for v, _, _ in self.host.values(d, METRIC)}

    def wait_all(self, timeout=60):
        wait_for(lambda: all(len(self.arrived(d)) == self.next[d] for d in DEVS), timeout,
                 what=f"every value at the host ({[len(self.arrived(d)) for d in DEVS]} of {self.next})")

    def start_born(self, y):
        """The gateway on file y, its node born at the host."""
        self.g = Gateway(y, workdir=self.dir)
        self.g.start()
        self.host.wait_count("NBIRTH", 1, 30)

    def reload(self, y):
        """Writes y and asks POST /admin/reload: its JSON answer."""
        self.g.write_config(y)
        status, body = ask(self.g.http_port(), "POST", "/admin/reload")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def last_nbirth_bdseq(self):
        b = self.host.bdseqs("NBIRTH")
        return b[-1] if b else None

    def test_sessions_across_broker_restarts_and_kills_lose_nothing_and_keep_the_rules(self):
        self.g = Gateway(edge_yaml(self.remote.port), workdir=self.dir)
        self.g.start()
        self.host.wait_count("NBIRTH", 1, 30)
        self.publish(200)
        self.wait_all()
        live = [h for d in DEVS for _, _, h in self.host.values(d, METRIC)]
        self.assertIn(False, live, "live values are not historical")

        # NCMD Node Control/Rebirth: a fresh NBIRTH (and the DBIRTHs) with the same bdSeq, within 1 s
        births, bd = self.host.count("NBIRTH"), self.last_nbirth_bdseq()
        sent = self.host.request_rebirth()
        self.host.wait_count("NBIRTH", births + 1, 5)
        with self.host.lock:
            at = [m[0] for m in self.host.messages if m[2] == "NBIRTH"][births]
        self.assertLess(at - sent, 1.0, "the rebirth's NBIRTH within 1 s")
        self.assertEqual(self.last_nbirth_bdseq(), bd, "a rebirth keeps the bdSeq")
        rebirth_ms = (at - sent) * 1000

        # the broker restarted 5 times (the 5 reconnects), with values published while it is
        # down (a backlog)
        for _ in range(5):
            births = self.host.count("NBIRTH")
            self.remote.stop()
            wait_for(lambda: scada(self.g)["state"] != "up", 20, what="the output saw the broker go")
            self.publish(50, outage=True)
            time.sleep(OUTAGE_S)  # the outage's length (values must be older than the live window)
            self.remote.start()
            self.host.wait_count("NBIRTH", births + 1, 30)
            self.publish(20)
            self.wait_all()

        # the gateway SIGKILLed 3 times mid-stream (the 3 restarts): the will is its last
        # NBIRTH's bdSeq, the restart continues the bdSeq and the aliases from the log's output state
        for _ in range(3):
            births, deaths = self.host.count("NBIRTH"), self.host.count("NDEATH")
            self.publish(300)
            self.g.kill()
            self.host.wait_count("NDEATH", deaths + 1, 30)  # the will (keepalive or the closed socket)
            self.g.start()
            self.host.wait_count("NBIRTH", births + 1, 30)
            self.publish(20)
            self.wait_all()

        # SIGTERM: the graceful NDEATH, published by the node itself, then exit 0
        st = scada(self.g)
        deaths = self.host.count("NDEATH")
        self.assertEqual(self.g.stop(), 0, self.g.log())
        self.host.wait_count("NDEATH", deaths + 1, 10)
        self.assertEqual(self.host.bdseqs("NDEATH")[-1], self.last_nbirth_bdseq())
        graceful = re.compile(r"Received PUBLISH from %s \(d0, q1, r0, m\d+, 'spBv1.0/%s/NDEATH/%s'"
                              % (re.escape(CLIENT), GROUP, NODE))
        self.assertTrue(graceful.search(self.remote.log()), "the NDEATH on SIGTERM is the node's own PUBLISH")

        # the judgement
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        bad, conns, nbirths = check_log(self.remote.log_path, CLIENT, GROUP, NODE)
        self.assertEqual(bad, [], bad)
        self.assertGreaterEqual(nbirths, 1 + 1 + 5 + 3)
        dups = hist_outage = 0
        for d in DEVS:
            vals = self.host.values(d, METRIC)
            seen, last = set(), -1
            for v, _, historical in vals:
                n = int(v)
                if n in seen:
                    dups += 1
                    continue
                self.assertEqual(n, last + 1, f"{d}: first arrivals in order ({n} after {last})")
                seen.add(n)
                last = n
                if (d, n) in self.outage:
                    self.assertTrue(historical, f"{d}: {n} waited out an outage and is not historical")
                    hist_outage += 1
            self.assertEqual(len(seen), self.next[d], f"{d}: {self.next[d] - len(seen)} missing")
        self.assertEqual(hist_outage, len(self.outage))
        sp = st["sparkplug"]
        self.assertEqual(sp["bdseq"], self.last_nbirth_bdseq(), st)
        self.assertGreaterEqual(sp["nbirths"], 1)
        self.assertGreaterEqual(sp["confirmed"], 1)
        print(f"\nsparkplug: {sum(self.next.values())} values, {self.host.count('NBIRTH')} NBIRTHs over "
              f"{conns} connections, {self.host.count('NDEATH')} NDEATHs, bdSeqs {self.host.bdseqs('NBIRTH')}, "
              f"{dups} duplicates (resends), {hist_outage} outage values historical, rebirth answered in "
              f"{rebirth_ms:.0f} ms", file=sys.stderr)

    def replay_with_live_tail(self, historical):
        """A backlog whose older part is past the live window and whose newer part is not when the broker
        returns; returns (mixed, historical only, live only) DDATA counts and the young values' flags.
        Device d1's last old value and its young values follow each other in the log (the output builds
        a message per device run), so a payload can hold both kinds."""
        window_s = 3.0
        self.g = Gateway(edge_yaml(self.remote.port, historical, int(window_s * 1000)), workdir=self.dir)
        self.g.start()
        self.host.wait_count("NBIRTH", 1, 30)
        self.publish(20)
        self.wait_all()
        births = self.host.count("NBIRTH")
        self.remote.stop()
        wait_for(lambda: scada(self.g)["state"] != "up", 20, what="the output saw the broker go")
        self.publish(150, outage=True)
        self.publish(1, outage=True, devs=("d1",))
        time.sleep(window_s + 0.5)  # the outage's length: these values age past the live window
        young = self.next["d1"]
        self.publish(10, devs=("d1",))  # young when the broker returns (it reconnects within retry_max_ms)
        self.remote.start()
        self.host.wait_count("NBIRTH", births + 1, 30)
        self.publish(20)
        self.wait_all()
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        mixed = hist_only = live_only = 0
        with self.host.lock:
            data = [m[4] for m in self.host.messages if m[2] == "DDATA"]
        for p in data:
            h = sum(1 for m in p.metrics if m.is_historical)
            mixed += 0 < h < len(p.metrics)
            hist_only += h == len(p.metrics)
            live_only += h == 0
        for d in DEVS:
            last = -1
            for v, _, hist in self.host.values(d, METRIC):
                n = int(v)
                if n <= last:
                    continue  # a resend (none expected without a cut)
                self.assertEqual(n, last + 1, f"{d}: first arrivals in order ({n} after {last})")
                last = n
                if (d, n) in self.outage:
                    self.assertTrue(hist, f"{d}: {n} waited out the outage and is not historical")
        young_flags = [h for v, _, h in self.host.values("d1", METRIC) if young <= int(v) < young + 10]
        print(f"\nsparkplug historical: {historical}: {len(data)} DDATA, {hist_only} historical only, "
              f"{live_only} live only, {mixed} mixed; young values historical: {sum(young_flags)} of "
              f"{len(young_flags)}", file=sys.stderr)
        return mixed, hist_only, live_only, young_flags

    def test_historical_flag_lets_a_payload_hold_both(self):
        mixed, _, _, young = self.replay_with_live_tail("flag")
        self.assertIn(False, young, "the young values were sent within the live window (else the broker "
                                    "came back too slowly for this scenario)")
        self.assertGreater(mixed, 0, "flag: the last old value and the first young one share a DDATA")

    def test_historical_separate_never_mixes_replayed_and_live_values(self):
        mixed, hist_only, live_only, young = self.replay_with_live_tail("separate")
        self.assertIn(False, young, "the young values were sent within the live window")
        self.assertEqual(mixed, 0, f"separate: {mixed} DDATA hold historical and live values")
        self.assertGreater(hist_only, 0)
        self.assertGreater(live_only, 0)


    def test_a_topic_added_by_a_live_reload_is_born_then_carried(self):
        """A reload adds the mapping plant/+/energy (RELOAD.md 2.6): its lane joins the running
        output, the device template's ${1} from the reload's rule; its metric energy/n is new, so
        each device is born again (a DBIRTH with it: Sparkplug B, a new metric needs a new birth)
        before any DDATA uses its alias; every value arrives once, in order; no NBIRTH needed."""
        y = edge_yaml(self.remote.port)
        self.start_born(y)
        self.publish(10)
        self.wait_all()
        nbirths = self.host.count("NBIRTH")
        energy = '    - {mqtt_pattern: "plant/+/energy", danube_topic: /edge1/energy}\n'
        ans = self.reload(y.replace("wal: {", energy + "wal: {", 1))
        self.assertEqual([(t["topic"], t["registration"]) for t in ans["topics"]["added"]],
                         [("/edge1/energy", "pending")], ans)
        n = 50
        publish_all(self.g.mqtt_port(), [(f"plant/{d}/energy", json.dumps({"n": i}).encode())
                                         for i in range(n) for d in DEVS], client_id="trib-test-device")
        self.publish(10)
        wait_for(lambda: all(len(self.host.values(d, "energy/n")) >= n for d in DEVS), 30, what="energy/n at the host")
        self.wait_all()
        for d in DEVS:
            self.assertEqual([int(v) for v, _, _ in self.host.values(d, "energy/n")], list(range(n)),
                             f"{d}: energy/n once each, in order")
            with self.host.lock:
                births = [p for _, _, kind, dev, p, _ in self.host.messages if kind == "DBIRTH" and dev == d]
            self.assertIn("energy/n", [m.name for m in births[-1].metrics], f"{d}: born again with the new metric")
        self.assertEqual(self.host.count("NBIRTH"), nbirths, "device metrics: DBIRTHs, not a new NBIRTH")
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        self.assertEqual(self.g.stop(), 0, self.g.log())


    def test_an_output_changed_by_a_reload_is_replaced_with_a_death_and_a_new_birth(self):
        """A key of the sparkplug output changed by a reload (OUTPUTS.md 3.5; max_inflight here): the
        output is replaced alone: the old session ends with its NDEATH (bdSeq of its NBIRTH), the new
        one is born with the next bdSeq, and every value published before, during and after the
        change arrives once, in order; the host's rules hold throughout."""
        y = edge_yaml(self.remote.port)
        self.start_born(y)
        self.publish(20)
        self.wait_all()
        deaths, births = self.host.count("NDEATH"), self.host.count("NBIRTH")
        bd = self.last_nbirth_bdseq()
        ans = self.reload(y.replace("max_inflight: 100", "max_inflight: 50"))
        self.assertEqual((ans["applied"], ans["restart_needed"]), (["outputs[scada].max_inflight"], []), ans)
        self.publish(20)  # during and after the change: kept in the log for the new session
        self.host.wait_count("NBIRTH", births + 1, 30)
        self.publish(20)
        self.wait_all()
        self.assertEqual(self.host.count("NDEATH"), deaths + 1, "the old session's NDEATH")
        self.assertEqual(self.host.bdseqs("NDEATH")[-1], bd, "the NDEATH of the old session's birth")
        self.assertEqual(self.last_nbirth_bdseq(), (bd + 1) % 256, "the new session: the next bdSeq")
        for d in DEVS:
            got = [int(v) for v, _, _ in self.host.values(d, METRIC)]
            firsts = list(dict.fromkeys(got))
            self.assertEqual(firsts, list(range(60)), f"{d}: every value, first arrivals in order")
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        self.assertIn("output changed, the others untouched", self.g.log())
        self.assertEqual(self.g.stop(), 0, self.g.log())

    def test_a_message_cap_paces_the_data_never_the_births(self):
        """outputs[].max_messages_per_s on a sparkplug output (rep_mosq_lanes.c asks the pacer per
        record): a backlog of 80 records drains at the cap (a record is one metric set; NDATA/DDATA
        pack them, so the PUBLISH rate is at most the cap too), while an NCMD rebirth asked
        mid-drain is answered by an NBIRTH within 1 s: births do not wait for tokens."""
        cap, n = 20, 40
        self.g = Gateway(edge_yaml(self.remote.port) + f"    max_messages_per_s: {cap}\n", workdir=self.dir)
        self.g.start()
        self.host.wait_count("NBIRTH", 1, 30)
        self.publish(n)
        wait_for(lambda: sum(len(self.arrived(d)) for d in DEVS) >= 10, 10, what="the drain begins")
        births = self.host.count("NBIRTH")
        sent = self.host.request_rebirth()
        self.host.wait_count("NBIRTH", births + 1, 5)
        with self.host.lock:
            at = [m[0] for m in self.host.messages if m[2] == "NBIRTH"][births]
        self.assertLess(at - sent, 1.0, "the rebirth's NBIRTH within 1 s, capped data or not")
        self.assertLess(sum(len(self.arrived(d)) for d in DEVS), 2 * n, "the rebirth came mid-drain")
        self.wait_all(30)
        with self.host.lock:
            data = [(t, len(p.metrics)) for t, _, kind, _, p, _ in self.host.messages if kind == "DDATA"]
        burst = cap // 5  # 200 ms of the rate
        span = data[-1][0] - data[0][0]
        rate = (sum(k for _, k in data) - data[0][1] - burst) / span
        self.assertLess(rate, cap * 1.1, f"{rate:.1f} records/s over {span:.2f} s with a cap of {cap}")
        self.assertGreater(rate, cap * 0.7, f"{rate:.1f} records/s: far below the cap of {cap}")
        o = scada(self.g)
        self.assertEqual(o["max_messages_per_s"], cap)
        self.assertGreater(o["throttled_ms"], 0, "the cap held the output back")
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        print(f"\ncapped sparkplug output: {rate:.1f} records/s (cap {cap}), {len(data)} DDATA; rebirth "
              f"answered in {(at - sent) * 1000:.0f} ms mid-drain", file=sys.stderr)
        self.assertEqual(self.g.stop(), 0, self.g.log())

    def test_a_value_of_another_type_is_a_dead_letter_and_the_rest_arrive_in_order(self):
        """A metric born a number then given a string (issue 18, OUTPUTS.md 4.7): the string record
        goes to the dead-letter log with its reason and the output's name as its source, counted in
        tributary_dead_letters_total{reason="output_type_mismatch"}; every other value arrives in
        order, and the checkpoint passes the dead one only once the log has it (the invariant)."""
        y = edge_yaml(self.remote.port).replace('  listener: "127.0.0.1:0"\n',
                                                 '  listener: "127.0.0.1:0"\n  dead_letter: true\n', 1)
        self.g = Gateway(y, workdir=self.dir)
        self.g.start()
        self.host.wait_count("NBIRTH", 1, 30)
        items = [("plant/d1/telemetry", json.dumps({"n": i}).encode()) for i in range(5)]
        items.append(("plant/d1/telemetry", json.dumps({"n": "five"}).encode()))
        items += [("plant/d1/telemetry", json.dumps({"n": i}).encode()) for i in range(5, 10)]
        publish_all(self.g.mqtt_port(), items, client_id="trib-test-device")
        wait_for(lambda: len(self.host.values("d1", METRIC)) >= 10, 30, what="the ten numbers at the host")
        self.assertEqual([int(v) for v, _, _ in self.host.values("d1", METRIC)], list(range(10)),
                         "every number once, in order, the string left out")
        dead = wait_for(lambda: wal_dump(os.path.join(self.g.dir, "wal"), "$dead-letter") or None, 30,
                        what="the dead letter")
        self.assertEqual(len(dead), 1, dead)
        d = dead[0]
        self.assertEqual(json.loads(d["payload"]), {"n": "five"})
        self.assertEqual(d["mqtt_topic"], "plant/d1/telemetry")
        a = d["attributes"]
        self.assertEqual(a["dead_letter.source"], "output:scada")
        self.assertEqual(a["dead_letter.topic"], "/edge1/telemetry")
        self.assertEqual(a["dead_letter.offset"], "6")
        self.assertEqual(a["dead_letter.error"], "sparkplug: telemetry/n is Double, got string")

        def sample(body, name, **labels):
            for line in body.splitlines():
                if line.startswith(name + "{"):
                    got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split(" ")[0]))
                    if all(got.get(k) == v for k, v in labels.items()):
                        return float(line.rsplit(" ", 1)[1])
            return None

        def settled():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.g.http_port()}/metrics", timeout=5) as r:
                body = r.read().decode()
            t = "/edge1/telemetry"
            return (sample(body, "tributary_dead_letters_total", topic=t, reason="output_type_mismatch") == 1 and
                    sample(body, "tributary_topic_invariant_ok", topic=t) == 1)
        wait_for(settled, 10, what="tributary_dead_letters_total{reason=output_type_mismatch} 1, the invariant held")
        self.assertEqual(scada(self.g)["dead_letters"], 1)
        viol = self.host.violations()
        self.assertEqual(viol, [], "\n".join(viol[:30]))
        self.assertEqual(self.g.stop(), 0, self.g.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
