//! No event lost under the packaged unit's settings: the daemon keeps the
//! kernel's 10-datagram queue on `events.sock` (`event_queue_datagrams =
//! 0`, what a hardened unit gets), and the shims send through its
//! connection socket `events.seq` (`SOCK_SEQPACKET`, a connection per
//! flush), which the listen backlog bounds instead. Each writer records
//! alongside, so the trace holds every event its shim produced: the daemon
//! must have received exactly as many, and no shim may report a drop.
//! - 8 fio jobs (psync, 4 KiB random writes), three rounds;
//! - a SIGSTOPped daemon: a writer's calls stay fast (nothing waits for
//!   the daemon), and what could not be delivered is counted: the events
//!   the daemon got plus the drops the shim reported equal the recording.

mod app_common;
mod daemon_common;

use daemon_common::Daemon;
use pcstream_placement::env as var;
use pcstream_tests::require_tool;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Events in every per-process trace file of `dir` (`PCSTREAM_RECORD_DIR`).
fn recorded_events(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pcstrace") {
            n += app_common::load(&p).events.len() as u64;
        }
    }
    n
}

#[test]
fn eight_fio_jobs_lose_no_event_on_a_ten_datagram_queue() {
    require_tool("fio", "fio");
    let d = Daemon::start("event_queue_datagrams = 0\n");
    let st = d.status();
    assert!(
        st["event_queue_datagrams"].as_u64().unwrap() <= 10,
        "the kernel's queue: {st}"
    );
    assert!(d.run_dir().join("events.seq").exists());
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&rec).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    for round in 0..3 {
        let out = Command::new("fio")
            .args([
                "--name=j",
                "--rw=randwrite",
                "--bs=4k",
                "--size=32m",
                "--numjobs=8",
                "--ioengine=psync",
                "--group_reporting",
            ])
            .arg(format!("--directory={}", data.display()))
            .env("LD_PRELOAD", pcstream_tests::shim())
            .env(var::RUNTIME_DIR, d.run_dir())
            .env(var::RECORD_DIR, &rec)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "fio round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let st = d.settled();
    let produced = recorded_events(&rec);
    eprintln!(
        "fio 8 jobs x 3 rounds: {produced} events produced, {} received, {} dropped",
        st["events"], st["events_dropped_by_clients"]
    );
    assert!(produced > 100_000, "{produced}");
    assert_eq!(st["events_dropped_by_clients"], 0, "{st}");
    assert_eq!(st["malformed_datagrams"], 0, "{st}");
    assert_eq!(st["events"].as_u64().unwrap(), produced, "{st}");
}

#[test]
fn a_stopped_daemon_costs_a_writer_no_wait_and_its_losses_are_counted() {
    require_tool("python3", "python3");
    let d = Daemon::start("event_queue_datagrams = 0\n");
    let pid = d.child.as_ref().unwrap().id() as i32;
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let file = tmp.path().join("f");
    // 12,000 writes at scattered offsets (one event each), a batch flushed
    // after each (PCSTREAM_FLUSH_MS=0): far more batches than the stopped
    // daemon's backlog holds. Then the writer waits for its stdin, so its
    // EXIT (and its count of drops) reaches the daemon after it continues.
    let prog = r#"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
worst = 0.0
for i in range(12000):
    t = time.perf_counter()
    os.pwrite(fd, b"x" * 512, (i * 7919 % 12000) * 4096)
    worst = max(worst, time.perf_counter() - t)
os.close(fd)
print(worst, flush=True)
sys.stdin.read()
"#;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let mut w = Command::new("python3")
        .args(["-c", prog])
        .arg(&file)
        .env("LD_PRELOAD", pcstream_tests::shim())
        .env(var::RUNTIME_DIR, d.run_dir())
        .env(var::RECORD_DIR, &rec)
        .env(var::FLUSH_MS, "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(w.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(Duration::from_millis(500));
    w.stdin.as_mut().unwrap().write_all(b"").unwrap();
    drop(w.stdin.take());
    assert!(w.wait().unwrap().success());
    let worst: f64 = line.trim().parse().unwrap();
    let st = d.settled();
    let produced = recorded_events(&rec);
    let (got, dropped) = (
        st["events"].as_u64().unwrap(),
        st["events_dropped_by_clients"].as_u64().unwrap(),
    );
    eprintln!(
        "stopped daemon: worst write {:.1} ms; {produced} events produced, {got} received, {dropped} dropped",
        worst * 1e3
    );
    assert!(worst < 0.5, "a write waited {worst} s for a stopped daemon");
    assert!(
        dropped > 0,
        "nothing dropped: the daemon was stopped ({st})"
    );
    assert_eq!(
        got + dropped,
        produced,
        "every event received or counted: {st}"
    );
}
