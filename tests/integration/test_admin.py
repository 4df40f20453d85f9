"""The admin API (RELOAD.md 6): POST /admin/reload runs SIGHUP's reload and
answers RELOAD.md 3.3's JSON; GET /admin/config prints the configuration in
force with no secret in it; access is the admin token when
http.admin_token_file is set, else loopback peers only (with the metrics
token when http.auth_token_file is set). And /stats, now dumped on the
thread pool through a deferred answer, survives a client that goes first."""
import http.client
import json
import os
import signal
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, run_cli, wait_for  # noqa: E402

BASE = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1", token: "edge-secret-value"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "a/+", danube_topic: /e1/a}
wal: {dir: ./wal, fsync: %(fsync)s}
http: {listener: "%(http)s"%(extra)s}
log: {level: %(level)s}
"""


def config(**kw):
    v = {"fsync": "always", "level": "info", "http": "127.0.0.1:0", "extra": ""}
    v.update(kw)
    return BASE % v


def ask(port, method, path, token=None, host="127.0.0.1"):
    """One request on a new connection: (status, headers, body text)."""
    c = http.client.HTTPConnection(host, port, timeout=10)
    headers = {"Authorization": "Bearer " + token} if token else {}
    c.request(method, path, headers=headers)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.headers, body


def outside_address():
    """This host's address on a non-loopback interface, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
        a = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if a.startswith("127.") else a


class Reload(unittest.TestCase):
    def test_post_applies_a_live_key_and_names_a_restart_key(self):
        g = Gateway(config())
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            g.write_config(config(level="debug", fsync="never"))
            status, headers, body = ask(port, "POST", "/admin/reload")
            self.assertEqual(status, 200, body)
            self.assertEqual(headers["Content-Type"], "application/json")
            a = json.loads(body)
            self.assertEqual(a["result"], "applied")
            self.assertIn("log.level", a["applied"])
            self.assertIn("wal.fsync", a["restart_needed"])
            self.assertNotIn("wal.fsync", a["applied"])
            self.assertIsNone(a["error"])
            self.assertTrue(a["file_valid"])
            self.assertEqual(a["source"], g.config)
            self.assertIsInstance(a["duration_ms"], int)
            g.wait_log("log.level applied")
            # the level is in force: debug lines appear (the gateway logs an admin call at info, so look
            # for the level the running configuration now reports)
            status, _, text = ask(port, "GET", "/admin/config")
            self.assertEqual(status, 200, text)
            self.assertRegex(text, r"(?m)^  level: debug$")
            self.assertRegex(text, r"(?m)^  fsync: always$", "wal.fsync needs a restart: the boot value runs")
            # GET /admin/reload: the last answer
            status, _, last = ask(port, "GET", "/admin/reload")
            self.assertEqual(status, 200)
            self.assertEqual(json.loads(last)["applied"], a["applied"])
            # the same file again: no key differs from the one in force
            status, _, again = ask(port, "POST", "/admin/reload")
            self.assertEqual(json.loads(again)["result"], "unchanged")
            self.assertIn('msg="admin call" method=POST path=/admin/reload peer=127.0.0.1:', g.log())
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_bad_file_is_refused_with_file_line_key_and_the_running_config_kept(self):
        g = Gateway(config())
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            before = ask(port, "GET", "/admin/config")[2]
            g.write_config(config(level="debug", fsync="sometimes"))
            status, _, body = ask(port, "POST", "/admin/reload")
            self.assertEqual(status, 422, body)
            a = json.loads(body)
            self.assertEqual(a["result"], "refused")
            self.assertFalse(a["file_valid"])
            self.assertEqual(a["applied"], [])
            e = a["error"]
            self.assertEqual(e["file"], g.config)
            self.assertEqual(e["key"], "wal.fsync")
            with open(g.config) as f:  # the file as written (the TLS suite rewrites its listener lines)
                lines = f.read().splitlines()
            self.assertEqual(e["line"], next(i for i, l in enumerate(lines) if "sometimes" in l) + 1)
            self.assertIn("sometimes", e["message"])
            self.assertTrue(e["text"].startswith(g.config + ":"), e["text"])
            # nothing changed: the level stays info, the config in force is the same document
            self.assertEqual(ask(port, "GET", "/admin/config")[2], before)
            self.assertRegex(before, r"(?m)^  level: info$")
            # /stats and /metrics say a restart would fail, until a valid file is reloaded
            def file_valid():
                return json.loads(ask(port, "GET", "/stats")[2])["config"]["file_valid"]
            wait_for(lambda: file_valid() is False, what="/stats config.file_valid false")
            self.assertIn("tributary_config_file_valid 0", ask(port, "GET", "/metrics")[2])
            g.write_config(config(level="debug"))
            self.assertEqual(ask(port, "POST", "/admin/reload")[0], 200)
            wait_for(lambda: file_valid() is True, what="/stats config.file_valid true again")
            self.assertIn("tributary_config_file_valid 1", ask(port, "GET", "/metrics")[2])
            self.assertEqual(g.stop(), 0, g.log())


    def test_get_reload_shows_a_sighup_refusal(self):
        g = Gateway(config())
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            self.assertEqual(ask(port, "GET", "/admin/reload")[0], 404)  # no reload yet
            g.write_config(config(fsync="sometimes"))
            g.proc.send_signal(signal.SIGHUP)
            g.wait_log("the configuration file is invalid")
            status, _, body = ask(port, "GET", "/admin/reload")
            self.assertEqual(status, 200, body)
            a = json.loads(body)
            self.assertEqual((a["result"], a["error"]["key"], a["file_valid"]), ("refused", "wal.fsync", False))
            self.assertEqual(g.stop(), 0, g.log())


class Config(unittest.TestCase):
    def test_config_shows_paths_but_no_secret(self):
        g = Gateway(config(extra=", auth_token_file: ./metrics.token"))
        with open(os.path.join(g.dir, "metrics.token"), "w") as f:
            f.write("metrics-token-value\n")
        with g:
            port = g.http_port()
            status, headers, text = ask(port, "GET", "/admin/config", token="metrics-token-value")
            self.assertEqual(status, 200, text)
            self.assertTrue(headers["Content-Type"].startswith("text/yaml"))
            self.assertIn("auth_token_file: \"./metrics.token\"", text)
            self.assertNotIn("metrics-token-value", text)
            self.assertNotIn("edge-secret-value", text)
            self.assertIn("edge_name: \"e1\"", text)
            self.assertEqual(g.stop(), 0, g.log())


class Access(unittest.TestCase):
    def write_token(self, g, name, value):
        with open(os.path.join(g.dir, name), "w") as f:
            f.write(value + "\n")

    def test_admin_token_wrong_or_missing_is_401(self):
        g = Gateway(config(extra=", admin_token_file: ./admin.token"))
        self.write_token(g, "admin.token", "admin-token-value")
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            for token in (None, "wrong", "admin-token-valuX", "admin-token-value-longer"):
                status, headers, body = ask(port, "POST", "/admin/reload", token=token)
                self.assertEqual(status, 401, (token, body))
                self.assertIn("Bearer", headers["WWW-Authenticate"])
                self.assertEqual(ask(port, "GET", "/admin/config", token=token)[0], 401)
            status, _, body = ask(port, "POST", "/admin/reload", token="admin-token-value")
            self.assertEqual(status, 200, body)
            self.assertEqual(ask(port, "GET", "/admin/config", token="admin-token-value")[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_admin_token_is_read_again_at_reload(self):
        g = Gateway(config(extra=", admin_token_file: ./admin.token"))
        self.write_token(g, "admin.token", "first-token-0123456789")
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            self.write_token(g, "admin.token", "second-token-0123456789")
            self.assertEqual(ask(port, "POST", "/admin/reload", token="first-token-0123456789")[0], 200)
            self.assertEqual(ask(port, "GET", "/admin/config", token="first-token-0123456789")[0], 401)
            self.assertEqual(ask(port, "GET", "/admin/config", token="second-token-0123456789")[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_without_admin_token_loopback_needs_the_metrics_token(self):
        g = Gateway(config(extra=", auth_token_file: ./metrics.token"))
        self.write_token(g, "metrics.token", "metrics-token-value")
        with g:
            port = g.http_port()
            self.assertEqual(ask(port, "GET", "/admin/config")[0], 401)
            self.assertEqual(ask(port, "GET", "/admin/config", token="wrong")[0], 401)
            self.assertEqual(ask(port, "GET", "/admin/config", token="metrics-token-value")[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_without_admin_token_only_loopback_peers(self):
        outside = outside_address()
        if not outside:
            self.skipTest("this host has no non-loopback IPv4 address to connect from")
        g = Gateway(config(http="0.0.0.0:0"))
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            status, _, body = ask(port, "GET", "/admin/config", host=outside)
            self.assertEqual(status, 403, body)
            self.assertIn("loopback", body)
            self.assertEqual(ask(port, "POST", "/admin/reload", host=outside)[0], 403)
            # a token does not help without http.admin_token_file
            self.assertEqual(ask(port, "POST", "/admin/reload", token="anything", host=outside)[0], 403)
            # the same listener from loopback: served
            self.assertEqual(ask(port, "GET", "/admin/config")[0], 200)
            # and the rest of the endpoint is not an admin port: /stats answers the outside peer
            self.assertEqual(ask(port, "GET", "/stats", host=outside)[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_admin_token_from_outside(self):
        outside = outside_address()
        if not outside:
            self.skipTest("this host has no non-loopback IPv4 address to connect from")
        g = Gateway(config(http="0.0.0.0:0", extra=", admin_token_file: ./admin.token"))
        self.write_token(g, "admin.token", "admin-token-value")
        with g:
            port = g.http_port()
            self.assertEqual(ask(port, "GET", "/admin/config", host=outside)[0], 401)
            self.assertEqual(ask(port, "GET", "/admin/config", token="admin-token-value", host=outside)[0], 200)
            self.assertEqual(g.stop(), 0, g.log())

    def test_methods(self):
        g = Gateway(config())
        with g:
            port = g.http_port()
            status, headers, _ = ask(port, "POST", "/admin/config")
            self.assertEqual(status, 405)
            self.assertEqual(headers["Allow"], "GET, HEAD")
            self.assertEqual(ask(port, "DELETE", "/admin/reload")[0], 405)
            self.assertEqual(g.stop(), 0, g.log())


class Cli(unittest.TestCase):
    def test_admin_reload_and_config(self):
        g = Gateway(config(extra=", admin_token_file: ./admin.token"))
        with open(os.path.join(g.dir, "admin.token"), "w") as f:
            f.write("admin-token-value\n")
        with g:
            port = g.http_port()
            g.wait_log("bootstrap complete")
            url = f"127.0.0.1:{port}"
            r = run_cli("admin", "reload", "--url", url)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("401", r.stderr)
            g.write_config(config(level="debug", extra=", admin_token_file: ./admin.token"))
            tok = os.path.join(g.dir, "admin.token")
            r = run_cli("admin", "reload", "--http", url, "--token-file", tok)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["applied"], ["log.level"])
            r = run_cli("admin", "config", "--http", url, "--token-file", tok)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"(?m)^  level: debug$")
            # a file the gateway refuses: exit 1, the error's text on stderr
            g.write_config(config(fsync="sometimes", extra=", admin_token_file: ./admin.token"))
            r = run_cli("admin", "reload", "--http", url, "--token-file", tok)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertRegex(r.stderr, r"refused: .*edge\.yaml:\d+:\d+: wal\.fsync: ")
            self.assertEqual(json.loads(r.stdout)["result"], "refused")
            self.assertEqual(run_cli("admin", "nonsense").returncode, 2)
            self.assertEqual(g.stop(), 0, g.log())


class DeferredStats(unittest.TestCase):
    def test_clients_that_close_before_the_stats_answer(self):
        """/stats is answered after its dump on the thread pool; clients that
        send the request and close at once leave the gateway serving (and,
        in the ASan build, nothing freed twice or leaked)."""
        g = Gateway(config())
        with g:
            port = g.http_port()
            for _ in range(50):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"GET /stats HTTP/1.1\r\nHost: t\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()  # a reset, before the answer in most runs
            status, _, body = ask(port, "GET", "/stats")
            self.assertEqual(status, 200)
            self.assertIn("topics", json.loads(body))

            def closed():
                st = json.loads(ask(port, "GET", "/stats")[2])
                return st["connections"]["http"] == 1  # this request's own
            wait_for(closed, 10, what="the closed clients' connections released")
            self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main()
