//! The live system on sqlite3, end to end, no root: a real `pcstreamd`
//! learns from the `sqlite3` shell running under the shim (recorded at the
//! same time, so the test knows which signatures wrote the rollback journal
//! and which the database); the journal's and the database's signatures get
//! distinct lifetime estimates, the journal's the shorter and in a lower
//! stream. A second database's journal, created after the mapping was
//! published, carries the hint of the stream the live mapping gave its
//! writes (read back with `F_GET_RW_HINT`).
//!
//! The workload: 20,000 rows, then 60 transactions each updating one of 20
//! key ranges (~200 rows) in turn, in `TRUNCATE` journal mode (the journal
//! file stays, so its hint can be read afterwards). A journal page lives
//! for one transaction (it is truncated at commit); a database page until
//! its range comes round again, 20 transactions later.

mod app_common;
mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_placement::hint::RwHint;
use pcstream_placement::wire::event::Kind;
use pcstream_tests::require_tool;
use pcstream_tests::rw_hint;
use std::collections::BTreeMap;
use std::path::Path;

fn script(rows: u32, rounds: u32) -> String {
    let mut s = format!(
        "PRAGMA journal_mode=TRUNCATE;\n\
         CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n\
         BEGIN;\n\
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < {rows})\n\
         INSERT INTO t SELECT x, hex(randomblob(100)) FROM c;\n\
         COMMIT;\n"
    );
    let ranges = rows / 1000;
    for _ in 0..rounds {
        for i in 0..ranges {
            s.push_str(&format!(
                "BEGIN; UPDATE t SET v = hex(randomblob(100)) WHERE k BETWEEN {} AND {}; COMMIT;\n",
                i * 1000,
                i * 1000 + 200
            ));
        }
    }
    s
}

/// sqlite3 on `dir/test.db` under the shim attached to `d`, recorded.
fn run(d: &Daemon, dir: &Path, rows: u32, rounds: u32) -> app_common::Recorded {
    std::fs::create_dir_all(dir).unwrap();
    let sql = dir.join("script.sql");
    std::fs::write(&sql, script(rows, rounds)).unwrap();
    let cmd = format!("sqlite3 test.db < {} >/dev/null", sql.display());
    let run_dir = d.run_dir();
    app_common::record(
        &dir.join("rec"),
        dir,
        &["sh", "-c", &cmd],
        &[
            (var::RUNTIME_DIR, run_dir.to_str().unwrap()),
            (var::FLUSH_MS, "20"),
        ],
    )
}

/// The heaviest of `sigs` (signature → bytes).
fn heaviest(sigs: &BTreeMap<u64, u64>) -> u64 {
    *sigs.iter().max_by_key(|x| x.1).expect("a signature").0
}

#[test]
fn sqlite_journal_and_database_learnt_apart_and_a_new_journal_gets_its_hint() {
    require_tool("sqlite3", "sqlite3");
    let d = Daemon::start("[mapper]\nfirst_interval = 64\ncheck_interval = 1024\n");
    let tmp = tempfile::tempdir().unwrap();
    let rec = run(&d, &tmp.path().join("a"), 20_000, 3);
    let journal = |n: &str| n.ends_with("-journal");
    let db = |n: &str| n == "test.db";
    let j = rec.trace.write_sigs(&journal);
    let b = rec.trace.write_sigs(&db);
    assert!(!j.is_empty() && !b.is_empty(), "journal {j:?} db {b:?}");
    assert!(j.keys().all(|s| !b.contains_key(s)), "shared signature");
    let ctx = d.contexts();
    let row = |sig: u64| {
        ctx.iter()
            .find(|c| c["signature"] == format!("{sig:016x}"))
            .unwrap_or_else(|| panic!("{sig:016x} not in contexts"))
            .clone()
    };
    let (jr, br) = (row(heaviest(&j)), row(heaviest(&b)));
    let life = |c: &serde_json::Value| c["lifetime_estimate_bytes"].as_f64().unwrap();
    let stream = |c: &serde_json::Value| c["stream"].as_u64().unwrap();
    eprintln!(
        "journal: {} B lifetime, stream {}; database: {} B, stream {}",
        life(&jr),
        stream(&jr),
        life(&br),
        stream(&br)
    );
    assert!(
        life(&jr) < life(&br),
        "journal lifetime {} not below the database's {}",
        life(&jr),
        life(&br)
    );
    assert!(
        stream(&jr) != 0 && stream(&jr) < stream(&br),
        "journal stream {} database stream {}",
        stream(&jr),
        stream(&br)
    );

    // A new database: its journal is created after the mapping was published.
    let dir2 = tmp.path().join("b");
    let rec2 = run(&d, &dir2, 2_000, 1);
    let t = &rec2.trace;
    let last = t
        .events
        .iter()
        .enumerate()
        .filter_map(|(i, (_, e))| match &e.kind {
            Some(Kind::Write(w)) if t.file_matches(t.file_of(i, &w.file), &journal) => Some(w),
            _ => None,
        })
        .rfind(|w| w.stream != 0)
        .expect("journal writes placed by the live mapping");
    let h = rw_hint(&dir2.join("test.db-journal"));
    assert_eq!(
        h,
        RwHint::for_stream(last.stream).raw(),
        "the journal's hint is its stream's ({})",
        last.stream
    );
    assert_eq!(u64::from(last.hint), h, "the trace saw the same hint");
    let dbh = rw_hint(&dir2.join("test.db"));
    assert!(dbh >= 2, "database hint {dbh}");
    assert_ne!(h, dbh, "journal and database share a hint");
}
