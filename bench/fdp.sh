#!/usr/bin/env bash
# The whole loop on a device: a Debian guest's own kernel (7.3, nvme-tcp)
# drives `pcstreamctl target` (ftl-sim as an FDP SSD), applications run in
# the guest on F2FS, on a raw namespace and on ext4, with no shim, with
# their own hints, with pcstreamd learning online (and again from its
# persisted table) and with a hand-placed static map; the WAF comes from the
# device's own counters (`nvme fdp stats`). Renders DIR/results-fdp.md and
# DIR/fdp.svg (bench/fdp_render.py; DIR is --out), and with --docs
# docs/results-fdp.md and docs/results/fdp.svg instead: the docs combine
# several runs, so a single run never overwrites them unless asked.
#
#   sudo bench/fdp.sh [--runs N] [--scale quick|aged|full] [--cases a,b,...]
#                     [--policies p,q,...] [--set NAME=VALUE]...
#                     [--out DIR] [--docs] [--render-only]
#
# --policies keeps only those rows (none, app-hints, pcstream, pcstream-2,
# hand-placed; hand-placed takes its map from a pcstream row before it);
# --scale aged is quick with RocksDB near full (288 MiB, at most 12 L0
# files: F2FS peaks at 94 % used). --set overrides one of the scale's
# sizes (CAP, RDB_CAP, RDB_KEYS, RDB_OPS, SQL_ROWS, SQL_TXNS, RAW_MIB,
# RAW_ROUNDS, FIO_SIZE, FIO_IO, PG_SCALE, PG_TXNS, PG_WAL, MY_TABLES,
# MY_ROWS, MY_TXNS, MY_POOL, MY_LOG; RDB_L0:
# RocksDB's L0 stop trigger; RDB_RATE: db_bench's foreground write rate
# in bytes/s (--benchmark_write_rate_limit), so that every row, with the
# shim's cost or without, gives RocksDB's compactions the same time and
# they write the same; RDB_CHUNK: RocksDB's direct-I/O write size in
# bytes (--writable_file_max_buffer_size, 1 MiB unless set); RDB_JOBS:
# its background flush and compaction threads (--max_background_jobs,
# db_bench's 2 unless set); FRAMES: PCSTREAM_FRAMES, native frames per
# signature, for every row under the shim (the shim's default unless set);
# CP_INTERVAL: F2FS's checkpoint interval;
# F2FS_MIN_HOT: its min_hot_blocks and min_fsync_blocks; F2FS_DISCARD=0:
# mount F2FS with nodiscard; RUHS, RU_SIZE,
# OP: the target's reclaim unit handles, reclaim unit size and
# over-provisioning in percent, 8, 1M and 7 unless set; PG_CKPT:
# PostgreSQL's checkpoint_timeout in seconds, 3600 unless set; PG_SEED:
# pgbench's (and sysbench's) random seed, the run's number unless set; see
# bench/fdp-guest.sh), e.g. --set RDB_CAP=320M, or --set RUHS=3 --set
# RU_SIZE=8M --set OP=20 (reclaim units larger than F2FS's 2 MiB segments).
#
# Cases: f2fs-rocksdb, f2fs-sqlite, f2fs-postgres, f2fs-mariadb, raw-rawlife, raw-fio, raw-zipf, ext4-rocksdb
# (the negative control: ext4 carries no hint to an NVMe device). Needs
# root (the guest is built with debootstrap, like tests/qemu/run.sh, whose
# machinery it uses with its own cache: target/qemu-bench-cache). Not part
# of CI. Guest time under TCG: see bench/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=3 scale=full cases=f2fs-rocksdb,f2fs-sqlite,raw-rawlife,raw-fio,ext4-rocksdb
out=$root/bench/out-fdp render_only=0 policies= sets= docs=0
# What --set may override (bench/fdp-guest.sh takes every fdp.NAME=VALUE it is given).
set_names="RUHS RU_SIZE OP PG_CKPT PG_SEED CAP RDB_CAP RDB_KEYS RDB_OPS RDB_L0 RDB_RATE RDB_CHUNK RDB_JOBS FRAMES SQL_ROWS SQL_TXNS RAW_MIB RAW_ROUNDS FIO_SIZE FIO_IO CP_INTERVAL PG_SCALE PG_TXNS PG_WAL MY_TABLES MY_ROWS MY_TXNS MY_POOL MY_LOG F2FS_MIN_HOT F2FS_DISCARD"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --set)
      case " $set_names " in *" ${2%%=*} "*) ;; *) false ;; esac && case $2 in *=*) ;; *) false ;; esac ||
        { echo "fdp.sh: --set takes NAME=VALUE with NAME one of $set_names, not '$2'" >&2; exit 2; }
      case ${2#*=} in ''|*[!0-9MGB]*) echo "fdp.sh: --set $2: the value must be a number (a size may end in M or G)" >&2; exit 2 ;; esac
      case $2 in RUHS=*[!0-9]*|OP=*[!0-9]*|PG_CKPT=*[!0-9]*|PG_SEED=*[!0-9]*|RDB_RATE=*[!0-9]*|RDB_CHUNK=*[!0-9]*|RDB_JOBS=*[!0-9]*|FRAMES=*[!0-9]*) echo "fdp.sh: --set $2: the value must be a plain number" >&2; exit 2 ;; esac
      sets="$sets fdp.$2"; shift 2 ;;
    --render-only) render_only=1; shift ;;
    --docs) docs=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fdp.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $scale in quick|aged|full) ;; *) echo "fdp.sh: --scale must be quick, aged or full, not '$scale'" >&2; exit 2 ;; esac
case $runs in ''|*[!0-9]*|0) echo "fdp.sh: --runs must be a positive number, not '$runs'" >&2; exit 2 ;; esac
for p in ${policies//,/ }; do
  case $p in none|app-hints|pcstream|pcstream-2|hand-placed) ;;
    *) echo "fdp.sh: unknown policy '$p' (none, app-hints, pcstream, pcstream-2, hand-placed)" >&2; exit 2 ;;
  esac
done
for c in ${cases//,/ }; do
  case $c in f2fs-rocksdb|f2fs-sqlite|f2fs-postgres|f2fs-mariadb|raw-rawlife|raw-fio|raw-zipf|ext4-rocksdb) ;;
    *) echo "fdp.sh: unknown case '$c' (f2fs-rocksdb, f2fs-sqlite, f2fs-postgres, f2fs-mariadb, raw-rawlife, raw-fio, raw-zipf, ext4-rocksdb)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
cache=${QEMU_CACHE:-$root/target/qemu-bench-cache}
if [ "$render_only" = 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "fdp.sh: needs root (debootstrap and chroot build the guest)" >&2; exit 1; }
  start=$(date +%s)
  # Hours of guest time at full scale: the boot's timeout is generous.
  QEMU_CACHE=$cache QEMU_PACKAGES=rocksdb-tools,sqlite3,fio,postgresql,mariadb-server,sysbench QEMU_INIT=$root/bench/fdp-guest.sh \
    QEMU_APPEND="fdp.runs=$runs fdp.scale=$scale fdp.cases=$cases${policies:+ fdp.policies=$policies}$sets" QEMU_MEM=6144 \
    QEMU_TIMEOUT=$((6 * 3600)) QEMU_BOOTS=nvme \
    "$root/tests/qemu/run.sh" | grep -v '^RESULT' || true
  tr -d '\r' <"$cache/console.log" >"$out/console.log"
  grep '^RESULT ' "$out/console.log" >"$out/results.txt" || true
  echo "fdp.sh: $(wc -l <"$out/results.txt") rows in $(( $(date +%s) - start )) s; console log: $out/console.log"
  { echo "scale=$scale runs=$runs cases=$cases${policies:+ policies=$policies}${sets:+ set:${sets//fdp./}}"; grep '^INFO kernel' "$out/console.log" || true;
    echo "host $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; $(date -u +%F)"; } >"$out/meta.txt"
fi
[ -s "$out/results.txt" ] || { echo "fdp.sh: no RESULT rows in $out/results.txt" >&2; exit 1; }
if [ "$docs" = 1 ]; then md=$root/docs/results-fdp.md svg=$root/docs/results/fdp.svg; else md=$out/results-fdp.md svg=$out/fdp.svg; fi
python3 "$root/bench/fdp_render.py" --results "$out/results.txt" --meta "$out/meta.txt" \
  --md "$md" --svg "$svg" \
  --command "bench/fdp.sh --runs $runs --scale $scale --cases $cases"
echo "fdp.sh: wrote $md and $svg"
