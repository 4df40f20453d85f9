#!/usr/bin/python3
"""test_deploy.py: what can be checked of deploy/ without a container engine,
a Kubernetes cluster or a booted systemd (none runs on the build machines).

- The Helm chart's default configuration (values.yaml `config`, rendered
  verbatim into the ConfigMap's edge.yaml) passes `tributary check`: a
  renamed or removed key breaks the chart, and this says so. So does its
  commented http.tls example, filled in with certificates made here; the
  default stays plain HTTP, and the probes take their scheme from the
  chart's tributary.httpScheme helper, which follows config.http.tls (read
  from the templates: no helm here to render them).
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


class HelmChart(unittest.TestCase):
    def test_the_default_config_passes_tributary_check(self):
        with open(os.path.join(DEPLOY, "helm", "tributary", "values.yaml")) as f:
            values = yaml.safe_load(f)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "edge.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(values["config"], f)
            r = subprocess.run([binary(), "check", "-c", path], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


    def test_the_http_tls_example_passes_tributary_check_and_the_default_is_plain(self):
        path = os.path.join(DEPLOY, "helm", "tributary", "values.yaml")
        with open(path) as f:
            text = f.read()
        values = yaml.safe_load(text)
        self.assertNotIn("tls", values["config"]["http"], "the chart's default endpoint is plain HTTP")
        m = re.search(r"^\s*#\s+tls: (\{.*\})\s*$", text.split("\n  http:\n", 1)[1], re.M)
        self.assertIsNotNone(m, "values.yaml has no commented http.tls example under config.http")
        example = yaml.safe_load(m.group(1))
        self.assertEqual(set(example), {"cert_file", "key_file"})
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "1", "-subj", "/CN=chart"],
                           check=True, capture_output=True, timeout=60, cwd=d)
            example = {k: os.path.join(d, os.path.basename(v)) for k, v in example.items()}
            config = dict(values["config"])
            config["http"] = dict(config["http"], tls=example)
            path = os.path.join(d, "edge.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(config, f)
            r = subprocess.run([binary(), "check", "-c", path], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_the_probes_take_their_scheme_from_config_http_tls(self):
        tpl = os.path.join(DEPLOY, "helm", "tributary", "templates")
        with open(os.path.join(tpl, "statefulset.yaml")) as f:
            sts = f.read()
        with open(os.path.join(tpl, "_helpers.tpl")) as f:
            helpers = f.read()
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            self.assertRegex(sts, probe + r":\s*\n\s*httpGet: \{path: " + re.escape(path) +
                             r', port: http, scheme: \{\{ include "tributary.httpScheme" \. \}\}\}')
        m = re.search(r'define "tributary.httpScheme".*?end -\}\}\s*$', helpers, re.S)
        self.assertIsNotNone(m)
        self.assertIn(".Values.config.http", m.group(0))
        self.assertRegex(m.group(0), r"(?s)if \$http\.tls -\}\}.*HTTPS.*else -\}\}\s*HTTP", "HTTPS with http.tls, else HTTP")
        self.assertIn("require_client_cert", m.group(0), "the probes cannot present a client certificate")


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
