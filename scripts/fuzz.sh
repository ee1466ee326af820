#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (cargo fuzz, libFuzzer) briefly under a
# memory limit; a crash, a leak past the limit or a timeout fails the script
# and leaves the input in fuzz/artifacts/<target>/. Each finding gets a test.
# Usage: scripts/fuzz.sh [SECONDS-PER-TARGET]   (default 15)
# Cost on 2 cores: building the fuzz crate (once, in fuzz/target) plus
# SECONDS per target (4 targets today; more as fuzz/Cargo.toml grows).
# cargo-fuzz needs nightly compiler flags: RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them. The targets are safe Rust, so no sanitizer (-s none):
# a panic, an abort or an allocation past -malloc_limit_mb is the finding.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-15}"
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo-fuzz missing: scripts/install-deps.sh installs it" >&2; exit 1; }
cargo fuzz build --release -s none
for t in $(cargo fuzz list); do
  echo "== fuzz $t (${secs} s, 1 GiB)"
  mkdir -p "corpus/$t"
  log="target/fuzz-$t.log"
  if ! cargo fuzz run --release -s none "$t" "corpus/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=1024 -malloc_limit_mb=1024 -timeout=10 \
    -max_len=262144 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz.sh: $t found a failing input (fuzz/artifacts/$t)" >&2
    exit 1
  fi
  grep -E "^Done" "$log" || tail -3 "$log"
done
