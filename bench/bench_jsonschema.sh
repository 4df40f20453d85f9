#!/usr/bin/env bash
# bench_jsonschema.sh: JSON Schema validation throughput, ours beside
# Debian's python3-jsonschema, same schema, same ~200-byte telemetry payload,
# both counting payload parsing. Prints figures; never passes or fails on time.
#
#   bench/bench_jsonschema.sh [seconds]      (needs build/ from scripts/dev.sh build)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
bin=build/bench/bench_jsonschema
[[ -x $bin ]] || { echo "build first: cmake -S . -B build && cmake --build build -j2" >&2; exit 2; }
schema=bench/jsonschema_telemetry.schema.json
payload=bench/jsonschema_telemetry.json
echo "JSON Schema validation, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
"$bin" "$schema" "$payload" "$secs"
/usr/bin/python3 bench/bench_jsonschema.py "$schema" "$payload" "$secs"
