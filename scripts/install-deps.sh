#!/usr/bin/env bash
# Installs the Debian packages the project and its tests need (idempotent).
# As root it uses apt-get; otherwise it only checks and names what is missing.
set -euo pipefail
need=()
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v db_bench >/dev/null || need+=(rocksdb-tools)
command -v cargo >/dev/null || { echo "install-deps: cargo not found: install Rust (rustup) first" >&2; exit 1; }
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "install-deps: apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "install-deps: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
fi
