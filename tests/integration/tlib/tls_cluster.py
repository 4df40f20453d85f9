"""tlib/tls_cluster.py: a minimal Danube cluster behind TLS, for the tests of
edge.tls.* (the mock cluster speaks plain HTTP/2 only).

    with TlsCluster(workdir, require_client_cert=True) as tc:
        tc.url, tc.ca_file, tc.client_cert, tc.client_key
        tc.offsets("/edge1/t")      # msg_id.topic_offset of every stored message

It answers RegisterEdge (every topic created, no schema), EdgeHeartbeat
(unchanged), TopicLookup (Connect to its own URL) and ReplicateData (store,
ack each batch): the rules of the mock cluster that matter for a TLS check,
on grpcio's generic handlers. Certificates are made by the openssl CLI: one
self-signed server certificate for 127.0.0.1 (it is its own CA) and one
self-signed client certificate the server trusts.
"""
import os
import subprocess
import threading
from concurrent import futures

import grpc

from tlib.edge_client import api_pb, edge_pb

EDGE = "danube.edge.EdgeReplicatorService"


def self_signed(workdir, name, san):
    key, cert = os.path.join(workdir, f"{name}-key.pem"), os.path.join(workdir, f"{name}.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}"],
                   check=True, capture_output=True, timeout=60)
    return key, cert


class TlsCluster:
    def __init__(self, workdir, require_client_cert=False):
        self.server_key, self.ca_file = self_signed(workdir, "server", "IP:127.0.0.1")
        self.client_key, self.client_cert = self_signed(workdir, "client", "DNS:edge1")
        self.require_client_cert = require_client_cert
        self.lock = threading.Lock()
        self.stored = {}
        self.registrations = 0

    def _register(self, req, ctx):
        with self.lock:
            self.registrations += 1
        resp = edge_pb.RegisterEdgeResponse(success=True, config_version=1)
        for d in req.topics:
            resp.topics.add(topic_name=d.topic_name, topic_created=True, schema_resolved=True)
        return resp

    def _heartbeat(self, req, ctx):
        return edge_pb.EdgeHeartbeatResponse(changed=False, config_version=req.config_version)

    def _lookup(self, req, ctx):
        return api_pb.TopicLookupResponse(request_id=req.request_id, connect_url=self.url,
                                          response_type=api_pb.TopicLookupResponse.Connect)

    def _replicate(self, it, ctx):
        for batch in it:
            with self.lock:
                self.stored.setdefault(batch.topic_name, []).extend(m.msg_id.topic_offset for m in batch.messages)
            yield edge_pb.ReplicateAck(topic_name=batch.topic_name, acked_offset=batch.batch_last_offset)

    def start(self):
        with open(self.server_key, "rb") as k, open(self.ca_file, "rb") as c, open(self.client_cert, "rb") as cc:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())], root_certificates=cc.read(),
                                                require_client_auth=self.require_client_cert)
        h = grpc.method_handlers_generic_handler(EDGE, {
            "RegisterEdge": grpc.unary_unary_rpc_method_handler(
                self._register, edge_pb.RegisterEdgeRequest.FromString, edge_pb.RegisterEdgeResponse.SerializeToString),
            "EdgeHeartbeat": grpc.unary_unary_rpc_method_handler(
                self._heartbeat, edge_pb.EdgeHeartbeatRequest.FromString,
                edge_pb.EdgeHeartbeatResponse.SerializeToString),
            "ReplicateData": grpc.stream_stream_rpc_method_handler(
                self._replicate, edge_pb.ReplicateBatch.FromString, edge_pb.ReplicateAck.SerializeToString),
        })
        d = grpc.method_handlers_generic_handler("danube.Discovery", {
            "TopicLookup": grpc.unary_unary_rpc_method_handler(
                self._lookup, api_pb.TopicLookupRequest.FromString, api_pb.TopicLookupResponse.SerializeToString),
        })
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=(h, d))
        self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        self.url = f"https://127.0.0.1:{self.port}"
        self.server.start()
        return self

    def stop(self):
        self.server.stop(0.2).wait()

    def offsets(self, topic):
        with self.lock:
            return list(self.stored.get(topic, []))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
