"""tlib/mock.py: the mock Danube cluster as a subprocess, for any test.

    from tlib.mock import MockCluster, wait_until
    with MockCluster(schemas={"s": {"type": "json_schema", "raw": "{}"}}) as mc:
        ... point the edge (or tlib.edge_client) at mc.grpc_target ...
        mc.control.fault("unavailable")
        wait_until(lambda: mc.topic_stats("/edge1/t").get("stored") == 10, 10, "10 stored")
        records = mc.store_records()

The mock is started through build/tributary-mock-cluster (the launcher the
quick start uses) on port 0 for both gRPC and control, and the ports are
read from its one start-up line with a deadline. stop() sends SIGTERM and
expects exit status 0. Its stderr goes to a log file that is printed if a
start fails. Waits poll a condition until a deadline: they never stand in
for one by sleeping a fixed time.
"""
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LINE_RE = re.compile(r"^mock-cluster listening grpc=(\S+):(\d+) control=(\S+):(\d+)$")


def build_dir():
    d = os.environ.get("TRIB_BUILD_DIR")
    if not d:
        here = os.path.dirname(os.path.abspath(__file__))
        d = os.path.normpath(os.path.join(here, "..", "..", "..", "build"))
    return d


def launcher():
    return os.path.join(build_dir(), "tributary-mock-cluster")


def wait_until(pred, timeout, what="condition", interval=0.01):
    """Calls pred() until it returns something truthy, and returns that.
    Raises TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)            # polling interval; the deadline bounds the wait


def read_store(path):
    """The JSON-lines store as a list of dicts. A last line without its
    newline (a write in progress) is left out."""
    try:
        with open(path, encoding="utf-8") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    lines = data.split("\n")
    return [json.loads(line) for line in lines[:-1] if line]


class ControlError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class ControlClient:
    """The mock's control port (docs/MOCK-CLUSTER.md lists every call)."""

    def __init__(self, host, port, timeout=10):
        self.base = f"http://{host}:{port}"
        self.timeout = timeout

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base + urllib.request.quote(path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise ControlError(e.code, e.read().decode("utf-8", "replace")) from None

    def get_fault(self):
        return self.request("GET", "/fault")

    def poison(self, rule):
        """Sets (dict) or clears (None) the poison rule (docs/MOCK-CLUSTER.md "Faults")."""
        return self.request("POST", "/fault", {"poison": rule})

    def fault(self, mode=None, ack_delay_ms=None):
        body = {}
        if mode is not None:
            body["mode"] = mode
        if ack_delay_ms is not None:
            body["ack_delay_ms"] = ack_delay_ms
        return self.request("POST", "/fault", body)

    def put_schema(self, subject, type, raw=None, **extra):
        body = {"subject": subject, "type": type, **extra}
        if raw is not None:
            body["raw"] = raw
        return self.request("POST", "/schema", body)

    def delete_schema(self, subject):
        return self.request("DELETE", "/schema/" + subject)

    def delete_topic(self, name):
        return self.request("DELETE", "/topic" + name)

    def reset_edge(self, edge_name=None):
        return self.request("POST", "/reset-edge", {} if edge_name is None else {"edge_name": edge_name})

    def lookup(self, mode, url=None):
        return self.request("POST", "/lookup", {"mode": mode, "url": url})

    def stats(self):
        return self.request("GET", "/stats")

    def registrations(self):
        return self.request("GET", "/registrations")

    def schemas(self):
        return self.request("GET", "/schemas")


class MockCluster:
    """One mock cluster process. Keyword arguments map to its flags:
    token, schemas (a dict, written to a file), store_mode ("jsonl" keeps
    a store in the work dir; "count" none), fault, ack_delay_ms, lookup,
    lookup_url, extra_args (a list), launcher_path (default: the build
    tree's tributary-mock-cluster). workdir defaults to a fresh temp dir,
    removed on stop unless keep=True."""

    def __init__(self, *, token=None, schemas=None, store_mode="jsonl", store_path=None,
                 fault=None, ack_delay_ms=None, lookup=None, lookup_url=None,
                 extra_args=(), workdir=None, keep=False, start_timeout=30, launcher_path=None):
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="tb-mock-")
        self.keep = keep
        self.store_path = None
        args = [launcher_path or launcher(), "--port", "0", "--control", "0"]
        if store_mode == "jsonl":
            self.store_path = store_path or os.path.join(self.workdir, "store.jsonl")
            args += ["--store", self.store_path]
        else:
            args += ["--store-mode", store_mode]
        if token is not None:
            args += ["--token", token]
        if schemas is not None:
            path = os.path.join(self.workdir, "schemas.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(schemas, f)
            args += ["--schemas", path]
        if fault is not None:
            args += ["--fault", fault]
        if ack_delay_ms is not None:
            args += ["--ack-delay-ms", str(ack_delay_ms)]
        if lookup is not None:
            args += ["--lookup", lookup]
        if lookup_url is not None:
            args += ["--lookup-url", lookup_url]
        self.args = args + list(extra_args)
        self.start_timeout = start_timeout
        self.proc = None
        self.returncode = None

    # ---- lifecycle ----------------------------------------------------------

    def start(self):
        self.log_path = os.path.join(self.workdir, "mock-cluster.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.DEVNULL)
        line = self._read_line(self.start_timeout)
        m = LINE_RE.match(line)
        if not m:
            self._fail_start(f"unexpected start-up line {line!r}")
        self.grpc_host, self.grpc_port = m.group(1), int(m.group(2))
        self.control_host, self.control_port = m.group(3), int(m.group(4))
        self.control = ControlClient(self.control_host, self.control_port)
        return self

    def _read_line(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        deadline = time.monotonic() + timeout
        try:
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail_start(f"no start-up line within {timeout}s")
                if not sel.select(left):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    self._fail_start(f"exited with {self.proc.wait()} before listening")
                buf += chunk
        finally:
            sel.close()
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def _fail_start(self, why):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        raise RuntimeError(f"mock cluster failed to start: {why}\n{' '.join(self.args)}\n{log}")

    def stop(self, timeout=15):
        """SIGTERM, wait up to timeout, return the exit status (kill on timeout)."""
        if self.proc is None or self.returncode is not None:
            return self.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.returncode = "killed after SIGTERM timeout"
        self.proc.stdout.close()
        self._log.close()
        return self.returncode

    def cleanup(self):
        self.stop()
        if self._own_workdir and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None and rc != 0:
            sys.stderr.write(self.log_text())
            self.cleanup()
            raise AssertionError(f"mock cluster exited with {rc}")
        self.cleanup()
        return False

    # ---- views --------------------------------------------------------------

    @property
    def grpc_target(self):
        """host:port for a gRPC channel."""
        return f"{self.grpc_host}:{self.grpc_port}"

    @property
    def grpc_url(self):
        """The URL an edge.yaml cluster_url would carry."""
        return f"http://{self.grpc_host}:{self.grpc_port}"

    def store_records(self, topic=None):
        recs = read_store(self.store_path) if self.store_path else []
        return [r for r in recs if topic is None or r["topic"] == topic]

    def topic_stats(self, topic):
        """The /stats entry of one topic ({} before its first batch)."""
        return self.control.stats()["topics"].get(topic, {})
