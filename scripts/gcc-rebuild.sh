#!/bin/sh
# scripts/gcc-rebuild.sh [OUT] [FILES FUNCS TYPES]
#
# Persistence on a rebuild (paper §6.6, Fig. 13), with the live system: a
# pcstreamd in OUT (temporary runtime and state dirs) learns from gcc
# building bench/gen_cbase.py's code base (default 96 units, `make -j2`)
# under the shim; each build is recorded alongside (`pcstreamctl record`
# with the daemon attached: the trace keeps the stream the live mapping
# chose for every write). The daemon is restarted between builds (state
# saved at SIGTERM, reloaded at start). Prints, per build, the share of the
# bytes written that went to stream 0 (call paths the daemon did not know
# yet). No root needed. Needs a release build (cargo build --release).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${CARGO_TARGET_DIR:-$here/target}/release
O=${1:-/tmp/pcstream-gcc-rebuild}
shift 2>/dev/null || true
[ $# -ge 3 ] || set -- 96 4 10
for b in pcstreamd pcstreamctl libpcstream.so; do
  [ -e "$bin/$b" ] || { echo "gcc-rebuild.sh: $bin/$b missing (cargo build --release)" >&2; exit 1; }
done
rm -rf "$O"; mkdir -p "$O"; O=$(cd "$O" && pwd)
python3 "$here/bench/gen_cbase.py" "$O/cbase" "$@" >/dev/null
mkdir -p "$O/cbase/tmp"
start_daemon() {
  "$bin/pcstreamd" --runtime-dir "$O/run" --state-dir "$O/state" >>"$O/pcstreamd.log" 2>&1 &
  DP=$!
  while [ ! -S "$O/run/ctl.sock" ]; do sleep 0.1; done
}
start_daemon
trap 'kill $DP 2>/dev/null || true' EXIT
echo "gcc rebuilds under pcstreamd ($* units/funcs/types), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in 1 2 3; do
  if [ "$b" -gt 1 ]; then
    kill "$DP"; wait "$DP" || true
    start_daemon
  fi
  t0=$(date +%s.%N)
  (cd "$O/cbase" && PCSTREAM_RUNTIME_DIR="$O/run" TMPDIR="$O/cbase/tmp" \
    "$bin/pcstreamctl" record -o "$O/rec$b" -- sh -c 'rm -rf obj lib bin && make -s -j2' >/dev/null 2>&1)
  t1=$(date +%s.%N)
  "$bin/pcstreamctl" trace-stats --json --top 1000000 "$O/rec$b" >"$O/stats$b.json"
  python3 - "$O/stats$b.json" "$b" "$t0" "$t1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
tot = s0 = 0
for x in r["rows"]:
    for st, n in x["streams"].items():
        tot += n
        s0 += n if st == "0" else 0
print(f"build {sys.argv[2]}: {tot / 2**20:6.1f} MiB written, stream 0: {s0 / 2**20:5.2f} MiB"
      f" = {100 * s0 / max(tot, 1):4.1f}%   ({float(sys.argv[4]) - float(sys.argv[3]):.1f} s)")
PY
done
