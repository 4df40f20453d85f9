#!/usr/bin/python3
"""bench_sparkplug.py: the Sparkplug B output's replay and steady figures
(issue 18's bench item; docs/SPARKPLUG.md "Replay and steady cost";
docs/design/OUTPUTS.md 6.3), printed beside the relay's published ones.

  /usr/bin/python3 bench/bench_sparkplug.py [--build build] [--quick]
        [--devices 20] [--fields 25] [--readings 600000] [--rate 2000]
        [--steady-s 30] [--historical flag|separate] [--fsync always|interval|never]
        [--durability log|memory_first] [--max-inflight 100] [--only replay|steady] [--repeats 1] [--keep]

Setup: a real Mosquitto 2 (the remote: persistence on, queue limits off,
queue_qos0_messages so a persistent host loses nothing while it
reconnects), `tributary run` with one `kind: sparkplug` output to it
(`device: "${1}"` over plant/+/telemetry: one Sparkplug device per MQTT
device), and a host: mosquitto_sub on spBv1.0/# (persistent session, QoS
1) writing each message's arrival time (epoch ns), topic and payload in
hex, so the receiving side is C and keeps up; the payloads are decoded
afterwards with Python protobuf (sparkplug_b_pb2 from the build's proto_py)
and every NDATA/DDATA metric is a reading, keyed (device, alias, value):
distinct readings counted, duplicates counted apart, births not counted.

replay: the devices publish JSON counters ({"f0": k, ..., "f24": k}: one
reading per field, --fields fields) while the remote is down, as fast as
QoS 1 allows (one mosquitto_pub -l per device, in parallel), until the log
holds --readings readings (600,000 = 5 minutes at 2,000 readings/s); the
gateway's /stats lag says when the backlog is stored. Then the remote and
the host start, and the figure is readings / (the arrival of the message
that completes the set - the remote's start): reconnect, births and drain,
as an operator would see it. The drain alone (first data to last) is
printed too.

steady: --rate readings/s (20 devices x 4 messages/s x 25 fields = 2,000)
for --steady-s seconds from one paho QoS 1 publisher on the clock, the
gateway's CPU from /proc/<pid>/stat (utime + stime) over the window, as %
of one core; every reading is checked to have arrived.

The relay's figures are its published ones (its README), not measured
here: 296,523 readings/s replaying a 5-minute outage at 2,000 readings/s
(packed, QoS 0 + confirm), 68,237/s packed at QoS 1, and 9% of a CPU at
2,000 readings/s steady. Every figure is printed with the box's load
average (os.getloadavg): on a shared box they are labelled as such.
--quick: 60,000 readings and 10 s steady, a smoke run of about a minute.
Nothing here passes or fails.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_lib as L  # noqa: E402

RELAY_REPLAY, RELAY_QOS1, RELAY_CPU = 296523, 68237, 9.0
GROUP, NODE = "Bench", "edge1"


def load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def gateway_yaml(a, work, port, http, remote):
    return f"""edge: {{edge_name: edge1}}
mqtt:
  listener: "127.0.0.1:{port}"
  topic_mappings:
    - {{mqtt_pattern: "plant/+/telemetry", danube_topic: /edge1/telemetry, durability: {a.durability}}}
wal: {{dir: {work}/wal, fsync: {a.fsync}, max_topic_bytes: 8GiB, max_total_bytes: 16GiB}}
http: {{listener: "127.0.0.1:{http}"}}
replicator: {{retry_initial_ms: 100, retry_max_ms: 500, live_window_ms: 2000}}
log: {{level: warn}}
outputs:
  - name: scada
    kind: sparkplug
    broker: "127.0.0.1:{remote}"
    client_id: bench-edge1
    group_id: {GROUP}
    edge_node_id: {NODE}
    device: "${{1}}"
    historical: {a.historical}
    max_inflight: {a.max_inflight}
"""


class Gateway:
    def __init__(self, a, work, remote_port):
        self.work = os.path.join(work, "gw")
        os.makedirs(self.work, exist_ok=True)
        self.port, self.http = L.free_port(), L.free_port()
        path = os.path.join(self.work, "edge.yaml")
        with open(path, "w") as f:
            f.write(gateway_yaml(a, self.work, self.port, self.http, remote_port))
        log = open(os.path.join(self.work, "tributary.log"), "ab")
        self.proc = L.popen([os.path.join(a.build, "tributary"), "run", "-c", path], stdout=log, stderr=log)
        L.wait_until(lambda: L.port_open(self.port) and L.port_open(self.http), 30, "tributary to listen")

    def scada(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/stats", timeout=5) as r:
            for o in json.loads(r.read())["outputs"]:
                if o["output"] == "scada":
                    return o
        raise RuntimeError("no output scada in /stats")

    def lag(self):
        """records of the output's topics not yet confirmed by the remote"""
        return sum(t["lag_messages"] for t in self.scada()["topics"])


def remote(work, port=None):
    return L.mosquitto(work, "remote", port=port, unlimited=True, extra=("queue_qos0_messages true",))


class Host:
    """mosquitto_sub, persistent session: one line per message, 'epoch.ns topic hexpayload'."""

    def __init__(self, port, path):
        self.path = path
        self.out = open(path, "ab")
        self.proc = L.popen(["stdbuf", "-oL", "mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-i",
                             "bench-spb-host", "-c", "-q", "1", "-t", f"spBv1.0/{GROUP}/#", "-F", "%U %t %x"],
                            stdout=self.out, stderr=subprocess.DEVNULL)

    def size(self):
        self.out.flush()
        return os.path.getsize(self.path)

    def stop(self):
        L.stop(self.proc)
        self.out.close()


def readings(path, spb, lo=None):
    """(times of each data message, cumulative distinct readings after it, duplicates, births, data msgs,
    metrics per data message) from a host file; lo: count only values >= lo (the phase's)."""
    seen = set()
    times, counts = [], []
    dups = births = ndata = 0
    per_msg = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            t, topic = float(parts[0]), parts[1]
            kind = topic.split("/")[2]
            if kind in ("NBIRTH", "DBIRTH"):
                births += 1
                continue
            if kind not in ("NDATA", "DDATA"):
                continue
            p = spb.Payload()
            p.ParseFromString(bytes.fromhex(parts[2] if len(parts) > 2 else ""))
            dev = topic.split("/", 4)[4] if kind == "DDATA" else ""
            ndata += 1
            per_msg.append(len(p.metrics))
            for m in p.metrics:
                v = m.double_value
                if lo is not None and v < lo:
                    continue
                k = (dev, m.alias, v)
                if k in seen:
                    dups += 1
                else:
                    seen.add(k)
            times.append(t)
            counts.append(len(seen))
    return times, counts, dups, births, ndata, per_msg


def payload(a, k):
    return json.dumps({f"f{i}": k for i in range(a.fields)}, separators=(",", ":"))


def replay(a, work, spb):
    rem = remote(work)
    rport = rem.port
    host = Host(rport, os.path.join(work, "warm.received"))
    gw = Gateway(a, work, rport)
    devs = [f"d{i:02d}" for i in range(a.devices)]
    # warm-up: one value per device, so node and devices are born before the outage (k = 0)
    procs = [L.popen(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gw.port), "-q", "1", "-t",
                      f"plant/{d}/telemetry", "-m", payload(a, 0)]) for d in devs]
    for p in procs:
        p.wait(60)
    L.wait_until(lambda: gw.lag() == 0 and gw.scada()["state"] == "up", 60, "the warm-up confirmed")
    host.stop()
    L.stop(rem.proc)
    L.wait_until(lambda: gw.scada()["state"] != "up", 30, "the output to see the remote go")
    # the backlog: per device a file of JSON lines, one mosquitto_pub -l each, in parallel
    per_dev = a.readings // (a.devices * a.fields)
    total = per_dev * a.devices * a.fields
    files = []
    for d in devs:
        path = os.path.join(work, f"{d}.lines")
        with open(path, "w") as f:
            for k in range(1, per_dev + 1):
                f.write(payload(a, k) + "\n")
        files.append(path)
    t_fill = time.monotonic()
    procs = [L.popen(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(gw.port), "-q", "1", "-i", f"pub-{d}",
                      "-t", f"plant/{d}/telemetry", "-l"], stdin=open(path), stdout=subprocess.DEVNULL)
             for d, path in zip(devs, files)]
    for p in procs:
        if p.wait(3600) != 0:
            raise RuntimeError("mosquitto_pub failed")
    L.wait_until(lambda: gw.lag() >= per_dev * a.devices, 600, "the backlog stored")
    fill_s = time.monotonic() - t_fill
    lag = gw.lag()
    print(f"backlog: {lag} messages x {a.fields} fields = {lag * a.fields} readings stored in {fill_s:.1f} s "
          f"({per_dev * a.devices / fill_s:.0f} msg/s in); {load()}", flush=True)
    # the remote back, the host on it, the drain
    cpu_gw0 = L.cpu_seconds(gw.proc.pid)
    t0 = time.time()
    rem = remote(work, rport)
    host = Host(rport, os.path.join(work, "replay.received"))
    L.wait_until(lambda: gw.lag() == 0, 1800, "the backlog drained and confirmed", interval=0.2)
    cpu_gw = L.cpu_seconds(gw.proc.pid) - cpu_gw0
    cpu_mq = L.cpu_seconds(rem.proc.pid)
    last = [-1, time.monotonic()]

    def quiet():  # the host's file stopped growing for 2 s: every message the broker had is written
        s = host.size()
        if s != last[0]:
            last[0], last[1] = s, time.monotonic()
        return time.monotonic() - last[1] > 2
    L.wait_until(quiet, 120, "the host to go quiet", interval=0.2)
    cpu_host = L.cpu_seconds(host.proc.pid)
    load_at = load()
    host.stop()
    times, counts, dups, births, ndata, per_msg = readings(host.path, spb, lo=1)
    got = counts[-1] if counts else 0
    done_at = next((t for t, c in zip(times, counts) if c >= total), None)
    st = gw.scada()
    res = {"total": total, "got": got, "dups": dups, "births": births, "data_msgs": ndata, "fill_s": fill_s,
           "per_msg_avg": sum(per_msg) / max(1, len(per_msg)), "per_msg_max": max(per_msg or [0]),
           "cpu_gw_s": cpu_gw, "cpu_mosq_s": cpu_mq, "cpu_host_s": cpu_host, "load": load_at,
           "sparkplug": st.get("sparkplug")}
    if done_at:
        res["seconds"] = done_at - t0
        res["rate"] = total / (done_at - t0)
        res["drain_s"] = done_at - times[0]
        res["drain_rate"] = total / max(1e-9, done_at - times[0])
    return gw, rem, res


def steady(a, work, spb, gw, rem):
    import paho.mqtt.client as mqtt
    host = Host(rem.port, os.path.join(work, "steady.received"))
    time.sleep(0.5)  # the host's SUBSCRIBE (its persistent session keeps anything before it anyway)
    c = mqtt.Client(client_id="bench-spb-steady")
    c.max_inflight_messages_set(1000)
    c.connect("127.0.0.1", gw.port, 30)
    c.loop_start()
    devs = [f"d{i:02d}" for i in range(a.devices)]
    msgs_per_s = a.rate / a.fields
    k0 = 10 ** 7  # above the replay's counters: the phase's values
    n = int(msgs_per_s * a.steady_s)
    start = time.monotonic() + 0.5
    cpu0 = w0 = None
    for i in range(n):
        due = start + i / msgs_per_s
        d = time.monotonic()
        if due > d:
            time.sleep(due - d)  # the publisher's clock: message i is due at start + i / rate
        if i == 0:
            cpu0, w0 = L.cpu_seconds(gw.proc.pid), time.monotonic()
        c.publish(f"plant/{devs[i % len(devs)]}/telemetry", payload(a, k0 + i // len(devs)), qos=1)
    cpu = L.cpu_seconds(gw.proc.pid) - cpu0
    wall = time.monotonic() - w0
    load_at = load()
    c.loop_stop()
    c.disconnect()
    L.wait_until(lambda: gw.lag() == 0, 60, "the steady phase confirmed")
    time.sleep(1.0)  # the last QoS 0 messages from the broker to the host (what follows counts them)
    host.stop()
    _, counts, dups, _, ndata, per_msg = readings(host.path, spb, lo=k0)
    return {"cpu_pct": 100.0 * cpu / wall, "wall": wall, "sent": n * a.fields, "got": counts[-1] if counts else 0,
            "dups": dups, "data_msgs": ndata, "per_msg_avg": sum(per_msg) / max(1, len(per_msg)), "load": load_at,
            "rate": n * a.fields / wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--fields", type=int, default=25)
    ap.add_argument("--readings", type=int, default=600000)
    ap.add_argument("--rate", type=int, default=2000, help="steady readings/s")
    ap.add_argument("--steady-s", type=float, default=30)
    ap.add_argument("--historical", choices=("flag", "separate"), default="flag")
    ap.add_argument("--fsync", choices=("always", "interval", "never"), default="always")
    ap.add_argument("--durability", choices=("log", "memory_first"), default="log")
    ap.add_argument("--max-inflight", type=int, default=100, help="the output's max_inflight (its default 100)")
    ap.add_argument("--only", choices=("replay", "steady"))
    ap.add_argument("--quick", action="store_true", help="60,000 readings, 10 s steady")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument("--repeats", type=int, default=1, help="replays, each on fresh processes (steady after the last)")
    a = ap.parse_args()
    if a.quick:
        a.readings, a.steady_s = min(a.readings, 60000), min(a.steady_s, 10)
    if a.only == "steady":
        a.readings = a.devices * a.fields  # a backlog of one message per device: the setup only
    a.build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(a.build, "proto_py"))
    import sparkplug_b_pb2 as spb
    print(f"bench_sparkplug: {a.devices} devices x {a.fields} fields, backlog {a.readings} readings, steady "
          f"{a.rate}/s for {a.steady_s:.0f} s, historical {a.historical}, max_inflight {a.max_inflight}, fsync "
          f"{a.fsync}, durability {a.durability}, {a.repeats} repeat(s); {load()}", flush=True)
    rates = []
    for rep in range(a.repeats):
        last = rep == a.repeats - 1
        work = tempfile.mkdtemp(prefix="bench-spb-")
        gw = rem = None
        try:
            gw, rem, r = replay(a, work, spb)
            sp = r.get("sparkplug") or {}
            print(f"\nreplay {rep + 1}: {r['got']} of {r['total']} readings at the host, {r['dups']} duplicates, "
                  f"{r['data_msgs']} data messages ({r['per_msg_avg']:.1f} metrics each, at most "
                  f"{r['per_msg_max']}), {r['births']} births; {r['load']}")
            if "rate" in r and a.only != "steady":
                rates.append(r["rate"])
                print(f"| measure | Tributary (this run) | the relay (published) |\n|---|--:|--:|\n"
                      f"| readings/s, remote start to the last reading at the host | {r['rate']:,.0f} "
                      f"| {RELAY_REPLAY:,} (packed, QoS 0 + confirm); {RELAY_QOS1:,} (packed, QoS 1) |\n"
                      f"| readings/s, first data to last (drain alone) | {r['drain_rate']:,.0f} | |")
                print(f"  {r['seconds']:.2f} s from the remote's start, drain {r['drain_s']:.2f} s; CPU during it: "
                      f"gateway {r['cpu_gw_s']:.2f} s, mosquitto {r['cpu_mosq_s']:.2f} s, host (mosquitto_sub) "
                      f"{r['cpu_host_s']:.2f} s; session {sp}", flush=True)
            elif "rate" not in r:
                print("  NOT ALL READINGS ARRIVED: no rate", flush=True)
            if last and a.only != "replay":
                s = steady(a, work, spb, gw, rem)
                print(f"\nsteady: {s['rate']:.0f} readings/s for {s['wall']:.1f} s, {s['got']} of {s['sent']} at the "
                      f"host, {s['dups']} duplicates, {s['data_msgs']} data messages ({s['per_msg_avg']:.1f} metrics "
                      f"each); {s['load']}")
                print(f"| measure | Tributary (this run) | the relay (published) |\n|---|--:|--:|\n"
                      f"| gateway CPU at {a.rate:,} readings/s, % of one core | {s['cpu_pct']:.1f}% "
                      f"| {RELAY_CPU:.0f}% |", flush=True)
        except Exception as e:  # noqa: BLE001: one failed repeat is reported, the others still run
            print(f"\nrepeat {rep + 1} failed: {e!r} (work {work}, kept)", flush=True)
            a_keep = True
        else:
            a_keep = a.keep
        finally:
            if gw:
                L.stop(gw.proc)
            if rem:
                L.stop(rem.proc)
            L.kill_started()
        if not a_keep:
            shutil.rmtree(work, ignore_errors=True)
    if len(rates) > 1:
        rates.sort()
        print(f"\nreplay readings/s over {len(rates)} runs: median {rates[len(rates) // 2]:,.0f}, min {rates[0]:,.0f}, "
              f"max {rates[-1]:,.0f}; {load()}")

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
