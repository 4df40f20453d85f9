"""tlib/tls.py: certificates made by the openssl command, and the suite's
TLS switch.

    Certs(dir)                   a directory of PEM files: make_ca(name),
                                 sign(cn, ca, san=..., days=...)
    ENABLED                      TRIB_MQTT_TLS=1 in the environment: the
                                 whole suite over TLS (ctest's
                                 integration.tls_suite.<name> entries)

With the switch on, every tlib Gateway has its plain MQTT listeners
(`mqtt.listener`, and each entry of `mqtt.listeners` without `tls`) made
TLS listeners (tls_config, applied to the configuration file at each
start), serving a certificate for 127.0.0.1, ::1 and localhost that a CA
made once per test process signs (suite_certs). Every MQTT client of tlib
and of the tests then speaks TLS and trusts that CA:

    connect(port, host)          a connected socket (tlib.mqttraw.Raw uses it)
    wrap(sock, host)             a socket the test connected, inside TLS
    paho(client)                 client.tls_set(...)
    mosquitto_args()             ["--cafile", CA] for mosquitto_pub / _sub
    loadgen_args()               ["-C", CA] for bench/loadgen (libmosquitto)

Each takes tls=None (the switch) or True / False, for a test that talks
to something other than the gateway's listener (Mosquitto itself, say).
With the switch off they do nothing, and the suite is what it was."""
import atexit
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading

ENABLED = os.environ.get("TRIB_MQTT_TLS", "") == "1"
SERVER_SAN = "IP:127.0.0.1,IP:::1,DNS:localhost"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=cwd)


class Certs:
    """PEM files in one directory: CAs (make_ca) and what they sign (sign).
    Keys are EC P-256, unencrypted; certificates are valid for 2 days."""

    def __init__(self, d):
        self.dir = d

    def path(self, name):
        return os.path.join(self.dir, name)

    def make_ca(self, name):
        """A self-signed CA, name.pem / name.key; returns the certificate's path."""
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=Tributary test {name}",
                cwd=self.dir)
        return self.path(f"{name}.pem")

    def sign(self, cn, ca, san=None, days="2"):
        """(cert, key) of CN cn signed by ca; days -1 makes it expired already."""
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{cn}.key",
                "-out", f"{cn}.csr", "-subj", f"/CN={cn}", cwd=self.dir)
        ext = []
        if san:
            with open(self.path(f"{cn}.ext"), "w") as f:
                f.write(f"subjectAltName={san}\n")
            ext = ["-extfile", f"{cn}.ext"]
        openssl("x509", "-req", "-in", f"{cn}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{cn}.pem", "-days", days, *ext, cwd=self.dir)
        return self.path(f"{cn}.pem"), self.path(f"{cn}.key")


_lock = threading.Lock()
_suite = None
_ctx = None


def suite_certs():
    """The suite's CA (.ca) and server certificate (.server: cert, key),
    made on first use, once per process, in a temp dir removed at exit."""
    global _suite
    with _lock:
        if _suite is None:
            c = Certs(tempfile.mkdtemp(prefix="trib-suite-tls-"))
            atexit.register(shutil.rmtree, c.dir, True)
            c.ca = c.make_ca("ca")
            c.server = c.sign("server", "ca", san=SERVER_SAN)
            _suite = c
        return _suite


def _on(tls):
    return ENABLED if tls is None else tls


# ---- the gateway's side --------------------------------------------------------

def _tls_map():
    cert, key = suite_certs().server
    return "{cert_file: %s, key_file: %s}" % (json.dumps(cert), json.dumps(key))


def _quoted(value):
    value = value.strip()
    return value if value[:1] in "\"'" else json.dumps(value)


def tls_config(text):
    """text (an edge.yaml) with every plain MQTT listener made a TLS one on
    the same address with the suite's certificate: `listener: ADDR` becomes
    `listeners: [{address: ADDR, tls: ...}]`, an entry of `listeners` without
    `tls` gets one; the rest is left as it is (line numbers move only where
    `listener` becomes two lines). Applying it twice changes nothing more.
    Only the block-style `mqtt:` section the tests write is understood; any
    other shape with a listener in it is an error, not a silent plain run."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^mqtt:\s*\S", line) and "listener" in line:
            raise AssertionError(f"tlib.tls: cannot make this mqtt section TLS: {line!r}")
        out.append(line)
        i += 1
        if not re.match(r"^mqtt:\s*(#.*)?$", line):
            continue
        # the mqtt section: up to the next line at column 0
        while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " #"):
            line = lines[i]
            m = re.match(r"^(\s+)listener:\s*(\S.*?)\s*$", line)
            if m:
                ind = m.group(1)
                out.append(f"{ind}listeners:")
                out.append(f"{ind}  - {{address: {_quoted(m.group(2))}, tls: {_tls_map()}}}")
                i += 1
                continue
            m = re.match(r"^(\s+)listeners:\s*(.*?)\s*$", line)
            if m and m.group(2) and not m.group(2).startswith("#"):
                raise AssertionError(f"tlib.tls: cannot make a flow list of listeners TLS: {line!r}")
            out.append(line)
            i += 1
            if not m:
                continue
            ind = len(m.group(1))
            # its entries: "- " lines deeper than listeners:, each with its continuation lines
            while i < len(lines):
                e = re.match(r"^(\s*)- (.*)$", lines[i])
                if not e or len(e.group(1)) <= ind:
                    break
                eind = len(e.group(1))
                entry = [lines[i]]
                i += 1
                while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) > eind:
                    entry.append(lines[i])
                    i += 1
                if not re.search(r"\btls\s*:", "\n".join(entry)):
                    first = e.group(2).rstrip()
                    if first.startswith("{"):
                        if not first.endswith("}") or len(entry) > 1:
                            raise AssertionError(f"tlib.tls: cannot make this listener TLS: {entry!r}")
                        entry[0] = f"{e.group(1)}- {first[:-1].rstrip()}, tls: {_tls_map()}}}"
                    else:
                        entry.append(" " * (eind + 2) + f"tls: {_tls_map()}")
                out.extend(entry)
    return "\n".join(out)


# ---- the clients' side ---------------------------------------------------------

def client_context():
    """An ssl context that trusts the suite's CA and checks the server's name."""
    global _ctx
    ca = suite_certs().ca
    with _lock:
        if _ctx is None:
            _ctx = ssl.create_default_context(cafile=ca)
        return _ctx


def wrap(sock, host="127.0.0.1", tls=None):
    """sock (connected) inside TLS (a BioSocket; the handshake is done when it
    returns) when tls, or the switch, says so; else sock itself."""
    return BioSocket(sock, host) if _on(tls) else sock


def connect(port, host="127.0.0.1", timeout=5.0, tls=None):
    """A socket connected to the gateway, inside TLS when tls, or the
    switch, says so (wrap)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        return wrap(s, host, tls)
    except BaseException:
        s.close()
        raise


def paho(client, tls=None):
    """client (paho.mqtt.client.Client) set to trust the suite's CA over TLS."""
    if _on(tls):
        client.tls_set(ca_certs=suite_certs().ca)
    return client


def mosquitto_args(tls=None):
    """Arguments for mosquitto_pub / mosquitto_sub (-h 127.0.0.1 is checked
    against the certificate's IP names)."""
    return ["--cafile", suite_certs().ca] if _on(tls) else []


def loadgen_args(tls=None):
    """Arguments for bench/loadgen and bench/devices (libmosquitto)."""
    return ["-C", suite_certs().ca] if _on(tls) else []


class BioSocket:
    """A TLS client over a plain socket through memory BIOs: what a test
    does to a TCP socket, it can do to this one, and the kernel sees the
    same writes.

    Why not ssl.SSLSocket: it writes a send's records one at a time, so a
    write the server cuts short in the middle (a packet over the size limit,
    say) fails on the client's side where a TCP socket's one write had
    already gone; and in non-blocking mode, once a write is left half done,
    OpenSSL wants the same write again and fails the connection for any
    other, which a flood cannot do. Here the records of each send are made
    in memory and handed to the socket in one write: sendall() as TCP's;
    send() on a non-blocking socket takes all of the data or, while the
    records of the last send have not all gone, none (BlockingIOError), so
    the stream stays whole packets. Nothing is read but the handshake until
    recv() is called: what the server sends waits in the kernel. Any other
    attribute (settimeout, setblocking, setsockopt, shutdown, close,
    fileno) is the socket's."""

    def __init__(self, sock, host="127.0.0.1"):
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = client_context().wrap_bio(self.inc, self.out, server_hostname=host)
        self.pending = b""
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionResetError("closed during the TLS handshake")
                self.inc.write(data)
        self.sock.sendall(self.out.read())

    def _push(self):
        """Hands the kernel what it takes of the records made."""
        while self.pending:
            try:
                n = self.sock.send(self.pending)
            except BlockingIOError:
                return
            self.pending = self.pending[n:]

    def send(self, data):
        """Takes all of data (its records made, handed to the kernel as it
        takes them) and returns len(data); or, while the records of an
        earlier send have not all gone, takes nothing and raises
        BlockingIOError: so the byte stream stays whole packets."""
        self._push()
        if self.pending:
            raise BlockingIOError("the last send's records are still waiting for the kernel")
        self.obj.write(data)
        self.pending = self.out.read()
        self._push()
        return len(data)

    def sendall(self, data):
        """On a blocking socket (a timeout, or none): everything, now."""
        self.obj.write(data)
        self.sock.sendall(self.pending + self.out.read())
        self.pending = b""

    def recv(self, n):
        """Up to n bytes: at least one, waiting for them as the socket's
        timeout says; then whatever else the records already read hold, as
        TCP's recv gives all that has arrived (b"" at the end)."""
        got = b""
        while len(got) < n:
            try:
                more = self.obj.read(n - len(got))
                if not more:
                    break  # the server's close_notify
                got += more
            except ssl.SSLWantReadError:
                if got:
                    break
                data = self.sock.recv(65536)
                if not data:
                    break
                self.inc.write(data)
            except ssl.SSLZeroReturnError:
                break
        return got

    def __getattr__(self, name):  # setblocking, settimeout, setsockopt, close, fileno, ...
        return getattr(self.sock, name)
