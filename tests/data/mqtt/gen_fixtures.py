#!/usr/bin/python3
"""gen_fixtures.py: writes the MQTT codec's known-bad packets and fuzz seeds.

The packets are spelled here once, readably, and written as binary files:
  tests/data/mqtt/bad/<name>.bin     one known-bad packet each
  tests/data/mqtt/bad/INDEX          "<name> <version> <max_packet_size> <reason>  # why"
  tests/fuzz/corpus/mqtt_codec/      bad-<name> and valid-<version>-<what> seeds
Fuzz inputs start with one selector byte (see tests/fuzz/fuzz_mqtt_codec.c):
bits 0-1 pick the session version (0: before CONNECT, 1: 3.1.1, 2: 5.0,
3: 3.1), bit 2 a 128-byte maximum packet size. The unit test
test_mqtt_codec_fixtures.c replays both directories, so a wrong spelling
here fails the build's tests rather than weakening the corpus.

Run it from anywhere; it rewrites the files it owns and nothing else.
"""
import os
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BAD_DIR = os.path.join(ROOT, "tests/data/mqtt/bad")
CORPUS = os.path.join(ROOT, "tests/fuzz/corpus/mqtt_codec")

SEL = {0: 0, 4: 1, 5: 2, 3: 3}


def parse(text):
    """hex bytes, 'raw text', <mqtt string> (two-byte length + text)."""
    out = bytearray()
    for tok in re.findall(r"<[^>]*>|'[^']*'|[0-9a-fA-F]{2}", text):
        if tok[0] == "<":
            s = tok[1:-1].encode()
            out += len(s).to_bytes(2, "big") + s
        elif tok[0] == "'":
            out += tok[1:-1].encode()
        else:
            out.append(int(tok, 16))
    return bytes(out)


def frame(first, body):
    b = parse(body)
    n, rl = len(b), bytearray()
    while True:
        d, n = n & 0x7F, n >> 7
        rl.append(d | (0x80 if n else 0))
        if not n:
            break
    return bytes([first]) + bytes(rl) + b


CONNECT5 = "<MQTT> 05 02 00 3c {} <c>"

# name, session version, max packet size, expected reason, packet, why
BAD = [
    ("varint-5-bytes", 4, 0, 0x81, parse("30 ff ff ff ff 01"), "remaining length longer than 4 bytes"),
    ("varint-overlong", 5, 0, 0x81, parse("c0 80 00"), "remaining length not minimal [MQTT-1.5.5-1]"),
    ("too-large", 5, 1024, 0x95, parse("30 ff ff 7f"), "2 MiB announced, 1 KiB allowed"),
    ("first-not-connect", 0, 0, 0x82, frame(0x30, "<a> 'x'"), "[MQTT-3.1.0-1]"),
    ("type-zero", 5, 0, 0x81, parse("00 00"), "reserved packet type"),
    ("auth-in-311", 4, 0, 0x81, parse("f0 00"), "AUTH does not exist in 3.1.1"),
    ("puback-reserved-flags", 4, 0, 0x81, frame(0x41, "00 0a"), "[MQTT-2.2.2-1]"),
    ("subscribe-reserved-flags", 4, 0, 0x81, frame(0x80, "00 0a <a> 00"), "[MQTT-3.8.1-1]"),
    ("pubrel-reserved-flags", 5, 0, 0x81, frame(0x60, "00 0a"), "[MQTT-3.6.1-1]"),
    ("publish-qos3", 4, 0, 0x81, frame(0x36, "<t> 00 01"), "[MQTT-3.3.1-4]"),
    ("publish-dup-qos0", 4, 0, 0x82, frame(0x38, "<t> 'x'"), "[MQTT-3.3.1-2]"),
    ("publish-packet-id-zero", 5, 0, 0x82, frame(0x32, "<t> 00 00 00"), "[MQTT-2.2.1-3]"),
    ("publish-wildcard-topic", 4, 0, 0x82, frame(0x30, "<a/#> 'x'"), "[MQTT-3.3.2-2]"),
    ("publish-bad-utf8-topic", 4, 0, 0x81, frame(0x30, "00 02 c3 28 'x'"), "[MQTT-1.5.3-1]"),
    ("publish-u0000-topic", 5, 0, 0x81, frame(0x30, "00 03 61 00 62 00"), "[MQTT-1.5.4-2]"),
    ("publish-surrogate-topic", 5, 0, 0x81, frame(0x30, "00 03 ed b0 80 00"), "[MQTT-1.5.4-1]"),
    ("publish-empty-topic-311", 4, 0, 0x82, frame(0x30, "00 00 'x'"), "[MQTT-4.7.3-1]"),
    ("publish-empty-topic-no-alias", 5, 0, 0x82, frame(0x30, "00 00 00 'x'"), "3.3.2.1"),
    ("publish-topic-alias-zero", 5, 0, 0x82, frame(0x30, "<t> 03 23 00 00"), "[MQTT-3.3.2-8]"),
    ("publish-property-not-allowed", 5, 0, 0x81, frame(0x30, "<t> 05 11 00 00 00 01"), "2.2.2.2"),
    ("publish-property-twice", 5, 0, 0x82, frame(0x30, "<t> 0a 02 00 00 00 01 02 00 00 00 02"), "3.3.2.3.3"),
    ("publish-unknown-property", 5, 0, 0x81, frame(0x30, "<t> 02 05 00"), "no property 0x05"),
    ("publish-property-length-overrun", 5, 0, 0x81, frame(0x30, "<t> 09 01 00"), "property length > packet"),
    ("publish-payload-format-2", 5, 0, 0x82, frame(0x30, "<t> 02 01 02"), "3.3.2.3.2"),
    ("publish-topic-overrun", 4, 0, 0x81, frame(0x30, "00 09 'ab'"), "string longer than the packet"),
    ("publish-response-topic-wildcard", 5, 0, 0x82, frame(0x30, "<t> 04 08 <+>"), "[MQTT-3.3.2-14]"),
    ("connect-bad-protocol-name", 0, 0, 0x84, frame(0x10, "<MQTX> 04 02 00 3c <c>"), "[MQTT-3.1.2-1]"),
    ("connect-bad-level", 0, 0, 0x84, frame(0x10, "<MQTT> 07 02 00 3c <c>"), "[MQTT-3.1.2-2]"),
    ("connect-reserved-flag", 0, 0, 0x81, frame(0x10, "<MQTT> 04 03 00 3c <c>"), "[MQTT-3.1.2-3]"),
    ("connect-will-qos3", 0, 0, 0x81, frame(0x10, "<MQTT> 04 1e 00 3c <c> <t> <p>"), "[MQTT-3.1.2-12]"),
    ("connect-will-qos-without-will", 0, 0, 0x82, frame(0x10, "<MQTT> 05 0a 00 3c 00 <c>"), "[MQTT-3.1.2-11]"),
    ("connect-password-without-user", 0, 0, 0x82, frame(0x10, "<MQTT> 04 42 00 3c <c> <pw>"), "[MQTT-3.1.2-22]"),
    ("connect-truncated-payload", 0, 0, 0x81, frame(0x10, "<MQTT> 04 c2 00 3c <c> <u>"), "password missing"),
    ("connect-receive-maximum-zero", 0, 0, 0x82, frame(0x10, CONNECT5.format("03 21 00 00")), "3.1.2.11.3"),
    ("connect-max-packet-size-zero", 0, 0, 0x82, frame(0x10, CONNECT5.format("05 27 00 00 00 00")), "3.1.2.11.4"),
    ("connect-auth-data-without-method", 0, 0, 0x82, frame(0x10, CONNECT5.format("04 16 00 01 aa")), "3.1.2.11.10"),
    ("connect-request-problem-info-2", 0, 0, 0x82, frame(0x10, CONNECT5.format("02 17 02")), "3.1.2.11.7"),
    ("connect-client-id-bad-utf8", 0, 0, 0x81, frame(0x10, "<MQTT> 04 02 00 3c 00 01 ff"), "[MQTT-3.1.3-4]"),
    ("connect-will-topic-wildcard", 0, 0, 0x82, frame(0x10, "<MQTT> 04 06 00 3c <c> <a/+> <p>"), "[MQTT-3.3.2-2]"),
    ("connack-reserved-flags", 4, 0, 0x81, frame(0x20, "80 00"), "[MQTT-3.2.2-1]"),
    ("puback-311-extra-byte", 4, 0, 0x81, frame(0x40, "00 0a 00"), "3.1.1 PUBACK is 2 bytes"),
    ("puback-bad-reason", 5, 0, 0x82, frame(0x40, "00 0a 92"), "[MQTT-3.4.2-1]"),
    ("subscribe-no-filters", 5, 0, 0x82, frame(0x82, "00 0a 00"), "[MQTT-3.8.3-2]"),
    ("subscribe-311-qos3", 4, 0, 0x81, frame(0x82, "00 0a <a> 03"), "[MQTT-3-8.3-4]"),
    ("subscribe-reserved-option-bits", 5, 0, 0x81, frame(0x82, "00 0a 00 <a> 80"), "[MQTT-3.8.3-5]"),
    ("subscribe-retain-handling-3", 5, 0, 0x82, frame(0x82, "00 0a 00 <a> 30"), "3.8.3.1"),
    ("subscribe-shared-no-local", 5, 0, 0x82, frame(0x82, "00 0a 00 <$share/g/a> 04"), "[MQTT-3.8.3-4]"),
    ("subscribe-sub-id-zero", 5, 0, 0x82, frame(0x82, "00 0a 02 0b 00 <a> 00"), "3.8.2.1.2"),
    ("subscribe-two-sub-ids", 5, 0, 0x82, frame(0x82, "00 0a 04 0b 01 0b 02 <a> 00"), "3.8.2.1.2"),
    ("subscribe-sub-id-overlong", 5, 0, 0x81, frame(0x82, "00 0a 03 0b 80 00 <a> 00"), "[MQTT-1.5.5-1]"),
    ("unsubscribe-no-filters", 4, 0, 0x82, frame(0xA2, "00 0a"), "[MQTT-3.10.3-2]"),
    ("suback-bad-code", 4, 0, 0x82, frame(0x90, "00 0a 03"), "[MQTT-3.9.3-2]"),
    ("unsuback-311-with-codes", 4, 0, 0x81, frame(0xB0, "00 0a 00"), "3.1.1 UNSUBACK has no payload"),
    ("pingreq-with-body", 5, 0, 0x81, frame(0xC0, "00"), "3.12: no variable header"),
    ("disconnect-bad-reason", 5, 0, 0x82, frame(0xE0, "84"), "[MQTT-3.14.2-1]"),
    ("auth-bad-reason", 5, 0, 0x82, frame(0xF0, "87 00"), "[MQTT-3.15.2-1]"),
    ("property-length-5-bytes", 5, 0, 0x81, frame(0xE0, "00 ff ff ff ff 01"), "property length varint"),
]

# name, session version, packets (a session: CONNECT seeds carry what follows)
VALID = [
    ("v311-session", 0, [frame(0x10, "<MQTT> 04 ce 00 0a <dev-1> <dead/dev-1> <gone> <alice> <s3cret>"),
                         frame(0x32, "<a/b> 00 0a 'hello'"), frame(0x82, "00 0b <a/+> 01 <c/#> 02"),
                         frame(0xC0, ""), frame(0xE0, "")]),
    ("v31-session", 0, [frame(0x10, "<MQIsdp> 03 02 00 3c <old-plc>"), frame(0x30, "<plc/t> '21.5'")]),
    ("v5-session", 0, [frame(0x10, "<MQTT> 05 ee 00 0a 08 11 00 00 01 00 21 00 10 <d> 05 18 00 00 00 05 <lwt> <x> <u> <p>"),
                       frame(0x3b, "<a/b> 00 07 31 01 01 02 00 00 0e 10 03 <text/plain> 08 <re/a> 09 00 02 ab cd "
                                   "0b 05 23 00 03 26 <k1> <v1> 0b 80 01 '{}'"),
                       frame(0x82, "00 0b 09 0b 05 26 <k> <v> <a/#> 1e <$share/g/b> 01"),
                       frame(0xE0, "04 05 11 00 00 00 00")]),
    ("v311-connack", 4, [frame(0x20, "01 00")]),
    ("v5-connack", 5, [frame(0x20, "00 00 18 12 <auto-1> 21 00 64 25 00 27 00 01 00 00 13 00 1e 2a 00")]),
    ("v311-publish-qos0", 4, [frame(0x31, "<plant/t> 'x'")]),
    ("v311-publish-qos2", 4, [frame(0x3c, "<x> 12 34 'payload'")]),
    ("v5-publish-alias", 5, [frame(0x32, "00 00 00 05 03 23 00 07 'v'")]),
    ("v311-acks", 4, [frame(0x40, "00 0a"), frame(0x50, "00 0b"), frame(0x62, "00 0b"), frame(0x70, "00 0b")]),
    ("v5-acks", 5, [frame(0x40, "00 0a"), frame(0x50, "00 0b 10"), frame(0x62, "00 0b 92 06 1f <why>"),
                    frame(0x70, "00 0b 00 07 26 <a> <b>")]),
    ("v311-subscribe", 4, [frame(0x82, "00 0a 00 03 61 2f 62 01 00 03 63 2f 64 02")]),
    ("v311-suback", 4, [frame(0x90, "00 0a 00 02 80")]),
    ("v5-suback", 5, [frame(0x90, "00 0a 05 1f <ok> 00 01 8f")]),
    ("v311-unsubscribe", 4, [frame(0xA2, "00 0a <a/b> <c/d>")]),
    ("v5-unsubscribe", 5, [frame(0xA2, "00 0a 07 26 <k> <v> <a/b> <c/+>")]),
    ("v311-unsuback", 4, [frame(0xB0, "00 0a")]),
    ("v5-unsuback", 5, [frame(0xB0, "00 0a 00 00 11")]),
    ("v311-ping", 4, [frame(0xC0, ""), frame(0xD0, "")]),
    ("v5-disconnect", 5, [frame(0xE0, "81 0c 1f <bad topic>")]),
    ("v5-auth", 5, [frame(0xF0, "18 0e 15 <SCRAM> 16 00 03 01 02 03"), frame(0xF0, "")]),
]


def main():
    if os.path.isdir(BAD_DIR):
        shutil.rmtree(BAD_DIR)
    os.makedirs(BAD_DIR)
    if os.path.isdir(CORPUS):
        for f in os.listdir(CORPUS):
            if f.startswith(("bad-", "valid-")):
                os.remove(os.path.join(CORPUS, f))
    os.makedirs(CORPUS, exist_ok=True)
    lines = ["# <name> <session version: 0 before CONNECT> <max packet size: 0 none> <MQTT 5 reason>  # why"]
    for name, ver, mx, rc, pkt, why in BAD:
        with open(os.path.join(BAD_DIR, name + ".bin"), "wb") as f:
            f.write(pkt)
        lines.append(f"{name} {ver} {mx} 0x{rc:02x}  # {why}")
        if mx == 0:  # the fuzz selector only knows "none" and 128
            with open(os.path.join(CORPUS, "bad-" + name), "wb") as f:
                f.write(bytes([SEL[ver]]) + pkt)
    with open(os.path.join(BAD_DIR, "INDEX"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for name, ver, pkts in VALID:
        with open(os.path.join(CORPUS, "valid-" + name), "wb") as f:
            f.write(bytes([SEL[ver]]) + b"".join(pkts))
    print(f"{len(BAD)} bad packets, {len(VALID)} valid seeds")


if __name__ == "__main__":
    main()
