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
poison (independent of the mode) refuses batches for good, as a cluster
that will never take them: {"payload_contains": "POISON"} refuses a batch
holding a message whose payload contains those bytes (a per-message
rejection: the protocol has none of its own, so the stream ends with the
status, naming the message), {"offsets": [A, B]} a batch holding any offset
in A..B (a per-batch error); "status" (default INVALID_ARGUMENT) is the gRPC
status name the stream ends with, "topic" limits it to one topic. Nothing
of a refused batch is stored. {"poison": null} clears it.

A Condition lets hung calls wake when the mode changes or their call ends.
"""
import threading

MODES = ("normal", "refuse", "silent", "unavailable", "internal")
STATUS_NAMES = ("CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")


class Faults:
    def __init__(self, mode="normal", ack_delay_ms=0):
        self._cond = threading.Condition()
        self.mode = "normal"
        self.ack_delay_ms = 0
        self.hanging = 0                # unary calls held by "silent" right now
        self.poison = None              # see set_poison
        self.poisoned_batches = 0
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

    def set_poison(self, p):
        """Sets (dict) or clears (None) the poison rule. Raises ValueError."""
        if p is not None:
            if not isinstance(p, dict) or not set(p) <= {"payload_contains", "offsets", "status", "topic"}:
                raise ValueError("poison: an object with payload_contains and/or offsets [A, B], "
                                 "optional status and topic")
            if "payload_contains" not in p and "offsets" not in p:
                raise ValueError("poison needs payload_contains or offsets")
            offs = p.get("offsets")
            if offs is not None and (not isinstance(offs, list) or len(offs) != 2
                                     or not all(isinstance(x, int) for x in offs)):
                raise ValueError("poison.offsets must be [first, last]")
            status = p.get("status", "INVALID_ARGUMENT")
            if status not in STATUS_NAMES:
                raise ValueError(f"poison.status must be a gRPC status name, not {status!r}")
            p = {**p, "status": status}
        with self._cond:
            self.poison = p

    def poisoned(self, batch):
        """The (status name, text) a poisoned batch is refused with, or None."""
        p = self.poison
        if p is None or ("topic" in p and p["topic"] != batch.topic_name):
            return None
        needle = p.get("payload_contains")
        needle = needle.encode() if isinstance(needle, str) else None
        offs = p.get("offsets")
        for m in batch.messages:
            off = m.msg_id.topic_offset
            if needle is not None and needle in m.payload:
                why = f"message at offset {off} rejected: payload holds {p['payload_contains']!r}"
            elif offs is not None and offs[0] <= off <= offs[1]:
                why = f"batch ending at {batch.batch_last_offset} rejected: offset {off} is refused"
            else:
                continue
            with self._cond:
                self.poisoned_batches += 1
            return p["status"], "mock cluster: " + why
        return None

    def to_json(self):
        with self._cond:
            return {"mode": self.mode, "ack_delay_ms": self.ack_delay_ms,
                    "hanging_calls": self.hanging, "poison": self.poison,
                    "poisoned_batches": self.poisoned_batches}

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
