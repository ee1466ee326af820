//! `pcstreamctl target` end to end: a real target process driven over
//! loopback by the nvme-target client, stopped by SIGTERM; its JSON WAF
//! equals what `pcstreamctl sim` computes replaying the trace it logged;
//! a trace that fails stops without failing the host's writes; bad flags
//! are one-line errors.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use nvme_target::client::Client;
use nvme_target::DEFAULT_NQN;

fn pcstreamctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcstreamctl"))
}

/// Starts `pcstreamctl target ARGS` on a free port: the child (stdout
/// piped), its address, and its stderr's lines as they come.
fn spawn_target(args: &[&str]) -> (Child, SocketAddr, Receiver<String>) {
    let (child, addr, _, rx) = spawn_target_banner(args);
    (child, addr, rx)
}

/// As [`spawn_target`], with the line that says where it listens.
fn spawn_target_banner(args: &[&str]) -> (Child, SocketAddr, String, Receiver<String>) {
    let mut child = pcstreamctl()
        .args(["target", "--listen", "127.0.0.1:0", "--interval", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let addr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("target exited before listening");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break (
                rest.split_whitespace().next().unwrap().parse().unwrap(),
                line,
            );
        }
    };
    (child, addr.0, addr.1, rx)
}

#[test]
fn the_startup_line_shows_the_configured_device() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("dev.toml");
    std::fs::write(
        &toml,
        "capacity = 67108864\nruhs = 4\nop = 0.25\nru_size = 524288\n",
    )
    .unwrap();
    let (child, _, banner, _) = spawn_target_banner(&["--config", toml.to_str().unwrap()]);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(banner.contains("64 MiB, 4 RUHs of 512 KiB"), "{banner}");
}

fn sigterm(child: &Child) {
    // SAFETY: signalling our own child by its pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
}

#[test]
fn a_failing_trace_fails_no_write_and_the_report_still_prints() {
    let (child, addr, rx) = spawn_target(&[
        "--capacity",
        "64M",
        "--ruhs",
        "4",
        "--op",
        "0.25",
        "--json",
        "--trace",
        "/dev/full",
    ]);
    {
        let a = Client::admin(addr, DEFAULT_NQN).unwrap();
        let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
        for i in 0..400u64 {
            let c = q.write(i, &[i as u8; 4096], Some(1)).unwrap();
            assert_eq!(c.status, 0, "write {i}");
        }
    }
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let err: Vec<String> = rx.try_iter().collect();
    assert_eq!(out.status.code(), Some(1), "{err:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["host_bytes"].as_u64(), Some(400 * 4096), "{report}");
    assert!(report["replay"].is_null(), "{report}");
    let te = report["trace_error"].as_str().unwrap_or_default();
    assert!(te.contains("/dev/full"), "{report}");
    let last = err.last().map(String::as_str).unwrap_or_default();
    assert!(
        last.starts_with("pcstreamctl: error: trace /dev/full"),
        "{err:?}"
    );
    let logged = err.iter().filter(|l| l.contains("tracing stopped")).count();
    assert_eq!(logged, 2, "one log line and the error: {err:?}");
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which ends with ')'): utime, stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / hz
}

#[test]
fn out_of_file_descriptors_the_accept_loop_backs_off() {
    let (child, addr, rx) = spawn_target(&["--capacity", "64M", "--ruhs", "4", "--op", "0.25"]);
    let lim = libc::rlimit {
        rlim_cur: 32,
        rlim_max: 32,
    };
    // SAFETY: prlimit on our own child with a valid rlimit; no old value asked.
    let r = unsafe {
        libc::prlimit(
            child.id() as i32,
            libc::RLIMIT_NOFILE,
            &lim,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, 0);
    let idle: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let c0 = cpu_secs(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_secs(child.id()) - c0;
    let lines: Vec<String> = rx.try_iter().collect();
    let accept_lines = lines.iter().filter(|l| l.contains("accept:")).count();
    assert!(used < 0.3, "{used} CPU s in 2 s with accept failing");
    assert!(
        (1..=2).contains(&accept_lines),
        "{accept_lines} accept lines: {:?}",
        &lines[..lines.len().min(5)]
    );
    // Once the sockets close, the target serves again.
    drop(idle);
    let mut served = Err(std::io::Error::other("not tried"));
    for _ in 0..50 {
        served = Client::admin(addr, DEFAULT_NQN).and_then(|a| {
            let mut q = a.io_queue(DEFAULT_NQN, 1)?;
            q.write(0, &[1u8; 4096], None)
        });
        if served.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(served.unwrap().status, 0);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
}

#[test]
fn target_waf_equals_the_offline_replay_of_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.fio");
    let mut child = pcstreamctl()
        .args([
            "target",
            "--listen",
            "127.0.0.1:0",
            "--capacity",
            "64M",
            "--ruhs",
            "3",
        ])
        .args(["--ru-size", "256K", "--interval", "0", "--json", "--trace"])
        .arg(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr: SocketAddr = loop {
        line.clear();
        assert_ne!(err.read_line(&mut line).unwrap(), 0, "target exited");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    {
        let a = Client::admin(addr, DEFAULT_NQN).unwrap();
        let mut q = a.io_queue(DEFAULT_NQN, 1).unwrap();
        let nlb = (64u64 << 20) / 4096;
        let mut x = 99u64;
        let cmds = (0..nlb * 2).map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (
                Client::write_cmd((x >> 20) % (nlb - 2), 2, Some((i % 3) as u16)),
                vec![3u8; 8192],
            )
        });
        assert_eq!(q.pipeline(32, cmds).unwrap(), 0);
    }
    // SAFETY: signalling our own child by its pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let waf = report["waf"].as_f64().unwrap();
    assert!(waf > 1.0, "{report}");
    assert_eq!(
        report["host_bytes"].as_u64(),
        Some((64 << 20) / 4096 * 2 * 8192)
    );
    let replay = report["replay"].as_str().unwrap();
    let args: Vec<&str> = replay
        .split_whitespace()
        .skip(1)
        .chain(["--json"])
        .collect();
    let sim = pcstreamctl().args(&args).output().unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let sim: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    assert_eq!(sim["waf"].as_f64(), Some(waf), "{replay}");
}

#[test]
fn bad_flags_are_one_line_errors() {
    for (args, want) in [
        (&["--capacity", "4X"][..], "suffix"),
        (&["--ruhs", "0"][..], "ruhs"),
        (&["--ru-size", "1000"][..], "ru size"),
        (&["--listen", "256.1.1.1:1"][..], "cannot listen"),
    ] {
        let out = pcstreamctl().arg("target").args(args).output().unwrap();
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}
