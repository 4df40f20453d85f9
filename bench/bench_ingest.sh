#!/usr/bin/env bash
# bench_ingest.sh: MQTT ingest rate, Tributary beside Mosquitto 2 (Debian's,
# persistence on), same machine, same run, same load generator (loadgen.c).
#
#   bench/bench_ingest.sh [-n MESSAGES] [-s PAYLOAD_BYTES] [-c "10 100"] [-q "0 1"] [-f "always interval"] [-r REPEATS]
#
# Each figure is the median of REPEATS runs (default 3): single runs of
# either server vary by up to 2x on a shared machine.
#
# Mosquitto stores nothing here (nobody subscribes), while Tributary writes
# every message to its log and acks QoS 1 only after the log's fsync mode is
# satisfied: the comparison is what a device sees, not equal work.
# Prints a table and writes it as Markdown to build/bench/ingest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
N=200000 SIZE=100 CONNS="10 100" QOSES="0 1" MODES="always interval" REPEATS=3
while getopts "n:s:c:q:f:r:" o; do
    case $o in n) N=$OPTARG ;; s) SIZE=$OPTARG ;; c) CONNS=$OPTARG ;; q) QOSES=$OPTARG ;; f) MODES=$OPTARG ;;
               r) REPEATS=$OPTARG ;; *) exit 2 ;; esac
done
LOADGEN=$B/bench/loadgen
[[ -x $LOADGEN && -x $B/tributary ]] || { echo "build first: ./scripts/dev.sh build" >&2; exit 2; }
WORK=$(mktemp -d /tmp/trib-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }
rate1() { "$LOADGEN" -p "$1" -c "$2" -n "$N" -s "$SIZE" -q "$3" -t bench | sed -n 's/.*rate=\([0-9]*\).*/\1/p'; }
rate() { # median of REPEATS runs
    local i
    for i in $(seq "$REPEATS"); do rate1 "$@"; done | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

MPORT=$(free_port)
mkdir -p "$WORK/mosq"
cat > "$WORK/mosq/m.conf" <<CONF
listener $MPORT 127.0.0.1
allow_anonymous true
persistence true
persistence_location $WORK/mosq/
max_inflight_messages 0
max_queued_messages 0
user root
CONF
mosquitto -c "$WORK/mosq/m.conf" > "$WORK/mosq/log" 2>&1 &
MPID=$!
wait_port "$MPORT"

declare -A MOSQ
for q in $QOSES; do for c in $CONNS; do MOSQ[$q,$c]=$(rate "$MPORT" "$c" "$q"); done; done
kill $MPID; wait $MPID 2>/dev/null || true

OUT=$B/bench/ingest.md
{
    echo "Ingest, $N messages of $SIZE bytes, median of $REPEATS runs, $(nproc) cores, $(date -u +%Y-%m-%d), $(mosquitto -h 2>/dev/null | head -1 | sed 's/ is an.*//')"
    echo
    echo "| fsync | QoS | connections | Tributary msg/s | Mosquitto msg/s | ratio |"
    echo "|---|---|---|---|---|---|"
} > "$OUT"
for mode in $MODES; do
    TPORT=$(free_port)
    mkdir -p "$WORK/t-$mode"
    cat > "$WORK/t-$mode/edge.yaml" <<CONF
edge: {edge_name: bench, cluster_url: "http://127.0.0.1:1"}
mqtt:
  listener: "127.0.0.1:$TPORT"
  max_connections: 100000
  topic_mappings:
    - {mqtt_pattern: "bench/+/tele", danube_topic: /bench/tele, extract_attributes: {conn: "\$1"}}
wal: {dir: $WORK/t-$mode/wal, fsync: $mode, max_topic_bytes: 8GiB, max_total_bytes: 8GiB}
http: {listener: "127.0.0.1:0"}
log: {level: warn}
CONF
    $B/tributary run -c "$WORK/t-$mode/edge.yaml" > "$WORK/t-$mode/log" 2>&1 &
    TPID=$!
    wait_port "$TPORT"
    for q in $QOSES; do for c in $CONNS; do
        t=$(rate "$TPORT" "$c" "$q"); mq=${MOSQ[$q,$c]}
        ratio=$(awk -v a="$t" -v b="$mq" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
        echo "| $mode | $q | $c | $t | $mq | $ratio |" >> "$OUT"
    done; done
    kill -TERM $TPID; wait $TPID 2>/dev/null || true
    rm -rf "$WORK/t-$mode/wal"
done
cat "$OUT"
