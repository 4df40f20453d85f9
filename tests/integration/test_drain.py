#!/usr/bin/python3
"""test_drain.py: planned maintenance through the admin API (RELOAD.md 6.3,
6.4; docs/OPERATIONS.md "Admin API"), against the real gateway, the mock
Danube cluster and real MQTT clients on loopback:

  - pause holds one topic: its messages stay in the log (lag grows, the
    cluster gets none), the other topic flows, /stats says "paused";
    resume delivers every one in order; idempotent; an unknown topic or a
    malformed path is 404 with words; `tributary admin pause|resume`;
  - a paused memory_first topic spills at once (its publishers answered
    long before spill_after_ms), resume replicates it in order;
  - drain under load: `tributary admin drain` answers "drained" only once
    the mock cluster stores every message the gateway acknowledged; from
    the first step /readyz is 503 "draining", the listener refuses new
    connections and an open MQTT 5 connection gets DISCONNECT 0x8B;
  - drain with the cluster silent: the CLI's --timeout answers exit 1
    with the topic still named; a paused topic is not waited for;
    `admin drain --cancel` listens again on the same port and readiness
    returns; the gateway then stops cleanly.
Every wait has a deadline.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib import mqttraw as m  # noqa: E402
from tlib.gateway import Gateway, free_port, run_cli  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import Publisher, check_topic, edge_yaml, payload_numbers, publish_all  # noqa: E402

WAIT = 60  # seconds: the bound of the long waits (sanitizer builds, a loaded box)
MAPS = [{"mqtt_pattern": "a/+", "danube_topic": "/edge1/a"}, {"mqtt_pattern": "b/+", "danube_topic": "/edge1/b"}]


def ask(port, method, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body


def topic_stats(port, name):
    status, body = ask(port, "GET", "/stats")
    assert status == 200, body
    return next(t for t in json.loads(body)["topics"] if t["topic"] == name)


class Case(unittest.TestCase):
    def start(self, mqtt_port=0):
        self.mc = MockCluster()
        self.mc.start()
        self.addCleanup(self.mc.cleanup)
        text = edge_yaml(self.mc.grpc_url, MAPS).replace('  listener: "127.0.0.1:0"\n  ingestion',
                                                          f'  listener: "127.0.0.1:{mqtt_port}"\n  ingestion')
        self.gw = Gateway(text).start()
        self.addCleanup(self.gw.__exit__)
        self.port = self.gw.mqtt_port()
        self.hport = self.gw.http_port()
        self.gw.wait_log("bootstrap complete")
        # both topics registered and streaming: one message each reaches the cluster
        publish_all(self.port, [("a/d", json.dumps({"n": -1})), ("b/d", json.dumps({"n": -1}))], client_id="warm")
        wait_until(lambda: self.stored("/edge1/a") == 1 and self.stored("/edge1/b") == 1, WAIT, "warm-up stored")

    def stored(self, topic):
        return len(self.mc.store_records(topic))

    def cli(self, *args, timeout=WAIT + 30):
        return run_cli("admin", *args, "--http", f"127.0.0.1:{self.hport}", timeout=timeout)


class Pause(Case):
    def test_pause_holds_one_topic_in_the_log_and_resume_delivers_it_in_order(self):
        self.start()
        status, body = ask(self.hport, "POST", "/admin/topics/edge1/a/pause")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body), {"topic": "/edge1/a", "paused": True, "outputs": 1})
        # idempotent
        status, body = ask(self.hport, "POST", "/admin/topics/edge1/a/pause")
        self.assertEqual((status, json.loads(body)["paused"]), (200, True), body)
        self.assertEqual(topic_stats(self.hport, "/edge1/a")["state"], "paused")

        n = 300
        items = [(("a/d" if i % 2 == 0 else "b/d"), json.dumps({"n": i})) for i in range(2 * n)]
        publish_all(self.port, items, client_id="load")  # every one PUBACKed: in the log
        wait_until(lambda: self.stored("/edge1/b") == 1 + n, WAIT, "topic b replicated while a is paused")
        # /stats is rendered at most every 250 ms: poll it
        wait_until(lambda: topic_stats(self.hport, "/edge1/a")["lag_messages"] == n, WAIT, "a's lag grows")
        ta = topic_stats(self.hport, "/edge1/a")
        self.assertEqual(ta["state"], "paused")
        self.assertEqual(ta["lag_messages"], n, ta)
        self.assertFalse(ta["stalled"], ta)
        self.assertTrue(ta["paused"], ta)
        self.assertIn('tributary_topic_paused{topic="/edge1/a"} 1', ask(self.hport, "GET", "/metrics")[1])
        self.assertIn('tributary_topic_paused{topic="/edge1/b"} 0', ask(self.hport, "GET", "/metrics")[1])
        self.assertEqual(self.stored("/edge1/a"), 1, "a paused topic sends nothing")
        wait_until(lambda: topic_stats(self.hport, "/edge1/b")["lag_messages"] == 0, WAIT, "b caught up")

        # resume through the CLI: every message of a arrives, once per offset, in order
        r = self.cli("resume", "/edge1/a")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(json.loads(r.stdout)["paused"])
        wait_until(lambda: self.stored("/edge1/a") == 1 + n, WAIT, "topic a replicated after resume")
        recs = self.mc.store_records("/edge1/a")
        check_topic(recs, 1 + n)
        self.assertEqual([json.loads(x["payload"])["n"] for x in recs[1:]], list(range(0, 2 * n, 2)))
        wait_until(lambda: topic_stats(self.hport, "/edge1/a")["lag_messages"] == 0, WAIT, "lag back to 0")
        self.assertNotEqual(topic_stats(self.hport, "/edge1/a")["state"], "paused")
        log = self.gw.log()
        self.assertEqual(log.count('msg="topic paused'), 1, "the second pause changed nothing")
        self.assertIn('msg="topic resumed', log)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_unknown_topic_and_bad_paths_are_404_with_words_and_the_cli_says_so(self):
        self.start()
        status, body = ask(self.hport, "POST", "/admin/topics/edge1/nope/pause")
        self.assertEqual(status, 404, body)
        self.assertIn("no such upstream topic", json.loads(body)["error"])
        for path in ("/admin/topics/edge1/a/stop", "/admin/topics/edge1/pause", "/admin/topics/e%20/a/pause",
                     "/admin/topics/edge1/a/pause/x"):
            status, body = ask(self.hport, "POST", path)
            self.assertEqual(status, 404, path)
            self.assertIn("/admin/topics/NAMESPACE/TOPIC/pause", body, path)
        status, _ = ask(self.hport, "GET", "/admin/topics/edge1/a/pause")
        self.assertEqual(status, 405, "pause changes state: POST only")
        r = self.cli("pause", "/edge1/nope")
        self.assertEqual(r.returncode, 1)
        self.assertIn("404", r.stderr)
        self.assertIn("no such upstream topic", r.stderr)
        r = self.cli("pause", "/edge1/b")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"topic": "/edge1/b", "paused": True, "outputs": 1})
        r = run_cli("admin", "pause")
        self.assertEqual(r.returncode, 2)
        self.assertIn("which topic", r.stderr)
        # a pause does not survive a restart (docs/OPERATIONS.md): the restarted gateway replicates b
        self.assertEqual(self.gw.stop(), 0, self.gw.log())
        self.gw.start()
        self.port, self.hport = self.gw.mqtt_port(), self.gw.http_port()
        publish_all(self.port, [("b/d", json.dumps({"n": 1}))], client_id="after")
        wait_until(lambda: self.stored("/edge1/b") == 2, WAIT, "b replicated after the restart")
        self.assertEqual(self.gw.stop(), 0, self.gw.log())


class PauseMemoryFirst(unittest.TestCase):
    def test_a_paused_memory_first_topic_spills_at_once_so_its_publishers_are_answered(self):
        """spill_after_ms is 30 s here: a PUBACK within seconds comes from the pause's spill
        (spills.output), not the timer; resume replicates every message in order."""
        mc = MockCluster()
        mc.start()
        self.addCleanup(mc.cleanup)
        maps = [{"mqtt_pattern": "m/+", "danube_topic": "/edge1/m", "durability": "memory_first"}]
        gw = Gateway(edge_yaml(mc.grpc_url, maps, wal="fsync: always, memory_first: {spill_after_ms: 30000}")).start()
        self.addCleanup(gw.__exit__)
        port, hport = gw.mqtt_port(), gw.http_port()
        gw.wait_log("bootstrap complete")
        publish_all(port, [("m/d", json.dumps({"n": -1}))], client_id="warm")
        wait_until(lambda: len(mc.store_records("/edge1/m")) == 1, WAIT, "warm-up stored")
        status, body = ask(hport, "POST", "/admin/topics/edge1/m/pause")
        self.assertEqual(status, 200, body)
        t0 = time.monotonic()
        publish_all(port, [("m/d", json.dumps({"n": i})) for i in range(50)], client_id="held", timeout=25)
        self.assertLess(time.monotonic() - t0, 20, "answered by the spill, not spill_after_ms (30 s)")
        self.assertEqual(len(mc.store_records("/edge1/m")), 1, "nothing sent while paused")
        wait_until(lambda: topic_stats(hport, "/edge1/m")["spills"]["output"] >= 1, WAIT, "spills.output counted")
        status, body = ask(hport, "POST", "/admin/topics/edge1/m/resume")
        self.assertEqual(status, 200, body)
        wait_until(lambda: len(mc.store_records("/edge1/m")) == 51, WAIT, "replicated after resume")
        check_topic(mc.store_records("/edge1/m"), 51)
        self.assertEqual(gw.stop(), 0, gw.log())


class Drain(Case):
    def test_drain_under_load_answers_once_the_cluster_has_everything(self):
        self.start()
        self.mc.control.fault(ack_delay_ms=200)  # a backlog stays in flight while the drain begins
        idle = m.Raw(self.port)
        idle.send(m.connect("idle5", version=5))
        self.assertEqual(idle.expect(m.CONNACK).reason(), 0)
        self.addCleanup(idle.sock.close)
        pub = Publisher(self.port, lambda n: "a/d" if n % 3 else "b/d", rate=400, client_id="drain-load").start()
        wait_until(lambda: len(pub.acked()) >= 400, WAIT, "load acknowledged")

        result = {}
        cli = threading.Thread(target=lambda: result.update(r=self.cli("drain", "--timeout", "60s")))
        cli.start()
        # from the first step: not ready, not accepting, the open connection told 0x8B
        wait_until(lambda: ask(self.hport, "GET", "/readyz")[0] == 503, WAIT, "readyz 503")
        self.assertIn("draining", ask(self.hport, "GET", "/readyz")[1])
        d = idle.expect(m.DISCONNECT, timeout=WAIT)
        self.assertEqual(d.reason(), 0x8B, "server shutting down")
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        cli.join(WAIT + 40)
        self.assertFalse(cli.is_alive())
        r = result["r"]
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        answer = json.loads(r.stdout)
        self.assertEqual(answer["state"], "drained")
        self.assertEqual((answer["remaining_messages"], answer["remaining_topics"]), (0, []))
        # at the answer the cluster had every acknowledged message (stored before it is acked)
        acked = pub.acked()
        sent = pub.sent
        pub._stop.set()
        pub.thread.join(10)
        a, b = self.mc.store_records("/edge1/a"), self.mc.store_records("/edge1/b")
        got = payload_numbers(a[1:]) | payload_numbers(b[1:])
        self.assertFalse(acked - got, f"{len(acked - got)} acknowledged messages not at the cluster")
        self.assertLess(len(acked), sent + 1)
        self.assertGreater(len(acked), 400)
        status, body = ask(self.hport, "GET", "/admin/drain")
        self.assertEqual((status, json.loads(body)["state"]), (200, "drained"))
        r = self.cli("drain", "--status")
        self.assertEqual((r.returncode, json.loads(r.stdout)["state"]), (0, "drained"), r.stderr)
        self.assertIn('msg="drain: drained', self.gw.log())
        pub.c.loop_stop()
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_drain_times_out_while_the_cluster_is_silent_names_what_is_left_and_cancel_accepts_again(self):
        self.start(mqtt_port=free_port())  # a fixed port: cancel listens on it again
        status, body = ask(self.hport, "GET", "/admin/drain")
        self.assertEqual((status, json.loads(body)["state"]), (200, "running"))
        self.assertEqual(ask(self.hport, "GET", "/readyz")[0], 200)
        self.mc.control.fault(mode="silent")
        publish_all(self.port, [("a/d", json.dumps({"n": i})) for i in range(50)], client_id="left")
        r = self.cli("drain", "--no-wait")
        self.assertEqual((r.returncode, json.loads(r.stdout)["state"]), (0, "draining"), r.stderr)
        r = self.cli("drain", "--timeout", "3s")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not drained within 3000 ms", r.stderr)
        answer = json.loads(r.stdout)
        self.assertEqual(answer["state"], "draining")
        self.assertEqual(answer["remaining_topics"], ["/edge1/a"])
        self.assertEqual(answer["remaining_messages"], 50)
        # a paused topic is not waited for: it is named apart
        status, body = ask(self.hport, "POST", "/admin/topics/edge1/a/pause")
        self.assertEqual(status, 200, body)
        status, body = ask(self.hport, "POST", "/admin/drain?wait_ms=5000")
        d = json.loads(body)
        self.assertEqual((d["state"], d["paused_not_drained"], d["remaining_topics"]), ("drained", ["/edge1/a"], []))
        self.assertEqual(self.cli("drain", "--status").returncode, 0)
        # cancel: the listener opens again on its port, readiness returns, publishes are taken
        r = self.cli("drain", "--cancel")
        self.assertEqual((r.returncode, json.loads(r.stdout)["state"]), (0, "running"), r.stderr)
        wait_until(lambda: ask(self.hport, "GET", "/readyz")[0] == 200, WAIT, "ready again")
        c = m.Raw(self.port)
        c.send(m.connect("after-cancel", version=5))
        self.assertEqual(c.expect(m.CONNACK).reason(), 0)
        c.send(m.publish("b/d", b'{"n": 7}', qos=1, pid=1, version=5))
        self.assertEqual(c.expect(m.PUBACK).reason(), 0)
        c.close()
        self.assertIn('msg="drain cancelled: accepting again"', self.gw.log())
        r = self.cli("drain", "--cancel")
        self.assertEqual((r.returncode, json.loads(r.stdout)["state"]), (0, "running"), "idempotent")
        self.mc.control.fault(mode="normal")
        self.assertEqual(self.gw.stop(timeout=30), 0, self.gw.log())


if __name__ == "__main__":
    unittest.main()
