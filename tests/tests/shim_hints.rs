//! Streams become kernel write-lifetime hints: with a static mapping
//! (`PCSTREAM_MAP`) every file written through a mapped call path carries
//! the mapped hint (`F_GET_RW_HINT`); a bad mapping file is named on stderr
//! and ignored; the application's own malformed `F_SET_RW_HINT` (RocksDB
//! 7.8's 4-byte enum) is recorded with what it meant and repaired, while the
//! application still sees the real call's EINVAL.

mod shim_common;

use pcstream_placement::env as var;
use pcstream_placement::hint::RwHint;
use pcstream_placement::wire::{self, event::Kind};
use shim_common::*;
use std::path::PathBuf;

fn four_files(dir: &std::path::Path) -> Vec<PathBuf> {
    (1..=4).map(|i| dir.join(format!("f{i}"))).collect()
}

fn args(files: &[PathBuf]) -> Vec<&str> {
    files.iter().map(|p| p.to_str().unwrap()).collect()
}

fn hints(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("hint "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect()
}

/// Learns the signature of each of the 4 paths (one file each).
fn learn(bin: &std::path::Path) -> Vec<u64> {
    let work = tempfile::tempdir().unwrap();
    let rec = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    Run::record(rec.path()).stdout(bin, &args(&files));
    let t = only_trace(rec.path());
    files
        .iter()
        .map(|f| {
            let w = writes_to(&t, f);
            assert_eq!(w.len(), 8);
            w[0].signature
        })
        .collect()
}

#[test]
fn static_mapping_sets_the_mapped_hints() {
    let bin = program("shim_paths", FP);
    let sigs = learn(&bin);
    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("streams.map");
    let mut text = String::from("# learned by the test\n");
    for (i, s) in sigs.iter().enumerate() {
        text.push_str(&format!("{s:016x} {}\n", i + 1));
    }
    std::fs::write(&map, text).unwrap();

    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let plain = hints(&Run::plain().stdout(&bin, &args(&files)));
    assert_eq!(plain, vec![0, 0, 0, 0], "no hints without the shim");

    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let rec = tempfile::tempdir().unwrap();
    let out = Run::record(rec.path())
        .env(var::MAP, map.to_str().unwrap())
        .stdout(&bin, &args(&files));
    let want: Vec<u64> = (1..=4).map(|s| RwHint::for_stream(s).raw()).collect();
    assert_eq!(hints(&out), want);
    let t = only_trace(rec.path());
    for (i, f) in files.iter().enumerate() {
        for w in writes_to(&t, f) {
            assert_eq!(w.stream, i as u32 + 1);
            assert_eq!(w.hint as u64, want[i]);
        }
    }

    // A mapping alone (no trace, no daemon) is enough.
    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let out = Run::shim()
        .env(var::MAP, map.to_str().unwrap())
        .stdout(&bin, &args(&files));
    assert_eq!(hints(&out), want);
}

/// A bad map line and a bad option are named, one line each, in the
/// system log (here a socket of the test's, `PCSTREAM_SYSLOG`), never on
/// the application's stderr; the shim goes on without the map.
#[test]
fn bad_mapping_is_named_in_the_system_log_and_ignored() {
    let bin = program("shim_paths", FP);
    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("bad.map");
    std::fs::write(&map, "0123456789abcdef 1\nnot-a-signature 2\n").unwrap();
    let log_path = cfg.path().join("log");
    let log = std::os::unix::net::UnixDatagram::bind(&log_path).unwrap();
    log.set_nonblocking(true).unwrap();
    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let o = Run::shim()
        .env(var::MAP, map.to_str().unwrap())
        .env("PCSTREAM_FLUSH_MS", "soon")
        .env("PCSTREAM_SYSLOG", log_path.to_str().unwrap())
        .output(&bin, &args(&files));
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "",
        "the application's stderr"
    );
    let mut lines = Vec::new();
    let mut b = [0u8; 4096];
    while let Ok(n) = log.recv(&mut b) {
        lines.push(String::from_utf8_lossy(&b[..n]).into_owned());
    }
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines.iter().all(|l| l.starts_with("<12>pcstream[")),
        "{lines:?}"
    );
    assert!(lines[0].contains("PCSTREAM_FLUSH_MS=\"soon\""), "{lines:?}");
    assert!(
        lines[1].contains(&format!("{}:2", map.display())),
        "{lines:?}"
    );
    assert_eq!(hints(&String::from_utf8_lossy(&o.stdout)), vec![0, 0, 0, 0]);
    // With PCSTREAM_DEBUG=1 the user asked for them on stderr as well.
    let o = Run::shim()
        .env(var::MAP, map.to_str().unwrap())
        .env("PCSTREAM_DEBUG", "1")
        .env("PCSTREAM_SYSLOG", log_path.to_str().unwrap())
        .output(&bin, &args(&files));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("{}:2", map.display())));
}

/// A mapping named by mistake that is not a regular file (a device that
/// never ends, a FIFO nobody writes) is refused at once and named in the
/// system log; a FIFO under the daemon's table name is skipped. The
/// program starts, runs and exits as without the shim (it used to block
/// in `open`, or read `/dev/zero` until memory ran out).
#[test]
fn a_mapping_that_is_not_a_regular_file_is_refused_at_once() {
    let bin = program("shim_paths", FP);
    let cfg = tempfile::tempdir().unwrap();
    let fifo = cfg.path().join("fifo.map");
    pcstream_tests::mkfifo(&fifo);
    let log_path = cfg.path().join("log");
    let log = std::os::unix::net::UnixDatagram::bind(&log_path).unwrap();
    log.set_nonblocking(true).unwrap();
    for map in ["/dev/zero", fifo.to_str().unwrap()] {
        let work = tempfile::tempdir().unwrap();
        let files = four_files(work.path());
        let o = Run::shim()
            .env(var::MAP, map)
            .env("PCSTREAM_SYSLOG", log_path.to_str().unwrap())
            .output_within(&bin, &args(&files), 30);
        assert!(o.status.success(), "{map}: {o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{map}");
        assert_eq!(hints(&String::from_utf8_lossy(&o.stdout)), vec![0, 0, 0, 0]);
        let mut b = [0u8; 4096];
        let n = log.recv(&mut b).expect("a line in the system log");
        let line = String::from_utf8_lossy(&b[..n]);
        assert!(
            line.contains(&format!("{map}: not a regular file")),
            "{line}"
        );
    }
    // The daemon's table name as a FIFO, beside a socket that exists.
    let run = tempfile::tempdir().unwrap();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    for name in [format!("mapping.{uid}"), "mapping.all".to_string()] {
        pcstream_tests::mkfifo(&run.path().join(name));
    }
    let sock = run.path().join("events.sock");
    let _events = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let o = Run::shim()
        .env("PCSTREAM_RUNTIME_DIR", run.path().to_str().unwrap())
        .env(var::SOCKET, sock.to_str().unwrap())
        .output_within(&bin, &args(&files), 30);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(hints(&String::from_utf8_lossy(&o.stdout)), vec![0, 0, 0, 0]);
}

fn app_hint_events(t: &ProcessTrace) -> Vec<wire::AppHintEvent> {
    t.events()
        .filter_map(|e| match &e.kind {
            Some(Kind::AppHint(h)) => Some(*h),
            _ => None,
        })
        .collect()
}

#[test]
fn malformed_application_hints_are_recorded_and_repaired() {
    let bin = program("shim_apphint", FP);
    let run = |how: Run| {
        let work = tempfile::tempdir().unwrap();
        how.stdout(&bin, &[work.path().to_str().unwrap()])
    };
    let plain = run(Run::plain());
    assert!(plain.contains("malformed set rc=-1 errno=22"), "{plain}");
    assert!(plain.contains("inode hints sst=0 wal=2"), "{plain}");
    assert_eq!(run(Run::shim()), plain, "pure pass-through without a sink");

    let rec = tempfile::tempdir().unwrap();
    let out = run(Run::record(rec.path()));
    assert!(
        out.contains("malformed set rc=-1 errno=22"),
        "the app still sees EINVAL: {out}"
    );
    assert!(
        out.contains("inode hints sst=4 wal=2"),
        "repaired to LONG: {out}"
    );
    let h = app_hint_events(&only_trace(rec.path()));
    assert_eq!(h.len(), 2);
    assert_eq!(
        (h[0].requested, h[0].accepted, h[0].errno, h[0].repaired),
        (4, false, libc::EINVAL, true)
    );
    assert_eq!(
        (h[1].requested, h[1].accepted, h[1].repaired),
        (2, true, false)
    );

    let rec = tempfile::tempdir().unwrap();
    let out = run(Run::record(rec.path()).env(var::FIX_APP_HINTS, "0"));
    assert_eq!(out, plain, "repair off: exactly what the kernel did");
    let h = app_hint_events(&only_trace(rec.path()));
    assert_eq!(
        (h[0].requested, h[0].repaired),
        (4, false),
        "still records what it meant"
    );
}

#[test]
fn the_hint_is_set_once_per_file_not_per_write() {
    pcstream_tests::require_tool("strace", "strace");
    let bin = program("shim_paths", FP);
    let sigs = learn(&bin);
    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("streams.map");
    let text: String = sigs
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{s:016x} {}\n", i + 1))
        .collect();
    std::fs::write(&map, text).unwrap();
    let work = tempfile::tempdir().unwrap();
    let files = four_files(work.path());
    let log = cfg.path().join("strace.log");
    let strace = pcstream_tests::which("strace").unwrap();
    let mut a = vec![
        "-f",
        "-e",
        "trace=fcntl",
        "-o",
        log.to_str().unwrap(),
        bin.to_str().unwrap(),
    ];
    a.extend(args(&files));
    let out = Run::shim()
        .env(var::MAP, map.to_str().unwrap())
        .stdout(&strace, &a);
    let want: Vec<u64> = (1..=4).map(|s| RwHint::for_stream(s).raw()).collect();
    assert_eq!(hints(&out), want);
    let trace = std::fs::read_to_string(&log).unwrap();
    // strace prints the command as F_SET_RW_HINT (or its number on old versions).
    let sets = trace
        .lines()
        .filter(|l| l.contains("F_SET_RW_HINT") || l.contains("0x40c"))
        .count();
    assert_eq!(
        sets, 4,
        "one F_SET_RW_HINT per file for 32 writes:\n{trace}"
    );
}

/// The write events to `dst` in a recorded run of `bin args` (every
/// process: `python3` may be a launcher script).
fn recorded_copy(
    bin: &std::path::Path,
    args: &[&str],
    dst: &std::path::Path,
) -> Vec<(u64, u64, i32, u64)> {
    let rec = tempfile::tempdir().unwrap();
    Run::record(rec.path()).stdout(bin, args);
    traces(rec.path())
        .iter()
        .flat_map(|t| {
            writes_to(t, dst)
                .into_iter()
                .map(|w| (w.offset, w.len, w.call, w.signature))
        })
        .collect()
}

/// `cp` (coreutils 9: `copy_file_range`) and Python's `shutil.copyfile`
/// (`sendfile`) copy in the kernel, without a `write`: the copy is traced
/// as written by the calling path, and the mapped stream's hint lands on
/// the copy.
#[test]
fn kernel_side_copies_by_cp_and_python_are_traced_and_hinted() {
    pcstream_tests::require_tool("python3", "python3");
    let cp = pcstream_tests::which("cp").expect("cp");
    let py = pcstream_tests::which("python3").unwrap();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    let data: Vec<u8> = (0..(3 << 20) + 123)
        .map(|i: u32| (i * 7 + i / 4096) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let s = src.to_str().unwrap();
    let copy_py = "import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])";
    let copy = wire::WriteCall::Copy as i32;
    let mut sigs = vec![];
    for (bin, script) in [(&cp, None), (&py, Some(copy_py))] {
        let dst = work.path().join("learnt");
        let mut a: Vec<&str> = script.map(|x| vec!["-c", x]).unwrap_or_default();
        a.extend([s, dst.to_str().unwrap()]);
        let w = recorded_copy(bin, &a, &dst);
        assert!(
            !w.is_empty(),
            "{} wrote nothing the trace saw",
            bin.display()
        );
        assert!(w.iter().all(|x| x.2 == copy && x.3 == w[0].3), "{w:?}");
        let total: u64 = w.iter().map(|x| x.1).sum();
        assert_eq!(total, data.len() as u64, "{w:?}");
        assert_eq!(w[0].0, 0, "{w:?}");
        assert_eq!(std::fs::read(&dst).unwrap(), data);
        std::fs::remove_file(&dst).unwrap();
        sigs.push(w[0].3);
    }
    assert_ne!(sigs[0], sigs[1], "cp's and python's copy paths");

    let cfg = tempfile::tempdir().unwrap();
    let map = cfg.path().join("streams.map");
    std::fs::write(&map, format!("{:016x} 2\n{:016x} 3\n", sigs[0], sigs[1])).unwrap();
    for (i, (bin, script)) in [(&cp, None), (&py, Some(copy_py))].into_iter().enumerate() {
        let dst = work.path().join(format!("copy{i}"));
        let mut a: Vec<&str> = script.map(|x| vec!["-c", x]).unwrap_or_default();
        a.extend([s, dst.to_str().unwrap()]);
        Run::shim()
            .env(var::MAP, map.to_str().unwrap())
            .stdout(bin, &a);
        assert_eq!(std::fs::read(&dst).unwrap(), data, "the copy is intact");
        assert_eq!(
            pcstream_tests::rw_hint(&dst),
            RwHint::for_stream(i as u32 + 2).raw(),
            "{}'s copy carries its stream's hint",
            bin.display()
        );
    }
}
