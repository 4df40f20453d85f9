"""The tributary command line: exit codes, check, describe, run and SIGTERM."""
import os
import resource
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tlib.gateway import BIN, Gateway, run_cli, json_log_lines  # noqa: E402
from tlib import mqttraw as mr  # noqa: E402
from tlib.mock import MockCluster, wait_until  # noqa: E402
from tlib.replication import edge_yaml  # noqa: E402

SRC = os.environ["TRIB_SOURCE_DIR"]
DATA = os.environ["TRIB_TESTDATA"]

MINIMAL = """
edge: {edge_name: e1, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:0"
  topic_mappings:
    - {mqtt_pattern: "a/+", danube_topic: /e1/t}
wal: {dir: ./wal}
http: {listener: "127.0.0.1:0"}
log: {format: json}
"""


class Cli(unittest.TestCase):
    def test_version(self):
        r = run_cli("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^tributary \d+\.\d+\.\d+\n$")

    def test_help_exits_zero(self):
        r = run_cli("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: tributary", r.stdout)

    def test_unknown_command_gives_usage_and_2(self):
        r = run_cli("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command", r.stderr)
        self.assertIn("usage: tributary", r.stderr)

    def test_unknown_flag_gives_usage_and_2(self):
        r = run_cli("run", "--frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: tributary", r.stderr)

    def test_check_example_is_valid(self):
        r = run_cli("check", "-c", os.path.join(SRC, "edge.yaml.example"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("fsync: always", r.stdout)

    def test_check_danube_file_masks_token(self):
        r = run_cli("check", "-c", os.path.join(DATA, "danube-edge.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("secret-edge-token", r.stdout + r.stderr)
        self.assertIn('token: "***"', r.stdout)

    def test_check_invalid_names_file_line_key(self):
        g = Gateway("edge:\n  edge_name: e1\n  cluster_url: http://h:1\n  heartbeat_interval: 5\n")
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{g.config}:4:3: edge.heartbeat_interval: unknown key", r.stderr)
        self.assertIn('did you mean "heartbeat_interval_ms"', r.stderr)

    def test_check_missing_file(self):
        r = run_cli("check", "-c", "/nonexistent/edge.yaml")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/edge.yaml: cannot open", r.stderr)

    def test_env_override_shown_by_check(self):
        r = run_cli("check", "-c", os.path.join(SRC, "edge.yaml.example"), env={"TRIBUTARY_WAL_FSYNC": "never"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("fsync: never", r.stdout)

    def test_describe_lists_every_section(self):
        r = run_cli("config", "--describe")
        self.assertEqual(r.returncode, 0)
        for key in ("edge.edge_name", "mqtt.ingestion.batch_size", "wal.fsync", "http.listener", "log.format",
                    "mqtt.topic_mappings[].mqtt_pattern"):
            self.assertIn(key, r.stdout)

    def test_describe_reloadable_lists_the_live_keys_only(self):
        r = run_cli("config", "--describe", "--reloadable")
        self.assertEqual(r.returncode, 0, r.stderr)
        live = r.stdout.split()
        described = run_cli("config", "--describe").stdout
        for key in live:
            self.assertIn("\n" + key + " ", "\n" + described, f"{key} is not a key of --describe")
        for key in ("log.level", "auth.password_file", "http.tls.cert_file", "mqtt.listeners[].tls.cert_file",
                    "mqtt.topic_mappings[].validation_policy", "mqtt.topic_mappings[].mqtt_pattern",
                    "mqtt.topic_mappings"):
            self.assertIn(key, live)
        for key in ("wal.dir", "mqtt.listener", "mqtt.topic_mappings[].durability", "reload.watch_ms",
                    "edge.cluster_url", "http.listener"):
            self.assertNotIn(key, live)
        md = run_cli("config", "--describe", "--reloadable", "--markdown")
        self.assertEqual(md.stdout.splitlines(), ["- `%s`" % k for k in live])

    def test_check_names_the_file_and_key_of_a_file_that_does_not_load(self):
        """gw_check (shared with run and SIGHUP) prints what check always printed: SOURCE: KEY: why."""
        g = Gateway(MINIMAL.replace('http: {listener: "127.0.0.1:0"}',
                                    'http: {listener: "127.0.0.1:0", admin_token_file: /nonexistent/admin}'))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip(), f"{g.config}: http.admin_token_file: /nonexistent/admin: cannot open: "
                                           "No such file or directory")
        self.assertEqual(r.stdout, "")
        g = Gateway(MINIMAL.replace("wal: {dir: ./wal}", "wal: {dir: ./wal}\nauth: {password_file: /nonexistent/pw}"))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.startswith(f"{g.config}: auth.password_file: "), r.stderr)

    def test_run_stops_cleanly_on_sigterm_with_json_logs(self):
        with Gateway(MINIMAL) as g:
            g.wait_log('"msg":"starting"')
            rc = g.stop(signal.SIGTERM, timeout=5)
            self.assertEqual(rc, 0, g.log())
            lines = json_log_lines(g.log())
            msgs = [ln["msg"] for ln in lines]
            self.assertIn("shutdown complete", msgs)
            self.assertTrue(all("ts" in ln and "level" in ln for ln in lines))

    def test_each_command_answers_help_with_0_and_bad_usage_with_2(self):
        for cmd in ("run", "check", "status"):
            r = run_cli(cmd, "--help")
            self.assertEqual(r.returncode, 0, f"{cmd} --help: {r.stderr}")
            self.assertIn("usage: tributary", r.stdout, cmd)
        for args in (("run", "--frobnicate"), ("check",), ("check", "-c", "a", "extra"), ("config",),
                     ("config", "--frobnicate"), ("wal",), ("wal", "dump"), ("wal", "frobnicate", "--dir", "/tmp"),
                     ("status", "--frobnicate")):
            r = run_cli(*args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")

    @staticmethod
    def _meta_v1(floor, checkpoint, dropped=0):
        """A version 1 meta file (wal/wal_format.h META FILE), written here from the format's text."""
        import struct
        from tlib.crc import crc32c
        body = b"TBWM" + struct.pack("<HHQQQQQ", 1, 64, floor, checkpoint, dropped, 0, 0) + b"\0" * 12
        return body + struct.pack("<I", crc32c(body))

    def _golden_log(self, topics):
        """A log directory holding v2/features.seg (offsets 1..7) for each (encoded dir, checkpoint)."""
        import shutil
        d = tempfile.mkdtemp(prefix="trib-retire-")
        for enc, ck in topics:
            tdir = os.path.join(d, enc)
            os.makedirs(tdir)
            shutil.copy(os.path.join(DATA, "wal", "v2", "features.seg"), os.path.join(tdir, "%020d.seg" % 1))
            with open(os.path.join(tdir, "meta"), "wb") as f:
                f.write(self._meta_v1(1, ck, dropped=2))
        return d

    def test_wal_retire_removes_a_drained_topic_and_a_recreated_one_continues(self):
        """wal retire on a drained topic removes its directory and leaves a RETIRED entry; a
        gateway that routes to the name again starts at offset 8 (wal dump shows it); a topic
        with a backlog is refused with the count; forget needs --delete-unreplicated for it."""
        import json
        d = self._golden_log([("+e1+old", 7), ("+e1+busy", 3)])
        r = run_cli("wal", "retire", "/e1/old", "--dir", d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("topic /e1/old retired:", r.stdout)
        self.assertIn("starts at offset 8 (checkpoint 7, dropped 2, forgotten 0)", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(d, "+e1+old")))
        with open(os.path.join(d, "RETIRED"), "rb") as f:
            raw = f.read()
        self.assertEqual(raw[:4], b"TBWR")
        self.assertIn(b"/e1/old", raw)
        lines = [json.loads(ln) for ln in run_cli("wal", "check", "--dir", d).stdout.splitlines()]
        self.assertEqual([x.get("topic") for x in lines if "topic" in x], ["/e1/busy"])
        tomb = [x for x in lines if "retired" in x]
        self.assertEqual(len(tomb), 1, lines)
        self.assertEqual((tomb[0]["retired"], tomb[0]["next"], tomb[0]["checkpoint"], tomb[0]["dropped"],
                          tomb[0]["forgotten"]), ("/e1/old", 8, 7, 2, 0))
        r = run_cli("wal", "retire", "/e1/old", "--dir", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("already retired (next offset 8)", r.stdout)
        self.assertIn('no topic "/e1/old"', r.stderr)

        r = run_cli("wal", "retire", "/e1/busy", "--dir", d)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("topic /e1/busy has 4 unreplicated message(s) (checkpoint 3, last offset 7): not retired",
                      r.stdout)
        self.assertIn("--delete-unreplicated", r.stderr)
        r = run_cli("wal", "forget", "/e1/busy", "--dir", d)
        self.assertEqual(r.returncode, 1, "forget without the flag refuses a backlog too")
        self.assertTrue(os.path.isdir(os.path.join(d, "+e1+busy")))
        r = run_cli("wal", "forget", "/e1/busy", "--dir", d, "--delete-unreplicated")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("topic /e1/busy forgotten:", r.stdout)
        self.assertIn("starts at offset 8 (checkpoint 3, dropped 2, forgotten 4)", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(d, "+e1+busy")))

        # a gateway routing to /e1/old again: the name continues at offset 8
        cfg = MINIMAL.replace("danube_topic: /e1/t", "danube_topic: /e1/old").replace("./wal", d)
        with Gateway(cfg) as g:
            g.wait_log('"msg":"starting"')
            p = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(g.mqtt_port()), "-q", "1",
                                "-t", "a/x", "-m", "again"], capture_output=True, text=True, timeout=20)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(g.stop(signal.SIGTERM, timeout=10), 0, g.log())
        recs = [json.loads(ln) for ln in run_cli("wal", "dump", "--dir", d, "--topic", "/e1/old").stdout.splitlines()]
        self.assertEqual([(x["offset"], x["payload"]) for x in recs], [(8, "again")])
        j = [json.loads(ln) for ln in run_cli("wal", "check", "--dir", d).stdout.splitlines()]
        old = [x for x in j if x.get("topic") == "/e1/old"][0]
        self.assertEqual(old["checkpoint"], 7, "the re-created topic's checkpoint is next - 1")
        self.assertEqual(old["dropped"], 2, "its counters continue")
        import shutil
        shutil.rmtree(d)

    def test_wal_retire_and_forget_are_refused_while_a_gateway_holds_the_lock(self):
        """A running gateway holds <wal.dir>/LOCK: retire and forget exit 1 naming it, and
        change nothing; once it stopped, retire works (its topic was drained: nothing sent)."""
        import fcntl
        d = self._golden_log([("+e1+old", 7)])
        cfg = MINIMAL.replace("./wal", d)
        with Gateway(cfg) as g:
            g.wait_log('"msg":"starting"')
            for args in (("retire", "/e1/old"), ("forget", "/e1/old", "--delete-unreplicated")):
                r = run_cli("wal", *args, "--dir", d)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(f"{d} is in use by a running gateway (it holds {d}/LOCK)", r.stderr)
            self.assertTrue(os.path.isdir(os.path.join(d, "+e1+old")))
            self.assertEqual(g.stop(signal.SIGTERM, timeout=10), 0, g.log())
        with open(os.path.join(d, "LOCK"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)  # any holder of the lock, not only a gateway
            self.assertEqual(run_cli("wal", "retire", "/e1/old", "--dir", d).returncode, 1)
        r = run_cli("wal", "retire", "/e1/old", "--dir", d)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "+e1+old")))
        for args in (("wal", "retire", "--dir", d), ("wal", "retire", "a", "b", "--dir", d),
                     ("wal", "retire", "/e1/x"), ("wal", "retire", "/e1/x", "--dir", d, "--delete-unreplicated")):
            self.assertEqual(run_cli(*args).returncode, 2, args)
        import shutil
        shutil.rmtree(d)

    def test_wal_forget_output_drops_the_slot_everywhere_and_is_refused_while_the_log_is_locked(self):
        """A log whose topic has three outputs' slots (tests/data/wal/meta/v3.bin
        beside v2/features.seg, the registry meta/OUTPUTS): wal check names each
        output; forget-output removes one; with only danube left the meta file is
        version 2 again (it has a reservation); a held LOCK refuses it."""
        import fcntl
        import json
        import shutil
        d = tempfile.mkdtemp(prefix="trib-forget-")
        tdir = os.path.join(d, "+edge1+golden")
        os.makedirs(tdir)
        shutil.copy(os.path.join(DATA, "wal", "v2", "features.seg"), os.path.join(tdir, "%020d.seg" % 1))
        shutil.copy(os.path.join(DATA, "wal", "meta", "v3.bin"), os.path.join(tdir, "meta"))
        shutil.copy(os.path.join(DATA, "wal", "meta", "OUTPUTS"), os.path.join(d, "OUTPUTS"))

        def check():
            r = run_cli("wal", "check", "--dir", d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return json.loads(r.stdout.splitlines()[0])
        j = check()
        self.assertEqual(j["meta_version"], 3)
        self.assertEqual(j["outputs"], {
            "danube": {"id": 0, "checkpoint": 3, "dropped": 4, "dropped_age": 7},
            "central": {"id": 1, "checkpoint": 6, "dropped": 2, "dropped_age": 0},
            "backup": {"id": 7, "checkpoint": 5, "dropped": 3, "dropped_age": 1}})
        r = run_cli("wal", "forget-output", "central", "--dir", d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("topic /edge1/golden: slot removed (checkpoint 6, dropped 2)", r.stdout)
        self.assertIn("output central (id 1) forgotten: 1 topic(s) had a slot", r.stdout)
        self.assertEqual(set(check()["outputs"]), {"danube", "backup"})
        with open(os.path.join(d, "OUTPUTS")) as f:
            self.assertNotIn("central", f.read())
        r = run_cli("wal", "forget-output", "central", "--dir", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn('no output "central"', r.stderr)
        r = run_cli("wal", "forget-output", "danube", "--dir", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot be forgotten", r.stderr)
        with open(os.path.join(d, "LOCK"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running gateway holds
            r = run_cli("wal", "forget-output", "backup", "--dir", d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("in use", r.stderr)
        r = run_cli("wal", "forget-output", "backup", "--dir", d)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = check()
        self.assertEqual(j["meta_version"], 2, "only the default slot left: version 2 (it has a reservation)")
        self.assertNotIn("outputs", j)
        self.assertEqual(j["checkpoint"], 3, "the default slot's checkpoint")
        self.assertEqual(j["dropped_age"], 7)
        for args in (("wal", "forget-output", "--dir", d), ("wal", "forget-output", "a", "b", "--dir", d),
                     ("wal", "forget-output", "a")):
            self.assertEqual(run_cli(*args).returncode, 2, args)
        shutil.rmtree(d)

    def test_an_event_loop_that_cannot_be_made_fails_the_start_with_1_and_a_reason(self):
        """RLIMIT_NOFILE so small that uv_loop_init fails (epoll_create1:
        EMFILE) must end the start with exit 1 and the reason logged; its
        result was ignored, and the boot went on with a broken loop into a
        crash. (Below 6 descriptors libuv itself aborts in its global init,
        before any code of ours runs: not ours to catch.)"""
        d = tempfile.mkdtemp(prefix="trib-fd-")
        cfg = os.path.join(d, "edge.yaml")
        with open(cfg, "w") as f:
            f.write(MINIMAL)
        # LeakSanitizer's exit check opens /proc/<pid>/task: with no
        # descriptor left it fails the process (sanitizer builds)
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        seen = 0
        for n in range(6, 32):
            def limit(n=n):
                resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            p = subprocess.run([BIN, "run", "-c", cfg], cwd=d, capture_output=True, text=True, timeout=20,
                               preexec_fn=limit, env=env)
            if "cannot create the event loop" not in p.stderr:
                break  # enough descriptors for the loop: later steps are not this test's
            seen += 1
            self.assertEqual(p.returncode, 1, f"RLIMIT_NOFILE={n}: {p.stderr}")
            err = [ln for ln in json_log_lines(p.stderr) if ln.get("level") == "error"]
            self.assertEqual(err[0]["msg"], "cannot create the event loop", p.stderr)
            self.assertEqual(err[0]["error"], "Too many open files")
        self.assertGreater(seen, 0, "no limit made the event loop fail")

    OUTPUTS = MINIMAL + """outputs:
  - name: danube
    kind: danube
  - name: central
    kind: mqtt
    topics: ["/e1/#"]
    broker: "127.0.0.1:1"
    protocol: 5
    qos: 1
    client_id: "edge1-central"
    remote_topic: "site1/${topic}"
    max_inflight: 100
    max_bytes_per_s: 0
"""

    def test_check_prints_the_outputs_and_run_starts_mqtt_and_sparkplug_outputs_and_pacing(self):
        g = Gateway(self.OUTPUTS)
        r = run_cli("check", "-c", g.config, env={"topic": "not-this"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("configuration is valid (1 topic mappings; 2 outputs: danube (danube) central (mqtt))", r.stderr)
        self.assertIn("kind: mqtt", r.stdout)
        # a template key keeps ${topic}, even with a variable of that name in the environment
        self.assertIn('remote_topic: "site1/${topic}"', r.stdout)
        self.assertIn('topics: ["/e1/#"]', r.stdout)
        # the MQTT output runs (its remote, port 1, refuses: it backs off, the gateway serves)
        with g:
            g.wait_log('"output started"')
            self.assertIn('"output":"central"', g.log())
            g.mqtt_port()
            self.assertEqual(g.stop(), 0, g.log())
        # the Sparkplug output runs too (the same unreachable remote: it backs off, stops at once)
        s = Gateway(self.OUTPUTS.replace("kind: mqtt", "kind: sparkplug\n    group_id: G")
                    .replace('    qos: 1\n', '').replace('    remote_topic: "site1/${topic}"\n', ''))
        with s:
            s.wait_log('"output started"')
            self.assertIn('"output":"central"', s.log())
            s.mqtt_port()
            self.assertEqual(s.stop(), 0, s.log())
        # a rate cap on the MQTT output runs too (rep_pace.c): started, not refused
        p = Gateway(self.OUTPUTS.replace("max_bytes_per_s: 0", "max_messages_per_s: 10"))
        with p:
            p.wait_log('"output started"')
            self.assertEqual(p.stop(), 0, p.log())

    def test_check_prints_the_implied_danube_output(self):
        g = Gateway(MINIMAL)
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("outputs:  # implied", r.stdout)
        self.assertIn("1 output: danube (danube, implied))", r.stderr)
        self.assertIn('  - name: "danube"\n    kind: danube\n', r.stdout)

    def test_check_output_template_against_the_mappings(self):
        g = Gateway(self.OUTPUTS.replace("site1/${topic}", "site1/${2}"))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{g.config}: outputs[1].remote_topic (line 13): template \"site1/${{2}}\" column 7: "
                      "${2}: rule 0 (\"a/+\") has 1 '+' capture", r.stderr)
        g = Gateway(self.OUTPUTS.replace("site1/${topic}", "site1/${attr.site}"))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn("${attr.site} is not an extract_attributes name of rule 0", r.stderr)
        g = Gateway(self.OUTPUTS.replace("site1/${topic}", "site1/+"))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{g.config}:20:19: outputs[1].remote_topic:", r.stderr)

    def test_check_output_topics_and_files(self):
        g = Gateway(self.OUTPUTS.replace('["/e1/#"]', '["/e2/#"]'))
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn('outputs[1].topics[0] (line 13): "/e2/#" matches none of the upstream topics', r.stderr)
        g = Gateway(self.OUTPUTS + "    password_file: /nonexistent/central.pw\n")
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn('outputs[1].password_file (line 13): cannot read "/nonexistent/central.pw"', r.stderr)
        g = Gateway(self.OUTPUTS + "    group_id: G\n")
        r = run_cli("check", "-c", g.config)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{g.config}:23:15: outputs[1].group_id: not a key of kind mqtt", r.stderr)

    def test_run_with_invalid_config_exits_2(self):
        g = Gateway("edge: {edge_name: e1}\n")
        g.start()
        self.assertEqual(g.proc.wait(timeout=10), 2)
        self.assertIn("required key missing", g.log())


class StatusDurability(unittest.TestCase):
    """`tributary status` shows each topic's durability (/stats `durability`): log, or where a
    memory_first topic's messages are now."""

    def test_status_shows_each_topics_durability(self):
        mc = MockCluster().start()
        self.addCleanup(mc.cleanup)
        maps = [{"mqtt_pattern": "l/+", "danube_topic": "/edge1/logged"},
                {"mqtt_pattern": "m/+", "danube_topic": "/edge1/held", "durability": "memory_first"}]
        g = Gateway(edge_yaml(mc.grpc_url, maps, wal="fsync: always, memory_first: {spill_after_ms: 5000}"))
        self.addCleanup(g.__exit__)
        g.start()
        addr = f"127.0.0.1:{g.http_port()}"

        def rows():
            r = run_cli("status", "--http", addr)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            head = next(i for i, ln in enumerate(lines) if ln.startswith("TOPIC"))
            self.assertEqual(lines[head].split()[:3], ["TOPIC", "STATE", "DURABILITY"], r.stdout)
            return {ln.split()[0]: ln.split()[2] for ln in lines[head + 1:]}

        wait_until(lambda: rows() == {"/edge1/logged": "log", "/edge1/held": "memory"}, 30, "log and memory")
        # a refusing cluster: the memory_first topic's message goes to the log (a spill), and the
        # topic drains it from there until the cluster is back
        mc.control.fault("refuse")
        c = mr.Raw(g.mqtt_port(), timeout=10)
        c.send(mr.connect("dur"))
        c.expect(mr.CONNACK)
        c.send(mr.publish("m/d1", b"x", qos=1, pid=1))
        c.expect(mr.PUBACK)
        c.close()
        wait_until(lambda: rows() == {"/edge1/logged": "log", "/edge1/held": "draining"}, 30, "draining")
        mc.control.fault("normal")
        # the way back to memory needs a log batch the cluster acknowledged quickly (WAL.md rule
        # (d)); the refused one's ack counts its retries, so traffic goes on, as a device's would
        # (under ASan on a loaded box the refused batch alone took longer than spill_after_ms / 2)
        c = mr.Raw(g.mqtt_port(), timeout=10)
        c.send(mr.connect("dur2"))
        c.expect(mr.CONNACK)
        for pid in range(1, 6):
            c.send(mr.publish("m/d1", b"y", qos=1, pid=pid))
            c.expect(mr.PUBACK)
        c.close()
        wait_until(lambda: rows()["/edge1/held"] in ("ready", "memory"), 60, "back to memory")
        self.assertEqual(g.stop(), 0, g.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
