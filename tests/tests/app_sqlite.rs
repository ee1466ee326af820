//! Real application: the `sqlite3` shell under `pcstreamctl record`, with
//! transactions in rollback-journal mode (DELETE and TRUNCATE) and in WAL
//! mode. Proves: journal/WAL file writes and database file writes have
//! disjoint signatures; the journal's deletion or truncation at commit, and
//! the WAL's removal at close, are recorded as invalidations.

mod app_common;

use pcstream_placement::wire::InvalidateKind;
use pcstream_tests::require_tool;

fn script(journal_mode: &str) -> String {
    let mut s = format!(
        "PRAGMA journal_mode={journal_mode};\n\
         CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n\
         BEGIN;\n\
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 3000)\n\
         INSERT INTO t SELECT x, hex(randomblob(100)) FROM c;\n\
         COMMIT;\n"
    );
    for i in 0..10 {
        s.push_str(&format!(
            "BEGIN; UPDATE t SET v = hex(randomblob(100)) WHERE k % 10 = {i}; COMMIT;\n"
        ));
    }
    s
}

/// Records sqlite3 running `script(mode)` on a fresh database in `tmp`.
fn run_mode(tmp: &std::path::Path, mode: &str) -> app_common::Recorded {
    require_tool("sqlite3", "sqlite3");
    let sql = tmp.join("script.sql");
    std::fs::write(&sql, script(mode)).unwrap();
    let db = tmp.join("test.db");
    let cmd = format!("sqlite3 {} < {}", db.display(), sql.display());
    let rec = app_common::record(&tmp.join("rec"), tmp, &["sh", "-c", &cmd], &[]);
    rec.trace.check_merged();
    rec
}

fn check_disjoint(rec: &app_common::Recorded, suffix: &str) {
    let t = &rec.trace;
    let sfx = suffix.to_string();
    let is_journal = move |n: &str| n.ends_with(&sfx);
    let is_db = |n: &str| n == "test.db";
    let j = t.write_sigs(&is_journal);
    let d = t.write_sigs(&is_db);
    let paths = app_common::call_paths(&rec.dir);
    let msg = format!(
        "{suffix} signatures:\n{}\ndb signatures:\n{}",
        app_common::show(&j, &paths),
        app_common::show(&d, &paths)
    );
    assert!(!j.is_empty() && !d.is_empty(), "{msg}");
    assert!(
        j.keys().all(|s| !d.contains_key(s)),
        "shared signature:\n{msg}"
    );
    assert_eq!(t.writers(&is_db), ["sqlite3".to_string()].into(), "{msg}");
}

#[test]
fn rollback_journal_delete_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = run_mode(tmp.path(), "DELETE");
    check_disjoint(&rec, "-journal");
    let gone = rec
        .trace
        .invalidated(InvalidateKind::Unlink, &|n| n.ends_with("-journal"));
    assert_eq!(gone, ["test.db-journal".to_string()].into());
    let unlinks = rec
        .trace
        .count_invalidations(InvalidateKind::Unlink, &|n| n.ends_with("-journal"));
    assert!(
        unlinks >= 11,
        "one journal deletion per commit, got {unlinks}"
    );
}

#[test]
fn rollback_journal_truncate_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = run_mode(tmp.path(), "TRUNCATE");
    check_disjoint(&rec, "-journal");
    let cut = rec
        .trace
        .invalidated(InvalidateKind::Truncate, &|n| n.ends_with("-journal"));
    assert_eq!(cut, ["test.db-journal".to_string()].into());
}

#[test]
fn wal_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = run_mode(tmp.path(), "WAL");
    check_disjoint(&rec, "-wal");
    let gone = rec
        .trace
        .invalidated(InvalidateKind::Unlink, &|n| n.ends_with("-wal"));
    assert_eq!(
        gone,
        ["test.db-wal".to_string()].into(),
        "the WAL is removed at close"
    );
}
