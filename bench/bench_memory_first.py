#!/usr/bin/python3
"""bench_memory_first.py: disk bytes written and PUBACK latency, durability
memory_first beside log, same load, same run (issue 16; docs/WAL.md "The
memory tier").

    bench/bench_memory_first.py [--seconds 60] [--rate 20] [--size 100]
                                [--modes memory_first,log] [--ack-delay-ms 0]
                                [--qos 1] [--build build] [--runtime-root /dev/shm]

Each row starts a fresh gateway (build/tributary, wal.fsync always, the
defaults otherwise) and the mock cluster (tests/mock_cluster, store mode
"count"), publishes --size-byte QoS 1 messages at --rate per second from
one MQTT 3.1.1 connection (paced, not waiting for acks), and reads the
gateway's /proc/<pid>/io just before and just after the load:
write_bytes - cancelled_write_bytes is what the kernel will write to the
device for that process. "per hour" scales it to an hour at the same rate.
PUBACK latency is from each PUBLISH written to its PUBACK read (p50, p99,
max). --qos 2: the connection is a persistent session (clean session 0,
the only kind whose QoS 2 state is journaled: docs/design/MEMORY-FIRST.md
section 4), the latency is PUBLISH to PUBREC, each PUBREC is answered
with a PUBREL and the run waits for every PUBCOMP; the bytes then include
the QoS 2 state's records: a mode "memory_first" keeps them in the
runtime journal (mqtt.qos2_state runtime, mqtt.runtime_dir under
--runtime-root, tmpfs), "memory_first:journal" in the session journal on
flash (mqtt.qos2_state journal), "log" always in the session journal; for
QoS 2 the default modes are the three. Spills and returns to
memory come from /stats. Nothing here passes or fails; it prints a
Markdown table.
"""
import argparse
import json
import os
import shutil
import sys
import threading
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def run(mode, a):
    from tlib import mqttraw as mr
    from tlib.gateway import Gateway, write_bytes
    from tlib.mock import MockCluster, wait_until
    from tlib.replication import edge_yaml

    mc = MockCluster(store_mode="count", ack_delay_ms=a.ack_delay_ms or None).start()
    durability, _, state = mode.partition(":")
    mapping = {"mqtt_pattern": "b/+/v", "danube_topic": "/edge1/bench", "durability": durability}
    rtdir = os.path.join(a.runtime_root, f"tributary-bench-{os.getpid()}")
    gw = Gateway(edge_yaml(mc.grpc_url, [mapping], replicator={"batch_timeout_ms": 1000},
                           mqtt={"qos2_state": state or "runtime", "runtime_dir": rtdir}))
    try:
        gw.start()
        gw.wait_log('msg="topic ready" topic=/edge1/bench', 60)
        port, hp = gw.mqtt_port(), gw.http_port()
        c = mr.Raw(port, timeout=30)
        c.send(mr.connect("bench", clean=a.qos < 2))
        c.expect(mr.CONNACK)
        sent_at, lat, rel = {}, [], set()
        lock = threading.Lock()
        send_lock = threading.Lock()  # PUBRELs from the reader, PUBLISHes from the main thread
        done = threading.Event()

        def send(data):
            with send_lock:
                c.send(data)

        def reader():
            while not done.is_set():
                try:
                    p = c.read(1.0)
                except TimeoutError:
                    continue
                if p is None:
                    return
                if p.type in (mr.PUBACK, mr.PUBREC):
                    now = time.monotonic()
                    with lock:
                        t0 = sent_at.pop(p.packet_id, None)
                        if p.type == mr.PUBREC:
                            rel.add(p.packet_id)
                    if t0 is not None:
                        lat.append(now - t0)
                    if p.type == mr.PUBREC:
                        send(mr.pubrel(p.packet_id))
                elif p.type == mr.PUBCOMP:
                    with lock:
                        rel.discard(p.packet_id)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        payload = b"x" * a.size
        pid, n = 0, 0
        # a warm-up second: the first connection and batches are not the steady state
        t_start = time.monotonic()
        w0 = None
        period = 1.0 / a.rate
        while True:
            now = time.monotonic()
            el = now - t_start
            if w0 is None and el >= 1.0:
                w0, l0 = write_bytes(gw.proc.pid), len(lat)
            if el >= 1.0 + a.seconds:
                break
            target = t_start + n * period
            if now < target:
                time.sleep(min(target - now, 0.01))
                continue
            pid = pid % 65535 + 1
            with lock:
                sent_at[pid] = time.monotonic()
            send(mr.publish("b/d1/v", payload, qos=a.qos, pid=pid))
            n += 1
        w1 = write_bytes(gw.proc.pid)
        wait_until(lambda: not sent_at and not rel, 30, "the last PUBACKs (PUBCOMPs)")
        done.set()
        th.join(5)
        c.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{hp}/stats", timeout=5) as r:
            t = next(x for x in json.loads(r.read())["topics"] if x["topic"] == "/edge1/bench")
        gw.stop()
        steady = lat[l0:]
        return {"mode": mode, "bytes": w1 - w0, "acked": len(steady), "p50": pct(steady, 50) * 1000,
                "p99": pct(steady, 99) * 1000, "max": max(steady) * 1000, "spills": sum(t["spills"].values()),
                "to_memory": t["to_memory"]}
    finally:
        gw.__exit__()
        mc.cleanup()
        shutil.rmtree(rtdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--rate", type=int, default=20)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--modes", default=None, help="default memory_first,log (QoS 2: memory_first,memory_first:journal,log)")
    ap.add_argument("--ack-delay-ms", type=int, default=0)
    ap.add_argument("--qos", type=int, choices=(1, 2), default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runtime-root", default="/dev/shm",
                    help="where each run's mqtt.runtime_dir is made (tmpfs: the runtime QoS 2 journal)")
    a = ap.parse_args()
    os.environ.setdefault("TRIBUTARY_BIN", os.path.join(a.build, "tributary"))
    os.environ.setdefault("TRIB_BUILD_DIR", a.build)
    modes = a.modes or ("memory_first,memory_first:journal,log" if a.qos == 2 else "memory_first,log")
    rows = [run(m, a) for m in modes.split(",")]
    print(f"\n{a.rate} msg/s of {a.size}-byte QoS {a.qos} for {a.seconds} s, wal.fsync always, mock ack delay "
          f"{a.ack_delay_ms} ms\n")
    ack = "PUBACK" if a.qos == 1 else "PUBREC"
    print(f"| durability | written B | B/msg | per hour | {ack} p50 ms | p99 ms | max ms | spills | to memory |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        ph = r["bytes"] * 3600 / a.seconds
        print(f"| {r['mode']} | {r['bytes']:,} | {r['bytes'] / max(1, r['acked']):.0f} | "
              f"{ph / 1048576:.2f} MiB | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {r['spills']} | "
              f"{r['to_memory']} |")


if __name__ == "__main__":
    main()
