"""The operator's HTTP endpoint on the real binary: /healthz, /readyz, /metrics
(checked with promtool), /stats (checked against a JSON schema), the
endpoint's bounds under 1,000 concurrent connections and a slowloris client,
and `tributary status`. Waits are conditions with deadlines."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, run_cli, wait_for  # noqa: E402

SRC = os.environ["TRIB_SOURCE_DIR"]
PROMTOOL = "/usr/bin/promtool"

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "a/+", danube_topic: /e1/telemetry}
    - {mqtt_pattern: "b/#", danube_topic: /e1/energy}
wal: {dir: ./wal, max_topic_bytes: 64MiB, max_total_bytes: 256MiB}
http: {listener: "127.0.0.1:0"}
log: {format: json}
"""

TOPIC_FIELDS = {
    "topic": "string", "state": "string", "received": "integer", "received_per_second": ["number", "null"],
    "stored": "integer", "replicated": "integer",
    "queued": "integer", "dropped": "integer", "dropped_by_reason": "object", "rejected": "object", "wal_bytes": "integer",
    "wal_segments": "integer", "wal_oldest_offset": "integer", "wal_newest_offset": "integer",
    "acked_offset": "integer", "lag_messages": "integer", "lag_bytes": "integer",
    "oldest_unreplicated_age_seconds": "number", "stalled": "boolean", "invariant_ok": "boolean",
    "no_progress_seconds": "number", "dropped_in_flight": "integer", "wal_dropped_total": "integer",
    "wal_lost_total": "integer", "wal_write_errors": "integer", "batches_in_flight": "integer",
    "dropped_age": "integer", "wal_dropped_age_total": "integer", "blocked": "boolean", "blocked_pauses": "integer",
    "batches_sent": "integer", "batches_resent": "integer", "retries": "object", "stream_resets": "integer",
    "wal_batches": "object", "durability": "string", "held_messages": "integer", "held_bytes": "integer",
    "spills": "object", "to_memory": "integer", "throttled_ms": "integer", "paused": "boolean",
    "dead_lettered": "integer", "dead_letters": "object", "problem": ["string", "null"],
}
WAL_CAUSES = ["record", "pad", "probe", "segment", "checkpoint", "reserve", "drop", "switch", "repair", "state",
              "other"]
STATS_SCHEMA = {
    "type": "object",
    "required": ["version", "edge", "uptime_seconds", "healthy", "ready", "not_ready_reason", "invariant_ok",
                 "cluster", "connections", "process", "topics", "wal_limits", "wal", "listeners", "outputs"],
    "properties": {
        "version": {"type": "string"},
        "uptime_seconds": {"type": "number", "minimum": 0},
        "healthy": {"type": "boolean"},
        "ready": {"type": "boolean"},
        "invariant_ok": {"type": "boolean"},
        "cluster": {"type": "object", "required": ["state", "up"],
                    "properties": {"state": {"enum": ["unknown", "connecting", "connected", "unreachable"]}}},
        "connections": {"type": "object", "required": ["mqtt", "http", "mqtt_accepted", "mqtt_refused", "mqtt_closed",
                                                       "top_talkers", "top_talkers_window_seconds"],
                        "properties": {"mqtt": {"type": "integer"}, "http": {"type": "integer", "minimum": 1},
                                       "mqtt_accepted": {"type": "integer"}, "mqtt_refused": {"type": "object"},
                                       "mqtt_closed": {"type": "object"},
                                       "top_talkers": {"type": "array", "maxItems": 5, "items": {
                                           "type": "object", "required": ["client_id", "messages_per_second"],
                                           "properties": {"client_id": {"type": "string"},
                                                          "messages_per_second": {"type": "number",
                                                                                  "exclusiveMinimum": 0}},
                                           "additionalProperties": False}},
                                       "top_talkers_window_seconds": {"type": "number", "minimum": 0}}},
        "wal": {"type": "object", "required": ["written_bytes", "writes", "syncs"],
                "properties": {k: {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                                   "required": WAL_CAUSES} for k in ("written_bytes", "writes", "syncs")},
                "additionalProperties": False},
        "process": {"type": "object",
                    "required": ["resident_memory_bytes", "cpu_seconds", "open_fds", "start_time_seconds",
                                 "disk_write_bytes", "disk_read_bytes"],
                    "properties": {"resident_memory_bytes": {"type": "integer", "minimum": 1}}},
        "topics": {"type": "array", "items": {
            "type": "object", "required": list(TOPIC_FIELDS),
            "properties": {k: {"type": v} for k, v in TOPIC_FIELDS.items()},
            "additionalProperties": False}},
        "listeners": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["listener", "tls", "connections", "publish_denied", "tls_read_pauses"],
            "properties": {"listener": {"type": "string", "pattern": "^127\\.0\\.0\\.1:[0-9]+$"},
                           "tls": {"type": "boolean"}, "connections": {"type": "integer", "minimum": 0},
                           "publish_denied": {"type": "integer", "minimum": 0},
                           "tls_read_pauses": {"type": "integer", "minimum": 0}},
            "additionalProperties": False}},
        "outputs": {"type": "array", "items": {
            "type": "object", "required": ["output", "kind", "max_bytes_per_s", "max_messages_per_s", "throttled_ms"],
            "properties": {"output": {"type": "string"}, "kind": {"enum": ["danube", "mqtt", "sparkplug"]},
                           "max_bytes_per_s": {"type": "integer", "minimum": 0},
                           "max_messages_per_s": {"type": "integer", "minimum": 0},
                           "throttled_ms": {"type": "integer", "minimum": 0},
                           "state": {"type": ["string", "null"]}, "last_error": {"type": ["string", "null"]},
                           "topics": {"type": "array"}},
            # each kind adds its connection's counters (docs/OPERATIONS.md, /stats outputs[])
            "additionalProperties": True}},
    },
}


def request(addr, path, method="GET", timeout=2.0):
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        c.close()


def timed_healthz(addr):
    t0 = time.monotonic()
    status, _, body = request(addr, "/healthz")
    return status, body, time.monotonic() - t0


def promtool(*args, stdin=None):
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60)


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    if not m:
        raise AssertionError(f"{name} not in /metrics")
    return float(m.group(1))


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class HttpEndpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gw = Gateway(CONFIG).start()
        cls.gw.wait_log('"msg":"http listening"')
        m = re.search(r'"msg":"http listening","addr":"([^"]+)"', cls.gw.log())
        cls.addr = m.group(1)
        cls.gw.wait_log('"msg":"bootstrap complete"')

    @classmethod
    def tearDownClass(cls):
        rc = cls.gw.stop()
        assert rc == 0, cls.gw.log()

    def test_healthz_answers_ok(self):
        self.assertEqual(request(self.addr, "/healthz")[::2], (200, "ok\n"))

    def test_readyz_is_ready_and_reports_the_cluster(self):
        # the log is open and MQTT listens: ready, although no cluster is reachable
        # (the replicator reports it: connecting until the first attempt fails, then unreachable)
        status, _, body = request(self.addr, "/readyz")
        self.assertEqual(status, 200)
        self.assertRegex(body, r"cluster: (connecting|unreachable)")

    def test_unknown_path_and_method(self):
        self.assertEqual(request(self.addr, "/nope")[0], 404)
        self.assertEqual(request(self.addr, "/metrics", method="DELETE")[0], 405)

    def test_metrics_pass_promtool(self):
        status, ctype, body = request(self.addr, "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
        r = promtool("check", "metrics", stdin=body)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_metrics_carry_the_configured_disk_bounds_and_process_figures(self):
        body = request(self.addr, "/metrics")[2]
        self.assertEqual(metric(body, "tributary_wal_topic_limit_bytes"), 64 * 2**20)
        self.assertEqual(metric(body, "tributary_wal_total_limit_bytes"), 256 * 2**20)
        self.assertGreater(metric(body, "process_resident_memory_bytes"), 0)
        # the scrape's own connection may or may not be closed yet when we count
        self.assertLessEqual(abs(metric(body, "process_open_fds") - open_fds(self.gw.proc.pid)), 1)

    def test_stats_is_one_json_document_matching_the_schema(self):
        status, ctype, body = request(self.addr, "/stats")
        self.assertEqual((status, ctype), (200, "application/json"))
        doc = json.loads(body)
        jsonschema.validate(doc, STATS_SCHEMA)
        self.assertEqual([t["topic"] for t in doc["topics"]], ["/e1/telemetry", "/e1/energy"])
        self.assertTrue(doc["invariant_ok"])
        self.assertEqual(doc["edge"], "e1")
        # every topic's log opened a segment: each is one 32-byte header, synced with its directory
        wal = doc["wal"]
        self.assertGreaterEqual(wal["writes"]["segment"], 2, wal)
        self.assertEqual(wal["written_bytes"]["segment"], 32 * wal["writes"]["segment"], wal)
        self.assertEqual(wal["syncs"]["segment"], 2 * wal["writes"]["segment"], wal)

    def test_a_thousand_connections_do_not_stop_healthz_nor_take_descriptors(self):
        baseline = open_fds(self.gw.proc.pid)
        before = metric(request(self.addr, "/metrics")[2], "tributary_http_connections_evicted_total")
        host, port = self.addr.rsplit(":", 1)
        socks = []
        try:
            for _ in range(1000):
                socks.append(socket.create_connection((host, int(port)), timeout=5))
            status, body, took = timed_healthz(self.addr)
            self.assertEqual((status, body), (200, "ok\n"))
            self.assertLess(took, 0.5, f"/healthz took {took:.3f} s under 1,000 connections")
            fds = open_fds(self.gw.proc.pid)
            self.assertLessEqual(fds, baseline + 64 + 2, f"{fds} descriptors open, baseline {baseline}")
        finally:
            for s in socks:
                s.close()
        # /metrics is re-rendered at most every 250 ms: wait for a rendering that counts them
        wait_for(lambda: metric(request(self.addr, "/metrics")[2], "tributary_http_connections_evicted_total")
                 - before >= 1000 - 64, timeout=5, what="the evictions to be counted")

    def test_slowloris_is_cut_at_five_seconds_while_healthz_answers(self):
        host, port = self.addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=10)
        t0 = time.monotonic()
        result = {}

        def slow():  # one byte per second, as a slowloris client does
            req = b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"
            try:
                for i in range(len(req)):
                    s.sendall(req[i:i + 1])
                    s.settimeout(1.0)
                    try:
                        data = s.recv(4096)
                        result["data"] = data
                        result["at"] = time.monotonic() - t0
                        return
                    except socket.timeout:
                        pass
            except OSError as e:
                result["error"] = e

        th = threading.Thread(target=slow)
        th.start()
        worst = 0.0
        while th.is_alive():
            status, _, took = timed_healthz(self.addr)
            self.assertEqual(status, 200)
            worst = max(worst, took)
            th.join(0.2)
        s.close()
        self.assertIn("data", result, result)
        self.assertTrue(result["data"].startswith(b"HTTP/1.1 408 "), result["data"][:40])
        self.assertGreaterEqual(result["at"], 4.9)
        self.assertLess(result["at"], 6.5)
        self.assertLess(worst, 0.5, f"/healthz took up to {worst:.3f} s during the slowloris")

    def test_status_prints_the_header_and_one_line_per_topic(self):
        r = run_cli("status", "--http", self.addr)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^tributary \d+\.\d+\.\d+  edge e1  up \S+  ready"
                                   r"  healthy  cluster (connecting|unreachable)  mqtt 0  http 1  invariant ok$")
        self.assertRegex(lines[1], r"^listeners  127\.0\.0\.1:\d+ 0 conns$")
        self.assertRegex(lines[2], r"^TOPIC +STATE +DURABILITY +QUEUED +LAG AGE +DROPPED +REJECTED$")
        self.assertRegex(lines[3], r"^/e1/telemetry +idle +log +0 +0\.0s +0 +0$")
        self.assertRegex(lines[4], r"^/e1/energy +idle +log +0 +0\.0s +0 +0$")
        self.assertEqual(len(lines), 5)

    def test_status_json_is_the_stats_document(self):
        r = run_cli("status", "--json", "--http", self.addr)
        self.assertEqual(r.returncode, 0, r.stderr)
        jsonschema.validate(json.loads(r.stdout), STATS_SCHEMA)


class StatusWithoutGateway(unittest.TestCase):
    def test_unreachable_gateway_exits_1_with_a_clear_message(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        r = run_cli("status", "--http", f"127.0.0.1:{port}")
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"cannot reach the gateway at http://127.0.0.1:{port}/stats", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_bad_usage_exits_2(self):
        r = run_cli("status", "--frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: tributary status", r.stderr)


class ListenerInUse(unittest.TestCase):
    def test_gateway_refuses_to_start_when_the_http_port_is_taken(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            g = Gateway(CONFIG.replace('http: {listener: "127.0.0.1:0"}', f'http: {{listener: "127.0.0.1:{port}"}}'))
            g.start()
            self.assertEqual(g.proc.wait(timeout=10), 1, g.log())
            g.logf.close()
            self.assertIn('"msg":"http listen failed"', g.log())
            self.assertIn(f'"addr":"127.0.0.1:{port}"', g.log())


class OperationsDoc(unittest.TestCase):
    def test_example_alert_rules_pass_promtool(self):
        with open(os.path.join(SRC, "docs", "OPERATIONS.md")) as f:
            doc = f.read()
        m = re.search(r"## Alerts.*?```yaml\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m, "no yaml block under ## Alerts")
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write(m.group(1))
        try:
            r = promtool("check", "rules", f.name)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
