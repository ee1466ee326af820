#!/usr/bin/env bash
# The shim's cost per Java write, whole JVM: tests/java/WriteLoop.java
# writes COUNT blocks of SIZE bytes to a file in $TMPFS through each shape
# (stream: FileOutputStream.write; channel: FileChannel.write; buffered:
# BufferedOutputStream over FileOutputStream; lucene: the bench's Lucene
# workload, bench/java/LuceneChurn.java, at 10k documents and 20k updates,
# where Debian's Lucene 4.10 jars are installed), natively and under the shim
# with a map, with pcstreamd attached, and recording; native and shim runs
# alternate, and the table gives the median of ROUNDS of the whole
# process's user + sys time (and the ratio to native).
# PROFILE=1 adds, for each shape and mode, one more shim run under `perf
# record` (cpu-clock samples) and the share of the process's samples in
# libpcstream.so itself: the shim's own cost, which the run-to-run spread of
# whole-process times (±0.05 on a shared machine) does not hide; what it
# does not count is an indirect cost (the caches it shares with the JVM).
# Usage: scripts/bench-java.sh [ROUNDS] [COUNT] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
COUNT=${2:-1000000}
SIZE=${3:-4096}
SHAPES=${SHAPES:-stream channel buffered lucene}
MODES=${MODES:-map daemon record}
TMPFS=${TMPFS:-/dev/shm}
TARGET=${CARGO_TARGET_DIR:-target}
for v in ROUNDS COUNT SIZE; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench-java: $v must be a positive number, not '${!v}'" >&2; exit 2; }
done
for s in $SHAPES; do
    [[ $s =~ ^(stream|channel|buffered|lucene)$ ]] || { echo "SHAPES: unknown shape $s (stream channel buffered lucene)" >&2; exit 2; }
done
for m in $MODES; do
    [[ $m =~ ^(map|daemon|record)$ ]] || { echo "MODES: unknown mode $m (map daemon record)" >&2; exit 2; }
done
if [[ ${PROFILE:-0} == 1 ]] && ! command -v perf >/dev/null; then
    echo "bench-java: PROFILE=1 needs perf (Debian: apt install linux-perf)" >&2
    exit 1
fi
command -v javac >/dev/null || { echo "bench-java: javac not found (scripts/install-deps.sh installs openjdk-17-jdk-headless)" >&2; exit 1; }
cargo build -q --release -p pcstream-preload -p pcstreamd
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "$TMPFS/pcstream-java.XXXXXX")
DPID=
cleanup() {
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
javac -d "$WORK/classes" tests/java/WriteLoop.java
if [[ " $SHAPES " == *" lucene "* ]]; then
    bash bench/java/build.sh "$WORK/lucene-classes" >/dev/null
fi

# rusage.py, mode_env, start_pcstreamd, median, the map.
. scripts/bench-lib.sh
# PREFIX: a command run() puts in front of the JVM (perf record).
PREFIX=()
run() { # shape env...
    local shape=$1
    shift
    rm -rf "$WORK/data" "$WORK/index"
    if [[ $shape == lucene ]]; then
        mkdir "$WORK/index"
        # (its progress output to /dev/null, the times to the caller)
        python3 "$WORK/rusage.py" "${PREFIX[@]}" env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" sh -c \
            'exec java -XX:-UsePerfData -XX:+UseSerialGC -Xmx128m -cp "$0" LuceneChurn "$1" 10000 20000 4 8 500 2000 >/dev/null' \
            "$(cat "$WORK/lucene-classes/classpath")" "$WORK/index"
        return
    fi
    python3 "$WORK/rusage.py" "${PREFIX[@]}" env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" \
        java -cp "$WORK/classes" WriteLoop "$shape" "$WORK/data" "$SIZE" "$COUNT"
}
if [[ " $MODES " == *" daemon "* ]]; then
    start_pcstreamd
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A native shim
for ((r = 0; r < ROUNDS; r++)); do
    for s in $SHAPES; do
        for m in $MODES; do
            read -r nu ns < <(run "$s")
            rm -rf "$WORK/rec"
            # shellcheck disable=SC2046
            read -r u sy < <(run "$s" $(mode_env "$m"))
            native[$s.$m]+="$(awk -v u="$nu" -v s="$ns" 'BEGIN {print u + s}') "
            shim[$s.$m]+="$(awk -v u="$u" -v s="$sy" 'BEGIN {print u + s}') "
        done
    done
done

printf '%d x %d B Java writes to %s per run, median of %d alternating rounds; %s; load average before: %s, after: %s\n' \
    "$COUNT" "$SIZE" "$TMPFS" "$ROUNDS" "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs" \
    "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'whole JVM, user+sys seconds: native, with the shim, ratio; ns added per write\n'
printf '%-9s %-7s %9s %9s %7s %9s\n' shape mode native shim ratio ns/write
for s in $SHAPES; do
    for m in $MODES; do
        n=$(echo "${native[$s.$m]}" | median)
        x=$(echo "${shim[$s.$m]}" | median)
        per=$(awk -v a="$x" -v b="$n" -v c="$COUNT" 'BEGIN {printf "%+.0f", (a - b) * 1e9 / c}')
        [[ $s == lucene ]] && per=-
        printf '%-9s %-7s %9.3f %9.3f %6.3fx %9s\n' "$s" "$m" "$n" "$x" \
            "$(awk -v a="$x" -v b="$n" 'BEGIN {print a / b}')" "$per"
    done
done

if [[ ${PROFILE:-0} == 1 ]]; then
    printf '\nthe shim'"'"'s own code: its share of the process'"'"'s cpu-clock samples (perf record, 4 kHz), one run each\n'
    printf '%-9s %-7s %8s %8s %9s\n' shape mode samples shim ns/write
    for s in $SHAPES; do
        for m in $MODES; do
            rm -rf "$WORK/rec"
            PREFIX=(perf record -q -F 4000 -o "$WORK/perf.data" --)
            # shellcheck disable=SC2046
            read -r u sy < <(run "$s" $(mode_env "$m"))
            PREFIX=()
            read -r total mine < <(perf report -i "$WORK/perf.data" --stdio --sort dso -n -g none 2>/dev/null |
                awk '$1 ~ /%$/ {t += $2; if ($3 == "libpcstream.so") m += $2} END {print t + 0, m + 0}')
            per=$(awk -v m="$mine" -v t="$total" -v u="$u" -v s="$sy" -v c="$COUNT" \
                'BEGIN {if (t > 0) printf "%.0f", m / t * (u + s) * 1e9 / c; else print "-"}')
            [[ $s == lucene ]] && per=-
            printf '%-9s %-7s %8d %7.2f%% %9s\n' "$s" "$m" "$total" \
                "$(awk -v m="$mine" -v t="$total" 'BEGIN {print (t > 0 ? 100 * m / t : 0)}')" "$per"
        done
    done
fi
