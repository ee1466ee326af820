#!/usr/bin/env bash
# bench/run.sh [--quick] [--out DIR] [--only W1,W2] [--no-build]
#
# The PCStream paper's evaluation on real applications, one command
# (bench/README.md): builds pcstreamctl + the shim (release), records every
# workload of bench/workloads.sh with `pcstreamctl record --device-trace`
# (ground truth: what the loop device really received), replays the traces
# through every policy with `pcstreamctl compare` and rewrites
# docs/results.md (+ SVG charts in docs/results/).
# Needs root (loop device, mount, tracefs); refuses to run otherwise.
set -euo pipefail

main() {
args="$*"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
scale=full
out=$repo/bench/out
only=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) scale=quick ;;
    --out) out=$2; shift ;;
    --only) only=$2; shift ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: needs root: the workloads are recorded with --device-trace (loop device, mount, tracefs)." >&2
  echo "  There is no silent fallback; run as root (CI and the bench machine do)." >&2
  exit 1
fi

# Tools (Debian/Ubuntu package names).
need=()
command -v db_bench >/dev/null || need+=(rocksdb-tools)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench/run.sh: installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

target=${CARGO_TARGET_DIR:-$repo/target}
if [ $build = 1 ]; then
  (cd "$repo" && cargo build --release -q -p pcstreamctl -p pcstream-preload)
fi
ctl=$target/release/pcstreamctl
[ -x "$ctl" ] || { echo "bench/run.sh: $ctl missing (build failed?)" >&2; exit 1; }

if [ $scale = quick ]; then
  files=12 warehouses=1 txns=300
else
  files=24 warehouses=4 txns=2500
fi
all=(rocksdb-ur rocksdb-ar rocksdb-fr rocksdb-ycsba sqlite-tpcc gcc mixed-rocksdb-gcc mixed-sqlite-gcc)
workloads=("${all[@]}")
# --only re-records some workloads; compare still takes every trace in $out.
if [ -n "$only" ]; then IFS=, read -r -a workloads <<<"$only"; fi

mkdir -p "$out"
data=$out/data
rm -rf "$data"; mkdir -p "$data"
python3 "$here/gen_cbase.py" "$data/cbase" "$files" 12
python3 "$here/gen_tpcc.py" "$warehouses" "$txns" >"$data/tpcc.sql"
export BENCH_DATA=$data

traces=()
touch "$out/record-times.tsv"
for wl in "${workloads[@]}"; do
  echo "== record $wl ($scale)" >&2
  t0=$(date +%s%N)
  case "$wl" in
    sqlite-tpcc|gcc) size=128M ;;
    mixed-sqlite-gcc) size=256M ;;
    *) size=1G ;;
  esac
  "$ctl" record --force --device-trace --device-size "$size" -o "$out/$wl" -- \
    bash "$here/workloads.sh" "$wl" "$scale" 2> >(tail -3 >&2)
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  { grep -v "^$wl	" "$out/record-times.tsv" || true; printf '%s\t%s\n' "$wl" "$ms"; } >"$out/times.tmp"
  mv "$out/times.tmp" "$out/record-times.tsv"
done
for wl in "${all[@]}"; do
  if [ -f "$out/$wl/trace.pcstrace" ]; then
    traces+=("$out/$wl/trace.pcstrace")
  else
    echo "bench/run.sh: no trace for $wl in $out (not recorded)" >&2
  fi
done

echo "== compare (9 streams, internal streams off and on)" >&2
svg=$repo/docs/results
[ $scale = quick ] && svg=$out/svg
rm -rf "$svg"; mkdir -p "$svg"
"$ctl" compare "${traces[@]}" --internal-streams both --json --svg "$svg" >"$out/compare.json"
rm -f "$svg"/*-lifetimes-internal-on.svg   # keep the committed charts small
echo "== compare (5 streams: default + the four F_SET_RW_HINT classes)" >&2
"$ctl" compare "${traces[@]}" --streams 5 --json >"$out/compare-4streams.json"
echo "== compare (one warm-up pass, tables kept: steady state)" >&2
"$ctl" compare "${traces[@]}" --warmup-passes 1 --json >"$out/compare-warm.json"
echo "== compare (tables cleared at every gcc build)" >&2
marked=()
for t in "${traces[@]}"; do case "$t" in */gcc/*|*/mixed-*) marked+=("$t") ;; esac; done
"$ctl" compare "${marked[@]}" --clear-at-marks --json >"$out/compare-cleared.json"
echo "== compare (device without TRIM: ext4 without discard)" >&2
"$ctl" compare "${traces[@]}" --trim off --json >"$out/compare-notrim.json"

results=$repo/docs/results.md
[ $scale = quick ] && results=$out/results.md
python3 "$here/render.py" --out "$out" --svg "$svg" --results "$results" --scale "$scale" \
  --command "bench/run.sh $args" --ctl "$ctl"
echo "bench/run.sh: wrote $results" >&2
}

main "$@"
exit
