#!/usr/bin/python3
"""bench/soak_reload.py: the soak of live mapping reload (issue 19's
acceptance; not in CI: 30 minutes).

    /usr/bin/python3 bench/soak_reload.py [--minutes 30] [--rate 2000]
        [--reload-every 30] [--outage-every 5] [--outage-secs 30]
        [--clients 4] [--warmup 120] [--build build] [--out build/bench]

The gateway (build/tributary) and the mock cluster (tests/mock_cluster, its
JSON-lines store) are started through tests/integration/tlib. `--clients`
paho publishers on persistent MQTT 3.1.1 connections publish QoS 1 at
`--rate` msg/s in all, rotating a/cI, b/cI, c/cI, payload {"c": "cI", "n": n}
(n counts per client). Meanwhile:

  - every --reload-every seconds (default 30) the config file is rewritten, alternating
    A (a/+ -> /e1/a, b/+ -> /e1/b, # -> /e1/rest) and B (b/+ and a/+
    reordered, c/+ -> /e1/c added before #): both route every published
    topic somewhere; SIGHUP, then the log must say "reload: mappings
    applied" with the next generation (else the run fails);
  - every --outage-every minutes (default 5) the mock cluster answers UNAVAILABLE for
    --outage-secs (its fault knob, POST /fault), then normal again;
  - every 10 s the gateway's VmRSS (/proc/PID/status) and open fds
    (/proc/PID/fd) are sampled, with its /stats lag, to a CSV.

At the end: publishing stops, every PUBACK is awaited, the backlog drains
(lag_messages 0 on every topic in /stats), SIGTERM, and the mock's store is
read record by record: every PUBACKed (client, n) must be there (0
acknowledged lost), duplicates are counted. RSS after --warmup: max/min
within 10%; fds: max - min after warm-up at most --fd-bound (default 8); the sample after the drain
(publishers gone) is in the CSV, phase "drained", not judged.
A summary table goes to stdout and OUT/soak-reload.txt, the curve to
OUT/soak-reload.csv. Exit status 0 only if every check held.
"""
import argparse
import csv
import http.client
import json
import os
import re
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--minutes", type=float, default=30)
ap.add_argument("--rate", type=int, default=2000, help="msg/s in all")
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--reload-every", type=float, default=30, help="seconds")
ap.add_argument("--outage-every", type=float, default=5, help="minutes (0: no outage)")
ap.add_argument("--outage-secs", type=float, default=30)
ap.add_argument("--sample-every", type=float, default=10)
ap.add_argument("--warmup", type=float, default=120, help="seconds excluded from the RSS/fd judgement")
ap.add_argument("--rss-bound", type=float, default=0.10, help="(max-min)/min after warm-up")
ap.add_argument("--fd-bound", type=int, default=8, help="max-min fds after warm-up")
ap.add_argument("--drain-timeout", type=float, default=600)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--out", default=None, help="default BUILD/bench")
ap.add_argument("--keep", action="store_true", help="keep the gateway's and the mock's work dirs")
args = ap.parse_args()

os.environ.setdefault("TRIB_BUILD_DIR", args.build)
os.environ.setdefault("TRIBUTARY_BIN", os.path.join(args.build, "tributary"))
os.environ.setdefault("TRIB_SOURCE_DIR", ROOT)
os.environ.setdefault("TRIB_TESTDATA", os.path.join(ROOT, "tests", "data"))

import paho.mqtt.client as paho  # noqa: E402
from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib.mock import MockCluster  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

OUT = args.out or os.path.join(args.build, "bench")
os.makedirs(OUT, exist_ok=True)
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


class Pub:
    """Paced QoS 1 paho publisher on one persistent connection. The acked
    ledger is a bytearray indexed by n (a set of millions of ints would
    weigh more than the gateway)."""

    def __init__(self, port, name, rate):
        self.name, self.rate = name, rate
        self.c = paho.Client(client_id=name, protocol=paho.MQTTv311)
        self.c.max_inflight_messages_set(1000)
        self.c.max_queued_messages_set(0)
        self.lock = threading.Lock()
        self.mid_to_n, self.early = {}, set()
        self.acked = bytearray()
        self.sent = 0
        self.disconnects = 0
        self.c.on_publish = self._on_publish
        self.c.on_disconnect = lambda *a: setattr(self, "disconnects", self.disconnects + 1)
        self.c.connect("127.0.0.1", port, keepalive=60)
        self.c.loop_start()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_publish(self, client, userdata, mid):
        with self.lock:
            n = self.mid_to_n.pop(mid, None)
            if n is None:
                self.early.add(mid)
            else:
                self.acked[n] = 1

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) + 1
            while self.sent < due and not self._stop.is_set():
                n = self.sent
                with self.lock:
                    self.acked.append(0)
                info = self.c.publish(f"{'abc'[n % 3]}/{self.name}", json.dumps({"c": self.name, "n": n}), qos=1)
                with self.lock:
                    if info.mid in self.early:
                        self.early.discard(info.mid)
                        self.acked[n] = 1
                    else:
                        self.mid_to_n[info.mid] = n
                self.sent += 1
            self._stop.wait(0.005)      # pacing tick of the load itself

    def stop(self, timeout):
        self._stop.set()
        self.thread.join(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.mid_to_n:
                    break
            time.sleep(0.05)            # polling the ack map until the deadline
        self.c.disconnect()
        self.c.loop_stop()
        with self.lock:
            return len(self.mid_to_n)


def ask(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body


def stats(port):
    st, body = ask(port, "GET", "/stats")
    return json.loads(body) if st == 200 else None


def proc_sample(pid):
    rss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


MAP_A = [{"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}},
         {"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}},
         {"mqtt_pattern": "#", "danube_topic": "/e1/rest"}]
MAP_B = [{"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}},
         {"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}},
         {"mqtt_pattern": "c/+", "danube_topic": "/e1/c", "extract_attributes": {"dev": "$1"}},
         {"mqtt_pattern": "#", "danube_topic": "/e1/rest"}]


def main():
    mc = MockCluster(keep=args.keep).start()
    log(f"mock cluster grpc={mc.grpc_target} store={mc.store_path}")

    def yaml(maps):
        return edge_yaml(mc.grpc_url, maps, edge="e1", wal="fsync: never", extra="log: {level: info}\n")

    g = Gateway(yaml(MAP_A))
    g.start()
    g.wait_log("bootstrap complete", timeout=90)
    pid, hport, mport = g.proc.pid, g.http_port(), g.mqtt_port()
    log(f"gateway pid={pid} mqtt={mport} http={hport} dir={g.dir}")

    pubs = [Pub(mport, f"c{i}", args.rate / args.clients) for i in range(args.clients)]
    for p in pubs:
        p.thread.start()

    duration = args.minutes * 60
    gen, reloads, reload_fail, outages = 1, 0, [], 0
    next_reload, next_sample = args.reload_every, 0.0
    next_outage = args.outage_every * 60 if args.outage_every > 0 else float('inf')
    outage_end = None
    samples = []
    t_start = time.monotonic()
    last_sent, last_t = 0, t_start
    applied_re = re.compile(r'mappings applied.*?generation[=":]+(\d+)')
    while True:
        now = time.monotonic() - t_start
        if now >= duration:
            break
        if now >= next_sample:
            rss, fds = proc_sample(pid)
            st = stats(hport) or {}
            lag = sum(t.get("lag_messages", 0) for t in st.get("topics", []))
            sent = sum(p.sent for p in pubs)
            tn = time.monotonic()
            rate = (sent - last_sent) / max(tn - last_t, 1e-6)
            last_sent, last_t = sent, tn
            samples.append({"t_s": round(now, 1), "rss_kb": rss, "fds": fds, "lag_messages": lag,
                            "sent": sent, "rate_msg_s": round(rate), "generation": gen,
                            "outage": int(outage_end is not None), "phase": "load"})
            log(f"rss={rss} kB fds={fds} lag={lag} sent={sent} ({rate:.0f} msg/s) gen={gen}"
                f"{' OUTAGE' if outage_end is not None else ''}")
            next_sample += args.sample_every
        if outage_end is None and now >= next_outage:
            mc.control.fault("unavailable")
            outage_end = now + args.outage_secs
            outages += 1
            log(f"outage {outages}: mock UNAVAILABLE for {args.outage_secs:.0f} s")
            next_outage += args.outage_every * 60
        if outage_end is not None and now >= outage_end:
            mc.control.fault("normal")
            outage_end = None
            log("outage over: mock normal")
        if now >= next_reload:
            reloads += 1
            cfg = MAP_B if reloads % 2 else MAP_A
            mark = len(g.log())
            g.write_config(yaml(cfg))
            os.kill(pid, signal.SIGHUP)
            want = gen + 1

            def applied():
                for m in applied_re.finditer(g.log()[mark:]):
                    if int(m.group(1)) == want:
                        return True
                return False
            try:
                wait_for(applied, timeout=30, interval=0.05, what=f"generation {want} applied")
                gen = want
                log(f"reload {reloads}: config {'B' if cfg is MAP_B else 'A'} applied, generation {gen}")
            except Exception as e:  # noqa: BLE001
                reload_fail.append(f"reload {reloads}: {e}")
                log(f"reload {reloads} NOT applied: {e}\n{g.log()[mark:][-2000:]}")
            next_reload += args.reload_every
        time.sleep(0.05)                # the scheduler's tick (the events above are due at fixed times)
    if outage_end is not None:
        mc.control.fault("normal")
        log("outage cut short at the end: mock normal")
    elapsed = time.monotonic() - t_start
    disconnects = sum(p.disconnects for p in pubs)    # before stop(): its own DISCONNECT counts too
    log("stopping the publishers")
    unacked = [p.stop(120) for p in pubs]
    sent = sum(p.sent for p in pubs)
    acked = sum(sum(p.acked) for p in pubs)
    log(f"sent={sent} acked={acked} unacked={sum(unacked)} disconnects={disconnects}")

    t_drain = time.monotonic()

    def drained():
        st = stats(hport)
        return st and all(t.get("lag_messages", 0) == 0 for t in st["topics"])
    drain_ok = True
    try:
        wait_for(drained, timeout=args.drain_timeout, interval=0.5, what="lag 0 on every topic")
    except Exception as e:  # noqa: BLE001
        drain_ok = False
        log(f"drain: {e}")
    drain_s = time.monotonic() - t_drain
    rss, fds = proc_sample(pid)
    samples.append({"t_s": round(time.monotonic() - t_start, 1), "rss_kb": rss, "fds": fds, "lag_messages": 0,
                    "sent": sent, "rate_msg_s": 0, "generation": gen, "outage": 0,
                    "phase": "drained"})
    final = stats(hport)
    rc = g.stop(timeout=60)
    log(f"drained in {drain_s:.1f} s, gateway exit {rc}")
    mrc = mc.stop()

    # ---- judge from the store, record by record --------------------------------
    seen = {p.name: bytearray(len(p.acked)) for p in pubs}
    records, foreign, per_topic = 0, 0, {}
    with open(mc.store_path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                continue
            r = json.loads(line)
            records += 1
            per_topic[r["topic"]] = per_topic.get(r["topic"], 0) + 1
            try:
                pl = json.loads(r["payload"])
                s = seen[pl["c"]]
                n = pl["n"]
                s[n] = min(s[n] + 1, 255)
            except (ValueError, KeyError, IndexError, TypeError):
                foreign += 1
    lost = dups = unacked_stored = 0
    for p in pubs:
        s = seen[p.name]
        for n in range(len(p.acked)):
            if p.acked[n] and s[n] == 0:
                lost += 1
            if s[n] > 1:
                dups += s[n] - 1
            if not p.acked[n] and s[n]:
                unacked_stored += 1

    with open(os.path.join(OUT, "soak-reload.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(samples[0].keys()))
        w.writeheader()
        w.writerows(samples)
    warm = [s for s in samples if s["t_s"] >= args.warmup and s["phase"] == "load"]
    rss_v = [s["rss_kb"] for s in warm] or [0]
    fd_v = [s["fds"] for s in warm] or [0]
    rss_ratio = (max(rss_v) - min(rss_v)) / max(min(rss_v), 1)
    fd_span = max(fd_v) - min(fd_v)
    checks = {
        "0 acknowledged lost": lost == 0,
        "every publish acknowledged": sum(unacked) == 0,
        "every reload applied": not reload_fail and reloads > 0,
        "no connection closed": disconnects == 0 and (final or {}).get("connections", {}).get(
            "mqtt_accepted") == args.clients,
        "backlog drained (lag 0)": drain_ok,
        f"RSS after warm-up within {args.rss_bound:.0%}": bool(warm) and rss_ratio <= args.rss_bound,
        f"fds after warm-up max-min <= {args.fd_bound}": bool(warm) and fd_span <= args.fd_bound,
        "gateway exit 0 on SIGTERM": rc == 0,
        "mock exit 0": mrc == 0,
    }
    rows = [
        ("duration (publishing)", f"{elapsed:.0f} s"),
        ("publishers", f"{args.clients} persistent QoS 1 connections"),
        ("offered rate", f"{sent / elapsed:.0f} msg/s (target {args.rate})"),
        ("sent / PUBACKed", f"{sent} / {acked}"),
        ("reloads applied", f"{reloads - len(reload_fail)} of {reloads} (final generation {gen})"),
        ("outages", f"{outages} x {args.outage_secs:.0f} s (mock UNAVAILABLE)"),
        ("store records", f"{records} ({', '.join(f'{k} {v}' for k, v in sorted(per_topic.items()))})"),
        ("acknowledged lost", str(lost)),
        ("duplicates stored", str(dups)),
        ("stored without PUBACK", str(unacked_stored)),
        ("foreign records", str(foreign)),
        ("drain after stop", f"{drain_s:.1f} s"),
        ("RSS after warm-up", f"min {min(rss_v)} kB, max {max(rss_v)} kB, spread {rss_ratio:.1%}"),
        ("RSS first sample / last under load", f"{samples[0]['rss_kb']} / {samples[-2]['rss_kb']} kB"),
        ("fds after warm-up", f"min {min(fd_v)}, max {max(fd_v)}, span {fd_span}"),
        ("MQTT connections accepted", f"{(final or {}).get('connections', {}).get('mqtt_accepted')} "
                                      f"(client disconnects seen under load: {disconnects})"),
        ("RSS/fds after the drain", f"{samples[-1]['rss_kb']} kB, {samples[-1]['fds']} fds (publishers gone)"),
    ]
    lines = ["soak_reload: " + " ".join(sys.argv[1:]), ""]
    wk = max(len(k) for k, _ in rows)
    lines += [f"| {k.ljust(wk)} | {v} |" for k, v in rows]
    lines += [""] + [f"{'PASS' if ok else 'FAIL'}  {k}" for k, ok in checks.items()]
    lines += reload_fail
    lines += ["", f"curve: {os.path.join(OUT, 'soak-reload.csv')}"]
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(OUT, "soak-reload.txt"), "w") as f:
        f.write(text + "\n")
    if not args.keep:
        import shutil
        shutil.rmtree(g.dir, ignore_errors=True)
        mc.cleanup()
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
