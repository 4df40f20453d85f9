#!/usr/bin/python3
"""bench_mock_cluster.py: how many messages/s the mock Danube cluster takes.

The replicator's replay target is 300,000 messages/s, to be measured
against the mock cluster, so we must know the mock's own ceiling first.
This feeds it the way the replicator will: batches of 100 messages with
100-byte payloads, pipelined on ReplicateData (up to --window batches sent
and not yet acked), on --streams parallel streams (one topic each). Batches
are built and serialised before the clock starts, so the client costs only
its gRPC sends. Per store mode it prints messages/s and the CPU the mock
and the client used (from /proc/<pid>/stat, 100% = one core): a mock near
100% is the limit (Python's GIL); if neither is, the machine is (2 cores
shared with whatever else runs: note the load average beside a figure).

Prints figures; never passes or fails on time. Run after a build:
  /usr/bin/python3 bench/bench_mock_cluster.py [--build build] [--batches 3000]
      [--window 32] [--streams 1] [--modes count,jsonl] [--runs 3] [--in-process]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

LINE_RE = re.compile(r"^mock-cluster listening grpc=(\S+):(\d+) control=(\S+):(\d+)$")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_mock(build, mode, workdir):
    args = [os.path.join(build, "tributary-mock-cluster"), "--port", "0", "--control", "0"]
    if mode == "jsonl":
        args += ["--store", os.path.join(workdir, "store.jsonl")]
    else:
        args += ["--store-mode", "count"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    m = LINE_RE.match(line.strip())
    if not m:
        proc.kill()
        sys.exit(f"mock did not start: {line!r}")
    return proc, f"{m.group(1)}:{m.group(2)}", int(m.group(4))


def build_batches(edge_pb, api_pb, topic, count, per_batch, payload_size, first_offset):
    payload = b"p" * payload_size
    out = []
    off = first_offset
    for _ in range(count):
        b = edge_pb.ReplicateBatch(topic_name=topic)
        for _ in range(per_batch):
            m = b.messages.add()
            m.msg_id.topic_name = topic
            m.msg_id.topic_offset = off
            m.payload = payload
            m.publish_time = 1700000000000 + off
            m.producer_name = "bench"
            off += 1
        b.batch_last_offset = off - 1
        out.append(b.SerializeToString())
    return out


def run_stream(grpc, channel, edge_pb, batches, window, result, idx):
    sem = threading.Semaphore(window)
    call = channel.stream_stream("/danube.edge.EdgeReplicatorService/ReplicateData",
                                 request_serializer=None,
                                 response_deserializer=edge_pb.ReplicateAck.FromString)

    def requests():
        for b in batches:
            sem.acquire()
            yield b

    acks = 0
    for _ in call(requests(), timeout=600):
        acks += 1
        sem.release()
    result[idx] = acks


def one_run(args, mode, grpc, edge_pb, api_pb, run_no):
    with tempfile.TemporaryDirectory(prefix="tb-bench-mock-") as wd:
        proc, target, _ = start_mock(args.build, mode, wd)
        try:
            per_stream = [build_batches(edge_pb, api_pb, f"/bench/s{run_no}_{i}", args.batches,
                                        args.messages, args.payload, 0)
                          for i in range(args.streams)]
            channels = [grpc.insecure_channel(target) for _ in range(args.streams)]
            for ch in channels:
                grpc.channel_ready_future(ch).result(timeout=10)
            result = [0] * args.streams
            threads = [threading.Thread(target=run_stream,
                                        args=(grpc, channels[i], edge_pb, per_stream[i],
                                              args.window, result, i))
                       for i in range(args.streams)]
            cpu0 = cpu_seconds(proc.pid)
            self0 = cpu_seconds(os.getpid())
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            dt = time.monotonic() - t0
            cpu = cpu_seconds(proc.pid) - cpu0
            client_cpu = cpu_seconds(os.getpid()) - self0
            for ch in channels:
                ch.close()
            msgs = sum(result) * args.messages
            expect = args.batches * args.streams * args.messages
            if msgs != expect:
                print(f"warning: {msgs} messages acked of {expect}", file=sys.stderr)
            store_bytes = os.path.getsize(os.path.join(wd, "store.jsonl")) if mode == "jsonl" else 0
            return msgs / dt, cpu / dt * 100, client_cpu / dt * 100, dt, store_bytes
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def in_process(args, edge_pb, api_pb):
    """The mock's own ceiling without gRPC: parse each serialised batch and
    hand it to ClusterState.ingest (dedup, counters, store), on one core."""
    sys.path.insert(0, os.path.join(args.build, "mock_cluster"))
    from mc_state import ClusterState
    from mc_store import CountStore, JsonlStore
    raw = build_batches(edge_pb, api_pb, "/bench/inproc", args.batches, args.messages,
                        args.payload, 0)
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory(prefix="tb-bench-mock-") as wd:
            store = JsonlStore(os.path.join(wd, "s.jsonl")) if mode == "jsonl" else CountStore()
            state = ClusterState(store)
            t0 = time.perf_counter()
            for b in raw:
                state.ingest(edge_pb.ReplicateBatch.FromString(b))
            dt = time.perf_counter() - t0
            store.close()
        print(f"  {mode:5s} in process (parse + ingest, no gRPC): "
              f"{args.batches * args.messages / dt:10,.0f} msg/s")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.environ.get("TRIB_BUILD_DIR", "build"))
    p.add_argument("--batches", type=int, default=3000, help="batches per stream")
    p.add_argument("--messages", type=int, default=100, help="messages per batch")
    p.add_argument("--payload", type=int, default=100, help="payload bytes")
    p.add_argument("--window", type=int, default=32, help="batches in flight per stream")
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--modes", default="count,jsonl")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.add_argument("--in-process", action="store_true",
                   help="measure parse + ingest without gRPC instead (the mock's ceiling)")
    args = p.parse_args()

    sys.path.insert(0, os.path.join(args.build, "proto_py"))
    import grpc
    import DanubeApi_pb2 as api_pb
    import EdgeReplicator_pb2 as edge_pb

    if args.in_process:
        print(f"mock cluster internals: {args.batches} batches x {args.messages} messages "
              f"x {args.payload} B")
        in_process(args, edge_pb, api_pb)
        return
    print(f"mock cluster: {args.streams} stream(s) x {args.batches} batches x {args.messages} "
          f"messages x {args.payload} B, window {args.window}, {os.cpu_count()} CPUs")
    for mode in args.modes.split(","):
        rates = []
        for r in range(args.runs):
            rate, cpu, ccpu, dt, sbytes = one_run(args, mode, grpc, edge_pb, api_pb, r)
            rates.append(rate)
            if args.json:
                print(json.dumps({"mode": mode, "run": r, "msgs_per_s": round(rate),
                                  "mock_cpu_pct": round(cpu), "client_cpu_pct": round(ccpu),
                                  "seconds": round(dt, 3),
                                  "store_bytes": sbytes}))
            else:
                extra = f", store {sbytes / 1e6:.1f} MB" if mode == "jsonl" else ""
                print(f"  {mode:5s} run {r}: {rate:10,.0f} msg/s  ({dt:.2f} s, "
                      f"CPU: mock {cpu:.0f}%, client {ccpu:.0f}%{extra})")
        rates.sort()
        print(f"  {mode:5s} median: {rates[len(rates) // 2]:10,.0f} msg/s")


if __name__ == "__main__":
    main()
