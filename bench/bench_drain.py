#!/usr/bin/python3
"""bench_drain.py: how long `tributary admin drain` takes to answer "drained"
under load (docs/OPERATIONS.md, "Admin API"). Not CI. Two topics, the mock
cluster, a paho publisher at --rate msg/s QoS 1; once --warm messages are
acknowledged the drain is asked for, once with the cluster acknowledging at
once and once with each batch acknowledged 200 ms late.

  TRIBUTARY_BIN=build/tributary TRIB_BUILD_DIR=build /usr/bin/python3 bench/bench_drain.py
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from tlib.gateway import Gateway, run_cli  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import Publisher, edge_yaml  # noqa: E402

MAPS = [{"mqtt_pattern": "a/+", "danube_topic": "/edge1/a"}, {"mqtt_pattern": "b/+", "danube_topic": "/edge1/b"}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=4000)
    a = ap.parse_args()
    for delay in (0, 200):
        mc = MockCluster()
        mc.start()
        gw = Gateway(edge_yaml(mc.grpc_url, MAPS)).start()
        try:
            port, hport = gw.mqtt_port(), gw.http_port()
            gw.wait_log("bootstrap complete")
            mc.control.fault(ack_delay_ms=delay)
            pub = Publisher(port, lambda n: "a/d" if n % 3 else "b/d", rate=a.rate, client_id="bench").start()
            wait_until(lambda: len(pub.acked()) >= a.warm, 60, "load")
            t0 = time.monotonic()
            r = run_cli("admin", "drain", "--timeout", "60s", "--http", f"127.0.0.1:{hport}", timeout=90)
            dt = time.monotonic() - t0
            print(f"ack_delay_ms={delay} rate={a.rate}/s acked_before_answer={len(pub.acked())} "
                  f"drain_answer_s={dt:.2f} rc={r.returncode} state={json.loads(r.stdout)['state']}")
            pub._stop.set()
            pub.c.loop_stop()
            gw.stop(timeout=30)
        finally:
            gw.__exit__()
            mc.cleanup()


if __name__ == "__main__":
    main()
