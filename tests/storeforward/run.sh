#!/usr/bin/env bash
# run.sh: one store-and-forward scenario against the real gateway, judged.
#
#   tests/storeforward/run.sh [--build DIR] [--out DIR] [KNOB=VALUE ...]
#
# Starts the mock Danube cluster (jsonl store: what the cluster received)
# or, with OUTPUT=mqtt, a real Mosquitto 2 as the remote of an MQTT output
# and a persistent QoS 1 subscriber on it (recorder.py: what the remote
# delivered), the real `tributary run`, and DEVICES simulated devices (bench/devices.c:
# real MQTT clients, a counter each, an ack log each), then plays a
# timeline: warm-up, an outage of the cluster, SIGKILLs of the gateway
# spread across the outage and landed in the middle of the replay, the
# drain, a little steady load, and a clean stop. judge.py then reads the
# cluster's store (or the subscriber's recording), the devices' ack logs
# and `tributary wal check`, prints
# the report and exits non-zero if anything acknowledged is missing and
# uncounted, or a device's readings arrived out of order.
#
# Why bash: the timeline is a list of process starts, signals and control
# calls, which is what a shell says shortest; everything that counts is in
# judge.py. The sleeps here ARE the scenario (how long a warm-up or an
# outage lasts); every wait for a state (a port open, a drain finished,
# devices connected) polls that state under a deadline.
#
# Knobs (environment or KNOB=VALUE arguments; defaults are a short run):
#   OUTPUT=danube       danube: the mock cluster (the implied output) |
#                       mqtt: an output {kind: mqtt, protocol: 5, qos: 1} to
#                       a Mosquitto 2 started here on a free port (persistence
#                       on, so its subscriber's queue survives a stop)
#   MQTT_INFLIGHT=100   the MQTT output's max_inflight
#   MQTT_MAX_MSGS_PER_S=0  its rate cap (max_messages_per_s): a replay that
#                       takes a while, so a replay kill lands in it (the
#                       mqtt counterpart of MOCK_ACK_DELAY_MS)
#   DEVICES=4 RATE=50 QOS=1 SIZE=100 WINDOW=20 TOPICS=2  the devices
#   WARMUP=2            seconds of load before the outage
#   OUTAGE=refused      refused | silent | killed (mock cluster SIGKILLed,
#                       restarted on the same port) | none. OUTPUT=mqtt:
#                       refused = Mosquitto SIGTERMed (it saves its queues)
#                       and started again on the same port, silent = it is
#                       SIGSTOPped and SIGCONTed (takes bytes, answers
#                       nothing); killed is refused (a SIGKILLed Mosquitto
#                       loses what it acknowledged but had not saved: its
#                       loss, not the gateway's), and so are FLAP and BOUNDED
#   OUTAGE_SECS=4       length of the outage
#   KILLS_OUTAGE=1      gateway SIGKILLs spread evenly across the outage
#   KILL_TIMES=""       or the moments of those kills, in seconds from the
#                       outage's start, comma-separated (e.g. 0.5,30,299)
#   KILLS_REPLAY=1      gateway SIGKILLs during the replay: each waits for
#                       the cluster to be receiving the backlog, then lands
#                       REPLAY_KILL_AFTER_MS later (if the backlog drained
#                       first, the kill is skipped and the report says so)
#   REPLAY_KILL_AFTER_MS=200
#   RESTART_DELAY=0.5   seconds between a SIGKILL and the restart
#   FSYNC=always        wal.fsync; FSYNC_INTERVAL_MS=1000
#   SEGMENT_BYTES=16MiB MAX_TOPIC_BYTES=1GiB MAX_TOTAL_BYTES=4GiB  disk bound
#   BOUNDED=0           1: the run is meant to overflow the bound (the judge
#                       then requires every missing reading counted as dropped
#                       and the drops to be the oldest; 0: requires no drops)
#   RETRY_MAX_MS=30000  replicator.retry_max_ms (the product default)
#   MOCK_ACK_DELAY_MS=0 the mock cluster holds each ack this long (a slower
#                       replay, so a short run's replay kill lands mid-replay)
#   DURABILITY=log      log | memory_first: every mapping's durability (issue 16)
#   MF_ACK=upstream     wal.memory_first.ack (upstream | received)
#   SPILL_AFTER_MS=250  wal.memory_first.spill_after_ms
#   FLAP=""             H/S: before the outage, the cluster alternates H
#                       seconds healthy and S seconds slow (each ack held
#                       FLAP_SLOW_MS, past spill_after_ms) for FLAP_SECS,
#                       with FLAP_KILLS gateway SIGKILLs spread across it
#   FLAP_SECS=0 FLAP_KILLS=0 FLAP_SLOW_MS=(3 x SPILL_AFTER_MS)
#   AFTER=2             seconds of steady load after the drain
#   DRAIN_TIMEOUT=120   seconds allowed for the backlog to drain
#   LOG_LEVEL=info
# Output: OUT (default a fresh /tmp/sf-run.XXXX) holds every log, the store
# (OUTPUT=mqtt: arrivals.jsonl and remote/, Mosquitto's config, log and
# persistence), the ack logs, events.jsonl (the timeline as it happened)
# and report.json.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${TRIB_BUILD_DIR:-$ROOT/build}
OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *=*) export "${1?}"; shift ;;
        *) sed -n '2,76p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
: "${DEVICES:=4}" "${RATE:=50}" "${QOS:=1}" "${SIZE:=100}" "${WINDOW:=20}" "${TOPICS:=2}"
: "${WARMUP:=2}" "${OUTAGE:=refused}" "${OUTAGE_SECS:=4}" "${KILLS_OUTAGE:=1}" "${KILLS_REPLAY:=1}"
: "${REPLAY_KILL_AFTER_MS:=200}" "${RESTART_DELAY:=0.5}" "${FSYNC:=always}" "${FSYNC_INTERVAL_MS:=1000}"
: "${SEGMENT_BYTES:=16MiB}" "${MAX_TOPIC_BYTES:=1GiB}" "${MAX_TOTAL_BYTES:=4GiB}" "${BOUNDED:=0}"
: "${RETRY_MAX_MS:=30000}" "${MOCK_ACK_DELAY_MS:=0}" "${AFTER:=2}" "${DRAIN_TIMEOUT:=120}" "${LOG_LEVEL:=info}" "${KILL_TIMES:=}"
: "${DURABILITY:=log}" "${MF_ACK:=upstream}" "${SPILL_AFTER_MS:=250}" "${FLAP:=}" "${FLAP_SECS:=0}" "${FLAP_KILLS:=0}"
: "${FLAP_SLOW_MS:=$(( 3 * SPILL_AFTER_MS ))}"
: "${OUTPUT:=danube}" "${MQTT_INFLIGHT:=100}" "${MQTT_MAX_MSGS_PER_S:=0}"
case $OUTPUT in danube|mqtt) ;; *) echo "run.sh: OUTPUT must be danube|mqtt" >&2; exit 2 ;; esac
if [[ $OUTPUT == mqtt ]]; then
    [[ $OUTAGE != killed ]] || { echo "run.sh: OUTPUT=mqtt takes OUTAGE=refused|silent|none" >&2; exit 2; }
    [[ -z $FLAP && $BOUNDED == 0 ]] || { echo "run.sh: OUTPUT=mqtt runs without FLAP and BOUNDED" >&2; exit 2; }
fi
case $DURABILITY in log|memory_first) ;; *) echo "run.sh: DURABILITY must be log|memory_first" >&2; exit 2 ;; esac
if [[ -n $FLAP && ! $FLAP =~ ^[0-9]+/[0-9]+$ ]]; then echo "run.sh: FLAP must be H/S (seconds healthy/slow)" >&2; exit 2; fi
case $OUTAGE in refused|silent|killed|none) ;; *) echo "run.sh: OUTAGE must be refused|silent|killed|none" >&2; exit 2 ;; esac

TRIB=${TRIBUTARY_BIN:-$BUILD/tributary}
MOCK=$BUILD/tributary-mock-cluster
DEVBIN=$BUILD/bench/devices
MOSQUITTO=/usr/sbin/mosquitto
REMOTE_BINS=("$MOCK")
[[ $OUTPUT == danube ]] || REMOTE_BINS=("$MOSQUITTO" /usr/bin/mosquitto_pub)
for b in "$TRIB" "${REMOTE_BINS[@]}" "$DEVBIN"; do
    [[ -x $b ]] || { echo "run.sh: $b not built (cmake --build $BUILD)" >&2; exit 2; }
done
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/sf-run.XXXXXX)
mkdir -p "$OUT/devices"
EVENTS=$OUT/events.jsonl
: > "$EVENTS"
GW_PID="" MOCK_PID="" DEV_PID="" REMOTE_PID="" REC_PID=""

cleanup() {
    local p
    [[ -z $REMOTE_PID ]] || kill -CONT "$REMOTE_PID" 2>/dev/null || true
    for p in $DEV_PID $GW_PID $MOCK_PID $REC_PID $REMOTE_PID; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
event() { # what [extra json fields]
    printf '{"at_ms":%s,"event":"%s"%s}\n' "$(now_ms)" "$1" "${2:+,$2}" >> "$EVENTS"
    printf '[%s] %s %s\n' "$(date +%T.%3N)" "$1" "${2:-}" >&2
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_true() { # timeout_s what command...: polls the command every 20 ms until it succeeds
    local timeout=$1 what=$2; shift 2
    local deadline=$(( $(now_ms) + ${timeout%.*} * 1000 ))
    until "$@"; do
        if (( $(now_ms) > deadline )); then echo "run.sh: timed out after ${timeout}s waiting for $what" >&2; return 1; fi
        sleep 0.02
    done
}
port_open() { (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
stats() { curl -sf --max-time 2 "http://127.0.0.1:$HTTP_PORT/stats"; }
mock_stats() { curl -sf --max-time 2 "http://127.0.0.1:$CTL_PORT/stats"; }
lag() { stats | jq '[.topics[].lag_messages] | add'; }
mock_stored() { mock_stats | jq '.totals.stored'; }
remote_received() { # what the far side has received so far (duplicates included)
    if [[ $OUTPUT == danube ]]; then mock_stored; else wc -l < "$OUT/arrivals.jsonl"; fi
}
devices_connected() { [[ $(stats | jq '.connections.mqtt' 2>/dev/null) == "$DEVICES" ]]; }
caught_up() { # the backlog is gone: nothing waits longer than a second (live readings keep coming)
    local s; s=$(stats) || return 1
    [[ $(jq '[.topics[] | (.oldest_unreplicated_age_seconds // 0) | select(. > 1)] | length' <<<"$s") == 0 ]] || return 1
    # OUTPUT=mqtt: the MQTT output's age reads 0 at moments when nothing is in flight, even
    # with tens of thousands waiting (seen in the replay of a 120 s outage), so there a topic
    # must also hold no more than a second of its arrivals and one window in flight
    [[ $OUTPUT == danube ]] ||
        [[ $(jq --argjson max $(( DEVICES * RATE / TOPICS + MQTT_INFLIGHT )) \
                '[.topics[] | select(.lag_messages > $max)] | length' <<<"$s") == 0 ]]
}
drained() { # the cluster has everything the log holds (once the devices have stopped)
    local s; s=$(stats) || return 1
    [[ $(jq '[.topics[] | .lag_messages] | add' <<<"$s") == 0 ]] || return 1
    if [[ $OUTPUT == danube ]]; then
        [[ $(jq -r '.cluster.state' <<<"$s") == connected ]]
    else
        [[ $(jq -r '.outputs[] | select(.output == "central") | .state' <<<"$s") == up ]]
    fi
}

GRPC_PORT=$(free_port) CTL_PORT=$(free_port) MQTT_PORT=$(free_port) HTTP_PORT=$(free_port) REMOTE_PORT=$(free_port)

# ---- the gateway's configuration ---------------------------------------------
{
    if [[ $OUTPUT == danube ]]; then
        echo "edge: {edge_name: sf, cluster_url: \"http://127.0.0.1:$GRPC_PORT\", heartbeat_interval_ms: 1000}"
    else
        # the MQTT output alone: no danube output, so no cluster_url; the remote
        # topic is the upstream one under sfr (sfr/sf/t0), the recorder takes sfr/#
        echo "edge: {edge_name: sf}"
        echo "outputs:"
        echo "  - {name: central, kind: mqtt, broker: \"127.0.0.1:$REMOTE_PORT\", protocol: 5, qos: 1, client_id: sf-central,"
        echo "     remote_topic: \"sfr\${upstream}\", max_inflight: $MQTT_INFLIGHT, max_messages_per_s: $MQTT_MAX_MSGS_PER_S}"
    fi
    echo "replicator: {batch_timeout_ms: 10, retry_max_ms: $RETRY_MAX_MS}"
    echo "mqtt:"
    echo "  listener: \"127.0.0.1:$MQTT_PORT\""
    echo "  topic_mappings:"
    for ((t = 0; t < TOPICS; t++)); do
        echo "    - {mqtt_pattern: \"sf/t$t/+\", danube_topic: /sf/t$t, extract_attributes: {device: \"\$1\"}, durability: $DURABILITY}"
    done
    echo "wal: {dir: $OUT/wal, fsync: $FSYNC, fsync_interval_ms: $FSYNC_INTERVAL_MS, segment_bytes: $SEGMENT_BYTES,"
    echo "      max_topic_bytes: $MAX_TOPIC_BYTES, max_total_bytes: $MAX_TOTAL_BYTES,"
    echo "      memory_first: {ack: $MF_ACK, spill_after_ms: $SPILL_AFTER_MS}}"
    echo "http: {listener: \"127.0.0.1:$HTTP_PORT\"}"
    echo "log: {level: $LOG_LEVEL}"
} > "$OUT/edge.yaml"

start_mock() {
    "$MOCK" --port "$GRPC_PORT" --control "$CTL_PORT" --store "$OUT/store.jsonl" --ack-delay-ms "$MOCK_ACK_DELAY_MS" \
        > "$OUT/mock.stdout" 2>> "$OUT/mock.log" &
    MOCK_PID=$!
    until_true 30 "the mock cluster's control port" port_open "$CTL_PORT"
    event mock_started "\"pid\":$MOCK_PID"
}
# OUTPUT=mqtt: the remote Mosquitto, with the lines of tests/integration/tlib/mosq.py
# (`user root`: Mosquitto 2 refuses root otherwise; persistence, so a SIGTERM saves the
# subscriber's session and queue; no queue limit, so nothing queued for it is dropped)
mkdir -p "$OUT/remote"
cat > "$OUT/remote/mosquitto.conf" <<EOF
user root
listener $REMOTE_PORT 127.0.0.1
allow_anonymous true
persistence true
persistence_location $OUT/remote/
autosave_interval 1
max_queued_messages 0
max_inflight_messages 20
log_dest file $OUT/remote/mosquitto.log
log_type error
log_type warning
log_type notice
log_type information
EOF
start_remote() {
    "$MOSQUITTO" -c "$OUT/remote/mosquitto.conf" > /dev/null 2>&1 &
    REMOTE_PID=$!
    until_true 30 "Mosquitto on $REMOTE_PORT" port_open "$REMOTE_PORT"
    event remote_started "\"pid\":$REMOTE_PID"
}
stop_remote() {
    kill -TERM "$REMOTE_PID"
    wait "$REMOTE_PID" 2>/dev/null || true
    REMOTE_PID=""
}
start_recorder() {
    : >> "$OUT/arrivals.jsonl"
    /usr/bin/python3 "$HERE/recorder.py" --port "$REMOTE_PORT" --topic 'sfr/#' --out "$OUT/arrivals.jsonl" \
        --end-topic sfr/_end --ready "$OUT/recorder.ready" --end "$OUT/recorder.end" > "$OUT/recorder.log" 2>&1 &
    REC_PID=$!
    until_true 30 "the remote's subscriber" test -e "$OUT/recorder.ready"
    event recorder_subscribed "\"pid\":$REC_PID"
}
start_gateway() {
    "$TRIB" run -c "$OUT/edge.yaml" >> "$OUT/gateway.log" 2>&1 &
    GW_PID=$!
    until_true 30 "the gateway's HTTP port" port_open "$HTTP_PORT"
    event gateway_started "\"pid\":$GW_PID"
}
# Switches between memory and the log (memory_first): /stats counts them
# since the process started, so each life's counts are read before it dies.
SPILLS=0 TO_MEMORY=0
count_switches() {
    local s; s=$(stats 2>/dev/null) || return 0
    SPILLS=$(( SPILLS + $(jq '[.topics[] | (.spills // {}) | to_entries[] | select(.key != "shutdown") | .value] | add // 0' <<<"$s") ))
    TO_MEMORY=$(( TO_MEMORY + $(jq '[.topics[] | (.to_memory // 0)] | add // 0' <<<"$s") ))
}
kill_gateway() { # where [the lag just read, to be the one reported]
    count_switches
    local l=${2:-}
    [[ -n $l ]] || l=$(lag 2>/dev/null || echo null)
    kill -9 "$GW_PID"
    wait "$GW_PID" 2>/dev/null || true
    event gateway_killed "\"phase\":\"$1\",\"lag_at_kill\":${l:-null}"
    sleep "$RESTART_DELAY"
    start_gateway
}
sleep_until_ms() { local d=$(( $1 - $(now_ms) )); (( d > 0 )) && sleep "$(awk -v d="$d" 'BEGIN { print d / 1000 }')" || true; }

# ---- the timeline ------------------------------------------------------------
event scenario "\"output\":\"$OUTPUT\",\"durability\":\"$DURABILITY\",\"mf_ack\":\"$MF_ACK\",\"flap\":\"$FLAP\",\"flap_secs\":$FLAP_SECS,\"devices\":$DEVICES,\"rate\":$RATE,\"qos\":$QOS,\"size\":$SIZE,\"topics\":$TOPICS,\"outage\":\"$OUTAGE\",\"outage_secs\":$OUTAGE_SECS,\"kills_outage\":$KILLS_OUTAGE,\"kill_times\":\"$KILL_TIMES\",\"kills_replay\":$KILLS_REPLAY,\"fsync\":\"$FSYNC\",\"max_topic_bytes\":\"$MAX_TOPIC_BYTES\",\"max_total_bytes\":\"$MAX_TOTAL_BYTES\",\"segment_bytes\":\"$SEGMENT_BYTES\",\"bounded\":$BOUNDED"
if [[ $OUTPUT == danube ]]; then
    start_mock
else
    start_remote
    start_recorder
fi
start_gateway
"$DEVBIN" -p "$MQTT_PORT" -o "$OUT/devices" -d "$DEVICES" -r "$RATE" -q "$QOS" -s "$SIZE" -w "$WINDOW" -T "$TOPICS" \
    -g 60 > "$OUT/devices.log" 2>&1 &
DEV_PID=$!
until_true 30 "$DEVICES devices connected" devices_connected
event devices_connected
sleep "$WARMUP"

if [[ -n $FLAP ]]; then
    # the cluster flaps: healthy H s, then every ack held FLAP_SLOW_MS for S s
    healthy=${FLAP%/*} slow=${FLAP#*/}
    T0=$(now_ms)
    END=$(( T0 + FLAP_SECS * 1000 ))
    kill_at=$(for ((k = 1; k <= FLAP_KILLS; k++)); do echo $(( T0 + FLAP_SECS * 1000 * k / (FLAP_KILLS + 1) )); done)
    event flap_start "\"healthy_s\":$healthy,\"slow_s\":$slow,\"slow_ms\":$FLAP_SLOW_MS"
    phase_end=$T0 phase=slow
    while (( $(now_ms) < END )); do
        if (( $(now_ms) >= phase_end )); then
            if [[ $phase == slow ]]; then phase=healthy d=0 len=$healthy; else phase=slow d=$FLAP_SLOW_MS len=$slow; fi
            curl -sf -XPOST "http://127.0.0.1:$CTL_PORT/fault" -d "{\"mode\":\"normal\",\"ack_delay_ms\":$d}" > /dev/null
            event flap_phase "\"phase\":\"$phase\""
            phase_end=$(( $(now_ms) + len * 1000 ))
        fi
        next=$(( phase_end < END ? phase_end : END ))
        for at in $kill_at; do
            if (( at > $(now_ms) && at < next )); then next=$at; fi
        done
        sleep_until_ms "$next"
        for at in $kill_at; do
            if (( at <= $(now_ms) )); then kill_gateway flap; fi
        done
        kill_at=$(for at in $kill_at; do (( at > $(now_ms) )) && echo "$at"; done || true)
    done
    curl -sf -XPOST "http://127.0.0.1:$CTL_PORT/fault" -d "{\"mode\":\"normal\",\"ack_delay_ms\":$MOCK_ACK_DELAY_MS}" > /dev/null
    event flap_end
fi

if [[ $OUTAGE != none ]]; then
    T0=$(now_ms)
    case $OUTPUT/$OUTAGE in
        danube/refused) curl -sf -XPOST "http://127.0.0.1:$CTL_PORT/fault" -d '{"mode":"refuse"}' > /dev/null ;;
        danube/silent) curl -sf -XPOST "http://127.0.0.1:$CTL_PORT/fault" -d '{"mode":"silent"}' > /dev/null ;;
        danube/killed) kill -9 "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true ;;
        mqtt/refused) stop_remote ;;
        mqtt/silent) kill -STOP "$REMOTE_PID" ;;
    esac
    event outage_start "\"kind\":\"$OUTAGE\""
    if [[ -n $KILL_TIMES ]]; then
        kill_at=$(tr ',' '\n' <<<"$KILL_TIMES" | awk -v t0="$T0" '{ printf "%d\n", t0 + $1 * 1000 }')
    else
        kill_at=$(for ((k = 1; k <= KILLS_OUTAGE; k++)); do echo $(( T0 + OUTAGE_SECS * 1000 * k / (KILLS_OUTAGE + 1) )); done)
    fi
    for at in $kill_at; do
        sleep_until_ms "$at"
        kill_gateway outage
    done
    sleep_until_ms $(( T0 + OUTAGE_SECS * 1000 ))
    case $OUTPUT/$OUTAGE in
        danube/refused|danube/silent) curl -sf -XPOST "http://127.0.0.1:$CTL_PORT/fault" -d '{"mode":"normal"}' > /dev/null ;;
        danube/killed) start_mock ;;
        mqtt/refused) start_remote ;;
        mqtt/silent) kill -CONT "$REMOTE_PID" ;;
    esac
    event outage_end
fi

for ((k = 1; k <= KILLS_REPLAY; k++)); do
    # the replay is under way once the cluster (the remote's subscriber) has more than it had
    base=$(remote_received)
    replaying() { [[ $(remote_received) -gt $base ]] || caught_up; }
    until_true "$DRAIN_TIMEOUT" "the replay to start" replaying
    if caught_up; then
        event replay_kill_skipped "\"why\":\"backlog already drained\""
        break
    fi
    sleep "$(awk -v d="$REPLAY_KILL_AFTER_MS" 'BEGIN { print d / 1000 }')"
    # The kill must land with a backlog: on a loaded machine /stats can say 0 for a moment
    # (right after the restart, before the log's backlog is counted, or between a batch's ack
    # and the next), and a kill then proved nothing about the replay. So wait, with a deadline,
    # for a positive lag while the backlog is not drained, and report that very reading; if the
    # backlog drains first, the kill is skipped and said so (the test then fails on the count).
    REPLAY_LAG=""
    backlog_seen() {
        caught_up && return 0
        local l; l=$(lag 2>/dev/null) || return 1
        [[ $l =~ ^[0-9]+$ ]] && (( l > 0 )) && REPLAY_LAG=$l
    }
    until_true "$DRAIN_TIMEOUT" "a backlog to kill the replay in" backlog_seen
    if [[ -z $REPLAY_LAG ]]; then
        event replay_kill_skipped "\"why\":\"backlog drained before a positive lag was read\""
        break
    fi
    kill_gateway replay "$REPLAY_LAG"
done

until_true "$DRAIN_TIMEOUT" "the backlog to drain" caught_up
event caught_up
sleep "$AFTER"

kill -TERM "$DEV_PID"
wait "$DEV_PID" || { echo "run.sh: devices exited with $?" >&2; exit 1; }
DEV_PID=""
event devices_stopped
until_true "$DRAIN_TIMEOUT" "the last readings to reach the cluster" drained
if [[ $OUTPUT == mqtt ]]; then
    # The remote acknowledged everything; its subscriber may still be receiving. A marker
    # published now is queued behind all of it (the remote keeps one queue per session, in
    # the order it took the messages), so once it arrives the recording is complete.
    mosquitto_pub -h 127.0.0.1 -p "$REMOTE_PORT" -q 1 -t sfr/_end -m end
    until_true "$DRAIN_TIMEOUT" "the remote's subscriber to receive everything" test -e "$OUT/recorder.end"
    event recorder_complete "\"arrivals\":$(remote_received)"
fi
stats > "$OUT/stats.json"
count_switches
event switches "\"spills\":$SPILLS,\"to_memory\":$TO_MEMORY"
kill -TERM "$GW_PID"
wait "$GW_PID" || { echo "run.sh: gateway exited with $? on SIGTERM" >&2; exit 1; }
GW_PID=""
event gateway_stopped
"$TRIB" wal check --dir "$OUT/wal" > "$OUT/walcheck.jsonl"
if [[ $OUTPUT == danube ]]; then
    kill -TERM "$MOCK_PID"
    wait "$MOCK_PID" || true
    MOCK_PID=""
else
    kill -TERM "$REC_PID"
    wait "$REC_PID" || true
    REC_PID=""
    stop_remote
fi

rc=0
/usr/bin/python3 "$HERE/judge.py" --dir "$OUT" || rc=$?
echo "run.sh: output in $OUT" >&2
exit $rc
