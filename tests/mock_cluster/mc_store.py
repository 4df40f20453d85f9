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
("utf-8" or "base64"), received_at (ms since the epoch), batch_bytes (the
size of the whole ReplicateBatch on the wire, as the edge's max_bytes_per_s
counts it; the same on every line of one batch).
"""
import base64
import json
import os


# Compact JSON, UTF-8 kept as is (the file is UTF-8).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def format_batch(batch, received_at_ms):
    """The JSON-lines text of one danube.edge.ReplicateBatch, one line per
    message, newline-terminated. Written out by hand rather than through a
    dict per message: it is the mock's hot path in jsonl mode (about 3x
    faster, measured), and the integration tests parse every field back."""
    head = '{"topic":%s,"offset":' % _dumps(batch.topic_name)
    mid = ',"batch_last_offset":%d,"publish_time":' % batch.batch_last_offset
    lines = []
    size = batch.ByteSize()
    for m in batch.messages:
        try:
            payload, encoding = _dumps(m.payload.decode("utf-8")), "utf-8"
        except UnicodeDecodeError:
            payload, encoding = '"%s"' % base64.b64encode(m.payload).decode("ascii"), "base64"
        attrs = _dumps(dict(m.attributes)) if len(m.attributes) else "{}"
        opt = ""
        if m.HasField("schema_id"):
            opt += ',"schema_id":%d' % m.schema_id
        if m.HasField("schema_version"):
            opt += ',"schema_version":%d' % m.schema_version
        if m.HasField("routing_key"):
            opt += ',"routing_key":' + _dumps(m.routing_key)
        lines.append('%s%d%s%d,"producer_name":%s,"attributes":%s%s,"payload":%s,'
                     '"payload_encoding":"%s","received_at":%d,"batch_bytes":%d}\n'
                     % (head, m.msg_id.topic_offset, mid, m.publish_time,
                        _dumps(m.producer_name), attrs, opt, payload, encoding,
                        received_at_ms, size))
    return "".join(lines)


class JsonlStore:
    """Appends with os.write on an O_APPEND descriptor: no user-space buffer
    that a failed flush would leave behind to be written again later."""
    mode = "jsonl"

    def __init__(self, path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def append(self, batch, received_at_ms):
        data = memoryview(format_batch(batch, received_at_ms).encode("utf-8"))
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
