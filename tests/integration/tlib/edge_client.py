"""tlib/edge_client.py: the edge's side of the Danube contract, in Python.

A small gRPC client on the modules generated from proto/*.proto (found in
$TRIB_BUILD_DIR/proto_py), used to drive the mock cluster directly and, in
later tests, to play a second edge or check what a cluster answers. Calls
always carry a deadline.

    c = EdgeClient(mc.grpc_target, token="t")
    resp = c.register("edge1", [("/edge1/t", "subject"), ("/edge1/raw", None)])
    stream = c.open_stream()
    stream.send(make_batch("/edge1/t", [0, 1, 2]))
    ack = stream.recv(timeout=5)
"""
import os
import queue
import sys
import threading

import grpc

from tlib.mock import build_dir

sys.path.insert(0, os.path.join(build_dir(), "proto_py"))
import DanubeApi_pb2 as api_pb          # noqa: E402
import EdgeReplicator_pb2 as edge_pb    # noqa: E402

EDGE = "/danube.edge.EdgeReplicatorService/"


def make_message(topic, offset, payload=b"x", publish_time=1700000000000,
                 producer_name="tributary-test", attributes=None, schema_id=None,
                 schema_version=None, routing_key=None, msg_id=True):
    m = api_pb.StreamMessage(payload=payload, publish_time=publish_time,
                             producer_name=producer_name)
    if msg_id:
        m.msg_id.topic_name = topic
        m.msg_id.topic_offset = offset
    for k, v in (attributes or {}).items():
        m.attributes[k] = v
    if schema_id is not None:
        m.schema_id = schema_id
    if schema_version is not None:
        m.schema_version = schema_version
    if routing_key is not None:
        m.routing_key = routing_key
    return m


def make_batch(topic, offsets, batch_last_offset=None, **msg_kwargs):
    """A ReplicateBatch of one message per offset; batch_last_offset
    defaults to the last offset (0 for an empty batch)."""
    offsets = list(offsets)
    b = edge_pb.ReplicateBatch(topic_name=topic)
    for off in offsets:
        b.messages.append(make_message(topic, off, **msg_kwargs))
    if batch_last_offset is None:
        batch_last_offset = offsets[-1] if offsets else 0
    b.batch_last_offset = batch_last_offset
    return b


class ReplicateStream:
    """One ReplicateData call: send() batches, recv() acks with a timeout,
    finish() to half-close and learn the final status."""

    _END = object()

    def __init__(self, channel, metadata, timeout):
        self._out = queue.SimpleQueue()
        self._acks = queue.SimpleQueue()
        call = channel.stream_stream(EDGE + "ReplicateData",
                                     request_serializer=edge_pb.ReplicateBatch.SerializeToString,
                                     response_deserializer=edge_pb.ReplicateAck.FromString)
        self.call = call(self._requests(), metadata=metadata, timeout=timeout)
        self.error = None
        self._done = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _requests(self):
        while True:
            b = self._out.get()
            if b is self._END:
                return
            yield b

    def _pump(self):
        try:
            for ack in self.call:
                self._acks.put(ack)
        except grpc.RpcError as e:
            self.error = e
        finally:
            self._done.set()
            self._acks.put(None)

    def send(self, batch):
        self._out.put(batch)

    def recv(self, timeout):
        """The next ack; None if the stream ended; raises queue.Empty on timeout."""
        return self._acks.get(timeout=timeout)

    def finish(self, timeout):
        """Half-closes and waits for the end. Returns the status code."""
        self._out.put(self._END)
        if not self._done.wait(timeout):
            raise TimeoutError("stream did not end")
        return self.code()

    def wait_end(self, timeout):
        """Waits for the server to end the stream; returns the status code."""
        if not self._done.wait(timeout):
            raise TimeoutError("stream did not end")
        return self.code()

    def code(self):
        return self.error.code() if self.error is not None else grpc.StatusCode.OK

    def cancel(self):
        self.call.cancel()
        self._out.put(self._END)


class EdgeClient:
    def __init__(self, target, token=None, timeout=10):
        self.channel = grpc.insecure_channel(target)
        self.timeout = timeout
        self.metadata = (("authorization", "Bearer " + token),) if token is not None else None
        self._unary = {}

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, path, req, resp_cls, timeout, metadata):
        stub = self.channel.unary_unary(path, request_serializer=type(req).SerializeToString,
                                        response_deserializer=resp_cls.FromString)
        md = self.metadata if metadata is None else metadata
        return stub(req, timeout=timeout or self.timeout, metadata=md)

    def register(self, edge_name, topics, timeout=None, metadata=None):
        """topics: [(topic_name, subject or None)]."""
        req = edge_pb.RegisterEdgeRequest(edge_name=edge_name)
        for name, subject in topics:
            d = req.topics.add(topic_name=name)
            if subject is not None:
                d.schema_subject = subject
        return self._call(EDGE + "RegisterEdge", req, edge_pb.RegisterEdgeResponse, timeout, metadata)

    def heartbeat(self, edge_name, config_version, timeout=None, metadata=None):
        req = edge_pb.EdgeHeartbeatRequest(edge_name=edge_name, config_version=config_version)
        return self._call(EDGE + "EdgeHeartbeat", req, edge_pb.EdgeHeartbeatResponse, timeout, metadata)

    def lookup(self, topic, request_id=1, timeout=None, metadata=None):
        req = api_pb.TopicLookupRequest(request_id=request_id, topic=topic)
        return self._call("/danube.Discovery/TopicLookup", req, api_pb.TopicLookupResponse,
                          timeout, metadata)

    def open_stream(self, timeout=None, metadata=None):
        return ReplicateStream(self.channel, self.metadata if metadata is None else metadata,
                               timeout or 60)

    def replicate(self, batches, timeout=None):
        """Sends batches on one stream, half-closes, returns (acks, status code)."""
        s = self.open_stream(timeout)
        for b in batches:
            s.send(b)
        code = s.finish(timeout or self.timeout)
        acks = []
        while True:
            a = s.recv(timeout=0)
            if a is None:
                break
            acks.append(a)
        return acks, code
