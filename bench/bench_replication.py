#!/usr/bin/python3
"""bench_replication.py: the replicator's two figures against the mock
Danube cluster on loopback (issue 5's targets: replay faster than 300,000
messages/s; live p99 under 50 ms at 2,000 messages/s with batch_timeout_ms 10).

  replay   a backlog of --messages (1,000,000) records with 100-byte payloads
           written straight into a WAL (build/bench/bench_wal_fill), then the
           real gateway started against the mock in `count` mode; the figure
           is messages/s from the first stored batch to the last, as the mock
           counts them (its /stats, polled every 20 ms), plus the whole time
           from the gateway's start. Per configuration (--configs), --runs
           runs, median shown. CPU of both processes from /proc/<pid>/stat
           (100% = one core): a mock near 100% is the ceiling (Python's GIL).
           With --sink c, the streams go to build/bench/bench_sink (ReplicateData
           in C, decoding every batch with protobuf-c) while the Python mock
           answers registration and lookup: the figure is then the replicator's
           (the sink's own clock, first stored batch to the N-th message).
           CPU columns: seconds of CPU over the run's wall time (gateway start
           to the last message), 100% = one core.
  latency  QoS 1 publishes at --rate for --seconds from paho, payload
           {"n", "ts": ms since the epoch at publish}, gateway with
           replicator.batch_timeout_ms 10 and the mock in `jsonl` mode; the
           latency of a message is the mock's received_at (ms, taken after it
           parsed the batch) minus ts. p50/p90/p99/max over every message.

Prints figures; never passes or fails on time. After a build:
  /usr/bin/python3 bench/bench_replication.py [--build build] [--only replay|latency]
      [--messages 1000000] [--runs 3] [--configs 100x4,1000x8] [--sink mock|c]
      [--rate 2000] [--seconds 10]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def edge_yaml(url, wal_dir, batch, inflight, extra_rep=None, log_level="warn"):
    rep = {"batch_size": batch, "max_inflight_batches": inflight, "batch_timeout_ms": 10}
    rep.update(extra_rep or {})
    return f"""
edge: {{edge_name: bench, cluster_url: "{url}"}}
replicator: {json.dumps(rep)}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {{batch_timeout_ms: 5}}
  topic_mappings:
    - {{mqtt_pattern: "dev/+/tele", danube_topic: /bench/replay, extract_attributes: {{device: "$1"}}}}
wal: {{dir: "{wal_dir}", fsync: always, segment_bytes: 64MiB, max_topic_bytes: 4GiB, max_total_bytes: 8GiB}}
http: {{listener: "127.0.0.1:0"}}
log: {{level: {log_level}}}
"""


def replay_run(args, batch, inflight):
    from tlib.gateway import Gateway
    from tlib.mock import MockCluster, wait_until
    work = tempfile.mkdtemp(prefix="tb-bench-rep-")
    cleanup = []
    try:
        wal = os.path.join(work, "wal")
        subprocess.run([os.path.join(args.build, "bench", "bench_wal_fill"), wal, "/bench/replay",
                        str(args.messages), "100"], check=True, capture_output=True)
        with MockCluster(store_mode="count") as mc:
            gw = Gateway(edge_yaml(mc.grpc_url, wal, batch, inflight), workdir=work)
            mock_cpu0 = cpu_seconds(mc.proc.pid)
            t_start = time.monotonic()
            gw.start()
            cleanup.append(gw.__exit__)
            first = None
            n = args.messages
            deadline = time.monotonic() + 600
            while True:
                stored = mc.control.stats()["totals"]["stored"]
                now = time.monotonic()
                if stored and first is None:
                    first = (now, stored)
                if stored >= n or now > deadline:
                    break
                time.sleep(0.02)            # the polling interval of the measurement
            t_end = time.monotonic()
            gw_cpu = cpu_seconds(gw.proc.pid)
            mock_cpu = cpu_seconds(mc.proc.pid) - mock_cpu0
            rc = gw.stop(timeout=30)
            if rc != 0 or stored < n:
                raise RuntimeError(f"replay incomplete: {stored}/{n} stored, gateway exit {rc}:\n{gw.log()[-2000:]}")
            steady = (n - first[1]) / (t_end - first[0])
            whole = n / (t_end - t_start)
            span = t_end - t_start
            return steady, whole, gw_cpu / span * 100, mock_cpu / span * 100
    finally:
        for fn in cleanup:
            fn()
        shutil.rmtree(work, ignore_errors=True)


def replay_run_sink(args, batch, inflight):
    """The same backlog, streamed to the C sink; the mock only answers registration and lookup."""
    from tlib.gateway import Gateway
    from tlib.mock import MockCluster
    work = tempfile.mkdtemp(prefix="tb-bench-rep-")
    cleanup = []
    try:
        wal = os.path.join(work, "wal")
        subprocess.run([os.path.join(args.build, "bench", "bench_wal_fill"), wal, "/bench/replay",
                        str(args.messages), "100"], check=True, capture_output=True)
        sink = subprocess.Popen([os.path.join(args.build, "bench", "bench_sink"), "--port", "0",
                                 "--expect", str(args.messages)], stdout=subprocess.PIPE, text=True)
        try:
            port = int(sink.stdout.readline().split("port=")[1])
            with MockCluster(store_mode="count", lookup="connect", lookup_url=f"http://127.0.0.1:{port}") as mc:
                gw = Gateway(edge_yaml(mc.grpc_url, wal, batch, inflight), workdir=work)
                t_start = time.monotonic()
                gw.start()
                cleanup.append(gw.__exit__)
                line = sink.stdout.readline()
                span = time.monotonic() - t_start
                gw_cpu = cpu_seconds(gw.proc.pid)
                sink_cpu = cpu_seconds(sink.pid)
                sink.wait(30)
                rc = gw.stop(timeout=30)
            fields = dict(kv.split("=") for kv in line.split())
            if rc != 0 or int(fields["stored"]) < args.messages or fields["bad"] != "0":
                raise RuntimeError(f"replay to the sink incomplete: {line!r}, gateway exit {rc}")
            return float(fields["rate"]), args.messages / span, gw_cpu / span * 100, sink_cpu / span * 100
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.wait()
    finally:
        for fn in cleanup:
            fn()
        shutil.rmtree(work, ignore_errors=True)


def replay(args):
    peer = "the C sink (bench_sink)" if args.sink == "c" else "mock in count mode"
    print(f"\n## replay: {args.messages:,} messages of 100 bytes to {peer} "
          f"({os.cpu_count()} cores, load {loadavg()})\n")
    print("| batch_size x max_inflight | steady msg/s (median) | runs | from gateway start msg/s | "
          f"gateway CPU | {'sink' if args.sink == 'c' else 'mock'} CPU |")
    print("|---|---|---|---|---|---|")
    run = replay_run_sink if args.sink == "c" else replay_run
    for cfg in args.configs.split(","):
        batch, inflight = (int(x) for x in cfg.split("x"))
        runs = [run(args, batch, inflight) for _ in range(args.runs)]
        steady = [r[0] for r in runs]
        print(f"| {batch} x {inflight} | {statistics.median(steady):,.0f} | "
              f"{', '.join(f'{s:,.0f}' for s in steady)} | {statistics.median(r[1] for r in runs):,.0f} | "
              f"{statistics.median(r[2] for r in runs):.0f}% | {statistics.median(r[3] for r in runs):.0f}% |",
              flush=True)


def latency(args):
    from tlib.gateway import Gateway
    from tlib.mock import MockCluster, wait_until
    from tlib.replication import Publisher
    work = tempfile.mkdtemp(prefix="tb-bench-lat-")
    cleanup = []
    try:
        with MockCluster() as mc:
            gw = Gateway(edge_yaml(mc.grpc_url, os.path.join(work, "wal"), 100, 4, log_level="info"), workdir=work)
            gw.start()
            cleanup.append(gw.__exit__)  # kills it if the run fails half-way
            port = gw.mqtt_port()
            wait_until(lambda: "bench" in mc.control.registrations()["edges"], 30, "registration")
            pub = Publisher(port, lambda n: f"dev/{n % 10}/tele", rate=args.rate, client_id="bench-lat").start()
            t0 = time.monotonic()
            wait_until(lambda: time.monotonic() - t0 >= args.seconds, args.seconds + 5, "the run's duration")
            pub.stop(60)
            n = pub.sent
            wait_until(lambda: mc.topic_stats("/bench/replay").get("stored", 0) >= n, 60, "all stored")
            real_rate = n / (time.monotonic() - t0)
            lat = sorted(r["received_at"] - json.loads(r["payload"])["ts"] for r in mc.store_records("/bench/replay"))
            gw.stop(timeout=30)
        q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
        print(f"\n## live latency: {n:,} messages at {args.rate}/s asked ({real_rate:,.0f}/s sent) for "
              f"{args.seconds} s, QoS 1, batch_timeout_ms 10, mock in jsonl mode (load {loadavg()})\n")
        print("| p50 | p90 | p99 | max | messages |")
        print("|---|---|---|---|---|")
        print(f"| {q(0.50)} ms | {q(0.90)} ms | {q(0.99)} ms | {lat[-1]} ms | {len(lat):,} |")
    finally:
        for fn in cleanup:
            fn()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", choices=["replay", "latency"])
    ap.add_argument("--messages", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--configs", default="100x4,1000x8")
    ap.add_argument("--sink", choices=["mock", "c"], default="mock")
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    os.environ.setdefault("TRIB_BUILD_DIR", args.build)
    os.environ.setdefault("TRIBUTARY_BIN", os.path.join(args.build, "tributary"))
    print(f"# replication benchmark, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"{os.cpu_count()} cores")
    if args.only in (None, "replay"):
        replay(args)
    if args.only in (None, "latency"):
        latency(args)


if __name__ == "__main__":
    main()
