"""Authentication and authorization on the real binary over 127.0.0.1:
Mosquitto's password file (written by Debian's mosquitto_passwd, and by
`tributary passwd`), its acl_file, the refusal codes of both protocol
versions, throttling of failing addresses, and SIGHUP swapping the files.

Clients: mosquitto_pub (-u/-P), paho, and a raw socket client for the exact
reason codes."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from tlib import mqttraw as mr  # noqa: E402
from tlib import tls as _tls  # noqa: E402
from tlib.gateway import BIN, Gateway, free_port, wait_for, wal_dump  # noqa: E402

ENV = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"


def config(auth="", extra=""):
    return f"""
edge: {{edge_name: e1, cluster_url: "http://127.0.0.1:1"}}
mqtt:
  listener: "127.0.0.1:0"
  ingestion: {{batch_timeout_ms: 5}}
{extra}
  topic_mappings:
    - {{mqtt_pattern: "t/#", danube_topic: /e1/t}}
auth:
  password_file: passwd
{auth}
wal: {{dir: ./wal, fsync: never}}
http: {{listener: "127.0.0.1:0"}}
log: {{format: json}}
"""


def stats(g):
    with urllib.request.urlopen(f"http://127.0.0.1:{g.http_port()}/stats", timeout=5) as r:
        return json.load(r)


def refused(g, reason):
    return stats(g)["connections"]["mqtt_refused"][reason]


def mosquitto_passwd(path, user, password, create=False):
    args = [MOSQUITTO_PASSWD] + (["-c"] if create else []) + ["-b", path, user, password]
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def tributary_passwd(path, user, password, *extra):
    return subprocess.run([BIN, "passwd", *extra, path, user], input=password + "\n", capture_output=True,
                          text=True, timeout=30)


def connack(port, version, **kw):
    """The CONNACK's code (MQTT 5 reason code / 3.1.1 return code), and the client."""
    c = mr.Raw(port)
    c.send(mr.connect(kw.pop("cid", "c1"), version=version, **kw))
    ack = c.expect(mr.CONNACK)
    return ack.body[1], c


def stored(g, needle):
    return [r for r in wal_dump(os.path.join(g.dir, "wal"), "/e1/t") if needle in json.dumps(r)]


def mosquitto_pub(port, version, user, password, topic, msg, tls=None):
    """tls: None for the gateway's listener (TLS when the suite is), False for Mosquitto's."""
    return subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), *_tls.mosquitto_args(tls),
                           "-V", version, "-q", "1",
                           "-i", f"pub-{version}", "-u", user, "-P", password, "-t", topic, "-m", msg],
                          capture_output=True, text=True, timeout=30)


class GatewayWithFiles(unittest.TestCase):
    def gateway(self, auth="", extra="", users=(("alice", "wonderland"),), acl=None):
        g = Gateway(config(auth, extra), env=ENV)
        first = True
        for user, pw in users:
            mosquitto_passwd(os.path.join(g.dir, "passwd"), user, pw, create=first)
            first = False
        if acl is not None:
            with open(os.path.join(g.dir, "acl"), "w") as f:
                f.write(acl)
        return g


class Passwords(GatewayWithFiles):
    def test_a_mosquitto_passwd_file_works_unchanged(self):
        """The file Debian's mosquitto_passwd writes ($7$, PBKDF2-SHA512, 101
        iterations): the right password gets in with mosquitto_pub over both
        protocol versions and its message is stored; a wrong one and an
        unknown user are refused 0x86 (MQTT 5) / 4 (3.1.1), counted apart."""
        with self.gateway(users=(("alice", "wonderland"), ("bob", "builder"))) as g:
            port = g.mqtt_port()
            with open(os.path.join(g.dir, "passwd")) as f:
                self.assertIn("alice:$7$101$", f.read())
            for version in ("mqttv311", "mqttv5"):
                r = mosquitto_pub(port, version, "alice", "wonderland", "t/a", f"hello-{version}")
                self.assertEqual(r.returncode, 0, r.stderr)
                r = mosquitto_pub(port, version, "alice", "wrong", "t/a", f"nope-{version}")
                self.assertNotEqual(r.returncode, 0)
            for version, code in ((5, 0x86), (4, 4)):
                rc, c = connack(port, version, username="alice", password="Wonderland")
                self.assertEqual(rc, code, "a wrong password")
                self.assertEqual(c.closed(), [])
                rc, c = connack(port, version, username="carol", password="wonderland")
                self.assertEqual(rc, code, "an unknown user: the same answer")
                c.close()
                rc, c = connack(port, version, username="bob", password="builder")
                self.assertEqual(rc, 0)
                c.close()
            wait_for(lambda: refused(g, "bad_password") == 4 and refused(g, "unknown_user") == 2, 5,
                     what="refusals counted by reason")
            self.assertIn("wrong password", g.log())
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(len(stored(g, "hello-")), 2)
            self.assertEqual(stored(g, "nope-"), [])

    def test_paho_over_both_versions(self):
        import paho.mqtt.client as paho
        with self.gateway() as g:
            port = g.mqtt_port()
            for proto in (paho.MQTTv311, paho.MQTTv5):
                for pw, ok in (("wonderland", True), ("bad", False)):
                    got = []
                    cl = _tls.paho(paho.Client(client_id=f"paho-{proto}-{ok}", protocol=proto))
                    cl.username_pw_set("alice", pw)
                    cl.on_connect = lambda c, u, f, rc, p=None: got.append(rc)
                    cl.connect("127.0.0.1", port)
                    cl.loop_start()
                    wait_for(lambda: got, 5, what="CONNACK")
                    cl.loop_stop()
                    cl.disconnect()
                    code = got[0] if isinstance(got[0], int) else got[0].value
                    if ok:
                        self.assertEqual(code, 0)
                    else:
                        self.assertEqual(code, 0x86 if proto == paho.MQTTv5 else 4)
            self.assertEqual(g.stop(), 0, g.log())

    def test_no_user_name_is_refused_where_anonymous_clients_are_not_allowed(self):
        """With a password file, allow_anonymous defaults to false: no user
        name is 0x87 (MQTT 5) / 5 (3.1.1); allow_anonymous: true lets it in."""
        with self.gateway() as g:
            port = g.mqtt_port()
            for version, code in ((5, 0x87), (4, 5)):
                rc, c = connack(port, version)
                self.assertEqual(rc, code)
                c.close()
                rc, c = connack(port, version, username="")  # an empty user name is none
                self.assertEqual(rc, code)
                c.close()
            wait_for(lambda: refused(g, "anonymous") == 4, 5, what="counted")
            self.assertEqual(g.stop(), 0, g.log())
        with self.gateway("  allow_anonymous: true") as g:
            rc, c = connack(g.mqtt_port(), 5)
            self.assertEqual(rc, 0)
            c.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_what_follows_connect_waits_for_the_check(self):
        """A client that sends CONNECT and PUBLISH in one write: with the right
        password the PUBLISH is acknowledged after the CONNACK; with a wrong
        one it is never read, never stored."""
        with self.gateway() as g:
            port = g.mqtt_port()
            for pw, ok in (("wonderland", True), ("guess", False)):
                c = mr.Raw(port)
                c.send(mr.connect(f"pipe-{ok}", version=5, username="alice", password=pw) +
                       mr.publish("t/pipe", f"piped-{ok}", qos=1, pid=7, version=5))
                ack = c.expect(mr.CONNACK)
                if ok:
                    self.assertEqual(ack.body[1], 0)
                    self.assertEqual(c.expect(mr.PUBACK).body[:2], b"\x00\x07")
                    c.close()
                else:
                    self.assertEqual(ack.body[1], 0x86)
                    self.assertEqual(c.closed(), [], "nothing after the refusal")
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(len(stored(g, "piped-True")), 1)
            self.assertEqual(stored(g, "piped-False"), [])

    def test_an_impostor_does_not_take_a_session_over(self):
        """A CONNECT with a connected client's identifier and a wrong password
        is refused before the session: the first client stays connected."""
        with self.gateway() as g:
            port = g.mqtt_port()
            rc, first = connack(port, 5, cid="plc-1", username="alice", password="wonderland")
            self.assertEqual(rc, 0)
            rc, imp = connack(port, 5, cid="plc-1", username="alice", password="x")
            self.assertEqual(rc, 0x86)
            imp.close()
            first.send(mr.publish("t/still", "still-here", qos=1, pid=1, version=5))
            self.assertEqual(first.expect(mr.PUBACK).body[:2], b"\x00\x01")
            first.close()
            self.assertEqual(g.stop(), 0, g.log())

    def test_tributary_passwd_writes_what_mosquitto_reads(self):
        """`tributary passwd` (password on stdin, never argv) writes a $7$
        line that Mosquitto 2 itself accepts, and the gateway too; it
        replaces a user's line and keeps the others; --delete removes one."""
        d = Gateway(config()).dir
        path = os.path.join(d, "passwd")
        mosquitto_passwd(path, "keep", "me", create=True)
        r = tributary_passwd(path, "dave", "s3cret")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = tributary_passwd(path, "dave", "s3cret2")  # replaced, not added
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            lines = f.read().splitlines()
        self.assertEqual([ln.split(":")[0] for ln in lines], ["keep", "dave"])
        self.assertTrue(lines[1].startswith("dave:$7$101$"), lines[1])
        fresh = os.path.join(d, "fresh")
        self.assertEqual(tributary_passwd(fresh, "new", "user").returncode, 0)
        self.assertEqual(os.stat(fresh).st_mode & 0o777, 0o600, "a file it creates is the owner's only")
        # Mosquitto 2 with the file
        mport = free_port()
        with open(os.path.join(d, "m.conf"), "w") as f:
            f.write(f"listener {mport} 127.0.0.1\nallow_anonymous false\npassword_file {path}\nuser root\n")
        m = subprocess.Popen(["mosquitto", "-c", os.path.join(d, "m.conf")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: port_open(mport), 10, what="mosquitto listening")
            self.assertEqual(mosquitto_pub(mport, "mqttv311", "dave", "s3cret2", "t/x", "m", tls=False).returncode, 0)
            self.assertNotEqual(mosquitto_pub(mport, "mqttv311", "dave", "s3cret", "t/x", "m", tls=False).returncode, 0)
        finally:
            m.terminate()
            m.wait(10)
        with Gateway(config(), workdir=d, env=ENV) as g:
            rc, c = connack(g.mqtt_port(), 5, username="dave", password="s3cret2")
            self.assertEqual(rc, 0)
            c.close()
            rc, c = connack(g.mqtt_port(), 5, username="keep", password="me")
            self.assertEqual(rc, 0)
            c.close()
            self.assertEqual(g.stop(), 0, g.log())
        r = subprocess.run([BIN, "passwd", "--delete", path, "dave"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            self.assertEqual([ln.split(":")[0] for ln in f.read().splitlines()], ["keep"])
        r = subprocess.run([BIN, "passwd", path, "eve", "inline-password"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2, "a password on the command line is refused")


class PerListener(GatewayWithFiles):
    def test_each_listener_has_its_own_anonymous_choice(self):
        """The common case: a loopback listener for local tools with no
        user name (allow_anonymous: true) beside one that refuses them (its
        auto follows auth.allow_anonymous, false with a password file)."""
        g = self.gateway()
        with open(g.config) as f:
            text = f.read()
        with open(g.config, "w") as f:
            f.write(text.replace('  listener: "127.0.0.1:0"\n', '  listeners:\n'
                                 '    - {address: "127.0.0.1:0", allow_anonymous: true}\n'
                                 '    - {address: "127.0.0.1:0"}\n'))
        with g:
            ports = g.mqtt_ports(2)
            local, remote = ports[0], ports[1]
            for version, code in ((5, 0x87), (4, 5)):
                rc, c = connack(local, version)
                self.assertEqual(rc, 0, "the local tools' listener admits no user name")
                c.close()
                rc, c = connack(remote, version)
                self.assertEqual(rc, code, "the other one does not")
                c.close()
                rc, c = connack(remote, version, username="alice", password="wonderland")
                self.assertEqual(rc, 0)
                c.close()
                rc, c = connack(local, version, username="alice", password="nope")
                self.assertNotEqual(rc, 0, "a user name given is still checked there")
                c.close()
            self.assertEqual(g.stop(), 0, g.log())


class Throttle(GatewayWithFiles):
    def test_refuse_past_max_failures(self):
        """Past auth.max_failures from one address, throttle: refuse answers
        0x9F (MQTT 5) / 3 (3.1.1) at once, even to the right password."""
        with self.gateway("  max_failures: 3\n  throttle: refuse") as g:
            port = g.mqtt_port()
            for _ in range(3):
                rc, c = connack(port, 5, username="alice", password="guess")
                self.assertEqual(rc, 0x86)
                c.close()
            rc, c = connack(port, 5, username="alice", password="wonderland")
            self.assertEqual(rc, 0x9F)
            c.close()
            rc, c = connack(port, 4, username="alice", password="wonderland")
            self.assertEqual(rc, 3)
            c.close()
            wait_for(lambda: refused(g, "auth_throttled") == 2, 5, what="counted")
            self.assertIn("throttled", g.log())
            self.assertEqual(g.stop(), 0, g.log())

    def test_delay_past_max_failures(self):
        """throttle: delay (the default) answers a throttled address after
        throttle_delay_ms, and a right password still gets in."""
        with self.gateway("  max_failures: 2\n  throttle_delay_ms: 700") as g:
            port = g.mqtt_port()
            for _ in range(2):
                rc, c = connack(port, 5, username="alice", password="guess")
                c.close()
            t0 = time.monotonic()
            rc, c = connack(port, 5, username="alice", password="wonderland")
            waited = time.monotonic() - t0
            self.assertEqual(rc, 0)
            c.close()
            self.assertGreaterEqual(waited, 0.65, "held for throttle_delay_ms")
            self.assertEqual(g.stop(), 0, g.log())


class Acl(GatewayWithFiles):
    ACL = """# anonymous clients: nothing
user alice
topic write t/alice/#
topic deny t/alice/secret
pattern write t/dev/%c/#
"""

    def test_a_denied_publish_is_never_stored(self):
        """MQTT 5: PUBACK / PUBREC 0x87; QoS 0 dropped and counted; 3.1.1
        QoS 1: the connection is closed, never acknowledged. The allowed
        topics (a topic line, a pattern with %c) are stored."""
        with self.gateway("  acl_file: acl", acl=self.ACL) as g:
            port = g.mqtt_port()
            rc, c = connack(port, 5, cid="dev7", username="alice", password="wonderland")
            self.assertEqual(rc, 0)
            c.send(mr.publish("t/alice/ok", "allowed-1", qos=1, pid=1, version=5))
            self.assertEqual(c.expect(mr.PUBACK).body[:2], b"\x00\x01")
            c.send(mr.publish("t/dev/dev7/x", "allowed-2", qos=1, pid=2, version=5))
            self.assertEqual(c.expect(mr.PUBACK).body[:2], b"\x00\x02")
            c.send(mr.publish("t/bob/x", "denied-1", qos=1, pid=3, version=5))
            self.assertEqual(c.expect(mr.PUBACK).body[:3], b"\x00\x03\x87")
            c.send(mr.publish("t/alice/secret", "denied-2", qos=2, pid=4, version=5))
            self.assertEqual(c.expect(mr.PUBREC).body[:3], b"\x00\x04\x87")
            c.send(mr.publish("t/dev/other/x", "denied-3", qos=0, version=5))
            c.send(mr.publish("t/alice/ok", "allowed-3", qos=1, pid=5, version=5))
            self.assertEqual(c.expect(mr.PUBACK).body[:2], b"\x00\x05")
            c.close()
            rc, c = connack(port, 4, cid="dev8", username="alice", password="wonderland")
            self.assertEqual(rc, 0)
            c.send(mr.publish("t/bob/x", "denied-4", qos=1, pid=1))
            self.assertEqual(c.closed(), [], "3.1.1 cannot be told: closed, never acknowledged")
            wait_for(lambda: [(l["listener"], l["publish_denied"]) for l in stats(g)["listeners"]]
                     == [(f"127.0.0.1:{port}", 4)], 5, what="denials counted, on the listener")
            self.assertIn("denied by auth.acl_file", g.log())
            self.assertEqual(g.stop(), 0, g.log())
            self.assertEqual(len(stored(g, "allowed-")), 3)
            self.assertEqual(stored(g, "denied-"), [])

    def test_a_will_to_a_denied_topic_refuses_the_connect(self):
        with self.gateway("  acl_file: acl", acl=self.ACL) as g:
            port = g.mqtt_port()
            for version, code in ((5, 0x87), (4, 5)):
                rc, c = connack(port, version, username="alice", password="wonderland",
                                will={"topic": "t/bob/will", "payload": "bye"})
                self.assertEqual(rc, code)
                c.close()
            rc, c = connack(port, 5, username="alice", password="wonderland",
                            will={"topic": "t/alice/will", "payload": "bye"})
            self.assertEqual(rc, 0)
            c.close()
            wait_for(lambda: refused(g, "will_denied") == 2, 5, what="counted")
            self.assertEqual(g.stop(), 0, g.log())


class Reload(GatewayWithFiles):
    def test_sighup_swaps_the_files_and_keeps_connections(self):
        """A new password and a new ACL apply at SIGHUP; a client connected
        before stays connected; a file that does not parse keeps the ones in
        force and the log names its file and line; `tributary check` refuses
        it with exit 2."""
        with self.gateway("  acl_file: acl", acl="user alice\ntopic write t/a/#\n") as g:
            port = g.mqtt_port()
            rc, kept = connack(port, 5, cid="kept", username="alice", password="wonderland")
            self.assertEqual(rc, 0)
            mosquitto_passwd(os.path.join(g.dir, "passwd"), "alice", "looking-glass")
            with open(os.path.join(g.dir, "acl"), "w") as f:
                f.write("user alice\ntopic write t/a/#\ntopic write t/b/#\n")
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("authentication files applied")
            rc, c = connack(port, 5, username="alice", password="wonderland")
            self.assertEqual(rc, 0x86, "the old password no longer works")
            c.close()
            rc, c = connack(port, 5, username="alice", password="looking-glass")
            self.assertEqual(rc, 0)
            c.close()
            kept.send(mr.publish("t/b/x", "after-reload", qos=1, pid=1, version=5))
            self.assertEqual(kept.expect(mr.PUBACK).body[:2], b"\x00\x01", "the new ACL, on the kept connection")
            # a broken file: refused, the ones in force stay
            with open(os.path.join(g.dir, "passwd"), "a") as f:
                f.write("mallory-without-a-hash\n")
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("an authentication file is invalid")
            self.assertRegex(g.log(), r"passwd:2: ")
            rc, c = connack(port, 5, username="alice", password="looking-glass")
            self.assertEqual(rc, 0, "still in force")
            c.close()
            kept.close()
            r = subprocess.run([BIN, "check", "-c", g.config], capture_output=True, text=True, timeout=30,
                               cwd=g.dir)  # relative paths are the working directory's, as wal.dir
            self.assertEqual(r.returncode, 2)
            self.assertIn("auth.password_file", r.stderr)
            self.assertIn("passwd:2: ", r.stderr)
            self.assertEqual(g.stop(), 0, g.log())


class HttpToken(unittest.TestCase):
    TOKEN = "s3cr3t-token-0123456789abcdef"

    def http(self, g, path, token=None):
        req = urllib.request.Request(f"http://127.0.0.1:{g.http_port()}{path}")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers)

    def gateway(self, extra=""):
        g = Gateway(config("  allow_anonymous: true").replace(
            'http: {listener: "127.0.0.1:0"}',
            'http: {listener: "127.0.0.1:0", auth_token_file: token' + extra + '}'), env=ENV)
        mosquitto_passwd(os.path.join(g.dir, "passwd"), "alice", "wonderland", create=True)
        with open(os.path.join(g.dir, "token"), "w") as f:
            f.write(self.TOKEN + "\n")
        return g

    def test_metrics_and_stats_ask_for_the_token_and_the_probes_stay_open(self):
        """With http.auth_token_file /metrics and /stats answer 401 (with
        WWW-Authenticate: Bearer) without the token or with a wrong one,
        200 with it; /healthz and /readyz stay open for probes;
        `tributary status --token-file` gets in. SIGHUP reads a new token."""
        with self.gateway() as g:
            g.mqtt_port()
            for path in ("/metrics", "/stats"):
                code, headers = self.http(g, path)
                self.assertEqual(code, 401, path)
                self.assertIn("Bearer", headers.get("WWW-Authenticate", ""))
                self.assertEqual(self.http(g, path, "wrong-token-0123456789")[0], 401)
                self.assertEqual(self.http(g, path, self.TOKEN[:-1])[0], 401, "a prefix is not the token")
                self.assertEqual(self.http(g, path, self.TOKEN)[0], 200)
            self.assertEqual(self.http(g, "/healthz")[0], 200)
            self.assertIn(self.http(g, "/readyz")[0], (200, 503))
            addr = f"127.0.0.1:{g.http_port()}"
            r = subprocess.run([BIN, "status", "--http", addr], capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--token-file", r.stderr)
            r = subprocess.run([BIN, "status", "--http", addr, "--token-file", os.path.join(g.dir, "token")],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(g.dir, "token"), "w") as f:
                f.write("rotated-token-0123456789abcdef\n")
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("SIGHUP: reload done")
            self.assertEqual(self.http(g, "/stats", self.TOKEN)[0], 401, "the old token no longer works")
            self.assertEqual(self.http(g, "/stats", "rotated-token-0123456789abcdef")[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_auth_probes_closes_the_probes_too(self):
        with self.gateway(", auth_probes: true") as g:
            g.mqtt_port()
            self.assertEqual(self.http(g, "/healthz")[0], 401)
            self.assertEqual(self.http(g, "/healthz", self.TOKEN)[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_short_token_file_is_a_configuration_error(self):
        g = self.gateway()
        with open(os.path.join(g.dir, "token"), "w") as f:
            f.write("short\n")
        r = subprocess.run([BIN, "check", "-c", g.config], capture_output=True, text=True, timeout=30, cwd=g.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("http.auth_token_file", r.stderr)
        self.assertIn("token:1:", r.stderr)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main(verbosity=2)
