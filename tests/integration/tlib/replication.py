"""tlib/replication.py: what the replication tests share.

    edge_yaml(mock_url, topics, **sections)   an edge.yaml for the real binary
    Publisher(port, topics, rate)             numbered QoS 1 messages from a
                                              paho client in the background
                                              (over TLS when the suite is),
                                              remembering which were PUBACKed
    publish_all(port, items)                  a burst, waiting for every PUBACK
    check_topic(records, ...)                 order, gaps and duplicates of what
                                              the mock cluster stored for a topic

Every wait has a deadline; nothing sleeps in place of a condition (the
Publisher paces its sends with a clock, which is its job, not a wait).
"""
import json
import threading
import time

import paho.mqtt.client as paho

from tlib import tls


def edge_yaml(cluster_url, mappings, edge="edge1", replicator=None, extra="", heartbeat_ms=500, token=None,
              wal="fsync: always", mqtt=None):
    """mappings: a list of dicts (mqtt_pattern, danube_topic, ...), written as YAML flow maps.
    mqtt: more keys of the mqtt block (a dict)."""
    rep = {"batch_timeout_ms": 10, "ack_timeout_ms": 1000, "retry_max_ms": 1000, "rpc_timeout_ms": 2000}
    rep.update(replicator or {})
    maps = "\n".join("    - " + json.dumps(m) for m in mappings)
    tok = f", token: {json.dumps(token)}" if token is not None else ""
    return f"""
edge: {{edge_name: {edge}, cluster_url: "{cluster_url}", heartbeat_interval_ms: {heartbeat_ms}{tok}}}
replicator: {json.dumps(rep)}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {{batch_timeout_ms: 5}}
{"".join(f"  {k}: {json.dumps(v)}" + chr(10) for k, v in (mqtt or {}).items())}  topic_mappings:
{maps}
wal: {{dir: ./wal, {wal}}}
http: {{listener: "127.0.0.1:0"}}
{extra}
"""


class Publisher:
    """Publishes message n = 0, 1, 2, ... at `rate` per second, QoS 1, to
    topic_of(n), payload {"n": n, "ts": <ms>}. acked() is the set of n
    the gateway PUBACKed. stop() stops sending and waits for the acks of
    what was sent (deadline). first: the first n (a later load of the same
    test numbered above an earlier one's)."""

    def __init__(self, port, topic_of, rate=300, client_id="rep-pub", inflight=200, first=0):
        self.topic_of = topic_of
        self.first = first
        self.rate = rate
        self.c = tls.paho(paho.Client(client_id=client_id, protocol=paho.MQTTv311))
        self.c.max_inflight_messages_set(inflight)
        self.c.max_queued_messages_set(0)
        # paho calls on_publish holding its own mutex, which publish() also takes:
        # self.lock is therefore never held while calling into paho
        self.lock = threading.Lock()
        self.mid_to_n = {}              # sent, not yet acked
        self._early = set()             # acked before publish() returned its mid
        self._acked = set()
        self.sent = 0
        self.c.on_publish = self._on_publish
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_publish(self, client, userdata, mid):
        with self.lock:
            n = self.mid_to_n.pop(mid, None)
            if n is not None:
                self._acked.add(n)
            else:
                self._early.add(mid)

    def _sent(self, mid, n):
        with self.lock:
            if mid in self._early:
                self._early.discard(mid)
                self._acked.add(n)
            else:
                self.mid_to_n[mid] = n

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) + 1
            while self.sent < due and not self._stop.is_set():
                n = self.first + self.sent
                payload = json.dumps({"n": n, "ts": int(time.time() * 1000)})
                info = self.c.publish(self.topic_of(n), payload, qos=1)
                self._sent(info.mid, n)
                self.sent += 1
            self._stop.wait(0.005)      # pacing tick of the load itself

    def start(self):
        self.thread.start()
        return self

    def stop(self, timeout=30):
        self._stop.set()
        if self.thread.ident is not None:
            self.thread.join(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.mid_to_n:
                    break
            time.sleep(0.01)            # polling the client's ack map until the deadline
        self.c.disconnect()
        self.c.loop_stop()
        with self.lock:
            missing = len(self.mid_to_n)
        assert missing == 0, f"{missing} PUBLISHes never acknowledged by the gateway"
        return self

    def acked(self):
        with self.lock:
            return set(self._acked)


def publish_all(port, items, client_id="rep-burst", inflight=500, timeout=60):
    """items: (topic, payload) pairs, QoS 1; returns once every one is PUBACKed."""
    p = Publisher(port, lambda n: items[n][0], client_id=client_id, inflight=inflight)
    for n, (topic, payload) in enumerate(items):
        info = p.c.publish(topic, payload, qos=1)
        p._sent(info.mid, n)
    p.sent = len(items)
    p._stop.set()
    p.stop(timeout)
    assert len(p.acked()) == len(items)
    return p


def check_topic(records, expect_n, max_dups=0):
    """records: the mock's stored records of one topic, in store order.
    Checks the offsets are 1..expect_n with none missing; that the store
    order never goes backwards except to resend (a duplicate offset); that
    there are at most max_dups duplicates. Returns the duplicates count."""
    offsets = [r["offset"] for r in records]
    seen = set()
    dups = 0
    highest = 0
    for off in offsets:
        if off in seen:
            dups += 1
            continue
        assert off == highest + 1, f"offset {off} stored after {highest}: a gap or reordering"
        seen.add(off)
        highest = off
    assert highest == expect_n, f"stored up to offset {highest}, expected {expect_n}"
    assert dups <= max_dups, f"{dups} duplicate records (at most {max_dups} allowed)"
    return dups


def payload_numbers(records):
    return {json.loads(r["payload"])["n"] for r in records}
