//! One event stream, two sinks: the same deterministic programs, recorded
//! (`pcstreamctl record`, no daemon) and then run under a real `pcstreamd`
//! (no recording), give the same calls and bytes per call path, and the
//! daemon's logical clock advances by exactly the bytes the programs wrote.
//! Under a live mapping the shim applies streams (hints) that record mode
//! does not have: those must not change which events a process produces
//! (before: a stdio-heavy build made 4,186 events recorded and 29,810 under
//! the daemon, whose clock then counted 120 MB for 7 MB written).
//! - a stdio-heavy compile: `bench/gen_cbase.py` units built by gcc
//!   (`-O2 -g`: cc1 writes each unit's assembly through stdio from hundreds
//!   of call paths), `make -j2`;
//! - db_bench (RocksDB: its WAL, a table and MANIFEST; its info `LOG`,
//!   whose lines carry timings, is left out of the comparison; one
//!   memtable flushed once, since which memtables a background flush
//!   merges depends on timing);
//! - sqlite3 (a database and its rollback journal).

mod app_common;
mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_placement::wire::event::Kind;
use pcstream_tests::require_tool;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Calls and bytes per signature.
type PerSig = BTreeMap<u64, (u64, u64)>;

/// What a recording's write events carry, per signature.
fn per_sig_trace(t: &app_common::Trace) -> PerSig {
    let mut m = PerSig::new();
    for (_, e) in &t.events {
        if let Some(Kind::Write(w)) = &e.kind {
            let x = m.entry(w.signature).or_default();
            x.0 += u64::from(w.calls.max(1));
            x.1 += w.len;
        }
    }
    m
}

/// The signatures that wrote a file whose name matches `pred`.
fn writers_of(t: &app_common::Trace, pred: &dyn Fn(&str) -> bool) -> BTreeSet<u64> {
    t.write_sigs(pred).into_keys().collect()
}

/// What the daemon counted per signature (`contexts`: calls, bytes), once
/// every event is in (the count stops moving).
fn per_sig_daemon(d: &Daemon) -> (PerSig, serde_json::Value) {
    let mut last = u64::MAX;
    for _ in 0..100 {
        let n = d.status()["events"].as_u64().unwrap();
        if n == last {
            break;
        }
        last = n;
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut m = PerSig::new();
    for c in d.contexts() {
        let sig = u64::from_str_radix(c["signature"].as_str().unwrap(), 16).unwrap();
        let x = m.entry(sig).or_default();
        x.0 += c["calls"].as_u64().unwrap();
        x.1 += c["bytes"].as_u64().unwrap();
    }
    (m, d.status())
}

/// Runs `cmd` in `cwd` under the shim attached to `d` (the shim's defaults
/// otherwise), asserting success.
fn under_daemon(d: &Daemon, cwd: &Path, cmd: &[&str], env: &[(&str, &str)]) {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .current_dir(cwd)
        .env("LD_PRELOAD", pcstream_tests::shim())
        .env(var::RUNTIME_DIR, d.run_dir())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} under the daemon: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Records `cmd`, runs it again under a fresh daemon after `reset`, and
/// compares: per signature (minus `skip`, and `skip_files`' writers), the
/// same calls and bytes; the daemon's clock = the bytes written.
fn same_under_both(
    work: &Path,
    cmd: &[&str],
    env: &[(&str, &str)],
    reset: &dyn Fn(),
    skip_files: &dyn Fn(&str) -> bool,
) {
    let tmp = tempfile::tempdir().unwrap();
    let none = tmp.path().join("no-daemon");
    let mut renv = env.to_vec();
    renv.push((var::RUNTIME_DIR, none.to_str().unwrap()));
    reset();
    let rec = app_common::record(&tmp.path().join("rec"), work, cmd, &renv);
    let recorded = per_sig_trace(&rec.trace);
    let skip = writers_of(&rec.trace, skip_files);

    reset();
    let d = Daemon::start("");
    under_daemon(&d, work, cmd, env);
    let (live, st) = per_sig_daemon(&d);
    assert_eq!(st["events_dropped_by_clients"], 0, "{st}");
    assert_eq!(st["malformed_datagrams"], 0, "{st}");

    let total = |m: &PerSig| m.values().fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
    let (calls, bytes) = total(&recorded);
    eprintln!(
        "{cmd:?}: recorded {} events, {calls} calls, {bytes} B, {} signatures; daemon {} events, clock {} B, {} signatures",
        rec.trace.events.len(),
        recorded.len(),
        st["events"],
        st["clock_bytes"],
        live.len()
    );
    assert!(bytes > 0 && recorded.len() >= 3, "{recorded:?}");
    let keep = |m: &PerSig| -> PerSig {
        m.iter()
            .filter(|(s, _)| !skip.contains(s))
            .map(|(s, v)| (*s, *v))
            .collect()
    };
    let (want, got) = (keep(&recorded), keep(&live));
    let differ: Vec<_> = want
        .keys()
        .chain(got.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|s| want.get(s) != got.get(s))
        .map(|s| (format!("{s:016x}"), want.get(s), got.get(s)))
        .collect();
    assert!(
        differ.is_empty(),
        "per signature (recorded, daemon) calls and bytes differ: {differ:?}"
    );
    if skip.is_empty() {
        assert_eq!(
            st["clock_bytes"].as_u64().unwrap(),
            bytes,
            "the daemon's clock is the bytes written"
        );
    } else {
        assert_eq!(
            st["clock_bytes"].as_u64().unwrap(),
            total(&live).1,
            "the daemon's clock is the bytes written"
        );
    }
    assert_eq!(
        st["clock_pages"].as_u64().unwrap(),
        st["clock_bytes"].as_u64().unwrap() / 4096
    );
}

#[test]
fn a_stdio_heavy_build_gives_the_daemon_what_record_mode_records() {
    require_tool("make", "make");
    require_tool("gcc", "gcc");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("cbase");
    pcstream_tests::gen_cbase(&src, &["4", "4", "300"]);
    let t = src.join("tmp");
    std::fs::create_dir_all(&t).unwrap();
    let reset = || {
        for d in ["obj", "lib", "bin"] {
            let _ = std::fs::remove_dir_all(src.join(d));
        }
    };
    same_under_both(
        &src,
        &["make", "-s", "-j2"],
        &[("TMPDIR", t.to_str().unwrap())],
        &reset,
        &|_| false,
    );
}

#[test]
fn db_bench_gives_the_daemon_what_record_mode_records() {
    require_tool("db_bench", "rocksdb-tools");
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let db_arg = format!("--db={}", db.display());
    let reset = || {
        let _ = std::fs::remove_dir_all(&db);
    };
    same_under_both(
        tmp.path(),
        &[
            "db_bench",
            &db_arg,
            // One memtable, flushed once: which memtables a background
            // flush merges into one table depends on timing.
            "--benchmarks=fillrandom,flush",
            "--num=20000",
            "--value_size=400",
            "--threads=1",
            "--seed=1",
            "--write_buffer_size=67108864",
            "--disable_auto_compactions=1",
            "--compression_type=none",
            "--statistics=0",
            "--stats_dump_period_sec=0",
        ],
        &[],
        &reset,
        &|p| p.rsplit('/').next().is_some_and(|n| n.starts_with("LOG")),
    );
}

#[test]
fn sqlite3_gives_the_daemon_what_record_mode_records() {
    require_tool("sqlite3", "sqlite3");
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("t.db");
    let sql = tmp.path().join("t.sql");
    let mut script = String::from("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n");
    for b in 0..20 {
        script.push_str("BEGIN;\n");
        for i in 0..200 {
            let k = b * 200 + i;
            script.push_str(&format!(
                "INSERT INTO t VALUES({k}, printf('%0400d', {k}));\n"
            ));
        }
        script.push_str("COMMIT;\n");
    }
    script.push_str(
        "UPDATE t SET v = upper(v) WHERE k % 7 = 0;\nDELETE FROM t WHERE k % 5 = 0;\nVACUUM;\n",
    );
    std::fs::write(&sql, script).unwrap();
    let reset = || {
        let _ = std::fs::remove_file(&db);
    };
    let cmd = format!("sqlite3 {} < {}", db.display(), sql.display());
    same_under_both(tmp.path(), &["sh", "-c", &cmd], &[], &reset, &|_| false);
}
