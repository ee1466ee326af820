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
echo "== cargo doc (every intra-doc link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
echo "== cargo build (the integration tests run the built libpcstream.so and pcstreamctl)"
cargo build --workspace --release
echo "== cargo test"
cargo test --workspace --release --no-fail-fast -- --test-threads=2
echo "== tests/qemu (a Debian guest: its kernel and nvme-cli drive the NVMe/TCP target; a second boot runs pcstreamd under its systemd; root only)"
tests/qemu/run.sh
if [ "${PCSTREAM_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz targets (scripts/fuzz.sh: build of fuzz/ + 15 s per target, 1 GiB limit)"
  scripts/fuzz.sh 15
fi
