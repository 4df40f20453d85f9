#!/usr/bin/env bash
# image.sh: build the container image (deploy/container/Containerfile) with
# podman and run it the way the Helm chart does: as user 65532, the root
# file system read-only, only /var/lib/tributary (the log) and /run
# writable. Not part of `dev.sh test` (it takes minutes and downloads a
# Debian base system); run as root: `./scripts/image.sh` (or `dev.sh image`).
#
# Why the detours, each found on this kind of machine (Debian 12, root, no
# container registry reachable, cgroups v1/v2 hybrid):
#   - `FROM debian:12-slim` cannot be pulled: when the pull fails, the base
#     image is made here with debootstrap --variant=minbase bookworm and
#     `podman import`ed under that name (then `build --pull=never`);
#   - crun cannot create containers under the hybrid cgroup layout ("cgroups
#     in hybrid mode not supported"), so the build's RUN steps use
#     `--isolation=chroot`, and the smoke test runs the image's root file
#     system with chroot (podman image mount) instead of `podman run`: the
#     same files, user and read-only root, without a runtime's namespaces.
# Environment: TAG (default localhost/tributary:dev), KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TAG=${TAG:-localhost/tributary:dev}
BASE=docker.io/library/debian:12-slim
say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || { echo "image.sh: run as root (podman build, mount, chroot)" >&2; exit 2; }

for pkg in podman debootstrap mosquitto-clients curl; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && continue
    say "installing $pkg"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
done

WORK=$(mktemp -d /tmp/tributary-image.XXXXXX)
MNT= R= GW= MOCK=
cleanup() {
    [[ -n $GW ]] && kill -KILL "$GW" 2>/dev/null || true
    [[ -n $MOCK ]] && kill -TERM "$MOCK" 2>/dev/null || true
    if [[ -n $R ]]; then
        for m in run var/lib/tributary dev proc; do umount "$R/$m" 2>/dev/null || true; done
        umount "$R" 2>/dev/null || true
    fi
    [[ -n $MNT ]] && podman image unmount "$TAG" >/dev/null 2>&1 || true
    [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

if ! podman image exists "$BASE"; then
    if ! podman pull -q "$BASE" >/dev/null 2>"$WORK/pull.err"; then
        say "no registry ($(tail -1 "$WORK/pull.err" | cut -c1-100)): making $BASE with debootstrap"
        debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian > "$WORK/debootstrap.log"
        rm -f "$WORK"/rootfs/var/cache/apt/archives/*.deb
        tar -C "$WORK/rootfs" -c . | podman import -q - "$BASE" >/dev/null
        rm -rf "$WORK/rootfs"
    fi
fi

say "podman build -t $TAG (log: $WORK/build.log)"
start=$(date +%s)
if ! podman build --isolation=chroot --pull=never -f deploy/container/Containerfile -t "$TAG" . > "$WORK/build.log" 2>&1; then
    tail -30 "$WORK/build.log" >&2
    KEEP=1
    echo "image build failed (log kept: $WORK/build.log)" >&2
    exit 1
fi
say "built in $(( $(date +%s) - start )) s: $(podman image inspect "$TAG" --format '{{.Size}}') bytes"

# The image's root, read-only, with the chart's writable places.
MNT=$(podman image mount "$TAG")
R=$WORK/root
mkdir -p "$R"
mount --bind "$MNT" "$R"
mount -o remount,bind,ro "$R"
mount -t proc proc "$R/proc"
mount --bind /dev "$R/dev"
mount -t tmpfs -o uid=65532,gid=65532,mode=0750,size=64m tmpfs "$R/var/lib/tributary"
mount -t tmpfs -o uid=65532,gid=65532,mode=0750,size=8m tmpfs "$R/run"

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MQTT_PORT=$(free_port) HTTP_PORT=$(free_port) CLUSTER_PORT=$(free_port)
cat > "$R/run/edge.yaml" <<EOF
edge:
  edge_name: image-smoke
  cluster_url: http://127.0.0.1:$CLUSTER_PORT
mqtt:
  listener: 127.0.0.1:$MQTT_PORT
  topic_mappings:
    - mqtt_pattern: devices/+/telemetry
      danube_topic: /image-smoke/telemetry
wal:
  dir: /var/lib/tributary/wal
http:
  listener: 127.0.0.1:$HTTP_PORT
EOF
chown 65532:65532 "$R/run/edge.yaml"

wait_for() { local secs=$1; shift; for _ in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done; return 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

say "the image's binary: $(chroot --userspec=65532:65532 "$R" /usr/local/bin/tributary --version)"
chroot --userspec=65532:65532 "$R" /usr/local/bin/tributary check -c /run/edge.yaml > "$WORK/check.out" 2>&1 \
    || { cat "$WORK/check.out" >&2; exit 1; }

say "mock cluster on 127.0.0.1:$CLUSTER_PORT (host), the gateway in the image's read-only root as 65532"
[[ -x $ROOT/tests/mock_cluster/tributary-mock-cluster ]] || { echo "missing the mock cluster" >&2; exit 1; }
"$ROOT/tests/mock_cluster/tributary-mock-cluster" --port "$CLUSTER_PORT" --store "$WORK/cluster.jsonl" \
    > "$WORK/mock.out" 2> "$WORK/mock.log" &
MOCK=$!
wait_for 15 grep -q "mock-cluster listening" "$WORK/mock.out" || { cat "$WORK/mock.log" >&2; exit 1; }
chroot --userspec=65532:65532 "$R" /usr/local/bin/tributary run -c /run/edge.yaml 2> "$WORK/gateway.log" &
GW=$!
wait_for 15 port_open "$MQTT_PORT" || { KEEP=1; cat "$WORK/gateway.log" >&2; exit 1; }

mosquitto_pub -h 127.0.0.1 -p "$MQTT_PORT" -q 1 -t devices/smoke-1/telemetry -m '{"t":1}'
if ! wait_for 15 test -s "$WORK/cluster.jsonl"; then
    KEEP=1
    echo "the message did not reach the mock cluster (logs in $WORK)" >&2
    exit 1
fi
curl -sf "http://127.0.0.1:$HTTP_PORT/readyz" > /dev/null || { echo "/readyz is not ready" >&2; exit 1; }
kill -TERM "$GW"
rc=0; wait "$GW" || rc=$?
GW=
if [[ $rc -ne 0 ]] || grep -qiE "read-only|permission denied|EROFS|EACCES" "$WORK/gateway.log"; then
    KEEP=1
    echo "the gateway exited $rc or hit the read-only root (log: $WORK/gateway.log)" >&2
    exit 1
fi
say "ok: ran as 65532 on a read-only root (writable: /var/lib/tributary, /run), a QoS 1 message reached the cluster, SIGTERM exited 0"
