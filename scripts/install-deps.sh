#!/usr/bin/env bash
# Installs the Debian packages the project and its tests need (idempotent).
# As root it uses apt-get; otherwise it only checks and names what is missing.
#   cc, make        gcc, make      build the C test programs and the gcc workloads
#   sqlite3         sqlite3        SQLite workloads
#   db_bench        rocksdb-tools  RocksDB workloads (Debian's RocksDB 7.8)
#   strace, nm      strace, binutils   shim tests (syscall counts, symbol offsets)
#   mkfs.ext4       e2fsprogs      `record --device-trace` scratch file systems
#   losetup         mount          loop devices for `record --device-trace`
#   systemd-analyze systemd        checks packaging/pcstreamd.service (verify, security)
#   curl            curl           raw (malformed) gRPC requests to pcstreamd
#   script          bsdutils       a pty for `pcstreamctl watch`'s terminal view
#   python3         python3        bench/gen_cbase.py (gcc workloads)
#   qemu-system-x86_64, debootstrap, cpio, zstd   tests/qemu (the NVMe target under a Linux guest)
#   CPython's tests libpython3.11-testsuite  shim_cpython_tests (a real application's own test suite under the shim)
#   initdb, pgbench postgresql     daemon_postgres (a database server under the shim with the daemon), the bench's held-out postgres workload
#   fio             fio (+ libaio1)  shim_aio (a real program writing with libaio's io_submit), the bench's held-out fio-skew workload
#   java, javac     openjdk-17-jdk-headless  java_paths (Java call paths through JVMTI), the bench's lucene and h2 workloads
#   Lucene jars     liblucene4.10-java        the bench's lucene workload (bench/java: a Java storage engine)
#   H2 jar          libh2-java                the bench's h2 workload (bench/java: H2's MVStore)
#   mariadbd        mariadb-server  the bench's held-out mariadb workload (InnoDB)
#   sysbench        sysbench        drives it (oltp_write_only)
set -euo pipefail
need=()
check() { command -v "$1" >/dev/null || need+=("$2"); }
check cc gcc
check make make
check sqlite3 sqlite3
check db_bench rocksdb-tools
check strace strace
check nm binutils
check mkfs.ext4 e2fsprogs
check losetup mount
check systemd-analyze systemd
check curl curl
check script bsdutils
check python3 python3
check qemu-system-x86_64 qemu-system-x86
check debootstrap debootstrap
check cpio cpio
check zstd zstd
check fio fio
check javac openjdk-17-jdk-headless
check mariadbd mariadb-server
check sysbench sysbench
[ -e /usr/lib/python3.11/test/test_subprocess.py ] || need+=(libpython3.11-testsuite)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/java/lucene-core-4.10.4.jar ] || need+=(liblucene4.10-java)
[ -f /usr/share/java/h2.jar ] || need+=(libh2-java)
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
# cargo-fuzz runs the fuzz targets of scripts/fuzz.sh (built from crates.io
# once, into ~/.cargo/bin; a few minutes on 2 cores).
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
