//! The demo's terminal (issue 13, rough edge: db_bench's progress output
//! flooded it): `scripts/quiet.sh run` keeps a real db_bench's output — its
//! `\r`-separated progress included — in a log in the demo's directory and
//! prints nothing; `scripts/quiet.sh tail` shows the log's last result lines,
//! a few short indented lines without the progress. scripts/demo.sh runs
//! db_bench through both.

use pcstream_tests::require_tool;
use std::path::PathBuf;
use std::process::Command;

fn quiet_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/quiet.sh")
}

#[test]
fn db_bench_output_goes_to_the_log_and_only_its_last_lines_are_shown() {
    require_tool("db_bench", "rocksdb-tools");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("db_bench.log");
    let db = format!("--db={}", tmp.path().join("db").display());
    let out = Command::new(quiet_sh())
        .args(["run", log.to_str().unwrap(), "db_bench", &db])
        .args([
            "--benchmarks=fillrandom,updaterandom",
            "--num=30000",
            "--value_size=100",
            "--compression_type=none",
            "--statistics=0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "nothing reaches the terminal: {out:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("fillrandom"), "{text}");
    assert!(
        text.contains("... finished"),
        "the progress output is kept in the log: {text}"
    );

    let shown = Command::new(quiet_sh())
        .args(["tail", log.to_str().unwrap(), "3"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{shown:?}");
    let shown = String::from_utf8(shown.stdout).unwrap();
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        !lines.is_empty() && lines.len() <= 3,
        "a few lines: {shown:?}"
    );
    for l in &lines {
        assert!(
            l.starts_with("   | ") && l.len() <= 125 && !l.contains('\r'),
            "{l:?}"
        );
        assert!(!l.contains("... finished"), "no progress line: {l:?}");
    }
    assert!(
        shown.contains("updaterandom"),
        "the last result line is db_bench's last benchmark: {shown}"
    );

    // A missing log is one clear line, not silence.
    let missing = Command::new(quiet_sh())
        .args(["tail", tmp.path().join("nope.log").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let err = String::from_utf8(missing.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nope.log"), "{err}");
}
