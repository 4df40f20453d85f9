#!/usr/bin/python3
"""bench_mf_throughput.py: acknowledged messages per second with many QoS 1
publishers, durability memory_first beside log and beside Mosquitto, same
load, same run (issue 16: "100 QoS 1 publishers, receive maximum 20,
memory mode: report acked/s beside log mode"; docs/WAL.md "The memory
tier").

    bench/bench_mf_throughput.py [--publishers 100] [--receive-max 20]
        [--messages 200000] [--size 100] [--ack-delay-ms 0] [--repeats 1]
        [--modes memory_first,log,mosquitto] [--replicator KEY=VALUE ...]
        [--build build]

Each row starts a fresh server: the gateway (wal.fsync always,
mqtt.receive_maximum --receive-max, the mapping's durability, the mock
cluster in store mode "count" acking after --ack-delay-ms), or Debian's
Mosquitto (persistence on, its defaults: a peer that keeps nothing for a
cluster). bench/loadgen then publishes --messages --size-byte QoS 1
messages from --publishers MQTT 5 connections, each with at most
--receive-max in flight (the gateway's Receive Maximum says the same), as
fast as the acknowledgements come, and reports acked/s and PUBACK p50/p99.

What to expect: in memory_first a PUBACK waits for the cluster's
acknowledgement of the batch that carried it (ack: upstream), so each
publisher's window turns once per cluster round trip, not once per fsync;
with fsync always, log mode turns it once per group commit. The rows print
the box's load average: a figure from a busy box is labelled as such.
--replicator sets keys of the gateway's replicator block (e.g.
max_inflight_batches=16: memory_first's acks wait for the cluster, so the
topic's replication window, max_inflight_batches x batch_size messages,
bounds how many of its publishers' messages can be answered per round
trip; docs/WAL.md "Throughput with many publishers").
Nothing here passes or fails.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_lib as L  # noqa: E402


def run(mode, a, work):
    from tlib.mock import MockCluster
    mc = None
    if mode == "mosquitto":
        srv = L.mosquitto(work, "mosq")
    else:
        mc = MockCluster(store_mode="count", ack_delay_ms=a.ack_delay_ms or None,
                         launcher_path=os.path.join(a.build, "tributary-mock-cluster")).start()
        srv = L.tributary(a.build, os.path.join(work, "gw"), mc.grpc_url, durability=mode,
                          replicator=a.replicator, mqtt_extra={"receive_maximum": a.receive_max})
    try:
        cpu0 = L.cpu_seconds(srv.pid)
        lg = L.loadgen(a.build, srv.port, a.messages, conns=a.publishers, qos=1, size=a.size,
                       extra=("-V", "5", "-w", str(a.receive_max), "-j", "2"))
        r = L.loadgen_result(lg, 600)
        cpu = L.cpu_seconds(srv.pid) - cpu0
        return {"mode": mode, "rate": r["rate"], "p50": r["ack_p50_ms"], "p99": r["ack_p99_ms"],
                "us_per_msg": cpu / max(1, r["acked"]) * 1e6, "load": os.getloadavg()[0]}
    finally:
        L.stop(srv.proc)
        if mc is not None:
            mc.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--publishers", type=int, default=100)
    ap.add_argument("--receive-max", type=int, default=20)
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--ack-delay-ms", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--modes", default="memory_first,log,mosquitto")
    ap.add_argument("--replicator", action="append", default=[], metavar="KEY=VALUE",
                    help="a key of the gateway's replicator block (integer values)")
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    a = ap.parse_args()
    a.replicator = {k: int(v) for k, v in (kv.split("=", 1) for kv in a.replicator)}
    rows = []
    for i in range(a.repeats):
        for mode in a.modes.split(","):
            work = tempfile.mkdtemp(prefix=f"mf-tput-{mode}-")
            try:
                rows.append(run(mode, a, work))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    print(f"\n{a.messages:,} QoS 1 messages of {a.size} B from {a.publishers} MQTT 5 publishers, at most "
          f"{a.receive_max} in flight each; gateway wal.fsync always, mock ack delay {a.ack_delay_ms} ms"
          f"{', replicator ' + str(a.replicator) if a.replicator else ''}\n")
    print("| server | acked/s | PUBACK p50 ms | p99 ms | server CPU us/msg | load |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        name = r["mode"] if r["mode"] == "mosquitto" else f"tributary {r['mode']}"
        print(f"| {name} | {r['rate']:,.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['us_per_msg']:.1f} | "
              f"{r['load']:.1f} |")


if __name__ == "__main__":
    main()
