"""Run the real tributary binary in tests: config in a temp dir, logs captured,
waits on conditions with deadlines (never bare sleeps as synchronisation)."""
import json
import re
import os
import signal
import socket
import subprocess
import tempfile
import time

from tlib import tls

BIN = os.environ.get("TRIBUTARY_BIN", os.path.join(os.environ.get("TRIB_BUILD_DIR", "build"), "tributary"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout=10.0, interval=0.02, what="condition"):
    """Polls cond() until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def run_cli(*args, env=None, timeout=30):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, env=e)


class Gateway:
    """A tributary process with its own config file and data directory.
    With TRIB_MQTT_TLS=1 its plain MQTT listeners are TLS ones (tlib/tls.py)."""

    def __init__(self, yaml_text=None, workdir=None, env=None, args=None, preexec_fn=None):
        self.dir = workdir or tempfile.mkdtemp(prefix="trib-it-")
        self.config = None
        if yaml_text is not None:
            self.config = os.path.join(self.dir, "edge.yaml")
            with open(self.config, "w") as f:
                f.write(yaml_text)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.args = args or []
        self.preexec_fn = preexec_fn  # e.g. a resource limit for the child
        self.proc = None
        self.log_path = os.path.join(self.dir, "gateway.log")
        self.log_mark = 0  # where the current run's output starts in the log file

    def write_config(self, yaml_text):
        """Replaces the configuration file (for a SIGHUP), made TLS as start() makes it."""
        with open(self.config, "w") as f:
            f.write(tls.tls_config(yaml_text) if tls.ENABLED else yaml_text)

    def start(self):
        if tls.ENABLED and self.config:
            # the suite over TLS (tlib/tls.py): read here, not in __init__, so that
            # a test may still edit the file between the two
            with open(self.config) as f:
                text = f.read()
            self.write_config(text)
        cmd = [BIN, "run"] + (["-c", self.config] if self.config else []) + self.args
        self.logf = open(self.log_path, "ab")
        self.log_mark = self.logf.tell()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, cwd=self.dir, env=self.env,
                                     preexec_fn=self.preexec_fn)
        return self

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def run_log(self):
        """The log of the current run only (start() may be called again after
        stop(), appending to the same file)."""
        with open(self.log_path, "rb") as f:
            f.seek(self.log_mark)
            return f.read().decode("utf-8", "replace")

    def wait_log(self, needle, timeout=10.0):
        def found():
            if self.proc and self.proc.poll() is not None and needle not in self.log():
                raise AssertionError(f"gateway exited ({self.proc.returncode}) before logging {needle!r}:\n{self.log()}")
            return needle in self.log()
        return wait_for(found, timeout, what=f"log line {needle!r}")

    def wait_port(self, port, timeout=10.0):
        def connectable():
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited ({self.proc.returncode}):\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return True
            except OSError:
                return False
        return wait_for(connectable, timeout, what=f"port {port}")

    def mqtt_port(self, timeout=10.0, listener=0):
        """The MQTT port the gateway bound for a listener (mqtt.listener, or
        mqtt.listeners[listener]; its address may have port 0)."""
        return self.mqtt_ports(listener + 1, timeout)[listener]

    def mqtt_ports(self, n=1, timeout=10.0):
        """{listener index: bound port} once n "mqtt listening" lines are in
        this run's log; mqtt_tls() says which listeners are TLS."""
        return {i: p for i, (p, _) in self._listeners(n, timeout).items()}

    def mqtt_tls(self, n=1, timeout=10.0):
        return {i: t for i, (_, t) in self._listeners(n, timeout).items()}

    def _listeners(self, n, timeout):
        pat = re.compile(r'(?:msg="mqtt listening"|"msg":"mqtt listening").*?addr[=":]+\[?([0-9a-f.:]*?)\]?:(\d+)'
                         r'"?[ ,]+"?listener"?[=:](\d+)[ ,]+"?tls"?[=:](true|false)')

        def found():
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited ({self.proc.returncode}):\n{self.log()}")
            got = {int(m.group(3)): (int(m.group(2)), m.group(4) == "true") for m in pat.finditer(self.run_log())}
            if tls.ENABLED and not all(t for _, t in got.values()):
                raise AssertionError(f"the suite runs over TLS, yet a listener is plain:\n{self.run_log()}")
            return got if len(got) >= n else None
        return wait_for(found, timeout, what=f"{n} 'mqtt listening' log lines")

    def http_port(self, timeout=10.0):
        return self._bound("http listening", timeout)

    def _bound(self, msg, timeout):
        # only this run's lines: after a restart the old port is still in the file
        pat = re.compile(r'(?:msg="%s"|"msg":"%s").*?addr[=":]+\[?([0-9a-f.:]*?)\]?:(\d+)' % (msg, msg))

        def found():
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited ({self.proc.returncode}):\n{self.log()}")
            m = None
            for m in pat.finditer(self.run_log()):
                pass
            return int(m.group(2)) if m else None
        return wait_for(found, timeout, what=f"log line {msg!r}")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends sig and returns the exit code (raises if it does not exit in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"gateway did not exit within {timeout}s of {sig!r}:\n{self.log()}")
        self.logf.close()
        return rc

    def kill(self):
        return self.stop(signal.SIGKILL)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def json_log_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def wal_dump(wal_dir, topic=None):
    """Every record in the log, as dicts (tributary wal dump)."""
    args = ["wal", "dump", "--dir", wal_dir] + (["--topic", topic] if topic else [])
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def write_bytes(pid):
    """Bytes process pid caused to be written to storage (/proc/<pid>/io
    write_bytes less cancelled_write_bytes): how the suite and the benches
    read a process's disk writes."""
    io = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            io[k] = int(v)
    return io["write_bytes"] - io["cancelled_write_bytes"]
