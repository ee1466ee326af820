#!/usr/bin/env bash
# The whole test suite: installs what it needs, then formatting, lints and
# every test (unit, property, integration with real processes under the shim).
# Usage: scripts/test.sh            (from anywhere inside the clone)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo build (the integration tests run the built libpcstream.so and pcstreamctl)"
cargo build --workspace --release
echo "== cargo test"
cargo test --workspace --release --no-fail-fast -- --test-threads=2
if [ "${PCSTREAM_SKIP_FUZZ:-0}" != 1 ]; then
  # Short libFuzzer runs of fuzz/ (nightly + cargo-fuzz, installed when missing):
  # ~5 min to build the first time on 2 cores, then 20 s per target.
  echo "== fuzz (scripts/fuzz.sh 20)"
  scripts/fuzz.sh 20
fi
