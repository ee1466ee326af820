# Shared by the whole-process shim benchmarks (bench-shapes.sh,
# bench-java.sh), sourced once WORK (their scratch directory), SHIM
# (libpcstream.so) and TARGET (cargo's target directory) are set:
#   $WORK/rusage.py CMD...   whole-process user and sys seconds (wait4)
#   mode_env MODE            the environment of a shim mode (map, record, daemon)
#   start_pcstreamd          a pcstreamd on $WORK/run (sets DPID)
#   median                   of the numbers on stdin (spaces or lines)

cat >"$WORK/rusage.py" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
if status != 0:
    sys.exit(f"{' '.join(sys.argv[1:])}: exit status {status}")
print(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f}")
PY
echo "ffffffffffffffff 1" >"$WORK/map" # a mapping (the programs' paths stay unmapped)

mode_env() { # mode
    case $1 in
    map) echo "LD_PRELOAD=$SHIM PCSTREAM_MAP=$WORK/map" ;;
    record) echo "LD_PRELOAD=$SHIM PCSTREAM_RECORD_DIR=$WORK/rec" ;;
    daemon) echo "LD_PRELOAD=$SHIM PCSTREAM_RUNTIME_DIR=$WORK/run PCSTREAM_SOCKET=$WORK/run/events.sock" ;;
    esac
}

start_pcstreamd() {
    mkdir -p "$WORK/run" "$WORK/state"
    "$TARGET/release/pcstreamd" --runtime-dir "$WORK/run" --state-dir "$WORK/state" 2>"$WORK/pcstreamd.log" &
    DPID=$!
    for _ in $(seq 100); do [[ -S $WORK/run/ctl.sock ]] && break; sleep 0.1; done
    [[ -S $WORK/run/ctl.sock ]] || { echo "pcstreamd did not start:" >&2; cat "$WORK/pcstreamd.log" >&2; exit 1; }
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
