#!/usr/bin/python3
"""test_page.py: the operator's page (/, docs/OPERATIONS.md "The operator's
page") in a real browser: Debian's chromium, headless, loads it from the
real binary replicating to the mock cluster while a publisher runs, and the
test reads the DOM the page's own script built:

  - the topic rows show the counts /stats gave at that moment (between a
    /stats fetched just before the load and one just after; exactly, once
    the publisher has stopped and replication has caught up);
  - the health line says healthy, then degraded naming the cluster while
    the mock cluster refuses, then healthy again when it comes back;
  - the charts have points once the sample ring holds some (polled with a
    deadline on /stats/history: the ring samples every 5 s);
  - a screenshot is kept as an artefact (TRIB_BUILD_DIR/test-artifacts/);
  - /table, the view for a browser without scripts, shows the same counts.

chromium is a test dependency (scripts/deps-test.txt, for the tests only). Without it
the test skips with a message, except under CI (CI=true), where it fails:
CI installs the test dependencies, so a missing browser is a broken setup.
Every wait is a condition with a deadline; chromium gets a private profile
in a temp dir and a bounded run time.
"""
import html.parser
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tlib.gateway import Gateway, wait_for  # noqa: E402
from tlib.mock import MockCluster  # noqa: E402
from tlib.replication import Publisher, edge_yaml  # noqa: E402

WAIT = 60
TELE, ENERGY = "/edge1/tele", "/edge1/energy"
MAPPINGS = [{"mqtt_pattern": "t/+", "danube_topic": TELE}, {"mqtt_pattern": "e/#", "danube_topic": ENERGY}]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_TIMEOUT = 90  # seconds for one browser run (a cold start on a loaded CI machine)
COUNTS = ("received", "queued", "dropped", "rejected")


def artifact_dir():
    d = os.path.join(os.environ.get("TRIB_BUILD_DIR", tempfile.gettempdir()), "test-artifacts")
    os.makedirs(d, exist_ok=True)
    return d


class Dom(html.parser.HTMLParser):
    """What the test reads of the rendered page: the health line, the topic
    rows (cells by class), the charts' point counts and polylines."""

    def __init__(self, text):
        super().__init__()
        self.health_level, self.health_text = None, ""
        self.rows = {}        # topic -> {cell class: text}
        self.charts = {}      # chart id -> {"points": n, "lines": [points attr of each polyline]}
        self.talkers = []     # client ids in the top talkers list, busiest first
        self.listeners = {}   # listener address -> (connections, publishes denied)
        self._in_health = 0
        self._row = None
        self._cell = None
        self._chart = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "health":
            self.health_level = a.get("data-level")
            self._in_health = 1
        elif self._in_health:
            self._in_health += 1
        if tag == "tr" and "data-topic" in a:
            self._row = self.rows.setdefault(a["data-topic"], {})
        elif tag == "td" and self._row is not None:
            self._cell = (a.get("class") or "").split(" ")[0]
            self._row[self._cell] = ""
        elif tag == "div" and (a.get("id") or "").startswith("chart-"):
            self._chart = self.charts.setdefault(a["id"][6:], {"points": None, "lines": []})
        elif tag == "svg" and self._chart is not None:
            self._chart["points"] = int(a.get("data-points", "0"))
        elif tag == "li" and "data-client" in a:
            self.talkers.append(a["data-client"])
        elif tag == "li" and "data-listener" in a:
            self.listeners[a["data-listener"]] = (int(a["data-connections"]), int(a["data-denied"]))
        elif tag == "polyline" and self._chart is not None:
            self._chart["lines"].append((a.get("class"), a.get("points", "")))

    def handle_endtag(self, tag):
        if self._in_health:
            self._in_health -= 1
        if tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._in_health:
            self.health_text += data
        if self._row is not None and self._cell:
            self._row[self._cell] += data


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        c.close()


class Browser:
    """chromium --headless, one process per load, a private profile."""

    def __init__(self, test):
        self.profile = tempfile.mkdtemp(prefix="tb-chromium-")
        test.addCleanup(shutil.rmtree, self.profile, True)

    def run(self, url, *extra, budget_ms=2500):
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--disable-extensions", "--disable-background-networking",
               "--disable-sync", "--disable-component-update", f"--user-data-dir={self.profile}",
               f"--virtual-time-budget={budget_ms}", *extra, url]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROME_TIMEOUT, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise AssertionError(f"chromium exited {r.returncode}: {' '.join(cmd)}\n{r.stderr[-3000:]}")
        return r.stdout

    def dom(self, url, budget_ms=2500):
        """The DOM after the page's script ran for budget_ms of virtual time
        (time that stands still while a fetch is pending, so /stats answers)."""
        text = self.run(url, "--dump-dom", budget_ms=budget_ms)
        self.last_dom = text
        return Dom(text)

    def screenshot(self, url, path):
        self.run(url, f"--screenshot={path}", "--window-size=1280,1500", "--hide-scrollbars", budget_ms=6000)


def as_int(text):
    return int(text.strip())


class OperatorPage(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not CHROMIUM:
            if os.environ.get("CI") == "true":
                raise AssertionError("chromium is not installed: CI must install the test dependencies "
                                     "(scripts/dev.sh deps-test installs scripts/deps-test.txt)")
            raise unittest.SkipTest("chromium is not installed (apt-get install chromium, or scripts/dev.sh "
                                    "deps-test); the operator's page test needs a real browser")

    def setUp(self):
        self.mc = MockCluster().start()
        self.addCleanup(self.mc.cleanup)
        self.gw = Gateway(edge_yaml(self.mc.grpc_url, MAPPINGS)).start()
        self.addCleanup(self.gw.__exit__)
        self.port = self.gw.mqtt_port()
        self.http = self.gw.http_port()
        self.url = f"http://127.0.0.1:{self.http}/"
        self.browser = Browser(self)

    def stats(self):
        status, _, body = http_get(self.http, "/stats")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def topics(self, doc):
        return {t["topic"]: t for t in doc["topics"]}

    def wait_cluster(self, pred, what):
        return wait_for(lambda: pred(self.stats()["cluster"]["state"]), WAIT, 0.1, what)

    def row_counts(self, row):
        return {k: as_int(row[k]) for k in COUNTS}

    def expect_counts(self, t):
        return {"received": t["received"], "queued": t["queued"], "dropped": t["dropped"] + t["dropped_age"],
                "rejected": sum(t["rejected"].values())}

    def test_the_page_shows_what_stats_says_while_a_publisher_runs(self):
        self.wait_cluster(lambda s: s == "connected", "the cluster connected")
        pub = Publisher(self.port, lambda n: "t/d1" if n % 3 else "e/d2/x", rate=100, client_id="page-pub").start()
        wait_for(lambda: all(t["received"] > 0 for t in self.stats()["topics"]), WAIT, 0.05, "both topics receiving")

        before = self.topics(self.stats())
        dom = self.browser.dom(self.url)
        after = self.topics(self.stats())
        self.assertEqual(set(dom.rows), {TELE, ENERGY}, self.browser.last_dom[-3000:])
        for name, row in dom.rows.items():
            got = as_int(row["received"])
            self.assertLessEqual(before[name]["received"], got, f"{name}: the page shows /stats of this moment")
            self.assertLessEqual(got, after[name]["received"], f"{name}: the page shows /stats of this moment")
            self.assertEqual(row["durability"], "log")
            self.assertIn(row["state"], ("idle", "replicating", "catching_up"))
            self.assertNotEqual(row["rate"], "…", "two polls ran: the page has a received/s")

        pub.stop()
        wait_for(lambda: all(t["queued"] == 0 and t["lag_messages"] == 0 for t in self.stats()["topics"]),
                 WAIT, 0.05, "replication caught up")
        dom = self.browser.dom(self.url)
        doc = self.stats()
        for name, t in self.topics(doc).items():
            self.assertEqual(self.row_counts(dom.rows[name]), self.expect_counts(t), name)
        self.assertEqual(sum(as_int(r["received"]) for r in dom.rows.values()), pub.sent)
        self.assertEqual(dom.health_level, "healthy", dom.health_text)

        # the view for a browser without scripts: the same counts, rendered by the server
        status, ctype, body = http_get(self.http, "/table")
        self.assertEqual((status, ctype), (200, "text/html; charset=utf-8"))
        table = Dom(body)
        self.assertEqual(table.health_level, "healthy", table.health_text)
        for name, t in self.topics(self.stats()).items():
            self.assertEqual(self.row_counts(table.rows[name]), self.expect_counts(t), name)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_the_health_line_follows_the_cluster_away_and_back(self):
        self.wait_cluster(lambda s: s == "connected", "the cluster connected")
        dom = self.browser.dom(self.url)
        self.assertEqual(dom.health_level, "healthy", dom.health_text)
        self.assertIn("cluster connected", dom.health_text)

        self.mc.control.fault("refuse")
        state = self.wait_cluster(lambda s: s != "connected" and s, "the gateway to see the cluster gone")
        dom = self.browser.dom(self.url)
        self.assertEqual(dom.health_level, "degraded", dom.health_text)
        self.assertIn("cluster", dom.health_text)
        self.assertIn("messages wait in the log", dom.health_text)
        self.assertNotIn("cluster connected", dom.health_text, state)

        self.mc.control.fault("normal")
        self.wait_cluster(lambda s: s == "connected", "the cluster back")
        dom = self.browser.dom(self.url)
        self.assertEqual(dom.health_level, "healthy", dom.health_text)
        self.assertEqual(self.gw.stop(), 0, self.gw.log())

    def test_the_charts_have_points_and_a_screenshot_is_kept(self):
        pub = Publisher(self.port, lambda n: "t/d1" if n % 2 else "e/d2", rate=50, client_id="page-chart").start()

        def history():
            status, _, body = http_get(self.http, "/stats/history")
            self.assertEqual(status, 200, body)
            h = json.loads(body)
            return h if len(h["t"]) >= 2 and len(h["topics"]) == 2 else None
        # the ring samples every 5 s: two points within three intervals and a margin
        h = wait_for(history, 30, 0.2, "two samples in the ring")
        dom = self.browser.dom(self.url)
        self.assertEqual(set(dom.charts), {"ingest", "replication", "queued", "lagage", "disk"},
                         self.browser.last_dom[-3000:])
        for cid, c in dom.charts.items():
            self.assertGreaterEqual(c["points"], len(h["t"]), cid)
            total = [p for cls, p in c["lines"] if cls == "total"]
            self.assertEqual(len(total), 1, cid)
            self.assertGreaterEqual(len(total[0].split()), 2, f"{cid}: the total line has points")
            self.assertEqual(len(c["lines"]), 1 if cid == "disk" else 3, f"{cid}: total and one per topic")
        self.assertGreater(max(h["total"]["received_per_second"]), 0, "the publisher shows in the ring")
        # the top talkers: a window of 5 s ends at a /stats read; the page polls every 2 s
        wait_for(lambda: any(t["client_id"] == "page-chart" for t in self.stats()["connections"]["top_talkers"]),
                 30, 0.5, "the publisher among the top talkers")
        dom = self.browser.dom(self.url)
        self.assertIn("page-chart", dom.talkers, self.browser.last_dom[-2000:])
        # the listeners, as /stats has them (the publisher's connection is open on the one listener)
        want = {l["listener"]: (l["connections"], l["publish_denied"]) for l in self.stats()["listeners"]}
        self.assertEqual(dom.listeners, want, self.browser.last_dom[-2000:])

        shot = os.path.join(artifact_dir(), "operator-page.png")
        if os.path.exists(shot):
            os.unlink(shot)
        self.browser.screenshot(self.url, shot)
        with open(shot, "rb") as f:
            head = f.read(8)
        self.assertEqual(head, b"\x89PNG\r\n\x1a\n", shot)
        self.assertGreater(os.path.getsize(shot), 10000, "a screenshot of a drawn page, not a blank one")
        sys.stderr.write(f"screenshot: {shot}\n")
        pub.stop()
        self.assertEqual(self.gw.stop(), 0, self.gw.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
