"""reload.watch_ms: a change of the configuration file, or of a file it
names, is reloaded as SIGHUP reloads it, without a signal. The files are
laid out and swapped as the kubelet's atomic writer does for a ConfigMap or
a Secret mounted as a directory: the files live in a timestamped directory
(`..2026_12_02_a`), `..data` is a symlink to it and each file a symlink
through `..data`; an update writes a new directory, points a temporary
symlink at it, renames that over `..data` and removes the old directory."""
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import Gateway, wait_for  # noqa: E402

CONFIG = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "a/+", danube_topic: /e1/a}
wal: {dir: %(wal)s, fsync: never}
http: {listener: "127.0.0.1:0"%(http_tls)s}
reload: {watch_ms: %(watch_ms)d}
log: {level: %(level)s, format: %(format)s}
"""

WATCH_MS = 1000


class AtomicDir:
    """A directory the way the kubelet keeps a mounted ConfigMap or Secret."""

    def __init__(self, path):
        self.path = path
        self.n = 0
        os.makedirs(path)

    def write(self, files):
        """Publishes {name: bytes} as the kubelet does (first time: the links too)."""
        self.n += 1
        new = "..2026_12_02_%02d" % self.n
        os.mkdir(os.path.join(self.path, new))
        for name, data in files.items():
            with open(os.path.join(self.path, new, name), "wb") as f:
                f.write(data)
        data_link = os.path.join(self.path, "..data")
        old = os.readlink(data_link) if os.path.islink(data_link) else None
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(new, tmp)
        os.rename(tmp, data_link)  # the atomic step
        for name in files:
            link = os.path.join(self.path, name)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", name), link)
        if old:
            for name in os.listdir(os.path.join(self.path, old)):
                os.unlink(os.path.join(self.path, old, name))
            os.rmdir(os.path.join(self.path, old))

    def file(self, name):
        return os.path.join(self.path, name)


def self_signed(d, cn):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", os.path.join(d, "k.pem"), "-out", os.path.join(d, "c.pem"), "-days", "1",
                    "-subj", "/CN=" + cn], check=True, capture_output=True, timeout=60)
    with open(os.path.join(d, "c.pem"), "rb") as c, open(os.path.join(d, "k.pem"), "rb") as k:
        return {"tls.crt": c.read(), "tls.key": k.read()}


class Watch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trib-watch-")
        self.cm = AtomicDir(os.path.join(self.dir, "config"))
        self.vars = {"wal": os.path.join(self.dir, "wal"), "http_tls": "", "watch_ms": WATCH_MS, "level": "info",
                     "format": "text"}

    def publish(self, **kw):
        self.vars.update(kw)
        self.cm.write({"edge.yaml": (CONFIG % self.vars).encode()})

    def gateway(self):
        return Gateway(workdir=self.dir, args=["-c", self.cm.file("edge.yaml")])

    def count(self, g, needle):
        return g.log().count(needle)

    def test_a_configmap_swap_changes_log_level_without_sighup(self):
        self.publish(level="info")
        g = self.gateway()
        with g:
            g.http_port()
            g.wait_log("reload.watch: watching")
            self.assertNotIn("reload.watch: a change", g.log())
            start = time.monotonic()
            self.publish(level="debug")
            g.wait_log("log.level applied", timeout=WATCH_MS / 1000 + 2)
            took = time.monotonic() - start
            log = g.log()
            self.assertRegex(log, r"reload.watch: a change was seen.*file=\S*config/edge.yaml")
            self.assertRegex(log, r"log.level applied.*level=debug")
            self.assertNotIn("SIGHUP received", log)
            self.assertLess(took, WATCH_MS / 1000 + 2)
            # unchanged bytes rewritten (a kubelet resync, same content): no reload
            self.publish(level="debug")
            # a later change is still seen (and so the one above had its period). Not
            # log.level back to info: a reload compares with the configuration of the
            # start, which says info already (SIGHUP alike: applied=0)
            self.publish(format="json")
            g.wait_log("log.format applied", timeout=WATCH_MS / 1000 + 2)
            self.assertEqual(self.count(g, "reload.watch: a change was seen"), 2, g.log())
            self.assertEqual(g.stop(), 0, g.log())

    def test_an_invalid_content_is_logged_once_and_a_fixed_one_applies(self):
        self.publish(level="info")
        g = self.gateway()
        with g:
            g.http_port()
            g.wait_log("reload.watch: watching")
            self.cm.write({"edge.yaml": (CONFIG % self.vars).replace("level: info", "level: loud").encode()})
            g.wait_log("the configuration file is invalid", timeout=WATCH_MS / 1000 + 2)
            self.assertIn("log.level", g.log())
            # three more periods with the same bad bytes: not logged again
            deadline = time.monotonic() + 3.5 * WATCH_MS / 1000
            while time.monotonic() < deadline:
                self.assertEqual(self.count(g, "the configuration file is invalid"), 1, g.log())
                time.sleep(0.1)
            self.assertEqual(self.count(g, "reload.watch: a change was seen"), 1, g.log())
            self.publish(level="debug")
            g.wait_log("log.level applied", timeout=WATCH_MS / 1000 + 2)
            self.assertEqual(self.count(g, "the configuration file is invalid"), 1, g.log())
            self.assertEqual(g.stop(), 0, g.log())

    def test_a_secret_swap_reloads_the_tls_certificate(self):
        secret = AtomicDir(os.path.join(self.dir, "tls"))
        scratch = tempfile.mkdtemp(dir=self.dir)
        secret.write(self_signed(scratch, "first"))
        self.publish(http_tls=", tls: {cert_file: %s, key_file: %s}" % (secret.file("tls.crt"),
                                                                        secret.file("tls.key")))
        g = self.gateway()
        with g:
            g.http_port()
            g.wait_log("reload.watch: watching")
            self.assertRegex(g.log(), r"reload.watch: watching.*files=2")
            before = self.count(g, "http TLS certificate reloaded")
            secret.write(self_signed(scratch, "second"))
            wait_for(lambda: self.count(g, "http TLS certificate reloaded") > before, WATCH_MS / 1000 + 2,
                     what="the renewed certificate reloaded")
            self.assertRegex(g.log(), r"reload.watch: a change was seen.*file=\S*tls/tls\.(crt|key)")
            self.assertEqual(g.stop(), 0, g.log())

    def test_off_by_default(self):
        self.publish(watch_ms=0)
        g = self.gateway()
        with g:
            g.http_port()
            g.wait_log("bootstrap complete")
            self.assertNotIn("reload.watch", g.log())
            self.assertEqual(g.stop(), 0, g.log())
        self.assertIsNone(re.search(r"reload\.watch", g.log()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
