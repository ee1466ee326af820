//! The shim holds no descriptor the application could see or break: after
//! `closefrom`, a raw `close_range` syscall or a close loop, 1,100 files
//! opened at once (descriptors past 1000) hold exactly what the application
//! wrote, byte for byte as natively, while record mode keeps tracing them;
//! `fcntl`/`write`/`lseek`/`fstat` on descriptor numbers the application
//! never opened, `F_DUPFD` with a minimum of 1000 and `dup2`/`dup3` onto 1000
//! answer as natively, in record mode and with a daemon socket.

mod shim_common;

use pcstream_placement::env as var;
use shim_common::*;
use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// Every file of `dir` (name → bytes).
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Runs `shim_fds close HOW` natively and in record mode; compares.
fn close_then_open_many(how: &str) {
    let bin = program("shim_fds", FP);
    let native = tempfile::tempdir().unwrap();
    let out = Run::plain().stdout(&bin, &["close", how, native.path().to_str().unwrap()]);
    assert!(out.ends_with("ok\n"), "{out}");
    let hi: i32 = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("highest fd "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(hi >= 1000, "descriptors past 1000 were used: {out}");
    let want = contents(native.path());
    assert_eq!(want.len(), 1101);

    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let o = Run::record(rec.path()).output(&bin, &["close", how, work.path().to_str().unwrap()]);
    assert!(
        o.status.success(),
        "{how}: record mode failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), out, "{how}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let got = contents(work.path());
    assert_eq!(got.len(), want.len(), "{how}");
    for (name, bytes) in &want {
        assert!(got[name] == *bytes, "{how}: {name} differs from native");
    }
    // The trace is readable (traces() decodes every record) and kept
    // recording after the application closed everything.
    let t = only_trace(rec.path());
    let traced = t
        .paths()
        .values()
        .filter(|p| Path::new(p).parent() == Some(work.path()))
        .count();
    assert!(
        t.writes().len() >= 1101,
        "{how}: {} writes",
        t.writes().len()
    );
    assert!(traced >= 1101, "{how}: {traced} files named in the trace");
}

#[test]
fn closefrom_then_1100_files_are_byte_identical() {
    close_then_open_many("closefrom");
}

#[test]
fn raw_close_range_then_1100_files_are_byte_identical() {
    close_then_open_many("close_range");
}

#[test]
fn close_loop_then_1100_files_are_byte_identical() {
    close_then_open_many("loop");
}

fn probe(how: &Run) -> String {
    let bin = program("shim_fds", FP);
    let dir = tempfile::tempdir().unwrap();
    how.stdout(&bin, &["probe", dir.path().to_str().unwrap()])
}

#[test]
fn unknown_descriptor_numbers_answer_as_natively() {
    let plain = probe(&Run::plain());
    assert!(plain.contains("fd 1000: getfd -1/9 lseek -1/9"), "{plain}");
    assert!(plain.contains("F_DUPFD 1000 -> 1000"), "{plain}");
    let rec = tempfile::tempdir().unwrap();
    assert_eq!(probe(&Run::record(rec.path())), plain, "record mode");
    let t = only_trace(rec.path());
    assert!(!t.writes().is_empty());

    // With a daemon socket (the test plays the daemon).
    let sd = tempfile::tempdir().unwrap();
    let sock = sd.path().join("events.sock");
    let rx = UnixDatagram::bind(&sock).unwrap();
    rx.set_nonblocking(true).unwrap();
    let rec2 = tempfile::tempdir().unwrap();
    let out = probe(&Run::record(rec2.path()).env(var::SOCKET, sock.to_str().unwrap()));
    assert_eq!(out, plain, "record mode + daemon socket");
    let mut buf = vec![0u8; 1 << 17];
    let mut n = 0;
    while rx.recv(&mut buf).is_ok() {
        n += 1;
    }
    assert!(n >= 1, "the daemon socket received batches");
}

/// Descriptors the shim did not see opened and that are not regular files
/// (stdout as a pipe, a pipe) cost one `fstat` at their first write, not
/// one per write (strace counts them, record mode); a regular file that
/// takes over such a number (`dup2` onto stdout; `close` and a new `open`)
/// is traced.
#[test]
fn pipes_are_looked_up_once_and_files_that_take_their_numbers_are_traced() {
    pcstream_tests::require_tool("strace", "strace");
    let bin = program("shim_pipes", FP);
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let log = rec.path().join("strace.log");
    let parts = rec.path().join("parts");
    std::fs::create_dir(&parts).unwrap();
    let strace = pcstream_tests::which("strace").unwrap();
    let n = 2000;
    let out = Run::record(&parts).stdout(
        &strace,
        &[
            "-e",
            "trace=fstat,newfstatat,statx",
            "-o",
            log.to_str().unwrap(),
            bin.to_str().unwrap(),
            work.path().to_str().unwrap(),
            &n.to_string(),
        ],
    );
    assert_eq!(out, "x".repeat(n), "stdout: the pipe writes only");
    let stats = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(stats < 200, "{stats} stat calls for {} pipe writes", 2 * n);
    // strace and its fork are traced too: the program's is among them.
    let ts = traces(&parts);
    let lens = |f: &str| -> Vec<(u64, u64)> {
        ts.iter()
            .flat_map(|t| writes_to(t, &work.path().join(f)))
            .map(|w| (w.offset, w.len))
            .collect()
    };
    assert_eq!(lens("a"), vec![(0, 1000)], "dup2 onto stdout");
    assert_eq!(lens("b"), vec![(0, 2000)], "the pipe's number reused");
}
