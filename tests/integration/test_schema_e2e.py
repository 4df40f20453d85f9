"""Schema validation end to end (issue 6): a JSON Schema and an Avro schema
from the (mock) cluster's registry; under enforce, MQTT 5 gets 0x99 for an
invalid payload, MQTT 3.1.1 gets its PUBACK and the payload goes to the
dead-letter log with the validation error; the cluster receives only the
valid messages."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway, wal_dump  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

WAIT = 20
TELEMETRY = {"type": "object", "required": ["temperature"],
             "properties": {"temperature": {"type": "number", "maximum": 120}}}
AVRO = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "int"},
                                                         {"name": "ok", "type": "boolean"}]}


def zigzag(n):
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        out.append(b | (0x80 if z else 0))
        if not z:
            return bytes(out)


class SchemaEndToEnd(unittest.TestCase):
    def setUp(self):
        self.mc = MockCluster(schemas={"tele": {"type": "json_schema", "raw": TELEMETRY},
                                       "reading": {"type": "avro", "raw": AVRO}}).start()
        maps = [{"mqtt_pattern": "t/+", "danube_topic": "/edge1/tele", "schema_subject": "tele",
                 "validation_policy": "enforce", "extract_attributes": {"device": "$1"}},
                {"mqtt_pattern": "a/+", "danube_topic": "/edge1/readings", "schema_subject": "reading",
                 "validation_policy": "enforce"}]
        # with the dead-letter log on (mqtt.dead_letter)
        yaml = edge_yaml(self.mc.grpc_url, maps).replace('  listener: "127.0.0.1:0"\n',
                                                         '  listener: "127.0.0.1:0"\n  dead_letter: true\n', 1)
        self.gw = Gateway(yaml).start()
        self.port = self.gw.mqtt_port()
        for t in ("/edge1/tele", "/edge1/readings"):
            self.gw.wait_log(f'msg="topic ready" topic={t}', WAIT)

    def tearDown(self):
        if self.gw.proc and self.gw.proc.poll() is None:
            self.gw.proc.kill()
        self.mc.stop()

    def publish(self, version, topic, payloads):
        c = m.Raw(self.port)
        c.send(m.connect(f"schema-{version}-{topic}", version=version))
        c.expect(m.CONNACK)
        reasons = []
        for i, p in enumerate(payloads, 1):
            c.send(m.publish(topic, p, qos=1, pid=i, version=version))
            reasons.append(c.expect(m.PUBACK).reason())
        c.send(m.disconnect(version))
        c.close()
        return reasons

    def test_json_schema_enforced_on_both_versions(self):
        valid, hot, wrong = b'{"temperature": 21.5}', b'{"temperature": 130}', b'{"temp": 1}'
        self.assertEqual(self.publish(5, "t/d5", [valid, hot, wrong]), [0, 0x99, 0x99])
        self.assertEqual(self.publish(4, "t/d4", [valid, hot]), [0, 0])  # 3.1.1 cannot be told
        stored = wait_until(lambda: len(self.mc.store_records("/edge1/tele")) == 2 and
                            self.mc.store_records("/edge1/tele"), WAIT, "the valid messages at the cluster")
        self.assertEqual([json.loads(r["payload"]) for r in stored], [{"temperature": 21.5}] * 2)
        self.assertTrue(all(r.get("schema_id") is not None for r in stored), "schema id stamped")
        self.assertEqual(self.gw.stop(), 0, self.gw.log())
        dead = wal_dump(os.path.join(self.gw.dir, "wal"), "$dead-letter")
        self.assertEqual(len(dead), 3)
        errors = [d["attributes"]["dead_letter.error"] for d in dead]
        self.assertIn("/temperature: 130 > maximum 120", errors[0])
        self.assertIn("temperature", errors[1])
        self.assertEqual([d["attributes"]["dead_letter.topic"] for d in dead], ["/edge1/tele"] * 3)
        self.assertEqual([d["mqtt_topic"] for d in dead], ["t/d5", "t/d5", "t/d4"])

    def test_avro_raw_datum_enforced(self):
        good = zigzag(7) + b"\x01"
        trailing = good + b"\x00"
        truncated = zigzag(7)
        self.assertEqual(self.publish(5, "a/x", [good, trailing, truncated]), [0, 0x99, 0x99])
        stored = wait_until(lambda: self.mc.store_records("/edge1/readings"), WAIT, "the valid datum at the cluster")
        self.assertEqual(len(stored), 1)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())
        self.assertEqual(len(wal_dump(os.path.join(self.gw.dir, "wal"), "$dead-letter")), 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
