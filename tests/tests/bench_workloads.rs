//! Short versions (seconds each) of every workload of `bench/run.sh`
//! (bench/workloads.sh at `quick` scale), so the benchmark cannot rot: each
//! is recorded with `pcstreamctl record --device-trace` exactly as the bench
//! does, then joined into a replay as `pcstreamctl compare` does. Proves per
//! workload: the command ran under the shim and exited 0, the device
//! received writes attributed to ≥ 2 distinct signatures (file data
//! reaching the device through the traced file system) and discards of
//! deleted data (TRIMs), and the shim saw the application invalidate data.
//!
//! Needs root (loop devices, mount, tracefs): as another user it fails
//! naming that, never skips. Runs one recording at a time.

use pcstream_replay::{Replay, ReplayOptions, Source};
use pcstream_tests::{require_device_trace, require_tool};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench")
}

/// Quick-scale inputs shared by the tests: a 6-file code base and a
/// 150-transaction TPC-C-like script (generated once).
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

/// Records `workload` at quick scale and checks what every workload must show.
fn record_and_check(workload: &str) {
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
    let data = data();
    let tmp = tempfile::tempdir().unwrap();
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
