"""mc_faults.py: the fault the mock cluster is currently playing.

Modes (docs/MOCK-CLUSTER.md):
  normal       behave like the cluster
  refuse       the gRPC server is stopped: connections are refused
               (mc_grpc.GrpcFront acts on this; "normal" starts it again on
               the same port)
  silent       a black hole: streams are accepted and batches read and
               dropped, never acked; unary calls hang until the client's
               deadline (or until the mode changes, then they are answered)
  unavailable  every call fails with UNAVAILABLE
  internal     ReplicateData streams end with INTERNAL at their next batch
               (a storage failure); unary calls are answered
ack_delay_ms delays each ack by that much after its batch was stored,
without slowing the reading of later batches: it is latency, not a
throughput cap.

A Condition lets hung calls wake when the mode changes or their call ends.
"""
import threading

MODES = ("normal", "refuse", "silent", "unavailable", "internal")


class Faults:
    def __init__(self, mode="normal", ack_delay_ms=0):
        self._cond = threading.Condition()
        self.mode = "normal"
        self.ack_delay_ms = 0
        self.hanging = 0                # unary calls held by "silent" right now
        self.set(mode, ack_delay_ms)

    def set(self, mode=None, ack_delay_ms=None):
        """Changes the mode and/or the ack delay. Raises ValueError."""
        if mode is not None and mode not in MODES:
            raise ValueError(f"fault mode must be one of {', '.join(MODES)}")
        if ack_delay_ms is not None and (not isinstance(ack_delay_ms, int)
                                         or isinstance(ack_delay_ms, bool)
                                         or ack_delay_ms < 0):
            raise ValueError("ack_delay_ms must be a non-negative integer")
        with self._cond:
            if mode is not None:
                self.mode = mode
            if ack_delay_ms is not None:
                self.ack_delay_ms = ack_delay_ms
            self._cond.notify_all()

    def to_json(self):
        with self._cond:
            return {"mode": self.mode, "ack_delay_ms": self.ack_delay_ms,
                    "hanging_calls": self.hanging}

    def hang_while_silent(self, context):
        """Blocks a unary call while the mode is silent. Returns True if the
        call should now be answered, False if it ended (deadline, cancel,
        server stop) while hanging."""
        ended = []

        def on_end():
            with self._cond:
                ended.append(True)
                self._cond.notify_all()

        if self.mode != "silent":
            return True
        if not context.add_callback(on_end):
            return False                # the call has already ended
        with self._cond:
            self.hanging += 1
            self._cond.wait_for(lambda: ended or self.mode != "silent")
            self.hanging -= 1
        return not ended
