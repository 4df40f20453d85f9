"""SIGTERM under load (2,000 QoS 1 messages/s from several clients): the
gateway exits 0 within 5 s, and every message that got a PUBACK is in the
log afterwards."""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib import tls  # noqa: E402
from tlib.gateway import Gateway, wal_dump, wait_for  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "load/+", danube_topic: /e1/load}
wal: {dir: ./wal, fsync: always}
http: {listener: "127.0.0.1:0"}
"""

CLIENTS = 4
RATE = 2000  # messages per second, all clients together


class Publisher(threading.Thread):
    def __init__(self, port, idx, stop):
        super().__init__(daemon=True)
        self.idx, self.stop = idx, stop
        self.acked_mids, self.sent = set(), {}  # mids stay unique: < 65,535 per client here
        self.c = tls.paho(paho.Client(client_id=f"load-{idx}", protocol=paho.MQTTv311))
        self.c.max_inflight_messages_set(100)
        self.c.on_publish = self.on_publish
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()

    def on_publish(self, client, userdata, mid):
        self.acked_mids.add(mid)  # (no lock held around paho calls: paho has its own)

    @property
    def acked(self):
        return {self.sent[mid] for mid in list(self.acked_mids) if mid in self.sent}

    def run(self):
        period = CLIENTS / RATE
        n, t0 = 0, time.monotonic()
        while not self.stop.is_set():
            payload = f"{self.idx}-{n:07d}"
            info = self.c.publish(f"load/{self.idx}", payload, qos=1)
            self.sent[info.mid] = payload
            n += 1
            delay = t0 + n * period - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)  # pacing the load, not synchronisation


class Shutdown(unittest.TestCase):
    def test_sigterm_under_load(self):
        gw = Gateway(CONFIG).start()
        try:
            port = gw.mqtt_port()
            stop = threading.Event()
            pubs = [Publisher(port, i, stop) for i in range(CLIENTS)]
            for p in pubs:
                p.start()
            # let some acks flow, then stop the gateway while publishing continues
            wait_for(lambda: all(len(p.acked) > 500 for p in pubs), timeout=30, what="acks flowing")
            t0 = time.monotonic()
            rc = gw.stop(signal.SIGTERM, timeout=10)
            took = time.monotonic() - t0
            stop.set()
            for p in pubs:
                p.join(timeout=10)
                p.c.loop_stop()
            self.assertEqual(rc, 0, gw.log())
            self.assertLess(took, 5.0, "drain took too long")
            stored = {r["payload"] for r in wal_dump(os.path.join(gw.dir, "wal"), "/e1/load")}
            acked = set().union(*(p.acked for p in pubs))
            self.assertGreater(len(acked), 2000)
            missing = acked - stored
            self.assertEqual(missing, set(), f"{len(missing)} acked messages not in the log")
        finally:
            if gw.proc.poll() is None:
                gw.proc.kill()


if __name__ == "__main__":
    unittest.main(verbosity=2)
