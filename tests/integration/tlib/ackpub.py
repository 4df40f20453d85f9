"""tlib/ackpub.py: a QoS 1 publisher that remembers exactly which messages
got a PUBACK, for tests that kill the gateway under it.

Why not paho or libmosquitto: they hide the one fact a crash test needs,
"did this message's PUBACK reach the client before the server died?", behind
their own retry queues. This client is built on tlib.mqttraw and keeps that
ledger itself:

  - messages are numbered 0, 1, 2 ... per client; the payload names the
    client and the number, so a record in `wal dump` says whose it is;
  - up to `window` messages are in flight; a PUBACK (reason 0) moves a
    message from `unacked` to `acked`, noting the gateway's lifetime (the
    controller's generation) in which it came;
  - when the connection dies (the gateway was killed) the client waits for
    the controller to announce the next gateway's port, reconnects and
    resends, in order and with DUP set, every message that had no PUBACK,
    as a correct MQTT client does; an acknowledged message is never resent.

The controller (the test's main thread) drives generations through a
Controller: announce(port) after each start, stop() to let the clients
finish. Every wait has a deadline.
"""
import threading
import time

from tlib import mqttraw as m


class Controller:
    """The port of the current gateway lifetime, shared with the clients."""

    def __init__(self):
        self.cond = threading.Condition()
        self.gen = 0
        self.port = None
        self.stopping = False
        self.acks = 0            # PUBACKs received, all clients, all lifetimes

    def announce(self, port):
        with self.cond:
            self.gen += 1
            self.port = port
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def next_port(self, after_gen, timeout):
        """Waits until a lifetime newer than after_gen is announced: (gen, port)."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.gen > after_gen, timeout):
                raise TimeoutError(f"no gateway announced within {timeout}s")
            return self.gen, self.port

    def count_ack(self):
        with self.cond:
            self.acks += 1
            self.cond.notify_all()

    def wait_acks(self, above, timeout):
        """True once more than `above` PUBACKs were received in total."""
        with self.cond:
            return self.cond.wait_for(lambda: self.acks > above, timeout)


def payload_of(name, seq, pad):
    return f"{name}:{seq:08d}:{'x' * pad}"


def parse_payload(text):
    """(client name, seq) from a payload made by payload_of, else None."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


class AckedPublisher(threading.Thread):
    def __init__(self, ctl, name, topic, version=4, window=8, pad=48, reconnect_timeout=60.0):
        super().__init__(name=name, daemon=True)
        self.ctl, self.cname, self.topic = ctl, name, topic
        self.version, self.window, self.pad = version, window, pad
        self.reconnect_timeout = reconnect_timeout
        self.next_seq = 0
        self.unacked = {}        # seq -> packet id, insertion (= send) order
        self.acked = {}          # seq -> generation whose gateway acked it
        self.sends = {}          # seq -> how many times it was sent
        self.connections = 0
        self.error = None        # an unexpected failure, re-raised by the test

    # ---- the connection ----------------------------------------------------

    def _connect(self, port):
        try:
            c = m.Raw(port, timeout=5.0)
        except OSError:
            return None          # that gateway is gone already
        try:
            c.send(m.connect(self.cname, version=self.version, clean=False,
                             session_expiry=3600 if self.version == 5 else None))
            ack = c.read()
        except OSError:
            c.close()
            return None
        if ack is None:
            c.close()
            return None
        if ack.type != m.CONNACK or ack.reason() != 0:
            raise AssertionError(f"{self.cname}: CONNACK refused: {ack}")
        return c

    def _send(self, c, seq, dup):
        pid = seq % 65535 + 1
        self.unacked[seq] = pid
        self.sends[seq] = self.sends.get(seq, 0) + 1
        c.send(m.publish(self.topic, payload_of(self.cname, seq, self.pad), qos=1, pid=pid,
                         version=self.version, dup=dup))

    def _on_puback(self, p, gen):
        if p.type != m.PUBACK:
            raise AssertionError(f"{self.cname}: unexpected packet {p}")
        if p.reason(self.version) != 0:
            raise AssertionError(f"{self.cname}: PUBACK with reason {p.reason():#x}")
        oldest = next(iter(self.unacked), None)
        if oldest is None or self.unacked[oldest] != p.packet_id:
            raise AssertionError(f"{self.cname}: PUBACK {p.packet_id} out of order (oldest unacked {oldest})")
        del self.unacked[oldest]
        self.acked[oldest] = gen
        self.ctl.count_ack()

    def _session(self, c, gen):
        """Publishes on one connection until it dies or the run is over."""
        for seq in list(self.unacked):
            self._send(c, seq, dup=True)
        while True:
            stopping = self.ctl.stopping
            if stopping and not self.unacked:
                return True
            while not stopping and len(self.unacked) < self.window:
                self.next_seq += 1   # first: a send that fails still used the number
                self._send(c, self.next_seq - 1, dup=False)
            try:
                p = c.read(timeout=0.5)
            except TimeoutError:
                continue         # the gateway is slow (a sync, a sanitizer): keep waiting
            if p is None:
                return False     # the gateway died
            self._on_puback(p, gen)

    def run(self):
        gen = 0
        try:
            while True:
                gen, port = self.ctl.next_port(gen, self.reconnect_timeout)
                c = self._connect(port)
                if c is None:
                    continue     # killed before it answered: wait for the next one
                self.connections += 1
                try:
                    done = self._session(c, gen)
                except OSError:
                    done = False  # reset while sending: the gateway died
                if done:
                    c.send(m.disconnect(self.version))
                    c.close()
                    return
                c.close()
        except BaseException as e:  # noqa: B036 - reported to the test thread
            self.error = e


def join_all(clients, timeout):
    deadline = time.monotonic() + timeout
    for c in clients:
        c.join(max(0.0, deadline - time.monotonic()))
        if c.is_alive():
            raise AssertionError(f"{c.cname} did not finish within {timeout}s "
                                 f"({len(c.unacked)} messages still unacknowledged)")
        if c.error:
            raise c.error
