#!/usr/bin/env python3
"""bench_outputs.py: the MQTT output's figures beside a Mosquitto bridge's,
from one run (issue 17; docs/design/OUTPUTS.md 4.10 and 6.3).

  /usr/bin/python3 bench/bench_outputs.py --only baseline [--build DIR]
        [--count N] [--size B] [--windows 20,100,1000] [--out FILE]

baseline (commit O0, the go/no-go of design 4.10, measured before the
output exists): how fast can a libmosquitto client driven by our own poll
loop (bench/bench_mosq_pub.c: one handle, mosquitto_threaded_set, no
libmosquitto thread, a window of W unacknowledged QoS 1 PUBLISHes) move N
messages into a local Mosquitto 2, beside a Mosquitto bridge draining a
backlog of the same N messages into the same kind of broker in the same run.

  far     a Mosquitto 2 (the remote broker): queue and in-flight limits
          removed, persistence off, with a QoS 1 subscriber
          (bench_mosq_pub sink) counting every message and timing first
          to last arrival, and checking order per topic.
  ours    bench_mosq_pub pub --window W into far, QoS 1, for each W.
  bridge  a second Mosquitto ("near", queue limit removed) with a bridge
          section to far (`topic # out 1`, cleansession false,
          start_type lazy, threshold N): the backlog of N messages is
          published into near while the bridge is down (the lazy bridge
          queues them), the N-th message starts it and it drains to far.
          That is the store-and-forward a user would set up instead of us.

Every figure is first-to-last arrival at far's subscriber, so each column
pays for the same broker and the same subscriber. Ours reads no log: it is
the floor of the libmosquitto path (design 4.10: ~5 syscalls a message),
what the MQTT output (O6) can at best reach; the raw rows (bench_mosq_pub
raw: PUBLISHes encoded by the sender into 64 KiB writes, no library) are the
ceiling of a publisher of our own, design 4.10's lever 3.

  /usr/bin/python3 bench/bench_outputs.py --only drain --count 100000 --windows 20,100,1000

drain: the real MQTT output (`tributary run`, kind mqtt, QoS 1) draining a
backlog of N messages from its log into far: the backlog is published into
the gateway while the output's remote is a closed port, the gateway is
stopped, far's subscriber starts, and the gateway restarts pointed at far;
beside the same bridge as above, in the same run. Nothing passes
or fails on time; the script prints the figures, the ratio to the bridge and
the issue's target (>= 3x the bridge), and fails only if a subscriber did
not get every message, or got one out of order.

  /usr/bin/python3 bench/bench_outputs.py --only live [--rate 2000] [--seconds 30] [--modes memory_first,log:always]

live: latency through the MQTT output (issue 17: p99 < 20 ms at 2,000
msg/s): a paho publisher at --rate msg/s of QoS 1 into the gateway (one MQTT
output, max_inflight 100, to far), each payload stamped with its send time,
and a paho QoS 1 subscriber on far timing each arrival; one row per
durability (memory_first: sent from memory, the disk untouched while far
confirms; log: sent once its batch is synced, wal.fsync as given; interval
makes a message readable only at the interval's sync, 1 s by default),
then a Mosquitto bridge (near -> far, `topic # out 1`) carrying the
same load in the same run. Fails only if a message is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_lib as L  # noqa: E402


def sink(build, work, name, port, n, timeout_s):
    out = open(os.path.join(work, f"{name}.sink"), "w+")
    p = L.popen([os.path.join(build, "bench", "bench_mosq_pub"), "sink", "--port", str(port), "--expect", str(n),
                 "--qos", "1", "--id", name, "--timeout-s", str(timeout_s)],
                stdout=out, stderr=subprocess.STDOUT, text=True)

    def ready():
        out.seek(0)
        text = out.read()
        if p.poll() is not None:
            raise RuntimeError(f"sink {name} exited: {text}")
        return "sink ready" in text
    L.wait_until(ready, 30, f"sink {name} to subscribe")
    return p, out


def sink_result(p, out, timeout):
    p.wait(timeout=timeout)
    out.seek(0)
    text = out.read()
    for line in text.splitlines():
        if line.startswith("sink got="):
            kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
            if p.returncode != 0 or "rate" not in kv:
                raise RuntimeError(f"sink failed: {text.strip()}")
            return {k: float(v) for k, v in kv.items()}
    raise RuntimeError(f"sink printed no result: {text.strip()}")


def pub(build, port, n, size, window, name, prefix="bench", timeout=900, mode="pub"):
    r = subprocess.run([os.path.join(build, "bench", "bench_mosq_pub"), mode, "--port", str(port), "--count",
                        str(n), "--size", str(size), "--qos", "1", "--window", str(window), "--topics", "3",
                        "--prefix", prefix, "--id", name], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"bench_mosq_pub pub failed: {r.stderr.strip()}")
    line = [x for x in r.stdout.splitlines() if x.startswith("pub ")][-1]
    return {k: float(v) for k, v in (x.split("=", 1) for x in line.split()[1:])}


def baseline(a, work):
    far = L.mosquitto(work, "far", unlimited=True, extra=["persistence false"])
    rows = []
    runs = [("pub", w, f"ours (libmosquitto), window {w}") for w in a.windows]
    runs += [("raw", w, f"own encoder, batched writes, window {w}") for w in a.raw_windows]
    for mode, w, who in runs:
        sp, so = sink(a.build, work, f"sink-{mode}{w}", far.port, a.count, a.timeout)
        cpu0 = L.cpu_seconds(far.pid)
        p = pub(a.build, far.port, a.count, a.size, w, f"ours-{mode}{w}", timeout=a.timeout, mode=mode)
        s = sink_result(sp, so, a.timeout)
        rows.append({"who": who, "rate": s["rate"], "secs": s["first_to_last_s"],
                     "ooo": s["out_of_order"], "client_cpu": p["cpu_s"],
                     "far_cpu": L.cpu_seconds(far.pid) - cpu0, "pub_rate": p["rate"]})
        print(f"  {who}: {s['rate']:.0f} msg/s at the subscriber (publisher {p['rate']:.0f}/s, "
              f"client {p['cpu_s']:.1f} CPU-s)", file=sys.stderr)

    # The bridge: near queues the backlog for its lazy bridge; the N-th
    # queued message starts the bridge, which drains it into far.
    sp, so = sink(a.build, work, "sink-bridge", far.port, a.count, a.timeout)
    near = L.mosquitto(work, "near", unlimited=True, extra=[
        "connection far", f"address 127.0.0.1:{far.port}", "topic # out 1", "cleansession false",
        "start_type lazy", f"threshold {a.count}", "idle_timeout 3600", "try_private false"])
    cpu0, ncpu0 = L.cpu_seconds(far.pid), L.cpu_seconds(near.pid)
    t0 = time.monotonic()
    p = pub(a.build, near.port, a.count, a.size, 1000, "fill-bridge", timeout=a.timeout)
    fill_secs = time.monotonic() - t0
    s = sink_result(sp, so, a.timeout)
    rows.append({"who": "Mosquitto bridge", "rate": s["rate"], "secs": s["first_to_last_s"],
                 "ooo": s["out_of_order"], "client_cpu": L.cpu_seconds(near.pid) - ncpu0,
                 "far_cpu": L.cpu_seconds(far.pid) - cpu0, "pub_rate": p["rate"]})
    print(f"  bridge: {s['rate']:.0f} msg/s at the subscriber (fill {fill_secs:.1f} s)", file=sys.stderr)
    L.stop(near.proc)
    L.stop(far.proc)
    return rows


def gateway(a, work, broker_port, window, fsync="always", durability="log"):
    """`tributary run` with one MQTT output (no Danube) to 127.0.0.1:broker_port, three mappings
    bench/0..2 -> /bench/t0..2 and remote_topic ${topic}, so far's subscriber sees what a direct
    publisher would send."""
    os.makedirs(work, exist_ok=True)
    port, http = L.free_port(), L.free_port()
    with open(os.path.join(work, "edge.yaml"), "w") as f:
        f.write(f"""edge: {{edge_name: bench}}
mqtt:
  listener: "127.0.0.1:{port}"
  topic_mappings:
    - {{mqtt_pattern: "bench/0", danube_topic: /bench/t0, durability: {durability}}}
    - {{mqtt_pattern: "bench/1", danube_topic: /bench/t1, durability: {durability}}}
    - {{mqtt_pattern: "bench/2", danube_topic: /bench/t2, durability: {durability}}}
wal: {{dir: {work}/wal, fsync: {fsync}, max_topic_bytes: 8GiB, max_total_bytes: 16GiB}}
http: {{listener: "127.0.0.1:{http}"}}
replicator: {{retry_initial_ms: 100, retry_max_ms: 500}}
log: {{level: warn}}
outputs:
  - name: central
    kind: mqtt
    broker: "127.0.0.1:{broker_port}"
    qos: 1
    remote_topic: "${{topic}}"
    max_inflight: {window}
""")
    log = open(os.path.join(work, "tributary.log"), "ab")
    p = L.popen([os.path.join(a.build, "tributary"), "run", "-c", os.path.join(work, "edge.yaml")],
                stdout=log, stderr=log)
    L.wait_until(lambda: L.port_open(port) and L.port_open(http), 30, "tributary to listen")
    return L.Server("tributary", p, work, port, http)


def drain(a, work):
    """The MQTT output draining a backlog of N messages from its log into far, for each window,
    then the Mosquitto bridge draining the same backlog, in the same run."""
    far = L.mosquitto(work, "far", unlimited=True, extra=["persistence false"])
    rows = []
    for w in a.windows:
        gw_work = os.path.join(work, f"gw{w}")
        # the backlog: the output's remote is a closed port while the devices publish
        g = gateway(a, gw_work, L.free_port(), w)
        p = pub(a.build, g.port, a.count, a.size, 1000, f"fill-gw{w}", timeout=a.timeout)
        L.stop(g.proc)
        # the drain: the same log, the output now pointed at far, whose subscriber is ready
        sp, so = sink(a.build, work, f"sink-gw{w}", far.port, a.count, a.timeout)
        cpu0 = L.cpu_seconds(far.pid)
        g = gateway(a, gw_work, far.port, w)
        s = sink_result(sp, so, a.timeout)
        rows.append({"who": f"tributary MQTT output, max_inflight {w}", "rate": s["rate"],
                     "secs": s["first_to_last_s"], "ooo": s["out_of_order"], "client_cpu": L.cpu_seconds(g.pid),
                     "far_cpu": L.cpu_seconds(far.pid) - cpu0, "pub_rate": p["rate"]})
        print(f"  ours, window {w}: {s['rate']:.0f} msg/s at the subscriber", file=sys.stderr)
        L.stop(g.proc)
    rows += bridge_rows(a, work, far)
    L.stop(far.proc)
    return rows


def live_run(a, port, far, who):
    """a.rate msg/s of QoS 1 for a.seconds into port (topics bench/0..2), each payload stamped with
    its send time; far's subscriber times each arrival. Latency = arrival - send, wall clock."""
    from tlib.mosq import Recorder
    from tlib.replication import Publisher
    wall = time.time() - time.monotonic()
    rec = Recorder(far.port, topic="bench/#", client_id=f"live-{who[:8]}-{os.getpid()}")
    try:
        p = Publisher(port, lambda n: f"bench/{n % 3}", rate=a.rate, client_id=f"live-pub-{os.getpid()}",
                      inflight=a.inflight)
        since = time.time() * 1000 + 1000  # a warm-up second
        p.start()
        time.sleep(a.seconds)  # the load runs for this long (the measured window)
        until = time.time() * 1000
        p.stop()
        acked = p.acked()
        L.wait_until(lambda: len({json.loads(pl)["n"] for _, _, pl in rec.timed()}) >= len(acked), 120,
                     f"{who}: every message at far")
        lat, seen = [], set()
        for t_arr, _, pl in rec.timed():
            d = json.loads(pl)
            if d["n"] in seen:
                continue
            seen.add(d["n"])
            if since <= d["ts"] < until:
                lat.append((t_arr + wall) * 1000 - d["ts"])
        lat.sort()
        q = lambda f: lat[min(len(lat) - 1, int(len(lat) * f))]  # noqa: E731
        return {"who": who, "n": len(lat), "p50": q(0.5), "p99": q(0.99), "max": lat[-1],
                "missing": len(acked - seen)}
    finally:
        rec.close()


def live(a, work):
    """Live latency through the MQTT output at a.rate msg/s (issue 17: p99 < 20 ms at 2,000 msg/s), beside
    a Mosquitto bridge carrying the same load into the same far broker, in the same run."""
    far = L.mosquitto(work, "far", unlimited=True, extra=["persistence false"])
    rows = []
    for mode in a.modes:
        durability, _, fsync = mode.partition(":")
        fsync = fsync or "always"
        g = gateway(a, os.path.join(work, f"gw-{durability}-{fsync}"), far.port, 100, fsync=fsync,
                    durability=durability)
        L.wait_until(lambda: any(o.get("state") == "up" for o in g.stats().get("outputs", [])), 30,
                     "the MQTT output connected")
        rows.append(live_run(a, g.port, far, f"tributary MQTT output ({durability}, wal.fsync {fsync})"))
        L.stop(g.proc)
    near = L.mosquitto(work, "near-live", unlimited=True, extra=[
        "connection far", f"address 127.0.0.1:{far.port}", "topic # out 1", "cleansession false",
        "try_private false"])
    rows.append(live_run(a, near.port, far, "Mosquitto bridge"))
    L.stop(near.proc)
    L.stop(far.proc)
    lines = [f"# bench_outputs live: {a.rate} msg/s of QoS 1 for {a.seconds} s over 3 topics into the sender, "
             f"to a local Mosquitto 2 with a QoS 1 subscriber (one run)", "", f"load average at start: {a.load}", "",
             "| sender | messages timed | p50 ms | p99 ms | max ms | missing |", "|---|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(f"| {r['who']} | {r['n']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {r['missing']} |")
    lines += ["", "target (issue 17): p99 < 20 ms at 2,000 msg/s; publish -> arrival at far's subscriber, "
              "so both senders pay for the same broker and subscriber"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0 if all(r["missing"] == 0 for r in rows) else 1


def bridge_rows(a, work, far):
    sp, so = sink(a.build, work, "sink-bridge2", far.port, a.count, a.timeout)
    near = L.mosquitto(work, "near2", unlimited=True, extra=[
        "connection far", f"address 127.0.0.1:{far.port}", "topic # out 1", "cleansession false",
        "start_type lazy", f"threshold {a.count}", "idle_timeout 3600", "try_private false"])
    cpu0, ncpu0 = L.cpu_seconds(far.pid), L.cpu_seconds(near.pid)
    p = pub(a.build, near.port, a.count, a.size, 1000, "fill-bridge2", timeout=a.timeout)
    s = sink_result(sp, so, a.timeout)
    row = {"who": "Mosquitto bridge", "rate": s["rate"], "secs": s["first_to_last_s"],
           "ooo": s["out_of_order"], "client_cpu": L.cpu_seconds(near.pid) - ncpu0,
           "far_cpu": L.cpu_seconds(far.pid) - cpu0, "pub_rate": p["rate"]}
    L.stop(near.proc)
    print(f"  bridge: {s['rate']:.0f} msg/s at the subscriber", file=sys.stderr)
    return [row]


def report(a, rows):
    bridge = rows[-1]["rate"]
    lines = [f"# bench_outputs {a.only}: {a.count} messages of {a.size} B, QoS 1, 3 topics, "
             f"to a local Mosquitto 2 (one run)", "",
             f"load average at start: {a.load}", "",
             "| sender | msg/s at the subscriber | first to last (s) | x bridge | sender CPU-s | far broker CPU-s "
             "| out of order |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(f"| {r['who']} | {r['rate']:.0f} | {r['secs']:.2f} | {r['rate'] / bridge:.2f} | "
                     f"{r['client_cpu']:.1f} | {r['far_cpu']:.1f} | {r['ooo']:.0f} |")
    best = max(rows[:-1], key=lambda r: r["rate"])
    lines += ["", f"target (issue 17): >= 3x the bridge = {3 * bridge:.0f} msg/s; best of ours: "
              f"{best['rate']:.0f} msg/s ({best['who']}), {best['rate'] / bridge:.2f}x: "
              f"{'met' if best['rate'] >= 3 * bridge else 'NOT met'}",
              "(sender CPU-s: bench_mosq_pub for ours and the raw sender, the tributary process for the MQTT "
              "output, the near Mosquitto for the bridge)"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
    return 0 if all(r["ooo"] == 0 for r in rows) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["baseline", "drain", "live"], required=True)
    ap.add_argument("--rate", type=int, default=2000, help="live: messages/s")
    ap.add_argument("--seconds", type=int, default=30, help="live: how long the load runs")
    ap.add_argument("--inflight", type=int, default=1000,
                    help="live: the publisher's QoS 1 window (memory_first's PUBACK waits for the remote's: a "
                         "small window queues messages in the client, and that wait is in the latency)")
    ap.add_argument("--modes", default="memory_first,log:always",
                    help="live: DURABILITY[:FSYNC] of the gateway's mappings, one row each")
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    ap.add_argument("--count", type=int, default=1000000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--windows", default="20,100,1000")
    ap.add_argument("--raw-windows", default="100,1000",
                    help="windows of the raw sender (own encoder, batched writes: the ceiling of our own publisher)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per step before giving up")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    a.windows = [int(x) for x in a.windows.split(",")]
    a.raw_windows = [int(x) for x in a.raw_windows.split(",") if x]
    a.modes = [x for x in a.modes.split(",") if x]
    a.build = os.path.abspath(a.build)
    a.load = open("/proc/loadavg").read().split()[0]
    if not os.access(os.path.join(a.build, "bench", "bench_mosq_pub"), os.X_OK):
        sys.exit(f"bench_outputs: {a.build}/bench/bench_mosq_pub not built")
    work = tempfile.mkdtemp(prefix="bench-outputs.")
    rc = 1
    try:
        if a.only == "live":
            rc = live(a, work)
        else:
            rc = report(a, baseline(a, work) if a.only == "baseline" else drain(a, work))
    finally:
        L.kill_started()
        if a.keep or rc != 0:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
