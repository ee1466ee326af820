#!/usr/bin/env bash
# bench/workloads.sh WORKLOAD SCALE
#
# One benchmark workload, run in the current directory (under `pcstreamctl
# record --device-trace` that is the fresh ext4 on the traced loop device).
# SCALE is `full` (docs/results.md), `paper` (RocksDB at the paper's emulator
# scale) or `quick` (the tests: seconds).
# Needs $BENCH_DATA: a directory prepared by bench/run.sh (or the tests) with
# cbase/ (gen_cbase.py output; gcc alone at `paper` builds cbase-gcc/
# instead where there is one), tpcc.sql (gen_tpcc.py output; the mix
# with gcc runs tpcc-mix.sql instead where there is one) and, for lucene and
# h2, java/ (bench/java/build.sh output: the compiled drivers and their
# classpath).
set -euo pipefail

main() {
wl=${1:?workload}
scale=${2:-full}
case "$scale" in
  quick|full|paper) ;;
  *) echo "workloads.sh: unknown scale '$scale' (quick, full or paper)" >&2; exit 2 ;;
esac
data=${BENCH_DATA:?BENCH_DATA must name the prepared data directory}

# RocksDB sizes: the bench's halved set-up (4 KiB values, 4 MiB files, 16
# MiB L1) at `quick` and `full`; the paper's emulator set-up at `paper` (900k
# keys, 8 KiB values, 8 MiB memtables and files, 64 MiB L1, on a 12 GiB
# device: bench/run.sh --paper), in the RocksDB + gcc mix too (with half
# the keys, KEYS / 2 as at every scale). gcc's rounds are the same at
# `full` and `paper`; at `paper` gcc alone builds cbase-gcc/ (larger).
VALUE=4096 FILE=4194304 L1=16777216 FR=2 AR=1024
if [ "$scale" = quick ]; then
  KEYS=3000 ROUNDS=2
elif [ "$scale" = paper ] && { [ "${wl#rocksdb-}" != "$wl" ] || [ "$wl" = mixed-rocksdb-gcc ]; }; then
  # FR writes the keys once (twice the keys would not fit 12 GiB).
  # AR appends two 4 KiB values per key, so its values end at the 8 KiB of
  # the others (1 KiB appends left 1.8 GB live on 12 GiB: GC never ran).
  KEYS=900000 ROUNDS=29 VALUE=8192 FILE=8388608 L1=67108864 FR=1 AR=4096
else
  KEYS=40000 ROUNDS=29
fi

# RocksDB: the paper's scaled emulator set-up (base file 8 MB, 8 KB values, 4
# levels, multiplier 10), scaled by 1/2 (4 MiB files, 4 KiB values, 4 MiB
# memtables, 16 MiB L1). WAL/SST range syncs so short-lived files reach the device.
rocks() {
  local db=$1; shift
  db_bench --db="$db" --num="$KEYS" --key_size=16 --value_size="$VALUE" \
    --write_buffer_size="$FILE" --target_file_size_base="$FILE" \
    --max_bytes_for_level_base="$L1" --max_bytes_for_level_multiplier=10 \
    --num_levels=4 --compression_type=none --statistics=0 \
    --wal_bytes_per_sync=65536 --bytes_per_sync=262144 --seed=42 \
    --histogram=0 "$@" >/dev/null 2>&1
}

# gcc/make: a full build, then ROUNDS partial rebuilds, each after editing a
# random third of the sources (the paper's kernel-build scenario: 30 builds,
# scaled; full scale is 1 + 29 builds). The code base (bench/run.sh's
# `files=`) includes a source tree the build never compiles, which takes its
# share of the device like a kernel tree's unconfigured sources.
gcc_rounds() {
  local dir=$1 src=${2:-$data/cbase}
  cp -r "$src" "$dir"
  # gcc's temporary files (the .s between cc1 and as, collect2's) go where
  # they would in the paper's setting: Debian's /tmp is on the root disk,
  # i.e. the same SSD as the build. `record --device-trace` already points
  # TMPDIR into its file system; set here too, so the workload is the same
  # wherever it runs.
  mkdir -p "$dir/tmp"
  # A marker file per build: `compare --clear-at-marks` empties the
  # policies' tables there (paper Fig. 13, "PC table cleared").
  (cd "$dir" && export TMPDIR=$PWD/tmp && echo 0 >round-0.pcstream-mark && make -s -j2 >/dev/null
   for r in $(seq 1 "$ROUNDS"); do
     sh touch.sh "$r"; echo "$r" >"round-$r.pcstream-mark"; make -s -j2 >/dev/null
   done)
}

sqlite_tpcc() {
  sqlite3 "$1" <"$2" >/dev/null
}

# Lucene 4.10 (Debian's liblucene4.10-java) indexing documents of ≈ 1 KiB
# and then updating random ids, with an Elasticsearch-like translog, NRT
# refreshes and commits (bench/java/LuceneChurn.java): DOCS UPDATES RAM_MB
# MAX_SEGMENT_MB REFRESH COMMIT. The serial collector and no perf-data file
# (its /tmp file is a shared mapping) keep the JVM's own I/O out of it.
# `full`: a ≈ 200 MB index, 335 MB on disk at its peak, 3.6 GB written by
# the JVM, 2.6 GB of it reaching the 448 MiB device (bench/README.md);
# `paper` is five times the documents and operations.
lucene() {
  local cp
  cp=$(cat "$data/java/classpath" 2>/dev/null) ||
    { echo "workloads.sh: $data/java/classpath missing: run bench/java/build.sh $data/java first" >&2; exit 1; }
  mkdir -p lucene
  java -XX:-UsePerfData -XX:+UseSerialGC -Xmx"$1" -cp "$cp" LuceneChurn lucene "${@:2}" >/dev/null
}

# H2's MVStore (Debian's libh2-java) as a key-value store with 1 KiB values
# (bench/java/H2Churn.java): KEYS filled, then UPDATES puts, 80% of them to
# the hot fifth of the keys; a commit (one small chunk appended with pwrite)
# every COMMIT puts, an fsync every SYNC_EVERY commits (a group commit), and
# every COMPACT_EVERY commits a compaction while fewer than FILL_RATE % of
# the chunks' pages are live (MVStore.compact: up to COMPACT_MB MiB of the
# emptiest chunks' live pages rewritten into a new chunk). One file whose
# freed chunks are overwritten in place: data dies page by page inside it.
# Single-threaded, no background thread. Arguments: HEAP KEYS UPDATES COMMIT
# SYNC_EVERY COMPACT_EVERY FILL_RATE COMPACT_MB. `full`: 100k keys, 300k
# updates, ≈ 4.8 GiB written into a ≈ 200 MiB file (bench/README.md);
# `paper` five times the keys and updates.
h2() {
  local cp
  cp=$(cat "$data/java/classpath" 2>/dev/null) ||
    { echo "workloads.sh: $data/java/classpath missing: run bench/java/build.sh $data/java first" >&2; exit 1; }
  [ -f "$data/java/H2Churn.class" ] ||
    { echo "workloads.sh: $data/java/H2Churn.class missing: apt-get install libh2-java, then bench/java/build.sh $data/java" >&2; exit 1; }
  mkdir -p h2
  java -XX:-UsePerfData -XX:+UseSerialGC -Xmx"$1" -cp "$cp" H2Churn h2 "${@:2}" >/dev/null
}

case "$wl" in
  rocksdb-fr) rocks db --benchmarks=fillrandom --num=$((KEYS * FR)) ;;
  rocksdb-ur) rocks db --benchmarks=fillrandom,updaterandom ;;
  rocksdb-ar) rocks db --benchmarks=appendrandom,appendrandom --value_size="$AR" ;;
  rocksdb-ycsba) rocks db --benchmarks=fillrandom,readrandomwriterandom --readwritepercent=50 --num=$((KEYS / 2)) --reads=$((KEYS)) ;;
  sqlite-tpcc) sqlite_tpcc tpcc.db "$data/tpcc.sql" ;;
  # lucene-native: the same run with Java call paths off (PCSTREAM_JAVA=0):
  # the JVM's writes get the native signatures of the JDK's natives, what
  # the paper's PCStream sees without its JDK change.
  lucene|lucene-native)
    [ "$wl" = lucene-native ] && export PCSTREAM_JAVA=0
    case "$scale" in
      quick) lucene 128m 2000 4000 4 8 500 2000 ;;
      full) lucene 256m 100000 600000 16 32 5000 25000 ;;
      paper) lucene 512m 500000 3000000 32 64 5000 125000 ;;
    esac ;;
  # h2-native: the same with Java call paths off (as lucene-native).
  # A chunk is written 12 frames deep inside MVStore (writeFully ← write ←
  # storeBuffer ← lambdas and submitOrRun ← serializeAndStore ← storeNow),
  # and what tells a regular commit from a compaction's is the 16th,
  # H2Churn.commit or H2Churn.compact over MVStore.store ← commit ← commit:
  # the shim's default of 16 Java frames (docs/shim.md).
  h2|h2-native)
    [ "$wl" = h2-native ] && export PCSTREAM_JAVA=0
    case "$scale" in
      quick) h2 128m 3000 12000 4 16 50 60 1 ;;
      full) h2 256m 100000 300000 4 16 50 60 4 ;;
      paper) h2 512m 500000 1500000 4 16 50 60 4 ;;
    esac ;;
  # gcc alone at the paper's scale builds its own, larger code base
  # (bench/run.sh: kernel-sized objects and tree on a device of several GiB).
  gcc)
    if [ "$scale" = paper ] && [ -d "$data/cbase-gcc" ]; then
      gcc_rounds build "$data/cbase-gcc"
    else
      gcc_rounds build
    fi ;;
  mixed-rocksdb-gcc)
    rocks db --benchmarks=fillrandom,updaterandom --num=$((KEYS / 2)) & p1=$!
    gcc_rounds build & p2=$!
    wait $p1; wait $p2 ;;
  mixed-sqlite-gcc)
    mix=$data/tpcc-mix.sql
    [ -f "$mix" ] || mix=$data/tpcc.sql
    sqlite_tpcc tpcc.db "$mix" & p1=$!
    gcc_rounds build & p2=$!
    wait $p1; wait $p2 ;;
  *) echo "workloads.sh: unknown workload '$wl'" >&2; exit 2 ;;
esac
}

main "$@"
exit
