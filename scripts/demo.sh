#!/usr/bin/env bash
# The main job: builds pcstreamctl and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release -q -p pcstreamctl
exec target/release/pcstreamctl sim --synthetic hotcold:0.2/0.8 --streams 2 --writes 20000000 "$@"
