#!/usr/bin/env bash
# End-to-end overhead of libpcstream.so on a write() loop to tmpfs, measured
# side by side: each round runs the same program without the shim, with the
# shim in pure pass-through, with a static mapping (signature + lookup +
# hint, no events) and in record mode (signature + events batched to a trace
# file on tmpfs); rounds alternate the configurations, and the table shows,
# per configuration, the median over rounds of the loop's mean ns/write and
# of its fastest 1024-write block, each with its ratio to the plain run.
#
# Usage: scripts/bench-shim.sh [ROUNDS] [COUNT] [SIZE] [scattered]
#   defaults: 15 rounds, 200000 writes of 4096 bytes; "scattered": pwrite()s
#   that never continue each other (one event per write in record mode)
#   instead of a sequential write() loop (coalesced into runs)
# Environment: CARGO_TARGET_DIR as for cargo; TMPFS (default /dev/shm);
#   BASELINE_SHIM=path/to/another/libpcstream.so adds its mapping and record
#   configurations ("mapping@base", "record@base") to every round: an A/B of
#   two builds under the same machine load.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-15}
COUNT=${2:-200000}
SIZE=${3:-4096}
PATTERN=${4:-}
TMPFS=${TMPFS:-/dev/shm}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p pcstream-preload
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "$TMPFS/pcstream-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cc -O2 -fno-omit-frame-pointer -o "$WORK/bench" tests/c/shim_bench_write.c
echo "ffffffffffffffff 1" > "$WORK/map"   # a mapping (this program's paths stay unmapped)
FILE="$WORK/data"

run() { # name, env...
    local name=$1; shift
    env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" "$WORK/bench" "$FILE" "$SIZE" "$COUNT" $PATTERN
}

CONFIGS="plain passthrough mapping record"
if [[ -n ${BASELINE_SHIM:-} ]]; then
    BASE=$(realpath "$BASELINE_SHIM")
    CONFIGS+=" mapping@base record@base"
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A mean best
add() { # config, "mean best"
    set -- "$1" $2
    mean[$1]+="$2 "
    best[$1]+="$3 "
}
for ((r = 0; r < ROUNDS; r++)); do
    add plain "$(run plain)"
    add passthrough "$(run passthrough LD_PRELOAD="$SHIM")"
    add mapping "$(run mapping LD_PRELOAD="$SHIM" PCSTREAM_MAP="$WORK/map")"
    rm -rf "$WORK/rec"
    add record "$(run record LD_PRELOAD="$SHIM" PCSTREAM_RECORD_DIR="$WORK/rec")"
    if [[ -n ${BASE:-} ]]; then
        add mapping@base "$(run mapping LD_PRELOAD="$BASE" PCSTREAM_MAP="$WORK/map")"
        rm -rf "$WORK/rec"
        add record@base "$(run record LD_PRELOAD="$BASE" PCSTREAM_RECORD_DIR="$WORK/rec")"
    fi
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
bm=$(echo "${mean[plain]}" | median)
bb=$(echo "${best[plain]}" | median)
printf '%d x %s(%d B) to %s, median of %d rounds; load average before: %s, after: %s\n' \
    "$COUNT" "$([[ -n $PATTERN ]] && echo "scattered pwrite" || echo write)" "$SIZE" "$TMPFS" "$ROUNDS" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %12s %8s %12s %8s %12s\n' config "mean ns" ratio "best-blk ns" ratio "+ns (best)"
for c in $CONFIGS; do
    m=$(echo "${mean[$c]}" | median)
    b=$(echo "${best[$c]}" | median)
    awk -v c="$c" -v m="$m" -v b="$b" -v bm="$bm" -v bb="$bb" \
        'BEGIN { printf "%-12s %12.1f %8.3f %12.1f %8.3f %12.1f\n", c, m, m / bm, b, b / bb, b - bb }'
done
