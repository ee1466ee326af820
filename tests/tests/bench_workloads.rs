//! Short versions (seconds each) of every workload of `bench/run.sh`
//! (bench/workloads.sh at `quick` scale), so the benchmark cannot rot: each
//! is recorded with `pcstreamctl record --device-trace` exactly as the bench
//! does, then joined into a replay as `pcstreamctl compare` does. Proves per
//! workload: the command ran under the shim and exited 0, the device
//! received writes attributed to ≥ 2 distinct signatures (file data
//! reaching the device through the traced file system) and discards of
//! deleted data (TRIMs), and the shim saw the application invalidate data.
//! The Java workload (`lucene`) also shows each of its write paths under the
//! shim: flushed segments, commits, the translog rolled at a commit and its
//! checkpoint rewritten with a positional write. The other (`h2`, H2's
//! MVStore) shows its commits and compactions as positional writes into one
//! file, from distinct Java call paths (none with `h2-native`). The
//! held-out workloads show their servers under the shim: PostgreSQL's
//! postmaster and the processes it forks writing WAL and tables, MariaDB's
//! InnoDB writing its redo log, doublewrite buffer and tables with `pwrite`
//! (not io_uring), and fio's three jobs through one call path.
//!
//! Needs root (loop devices, mount, tracefs): as another user it fails
//! naming that, never skips. Runs one recording at a time.

use pcstream_replay::{Replay, ReplayOptions, Source};
use pcstream_tests::{require_device_trace, require_tool};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench")
}

/// Quick-scale inputs shared by the tests: a 6-file code base and a
/// 150-transaction TPC-C-like script (generated once); the Java driver is
/// compiled into java/ by [`java_data`].
fn data() -> &'static Path {
    static DATA: OnceLock<tempfile::TempDir> = OnceLock::new();
    DATA.get_or_init(|| {
        require_tool("python3", "python3");
        let d = tempfile::tempdir().unwrap();
        let gen = |args: &[&str], stdout: Option<&Path>| {
            let mut c = Command::new("python3");
            c.args(args);
            if let Some(p) = stdout {
                c.stdout(std::fs::File::create(p).unwrap());
            }
            let s = c.status().unwrap();
            assert!(s.success(), "python3 {args:?} failed: {s}");
        };
        let cbase = d.path().join("cbase");
        gen(
            &[
                bench_dir().join("gen_cbase.py").to_str().unwrap(),
                cbase.to_str().unwrap(),
                "6",
                "8",
            ],
            None,
        );
        gen(
            &[
                bench_dir().join("gen_tpcc.py").to_str().unwrap(),
                "1",
                "150",
            ],
            Some(&d.path().join("tpcc.sql")),
        );
        d
    })
    .path()
}

/// [`data`] with the Java drivers compiled (bench/java/build.sh into java/),
/// once; installs a JDK, Debian's Lucene 4.10 jars and H2's jar when missing
/// (root).
fn java_data() -> &'static Path {
    static JAVA: OnceLock<()> = OnceLock::new();
    let d = data();
    JAVA.get_or_init(|| {
        require_tool("javac", "default-jdk-headless");
        pcstream_tests::require_file(
            "/usr/share/java/lucene-core-4.10.4.jar",
            "liblucene4.10-java",
        );
        pcstream_tests::require_file("/usr/share/java/h2.jar", "libh2-java");
        let o = Command::new("bash")
            .arg(bench_dir().join("java/build.sh"))
            .arg(d.join("java"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "bench/java/build.sh failed: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    });
    d
}

/// Records `workload` at quick scale and checks what every workload must
/// show; returns the recording's directory (inside the returned TempDir).
fn record_and_check(workload: &str) -> (tempfile::TempDir, PathBuf) {
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    require_device_trace("bench workloads (recorded with --device-trace)");
    for (cmd, pkg) in [
        ("db_bench", "rocksdb-tools"),
        ("sqlite3", "sqlite3"),
        ("gcc", "gcc"),
        ("make", "make"),
    ] {
        require_tool(cmd, pkg);
    }
    pcstream_tests::shim();
    let data = if workload.starts_with("lucene") || workload.starts_with("h2") {
        java_data()
    } else {
        data()
    };
    let tmp = tempfile::tempdir().unwrap();
    // The database servers run as their own users (postgres, mysql): they
    // must reach the traced file system's mount point inside.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = tmp.path().join("rec");
    let o = Command::new(pcstream_tests::pcstreamctl())
        .args(["record", "--device-trace", "--device-size", "256M", "-o"])
        .arg(&out)
        .arg("--")
        .arg("bash")
        .arg(bench_dir().join("workloads.sh"))
        .args([workload, "quick"])
        .env("BENCH_DATA", data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "{workload}: record failed: {}\n{stderr}",
        o.status
    );

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let n = |k: &str| summary[k].as_u64().unwrap_or(0);
    assert!(
        n("writes") > 0 && n("dropped") == 0,
        "{workload}: {summary}"
    );
    assert!(
        n("invalidations") > 0,
        "{workload}: no invalidation seen: {summary}"
    );

    let r = Replay::from_trace(&out.join("trace.pcstrace"), &ReplayOptions::default()).unwrap();
    let s = &r.stats;
    assert_eq!(
        r.source,
        Source::GroundTruth,
        "{workload}: no device records"
    );
    assert!(
        s.signatures >= 2,
        "{workload}: device writes from {} signature(s): {s:?}",
        s.signatures
    );
    // Most device data pages are traced back to the write() that made them.
    assert!(
        s.signed_pages * 10 >= s.data_pages * 9 && s.data_pages > 0,
        "{workload}: {s:?}"
    );
    assert!(
        s.trim_pages > 0,
        "{workload}: no discard reached the device: {s:?}"
    );
    (tmp, out)
}

#[test]
fn bench_rocksdb_updaterandom() {
    record_and_check("rocksdb-ur");
}

#[test]
fn bench_rocksdb_appendrandom() {
    record_and_check("rocksdb-ar");
}

#[test]
fn bench_rocksdb_fillrandom() {
    record_and_check("rocksdb-fr");
}

#[test]
fn bench_rocksdb_ycsb_a() {
    record_and_check("rocksdb-ycsba");
}

#[test]
fn bench_sqlite_tpcc() {
    record_and_check("sqlite-tpcc");
}

#[test]
fn bench_sqlite_wal() {
    record_and_check("sqlite-wal");
}

#[test]
fn bench_gcc_rounds() {
    record_and_check("gcc");
}

#[test]
fn bench_mixed_rocksdb_gcc() {
    record_and_check("mixed-rocksdb-gcc");
}

#[test]
fn bench_mixed_sqlite_gcc() {
    record_and_check("mixed-sqlite-gcc");
}

#[test]
fn bench_lucene() {
    let (_tmp, out) = record_and_check("lucene");
    let rows = stats_rows(&out);
    let mut names = std::collections::BTreeSet::new();
    let mut pwrites = 0;
    for r in &rows {
        pwrites += r["calls"]["pwrite"].as_u64().unwrap_or(0);
        for f in r["file_list"].as_array().unwrap() {
            for p in f["paths"].as_array().unwrap() {
                let p = p.as_str().unwrap();
                names.insert(p.rsplit('/').next().unwrap().to_string());
            }
        }
    }
    let has = |pred: &dyn Fn(&str) -> bool| names.iter().any(|n| pred(n));
    // Failure messages name the files other than the segments' own.
    let others: Vec<&String> = names.iter().filter(|n| !n.starts_with('_')).collect();
    // Quick scale: 6000 operations, a refresh every 500, a commit every
    // 2000 (bench/workloads.sh); segments are named _0, _1, … in base 36.
    let segments = names.iter().filter(|n| n.ends_with(".si")).count();
    assert!(
        segments >= 10,
        "lucene: {segments} segments written (flushes + merges); other files: {others:?}"
    );
    assert!(
        has(&|n| n.ends_with(".cfs")),
        "no compound file: {others:?}"
    );
    assert!(
        has(&|n| n == "segments_3"),
        "fewer than 3 commits: {others:?}"
    );
    assert!(
        has(&|n| n == "translog-2.tlog") && has(&|n| n == "translog.ckp"),
        "translog not rolled at a commit: {others:?}"
    );
    assert!(
        pwrites > 0,
        "the translog checkpoint's positional writes were not seen as pwrite"
    );
    // Every write is the JVM's (the script and mkdir write nothing).
    for r in &rows {
        assert_eq!(r["programs"], serde_json::json!(["java"]), "{r}");
    }
}

/// Java frames (module `java`) in a recording's signatures, and all frames.
fn java_frames(out: &Path) -> (usize, usize) {
    let rows = stats_rows(out);
    let frames: Vec<&serde_json::Value> = rows
        .iter()
        .flat_map(|r| r["frames"].as_array().unwrap())
        .collect();
    let java = frames.iter().filter(|f| f["module"] == "java").count();
    (java, frames.len())
}

/// The lucene workload with Java call paths off: the same run, every
/// signature native (the JDK's natives, libjvm), none made of Java frames;
/// with them on (`lucene`), the segment writes' are.
#[test]
fn bench_lucene_native() {
    let (_tmp, out) = record_and_check("lucene-native");
    let (java, all) = java_frames(&out);
    assert!(all > 0 && java == 0, "{java} Java frames of {all}");
    let (_tmp, out) = record_and_check("lucene");
    let (java, all) = java_frames(&out);
    assert!(java * 2 > all, "{java} Java frames of {all}");
}

/// The trace-stats rows (one per signature, every frame) that wrote with
/// `pwrite`.
fn pwrite_rows(out: &Path) -> Vec<serde_json::Value> {
    stats_rows(out)
        .into_iter()
        .filter(|r| r["calls"]["pwrite"].as_u64().unwrap_or(0) > 0)
        .collect()
}

/// `trace-stats --json` of a recording: one row per signature, every frame.
fn stats_rows(out: &Path) -> Vec<serde_json::Value> {
    let o = Command::new(pcstream_tests::pcstreamctl())
        .args(["trace-stats", "--json", "--top", "0", "--frames", "0"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "trace-stats: {o:?}");
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    stats["rows"].as_array().unwrap().clone()
}

/// Whether a trace-stats row's signature has a frame whose text contains `what`.
fn has_frame(row: &serde_json::Value, what: &str) -> bool {
    row["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f.to_string().contains(what))
}

/// H2's MVStore (bench/java/H2Churn.java) at quick scale: every chunk goes
/// into the one store file with `pwrite`; regular commits and compaction
/// rewrites are distinct signatures made of Java frames (`H2Churn.commit`,
/// `H2Churn.compact` over `MVStore.commit`), and with Java call paths off
/// (`h2-native`) the same writes carry no Java frame. The driver itself
/// fails (so would the recording) when no compaction rewrote a page or the
/// file's freed space was never reused.
#[test]
fn bench_h2() {
    let (_tmp, out) = record_and_check("h2");
    let rows = pwrite_rows(&out);
    let pwrites: u64 = rows
        .iter()
        .map(|r| r["calls"]["pwrite"].as_u64().unwrap())
        .sum();
    // Quick scale: 15,000 puts, a commit (a chunk, one pwrite) every 4
    // (bench/workloads.sh).
    assert!(pwrites >= 3000, "{pwrites} pwrites: {rows:?}");
    for r in &rows {
        assert_eq!(r["programs"], serde_json::json!(["java"]), "{r}");
        let files: Vec<String> = r["file_list"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| f["paths"].as_array().unwrap().iter())
            .map(|p| p.as_str().unwrap().to_string())
            .collect();
        assert!(
            files.iter().all(|p| p.ends_with("/store.mv")),
            "a pwrite outside the store: {files:?}"
        );
    }
    let commit = rows
        .iter()
        .filter(|r| has_frame(r, "H2Churn.commit") && has_frame(r, "MVStore"))
        .count();
    let compact = rows
        .iter()
        .filter(|r| has_frame(r, "H2Churn.compact") && has_frame(r, "MVStore"))
        .count();
    assert!(
        commit >= 1 && compact >= 1,
        "commit signatures {commit}, compaction signatures {compact}: {rows:?}"
    );
    let (java, all) = java_frames(&out);
    assert!(java * 2 > all, "{java} Java frames of {all}");
}

#[test]
fn bench_h2_native() {
    let (_tmp, out) = record_and_check("h2-native");
    let rows = pwrite_rows(&out);
    assert!(!rows.is_empty(), "no pwrite seen");
    let (java, all) = java_frames(&out);
    assert!(all > 0 && java == 0, "{java} Java frames of {all}");
}

/// Every path a trace-stats row's signature wrote to.
fn row_files(row: &serde_json::Value) -> Vec<String> {
    row["file_list"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["paths"].as_array().unwrap().iter())
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

/// The rows whose signature wrote a file whose path contains `what`.
fn rows_writing<'a>(rows: &'a [serde_json::Value], what: &str) -> Vec<&'a serde_json::Value> {
    rows.iter()
        .filter(|r| row_files(r).iter().any(|f| f.contains(what)))
        .collect()
}

/// PostgreSQL (held-out) at quick scale: the server runs under the shim
/// as its own user; the postmaster's children write the WAL (`pg_wal/`)
/// and the tables (`base/`), ≥ 99% of their bytes from `postgres`
/// processes (the rest initdb's own), and some call path writes the WAL
/// alone.
#[test]
fn bench_postgres() {
    // Debian's postgresql (pg_ctlcluster is postgresql-common's; the
    // workload runs /usr/lib/postgresql/<major>/bin).
    require_tool("pg_ctlcluster", "postgresql");
    require_tool("runuser", "util-linux");
    let (_tmp, out) = record_and_check("postgres");
    let rows = stats_rows(&out);
    let sigs = |rs: &[&serde_json::Value]| -> Vec<String> {
        rs.iter().map(|r| r["signature"].to_string()).collect()
    };
    let (wal, tables) = (
        rows_writing(&rows, "/pg_wal/"),
        rows_writing(&rows, "/base/"),
    );
    assert!(
        !wal.is_empty() && !tables.is_empty(),
        "WAL {:?} tables {:?}",
        sigs(&wal),
        sigs(&tables)
    );
    // initdb writes a few files (PG_VERSION) itself; the rest is the
    // server's (initdb's bootstrap backend, then the postmaster's children).
    let (mut by_server, mut all) = (0, 0);
    for r in wal.iter().chain(&tables) {
        let progs = r["programs"].as_array().unwrap();
        assert!(
            progs.iter().all(|p| p == "postgres" || p == "initdb"),
            "{}: {progs:?} wrote {:?}",
            r["signature"],
            row_files(r)
        );
        let b = r["bytes"].as_u64().unwrap();
        all += b;
        if progs == &[serde_json::json!("postgres")] {
            by_server += b;
        }
    }
    assert!(
        by_server * 100 >= all * 99,
        "{by_server} of {all} bytes by postgres"
    );
    let wal_only = wal
        .iter()
        .filter(|r| row_files(r).iter().all(|f| f.contains("/pg_wal/")))
        .count();
    assert!(
        wal_only >= 1,
        "no call path writes the WAL alone: {:?}",
        sigs(&wal)
    );
    let server = rows
        .iter()
        .filter(|r| r["programs"] == serde_json::json!(["postgres"]))
        .count();
    assert!(server >= 5, "{server} signatures of the server's processes");
}

/// MariaDB/InnoDB (held-out) at quick scale: InnoDB's files (the redo
/// log, the system tablespace with the doublewrite buffer, the tables)
/// are written by `mariadbd` with `pwrite` only (none through io_uring,
/// which the shim would not see: `record_and_check` also finds ≥ 90% of
/// the device's data pages signed). The I/O threads' path
/// (`simulated_aio`) writes both the doublewrite buffer and the table
/// pages: one call path for the flushing of pages that any transaction
/// dirtied, the paper's "write buffer" case.
#[test]
fn bench_mariadb() {
    require_tool("mariadbd", "mariadb-server");
    require_tool("sysbench", "sysbench");
    require_tool("runuser", "util-linux");
    let (_tmp, out) = record_and_check("mariadb");
    let rows = stats_rows(&out);
    let innodb: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| {
            row_files(r).iter().any(|f| {
                f.ends_with(".ibd") || f.ends_with("/ibdata1") || f.contains("/ib_logfile")
            })
        })
        .collect();
    let files: std::collections::BTreeSet<String> = innodb
        .iter()
        .flat_map(|r| row_files(r))
        .map(|f| f.rsplit("/mnt/my/").next().unwrap().to_string())
        .collect();
    for f in [
        "data/ibdata1",
        "data/sbtest/sbtest1.ibd",
        "data/sbtest/sbtest2.ibd",
    ] {
        assert!(files.contains(f), "{f} not written: {files:?}");
    }
    assert!(
        files.iter().any(|f| f.starts_with("data/ib_logfile")),
        "no redo log write: {files:?}"
    );
    for r in &innodb {
        assert_eq!(
            r["programs"],
            serde_json::json!(["mariadbd"]),
            "{}",
            r["signature"]
        );
        let calls: Vec<&String> = r["calls"].as_object().unwrap().keys().collect();
        assert_eq!(calls, ["pwrite"], "{}: {:?}", r["signature"], row_files(r));
    }
    let flush = innodb
        .iter()
        .find(|r| has_frame(r, "simulated_aio"))
        .unwrap_or_else(|| panic!("no write from InnoDB's I/O threads: {files:?}"));
    let ff = row_files(flush);
    assert!(
        ff.iter().any(|f| f.ends_with("/ibdata1")) && ff.iter().any(|f| f.contains("/sbtest/")),
        "the I/O threads' call path wrote {ff:?}"
    );
}

/// fio with three jobs of different hotness (held-out) at quick scale: the
/// three jobs' random writes, each job its own process, reach their files
/// through one call path (fio's psync engine: one signature for all three
/// files); the files' layout is another.
#[test]
fn bench_fio_skew() {
    require_tool("fio", "fio");
    let (_tmp, out) = record_and_check("fio-skew");
    let rows = stats_rows(&out);
    for r in &rows {
        assert_eq!(
            r["programs"],
            serde_json::json!(["fio"]),
            "{}",
            r["signature"]
        );
    }
    let random = pwrite_rows(&out);
    assert_eq!(random.len(), 1, "{random:?}");
    let files = row_files(&random[0]);
    for job in ["hot.", "warm.", "cold."] {
        assert!(
            files.iter().any(|f| f.contains(&format!("/fio/{job}"))),
            "{job} not written through the psync path: {files:?}"
        );
    }
    // 3 jobs × 64 MiB of 4 KiB writes (bench/workloads.sh).
    assert_eq!(random[0]["calls"]["pwrite"], 3 * 64 * 256, "{}", random[0]);
    assert!(rows.len() >= 2, "no layout signature apart: {rows:?}");
}

#[test]
fn bench_unknown_workload_is_an_error() {
    let o = Command::new("bash")
        .arg(bench_dir().join("workloads.sh"))
        .args(["no-such-workload", "quick"])
        .env("BENCH_DATA", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown workload 'no-such-workload'"));
}
