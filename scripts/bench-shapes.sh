#!/usr/bin/env bash
# The shim's cost per write on every shape of call path, whole process:
# `scripts/bench-shim.sh shapes` (documented there) runs this.
# Usage: scripts/bench-shapes.sh [ROUNDS] [COUNT] [SIZE]
#        scripts/bench-shapes.sh counted [SIZE]
#   instructions per write instead of time, counted with valgrind's
#   callgrind (load-independent): (count at 30000 writes - count at 10000)
#   / 20000, so start-up and exit are not in it.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTED=
if [[ ${1:-} == counted ]]; then
    COUNTED=1
    shift
    set -- 1 30000 "${1:-4096}"
    command -v valgrind >/dev/null || { echo "counted: valgrind is needed" >&2; exit 1; }
fi
ROUNDS=${1:-7}
COUNT=${2:-1000000}
SIZE=${3:-4096}
SHAPES=${SHAPES:-main thread lib deep}
BUILDS=${BUILDS:-fp nofp}
MODES=${MODES:-map daemon record}
TMPFS=${TMPFS:-/dev/shm}
TARGET=${CARGO_TARGET_DIR:-target}
for s in $SHAPES; do
    [[ $s =~ ^(main|thread|lib|deep)$ ]] || { echo "SHAPES: unknown shape $s (main thread lib deep)" >&2; exit 2; }
done
for b in $BUILDS; do
    [[ $b =~ ^(fp|nofp)$ ]] || { echo "BUILDS: unknown build $b (fp nofp)" >&2; exit 2; }
done
for m in $MODES; do
    [[ $m =~ ^(map|daemon|record)$ ]] || { echo "MODES: unknown mode $m (map daemon record)" >&2; exit 2; }
done
cargo build -q --release -p pcstream-preload -p pcstreamd
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "$TMPFS/pcstream-shapes.XXXXXX")
DPID=
cleanup() {
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# The programs: frame pointers, and Debian's default flags (plain -O2: no
# frame pointers); the library is built with the program's flags.
for b in $BUILDS; do
    flags=(-O2)
    [[ $b == fp ]] && flags+=(-fno-omit-frame-pointer)
    mkdir -p "$WORK/$b"
    cc "${flags[@]}" -fPIC -shared -o "$WORK/$b/libshim_bench_lib.so" tests/c/shim_bench_lib.c
    cc "${flags[@]}" -o "$WORK/$b/bench" tests/c/shim_bench_shapes.c \
        -L"$WORK/$b" -Wl,--no-as-needed -lshim_bench_lib -Wl,-rpath,"$WORK/$b" -lpthread
done

# rusage.py, mode_env, start_pcstreamd, median, the map.
. scripts/bench-lib.sh
run() { # build shape count env...
    local b=$1 shape=$2 n=$3
    shift 3
    python3 "$WORK/rusage.py" env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" \
        "$WORK/$b/bench" "$shape" "$WORK/data" "$SIZE" "$n"
}

if [[ " $MODES " == *" daemon "* ]]; then
    start_pcstreamd
    # Warm-up: the daemon learns every path, so the runs below are its
    # steady state (table hit, hint kept).
    for b in $BUILDS; do
        for s in $SHAPES; do
            # shellcheck disable=SC2046
            run "$b" "$s" 200000 $(mode_env daemon) >/dev/null
        done
    done
    sleep 1
fi

if [[ -n $COUNTED ]]; then
    instr() { # build shape count env... -> instructions executed
        local b=$1 shape=$2 n=$3
        shift 3
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$@" valgrind --tool=callgrind \
            --callgrind-out-file=/dev/null "$WORK/$b/bench" "$shape" "$WORK/data" "$SIZE" "$n" 2>&1 |
            awk '/Collected/ {print $4}'
    }
    per_write() { # build shape env...
        local b=$1 shape=$2
        shift 2
        rm -rf "$WORK/rec"
        local lo hi
        lo=$(instr "$b" "$shape" 10000 "$@")
        rm -rf "$WORK/rec"
        hi=$(instr "$b" "$shape" 30000 "$@")
        echo $(((hi - lo) / 20000))
    }
    printf 'instructions per write (callgrind, (30000 writes - 10000) / 20000), write(%d B) to %s\n' "$SIZE" "$TMPFS"
    printf '%-8s %-6s %10s' shape build native
    for m in $MODES; do printf ' %10s' "+$m"; done
    printf '\n'
    for s in $SHAPES; do
        for b in $BUILDS; do
            nat=$(per_write "$b" "$s")
            printf '%-8s %-6s %10d' "$s" "$b" "$nat"
            for m in $MODES; do
                # shellcheck disable=SC2046
                printf ' %+10d' "$(($(per_write "$b" "$s" $(mode_env "$m")) - nat))"
            done
            printf '\n'
        done
    done
    exit 0
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A native added addedu
for ((r = 0; r < ROUNDS; r++)); do
    for b in $BUILDS; do
        for s in $SHAPES; do
            for m in $MODES; do
                read -r nu ns < <(run "$b" "$s" "$COUNT")
                rm -rf "$WORK/rec"
                # shellcheck disable=SC2046
                read -r u sy < <(run "$b" "$s" "$COUNT" $(mode_env "$m"))
                native[$b.$s]+="$(awk -v u="$nu" -v s="$ns" -v n="$COUNT" 'BEGIN {print (u + s) * 1e9 / n}') "
                added[$b.$s.$m]+="$(awk -v u="$u" -v s="$sy" -v nu="$nu" -v ns="$ns" -v n="$COUNT" \
                    'BEGIN {print (u + s - nu - ns) * 1e9 / n}') "
                addedu[$b.$s.$m]+="$(awk -v u="$u" -v nu="$nu" -v n="$COUNT" 'BEGIN {print (u - nu) * 1e9 / n}') "
            done
        done
    done
done

printf '%d x write(%d B) to %s per run, median of %d rounds; %s; load average before: %s, after: %s\n' \
    "$COUNT" "$SIZE" "$TMPFS" "$ROUNDS" "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs" \
    "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'ns per write, whole process: native user+sys; added by the shim user+sys (user alone)\n'
printf '%-8s %-6s %10s' shape build native
for m in $MODES; do printf ' %20s' "+$m"; done
printf '\n'
for s in $SHAPES; do
    for b in $BUILDS; do
        printf '%-8s %-6s %10.1f' "$s" "$b" "$(echo "${native[$b.$s]}" | median)"
        for m in $MODES; do
            printf ' %20s' "$(printf '%+.1f (%+.1f)' "$(echo "${added[$b.$s.$m]}" | median)" "$(echo "${addedu[$b.$s.$m]}" | median)")"
        done
        printf '\n'
    done
done
