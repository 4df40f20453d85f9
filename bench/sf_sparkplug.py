#!/usr/bin/python3
"""sf_sparkplug.py: store and forward through the Sparkplug B output, judged
at a Sparkplug host (issue 18's acceptance run; docs/SPARKPLUG.md "Store and
forward"; docs/design/OUTPUTS.md 6.2, `OUTPUT=sparkplug`).

  /usr/bin/python3 bench/sf_sparkplug.py [--build build] [--devices 20] [--rate 100]
        [--outage-s 300] [--kills-outage 7] [--kills-replay 3] [--replay-kill-after-ms 300]
        [--warmup-s 10] [--after-s 10] [--historical flag|separate] [--retry-max-ms 5000]
        [--out DIR]

The run, as tests/storeforward/run.sh plays it for the Danube output:
bench/devices (C, libmosquitto: a counter per device at --rate readings/s,
QoS 1, its unacknowledged readings kept and resent after a lost
connection, one "n ack_ms" line per PUBACK in acks-NNN.log) publishes
through `tributary run` (wal.fsync always) whose one output is
`kind: sparkplug` (`device: "${1}"`: device dNNN; the payload, not JSON, is
one Bytes metric per reading) to a real Mosquitto 2 (persistence on, queue
limits off, queue_qos0_messages). The host is mosquitto_sub on spBv1.0/#
(persistent session, QoS 1: what the broker holds for it while it is away
is delivered when it comes back) writing each message's arrival time,
topic and payload in hex; it is restarted after each broker restart.

Timeline: warm-up; the broker stopped (SIGTERM) for --outage-s, with
--kills-outage gateway SIGKILLs spread evenly across it (each restarted
after 1 s); the broker and the host back; --kills-replay SIGKILLs, each
--replay-kill-after-ms after the host sees the replaying session's NBIRTH
(skipped, and said, if the backlog is gone first); --after-s of live load;
the devices stopped (they deliver what they hold), the log drained, the
gateway stopped with SIGTERM (its graceful NDEATH).

The judge reads only what the run left: the devices' ack logs (what was
promised), the host's file (what arrived), decoded with Python protobuf
(the build's proto_py). A reading is (device, n) from the Bytes metric
"d=NNN n=N t=MS" of an NDATA/DDATA; births' values are snapshots, counted
apart, never data:
  missing        acknowledged, never received as data      (must be 0)
  out_of_order   per device, a reading first received after a higher one
                 had been                                   (must be 0)
  duplicates     readings received as data more than once (resent after
                 a session ended unconfirmed, or by a device whose PUBACK
                 died with a killed gateway), counted
  historical     readings flagged is_historical; seq per session checked
                 (NBIRTH 0, then +1 mod 256 over DBIRTH/NDATA/DDATA/DDEATH)
Exit status 1 if missing or out_of_order is not 0. Report in OUT/report.json.
"""
import argparse
import collections
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_lib as L  # noqa: E402

GROUP, NODE = "SF", "sf"


def now_ms():
    return int(time.time() * 1000)


class Run:
    def __init__(self, a):
        self.a = a
        self.out = a.out or tempfile.mkdtemp(prefix="sf-spb-")
        os.makedirs(self.out, exist_ok=True)
        self.events = []
        self.gw = self.rem = self.host = self.dev = None
        self.port, self.http = L.free_port(), L.free_port()
        self.rport = L.free_port()
        self.hosts = 0

    def event(self, name, **kw):
        e = {"event": name, "at_ms": now_ms(), **kw}
        self.events.append(e)
        print(json.dumps(e), flush=True)

    # ---- processes ----------------------------------------------------------------------
    def write_config(self):
        a = self.a
        with open(os.path.join(self.out, "edge.yaml"), "w") as f:
            f.write(f"""edge: {{edge_name: sf}}
replicator: {{retry_initial_ms: 100, retry_max_ms: {a.retry_max_ms}}}
mqtt:
  listener: "127.0.0.1:{self.port}"
  topic_mappings:
    - {{mqtt_pattern: "sf/t0/+", danube_topic: /sf/t0}}
    - {{mqtt_pattern: "sf/t1/+", danube_topic: /sf/t1}}
wal: {{dir: {self.out}/wal, fsync: always, max_topic_bytes: 4GiB, max_total_bytes: 8GiB}}
http: {{listener: "127.0.0.1:{self.http}"}}
log: {{level: warn}}
outputs:
  - name: scada
    kind: sparkplug
    broker: "127.0.0.1:{self.rport}"
    client_id: sf-edge
    group_id: {GROUP}
    edge_node_id: {NODE}
    device: "${{1}}"
    historical: {a.historical}
""")

    def start_gateway(self):
        log = open(os.path.join(self.out, "gateway.log"), "ab")
        self.gw = L.popen([os.path.join(self.a.build, "tributary"), "run", "-c", os.path.join(self.out, "edge.yaml")],
                          stdout=log, stderr=log)
        L.wait_until(lambda: L.port_open(self.port) and L.port_open(self.http), 30, "the gateway to listen")
        self.event("gateway_started", pid=self.gw.pid)

    def kill_gateway(self, phase):
        lag = self.lag()
        self.gw.kill()
        self.gw.wait()
        self.event("gateway_killed", phase=phase, lag_at_kill=lag)
        time.sleep(1.0)  # the scenario's restart delay
        self.start_gateway()

    def start_remote(self):
        self.rem = L.mosquitto(self.out, "remote", port=self.rport, unlimited=True,
                               extra=("queue_qos0_messages true",))
        self.event("remote_started")
        self.hosts += 1
        out = open(os.path.join(self.out, "host.received"), "ab")
        self.host = L.popen(["stdbuf", "-oL", "mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.rport), "-i",
                             "sf-spb-host", "-c", "-q", "1", "-t", f"spBv1.0/{GROUP}/#", "-F", "%U %t %x"],
                            stdout=out, stderr=subprocess.DEVNULL)

    def stop_remote(self):
        L.stop(self.host)
        L.stop(self.rem.proc)
        self.event("remote_stopped")

    def host_bytes(self):
        try:
            return os.path.getsize(os.path.join(self.out, "host.received"))
        except OSError:
            return 0

    def nbirth_after(self, offset):
        """The end of the host file if an NBIRTH arrived after offset, else None."""
        with open(os.path.join(self.out, "host.received"), "rb") as f:
            f.seek(offset)
            data = f.read()
        at = data.find(b"/NBIRTH/")
        if at < 0:
            return None
        nl = data.find(b"\n", at)
        return offset + (nl + 1 if nl >= 0 else len(data))

    def stats(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/stats", timeout=5) as r:
            return json.loads(r.read())

    def lag(self):
        try:
            for o in self.stats()["outputs"]:
                if o["output"] == "scada":
                    return sum(t["lag_messages"] for t in o["topics"])
        except OSError:
            return None
        return None

    # ---- the timeline -------------------------------------------------------------------
    def play(self):
        a = self.a
        self.write_config()
        self.event("scenario", devices=a.devices, rate=a.rate, outage_s=a.outage_s, kills_outage=a.kills_outage,
                   kills_replay=a.kills_replay, historical=a.historical, load=os.getloadavg())
        self.start_remote()
        self.start_gateway()
        os.makedirs(os.path.join(self.out, "devices"), exist_ok=True)
        self.dev = L.popen([os.path.join(a.build, "bench", "devices"), "-p", str(self.port), "-o",
                            os.path.join(self.out, "devices"), "-d", str(a.devices), "-r", str(a.rate), "-q", "1",
                            "-T", "2", "-P", "sf", "-R", "200", "-g", "120"],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.out, "devices.log"), "ab"))
        time.sleep(a.warmup_s)  # the warm-up's length
        self.stop_remote()
        t0 = time.monotonic()
        self.event("outage_start")
        for k in range(1, a.kills_outage + 1):
            at = t0 + a.outage_s * k / (a.kills_outage + 1)
            time.sleep(max(0.0, at - time.monotonic()))  # the kill's moment in the outage
            self.kill_gateway("outage")
        time.sleep(max(0.0, t0 + a.outage_s - time.monotonic()))  # the rest of the outage
        lag = self.lag()
        self.start_remote()
        self.event("outage_end", lag=lag)
        b0 = self.host_bytes()
        for _ in range(a.kills_replay):
            try:  # the session that replays: a new NBIRTH at the host
                b0 = L.wait_until(lambda: self.nbirth_after(b0), 60, "a new NBIRTH at the host")
            except RuntimeError:
                self.event("replay_kill_skipped", why="no new session within 60 s")
                continue
            time.sleep(a.replay_kill_after_ms / 1000)  # the kill lands this far into the replay
            lag = self.lag()
            if not lag or lag < a.devices * a.rate // 2:
                self.event("replay_kill_skipped", why=f"the backlog was gone (lag {lag})")
                continue
            self.kill_gateway("replay")
        def caught_up():  # less than a second of readings behind (live load keeps coming)
            lag = self.lag()
            return lag is not None and lag < a.devices * a.rate
        L.wait_until(caught_up, a.outage_s * 3 + 120, "the backlog drained", interval=0.5)
        self.event("caught_up")
        time.sleep(a.after_s)  # live load after the drain
        L.stop(self.dev, timeout=150)
        self.event("devices_stopped")
        L.wait_until(lambda: self.lag() == 0, 120, "the log drained")
        last = [-1, time.monotonic()]

        def quiet():
            s = self.host_bytes()
            if s != last[0]:
                last[0], last[1] = s, time.monotonic()
            return time.monotonic() - last[1] > 2
        L.wait_until(quiet, 60, "the host to go quiet", interval=0.2)
        rc = L.stop(self.gw)
        self.event("gateway_stopped", exit=self.gw.returncode, wrote=rc)
        time.sleep(1.0)  # the graceful NDEATH to the host
        self.stop_remote()


def judge(out):
    sys.path.insert(0, os.path.join(ARGS.build, "proto_py"))
    import sparkplug_b_pb2 as spb
    acked = {}
    for path in sorted(glob.glob(os.path.join(out, "devices", "acks-*.log"))):
        dev = int(os.path.basename(path)[5:8])
        with open(path) as f:
            acked[dev] = {int(line.split()[0]) for line in f if line.strip()}
    summary = json.load(open(os.path.join(out, "devices", "summary.json")))
    seen, highest = set(), collections.defaultdict(int)
    dups = ooo = hist = snapshots = data_msgs = metrics = unparsed = 0
    seq_gaps = nbirths = ndeaths = 0
    seq = None
    bdseqs = []
    kinds = collections.Counter()
    with open(os.path.join(out, "host.received")) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            topic = parts[1]
            tp = topic.split("/")
            kind = tp[2]
            kinds[kind] += 1
            p = spb.Payload()
            p.ParseFromString(bytes.fromhex(parts[2] if len(parts) > 2 else ""))
            if kind == "NBIRTH":
                nbirths += 1
                seq = 0
                bdseqs.append(next((m.long_value for m in p.metrics if m.name == "bdSeq"), None))
            elif kind == "NDEATH":
                ndeaths += 1
                seq = None
            elif kind in ("DBIRTH", "DDEATH", "NDATA", "DDATA"):
                if seq is not None:
                    if p.seq != (seq + 1) % 256:
                        seq_gaps += 1
                    seq = p.seq
            if kind == "DBIRTH":
                snapshots += sum(1 for m in p.metrics if m.HasField("bytes_value"))
            if kind not in ("NDATA", "DDATA"):
                continue
            data_msgs += 1
            for m in p.metrics:
                metrics += 1
                try:
                    s = m.bytes_value.decode()
                    dev, n = int(s.split("d=")[1].split()[0]), int(s.split("n=")[1].split()[0])
                except (IndexError, ValueError, UnicodeDecodeError):
                    unparsed += 1
                    continue
                hist += m.is_historical
                if (dev, n) in seen:
                    dups += 1
                    continue
                seen.add((dev, n))
                if n < highest[dev]:
                    ooo += 1
                highest[dev] = max(highest[dev], n)
    acked_all = {(d, n) for d, s in acked.items() for n in s}
    missing = sorted(acked_all - seen)
    return {
        "handed_out": sum(x["generated"] for x in summary["devices"]),
        "acknowledged": len(acked_all), "received": len(seen), "missing": len(missing),
        "missing_first": missing[:10], "out_of_order": ooo, "duplicates": dups, "historical": hist,
        "unparsed": unparsed, "data_messages": data_msgs, "metrics_per_message": metrics / max(1, data_msgs),
        "snapshots": snapshots, "nbirths": nbirths, "ndeaths": ndeaths, "seq_gaps": seq_gaps,
        "bdseqs": bdseqs, "messages": dict(kinds),
    }


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--outage-s", type=float, default=300)
    ap.add_argument("--kills-outage", type=int, default=7)
    ap.add_argument("--kills-replay", type=int, default=3)
    ap.add_argument("--replay-kill-after-ms", type=int, default=300)
    ap.add_argument("--warmup-s", type=float, default=10)
    ap.add_argument("--after-s", type=float, default=10)
    ap.add_argument("--retry-max-ms", type=int, default=5000)
    ap.add_argument("--historical", choices=("flag", "separate"), default="flag")
    ap.add_argument("--out")
    ap.add_argument("--judge-only", action="store_true", help="judge an --out directory of an earlier run")
    ARGS = a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    run = Run(a)
    t = time.monotonic()
    if not a.judge_only:
        try:
            run.play()
        finally:
            L.kill_started()
            with open(os.path.join(run.out, "events.jsonl"), "w") as f:
                for e in run.events:
                    f.write(json.dumps(e) + "\n")
    else:
        with open(os.path.join(run.out, "events.jsonl")) as f:
            run.events = [json.loads(line) for line in f if line.strip()]
    r = judge(run.out)
    r["kills"] = collections.Counter(e["phase"] for e in run.events if e["event"] == "gateway_killed")
    r["skipped_replay_kills"] = sum(1 for e in run.events if e["event"] == "replay_kill_skipped")
    r["seconds"] = round(time.monotonic() - t, 1)
    r["load"] = os.getloadavg()
    with open(os.path.join(run.out, "report.json"), "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r, indent=1))
    ok = r["missing"] == 0 and r["out_of_order"] == 0
    print(f"\nsf_sparkplug: {'PASS' if ok else 'FAIL'}: {r['acknowledged']} acknowledged, {r['received']} received, "
          f"{r['missing']} missing, {r['out_of_order']} out of order, {r['duplicates']} duplicates (data re-sent), "
          f"{r['snapshots']} birth snapshots apart, {r['historical']} historical, {r['seq_gaps']} seq gaps; "
          f"kills {dict(r['kills'])}; out {run.out}; load %.2f %.2f %.2f" % r["load"])
    sys.exit(0 if ok else 1)


ARGS = None
if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
