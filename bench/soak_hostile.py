#!/usr/bin/python3
"""soak_hostile.py: well-behaved publishers beside hostile clients, for
minutes, on one gateway (issue 14's soak; not part of the test suite).

    bench/soak_hostile.py [--minutes 15] [--baseline-minutes 3] [--rate 2000] [--attacks a,b]
                          [--build build] [--dir /tmp] [--ceiling-mib 256] [--gateway-cpus 0]

Two runs against a fresh gateway (the defaults of edge.yaml, wal.fsync
always, the Python mock cluster in count mode behind it):

  baseline  bench/loadgen: 10 connections, QoS 1, 100-byte payloads, --rate
            messages/s in all, for --baseline-minutes; nothing else
  hostile   the same publishers for --minutes, and at the same time, each
            reconnecting whenever the gateway closes it:
              non-readers   10 clients flooding PINGREQs, never reading
              partial       50 clients each holding a 200 KiB unfinished
                            PUBLISH (keep alive 0)
              silent        200 sockets that never send CONNECT
              sessions      new persistent sessions (1,000-byte ids), as fast
                            as one thread makes them
              wills         clients leaving a 65,000-byte delayed will (1 h) in a
                            persistent session, 20 a second
              garbage       malformed packets, 50 a second
              churn         connect/disconnect loops, as fast as one thread
              http          60 idle HTTP connections held open, and one
                            /healthz probe a second that must answer 200

It prints, for each run, the publishers' acknowledged count and ack latency
(p50 / p99 / max, publish to PUBACK), the gateway's peak RSS and descriptors,
its log size, the probes that failed, and what the cluster stored: every
acknowledged message must be there (lost = acknowledged - stored, over the
/bench/tele topic; the mock deduplicates). It exits 1 when something
acknowledged is missing, the p99 passes 2x the baseline's, a probe failed,
or the peak RSS passes --ceiling-mib; it never fails on rate alone.
"""
import argparse
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import compare_lib as L  # noqa: E402
from tlib import mqttraw as mr  # noqa: E402

PINGREQ = bytes([mr.PINGREQ << 4, 0])
ATTACKS = ("non_reader", "partial", "silent", "sessions", "wills", "garbage", "churn", "http")


def nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def sock(port, timeout=5):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


class Hostile:
    """The attackers, one thread each; stop() ends them all."""

    def __init__(self, port, http):
        self.port, self.http = port, http
        self.stopping = threading.Event()
        self.counts = {}
        self.probe_failures = 0
        self.probes = 0
        self.threads = []

    def count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def run(self, name, fn, *a):
        def loop():
            while not self.stopping.is_set():
                try:
                    fn(*a)
                except OSError:
                    self.count(name + "_closed")
        t = threading.Thread(target=loop, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(30)

    # -- the attacks: each returns (or raises OSError) when its socket is gone

    def non_reader(self, i):
        s = sock(self.port)
        s.sendall(mr.connect(f"nr{i}", keepalive=0))
        s.setblocking(False)
        chunk = PINGREQ * 32768
        self.count("non_reader_conns")
        try:
            while not self.stopping.is_set():
                try:
                    s.send(chunk)
                except BlockingIOError:
                    time.sleep(0.05)
        finally:
            s.close()

    def partial(self, i):
        s = sock(self.port)
        s.sendall(mr.connect(f"part{i}", keepalive=0))
        body = mr.s("p/x") + b"\x00\x01"
        size = 264 * 1024
        s.sendall(bytes([0x32]) + mr.varint(size) + body + b"x" * (200 * 1024))
        self.count("partial_conns")
        try:
            s.settimeout(1)
            while not self.stopping.is_set():
                try:
                    if not s.recv(4096):
                        raise OSError("closed")
                except socket.timeout:
                    pass
        finally:
            s.close()

    def silent(self, n):
        socks = []
        try:
            for _ in range(n):
                socks.append(sock(self.port))
            self.count("silent_conns", n)
            for s in socks:
                s.settimeout(0.5)
            while not self.stopping.is_set():
                for s in socks:
                    try:
                        if not s.recv(1):
                            raise OSError("closed")
                    except socket.timeout:
                        pass
        finally:
            for s in socks:
                s.close()

    def sessions(self):
        cid = f"s-{random.getrandbits(64):016x}-" + "i" * 980
        s = sock(self.port)
        try:
            s.sendall(mr.connect(cid, clean=False))
            s.recv(4)
            self.count("sessions_tried")
        finally:
            s.close()

    def wills(self):
        cid = f"w-{random.getrandbits(64):016x}"
        s = sock(self.port)
        try:
            s.sendall(mr.connect(cid, version=5, clean=False, session_expiry=3600,
                                 will={"topic": "w/x", "payload": b"w" * 65000, "qos": 1, "delay": 3600}))
            s.recv(16)
            self.count("wills_tried")
        finally:
            s.close()  # no DISCONNECT: the will waits an hour
        time.sleep(0.05)

    def garbage(self):
        s = sock(self.port)
        try:
            s.sendall(bytes([0x10, 0x05]) + os.urandom(5) + os.urandom(random.randint(0, 64)))
            try:
                s.recv(16)
            except socket.timeout:
                pass
            self.count("garbage_sent")
        finally:
            s.close()
        time.sleep(0.02)

    def churn(self):
        s = sock(self.port)
        try:
            s.sendall(mr.connect(f"churn-{random.getrandbits(32)}"))
            s.recv(4)
            s.sendall(mr.disconnect())
            self.count("churn_conns")
        finally:
            s.close()

    def http_idle(self, n):
        socks = []
        try:
            for _ in range(n):
                socks.append(sock(self.http))
            time.sleep(2)  # long enough to be the oldest, short enough to churn
        finally:
            for s in socks:
                s.close()

    def probe(self):
        self.probes += 1
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthz", timeout=5) as r:
                if r.status != 200:
                    self.probe_failures += 1
        except OSError:
            self.probe_failures += 1
        time.sleep(1)

    def start(self, attacks):
        if "non_reader" in attacks:
            for i in range(10):
                self.run("non_reader", self.non_reader, i)
        if "partial" in attacks:
            for i in range(50):
                self.run("partial", self.partial, i)
        if "silent" in attacks:
            self.run("silent", self.silent, 200)
        for a in ("sessions", "wills", "garbage", "churn"):
            if a in attacks:
                self.run(a, getattr(self, a))
        if "http" in attacks:
            self.run("http", self.http_idle, 60)
        self.run("probe", self.probe)


def one_run(args, work, name, seconds, hostile):
    mock, grpc, ctl = L.mock_cluster(args.build, work, "count")
    t = L.tributary(args.build, os.path.join(work, name), f"http://127.0.0.1:{grpc}", max_connections=None,
                    cpus=args.gateway_cpus)
    peak_rss = peak_fds = 0
    h = None
    try:
        base_rss = L.rss_kib(t.proc.pid)
        n = args.rate * seconds
        lg = L.loadgen(args.build, t.port, n, conns=10, qos=1, rate=args.rate)
        if hostile:
            h = Hostile(t.port, t.http)
            h.start(args.attacks.split(","))
        while lg.poll() is None:
            peak_rss = max(peak_rss, L.rss_kib(t.proc.pid))
            peak_fds = max(peak_fds, nfds(t.proc.pid))
            time.sleep(0.5)
        f = L.loadgen_result(lg, 60)
        if h:
            h.stop()
        acked = int(f["acked"])
        try:
            stored = L.wait_until(lambda: (lambda v: v if v >= acked else None)(L.mock_stored(ctl)), 120,
                                  "the cluster to hold every acknowledged message")
        except Exception:
            stored = L.mock_stored(ctl)
        stats = t.stats()
        L.stop(t.proc)
        rc = t.proc.returncode
        log_bytes = os.path.getsize(os.path.join(work, name, "tributary.log"))
        return {"name": name, "seconds": seconds, "acked": acked, "stored": stored, "f": f,
                "base_rss_mib": base_rss / 1024, "peak_rss_mib": peak_rss / 1024, "peak_fds": peak_fds,
                "log_bytes": log_bytes, "rc": rc, "hostile": dict(h.counts) if h else {},
                "probes": h.probes if h else 0, "probe_failures": h.probe_failures if h else 0,
                "closed": stats["connections"]["mqtt_closed"], "refused": stats["connections"]["mqtt_refused"],
                "sessions": stats.get("sessions", {})}
    finally:
        if h:
            h.stop()
        L.kill_started()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=15)
    ap.add_argument("--baseline-minutes", type=float, default=3)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--ceiling-mib", type=float, default=256)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    ap.add_argument("--gateway-cpus", default="0" if os.cpu_count() > 1 else None,
                    help="taskset CPU list for the gateway (default 0); this script, the attackers, loadgen and "
                         "the mock cluster run on the others, as they would on other machines")
    ap.add_argument("--attacks", default=",".join(ATTACKS), help="which attackers (default: all)")
    args = ap.parse_args()
    if args.gateway_cpus:
        others = set(range(os.cpu_count())) - {int(c) for c in args.gateway_cpus.split(",")}
        if others:
            os.sched_setaffinity(0, others)  # inherited by loadgen and the mock cluster
    for b in ("tributary", "tributary-mock-cluster", "bench/loadgen"):
        if not os.access(os.path.join(args.build, b), os.X_OK):
            sys.exit(f"soak_hostile.py: {args.build}/{b} not built (cmake --build {args.build})")
    work = tempfile.mkdtemp(prefix="soak-hostile-", dir=args.dir)
    try:
        base = one_run(args, work, "baseline", int(args.baseline_minutes * 60), False)
        sys.stderr.write(f"baseline done: {base['f']}\n")
        hot = one_run(args, work, "hostile", int(args.minutes * 60), True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.rate:,} msg/s QoS 1 from 10 publishers, 100-byte payloads, wal.fsync always, defaults otherwise; "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d', time.gmtime())}")
    print()
    print("| run | minutes | acked | lost | ack p50 / p99 / max ms | peak RSS MiB (start) | peak fds | log KiB "
          "| probes failed |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in (base, hot):
        f = r["f"]
        print(f"| {r['name']} | {r['seconds'] / 60:g} | {r['acked']:,} | {max(r['acked'] - r['stored'], 0):,} "
              f"| {f['ack_p50_ms']:.1f} / {f['ack_p99_ms']:.1f} / {f['ack_max_ms']:.1f} "
              f"| {r['peak_rss_mib']:.1f} ({r['base_rss_mib']:.1f}) | {r['peak_fds']} | {r['log_bytes'] / 1024:,.0f} "
              f"| {r['probe_failures']} of {r['probes']} |")
    print()
    print("hostile clients:", ", ".join(f"{k} {v:,}" for k, v in sorted(hot["hostile"].items())))
    print("closed by reason:", ", ".join(f"{k} {v:,}" for k, v in hot["closed"].items() if v))
    print("refused by reason:", ", ".join(f"{k} {v:,}" for k, v in hot["refused"].items() if v))
    print("sessions at the end:", hot["sessions"])
    bad = []
    for r in (base, hot):
        if r["stored"] < r["acked"]:
            bad.append(f"{r['name']}: {r['acked'] - r['stored']} acknowledged messages missing")
        if r["rc"] != 0:
            bad.append(f"{r['name']}: exit status {r['rc']}")
    if hot["f"]["ack_p99_ms"] > 2 * max(base["f"]["ack_p99_ms"], 1.0):
        bad.append(f"p99 {hot['f']['ack_p99_ms']:.1f} ms past 2x the baseline's {base['f']['ack_p99_ms']:.1f} ms")
    if hot["probe_failures"]:
        bad.append(f"{hot['probe_failures']} /healthz probes failed")
    if hot["peak_rss_mib"] > args.ceiling_mib:
        bad.append(f"peak RSS {hot['peak_rss_mib']:.1f} MiB past the ceiling {args.ceiling_mib:g} MiB")
    for b in bad:
        print("FAIL:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
