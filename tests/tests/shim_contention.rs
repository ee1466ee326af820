//! No event is dropped under thread contention while the batch pool has
//! room: 100 consecutive runs of an 8-thread writer with a fork/exec thread
//! and a 1 ms flush age (threads keep sweeping each other's idle batches)
//! record every write and report nothing dropped, in every process.
//! Cost: ~10 s on 2 cores.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::wire::ProcessEventKind;
use shim_common::*;

const N: usize = 2000;

// Issue #11: a fresh-clone CI run once saw 1 dropped event in run 74 of 100
// (a thread gave up waiting for its own batch slot after a fixed number of
// yields while the thread sweeping it was off the CPU); the wait is now
// bounded by time (`batch::acquire_contended`).
#[test]
fn hundred_contended_runs_drop_nothing() {
    let bin = program("shim_contend", FP);
    for run in 0..100 {
        let work = tempfile::tempdir().unwrap();
        let rec = tempfile::tempdir().unwrap();
        let out = Run::record(rec.path())
            .env(var::FLUSH_MS, "1")
            .stdout(&bin, &[work.path().to_str().unwrap(), &N.to_string()]);
        assert_eq!(out, "ok\n");
        let traces = traces(rec.path());
        // The parent, 8 fork children, 8 exec'd /bin/true.
        assert_eq!(traces.len(), 17, "run {run}: {} traces", traces.len());
        let mut thread_writes = 0;
        let mut exits = 0;
        for t in &traces {
            for i in 0..8 {
                thread_writes += writes_to(t, &work.path().join(format!("t{i}"))).len();
            }
            // Fork children end in exec (their image's trace has the EXIT).
            let Some(exit) = t
                .process_events()
                .into_iter()
                .find(|p| p.kind == ProcessEventKind::Exit as i32)
            else {
                continue;
            };
            exits += 1;
            assert_eq!(
                exit.dropped,
                0,
                "run {run}: {} dropped events",
                t.path.display()
            );
        }
        assert_eq!(exits, 9, "run {run}: the parent and 8 /bin/true exit");
        assert_eq!(thread_writes, 8 * N, "run {run}: every pwrite is an event");
    }
}
