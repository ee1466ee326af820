#!/usr/bin/env bash
# Overhead of libpcstream.so on a writer to a pipe (descriptors the shim did
# not see opened and that are not files): `dd bs=64 | cat > /dev/null`, dd
# and cat both traced, in record mode (events on) and with the shim in
# pass-through, against no shim; rounds alternate the configurations. Prints
# per round the seconds of each and, last, the medians and their ratios to
# the plain run.
# Usage: scripts/bench-pipe.sh [ROUNDS] [WRITES]   (defaults: 5, 2M)
# Environment: CARGO_TARGET_DIR as for cargo; BASELINE_SHIM=path/to/another
#   libpcstream.so adds its record mode ("record@base"): an A/B of two builds
#   under the same machine load.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
N=${2:-2M}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p pcstream-preload
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CONFIGS="plain passthrough record"
[[ -n ${BASELINE_SHIM:-} ]] && CONFIGS+=" record@base"
secs() { # config
    local pre="" rec=""
    case $1 in
        passthrough) pre=$SHIM ;;
        record) pre=$SHIM rec=$WORK/rec ;;
        record@base) pre=$(realpath "$BASELINE_SHIM") rec=$WORK/rec ;;
    esac
    rm -rf "$WORK/rec"; mkdir -p "$WORK/rec"
    local s e
    s=$(date +%s%N)
    env -u LD_PRELOAD ${pre:+LD_PRELOAD=$pre} ${rec:+PCSTREAM_RECORD_DIR=$rec} \
        PCSTREAM_SOCKET=/nonexistent \
        sh -c "dd if=/dev/zero bs=64 count=$N status=none | cat > /dev/null"
    e=$(date +%s%N)
    echo $(((e - s) / 1000000))
}
declare -A ALL
for r in $(seq "$ROUNDS"); do
    line="round $r:"
    for c in $CONFIGS; do
        ms=$(secs "$c")
        ALL[$c]+="$ms "
        line+=" $c $ms ms"
    done
    echo "$line"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=$(echo "${ALL[plain]}" | median)
printf '%-12s %10s %8s\n' config "median ms" ratio
for c in $CONFIGS; do
    m=$(echo "${ALL[$c]}" | median)
    printf '%-12s %10s %8s\n' "$c" "$m" "$(echo "scale=3; $m / $plain" | bc)"
done
