#!/usr/bin/env bash
# dev.sh: the project's two commands, and the steps they are made of.
#
#   ./scripts/dev.sh run    install what is missing, build, and run the gateway
#                           (with the mock cluster) on the embedded default
#   ./scripts/dev.sh test   install what is missing, build (normal, sanitizer,
#                           fuzz) and run the whole test suite
#
# Steps: deps | deps-test | build | build-asan | build-fuzz | unit | fuzz-short | bench | storeforward | image
#   deps: scripts/deps.txt (build and run); deps-test: and scripts/deps-test.txt (tests only)
#   bench [storeforward|compare|tls|all]: the long benchmarks (bench/run.sh)
#   storeforward: only the long store-and-forward scenarios (bench/run.sh storeforward)
#   image: build the container image with podman and run it on a read-only root (scripts/image.sh)
# Environment: JOBS (default: nproc), FUZZ_SECONDS (default 15 per target).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

install_missing() { # package list files...
    local missing=() f
    for f in "$@"; do
        while read -r pkg; do
            [[ -z "$pkg" || "$pkg" == \#* ]] && continue
            dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
        done < "$f"
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    say "installing: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

deps()      { install_missing scripts/deps.txt; }                        # build and run
deps_test() { install_missing scripts/deps.txt scripts/deps-test.txt; }  # and what only the tests need

configure_build() { # dir, extra cmake args... (output kept in DIR/build.log, shown on failure)
    local dir=$1; shift
    mkdir -p "$dir"
    if ! { cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" && cmake --build "$dir" -j "$JOBS"; } \
            > "$dir/build.log" 2>&1; then
        grep -E "error|warning" "$dir/build.log" | head -40 || tail -40 "$dir/build.log"
        echo "build failed in $dir (full log: $dir/build.log)" >&2
        return 1
    fi
}

build()      { say "build (build/)"; configure_build build -DTRIB_WERROR=ON; }
build_asan() { say "sanitizer build (build-asan/)"; configure_build build-asan -DTRIB_WERROR=ON -DTRIB_SANITIZE=ON; }
build_fuzz() {
    say "fuzz build (build-fuzz/, clang + libFuzzer)"
    CC=clang configure_build build-fuzz -DTRIB_WERROR=ON -DTRIB_FUZZ=ON -DTRIB_TESTS=ON
}

run_ctest() { # dir, extra ctest args
    local dir=$1; shift
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "$@"
}

fuzz_short() {
    local secs=${FUZZ_SECONDS:-15}
    say "fuzz: ${secs}s per target"
    local f name corpus
    for f in build-fuzz/fuzz/fuzz_*; do
        [[ -x "$f" ]] || continue
        name=${f##*/fuzz_}
        corpus=$(mktemp -d)
        cp -r tests/fuzz/corpus/"$name"/. "$corpus"/ 2>/dev/null || true
        local out rc=0
        out=$("$f" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$ROOT/tests/fuzz/crash-$name-" \
                   "$corpus" 2>&1) || rc=$?
        printf "%-16s %s\n" "$name" "$(grep -E "^(stat::number_of_executed_units|==[0-9]+==|SUMMARY)" <<<"$out" | tr "\n" " ")"
        [[ $rc -eq 0 ]] || tail -40 <<<"$out"
        rm -rf "$corpus"
        [[ $rc -eq 0 ]] || { echo "fuzz target $name failed (rc=$rc)"; return 1; }
    done
}

cmd_test() {
    deps_test
    build
    run_ctest build
    build_asan
    run_ctest build-asan
    build_fuzz
    fuzz_short
    say "all tests passed"
}

cmd_run() {
    deps
    build
    exec scripts/demo.sh
}

case "${1:-}" in
    run) cmd_run ;;
    test) cmd_test ;;
    deps) deps ;;
    deps-test) deps_test ;;
    build) deps; build ;;
    build-asan) deps; build_asan ;;
    build-fuzz) deps; build_fuzz ;;
    unit) deps_test; build; run_ctest build -L unit ;;
    fuzz-short) deps; build_fuzz; fuzz_short ;;
    bench) deps; build; exec bench/run.sh "${@:2}" ;;
    storeforward) deps; build; exec bench/run.sh storeforward ;;
    image) deps_test; exec scripts/image.sh ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
