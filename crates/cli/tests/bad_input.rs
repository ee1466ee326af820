//! Bad input end to end, for every command that reads a trace: a clear
//! one-line error naming the file (and line or byte offset), exit status 1,
//! no backtrace, each cause said once, memory bounded (each run here is
//! under a 1 GiB address-space limit), and the recording directory accepted
//! wherever a trace is.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pcstream_placement::trace::TraceWriter;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};

/// `pcstreamctl ARGS` under `ulimit -v` 1 GiB, as the acceptance asks.
fn limited(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_pcstreamctl"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

/// Asserts a one-line error with exit status 1 and returns it.
fn one_line_error(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("pcstreamctl: error: "), "{err}");
    assert!(
        !err.contains("backtrace") && !err.contains("panicked"),
        "{err}"
    );
    err
}

fn batch(events: Vec<wire::Event>) -> wire::TraceRecord {
    wire::TraceRecord {
        record: Some(Record::Batch(wire::EventBatch {
            pid: 1,
            seq: 0,
            events,
        })),
    }
}

fn write_event(t: u64, offset: u64, len: u64) -> wire::Event {
    wire::Event {
        time_ns: t,
        tid: 1,
        kind: Some(Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino: 7 }),
            offset,
            len,
            signature: 0x5167,
            call: wire::WriteCall::Write as i32,
            ..Default::default()
        })),
    }
}

/// A trace of `records`, returned with its path.
fn trace(dir: &Path, name: &str, records: &[wire::TraceRecord]) -> PathBuf {
    let p = dir.join(name);
    let mut w = TraceWriter::create(&p).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();
    p
}

/// A small valid trace: 64 writes of 16 KiB, rewriting 256 KiB of one file.
fn good_records() -> Vec<wire::TraceRecord> {
    let events = (0..64)
        .map(|i| write_event(i + 1, (i % 16) * 16384, 16384))
        .collect();
    vec![batch(events)]
}

#[test]
fn every_trace_command_accepts_the_recording_directory() {
    let dir = tempfile::tempdir().unwrap();
    trace(dir.path(), "trace.pcstrace", &good_records());
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["trace-stats", d],
        vec!["compare", "--policies", "baseline", d],
    ] {
        let out = limited(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("trace.pcstrace") || text.contains(d),
            "{text}"
        );
    }
    // sim replays block traces, not recordings: it says so and names the command that does.
    let err = one_line_error(&limited(&["sim", "--trace", d, "--format", "msr"]));
    assert!(
        err.contains("is a directory") && err.contains("pcstreamctl compare"),
        "{err}"
    );
}

#[test]
fn a_torn_trace_gets_the_same_answer_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let p = trace(dir.path(), "whole.pcstrace", &good_records());
    let bytes = std::fs::read(&p).unwrap();
    let torn = dir.path().join("torn.pcstrace");
    std::fs::write(&torn, &bytes[..bytes.len() / 2]).unwrap();
    let t = torn.to_str().unwrap();
    let stats = one_line_error(&limited(&["trace-stats", t]));
    let compare = one_line_error(&limited(&["compare", t]));
    assert_eq!(stats, compare);
    assert!(
        stats.contains("torn.pcstrace: byte offset 8: file ends inside"),
        "{stats}"
    );
}

#[test]
fn each_cause_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcstrace");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["compare", m],
        vec!["trace-stats", m],
        vec!["sim", "--trace", m, "--format", "msr"],
    ] {
        let err = one_line_error(&limited(&args));
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert_eq!(err.matches("missing.pcstrace").count(), 1, "{err}");
    }
}

#[test]
fn impossible_sizes_and_offsets_are_errors_before_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut huge = good_records();
    huge.push(batch(vec![write_event(100, 0, 1 << 40)]));
    let huge = trace(dir.path(), "huge.pcstrace", &huge);
    let mut far = good_records();
    far.push(batch(vec![write_event(100, (1 << 63) - 4096, 8192)]));
    let far = trace(dir.path(), "far.pcstrace", &far);
    let block = trace(
        dir.path(),
        "block.pcstrace",
        &[wire::TraceRecord {
            record: Some(Record::Block(wire::BlockRequest {
                time_ns: 1,
                sector: 1 << 62,
                nr_sectors: 8,
                op: wire::BlockOp::Write as i32,
                ..Default::default()
            })),
        }],
    );
    for (p, what) in [
        (&huge, "write event of 1099511627776 bytes exceeds"),
        (&far, "ends past the largest file"),
        (&block, "block request of 4096 bytes"),
    ] {
        let err = one_line_error(&limited(&["compare", p.to_str().unwrap()]));
        assert!(err.contains(p.to_str().unwrap()), "{err}");
        assert!(err.contains("byte offset "), "{err}");
        assert!(err.contains(what), "{err}");
    }
}

#[test]
fn endless_block_trace_lines_are_bounded() {
    for format in ["msr", "blkparse", "fio"] {
        let err = one_line_error(&limited(&[
            "sim",
            "--trace",
            "/dev/zero",
            "--format",
            format,
        ]));
        assert!(
            err.contains("/dev/zero:1: line longer than the 65536-byte limit"),
            "{err}"
        );
    }
}

#[test]
fn long_input_is_elided_in_messages() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long.csv");
    let line = format!("1,h,0,{},0,4096,1\n", "W".repeat(20_000));
    std::fs::write(&p, line).unwrap();
    let err = one_line_error(&limited(&[
        "sim",
        "--trace",
        p.to_str().unwrap(),
        "--format",
        "msr",
    ]));
    assert!(err.len() < 300, "{err}");
    assert!(err.contains("(20000 bytes)"), "{err}");
}

#[test]
fn record_into_a_file_says_it_is_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out.txt");
    std::fs::write(&f, "x").unwrap();
    let err = one_line_error(&limited(&[
        "record",
        "-o",
        f.to_str().unwrap(),
        "--",
        "true",
    ]));
    assert!(
        err.contains("out.txt: exists and is not a directory"),
        "{err}"
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"x");
}
