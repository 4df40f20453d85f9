#!/usr/bin/env python3
"""Writes the RETIRED golden files from wal/wal_format.h's RETIRED FILE text
alone (an encoder independent of wal/retired.c): run from this folder."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "integration"))
from tlib.crc import crc32c  # noqa: E402

def entry(name, flags, nxt, ck, dropped, lost, quar, age, forgotten, removed):
    n = name.encode()
    body = struct.pack("<HHIQQQQQQQQ", len(n), flags, 0, nxt, ck, dropped, lost, quar, age, forgotten, removed)
    return body + n + b"\0" * (-len(n) % 8)

def retired(entries, version=1):
    body = b"".join(entries)
    head = b"TBWR" + struct.pack("<HHI", version, 0, len(entries))
    return head + struct.pack("<I", crc32c(body, crc32c(head))) + body

E1 = entry("/edge1/old", 0, 101, 100, 3, 1, 2, 4, 0, 1764633600000)
E2 = entry("/edge1/stranded", 1, 51, 20, 0, 0, 0, 0, 30, 1764633600500)

if __name__ == "__main__":
    files = {
        "retired-v1.bin": retired([E1, E2]),
        "empty-v1.bin": retired([]),
        "version-2.bin": retired([E1], version=2),
    }
    good = files["retired-v1.bin"]
    files["bad-crc.bin"] = good[:-1] + bytes([good[-1] ^ 1])
    files["torn.bin"] = good[:-8]
    for k, v in files.items():
        open(k, "wb").write(v)
