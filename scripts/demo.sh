#!/usr/bin/env bash
# The main job: record a real RocksDB workload (Debian's db_bench) under the
# shim, show which program contexts wrote what, and compare every placement
# policy on a simulated multi-stream SSD.
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
cargo build --release -q -p pcstreamctl -p pcstream-preload
ctl=${CARGO_TARGET_DIR:-$PWD/target}/release/pcstreamctl
out=${PCSTREAM_DEMO_DIR:-$(mktemp -d /tmp/pcstream-demo.XXXXXX)}
mkdir -p "$out"
dbargs=(--benchmarks=fillrandom,updaterandom "--num=$keys" --value_size=800
        --write_buffer_size=4194304 --target_file_size_base=4194304
        --max_bytes_for_level_base=16777216 --compression_type=none --statistics=0
        --wal_bytes_per_sync=65536 --bytes_per_sync=262144)
echo "== recording db_bench (${keys} keys, fillrandom + updaterandom) under the shim into $out/rec"
if [ "$(id -u)" = 0 ]; then
  # A device the database nearly fills, so its own data ages the flash.
  "$ctl" record --force --device-trace --device-size 512M -o "$out/rec" -- \
    db_bench --db=./db --wal_dir=./db "${dbargs[@]}" >"$out/db_bench.log"
else
  echo "   (not root: file-level trace only; replay uses the file-system allocation model)"
  "$ctl" record --force -o "$out/rec" -- \
    db_bench --db="$out/db" --wal_dir="$out/db" "${dbargs[@]}" >"$out/db_bench.log"
fi
echo
echo "== the program contexts that wrote the data (top 4)"
"$ctl" trace-stats "$out/rec/trace.pcstrace" --top 4 --frames 5
echo
echo "== every placement policy on a simulated SSD (9 streams, 7% OP; the device as recorded, steady state, no TRIM)"
"$ctl" compare "$out/rec/trace.pcstrace" --prefill 0 --warmup-passes 1 --trim off \
  --internal-streams both --svg "$out/charts"
echo
echo "charts: $out/charts"
