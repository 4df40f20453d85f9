#!/usr/bin/env bash
# bench/run.sh: the long benchmarks, the ones too slow for the test suite.
#
#   bench/run.sh [storeforward | compare | tls | outputs | reload | sparkplug | all] [--build DIR]   (default: all)
#   ./scripts/dev.sh bench [...]   builds first, then runs this
#
#   storeforward  the acceptance scenarios of tests/storeforward/run.sh,
#                 each about 6 minutes: 20 devices x 100 readings/s, QoS 1,
#                 a 5-minute cluster outage, 10 gateway SIGKILLs (7 spread
#                 across the outage, 3 landed in the replay), fsync always;
#                   always   disk bound far above the outage: nothing
#                            acknowledged may be missing
#                   bounded  max_topic_bytes 16 MiB, below the outage's
#                            ~43 MiB per topic: every loss counted in
#                            dropped_total, and the oldest
#                   memory_first  as always, every mapping durability:
#                            memory_first (issue 16's safety run)
#                   flap     memory_first, no outage: the cluster alternates
#                            5 s healthy and 5 s slow (acks held 750 ms, past
#                            spill_after_ms 250) for 3 minutes, 3 SIGKILLs in
#                            it; the report counts the switches
#                   mqtt     as always, to the MQTT output instead of the
#                            cluster (OUTPUT=mqtt: a real Mosquitto 2 as the
#                            remote, SIGTERMed for the outage and started
#                            again, a persistent QoS 1 subscriber recording)
#                   mqtt_silent  as mqtt, the remote SIGSTOPped instead
#                 Reports go to build/bench/storeforward-<name>.{txt,json},
#                 with the timeline (.events.jsonl) and the gateway's log.
#   compare       bench/compare (Tributary beside Mosquitto 2, ~17 minutes);
#                 table in build/bench/compare.md
#   tls           bench/bench_tls.py (MQTT over TLS beside Mosquitto 2 with
#                 the same certificate: ingest and new connections per
#                 second, ~8 minutes); table in build/bench/tls.md
#   outputs       bench/bench_outputs.py --only baseline: a libmosquitto
#                 publisher on our own poll loop (bench_mosq_pub, QoS 1,
#                 windows 20, 100, 1000) beside a Mosquitto bridge draining
#                 the same 1,000,000-message backlog into a local Mosquitto
#                 2, same run (~6 minutes; the go/no-go of
#                 docs/design/OUTPUTS.md 4.10); table in
#                 build/bench/outputs-baseline.md
#   reload        bench/soak_reload.py (issue 19's soak, 30 minutes): four
#                 persistent paho QoS 1 publishers at 2,000 msg/s, a
#                 mapping reload (SIGHUP) every 30 s alternating two
#                 configs, a 30 s cluster outage every 5 minutes; judged
#                 from the mock's store (0 acknowledged lost), RSS flat
#                 within 10% after 2 minutes, fd span; table in
#                 build/bench/soak-reload.txt, curve in soak-reload.csv
#   sparkplug     bench/bench_sparkplug.py (issue 18, ~2 minutes): a
#                 600,000-reading backlog (20 devices x 25 fields) replayed
#                 through the Sparkplug output to Mosquitto 2, readings/s at
#                 the host, 3 repeats; then 2,000 readings/s for 30 s, the
#                 gateway's CPU; beside the relay's published figures; table
#                 in build/bench/sparkplug.txt. Then bench/sf_sparkplug.py
#                 (~6 minutes): the store-and-forward run through it, 20
#                 devices x 100/s, a broker outage of SF_OUTAGE_SECS with
#                 SF_KILLS_OUTAGE + SF_KILLS_REPLAY SIGKILLs, judged at a
#                 host; build/bench/sf-sparkplug.{txt,json}
#
# Environment: SF_OUTAGE_SECS (300), SF_KILLS_OUTAGE (7), SF_KILLS_REPLAY (3)
# shorten or lengthen the scenarios, SF_ONLY=always|bounded|memory_first|flap|mqtt|mqtt_silent
# runs one of them;
# COMPARE_ARGS is passed to bench/compare, TLS_ARGS to bench/bench_tls.py
# (TLS_ARGS=--quick: a smoke run of a few seconds), OUTPUTS_ARGS to
# bench/bench_outputs.py (OUTPUTS_ARGS="--count 100000": a shorter run),
# RELOAD_ARGS to bench/soak_reload.py (RELOAD_ARGS="--minutes 3 --outage-every 1"),
# SPARKPLUG_ARGS to bench/bench_sparkplug.py (SPARKPLUG_ARGS=--quick: about a minute).
# Nothing here passes or fails on time: the scenarios fail only on what the
# judge counts (missing, uncounted, out of order).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
WHAT=all
while [[ $# -gt 0 ]]; do
    case $1 in
        --build) BUILD=$2; shift 2 ;;
        storeforward|compare|tls|outputs|reload|sparkplug|all) WHAT=$1; shift ;;
        *) sed -n '2,68p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
for b in tributary tributary-mock-cluster bench/devices bench/loadgen bench/bench_sink bench/tls_handshakes bench/bench_mosq_pub; do
    [[ -x $BUILD/$b ]] || { echo "bench/run.sh: $BUILD/$b not built (./scripts/dev.sh build)" >&2; exit 2; }
done
mkdir -p "$BUILD/bench"

scenario() { # name knobs...
    local name=$1; shift
    local out; out=$(mktemp -d /tmp/sf-long-"$name".XXXXXX)
    echo "== storeforward $name (output in $out)" >&2
    local rc=0
    tests/storeforward/run.sh --build "$BUILD" --out "$out" \
        DEVICES=20 RATE=100 QOS=1 TOPICS=2 WARMUP=10 AFTER=10 RESTART_DELAY=1 FSYNC=always \
        OUTAGE_SECS="${SF_OUTAGE_SECS:-300}" KILLS_OUTAGE="${SF_KILLS_OUTAGE:-7}" \
        KILLS_REPLAY="${SF_KILLS_REPLAY:-3}" REPLAY_KILL_AFTER_MS=300 DRAIN_TIMEOUT=300 LOG_LEVEL=warn "$@" \
        > "$BUILD/bench/storeforward-$name.txt" 2> "$out/run.log" || rc=$?
    cat "$BUILD/bench/storeforward-$name.txt"
    cp "$out/report.json" "$BUILD/bench/storeforward-$name.json" 2>/dev/null || true
    cp "$out/events.jsonl" "$BUILD/bench/storeforward-$name.events.jsonl" 2>/dev/null || true
    cp "$out/gateway.log" "$BUILD/bench/storeforward-$name.gateway.log" 2>/dev/null || true
    if [[ $rc -eq 0 ]]; then rm -rf "$out"; else echo "storeforward $name failed ($rc): kept $out" >&2; fi
    return $rc
}

rc=0
if [[ $WHAT == storeforward || $WHAT == all ]]; then
    if [[ ${SF_ONLY:-always} == always || -z ${SF_ONLY:-} ]]; then
        scenario always OUTAGE=refused || rc=1
    fi
    if [[ ${SF_ONLY:-bounded} == bounded ]]; then
        scenario bounded OUTAGE=silent SEGMENT_BYTES=1MiB MAX_TOPIC_BYTES=16MiB MAX_TOTAL_BYTES=64MiB BOUNDED=1 || rc=1
    fi
    if [[ ${SF_ONLY:-memory_first} == memory_first ]]; then
        scenario memory_first OUTAGE=refused DURABILITY=memory_first || rc=1
    fi
    if [[ ${SF_ONLY:-flap} == flap ]]; then
        scenario flap OUTAGE=none KILLS_REPLAY=0 DURABILITY=memory_first FLAP=5/5 FLAP_SECS=180 FLAP_KILLS=3 || rc=1
    fi
    if [[ ${SF_ONLY:-mqtt} == mqtt ]]; then
        scenario mqtt OUTPUT=mqtt OUTAGE=refused || rc=1
    fi
    if [[ ${SF_ONLY:-mqtt_silent} == mqtt_silent ]]; then
        scenario mqtt_silent OUTPUT=mqtt OUTAGE=silent || rc=1
    fi
fi
if [[ $WHAT == compare || $WHAT == all ]]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/compare --build "$BUILD" ${COMPARE_ARGS:-} || rc=1
fi
if [[ $WHAT == tls || $WHAT == all ]]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/bench_tls.py --build "$BUILD" --out "$BUILD/bench/tls.md" ${TLS_ARGS:-} || rc=1
fi
if [[ $WHAT == outputs || $WHAT == all ]]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/bench_outputs.py --only baseline --build "$BUILD" \
        --out "$BUILD/bench/outputs-baseline.md" ${OUTPUTS_ARGS:-} || rc=1
fi
if [[ $WHAT == reload || $WHAT == all ]]; then
    # shellcheck disable=SC2086
    nice /usr/bin/python3 bench/soak_reload.py --build "$BUILD" --out "$BUILD/bench" ${RELOAD_ARGS:-} || rc=1
fi
if [[ $WHAT == sparkplug || $WHAT == all ]]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/bench_sparkplug.py --build "$BUILD" --repeats 3 ${SPARKPLUG_ARGS:-} \
        | tee "$BUILD/bench/sparkplug.txt" || rc=1
    sfo=$(mktemp -d /tmp/sf-spb.XXXXXX) sfrc=0
    /usr/bin/python3 bench/sf_sparkplug.py --build "$BUILD" --out "$sfo" --outage-s "${SF_OUTAGE_SECS:-300}" \
        --kills-outage "${SF_KILLS_OUTAGE:-7}" --kills-replay "${SF_KILLS_REPLAY:-3}" \
        > "$BUILD/bench/sf-sparkplug.txt" || sfrc=$?
    tail -1 "$BUILD/bench/sf-sparkplug.txt"
    cp "$sfo/report.json" "$BUILD/bench/sf-sparkplug.json" 2>/dev/null || true
    if [[ $sfrc -eq 0 ]]; then rm -rf "$sfo"; else rc=1; echo "sf_sparkplug failed ($sfrc): kept $sfo" >&2; fi
fi
exit $rc
