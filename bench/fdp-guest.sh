#!/bin/sh
# /init of bench/fdp.sh's guest (tests/qemu/run.sh boots it with
# QEMU_INIT): each case of the FDP bench on a fresh `pcstreamctl target`
# (8 RUHs of 1 MiB, 7 % over-provisioning) through the guest kernel's
# nvme-tcp host. Per row it prints one line on the console:
#   RESULT case=C scale=S policy=P run=N host=B media=B app=B write_bytes=B secs=S ruh=B,B,…
# host/media: the device's own counters (`nvme fdp stats`: host and media
# bytes written) over the workload alone (after mkfs and mount, through
# the final sync); app: the bytes the workload's processes passed to write
# calls (wchar of the /proc/self/io of a subshell, which takes in its reaped
# children's; write_bytes, the page-cache bytes it dirtied, beside it);
# ruh: per-RUH host bytes at the target's exit (mkfs included); ruhgc:
# per-RUH bytes the device's GC copied (by the RUH the host wrote them to);
# trimmed: bytes the host deallocated that held data (its discards), valid:
# bytes the device holds as live at the end (both mkfs included).
# An F2FS row adds what F2FS did on its own: fspeak/fssize (KiB used at the
# fullest, sampled every 2 s, and the file system's size), ssr (blocks F2FS
# wrote into the holes of used segments: slack space recycling), gcmoved
# (blocks its cleaning copied, foreground and background) and gccalls.
# device: the target's shape, RUHSxRU_SIZE,opOP (e.g. 8x1M,op7).
# Kernel arguments: fdp.runs=N fdp.scale=quick|aged|full fdp.cases=a,b,…
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /run && mount -t tmpfs tmp /tmp
mount -t configfs none /sys/kernel/config 2>/dev/null
ip link set lo up
modprobe nvme-tcp
modprobe ext4 2>/dev/null
modprobe f2fs 2>/dev/null
mount -t debugfs none /sys/kernel/debug 2>/dev/null # F2FS's status (SSR blocks)
arg() { sed -n "s/.* fdp\.$1=\([^ ]*\).*/\1/p" </proc/cmdline | tr -d '\n'; }
RUNS=$(arg runs); RUNS=${RUNS:-3}
SCALE=$(arg scale); SCALE=${SCALE:-full}
CASES=$(arg cases); CASES=${CASES:-f2fs-rocksdb,f2fs-sqlite,raw-rawlife,raw-fio,ext4-rocksdb}
NQN=nqn.2026-11.io.pcstream:fdp
SHIM=/usr/lib/pcstream/libpcstream.so
export PCSTREAM_RUNTIME_DIR=/tmp/pcs/run
info() { echo "INFO $*"; }
check() {
  name=$1; shift
  if "$@" >/tmp/out 2>&1; then echo "CHECK $name ok"; else echo "CHECK $name FAIL"; tail -c 1500 /tmp/out | sed 's/^/  | /'; fi
}
info "kernel $(uname -r), $(nvme version 2>&1 | head -1), db_bench $(db_bench --version 2>&1 | head -1), sqlite3 $(sqlite3 --version | cut -d' ' -f1), $(fio --version), $(ls /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -1 | xargs -r sh -c '$0 --version'), $(mariadbd --version 2>/dev/null | cut -d' ' -f1-4), $(sysbench --version 2>/dev/null)"
info "runs=$RUNS scale=$SCALE cases=$CASES"

# Sizes: quick (a smoke pass, minutes), aged (below) and full (the device ages: several
# times its capacity written).
# Both fill the namespace past half with live data and write two to four
# times its capacity, so that GC (the device's, and F2FS's own cleaning)
# has to copy. quick: a 256 MiB namespace (384 MiB for RocksDB: with its
# space amplification, 100k keys ran F2FS out of space at 82 % used on 256
# MiB, where a deleted SST's segments come back only at F2FS's next
# checkpoint); full: 1 GiB.
# aged: quick, but RocksDB on 288 MiB with at most 12 L0 files (its
# writes stall at 8), so that F2FS runs near full without running out of
# space: RocksDB's space in use peaks at twice its live data (56 SSTs, 200
# MiB, with db_bench's default L0 limits of 20/36 files: 326 MiB of 382
# at 384 MiB, out of space at 288 and 320 MiB and with a 112 MiB file of
# static data beside it on 384). With the limit, F2FS peaks at 87-92 %
# used and writes a quarter of its blocks into the holes of used segments
# (SSR); still neither its cleaning nor the device's GC copies
# (docs/nvme.md, "What ages a namespace under F2FS").
RDB_L0= RDB_RATE= RDB_CHUNK= RDB_JOBS= FRAMES=
if [ "$SCALE" = quick ] || [ "$SCALE" = aged ]; then
  CAP=256M; RDB_CAP=384M; RDB_KEYS=100000; RDB_OPS=250000; SQL_ROWS=100000; SQL_TXNS=400
  RAW_MIB=32; RAW_ROUNDS=40; FIO_SIZE=256M; FIO_IO=768M; PG_SCALE=5; PG_TXNS=20000; PG_WAL=64MB
  MY_TABLES=4; MY_ROWS=60000; MY_TXNS=5000; MY_POOL=16M; MY_LOG=32M
  [ "$SCALE" = aged ] && { RDB_CAP=288M; RDB_L0=12; }
else
  CAP=1G; RDB_CAP=1G; RDB_KEYS=400000; RDB_OPS=1000000; SQL_ROWS=400000; SQL_TXNS=1600
  RAW_MIB=128; RAW_ROUNDS=160; FIO_SIZE=1024M; FIO_IO=3G; PG_SCALE=20; PG_TXNS=80000; PG_WAL=128MB
  MY_TABLES=4; MY_ROWS=240000; MY_TXNS=20000; MY_POOL=64M; MY_LOG=128M
fi
# Any size overridden by name (bench/fdp.sh --set NAME=VALUE: fdp.NAME=VALUE).
# CP_INTERVAL: F2FS's checkpoint interval in seconds (sysfs cp_interval;
# unset: F2FS's 60). A segment F2FS's cleaner or a deleted file frees comes
# back at the next checkpoint, so with RocksDB's deletes a shorter one lets
# the file system run fuller before it reports no space.
# F2FS_MIN_HOT: F2FS's min_hot_blocks and min_fsync_blocks (unset: the
# kernel's 16 and 8): at 0 an fsync'ed file's data keeps its hint's
# temperature instead of going to the hot log (docs/nvme.md).
# F2FS_DISCARD: 0 mounts F2FS with nodiscard, so the device learns that a
# block died only when F2FS writes its address again (unset: 1, F2FS's
# default discard, which tells the device at once).
# RDB_L0: db_bench's level0_stop_writes_trigger (its slowdown trigger 4
# below; unset: db_bench's 36 and 20). RDB_CHUNK: RocksDB's direct-I/O
# write size in bytes (--writable_file_max_buffer_size; unset: its 1 MiB,
# one reclaim unit, so a reclaim unit holds one SST's chunk and empties
# whole). RDB_JOBS: --max_background_jobs (unset: db_bench's 2); with
# smaller chunks and more jobs, flushes and compactions interleave inside
# a reclaim unit.
# FRAMES: PCSTREAM_FRAMES (native frames per signature) for every row
# under the shim (unset: the shim's default).
# RUHS, RU_SIZE, OP: the target's reclaim unit handles, reclaim unit size
# and over-provisioning in percent (unset: 8, 1M, 7). pcstreamd's erase
# unit follows RU_SIZE. The target needs RUHS + 3 spare reclaim units
# beside the namespace: 3 RUHs of 8 MiB on 288 MiB take OP >= 17.
# PG_SEED: pgbench's --random-seed (unset: the run's number, so that run
# n of every policy draws the same accounts in the same order per client
# and rows of one run compare like for like; pgbench's own default seeds
# from the clock, and before session 24 every row drew its own).
# PG_CKPT: PostgreSQL's checkpoint_timeout in seconds (3600 unless set:
# only PG_WAL of WAL starts a checkpoint, about every PG_WAL / 1.9 of WAL,
# so a row does the same work on a slow host as on a fast one). Before
# session 23 it was 30: time-based checkpoints, and a slower guest
# checkpointed after fewer transactions and aged its device less
# (docs/results-fdp.md).
CP_INTERVAL= F2FS_MIN_HOT= F2FS_DISCARD=1 PG_SEED= RUHS=8 RU_SIZE=1M OP=7 PG_CKPT=3600
# Every fdp.NAME=VALUE with an upper-case NAME is a --set (bench/fdp.sh
# checks the names and values; its set_names is the one list of them).
for kv in $(cat /proc/cmdline); do
  case $kv in fdp.[[:upper:]]*=*) v=${kv#fdp.}; v=${v%%=*}; o=${kv#*=}; eval "$v=\$o"; info "$v=$o (set)" ;; esac
done
POLICIES=$(arg policies)

PORT=4500
dev_up() { # a fresh device of $1 bytes
  PORT=$((PORT + 1))
  pcstreamctl target --listen 127.0.0.1:$PORT --nqn $NQN --capacity $1 --ruhs $RUHS --ru-size $RU_SIZE \
    --op "$(awk -v p="$OP" 'BEGIN { printf "%.4f", p / 100 }')" --interval 60 --json >/tmp/target.json 2>/tmp/target.log &
  TPID=$!
  # Connect once the target listens (a guest under load may take longer
  # than a fixed second to start it), and wait for its namespace; a row
  # whose device never comes up says so and fails instead of waiting on a
  # missing device.
  i=0
  until ss -ltn 2>/dev/null | grep -q "127.0.0.1:$PORT "; do
    i=$((i + 1)); [ $i -le 120 ] && kill -0 $TPID 2>/dev/null ||
      { info "target on port $PORT did not start: $(tail -3 /tmp/target.log | tr '\n' ' ')"; return 1; }
    sleep 0.5
  done
  before=$(ls /dev/nvme[0-9]*n1 2>/dev/null | tr '\n' ' ')
  nvme connect -t tcp -a 127.0.0.1 -s $PORT -n $NQN >/dev/null 2>&1 ||
    { info "nvme connect to port $PORT failed"; return 1; }
  NS= i=0
  while [ -z "$NS" ]; do
    for d in /dev/nvme[0-9]*n1; do
      [ -b "$d" ] && case " $before " in *" $d "*) ;; *) NS=$d ;; esac
    done
    [ -n "$NS" ] && break
    i=$((i + 1)); [ $i -le 60 ] || { info "no namespace appeared after connecting to port $PORT"; return 1; }
    sleep 0.5
  done
  CTRL=${NS%n1}
}
dev_down() {
  nvme disconnect -n $NQN >/dev/null 2>&1
  kill -TERM $TPID; wait $TPID
  tj=$(tr -d ' \n' </tmp/target.json) # the target's report, on one line
  # The target's line every 60 s: host MiB and where they went, over time.
  TIMELINE=$(sed -n 's/.*host \([0-9]*\) MiB, media \([0-9]*\) MiB, WAF [0-9.]*, per-RUH host MiB \([0-9/]*\).*/\1:\2:\3/p' /tmp/target.log | tr '\n' ' ')
  RUH=$(echo "$tj" | sed 's/.*"ruh_host_bytes":\[\([^]]*\)\].*/\1/')
  RUHGC=$(echo "$tj" | sed -n 's/.*"ruh_gc_bytes":\[\([^]]*\)\].*/\1/p')
  # What the host's discards told the device (bytes that held data) and
  # what it holds as live at the end, mkfs included.
  TRIMMED=$(echo "$tj" | sed -n 's/.*"trimmed_bytes":\([0-9]*\).*/\1/p')
  VALID=$(echo "$tj" | sed -n 's/.*"valid_bytes":\([0-9]*\).*/\1/p')
}
stats() { # "host media" from the device's FDP statistics log
  nvme fdp stats "$CTRL" -e 1 -o json | tr -d ' \n"' | sed 's/.*hbmw:\([0-9]*\).*mbmw:\([0-9]*\).*/\1 \2/'
}
fs_up() { # f2fs | ext4
  mkdir -p /mnt/d
  case $1 in
    f2fs) mkfs.f2fs -f -q "$NS" >/dev/null &&
      mount -t f2fs -o "$([ "$F2FS_DISCARD" = 0 ] && echo nodiscard || echo discard)" "$NS" /mnt/d &&
      if [ -n "$CP_INTERVAL" ]; then echo "$CP_INTERVAL" >"/sys/fs/f2fs/${NS#/dev/}/cp_interval"; fi &&
      if [ -n "$F2FS_MIN_HOT" ]; then for k in min_hot_blocks min_fsync_blocks; do
        echo "$F2FS_MIN_HOT" >"/sys/fs/f2fs/${NS#/dev/}/$k"; done; fi ;;
    ext4) mkfs.ext4 -q -F "$NS" >/dev/null && mount -t ext4 "$NS" /mnt/d ;;
  esac
}
bytes() { # 8M -> 8388608
  case $1 in *G) echo $((${1%G} << 30)) ;; *M) echo $((${1%M} << 20)) ;; *) echo "$1" ;; esac
}
daemon_up() { # fresh | keep: pcstreamd with the device's RU as erase unit
  [ "$1" = fresh ] && rm -rf /tmp/pcs
  mkdir -p /tmp/pcs/run /tmp/pcs/state
  printf 'erase_unit_bytes = %s\n' "$(bytes "$RU_SIZE")" >/tmp/pcs/pcstreamd.toml
  pcstreamd --config /tmp/pcs/pcstreamd.toml --runtime-dir /tmp/pcs/run --state-dir /tmp/pcs/state \
    >>/tmp/pcs/d.log 2>&1 &
  DPID=$!
  sleep 1
}
daemon_down() { kill -TERM $DPID; wait $DPID; }
# A server's commands run as its Debian package's user (postgres, mysql),
# under the row's shim if any.
as_user() { asu=$1; shift; setpriv --reuid="$asu" --regid="$asu" --clear-groups $PRE "$@"; }

# Workloads: `wl_<name> DIR-or-DEV` writes through whatever $PRE says
# (empty: no shim).
# RocksDB writes its SSTs with direct I/O (--use_direct_io_for_flush_and_compaction):
# on F2FS (7.3) data written back by fsync/fdatasync goes to the hot log
# whatever the file's hint (docs/nvme.md, "How Linux delivers placement"),
# and RocksDB fsyncs every SST; direct I/O bypasses that. Every policy runs
# with the same options.
wl_rocksdb() { # fillrandom of RDB_KEYS keys, then RDB_OPS overwrites of them
  set -- "$1" --db="$1/db" --wal_dir="$1/db" --use_direct_io_for_flush_and_compaction=true \
    --num=$RDB_KEYS --value_size=1000 --compression_type=none \
    --write_buffer_size=4194304 --target_file_size_base=4194304 \
    --max_bytes_for_level_base=16777216 --statistics=0 --histogram=0 --threads=1 \
    ${RDB_L0:+--level0_slowdown_writes_trigger=$((RDB_L0 - 4)) --level0_stop_writes_trigger=$RDB_L0} \
    ${RDB_RATE:+--benchmark_write_rate_limit=$RDB_RATE} \
    ${RDB_CHUNK:+--writable_file_max_buffer_size=$RDB_CHUNK} ${RDB_JOBS:+--max_background_jobs=$RDB_JOBS}
  shift
  $PRE db_bench "$@" --benchmarks=fillrandom >/tmp/wl.log 2>&1 &&
    $PRE db_bench "$@" --benchmarks=overwrite --use_existing_db=1 --writes=$RDB_OPS >>/tmp/wl.log 2>&1
}
wl_sqlite() { # an in-place updater: 1000-byte rows updated at random, rollback journal
  {
    echo "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
    echo "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < $SQL_ROWS) INSERT INTO t SELECT i, randomblob(1000) FROM c;"
    i=0
    while [ $i -lt $SQL_TXNS ]; do
      echo "BEGIN; UPDATE t SET v = randomblob(1000) WHERE id IN (SELECT 1 + abs(random()) % $SQL_ROWS FROM t LIMIT 200); COMMIT;"
      i=$((i + 1))
    done
  } >/tmp/sql.txt
  $PRE sqlite3 "$1/db.sqlite" </tmp/sql.txt >/tmp/wl.log 2>&1
}
# PostgreSQL (the Debian package's newest server in the guest): a private
# server on DIR, owned by the package's `postgres` user, with 16 MiB of
# shared buffers so that backends, the background writer and the
# checkpointer all write table pages, and checkpoints by WAL volume
# (PG_WAL; PG_CKPT above).
# pgbench -i -s PG_SCALE, then PG_TXNS TPC-B transactions from 4 clients,
# then VACUUM and CHECKPOINT. The server is this shell's child (not
# daemonised by pg_ctl), so its writes count in the row's app bytes. On
# F2FS its data files reach the device with their hints: the checkpointer
# writes them back in runs (sync_file_range) before its fsync; the WAL is
# fdatasync'ed, which F2FS sends to its hot log whatever the hint
# (docs/nvme.md).
wl_postgres() {
  pgd=$1/pg; pgb=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  mkdir -p "$pgd" /tmp/pgsock && chown postgres "$pgd" /tmp/pgsock
  seed=${PG_SEED:-$n}
  as_user postgres "$pgb/initdb" -D "$pgd/data" >/tmp/wl.log 2>&1 || return 1
  as_user postgres "$pgb/postgres" -D "$pgd/data" -k /tmp/pgsock -c listen_addresses= -c shared_buffers=16MB \
    -c max_wal_size=$PG_WAL -c min_wal_size=32MB -c checkpoint_timeout=${PG_CKPT}s \
    -c log_checkpoints=on -c log_autovacuum_min_duration=0 >>/tmp/wl.log 2>&1 &
  pgpid=$!
  i=0; until as_user postgres "$pgb/pg_isready" -q -h /tmp/pgsock; do i=$((i + 1)); [ $i -gt 120 ] && return 1; sleep 1; done
  as_user postgres "$pgb/pgbench" -h /tmp/pgsock -q -i -s $PG_SCALE postgres >>/tmp/wl.log 2>&1 &&
    as_user postgres "$pgb/pgbench" -h /tmp/pgsock -c 4 -t $((PG_TXNS / 4)) -P 60 --random-seed=$seed postgres >>/tmp/wl.log 2>&1 &&
    as_user postgres "$pgb/psql" -h /tmp/pgsock -q -c VACUUM -c CHECKPOINT postgres >>/tmp/wl.log 2>&1
  rc=$?
  info "postgres (seed $seed): $(grep -E '^(tps|latency average|number of transactions actually)' /tmp/wl.log | tr '\n' ';')" >&2
  # A fast shutdown (its checkpoint included), bounded: pg_ctl waits for
  # the server to exit; a server that does not gets SIGKILL.
  as_user postgres "$pgb/pg_ctl" -D "$pgd/data" -m fast -w -t 300 stop >>/tmp/wl.log 2>&1 ||
    { info "postgres: no clean stop: $(ps -o pid,stat,args -u postgres | tr '\n' ';')" >&2; kill -KILL $pgpid; rc=1; }
  wait $pgpid
  # PostgreSQL's own work, from its log: checkpoints started (pgbench -i's,
  # the WAL's, the final and the shutdown one), the buffers they wrote,
  # the WAL segments they added (each a new 16 MiB file, zero-filled),
  # removed and recycled (renamed, then overwritten in place), and
  # autovacuum runs. Rows of one setting differ in these when timing
  # differs, and the device's ageing follows them.
  echo " pgckpt=$(grep -c 'checkpoint starting' /tmp/wl.log)$(
    sed -n 's/.*checkpoint complete: wrote \([0-9]*\) buffers.* \([0-9]*\) WAL file(s) added, \([0-9]*\) removed, \([0-9]*\) recycled.*/\1 \2 \3 \4/p' /tmp/wl.log |
      awk '{ b += $1; a += $2; r += $3; c += $4 } END { printf " pgckptbuf=%d pgwaladd=%d pgwalrm=%d pgwalrecycle=%d", b, a, r, c }'
  ) pgautovac=$(grep -c 'automatic vacuum of table' /tmp/wl.log)" >/tmp/wl.fields
  return $rc
}
# MariaDB's InnoDB (the Debian package's server) as a private mariadbd on
# DIR, run as the package's `mysql` user and as this shell's child (its
# writes count in the row's app bytes), under sysbench's OLTP write-only
# mix: MY_TABLES tables of MY_ROWS rows, then MY_TXNS transactions from 4
# threads (an indexed update, a non-indexed update, a delete and an
# insert each), seeded with the run's number (PG_SEED sets it, as for
# pgbench). A buffer pool (MY_POOL) well below the data, so the page
# cleaner writes pages through the doublewrite buffer all along; a redo
# log of MY_LOG. The same server options as the held-out `mariadb`
# workload of bench/workloads.sh: InnoDB's own I/O threads call pwrite
# (innodb_use_native_aio=0: the shim cannot see io_uring), no stores
# through a mapping of the redo log. InnoDB writes its files with O_DIRECT
# (its default), so F2FS sends them to the temperature of the file's hint
# (warm with none): redo log, doublewrite buffer, undo and table pages all
# land in one log unless a hint separates them (docs/nvme.md).
wl_mariadb() {
  myd=$1/my; mkdir -p "$myd/data" "$myd/tmp" /tmp/mysock && chown -R mysql "$myd" /tmp/mysock
  seed=${PG_SEED:-$n}
  set -- --no-defaults --datadir="$myd/data" --tmpdir="$myd/tmp" \
    --innodb-use-native-aio=0 --innodb-log-file-mmap=0 \
    --innodb-buffer-pool-size=$MY_POOL --innodb-log-file-size=$MY_LOG
  as_user mysql mariadb-install-db "$@" --auth-root-authentication-method=normal --skip-test-db >/tmp/wl.log 2>&1 || return 1
  as_user mysql mariadbd "$@" --socket=/tmp/mysock/sock --skip-networking --log-error="$myd/error.log" >>/tmp/wl.log 2>&1 &
  mypid=$!
  i=0; until mariadb-admin --no-defaults --socket=/tmp/mysock/sock -u root ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 120 ] && return 1; kill -0 $mypid 2>/dev/null || return 1; sleep 1; done
  sb="--db-driver=mysql --mysql-socket=/tmp/mysock/sock --mysql-user=root --mysql-db=sbtest --tables=$MY_TABLES --table-size=$MY_ROWS"
  as_user mysql mariadb --no-defaults --socket=/tmp/mysock/sock -u root -e 'CREATE DATABASE sbtest' >>/tmp/wl.log 2>&1 &&
    as_user mysql sysbench oltp_write_only $sb --rand-seed=42 prepare >>/tmp/wl.log 2>&1 &&
    as_user mysql sysbench oltp_write_only $sb --rand-seed=$seed --threads=4 --events=$MY_TXNS --time=0 run >>/tmp/wl.log 2>&1
  rc=$?
  info "mariadb (seed $seed): $(grep -E 'transactions:|avg:' /tmp/wl.log | tr -s ' ' | tr '\n' ';')" >&2
  as_user mysql mariadb-admin --no-defaults --socket=/tmp/mysock/sock -u root shutdown >>/tmp/wl.log 2>&1 ||
    { info "mariadb: no clean stop" >&2; kill -KILL $mypid; rc=1; }
  wait $mypid
  [ $rc = 0 ] || tail -5 "$myd/error.log" >>/tmp/wl.log
  return $rc
}
wl_rawlife() { $PRE rawlife "$1" $RAW_ROUNDS $RAW_MIB $RAW_MIB 8 >/tmp/wl.log 2>&1; }
wl_fio() { # two jobs of different hotness on one namespace, through two call paths (pwrite, pwritev2)
  $PRE fio --name=hot --filename="$1" --direct=1 --rw=randwrite --bs=16k --ioengine=psync \
      --offset=0 --size=$((${FIO_SIZE%M} / 8))M --io_size=$((${FIO_IO%[MG]} * 3 / 4))${FIO_IO##*[0-9]} \
    --name=cold --filename="$1" --direct=1 --rw=randwrite --bs=16k --ioengine=pvsync2 \
      --offset=$((${FIO_SIZE%M} / 8))M --size=$((${FIO_SIZE%M} * 7 / 8))M \
      --io_size=$((${FIO_IO%[MG]} / 4))${FIO_IO##*[0-9]} >/tmp/wl.log 2>&1
}
wl_zipf() { # one call path (psync) in place: the namespace written once, then rewritten at zipf(1.2)-skewed offsets
  $PRE fio --name=fill --filename="$1" --direct=1 --rw=write --bs=128k --ioengine=psync --size=$FIO_SIZE \
    --name=skew --stonewall --filename="$1" --direct=1 --rw=randwrite --bs=16k --ioengine=psync \
      --size=$FIO_SIZE --io_size=$FIO_IO --random_distribution=zipf:1.2 --randrepeat=1 >/tmp/wl.log 2>&1
}

# Hand-placed maps, chosen from the contexts pcstreamd showed for the case
# (call paths by function name; stream 1 = SHORT, 2 = MEDIUM, 4 = EXTREME:
# F2FS's hot / warm / cold; on a raw device stream k = placement id k-1).
hand_map() { # case
  pcstreamctl contexts --json --limit 0 --raw >/tmp/ctx-raw.json 2>/dev/null
  pcstreamctl contexts --json --limit 0 >/tmp/ctx.json 2>/dev/null
  case $1 in
    *rocksdb) rules="WriteToWAL|log::Writer:1 FlushJob|BuildTable:2 Compaction:4" ;;
    *sqlite) rules="sqlite3PagerCommitPhaseOne|syncJournal|pager_write|writeJournalHdr|pager_end_transaction:1 pager_write_pagelist|sqlite3PagerWrite|walWrite:2" ;;
    # PostgreSQL: relation extension (the load, pgbench_history's appends,
    # new index pages) written once -> cold; dirty pages written back in
    # place (checkpointer, background writer, evicting backends) -> warm;
    # WAL -> hot (F2FS puts fdatasync'ed data there whatever the hint).
    # The first rule that matches a call path wins.
    *postgres) rules="mdextend|mdzeroextend:4 mdwrite:2 XLog:1" ;;
    *rawlife) rules="journal_write:1 scratch_write:2 table_write:3" ;;
    *fio) rules="fio_psyncio_queue:1 fio_pvsyncio2_queue:2" ;;
  esac
  # A static map is per call path: contexts that refine one (page ages:
  # `"refines": "PARENT"`) are not keys it can hold.
  tr -d '\n' </tmp/ctx.json | sed 's/},[[:space:]]*{/}\n{/g' | grep -v '"refines":[[:space:]]*"' >/tmp/ctx.lines
  : >/tmp/hand.map
  for r in $rules; do
    grep -E "${r%:*}" /tmp/ctx.lines | sed -n 's/.*"signature":[[:space:]]*"\([0-9a-fx]*\)".*/\1/p' |
      while read -r sig; do grep -q "^$sig " /tmp/hand.map || echo "$sig ${r##*:}" >>/tmp/hand.map; done
  done
  # MariaDB's mariadbd exports no InnoDB symbols: its call paths are placed
  # by the lifetime pcstreamd learnt for them, in F2FS's three temperatures
  # (what pcstreamd's two F2FS classes leave out is the hot log): shorter
  # than 4 MiB written -> 1 (hot), 64 MiB or longer -> 4 (cold), else 2.
  if [ "${1#*-}" = mariadb ]; then
    awk '{ s = l = ""
      if (match($0, /"signature":[[:space:]]*"[0-9a-fx]*"/)) { s = substr($0, RSTART, RLENGTH); sub(/.*:[[:space:]]*"/, "", s); sub(/"$/, "", s) }
      if (match($0, /"lifetime_estimate_bytes":[[:space:]]*[0-9.e+]+/)) { l = substr($0, RSTART, RLENGTH); sub(/.*:[[:space:]]*/, "", l) }
      if (s != "" && l != "") print s, (l + 0 < 4194304) ? 1 : (l + 0 >= 67108864) ? 4 : 2 }' /tmp/ctx.lines >/tmp/hand.map
  fi
  # A program without symbols (Debian's fio is stripped) has no names to
  # choose by: its two heaviest call paths get streams 1 and 2.
  if [ ! -s /tmp/hand.map ]; then
    sed -n 's/.*"signature":[[:space:]]*"\([0-9a-fx]*\)".*/\1/p' /tmp/ctx.lines | head -2 |
      awk '{ print $1, NR }' >/tmp/hand.map
  fi
  info "hand map for $1: $(wc -l </tmp/hand.map) signatures: $(tr '\n' ' ' </tmp/hand.map)"
}

row() { # case policy run
  rm -f /tmp/wl.fields
  c=$1; p=$2; n=$3; fs=${c%%-*}; w=${c#*-}
  case $w in rocksdb) size=$RDB_CAP ;; *) size=$CAP ;; esac
  dev_up "$size" || { echo "CHECK $c-$p-$n FAIL (no device)"; dev_down >/dev/null 2>&1; return; }
  PRE=""
  case $p in
    app-hints) echo >/tmp/empty.map; PRE="env LD_PRELOAD=$SHIM PCSTREAM_MAP=/tmp/empty.map" ;;
    pcstream) daemon_up fresh; PRE="env LD_PRELOAD=$SHIM" ;;
    pcstream-2) daemon_up keep; PRE="env LD_PRELOAD=$SHIM" ;;
    hand-placed) PRE="env LD_PRELOAD=$SHIM PCSTREAM_MAP=/tmp/hand.map" ;;
  esac
  [ -n "$PRE" ] && [ -n "$FRAMES" ] && PRE="$PRE PCSTREAM_FRAMES=$FRAMES"
  if [ "$fs" = raw ]; then target=$NS; else fs_up "$fs"; target=/mnt/d; fi
  fsx=
  if [ "$fs" = f2fs ]; then # the file system's fullest, every 2 s
    echo 0 >/tmp/fspeak
    ( mx=0; while :; do u=$(df -k /mnt/d | awk 'NR == 2 { print $3 }')
        [ "${u:-0}" -gt $mx ] && { mx=$u; echo $mx >/tmp/fspeak; }; sleep 2; done ) &
    SPID=$!
  fi
  set -- $(stats); h0=$1; m0=$2
  t0=$(date +%s)
  # The workload in a subshell that, once its children are reaped, reads
  # its own /proc/self/io (the redirection is opened by the subshell):
  # wchar = bytes its processes passed to write calls.
  io=$( (wl_$w $target; rc=$?; while read -r k v; do
           case $k in wchar:) printf '%s ' "$v" ;; write_bytes:) printf '%s' "$v" ;; esac
         done </proc/self/io; exit $rc) )
  rc=$?
  app=${io% *}; wb=${io#* }
  # Fields a workload adds to its RESULT line (wl_postgres writes them).
  wlx=$(cat /tmp/wl.fields 2>/dev/null)
  [ "$fs" = raw ] || sync
  if [ "$fs" = f2fs ]; then
    kill $SPID; wait $SPID 2>/dev/null
    sd=/sys/fs/f2fs/${NS#/dev/}
    fsx=" fspeak=$(cat /tmp/fspeak) fssize=$(df -k /mnt/d | awk 'NR == 2 { print $2 }')"
    fsx="$fsx ssr=$(sed -n 's/.*SSR: *\([0-9]*\) blocks.*/\1/p' /sys/kernel/debug/f2fs/status 2>/dev/null | head -1)"
    fsx="$fsx gcmoved=$(( $(cat $sd/moved_blocks_foreground 2>/dev/null || echo 0) + $(cat $sd/moved_blocks_background 2>/dev/null || echo 0) ))"
    fsx="$fsx gccalls=$(( $(cat $sd/gc_foreground_calls 2>/dev/null || echo 0) + $(cat $sd/gc_background_calls 2>/dev/null || echo 0) ))"
  fi
  # The hints the files ended with (the application's, the shim's or none),
  # read once per file: "hint path KiB".
  if [ "$fs" != raw ]; then
    for f in $(find /mnt/d -type f | head -400); do
      echo "$(lifewrite gethint "$f") ${f#/mnt/d/} $(($(stat -c %s "$f") >> 10))"
    done >/tmp/hints
    info "$c $p hints: $(cut -d' ' -f1 /tmp/hints | sort | uniq -c | tr -s ' \n' ' ')"
  fi
  # Which files F2FS sends to its hot or cold log by their hint (SHORT = 2,
  # EXTREME = 5; the rest is warm): name, KiB, at most 20 each.
  [ "$fs" = f2fs ] && info "$c $p hot/cold files: $(awk '$1 == 2 || $1 == 5' /tmp/hints |
    sort -k1,1n -k3,3nr | awk '{ if (++n[$1] <= 20) printf "%s:%s:%sK ", $1 == 2 ? "hot" : "cold", $2, $3 }')"
  set -- $(stats); h1=$1; m1=$2
  secs=$(( $(date +%s) - t0 ))
  # (db_bench's stdout is buffered: its error lines come before the header.)
  [ "$rc" = 0 ] || { echo "CHECK $c-$p-$n FAIL (exit $rc)"; grep -iE -m5 'error|fail|no space|abort' /tmp/wl.log | sed 's/^/  | /'; tail -3 /tmp/wl.log | sed 's/^/  | /'; df -m /mnt/d 2>/dev/null | tail -1 | sed 's/^/  | df: /'; }
  [ "$rc" = 0 ] && echo "CHECK $c-$p-$n ok"
  case $p in pcstream|pcstream-2)
    PCSTREAM_RUNTIME_DIR=/tmp/pcs/run pcstreamctl streams 2>&1 | sed 's/^/  | /'
    # The heaviest call paths and where they went (which code path a
    # hot or cold RUH's bytes came from).
    PCSTREAM_RUNTIME_DIR=/tmp/pcs/run pcstreamctl contexts --limit 12 2>&1 | sed 's/^/  | /'
    # The hand map, where a hand-placed row of this case will use it.
    [ "$p" = pcstream ] && policies "$c" | grep -qx hand-placed && hand_map "$c"
    daemon_down ;;
  esac
  [ "$fs" = raw ] || umount /mnt/d
  dev_down
  info "$c $p device every 60 s (host:media:per-RUH host MiB): $TIMELINE"
  echo "RESULT case=$c scale=$SCALE device=${RUHS}x$RU_SIZE,op$OP policy=$p run=$n host=$((h1 - h0)) media=$((m1 - m0)) app=$app write_bytes=$wb secs=$secs ruh=$RUH${RUHGC:+ ruhgc=$RUHGC}${TRIMMED:+ trimmed=$TRIMMED}${VALID:+ valid=$VALID}$fsx$wlx"
}

policies() { # the rows of a case, in order (hand-placed after pcstream: its map comes from there)
  case $1 in
    f2fs-rocksdb) all="none app-hints pcstream pcstream-2 hand-placed" ;;
    ext4-rocksdb) all="none app-hints pcstream" ;; # the control: one RUH whatever the policy
    f2fs-postgres) all="none pcstream pcstream-2 hand-placed" ;;
    f2fs-mariadb) all="none pcstream pcstream-2 hand-placed" ;; # hand-placed: by learnt lifetime (mariadbd exports no InnoDB symbols)
    raw-zipf) all="none pcstream pcstream-2" ;; # one call path: a static map is per call path
    *) all="none pcstream pcstream-2 hand-placed" ;;
  esac
  for p in $all; do
    case ,${POLICIES:-$p}, in *,$p,*) echo "$p" ;; esac
  done
}
for n in $(seq 1 "$RUNS"); do
  for c in $(echo "$CASES" | tr ',' ' '); do
    for p in $(policies "$c"); do row "$c" "$p" "$n"; done
  done
done
echo ALL-DONE
echo o >/proc/sysrq-trigger
sleep 5
