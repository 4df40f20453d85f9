#!/usr/bin/env bash
# bench_wal.sh: the WAL's figures beside the disk's own, measured in one run.
#
#   bench/bench_wal.sh [--seconds N] [--quick] [--dir DIR] [--build DIR]
#
# First dd measures the disk: 256 MiB sequential with O_DIRECT, the same
# through the page cache ending in one fdatasync, and 4 KiB O_DSYNC writes
# (a sync per write, like wal.fsync=always with one message per batch).
# Then build/bench/bench_wal prints append throughput per fsync mode and
# batch size, replay speed, fdatasync latency, and bytes written per message
# at a paced 2,000 msg/s for --seconds (default 60) per configuration.
# Nothing here passes or fails; it prints figures.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60 quick="" dir=${TMPDIR:-/tmp} build=build
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --quick) quick=--quick; shift ;;
        --dir) dir=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
bin=$build/bench/bench_wal
[[ -x $bin ]] || { echo "bench_wal.sh: $bin not built (cmake --build $build)" >&2; exit 2; }
work=$(mktemp -d "$dir/bench-wal.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "# WAL benchmark, $(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) cores"
echo
echo "directory: $work ($(df -T "$work" | awk 'NR==2 {print $2 " on " $1}'))"

rate() { # the rate dd reports on its last line
    tail -1 | awk -F', ' '{print $NF}'
}
mb=256
[[ -n $quick ]] && mb=64
echo
echo "## raw disk (dd, ${mb} MiB)"
echo
echo "| method | rate |"
echo "|---|--:|"
echo "| sequential 1 MiB, oflag=direct | $(dd if=/dev/zero of="$work/dd" bs=1M count=$mb oflag=direct 2>&1 | rate) |"
rm -f "$work/dd"
echo "| sequential 1 MiB, conv=fdatasync | $(dd if=/dev/zero of="$work/dd" bs=1M count=$mb conv=fdatasync 2>&1 | rate) |"
rm -f "$work/dd"
n=500
[[ -n $quick ]] && n=100
start=$(date +%s.%N)
dd if=/dev/zero of="$work/dd" bs=4k count=$n oflag=dsync 2>/dev/null
end=$(date +%s.%N)
echo "| 4 KiB writes, oflag=dsync | $(awk -v n=$n -v s="$start" -v e="$end" 'BEGIN {printf "%.0f writes/s", n / (e - s)}') |"
rm -f "$work/dd"

"$bin" --dir "$work" --seconds "$seconds" $quick
