#!/usr/bin/python3
"""bench_tls_ping.py: what read coalescing (tls.read_coalesce_ms) adds to an
answer: PINGREQ -> PINGRESP over TLS on a connection that streams QoS 0
PUBLISHes, Tributary with --coalesce values (default 0 and 1) beside
Mosquitto 2, the same certificate, in the same run.

    bench/bench_tls_ping.py [--rate 10000] [--every 20] [--seconds 5] [--repeats 3]
                            [--coalesce 0,1] [--server-cpus 0] [--client-cpus 1]

The probe (this script, pinned to --client-cpus) opens one TLS connection,
CONNECTs (MQTT 3.1.1), then writes 100-byte QoS 0 PUBLISHes paced at --rate
a second, each its own TLS record and its own write (so the server sees a
busy connection: small reads close together); after every --every of them
it writes a PINGREQ and waits for the PINGRESP (spinning on a non-blocking
read, so the probe's own wake-up on a busy core is not counted), the time
between the two being one sample. A PINGREQ that arrives while the connection's
reading pauses waits for the pause's end; one read with the PUBLISHes before
it is answered at once. The servers are pinned to --server-cpus, each run
alternating them so a change in the machine's load hits all. Prints a
Markdown table of p50 / p99 / max per server (median over the repeats) and
the machine's load average before and after.
"""
import argparse
import os
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_lib as L  # noqa: E402
import bench_tls  # noqa: E402


def probe(port, ca, rate, every, seconds):
    """PINGREQ -> PINGRESP times in ms over one busy connection."""
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    cid = b"ping-probe"
    var = b"\x00\x04MQTT\x04\x02\x00\x3c" + struct.pack(">H", len(cid)) + cid
    s.sendall(bytes([0x10, len(var)]) + var)
    if s.recv(4)[:2] != b"\x20\x02":
        raise RuntimeError("no CONNACK")
    topic = b"bench/ping/tele"
    body = struct.pack(">H", len(topic)) + topic + b"x" * 100
    pub = bytes([0x30, len(body)]) + body
    samples, i = [], 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        due = t0 + i / rate
        while time.perf_counter() < due:
            pass
        if due > end:
            break
        s.sendall(pub)
        i += 1
        if i % every == 0:
            t = time.perf_counter()
            s.sendall(b"\xc0\x00")
            got = b""
            s.setblocking(False)  # spin, not sleep: the probe's own wake-up is not the server's time
            while len(got) < 2:
                try:
                    got += s.recv(2 - len(got))
                except ssl.SSLWantReadError:
                    pass
            s.setblocking(True)
            samples.append((time.perf_counter() - t) * 1e3)
            if got != b"\xd0\x00":
                raise RuntimeError(f"expected a PINGRESP, got {got!r}")
            t0 += time.perf_counter() - t  # the pace resumes after the answer
    s.sendall(b"\xe0\x00")
    s.close()
    return samples


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=10000)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--coalesce", default="0,1", help="Tributary's tls.read_coalesce_ms values to run")
    ap.add_argument("--server-cpus", default="0" if os.cpu_count() > 1 else None)
    ap.add_argument("--client-cpus", default="1" if os.cpu_count() > 1 else None)
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    a = ap.parse_args()
    if a.client_cpus:
        os.sched_setaffinity(0, {int(c) for c in a.client_cpus.split(",")})
    work = tempfile.mkdtemp(prefix="bench-tls-ping-")
    load0 = os.getloadavg()
    t0 = time.time()
    try:
        ca, cert, key = bench_tls.certificates(work)
        servers = []
        for ms in (int(x) for x in a.coalesce.split(",")):
            srv = L.tributary(a.build, os.path.join(work, f"t{ms}"), "http://127.0.0.1:1", cpus=a.server_cpus,
                              tls={"cert_file": cert, "key_file": key, "read_coalesce_ms": ms})
            servers.append((f"tributary, read_coalesce_ms {ms}", srv))
        servers.append(("mosquitto", L.mosquitto(work, "mosquitto", unlimited=True, tls=(cert, key),
                                                 cpus=a.server_cpus, extra=["set_tcp_nodelay true"])))
        runs = {name: [] for name, _ in servers}
        for i in range(a.repeats):
            for name, srv in servers:
                xs = probe(srv.tls_port, ca, a.rate, a.every, a.seconds)
                runs[name].append((q(xs, 0.5), q(xs, 0.99), max(xs), len(xs)))
                bench_tls.say(f"{name} run {i + 1}: p50 {runs[name][-1][0]:.3f} p99 {runs[name][-1][1]:.3f} "
                              f"max {runs[name][-1][2]:.3f} ms ({len(xs)} samples)")
        for _, srv in servers:
            L.stop(srv.proc)
    finally:
        L.kill_started()
    load1 = os.getloadavg()
    print(f"PINGREQ -> PINGRESP over TLS on a connection streaming 100-byte QoS 0 PUBLISHes at {a.rate:,.0f}/s, "
          f"a PINGREQ after every {a.every}, {a.seconds:g} s a run, median of {a.repeats}; servers on CPU "
          f"{a.server_cpus}, the probe on CPU {a.client_cpus}; load average {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after ({(time.time() - t0) / 60:.1f} min)\n")
    print("| server | p50 ms | p99 ms | max ms | samples a run |")
    print("|---|--:|--:|--:|--:|")
    for name, rs in runs.items():
        print(f"| {name} | {statistics.median(r[0] for r in rs):.3f} | {statistics.median(r[1] for r in rs):.3f} | "
              f"{statistics.median(r[2] for r in rs):.3f} | {rs[0][3]:,} |")


if __name__ == "__main__":
    main()
