#!/usr/bin/env bash
# soak_crash.sh: the kill -9 crash test (tests/integration/test_crash.py) for
# longer than CI can afford: ROUNDS runs of KILLS kills per durability mode,
# each with a fresh seed, stopping at the first failure with the seed that
# replays it (TRIB_CRASH_SEED=<seed>). Not a ctest test; `make soak-crash`
# (or cmake --build build --target soak-crash) runs it with the defaults.
#
#   bench/soak_crash.sh [--kills 200] [--rounds 5] [--build build]
set -euo pipefail
cd "$(dirname "$0")/.."
kills=200 rounds=5 build=build
while [[ $# -gt 0 ]]; do
    case "$1" in
        --kills) kills=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
[[ -x $build/tributary ]] || { echo "soak_crash.sh: $build/tributary not built" >&2; exit 2; }
build=$(cd "$build" && pwd)
log=$(mktemp /tmp/soak-crash.XXXXXX)
trap 'rm -f "$log"' EXIT
for ((i = 1; i <= rounds; i++)); do
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    echo "round $i/$rounds: seed $seed, $kills kills per mode"
    if ! TRIB_CRASH_SEED=$seed TRIB_CRASH_KILLS=$kills TRIB_BUILD_DIR=$build TRIBUTARY_BIN=$build/tributary \
        /usr/bin/python3 tests/integration/test_crash.py 2> "$log"; then
        cat "$log" >&2
        echo "FAILED: replay with TRIB_CRASH_SEED=$seed TRIB_CRASH_KILLS=$kills" >&2
        exit 1
    fi
    grep -E '^crash\[.*kills=' "$log"
done
echo "soak passed: $rounds rounds of $kills kills per mode"
