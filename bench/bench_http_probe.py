#!/usr/bin/python3
"""bench_http_probe.py: how the real gateway's HTTP endpoint answers a probe
when it is quiet, under 1,000 held connections, and during a slowloris
client; plus keep-alive request rate and the process's memory and
descriptors. Prints figures; never passes or fails.

    /usr/bin/python3 bench/bench_http_probe.py [build/tributary]
"""
import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/tributary"
CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings: [{mqtt_pattern: "a/+", danube_topic: /e1/t}]
wal: {dir: ./wal}
http: {listener: "127.0.0.1:0"}
log: {format: json}
"""


def probe_ms(host, port, n=200):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        c.close()
        assert r.status == 200, r.status
        out.append((time.perf_counter() - t0) * 1e3)
    out.sort()
    return f"p50 {out[len(out) // 2]:.2f} ms  p99 {out[int(len(out) * 0.99)]:.2f} ms  max {out[-1]:.2f} ms"


def keepalive_rate(host, port, n=5000):
    c = http.client.HTTPConnection(host, port, timeout=5)
    t0 = time.perf_counter()
    for _ in range(n):
        c.request("GET", "/healthz")
        c.getresponse().read()
    c.close()
    return n / (time.perf_counter() - t0)


def proc(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    return f"rss {rss} KiB  fds {len(os.listdir(f'/proc/{pid}/fd'))}"


def main():
    d = tempfile.mkdtemp(prefix="trib-bench-")
    with open(os.path.join(d, "edge.yaml"), "w") as f:
        f.write(CONFIG)
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen([os.path.abspath(BIN), "run", "-c", "edge.yaml"], cwd=d, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while True:
            log.seek(0)
            m = re.search(r'"msg":"http listening","addr":"([^"]+)"', log.read())
            if m:
                break
            if time.monotonic() > deadline or p.poll() is not None:
                raise SystemExit("gateway did not start")
            time.sleep(0.02)
        host, port = m.group(1).rsplit(":", 1)
        port = int(port)
        print(f"quiet:                   /healthz {probe_ms(host, port)}  ({proc(p.pid)})")
        print(f"keep-alive /healthz:     {keepalive_rate(host, port):.0f} requests/s on one connection")
        socks = [socket.create_connection((host, port)) for _ in range(1000)]
        print(f"1,000 held connections:  /healthz {probe_ms(host, port)}  ({proc(p.pid)})")
        for s in socks:
            s.close()
        s = socket.create_connection((host, port))
        stop = threading.Event()

        def slowloris():
            for b in b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n":
                if stop.wait(1.0):
                    return
                try:
                    s.send(bytes([b]))
                except OSError:
                    return

        t = threading.Thread(target=slowloris)
        t.start()
        print(f"during a slowloris:      /healthz {probe_ms(host, port, 100)}")
        stop.set()
        t.join()
        s.close()
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
