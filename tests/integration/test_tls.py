"""MQTT over TLS on the real binary, 127.0.0.1 only: mqtt.listeners with a
plain and a TLS listener at once; mosquitto_pub / mosquitto_sub and paho
(3.1.1 and 5.0) over TLS; what breaks one connection (garbage instead of a
ClientHello, a handshake that stalls, a malformed CONNECT inside TLS)
closes that one alone, counted; client certificates (required: none, one
of another CA, an expired one are refused) and the certificate's CN as the
user name for the ACL; session resumption; certificates reloaded at SIGHUP
while a connection stays; a certificate that does not load is exit 2; the
drain's goodbye inside TLS.

Certificates are made by the openssl command in a temp dir (tlib/tls.py's
Certs): a CA, a server certificate for 127.0.0.1 and localhost (SAN),
client certificates (CN plc-1; an expired one; one signed by another CA).

Not part of the suite's TLS run (TRIB_MQTT_TLS=1, which turns plain
listeners into TLS ones): this file is about TLS already, and needs its
plain listener beside the TLS one."""
import json
import re
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib import mqttraw as mr  # noqa: E402
from tlib import tls  # noqa: E402
from tlib.gateway import BIN, Gateway, wait_for, wal_dump  # noqa: E402

LOADGEN = os.path.join(os.environ.get("TRIB_BUILD_DIR", "build"), "bench", "loadgen")

ENV = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}
CERTS = None  # made once (setUpModule)


def make_certs(d):
    """A CA and what it signs, and a second CA nobody trusts, as PEM files in d."""
    c = tls.Certs(d)
    c.ca = c.make_ca("ca")
    c.make_ca("otherca")
    c.server_a = c.sign("server-a", "ca", san="IP:127.0.0.1,DNS:localhost")
    c.server_b = c.sign("server-b", "ca", san="IP:127.0.0.1,DNS:localhost")
    c.client = c.sign("plc-1", "ca")
    c.expired = c.sign("plc-old", "ca", days="-1")
    c.stranger = c.sign("plc-2", "otherca")
    return c


def setUpModule():
    global CERTS
    if tls.ENABLED:
        raise unittest.SkipTest("TRIB_MQTT_TLS=1 would make its plain listener TLS too; this file is TLS already")
    if not shutil.which("openssl"):
        raise unittest.SkipTest("no openssl command")
    CERTS = make_certs(tempfile.mkdtemp(prefix="trib-tls-"))


def tearDownModule():
    if CERTS:
        shutil.rmtree(CERTS.dir, ignore_errors=True)


def config(tls="", auth="", extra=""):
    """Listener 0 plain, listener 1 TLS with the server certificate at
    server.pem / server.key in the gateway's directory (copied there), and
    `tls` added to its tls mapping."""
    return f"""
edge: {{edge_name: e1, cluster_url: "http://127.0.0.1:1"}}
mqtt:
  listeners:
    - address: "127.0.0.1:0"
    - address: "127.0.0.1:0"
      tls: {{cert_file: server.pem, key_file: server.key{tls}}}
  connect_timeout_ms: 1000
  ingestion: {{batch_timeout_ms: 5}}
{extra}
  topic_mappings:
    - {{mqtt_pattern: "t/#", danube_topic: /e1/t}}
{auth}
wal: {{dir: ./wal, fsync: never}}
http: {{listener: "127.0.0.1:0"}}
log: {{format: json}}
"""


def gateway(tls="", auth="", extra="", server=None, files=()):
    g = Gateway(config(tls, auth, extra), env=ENV)
    cert, key = server or CERTS.server_a
    shutil.copy(cert, os.path.join(g.dir, "server.pem"))
    shutil.copy(key, os.path.join(g.dir, "server.key"))
    shutil.copy(CERTS.ca, os.path.join(g.dir, "ca.pem"))
    for name, text in files:
        write(os.path.join(g.dir, name), text)
    return g


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def client_ctx(cert=None, ca=None, **kw):
    ctx = ssl.create_default_context(cafile=ca or CERTS.ca)
    if cert:
        ctx.load_cert_chain(*cert)
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def stats(g):
    with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/stats", timeout=5) as r:
        return json.load(r)


def closed(g, reason):
    return stats(g)["connections"]["mqtt_closed"][reason]


def ports(g):
    p = g.mqtt_ports(2)
    assert g.mqtt_tls(2) == {0: False, 1: True}
    return p[0], p[1]


def tls_connect(port, version=5, cid="c1", ctx=None, **kw):
    """A TLS client past its CONNACK (code 0 asserted)."""
    c = mr.TlsRaw(port, ctx or client_ctx())
    c.send(mr.connect(cid, version=version, **kw))
    ack = c.expect(mr.CONNACK)
    assert ack.body[1] == 0, f"CONNACK {ack.body[1]:#x}"
    return c


def plain_connect(port, cid="plain"):
    c = mr.Raw(port, tls=False)
    c.send(mr.connect(cid, version=4))
    c.expect(mr.CONNACK)
    return c


def ping(c):
    c.send(mr.packet(mr.PINGREQ, 0, b""))
    c.expect(mr.PINGRESP)


def stored(g):
    return sorted(r["payload"] for r in wal_dump(os.path.join(g.dir, "wal"), "/e1/t"))


def mosquitto(tool, port, *args, version="mqttv311", host="localhost", cert=None):
    tls = ["--cafile", CERTS.ca] + (["--cert", cert[0], "--key", cert[1]] if cert else [])
    return subprocess.run([tool, "-h", host, "-p", str(port), "-V", version, *tls, *args],
                          capture_output=True, text=True, timeout=30)


def client_hello():
    """The first flight of a real TLS client, as bytes."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_ctx().wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def handshake_fails(port, ctx):
    """True when the TLS session cannot carry a CONNECT: the handshake, or
    (TLS 1.3: the server checks the client's certificate after the client
    is done) the first read, ends with the server's alert or close."""
    try:
        c = mr.TlsRaw(port, ctx)
    except (ssl.SSLError, ConnectionResetError):
        return True
    try:
        c.send(mr.connect("refused", version=4))
        return c.read() is None
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    finally:
        c.close()


class RealClients(unittest.TestCase):
    def test_mosquitto_pub_and_sub_over_tls_beside_a_plain_listener(self):
        """mosquitto_pub on the TLS listener (the server's name checked, as
        localhost and as 127.0.0.1, both SANs) and on the plain one, 3.1.1 and
        5.0; mosquitto_sub's TLS session works (its subscription is refused:
        an ingest gateway has no subscribers). Every message is stored."""
        with gateway() as g:
            plain, tls = ports(g)
            for version in ("mqttv311", "mqttv5"):
                for host in ("localhost", "127.0.0.1"):
                    r = mosquitto("mosquitto_pub", tls, "-q", "1", "-t", "t/tls", "-m", f"tls-{version}-{host}",
                                  version=version, host=host)
                    self.assertEqual(r.returncode, 0, r.stderr)
                r = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(plain), "-V", version, "-q", "1",
                                    "-t", "t/plain", "-m", f"plain-{version}"], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                r = mosquitto("mosquitto_sub", tls, "-t", "t/#", "-C", "1", "-W", "5", version=version)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("denied", r.stderr)
            # a client that does not trust the server's CA gives up (nothing is sent in the clear)
            r = subprocess.run(["mosquitto_pub", "-h", "localhost", "-p", str(tls), "--cafile",
                                CERTS.path("otherca.pem"), "-t", "t/x", "-m", "never"], capture_output=True,
                               text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(stored(g), sorted([f"tls-{v}-{h}" for v in ("mqttv311", "mqttv5")
                                                for h in ("localhost", "127.0.0.1")] +
                                               ["plain-mqttv311", "plain-mqttv5"]))

    def test_paho_over_tls_both_versions(self):
        import paho.mqtt.client as paho
        with gateway() as g:
            _, tls = ports(g)
            for proto, name in ((paho.MQTTv311, "311"), (paho.MQTTv5, "5")):
                got = []
                cl = paho.Client(client_id=f"paho-tls-{name}", protocol=proto)
                cl.tls_set(ca_certs=CERTS.ca)
                cl.on_connect = lambda c, u, f, rc, p=None: got.append(rc)
                cl.connect("localhost", tls)
                cl.loop_start()
                try:
                    wait_for(lambda: got, 10, what="CONNACK over TLS")
                    code = got[0] if isinstance(got[0], int) else got[0].value
                    self.assertEqual(code, 0)
                    info = cl.publish("t/paho", f"paho-{name}", qos=1)
                    info.wait_for_publish(10)
                    self.assertTrue(info.is_published())
                finally:
                    cl.disconnect()
                    cl.loop_stop()
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(stored(g), ["paho-311", "paho-5"])


class OneConnectionOnly(unittest.TestCase):
    def test_garbage_instead_of_a_client_hello(self):
        """An HTTP request on the TLS port: that socket is closed and counted
        tls_handshake, the log says why; a TLS client and a plain client
        connected before go on."""
        with gateway() as g:
            plain, tls = ports(g)
            good = tls_connect(tls, cid="good")
            other = plain_connect(plain)
            s = socket.create_connection(("127.0.0.1", tls), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            s.settimeout(5)
            self.assertEqual(s.recv(4096), b"", "closed, nothing answered")  # no HTTP, no MQTT
            s.close()
            wait_for(lambda: closed(g, "tls_handshake") == 1, 5, what="counted")
            ping(good)
            ping(other)
            good.send(mr.publish("t/after", "after-garbage", qos=1, pid=1, version=5))
            self.assertEqual(good.expect(mr.PUBACK).packet_id, 1)
            logs = [e for e in map(json.loads, filter(None, g.log().splitlines()))
                    if e.get("msg", "").startswith("TLS handshake failed")]
            self.assertEqual(len(logs), 1)
            self.assertIn("http request", logs[0]["why"])
            good.close()
            other.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_handshake_that_stalls_is_cut_at_connect_timeout(self):
        """Half a ClientHello, then silence: mqtt.connect_timeout_ms (1 s here)
        covers the handshake; the socket is closed, counted connect_timeout
        (it is not a failed handshake); a TLS client meanwhile is served."""
        with gateway() as g:
            _, tls = ports(g)
            hello = client_hello()
            s = socket.create_connection(("127.0.0.1", tls), timeout=10)
            t0 = time.monotonic()
            s.sendall(hello[:len(hello) // 2])
            good = tls_connect(tls, cid="meanwhile")
            s.settimeout(10)
            self.assertEqual(s.recv(4096), b"")
            took = time.monotonic() - t0
            self.assertGreaterEqual(took, 0.9)
            self.assertLess(took, 5.0)
            s.close()
            wait_for(lambda: closed(g, "connect_timeout") == 1, 5, what="counted")
            self.assertEqual(closed(g, "tls_handshake"), 0)
            ping(good)
            good.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_malformed_connect_inside_tls(self):
        """A session that completes its handshake (python's ssl) and then
        sends a CONNECT with an overlong length: that connection closes,
        counted malformed; another TLS connection is not disturbed."""
        with gateway() as g:
            _, tls = ports(g)
            good = tls_connect(tls, cid="good")
            bad = mr.TlsRaw(tls, client_ctx())
            bad.send(b"\x10\xff\xff\xff\xff\x7f")
            self.assertEqual(bad.closed(), [])
            bad.close()
            wait_for(lambda: closed(g, "malformed") == 1, 5, what="counted")
            self.assertEqual(closed(g, "tls_handshake"), 0)
            ping(good)
            good.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_connect_and_publish_in_one_write_wait_for_the_password_check(self):
        """Over TLS, a CONNECT and a PUBLISH in one write with a password file:
        the broker stops reading while the password is checked, and the
        PUBLISH, already decrypted, is answered once it is right."""
        pw = CERTS.path("passwd")
        if not os.path.exists(pw):
            subprocess.run(["mosquitto_passwd", "-c", "-b", pw, "alice", "wonderland"], check=True,
                           capture_output=True, timeout=30)
        with gateway(auth=f"auth: {{password_file: {pw}}}") as g:
            _, tls = ports(g)
            c = mr.TlsRaw(tls, client_ctx())
            c.send(mr.connect("pipe", version=5, username="alice", password="wonderland") +
                   mr.publish("t/pipe", "piped", qos=1, pid=7, version=5))
            self.assertEqual(c.expect(mr.CONNACK).body[1], 0)
            self.assertEqual(c.expect(mr.PUBACK).packet_id, 7)
            c.close()
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(stored(g), ["piped"])

    def test_sessions_resume(self):
        """A second connection with the first one's session resumes it (the
        server's cache / TLS 1.3 ticket): no full handshake."""
        with gateway() as g:
            _, tls = ports(g)
            ctx = client_ctx()
            first = tls_connect(tls, cid="first", ctx=ctx)
            ping(first)  # TLS 1.3's ticket comes after the handshake: read something first
            session = first.sock.session
            first.close()
            again = mr.TlsRaw(tls, ctx, session=session)
            self.assertTrue(again.sock.session_reused)
            again.send(mr.connect("again", version=5))
            self.assertEqual(again.expect(mr.CONNACK).body[1], 0)
            again.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_min_version_refuses_older_clients(self):
        with gateway(tls=', min_version: "1.3"') as g:
            _, tls = ports(g)
            self.assertTrue(handshake_fails(tls, client_ctx(maximum_version=ssl.TLSVersion.TLSv1_2)))
            c = tls_connect(tls, ctx=client_ctx(minimum_version=ssl.TLSVersion.TLSv1_3))
            self.assertEqual(c.sock.version(), "TLSv1.3")
            c.close()
            wait_for(lambda: closed(g, "tls_handshake") == 1, 5, what="counted")
            self.assertEqual(g.stop(), 0, g.log())


class ReadCoalescing(unittest.TestCase):
    def test_a_qos0_flood_over_tls_is_read_in_pauses_and_loses_nothing(self):
        """tls.read_coalesce_ms (default 1): a TLS client (libmosquitto:
        bench/loadgen) writing QoS 0 PUBLISHes back to back is read in pauses, counted
        by its listener (/stats listeners[].tls_read_pauses and
        tributary_mqtt_tls_read_pauses_total); nothing it sent is lost, and
        the plain listener counts none. With read_coalesce_ms: 0 the same
        flood is never paused."""
        n = 3000
        for coalesce, want_pauses in (("", True), (", read_coalesce_ms: 0", False)):
            with gateway(tls=coalesce) as g:
                plain, tls = ports(g)
                # libmosquitto writes each PUBLISH as it is made, here paced at 5,000 a second
                # (unpaced, a gateway slower than its client reads 16 KiB at a time and rightly
                # never pauses); its QoS 1 barrier returns once everything before it was read
                r = subprocess.run([LOADGEN, "-p", str(tls), "-c", "1", "-n", str(n), "-s", "64", "-q", "0",
                                    "-r", "5000", "-t", "t/lg", "-C", CERTS.ca],
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                def by():
                    return {l["listener"]: l["tls_read_pauses"] for l in stats(g)["listeners"]}

                def metric():
                    text = urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/metrics", timeout=5).read()
                    m = re.search(rf'tributary_mqtt_tls_read_pauses_total{{listener="127.0.0.1:{tls}"}} (\d+)\n',
                                  text.decode())
                    return int(m.group(1)) if m else None

                if want_pauses:  # /stats and /metrics are rendered at most every 250 ms: polled
                    wait_for(lambda: by()[f"127.0.0.1:{tls}"] > 0, 5, what=f"pauses counted: {by()}")
                    wait_for(lambda: metric() == by()[f"127.0.0.1:{tls}"], 5,
                             what=f"/metrics {metric()} as /stats {by()}")
                else:
                    self.assertEqual(by()[f"127.0.0.1:{tls}"], 0, "read_coalesce_ms: 0 paused")
                self.assertEqual(by()[f"127.0.0.1:{plain}"], 0)
                self.assertEqual(g.stop(), 0, g.log())
                self.assertEqual(len(wal_dump(os.path.join(g.dir, "wal"), "/e1/t")), n + 1, "the flood and its barrier")


class Shutdown(unittest.TestCase):
    def test_sigterm_says_goodbye_over_tls(self):
        """SIGTERM with a TLS client connected and another one mid-handshake:
        the first gets its DISCONNECT 0x8B (Server shutting down) inside TLS,
        the second is closed, and the gateway exits 0 (under the sanitizers:
        nothing leaked)."""
        g = gateway().start()
        try:
            _, tls = ports(g)
            c = tls_connect(tls, cid="stays")
            half = socket.create_connection(("127.0.0.1", tls), timeout=10)
            half.sendall(client_hello()[:50])
            g.proc.send_signal(signal.SIGTERM)
            p = c.read(10)
            self.assertEqual((p.type, p.reason()), (mr.DISCONNECT, 0x8B))
            self.assertIsNone(c.read(10))
            half.settimeout(10)
            self.assertEqual(half.recv(100), b"")
            c.close()
            half.close()
            self.assertEqual(g.proc.wait(20), 0, g.log())  # the SIGTERM's drain, not a second signal
            g.stop()
        finally:
            g.__exit__()


class ClientCertificates(unittest.TestCase):
    def test_require_client_cert_refuses_none_a_stranger_and_an_expired_one(self):
        """require_client_cert: mosquitto_pub with the CA's client certificate
        gets in; without one, with one another CA signed, with an expired
        one, the handshake fails (each counted tls_handshake, logged with the
        reason) and nothing is stored."""
        with gateway(tls=", ca_file: ca.pem, require_client_cert: true") as g:
            plain, tls = ports(g)
            r = mosquitto("mosquitto_pub", tls, "-q", "1", "-t", "t/cert", "-m", "with-cert", cert=CERTS.client)
            self.assertEqual(r.returncode, 0, r.stderr)
            for cert in (None, CERTS.stranger, CERTS.expired):
                r = mosquitto("mosquitto_pub", tls, "-q", "1", "-t", "t/cert", "-m", "refused", cert=cert)
                self.assertNotEqual(r.returncode, 0, f"{cert}: {r.stdout}")
            self.assertTrue(handshake_fails(tls, client_ctx()))
            self.assertTrue(handshake_fails(tls, client_ctx(cert=CERTS.stranger)))
            self.assertTrue(handshake_fails(tls, client_ctx(cert=CERTS.expired)))
            wait_for(lambda: closed(g, "tls_handshake") == 6, 10, what="six refusals counted")
            log = g.log()
            self.assertIn("certificate has expired", log)
            self.assertIn("unable to get local issuer certificate", log)
            self.assertIn("peer did not return a certificate", log)
            c = tls_connect(tls, ctx=client_ctx(cert=CERTS.client))
            c.close()
            plain_connect(plain).close()  # the plain listener asks for nothing
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(stored(g), ["with-cert"])

    def test_the_certificate_cn_is_the_user_name_for_the_acl(self):
        """use_identity_as_username: the CN (plc-1) is the user name, whatever
        the CONNECT says (its user name and password are not checked against
        the password file); the ACL lets plc-1 write t/plc-1/# only."""
        pw = CERTS.path("passwd-cn")
        subprocess.run(["mosquitto_passwd", "-c", "-b", pw, "alice", "wonderland"], check=True,
                       capture_output=True, timeout=30)
        auth = f"auth: {{password_file: {pw}, acl_file: acl}}"
        with gateway(tls=", ca_file: ca.pem, require_client_cert: true, use_identity_as_username: true",
                     auth=auth, files=(("acl", "user plc-1\ntopic write t/plc-1/#\n"),)) as g:
            _, tls = ports(g)
            c = tls_connect(tls, cid="cn", ctx=client_ctx(cert=CERTS.client), username="mallory", password="x")
            c.send(mr.publish("t/plc-1/temp", "mine", qos=1, pid=1, version=5))
            self.assertEqual(c.expect(mr.PUBACK).reason(), 0)
            c.send(mr.publish("t/other/temp", "not-mine", qos=1, pid=2, version=5))
            ack = c.expect(mr.PUBACK)
            self.assertEqual((ack.packet_id, ack.reason()), (2, 0x87), "denied by the ACL")
            c.close()
            # a client without a user name gets the same: its certificate names it
            c = tls_connect(tls, version=4, cid="cn-311", ctx=client_ctx(cert=CERTS.client))
            c.send(mr.publish("t/plc-1/x", "mine-311", qos=1, pid=3))
            self.assertEqual(c.expect(mr.PUBACK).packet_id, 3)
            c.close()
            # counted by the listener the client came in by: an operator sees which door it was
            by = lambda: {l["listener"]: (l["tls"], l["publish_denied"]) for l in stats(g)["listeners"]}  # noqa: E731
            plain, _ = ports(g)
            want = {f"127.0.0.1:{plain}": (False, 0), f"127.0.0.1:{tls}": (True, 1)}
            wait_for(lambda: by() == want, 5, what=f"the denial counted on the TLS listener: {by()}")
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/metrics", timeout=5).read().decode()
            self.assertIn(f'tributary_mqtt_publish_denied_total{{listener="127.0.0.1:{tls}"}} 1\n', metrics)
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(stored(g), ["mine", "mine-311"])


class Certificates(unittest.TestCase):
    def peer_cn(self, port):
        c = mr.TlsRaw(port, client_ctx())
        cn = dict(x[0] for x in c.sock.getpeercert()["subject"])["commonName"]
        return c, cn

    def test_sighup_reloads_the_certificate_and_keeps_connections(self):
        """The certificate files are replaced and SIGHUP sent: new handshakes
        get the new certificate; a connection made before stays, on the old
        one. A certificate that does not load at a later SIGHUP keeps the one
        in force, and the log names the file. A changed tls key of the same
        listener (min_version) applies at SIGHUP too."""
        with gateway(server=CERTS.server_a) as g:
            _, tls = ports(g)
            kept, cn = self.peer_cn(tls)
            self.assertEqual(cn, "server-a")
            kept.send(mr.connect("kept", version=5))
            kept.expect(mr.CONNACK)
            shutil.copy(CERTS.server_b[0], os.path.join(g.dir, "server.pem"))
            shutil.copy(CERTS.server_b[1], os.path.join(g.dir, "server.key"))
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "SIGHUP: reload done" in g.log(), 10, what="the reload")
            self.assertIn("mqtt TLS certificate reloaded", g.log())
            fresh, cn = self.peer_cn(tls)
            self.assertEqual(cn, "server-b", "a new handshake sees the new certificate")
            fresh.close()
            ping(kept)
            self.assertEqual(dict(x[0] for x in kept.sock.getpeercert()["subject"])["commonName"], "server-a")
            # a broken certificate: the reload is refused, server-b stays
            with open(os.path.join(g.dir, "server.pem"), "w") as f:
                f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "TLS certificate or key does not load" in g.log(), 10, what="the refusal")
            self.assertIn("mqtt.listeners[1].tls.cert_file", g.log())
            self.assertIn("server.pem", g.log())
            fresh, cn = self.peer_cn(tls)
            self.assertEqual(cn, "server-b", "the certificate in force stays")
            fresh.close()
            ping(kept)
            # the listener's tls keys apply at SIGHUP too (same listeners): min_version 1.3
            shutil.copy(CERTS.server_b[0], os.path.join(g.dir, "server.pem"))
            mr.TlsRaw(tls, client_ctx(maximum_version=ssl.TLSVersion.TLSv1_2)).close()  # 1.2 still works
            with open(g.config) as f:
                text = f.read()
            with open(g.config, "w") as f:
                f.write(text.replace("key_file: server.key", 'key_file: server.key, min_version: "1.3"'))
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: g.log().count("SIGHUP: reload done") == 2, 10, what="the reload")  # (the refused one is not done)
            self.assertIn("mqtt.listeners[1].tls.min_version", g.log())
            self.assertNotIn("need a restart", g.log())
            self.assertTrue(handshake_fails(tls, client_ctx(maximum_version=ssl.TLSVersion.TLSv1_2)))
            ping(kept)
            kept.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_certificate_that_does_not_load_is_exit_2(self):
        """At start, from `tributary check` and `tributary run`: exit 2, the
        message names the key and the file; so does a key of another
        certificate."""
        for what, fix, needle in (
                ("missing", lambda d: os.remove(os.path.join(d, "server.pem")), "No such file"),
                ("not PEM", lambda d: write(os.path.join(d, "server.pem"), "hello\n"), "no certificate could be loaded"),
                ("another key", lambda d: shutil.copy(CERTS.client[1], os.path.join(d, "server.key")),
                 "is not the key of")):
            g = gateway()
            fix(g.dir)
            key = "tls.key_file" if what == "another key" else "tls.cert_file"
            for cmd in ("check", "run"):
                r = subprocess.run([BIN, cmd, "-c", g.config], capture_output=True, text=True, timeout=30,
                                   cwd=g.dir, env={**os.environ, **ENV})
                self.assertEqual(r.returncode, 2, f"{what} {cmd}: {r.stderr}")
                self.assertIn(f"mqtt.listeners[1].{key}", r.stderr)
                self.assertIn("server.", r.stderr)
                self.assertIn(needle, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
