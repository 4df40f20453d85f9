#!/usr/bin/env bash
# demo.sh: the quick start. Runs the mock Danube cluster on 127.0.0.1:6650
# (the embedded default's cluster_url) and the gateway on its embedded
# default (MQTT 127.0.0.1:1883, HTTP 127.0.0.1:9090, data under build/demo/),
# publishes one message with mosquitto_pub, shows the record the cluster
# stored, then keeps both running in the foreground until Ctrl-C (the
# gateway drains and exits 0, then the mock cluster stops).
# Called by `./scripts/dev.sh run`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEMO=$ROOT/build/demo
mkdir -p "$DEMO"
cd "$DEMO"
STORE=$DEMO/cluster.jsonl
rm -f "$STORE" mock.out
for bin in "$ROOT/build/tributary" "$ROOT/build/tributary-mock-cluster"; do
    [[ -x $bin ]] || { echo "missing $bin: build first (./scripts/dev.sh build)" >&2; exit 2; }
done

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
GW= MOCK=
cleanup() {
    trap - INT TERM EXIT
    [[ -n $GW ]] && kill -TERM "$GW" 2>/dev/null && wait "$GW" 2>/dev/null || true
    [[ -n $MOCK ]] && kill -TERM "$MOCK" 2>/dev/null && wait "$MOCK" 2>/dev/null || true
}
trap cleanup INT TERM EXIT
# The children run in their own sessions (setsid) so that Ctrl-C reaches
# only this script, and cleanup's single SIGTERM gives the gateway its
# drain; a terminal's SIGINT on top would be a second signal ("exit now").

# poll a condition every 100 ms, up to a deadline (seconds)
wait_for() { local secs=$1; shift; for _ in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done; return 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

say "mock Danube cluster on 127.0.0.1:6650, storing to $STORE"
setsid "$ROOT/build/tributary-mock-cluster" --port 6650 --store "$STORE" > mock.out 2> mock.log &
MOCK=$!
if ! wait_for 15 grep -q "mock-cluster listening" mock.out; then
    echo "the mock cluster did not start (is port 6650 taken?):" >&2
    cat mock.log >&2
    exit 1
fi

say "tributary on the embedded default (tributary check prints a file's effective configuration)"
setsid "$ROOT/build/tributary" run &
GW=$!
if ! wait_for 15 port_open 1883; then
    echo "the gateway is not listening on 127.0.0.1:1883 (is the port taken?)" >&2
    exit 1
fi

say "mosquitto_pub -t devices/demo-1/telemetry -m '{\"temperature\": 21.5}'"
mosquitto_pub -h 127.0.0.1 -p 1883 -q 1 -t devices/demo-1/telemetry -m '{"temperature": 21.5}'
if ! wait_for 15 test -s "$STORE"; then
    echo "the message did not reach the mock cluster within 15 s" >&2
    exit 1
fi
say "stored by the cluster:"
/usr/bin/python3 -m json.tool < <(head -1 "$STORE") >&2

say "running: publish to devices/<id>/telemetry or sensors/# on 127.0.0.1:1883;"
say "the cluster's records accumulate in $STORE; /stats on http://127.0.0.1:9090/stats; Ctrl-C stops"
wait "$GW" || true
GW=
