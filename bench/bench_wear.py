#!/usr/bin/python3
"""bench_wear.py: bytes the real gateway writes per message (flash wear),
beside Mosquitto 2 (Debian's, persistence on) at the same load, same run.

    bench/bench_wear.py [--seconds 60] [--rate 2000] [--size 100] [-c 10]
                        [--modes always,interval,never] [--flush 2/25,2/0,0/0]
                        [--dir /tmp] [--build build] [--no-mosquitto]
                        [--durability log,memory_first] [--mosquitto both|plain|subscriber]

Each row starts a fresh server, paces QoS 1 publishes of --size bytes at
--rate messages/s for --seconds with bench/loadgen.c (-c connections), and
reads the server's /proc/<pid>/io just before and just after the load:
write_bytes - cancelled_write_bytes is what the kernel will write to the
device for that process (docs/WAL.md, "Flash wear"). Divided by the
messages acknowledged, that is the bytes written per message, set beside
the record the WAL stores (payload + 28-byte head + MQTT topic, from
wal/wal_format.h; measured with `tributary wal check`, padding excluded) and
beside payload + head alone. "disk B/msg" is what the log takes on disk per
message, padding included (wal.fsync always pads some syncs to a page
boundary: wal/pad.c); it is what the bounds are sized against. "incl. exit" adds what the process wrote while starting and
stopping (its rusage ru_oublock, which Linux derives from the same
counter), which matters for Mosquitto: it writes its persistence file only
at autosave_interval (Debian: 1800 s) and at exit.

Tributary rows: wal.fsync always / interval (fsync_interval_ms 1000) /
never, for each --flush pair IDLE/MAX of mqtt.ingestion.idle_flush_ms and
idle_flush_max_ms: 2/25 is the default (a paced client is waited for twice
its gap, up to 25 ms: gateway/broker/pace.c), 2/0 turns pacing off (every client
waited for 2 ms, the rule before it), 0/0 turns the idle flush off (batches
go when full or after batch_timeout_ms). fdatasyncs are counted from
/metrics; "ack p50/p99" is the load generator's time from publish to
PUBACK, the price of fewer syncs. Mosquitto rows: nobody subscribed
(it stores nothing), and one offline persistent QoS 1 subscriber (it
queues every message and must keep them).

--durability memory_first (design C13; docs/WAL.md "The memory tier"):
the topic's mapping is memory_first and the gateway replicates to the
mock cluster (tests/mock_cluster, store mode "count", on loopback, its
own process), as it must: with no cluster a memory_first topic spills at
once. A warm-up second of the same load, then a wait until /stats says
the topic is in memory, come before the measured window (the first batch
after a start is written: docs/design/MEMORY-FIRST.md section 5, "per
boot"). Its rows add the spills and returns to memory of the window
(each spill writes: the spurious ones a loaded machine's mock causes are
the wear to watch) and bytes per hour at the rate.

Where the bytes came from (docs/design/MEMORY-FIRST.md 5, the acceptance's
"the exact figure and where each byte came from"): each Tributary row
also reads /stats "wal" (wal_stats: what the log handed to write/pwrite,
its write calls and fdatasync/fsync calls, by cause) before and after the
measured window, and a third table sets them beside write_bytes. The
causes' bytes are what was handed over, not what the device wrote: a
synced partial page is written again whole at the next sync, and a meta
file replaced atomically (checkpoint, reserve, drop, switch) is one 4 KiB
page of write_bytes whatever its size, so its count of writes is given
too.

Nothing here passes or fails; it prints Markdown tables.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
HEAD = 28        # fixed record head, wal/wal_format.h


def proc_io(pid):
    out = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v)
    return out["write_bytes"] - out["cancelled_write_bytes"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def stop(proc):
    """SIGTERM, wait; returns the bytes it wrote in its whole life (rusage)."""
    proc.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_oublock * 512


def load(args, port, seconds=None):
    n = args.rate * (seconds or args.seconds)
    r = subprocess.run([os.path.join(args.build, "bench", "loadgen"), "-p", str(port), "-c", str(args.connections),
                        "-n", str(n), "-s", str(args.size), "-q", "1", "-r", str(args.rate), "-t", "bench"],
                       capture_output=True, text=True, timeout=args.seconds * 3 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen failed: {r.stderr}")
    f = dict(kv.split("=") for kv in r.stdout.split())
    return int(f["acked"]), float(f["seconds"]), (float(f["ack_p50_ms"]), float(f["ack_p99_ms"]))


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s(?:\{\})? (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def topic_stats(hport):
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/stats", timeout=5) as r:
        return next(t for t in json.loads(r.read())["topics"] if t["topic"] == "/bench/tele")


def wal_stats(hport):
    """/stats "wal": {written_bytes, writes, syncs}, each cause -> count (wal_stats)"""
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/stats", timeout=5) as r:
        return json.loads(r.read())["wal"]


def wal_delta(a, b):
    return {k: {c: b[k][c] - a[k].get(c, 0) for c in b[k]} for k in b}


def switches(t):
    return sum(v for k, v in t.get("spills", {}).items() if k != "shutdown"), t.get("to_memory", 0)


def run_tributary(args, work, mode, flush, durability="log"):
    idle, idle_max = flush
    d = tempfile.mkdtemp(prefix=f"t-{mode}-{idle}-{idle_max}-", dir=work)
    mport, hport = free_port(), free_port()
    cfg = os.path.join(d, "edge.yaml")
    mc, url = None, "http://127.0.0.1:1"
    if durability == "memory_first":
        from tlib.mock import MockCluster
        mc = MockCluster(store_mode="count").start()
        url = mc.grpc_url
    with open(cfg, "w") as f:
        f.write(f"""
edge: {{edge_name: bench, cluster_url: "{url}"}}
mqtt:
  listener: "127.0.0.1:{mport}"
  ingestion: {{idle_flush_ms: {idle}, idle_flush_max_ms: {idle_max}}}
  topic_mappings:
    - {{mqtt_pattern: "bench/+/tele", danube_topic: /bench/tele, durability: {durability}}}
wal: {{dir: {d}/wal, fsync: {mode}, max_topic_bytes: 8GiB, max_total_bytes: 8GiB}}
http: {{listener: "127.0.0.1:{hport}"}}
log: {{level: warn}}
""")
    log = open(os.path.join(d, "log"), "wb")
    p = subprocess.Popen([os.path.join(args.build, "tributary"), "run", "-c", cfg], stdout=log, stderr=log)
    sw = (0, 0)
    try:
        wait_until(lambda: port_open(mport) and port_open(hport), 20, "tributary to listen")
        if mc:
            wait_until(lambda: topic_stats(hport).get("durability") in ("memory", "ready", "draining"), 30,
                       "the topic to register")
            load(args, mport, seconds=1)  # warm-up: the first batch after a start is written
            wait_until(lambda: topic_stats(hport).get("durability") == "memory", 30, "the topic in memory")
            sw0 = switches(topic_stats(hport))
        ws0 = wal_stats(hport)
        syncs0, w0 = metric(hport, "tributary_wal_fsync_duration_seconds_count"), proc_io(p.pid)
        acked, secs, lat = load(args, mport)
        w1, syncs1 = proc_io(p.pid), metric(hport, "tributary_wal_fsync_duration_seconds_count")
        ws = wal_delta(ws0, wal_stats(hport))
        if mc:
            sw1 = switches(topic_stats(hport))
            sw = (sw1[0] - sw0[0], sw1[1] - sw0[1])
        total = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
        if mc:
            mc.cleanup()
    chk = subprocess.run([os.path.join(args.build, "tributary"), "wal", "check", "--dir", f"{d}/wal"],
                         capture_output=True, text=True)
    # the gateway keeps other topics in the WAL too ($sessions): take the bench's
    t = next(o for o in map(json.loads, chk.stdout.splitlines()) if o["topic"] == "/bench/tele")
    # padding (wal.fsync always) is disk space, not record: counted apart
    pad = t.get("padding_bytes", 0)
    records = max(t["records"], 1)  # memory_first: only what spills (and the clean stop) is in the log
    record = (t["bytes"] - 32 * t["segments"] - pad) / records
    disk = (t["bytes"] - 32 * t["segments"]) / records
    shutil.rmtree(d, ignore_errors=True)
    name = f"tributary fsync={mode}" + (", memory_first" if durability == "memory_first" else "")
    return dict(name=name, idle=f"{idle}/{idle_max}", acked=acked, rate=acked / secs, lat=lat,
                per_msg=(w1 - w0) / acked, total=total / acked, record=record, disk=disk,
                syncs=syncs1 - syncs0, per_sync=acked / max(syncs1 - syncs0, 1), bytes=w1 - w0, secs=secs,
                switches=sw if durability == "memory_first" else None, wal=ws)


def run_mosquitto(args, work, subscriber):
    d = tempfile.mkdtemp(prefix="mosq-", dir=work)
    port = free_port()
    cfg = os.path.join(d, "m.conf")
    with open(cfg, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                f"persistence_location {d}/\nmax_inflight_messages 0\nmax_queued_messages 0\n"
                "max_queued_bytes 0\nuser root\n")
    log = open(os.path.join(d, "log"), "wb")
    p = subprocess.Popen(["mosquitto", "-c", cfg], stdout=log, stderr=log)
    try:
        wait_until(lambda: port_open(port), 20, "mosquitto to listen")
        if subscriber:  # an offline persistent session: every message is queued for it
            subprocess.run(["mosquitto_sub", "-p", str(port), "-i", "wear-sub", "-c", "-q", "1",
                            "-t", "bench/#", "-E"], check=True, timeout=20)
        w0 = proc_io(p.pid)
        acked, secs, lat = load(args, port)
        w1 = proc_io(p.pid)
        total = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()
    db = os.path.join(d, "mosquitto.db")
    db_bytes = os.path.getsize(db) if os.path.exists(db) else 0
    shutil.rmtree(d, ignore_errors=True)
    name = "mosquitto, offline QoS 1 subscriber" if subscriber else "mosquitto, no subscriber"
    return dict(name=name, idle="-", acked=acked, rate=acked / secs, lat=lat, per_msg=(w1 - w0) / acked,
                total=total / acked, record=None, disk=None, syncs=None, per_sync=None, db=db_bytes,
                bytes=w1 - w0, secs=secs, switches=None, wal=None)


def table(args, rows):
    topic = len("bench/c0/tele")
    print(f"Bytes written per message, {args.rate} msg/s of {args.size}-byte QoS 1 payloads for "
          f"{args.seconds} s, {args.connections} connections, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}; payload + head = {args.size + HEAD} B, "
          f"record = payload + head + {topic}-{topic + 1} B MQTT topic")
    print()
    print("| server | idle_flush_ms / max_ms | acked msg/s | record B | disk B/msg | bytes/msg (load) | x record "
          "| x (payload+head) | bytes/msg incl. exit | fdatasyncs | msgs/fdatasync | ack p50 / p99 ms |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        rec = r["record"] or 0
        print(f"| {r['name']} | {r['idle']} | {r['rate']:,.0f} | " + (f"{rec:.1f}" if rec else "-") +
              " | " + (f"{r['disk']:.1f}" if r["disk"] else "-") +
              f" | {r['per_msg']:.1f} | " + (f"{r['per_msg'] / rec:.2f}" if rec else "-") +
              f" | {r['per_msg'] / (args.size + HEAD):.2f} | {r['total']:.1f} | " +
              (f"{r['syncs']:,.0f} | {r['per_sync']:.1f} |" if r["syncs"] is not None else "- | - |") +
              f" {r['lat'][0]:.1f} / {r['lat'][1]:.1f} |")
    print()
    print("| server | written B (load) | per hour at this rate | acked msg/s | ack p50 / p99 ms | spills / to memory |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        ph = r["bytes"] * 3600 / max(r["secs"], 1e-9)
        sw = f"{r['switches'][0]} / {r['switches'][1]}" if r["switches"] is not None else "-"
        print(f"| {r['name']} | {r['bytes']:,} | {ph / 1024:,.1f} KiB | {r['rate']:,.0f} | "
              f"{r['lat'][0]:.1f} / {r['lat'][1]:.1f} | {sw} |")
    wal_table(rows)
    sys.stdout.flush()


def wal_table(rows):
    """write_bytes beside what the log wrote by cause in the same window: bytes handed to write (writes)"""
    rows = [r for r in rows if r.get("wal")]
    if not rows:
        return
    causes = [c for c in rows[0]["wal"]["written_bytes"]
              if any(r["wal"]["written_bytes"][c] or r["wal"]["syncs"][c] for r in rows)]
    print()
    print("Where the bytes came from (the measured window; /stats `wal`, wal_stats): per cause, bytes handed to "
          "write/pwrite and (write calls); a replaced meta file is one 4 KiB page of write_bytes")
    print()
    print("| server | write_bytes | handed to write | " + " | ".join(causes) + " | fdatasync/fsync by cause |")
    print("|---|--:|--:|" + "--:|" * len(causes) + "---|")
    for r in rows:
        w = r["wal"]
        handed = sum(w["written_bytes"].values())
        cells = [f"{w['written_bytes'][c]:,} ({w['writes'][c]:,})" for c in causes]
        syncs = ", ".join(f"{c} {n:,}" for c, n in w["syncs"].items() if n) or "none"
        print(f"| {r['name']} | {r['bytes']:,} | {handed:,} | " + " | ".join(cells) + f" | {syncs} |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("-c", "--connections", type=int, default=10)
    ap.add_argument("--modes", default="always,interval,never")
    ap.add_argument("--flush", default="2/25,2/0,0/0",
                    help="idle_flush_ms/idle_flush_max_ms pairs (2/25 is the default)")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-mosquitto", action="store_true")
    ap.add_argument("--durability", default="log", help="log, memory_first or both (comma-separated)")
    ap.add_argument("--mosquitto", default="both", choices=("both", "plain", "subscriber"),
                    help="Mosquitto rows: no subscriber, an offline QoS 1 subscriber, or both")
    args = ap.parse_args()
    for b in ("tributary", "bench/loadgen"):
        if not os.access(os.path.join(args.build, b), os.X_OK):
            sys.exit(f"bench_wear.py: {args.build}/{b} not built (cmake --build {args.build})")
    work = tempfile.mkdtemp(prefix="bench-wear-", dir=args.dir)
    fs = subprocess.run(["df", "-T", work], capture_output=True, text=True).stdout.splitlines()[-1].split()
    print(f"# directory {work} ({fs[1]} on {fs[0]}), kernel {os.uname().release}")
    print()
    rows = []
    try:
        for mode in args.modes.split(","):
            for pair in args.flush.split(","):
                idle, idle_max = (int(v) for v in pair.split("/"))
                for dur in args.durability.split(","):
                    rows.append(run_tributary(args, work, mode, (idle, idle_max), dur))
                    sys.stderr.write(f"done: {rows[-1]['name']} flush={pair}\n")
        if not args.no_mosquitto:
            for sub in {"both": (False, True), "plain": (False,), "subscriber": (True,)}[args.mosquitto]:
                rows.append(run_mosquitto(args, work, sub))
                sys.stderr.write(f"done: {rows[-1]['name']} (db at exit {rows[-1]['db']} bytes)\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table(args, rows)


if __name__ == "__main__":
    main()
