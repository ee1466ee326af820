#!/usr/bin/env bash
# Real programs natively, under a live pcstreamd, and in record mode, side
# by side:
#   gcc      `make -j2` of bench/gen_cbase.py's code base (DIR 16 4 600 0:
#            gcc -O2 -g, stdio-heavy), from clean: wall seconds;
#   dbbench  db_bench fillrandom (Debian's rocksdb-tools; RocksDB's default
#            LSM shape scaled 16x as in scripts/bench-daemon.sh): ops/s;
#   pgbench  PostgreSQL (the server under the shim; as user postgres when
#            root) with pgbench's TPC-B-like load, scale SCALE, 2 clients,
#            PGBENCH_T seconds: tps; every run from a copy of the
#            database as loaded, so that no run inherits another's
#            history rows, dead tuples or autovacuum work.
# A pcstreamd in a temporary runtime dir learns from one warm-up run of each
# program first (its steady state is what a host running it for every
# process sees). Then ROUNDS rounds; in each, every program runs natively,
# with the daemon and in record mode (PCSTREAM_RECORD_DIR, the trace
# removed after each run), the order rotating from round to round. The
# table shows, per program and mode, the median of the metric and its ratio
# to the native median, and the median whole-process user + sys seconds
# (the build's every process; the PostgreSQL server's every process, the
# pgbench client not included) and its ratio.
#
# Usage: scripts/bench-apps.sh [ROUNDS]   (default 5)
# Environment: APPS (default "gcc dbbench pgbench"), MODES (default
#   "daemon record"), DIR (work dir, default /dev/shm: the files in memory,
#   so the CPU cost shows rather than the disk's), NUM (db_bench keys,
#   default 1000000: ~9 s runs; 200000 gave ~1 s runs spread +-10 %),
#   SCALE (pgbench scale, default 10), PGBENCH_T (default 20),
#   CARGO_TARGET_DIR as for cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
APPS=${APPS:-gcc dbbench pgbench}
MODES=${MODES:-daemon record}
NUM=${NUM:-1000000}
SCALE=${SCALE:-10}
PGBENCH_T=${PGBENCH_T:-20}
TARGET=${CARGO_TARGET_DIR:-target}
for a in $APPS; do
    [[ $a =~ ^(gcc|dbbench|pgbench)$ ]] || { echo "APPS: unknown program $a (gcc dbbench pgbench)" >&2; exit 2; }
done
for m in $MODES; do
    [[ $m =~ ^(daemon|record)$ ]] || { echo "MODES: unknown mode $m (daemon record)" >&2; exit 2; }
done
need() { command -v "$1" >/dev/null || { echo "bench-apps: $1 not found (apt-get install $2)" >&2; exit 1; }; }
[[ " $APPS " == *" gcc "* ]] && need gcc gcc && need make make
[[ " $APPS " == *" dbbench "* ]] && need db_bench rocksdb-tools
PG=
if [[ " $APPS " == *" pgbench "* ]]; then
    PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [[ -n $PG && -x $PG/initdb && -x $PG/pgbench ]] || { echo "bench-apps: PostgreSQL not found (apt-get install postgresql)" >&2; exit 1; }
fi
cargo build -q --release -p pcstreamd -p pcstreamctl
cargo build -q --release -p pcstream-preload
SHIM=$(realpath "$TARGET/release/libpcstream.so")
WORK=$(mktemp -d "${DIR:-/dev/shm}/pcstream-apps.XXXXXX")
chmod 755 "$WORK"
AS=() # how the PostgreSQL server and its tools run
if [[ $(id -u) == 0 ]]; then
    AS=(runuser -u postgres --)
fi
DPID=
cleanup() {
    if [[ -d $WORK/pgdata ]]; then
        "${AS[@]}" "$PG/pg_ctl" -D "$WORK/pgdata" -m immediate stop >/dev/null 2>&1 || true
    fi
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# Whole-process user + sys seconds of a command and its waited-for
# descendants (wait4), after its own output.
cat >"$WORK/rusage.py" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{ru.ru_utime + ru.ru_stime:.3f}\n")
sys.exit(0 if status == 0 else 1)
PY

mkdir -p "$WORK/run" "$WORK/state"
chmod 755 "$WORK/run"
"$TARGET/release/pcstreamd" --runtime-dir "$WORK/run" --state-dir "$WORK/state" 2>"$WORK/pcstreamd.log" &
DPID=$!
for _ in $(seq 100); do [[ -S $WORK/run/ctl.sock ]] && break; sleep 0.1; done
[[ -S $WORK/run/ctl.sock ]] || { echo "pcstreamd did not start:" >&2; cat "$WORK/pcstreamd.log" >&2; exit 1; }

mode_env() { # mode -> env assignments
    case $1 in
    native) ;;
    daemon) echo "LD_PRELOAD=$SHIM PCSTREAM_RUNTIME_DIR=$WORK/run PCSTREAM_SOCKET=$WORK/run/events.sock" ;;
    record) echo "LD_PRELOAD=$SHIM PCSTREAM_SOCKET=/nonexistent PCSTREAM_RECORD_DIR=$WORK/rec" ;;
    esac
}
fresh_rec() {
    rm -rf "$WORK/rec"
    mkdir -p "$WORK/rec"
    chmod 777 "$WORK/rec"
}

# Each run prints "<metric> <user+sys seconds>".
if [[ " $APPS " == *" gcc "* ]]; then
    python3 bench/gen_cbase.py "$WORK/cbase" 16 4 600 0 >/dev/null
fi
run_gcc() { # mode
    fresh_rec
    rm -rf "$WORK/cbase/obj" "$WORK/cbase/lib" "$WORK/cbase/bin"
    local t0 t1
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046
    (cd "$WORK/cbase" && python3 "$WORK/rusage.py" "$WORK/cpu" env -u LD_PRELOAD $(mode_env "$1") \
        make -s -j2 >/dev/null)
    t1=$(date +%s.%N)
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') $(cat "$WORK/cpu")"
}
run_dbbench() { # mode
    fresh_rec
    rm -rf "$WORK/db"
    local ops
    # shellcheck disable=SC2046
    ops=$(python3 "$WORK/rusage.py" "$WORK/cpu" env -u LD_PRELOAD $(mode_env "$1") \
        db_bench --db="$WORK/db" --benchmarks=fillrandom --num="$NUM" \
        --value_size=1000 --write_buffer_size=4194304 --target_file_size_base=4194304 \
        --max_bytes_for_level_base=16777216 --compression_type=none --statistics=0 \
        --use_existing_db=0 --seed=42 2>/dev/null | awk '/^fillrandom/ {print $5}')
    rm -rf "$WORK/db"
    echo "$ops $(cat "$WORK/cpu")"
}
if [[ " $APPS " == *" pgbench "* ]]; then
    mkdir -p "$WORK/pgdata" "$WORK/pgsock"
    chown postgres: "$WORK/pgdata" "$WORK/pgsock" 2>/dev/null || true
    "${AS[@]}" env LC_ALL=C "$PG/initdb" -D "$WORK/pgdata" -A trust -U postgres >/dev/null
fi
pg_start() { # mode: the server, under the mode's environment, in the background
    fresh_rec
    # shellcheck disable=SC2046
    python3 "$WORK/rusage.py" "$WORK/cpu" "${AS[@]}" env -u LD_PRELOAD LC_ALL=C $(mode_env "$1") \
        "$PG/postgres" -D "$WORK/pgdata" -k "$WORK/pgsock" -c listen_addresses= \
        -c shared_buffers=128MB -c max_wal_size=1GB >"$WORK/pg.log" 2>&1 &
    PGPID=$!
    for _ in $(seq 300); do
        "${AS[@]}" "$PG/pg_isready" -q -h "$WORK/pgsock" && return
        sleep 0.1
    done
    echo "PostgreSQL did not start:" >&2
    cat "$WORK/pg.log" >&2
    exit 1
}
pg_stop() {
    "${AS[@]}" "$PG/pg_ctl" -D "$WORK/pgdata" -m fast stop >/dev/null
    wait "$PGPID"
}
if [[ " $APPS " == *" pgbench "* ]]; then
    pg_start native
    "${AS[@]}" "$PG/pgbench" -h "$WORK/pgsock" -i -q -s "$SCALE" postgres >/dev/null 2>&1
    pg_stop
    cp -a "$WORK/pgdata" "$WORK/pgdata.orig"
fi
run_pgbench() { # mode
    # Every run starts from the same freshly loaded database: no history
    # rows, dead tuples or autovacuum debt left by the runs before it.
    rm -rf "$WORK/pgdata"
    cp -a "$WORK/pgdata.orig" "$WORK/pgdata"
    pg_start "$1"
    local tps
    tps=$("${AS[@]}" "$PG/pgbench" -h "$WORK/pgsock" -c 2 -j 2 -T "$PGBENCH_T" postgres 2>/dev/null |
        awk '/^tps/ {print $3; exit}')
    pg_stop
    echo "$tps $(cat "$WORK/cpu")"
}

# Warm-up: the daemon learns every program's call paths.
for a in $APPS; do
    "run_$a" daemon >/dev/null
done

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A metric cpu
ALL="native $MODES"
for ((r = 0; r < ROUNDS; r++)); do
    # Rotate the order: each mode runs first, second, ... in turn.
    read -ra order <<<"$ALL"
    n=${#order[@]}
    rot=()
    for ((i = 0; i < n; i++)); do rot+=("${order[$(((i + r) % n))]}"); done
    for a in $APPS; do
        for m in "${rot[@]}"; do
            read -r v c < <("run_$a" "$m")
            metric[$a.$m]+="$v "
            cpu[$a.$m]+="$c "
            printf 'round %d %-8s %-7s %12s %9ss cpu\n' "$r" "$a" "$m" "$v" "$c" >&2
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%d rounds; %s, %s CPUs; load average before: %s, after: %s\n' "$ROUNDS" \
    "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" "$(nproc)" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-7s %14s %7s %12s %7s\n' program mode metric ratio "user+sys s" ratio
for a in $APPS; do
    case $a in
    gcc) unit="s wall" ;;
    dbbench) unit="ops/s" ;;
    pgbench) unit="tps" ;;
    esac
    nm=$(echo "${metric[$a.native]}" | median)
    nc=$(echo "${cpu[$a.native]}" | median)
    for m in $ALL; do
        v=$(echo "${metric[$a.$m]}" | median)
        c=$(echo "${cpu[$a.$m]}" | median)
        awk -v a="$a" -v m="$m" -v v="$v" -v nm="$nm" -v c="$c" -v nc="$nc" -v u="$unit" \
            'BEGIN { printf "%-8s %-7s %14s %7.3f %12.2f %7.3f\n", a, m, sprintf("%.6g %s", v, u), v / nm, c, c / nc }'
    done
done
"$TARGET/release/pcstreamctl" status --runtime-dir "$WORK/run" | sed -n '2,6p'
