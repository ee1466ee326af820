#!/usr/bin/env bash
# What libpcstream.so adds to a write to a raw block device with write
# streams, against what it adds to a write to a regular file
# (tests/c/shim_bench_rawdev.c; root: a loop device, released on exit).
#
# The shim is shown a sysfs in which the loop device has 8 write streams
# (PCSTREAM_SYSFS: no device here has any), and a static map
# (PCSTREAM_MAP, learnt from a recording) giving the program's two call
# paths streams 1 and 2. Cases, each O_DIRECT 4 KiB pwrites to the device:
#   raw, no change   one call path: its hint is on the node after the first
#                    write (the shim compares one word and makes no syscall)
#   raw, change      two call paths in turn: the shim sets the node's hint
#                    (F_SET_RW_HINT) before every write
# and buffered 4 KiB pwrites to a regular file on tmpfs from one call path
# (mapped: its hint settled), the regular-file cost to compare with.
#
#   scripts/bench-rawdev.sh [ROUNDS] [COUNT]
#     timed: every round runs every case natively and under the shim, one
#     right after the other; per case, the median over rounds of each run's
#     mean ns/write and of its fastest 1024-write block, and the shim's
#     added ns (medians of the per-round differences). The raw cases also
#     run "refused": every write one the kernel refuses at once (a
#     misaligned buffer: EINVAL before any I/O), so the time is the shim's
#     work and the syscall without the device's, which on a shared machine
#     is the only way to see ~100 ns beside a loop device's 20-80 us. The
#     writes that reach the device run COUNT/10 times. Defaults: 5 rounds,
#     20000 writes.
#   scripts/bench-rawdev.sh counted
#     instructions per write in user space under valgrind --tool=callgrind
#     (the difference between runs of 3000 and 1000 writes, / 2000),
#     natively and under the shim: load-independent. valgrind does not know
#     F_SET_RW_HINT (it refuses it without asking the kernel): the "change"
#     case then takes the shim's refusal path, a few instructions from the
#     success path.
#   scripts/bench-rawdev.sh race [WRITES]
#     two writers of the device (tests/c/shim_rawdev_race.c: two threads,
#     then two processes; streams 1 and 2), WRITES O_DIRECT writes each
#     (default 2000), recorded with tracefs (F_SET_RW_HINT syscalls, the
#     device's queued requests; x86-tsc clock; an instance of its own,
#     the lock pcstreamctl's device recording takes, every setting undone
#     on exit): per writer, how many writes took their own stream, the
#     other writer's, or could have taken either (scripts/rawdev-race.py).
# Environment: CARGO_TARGET_DIR as for cargo; BENCH_CFLAGS (default
#   "-O2 -fno-omit-frame-pointer").
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=time
if [[ ${1:-} == counted || ${1:-} == race ]]; then
    MODE=$1
    shift
fi
RACE_WRITES=${1:-2000}
ROUNDS=${1:-5}
COUNT=${2:-20000}
[[ $(id -u) == 0 ]] || { echo "bench-rawdev: needs root (losetup)" >&2; exit 1; }
TARGET=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p pcstream-preload -p pcstreamctl
SHIM=$(realpath "$TARGET/release/libpcstream.so")
CTL=$(realpath "$TARGET/release/pcstreamctl")
WORK=$(mktemp -d /dev/shm/pcstream-rawbench.XXXXXX)
DEV=
TRACEFS=/sys/kernel/tracing
INST=
MOUNTED=0
RACE_EVENTS="syscalls/sys_enter_fcntl syscalls/sys_exit_fcntl block/block_bio_queue"
cleanup() {
    if [[ -n $INST && -d $INST ]]; then
        for e in $RACE_EVENTS; do
            echo 0 > "$INST/events/$e/enable" 2>/dev/null || true
            echo 0 > "$INST/events/$e/filter" 2>/dev/null || true
        done
        rmdir "$INST" 2>/dev/null || echo "bench-rawdev: cannot remove $INST" >&2
    fi
    [[ $MOUNTED == 1 ]] && umount "$TRACEFS" 2>/dev/null
    [[ -n $DEV ]] && losetup -d "$DEV" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
truncate -s 64M "$WORK/dev.img"
DEV=$(losetup --find --show "$WORK/dev.img")
MAJMIN=$(printf '%d:%d' "0x$(stat -c %t "$DEV")" "0x$(stat -c %T "$DEV")")
mkdir -p "$WORK/sys/dev/block/$MAJMIN/queue"
echo 8 > "$WORK/sys/dev/block/$MAJMIN/queue/max_write_streams"
# shellcheck disable=SC2086
cc ${BENCH_CFLAGS:--O2 -fno-omit-frame-pointer} -o "$WORK/bench" tests/c/shim_bench_rawdev.c
FILE="$WORK/data"          # tmpfs: buffered file writes

# The two call paths' signatures, from a recording.
mkdir "$WORK/rec"
env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent LD_PRELOAD="$SHIM" PCSTREAM_SYSFS="$WORK/sys" \
    PCSTREAM_RECORD_DIR="$WORK/rec" "$WORK/bench" "$DEV" alternate 16 >/dev/null
"$CTL" trace-stats --json "$WORK"/rec/*.pcstrace | python3 -c '
import json, sys
for r in json.load(sys.stdin)["rows"]:
    f = r["frames"][0]["functions"][0]["name"]
    if f in ("put_a", "put_b"):
        print(r["signature"], 1 if f == "put_a" else 2)
' > "$WORK/map"
[[ $(wc -l < "$WORK/map") == 2 ]] || { echo "bench-rawdev: the two paths were not recorded" >&2; cat "$WORK/map" >&2; exit 1; }
SHIMENV=(LD_PRELOAD="$SHIM" PCSTREAM_MAP="$WORK/map" PCSTREAM_SYSFS="$WORK/sys")

# case name → "target mode [refused]"
CASES=(raw-same raw-change file raw-same-refused raw-change-refused)
args_of() {
    case $1 in
    raw-same) echo "$DEV same" ;;
    raw-change) echo "$DEV alternate" ;;
    file) echo "$FILE file" ;;
    raw-same-refused) echo "$DEV same" ;;
    raw-change-refused) echo "$DEV alternate" ;;
    esac
}
refused_of() { [[ $1 == *-refused ]] && echo refused || true; }
label_of() {
    case $1 in
    raw-same) echo "raw device, no change" ;;
    raw-change) echo "raw device, change every write" ;;
    file) echo "regular file (tmpfs, buffered)" ;;
    raw-same-refused) echo "raw, no change, refused" ;;
    raw-change-refused) echo "raw, change, refused" ;;
    esac
}
run() { # case count [shim]
    local c=$1 n=$2
    # shellcheck disable=SC2046
    if [[ ${3:-} == shim ]]; then
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "${SHIMENV[@]}" "$WORK/bench" $(args_of "$c") "$n" $(refused_of "$c")
    else
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "$WORK/bench" $(args_of "$c") "$n" $(refused_of "$c")
    fi
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
if [[ $MODE == race ]]; then
    # shellcheck disable=SC2086
    cc ${BENCH_CFLAGS:--O2 -fno-omit-frame-pointer} -o "$WORK/race" tests/c/shim_rawdev_race.c -lpthread
    # Each writer's call paths (a thread's and a process's differ).
    : > "$WORK/race.map"
    for m in threads procs; do
        rm -rf "$WORK/rrec"; mkdir "$WORK/rrec"
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent LD_PRELOAD="$SHIM" PCSTREAM_SYSFS="$WORK/sys" \
            PCSTREAM_RECORD_DIR="$WORK/rrec" "$WORK/race" "$DEV" $m 16 >/dev/null
        for f in "$WORK"/rrec/*.pcstrace; do
            "$CTL" trace-stats --json "$f"
        done | python3 -c '
import json, sys
dec = json.JSONDecoder()
text = sys.stdin.read()
i = 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    d, i = dec.raw_decode(text, i)
    for r in d["rows"]:
        f = r["frames"][0]["functions"][0]["name"]
        if f in ("path_a", "path_b"):
            print(r["signature"], 1 if f == "path_a" else 2)
' >> "$WORK/race.map"
    done
    mkdir -p /run/pcstream
    exec 9>/run/pcstream/device-trace.lock
    flock 9
    if [[ ! -d $TRACEFS/instances ]]; then
        mount -t tracefs nodev "$TRACEFS"
        MOUNTED=1
    fi
    INST="$TRACEFS/instances/pcstream-race-$$"
    mkdir "$INST"
    echo x86-tsc > "$INST/trace_clock"
    echo 16384 > "$INST/buffer_size_kb"
    echo 'cmd == 1036' > "$INST/events/syscalls/sys_enter_fcntl/filter"
    IFS=: read -r MA MI <<<"$MAJMIN"
    echo "dev == $(( (MA << 20) | MI ))" > "$INST/events/block/block_bio_queue/filter"
    for e in $RACE_EVENTS; do echo 1 > "$INST/events/$e/enable"; done
    printf '%d O_DIRECT 4 KiB writes per writer, streams 1 and 2, one loop device; %s; load %s\n' \
        "$RACE_WRITES" "$CPU" "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-10s %-7s %7s %7s %10s %10s %8s\n' writers writer writes right misplaced uncertain initial
    for m in threads procs; do
        echo 0 > "$INST/tracing_on"
        : > "$INST/trace"
        echo 1 > "$INST/tracing_on"
        env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent LD_PRELOAD="$SHIM" PCSTREAM_MAP="$WORK/race.map" \
            PCSTREAM_SYSFS="$WORK/sys" "$WORK/race" "$DEV" $m "$RACE_WRITES" >/dev/null
        echo 0 > "$INST/tracing_on"
        python3 scripts/rawdev-race.py < "$INST/trace" | while read -r _ w n ok bad unk init; do
            printf '%-10s %-7s %7d %7d %10d %10d %8d\n' "$m" "$w" "$n" "$ok" "$bad" "$unk" "$init"
        done
    done
    exit 0
fi
if [[ $MODE == counted ]]; then
    command -v valgrind >/dev/null || { echo "counted: valgrind is needed" >&2; exit 1; }
    cg() { # case count [shim] -> instructions
        # shellcheck disable=SC2046
        if [[ ${3:-} == shim ]]; then
            env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent "${SHIMENV[@]}" valgrind --tool=callgrind \
                --callgrind-out-file="$WORK/cg.out" "$WORK/bench" $(args_of "$1") "$2" $(refused_of "$1") >/dev/null 2>&1
        else
            env -u LD_PRELOAD PCSTREAM_SOCKET=/nonexistent valgrind --tool=callgrind \
                --callgrind-out-file="$WORK/cg.out" "$WORK/bench" $(args_of "$1") "$2" $(refused_of "$1") >/dev/null 2>&1
        fi
        sed -n 's/^summary: //p' "$WORK/cg.out"
    }
    printf 'instructions per write in user space (callgrind, 3000 - 1000 writes); %s\n' "$CPU"
    printf '%-32s %8s %8s %8s\n' case native shim added
    for c in raw-same raw-change file; do
        n1=$(cg "$c" 1000); n3=$(cg "$c" 3000)
        s1=$(cg "$c" 1000 shim); s3=$(cg "$c" 3000 shim)
        nat=$(( (n3 - n1) / 2000 )); sh=$(( (s3 - s1) / 2000 ))
        printf '%-32s %8d %8d %8d\n' "$(label_of "$c")" "$nat" "$sh" $((sh - nat))
    done
    exit 0
fi

printf '%d rounds x %d writes of 4 KiB; %s; load %s\n' "$ROUNDS" "$COUNT" "$CPU" "$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A NM NB SM SB DM DB
for ((r = 0; r < ROUNDS; r++)); do
    for c in "${CASES[@]}"; do
        n=$COUNT
        [[ $c == raw-same || $c == raw-change ]] && n=$((COUNT / 10))
        read -r nm nb < <(run "$c" "$n")
        read -r sm sb < <(run "$c" "$n" shim)
        NM[$c]+="$nm "; NB[$c]+="$nb "; SM[$c]+="$sm "; SB[$c]+="$sb "
        DM[$c]+="$(awk -v a="$sm" -v b="$nm" 'BEGIN {print a - b}') "
        DB[$c]+="$(awk -v a="$sb" -v b="$nb" 'BEGIN {print a - b}') "
    done
done
printf '%-32s %12s %12s %12s %12s %12s %12s\n' case native-mean shim-mean added-mean native-best shim-best added-best
for c in "${CASES[@]}"; do
    printf '%-32s %12.0f %12.0f %12.0f %12.0f %12.0f %12.0f\n' "$(label_of "$c")" \
        "$(median <<<"${NM[$c]}")" "$(median <<<"${SM[$c]}")" "$(median <<<"${DM[$c]}")" \
        "$(median <<<"${NB[$c]}")" "$(median <<<"${SB[$c]}")" "$(median <<<"${DB[$c]}")"
done
echo "ns per write; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
