#!/usr/bin/env bash
# db_bench fillrandom with the live system vs native, side by side:
# a pcstreamd in a temporary runtime dir learns from one warm-up run under
# the shim, then PAIRS pairs of runs alternate (native then daemon, then
# daemon then native, ...) on a fresh database each; the table shows every
# pair's ops/s and the medians with their ratio. RocksDB's default LSM
# shape scaled 16x (tests/tests/daemon_push.rs says why).
#
# Usage: scripts/bench-daemon.sh [PAIRS] [NUM]   (defaults 5, 200000)
# Environment: CARGO_TARGET_DIR as for cargo; DIR for the databases
#   (default a temp dir under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-5}
NUM=${2:-200000}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p pcstreamd -p pcstreamctl
# The shim alone (built with the daemon, the shared dependencies' features
# are unified into a different build of it): the one the tests and
# scripts/bench-shim.sh measure.
cargo build -q --release -p pcstream-preload
command -v db_bench >/dev/null || { echo "bench-daemon.sh: db_bench missing (apt-get install rocksdb-tools)" >&2; exit 1; }
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "${DIR:-/tmp}/pcstream-dbbench.XXXXXX")
"$TARGET/release/pcstreamd" --runtime-dir "$WORK/run" --state-dir "$WORK/state" 2>"$WORK/pcstreamd.log" &
DPID=$!
trap 'kill $DPID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [[ -S $WORK/run/ctl.sock ]] && break; sleep 0.1; done

bench() { # db, env...
    local db=$1; shift
    rm -rf "$db"
    env -u LD_PRELOAD "$@" db_bench --db="$db" --benchmarks=fillrandom --num="$NUM" \
        --value_size=1000 --write_buffer_size=4194304 --target_file_size_base=4194304 \
        --max_bytes_for_level_base=16777216 --compression_type=none --statistics=0 \
        --use_existing_db=0 --seed=42 2>/dev/null | awk '/^fillrandom/ {print $5}'
    rm -rf "$db"
}
DAEMON_ENV=(LD_PRELOAD="$SHIM" PCSTREAM_RUNTIME_DIR="$WORK/run")
bench "$WORK/db" "${DAEMON_ENV[@]}" >/dev/null   # warm-up: the daemon learns
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
nat=() dae=()
printf '%-5s %14s %14s %7s\n' pair "native ops/s" "daemon ops/s" ratio
for ((p = 0; p < PAIRS; p++)); do
    if ((p % 2 == 0)); then
        n=$(bench "$WORK/db"); d=$(bench "$WORK/db" "${DAEMON_ENV[@]}")
    else
        d=$(bench "$WORK/db" "${DAEMON_ENV[@]}"); n=$(bench "$WORK/db")
    fi
    nat+=("$n"); dae+=("$d")
    awk -v p="$p" -v n="$n" -v d="$d" 'BEGIN { printf "%-5d %14d %14d %7.3f\n", p, n, d, d / n }'
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mn=$(median "${nat[@]}"); md=$(median "${dae[@]}")
awk -v n="$mn" -v d="$md" 'BEGIN { printf "%-5s %14d %14d %7.3f\n", "median", n, d, d / n }'
printf 'db_bench fillrandom --num=%d --value_size=1000, %d pairs, %s CPUs; load average before: %s, after: %s\n' \
    "$NUM" "$PAIRS" "$(nproc)" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
"$TARGET/release/pcstreamctl" status --runtime-dir "$WORK/run" | sed -n '2,4p'
