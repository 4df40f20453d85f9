"""compare_lib.py: the processes bench/compare runs side by side, and what
it reads from /proc about them.

Tributary is started on its own config with the mock cluster (or the C
sink, for drain speed) behind it; Mosquitto 2 is Debian's, persistence on,
either alone or as a "near" broker bridged to a "far" one with a recording
subscriber on the far side: the store-and-forward setup a user would pick
instead of Tributary. Every server gets its own work directory, so
/proc/<pid>/io write_bytes is that server's disk traffic alone.

Why a module beside the script: the sections of bench/compare (ingest,
burst, steady, outage, idle) each start the same few servers; keeping how
they are started here keeps each section a page of measurement.
"""
import os
import signal
import socket
import subprocess
import time
import urllib.request
import json
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from tlib.gateway import write_bytes  # noqa: E402,F401  (the suite's reading of /proc/<pid>/io)
STARTED = []    # every process started here, so a failed run can end exactly those


def popen(args, **kw):
    p = subprocess.Popen(args, **kw)
    STARTED.append(p)
    return p


def kill_started():
    """SIGKILLs every process this module started that is still running."""
    for p in STARTED:
        if p.poll() is None:
            p.kill()
            p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def wait_until(cond, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)            # polling interval; the deadline bounds the wait



def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def stop(proc, sig=signal.SIGTERM, timeout=60):
    """Signals, waits, returns the bytes the process wrote in its whole life
    (rusage ru_oublock, 512-byte units, from the same kernel counter)."""
    if proc.poll() is not None:
        return 0
    proc.send_signal(sig)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_oublock * 512
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.02)


class Server:
    """A started process, its work dir and ports."""

    def __init__(self, name, proc, work, port, http=None, tls_port=None):
        self.name, self.proc, self.work, self.port, self.http = name, proc, work, port, http
        self.tls_port = tls_port

    @property
    def pid(self):
        return self.proc.pid

    def stats(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/stats", timeout=5) as r:
            return json.loads(r.read())


def tributary(build, work, cluster_url, fsync="always", log_level="warn", replicator=None, ingestion=None,
              max_connections=100000, cpus=None, auth=None, tls=None, durability=None, mqtt_extra=None):
    """`tributary run` on 127.0.0.1 with two mappings: bench/+/tele (loadgen)
    to /bench/tele and sf/t0/+ (bench/devices) to /bench/sf. replicator and
    ingestion: keys of replicator.* and mqtt.ingestion.* to set;
    max_connections None: the default; cpus: a taskset CPU list for all its threads;
    auth: keys of auth.* to set; tls: keys of a TLS listener's tls.* (cert_file,
    key_file, ...), which then listens on Server.tls_port beside the plain one.
    durability: the mappings' (log, memory_first; None: the default);
    mqtt_extra: more keys of the mqtt block (a dict)."""
    os.makedirs(work, exist_ok=True)
    port, http = free_port(), free_port()
    tls_port = free_port() if tls else None
    listen = (f'  listeners:\n    - address: "127.0.0.1:{port}"\n'
              f'    - {{address: "127.0.0.1:{tls_port}", tls: {json.dumps(tls)}}}' if tls
              else f'  listener: "127.0.0.1:{port}"')
    rep = {"batch_timeout_ms": 10}
    rep.update(replicator or {})
    dur = f", durability: {durability}" if durability else ""
    with open(os.path.join(work, "edge.yaml"), "w") as f:
        f.write(f"""edge: {{edge_name: bench, cluster_url: "{cluster_url}"}}
replicator: {json.dumps(rep)}
mqtt:
{listen}
{"" if max_connections is None else f"  max_connections: {max_connections}"}
  ingestion: {json.dumps(ingestion or {})}
{"".join(f"  {k}: {json.dumps(v)}" + chr(10) for k, v in (mqtt_extra or {}).items())}  topic_mappings:
    - {{mqtt_pattern: "bench/+/tele", danube_topic: /bench/tele{dur}}}
    - {{mqtt_pattern: "sf/t0/+", danube_topic: /bench/sf{dur}}}
auth: {json.dumps(auth or {})}
wal: {{dir: {work}/wal, fsync: {fsync}, max_topic_bytes: 8GiB, max_total_bytes: 16GiB}}
http: {{listener: "127.0.0.1:{http}"}}
log: {{level: {log_level}}}
""")
    log = open(os.path.join(work, "tributary.log"), "ab")
    pin = ["taskset", "-c", cpus] if cpus else []
    p = popen(pin + [os.path.join(build, "tributary"), "run", "-c", os.path.join(work, "edge.yaml")],
                         stdout=log, stderr=log)
    wait_until(lambda: port_open(port) and port_open(http) and (not tls or port_open(tls_port)), 30,
               "tributary to listen")
    return Server("tributary", p, work, port, http, tls_port)


def mosquitto(work, name, port=None, bridge_to=None, unlimited=False, password_file=None, tls=None, cpus=None,
              extra=()):
    """Debian's mosquitto, persistence on. bridge_to: the far broker's port
    (topic # out at QoS 1, the bridge's other settings left at their
    defaults). unlimited: max_queued_messages 0 (no queue limit; the
    default is 1000, which is what drops a bridge's backlog). tls: (certfile,
    keyfile) for a second listener, on Server.tls_port; cpus: a taskset CPU
    list; extra: more lines of mosquitto.conf."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    port = port or free_port()
    tls_port = free_port() if tls else None
    auth = ["allow_anonymous false", f"password_file {password_file}"] if password_file else ["allow_anonymous true"]
    conf = [f"listener {port} 127.0.0.1", *auth, "persistence true",
            f"persistence_location {d}/", "max_connections -1", "user root"]
    if unlimited:
        conf += ["max_queued_messages 0", "max_inflight_messages 0"]
    conf += list(extra)
    if tls:
        conf += [f"listener {tls_port} 127.0.0.1", f"certfile {tls[0]}", f"keyfile {tls[1]}"]
    if bridge_to:
        conf += ["connection far", f"address 127.0.0.1:{bridge_to}", "topic # out 1"]
    with open(os.path.join(d, "m.conf"), "w") as f:
        f.write("\n".join(conf) + "\n")
    log = open(os.path.join(d, "log"), "ab")
    pin = ["taskset", "-c", cpus] if cpus else []
    p = popen(pin + ["mosquitto", "-c", os.path.join(d, "m.conf")], stdout=log, stderr=log)
    wait_until(lambda: port_open(port) and (not tls or port_open(tls_port)), 30, f"mosquitto {name} to listen")
    return Server(name, p, d, port, tls_port=tls_port)


def subscriber(work, name, port, topic="#"):
    """mosquitto_sub on the far broker, persistent session at QoS 1, one
    line per message: arrival time (s.ns) and payload."""
    path = os.path.join(work, f"{name}.received")
    out = open(path, "ab")
    p = popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-i", name, "-c", "-q", "1",
                          "-t", topic, "-F", "%U %p"], stdout=out, stderr=subprocess.DEVNULL)
    return p, path


def mock_cluster(build, work, store_mode="count", lookup_url=None, port=0):
    """The Python mock Danube cluster; returns (proc, grpc_port, control_port)."""
    args = [os.path.join(build, "tributary-mock-cluster"), "--port", str(port), "--control", "0",
            "--store-mode", store_mode]
    if lookup_url:
        args += ["--lookup", "connect", "--lookup-url", lookup_url]
    p = popen(args, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "mock.log"), "ab"), text=True)
    line = p.stdout.readline()
    grpc = int(line.split("grpc=")[1].split()[0].rsplit(":", 1)[1])
    ctl = int(line.split("control=")[1].split()[0].rsplit(":", 1)[1])
    return p, grpc, ctl


def mock_stored(ctl):
    with urllib.request.urlopen(f"http://127.0.0.1:{ctl}/stats", timeout=5) as r:
        return json.loads(r.read())["totals"]["stored"]


def sink(build, port=0):
    """bench/bench_sink (C ReplicateData sink: counts, dedups, acks); returns (proc, port)."""
    p = popen([os.path.join(build, "bench", "bench_sink"), "--port", str(port)],
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline().split("port=")[1])


def loadgen(build, port, n, conns=10, qos=1, rate=0, size=100, prefix="bench", extra=()):
    """Starts bench/loadgen (extra: more of its options); returns the Popen
    (stdout: messages= seconds= rate= acked= ack_p50_ms= ack_p99_ms= ack_max_ms=)."""
    args = [os.path.join(build, "bench", "loadgen"), "-p", str(port), "-c", str(conns), "-n", str(n),
            "-s", str(size), "-q", str(qos), "-t", prefix, *extra]
    if rate:
        args += ["-r", str(rate)]
    return popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def loadgen_result(p, timeout):
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"loadgen failed ({p.returncode}): {err.strip()}")
    return {k: float(v) for k, v in (kv.split("=") for kv in out.split())}


def devices(build, port, outdir, n=20, rate=100, qos=1):
    """bench/devices: n devices on sf/t0/dNNN, counters, ack logs in outdir."""
    os.makedirs(outdir, exist_ok=True)
    return popen([os.path.join(build, "bench", "devices"), "-p", str(port), "-o", outdir,
                             "-d", str(n), "-r", str(rate), "-q", str(qos), "-T", "1", "-P", "sf", "-g", "120"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(outdir, "log"), "ab"))


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)
