//! `pcstreamctl compare` end to end: exit codes and messages for bad input,
//! and a JSON report on a small file-level trace.

use std::path::Path;
use std::process::Command;

use pcstream_placement::trace::TraceWriter;
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};

fn pcstreamctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcstreamctl"))
}

/// One file rewritten in place many times (hot) next to one written once (cold).
fn write_trace(path: &Path) {
    let mut w = TraceWriter::create(path).unwrap();
    let mut events = Vec::new();
    let mut t = 0;
    let mut ev = |kind| {
        t += 1;
        wire::Event {
            time_ns: t,
            tid: 1,
            kind: Some(kind),
        }
    };
    let write = |ino: u64, page: u64, sig: u64| {
        Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            offset: page * 4096,
            len: 4 * 4096,
            signature: sig,
            ..Default::default()
        })
    };
    for p in (0..2048).step_by(4) {
        events.push(ev(write(2, p, 0xc01d)));
    }
    for i in 0..4000u64 {
        events.push(ev(write(1, (i * 4) % 256, 0x407)));
    }
    w.write_record(&wire::TraceRecord {
        record: Some(Record::Batch(wire::EventBatch {
            pid: 1,
            seq: 0,
            events,
        })),
    })
    .unwrap();
    w.finish().unwrap();
}

#[test]
fn json_report_on_a_file_level_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcstrace");
    write_trace(&trace);
    let out = pcstreamctl()
        .args([
            "compare",
            "--json",
            "--writeback-pages",
            "1",
            "--policies",
            "baseline,oracle",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &j["traces"][0];
    assert_eq!(t["source"], "fs-model");
    assert_eq!(t["join"]["write_pages"], 2048 + 16000);
    let runs = t["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["policy"], "baseline");
    assert_eq!(runs[1]["policy"], "oracle");
    let (b, o) = (
        runs[0]["waf"].as_f64().unwrap(),
        runs[1]["waf"].as_f64().unwrap(),
    );
    assert!(o <= b, "oracle {o} > baseline {b}");
    assert_eq!(j["settings"]["trim"], true);

    let out = pcstreamctl()
        .args([
            "compare",
            "--json",
            "--trim",
            "off",
            "--policies",
            "baseline",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["settings"]["trim"], false);
    assert_eq!(j["traces"][0]["runs"][0]["policy"], "baseline");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcstrace");
    let out = pcstreamctl().arg("compare").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing.pcstrace"), "{err}");

    let junk = dir.path().join("junk.pcstrace");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let out = pcstreamctl().arg("compare").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("junk.pcstrace") && err.contains("not a pcstream trace"),
        "{err}"
    );

    let out = pcstreamctl()
        .args(["compare", "--policies", "baseline,fifo"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"fifo\"") && err.contains("autostream-sfr, autostream-mq"),
        "{err}"
    );
}
