"""mc_grpc.py: the mock cluster's gRPC face.

Serves danube.edge.EdgeReplicatorService (RegisterEdge, EdgeHeartbeat,
ReplicateData) and danube.Discovery (TopicLookup) with grpcio's generic
handlers and the generated messages' FromString/SerializeToString, so no
grpc_tools (not packaged in Debian 12) is needed.

Every call passes one gate: the fault mode first (an unavailable or
black-holed cluster answers nothing, whatever the credentials), then auth
(with a token, metadata `authorization: Bearer <token>`, else
UNAUTHENTICATED).

ReplicateData runs two threads per stream: a reader that pulls batches and
stores them, and the handler's generator that sends the acks. The split lets
acks be delayed (ack_delay_ms) as latency while batches keep being read, and
it measured faster than one thread doing both (receive and send overlap).

"refuse" is a real stopped server (connections refused, open calls
cancelled); GrpcFront.apply_fault() starts a new server on the same port
when the mode leaves "refuse". SO_REUSEPORT is off so that a second process
cannot silently share the port; SO_REUSEADDR (grpc's default) still lets
the same port be bound again at once. Message size limits are grpc's
defaults (4 MiB received), the same as Danube's tonic server.
"""
import logging
import queue
import threading
import time
from concurrent import futures

import grpc

import DanubeApi_pb2 as api_pb
import EdgeReplicator_pb2 as edge_pb

from mc_state import BadBatch, NotFound, StorageError

log = logging.getLogger("mock-cluster")
EDGE_SERVICE = "danube.edge.EdgeReplicatorService"
DISCOVERY_SERVICE = "danube.Discovery"


class GrpcFront:
    def __init__(self, state, faults, host="127.0.0.1", port=0, token=None, workers=64):
        self.state = state
        self.faults = faults
        self.host = host
        self.port = port
        self.token = token
        self.workers = workers
        self._server = None
        self._lock = threading.Lock()   # start/stop
        self._apply_lock = threading.Lock()  # read the mode and act on it as one step

    @property
    def own_url(self):
        return f"http://{self.host}:{self.port}"

    # ---- lifecycle --------------------------------------------------------

    def start(self):
        """Binds and starts the server; the first start may pick the port
        (port 0), later starts reuse it. Returns the port."""
        with self._lock:
            if self._server is not None:
                return self.port
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=self.workers),
                                 handlers=self._handlers(),
                                 options=[("grpc.so_reuseport", 0)])
            port = server.add_insecure_port(f"{self.host}:{self.port}")
            if port == 0:
                raise OSError(f"cannot bind gRPC server on {self.host}:{self.port}")
            server.start()
            self.port = port
            self._server = server
            log.info("grpc serving on %s:%d", self.host, port)
            return port

    def stop(self, grace=None):
        """Stops the server; open calls are cancelled (after grace seconds)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop(grace).wait()
            log.info("grpc stopped")

    @property
    def running(self):
        return self._server is not None

    def apply_fault(self):
        """Makes the server's state match the fault mode (refuse = stopped)."""
        with self._apply_lock:
            if self.faults.mode == "refuse":
                self.stop(None)
            else:
                self.start()

    # ---- the gate ---------------------------------------------------------

    def _gate(self, context, unary):
        """Fault and auth checks at the start of a call. Returns False if
        the call ended while hanging (nothing more to do)."""
        mode = self.faults.mode
        if mode == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "mock cluster: injected unavailable")
        if unary and mode == "silent" and not self.faults.hang_while_silent(context):
            return False
        if self.token is not None:
            md = dict(context.invocation_metadata())
            if md.get("authorization") != "Bearer " + self.token:
                self.state.count("unauthenticated_calls")
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "missing or invalid authorization bearer token")
        return True

    # ---- unary calls ------------------------------------------------------

    def _register(self, req, context):
        if not self._gate(context, True):
            return edge_pb.RegisterEdgeResponse()
        resp = self.state.register(req)
        log.info("register edge=%s topics=%d config_version=%d",
                 req.edge_name, len(req.topics), resp.config_version)
        return resp

    def _heartbeat(self, req, context):
        if not self._gate(context, True):
            return edge_pb.EdgeHeartbeatResponse()
        try:
            resp = self.state.heartbeat(req)
        except NotFound as e:
            log.info("heartbeat edge=%s: not registered", req.edge_name)
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        log.info("heartbeat edge=%s version=%d -> version=%d changes=%d",
                 req.edge_name, req.config_version, resp.config_version, len(resp.changes))
        return resp

    def _lookup(self, req, context):
        if not self._gate(context, True):
            return api_pb.TopicLookupResponse()
        return self.state.lookup(req, self.own_url)

    # ---- ReplicateData ----------------------------------------------------

    def _read_batches(self, request_iterator, out):
        """Reader thread: stores batches, queues ("ack", ack, due) items,
        ends with ("abort", code, text) or ("end",)."""
        try:
            for batch in request_iterator:
                mode = self.faults.mode
                if mode == "unavailable":
                    out.put(("abort", grpc.StatusCode.UNAVAILABLE, "mock cluster: injected unavailable"))
                    return
                if mode == "internal":
                    out.put(("abort", grpc.StatusCode.INTERNAL, "mock cluster: injected storage failure"))
                    return
                if mode == "silent":
                    self.state.count("silent_dropped_batches")
                    continue
                refused = self.faults.poisoned(batch)
                if refused is not None:
                    out.put(("abort", getattr(grpc.StatusCode, refused[0]), refused[1]))
                    return
                try:
                    ack = self.state.ingest(batch)
                except BadBatch as e:
                    out.put(("abort", grpc.StatusCode.INVALID_ARGUMENT, str(e)))
                    return
                except StorageError as e:
                    log.error("%s", e)
                    out.put(("abort", grpc.StatusCode.INTERNAL, str(e)))
                    return
                if ack is not None:
                    out.put(("ack", ack, time.monotonic() + self.faults.ack_delay_ms / 1000.0))
        except grpc.RpcError:
            pass                        # the call ended (cancel, deadline, stop)
        except Exception:               # keep the stream's end visible, never hang it
            log.exception("reader failed")
            out.put(("abort", grpc.StatusCode.INTERNAL, "mock cluster: reader failed"))
        finally:
            out.put(("end",))

    def _replicate(self, request_iterator, context):
        self._gate(context, False)
        self.state.count("streams_opened")
        self.state.count("streams_open")
        out = queue.SimpleQueue()
        reader = threading.Thread(target=self._read_batches, args=(request_iterator, out),
                                  name="replicate-reader", daemon=True)
        reader.start()
        log.info("stream opened from %s", context.peer())
        try:
            while True:
                item = out.get()
                if item[0] == "end":
                    return
                if item[0] == "abort":
                    log.info("stream from %s: %s %s", context.peer(), item[1].name, item[2])
                    context.abort(item[1], item[2])
                _, ack, due = item
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)    # the injected latency itself, not a synchronisation
                self.state.count_ack(ack.topic_name)
                yield ack
        finally:
            self.state.count("streams_open", -1)
            log.info("stream from %s ended", context.peer())

    # ---- handler table ----------------------------------------------------

    def _handlers(self):
        edge = grpc.method_handlers_generic_handler(EDGE_SERVICE, {
            "RegisterEdge": grpc.unary_unary_rpc_method_handler(
                self._register,
                request_deserializer=edge_pb.RegisterEdgeRequest.FromString,
                response_serializer=edge_pb.RegisterEdgeResponse.SerializeToString),
            "EdgeHeartbeat": grpc.unary_unary_rpc_method_handler(
                self._heartbeat,
                request_deserializer=edge_pb.EdgeHeartbeatRequest.FromString,
                response_serializer=edge_pb.EdgeHeartbeatResponse.SerializeToString),
            "ReplicateData": grpc.stream_stream_rpc_method_handler(
                self._replicate,
                request_deserializer=edge_pb.ReplicateBatch.FromString,
                response_serializer=edge_pb.ReplicateAck.SerializeToString),
        })
        discovery = grpc.method_handlers_generic_handler(DISCOVERY_SERVICE, {
            "TopicLookup": grpc.unary_unary_rpc_method_handler(
                self._lookup,
                request_deserializer=api_pb.TopicLookupRequest.FromString,
                response_serializer=api_pb.TopicLookupResponse.SerializeToString),
        })
        return (edge, discovery)
