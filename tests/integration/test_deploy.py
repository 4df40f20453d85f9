#!/usr/bin/python3
"""test_deploy.py: what can be checked of deploy/ without a container engine,
a Kubernetes cluster or a booted systemd (none runs on the build machines).

- The Helm chart, rendered without Helm (there is no helm package in
  Debian 12): tests/deploy/helmrender is Go's text/template with sprig and
  Helm's own functions (include, tpl, toYaml, fromYaml, required), run for
  the default values and each tests/deploy/values-*.yaml; every object is
  validated against the Kubernetes JSON schemas of npm kubernetes-models
  (tests/deploy/validate.mjs; the ServiceMonitor against
  @kubernetes-models/prometheus-operator's). Then what an operator checks:
  the rendered edge.yaml passes `tributary check` (and with the commented
  http.tls example filled in); persistence off is an emptyDir and says the
  log is lost; the Secrets are wired; the root file system is read-only;
  the probes are OPERATIONS.md's; the grace period's `fail` rule; the
  preStop drain, on by default, whose exact command drains a gateway
  running the rendered edge.yaml against the mock cluster; and the
  checksum/config annotation changes for every key that needs a restart
  and for no reloadable one (`tributary config --describe --reloadable`).
- The container image's runtime stage installs every shared library the
  built binary loads: each library's Debian package is one the
  Containerfile names or one they depend on (apt-cache depends --recurse).
  A new library linked without its runtime package would build fine and
  fail at the pod's first start.
- Every package either stage names exists in Debian 12's archive.
- The systemd unit passes `systemd-analyze verify` (skipped where systemd
  is not installed, e.g. in a minimal CI container; it says so).

What stays unverified is said in deploy/README.md.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import BIN  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
CONTAINERFILE = os.path.join(DEPLOY, "container", "Containerfile")


def binary():
    return BIN if os.path.isabs(BIN) else os.path.join(ROOT, BIN)


def containerfile_stages():
    """The packages each FROM stage's apt-get install names, in order."""
    with open(CONTAINERFILE) as f:
        text = f.read().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            stages.append([])
        m = re.search(r"apt-get install\s+(.*?)(&&|$)", line)
        if m and stages:
            stages[-1] += [w for w in m.group(1).split() if not w.startswith("-")]
    return stages


def owning_package(path):
    """The Debian package that ships a library file (merged /usr aware)."""
    candidates = [path]
    if path.startswith("/usr/lib/"):
        candidates.append(path[len("/usr"):])
    elif path.startswith("/lib/"):
        candidates.append("/usr" + path)
    for p in candidates:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


CHART = os.path.join(DEPLOY, "helm", "tributary")
TESTS_DEPLOY = os.path.join(ROOT, "tests", "deploy")


def checks_dir():
    """Where the renderer is built and the npm packages installed: beside the
    binary under test (build/ or build-asan/), never in the source tree."""
    d = os.path.join(os.path.dirname(binary()), "deploy-checks")
    os.makedirs(d, exist_ok=True)
    return d


def build_renderer(d):
    """tests/deploy/helmrender, GOPATH mode on Debian's Go packages (offline)."""
    go = shutil.which("go")
    if not go:
        if os.environ.get("CI"):
            raise AssertionError("no `go` in CI: scripts/deps-test.txt installs golang-go")
        raise unittest.SkipTest("no `go` (scripts/deps-test.txt installs golang-go): the chart is not rendered")
    out = os.path.join(d, "helmrender")
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOFLAGS="", CGO_ENABLED="0")
    if not os.environ.get("HOME"):  # else Go's own cache (~/.cache/go-build), shared by build trees
        env["GOCACHE"] = os.path.join(d, "gocache")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(TESTS_DEPLOY, "helmrender"),
                       env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("building tests/deploy/helmrender failed:\n" + r.stdout + r.stderr)
    return out


def install_models(d):
    """npm ci of tests/deploy/package-lock.json into d (once per lock)."""
    npm = shutil.which("npm")
    if not npm or not shutil.which("node"):
        if os.environ.get("CI"):
            raise AssertionError("no node/npm in CI (this kind of machine has them)")
        raise unittest.SkipTest("no node/npm on this machine: the rendered objects are not validated")
    with open(os.path.join(TESTS_DEPLOY, "package-lock.json")) as f:
        lock = f.read()
    stamp = os.path.join(d, "installed.lock")
    if os.path.exists(stamp) and os.path.isdir(os.path.join(d, "node_modules")):
        with open(stamp) as f:
            if f.read() == lock:
                return os.path.join(d, "node_modules")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(TESTS_DEPLOY, name), os.path.join(d, name))
    r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=d,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("npm ci (tests/deploy/package-lock.json) failed:\n" + r.stdout + r.stderr)
    with open(stamp, "w") as f:
        f.write(lock)
    return os.path.join(d, "node_modules")


def option_sets():
    return sorted(f for f in os.listdir(TESTS_DEPLOY) if re.fullmatch(r"values-.*\.yaml", f))


def set_path(values, key, leaf):
    """values with the config key (a `tributary config --describe` path, "[]"
    for a list entry) set to leaf, under config."""
    node = values.setdefault("config", {})
    parts = key.split(".")
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        if p.endswith("[]"):
            entry = {}
            node[p[:-2]] = [entry]
            node = entry
            continue
        if last:
            node[p] = leaf
        else:
            node = node.setdefault(p, {})
    return values


class HelmChart(unittest.TestCase):
    """The chart rendered (Go text/template + sprig + Helm's own functions:
    tests/deploy/helmrender, not Helm itself) for the default values and for
    each tests/deploy/values-*.yaml, every object validated against the
    Kubernetes schemas (tests/deploy/validate.mjs), and what an operator
    would look for in the objects."""

    @classmethod
    def setUpClass(cls):
        d = checks_dir()
        cls.tmp = tempfile.mkdtemp(prefix="deploy-")
        cls.renderer = build_renderer(d)
        cls.node_modules = install_models(d)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def render(self, *overrides, ok=True, notes=False):
        """The objects for these override files or dicts (or the stderr of a refusal when ok=False)."""
        args = [self.renderer, "-chart", CHART, "-name", "edge"]
        for i, o in enumerate(overrides):
            if isinstance(o, dict):
                fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.tmp)
                with os.fdopen(fd, "w") as f:
                    yaml.safe_dump(o, f)
                o = path
            args += ["-f", o]
        args.append("-notes" if notes else "-json")
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if not ok:
            self.assertNotEqual(r.returncode, 0, "the chart rendered; it should have refused")
            return r.stderr
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout if notes else json.loads(r.stdout)

    @staticmethod
    def kind(objects, kind):
        found = [o for o in objects if o["kind"] == kind]
        return found[0] if len(found) == 1 else found

    def sts(self, objects):
        return self.kind(objects, "StatefulSet")

    def edge_yaml(self, objects):
        return yaml.safe_load(self.kind(objects, "ConfigMap")["data"]["edge.yaml"])

    def checksum(self, *overrides):
        return self.sts(self.render(*overrides))["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    def validate(self, objects, name):
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(objects, f)
        return subprocess.run(["node", os.path.join(TESTS_DEPLOY, "validate.mjs"), self.node_modules, path],
                              capture_output=True, text=True, timeout=60)

    def test_every_option_set_renders_and_validates_against_the_kubernetes_schemas(self):
        sets = [("default", [])] + [(f, [os.path.join(TESTS_DEPLOY, f)]) for f in option_sets()]
        self.assertGreaterEqual(len(sets), 4)
        kinds = set()
        for name, files in sets:
            objects = self.render(*files)
            kinds |= {o["kind"] for o in objects}
            r = self.validate(objects, name)
            self.assertEqual(r.returncode, 0, name + ":\n" + r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("\nok ") + r.stdout.startswith("ok "), len(objects), r.stdout)
        self.assertEqual(kinds, {"ConfigMap", "Service", "StatefulSet", "Secret", "ServiceMonitor",
                                 "PodDisruptionBudget"})

    def test_the_validator_refuses_a_wrong_object(self):
        objects = self.render(os.path.join(TESTS_DEPLOY, "values-everything.yaml"))
        self.sts(objects)["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "1883"
        self.kind(objects, "ServiceMonitor")["spec"]["endpoints"][0]["interval"] = 15
        r = self.validate(objects, "wrong")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("INVALID StatefulSet/edge-tributary", r.stdout)
        self.assertIn("containerPort must be integer", r.stdout)
        self.assertIn("INVALID ServiceMonitor/edge-tributary", r.stdout)

    def test_the_rendered_config_passes_tributary_check(self):
        for files in ([], [os.path.join(TESTS_DEPLOY, "values-no-persistence.yaml")]):
            objects = self.render(*files)
            env = {e["name"]: e.get("value") for e in
                   self.sts(objects)["spec"]["template"]["spec"]["containers"][0]["env"]}
            self.assertEqual(env["EDGE_NAME"], "edge", "edgeName defaults to the release's name")
            path = os.path.join(self.tmp, "edge.yaml")
            with open(path, "w") as f:
                f.write(self.kind(objects, "ConfigMap")["data"]["edge.yaml"])
            r = subprocess.run([binary(), "check", "-c", path], capture_output=True, text=True, timeout=30,
                               env=dict(os.environ, EDGE_NAME=env["EDGE_NAME"]))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.edge_yaml(self.render())["reload"]["watch_ms"], 10000)

    def test_the_http_tls_example_passes_tributary_check_and_the_default_is_plain(self):
        path = os.path.join(CHART, "values.yaml")
        with open(path) as f:
            text = f.read()
        values = yaml.safe_load(text)
        self.assertNotIn("tls", values["config"]["http"], "the chart's default endpoint is plain HTTP")
        m = re.search(r"^\s*#\s+tls: (\{.*\})\s*$", text.split("\n  http:\n", 1)[1], re.M)
        self.assertIsNotNone(m, "values.yaml has no commented http.tls example under config.http")
        example = yaml.safe_load(m.group(1))
        self.assertEqual(set(example), {"cert_file", "key_file"})
        d = self.tmp
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "1", "-subj", "/CN=chart"],
                       check=True, capture_output=True, timeout=60, cwd=d)
        example = {k: os.path.join(d, os.path.basename(v)) for k, v in example.items()}
        objects = self.render({"config": {"http": {"tls": example}}})
        path = os.path.join(d, "edge-tls.yaml")
        with open(path, "w") as f:
            f.write(self.kind(objects, "ConfigMap")["data"]["edge.yaml"])
        r = subprocess.run([binary(), "check", "-c", path], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, EDGE_NAME="edge"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_the_probes_follow_config_http_tls_and_operations_md(self):
        with open(os.path.join(ROOT, "docs", "OPERATIONS.md")) as f:
            ops = f.read()
        m = re.search(r"^Kubernetes:\n\n```yaml\n(.*?)```", ops, re.S | re.M)
        self.assertIsNotNone(m, "docs/OPERATIONS.md has no Kubernetes probe block")
        documented = yaml.safe_load(m.group(1))
        for files, scheme in (([], "HTTP"), ([os.path.join(TESTS_DEPLOY, "values-everything.yaml")], "HTTPS")):
            objects = self.render(*files)
            c = self.sts(objects)["spec"]["template"]["spec"]["containers"][0]
            for probe in ("livenessProbe", "readinessProbe"):
                got = dict(c[probe])
                get = got.pop("httpGet")
                self.assertEqual(get["scheme"], scheme)
                self.assertEqual(get["path"], documented[probe]["httpGet"]["path"])
                want = {k: v for k, v in documented[probe].items() if k != "httpGet"}
                self.assertEqual(got, want, probe + " differs from docs/OPERATIONS.md")
            ann = self.sts(objects)["spec"]["template"]["metadata"]["annotations"]
            self.assertEqual(ann["prometheus.io/scheme"], scheme.lower())
        err = self.render({"config": {"http": {"tls": {"cert_file": "a", "key_file": "b",
                                                        "require_client_cert": True}}}}, ok=False)
        self.assertIn("require_client_cert", err)

    def test_persistence_off_is_an_emptydir_and_says_the_log_is_lost(self):
        objects = self.render(os.path.join(TESTS_DEPLOY, "values-no-persistence.yaml"))
        spec = self.sts(objects)["spec"]
        self.assertNotIn("volumeClaimTemplates", spec)
        data = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == "data"]
        self.assertEqual(data, [{"name": "data", "emptyDir": {"sizeLimit": "2Gi"}}])
        notes = self.render(os.path.join(TESTS_DEPLOY, "values-no-persistence.yaml"), notes=True)
        self.assertIn("is lost when the pod is", notes)
        with open(os.path.join(CHART, "values.yaml")) as f:
            self.assertIn("everything the cluster has\n  # not acknowledged) is lost when the pod is rescheduled",
                          f.read())
        # on by default: a claim, with the storage class when given
        spec = self.sts(self.render())["spec"]
        self.assertEqual([v["name"] for v in spec["template"]["spec"]["volumes"] if v["name"] == "data"], [])
        claim = spec["volumeClaimTemplates"][0]
        self.assertEqual(claim["spec"]["resources"]["requests"]["storage"], "10Gi")
        self.assertNotIn("storageClassName", claim["spec"])
        self.assertNotIn("is lost", self.render(notes=True))
        for files, cls in ((["values-everything.yaml"], "local-path"), (["values-existing-secrets.yaml"], "fast")):
            claim = self.sts(self.render(*[os.path.join(TESTS_DEPLOY, f) for f in files]))["spec"][
                "volumeClaimTemplates"][0]
            self.assertEqual(claim["spec"]["storageClassName"], cls)

    def test_the_secrets_are_wired(self):
        objects = self.render(os.path.join(TESTS_DEPLOY, "values-everything.yaml"))
        secrets = {s["metadata"]["name"]: s for s in self.kind(objects, "Secret")}
        self.assertEqual(set(secrets), {"edge-tributary-token", "edge-tributary-admin"})
        self.assertEqual(base64.b64decode(secrets["edge-tributary-token"]["data"]["token"]), b"cluster-secret")
        self.assertEqual(base64.b64decode(secrets["edge-tributary-admin"]["data"]["token"]), b"admin-secret")
        pod = self.sts(objects)["spec"]["template"]["spec"]
        c = pod["containers"][0]
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["TRIBUTARY_EDGE_TOKEN"]["valueFrom"]["secretKeyRef"],
                         {"name": "edge-tributary-token", "key": "token"})
        self.assertEqual(env["EDGE_NAME"]["value"], "plant-7")
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.assertEqual(volumes[mounts["/etc/tributary/admin"]]["secret"]["secretName"], "edge-tributary-admin")
        self.assertEqual(volumes[mounts["/etc/tributary/metrics"]]["secret"]["secretName"], "edge-metrics")
        self.assertEqual(volumes[mounts["/etc/tributary/auth"]]["secret"]["secretName"], "edge-auth")
        self.assertEqual(volumes[mounts["/etc/tributary/tls"]]["secret"]["secretName"], "edge-tls")
        self.assertEqual(volumes[mounts["/etc/tributary/site-ca"]]["configMap"]["name"], "site-ca")
        http = self.edge_yaml(objects)["http"]
        self.assertEqual(http["admin_token_file"], "/etc/tributary/admin/token")
        self.assertEqual(http["auth_token_file"], "/etc/tributary/metrics/token")
        self.assertEqual(self.kind(objects, "ServiceMonitor")["spec"]["endpoints"][0]["bearerTokenSecret"],
                         {"name": "edge-metrics", "key": "token"})
        self.assertEqual(pod["nodeSelector"], {"kubernetes.io/arch": "arm64"})
        self.assertEqual(pod["tolerations"][0]["key"], "edge")
        self.assertIn("nodeAffinity", pod["affinity"])
        # existing Secrets: referenced, none made
        objects = self.render(os.path.join(TESTS_DEPLOY, "values-existing-secrets.yaml"))
        self.assertEqual(self.kind(objects, "Secret"), [])
        pod = self.sts(objects)["spec"]["template"]["spec"]
        env = {e["name"]: e for e in pod["containers"][0]["env"]}
        self.assertEqual(env["TRIBUTARY_EDGE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"], "edge-token")
        self.assertEqual({v["name"]: v for v in pod["volumes"]}["admin-token"]["secret"]["secretName"], "edge-admin")
        # the older tokenSecret still works; no token at all: no variable
        env = self.sts(self.render({"tokenSecret": "old"}))["spec"]["template"]["spec"]["containers"][0]["env"]
        self.assertEqual([e["valueFrom"]["secretKeyRef"]["name"] for e in env if e["name"] == "TRIBUTARY_EDGE_TOKEN"],
                         ["old"])
        env = self.sts(self.render())["spec"]["template"]["spec"]["containers"][0]["env"]
        self.assertEqual([e["name"] for e in env], ["EDGE_NAME"])

    def test_the_root_file_system_is_read_only_and_only_the_data_and_run_volumes_are_writable(self):
        for files in ([], [os.path.join(TESTS_DEPLOY, "values-everything.yaml")]):
            pod = self.sts(self.render(*files))["spec"]["template"]["spec"]
            c = pod["containers"][0]
            self.assertEqual(c["securityContext"]["readOnlyRootFilesystem"], True)
            self.assertEqual(c["securityContext"]["capabilities"], {"drop": ["ALL"]})
            self.assertEqual(pod["securityContext"]["runAsNonRoot"], True)
            self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
            volumes = {v["name"]: v for v in pod["volumes"]}
            writable = sorted(m["mountPath"] for m in c["volumeMounts"]
                              if not m.get("readOnly") and "secret" not in volumes.get(m["name"], {})
                              and "configMap" not in volumes.get(m["name"], {}))
            self.assertEqual(writable, ["/run/tributary", "/var/lib/tributary"])
            self.assertEqual(volumes["run"]["emptyDir"]["medium"], "Memory")

    def test_the_grace_period_must_cover_the_drain_and_the_shutdown(self):
        self.assertEqual(self.sts(self.render())["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 60)
        # default: the preStop drain (25 s) + 25 s shutdown + 5
        err = self.render({"terminationGracePeriodSeconds": 55}, ok=False)
        self.assertIn("terminationGracePeriodSeconds 55 must be above 55", err)
        self.render({"terminationGracePeriodSeconds": 56})
        # without the drain only the shutdown and the margin
        off = {"drain": {"enabled": False}}
        err = self.render(off, {"terminationGracePeriodSeconds": 30}, ok=False)
        self.assertIn("must be above 30", err)
        self.render(off, {"terminationGracePeriodSeconds": 31})
        # a longer shutdown_timeout_ms, or a longer drain, needs more
        err = self.render({"config": {"shutdown_timeout_ms": 60000}}, ok=False)
        self.assertIn("must be above 90", err)
        err = self.render({"drain": {"timeoutSeconds": 40}}, ok=False)
        self.assertIn("must be above 70", err)
        err = self.render({"config": {"shutdown_timeout_ms": "25s"}}, ok=False)
        self.assertIn("config.shutdown_timeout_ms", err)

    def test_the_prestop_drain_is_on_by_default_and_calls_the_admin_cli(self):
        c = self.sts(self.render())["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(c["lifecycle"]["preStop"]["exec"]["command"],
                         ["tributary", "admin", "drain", "--wait", "--timeout", "25s", "-c", "/etc/tributary/edge.yaml"])
        c = self.sts(self.render(os.path.join(TESTS_DEPLOY, "values-everything.yaml")))["spec"]["template"][
            "spec"]["containers"][0]
        self.assertEqual(c["lifecycle"]["preStop"]["exec"]["command"],
                         ["tributary", "admin", "drain", "--wait", "--timeout", "25s", "-c", "/etc/tributary/edge.yaml",
                          "--token-file", "/etc/tributary/admin/token"])
        c = self.sts(self.render({"drain": {"extraArgs": ["--cafile", "/etc/tributary/tls/ca.crt"]}}))["spec"][
            "template"]["spec"]["containers"][0]
        self.assertEqual(c["lifecycle"]["preStop"]["exec"]["command"][-2:], ["--cafile", "/etc/tributary/tls/ca.crt"])
        c = self.sts(self.render({"drain": {"enabled": False}}))["spec"]["template"]["spec"]["containers"][0]
        self.assertNotIn("lifecycle", c)

    def test_the_prestop_command_drains_a_gateway_running_the_rendered_config(self):
        """The hook's exact argv (its binary and -c path moved here) against a gateway started with the
        chart's rendered edge.yaml: listeners moved to loopback ports, wal.dir to a temporary directory,
        cluster_url to the mock cluster. It must answer drained, with every message at the cluster."""
        from tlib.gateway import Gateway, free_port
        from tlib.mock import MockCluster
        from tlib.replication import publish_all
        objects = self.render()
        cmd = self.sts(objects)["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
        cfg = self.edge_yaml(objects)
        mc = MockCluster()
        mc.start()
        self.addCleanup(mc.cleanup)
        cfg["edge"]["cluster_url"] = mc.grpc_url
        cfg["mqtt"]["listener"] = "127.0.0.1:0"
        cfg["http"]["listener"] = f"0.0.0.0:{free_port()}"  # as the chart's: the CLI must read 0.0.0.0 as loopback
        cfg["wal"]["dir"] = "./wal"
        gw = Gateway(yaml.safe_dump(cfg), env={"EDGE_NAME": "edge"})
        gw.start()
        self.addCleanup(gw.__exit__)
        port = gw.mqtt_port()
        gw.wait_log("bootstrap complete")
        publish_all(port, [("devices/d%d/telemetry" % (i % 4), json.dumps({"n": i})) for i in range(200)],
                    client_id="prestop")
        argv = [BIN] + cmd[1:]
        argv[argv.index("/etc/tributary/edge.yaml")] = gw.config
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, EDGE_NAME="edge"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + gw.log())
        self.assertEqual(json.loads(r.stdout)["state"], "drained")
        self.assertEqual(len(mc.store_records("/edge/telemetry")), 200, "drained: the cluster has every message")
        self.assertEqual(gw.stop(timeout=30), 0, gw.log())

    def test_the_checksum_hashes_exactly_the_keys_that_need_a_restart(self):
        describe = subprocess.run([binary(), "config", "--describe"], capture_output=True, text=True,
                                  check=True, timeout=30).stdout
        types = dict(ln.split()[:2] for ln in describe.splitlines() if ln and not ln[0].isspace())
        keys = list(types)

        def values(key, n):  # a value of the key's type (numbers: the grace check reads shutdown_timeout_ms)
            t = types[key]
            leaf = 20000 + n if t in ("milliseconds", "integer", "bytes") else "value-%d" % n
            if t == "bool":  # two that differ and are both false (require_client_cert true is refused)
                leaf = [False, 0][n - 1]
            return set_path({}, key, [leaf] if t == "list" else leaf)

        live = set(subprocess.run([binary(), "config", "--describe", "--reloadable"], capture_output=True,
                                  text=True, check=True, timeout=30).stdout.split())
        self.assertGreater(len(keys), 50)
        self.assertTrue(live and live <= set(keys), live - set(keys))
        self.assertIn("log.level", live)
        wrong = []
        for key in keys:
            a, b = self.checksum(values(key, 1)), self.checksum(values(key, 2))
            if key in live and a != b:
                wrong.append(key + ": reloadable, yet a change of it rolls the pod")
            if key not in live and a == b:
                wrong.append(key + ": needs a restart, yet a change of it does not roll the pod")
        self.assertEqual(wrong, [], "tributary.restartConfig (_helpers.tpl) disagrees with "
                                    "`tributary config --describe --reloadable`")
        # turning TLS on needs a restart even though every tls.* file key is reloadable
        self.assertNotEqual(self.checksum({}), self.checksum(
            {"config": {"http": {"tls": {"cert_file": "a", "key_file": "b"}}}}))
        self.assertNotEqual(self.checksum({"config": {"mqtt": {"listeners": [{"address": "0.0.0.0:1883"}]}}}),
                            self.checksum({"config": {"mqtt": {"listeners": [
                                {"address": "0.0.0.0:1883", "tls": {"cert_file": "a", "key_file": "b"}}]}}}))
        # the mappings reload live: a policy flip, a new pattern or a new mapping keep the pod; a
        # mapping's durability (kept by an existing topic until a restart) rolls it
        with open(os.path.join(CHART, "values.yaml")) as f:
            base = yaml.safe_load(f)["config"]["mqtt"]["topic_mappings"]
        flipped = [dict(base[0], validation_policy="none")]
        moved = [dict(base[0], mqtt_pattern="plant/+/telemetry")]
        added = base + [{"mqtt_pattern": "x/+", "danube_topic": "/e/x"}]
        durable = [dict(base[0], durability="memory_first")]
        for same in (flipped, moved, added):
            self.assertEqual(self.checksum({}), self.checksum({"config": {"mqtt": {"topic_mappings": same}}}))
        self.assertNotEqual(self.checksum({}), self.checksum({"config": {"mqtt": {"topic_mappings": durable}}}))
        self.assertEqual(self.checksum({}), self.checksum({"config": {"log": {"level": "debug"}}}))
        # an output's rate caps reload live (the pacer takes them), and a reload adds, removes or
        # replaces an mqtt or sparkplug output alone: only a danube entry's other keys roll the pod

        def outputs(danube=None, **kw):
            return {"config": {"outputs": [dict({"name": "danube", "kind": "danube"}, **(danube or {})),
                                           dict({"name": "central", "kind": "mqtt", "broker": "m:1883"}, **kw)]}}
        self.assertEqual(self.checksum(outputs(max_bytes_per_s=1000, max_messages_per_s=10)),
                         self.checksum(outputs(max_bytes_per_s=5000, max_messages_per_s=0)))
        self.assertEqual(self.checksum(outputs(qos=1)), self.checksum(outputs(qos=2, broker="n:8883")))
        self.assertEqual(self.checksum(outputs()), self.checksum({"config": {"outputs": [
            {"name": "danube", "kind": "danube"}]}}), "an mqtt output removed: applied by the reload")
        self.assertEqual(self.checksum(outputs(danube={"max_messages_per_s": 5})), self.checksum(outputs()))
        self.assertNotEqual(self.checksum(outputs(danube={"topics": ["/e/#"]})), self.checksum(outputs()),
                            "a danube output's topics need a restart")

    def test_the_pdb_and_the_servicemonitor_are_optional(self):
        objects = self.render()
        self.assertEqual(self.kind(objects, "PodDisruptionBudget"), [])
        self.assertEqual(self.kind(objects, "ServiceMonitor"), [])
        objects = self.render(os.path.join(TESTS_DEPLOY, "values-everything.yaml"))
        self.assertEqual(self.kind(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"], 0)
        ep = self.kind(objects, "ServiceMonitor")["spec"]["endpoints"][0]
        self.assertEqual((ep["port"], ep["path"], ep["scheme"], ep["interval"]), ("http", "/metrics", "https", "15s"))
        with open(os.path.join(CHART, "values.yaml")) as f:
            self.assertIn("blocks every node", f.read())

class ContainerImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stages = containerfile_stages()

    def test_it_has_a_build_and_a_runtime_stage(self):
        self.assertEqual(len(self.stages), 2, self.stages)
        self.assertIn("libgrpc-dev", self.stages[0])

    def test_every_library_the_binary_loads_comes_from_a_runtime_package(self):
        ldd = subprocess.run(["ldd", binary()], capture_output=True, text=True, check=True).stdout
        libs = [m.group(1) for m in re.finditer(r"=>\s+(/\S+)", ldd)]
        self.assertTrue(libs, ldd)
        if re.search(r"lib(a|ub|t)san\.so", ldd):
            self.skipTest("a sanitizer build (its runtimes pull more libraries); the image ships the normal build")
        r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                            "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"]
                           + self.stages[1], capture_output=True, text=True, check=True)
        provided = set(self.stages[1]) | {w.split(":")[0] for w in re.findall(r"^\s*(?:Pre)?Depends: <?([^\s>]+)", r.stdout, re.M)}
        provided |= {ln.strip().split(":")[0] for ln in r.stdout.splitlines() if ln and not ln.startswith(" ")}
        missing, owners = {}, set()
        for lib in libs:
            pkg = owning_package(os.path.realpath(lib))
            if pkg is None:
                continue  # not from a package
            owners.add(pkg)
            if pkg not in provided:
                missing[lib] = pkg
        self.assertTrue({"libuv1", "libgrpc29", "libc6"} <= owners, owners)  # the lookup works
        self.assertEqual(missing, {}, "libraries whose package the runtime stage does not install")

    def test_every_package_it_names_is_in_debian(self):
        names = sorted(set(self.stages[0] + self.stages[1]))
        r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + names, capture_output=True, text=True)
        found = set(re.findall(r"^Package: (\S+)", r.stdout, re.M))
        self.assertEqual(sorted(set(names) - found), [])


class SystemdUnit(unittest.TestCase):
    def test_the_unit_verifies(self):
        tool = shutil.which("systemd-analyze")
        if not tool:
            self.skipTest("systemd-analyze not installed here (no systemd): the unit is not verified")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(DEPLOY, "systemd", "tributary.service")) as f:
                unit = f.read()
            unit = unit.replace("/usr/local/bin/tributary", binary())
            path = os.path.join(d, "tributary.service")
            with open(path, "w") as f:
                f.write(unit)
            r = subprocess.run([tool, "verify", path], capture_output=True, text=True, timeout=60)
        # verify prints nothing for a good unit; ignore lines about other units
        # of this machine (it loads the default dependencies)
        ours = [ln for ln in (r.stdout + r.stderr).splitlines() if "tributary.service" in ln]
        self.assertEqual(ours, [])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
