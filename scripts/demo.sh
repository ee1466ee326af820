#!/usr/bin/env bash
# The main job, the live system: installs what it needs, builds pcstreamctl,
# pcstreamd and libpcstream.so, then runs `pcstreamctl demo`: pcstreamd in a
# directory of its own learns from a real RocksDB workload (Debian's
# db_bench) run under the shim and recorded alongside; `status / streams /
# contexts` show what it learnt; the daemon is restarted (state saved at
# SIGTERM, reloaded at start) and a second run starts from the persisted
# table (the hints on its new files are read back); finally every placement
# policy is compared on a simulated multi-stream SSD over the recorded run
# (pcstream there is the same engine the daemon runs:
# tests/tests/daemon_online.rs). As root the recording is ground truth (a
# scratch ext4 over a loop device, the device's requests from tracefs).
#
# Usage: scripts/demo.sh [--keys N] [--dir DIR] [--file-level]   (pcstreamctl demo --help)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== building pcstreamctl, pcstreamd and libpcstream.so (release)"
cargo build --release -q -p pcstreamctl -p pcstream-preload -p pcstreamd
exec "${CARGO_TARGET_DIR:-$PWD/target}/release/pcstreamctl" demo "$@"
