"""mc_control.py: the mock cluster's control port, a small HTTP JSON API.

Tests steer the mock through it while it runs: inject faults, change the
schema registry, remove topics, forget edges, and read counters. It is
http.server in a thread on 127.0.0.1 only (never exposed), one request per
connection, JSON in and out. Every change answers with the resulting state
so a test needs no second call to know what it did.

  GET    /stats               per-topic and total counters
  GET    /registrations       edges (config_version, registrations, topics)
  GET    /schemas             latest version of every subject
  GET    /fault               fault mode, ack delay, unary calls hanging now
  POST   /fault               {"mode": "...", "ack_delay_ms": N} (either key)
  POST   /schema              {"subject", "type", "raw", "compatibility_mode"?,
                               "message_name"?}: add or change a subject
  DELETE /schema/<subject>    remove a subject
  DELETE /topic/<name>        remove a topic; <name> keeps its slashes:
                              DELETE /topic/edge1/telemetry removes /edge1/telemetry
  POST   /reset-edge          {"edge_name": "..."} forget one edge; {} forgets all
  POST   /lookup              {"mode": "connect|redirect|failed", "url"?}
"""
import http.server
import json
import logging
import threading
import urllib.parse

from mc_faults import MODES as FAULT_MODES
from mc_schemas import SchemaError

log = logging.getLogger("mock-cluster")


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class ControlServer:
    def __init__(self, state, faults, front, port=0):
        self.state = state
        self.faults = faults
        self.front = front
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = None

    def start(self):
        # A short poll interval: shutdown() waits for the loop to notice.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="control", daemon=True)
        self._thread.start()

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()

    # ---- routes -----------------------------------------------------------

    def route(self, method, path, body):
        """Returns (status, json_object); raises HttpError."""
        path = urllib.parse.unquote(path.split("?", 1)[0])
        if method == "GET":
            if path == "/stats":
                return 200, self.state.stats_json()
            if path == "/registrations":
                return 200, self.state.registrations_json()
            if path == "/schemas":
                with self.state.lock:
                    return 200, self.state.registry.to_json()
            if path == "/fault":
                return 200, self.faults.to_json()
        elif method == "POST":
            if path == "/fault":
                return self._post_fault(body)
            if path == "/schema":
                try:
                    sv, changed = self.state.put_schema(body)
                except SchemaError as e:
                    raise HttpError(400, str(e)) from None
                return 200, {"changed": changed, **sv.to_json()}
            if path == "/reset-edge":
                name = body.get("edge_name")
                return 200, {"forgotten": self.state.reset_edge(name)}
            if path == "/lookup":
                try:
                    self.state.set_lookup(body.get("mode"), body.get("url"))
                except ValueError as e:
                    raise HttpError(400, str(e)) from None
                return 200, {"mode": body.get("mode"), "url": body.get("url")}
        elif method == "DELETE":
            if path.startswith("/schema/") and len(path) > len("/schema/"):
                subject = path[len("/schema/"):]
                if not self.state.delete_schema(subject):
                    raise HttpError(404, f"no subject {subject}")
                return 200, {"deleted": subject}
            if path.startswith("/topic/") and len(path) > len("/topic/"):
                name = path[len("/topic"):]
                if not self.state.delete_topic(name):
                    raise HttpError(404, f"no topic {name}")
                return 200, {"deleted": name}
        raise HttpError(404, f"no route {method} {path}")

    def _post_fault(self, body):
        mode = body.get("mode")
        delay = body.get("ack_delay_ms")
        if mode is None and delay is None and "poison" not in body:
            raise HttpError(400, f"give 'mode' ({'|'.join(FAULT_MODES)}), 'ack_delay_ms' and/or 'poison'")
        try:
            if "poison" in body:
                self.faults.set_poison(body["poison"])
            self.faults.set(mode, delay)
        except ValueError as e:
            raise HttpError(400, str(e)) from None
        try:
            self.front.apply_fault()
        except OSError as e:
            raise HttpError(500, f"cannot restart the gRPC server: {e}") from None
        log.info("fault mode=%s ack_delay_ms=%d", self.faults.mode, self.faults.ack_delay_ms)
        return 200, {**self.faults.to_json(), "grpc_running": self.front.running}

    # ---- HTTP plumbing ----------------------------------------------------

    def _handler_class(self):
        control = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _serve(self, method):
                try:
                    body = {}
                    n = int(self.headers.get("Content-Length") or 0)
                    if n:
                        try:
                            body = json.loads(self.rfile.read(n))
                        except ValueError as e:
                            raise HttpError(400, f"body is not JSON: {e}") from None
                        if not isinstance(body, dict):
                            raise HttpError(400, "body must be a JSON object")
                    status, obj = control.route(method, self.path, body)
                except HttpError as e:
                    status, obj = e.status, {"error": str(e)}
                data = (json.dumps(obj) + "\n").encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_DELETE(self):
                self._serve("DELETE")

            def log_message(self, fmt, *args):
                log.debug("control: " + fmt, *args)

        return Handler
