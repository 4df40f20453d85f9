"""What the reload and retirement tests share: ask() (one request to the
ops listener; test_reload_mappings.py too) and RetireCase (test_retire.py,
test_admin_retire.py): two mappings a/+ -> /e1/a and b/+ -> /e1/b on the
mock cluster, a gateway whose file a test rewrites and reloads through
POST /admin/reload, and readers of /stats, of the RETIRED file (`tributary
wal check`) and of a topic's directory. Every wait is a condition with a
deadline."""
import http.client
import json
import os
import unittest

from .gateway import Gateway, run_cli, wait_for
from .mock import MockCluster
from .replication import edge_yaml

WAIT = 60  # seconds: the bound of the waits (sanitizer builds on a shared box are slow)

A = {"mqtt_pattern": "a/+", "danube_topic": "/e1/a", "extract_attributes": {"dev": "$1"}}
B = {"mqtt_pattern": "b/+", "danube_topic": "/e1/b", "extract_attributes": {"dev": "$1"}}


def ask(port, method, path, timeout=30):
    """One HTTP request to the gateway's ops listener: (status, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


class RetireCase(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster().start()
        self.addCleanup(self.mc.stop)

    def yaml(self, mappings, retire="remove"):
        return edge_yaml(self.mc.grpc_url, mappings, edge="e1", wal=f"fsync: never, retire: {retire}",
                         extra="log: {level: info}\n").replace(
            "  ingestion: {batch_timeout_ms: 5}\n", "  ingestion: {batch_timeout_ms: 5}\n  unmatched: drop\n")

    def start_gateway(self, mappings, retire="remove"):
        g = Gateway(self.yaml(mappings, retire))
        g.start()
        self.addCleanup(lambda: g.proc.poll() is None and g.stop())
        g.wait_log("bootstrap complete", timeout=WAIT)
        return g

    def reload(self, g, mappings, retire="remove"):
        """The file rewritten and reloaded: the answer, which must say applied."""
        g.write_config(self.yaml(mappings, retire))
        status, body = ask(g.http_port(), "POST", "/admin/reload")
        ans = json.loads(body)
        self.assertEqual((status, ans["result"]), (200, "applied"), ans)
        return ans

    def topics(self, g):
        """/stats: (its topics by name, the whole document)."""
        status, body = ask(g.http_port(), "GET", "/stats")
        self.assertEqual(status, 200, body)
        st = json.loads(body)
        return {t["topic"]: t for t in st["topics"]}, st

    def wait_state(self, g, topic, state, what):
        box = {}

        def ok():
            box["tp"] = self.topics(g)[0]
            return box["tp"].get(topic, {}).get("state") == state
        try:
            wait_for(ok, timeout=WAIT, interval=0.05, what=what)
        except Exception:
            self.fail(f"{what}: /stats topics say {json.dumps(box.get('tp'))[:3000]}\n{g.log()[-4000:]}")
        return box["tp"]

    def tomb(self, g, topic):
        """The RETIRED entry of topic, read with `tributary wal check` (read-only, no lock)."""
        r = run_cli("wal", "check", "--dir", os.path.join(g.dir, "wal"))
        found = [x for x in (json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()) if x.get("retired") == topic]
        return found[0] if found else None

    @staticmethod
    def wal_dir(g, topic):
        return os.path.join(g.dir, "wal", topic.replace("/", "+"))
