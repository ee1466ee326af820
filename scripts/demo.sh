#!/usr/bin/env bash
# The main job, the live system: pcstreamd runs in a temporary runtime/state
# directory; a real RocksDB workload (Debian's db_bench) runs under the shim,
# which sends its events to the daemon (and records them); the daemon learns
# each program context's lifetime and publishes the signature -> stream
# mapping; `pcstreamctl status / streams / contexts` show what it learnt;
# the daemon is restarted (state saved at SIGTERM, reloaded at start) and a
# second run starts from the persisted table; finally every placement policy
# is compared on a simulated multi-stream SSD over the recorded run
# (pcstream there is the same engine the daemon runs: tests/tests/daemon_online.rs).
#
# As root the recording is ground truth: db_bench runs on a scratch ext4 over
# a loop device and tracefs records what the device really receives
# (`record --device-trace`). Otherwise the file-level trace is mapped to LBAs
# by the file-system allocation model (`compare` says which it used).
#
# Usage: scripts/demo.sh [--keys N]     (output under $PCSTREAM_DEMO_DIR or a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
keys=200000
if [ "${1:-}" = "--keys" ]; then keys=$2; fi
scripts/install-deps.sh
echo "== building pcstreamctl and libpcstream.so (release)"
cargo build --release -q -p pcstreamctl -p pcstream-preload -p pcstreamd
ctl=${CARGO_TARGET_DIR:-$PWD/target}/release/pcstreamctl
daemon=${CARGO_TARGET_DIR:-$PWD/target}/release/pcstreamd
out=${PCSTREAM_DEMO_DIR:-$(mktemp -d /tmp/pcstream-demo.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)   # absolute: db_bench runs in another directory under --device-trace
run="$out/run"; state="$out/state"
dpid=
start_daemon() {
  "$daemon" --runtime-dir "$run" --state-dir "$state" 2>>"$out/pcstreamd.log" &
  dpid=$!
  for _ in $(seq 100); do [ -S "$run/ctl.sock" ] && return 0; sleep 0.1; done
  echo "pcstreamd did not start; see $out/pcstreamd.log" >&2; exit 1
}
stop_daemon() { if [ -n "$dpid" ]; then kill -TERM "$dpid" 2>/dev/null || true; wait "$dpid" 2>/dev/null || true; dpid=; fi; }
trap stop_daemon EXIT
echo "== starting pcstreamd (runtime dir $run, state dir $state; log $out/pcstreamd.log)"
rm -f "$run/ctl.sock"
start_daemon
export PCSTREAM_RUNTIME_DIR="$run"
dbargs=(--benchmarks=fillrandom,updaterandom "--num=$keys" --value_size=800
        --write_buffer_size=4194304 --target_file_size_base=4194304
        --max_bytes_for_level_base=16777216 --compression_type=none --statistics=0
        --wal_bytes_per_sync=65536 --bytes_per_sync=262144)
# db_bench's progress lines (stdout and stderr) go to a log in the demo's
# directory, not to the terminal (scripts/quiet.sh; absolute: under
# --device-trace the command runs in the scratch file system).
quiet=("$PWD/scripts/quiet.sh" run)
echo "== run 1: db_bench (${keys} keys, fillrandom + updaterandom) under the shim, the daemon learning (recorded into $out/rec)"
if [ "$(id -u)" = 0 ]; then
  # A device the database nearly fills, so its own data ages the flash.
  "$ctl" record --socket "$run/events.sock" --force --device-trace --device-size 512M -o "$out/rec" -- \
    "${quiet[@]}" "$out/db_bench.log" db_bench --db=./db --wal_dir=./db "${dbargs[@]}"
else
  echo "   (not root: file-level trace only; replay uses the file-system allocation model)"
  "$ctl" record --socket "$run/events.sock" --force -o "$out/rec" -- \
    "${quiet[@]}" "$out/db_bench.log" db_bench --db="$out/db" --wal_dir="$out/db" "${dbargs[@]}"
fi
echo "   db_bench's output is in $out/db_bench.log; its last lines:"
scripts/quiet.sh tail "$out/db_bench.log" 3 || true
echo
echo "== what the daemon learnt: pcstreamctl status / streams / contexts"
"$ctl" status
echo
"$ctl" streams
echo
"$ctl" contexts --limit 4
echo
echo "== the published mapping (read-only to clients; every shim maps it and applies it per write)"
ls -l "$run"
echo
echo "== restart: SIGTERM saves the learnt table, the new daemon reloads it and publishes at once"
stop_daemon
ls -l "$state"
start_daemon
"$ctl" status | sed -n '1p;6,7p'
echo
echo "== run 2: db_bench again, starting from the persisted table"
rm -rf "$out/db2"
"$ctl" run --socket "$run/events.sock" -- \
  db_bench --db="$out/db2" --wal_dir="$out/db2" "${dbargs[@]}" >"$out/db_bench2.log" 2>&1
"$ctl" streams
echo
echo "== F_GET_RW_HINT on run 2's files (set by the shim from the daemon's live table; 0 = none, 2 SHORT .. 5 EXTREME)"
python3 - "$out/db2" <<'PY'
import fcntl, glob, os, struct, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "*.log")))[-1:] + sorted(glob.glob(os.path.join(sys.argv[1], "*.sst")))[:1]
for f in files:
    fd = os.open(f, os.O_RDONLY)
    try:
        print(f"{os.path.basename(f):>14}  hint {struct.unpack('Q', fcntl.fcntl(fd, 1035, bytes(8)))[0]}")
    finally:
        os.close(fd)
PY
stop_daemon
echo
echo "== every placement policy on a simulated SSD (9 streams, 7% OP; the device as recorded, steady state, no TRIM)"
"$ctl" compare "$out/rec/trace.pcstrace" --prefill 0 --warmup-passes 1 --trim off \
  --internal-streams both --svg "$out/charts"
echo
echo "charts: $out/charts"
