#!/usr/bin/python3
"""test_mock_cluster_faults.py: the mock cluster's faults and its process life.

The edge's promises about outages (DESIGN.md 6 and 7: an absent cluster does
not stop the edge, a silent connection is given up) will be tested against
these faults, so each must behave as documented in docs/MOCK-CLUSTER.md:
refuse, silent, unavailable, internal, ack delay, a failing store; and the
process must start on port 0, print its ports, exit 0 on SIGTERM, and run
from an installed tree. Each test gets its own mock: faults are global.
Run by ctest (integration.mock_cluster_faults) with /usr/bin/python3.
"""
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from tlib.edge_client import EdgeClient, edge_pb, make_batch  # noqa: E402
from tlib.mock import MockCluster, build_dir, wait_until  # noqa: E402

WAIT = 10   # seconds: the bound of every wait in this file
T = "/edge1/t"


class FaultTest(unittest.TestCase):
    mock_kwargs = {}

    def setUp(self):
        self.mc = MockCluster(**self.mock_kwargs).start()
        self.client = EdgeClient(self.mc.grpc_target)

    def tearDown(self):
        self.client.close()
        rc = self.mc.stop()
        self.mc.cleanup()
        self.assertEqual(rc, 0, "mock cluster exit status")

    def code_of(self, fn, *args, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*args, **kw)
        return cm.exception.code()

    def fresh_client(self):
        """A new channel, free of the old one's reconnect backoff."""
        c = EdgeClient(self.mc.grpc_target)
        self.addCleanup(c.close)
        return c


class Refuse(FaultTest):
    def test_refuse_makes_calls_fail_unavailable(self):
        self.mc.control.fault("refuse")
        self.assertEqual(self.code_of(self.fresh_client().register, "edge1", [], timeout=5),
                         grpc.StatusCode.UNAVAILABLE)

    def test_refuse_really_closes_the_port(self):
        import socket
        self.mc.control.fault("refuse")
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((self.mc.grpc_host, self.mc.grpc_port), timeout=5).close()

    def test_normal_after_refuse_serves_on_the_same_port(self):
        self.mc.control.fault("refuse")
        self.mc.control.fault("normal")
        self.assertTrue(self.fresh_client().register("edge1", []).success)

    def test_refuse_ends_an_open_stream(self):
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.recv(WAIT).acked_offset, 0)
        self.mc.control.fault("refuse")
        self.assertNotEqual(s.wait_end(WAIT), grpc.StatusCode.OK)

    def test_state_survives_a_refuse_period(self):
        self.client.replicate([make_batch(T, [0, 1])])
        self.mc.control.fault("refuse")
        self.mc.control.fault("normal")
        self.fresh_client().replicate([make_batch(T, [0, 1])])
        self.assertEqual(len(self.mc.store_records(T)), 2)


class RefuseAtStart(FaultTest):
    mock_kwargs = {"fault": "refuse"}

    def test_fault_flag_starts_refusing(self):
        self.assertEqual(self.code_of(self.client.register, "edge1", [], timeout=5),
                         grpc.StatusCode.UNAVAILABLE)


class Silent(FaultTest):
    def test_silent_unary_call_hangs_until_its_deadline(self):
        self.mc.control.fault("silent")
        t0 = time.monotonic()
        code = self.code_of(self.client.register, "edge1", [], timeout=0.5)
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_silent_stream_reads_batches_but_never_acks(self):
        self.mc.control.fault("silent")
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        wait_until(lambda: self.mc.control.stats()["totals"]["silent_dropped_batches"] == 1,
                   WAIT, "the batch to be read and dropped")
        with self.assertRaises(queue.Empty):
            s.recv(timeout=0)
        s.cancel()

    def test_silent_stores_nothing(self):
        self.mc.control.fault("silent")
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        wait_until(lambda: self.mc.control.stats()["totals"]["silent_dropped_batches"] == 1,
                   WAIT, "the batch to be read and dropped")
        self.assertEqual(self.mc.store_records(T), [])
        s.cancel()

    def test_hung_call_is_answered_when_mode_returns_to_normal(self):
        self.mc.control.fault("silent")
        stub = self.client.channel.unary_unary(
            "/danube.edge.EdgeReplicatorService/RegisterEdge",
            request_serializer=edge_pb.RegisterEdgeRequest.SerializeToString,
            response_deserializer=edge_pb.RegisterEdgeResponse.FromString)
        fut = stub.future(edge_pb.RegisterEdgeRequest(edge_name="edge1"), timeout=WAIT)
        wait_until(lambda: self.mc.control.get_fault()["hanging_calls"] == 1, WAIT,
                   "the call to hang")
        self.mc.control.fault("normal")
        self.assertTrue(fut.result(timeout=WAIT).success)

    def test_stream_acks_again_after_silent_ends(self):
        self.mc.control.fault("silent")
        self.mc.control.fault("normal")
        acks, _ = self.client.replicate([make_batch(T, [0])])
        self.assertEqual([a.acked_offset for a in acks], [0])


class Unavailable(FaultTest):
    def test_unavailable_fails_unary_calls(self):
        self.mc.control.fault("unavailable")
        self.assertEqual(self.code_of(self.client.heartbeat, "edge1", 1),
                         grpc.StatusCode.UNAVAILABLE)

    def test_unavailable_fails_new_streams(self):
        self.mc.control.fault("unavailable")
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.wait_end(WAIT), grpc.StatusCode.UNAVAILABLE)

    def test_unavailable_ends_open_stream_at_its_next_batch(self):
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.recv(WAIT).acked_offset, 0)
        self.mc.control.fault("unavailable")
        s.send(make_batch(T, [1]))
        self.assertEqual(s.wait_end(WAIT), grpc.StatusCode.UNAVAILABLE)


class Internal(FaultTest):
    def test_internal_ends_streams_with_internal(self):
        self.mc.control.fault("internal")
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.wait_end(WAIT), grpc.StatusCode.INTERNAL)

    def test_internal_stores_nothing(self):
        self.mc.control.fault("internal")
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        s.wait_end(WAIT)
        self.assertEqual(self.mc.store_records(T), [])

    def test_internal_leaves_unary_calls_working(self):
        self.mc.control.fault("internal")
        self.assertTrue(self.client.register("edge1", []).success)


class AckDelay(FaultTest):
    def test_ack_delay_holds_each_ack_back(self):
        self.mc.control.fault(ack_delay_ms=300)
        s = self.client.open_stream()
        t0 = time.monotonic()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.recv(WAIT).acked_offset, 0)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        s.finish(WAIT)

    def test_ack_delay_is_latency_not_a_throughput_cap(self):
        # Five pipelined batches: serialised delays would spread the acks
        # over 4 x 300 ms; as latency they arrive together.
        self.mc.control.fault(ack_delay_ms=300)
        s = self.client.open_stream()
        for i in range(5):
            s.send(make_batch(T, [i]))
        times = []
        for _ in range(5):
            s.recv(WAIT)
            times.append(time.monotonic())
        self.assertLess(times[-1] - times[0], 0.6)
        s.finish(WAIT)


class AckDelayFlag(FaultTest):
    mock_kwargs = {"ack_delay_ms": 250}

    def test_ack_delay_flag_sets_the_delay(self):
        self.assertEqual(self.mc.control.get_fault()["ack_delay_ms"], 250)


class StorageFailure(FaultTest):
    mock_kwargs = {"store_path": "/dev/full"}   # every write fails with ENOSPC

    def test_failed_store_ends_the_stream_with_internal(self):
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        self.assertEqual(s.wait_end(WAIT), grpc.StatusCode.INTERNAL)

    def test_failed_store_leaves_no_dedup_marker(self):
        s = self.client.open_stream()
        s.send(make_batch(T, [0]))
        s.wait_end(WAIT)
        st = self.mc.topic_stats(T)
        self.assertEqual((st["stored"], st["marker"]), (0, None))


class CountMode(FaultTest):
    mock_kwargs = {"store_mode": "count"}

    def test_count_mode_counts_stored_messages(self):
        self.client.replicate([make_batch(T, range(100))])
        self.assertEqual(self.mc.topic_stats(T)["stored"], 100)

    def test_count_mode_writes_no_store_file(self):
        self.client.replicate([make_batch(T, range(10))])
        self.assertEqual(os.listdir(self.mc.workdir), ["mock-cluster.log"])


class Process(unittest.TestCase):
    def test_start_line_reports_ports_that_answer(self):
        with MockCluster() as mc:
            self.assertNotEqual(mc.grpc_port, 0)
            self.assertEqual(mc.control.get_fault()["mode"], "normal")

    def test_sigterm_with_an_open_stream_exits_zero(self):
        mc = MockCluster().start()
        try:
            with EdgeClient(mc.grpc_target) as c:
                s = c.open_stream()
                s.send(make_batch(T, [0]))
                s.recv(WAIT)
                self.assertEqual(mc.stop(), 0)
        finally:
            mc.cleanup()

    def test_bad_schemas_file_fails_the_start(self):
        mc = MockCluster(schemas={"s": {"type": "xml", "raw": "<a/>"}})
        try:
            with self.assertRaises(RuntimeError) as cm:
                mc.start()
            self.assertIn("unknown type", str(cm.exception))
        finally:
            mc.cleanup()

    def test_installed_tree_runs(self):
        prefix = tempfile.mkdtemp(prefix="tb-install-")
        try:
            subprocess.run(["cmake", "--install", build_dir(), "--prefix", prefix],
                           check=True, capture_output=True, timeout=120)
            launcher = os.path.join(prefix, "bin", "tributary-mock-cluster")
            env_build = os.environ.pop("TRIB_BUILD_DIR", None)   # no build-tree fallback
            try:
                with MockCluster(launcher_path=launcher) as mc, EdgeClient(mc.grpc_target) as c:
                    self.assertTrue(c.register("edge1", []).success)
            finally:
                if env_build is not None:
                    os.environ["TRIB_BUILD_DIR"] = env_build
        finally:
            shutil.rmtree(prefix)


if __name__ == "__main__":
    unittest.main(verbosity=2)
