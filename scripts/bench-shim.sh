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
#        scripts/bench-shim.sh shapes [ROUNDS] [COUNT] [SIZE]
#   what the shim adds per write on every shape of call path
#   (tests/c/shim_bench_shapes.c: write() straight from main, from a
#   thread's start routine, through a shared library the program links,
#   8 functions deep), each program built with frame pointers and without
#   (Debian's default "-O2"), each with a map (PCSTREAM_MAP), with a
#   pcstreamd attached (it learns every path in a warm-up run first) and in
#   record mode: whole-process user + sys time (wait4) of COUNT writes,
#   every configuration in every round, each shim run right after a native
#   run of the same program; the table shows the native ns/write and, per
#   mode, the median over rounds of (shim run - its native run) / COUNT,
#   user + sys (and user alone). Defaults: 7 rounds, 1000000 writes of
#   4096 bytes. SHAPES, BUILDS ("fp nofp"), MODES ("map daemon record")
#   narrow it.
#        scripts/bench-shim.sh lines [scattered]
#   what one write costs in user space, counted (not timed) under
#   valgrind's lackey: per configuration, the median over the second block
#   of 1024 writes of the instructions executed and the distinct cache lines
#   and pages touched (code and data) from one call of the program's write
#   wrapper to the next. Repeatable whatever the machine load; the kernel's
#   side (which evicts those lines) is not in it.
# Environment: CARGO_TARGET_DIR as for cargo; TMPFS (default /dev/shm);
#   BENCH_CFLAGS: how the write-loop program is built (default
#   "-O2 -fno-omit-frame-pointer"; "-O2" is Debian's default: no frame
#   pointers, the shim's scan path);
#   DAEMON=1 adds a "daemon" configuration: a real pcstreamd (built here)
#   in a temp runtime dir, the shim attached (events to its socket, the
#   live table mapped and looked up per write), warmed by one run first
#   (the loop's call path learnt and mapped to a stream), and a
#   "mapping-hit" configuration: a static map giving that call path the
#   same stream (the daemon's cost over it = live lookup + events);
#   BASELINE_SHIM=path/to/another/libpcstream.so adds its mapping and record
#   configurations ("mapping@base", "record@base"; with DAEMON=1 also
#   "mapping-hit@base", "daemon@base") to every round: an A/B of
#   two builds under the same machine load.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=time
if [[ ${1:-} == shapes ]]; then
    shift
    exec scripts/bench-shapes.sh "$@"
fi
if [[ ${1:-} == lines ]]; then
    MODE=lines
    shift
    set -- 1 2048 4096 "$@"
fi
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
# shellcheck disable=SC2086
cc ${BENCH_CFLAGS:--O2 -fno-omit-frame-pointer} -o "$WORK/bench" tests/c/shim_bench_write.c
echo "ffffffffffffffff 1" > "$WORK/map"   # a mapping (this program's paths stay unmapped)
FILE="$WORK/data"

run() { # name, env...
    local name=$1; shift
    env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" "$WORK/bench" "$FILE" "$SIZE" "$COUNT" $PATTERN
}

# Per-write instructions, lines and pages from a lackey trace; iterations
# start at each entry into the program's `put` (its address in the trace
# ends like its address in the binary and runs once per write).
lines_of() { # log
    python3 - "$1" "$(nm "$WORK/bench" | awk '$3 == "put" {print $1}')" "$COUNT" <<'PY'
import sys
from collections import Counter
log, put, count = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3])
ins = Counter()
for line in open(log):
    if line.startswith("I  "):
        ins[int(line[3:].split(",")[0], 16)] += 1
entry = [a for a, c in ins.items() if a & 0xFFF == put & 0xFFF and c == count]
assert entry, "cannot find put() in the trace"
entry = min(entry)  # the program is mapped below the shared libraries
its, cur = [], None
for line in open(log):
    kind = line[:2]
    if kind not in ("I ", " L", " S", " M"):
        continue
    a, n = line[3:].split(",")
    a, n = int(a, 16), int(n)
    if kind == "I " and a == entry:
        if cur:
            its.append(cur)
        cur = [0, set(), set(), set(), set()]
    if cur is None:
        continue
    i = 1 if kind == "I " else 2
    cur[0] += kind == "I "
    cur[i].update((a >> 6, (a + n - 1) >> 6))
    cur[i + 2].add(a >> 12)
steady = sorted(its[1024:2047], key=lambda c: c[0])
med = steady[len(steady) // 2]
print(med[0], len(med[1]), len(med[2]), len(med[3]), len(med[4]))
PY
}

CONFIGS="plain passthrough mapping record"
if [[ -n ${BASELINE_SHIM:-} ]]; then
    BASE=$(realpath "$BASELINE_SHIM")
    CONFIGS+=" mapping@base record@base"
fi

if [[ -n ${DAEMON:-} ]]; then
    cargo build -q --release -p pcstreamd -p pcstreamctl
    mkdir -p "$WORK/run" "$WORK/state"
    "$TARGET/release/pcstreamd" --runtime-dir "$WORK/run" --state-dir "$WORK/state" 2>"$WORK/pcstreamd.log" &
    DPID=$!
    trap 'kill $DPID 2>/dev/null; rm -rf "$WORK"' EXIT
    for _ in $(seq 100); do [[ -S $WORK/run/ctl.sock ]] && break; sleep 0.1; done
    # Warm: the daemon learns the loop's call path and maps it to a stream,
    # so the measured runs are the steady state (lookup hit, hint kept).
    env -u LD_PRELOAD LD_PRELOAD="$SHIM" PCSTREAM_RUNTIME_DIR="$WORK/run" \
        "$WORK/bench" "$FILE" "$SIZE" 200000 >/dev/null
    sleep 1
    # The same call path → stream as a static map: "mapping-hit" is what the
    # daemon configuration costs without the live table and the events.
    "$TARGET/release/pcstreamctl" contexts --json --runtime-dir "$WORK/run" | python3 -c '
import json, sys
r = max(json.load(sys.stdin), key=lambda c: c["bytes_written"])
print(r["signature"], r["stream"])' >"$WORK/maphit"
    CONFIGS+=" mapping-hit daemon"
    [[ -n ${BASE:-} ]] && CONFIGS+=" mapping-hit@base daemon@base"
fi

if [[ $MODE == lines ]]; then
    command -v valgrind >/dev/null || { echo "lines: valgrind is needed" >&2; exit 1; }
    printf '%d x %s(%d B), per write (median), counted with valgrind --tool=lackey\n' \
        "$COUNT" "$([[ -n $PATTERN ]] && echo "scattered pwrite" || echo write)" "$SIZE"
    printf '%-12s %8s %8s %8s %8s %8s\n' config instr I-lines D-lines I-pages D-pages
    for c in $CONFIGS; do
        shim=$SHIM
        [[ $c == *@base ]] && shim=$BASE
        case $c in
        plain) envs=() ;;
        passthrough) envs=(LD_PRELOAD="$shim") ;;
        mapping-hit*) envs=(LD_PRELOAD="$shim" PCSTREAM_MAP="$WORK/maphit") ;;
        mapping*) envs=(LD_PRELOAD="$shim" PCSTREAM_MAP="$WORK/map") ;;
        record*) rm -rf "$WORK/rec"; envs=(LD_PRELOAD="$shim" PCSTREAM_RECORD_DIR="$WORK/rec") ;;
        daemon*) envs=(LD_PRELOAD="$shim" PCSTREAM_RUNTIME_DIR="$WORK/run" PCSTREAM_SOCKET="$WORK/run/events.sock") ;;
        esac
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "${envs[@]}" valgrind --tool=lackey --trace-mem=yes \
            --log-file="$WORK/lackey.log" "$WORK/bench" "$FILE" "$SIZE" "$COUNT" $PATTERN >/dev/null
        printf '%-12s %8s %8s %8s %8s %8s\n' "$c" $(lines_of "$WORK/lackey.log")
        rm -f "$WORK/lackey.log"
    done
    exit 0
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
    if [[ -n ${DAEMON:-} ]]; then
        add mapping-hit "$(run mapping-hit LD_PRELOAD="$SHIM" PCSTREAM_MAP="$WORK/maphit")"
        add daemon "$(run daemon LD_PRELOAD="$SHIM" PCSTREAM_RUNTIME_DIR="$WORK/run" PCSTREAM_SOCKET="$WORK/run/events.sock")"
    fi
    if [[ -n ${BASE:-} ]]; then
        add mapping@base "$(run mapping LD_PRELOAD="$BASE" PCSTREAM_MAP="$WORK/map")"
        rm -rf "$WORK/rec"
        add record@base "$(run record LD_PRELOAD="$BASE" PCSTREAM_RECORD_DIR="$WORK/rec")"
        if [[ -n ${DAEMON:-} ]]; then
            add mapping-hit@base "$(run mapping-hit LD_PRELOAD="$BASE" PCSTREAM_MAP="$WORK/maphit")"
            add daemon@base "$(run daemon LD_PRELOAD="$BASE" PCSTREAM_RUNTIME_DIR="$WORK/run" PCSTREAM_SOCKET="$WORK/run/events.sock")"
        fi
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
