#!/usr/bin/python3
"""bench_pace.py: what the pace rule (gateway/broker/pace.c) does to batches and
acks, by kind of client, with pacing on (the default) and off, beside
Mosquitto 2 (Debian's, persistence on) acking the same client.

    bench/bench_pace.py [--seconds 10] [--build build] [--dir /tmp] [--no-mosquitto]

Each row is one libmosquitto client (bench/loadgen.c, QoS 1, 100-byte
payloads) against a fresh gateway with wal.fsync always:

  synchronous     window 1, as fast as acks come back
  paced N/s wW    N messages/s, at most W unacknowledged (libmosquitto
                  queues the rest and sends them when acks come)

For Tributary it prints messages per batch (tributary_messages_stored_total
over tributary_wal_batches_total: with fsync always each batch is at most
one fdatasync, and each sync costs about a page of flash), the rate
reached, and the ack latency (publish to PUBACK, p50 / p99 / max); for
Mosquitto, which acks from memory and syncs nothing, the rate and the ack
latency. "pacing off" is mqtt.ingestion.idle_flush_max_ms: 0 (every client
waited for idle_flush_ms, 2 ms: the rule before pacing). The servers are
started by bench/compare_lib.py, as bench/compare starts them.

Nothing here passes or fails; it prints a Markdown table.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_lib as L  # noqa: E402

CLIENTS = [  # name, loadgen args, messages per second (0: as fast as acks allow)
    ("synchronous", ["-w", "1"], 0),
    ("paced 1,000/s w20", ["-w", "20"], 1000),
    ("paced 250/s w50", ["-w", "50"], 250),
    ("paced 250/s w5", ["-w", "5"], 250),
    ("paced 100/s w20", ["-w", "20"], 100),
    ("paced 50/s w20", ["-w", "20"], 50),
    ("paced 20/s w20", ["-w", "20"], 20),
]


def load(args, port, extra, rate, n):
    return L.loadgen_result(L.loadgen(args.build, port, n, conns=1, rate=rate, extra=extra), args.seconds * 4 + 60)


def scrape(hport):
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=5) as r:
        text = r.read().decode()

    def total(name):
        return sum(float(v) for v in re.findall(r'^%s\{topic="/bench/tele"[^}]*\} (\S+)$' % name, text, re.M))
    return total("tributary_messages_stored_total"), total("tributary_wal_batches_total")


def tributary(args, work, extra, rate, n, idle_max):
    t = L.tributary(args.build, tempfile.mkdtemp(prefix="pace-", dir=work), "http://127.0.0.1:1",
                    ingestion={"idle_flush_max_ms": idle_max})
    try:
        f = load(args, t.port, extra, rate, n)
        # /metrics is rendered at most every 250 ms: wait for one with every message
        stored, batches = L.wait_until(lambda: (lambda s: s if s[0] >= n else None)(scrape(t.http)), 10,
                                       "/metrics to show every message")
        f["per_batch"] = stored / max(batches, 1)
        return f
    finally:
        L.stop(t.proc)


def mosquitto(args, work, extra, rate, n):
    m = L.mosquitto(tempfile.mkdtemp(prefix="mosq-", dir=work), "mosquitto")
    try:
        return load(args, m.port, extra, rate, n)
    finally:
        L.stop(m.proc)


def lat(f):
    return f"{f['ack_p50_ms']:.1f} / {f['ack_p99_ms']:.1f} / {f['ack_max_ms']:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10, help="length of each paced run")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    ap.add_argument("--no-mosquitto", action="store_true")
    args = ap.parse_args()
    for b in ("tributary", "bench/loadgen"):
        if not os.access(os.path.join(args.build, b), os.X_OK):
            sys.exit(f"bench_pace.py: {args.build}/{b} not built (cmake --build {args.build})")
    work = tempfile.mkdtemp(prefix="bench-pace-", dir=args.dir)
    rows = []
    try:
        for name, extra, rate in CLIENTS:
            n = rate * args.seconds if rate else 400 * args.seconds
            on = tributary(args, work, extra, rate, n, 25)
            off = tributary(args, work, extra, rate, n, 0)
            mq = None if args.no_mosquitto else mosquitto(args, work, extra, rate, n)
            rows.append((name, n, on, off, mq))
            sys.stderr.write(f"done: {name}\n")
    finally:
        L.kill_started()
        shutil.rmtree(work, ignore_errors=True)
    print(f"One QoS 1 client per row, wal.fsync always, {args.seconds} s per paced run, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}; ack latency p50 / p99 / max in ms")
    print()
    print("| client | messages | msgs/batch, paced | msg/s | ack ms | msgs/batch, pacing off | msg/s | ack ms "
          "| mosquitto msg/s | ack ms |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, n, on, off, mq in rows:
        print(f"| {name} | {n:,} | {on['per_batch']:.1f} | {on['rate']:,.0f} | {lat(on)} | {off['per_batch']:.1f} "
              f"| {off['rate']:,.0f} | {lat(off)} | " + (f"{mq['rate']:,.0f} | {lat(mq)} |" if mq else "- | - |"))


if __name__ == "__main__":
    main()
