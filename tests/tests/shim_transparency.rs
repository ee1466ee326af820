//! The shim never changes what the application sees: return values, errno,
//! descriptor numbers and file contents are identical with and without
//! `LD_PRELOAD=libpcstream.so`, for every interposed call's success and
//! error paths, partial writes, O_APPEND, 8 threads, fork/exec/vfork/
//! posix_spawn (children traced too) and signals interrupting writes.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::wire::{self, event::Kind, ProcessEventKind};
use shim_common::*;
use std::path::Path;

fn normalise(out: &str, dir: &Path) -> String {
    out.replace(dir.to_str().unwrap(), "DIR")
}

/// Runs `shim_calls` in a fresh directory under `how`; returns its output.
fn calls(how: &Run) -> String {
    let bin = program("shim_calls", FP);
    let dir = tempfile::tempdir().unwrap();
    let out = how.stdout(&bin, &[dir.path().to_str().unwrap()]);
    normalise(&out, dir.path())
}

#[test]
fn every_interposed_call_returns_what_libc_returns() {
    let plain = calls(&Run::plain());
    assert!(plain.lines().count() > 100, "{plain}");
    assert!(plain.contains("write EFAULT                             rc=-1 errno=14"));
    assert_eq!(calls(&Run::shim()), plain, "pass-through (no sink)");
    assert_eq!(
        calls(&Run::shim().env(var::DISABLE, "1")),
        plain,
        "disabled"
    );
    let rec = tempfile::tempdir().unwrap();
    assert_eq!(calls(&Run::record(rec.path())), plain, "record mode");
    let t = only_trace(rec.path());
    assert!(t.writes().len() >= 15, "the recorded run did trace writes");
    let rec2 = tempfile::tempdir().unwrap();
    let map = rec2.path().join("map");
    std::fs::write(&map, "0123456789abcdef 2\n").unwrap();
    let out = calls(
        &Run::record(rec2.path())
            .env(var::UNWIND, "scan")
            .env(var::FRAMES, "8")
            .env(var::MAP, map.to_str().unwrap()),
    );
    assert_eq!(out, plain, "record mode, stack scan, mapping");
}

#[test]
fn recorded_events_describe_the_calls() {
    let bin = program("shim_calls", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    Run::record(rec.path()).stdout(&bin, &[work.path().to_str().unwrap()]);
    let t = only_trace(rec.path());
    let w = work.path().join("w");
    let offsets: Vec<(u64, u64, i32)> = writes_to(&t, &w)
        .iter()
        .map(|e| (e.offset, e.len, e.call))
        .collect();
    // write 100 @0, pwrite 50 @1000, pwrite64 10 @2000, writev 30 @100,
    // pwritev 30 @3000, pwritev2 30 @4000, pwritev2(-1) 10 @130, write 7 @140.
    let want = [
        (0, 100, wire::WriteCall::Write as i32),
        (1000, 50, wire::WriteCall::Pwrite as i32),
        (2000, 10, wire::WriteCall::Pwrite as i32),
        (100, 30, wire::WriteCall::Writev as i32),
        (3000, 30, wire::WriteCall::Pwritev as i32),
        (4000, 30, wire::WriteCall::Pwritev as i32),
        (130, 10, wire::WriteCall::Writev as i32),
        (140, 7, wire::WriteCall::Write as i32),
    ];
    assert_eq!(&offsets[..want.len()], &want, "{offsets:?}");
    // Partial writes are accounted with what the kernel took.
    let partial: Vec<_> = writes_to(&t, &work.path().join("partial"))
        .iter()
        .map(|e| (e.offset, e.len))
        .collect();
    assert_eq!(partial, vec![(0, 8192), (8192, 1808)]);
    // Kernel-side copies: copy_file_range 3000 at the position (0) and
    // 1000 at *off_out (5000), 10 at the position (3000); sendfile 2000
    // and sendfile64 1000 at the position (3010, 5010); splice 500 at
    // *off_out (8000) and 200 at the position (6010). Failed calls and a
    // splice into a pipe leave nothing.
    let copies: Vec<_> = writes_to(&t, &work.path().join("cdst"))
        .iter()
        .map(|e| (e.offset, e.len, e.call))
        .collect();
    let c = wire::WriteCall::Copy as i32;
    assert_eq!(
        copies,
        vec![
            (0, 3000, c),
            (5000, 1000, c),
            (3000, 10, c),
            (3010, 2000, c),
            (5010, 1000, c),
            (8000, 500, c),
            (6010, 200, c)
        ]
    );
    // O_APPEND: the second write lands at the end despite lseek(0) (the
    // last, after a reopening, too).
    let app: Vec<_> = writes_to(&t, &work.path().join("append"))
        .iter()
        .map(|e| (e.offset, e.len))
        .collect();
    assert_eq!(app, vec![(0, 5), (5, 5), (10, 1), (11, 1)]);
    // O_APPEND switched on with F_SETFL, and pwritev2(RWF_APPEND).
    let setfl: Vec<_> = writes_to(&t, &work.path().join("setfl"))
        .iter()
        .map(|e| (e.offset, e.len))
        .collect();
    assert_eq!(setfl, vec![(0, 5), (5, 5), (10, 3)]);
    // stdio: fwrite 30, fputs 5, fprintf 10, [fwrite_unlocked 5: a glibc
    // header macro inlines it for small constant sizes, no call to see],
    // fputs_unlocked 2: one stdio run of 4 calls from the stream's start,
    // the 5 unseen bytes included (docs/shim.md, "stdio").
    let stdio: Vec<_> = writes_to(&t, &work.path().join("stdio"))
        .iter()
        .map(|e| (e.offset, e.len, e.call, e.calls))
        .collect();
    let f = wire::WriteCall::Fwrite as i32;
    assert_eq!(stdio, vec![(0, 52, f, 4)]);
    // fprintf through fdopen(dup(fd), "a") appends to w at its end (4030).
    assert!(writes_to(&t, &w)
        .iter()
        .any(|e| (e.offset, e.len, e.call) == (4030, 11, f)));
    let kinds: Vec<(i32, u64, u64)> = t
        .events()
        .filter_map(|e| match &e.kind {
            Some(Kind::Invalidate(i)) => Some((i.kind, i.offset, i.len)),
            _ => None,
        })
        .collect();
    use wire::InvalidateKind as K;
    assert!(kinds.contains(&(K::PunchHole as i32, 0, 4096)), "{kinds:?}");
    assert!(
        kinds.contains(&(K::Truncate as i32, 5000, 65536 - 5000)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(K::Truncate as i32, 3000, 2000)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(K::Truncate as i32, 0, 33)),
        "O_TRUNC: {kinds:?}"
    );
    assert!(
        kinds.iter().any(|k| k.0 == K::RenameReplace as i32),
        "{kinds:?}"
    );
    // An empty file opened for writing says so (TRUNCATE at 0, length 0:
    // what a learner holds under the inode is dead, most often an earlier
    // file's): "w" and "at" (O_CREAT | O_TRUNC of a new path) and "append"
    // (O_CREAT | O_APPEND) once each, at their creation; not at the failed
    // O_EXCL open of "w", at "at"'s second, truncating open of the existing
    // file (a truncation of its 33 bytes instead), nor at "append"'s
    // reopening with data in it. "rw": created by O_RDWR | O_CREAT (one),
    // opened read-only while empty (none), then O_RDWR while empty (one).
    let dir = std::fs::canonicalize(work.path()).unwrap();
    let created = |name: &str| {
        let ids: Vec<(u64, u64)> = t
            .paths()
            .into_iter()
            .filter(|(_, p)| Path::new(p) == dir.join(name))
            .map(|(id, _)| id)
            .collect();
        assert!(!ids.is_empty(), "{name} was written: {:?}", t.paths());
        t.events()
            .filter(|e| match &e.kind {
                Some(Kind::Invalidate(i)) => {
                    (i.kind, i.offset, i.len) == (K::Truncate as i32, 0, 0)
                        && i.file.is_some_and(|f| ids.contains(&(f.dev, f.ino)))
                }
                _ => false,
            })
            .count()
    };
    assert_eq!(created("w"), 1);
    assert_eq!(created("at"), 1);
    assert_eq!(created("append"), 1);
    assert_eq!(created("rw"), 2);
    assert_eq!(
        kinds.iter().filter(|k| k.0 == K::Unlink as i32).count(),
        2,
        "{kinds:?}"
    );
    let hints: Vec<(u64, bool, i32)> = t
        .events()
        .filter_map(|e| match &e.kind {
            Some(Kind::AppHint(h)) => Some((h.requested, h.accepted, h.errno)),
            _ => None,
        })
        .collect();
    assert_eq!(
        hints,
        vec![
            (3, true, 0),
            (77, false, libc::EINVAL),
            (0, false, libc::EFAULT)
        ],
        "EBADF calls have no file and produce no event"
    );
    let p = t.process_events();
    assert_eq!(p.first().unwrap().kind, ProcessEventKind::Start as i32);
    assert_eq!(p.last().unwrap().kind, ProcessEventKind::Exit as i32);
    assert_eq!(p.last().unwrap().dropped, 0);
    assert_eq!(t.header.command[1], work.path().to_str().unwrap());
}

#[test]
fn eight_threads_write_concurrently() {
    let bin = program("shim_threads", FP);
    let n = 400;
    let a = tempfile::tempdir().unwrap();
    let plain = Run::plain().stdout(&bin, &[a.path().to_str().unwrap(), &n.to_string()]);
    let b = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let traced =
        Run::record(rec.path()).stdout(&bin, &[b.path().to_str().unwrap(), &n.to_string()]);
    assert_eq!(traced, plain);
    let t = only_trace(rec.path());
    let tids: std::collections::BTreeSet<u32> = t
        .events()
        .filter(|e| matches!(e.kind, Some(Kind::Write(_))))
        .map(|e| e.tid)
        .collect();
    assert!(
        tids.len() >= 8,
        "writes from 8 threads (+ main's stdout): {tids:?}"
    );
    let shared = writes_to(&t, &b.path().join("shared"));
    assert_eq!(shared.len(), 8 * n);
    let mut offs: Vec<u64> = shared.iter().map(|w| w.offset).collect();
    offs.sort();
    assert!(offs.iter().enumerate().all(|(i, &o)| o == i as u64 * 512));
    for th in 0..8 {
        let own = writes_to(&t, &b.path().join(format!("t{th}")));
        assert_eq!(own.len(), n, "thread {th}");
        assert!(own
            .iter()
            .enumerate()
            .all(|(i, w)| w.offset == i as u64 * 512 && w.len == 512));
    }
    assert_eq!(t.process_events().last().unwrap().dropped, 0);
}

#[test]
fn fork_exec_vfork_and_posix_spawn_children_are_traced() {
    let bin = program("shim_spawn", FP);
    let a = tempfile::tempdir().unwrap();
    let plain = Run::plain().stdout(&bin, &[a.path().to_str().unwrap()]);
    let b = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let traced = Run::record(rec.path()).stdout(&bin, &[b.path().to_str().unwrap()]);
    assert_eq!(traced, plain);
    for f in ["parent", "child", "exec", "vfork", "spawn"] {
        assert_eq!(
            std::fs::read(b.path().join(f)).unwrap(),
            f.as_bytes(),
            "{f} written"
        );
    }
    let traces = traces(rec.path());
    // The parent: started with the directory as its argument (the exec'd
    // children end theirs with what they are), not a fork child. Not the
    // first trace of two arguments: traces come in file-name order, and
    // across a pid wrap past 999 an exec'd child's sorts first.
    let dir = b.path().to_str().unwrap();
    let parent = traces
        .iter()
        .find(|t| {
            t.header.command.len() == 2
                && t.header.command[1] == dir
                && t.process_events()
                    .first()
                    .is_none_or(|p| p.kind != ProcessEventKind::ForkChild as i32)
        })
        .expect("the parent's trace");
    let child = traces
        .iter()
        .find(|t| {
            t.process_events()
                .first()
                .is_some_and(|p| p.kind == ProcessEventKind::ForkChild as i32)
        })
        .expect("the fork child has its own trace starting with FORK_CHILD");
    assert_eq!(child.process_events()[0].ppid, parent.pid());
    assert_ne!(child.pid(), parent.pid());
    assert_eq!(writes_to(child, &b.path().join("child")).len(), 1);
    assert!(
        writes_to(child, &b.path().join("parent")).is_empty(),
        "parent's batch dropped"
    );
    assert_eq!(writes_to(parent, &b.path().join("parent")).len(), 1);
    for what in ["exec", "vfork", "spawn"] {
        let t = traces
            .iter()
            .find(|t| t.header.command.last().is_some_and(|c| c == what))
            .unwrap_or_else(|| panic!("trace of the {what} child"));
        let start = t.process_events()[0];
        assert_eq!(start.kind, ProcessEventKind::Start as i32);
        assert_eq!(start.argv.last().unwrap(), what);
        assert_eq!(writes_to(t, &b.path().join(what)).len(), 1, "{what}");
        assert_eq!(
            t.process_events().last().unwrap().kind,
            ProcessEventKind::Exit as i32
        );
    }
}

#[test]
fn signals_interrupting_writes_pass_eintr_through() {
    let bin = program("shim_signals", FP);
    let a = tempfile::tempdir().unwrap();
    let plain = Run::plain().stdout(&bin, &[a.path().to_str().unwrap()]);
    assert!(
        plain.contains("blocked write rc=-1 errno=EINTR fired=1"),
        "{plain}"
    );
    let b = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let traced = Run::record(rec.path()).stdout(&bin, &[b.path().to_str().unwrap()]);
    assert_eq!(traced, plain);
    let t = only_trace(rec.path());
    let log = writes_to(&t, &b.path().join("log"));
    let size = std::fs::metadata(b.path().join("log")).unwrap().len();
    // A handler write that lands while the main thread is inside the shim
    // passes straight through (re-entrancy guard) and is counted as dropped.
    let dropped = t.process_events().last().unwrap().dropped;
    assert_eq!(
        log.iter().map(|w| w.len).sum::<u64>() + 7 * dropped,
        size,
        "every byte accounted ({dropped} handler writes passed through)"
    );
    let sigs: std::collections::BTreeSet<u64> = log.iter().map(|w| w.signature).collect();
    assert_eq!(
        sigs.len(),
        2,
        "main-loop and signal-handler writes are two contexts"
    );
}

#[test]
fn pthread_cancel_in_write_runs_the_applications_cleanups() {
    // The shim's trampolines carry unwind info: the forced unwind of a
    // cancelled write() or splice() (six arguments: the other trampoline)
    // reaches the application's frames and their cleanups.
    let bin = program(
        "shim_cancel",
        &["-O2", "-fexceptions", "-fno-omit-frame-pointer"],
    );
    let plain = Run::plain().stdout(&bin, &[]);
    assert_eq!(
        plain,
        "cleanup ran\nwrite cancelled=1\ncleanup ran\nsplice cancelled=1\n"
    );
    let rec = tempfile::tempdir().unwrap();
    assert_eq!(Run::record(rec.path()).stdout(&bin, &[]), plain);
    assert_eq!(Run::shim().stdout(&bin, &[]), plain);
}
