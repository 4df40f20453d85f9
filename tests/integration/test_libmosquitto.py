"""A libmosquitto program (bench/loadgen.c) publishing at QoS 0, 1 and 2 on
MQTT 3.1.1 and 5.0 from several connections: every message is acknowledged
(loadgen exits 0 only then) and the log holds exactly as many, with
contiguous offsets (no duplicates without reconnects)."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib import tls  # noqa: E402
from tlib.gateway import Gateway, wal_dump  # noqa: E402

LOADGEN = os.path.join(os.environ.get("TRIB_BUILD_DIR", "build"), "bench", "loadgen")

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "lg/+/tele", danube_topic: /e1/lg, extract_attributes: {conn: "$1"}}
wal: {dir: ./wal}
http: {listener: "127.0.0.1:0"}
"""


class Libmosquitto(unittest.TestCase):
    def test_every_qos_and_version(self):
        with Gateway(CONFIG) as gw:
            port = gw.mqtt_port()
            total = 0
            for version in ("311", "5"):
                for qos in (0, 1, 2):
                    r = subprocess.run([LOADGEN, "-p", str(port), "-c", "8", "-n", "2000", "-s", "64",
                                        "-q", str(qos), "-V", version, "-t", "lg", *tls.loadgen_args()],
                                       capture_output=True, text=True, timeout=120)
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertIn("acked=2000", r.stdout)
                    total += 2000
            self.assertEqual(gw.stop(), 0, gw.log())
            recs = wal_dump(os.path.join(gw.dir, "wal"), "/e1/lg")
            # QoS 0 barriers (one QoS 1 message per connection per QoS 0 run) are stored too
            payloads = [r for r in recs if len(r["payload"]) == 64]
            self.assertEqual(len(payloads), total)
            offsets = [r["offset"] for r in recs]
            self.assertEqual(offsets, list(range(offsets[0], offsets[0] + len(recs))))


if __name__ == "__main__":
    unittest.main(verbosity=2)
