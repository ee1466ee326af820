//! `pcstreamctl record` and `run` end to end on a small command tree
//! (tests/c/app_forker.c: threads, fork children, an exec): the merged trace
//! is time-ordered, complete and self-describing; exit statuses and signals
//! pass through; the shim is found and LD_PRELOAD preserved.

mod app_common;

use pcstream_placement::wire::InvalidateKind;
use pcstream_tests::{c_dir, compile_c, pcstreamctl, shim};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn forker(dir: &std::path::Path) -> std::path::PathBuf {
    let exe = dir.join("app_forker");
    compile_c(
        &c_dir().join("app_forker.c"),
        &exe,
        &["-O1", "-g", "-fno-omit-frame-pointer"],
    );
    exe
}

#[test]
fn record_merges_threads_forks_and_execs_into_one_ordered_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = forker(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let out = tmp.path().join("rec");
    shim();
    let o = Command::new(pcstreamctl())
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(&work)
        .arg("3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(3),
        "record must exit with the command's status\n{stderr}"
    );
    assert!(
        stderr.contains("process(es)"),
        "summary paragraph missing:\n{stderr}"
    );
    assert!(
        !out.join("procs").exists(),
        "per-process files are removed without --keep-parts"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();

    let t = app_common::load(&out.join("trace.pcstrace"));
    t.check_merged();
    assert_eq!(
        t.header.command,
        [exe.to_str().unwrap(), work.to_str().unwrap(), "3"]
    );
    assert!(t.header.producer.starts_with("pcstreamctl record"));
    let pids: std::collections::BTreeSet<u32> = t.events.iter().map(|(p, _)| *p).collect();
    assert!(
        pids.len() >= 3,
        "parent and 2 fork children wrote: {pids:?}"
    );
    // One file per process image: parent, 2 children, the exec child before
    // and after exec.
    assert!(summary["processes"].as_u64() >= Some(5), "{summary}");
    assert_eq!(summary["events"].as_u64(), Some(t.events.len() as u64));

    let is_log = |n: &str| n.starts_with("thread.log-");
    let is_dat = |n: &str| n.starts_with("child.dat-") || n.starts_with("scratch-");
    let log = t.write_sigs(&is_log);
    let dat = t.write_sigs(&is_dat);
    let expect_log: u64 = (0..2)
        .flat_map(|i| (0..200).map(move |k| format!("thread {i} record {k}\n").len() as u64))
        .sum();
    assert_eq!(
        log.values().sum::<u64>(),
        expect_log,
        "every log append recorded once"
    );
    assert_eq!(dat.values().sum::<u64>(), 2 * (16 * 4096 + 1000));
    assert!(
        log.keys().all(|s| !dat.contains_key(s)),
        "log {log:?} vs data {dat:?}"
    );
    assert_eq!(
        t.invalidated(InvalidateKind::Unlink, &|n| n.starts_with("scratch-")),
        ["scratch-0", "scratch-1"].map(String::from).into()
    );

    let paths = app_common::call_paths(&out);
    for s in log.keys() {
        assert!(
            paths[s].contains("write_log_record"),
            "{s:016x}: {}",
            paths[s]
        );
    }
    for s in dat.keys() {
        assert!(
            paths[s].contains("write_data_block"),
            "{s:016x}: {}",
            paths[s]
        );
    }
    let human = Command::new(pcstreamctl())
        .arg("trace-stats")
        .arg(&out)
        .output()
        .unwrap();
    assert!(human.status.success());
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("write_log_record") && text.contains("app_forker.c:"),
        "{text}"
    );
}

#[test]
fn keep_parts_keeps_readable_per_process_files() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = forker(tmp.path());
    let out = tmp.path().join("rec");
    shim();
    let st = Command::new(pcstreamctl())
        .arg("record")
        .arg("--keep-parts")
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(tmp.path())
        .arg("0")
        .status()
        .unwrap();
    assert!(st.success());
    let parts: Vec<_> = std::fs::read_dir(out.join("procs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(parts.len() >= 4, "{parts:?}");
    for p in &parts {
        let o = Command::new(pcstreamctl())
            .arg("trace-stats")
            .arg(p)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Refuses to overwrite without --force.
    let o = Command::new(pcstreamctl())
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
}

#[test]
fn run_passes_exit_status_and_signals_through() {
    shim();
    let run = |script: &str| {
        Command::new(pcstreamctl())
            .args(["run", "--", "sh", "-c", script])
            .status()
            .unwrap()
    };
    assert_eq!(run("exit 5").code(), Some(5));
    assert_eq!(run("kill -KILL $$").code(), Some(128 + 9));

    // SIGTERM sent to pcstreamctl alone reaches the command.
    let mut child = Command::new(pcstreamctl())
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    // SAFETY: kill has no memory preconditions; the pid is our unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(42));
}

#[test]
fn run_prepends_the_shim_to_ld_preload_and_reports_a_missing_shim() {
    let so = shim();
    let o = Command::new(pcstreamctl())
        .args(["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""])
        .env("LD_PRELOAD", "/nonexistent/libother.so")
        .output()
        .unwrap();
    assert!(o.status.success());
    let canon = so.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("{}:/nonexistent/libother.so", canon.display())
    );
    let o = Command::new(pcstreamctl())
        .args(["run", "--shim", "/nonexistent/libpcstream.so", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--shim /nonexistent/libpcstream.so"), "{err}");
}

#[test]
fn interrupted_record_still_merges_and_reports_the_status() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rec");
    let data = tmp.path().join("data");
    shim();
    let script = format!(
        "trap 'exit 7' INT; echo x > {}; echo ready; while :; do sleep 0.05; done",
        data.display()
    );
    let mut child = Command::new(pcstreamctl())
        .arg("record")
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    // SAFETY: kill has no memory preconditions; the pid is our unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(7));
    let t = app_common::load(&out.join("trace.pcstrace"));
    t.check_merged();
    let w = t.write_sigs(&|n| n == "data");
    assert_eq!(
        w.values().sum::<u64>(),
        2,
        "the shell's write before the signal"
    );
}

/// `record` compares what the shim saw with what the command's processes
/// sent to storage (the kernel's per-task I/O accounting): writes through
/// `mmap` (invisible to any `LD_PRELOAD` shim) get a note naming the gap;
/// ordinary writes do not.
#[test]
fn record_names_writes_the_shim_could_not_see() {
    pcstream_tests::require_tool("python3", "python3");
    shim();
    let tmp = tempfile::tempdir().unwrap();
    let rec = |name: &str, script: &str| {
        let out = tmp.path().join(name);
        let o = Command::new(pcstreamctl())
            .args(["record", "-o"])
            .arg(&out)
            .args(["--", "python3", "-c", script])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        (String::from_utf8_lossy(&o.stderr).into_owned(), summary)
    };
    let (err, s) = rec(
        "write",
        "f = open('w', 'wb'); f.write(b'x' * (8 << 20)); f.flush(); import os; os.fsync(f.fileno())",
    );
    if s["storage_write_bytes"].as_u64().unwrap() < 8 << 20 {
        // tmpfs (no writeback) or a kernel without task I/O accounting.
        eprintln!(
            "skipped: no storage write accounting for {}: {s}",
            tmp.path().display()
        );
        return;
    }
    assert!(!err.contains("note: the command's processes sent"), "{err}");
    let (err, s) = rec(
        "mmap",
        "import mmap\n\
         f = open('m', 'w+b'); f.truncate(8 << 20)\n\
         m = mmap.mmap(f.fileno(), 8 << 20); m[:] = b'x' * (8 << 20); m.flush()",
    );
    assert!(s["storage_write_bytes"].as_u64().unwrap() >= 8 << 20, "{s}");
    assert!(
        err.contains("note: the command's processes sent ") && err.contains("mmap"),
        "{err}"
    );
}
