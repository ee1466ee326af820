#!/usr/bin/env bash
# Short runs of every cargo-fuzz target in fuzz/ (libFuzzer, nightly).
# Usage: scripts/fuzz.sh [SECONDS per target, default 20]
# Installs cargo-fuzz and a minimal nightly toolchain when missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-20}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
for t in $(cargo +nightly fuzz list); do
  echo "== fuzz $t (${secs} s)"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10
done
