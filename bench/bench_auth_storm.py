#!/usr/bin/python3
"""bench_auth_storm.py: a storm of logins beside publishers, Tributary beside
Mosquitto 2 with the same password file in the same run.

    bench/bench_auth_storm.py [--storm 1000] [--iterations 20000] [--rate 2000]
                              [--publishers 100] [--seconds 40] [--build build]

Password file made by `tributary passwd`: user `pub` at mosquitto_passwd's
101 iterations (the publishers log in once), user `storm` at --iterations
(PBKDF2-SHA512: ~15 ms per check at 10,000 on this machine's cores, 150 ms
at 100,000). For each server, two runs of --seconds:

  quiet   bench/loadgen: --publishers QoS 1 connections, --rate msg/s in all,
          100-byte payloads; ack latency publish to PUBACK
  storm   the same, and 5 s in, --storm clients connect at once as `storm`
          (each socket opened, CONNECT sent, CONNACK awaited): the time to the
          last CONNACK gives logins per second

Tributary checks passwords on libuv's thread pool, at most one per core but
one (docs/SECURITY.md); Mosquitto checks them on its one thread. Prints a
Markdown table; nothing passes or fails.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import compare_lib as L  # noqa: E402
from tlib import mqttraw as mr  # noqa: E402


def storm(port, n, out):
    """n logins at once; out gets (seconds to the last CONNACK, refused)."""
    socks = []
    t0 = time.monotonic()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall(mr.connect(f"storm-{i}", version=4, username="storm", password="storm-pw"))
        socks.append(s)
    refused = 0
    for s in socks:
        got = b""
        while len(got) < 4:
            chunk = s.recv(4 - len(got))
            if not chunk:
                break
            got += chunk
        if len(got) < 4 or got[3] != 0:
            refused += 1
    out.append((time.monotonic() - t0, refused))
    for s in socks:
        s.close()


def run(args, port, with_storm):
    n = args.rate * args.seconds
    lg = L.loadgen(args.build, port, n, conns=args.publishers, qos=1, rate=args.rate,
                   extra=["-u", "pub", "-P", "pub-pw"])
    out = []
    if with_storm:
        time.sleep(5)  # the publishers at their pace first
        t = threading.Thread(target=storm, args=(port, args.storm, out))
        t.start()
    f = L.loadgen_result(lg, args.seconds * 4 + 120)
    if with_storm:
        t.join(300)
        f["storm_s"], f["storm_refused"] = out[0] if out else (float("nan"), args.storm)
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--storm", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--publishers", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=40)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-auth-", dir=args.dir)
    rows = []
    try:
        pw = os.path.join(work, "passwd")
        for user, p, it in (("pub", "pub-pw", 101), ("storm", "storm-pw", args.iterations)):
            subprocess.run([os.path.join(args.build, "tributary"), "passwd", "--iterations", str(it), pw, user],
                           input=p + "\n", text=True, check=True, capture_output=True)
        os.chmod(pw, 0o644)  # Mosquitto runs as its own user here
        for name in ("tributary", "mosquitto"):
            for with_storm in (False, True):
                if name == "tributary":
                    s = L.tributary(args.build, tempfile.mkdtemp(prefix="t-", dir=work), "http://127.0.0.1:1",
                                    fsync="never", auth={"password_file": pw, "max_failures": 0})
                else:
                    s = L.mosquitto(tempfile.mkdtemp(prefix="m-", dir=work), "mosquitto", password_file=pw)
                try:
                    rows.append((name, with_storm, run(args, s.port, with_storm)))
                finally:
                    L.stop(s.proc)
                sys.stderr.write(f"done: {name} storm={with_storm}\n")
    finally:
        L.kill_started()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.publishers} QoS 1 publishers, {args.rate:,} msg/s in all, {args.seconds} s per run; a storm of "
          f"{args.storm:,} logins at {args.iterations:,} PBKDF2 iterations 5 s in; {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    print()
    print("| server | storm | acked | ack p50 / p99 / max ms | storm: seconds to the last CONNACK | logins/s | refused |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for name, st, f in rows:
        storm_cols = (f"{f['storm_s']:.1f} | {args.storm / f['storm_s']:,.0f} | {int(f['storm_refused'])}"
                      if st else "- | - | -")
        print(f"| {name} | {'yes' if st else 'no'} | {int(f['acked']):,} | {f['ack_p50_ms']:.1f} / "
              f"{f['ack_p99_ms']:.1f} / {f['ack_max_ms']:.1f} | {storm_cols} |")


if __name__ == "__main__":
    main()
