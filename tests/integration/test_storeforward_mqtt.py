#!/usr/bin/python3
"""test_storeforward_mqtt.py: the store-and-forward judge with OUTPUT=mqtt
(issue 17): the gateway's MQTT output to a real Mosquitto 2 through remote
outages and gateway SIGKILLs, judged by the same rules as the cluster runs
of test_storeforward.py (docs/GUARANTEES.md, "Store and forward to an MQTT
remote").

Two kinds of test, as there:
- The judge on hand-made recordings of the remote's subscriber
  (arrivals.jsonl, what tests/storeforward/recorder.py writes): it fails a
  run that lost an acknowledged reading, delivered one out of order, or
  has second copies neither the gateway marked (tributary.replayed) nor
  the remote redelivered (DUP) beyond what the devices resent; and passes a
  clean one with both kinds of allowed copy.
- Short scenarios (tests/storeforward/run.sh OUTPUT=mqtt): the remote
  stopped (SIGTERM, refusing connections) or frozen (SIGSTOP, silent) for
  4 s, the gateway SIGKILLed in the outage and in the replay: nothing
  acknowledged missing, nothing out of order.
The long version is bench/run.sh storeforward with SF_ONLY=mqtt (or
mqtt_silent), not part of the suite.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SF = os.path.normpath(os.path.join(HERE, "..", "storeforward"))
BUILD = os.environ.get("TRIB_BUILD_DIR", os.path.normpath(os.path.join(HERE, "..", "..", "build")))


def payload(dev, n):
    return f"d={dev:03d} n={n:010d} t={1000 + n * 10:013d} " + "." * 20


class FakeRecording:
    """A run directory as run.sh OUTPUT=mqtt leaves it, written by hand: two
    devices, readings 1..n each, arriving at the remote's subscriber in
    order. Each arrival is (device, n, dup, replayed)."""

    def __init__(self, n=5):
        self.dir = tempfile.mkdtemp(prefix="sf-judge-mqtt-")
        os.mkdir(os.path.join(self.dir, "devices"))
        self.n = n
        self.acked = {0: list(range(1, n + 1)), 1: list(range(1, n + 1))}
        self.arrivals = [(dev, k, False, False) for k in range(1, n + 1) for dev in (0, 1)]
        self.resends = 0  # what the devices say they resent (summary.json)

    def write(self):
        with open(os.path.join(self.dir, "devices", "summary.json"), "w") as f:
            json.dump({"start_epoch_ms": 1000, "rate": 100, "qos": 1, "devices": [
                {"device": d, "generated": self.n, "acked": len(self.acked[d]),
                 "resends": self.resends if d == 0 else 0} for d in (0, 1)]}, f)
        for d, ns in self.acked.items():
            with open(os.path.join(self.dir, "devices", f"acks-{d:03d}.log"), "w") as f:
                f.writelines(f"{k} 2000\n" for k in ns)
        with open(os.path.join(self.dir, "arrivals.jsonl"), "w") as f:
            for i, (dev, k, dup, replayed) in enumerate(self.arrivals):
                f.write(json.dumps({"topic": f"sfr/sf/t{dev}", "payload": payload(dev, k),
                                    "received_at": 5000 + i, "dup": dup, "replayed": replayed}) + "\n")
        with open(os.path.join(self.dir, "walcheck.jsonl"), "w") as f:
            for dev in (0, 1):
                f.write(json.dumps({"topic": f"/sf/t{dev}", "last_offset": self.n, "records": self.n,
                                    "dropped": 0, "lost": 0}) + "\n")
        with open(os.path.join(self.dir, "events.jsonl"), "w") as f:
            f.write(json.dumps({"at_ms": 0, "event": "scenario", "output": "mqtt", "bounded": 0,
                                "durability": "log"}) + "\n")
        return self

    def judge(self):
        r = subprocess.run(["/usr/bin/python3", os.path.join(SF, "judge.py"), "--dir", self.dir, "--json"],
                           capture_output=True, text=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)
        return r.returncode, json.loads(r.stdout)


class Judge(unittest.TestCase):
    def test_a_clean_recording_passes_with_the_allowed_second_copies_counted(self):
        run = FakeRecording()
        run.arrivals.insert(4, (0, 2, True, False))   # the remote's redelivery (DUP)
        run.arrivals.insert(7, (1, 3, False, True))   # the gateway's resend, marked
        rc, r = run.write().judge()
        self.assertEqual((rc, r["missing"], r["out_of_order"], r["received"]), (0, 0, 0, 10), r)
        self.assertEqual((r["duplicates"], r["duplicates_redelivered_by_remote"], r["duplicates_marked_replayed"],
                          r["duplicates_unmarked"]), (2, 1, 1, 0), r)
        self.assertIsNone(r["offset_order"], "an MQTT recording has no offsets to judge")

    def test_an_acknowledged_reading_never_received_fails(self):
        run = FakeRecording()
        run.arrivals.remove((1, 3, False, False))
        rc, r = run.write().judge()
        self.assertEqual((rc, r["missing"]), (1, 1), r)

    def test_a_reading_first_received_after_a_higher_one_of_its_device_fails(self):
        run = FakeRecording()
        i, j = run.arrivals.index((0, 2, False, False)), run.arrivals.index((0, 3, False, False))
        run.arrivals[i], run.arrivals[j] = run.arrivals[j], run.arrivals[i]
        rc, r = run.write().judge()
        self.assertEqual((rc, r["out_of_order"]), (1, 1), r)

    def test_unmarked_second_copies_beyond_the_devices_resends_fail(self):
        run = FakeRecording()
        run.arrivals.insert(4, (0, 2, False, False))
        run.arrivals.insert(6, (0, 3, False, False))
        run.resends = 1  # one of the two can be a device's resend after a lost PUBACK, not both
        rc, r = run.write().judge()
        self.assertEqual((rc, r["duplicates_unmarked"]), (1, 2), r)
        self.assertIn("neither marked", " ".join(r["failures"]))

    def test_unmarked_second_copies_within_the_devices_resends_pass(self):
        run = FakeRecording()
        run.arrivals.insert(4, (0, 2, False, False))
        run.resends = 1
        rc, r = run.write().judge()
        self.assertEqual((rc, r["duplicates_unmarked"]), (0, 1), r)


def scenario(out, **knobs):
    """Runs tests/storeforward/run.sh OUTPUT=mqtt with the knobs; returns (rc, report, output)."""
    args = ["bash", os.path.join(SF, "run.sh"), "--build", BUILD, "--out", out, "OUTPUT=mqtt"]
    args += [f"{k}={v}" for k, v in knobs.items()]
    p = subprocess.run(args, capture_output=True, text=True, timeout=240)
    path = os.path.join(out, "report.json")
    report = None
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    return p.returncode, report, p.stdout + p.stderr


@unittest.skipIf(os.environ.get("TRIB_MQTT_TLS", "") == "1",
                 "run.sh starts its own gateway, remote and devices, outside tlib: plain MQTT only")
class Scenarios(unittest.TestCase):
    # The backlog of a 4 s outage at 4 x 50 readings/s is 800 readings; the output's cap of
    # 400 msg/s makes its replay last about 4 s, so the replay kill lands in it (Mosquitto
    # takes the backlog far faster than that, and has no ack delay to set, unlike the mock).
    KNOBS = dict(DEVICES=4, RATE=50, OUTAGE_SECS=4, REPLAY_KILL_AFTER_MS=0, MQTT_MAX_MSGS_PER_S=400,
                 RETRY_MAX_MS=1000, FSYNC="always")

    def setUp(self):
        if not os.access(os.path.join(BUILD, "bench", "devices"), os.X_OK):
            self.fail(f"{BUILD}/bench/devices is not built")
        self.out = tempfile.mkdtemp(prefix="sf-mqtt-it-")

    def passed(self):
        """Called last by each test: a failed run keeps its directory (named in the output)."""
        shutil.rmtree(self.out, ignore_errors=True)

    def run_scenario(self, **knobs):
        rc, r, output = scenario(self.out, **dict(self.KNOBS, **knobs))
        sys.stderr.write("\n" + "\n".join(line for line in output.splitlines() if not line.startswith("[")) + "\n")
        self.assertIsNotNone(r, output)
        return rc, r, output

    def check(self, rc, r, out, kills):
        self.assertEqual((r["missing"], r["out_of_order"]), (0, 0), out)
        self.assertGreater(r["acknowledged"], 0, out)
        self.assertEqual(r["kills"], kills, out)
        self.assertGreater(r["kills_mid_replay_lag"][0], 0, "the replay kill landed after the drain:\n" + out)
        self.assertGreater(r["replay"]["backlog"], 0, "the outage left no backlog to replay:\n" + out)
        # every life of the gateway writes to one log; a killed one cannot fail the run's exit status,
        # so a sanitizer report (the ASan build) is looked for there
        with open(os.path.join(self.out, "gateway.log"), errors="replace") as f:
            self.assertNotRegex(f.read(), "ERROR: [A-Za-z]+Sanitizer", "a sanitizer report in gateway.log")
        self.assertEqual(rc, 0, out)

    def test_remote_stopped_and_kills_in_the_outage_and_replay_lose_nothing_and_keep_order(self):
        rc, r, out = self.run_scenario(OUTAGE="refused", KILLS_OUTAGE=2, KILLS_REPLAY=1)
        self.check(rc, r, out, kills=3)
        self.passed()

    def test_remote_silent_and_kills_in_the_outage_and_replay_lose_nothing_and_keep_order(self):
        rc, r, out = self.run_scenario(OUTAGE="silent", KILLS_OUTAGE=1, KILLS_REPLAY=1)
        self.check(rc, r, out, kills=2)
        self.passed()


if __name__ == "__main__":
    unittest.main(verbosity=2)
