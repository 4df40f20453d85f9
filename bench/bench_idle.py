#!/usr/bin/python3
"""bench_idle.py: resident memory per idle MQTT connection, Tributary beside
Mosquitto 2 in the same run. Opens N connections (MQTT 3.1.1 CONNECT, keep
alive 0), waits for every CONNACK, reads VmRSS from /proc/<pid>/status.
With --tls, every connection is MQTT over TLS (a certificate made by the
openssl command; TLS 1.3, the default of both servers).

    bench/bench_idle.py [-n 5000] [--build build] [--tls]

Prints a Markdown table (RSS before, after, per connection)."""
import argparse
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from tlib import mqttraw as m  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc):
    for _ in range(400):
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.025)
    raise RuntimeError(f"port {port} never opened")


def open_idle(port, n, ctx):
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        if ctx:
            s = ctx.wrap_socket(s, server_hostname="localhost")
        s.sendall(m.connect(f"idle-{i}", version=4, keepalive=0))
        socks.append(s)
    for s in socks:  # every CONNACK
        s.settimeout(30)
        got = b""
        while len(got) < 4:
            chunk = s.recv(4 - len(got))
            if not chunk:
                raise RuntimeError("connection closed before CONNACK")
            got += chunk
        if got[0] != 0x20 or got[3] != 0:
            raise RuntimeError(f"CONNACK refused: {got!r}")
    return socks


def measure(cmd, port, n, cwd, ctx):
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        before = rss_kib(proc.pid)
        socks = open_idle(port, n, ctx)
        time.sleep(0.5)  # let the server settle its per-connection buffers; RSS is read, not waited on
        after = rss_kib(proc.pid)
        for s in socks:
            s.close()
        return before, after
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--build", default="build")
    ap.add_argument("--tls", action="store_true", help="MQTT over TLS")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * a.n + 1000)), hard))
    work = tempfile.mkdtemp(prefix="trib-idle-")
    tport, mport = free_port(), free_port()
    ctx, listener, mtls = None, f'listener: "127.0.0.1:{tport}"', ""
    if a.tls:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", "s.key", "-out", "s.pem", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost"], cwd=work, check=True, capture_output=True)
        ctx = ssl.create_default_context(cafile=os.path.join(work, "s.pem"))
        listener = (f'listeners:\n    - address: "127.0.0.1:{tport}"\n'
                    f'      tls: {{cert_file: {work}/s.pem, key_file: {work}/s.key}}')
        mtls = f"certfile {work}/s.pem\nkeyfile {work}/s.key\n"
    with open(os.path.join(work, "edge.yaml"), "w") as f:
        f.write(f"""edge: {{edge_name: b, cluster_url: "http://127.0.0.1:1"}}
mqtt:
  {listener}
  max_connections: {a.n + 100}
  topic_mappings: [{{mqtt_pattern: "#", danube_topic: /b/all}}]
wal: {{dir: {work}/wal}}
http: {{listener: "127.0.0.1:0"}}
log: {{level: warn}}
""")
    with open(os.path.join(work, "m.conf"), "w") as f:
        f.write(f"listener {mport} 127.0.0.1\n{mtls}allow_anonymous true\npersistence true\n"
                f"persistence_location {work}/\nmax_connections -1\nuser root\n")
    t = measure([os.path.abspath(os.path.join(a.build, "tributary")), "run", "-c", "edge.yaml"], tport, a.n, work,
                ctx)
    mq = measure(["mosquitto", "-c", "m.conf"], mport, a.n, work, ctx)
    print(f"Idle connections{' over TLS' if a.tls else ''}: {a.n}, {time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores\n")
    print("| server | RSS before (KiB) | RSS after (KiB) | bytes per connection |")
    print("|---|---|---|---|")
    for name, (b, af) in (("Tributary", t), ("Mosquitto 2", mq)):
        print(f"| {name} | {b} | {af} | {(af - b) * 1024 // a.n} |")


if __name__ == "__main__":
    main()
