"""mc_store.py: where the mock cluster puts the messages it stores.

Two stores with one method, append(batch, received_at_ms):
  JsonlStore  one JSON object per stored message, appended to a file with
              one write(2) per batch (no user-space buffer), so a test can
              read what the cluster holds while the mock runs. No fsync:
              this is a test double, its own durability is not under test.
  CountStore  nothing per message, for throughput runs: counting is done by
              ClusterState for both stores.

A failed write raises OSError; the caller turns it into INTERNAL on the
stream, as Danube does when its storage fails, and does not advance the
topic's dedup marker, so the edge's resend is stored later.

Record fields (docs/MOCK-CLUSTER.md): topic, offset (msg_id.topic_offset),
batch_last_offset, publish_time, producer_name, attributes, schema_id and
schema_version (only when present on the wire), routing_key (only when
present), payload (text when valid UTF-8, else base64), payload_encoding
("utf-8" or "base64"), received_at (ms since the epoch).
"""
import base64
import json
import os


def message_record(topic, batch_last_offset, m, received_at_ms):
    """The JSON-lines record of one danube.StreamMessage."""
    rec = {
        "topic": topic,
        "offset": m.msg_id.topic_offset,
        "batch_last_offset": batch_last_offset,
        "publish_time": m.publish_time,
        "producer_name": m.producer_name,
        "attributes": dict(m.attributes),
    }
    if m.HasField("schema_id"):
        rec["schema_id"] = m.schema_id
    if m.HasField("schema_version"):
        rec["schema_version"] = m.schema_version
    if m.HasField("routing_key"):
        rec["routing_key"] = m.routing_key
    try:
        rec["payload"] = m.payload.decode("utf-8")
        rec["payload_encoding"] = "utf-8"
    except UnicodeDecodeError:
        rec["payload"] = base64.b64encode(m.payload).decode("ascii")
        rec["payload_encoding"] = "base64"
    rec["received_at"] = received_at_ms
    return rec


class JsonlStore:
    """Appends with os.write on an O_APPEND descriptor: no user-space buffer
    that a failed flush would leave behind to be written again later."""
    mode = "jsonl"

    def __init__(self, path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def append(self, batch, received_at_ms):
        lines = [json.dumps(message_record(batch.topic_name, batch.batch_last_offset,
                                           m, received_at_ms), separators=(",", ":"))
                 for m in batch.messages]
        data = memoryview(("\n".join(lines) + "\n").encode("utf-8"))
        while data:
            n = os.write(self._fd, data)
            data = data[n:]

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CountStore:
    mode = "count"
    path = None

    def append(self, batch, received_at_ms):
        pass

    def close(self):
        pass
