#!/usr/bin/env bash
# demo.sh: run the gateway on its embedded default configuration, in the
# foreground, with its data under build/demo/. Called by `./scripts/dev.sh run`.
# Stop it with Ctrl-C (SIGINT drains and exits 0).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEMO=$ROOT/build/demo
mkdir -p "$DEMO"
cd "$DEMO"
echo "== tributary on the embedded default: MQTT 127.0.0.1:1883, data in $DEMO/tributary-data" >&2
echo "== (tributary check prints a file's effective configuration; Ctrl-C stops)" >&2
exec "$ROOT/build/tributary" run
