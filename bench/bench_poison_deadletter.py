#!/usr/bin/python3
"""bench/bench_poison_deadletter.py N: how long a poison batch takes to reach the dead-letter log with the
default attempts and backoff (docs/REPLICATION.md "Attempts"). Run from the repository with TRIBUTARY_BIN,
TRIB_SOURCE_DIR, TRIB_BUILD_DIR set as for the integration tests. Not CI."""
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from tlib import mqttraw as m
from tlib.gateway import Gateway, wal_dump
from tlib.mock import MockCluster, wait_until
from tlib.replication import edge_yaml
for run in range(int(sys.argv[1])):
    mc = MockCluster().start()
    yaml = edge_yaml(mc.grpc_url, [{"mqtt_pattern": "t/+", "danube_topic": "/edge1/tele"}],
                     replicator={"retry_initial_ms": 100, "retry_max_ms": 30000, "max_attempts": 10})
    yaml = yaml.replace('  listener: "127.0.0.1:0"\n', '  listener: "127.0.0.1:0"\n  dead_letter: true\n', 1)
    gw = Gateway(yaml).start()
    port = gw.mqtt_port()
    mc.control.poison({"payload_contains": "POISON"})
    c = m.Raw(port); c.send(m.connect("x")); c.expect(m.CONNACK)
    t0 = time.monotonic()
    c.send(m.publish("t/a", b"POISON", qos=1, pid=1)); c.expect(m.PUBACK)
    wait_until(lambda: wal_dump(os.path.join(gw.dir, "wal"), "$dead-letter") or None, 200, "dl", interval=0.2)
    dt = time.monotonic() - t0
    print(f"run {run}: dead-lettered after {dt:.1f} s, refusals {mc.control.get_fault()['poisoned_batches']}", flush=True)
    gw.stop(); mc.stop()
