#!/usr/bin/python3
"""bench_devices.py: can the simulated devices of tests/storeforward keep
their schedule on this machine? bench/devices (C, libmosquitto, one poll
loop) beside the same devices written with Python paho (one client and
one network thread per device, which is how paho is used), both against
one Mosquitto, same run.

    bench/bench_devices.py [--devices 20] [--rate 100] [--seconds 20] [--build build]

For each: readings acknowledged per second against the schedule
(devices x rate), CPU of the device process (% of one core), and how late
the acknowledgement came after the reading was due (p50 / p99 / max): a
reading acknowledged late because the device process could not keep up
would make the judge's timings (and the gateway's batching) the
simulator's, not the gateway's. This is why bench/devices is C.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_lib as L  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0


def run_c(a, port, work):
    out = os.path.join(work, "c")
    p = L.devices(a.build, port, out, n=a.devices, rate=a.rate)
    c0, t0 = L.cpu_seconds(p.pid), time.monotonic()
    time.sleep(a.seconds)               # the measured load runs this long
    cpu = L.cpu_seconds(p.pid) - c0
    span = time.monotonic() - t0
    L.stop(p)
    start = __import__("json").load(open(os.path.join(out, "summary.json")))["start_epoch_ms"]
    late, acked = [], 0
    for path in glob.glob(os.path.join(out, "acks-*.log")):
        for line in open(path):
            n, ack = (int(x) for x in line.split())
            due = start + n * 1000 / a.rate
            if due - start <= span * 1000:
                acked += 1
                late.append(ack - due)
    return acked / span, cpu / span * 100, late


def run_paho(a, port):
    import paho.mqtt.client as paho
    late, lock = [], threading.Lock()
    stop = threading.Event()
    clients = []
    start = time.time()

    def device(i):
        c = paho.Client(client_id=f"paho-dev-{i}", protocol=paho.MQTTv311)
        due_of = {}

        def on_publish(client, userdata, mid):
            now = time.time()
            with lock:
                d = due_of.pop(mid, None)
                if d is not None:
                    late.append((now - d) * 1000)
        c.on_publish = on_publish
        c.connect("127.0.0.1", port)
        c.loop_start()
        clients.append(c)
        n = 0
        while not stop.is_set():
            n += 1
            due = start + n / a.rate
            wait = due - time.time()
            if wait > 0:
                stop.wait(wait)         # the device's own clock: reading n is due at start + n/rate
            info = c.publish(f"sf/t0/d{i:03d}", f"d={i:03d} n={n:010d} ".ljust(100, "."), qos=1)
            with lock:
                due_of[info.mid] = due
    pid = os.getpid()
    c0, t0 = L.cpu_seconds(pid), time.monotonic()
    threads = [threading.Thread(target=device, args=(i,), daemon=True) for i in range(a.devices)]
    for t in threads:
        t.start()
    time.sleep(a.seconds)               # the measured load runs this long
    stop.set()
    span = time.monotonic() - t0
    cpu = L.cpu_seconds(pid) - c0
    for c in clients:
        c.loop_stop()
    with lock:
        return len(late) / span, cpu / span * 100, list(late)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="bench-devices-")
    m = L.mosquitto(work, "m", unlimited=True)
    try:
        rows = [("bench/devices (C)", *run_c(a, m.port, work)), ("Python paho", *run_paho(a, m.port))]
    finally:
        L.kill_started()
    want = a.devices * a.rate
    print(f"{a.devices} devices x {a.rate:g}/s QoS 1 to Mosquitto for {a.seconds} s, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}; schedule {want:,.0f}/s\n")
    print("| devices | acked/s | of schedule | CPU % | ack after due p50 / p99 / max (ms) |")
    print("|---|--:|--:|--:|--:|")
    for name, rate, cpu, late in rows:
        print(f"| {name} | {rate:,.0f} | {rate / want * 100:.1f}% | {cpu:.1f} | "
              f"{statistics.median(late):.1f} / {pct(late, 0.99):.1f} / {max(late):.1f} |")


if __name__ == "__main__":
    main()
