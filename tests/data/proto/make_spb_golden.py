#!/usr/bin/python3
"""make_spb_golden.py: known-good Sparkplug B payloads (spb_*.bin here).

Why: proto/sparkplug_b.proto was written from the Sparkplug 3.0 payload
chapter; a round trip through code generated from that same file cannot
catch a wrong field number or type in it. So each payload below is encoded
twice, independently:
  1. by a small wire encoder in this file, whose field numbers and wire
     types are transcribed from the specification's payload definition
     (the `spec` tables below), not from our .proto;
  2. by Python protobuf (Debian's python3-protobuf) from our .proto,
     compiled with protoc into a temporary directory.
The two must give the same bytes, or nothing is written. The C test
(tests/unit/proto/test_spb_golden.c) decodes the committed bytes with
protobuf-c and compares every field with the values stated here.

The NBIRTH is the specification's NBIRTH example (group G1, node E1:
bdSeq Int64 5, "Tag 4" Int32 100 and "Tag 5" Boolean false, both with the
property Quality Int32 192, seq 0, the example's timestamps), plus the
Node Control/Rebirth metric the specification requires in every NBIRTH
(tck-id-topics-nbirth-rebirth-metric) and an alias on the tags. The DDATA
uses aliases only, as a report by exception does, with a Double, a
historical Int64, a null Float, a String, a negative Int32 and Bytes.
The NCMD is the host's rebirth request; NDEATH is the example's bdSeq.

Run: /usr/bin/python3 make_spb_golden.py [--check]
(--check compares with the committed files and writes nothing).
"""
import os
import struct
import subprocess
import sys
import tempfile

from golden_files import write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "proto"))

# ---- 1. the hand encoder, from the specification -------------------------
# Payload: timestamp=1 uint64, metrics=2 Metric, seq=3 uint64
# Metric: name=1 string, alias=2 uint64, timestamp=3 uint64, datatype=4 uint32,
#   is_historical=5 bool, is_transient=6 bool, is_null=7 bool, properties=9,
#   int_value=10 uint32, long_value=11 uint64, float_value=12 float,
#   double_value=13 double, boolean_value=14 bool, string_value=15 string,
#   bytes_value=16 bytes
# PropertySet: keys=1 string, values=2 PropertyValue
# PropertyValue: type=1 uint32, is_null=2 bool, int_value=3 uint32
DT = {"Int32": 3, "Int64": 4, "Float": 9, "Double": 10, "Boolean": 11, "String": 12, "Bytes": 17}


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(field, wt):
    return varint(field << 3 | wt)


def f_varint(field, n):
    return key(field, 0) + varint(n)


def f_bytes(field, b):
    return key(field, 2) + varint(len(b)) + b


def f_float(field, x):
    return key(field, 5) + struct.pack("<f", x)


def f_double(field, x):
    return key(field, 1) + struct.pack("<d", x)


def h_metric(m):
    out = b""
    if "name" in m:
        out += f_bytes(1, m["name"].encode())
    if "alias" in m:
        out += f_varint(2, m["alias"])
    out += f_varint(3, m["timestamp"])
    if "datatype" in m:
        out += f_varint(4, DT[m["datatype"]])
    if m.get("historical"):
        out += f_varint(5, 1)
    if m.get("null"):
        out += f_varint(7, 1)
    if "quality" in m:
        pv = f_varint(1, DT["Int32"]) + f_varint(3, m["quality"])
        out += f_bytes(9, f_bytes(1, b"Quality") + f_bytes(2, pv))
    kind, v = m.get("value", (None, None))
    if kind == "int":
        out += f_varint(10, v & 0xFFFFFFFF)
    elif kind == "long":
        out += f_varint(11, v & 0xFFFFFFFFFFFFFFFF)
    elif kind == "float":
        out += f_float(12, v)
    elif kind == "double":
        out += f_double(13, v)
    elif kind == "bool":
        out += f_varint(14, int(v))
    elif kind == "string":
        out += f_bytes(15, v.encode())
    elif kind == "bytes":
        out += f_bytes(16, v)
    return out


def h_payload(p):
    out = f_varint(1, p["timestamp"])
    for m in p["metrics"]:
        out += f_bytes(2, h_metric(m))
    if "seq" in p:
        out += f_varint(3, p["seq"])
    return out


# ---- the payloads ---------------------------------------------------------
PAYLOADS = {
    "spb_nbirth": {"timestamp": 1638223073190, "seq": 0, "metrics": [
        {"name": "bdSeq", "timestamp": 1638223073187, "datatype": "Int64", "value": ("long", 5)},
        {"name": "Node Control/Rebirth", "timestamp": 1638223073187, "datatype": "Boolean",
         "value": ("bool", False)},
        {"name": "Tag 4", "alias": 1, "timestamp": 1638223073156, "datatype": "Int32", "quality": 192,
         "value": ("int", 100)},
        {"name": "Tag 5", "alias": 2, "timestamp": 1638223073001, "datatype": "Boolean", "quality": 192,
         "value": ("bool", False)},
    ]},
    "spb_ddata": {"timestamp": 1638223074000, "seq": 255, "metrics": [
        {"alias": 3, "timestamp": 1638223073990, "value": ("double", 21.5)},
        {"alias": 4, "timestamp": 1638223000000, "historical": True, "value": ("long", -2)},
        {"alias": 5, "timestamp": 1638223073991, "null": True},
        {"alias": 6, "timestamp": 1638223073992, "value": ("string", "ok \u00e9")},
        {"alias": 1, "timestamp": 1638223073993, "value": ("int", -7)},
        {"alias": 7, "timestamp": 1638223073994, "value": ("bytes", b"\x00\xff\x10")},
    ]},
    "spb_ncmd_rebirth": {"timestamp": 1638223075000, "metrics": [
        {"name": "Node Control/Rebirth", "timestamp": 1638223075000, "datatype": "Boolean",
         "value": ("bool", True)},
    ]},
    "spb_ndeath": {"timestamp": 1638223073190, "metrics": [
        {"name": "bdSeq", "timestamp": 1638223073190, "datatype": "Int64", "value": ("long", 5)},
    ]},
}


# ---- 2. Python protobuf, from our .proto ----------------------------------
def pb_payload(spb, p):
    msg = spb.Payload()
    msg.timestamp = p["timestamp"]
    if "seq" in p:
        msg.seq = p["seq"]
    for m in p["metrics"]:
        x = msg.metrics.add()
        if "name" in m:
            x.name = m["name"]
        if "alias" in m:
            x.alias = m["alias"]
        x.timestamp = m["timestamp"]
        if "datatype" in m:
            x.datatype = DT[m["datatype"]]
        if m.get("historical"):
            x.is_historical = True
        if m.get("null"):
            x.is_null = True
        if "quality" in m:
            x.properties.keys.append("Quality")
            pv = x.properties.values.add()
            pv.type = DT["Int32"]
            pv.int_value = m["quality"]
        kind, v = m.get("value", (None, None))
        if kind == "int":
            x.int_value = v & 0xFFFFFFFF
        elif kind == "long":
            x.long_value = v & 0xFFFFFFFFFFFFFFFF
        elif kind == "float":
            x.float_value = v
        elif kind == "double":
            x.double_value = v
        elif kind == "bool":
            x.boolean_value = v
        elif kind == "string":
            x.string_value = v
        elif kind == "bytes":
            x.bytes_value = v
    return msg.SerializeToString()


def main():
    check = "--check" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["protoc", "--python_out=" + tmp, "-I" + PROTO_DIR,
                        os.path.join(PROTO_DIR, "sparkplug_b.proto")], check=True)
        sys.path.insert(0, tmp)
        import sparkplug_b_pb2 as spb
        bad = 0
        for name, p in PAYLOADS.items():
            hand, lib = h_payload(p), pb_payload(spb, p)
            if hand != lib:
                print(f"{name}: the spec's encoding and our .proto's differ:\n  {hand.hex()}\n  {lib.hex()}")
                bad += 1
                continue
            bad += write_or_check(os.path.join(HERE, name + ".bin"), hand, check)
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
