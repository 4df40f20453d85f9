"""tlib/mosq.py: a real Mosquitto 2 as the remote broker of an MQTT output
(issue 17), and a real subscriber on it recording what arrives.

    Mosquitto(workdir, tls=None, users=None)
        start() / stop() / kill(): /usr/sbin/mosquitto on 127.0.0.1, on the
        same port across restarts; `user root` (Mosquitto 2 refuses to run as
        root otherwise); persistence on, so a persistent subscriber's queue
        survives a stop (SIGTERM saves it). tls=(ca, cert, key): the listener
        speaks TLS. users={name: password}: a password file, anonymous off.
    Recorder(port, topic="#", tls_ca=None)
        a paho MQTT 5 client, persistent session (clean_start false, session
        expiry 1 h), QoS 1, reconnecting on its own; every message as
        (topic, payload, {user property: value}) in arrival order, with
        DUP ("$dup") in the dict when the remote set the DUP flag (its own
        redelivery to us, e.g. after it restarted: not the gateway's).
        wait_count(n, timeout) polls for n messages under a deadline,
        wait_unique(n, timeout) for n distinct ones. receive_maximum: the
        MQTT 5 Receive Maximum it asks for (default paho's: none sent, so
        the remote may keep 65,535 messages in flight to it).

As tests/unit/replicator/test_mosq.c starts its broker, with the same
config lines."""
import os
import signal
import socket
import subprocess
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from .gateway import free_port, wait_for

MOSQUITTO = "/usr/sbin/mosquitto"
DUP = "$dup"  # key the recorder sets in a message's property dict when the remote redelivered it


class Mosquitto:
    def __init__(self, workdir, tls=None, users=None, port=None):
        self.dir = os.path.join(workdir, "remote")
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or free_port()
        self.tls = tls
        self.users = users
        self.proc = None
        self.conf = os.path.join(self.dir, "mosquitto.conf")
        self.log_path = os.path.join(self.dir, "mosquitto.log")
        lines = ["user root", f"listener {self.port} 127.0.0.1", "persistence true",
                 f"persistence_location {self.dir}/", "autosave_interval 1", "max_queued_messages 0",
                 "max_inflight_messages 20", f"log_dest file {self.log_path}", "log_type error",
                 "log_type warning", "log_type notice", "log_type information"]
        if tls:
            ca, cert, key = tls
            lines += [f"cafile {ca}", f"certfile {cert}", f"keyfile {key}"]
        if users:
            pw = os.path.join(self.dir, "passwd")
            open(pw, "w").close()
            for name, password in users.items():
                subprocess.run(["mosquitto_passwd", "-b", pw, name, password], check=True, capture_output=True,
                               timeout=30)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines += ["allow_anonymous true"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self, timeout=10.0):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError(f"mosquitto exited ({self.proc.returncode}):\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            except OSError:
                return False
        wait_for(listening, timeout, what=f"mosquitto listening on {self.port}")
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None

    def kill(self):
        self.stop(signal.SIGKILL)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Recorder:
    def __init__(self, port, topic="#", tls_ca=None, client_id="trib-test-recorder", receive_maximum=None):
        self.lock = threading.Lock()
        self.msgs = []
        self.times = []  # time.monotonic() of each arrival, beside self.msgs
        self.first = threading.Event()
        self.subscribed = threading.Event()
        self.topic = topic
        c = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
        if tls_ca:
            c.tls_set(ca_certs=tls_ca)
        c.on_connect = self._on_connect
        c.on_subscribe = self._on_subscribe
        c.on_message = self._on_message
        c.reconnect_delay_set(min_delay=1, max_delay=1)
        c.max_inflight_messages_set(100)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        if receive_maximum:
            props.ReceiveMaximum = receive_maximum
        c.connect_async("127.0.0.1", port, keepalive=30, clean_start=False, properties=props)
        c.loop_start()
        self.c = c
        if not self.subscribed.wait(10):
            self.close()
            raise AssertionError("the recorder did not subscribe within 10 s")

    def _on_connect(self, c, userdata, flags, rc, props=None):
        if rc == 0:
            c.subscribe(self.topic, qos=1)

    def _on_subscribe(self, c, userdata, mid, granted, props=None):
        self.subscribed.set()

    def _on_message(self, c, userdata, m):
        up = {}
        if m.properties is not None and hasattr(m.properties, "UserProperty"):
            for k, v in m.properties.UserProperty:
                up[k] = v
        if m.dup:
            up[DUP] = "1"  # not a user property: the remote's own redelivery flag (DUP)
        with self.lock:
            self.msgs.append((m.topic, bytes(m.payload), up))
            self.times.append(time.monotonic())
        self.first.set()

    def count(self):
        with self.lock:
            return len(self.msgs)

    def snapshot(self):
        with self.lock:
            return list(self.msgs)

    def timed(self):
        """(arrival time, topic, payload) of every message, in arrival order."""
        with self.lock:
            return [(t, m[0], m[1]) for t, m in zip(self.times, self.msgs)]

    def unique(self):
        with self.lock:
            return len({(t, p) for t, p, _ in self.msgs})

    def wait_unique(self, n, timeout):
        """Polls for n distinct (topic, payload) pairs (duplicates not counted)."""
        return wait_for(lambda: self.unique() >= n, timeout, interval=0.05, what=f"{n} distinct messages at the remote")

    def wait_count(self, n, timeout):
        return wait_for(lambda: self.count() >= n, timeout, interval=0.05, what=f"{n} messages at the remote")

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def publish_all(port, items, qos=1, props=None, client_id="trib-test-device", timeout=120):
    """Publishes (topic, payload) items in order with one MQTT 5 client (QoS qos,
    100 in flight), user properties props; returns when the gateway acknowledged
    every one (PUBACK: stored)."""
    c = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
    c.max_inflight_messages_set(100)
    c.max_queued_messages_set(0)
    c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    try:
        p = None
        if props:
            p = Properties(PacketTypes.PUBLISH)
            p.UserProperty = list(props.items())
        infos = [c.publish(t, payload, qos=qos, properties=p) for t, payload in items]
        deadline = time.monotonic() + timeout
        for i in infos:
            i.wait_for_publish(max(0.1, deadline - time.monotonic()))
            if not i.is_published():
                raise AssertionError("the gateway did not acknowledge every publish in time")
    finally:
        c.disconnect()
        c.loop_stop()
