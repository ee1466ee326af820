//! Shared by the `daemon_*` integration tests: a real `pcstreamd` in a
//! temporary runtime/state directory (killed on drop), `pcstreamctl`
//! against it, a replay client sending `EventBatch` datagrams, and the
//! published mapping table read back through `pcstream_placement::table`.

#![allow(dead_code)]

use pcstream_placement::env as var;
use pcstream_placement::table::TableView;
use pcstream_placement::wire::{self, event::Kind};
use prost::Message;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// The `pcstreamd` binary.
pub fn pcstreamd_bin() -> PathBuf {
    pcstream_tests::artifact("pcstreamd", "pcstreamd")
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Option<Child>,
    pub config: PathBuf,
}

impl Daemon {
    /// Starts pcstreamd with `config` (TOML text) and waits for its sockets.
    pub fn start(config: &str) -> Daemon {
        let mut d = Daemon::unstarted(config);
        d.spawn(&[]);
        d
    }

    /// The directories and config of a daemon not started yet ([`Daemon::spawn`]).
    pub fn unstarted(config: &str) -> Daemon {
        // Built now, not while a test's writer runs.
        pcstreamd_bin();
        pcstream_tests::pcstreamctl();
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("pcstreamd.toml");
        std::fs::write(&cfg, config).unwrap();
        Daemon {
            dir,
            child: None,
            config: cfg,
        }
    }

    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// (Re)starts the process with extra environment.
    pub fn spawn(&mut self, env: &[(&str, &str)]) {
        let _ = std::fs::remove_file(self.run_dir().join("ctl.sock"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("pcstreamd.log"))
            .unwrap();
        let mut c = Command::new(pcstreamd_bin());
        c.arg("--config")
            .arg(&self.config)
            .arg("--runtime-dir")
            .arg(self.run_dir())
            .arg("--state-dir")
            .arg(self.state_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in env {
            c.env(k, v);
        }
        self.child = Some(c.spawn().expect("start pcstreamd"));
        let t = Instant::now();
        while !self.run_dir().join("ctl.sock").exists() {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("pcstreamd exited at start ({st}):\n{}", self.log());
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "pcstreamd did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pcstreamd.log")).unwrap_or_default()
    }

    /// `pcstreamctl <args> --runtime-dir <run>`: (success, stdout, stderr).
    pub fn ctl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(pcstream_tests::pcstreamctl())
            .args(args)
            .arg("--runtime-dir")
            .arg(self.run_dir())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `status --json`.
    pub fn status(&self) -> serde_json::Value {
        let (ok, out, err) = self.ctl(&["status", "--json"]);
        assert!(ok, "status failed: {err}\n{}", self.log());
        serde_json::from_str(&out).unwrap()
    }

    /// `contexts --json --limit 0`: every context row.
    pub fn contexts(&self) -> Vec<serde_json::Value> {
        let (ok, out, err) = self.ctl(&["contexts", "--json", "--limit", "0"]);
        assert!(ok, "contexts failed: {err}\n{}", self.log());
        serde_json::from_str(&out).unwrap()
    }

    /// Polls `done` every 50 ms until it holds; after 30 s, fails with
    /// `what` and the daemon's log.
    pub fn wait_for(&self, what: &str, done: impl Fn(&Daemon) -> bool) {
        let t = Instant::now();
        while !done(self) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the daemon has ingested `events` events.
    pub fn wait_events(&self, events: u64) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let s = self.status();
            if s["events"].as_u64().unwrap() >= events {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "daemon ingested {} of {events} events",
                s["events"]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The status once the event count has stopped moving for 300 ms (a
    /// finished program's last events are in); fails after 120 s.
    pub fn settled(&self) -> serde_json::Value {
        let t = Instant::now();
        let mut last = u64::MAX;
        loop {
            let st = self.status();
            let n = st["events"].as_u64().unwrap();
            if n == last {
                return st;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the daemon's event count still moves after 120 s: {st}"
            );
            last = n;
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait().unwrap()
    }
}

impl Daemon {
    /// SIGKILLs the daemon and reaps it: a new one started before the
    /// old one is gone is refused (its directory lock is still held).
    #[allow(dead_code)]
    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Sends events as datagrams of at most `per` events each (blocking sends:
/// a replay client waits for the daemon, unlike the shim).
pub fn send_events(sock: &Path, events: &[wire::Event], per: usize) {
    let s = UnixDatagram::unbound().unwrap();
    for (seq, chunk) in events.chunks(per).enumerate() {
        let b = wire::EventBatch {
            pid: std::process::id(),
            seq: seq as u64,
            events: chunk.to_vec(),
        };
        s.send_to(&b.encode_to_vec(), sock).expect("send datagram");
    }
}

/// The published table file `name` in the runtime dir: (sig, stream, hint), sorted.
pub fn read_table(path: &Path) -> Vec<(u64, u32, u8)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let v = TableView::new(&words).unwrap();
    let mut e = v.entries_vec();
    e.sort_unstable();
    e
}

/// A 4 KiB write event of page `page` of inode `ino` (dev 1) by `sig`, for
/// replay clients.
pub fn page_write(ino: u64, page: u64, sig: u64) -> wire::Event {
    wire::Event {
        kind: Some(Kind::Write(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            offset: page * 4096,
            len: 4096,
            signature: sig,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The unlink of the whole first page of inode `ino` (dev 1).
pub fn unlink_page(ino: u64) -> wire::Event {
    wire::Event {
        kind: Some(Kind::Invalidate(wire::InvalidateEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            kind: wire::InvalidateKind::Unlink as i32,
            offset: 0,
            len: 4096,
        })),
        ..Default::default()
    }
}

/// Two lifetimes for a daemon to learn, `rounds` rounds of: signature 5
/// writes a one-page temporary file that is unlinked at once, signature 6
/// rewrites one page of a 64-page file (a lifetime of 192 pages).
pub fn two_lifetimes(rounds: u64) -> Vec<wire::Event> {
    let mut evs = Vec::with_capacity(3 * rounds as usize);
    for round in 0..rounds {
        evs.push(page_write(1000 + round, 0, 5));
        evs.push(unlink_page(1000 + round));
        evs.push(page_write(7, round % 64, 6));
    }
    evs
}

/// `cmd` under the shim attached to `d` (batches flushed every 20 ms).
pub fn under_shim(d: &Daemon, cmd: &[&str]) -> Command {
    let mut c = Command::new(cmd[0]);
    c.args(&cmd[1..])
        .env("LD_PRELOAD", pcstream_tests::shim())
        .env(var::RUNTIME_DIR, d.run_dir())
        .env(var::FLUSH_MS, "20");
    c
}
