#!/usr/bin/python3
"""test_reload_outputs.py: a reload changes the outputs while the gateway
runs (issue 17 "Hot reload", docs/design/OUTPUTS.md 3.5).

ReloadOutputRates: the rate caps, outputs[NAME].max_messages_per_s, applied
in the middle of a backlog's drain with no restart of the output, no drop
and no resend.

Each case: one output capped at 100 msg/s, a backlog of 6,000 messages
published at once; once 1,200 have arrived the file says 300 and a reload
(POST /admin/reload) applies it; once 4,500 have arrived the cap is lifted
(0) and the rest drains at full speed. Judged on what the far side
recorded with its arrival times:

  * 100 msg/s over the 10 s window before the change, 300 msg/s over the
    10 s window after it (from 0.5 s after the reload answered), each
    within the issue's 5%;
  * lifted: the remaining backlog goes in well under what 300 msg/s would
    take (at least 2x faster);
  * every message once (duplicates none: the output never restarted), in
    order; the reload's answer lists the key as applied, nothing as
    needing a restart; /stats shows each cap as it changes.

Danube (the mock cluster: its pace timer, rep__topic_rates_changed) and
the MQTT output against a real Mosquitto 2 (the shared lanes, which the
sparkplug kind also uses).

ReloadOutputSet: three real Mosquittos (A, B, C), a publisher at 400 msg/s
for the whole run, and four reloads while it publishes: an output `backup`
to B added; `central`'s broker moved from A to C (a replace); `backup`
removed; `backup` added again. Judged on what each remote recorded and on
the publisher's PUBACKs:

  * central: every acknowledged message at A or C, once each but for the
    replace's resend window (at most max_inflight, marked
    tributary.replayed), each remote's copy in order;
  * backup: every message from its first one on, with no gap although it
    was removed for a while (re-adding resumes from its parked
    checkpoint), in order; its connection to B untouched by central's
    replace (one session until it was removed);
  * the answers: applied keys named, nothing needing a restart; a kind
    changed under a name, and a password file that cannot be read, are
    refused whole while the outputs go on.

And a replace under durability memory_first with the old remote frozen
(SIGSTOP, PUBLISHes in flight): the held messages spill (no output
confirms), every PUBACK comes, every acknowledged message is at A or C.

Waits poll a condition under a deadline.
"""
import json
import os
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib import reloads  # noqa: E402
from tlib.mock import MockCluster  # noqa: E402
from tlib.mosq import Mosquitto, Recorder  # noqa: E402
from tlib.replication import Publisher, check_topic, edge_yaml  # noqa: E402

TOTAL = 6000
FIRST, SECOND = 100, 300          # msg/s
AT_CHANGE, AT_LIFT = 1200, 4500   # arrivals at which the file changes
TOPIC = "/edge1/t"
MAPPINGS = [{"mqtt_pattern": "t/+", "danube_topic": TOPIC}]
REP = {"retry_initial_ms": 50, "retry_max_ms": 500, "batch_size": 20}


def ask(port, method, path):
    """The JSON answer, of a refusal (422) too."""
    return json.loads(reloads.ask(port, method, path)[1])


def output(port, name):
    return next(o for o in ask(port, "GET", "/stats")["outputs"] if o["output"] == name)


def in_window(times, a, b):
    return sum(1 for t in times if a <= t < b)


class ReloadOutputRates(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-reload-out-")

    def run_case(self, name, yaml_of, arrivals, times_of):
        """yaml_of(cap) -> the file; arrivals() -> how many distinct messages the far side has;
        times_of() -> their first arrival times (s, one clock), in arrival order."""
        gw = Gateway(yaml_of(FIRST), workdir=self.dir)
        gw.start()
        self.addCleanup(gw.__exit__)
        hp = gw.http_port()
        self.assertEqual(output(hp, name)["max_messages_per_s"], FIRST)
        pub = Publisher(gw.mqtt_port(), lambda n: f"t/d{n % 2}", rate=3000).start()
        wait_for(lambda: pub.sent >= TOTAL, 60, what=f"{TOTAL} messages published")
        pub.stop()
        self.total = len(pub.acked())  # the publisher's last tick may send a few more
        self.assertEqual(pub.acked(), set(range(self.total)), "every message PUBACKed by the gateway")

        wait_for(lambda: arrivals() >= AT_CHANGE, AT_CHANGE / FIRST * 2 + 30, what=f"{AT_CHANGE} arrived")
        gw.write_config(yaml_of(SECOND))
        ans = ask(hp, "POST", "/admin/reload")
        t_change = self.now()
        key = f"outputs[{name}].max_messages_per_s"
        self.assertEqual((ans["result"], ans["applied"], ans["restart_needed"]), ("applied", [key], []), ans)
        self.assertEqual(output(hp, name)["max_messages_per_s"], SECOND, "/stats shows the cap in force")

        wait_for(lambda: arrivals() >= AT_LIFT, (AT_LIFT - AT_CHANGE) / SECOND * 2 + 30, what=f"{AT_LIFT} arrived")
        gw.write_config(yaml_of(0))
        ans = ask(hp, "POST", "/admin/reload")
        t_lift = self.now()
        self.assertEqual((ans["applied"], ans["restart_needed"]), ([key], []), ans)
        self.assertEqual(output(hp, name)["max_messages_per_s"], 0)
        wait_for(lambda: arrivals() >= self.total, 60, what="the whole backlog")

        times = times_of()
        before = in_window(times, t_change - 10.0, t_change)
        after = in_window(times, t_change + 0.5, t_change + 10.5)
        rest = [t for t in times if t >= t_lift]
        lifted_s = (rest[-1] - t_lift) if rest else 0.0
        print(f"\n{name}: cap {FIRST} msg/s: {before} in the 10 s before the reload; cap {SECOND}: {after} in "
              f"the 10 s after it; lifted: the last {len(rest)} in {lifted_s:.2f} s "
              f"({len(rest) / SECOND:.1f} s at {SECOND} msg/s)", file=sys.stderr)
        self.assertGreaterEqual(before, FIRST * 10 * 0.95, f"{before} in 10 s at a cap of {FIRST}")
        self.assertLessEqual(before, FIRST * 10 * 1.05, f"{before} in 10 s at a cap of {FIRST}")
        self.assertGreaterEqual(after, SECOND * 10 * 0.95, f"{after} in 10 s at a cap of {SECOND}")
        self.assertLessEqual(after, SECOND * 10 * 1.05, f"{after} in 10 s at a cap of {SECOND}")
        self.assertGreater(len(rest), 500, "a backlog was left for the lifted cap")
        self.assertLess(lifted_s, len(rest) / SECOND / 2, "lifted: the rest at least 2x faster than the cap")
        self.assertIn("rate caps applied", gw.log())
        self.assertEqual(gw.stop(timeout=30), 0, gw.log()[-4000:])
        self.assertNotIn("Sanitizer", gw.log())

    def now(self):
        return self.clock()

    def test_danube_caps_changed_mid_drain(self):
        mc = MockCluster().start()
        self.addCleanup(mc.cleanup)
        self.clock = lambda: time.time()

        def yaml_of(cap):
            return edge_yaml(mc.grpc_url, MAPPINGS, replicator=REP, wal="fsync: interval, fsync_interval_ms: 20",
                             extra=f"outputs:\n  - {{name: danube, kind: danube, max_messages_per_s: {cap}}}\n")

        def firsts():
            seen = {}
            for r in mc.store_records(TOPIC):
                seen.setdefault(r["offset"], r["received_at"] / 1000.0)
            return seen

        self.run_case("danube", yaml_of, lambda: len(firsts()), lambda: sorted(firsts().values()))
        check_topic(mc.store_records(TOPIC), self.total, max_dups=0)

    def test_mqtt_caps_changed_mid_drain(self):
        remote = Mosquitto(self.dir).start()
        self.addCleanup(remote.stop)
        rec = Recorder(remote.port, "fwd/#")
        self.addCleanup(rec.close)
        self.clock = time.monotonic

        def yaml_of(cap):
            out = (f"outputs:\n  - name: central\n    kind: mqtt\n    broker: \"127.0.0.1:{remote.port}\"\n"
                   f"    protocol: 5\n    qos: 1\n    remote_topic: \"fwd/${{topic}}\"\n    max_inflight: 100\n"
                   f"    max_messages_per_s: {cap}\n")
            return edge_yaml("http://127.0.0.1:1", MAPPINGS, replicator=REP,
                             wal="fsync: interval, fsync_interval_ms: 20", extra=out)

        def firsts():
            seen = {}
            for t, _, payload in rec.timed():
                seen.setdefault(json.loads(payload)["n"], t)
            return seen

        self.run_case("central", yaml_of, lambda: len(firsts()), lambda: sorted(firsts().values()))
        got = [json.loads(p)["n"] for _, p, _ in rec.snapshot()]
        self.assertEqual(len(got), self.total, "once each: no resend (the output never restarted)")
        for d in (0, 1):
            mine = [n for n in got if n % 2 == d]
            self.assertEqual(mine, sorted(mine), f"t/d{d}: in order")


def mqtt_output(name, port, extra=""):
    return (f"  - name: {name}\n    kind: mqtt\n    broker: \"127.0.0.1:{port}\"\n    protocol: 5\n    qos: 1\n"
            f"    client_id: \"edge1-{name}\"\n    remote_topic: \"{name}/${{topic}}\"\n    max_inflight: 50\n{extra}")


class ReloadOutputSet(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-reload-set-")

    def remote(self, name):
        m = Mosquitto(os.path.join(self.dir, name)).start()
        self.addCleanup(m.stop)
        r = Recorder(m.port, "#", client_id=f"rec-{name}")
        self.addCleanup(r.close)
        return m, r

    def test_outputs_added_replaced_removed_and_readded_while_publishing(self):
        (ma, ra), (mb, rb), (mc, rc) = self.remote("a"), self.remote("b"), self.remote("c")

        def yaml_of(outputs):
            return edge_yaml("http://127.0.0.1:1", MAPPINGS, replicator=REP,
                             wal="fsync: interval, fsync_interval_ms: 20", extra="outputs:\n" + outputs)

        def ns(rec):
            return [json.loads(p)["n"] for _, p, _ in rec.snapshot()]

        os.makedirs(os.path.join(self.dir, "gw"))
        gw = Gateway(yaml_of(mqtt_output("central", ma.port)), workdir=os.path.join(self.dir, "gw"))
        gw.start()
        self.addCleanup(gw.__exit__)
        hp = gw.http_port()

        def reload(outputs):
            gw.write_config(yaml_of(outputs))
            return ask(hp, "POST", "/admin/reload")

        pub = Publisher(gw.mqtt_port(), lambda n: f"t/d{n % 2}", rate=400).start()
        self.addCleanup(pub.stop)
        wait_for(lambda: len(ns(ra)) >= 400, 30, what="central's first messages at A")

        # 1. backup added: it carries from now on
        ans = reload(mqtt_output("central", ma.port) + mqtt_output("backup", mb.port))
        self.assertEqual((ans["result"], ans["applied"], ans["restart_needed"]),
                         ("applied", ["outputs[backup]"], []), ans)
        wait_for(lambda: len(ns(rb)) >= 400, 30, what="backup's messages at B")
        self.assertEqual(output(hp, "backup")["state"], "up")

        # a kind changed under a name, a password file that cannot be read: refused whole
        bad = (f"  - {{name: central, kind: sparkplug, broker: \"127.0.0.1:{ma.port}\", group_id: g}}\n" +
               mqtt_output("backup", mb.port))
        ans = reload(bad)
        self.assertEqual((ans["result"], ans["error"]["key"]), ("refused", "outputs[central].kind"), ans)
        self.assertIn("rename the output", ans["error"]["message"])
        ans = reload(mqtt_output("central", ma.port) +
                     mqtt_output("backup", mb.port, "    username: u\n    password_file: /nonexistent/pw\n"))
        self.assertEqual((ans["result"], ans["error"]["key"]), ("refused", "outputs[1].password_file"), ans)
        self.assertIn("/nonexistent/pw", ans["error"]["message"])
        self.assertEqual(output(hp, "backup")["state"], "up", "a refused reload changes nothing")

        # 2. central moved from A to C: a replace; backup's connection is not touched
        at_a = len(ns(ra))
        sessions_b = output(hp, "backup")["sessions"]
        ans = reload(mqtt_output("central", mc.port) + mqtt_output("backup", mb.port))
        self.assertEqual((ans["applied"], ans["restart_needed"]), (["outputs[central].broker"], []), ans)
        wait_for(lambda: len(ns(rc)) >= 400, 30, what="central's messages at C")
        self.assertEqual(output(hp, "backup")["sessions"], sessions_b, "backup kept its session through the replace")
        self.assertGreaterEqual(len(ns(ra)), at_a)

        # 3. backup removed, 4. added again: it resumes where it stopped
        ans = reload(mqtt_output("central", mc.port))
        self.assertEqual((ans["applied"], ans["restart_needed"]), (["outputs[backup]"], []), ans)
        wait_for(lambda: output(hp, "backup")["state"] == "removed", 30, what="backup removed")
        at_b = len(ns(rb))
        wait_for(lambda: len(ns(rc)) >= 800, 30, what="more at C while backup is away")
        self.assertEqual(len(ns(rb)), at_b, "a removed output sends nothing")
        ans = reload(mqtt_output("central", mc.port) + mqtt_output("backup", mb.port))
        self.assertEqual((ans["applied"], ans["restart_needed"]), (["outputs[backup]"], []), ans)
        wait_for(lambda: output(hp, "backup")["state"] == "up", 30, what="backup again")

        pub.stop()
        acked = pub.acked()
        total = max(acked) + 1
        self.assertEqual(acked, set(range(total)), "every message PUBACKed by the gateway")
        wait_for(lambda: set(ns(ra)) | set(ns(rc)) >= acked, 60, what="every message at A or C")
        first_b = min(ns(rb))
        wait_for(lambda: set(ns(rb)) >= set(range(first_b, total)), 60, what="every message at B from its first")

        a, c, b = ns(ra), ns(rc), ns(rb)
        for name, got in (("A", a), ("C", c), ("B", b)):
            firsts = []
            seen = set()
            for n in got:
                if n not in seen:
                    seen.add(n)
                    firsts.append(n)
            self.assertEqual(firsts, sorted(firsts), f"{name}: in order")
        both = set(a) & set(c)
        self.assertLessEqual(len(both), 50, f"the replace resent at most its window: {len(both)}")
        dup_b = len(b) - len(set(b))
        self.assertLessEqual(dup_b, 50, f"backup's removal resent at most its window: {dup_b}")
        topic = next(t for t in ask(hp, "GET", "/stats")["topics"] if t["topic"] == TOPIC)
        self.assertEqual(topic["dropped"], 0, topic)
        print(f"\nreload of outputs under {pub.rate} msg/s: {total} messages; central A {len(set(a))} + C "
              f"{len(set(c))} (both {len(both)}); backup {len(set(b))} from n={first_b}, {dup_b} sent twice",
              file=sys.stderr)
        log = gw.log()
        for words in ("output added at run time", "removed output stopped", "output changed, the others untouched"):
            self.assertIn(words, log)
        self.assertEqual(gw.stop(timeout=30), 0, log[-4000:])
        self.assertNotIn("Sanitizer", gw.log())


    def test_a_replace_under_memory_first_spills_and_loses_nothing(self):
        """memory_first (issue 16) with the output being replaced while its remote A is frozen
        (SIGSTOP: the old instance cannot drain and waits its shutdown grace): no output confirms,
        so the held messages spill to the log within spill_after_ms and the publishers get their
        PUBACKs; the new instance sends them from the log to C. Every acknowledged message is at A
        or C, none dropped."""
        (ma, ra), (mc, rc) = self.remote("a"), self.remote("c")
        mappings = [dict(MAPPINGS[0], durability="memory_first")]

        def yaml_of(port):
            return edge_yaml("http://127.0.0.1:1", mappings, replicator=REP,
                             wal="fsync: interval, fsync_interval_ms: 20",
                             extra="outputs:\n" + mqtt_output("central", port))

        def ns(rec):
            return {json.loads(p)["n"] for _, p, _ in rec.snapshot()}

        os.makedirs(os.path.join(self.dir, "gw"))
        gw = Gateway(yaml_of(ma.port), workdir=os.path.join(self.dir, "gw"))
        gw.start()
        self.addCleanup(gw.__exit__)
        hp = gw.http_port()
        pub = Publisher(gw.mqtt_port(), lambda n: f"t/d{n % 2}", rate=400).start()
        self.addCleanup(pub.stop)
        wait_for(lambda: len(ns(ra)) >= 400, 30, what="messages at A")
        ma.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: ma.proc.send_signal(signal.SIGCONT))
        wait_for(lambda: output(hp, "central")["inflight"] > 0, 10, what="PUBLISHes A does not acknowledge")
        gw.write_config(yaml_of(mc.port))
        ans = ask(hp, "POST", "/admin/reload")
        self.assertEqual((ans["applied"], ans["restart_needed"]), (["outputs[central].broker"], []), ans)
        wait_for(lambda: len(ns(rc)) >= 800, 30, what="messages at C")
        ma.proc.send_signal(signal.SIGCONT)
        pub.stop()
        acked = pub.acked()
        self.assertEqual(acked, set(range(max(acked) + 1)), "every message PUBACKed")
        wait_for(lambda: ns(ra) | ns(rc) >= acked, 60, what="every acknowledged message at A or C")
        topic = next(t for t in ask(hp, "GET", "/stats")["topics"] if t["topic"] == TOPIC)
        self.assertEqual(topic["dropped"], 0, topic)
        self.assertGreater(sum(topic["spills"].values()), 0,
                           "held messages spilled while no output confirmed: " + json.dumps(topic) + gw.log()[-3000:])
        print(f"\nreplace under memory_first: {len(acked)} acknowledged, A {len(ns(ra))} C {len(ns(rc))}, "
              f"spills {topic['spills']}", file=sys.stderr)
        self.assertEqual(gw.stop(timeout=30), 0, gw.log()[-4000:])

if __name__ == "__main__":
    unittest.main()
