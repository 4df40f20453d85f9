#!/usr/bin/python3
"""make_golden.py: writes the golden protobuf encodings in this directory.

Why: tests/unit/proto/test_proto_golden.c checks that protobuf-c, built from
proto/*.proto, encodes and decodes exactly the bytes that another
implementation (Python protobuf, the same library family as the cluster's
peers) produces from the same contract. The .bin files are committed so the
unit test needs no Python; rerun this script only when the contract or the
fixtures change, and change the C fixtures (helper_proto.c) to match.

It also proves, before writing anything, that our one-member-oneof form of
Danube's proto3 `optional` fields (needed by Debian's protoc-c 1.4.1) is
byte-identical to the `optional` form Danube writes: it compiles both forms
with protoc and compares every fixture's encoding.

Maps are encoded with deterministic=True (keys sorted); the C fixtures put
their map entries in the same order. Run: /usr/bin/python3 make_golden.py
[--check]  (--check compares with the committed files and writes nothing).
"""
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from golden_files import write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "proto"))
PROTOS = ["DanubeApi.proto", "EdgeReplicator.proto"]


def compile_protos(src_dir, out_dir):
    subprocess.run(["protoc", "--python_out=" + out_dir, "-I" + src_dir]
                   + [os.path.join(src_dir, p) for p in PROTOS], check=True)


def optional_form(text):
    """Rewrites `oneof x_opt { T name = N; }` back to `optional T name = N;`."""
    return re.sub(r"oneof \w+_opt \{ ([^;]+;) \}", r"optional \1", text)


def encode_in_child(py_dir):
    """Encodes every fixture with the modules in py_dir, in a child process:
    both forms declare the same file names, and one process's default
    descriptor pool can hold only one of them."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--encode", py_dir],
                         check=True, capture_output=True, text=True).stdout
    return {k: bytes.fromhex(v) for k, v in json.loads(out).items()}


def encode_here(py_dir):
    sys.path.insert(0, py_dir)
    api = importlib.import_module("DanubeApi_pb2")
    edge = importlib.import_module("EdgeReplicator_pb2")
    enc = {k: v.SerializeToString(deterministic=True).hex()
           for k, v in fixtures(api, edge).items()}
    print(json.dumps(enc))


def fixtures(api, edge):
    """name -> message. Mirrored field by field in tests/unit/proto/helper_proto.c."""
    out = {}

    b = edge.ReplicateBatch(topic_name="/edge1/telemetry", batch_last_offset=41)
    m = b.messages.add()
    m.msg_id.topic_name = "/edge1/telemetry"
    m.msg_id.topic_offset = 40
    m.payload = b'{"t":21.5}'
    m.publish_time = 1700000000123
    m.producer_name = "tributary-edge"
    m.attributes["device_id"] = "sensor-42"
    m.attributes["mqtt.content_type"] = "application/json"
    m.schema_id = 0          # present although 0: must be on the wire
    m.schema_version = 3
    m = b.messages.add()
    m.msg_id.topic_name = "/edge1/telemetry"
    m.msg_id.topic_offset = 41
    m.payload = b"\x00\xff\x10"
    m.publish_time = 1700000000456
    m.producer_name = "tributary-edge"
    # no attributes, no schema_id, no schema_version, no routing_key
    out["replicate_batch"] = b

    r = edge.RegisterEdgeRequest(edge_name="edge1")
    r.topics.add(topic_name="/edge1/telemetry", schema_subject="telemetry-v1")
    r.topics.add(topic_name="/edge1/raw")                       # absent
    r.topics.add(topic_name="/edge1/empty", schema_subject="")  # present, empty
    out["register_edge_request"] = r

    schema = edge.ResolvedSchema(
        subject="telemetry-v1", schema_id=7, schema_version=2,
        schema_type="json_schema",
        schema_definition=b'{"JsonSchema":{"raw_schema":"{\\"type\\":\\"object\\"}",'
                          b'"fingerprint":"sha256:ab"}}',
        fingerprint="sha256:ab", compatibility_mode="backward")
    h = edge.EdgeHeartbeatResponse(changed=True, config_version=5)
    c = h.changes.add(topic_name="/edge1/telemetry", change_type=edge.SCHEMA_UPDATED)
    c.schema.CopyFrom(schema)
    h.changes.add(topic_name="/edge1/other", change_type=edge.SCHEMA_REMOVED,
                  detail="subject deleted")
    h.changes.add(topic_name="/edge1/gone", change_type=edge.TOPIC_REMOVED)
    out["heartbeat_response"] = h

    lk = api.TopicLookupResponse(request_id=9, response_type=api.TopicLookupResponse.Connect,
                                 connect_url="http://127.0.0.1:6650",
                                 broker_url="http://127.0.0.1:6650")
    out["topic_lookup_response"] = lk
    return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--encode":
        encode_here(sys.argv[2])
        return
    check = "--check" in sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="tb-golden-")
    try:
        ours_py = os.path.join(tmp, "ours")
        opt_src = os.path.join(tmp, "optional_src")
        opt_py = os.path.join(tmp, "optional")
        for d in (ours_py, opt_src, opt_py):
            os.makedirs(d)
        compile_protos(PROTO_DIR, ours_py)
        for p in PROTOS:
            with open(os.path.join(PROTO_DIR, p)) as f:
                text = optional_form(f.read())
            with open(os.path.join(opt_src, p), "w") as f:
                f.write(text)
        compile_protos(opt_src, opt_py)

        ours = encode_in_child(ours_py)
        upstream = encode_in_child(opt_py)
        for k in ours:
            if ours[k] != upstream[k]:
                sys.exit(f"{k}: oneof form and optional form encode differently")

        bad = 0
        for k, data in sorted(ours.items()):
            bad += write_or_check(os.path.join(HERE, k + ".bin"), data, check)
        sys.exit(1 if bad else 0)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
