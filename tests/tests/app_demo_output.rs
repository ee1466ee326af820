//! The main job as a user runs it: `pcstreamctl demo` (what scripts/demo.sh
//! runs after building) with a real pcstreamd and a real db_bench under the
//! shim. It must finish, show what the daemon learnt (the WAL's call path
//! among the contexts), carry the learnt hints onto the second run's new
//! WAL and SST files, end with every policy's WAF, and keep db_bench's
//! `\r`-separated progress out of the terminal (issue 13's rough edge: it
//! flooded the demo's), in a log in the demo's directory instead.

use pcstream_tests::require_tool;
use std::path::PathBuf;
use std::process::Command;

fn pcstreamctl() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/pcstreamctl")
}

#[test]
fn the_demo_shows_the_live_system_and_keeps_db_bench_quiet() {
    require_tool("db_bench", "rocksdb-tools");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = Command::new(pcstreamctl())
        .args(["demo", "--keys", "20000", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);

    // db_bench's output: in its log, progress included; only result lines shown.
    let log = std::fs::read_to_string(dir.join("db_bench.log")).unwrap();
    assert!(
        log.contains("... finished"),
        "progress kept in the log: {log}"
    );
    assert!(
        !stdout.contains("... finished") && !stdout.contains('\r'),
        "{stdout}"
    );
    let shown: Vec<&str> = stdout.lines().filter(|l| l.starts_with("   | ")).collect();
    assert!(
        !shown.is_empty() && shown.len() <= 3 && shown.iter().all(|l| l.len() <= 125),
        "a few short result lines: {shown:?}"
    );
    assert!(shown.last().unwrap().contains("updaterandom"), "{shown:?}");

    // What the daemon learnt, the restart, the hints, every policy.
    assert!(stdout.contains("rocksdb::DBImpl::WriteToWAL"), "{stdout}");
    assert!(dir.join("state/state.json").is_file());
    let hints: Vec<u64> = stdout
        .lines()
        .filter(|l| l.contains(".log  hint ") || l.contains(".sst  hint "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(hints.len(), 2, "the WAL's and an SST's hint: {stdout}");
    assert!(
        hints.iter().all(|h| (2..=5).contains(h)),
        "run 2's new files carry learnt lifetime hints: {hints:?}\n{stdout}"
    );
    for policy in [
        "baseline",
        "autostream-sfr",
        "sepbit",
        "app-hints",
        "pcstream",
        "oracle",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(policy) && l.contains(" off ")),
            "{policy}'s WAF: {stdout}"
        );
    }
    // Not a pcstreamd left behind: its sockets went with it.
    assert!(!dir.join("run/ctl.sock").exists(), "the daemon was stopped");
}

#[test]
fn a_demo_without_its_daemon_is_one_clear_line() {
    let out = Command::new(pcstreamctl())
        .args(["demo", "--pcstreamd", "/nonexistent/pcstreamd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/pcstreamd"), "{err}");
}
