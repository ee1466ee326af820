//! Record mode never loses silently: a process that switches user under
//! `pcstreamctl record` (`runuser -u nobody`) keeps its writes; a record
//! directory on a 1 MiB tmpfs that fills up leaves per-process files whose
//! every record is whole (read strictly, no torn-tail tolerance), a merged
//! trace, and a summary that counts what could not be appended, which with
//! what was recorded accounts for every write; the shim says nothing on the
//! application's stderr. Needs root (runuser, mount); ~2 s.

mod shim_common;

use pcstream_placement::trace::TraceReader;
use pcstream_placement::wire::{event::Kind, trace_record::Record};
use pcstream_tests::pcstreamctl;
use shim_common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn require_root(who: &str) {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(uid, 0, "{who} needs root (runuser, mount)");
}

/// Paths and write events of a merged trace (strict reader).
fn merged(trace: &Path) -> (Vec<String>, usize) {
    let mut paths = Vec::new();
    let mut writes = 0;
    for rec in TraceReader::open(trace).unwrap() {
        if let Some(Record::Batch(b)) = rec.unwrap().record {
            for e in b.events {
                match e.kind {
                    Some(Kind::Open(o)) => paths.push(o.path.clone()),
                    Some(Kind::Write(_)) => writes += 1,
                    _ => {}
                }
            }
        }
    }
    (paths, writes)
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_process_that_switches_user_keeps_its_writes() {
    require_root("a_process_that_switches_user_keeps_its_writes");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = base.path().join("rec");
    let work = base.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    let target = work.join("by-nobody");
    let o = Command::new(pcstreamctl())
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "runuser", "-u", "nobody", "--", "sh", "-c"])
        .arg(format!("echo written by nobody > {}", target.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("Permission denied"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written by nobody\n"
    );
    let (paths, writes) = merged(&out.join("trace.pcstrace"));
    assert!(
        paths.iter().any(|p| Path::new(p) == target),
        "the write as nobody is in the trace: {paths:?}"
    );
    assert!(writes >= 1);
    assert_eq!(summary(&out)["lost_events"], 0, "{err}");
}

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_record_directory_gives_a_readable_trace_and_counts_the_loss() {
    require_root("a_full_record_directory_gives_a_readable_trace_and_counts_the_loss");
    let base = tempfile::tempdir().unwrap();
    let out = base.path().join("rec");
    let parts = out.join("procs");
    std::fs::create_dir_all(&parts).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1M", "tmpfs"])
        .arg(&parts)
        .status()
        .unwrap();
    assert!(st.success(), "mount a 1 MiB tmpfs");
    let _m = Mount(parts.clone());
    let work = base.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // 8 threads × 20,000 pwrites that never coalesce: ~4 MB of events.
    const N: usize = 20_000;
    let bin = program("shim_contend", FP);
    let o = Command::new(pcstreamctl())
        .args(["record", "--keep-parts", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .arg(&work)
        .arg(N.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ok\n",
        "the app saw nothing"
    );
    assert!(!err.contains("pcstream["), "no shim message: {err}");
    // Every per-process file reads strictly: whole records only.
    let t = traces(&parts);
    assert!(!t.is_empty());
    let recorded: usize = t
        .iter()
        .map(|t| {
            (0..8)
                .map(|i| writes_to(t, &work.join(format!("t{i}"))).len())
                .sum::<usize>()
        })
        .sum();
    let s = summary(&out);
    let lost = s["lost_events"].as_u64().unwrap();
    // Events the shim dropped before they reached a batch (pool pressure
    // while the appends fail) are the EXIT events' `dropped`, or — when an
    // EXIT could not be appended — part of `lost_events`.
    let dropped = s["dropped"].as_u64().unwrap();
    assert!(lost > 0, "the loss is counted: {s}");
    assert!(recorded < 8 * N, "the tmpfs did fill up");
    assert!(
        recorded as u64 + lost + dropped >= (8 * N) as u64,
        "recorded {recorded} + lost {lost} + dropped {dropped} account for {} writes",
        8 * N
    );
    assert!(err.contains("could not be appended"), "{err}");
    let (_, writes) = merged(&out.join("trace.pcstrace"));
    assert!(writes >= recorded);
}
