#!/usr/bin/python3
"""capture_clients.py: records what real MQTT clients send, as fuzz seeds.

The hand-written seeds in gen_fixtures.py follow our reading of the specs;
these follow what deployed clients actually put on the wire (mosquitto_pub
and mosquitto_sub 2.x, paho-mqtt), so the codec is tested against other
people's readings too. A throwaway broker on 127.0.0.1 answers each client
just enough for it to finish (CONNACK, PUBACK/PUBREC/PUBCOMP, SUBACK with one
matching PUBLISH, UNSUBACK, PINGRESP) and records every byte the client sent.
Each session is written to tests/fuzz/corpus/mqtt_codec/valid-client-<name>
with selector byte 0 (before CONNECT); test_mqtt_codec_fixtures.c then
checks every one decodes whole and round-trips.

Needs mosquitto-clients and python3-paho-mqtt; run it by hand when adding a
client, not in CI (the recorded files are committed).
"""
import os
import socket
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(ROOT, "tests/fuzz/corpus/mqtt_codec")
DEADLINE_S = 10


def read_packet(sock, buf):
    """Returns (packet bytes, rest) or (None, buf) when the peer closed."""
    while True:
        if len(buf) >= 2:
            rem, mult, i = 0, 1, 1
            while i < len(buf) and i <= 4:
                rem += (buf[i] & 0x7F) * mult
                mult *= 128
                if not buf[i] & 0x80:
                    total = 1 + i + rem
                    if len(buf) >= total:
                        return buf[:total], buf[total:]
                    break
                i += 1
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk


def mqtt_str(s):
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def serve(sock, record):
    buf, version = b"", 4
    while True:
        pkt, buf = read_packet(sock, buf)
        if pkt is None:
            return
        record.append(pkt)
        t, i = pkt[0] >> 4, 1
        while pkt[i] & 0x80:
            i += 1
        body = pkt[i + 1:]
        v5 = version == 5
        if t == 1:
            version = body[2 + body[1]] if body[:2] != b"\x00\x06" else 3
            sock.sendall(b"\x20\x03\x00\x00\x00" if version == 5 else b"\x20\x02\x00\x00")
        elif t == 3:
            qos = (pkt[0] >> 1) & 3
            tlen = int.from_bytes(body[:2], "big")
            pid = body[2 + tlen:4 + tlen]
            if qos == 1:
                sock.sendall(b"\x40\x02" + pid)
            elif qos == 2:
                sock.sendall(b"\x50\x02" + pid)
        elif t == 6:
            sock.sendall(b"\x70\x02" + body[:2])
        elif t == 8:
            pid, off = body[:2], 2
            if v5:
                off += 1 + body[2]  # property length < 128 in these sessions
            filt = body[off + 2:off + 2 + int.from_bytes(body[off:off + 2], "big")].decode()
            nfilters, p = 0, off
            while p < len(body):
                p += 2 + int.from_bytes(body[p:p + 2], "big") + 1
                nfilters += 1
            sock.sendall(bytes([0x90, 2 + (1 if v5 else 0) + nfilters]) + pid + (b"\x00" if v5 else b"") +
                         b"\x00" * nfilters)
            topic = filt.replace("#", "x").replace("+", "x")
            msg = mqtt_str(topic) + (b"\x00" if v5 else b"") + b"hello"
            sock.sendall(bytes([0x30, len(msg)]) + msg)
        elif t == 10:
            pid = body[:2]
            n = 0
            if v5:
                p = 3 + body[2]
                while p < len(body):
                    p += 2 + int.from_bytes(body[p:p + 2], "big")
                    n += 1
                sock.sendall(bytes([0xB0, 3 + n]) + pid + b"\x00" + b"\x00" * n)
            else:
                sock.sendall(b"\xb0\x02" + pid)
        elif t == 12:
            sock.sendall(b"\xd0\x00")
        elif t == 14:
            return


def capture(name, argv):
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(DEADLINE_S)
    port = lsock.getsockname()[1]
    cmd = [a.replace("{port}", str(port)) for a in argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    conn, _ = lsock.accept()
    conn.settimeout(DEADLINE_S)
    record = []
    serve(conn, record)
    conn.close()
    lsock.close()
    _, err = proc.communicate(timeout=DEADLINE_S)
    if proc.returncode != 0:
        sys.exit(f"{name}: client exited {proc.returncode}: {err.decode().strip()}")
    data = b"\x00" + b"".join(record)
    with open(os.path.join(CORPUS, "valid-client-" + name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(record)} packets, {len(data) - 1} bytes")


PAHO = """
import sys, paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes
v5 = sys.argv[2] == "5"
c = mqtt.Client(client_id="paho-" + sys.argv[2], protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311)
c.username_pw_set("user", "pass")
c.will_set("lwt/paho", b"gone", qos=1, retain=True)
c.connect("127.0.0.1", int(sys.argv[1]), keepalive=30)
props = None
if v5:
    props = Properties(PacketTypes.PUBLISH)
    props.MessageExpiryInterval = 60
    props.UserProperty = [("site", "A"), ("line", "3")]
    props.ContentType = "application/json"
c.loop_start()
c.publish("plant/paho/t", b'{"t": 21.5}', qos=2, properties=props).wait_for_publish(5)
c.subscribe([("plant/+/cmd", 1), ("plant/#", 0)])
c.unsubscribe("plant/#")
c.disconnect()
c.loop_stop()
"""

SESSIONS = [
    ("mosquitto-pub-v31", ["mosquitto_pub", "-p", "{port}", "-V", "mqttv31", "-i", "pub31", "-t", "a/b",
                           "-m", "hello", "-q", "1", "-u", "user", "-P", "pass"]),
    ("mosquitto-pub-v311", ["mosquitto_pub", "-p", "{port}", "-V", "mqttv311", "-i", "pub311", "-t", "plant/l3/t",
                            "-m", "21.5", "-q", "2", "-r", "--will-topic", "lwt/pub311", "--will-payload", "bye",
                            "--will-qos", "1"]),
    ("mosquitto-pub-v5", ["mosquitto_pub", "-p", "{port}", "-V", "mqttv5", "-i", "pub5", "-t", "plant/l3/p",
                          "-m", "{\"p\":7}", "-q", "1",
                          "-D", "connect", "session-expiry-interval", "30",
                          "-D", "connect", "receive-maximum", "10",
                          "-D", "connect", "user-property", "fw", "1.2",
                          "-D", "publish", "message-expiry-interval", "60",
                          "-D", "publish", "content-type", "application/json",
                          "-D", "publish", "response-topic", "reply/pub5",
                          "-D", "publish", "correlation-data", "c0ffee",
                          "-D", "publish", "payload-format-indicator", "1",
                          "-D", "publish", "user-property", "site", "A",
                          "-D", "publish", "user-property", "site", "B",
                          "-D", "disconnect", "session-expiry-interval", "0"]),
    ("mosquitto-sub-v311", ["mosquitto_sub", "-p", "{port}", "-V", "mqttv311", "-i", "sub311", "-t", "plant/+/t",
                            "-t", "alarms/#", "-q", "1", "-C", "1"]),
    ("mosquitto-sub-v5", ["mosquitto_sub", "-p", "{port}", "-V", "mqttv5", "-i", "sub5", "-t", "plant/l3/t",
                          "-q", "2", "-C", "1", "-U", "old/topic",
                          "-D", "subscribe", "subscription-identifier", "7",
                          "-D", "subscribe", "user-property", "k", "v"]),
    ("paho-v311", ["/usr/bin/python3", "-c", PAHO, "{port}", "4"]),
    ("paho-v5", ["/usr/bin/python3", "-c", PAHO, "{port}", "5"]),
]


def main():
    os.makedirs(CORPUS, exist_ok=True)
    for name, argv in SESSIONS:
        capture(name, argv)


if __name__ == "__main__":
    main()
