"""A raw MQTT client for tests: builds exact packets (valid or deliberately
broken) and reads the server's answers with deadlines. Real clients (paho,
mosquitto_pub, libmosquitto) are used for everything a real client can do;
this is for what they cannot: malformed bytes, exact reason codes, replays."""
import socket
import ssl
import struct
import time

from tlib import tls as _tls

CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP = 1, 2, 3, 4, 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT = 8, 9, 10, 11, 12, 13, 14


def varint(n):
    out = bytearray()
    while True:
        b = n % 128
        n //= 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(b)) + b


def packet(ptype, flags, body):
    return bytes([(ptype << 4) | flags]) + varint(len(body)) + body


def props(items=b""):
    return varint(len(items)) + items


def connect(client_id="c", version=4, clean=True, keepalive=60, will=None, session_expiry=None,
            extra_props=b"", username=None, password=None):
    flags = 0x02 if clean else 0
    payload = s(client_id)
    will_props = b""
    if will:
        flags |= 0x04 | (will.get("qos", 0) << 3) | (0x20 if will.get("retain") else 0)
        if version == 5:
            wp = b""
            if "delay" in will:
                wp += b"\x18" + struct.pack(">I", will["delay"])
            will_props = props(wp)
        payload += will_props + s(will["topic"]) + s(will["payload"])
    if username is not None:
        flags |= 0x80
        payload += s(username)
    if password is not None:
        flags |= 0x40
        payload += s(password)
    body = s("MQTT") + bytes([version, flags]) + struct.pack(">H", keepalive)
    if version == 5:
        p = extra_props
        if session_expiry is not None:
            p += b"\x11" + struct.pack(">I", session_expiry)
        body += props(p)
    return packet(CONNECT, 0, body + payload)


def publish(topic, payload, qos=0, pid=1, version=4, dup=False, retain=False, prop_bytes=b""):
    flags = (qos << 1) | (0x08 if dup else 0) | (0x01 if retain else 0)
    body = s(topic)
    if qos:
        body += struct.pack(">H", pid)
    if version == 5:
        body += props(prop_bytes)
    return packet(PUBLISH, flags, body + (payload.encode() if isinstance(payload, str) else payload))


def pubrel(pid, version=4):
    return packet(PUBREL, 2, struct.pack(">H", pid))


def subscribe(pid, topic, version=4):
    body = struct.pack(">H", pid) + (props() if version == 5 else b"") + s(topic) + b"\x01"
    return packet(SUBSCRIBE, 2, body)


def disconnect(version=4, reason=0):
    if version == 5:
        return packet(DISCONNECT, 0, bytes([reason]) + props())
    return packet(DISCONNECT, 0, b"")


class Packet:
    def __init__(self, ptype, flags, body):
        self.type, self.flags, self.body = ptype, flags, body

    def __repr__(self):
        return f"Packet(type={self.type}, flags={self.flags}, body={self.body!r})"

    @property
    def packet_id(self):
        return struct.unpack(">H", self.body[:2])[0]

    def reason(self, version=5):
        """Reason code of an ack / DISCONNECT / CONNACK (0 when absent)."""
        if self.type == CONNACK:
            return self.body[1]
        if self.type == DISCONNECT:
            return self.body[0] if self.body else 0
        if self.type in (PUBACK, PUBREC, PUBREL, PUBCOMP):
            return self.body[2] if len(self.body) > 2 else 0
        if self.type in (SUBACK, UNSUBACK):
            off = 2
            if version == 5:
                n, used = read_varint(self.body[off:])
                off += used + n
            return list(self.body[off:])
        return None

    def v5_props(self):
        """Raw properties of a v5 CONNACK."""
        if self.type == CONNACK:
            n, used = read_varint(self.body[2:])
            return parse_props(self.body[2 + used:2 + used + n])
        return {}


def read_varint(b):
    n, mult = 0, 1
    for i, byte in enumerate(b[:4]):
        n += (byte & 0x7F) * mult
        if not byte & 0x80:
            return n, i + 1
        mult *= 128
    raise ValueError("bad varint")


def parse_props(b):
    out, i = {}, 0
    while i < len(b):
        pid = b[i]
        i += 1
        if pid in (0x12, 0x1F, 0x03, 0x08, 0x1A, 0x1C, 0x15):
            n = struct.unpack(">H", b[i:i + 2])[0]
            out[pid] = b[i + 2:i + 2 + n].decode()
            i += 2 + n
        elif pid in (0x21, 0x22, 0x13, 0x23):
            out[pid] = struct.unpack(">H", b[i:i + 2])[0]
            i += 2
        elif pid in (0x11, 0x27, 0x02, 0x18):
            out[pid] = struct.unpack(">I", b[i:i + 4])[0]
            i += 4
        elif pid == 0x26:
            k = struct.unpack(">H", b[i:i + 2])[0]
            key = b[i + 2:i + 2 + k]
            i += 2 + k
            v = struct.unpack(">H", b[i:i + 2])[0]
            out.setdefault(0x26, []).append((key, b[i + 2:i + 2 + v]))
            i += 2 + v
        else:
            out[pid] = b[i]
            i += 1
    return out


class Raw:
    """A client on a socket of its own: TLS (trusting the suite's CA) when tls
    is True, or when it is None and the suite runs over TLS (tlib/tls.py)."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0, tls=None):
        self.sock = _tls.connect(port, host, timeout, tls)
        self.buf = b""
        self.timeout = timeout

    def send(self, data):
        self.sock.sendall(data)

    def read(self, timeout=None):
        """Next packet, or None when the server closed the connection. Raises on timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            if len(self.buf) >= 2:
                try:
                    n, used = read_varint(self.buf[1:])
                    if len(self.buf) >= 1 + used + n:
                        first = self.buf[0]
                        body = self.buf[1 + used:1 + used + n]
                        self.buf = self.buf[1 + used + n:]
                        return Packet(first >> 4, first & 15, body)
                except ValueError:
                    pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no packet from the server in time")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError):  # TLS: an alert, or the end without close_notify
                chunk = b""
            if not chunk:
                return None
            self.buf += chunk

    def expect(self, ptype, timeout=None):
        p = self.read(timeout)
        assert p is not None, f"connection closed while waiting for packet type {ptype}"
        assert p.type == ptype, f"expected packet type {ptype}, got {p}"
        return p

    def closed(self, timeout=None):
        """True when the server closes the connection (after any packets, returned in a list)."""
        got = []
        while True:
            p = self.read(timeout)
            if p is None:
                return got
            got.append(p)

    def close(self):
        self.sock.close()


class TlsRaw(Raw):
    """Raw over TLS (python's ssl): ctx says what is verified and with which
    client certificate; server_hostname is checked against the server's."""

    def __init__(self, port, ctx, host="127.0.0.1", server_hostname="localhost", timeout=5.0, session=None):
        tcp = socket.create_connection((host, port), timeout=timeout)
        try:
            self.sock = ctx.wrap_socket(tcp, server_hostname=server_hostname, session=session)
        except BaseException:
            tcp.close()
            raise
        self.buf = b""
        self.timeout = timeout
