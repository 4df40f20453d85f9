#!/usr/bin/python3
"""recorder.py: the remote's subscriber of a store-and-forward run with
OUTPUT=mqtt (run.sh): what the far side of the MQTT output received, as a
file the judge reads the way it reads the mock cluster's store.

    recorder.py --port PORT --topic FILTER --out arrivals.jsonl
                [--end-topic TOPIC] [--ready FILE] [--end FILE]

It is tlib/mosq.py's Recorder (a paho MQTT 5 client, persistent session:
clean_start false and a session expiry of an hour, QoS 1, reconnecting on
its own every second), so a remote stopped and restarted with its
persistence keeps what was queued for it, and nothing the remote took is
lost on the way to the judge. Each arrival is one line, written and
flushed as it comes:
  {"topic", "payload", "received_at" (epoch ms), "dup" (the remote set
   DUP: its own redelivery to us), "replayed" (the gateway's
   tributary.replayed user property)}
--ready is created once the subscription is granted; a message on
--end-topic is not recorded but creates --end: run.sh publishes it after
the gateway's output has drained, and since the remote queues a
subscriber's messages in the order it took them, everything the gateway
delivered is in the file once it arrives. SIGTERM: disconnect and exit 0.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

from tlib.mosq import Recorder  # noqa: E402


class FileRecorder(Recorder):
    def __init__(self, port, topic, out, end_topic, end_path):
        self.out = open(out, "a", encoding="utf-8")
        self.end_topic = end_topic
        self.end_path = end_path
        # Receive Maximum 1,000: without it the remote keeps up to 65,535 messages in
        # flight to us, and redelivers them all (DUP) when we reconnect. We do reconnect
        # in a long replay: paho gives up on its keepalive (rc 16) every minute or so
        # while the remote streams at it, cause not understood; the judge counts those
        # redeliveries as the remote's, and this keeps each to the window.
        super().__init__(port, topic, client_id="sf-recorder", receive_maximum=1000)
        self.c.on_disconnect = self._on_disconnect

    # Each session's start and end, to stderr (recorder.log): the remote's redeliveries
    # (DUP) follow a reconnect, and this says when they did.
    def _on_connect(self, c, userdata, flags, rc, props=None):
        print(f"{int(time.time() * 1000)} connected rc={rc} session_present={flags.get('session present')}",
              file=sys.stderr, flush=True)
        super()._on_connect(c, userdata, flags, rc, props)

    def _on_disconnect(self, c, userdata, rc, props=None):
        print(f"{int(time.time() * 1000)} disconnected rc={rc}", file=sys.stderr, flush=True)

    def _on_message(self, c, userdata, m):
        if m.topic == self.end_topic:
            open(self.end_path, "w").close()
            return
        up = {}
        if m.properties is not None and hasattr(m.properties, "UserProperty"):
            up = dict(m.properties.UserProperty)
        line = json.dumps({"topic": m.topic, "payload": bytes(m.payload).decode("utf-8", "replace"),
                           "received_at": int(time.time() * 1000), "dup": bool(m.dup),
                           "replayed": up.get("tributary.replayed") == "true"})
        self.out.write(line + "\n")
        self.out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--end-topic", default="")
    ap.add_argument("--ready", default="")
    ap.add_argument("--end", default="")
    a = ap.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    r = FileRecorder(a.port, a.topic, a.out, a.end_topic, a.end)
    if a.ready:
        open(a.ready, "w").close()
    stop.wait()
    r.close()
    r.out.close()


if __name__ == "__main__":
    main()
