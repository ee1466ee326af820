#!/usr/bin/env bash
# RocksDB's db_bench fillrandom (Debian's rocksdb-tools) natively and under
# libpcstream.so, side by side: PAIRS alternating pairs (native, then the
# shim with a mapping (PCSTREAM_MAP: signature + lookup + hint per write),
# then, with RECORD=1, the shim in record mode), each run on a fresh database
# in $DIR (default: a temp dir under /dev/shm, so the CPU cost shows, not
# the disk's). Prints each pair's ops/s and the median of the per-pair
# ratios (shim / native), with the load average before and after.
#
# Usage: scripts/bench-dbbench.sh [PAIRS] [NUM]   (defaults: 7 pairs, 300000 keys)
# Environment: CARGO_TARGET_DIR as for cargo; DIR; RECORD=1 (add record mode).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-7}
NUM=${2:-300000}
TARGET=${CARGO_TARGET_DIR:-target}
command -v db_bench >/dev/null || { echo "bench-dbbench: db_bench not found (apt-get install rocksdb-tools)" >&2; exit 1; }
cargo build -q --release -p pcstream-preload
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "${DIR:-/dev/shm}/pcstream-dbbench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "ffffffffffffffff 1" > "$WORK/map"
opsps() { # env... -> ops/s of one fresh fillrandom run
    rm -rf "$WORK/db" "$WORK/rec"
    env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" db_bench --benchmarks=fillrandom \
        --num="$NUM" --value_size=400 --compression_type=none --threads=1 \
        --db="$WORK/db" 2>/dev/null | awk '$1 == "fillrandom" {for (i = 1; i <= NF; i++) if ($(i+1) ~ /^ops\/sec/) print $i}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-5s %12s %12s %8s' pair native mapping ratio
[[ -n ${RECORD:-} ]] && printf ' %12s %8s' record ratio
echo
rm_ratios=(); rr_ratios=()
for ((p = 1; p <= PAIRS; p++)); do
    n=$(opsps)
    m=$(opsps LD_PRELOAD="$SHIM" PCSTREAM_MAP="$WORK/map")
    rm_ratios+=("$(awk -v a="$m" -v b="$n" 'BEGIN {print a / b}')")
    printf '%-5d %12s %12s %8.3f' "$p" "$n" "$m" "${rm_ratios[-1]}"
    if [[ -n ${RECORD:-} ]]; then
        r=$(opsps LD_PRELOAD="$SHIM" PCSTREAM_RECORD_DIR="$WORK/rec")
        rr_ratios+=("$(awk -v a="$r" -v b="$n" 'BEGIN {print a / b}')")
        printf ' %12s %8.3f' "$r" "${rr_ratios[-1]}"
    fi
    echo
done
printf 'db_bench fillrandom, %d keys x 400 B in %s, %d alternating pairs; load average before: %s, after: %s\n' \
    "$NUM" "${DIR:-/dev/shm}" "$PAIRS" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'median ratio mapping/native: %.3f\n' "$(printf '%s\n' "${rm_ratios[@]}" | median)"
if [[ -n ${RECORD:-} ]]; then
    printf 'median ratio record/native: %.3f\n' "$(printf '%s\n' "${rr_ratios[@]}" | median)"
fi
