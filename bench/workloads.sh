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

# The same TPC-C-like script with SQLite's write-ahead log instead of its
# rollback journal (PRAGMA journal_mode=WAL, as Android and browsers run
# SQLite): commits append to tpcc.db-wal, and every 1000 WAL pages (SQLite's
# default wal_autocheckpoint) a checkpoint writes the pages back into the
# database in place and the WAL starts over from its beginning: an
# in-place database with a checkpointer, like PostgreSQL's or InnoDB's.
sqlite_wal() {
  grep -qx 'PRAGMA journal_mode=DELETE;' "$2" ||
    { echo "workloads.sh: $2 has no 'PRAGMA journal_mode=DELETE;' line to turn into WAL mode" >&2; exit 1; }
  sed 's/^PRAGMA journal_mode=DELETE;$/PRAGMA journal_mode=WAL;/' "$2" | sqlite3 "$1" >/dev/null
}

# Lucene 4.10 (Debian's liblucene4.10-java) indexing documents of ≈ 1 KiB
# and then updating random ids, with an Elasticsearch-like translog, NRT
# refreshes and commits (bench/java/LuceneChurn.java): DOCS UPDATES RAM_MB
# MAX_SEGMENT_MB REFRESH COMMIT. It indexes on a pool thread, as a server
# does (not on the JVM's main thread, whose native stack alone would tell
# flushes from merges: bench/README.md). The serial collector and no perf-data file
# (its /tmp file is a shared mapping) keep the JVM's own I/O out of it.
# MAX_SEGMENT_MB 5120 is Lucene's and Elasticsearch's default max merged
# segment (5 GB: uncapped here, merges grow segments tier by tier).
# `full`: a ≈ 200 MB index, ≈ 400 MB on disk at its peak, 3.4 GB written by
# the JVM, ≈ 2.3 GiB of it reaching the device, 464 MiB: the peak of live
# data ≈ 87.5% of it, between Elasticsearch's disk watermarks (run.sh's
# device_size, bench/README.md);
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

# The held-out workloads (postgres, mariadb, fio-skew): never used to tune
# the placement engine (docs/placement.md, "Method"); bench/render.py
# reports them apart.

# COMMAND as USER when root (database servers refuse to run as root), as
# the caller otherwise. runuser keeps the environment, so LD_PRELOAD and the
# shim's recording directory reach the server and everything it forks.
as_user() {
  local u=$1; shift
  if [ "$(id -u)" = 0 ]; then runuser -u "$u" -- "$@"; else "$@"; fi
}

# A directory of the traced file system the server's user owns.
server_dir() {
  mkdir -p "$2"
  if [ "$(id -u)" = 0 ]; then chown "$1": "$2"; fi
}

# PostgreSQL (Debian's, the newest under /usr/lib/postgresql) as a private
# server: initdb, the postmaster on a Unix socket in its own directory (no
# TCP), then pgbench: `-i -s SCALE` (≈ 15 MiB of tables and indexes per
# scale unit), TXNS TPC-B-like transactions from CLIENTS clients, VACUUM,
# CHECKPOINT and a clean shutdown. The postmaster, its backends, the
# checkpointer, the background and WAL writers all inherit LD_PRELOAD.
# Default durability (fsync, synchronous_commit); max_wal_size MAX_WAL so
# the checkpointer writes the tables back during the run and recycles WAL
# segments. Arguments: SCALE TXNS CLIENTS MAX_WAL.
postgres_pgbench() {
  local bin d=$PWD/pg
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pgbench" ] ||
    { echo "workloads.sh: PostgreSQL missing (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql" >&2; exit 1; }
  server_dir postgres "$d"
  as_user postgres "$bin/initdb" -D "$d/data" -U postgres -A trust >/dev/null
  # The server goes down whatever happens, or it would keep the traced
  # file system busy (expanded now: a function's locals are gone when the
  # EXIT trap runs).
  trap "as_user postgres '$bin/pg_ctl' -D '$d/data' -m immediate stop >/dev/null 2>&1 || true" EXIT
  as_user postgres "$bin/pg_ctl" -D "$d/data" -l "$d/server.log" -w \
    -o "-k $d -c listen_addresses='' -c max_wal_size=$4" start >/dev/null
  local c=(-h "$d" -U postgres)
  # pgbench -i reports its progress on stderr: kept in the data directory's
  # neighbour, shown when it fails.
  as_user postgres "$bin/pgbench" "${c[@]}" -i -s "$1" -q postgres >"$d/init.log" 2>&1 ||
    { echo "workloads.sh: pgbench -i failed: $(tail -3 "$d/init.log")" >&2; exit 1; }
  as_user postgres "$bin/pgbench" "${c[@]}" -c "$3" -j 2 -t $(($2 / $3)) -n postgres >/dev/null
  as_user postgres "$bin/psql" "${c[@]}" -q -c VACUUM -c CHECKPOINT postgres
  as_user postgres "$bin/pg_ctl" -D "$d/data" -m fast -w stop >/dev/null
  trap - EXIT
}

# MariaDB's InnoDB as a private mariadbd (its own datadir and socket, no
# TCP, no /etc/mysql config) under sysbench's OLTP write-only mix: TABLES
# tables of ROWS rows (`prepare`), then EVENTS transactions from 4 threads,
# each an indexed update, a non-indexed update, a delete and an insert of
# a row drawn with sysbench's default skew (`special`), seeded. The buffer
# pool (POOL) is a fraction of the data, so the page cleaner flushes pages
# through the doublewrite buffer all along; the redo log is LOG.
# What the shim must see: Debian's mariadbd (10.11) submits page writes
# through io_uring by default ("InnoDB: Using io_uring"; libaio where that
# fails), which the shim cannot see (docs/shim.md), so
# innodb_use_native_aio=0: InnoDB's own I/O threads call pwrite. It tries
# to map ib_logfile0 (MAP_SYNC, which works only on persistent memory: on
# ext4 it falls back to pwrite); innodb_log_file_mmap=0 rules stores
# through a mapping out. Checked with strace -f: every write of the server
# is a pwrite64, no io_uring_setup, no writable shared mapping.
# innodb_flush_method stays at its default, O_DIRECT.
# Arguments: TABLES ROWS EVENTS POOL LOG.
mariadb_sysbench() {
  local d=$PWD/my
  command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null ||
    { echo "workloads.sh: MariaDB missing: apt-get install mariadb-server" >&2; exit 1; }
  command -v sysbench >/dev/null ||
    { echo "workloads.sh: sysbench missing: apt-get install sysbench" >&2; exit 1; }
  server_dir mysql "$d"
  server_dir mysql "$d/tmp"
  local user=()
  if [ "$(id -u)" = 0 ]; then user=(--user=mysql); fi
  local opts=(--datadir="$d/data" --tmpdir="$d/tmp" "${user[@]}"
    --innodb-use-native-aio=0 --innodb-log-file-mmap=0
    --innodb-buffer-pool-size="$4" --innodb-log-file-size="$5")
  mariadb-install-db --no-defaults "${opts[@]}" --auth-root-authentication-method=normal \
    --skip-test-db >"$d/install.log" 2>&1 ||
    { echo "workloads.sh: mariadb-install-db failed: $(tail -5 "$d/install.log")" >&2; exit 1; }
  mariadbd --no-defaults "${opts[@]}" --socket="$d/sock" --skip-networking \
    --pid-file="$d/mariadbd.pid" --log-error="$d/error.log" &
  local pid=$!
  # The server goes down whatever happens (it would keep the traced file
  # system busy; expanded now: a function's locals are gone when the EXIT
  # trap runs).
  trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null || true" EXIT
  local i
  for i in $(seq 1 600); do
    mariadb-admin --no-defaults --socket="$d/sock" -u root ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { echo "workloads.sh: mariadbd exited: $(tail -5 "$d/error.log")" >&2; exit 1; }
    sleep 0.1
  done
  mariadb --no-defaults --socket="$d/sock" -u root -e 'CREATE DATABASE sbtest'
  local sb=(--db-driver=mysql --mysql-socket="$d/sock" --mysql-user=root --mysql-db=sbtest
    --tables="$1" --table-size="$2" --rand-seed=42)
  sysbench oltp_write_only "${sb[@]}" prepare >/dev/null
  sysbench oltp_write_only "${sb[@]}" --threads=4 --events="$3" --time=0 run >/dev/null
  mariadb-admin --no-defaults --socket="$d/sock" -u root shutdown
  wait "$pid"
  trap - EXIT
}

# fio: three jobs (each its own process: thread=0) writing 4 KiB blocks at
# random offsets (psync, O_DIRECT, an fsync every 256 writes) into files of
# different sizes, the same number of writes each, at the same time: a page
# of `hot` (HOT MiB, zipf 1.2 within it) is rewritten far more often than
# one of `warm` (WARM MiB, uniform) and of `cold` (COLD MiB, uniform).
# fio lays each file out first with sequential buffered writes
# (overwrite=1: the random writes then overwrite written data, as in a
# database file, not fallocated space) and deletes it when its job ends
# (unlink=1). The three jobs write through one code path (fio's psync
# engine), so their call paths are the same: placement by call path cannot
# tell them apart, only the layout from the random writes. Arguments: HOT
# WARM COLD WRITES_MIB (per job).
fio_skew() {
  command -v fio >/dev/null || { echo "workloads.sh: fio missing: apt-get install fio" >&2; exit 1; }
  mkdir -p fio
  fio --output=/dev/null - <<EOF
[global]
directory=fio
ioengine=psync
direct=1
rw=randwrite
bs=4k
fsync=256
thread=0
randrepeat=1
overwrite=1
unlink=1
io_size=$4m
[hot]
size=$1m
random_distribution=zipf:1.2
[warm]
size=$2m
[cold]
size=$3m
EOF
}

case "$wl" in
  rocksdb-fr) rocks db --benchmarks=fillrandom --num=$((KEYS * FR)) ;;
  rocksdb-ur) rocks db --benchmarks=fillrandom,updaterandom ;;
  rocksdb-ar) rocks db --benchmarks=appendrandom,appendrandom --value_size="$AR" ;;
  rocksdb-ycsba) rocks db --benchmarks=fillrandom,readrandomwriterandom --readwritepercent=50 --num=$((KEYS / 2)) --reads=$((KEYS)) ;;
  sqlite-tpcc) sqlite_tpcc tpcc.db "$data/tpcc.sql" ;;
  sqlite-wal)
    src=$data/tpcc-wal.sql
    [ -f "$src" ] || src=$data/tpcc.sql
    sqlite_wal tpcc.db "$src" ;;
  # lucene-native: the same run with Java call paths off (PCSTREAM_JAVA=0):
  # the JVM's writes get the native signatures of the JDK's natives, what
  # the paper's PCStream sees without its JDK change.
  lucene|lucene-native)
    # lucene: each Java write's native signature recorded beside its Java
    # call path too (compare --native-signatures: the paper's view of the
    # same run); lucene-native: the same run with Java call paths off.
    if [ "$wl" = lucene-native ]; then export PCSTREAM_JAVA=0; else export PCSTREAM_JAVA_NATIVE=1; fi
    case "$scale" in
      quick) lucene 128m 2000 4000 4 5120 500 2000 ;;
      full) lucene 256m 100000 600000 16 5120 5000 25000 ;;
      paper) lucene 512m 500000 3000000 32 5120 5000 125000 ;;
    esac ;;
  # h2-native: the same with Java call paths off (as lucene-native).
  # A chunk is written 12 frames deep inside MVStore (writeFully ← write ←
  # storeBuffer ← lambdas and submitOrRun ← serializeAndStore ← storeNow),
  # and what tells a regular commit from a compaction's is the 16th,
  # H2Churn.commit or H2Churn.compact over MVStore.store ← commit ← commit:
  # the shim's default of 16 Java frames (docs/shim.md).
  h2|h2-native)
    if [ "$wl" = h2-native ]; then export PCSTREAM_JAVA=0; else export PCSTREAM_JAVA_NATIVE=1; fi
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
  # Held-out (above): never tuned on.
  postgres)
    case "$scale" in
      quick) postgres_pgbench 2 4000 4 64MB ;;
      full) postgres_pgbench 40 200000 4 256MB ;;
      paper) postgres_pgbench 80 400000 4 512MB ;;
    esac ;;
  mariadb)
    case "$scale" in
      quick) mariadb_sysbench 2 20000 4000 16M 16M ;;
      full) mariadb_sysbench 4 500000 200000 128M 128M ;;
      paper) mariadb_sysbench 8 500000 400000 256M 256M ;;
    esac ;;
  fio-skew)
    case "$scale" in
      quick) fio_skew 8 32 96 64 ;;
      full) fio_skew 32 128 384 1024 ;;
      paper) fio_skew 64 256 768 2048 ;;
    esac ;;
  *) echo "workloads.sh: unknown workload '$wl'" >&2; exit 2 ;;
esac
}

main "$@"
exit
