//! `pcstreamctl demo`: the live system in one command. It starts `pcstreamd`
//! in a directory of its own, runs a real RocksDB workload (Debian's
//! `db_bench`) under the shim with the daemon learning (recorded alongside),
//! shows what the daemon learnt (`status`, `streams`, `contexts`), restarts
//! the daemon (state saved at SIGTERM, reloaded at start), runs the workload
//! again from the persisted table, reads back the hints the shim set on the
//! new WAL and SST files (`F_GET_RW_HINT`), and ends with every placement
//! policy on a simulated multi-stream SSD over the recorded run.
//!
//! Each step is this very binary's own subcommand run as a child process
//! (`record`, `status`, `run`, `compare` …), so the demo shows exactly what a
//! user typing them would see. As root the recording is ground truth
//! (`record --device-trace`: db_bench on a scratch ext4 over a loop device);
//! otherwise the file-level trace is mapped to LBAs by the file-system
//! allocator (`compare` says which it used). db_bench's own output, with its
//! `\r`-separated progress lines, goes to a log in the demo's directory and
//! only its last result lines are shown.

use anyhow::{bail, Context};
use pcstream_placement::env as var;
use pcstream_placement::hint::read_file_hint;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `pcstreamctl demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Needs db_bench (Debian: rocksdb-tools) and pcstreamd (next to pcstreamctl, \
or on PATH). As root db_bench runs on a scratch ext4 over a loop device and the device's \
own requests are recorded; as another user the file-level trace is replayed.\n\n\
Example:\n  pcstreamctl demo --keys 50000 --dir /tmp/demo"
)]
pub struct DemoArgs {
    /// Keys db_bench writes (fillrandom, then as many updaterandom).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    pub keys: u64,
    /// Directory for everything the demo writes (default: a new one under /tmp, kept).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The daemon binary (default: next to pcstreamctl, then PATH).
    #[arg(long, value_name = "PATH")]
    pub pcstreamd: Option<PathBuf>,
    /// Record the file-level trace only, even as root (no loop device).
    #[arg(long)]
    pub file_level: bool,
}

/// db_bench's options: RocksDB's default LSM shape scaled down 16× so a
/// short run flushes and compacts through three levels.
const DB_BENCH_ARGS: &[&str] = &[
    "--benchmarks=fillrandom,updaterandom",
    "--value_size=800",
    "--write_buffer_size=4194304",
    "--target_file_size_base=4194304",
    "--max_bytes_for_level_base=16777216",
    "--compression_type=none",
    "--statistics=0",
    "--wal_bytes_per_sync=65536",
    "--bytes_per_sync=262144",
];

/// Keys the smallest scratch device is sized for.
const DEVICE_KEYS: u64 = 200_000;
/// The smallest scratch device, MiB.
const DEVICE_MIB: u64 = 512;
/// Share of the scratch device filled with cold data before db_bench runs,
/// at [`DEVICE_KEYS`] keys per [`DEVICE_MIB`].
const DEVICE_FILL: f64 = 0.3;

/// The scratch device of a ground-truth run of `keys` keys: its size (MiB)
/// and the share of it `record --device-fill` writes first. db_bench's
/// database peaks at ≈ 1.6 KiB per key here (800-byte values, the WAL,
/// compaction's inputs and outputs both live), so 200,000 keys take
/// ≈ 310 MiB of 512: with 30 % of the device cold, its rewrites keep the
/// flash ≈ 90 % full and GC has work, which a bare 512 MiB device never
/// gave it (every policy at WAF 1.00–1.01). Above 200,000 keys the device
/// grows with them; below, the cold share shrinks with them, so the run
/// never runs out of space, and a small run is simply barely aged (compare
/// says so).
fn scratch_device(keys: u64) -> (u64, f64) {
    let mib = (keys.saturating_mul(DEVICE_MIB).div_ceil(DEVICE_KEYS)).div_ceil(64) * 64;
    let fill = DEVICE_FILL * (keys as f64 / DEVICE_KEYS as f64).min(1.0);
    (mib.max(DEVICE_MIB), (fill * 100.0).floor() / 100.0)
}

/// Runs the subcommand.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let me = std::env::current_exe().context("where pcstreamctl is")?;
    let daemon_bin = find_daemon(args.pcstreamd.as_deref(), &me)?;
    if on_path("db_bench").is_none() {
        bail!("db_bench not found on PATH (Debian: apt-get install rocksdb-tools)");
    }
    let out = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("--dir {}", d.display()))?;
            d.canonicalize()
                .with_context(|| format!("--dir {}", d.display()))?
        }
        None => tempfile::Builder::new()
            .prefix("pcstream-demo.")
            .tempdir_in("/tmp")
            .context("a directory for the demo under /tmp")?
            .keep(),
    };
    // SAFETY: geteuid has no preconditions.
    let ground_truth = !args.file_level && unsafe { libc::geteuid() } == 0;
    let demo = Demo {
        me,
        daemon_bin,
        run: out.join("run"),
        state: out.join("state"),
        out,
        keys: args.keys,
    };
    demo.show(ground_truth)?;
    Ok(ExitCode::SUCCESS)
}

struct Demo {
    me: PathBuf,
    daemon_bin: PathBuf,
    out: PathBuf,
    run: PathBuf,
    state: PathBuf,
    keys: u64,
}

impl Demo {
    fn show(&self, ground_truth: bool) -> anyhow::Result<()> {
        let log = self.out.join("pcstreamd.log");
        section(&format!(
            "starting pcstreamd (runtime dir {}, state dir {}; log {})",
            self.run.display(),
            self.state.display(),
            log.display()
        ));
        let mut daemon = self.start_daemon()?;

        let rec = self.out.join("rec");
        let log1 = self.out.join("db_bench.log");
        section(&format!(
            "run 1: db_bench ({} keys, fillrandom + updaterandom) under the shim, the daemon learning (recorded into {})",
            self.keys,
            rec.display()
        ));
        let mut record = self.me_cmd();
        record
            .arg("record")
            .arg("--socket")
            .arg(self.run.join("events.sock"))
            .arg("--force");
        let db = if ground_truth {
            let (mib, fill) = scratch_device(self.keys);
            println!(
                "   on a {mib} MiB scratch ext4, {:.0}% of it filled with cold data first, so that the database's rewrites age the flash",
                fill * 100.0
            );
            record.args(["--device-trace", "--device-size", &format!("{mib}M")]);
            if fill > 0.0 {
                record.args(["--device-fill", &format!("{fill:.2}")]);
            }
            PathBuf::from("./db")
        } else {
            println!(
                "   (file-level trace only; the replay maps it with the file-system allocator)"
            );
            self.out.join("db")
        };
        record.arg("-o").arg(&rec).arg("--");
        // The command runs through `sh` only to send db_bench's output to its
        // log (under --device-trace it runs inside the scratch file system).
        record
            .args([
                "sh",
                "-c",
                "log=$1; shift; exec \"$@\" >\"$log\" 2>&1",
                "sh",
            ])
            .arg(&log1)
            .args(self.db_bench(&db));
        step(&mut record, "pcstreamctl record")?;
        println!(
            "   db_bench's output is in {}; its last lines:",
            log1.display()
        );
        print!("{}", last_result_lines(&read_lossy(&log1), 3));

        section("what the daemon learnt: pcstreamctl status / streams / contexts");
        self.ctl(&["status"])?;
        println!();
        self.ctl(&["streams"])?;
        println!();
        self.ctl(&["contexts", "--limit", "4"])?;

        section("the published mapping (read-only to clients; every shim maps it and applies it per write)");
        list_dir(&self.run)?;

        section("restart: SIGTERM saves the learnt table, the new daemon reloads it and publishes at once");
        daemon.stop();
        list_dir(&self.state)?;
        let mut daemon = self.start_daemon()?;
        self.ctl(&["status"])?;

        let db2 = self.out.join("db2");
        let log2 = self.out.join("db_bench2.log");
        section("run 2: db_bench again, starting from the persisted table");
        if db2.exists() {
            std::fs::remove_dir_all(&db2).with_context(|| format!("{}", db2.display()))?;
        }
        // One open file for both streams (one file offset), as `>log 2>&1`.
        let out2 = File::create(&log2).with_context(|| format!("{}", log2.display()))?;
        let err2 = out2
            .try_clone()
            .with_context(|| format!("{}", log2.display()))?;
        let mut run2 = self.me_cmd();
        run2.arg("run")
            .arg("--socket")
            .arg(self.run.join("events.sock"))
            .arg("--")
            .args(self.db_bench(&db2))
            .stdout(out2)
            .stderr(err2);
        step(&mut run2, "pcstreamctl run")?;
        self.ctl(&["streams"])?;

        section("F_GET_RW_HINT on run 2's files (set by the shim from the daemon's live table; 0 = none, 2 SHORT .. 5 EXTREME)");
        for f in newest_wal_and_oldest_sst(&db2)? {
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            match rw_hint(&f) {
                Ok(h) => println!("{name:>14}  hint {h}"),
                Err(e) => println!("{name:>14}  {e:#}"),
            }
        }
        daemon.stop();

        section("every placement policy on a simulated SSD (9 streams, 7% OP; the device as recorded, steady state, no TRIM)");
        let charts = self.out.join("charts");
        let mut compare = self.me_cmd();
        compare
            .arg("compare")
            .arg(rec.join("trace.pcstrace"))
            .args(["--prefill", "0", "--warmup-passes", "1", "--trim", "off"])
            .args(["--internal-streams", "both", "--svg"])
            .arg(&charts);
        step(&mut compare, "pcstreamctl compare")?;
        println!();
        println!("Everything the demo wrote is in {}.", self.out.display());
        Ok(())
    }

    /// This binary, with the demo's runtime directory in the environment (so
    /// `status`, `streams`, `contexts` ask the demo's daemon).
    fn me_cmd(&self) -> Command {
        let mut c = Command::new(&self.me);
        c.env(var::RUNTIME_DIR, &self.run);
        c
    }

    fn ctl(&self, args: &[&str]) -> anyhow::Result<()> {
        step(
            self.me_cmd().args(args),
            &format!("pcstreamctl {}", args[0]),
        )
    }

    fn db_bench(&self, db: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["db_bench".into()];
        let mut d = OsString::from("--db=");
        d.push(db);
        let mut w = OsString::from("--wal_dir=");
        w.push(db);
        a.push(d);
        a.push(w);
        a.push(format!("--num={}", self.keys).into());
        a.extend(DB_BENCH_ARGS.iter().map(OsString::from));
        a
    }

    fn start_daemon(&self) -> anyhow::Result<DaemonProc> {
        let _ = std::fs::remove_file(self.run.join("ctl.sock"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join("pcstreamd.log"))
            .context("pcstreamd.log")?;
        let child = Command::new(&self.daemon_bin)
            .arg("--runtime-dir")
            .arg(&self.run)
            .arg("--state-dir")
            .arg(&self.state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.daemon_bin.display()))?;
        let mut d = DaemonProc(Some(child));
        let t = Instant::now();
        while !self.run.join("ctl.sock").exists() {
            if let Some(Some(status)) = d.0.as_mut().map(|c| c.try_wait().ok().flatten()) {
                d.0 = None;
                bail!(
                    "pcstreamd exited at start ({status}); see {}",
                    self.out.join("pcstreamd.log").display()
                );
            }
            if t.elapsed() > Duration::from_secs(10) {
                bail!(
                    "pcstreamd did not open {} within 10 s; see {}",
                    self.run.join("ctl.sock").display(),
                    self.out.join("pcstreamd.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(d)
    }
}

/// A running daemon: stopped with SIGTERM (it saves its state) when the demo
/// is done with it or fails.
struct DaemonProc(Option<Child>);

impl DaemonProc {
    fn stop(&mut self) {
        if let Some(mut c) = self.0.take() {
            if let Ok(pid) = libc::pid_t::try_from(c.id()) {
                // SAFETY: kill has no memory preconditions; `pid` is our child,
                // not yet waited for, so the number is still its own.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let _ = c.wait();
        }
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        self.stop();
    }
}

fn section(title: &str) {
    println!("\n== {title}");
}

/// Runs one step to completion; its failure is the demo's.
fn step(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn read_lossy(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The last `n` result lines of a program's output, indented: `\r`-separated
/// progress ("... finished N ops") and blank lines dropped, each line cut to
/// 120 characters.
pub fn last_result_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .split(['\r', '\n'])
        .filter(|l| !l.trim().is_empty() && !l.starts_with("... finished"))
        .collect();
    let mut s = String::new();
    for l in &lines[lines.len().saturating_sub(n)..] {
        let cut: String = l.chars().take(120).collect();
        s.push_str("   | ");
        s.push_str(&cut);
        s.push('\n');
    }
    s
}

fn list_dir(dir: &Path) -> anyhow::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(|e| e.ok())
        .collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let Ok(m) = e.metadata() else { continue };
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let kind = if m.file_type().is_socket() {
            "socket"
        } else {
            "file"
        };
        println!(
            "   {:<14} {:>6} {:o} {:>8} bytes",
            e.file_name().to_string_lossy(),
            kind,
            m.permissions().mode() & 0o777,
            m.len()
        );
    }
    Ok(())
}

/// The WAL db_bench wrote last and its oldest table file.
fn newest_wal_and_oldest_sst(db: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut logs = Vec::new();
    let mut ssts = Vec::new();
    for e in std::fs::read_dir(db).with_context(|| format!("{}", db.display()))? {
        let p = e?.path();
        match p.extension().and_then(|x| x.to_str()) {
            Some("log") => logs.push(p),
            Some("sst") => ssts.push(p),
            _ => {}
        }
    }
    logs.sort();
    ssts.sort();
    Ok(logs
        .pop()
        .into_iter()
        .chain(ssts.into_iter().take(1))
        .collect())
}

fn rw_hint(p: &Path) -> anyhow::Result<u64> {
    read_file_hint(p).with_context(|| format!("F_GET_RW_HINT on {}", p.display()))
}

/// The first `program` on PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// pcstreamd: the explicit path, else next to pcstreamctl, else on PATH.
fn find_daemon(explicit: Option<&Path>, me: &Path) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("--pcstreamd {}: no such file", p.display());
    }
    if let Some(p) = me
        .parent()
        .map(|d| d.join("pcstreamd"))
        .filter(|p| p.is_file())
    {
        return Ok(p);
    }
    if let Some(p) = on_path("pcstreamd") {
        return Ok(p);
    }
    bail!(
        "pcstreamd not found next to {} nor on PATH (build it: cargo build --release -p pcstreamd; or give --pcstreamd)",
        me.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_device_grows_with_the_keys_and_its_cold_share_shrinks_below_the_default() {
        assert_eq!(scratch_device(200_000), (512, 0.3));
        assert_eq!(scratch_device(20_000), (512, 0.03));
        assert_eq!(scratch_device(1000), (512, 0.0));
        assert_eq!(scratch_device(400_000), (1024, 0.3));
        // Rounded up to 64 MiB: 250,000 keys need 640 MiB.
        assert_eq!(scratch_device(250_000), (640, 0.3));
        assert_eq!(scratch_device(100_000_000), (256_000, 0.3));
    }

    #[test]
    fn result_lines_drop_progress_and_blanks_and_are_cut() {
        let long = "x".repeat(300);
        let text = format!(
            "fillrandom   :  1 ops/sec\n... finished 1000 ops\r... finished 2000 ops\r\n\n{long}\nupdaterandom :  2 ops/sec\n"
        );
        let shown = last_result_lines(&text, 3);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 3, "{shown}");
        assert_eq!(lines[0], "   | fillrandom   :  1 ops/sec");
        assert_eq!(lines[1].len(), 5 + 120);
        assert_eq!(lines[2], "   | updaterandom :  2 ops/sec");
        assert_eq!(last_result_lines("", 3), "");
        assert_eq!(last_result_lines("a\nb\n", 1), "   | b\n");
    }

    #[test]
    fn a_missing_daemon_is_one_line_naming_what_to_do() {
        let e = find_daemon(
            Some(Path::new("/nonexistent/pcstreamd")),
            Path::new("/x/pcstreamctl"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "--pcstreamd /nonexistent/pcstreamd: no such file");
    }
}
