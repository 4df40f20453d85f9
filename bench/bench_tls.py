#!/usr/bin/python3
"""bench_tls.py: MQTT over TLS, Tributary beside Mosquitto 2 with the same
certificate in the same run: ingest rate and new connections per second.

    bench/bench_tls.py [--quick] [-n 200000] [--conns 10,100] [--qos 0,1] [--size 100]
                       [--repeats 3] [--handshakes 2000] [--parallel 8] [--fsync always]
                       [--server-cpus 0] [--client-cpus 1] [--no-plain] [--only ingest,handshakes]
                       [--coalesce-ms MS] [--probe K --rate R]
                       [--build build]
                       [--out build/bench/tls.md]

A CA and a server certificate it signs (EC P-256, CN and subjectAltName
localhost / 127.0.0.1) are made with the openssl command; both servers
load the same two files, each on a TLS listener beside a plain one:

  Tributary   `tributary run`, mqtt.listeners [plain, {tls: {cert_file,
              key_file}}], one mapping for loadgen's topics, wal.fsync
              --fsync (default always: a QoS 1 ack waits for fdatasync),
              the cluster absent (messages are stored and kept, as in
              bench_ingest.sh)
  Mosquitto   Debian's mosquitto 2, persistence on, max_inflight_messages
              and max_queued_messages 0 (as bench_ingest.sh), and
              set_tcp_nodelay true (Tributary sets TCP_NODELAY; without it
              Mosquitto's handshake flights wait on delayed ACKs, ~40 ms each)

Both servers run at once, pinned with taskset to --server-cpus; this
script and every client to --client-cpus, so a client never takes the
server's core. Each cell runs --repeats times, alternating the servers
(Tributary, Mosquitto, Tributary, ...) so a change in the machine's load
hits both; the figure is the median.

  ingest      bench/loadgen --cafile: QoS x connections x --size-byte
              payloads, -n messages shared by the connections (QoS 0 ends
              with a QoS 1 barrier per connection: the figure is what the
              server took in); connections and handshakes are made before
              the clock starts. With plain rows (default) the same load on
              each server's plain listener, for the cost of TLS itself.
              CPU per message: the server's utime+stime over the run (all
              its threads), and the client's own (loadgen cpu_s): with one
              core each, a client near its core's share is the limit.
              --coalesce-ms sets Tributary's tls.read_coalesce_ms. --probe K
              (QoS 0): every K-th message of a connection goes at QoS 1 and
              its PUBLISH -> PUBACK time is shown (p50 / p99); with --rate
              the client is paced below its core's limit, so the time is
              the server's, not the client's own queue (unpaced, loadgen
              writes as long as the socket takes it and reads the acks late).
  (ratio: of the medians; "ratio in each pair": the lowest and highest of
  Tributary's i-th run over Mosquitto's i-th, made back to back)
  handshakes  bench/tls_handshakes: --handshakes new connections, each TCP
              connect, TLS 1.3 handshake, CONNECT, CONNACK, DISCONNECT,
              close, by --parallel blocking clients; "full" offers no
              session, "resumed" offers each client's last one. Server CPU
              per connection beside the rate: when the client's core is the
              limit, that is the server's cost.

Prints Markdown tables (also written to --out, raw figures beside it as
.json) with the machine's load average before and after. Nothing passes or
fails on time; a run where a server refused or lost messages fails.
--quick: one repeat of small cells, for a smoke run in seconds.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_lib as L  # noqa: E402


def say(msg):
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def certificates(d):
    """A CA and a server certificate it signs; returns (ca, cert, key)."""
    def ossl(*a):
        subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-tls-ca")
    ossl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "2", "-extfile", "server.ext")
    os.chmod(os.path.join(d, "server.key"), 0o644)  # Mosquitto may drop to its own user
    return tuple(os.path.join(d, f) for f in ("ca.pem", "server.pem", "server.key"))


def stored(srv):
    return sum(t["stored"] for t in srv.stats()["topics"])


PERF_EVENTS = "raw_syscalls:sys_enter,context-switches"


def perf_counts(path):
    """perf stat -x, output: {event: count}."""
    out = {}
    with open(path) as f:
        for line in f:
            v = line.strip().split(",")
            if len(v) > 2 and v[0].isdigit():
                out[v[2]] = int(v[0])
    return out


def ingest_once(a, srv, port, ca, qos, conns):
    before_cpu = L.cpu_seconds(srv.pid)
    before = stored(srv) if srv.http else 0
    extra = (["--cafile", ca] if ca else []) + (["--probe", str(a.probe)] if a.probe and qos == 0 else [])
    if a.perf:  # syscalls and context switches, the server's (all its threads) and the client's
        sf, cf = (os.path.join(a.work, f) for f in ("perf-server.txt", "perf-client.txt"))
        sp = L.popen(["perf", "stat", "-x,", "-e", PERF_EVENTS, "-p", str(srv.pid), "-o", sf])
        time.sleep(0.3)  # perf's own start-up before the load begins (it says nothing when attached)
        cmd = [os.path.join(a.build, "bench", "loadgen"), "-p", str(port), "-c", str(conns), "-n", str(a.n),
               "-s", str(a.size), "-q", str(qos), "-t", "bench", *extra] + (["-r", str(a.rate)] if a.rate else [])
        p = L.popen(["perf", "stat", "-x,", "-e", PERF_EVENTS, "-o", cf, *cmd], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
        r = L.loadgen_result(p, timeout=600)
        sp.send_signal(signal.SIGINT)
        sp.wait(timeout=30)
        s, c = perf_counts(sf), perf_counts(cf)
        r["server_syscalls"], r["server_cs"] = s["raw_syscalls:sys_enter"], s["context-switches"]
        r["client_syscalls"], r["client_cs"] = c["raw_syscalls:sys_enter"], c["context-switches"]
    else:
        r = L.loadgen_result(L.loadgen(a.build, port, a.n, conns=conns, qos=qos, size=a.size, rate=a.rate,
                                       extra=extra), timeout=600)
    r["server_cpu_s"] = L.cpu_seconds(srv.pid) - before_cpu
    if srv.http:  # every message in the log, not only acknowledged (QoS 0: plus one barrier per connection)
        want = a.n + (conns if qos == 0 else 0)
        L.wait_until(lambda: stored(srv) - before >= want, 30, f"{want} messages stored")
        got = stored(srv)
        if got - before != want:
            raise RuntimeError(f"tributary stored {got - before}, expected {want}")
    return r


def handshakes_once(a, srv, ca, resume):
    before_cpu = L.cpu_seconds(srv.pid)
    args = [os.path.join(a.build, "bench", "tls_handshakes"), "-p", str(srv.tls_port), "--cafile", ca,
            "-n", str(a.handshakes), "-c", str(a.parallel)] + (["--resume"] if resume else [])
    p = L.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"tls_handshakes failed ({p.returncode}): {err.strip()}")
    r = {k: float(v) for k, v in (kv.split("=") for kv in out.split())}
    r["server_cpu_s"] = L.cpu_seconds(srv.pid) - before_cpu
    return r


def tls_refused(srv):
    return srv.stats()["connections"]["mqtt_closed"]["tls_handshake"]


def pairs(t, m):
    """The lowest and highest ratio of runs made back to back (Tributary's
    i-th beside Mosquitto's i-th): how much the machine moved the figure."""
    r = sorted(a["rate"] / b["rate"] for a, b in zip(t, m))
    return f"{r[0]:.2f}" if len(r) == 1 else f"{r[0]:.2f}-{r[-1]:.2f}"


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one repeat of small cells (a smoke run)")
    ap.add_argument("-n", type=int, default=200000, help="messages per ingest run")
    ap.add_argument("--conns", default="10,100")
    ap.add_argument("--qos", default="0,1")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--handshakes", type=int, default=2000, help="new connections per handshake run")
    ap.add_argument("--parallel", type=int, default=8, help="clients making them at once")
    ap.add_argument("--fsync", default="always", choices=("always", "interval", "never"))
    ap.add_argument("--server-cpus", default="0" if os.cpu_count() > 1 else None)
    ap.add_argument("--client-cpus", default="1" if os.cpu_count() > 1 else None)
    ap.add_argument("--no-plain", action="store_true", help="skip the plain-TCP reference rows")
    ap.add_argument("--rate", type=int, default=0,
                    help="pace each run's total to this many messages/s (for --probe: a client with room to read)")
    ap.add_argument("--perf", action="store_true",
                    help="count syscalls and context switches per message (perf stat), server's and client's")
    ap.add_argument("--probe", type=int, default=0,
                    help="QoS 0: every K-th message of a connection at QoS 1, its PUBLISH -> PUBACK time shown")
    ap.add_argument("--coalesce-ms", type=int, default=None,
                    help="Tributary's tls.read_coalesce_ms (default: the server's default)")
    ap.add_argument("--only", default="ingest,handshakes", help="which sections (default both)")
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--build", default=os.path.join(L.ROOT, "build"))
    ap.add_argument("--out", default=None, help="Markdown table (default BUILD/bench/tls.md)")
    a = ap.parse_args()
    if a.quick:
        a.n, a.conns, a.repeats, a.handshakes = 5000, "10", 1, 200
    for b in ("tributary", "bench/loadgen", "bench/tls_handshakes"):
        if not os.access(os.path.join(a.build, b), os.X_OK):
            sys.exit(f"bench_tls.py: {a.build}/{b} not built (cmake --build {a.build})")
    out = a.out or os.path.join(a.build, "bench", "tls.md")
    if a.client_cpus:
        os.sched_setaffinity(0, {int(c) for c in a.client_cpus.split(",")})  # inherited by every client
    qoses = [int(q) for q in a.qos.split(",")]
    connss = [int(c) for c in a.conns.split(",")]
    work = a.work = tempfile.mkdtemp(prefix="bench-tls-", dir=a.dir)
    load0 = os.getloadavg()
    t0 = time.time()
    ingest, hs = [], []
    try:
        ca, cert, key = certificates(work)
        trib = L.tributary(a.build, os.path.join(work, "t"), "http://127.0.0.1:1", fsync=a.fsync,
                           cpus=a.server_cpus, tls={"cert_file": cert, "key_file": key,
                                                       **({} if a.coalesce_ms is None
                                                          else {"read_coalesce_ms": a.coalesce_ms})})
        mosq = L.mosquitto(work, "mosquitto", unlimited=True, tls=(cert, key), cpus=a.server_cpus,
                           extra=["set_tcp_nodelay true"])
        servers = (("tributary", trib), ("mosquitto", mosq))
        refused0 = tls_refused(trib)  # the readiness probe's bare connect may count
        for transport in () if "ingest" not in a.only else ("tls",) if a.no_plain else ("tls", "plain"):
            for qos in qoses:
                for conns in connss:
                    runs = {name: [] for name, _ in servers}
                    for i in range(a.repeats):
                        for name, srv in servers:
                            port = srv.tls_port if transport == "tls" else srv.port
                            r = ingest_once(a, srv, port, ca if transport == "tls" else None, qos, conns)
                            runs[name].append(r)
                            say(f"ingest {transport} QoS {qos} x {conns}: {name} run {i + 1}: {r['rate']:,.0f} msg/s")
                    ingest.append({"transport": transport, "qos": qos, "connections": conns, "runs": runs})
        for resume in (False, True) if "handshakes" in a.only else ():
            runs = {name: [] for name, _ in servers}
            for i in range(a.repeats):
                for name, srv in servers:
                    r = handshakes_once(a, srv, ca, resume)
                    runs[name].append(r)
                    say(f"handshakes {'resumed' if resume else 'full'}: {name} run {i + 1}: {r['rate']:,.0f}/s "
                        f"(resumed {int(r['resumed'])}, server CPU {r['server_cpu_s']:.2f} s)")
            hs.append({"resume": resume, "runs": runs})
        if tls_refused(trib) != refused0:
            raise RuntimeError("tributary counted failed TLS handshakes: see its log")
        L.stop(trib.proc)
        L.stop(mosq.proc)
    finally:
        L.kill_started()
    load1 = os.getloadavg()

    lines = [f"MQTT over TLS 1.3 (EC P-256 certificate, the same files for both), {a.size}-byte payloads, "
             f"{a.n:,} messages a run, median of {a.repeats}; Tributary wal.fsync {a.fsync}; servers on CPU "
             f"{a.server_cpus}, clients on CPU {a.client_cpus}; {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d', time.gmtime(t0))}, {mosquitto_version()}, {openssl_version()}; "
             f"load average {load0[0]:.2f} before, {load1[0]:.2f} after ({(time.time() - t0) / 60:.1f} min)",
             ""]
    if ingest:
        lines += ["| transport | QoS | connections | Tributary msg/s | Mosquitto msg/s | ratio | ratio in each pair | "
                  "server CPU us/msg Tributary / Mosquitto | client CPU us/msg with Tributary / Mosquitto |" +
                  (" probe ack p50 / p99 ms, Tributary | Mosquitto |" if a.probe else "") +
                  (" syscalls / context switches per msg, server, Tributary | Mosquitto | client, with Tributary |"
                   " with Mosquitto |" if a.perf else ""),
                  "|---|--:|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|" if a.probe else "") +
                  ("--:|--:|--:|--:|" if a.perf else "")]
    for row in ingest:
        t, m = row["runs"]["tributary"], row["runs"]["mosquitto"]
        row["tributary"], row["mosquitto"] = med(t, "rate"), med(m, "rate")
        for name, runs in row["runs"].items():
            row[f"{name}_cpu_us"] = statistics.median(r["server_cpu_s"] / r["acked"] * 1e6 for r in runs)
            row[f"{name}_client_cpu_us"] = statistics.median(r["cpu_s"] / r["acked"] * 1e6 for r in runs)
        lines.append(f"| {row['transport']} | {row['qos']} | {row['connections']} | {row['tributary']:,.0f} | "
                     f"{row['mosquitto']:,.0f} | {row['tributary'] / row['mosquitto']:.2f} | {pairs(t, m)} | "
                     f"{row['tributary_cpu_us']:.1f} / {row['mosquitto_cpu_us']:.1f} | "
                     f"{row['tributary_client_cpu_us']:.1f} / {row['mosquitto_client_cpu_us']:.1f} |" +
                     (f" {med(t, 'ack_p50_ms'):.1f} / {med(t, 'ack_p99_ms'):.1f} | "
                      f"{med(m, 'ack_p50_ms'):.1f} / {med(m, 'ack_p99_ms'):.1f} |" if a.probe and row["qos"] == 0
                      else " | |" if a.probe else "") +
                     ("".join(f" {statistics.median(r[side + '_syscalls'] / r['acked'] for r in runs):.2f} / "
                              f"{statistics.median(r[side + '_cs'] / r['acked'] for r in runs):.3f} |"
                              for side in ("server", "client") for runs in (t, m)) if a.perf else ""))
    if hs:
        lines += ["", f"New connections (TCP + TLS 1.3 handshake + CONNECT/CONNACK + DISCONNECT), {a.handshakes:,} a "
                  f"run by {a.parallel} parallel clients, median of {a.repeats}:", "",
                  "| handshake | Tributary conn/s | Mosquitto conn/s | ratio | ratio in each pair | "
                  "connect to CONNACK p50 / p99 ms, Tributary | p50 / p99 ms, Mosquitto | "
                  "server CPU us/conn Tributary / Mosquitto | client CPU us/conn with Tributary / Mosquitto | "
                  "resumed, Tributary / Mosquitto |",
                  "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in hs:
        t, m = row["runs"]["tributary"], row["runs"]["mosquitto"]
        for name, runs in row["runs"].items():
            row[name] = med(runs, "rate")
            row[f"{name}_cpu_us"] = statistics.median(r["server_cpu_s"] / r["connections"] * 1e6 for r in runs)
            row[f"{name}_client_cpu_us"] = statistics.median(r["client_cpu_s"] / r["connections"] * 1e6
                                                             for r in runs)
        lines.append(f"| {'resumed' if row['resume'] else 'full'} | {row['tributary']:,.0f} | {row['mosquitto']:,.0f} | "
                     f"{row['tributary'] / row['mosquitto']:.2f} | {pairs(t, m)} | "
                     f"{med(t, 'p50_ms'):.1f} / {med(t, 'p99_ms'):.1f} | "
                     f"{med(m, 'p50_ms'):.1f} / {med(m, 'p99_ms'):.1f} | "
                     f"{row['tributary_cpu_us']:,.0f} / {row['mosquitto_cpu_us']:,.0f} | "
                     f"{row['tributary_client_cpu_us']:,.0f} / {row['mosquitto_client_cpu_us']:,.0f} | "
                     f"{int(med(t, 'resumed')):,} / {int(med(m, 'resumed')):,} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump({"args": vars(a), "load_before": load0, "load_after": load1, "ingest": ingest,
                   "handshakes": hs}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


def mosquitto_version():
    r = subprocess.run(["mosquitto", "-h"], capture_output=True, text=True).stdout.split("\n")[0]
    return r.replace(" is an MQTT v5.0/v3.1.1/v3.1 broker.", "").strip() or "mosquitto ?"


def openssl_version():
    return subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.split(" built")[0].strip()


if __name__ == "__main__":
    main()
