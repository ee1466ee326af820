//! What the event stream looks like for common write patterns: a sequential
//! writer's consecutive writes coalesce into runs of at most 1 MiB (one
//! `WriteEvent` per run, not per call) that still account for every byte,
//! and deleting the file reports its last link going.

mod shim_common;

use pcstream_placement::wire::{event::Kind, InvalidateKind};
use shim_common::*;

#[test]
fn sequential_writes_coalesce_into_runs() {
    let bin = program("shim_bench_write", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let file = work.path().join("data");
    // 2 blocks of 1024 sequential 4 KiB writes, rewinding between blocks.
    Run::record(rec.path()).stdout(&bin, &[file.to_str().unwrap(), "4096", "2048"]);
    let t = only_trace(rec.path());
    let w = writes_to(&t, &file);
    let total: u64 = w.iter().map(|e| e.len).sum();
    assert_eq!(total, 2048 * 4096, "every byte accounted");
    assert!(
        w.iter().all(|e| e.len <= 1 << 20),
        "runs are capped at 1 MiB"
    );
    assert_eq!(
        w.len(),
        8,
        "2 blocks x 4 MiB in 1 MiB runs: {:?}",
        w.iter().map(|e| (e.offset, e.len)).collect::<Vec<_>>()
    );
    let mut offs: Vec<(u64, u64)> = w.iter().map(|e| (e.offset, e.len)).collect();
    offs.sort();
    let want: Vec<(u64, u64)> = (0..4u64)
        .flat_map(|i| [(i << 20, 1 << 20), (i << 20, 1 << 20)])
        .collect();
    assert_eq!(offs, want);
    let sigs: std::collections::BTreeSet<u64> = w.iter().map(|e| e.signature).collect();
    assert_eq!(sigs.len(), 1, "one call path");
    let unlinks = t
        .events()
        .filter(|e| matches!(&e.kind, Some(Kind::Invalidate(i)) if i.kind == InvalidateKind::Unlink as i32 && i.len == 4 << 20))
        .count();
    assert_eq!(unlinks, 1, "the program deletes its 4 MiB file");
}
