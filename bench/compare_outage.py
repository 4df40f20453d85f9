"""compare_outage.py: bench/compare's outage section. Tributary and two
bridged Mosquittos (bridge defaults, and the queue limit removed) each get
20 devices (bench/devices: counters, ack logs) at --rate messages/s in
total; the far side of each goes down for --outage-secs and comes back.

Far side: for Tributary the C sink bench_sink behind the mock cluster's
lookup (the Python mock's own ceiling would be the figure otherwise,
docs/REPLICATION.md); for Mosquitto the far broker of the bridge, with a
subscriber recording what arrives. The outages start together and end one
system at a time, each drain measured alone, so no drain shares the two
cores with another; the others keep taking their live load meanwhile, so
their outages run a little longer, and the report gives each its own.

What is measured for each: the backlog when the far side returns, how long
until the first message got through and until the backlog was gone, the
replay rate over that stretch, and the edge's memory at the end of the
outage. For Mosquitto also what the judge counts at the far subscriber
(acknowledged by the near broker and never arrived, duplicates, order);
Tributary's loss and order are judged with the mock cluster's store by
tests/storeforward (a store that records every message cannot also be the
fastest sink).
"""
import collections
import os
import signal
import subprocess
import sys
import time

import compare_lib as L

sys.path.insert(0, os.path.join(L.ROOT, "tests", "storeforward"))
from judge import PAYLOAD_RE, load_acks  # noqa: E402

DEVICES = 20


def say(msg):
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def log_has(server, needle):
    with open(os.path.join(server.work, "log"), errors="replace") as f:
        return needle in f.read()


def drain_tributary(a, t, sink_port, t_start):
    """The C sink comes back expecting exactly the backlog: it stamps its
    first and last stored message on CLOCK_MONOTONIC (the clock Python's
    time.monotonic() reads), so the drain is timed by the receiver, not by
    polling. It exits once the backlog is in; a plain sink then takes over
    the live load."""
    s = t.stats()
    lag0 = sum(x["lag_messages"] for x in s["topics"])
    out = {"outage_s": round(time.time() - t_start, 1), "backlog": lag0,
           "wal_bytes": sum(x["wal_bytes"] for x in s["topics"]), "edge_rss_kib": L.rss_kib(t.pid)}
    sk = L.popen([os.path.join(a.build, "bench", "bench_sink"), "--port", str(sink_port), "--expect", str(lag0)],
                 stdout=subprocess.PIPE, text=True)
    sk.stdout.readline()                # listening
    end = time.monotonic()
    line = sk.stdout.readline()         # stored=N first_ms= last_ms= ... when the backlog is in
    sk.wait(60)
    L.sink(a.build, sink_port)
    f = dict(kv.split("=") for kv in line.split())
    first, last = int(f["first_ms"]) / 1000.0, int(f["last_ms"]) / 1000.0
    rate = int(f["stored"]) / max(last - first, 0.001)
    out.update({"first_after_end_s": round(first - end, 3), "time_to_drain_s": round(last - end, 3),
                "replay_rate": round(rate), "replay_x_arrival": round(rate / a.rate, 1)})
    return out


def follow(path, state):
    """Reads the subscriber's new complete lines: (arrival_s, device, n, taken_ms) for device payloads."""
    with open(path, "rb") as f:
        f.seek(state.get("pos", 0))
        data = f.read()
    cut = data.rfind(b"\n") + 1
    state["pos"] = state.get("pos", 0) + cut
    out = []
    for line in data[:cut].decode("utf-8", "replace").splitlines():
        ts, _, payload = line.partition(" ")
        m = PAYLOAD_RE.match(payload)
        if m:
            out.append((float(ts), int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return out


def drain_mosquitto(a, work, name, m, t_start):
    out = {"outage_s": round(time.time() - t_start, 1), "edge_rss_kib": L.rss_kib(m["near"].pid)}
    state = {}
    follow(m["path"], state)            # skip what arrived before the far side returns
    m["far"] = L.mosquitto(work, f"far-{name}", port=m["far"].port, unlimited=True)
    end = time.time()
    out["end_epoch"] = end
    first = last_backlog = live = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for arrival, _dev, _n, taken in follow(m["path"], state):
            first = first or arrival
            if taken < end * 1000:
                last_backlog = arrival
            else:
                live = arrival
        # drained: live readings arrive and no backlog reading came for 5 s
        if live and time.time() - (last_backlog or end) > 5:
            break
        time.sleep(0.2)                 # polling interval of the subscriber's file
    out["first_after_end_s"] = round(first - end, 3) if first else None
    out["time_to_drain_s"] = round((last_backlog or end) - end, 3)
    return out


def judge_far(devdir, path, end_epoch, arrival_rate):
    """Acknowledged by the near broker vs arrived at the far subscriber."""
    acked = load_acks(devdir)
    acked_all = {(d, n) for d, s in acked.items() for n in s}
    seen, highest = set(), collections.defaultdict(int)
    dups = ooo = 0
    backlog = []
    for arrival, dev, n, taken in follow(path, {}):
        if (dev, n) in seen:
            dups += 1
            continue
        seen.add((dev, n))
        if n < highest[dev]:
            ooo += 1
        highest[dev] = max(highest[dev], n)
        if arrival >= end_epoch and taken < end_epoch * 1000:
            backlog.append(arrival)
    out = {"acked": len(acked_all), "arrived": len(seen), "missing": len(acked_all - seen),
           "duplicates": dups, "out_of_order": ooo, "backlog": len(backlog)}
    if len(backlog) > 1:
        span = max(max(backlog) - min(backlog), 0.001)
        out["replay_rate"] = round(len(backlog) / span)
        out["replay_x_arrival"] = round(len(backlog) / span / arrival_rate, 1)
    return out


def outage(a, work):
    d = os.path.join(work, "outage")
    os.makedirs(d)
    per_device = a.rate / DEVICES
    sink_port = L.free_port()
    sink, _ = L.sink(a.build, sink_port)
    mc, grpc, _ctl = L.mock_cluster(a.build, d, lookup_url=f"http://127.0.0.1:{sink_port}")
    t = L.tributary(a.build, os.path.join(d, "t"), f"http://127.0.0.1:{grpc}")
    moss = {}
    for name, unlimited in (("mosquitto_default", False), ("mosquitto_unlimited", True)):
        far = L.mosquitto(d, f"far-{name}", unlimited=True)  # the far side stands for the cluster: it must not drop
        sub, path = L.subscriber(d, f"sub-{name}", far.port, topic="sf/#")
        L.wait_until(lambda: log_has(far, "New client connected"), 10, "the far subscriber")
        near = L.mosquitto(d, f"near-{name}", bridge_to=far.port, unlimited=unlimited)
        L.wait_until(lambda: log_has(near, "Connecting bridge"), 30, "the bridge to connect")
        moss[name] = {"far": far, "near": near, "sub": sub, "path": path, "unlimited": unlimited}
    devdirs = {"tributary": os.path.join(d, "dev-tributary")}
    devs = {"tributary": L.devices(a.build, t.port, devdirs["tributary"], n=DEVICES, rate=per_device)}
    for name, m in moss.items():
        devdirs[name] = os.path.join(d, f"dev-{name}")
        devs[name] = L.devices(a.build, m["near"].port, devdirs[name], n=DEVICES, rate=per_device)
    say(f"outage: warm-up {a.warmup_secs}s at {a.rate}/s into each system")
    time.sleep(a.warmup_secs)           # the scenario's warm-up, not a wait for a state
    L.stop(sink, signal.SIGKILL)
    for m in moss.values():
        L.stop(m["far"].proc)
    t_start = time.time()
    say(f"outage: far sides down for {a.outage_secs}s")
    time.sleep(a.outage_secs)           # the outage itself
    res = {"arrival_rate": a.rate}
    say("outage: tributary's far side back")
    res["tributary"] = drain_tributary(a, t, sink_port, t_start)
    for name, m in moss.items():
        say(f"outage: {name}'s far side back")
        res[name] = drain_mosquitto(a, d, name, m, t_start)
    say("outage: stopping the devices (each delivers what it still holds)")
    for p in devs.values():
        L.stop(p, timeout=180)
    for m in moss.values():
        settle_lines(m["path"])
    res["tributary"]["acked"] = sum(len(s) for s in load_acks(devdirs["tributary"]).values())
    for name, m in moss.items():
        res[name].update(judge_far(devdirs[name], m["path"], res[name].pop("end_epoch"), a.rate))
    L.stop(t.proc)
    L.stop(mc)
    for m in moss.values():
        for p in (m["near"].proc, m["far"].proc, m["sub"]):
            L.stop(p)
    return res


def settle_lines(path, quiet=3.0, timeout=120):
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = L.count_lines(path)
        if c != last:
            last, since = c, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return c
        time.sleep(0.2)
    return last
