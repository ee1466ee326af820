//! What the event stream looks like for common write patterns: a sequential
//! writer's consecutive writes coalesce into runs of at most 1 MiB (one
//! `WriteEvent` per run, not per call) that still account for every byte,
//! and deleting the file reports its last link going; files on reused inode
//! numbers are named again; processes ending in `_exit`/`_Exit` keep their
//! events, and a `vfork` child's `_exit` leaves its parent's alone. A
//! coalesced event says how many calls it stands for, and `trace-stats`
//! counts calls, not events.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::wire::{event::Kind, InvalidateKind, ProcessEventKind};
use shim_common::*;

/// A write still pending in its batch when the process execs through
/// `execl`, `execlp` or `execle` (glibc's own call its internal `__execve`,
/// which the shim cannot see) is in the trace: the shim's versions go
/// through its `execv*` hooks, which flush first. A failing exec returns
/// -1/ENOENT as natively.
#[test]
fn writes_before_execl_are_kept() {
    let bin = program("shim_execl", FP);
    for mode in ["execl", "execlp", "execle"] {
        let work = tempfile::tempdir().unwrap();
        let rec = tempfile::tempdir().unwrap();
        let file = work.path().join("data");
        Run::record(rec.path()).stdout(&bin, &[file.to_str().unwrap(), mode]);
        let t = traces(rec.path());
        assert_eq!(t.len(), 2, "{mode}: the program and /bin/true");
        let bytes: u64 = t
            .iter()
            .flat_map(|t| writes_to(t, &file))
            .map(|w| w.len)
            .sum();
        assert_eq!(bytes, 4096, "{mode}: the write before the exec is recorded");
    }
}

/// 50 sequential `write()`s are one event that says "50 calls", and
/// `pcstreamctl trace-stats` reports `write×50` (it said `write×1`).
#[test]
fn coalesced_events_count_their_calls() {
    let bin = program("shim_seq_writes", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let file = work.path().join("data");
    Run::record(rec.path()).stdout(&bin, &[file.to_str().unwrap(), "50"]);
    let t = only_trace(rec.path());
    let w = writes_to(&t, &file);
    assert_eq!(w.len(), 1, "one run: {w:?}");
    assert_eq!((w[0].len, w[0].calls), (50 * 4096, 50));
    let out = std::process::Command::new(pcstream_tests::pcstreamctl())
        .arg("trace-stats")
        .arg(&t.path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("write×50"), "{text}");
}

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

/// A file printed from three call sites and `putc`, 20,000 rounds (60,000
/// interposed calls): a stdio run is one event whatever call path each call
/// came from, with the run's first call's signature (the calls that
/// continue it are not unwound), so the trace has about one event per MiB,
/// and accounts for every byte of the file, the ones `putc` wrote unseen
/// between two calls included (their offsets follow the stream's buffer,
/// not `ftello`).
#[test]
fn a_stdio_run_from_many_call_sites_is_one_event() {
    let bin = program("shim_stdio_runs", NO_FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let file = work.path().join("out.s");
    // The same again into a second file once the first is closed: the next
    // stream (the same FILE, its buffer often at the same address) starts
    // its own run, on its own file from offset 0.
    let file2 = work.path().join("out2.s");
    let rounds = 20_000u64;
    Run::record(rec.path()).stdout(
        &bin,
        &[
            file.to_str().unwrap(),
            &rounds.to_string(),
            file2.to_str().unwrap(),
        ],
    );
    let t = only_trace(rec.path());
    for file in [&file, &file2] {
        let w = writes_to(&t, file);
        let size = std::fs::metadata(file).unwrap().len();
        let bytes: u64 = w.iter().map(|e| e.len).sum();
        assert_eq!(
            bytes,
            size - 1,
            "every byte of {}, putc's included, but the last one's (no call follows it)",
            file.display()
        );
        let calls: u64 = w.iter().map(|e| u64::from(e.calls.max(1))).sum();
        assert_eq!(calls, 3 * rounds, "the interposed calls");
        let sigs: std::collections::BTreeSet<u64> = w.iter().map(|e| e.signature).collect();
        assert_eq!(sigs.len(), 1, "the run's first call's signature: {sigs:x?}");
        let mut at = 0;
        for e in &w {
            assert_eq!(e.offset, at, "runs follow each other");
            at += e.len;
        }
        let runs = size.div_ceil(1 << 20) as usize;
        assert!(
            w.len() <= runs + 3,
            "{} events for {size} bytes ({runs} MiB runs)",
            w.len()
        );
    }
}

/// Decodes one datagram (an encoded `EventBatch`) with the trace reader.
fn decode_batch(payload: &[u8]) -> pcstream_placement::wire::EventBatch {
    use pcstream_placement::trace::{TraceReader, MAGIC};
    use pcstream_placement::wire::trace_record::Record;
    let mut rec = vec![0x12u8];
    let mut n = payload.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            rec.push(b);
            break;
        }
        rec.push(b | 0x80);
    }
    rec.extend_from_slice(payload);
    let mut file = MAGIC.to_vec();
    let mut n = rec.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            file.push(b);
            break;
        }
        file.push(b | 0x80);
    }
    file.extend_from_slice(&rec);
    let mut r = TraceReader::new("datagram".into(), file.as_slice()).unwrap();
    match r.next_record().unwrap().unwrap().record {
        Some(Record::Batch(b)) => b,
        other => panic!("not a batch: {other:?}"),
    }
}

#[test]
fn events_go_to_the_daemon_socket_as_datagrams() {
    use std::os::unix::net::UnixDatagram;
    let bin = program("shim_paths", FP);
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("events.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let out = dir.path().join("out");
    Run::shim()
        .env(var::SOCKET, sock_path.to_str().unwrap())
        .stdout(&bin, &[out.to_str().unwrap()]);
    let mut batches = Vec::new();
    sock.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    while let Ok(n) = sock.recv(&mut buf) {
        batches.push(decode_batch(&buf[..n]));
    }
    assert!(!batches.is_empty(), "datagrams arrived");
    let seqs: Vec<u64> = batches.iter().map(|b| b.seq).collect();
    assert_eq!(
        seqs,
        (0..batches.len() as u64).collect::<Vec<_>>(),
        "no gaps"
    );
    let writes = batches
        .iter()
        .flat_map(|b| b.events.iter())
        .filter(|e| matches!(e.kind, Some(Kind::Write(_))))
        .count();
    assert_eq!(writes, 32);
    let last = batches.last().unwrap().events.last().unwrap();
    assert!(
        matches!(&last.kind, Some(Kind::Process(p)) if p.dropped == 0),
        "EXIT with nothing dropped: {last:?}"
    );
}

#[test]
fn a_dead_daemon_socket_drops_and_counts_without_blocking() {
    use std::os::unix::net::UnixDatagram;
    let bin = program("shim_paths", FP);
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("events.sock");
    // The path exists but nobody listens: every send fails (ECONNREFUSED).
    drop(UnixDatagram::bind(&sock_path).unwrap());
    let rec = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    Run::record(rec.path())
        .env(var::SOCKET, sock_path.to_str().unwrap())
        .stdout(&bin, &[out.to_str().unwrap()]);
    let t = only_trace(rec.path());
    assert_eq!(
        writes_to(&t, &out).len(),
        32,
        "the trace file still gets everything"
    );
    let exit = *t.process_events().last().unwrap();
    let recorded_before_exit: u64 = t.batches[..t.batches.len() - 1]
        .iter()
        .map(|b| b.events.len() as u64)
        .sum();
    assert_eq!(
        exit.dropped, recorded_before_exit,
        "each unsent event is counted"
    );
}

#[test]
fn the_shim_registers_no_thread_local_destructor() {
    let lib = pcstream_tests::target_profile_dir()
        .join("shim-c")
        .join("libshim_tlsdtor.so");
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    pcstream_tests::compile_c(
        &pcstream_tests::c_dir().join("shim_tlsdtor.c"),
        &lib,
        &["-O2", "-shared", "-fPIC", "-ldl"],
    );
    let bin = program("shim_threads", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let preload = format!("{}:{}", lib.display(), pcstream_tests::shim().display());
    let o = Run::record(rec.path())
        .env("LD_PRELOAD", &preload)
        .output(&bin, &[work.path().to_str().unwrap(), "50"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("TLSDTOR"),
        "a TLS destructor was registered:\n{err}"
    );
    let t = only_trace(rec.path());
    assert_eq!(writes_to(&t, &work.path().join("shared")).len(), 8 * 50);
    // Positive control: the probe does see a registration.
    let control = program("shim_tlsdtor", &["-O2", "-DPROBE_MAIN", "-ldl"]);
    let o = Run::plain()
        .env("LD_PRELOAD", lib.to_str().unwrap())
        .output(&control, &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("TLSDTOR pthread_key_create"));
}

#[test]
fn alternate_signal_stacks_small_stacks_and_many_threads() {
    let bin = program("shim_stacks", FP);
    let a = tempfile::tempdir().unwrap();
    let plain = Run::plain().stdout(&bin, &[a.path().to_str().unwrap()]);
    assert_eq!(plain, "sig 1250 small 1200 many 600\n");
    for unwind in ["auto", "scan"] {
        let b = tempfile::tempdir().unwrap();
        let rec = tempfile::tempdir().unwrap();
        let out = Run::record(rec.path())
            .env(var::UNWIND, unwind)
            .stdout(&bin, &[b.path().to_str().unwrap()]);
        assert_eq!(out, plain, "{unwind}");
        let t = only_trace(rec.path());
        for (f, bytes) in [("sig", 1250), ("small", 1200), ("many", 600)] {
            let w = writes_to(&t, &b.path().join(f));
            assert_eq!(w.iter().map(|e| e.len).sum::<u64>(), bytes, "{unwind} {f}");
        }
        assert_eq!(
            t.process_events().last().unwrap().dropped,
            0,
            "300 threads over the run reuse the 256 slots"
        );
    }
}

#[test]
fn files_on_reused_inode_numbers_are_named_again() {
    let bin = program("shim_lifecycle", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let out = Run::record(rec.path()).stdout(&bin, &["reuse", work.path().to_str().unwrap(), "6"]);
    let inos: Vec<(String, u64)> = out
        .lines()
        .map(|l| {
            let (n, i) = l.split_once(' ').unwrap();
            (n.to_string(), i.parse().unwrap())
        })
        .collect();
    assert_eq!(inos.len(), 12, "{out}");
    for prefix in ['f', 'g'] {
        let mine: Vec<u64> = inos
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|&(_, i)| i)
            .collect();
        let distinct: std::collections::BTreeSet<u64> = mine.iter().copied().collect();
        assert!(
            distinct.len() < mine.len(),
            "the test needs a file system that reuses inode numbers ({prefix}*: {mine:?})"
        );
    }
    // Walk the (single-threaded) trace in order: every write must be
    // preceded by an OpenEvent naming that file since the inode's last
    // unlink, with the right path.
    let t = only_trace(rec.path());
    let dir = std::fs::canonicalize(work.path()).unwrap();
    let mut named: std::collections::HashMap<(u64, u64), String> = Default::default();
    let mut written = Vec::new();
    for e in t.events() {
        match &e.kind {
            Some(Kind::Open(o)) => {
                let f = o.file.unwrap_or_default();
                named.insert((f.dev, f.ino), o.path.clone());
            }
            Some(Kind::Invalidate(i)) if i.kind == InvalidateKind::Unlink as i32 => {
                let f = i.file.unwrap_or_default();
                named.remove(&(f.dev, f.ino));
            }
            Some(Kind::Write(w)) => {
                let f = w.file.unwrap_or_default();
                let path = named.get(&(f.dev, f.ino)).unwrap_or_else(|| {
                    panic!(
                        "write to inode {} with no OpenEvent since its last unlink",
                        f.ino
                    )
                });
                written.push(path.clone());
            }
            _ => {}
        }
    }
    let want: Vec<String> = inos
        .iter()
        .map(|(n, _)| dir.join(n).to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        written, want,
        "one write per file, each named with its own path"
    );
}

#[test]
fn exit_without_destructors_keeps_events_and_vfork_children_leave_them_alone() {
    let bin = program("shim_lifecycle", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    Run::record(rec.path()).stdout(&bin, &["exit", work.path().to_str().unwrap()]);
    let all = traces(rec.path());
    // The parent, two fork children; the vfork child has no trace of its own.
    assert_eq!(
        all.len(),
        3,
        "{:?}",
        all.iter().map(|t| &t.path).collect::<Vec<_>>()
    );
    for (name, writes) in [("by_exit", 2), ("by_Exit", 2), ("parent", 3)] {
        let owners: Vec<&ProcessTrace> = all
            .iter()
            .filter(|t| !writes_to(t, &work.path().join(name)).is_empty())
            .collect();
        assert_eq!(owners.len(), 1, "{name}: written by one process");
        let t = owners[0];
        let w = writes_to(t, &work.path().join(name));
        assert_eq!(
            w.iter().map(|w| w.len).sum::<u64>(),
            writes * 100,
            "{name}: every byte's write event is in the trace"
        );
        let exits: Vec<_> = t
            .process_events()
            .into_iter()
            .filter(|p| p.kind == ProcessEventKind::Exit as i32)
            .collect();
        assert_eq!(exits.len(), 1, "{name}: exactly one EXIT event");
        let last = t.events().last().unwrap();
        assert!(
            matches!(&last.kind, Some(Kind::Process(p)) if p.kind == ProcessEventKind::Exit as i32),
            "{name}: EXIT is the last event"
        );
    }
}

/// Files without a name (`tests/c/shim_unnamed.c`): an `O_TMPFILE` never
/// linked and a file unlinked while open die at their writer's close
/// (`CLOSE_UNLINKED`, after the `UNLINK` of what was written before the
/// unlink), through `close` and `fclose`; a duplicated descriptor's close
/// and a linked `O_TMPFILE`'s close end nothing. Same output as natively.
#[test]
fn unnamed_files_die_at_their_writers_close() {
    let bin = program("shim_unnamed", FP);
    let native = tempfile::tempdir().unwrap();
    let plain = Run::plain().stdout(&bin, &[native.path().to_str().unwrap()]);
    if plain.contains("no O_TMPFILE") {
        eprintln!(
            "skipped: the file system of {} has no O_TMPFILE",
            native.path().display()
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let out = Run::record(rec.path()).stdout(&bin, &[work.path().to_str().unwrap()]);
    let strip = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.contains(" ino "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&out), strip(&plain));
    let ino = |what: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{what} ino ")))
            .unwrap_or_else(|| panic!("{what}: {out}"))
            .parse()
            .unwrap()
    };
    let t = only_trace(rec.path());
    let deaths: Vec<(u64, i32, u64, u64)> = t
        .events()
        .filter_map(|e| match &e.kind {
            Some(Kind::Invalidate(i)) => Some((i.file.unwrap().ino, i.kind, i.offset, i.len)),
            _ => None,
        })
        .collect();
    let (unlink, closed) = (
        InvalidateKind::Unlink as i32,
        InvalidateKind::CloseUnlinked as i32,
    );
    let of = |i: u64| -> Vec<(i32, u64, u64)> {
        deaths
            .iter()
            .filter(|d| d.0 == i)
            .map(|d| (d.1, d.2, d.3))
            .collect()
    };
    // Every file was created by its open (O_CREAT | O_TRUNC of a new path,
    // or O_TMPFILE), empty and writable: each says so first (TRUNCATE at 0,
    // length 0).
    let created = (InvalidateKind::Truncate as i32, 0, 0);
    assert_eq!(
        of(ino("tmpfile")),
        vec![created, (closed, 0, 10000)],
        "{deaths:?}"
    );
    assert_eq!(
        of(ino("unlinked")),
        vec![created, (unlink, 0, 5000), (closed, 0, 8000)],
        "{deaths:?}"
    );
    assert_eq!(
        of(ino("stdio")),
        vec![created, (unlink, 0, 4096), (closed, 0, 4196)],
        "{deaths:?}"
    );
    assert_eq!(
        of(ino("dup")),
        vec![created, (unlink, 0, 2000)],
        "{deaths:?}"
    );
    assert_eq!(of(ino("linked")), vec![created], "{deaths:?}");
}

/// A `pwrite` on an `O_APPEND` descriptor appends whatever offset it names
/// (Linux ignores it), and its event says where the data went: the file's
/// end, not the offset passed. Python's `os.write` / `os.pwrite` (libc's
/// `write` and `pwrite64`) write 8 KiB, then 4 KiB "at 0" and 4 KiB "at
/// 100": the events cover 0..16 KiB once each, and nothing is reported at
/// 0 or 100 a second time.
#[test]
fn a_pwrite_on_an_append_descriptor_is_recorded_where_it_landed() {
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let file = work.path().join("log");
    let script = "import os, sys\n\
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\n\
        os.write(fd, b'a' * 8192)\n\
        assert os.pwrite(fd, b'b' * 4096, 0) == 4096\n\
        assert os.pwrite(fd, b'c' * 4096, 100) == 4096\n\
        os.close(fd)\n";
    let py = std::path::Path::new("/usr/bin/python3");
    Run::record(rec.path()).stdout(py, &["-c", script, file.to_str().unwrap()]);
    let data = std::fs::read(&file).unwrap();
    assert_eq!(data.len(), 16384, "the kernel appended both pwrites");
    assert!(data[8192..12288].iter().all(|&b| b == b'b'));
    let t = only_trace(rec.path());
    let mut runs: Vec<(u64, u64)> = writes_to(&t, &file)
        .iter()
        .map(|w| (w.offset, w.len))
        .collect();
    runs.sort();
    let mut end = 0;
    for &(off, len) in &runs {
        assert_eq!(off, end, "contiguous, no byte twice: {runs:?}");
        end = off + len;
    }
    assert_eq!(end, 16384, "every byte where it landed: {runs:?}");
}
