//! Real application: Debian's `db_bench` (rocksdb-tools, RocksDB 7.8) under
//! `pcstreamctl record`, small `fillrandom` + `updaterandom` with tiny
//! memtables and files so flushes and compactions happen and obsolete files
//! are deleted. Proves: WAL appends and SST (flush/compaction) writes get
//! disjoint signatures whose symbolized call paths name the WAL writer and
//! the table builder; RocksDB's own per-file lifetime hints are recorded; the
//! deletion of obsolete SST and WAL files is recorded as invalidations.

mod app_common;

use pcstream_placement::wire::InvalidateKind;
use pcstream_tests::require_tool;

#[test]
fn db_bench_wal_and_sst_writes_hints_and_deletions() {
    require_tool("db_bench", "rocksdb-tools");
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let db_arg = format!("--db={}", db.display());
    let rec = app_common::record(
        &tmp.path().join("rec"),
        tmp.path(),
        &[
            "db_bench",
            &db_arg,
            "--benchmarks=fillrandom,updaterandom",
            "--num=20000",
            "--value_size=400",
            "--write_buffer_size=1048576",
            "--target_file_size_base=1048576",
            "--max_bytes_for_level_base=4194304",
            "--compression_type=none",
            "--statistics=0",
        ],
        &[],
    );
    let t = &rec.trace;
    t.check_merged();

    let is_wal = |n: &str| n.ends_with(".log");
    let is_sst = |n: &str| n.ends_with(".sst");
    let wal = t.write_sigs(&is_wal);
    let sst = t.write_sigs(&is_sst);
    let paths = app_common::call_paths(&rec.dir);
    let msg = format!(
        "WAL signatures:\n{}\nSST signatures:\n{}",
        app_common::show(&wal, &paths),
        app_common::show(&sst, &paths)
    );
    assert!(!wal.is_empty() && !sst.is_empty(), "{msg}");
    // 20000 fills + 20000 updates of 400-byte values all went through the WAL,
    // into files the trace names (every new file, even on a reused inode
    // number, gets its OpenEvent).
    assert!(
        wal.values().sum::<u64>() > 2 * 20000 * 400,
        "WAL bytes in files named *.log fall short (unnamed files?):\n{msg}"
    );
    assert!(
        wal.keys().all(|s| !sst.contains_key(s)),
        "a signature wrote both WAL and SST files:\n{msg}"
    );
    // The call paths say which is which (librocksdb exports its symbols).
    for s in wal.keys() {
        assert!(
            paths[s].contains("log::Writer") || paths[s].contains("WriteToWAL"),
            "WAL write path does not name the WAL writer: {s:016x}: {}",
            paths[s]
        );
    }
    for s in sst.keys() {
        let p = &paths[s];
        assert!(
            ["TableBuilder", "BuildTable", "Compaction", "FlushJob"]
                .iter()
                .any(|n| p.contains(n)),
            "SST write path does not name flush/compaction: {s:016x}: {p}"
        );
    }

    // RocksDB's own hints: SST files get MEDIUM (3) or longer per level, the
    // WAL SHORT (2); RocksDB 7.8 passes a 4-byte enum, so the kernel says EINVAL.
    let sst_hints = t.app_hints(&is_sst);
    assert!(
        !sst_hints.is_empty(),
        "no F_SET_RW_HINT recorded for SST files"
    );
    assert!(
        sst_hints.iter().all(|h| (3..=5).contains(&h.requested)),
        "SST hints: {sst_hints:?}"
    );
    let wal_hints = t.app_hints(&is_wal);
    assert!(
        wal_hints.iter().all(|h| h.requested == 2),
        "WAL hints: {wal_hints:?}"
    );

    // Obsolete files deleted by RocksDB: compacted SSTs and flushed WALs.
    let gone_sst = t.invalidated(InvalidateKind::Unlink, &is_sst);
    let gone_wal = t.invalidated(InvalidateKind::Unlink, &is_wal);
    for n in gone_sst.iter().chain(&gone_wal) {
        assert!(
            !db.join(n).exists(),
            "{n} recorded as unlinked but still exists"
        );
    }
    assert!(
        gone_sst.len() >= 2,
        "compaction deleted no SST file: {gone_sst:?}"
    );
    assert!(!gone_wal.is_empty(), "no obsolete WAL deletion recorded");
}
