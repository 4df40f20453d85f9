"""test_enospc.py: the real gateway on a file system that fills up, and on
one that another program fills past the log's free-space floor.

The test mounts a 1 MiB tmpfs (root only: where mounting is not allowed it
exits 77, which ctest reports as skipped), puts wal.dir on it, fills most of
it with a ballast file, and publishes QoS 1 until the disk is full. Then it
deletes the ballast and checks that the gateway recovers by itself. What it
proves (docs/WAL.md, "Disk full, with the real gateway"):

  - MQTT 5: what could not be stored gets PUBACK 0x97 (quota exceeded);
  - MQTT 3.1.1, which has no negative PUBACK: the connection is closed;
  - nothing refused is in the log, everything acknowledged is;
  - /readyz answers 503 "write-ahead log not writable" and /stats shows
    the topic "failed" while the disk is full;
  - once space returns, with no restart and no publish to prod it, the
    gateway is ready again within a few retry periods (wal retry_ms, 1 s),
    and new publishes are acknowledged and stored after the old ones with
    contiguous offsets;
  - a gateway that boots on a full disk with a topic it never stored still
    starts (not ready, 0x97) and takes that topic's messages once space
    returns; one restarted on a disk that filled while it was down is not
    ready from the start, before any message finds out.

The free-space floor (wal.min_free_bytes, docs/WAL.md "Free space"): the
first scenarios turn it off (min_free_bytes: 0) to reach ENOSPC itself;
the last ones set 1 MiB on a 4 MiB tmpfs:

  - below the floor the log behaves as full, not failed: MQTT 5 gets 0x97,
    3.1.1 is closed, /readyz stays 200 and the topic is not "failed";
    /stats and /metrics show the free bytes and the floor; once the other
    program's file goes, writes are taken again with no restart and no
    retry (the writer reads the free space every second);
  - with drop_oldest (the default) and room to make, the oldest segments
    are deleted to stay above the floor: every message acknowledged, the
    deleted ones counted as dropped, the file system never far below it;
  - with on_full: drop_newest the same room is filled and then new
    messages are refused (0x97, counted full), nothing stored deleted, and
    taken again once the other program's file goes.

Each scenario runs once (setUpClass); each test asserts one claim over it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wal_dump, wait_for  # noqa: E402
from tlib import mqttraw as m  # noqa: E402

SANITIZED = os.environ.get("TRIB_SANITIZE", "").lower() in ("1", "on", "true")
SLOW = 4.0 if SANITIZED else 1.0
FS_BYTES = 1 << 20
HEADROOM = 160 << 10       # what the ballast leaves for the log
PAYLOAD = 1000

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {batch_timeout_ms: 5}
  topic_mappings:
    - {mqtt_pattern: "full/+", danube_topic: /e1/full}
wal: {dir: %(wal)s, fsync: always, segment_bytes: 64KiB, min_free_bytes: 0}
http: {listener: "127.0.0.1:0"}
"""

FLOOR_FS_BYTES = 4 << 20
FLOOR = 1 << 20
SEGMENT = 64 << 10
FLOOR_CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {batch_timeout_ms: 5}
  topic_mappings:
    - {mqtt_pattern: "full/+", danube_topic: /e1/full%(mapping_extra)s}
wal: {dir: %(wal)s, fsync: always, segment_bytes: 64KiB, min_free_bytes: 1MiB}
http: {listener: "127.0.0.1:0"}
"""


def mount_tmpfs(size=FS_BYTES):
    """A fresh tmpfs (1 MiB), or exit 77 (skipped) where mounting is forbidden."""
    d = tempfile.mkdtemp(prefix="trib-enospc-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        sys.stderr.write(f"SKIP: cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); "
                         "the ENOSPC test needs root or CAP_SYS_ADMIN\n")
        sys.exit(77)
    return d


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def topic_stats(port):
    st = json.loads(http_get(port, "/stats")[1])
    return {t["topic"]: t for t in st["topics"]}["/e1/full"]


def topic_state(port):
    return topic_stats(port)["state"]


def wal_limits(port):
    return json.loads(http_get(port, "/stats")[1])["wal_limits"]


def metric(port, name):
    for line in http_get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def fs_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill_to(mnt, free):
    """A ballast file leaving `free` bytes free on mnt (another program's data)."""
    path = os.path.join(mnt, "ballast")
    with open(path, "ab") as f:
        f.write(b"\0" * max(0, fs_free(mnt) - free))
    return path


class Publisher:
    """A raw client that publishes QoS 1 one message at a time and records the answer."""

    def __init__(self, port, name, version):
        self.name, self.version, self.seq = name, version, 0
        self.c = m.Raw(port, timeout=10 * SLOW)
        self.c.send(m.connect(name, version=version))
        assert self.c.expect(m.CONNACK).reason() == 0

    def publish(self):
        """Returns (payload, reason) with reason None when the server closed the connection."""
        self.seq += 1
        payload = f"{self.name}:{self.seq:06d}:" + "p" * PAYLOAD
        self.c.send(m.publish("full/" + self.name, payload, qos=1, pid=self.seq % 65535 + 1, version=self.version))
        p = self.c.read()
        if p is None:
            return payload, None
        assert p.type == m.PUBACK and p.packet_id == self.seq % 65535 + 1, p
        return payload, p.reason(self.version)


class DiskFull(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mnt = mount_tmpfs()
        try:
            cls.scenario()
        finally:
            if cls.gw.proc and cls.gw.proc.poll() is None:
                cls.gw.kill()
            subprocess.run(["umount", cls.mnt], check=False)
            os.rmdir(cls.mnt)

    @classmethod
    def scenario(cls):
        wal = os.path.join(cls.mnt, "wal")
        cls.gw = Gateway(CONFIG % {"wal": wal}).start()
        mport, hport = cls.gw.mqtt_port(), cls.gw.http_port()
        wait_for(lambda: http_get(hport, "/readyz")[0] == 200, 10 * SLOW, what="ready at start")
        ballast = os.path.join(cls.mnt, "ballast")
        st = os.statvfs(cls.mnt)
        with open(ballast, "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize - HEADROOM))

        cls.acked, cls.refused = [], []           # payloads
        v5 = Publisher(mport, "v5", 5)
        cls.fill_reasons = []
        for _ in range(4 * HEADROOM // PAYLOAD):  # far more than fits
            payload, reason = v5.publish()
            cls.fill_reasons.append(reason)
            (cls.acked if reason == 0 else cls.refused).append(payload)
            if len(cls.refused) >= 5:
                break
        cls.readyz_full = http_get(hport, "/readyz")
        cls.state_full = wait_for(lambda: topic_state(hport) == "failed" and "failed", 5 * SLOW,
                                  what="/stats (rendered at most every 250 ms) to show the failure")
        v311 = Publisher(mport, "v311", 4)
        payload, cls.v311_full_reason = v311.publish()
        cls.v311_full_after = v311.c.closed()      # packets, if any, before the close
        cls.refused.append(payload)
        cls.rejected_full = wait_for(lambda: (lambda r: r if sum(r.values()) >= len(cls.refused) else None)(
            topic_stats(hport)["rejected"]), 5 * SLOW, what="/stats to count the refusals")
        # refusals ask the log to retry; once one retry has run and failed, still not ready
        cls.gw.wait_log("wal: retry failed, topic still refusing messages", 10 * SLOW)
        cls.readyz_after_retry = http_get(hport, "/readyz")

        os.unlink(ballast)                          # space returns; nobody publishes
        t0 = time.monotonic()
        wait_for(lambda: http_get(hport, "/readyz")[0] == 200, 10 * SLOW, what="ready after space returned")
        cls.recovery_seconds = time.monotonic() - t0
        cls.state_after = wait_for(lambda: topic_state(hport) != "failed" and topic_state(hport), 5 * SLOW,
                                   what="/stats to show the topic writable")
        cls.after_reasons = []
        for pub in (v5, Publisher(mport, "v311-again", 4)):
            for _ in range(3):
                payload, reason = pub.publish()
                cls.after_reasons.append(reason)
                (cls.acked if reason == 0 else cls.refused).append(payload)
            pub.c.close()
        v311.c.close()
        cls.exit_code = cls.gw.stop()
        sys.stderr.write(f"enospc: acked={len(cls.acked)} refused={len(cls.refused)} "
                         f"ready again {cls.recovery_seconds:.2f}s after the ballast was deleted\n")
        cls.log = cls.gw.log()
        cls.records = wal_dump(wal, "/e1/full")
        shutil.rmtree(wal, ignore_errors=True)

    def test_publishes_were_acknowledged_before_the_disk_filled(self):
        self.assertGreater(self.fill_reasons.index(0x97), 10, self.fill_reasons[:20])

    def test_mqtt5_gets_quota_exceeded_for_what_could_not_be_stored(self):
        first = self.fill_reasons.index(0x97)
        self.assertEqual(self.fill_reasons[first:], [0x97] * 5)

    def test_mqtt311_connection_is_closed_without_an_ack(self):
        self.assertIsNone(self.v311_full_reason)
        self.assertEqual(self.v311_full_after, [])

    def test_refusals_of_a_full_disk_are_counted_as_wal_unavailable_not_full(self):
        self.assertEqual(self.rejected_full["wal_unavailable"], len(self.refused), self.rejected_full)
        self.assertEqual(self.rejected_full["full"], 0)

    def test_readyz_says_the_log_is_not_writable_while_full(self):
        status, body = self.readyz_full
        self.assertEqual(status, 503)
        self.assertIn("not ready: write-ahead log not writable", body)

    def test_a_retry_while_still_full_does_not_make_it_ready(self):
        status, body = self.readyz_after_retry
        self.assertEqual(status, 503, body)

    def test_stats_shows_the_topic_failed_while_full(self):
        self.assertEqual(self.state_full, "failed")

    def test_the_log_recovers_by_itself_when_space_returns(self):
        self.assertNotEqual(self.state_after, "failed")

    def test_new_publishes_are_acknowledged_after_recovery(self):
        self.assertEqual(self.after_reasons, [0] * 6)

    def test_every_acknowledged_message_is_in_the_log(self):
        stored = [r["payload"] for r in self.records]
        self.assertEqual(stored, self.acked)

    def test_nothing_refused_is_in_the_log(self):
        stored = {r["payload"] for r in self.records}
        self.assertEqual([p[:20] for p in self.refused if p in stored], [])

    def test_offsets_stay_contiguous_across_the_failure(self):
        self.assertEqual([r["offset"] for r in self.records], list(range(1, len(self.records) + 1)))

    def test_the_failure_and_the_recovery_are_logged(self):
        self.assertIn("wal: write failed, batch not stored", self.log)
        self.assertIn("wal: topic writable again", self.log)

    def test_the_gateway_stops_cleanly_afterwards(self):
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


class FullDiskAtStart:
    """A gateway started on a full disk (a fresh tmpfs filled by a ballast
    file): what health and MQTT say while it is full, then the ballast is
    deleted and one more message must be taken. Subclasses may store
    something first (stored_before)."""

    @classmethod
    def stored_before(cls, wal):
        """Payloads stored before the disk fills."""
        os.mkdir(wal)
        return []

    @classmethod
    def setUpClass(cls):
        cls.mnt = mount_tmpfs()
        cls.gw = None
        try:
            wal = os.path.join(cls.mnt, "wal")
            before = cls.stored_before(wal)
            ballast = os.path.join(cls.mnt, "ballast")
            st = os.statvfs(cls.mnt)
            with open(ballast, "wb") as f:
                f.write(b"\0" * (st.f_bavail * st.f_frsize))
            cls.gw = Gateway(CONFIG % {"wal": wal}).start()
            mport, hport = cls.gw.mqtt_port(), cls.gw.http_port()
            cls.gw.wait_log("bootstrap complete", 10 * SLOW)
            cls.readyz_full = http_get(hport, "/readyz")
            cls.state_full = topic_state(hport)
            pub = Publisher(mport, "full", 5)
            cls.reason_full = pub.publish()[1]
            os.unlink(ballast)
            wait_for(lambda: http_get(hport, "/readyz")[0] == 200, 10 * SLOW, what="ready after space returned")
            after, cls.reason_after = pub.publish()
            pub.c.close()
            cls.exit_code = cls.gw.stop()
            cls.payloads = [r["payload"] for r in wal_dump(wal, "/e1/full")]
            cls.expected = before + [after]
        finally:
            if cls.gw and cls.gw.proc and cls.gw.proc.poll() is None:
                cls.gw.kill()
            subprocess.run(["umount", cls.mnt], check=False)
            os.rmdir(cls.mnt)


class BootOnFullDisk(FullDiskAtStart, unittest.TestCase):
    """A gateway that boots on a full disk with a topic it has never stored
    (first boot, or a new mapping) still starts: the topic is failed until
    space returns, then it is created and takes messages."""

    def test_it_starts_but_is_not_ready(self):
        # (the cluster line reports the replicator's view; no cluster runs in this test)
        status, body = self.readyz_full
        self.assertEqual(status, 503)
        self.assertRegex(body, r"^not ready: write-ahead log not writable\ncluster: (unreachable|connecting)\n$")

    def test_mqtt5_gets_quota_exceeded_while_full(self):
        self.assertEqual(self.reason_full, 0x97)

    def test_the_topic_takes_messages_once_space_returns(self):
        self.assertEqual(self.reason_after, 0)
        self.assertEqual(self.payloads, self.expected)

    def test_it_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0)


class RestartOnFullDisk(FullDiskAtStart, unittest.TestCase):
    """A gateway restarted on a disk that filled up while it was down, with
    a topic it already stored: not ready from the start (a probe write at
    open, since recovery itself writes nothing), 0x97 for new messages,
    then writable again once space returns, the old message kept."""

    @classmethod
    def stored_before(cls, wal):
        gw = Gateway(CONFIG % {"wal": wal}).start()
        try:
            pub = Publisher(gw.mqtt_port(), "before", 5)
            before, cls.reason_before = pub.publish()
            pub.c.close()
        finally:
            gw.stop()
        return [before]

    def test_it_is_not_ready_before_any_message_arrives(self):
        status, body = self.readyz_full
        self.assertEqual(status, 503)
        self.assertRegex(body, r"^not ready: write-ahead log not writable\n")

    def test_stats_shows_the_topic_failed_before_any_message_arrives(self):
        self.assertEqual(self.state_full, "failed")

    def test_mqtt5_gets_quota_exceeded_while_full(self):
        self.assertEqual((self.reason_before, self.reason_full), (0, 0x97))

    def test_the_old_message_is_kept_and_new_ones_taken_once_space_returns(self):
        self.assertEqual(self.reason_after, 0)
        self.assertEqual(self.payloads, self.expected)

    def test_it_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0)


class FloorScenario:
    """A gateway with wal.min_free_bytes 1 MiB on a 4 MiB tmpfs."""
    mapping_extra = ""

    @classmethod
    def setUpClass(cls):
        cls.mnt = mount_tmpfs(FLOOR_FS_BYTES)
        cls.gw = None
        try:
            cls.wal = os.path.join(cls.mnt, "wal")
            cls.gw = Gateway(FLOOR_CONFIG % {"wal": cls.wal, "mapping_extra": cls.mapping_extra}).start()
            cls.mport, cls.hport = cls.gw.mqtt_port(), cls.gw.http_port()
            wait_for(lambda: http_get(cls.hport, "/readyz")[0] == 200, 10 * SLOW, what="ready at start")
            cls.scenario()
            cls.exit_code = cls.gw.stop()
            cls.log = cls.gw.log()
            cls.records = wal_dump(cls.wal, "/e1/full")
        finally:
            if cls.gw and cls.gw.proc and cls.gw.proc.poll() is None:
                cls.gw.kill()
            subprocess.run(["umount", cls.mnt], check=False)
            os.rmdir(cls.mnt)


class BelowTheFloor(FloorScenario, unittest.TestCase):
    """Another program leaves less than the floor free: the log refuses,
    as at a full bound, and takes writes again once the space returns."""

    @classmethod
    def scenario(cls):
        cls.limits_at_start = wal_limits(cls.hport)
        ballast = fill_to(cls.mnt, FLOOR - (200 << 10))
        wait_for(lambda: wal_limits(cls.hport)["free_bytes"] < FLOOR, 5 * SLOW,
                 what="/stats to show the free space below the floor (a reading a second)")
        v5 = Publisher(cls.mport, "v5", 5)
        cls.refused = [v5.publish() for _ in range(3)]
        v311 = Publisher(cls.mport, "v311", 4)
        cls.v311_refused = v311.publish()
        cls.v311_after = v311.c.closed()
        v311.c.close()
        cls.readyz_below = http_get(cls.hport, "/readyz")
        cls.stats_below = wait_for(lambda: (lambda t: t if sum(t["rejected"].values()) >= 4 else None)(
            topic_stats(cls.hport)), 5 * SLOW, what="/stats to count the refusals")
        cls.limits_below = wal_limits(cls.hport)
        cls.metric_floor = metric(cls.hport, "tributary_wal_min_free_bytes")
        cls.metric_free = metric(cls.hport, "tributary_wal_free_bytes")
        os.unlink(ballast)  # space returns; nobody publishes, nothing is retried
        t0 = time.monotonic()
        wait_for(lambda: wal_limits(cls.hport)["free_bytes"] > FLOOR + (1 << 20), 5 * SLOW,
                 what="/stats to show the space back")
        cls.seen_back_seconds = time.monotonic() - t0
        cls.accepted = [v5.publish() for _ in range(3)]
        v5.c.close()
        sys.stderr.write(f"floor: space seen back {cls.seen_back_seconds:.2f}s after the ballast was deleted\n")

    def test_the_floor_and_the_free_space_are_in_stats_and_metrics(self):
        self.assertEqual(self.limits_at_start["min_free_bytes"], FLOOR)
        self.assertGreater(self.limits_at_start["free_bytes"], FLOOR)
        self.assertEqual(self.limits_below["min_free_bytes"], FLOOR)
        self.assertLess(self.limits_below["free_bytes"], FLOOR)
        self.assertEqual(self.metric_floor, FLOOR)
        self.assertLess(self.metric_free, FLOOR)

    def test_mqtt5_gets_quota_exceeded_below_the_floor(self):
        self.assertEqual([r for _, r in self.refused], [0x97] * 3)

    def test_mqtt311_is_closed_without_an_ack(self):
        self.assertIsNone(self.v311_refused[1])
        self.assertEqual(self.v311_after, [])

    def test_the_log_is_full_not_failed(self):
        status, body = self.readyz_below
        self.assertEqual(status, 200, body)
        self.assertNotEqual(self.stats_below["state"], "failed")
        self.assertEqual(self.stats_below["wal_write_errors"], 0)

    def test_every_refusal_is_counted_as_a_full_bound_not_a_failed_disk(self):
        self.assertEqual(self.stats_below["rejected"]["full"], 4, self.stats_below["rejected"])
        self.assertEqual(self.stats_below["rejected"]["wal_unavailable"], 0)

    def test_writes_are_taken_again_once_space_returns(self):
        self.assertEqual([r for _, r in self.accepted], [0] * 3)
        self.assertEqual([r["payload"] for r in self.records], [p for p, _ in self.accepted])

    def test_the_crossings_are_logged(self):
        self.assertIn("wal: free space below wal.min_free_bytes", self.log)
        self.assertIn("wal: free space above wal.min_free_bytes again", self.log)

    def test_the_gateway_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


class DropOldestAtTheFloor(FloorScenario, unittest.TestCase):
    """Room above the floor for a few segments, and far more published:
    drop_oldest deletes the oldest segments to stay above the floor, every
    message is acknowledged, and what went is counted as dropped."""

    @classmethod
    def scenario(cls):
        fill_to(cls.mnt, FLOOR + 5 * SEGMENT)
        wait_for(lambda: wal_limits(cls.hport)["free_bytes"] < FLOOR + 6 * SEGMENT, 5 * SLOW,
                 what="/stats to show the ballast")
        pub = Publisher(cls.mport, "dev", 5)
        cls.reasons, cls.payloads, cls.lowest_free = [], [], fs_free(cls.mnt)
        for _ in range(15 * SEGMENT // PAYLOAD):  # three times what fits above the floor
            payload, reason = pub.publish()
            cls.reasons.append(reason)
            cls.payloads.append(payload)
            cls.lowest_free = min(cls.lowest_free, fs_free(cls.mnt))
        pub.c.close()
        sys.stderr.write(f"floor: {len(cls.payloads)} published above a {FLOOR}-byte floor; the file system's "
                         f"lowest free {cls.lowest_free} ({cls.lowest_free - FLOOR:+d})\n")
        cls.stats = wait_for(lambda: (lambda t: t if t["received"] == len(cls.payloads) else None)(
            topic_stats(cls.hport)), 5 * SLOW, what="/stats to count every message")

    def test_every_message_is_acknowledged(self):
        self.assertEqual(set(self.reasons), {0})

    def test_the_oldest_segments_went_and_were_counted(self):
        self.assertGreater(self.stats["wal_dropped_total"], 0)
        self.assertEqual(self.stats["dropped"], self.stats["wal_dropped_total"])
        self.assertEqual(len(self.records) + self.stats["wal_dropped_total"], len(self.payloads))

    def test_the_log_keeps_the_newest_messages_in_order(self):
        n = len(self.records)
        self.assertEqual([r["payload"] for r in self.records], self.payloads[-n:])
        first = self.records[0]["offset"]
        self.assertEqual([r["offset"] for r in self.records], list(range(first, first + n)))

    def test_the_file_system_stays_near_the_floor(self):
        # the estimate follows the log's bytes exactly; tmpfs rounds each file to pages and a
        # meta file takes one, which the reading a second corrects: a few pages of slack
        self.assertGreater(self.lowest_free, FLOOR - 16 * 4096)

    def test_nothing_failed(self):
        self.assertEqual(self.stats["wal_write_errors"], 0)
        self.assertTrue(self.stats["invariant_ok"], self.stats)

    def test_the_gateway_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


class DropNewestAtTheFloor(FloorScenario, unittest.TestCase):
    """The same room above the floor for a drop_newest topic: it fills, then
    refuses, deleting nothing, and takes messages again when space returns."""
    mapping_extra = ", on_full: drop_newest"

    @classmethod
    def scenario(cls):
        ballast = fill_to(cls.mnt, FLOOR + 5 * SEGMENT)
        wait_for(lambda: wal_limits(cls.hport)["free_bytes"] < FLOOR + 6 * SEGMENT, 5 * SLOW,
                 what="/stats to show the ballast")
        pub = Publisher(cls.mport, "dev", 5)
        cls.acked, cls.reasons = [], []
        for _ in range(15 * SEGMENT // PAYLOAD):
            payload, reason = pub.publish()
            cls.reasons.append(reason)
            if reason == 0:
                cls.acked.append(payload)
            elif len(cls.reasons) - len(cls.acked) >= 3:
                break
        cls.lowest_free = fs_free(cls.mnt)
        cls.stats_full = wait_for(lambda: (lambda t: t if t["rejected"]["full"] >= 3 else None)(
            topic_stats(cls.hport)), 5 * SLOW, what="/stats to count the refusals")
        os.unlink(ballast)
        wait_for(lambda: wal_limits(cls.hport)["free_bytes"] > FLOOR + (1 << 20), 5 * SLOW,
                 what="/stats to show the space back")
        payload, cls.after_reason = pub.publish()
        cls.acked.append(payload)
        pub.c.close()

    def test_it_fills_the_room_above_the_floor_then_refuses(self):
        n = len(self.acked) - 1
        self.assertGreater(n * PAYLOAD, 3 * SEGMENT, "most of the five segments of room were used")
        self.assertEqual(self.reasons[n:], [0x97] * 3)

    def test_nothing_stored_is_deleted_and_every_refusal_is_counted_full(self):
        t = self.stats_full
        self.assertEqual((t["dropped"], t["wal_dropped_total"]), (0, 0))
        self.assertEqual((t["rejected"]["full"], t["rejected"]["wal_unavailable"]), (3, 0))
        self.assertNotEqual(t["state"], "failed")

    def test_the_file_system_stays_near_the_floor(self):
        self.assertGreater(self.lowest_free, FLOOR - 16 * 4096)

    def test_it_takes_messages_again_once_space_returns(self):
        self.assertEqual(self.after_reason, 0)
        self.assertEqual([r["payload"] for r in self.records], self.acked)

    def test_the_gateway_stops_cleanly(self):
        self.assertEqual(self.exit_code, 0, self.log[-3000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
