"""The ops endpoint over TLS (http.tls) on the real binary, 127.0.0.1 only:
/healthz, /metrics and /stats over https with urllib and http.client
trusting the test's CA (keep-alive included); what breaks one connection
(a plain HTTP request on the TLS port, garbage instead of a ClientHello, a
handshake that stalls, cut at the request deadline) closes that one alone,
counted; a required client certificate; the bearer token inside TLS;
SIGHUP with a new certificate (new handshakes see it, an established
keep-alive connection goes on, a broken one refuses the reload); a
certificate that does not load is exit 2; `tributary status` over https
(--cafile, -c, --cert/--key, --token-file).

Certificates are made by the openssl command in a temp dir, by
test_tls.py's generator: a CA, server certificates for 127.0.0.1 and
localhost (SAN), a client certificate (CN plc-1)."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import BIN, Gateway, run_cli, wait_for  # noqa: E402
from test_tls import client_hello, make_certs  # noqa: E402  (the same certificates as the MQTT side's tests)
import test_tls  # noqa: E402

ENV = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}
CERTS = None
TOKEN = "https-token-0123456789abcdef"


def setUpModule():
    global CERTS
    if not shutil.which("openssl"):
        raise unittest.SkipTest("no openssl command")
    CERTS = make_certs(tempfile.mkdtemp(prefix="trib-https-"))
    test_tls.CERTS = CERTS  # client_hello() reads its module's CERTS


def tearDownModule():
    if CERTS:
        shutil.rmtree(CERTS.dir, ignore_errors=True)


def config(tls="", http_extra=""):
    return f"""
edge: {{edge_name: e1, cluster_url: "http://127.0.0.1:1"}}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {{mqtt_pattern: "t/#", danube_topic: /e1/t}}
wal: {{dir: ./wal, fsync: never}}
http:
  listener: "127.0.0.1:0"
  tls: {{cert_file: http.pem, key_file: http.key{tls}}}
{http_extra}
log: {{format: json}}
"""


def gateway(tls="", http_extra="", server=None, token=False):
    g = Gateway(config(tls, http_extra), env=ENV)
    cert, key = server or CERTS.server_a
    shutil.copy(cert, os.path.join(g.dir, "http.pem"))
    shutil.copy(key, os.path.join(g.dir, "http.key"))
    shutil.copy(CERTS.ca, os.path.join(g.dir, "ca.pem"))
    if token:
        with open(os.path.join(g.dir, "token"), "w") as f:
            f.write(TOKEN + "\n")
    return g


def ctx(cert=None):
    c = ssl.create_default_context(cafile=CERTS.ca)
    if cert:
        c.load_cert_chain(*cert)
    return c


def get(port, path, context=None, token=None, host="127.0.0.1", timeout=5):
    """(status, body) of GET https://host:port/path (urllib; HTTP errors are answers too)."""
    req = urllib.request.Request(f"https://{host}:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context or ctx()) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, name, context=None):
    body = get(port, "/metrics", context)[1]
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", body, re.M)
    if not m:
        raise AssertionError(f"{name} not in /metrics")
    return float(m.group(1))


def peer_cn(sock):
    return dict(x[0] for x in sock.getpeercert()["subject"])["commonName"]


def keepalive(port, context=None):
    """An http.client HTTPS connection, past one request (so its socket is open)."""
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context or ctx())
    c.request("GET", "/healthz")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, b"ok\n")
    return c


def again(c, path="/healthz"):
    """Another request on c's socket (asserted not to have reconnected)."""
    sock = c.sock
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    assert c.sock is sock, "http.client reconnected: the kept-alive connection was closed"
    return r.status, body


def handshake_refused(port, context):
    """True when a TLS session cannot carry a request: the handshake, or
    (TLS 1.3: the server checks the client's certificate after the client
    is done) the first read, ends with the server's alert or close."""
    try:
        s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                                server_hostname="127.0.0.1")
    except (ssl.SSLError, ConnectionResetError):
        return True
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(100) == b""
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    finally:
        s.close()


class Serving(unittest.TestCase):
    def test_probes_metrics_and_stats_over_https_with_keep_alive(self):
        """urllib trusting the CA gets /healthz, /readyz, /metrics, /stats
        (by IP and by name, both in the certificate); http.client keeps one
        connection for several requests; the log says the endpoint is TLS
        and names its certificate."""
        with gateway() as g:
            port = g.http_port()
            g.wait_log('"msg":"bootstrap complete"')
            self.assertEqual(get(port, "/healthz"), (200, "ok\n"))
            self.assertEqual(get(port, "/healthz", host="localhost"), (200, "ok\n"))
            self.assertEqual(get(port, "/readyz")[0], 200)
            status, body = get(port, "/metrics")
            self.assertEqual(status, 200)
            self.assertIn("tributary_http_tls_handshake_failures_total 0", body)
            self.assertEqual(json.loads(get(port, "/stats")[1])["edge"], "e1")
            c = keepalive(port)
            for path in ("/metrics", "/stats", "/healthz"):
                self.assertEqual(again(c, path)[0], 200)
            c.close()
            log = g.log()
            self.assertRegex(log, r'"msg":"http listening".*"tls":true')
            self.assertRegex(log, r'"msg":"http TLS certificate".*"subject":"server-a"')
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_client_that_does_not_trust_the_certificate_gives_up(self):
        with gateway() as g:
            port = g.http_port()
            with self.assertRaises(urllib.error.URLError) as e:
                get(port, "/healthz", context=ssl.create_default_context(cafile=CERTS.path("otherca.pem")))
            self.assertIsInstance(e.exception.reason, ssl.SSLCertVerificationError)
            self.assertEqual(get(port, "/healthz"), (200, "ok\n"))
            self.assertEqual(g.stop(), 0, g.log())


class OneConnectionOnly(unittest.TestCase):
    def test_a_plain_http_request_on_the_tls_port_fails_cleanly(self):
        """http:// on the HTTPS port: no answer in clear (the handshake fails
        on "http request" and the socket closes), counted and logged; the
        endpoint goes on serving https, and an established connection too."""
        with gateway() as g:
            port = g.http_port()
            kept = keepalive(port)
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            got = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
            s.close()
            self.assertNotIn(b"HTTP/1.1", got, "nothing answered in clear")
            self.assertLess(len(got), 64, "an alert at most")
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError, urllib.error.URLError)):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
            wait_for(lambda: metric(port, "tributary_http_tls_handshake_failures_total") == 2, 5, what="counted")
            self.assertEqual(again(kept)[0], 200)
            kept.close()
            logs = [e for e in map(json.loads, filter(None, g.log().splitlines()))
                    if e.get("msg", "").startswith("http TLS handshake failed")]
            self.assertEqual(len(logs), 2)
            self.assertIn("http request", logs[0]["why"])
            self.assertEqual(g.stop(), 0, g.log())

    def test_garbage_instead_of_a_client_hello_closes_only_that_connection(self):
        with gateway() as g:
            port = g.http_port()
            kept = keepalive(port)
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(os.urandom(64) + b"\x00" * 512)
            s.settimeout(5)
            while s.recv(4096):
                pass  # the alert, if any, then the end
            s.close()
            wait_for(lambda: metric(port, "tributary_http_tls_handshake_failures_total") == 1, 5, what="counted")
            self.assertEqual(again(kept)[0], 200, "the kept-alive connection goes on")
            self.assertEqual(get(port, "/healthz"), (200, "ok\n"), "and new ones are served")
            kept.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_stalled_handshake_is_cut_at_the_request_deadline(self):
        """Half a ClientHello, then silence: the request deadline (5 s from
        the accept) covers the handshake; the socket is closed, counted
        timeouts{kind="handshake"} and not as a failed handshake; the
        endpoint answers meanwhile."""
        with gateway() as g:
            port = g.http_port()
            hello = client_hello()
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            t0 = time.monotonic()
            s.sendall(hello[:len(hello) // 2])
            self.assertEqual(get(port, "/healthz"), (200, "ok\n"), "served meanwhile")
            s.settimeout(10)
            self.assertEqual(s.recv(4096), b"", "closed, nothing answered")
            took = time.monotonic() - t0
            s.close()
            self.assertGreaterEqual(took, 4.9)
            self.assertLess(took, 6.5)
            wait_for(lambda: metric(port, 'tributary_http_timeouts_total{kind="handshake"}') == 1, 5,
                     what="counted")
            self.assertEqual(metric(port, 'tributary_http_timeouts_total{kind="request"}'), 0)
            self.assertEqual(metric(port, "tributary_http_tls_handshake_failures_total"), 0)
            self.assertEqual(g.stop(), 0, g.log())


class ClientCertificates(unittest.TestCase):
    def test_require_client_cert_refuses_a_client_without_one(self):
        """http.tls.require_client_cert with the CA in ca_file: a client with
        the CA's certificate is served, one without (or with another CA's)
        is refused at the handshake, counted; `tributary status` gets in
        with --cert/--key."""
        with gateway(tls=", ca_file: ca.pem, require_client_cert: true") as g:
            port = g.http_port()
            self.assertEqual(get(port, "/healthz", context=ctx(cert=CERTS.client)), (200, "ok\n"))
            self.assertTrue(handshake_refused(port, ctx()))
            self.assertTrue(handshake_refused(port, ctx(cert=CERTS.stranger)))
            wait_for(lambda: metric(port, "tributary_http_tls_handshake_failures_total", ctx(cert=CERTS.client)) == 2,
                     5, what="two refusals counted")
            self.assertIn("peer did not return a certificate", g.log())
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.ca)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("TLS with the gateway", r.stderr)
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.ca,
                        "--cert", CERTS.client[0], "--key", CERTS.client[1])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("tributary "), r.stdout)
            self.assertEqual(g.stop(), 0, g.log())


class Token(unittest.TestCase):
    def test_the_bearer_token_works_inside_tls(self):
        with gateway(http_extra="  auth_token_file: token", token=True) as g:
            port = g.http_port()
            self.assertEqual(get(port, "/stats")[0], 401)
            self.assertEqual(get(port, "/stats", token=TOKEN)[0], 200)
            self.assertEqual(get(port, "/healthz"), (200, "ok\n"), "the probes stay open")
            token_file = os.path.join(g.dir, "token")
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.ca)
            self.assertEqual(r.returncode, 1)
            self.assertIn("--token-file", r.stderr)
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.ca, "--token-file", token_file)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(g.stop(), 0, g.log())


class Status(unittest.TestCase):
    def test_status_over_https(self):
        """--http https://... --cafile; -c with the gateway's file (HTTPS from
        its http.tls, the address from http.listener); --json; a wrong CA,
        and a plain http:// to the TLS port, fail with why (exit 1);
        --cafile on a plain address is bad usage (exit 2)."""
        with gateway() as g:
            port = g.http_port()
            g.wait_log('"msg":"bootstrap complete"')
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.ca)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout.splitlines()[0], r"^tributary \d+\.\d+\.\d+  edge e1  up \S+  ready")
            r = run_cli("status", "--json", "--http", f"https://localhost:{port}", "--cafile", CERTS.ca)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["edge"], "e1")
            # -c: the file's http.listener is port 0 here, so give the bound one in a copy
            cfg = os.path.join(g.dir, "status.yaml")
            with open(g.config) as f:
                text = f.read().replace('listener: "127.0.0.1:0"\n  tls', f'listener: "127.0.0.1:{port}"\n  tls')
            with open(cfg, "w") as f:
                f.write(text)
            r = subprocess.run([BIN, "status", "-c", cfg, "--cafile", CERTS.ca], capture_output=True, text=True,
                               timeout=30, cwd=g.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run_cli("status", "--http", f"https://127.0.0.1:{port}", "--cafile", CERTS.path("otherca.pem"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("unable to get local issuer certificate", r.stderr)
            r = run_cli("status", "--http", f"127.0.0.1:{port}")
            self.assertEqual(r.returncode, 1)
            self.assertIn("https://", r.stderr)
            r = run_cli("status", "--http", f"127.0.0.1:{port}", "--cafile", CERTS.ca)
            self.assertEqual(r.returncode, 2)
            self.assertEqual(g.stop(), 0, g.log())


class Certificates(unittest.TestCase):
    def test_sighup_reloads_the_certificate_and_keeps_connections(self):
        """The certificate files are replaced and SIGHUP sent: new handshakes
        get the new certificate; a keep-alive connection made before goes on,
        on the old one. A certificate that does not load at a later SIGHUP
        refuses the reload: the log names http.tls.cert_file and the file,
        and the certificate in force stays. A changed http.tls key
        (min_version) applies at SIGHUP too."""
        with gateway(server=CERTS.server_a) as g:
            port = g.http_port()
            kept = keepalive(port)
            self.assertEqual(peer_cn(kept.sock), "server-a")
            shutil.copy(CERTS.server_b[0], os.path.join(g.dir, "http.pem"))
            shutil.copy(CERTS.server_b[1], os.path.join(g.dir, "http.key"))
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "SIGHUP: reload done" in g.log(), 10, what="the reload")
            self.assertIn("http TLS certificate reloaded", g.log())
            fresh = keepalive(port)
            self.assertEqual(peer_cn(fresh.sock), "server-b", "a new handshake sees the new certificate")
            fresh.close()
            self.assertEqual(again(kept), (200, b"ok\n"), "the established connection goes on")
            self.assertEqual(peer_cn(kept.sock), "server-a")
            # a broken certificate: the reload is refused, server-b stays
            with open(os.path.join(g.dir, "http.pem"), "w") as f:
                f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "TLS certificate or key does not load" in g.log(), 10, what="the refusal")
            self.assertIn("http.tls.cert_file", g.log())
            self.assertIn("http.pem", g.log())
            fresh = keepalive(port)
            self.assertEqual(peer_cn(fresh.sock), "server-b", "the certificate in force stays")
            fresh.close()
            self.assertEqual(again(kept)[0], 200)
            # the endpoint's tls keys apply at SIGHUP: min_version 1.3
            shutil.copy(CERTS.server_b[0], os.path.join(g.dir, "http.pem"))
            old = ctx()
            old.maximum_version = ssl.TLSVersion.TLSv1_2
            keepalive(port, old).close()  # 1.2 still works
            with open(g.config) as f:
                text = f.read()
            with open(g.config, "w") as f:
                f.write(text.replace("key_file: http.key", 'key_file: http.key, min_version: "1.3"'))
            g.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: g.log().count("SIGHUP: reload done") == 2, 10, what="the reload")
            self.assertIn("http.tls.min_version", g.log())
            self.assertNotIn("need a restart", g.log())
            self.assertTrue(handshake_refused(port, old))
            self.assertEqual(again(kept)[0], 200)
            kept.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_certificate_that_does_not_load_is_exit_2(self):
        """At start, from `tributary check` and `tributary run`: exit 2, the
        message names the key and the file; so does a key of another
        certificate, and an http.tls without its key."""
        for what, fix, key, needle in (
                ("missing", lambda d: os.remove(os.path.join(d, "http.pem")), "http.tls.cert_file", "No such file"),
                ("not PEM", lambda d: write(os.path.join(d, "http.pem"), "hello\n"), "http.tls.cert_file",
                 "no certificate could be loaded"),
                ("another key", lambda d: shutil.copy(CERTS.client[1], os.path.join(d, "http.key")),
                 "http.tls.key_file", "is not the key of"),
                ("bad CA", lambda d: write(os.path.join(d, "ca.pem"), "nope\n"), "http.tls.ca_file", "ca.pem")):
            g = gateway(tls=", ca_file: ca.pem")
            fix(g.dir)
            for cmd in ("check", "run"):
                r = subprocess.run([BIN, cmd, "-c", g.config], capture_output=True, text=True, timeout=30,
                                   cwd=g.dir, env={**os.environ, **ENV})
                self.assertEqual(r.returncode, 2, f"{what} {cmd}: {r.stderr}")
                self.assertIn(key, r.stderr)
                self.assertIn(needle, r.stderr)
                if what != "bad CA":
                    self.assertIn("http.", r.stderr)
        g = Gateway(config().replace(", key_file: http.key", ""), env=ENV)
        r = subprocess.run([BIN, "check", "-c", g.config], capture_output=True, text=True, timeout=30, cwd=g.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("http.tls.key_file: required key missing", r.stderr)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
