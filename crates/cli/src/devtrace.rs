//! Ground-truth device traces: what a block device really receives while a
//! workload runs, recorded with tracefs on a scratch file system.
//!
//! `record --device-trace` runs the workload on a fresh ext4 file system on a
//! loop device over a sparse image, mounted with `discard` so that deleting a
//! file reaches the device as a discard (TRIM). A private tracefs instance
//! records `block:block_rq_issue` (every write, discard and flush the device
//! receives) and `ext4:ext4_ext_map_blocks_exit` (file block → device block
//! mappings), filtered to that one device, with `trace_clock=mono` so its
//! timestamps share the shim's `CLOCK_MONOTONIC` base.
//!
//! tracefs and loop devices are machine-global: one device recording runs at
//! a time (an exclusive lock on [`LOCK_PATH`]), and [`DeviceTracer`] restores
//! every setting and releases the mount, the loop device, the tracefs instance
//! and the image on every exit path (`finish`, error, or drop).
//!
//! Requires root. Nothing here is on a hot path.

use anyhow::{bail, Context, Result};
use pcstream_placement::wire;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Lock held for the whole of a device recording.
pub const LOCK_PATH: &str = "/run/pcstream/device-trace.lock";
const TRACEFS: &str = "/sys/kernel/tracing";
/// Block size the scratch ext4 is made with (`mkfs.ext4 -b 4096`).
pub const FS_BLOCK_SIZE: u32 = 4096;

/// How to build the scratch device.
#[derive(Debug, Clone)]
pub struct DeviceTraceOptions {
    /// Size of the sparse image (and so of the file system), bytes.
    pub size_bytes: u64,
    /// Where the image file, the mount point and the raw tracefs text go.
    pub work_dir: PathBuf,
    /// Per-CPU tracefs ring buffer, KiB (the reader drains it continuously).
    pub buffer_kb: u64,
}

/// A running device recording. Call [`DeviceTracer::finish`]; dropping it
/// without `finish` still tears everything down (errors are then only logged).
#[derive(Debug)]
pub struct DeviceTracer {
    lock: Option<File>,
    image: PathBuf,
    loop_dev: Option<String>,
    mount_point: PathBuf,
    mounted: bool,
    instance: Option<PathBuf>,
    we_mounted_tracefs: bool,
    raw_path: PathBuf,
    reader: Option<(Arc<AtomicBool>, JoinHandle<std::io::Result<u64>>)>,
    /// `st_rdev` of the loop device, as the kernel encodes it (`MAJOR<<20 | MINOR`
    /// in tracefs, glibc encoding in `stat`): kept as (major, minor).
    dev: (u32, u32),
    /// `st_dev` of files on the mounted file system (what the shim reports).
    pub fs_dev: u64,
    size_bytes: u64,
    fill_bytes: u64,
    workload_start_ns: u64,
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} {:?} failed ({}): {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn write_setting(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("cannot write {value:?} to {}", path.display()))
}

impl DeviceTracer {
    /// Takes the lock, builds and mounts the scratch file system and starts tracing.
    pub fn start(opts: &DeviceTraceOptions) -> Result<DeviceTracer> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("--device-trace needs root (loop devices, mount and tracefs)");
        }
        fs::create_dir_all("/run/pcstream").context("cannot create /run/pcstream")?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK_PATH)
            .with_context(|| format!("cannot open {LOCK_PATH}"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                eprintln!("pcstreamctl: waiting for another device recording ({LOCK_PATH})");
                lock.lock()
                    .with_context(|| format!("cannot lock {LOCK_PATH}"))?;
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {LOCK_PATH}"))
            }
        }
        fs::create_dir_all(&opts.work_dir)
            .with_context(|| format!("cannot create {}", opts.work_dir.display()))?;
        let mut t = DeviceTracer {
            lock: Some(lock),
            image: opts.work_dir.join("device.img"),
            loop_dev: None,
            mount_point: opts.work_dir.join("mnt"),
            mounted: false,
            instance: None,
            we_mounted_tracefs: false,
            raw_path: opts.work_dir.join("device.tracefs.txt"),
            reader: None,
            dev: (0, 0),
            fs_dev: 0,
            size_bytes: opts.size_bytes,
            fill_bytes: 0,
            workload_start_ns: 0,
        };
        // On error `t` drops here and undoes whatever was done.
        t.setup(opts)?;
        Ok(t)
    }

    fn setup(&mut self, opts: &DeviceTraceOptions) -> Result<()> {
        let img = File::create(&self.image)
            .with_context(|| format!("cannot create {}", self.image.display()))?;
        img.set_len(opts.size_bytes)
            .with_context(|| format!("cannot size {}", self.image.display()))?;
        drop(img);
        let dev = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&self.image))?;
        self.loop_dev = Some(dev.clone());
        let rdev = fs::metadata(&dev)
            .with_context(|| format!("cannot stat {dev}"))?
            .rdev();
        self.dev = (libc::major(rdev), libc::minor(rdev));
        run(Command::new("mkfs.ext4").args([
            "-q",
            "-F",
            "-b",
            "4096",
            "-E",
            "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
            &dev,
        ]))?;
        fs::create_dir_all(&self.mount_point)
            .with_context(|| format!("cannot create {}", self.mount_point.display()))?;
        run(Command::new("mount")
            .args(["-t", "ext4", "-o", "discard", &dev])
            .arg(&self.mount_point))?;
        self.mounted = true;
        self.fs_dev = fs::metadata(&self.mount_point)?.dev();

        if !Path::new(TRACEFS).join("instances").exists() {
            run(Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]))
                .context("tracefs is not mounted and cannot be mounted")?;
            self.we_mounted_tracefs = true;
        }
        let inst = Path::new(TRACEFS)
            .join("instances")
            .join(format!("pcstream-{}", std::process::id()));
        fs::create_dir(&inst)
            .with_context(|| format!("cannot create tracefs instance {}", inst.display()))?;
        self.instance = Some(inst.clone());
        write_setting(&inst.join("trace_clock"), "mono")?;
        write_setting(&inst.join("buffer_size_kb"), &opts.buffer_kb.to_string())?;
        let kdev = (self.dev.0 << 20) | self.dev.1;
        for ev in ["block/block_rq_issue", "ext4/ext4_ext_map_blocks_exit"] {
            let d = inst.join("events").join(ev);
            write_setting(&d.join("filter"), &format!("dev == {kdev}"))?;
            write_setting(&d.join("enable"), "1")?;
        }
        // Start the reader before tracing so the ring buffer never fills.
        let pipe = OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open(inst.join("trace_pipe"))
            .context("cannot open trace_pipe")?;
        let mut out = File::create(&self.raw_path)
            .with_context(|| format!("cannot create {}", self.raw_path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tracefs-reader".into())
            .spawn(move || drain_pipe(pipe, &mut out, &stop2))?;
        self.reader = Some((stop, handle));
        write_setting(&inst.join("tracing_on"), "1")?;
        Ok(())
    }

    /// Where the workload should put its files.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// Ages the file system as the paper does: writes one file of
    /// `fraction` × the file system's size sequentially (1 MiB writes, then
    /// fsync), so the workload runs in the remaining space and the device
    /// holds that much valid cold data. Returns the bytes written. The
    /// writes are traced (they come before the workload's start mark).
    pub fn fill(&mut self, fraction: f64) -> Result<u64> {
        if !(0.0..1.0).contains(&fraction) {
            bail!("--device-fill: {fraction} is outside [0, 1)");
        }
        if fraction == 0.0 {
            return Ok(0);
        }
        let total = self.size_bytes;
        // Leave the file system's own reserve alone: never more than what is free minus 5%.
        let free = available_bytes(&self.mount_point)?;
        let want = ((total as f64 * fraction) as u64).min(free.saturating_sub(total / 20));
        let want = want / (1 << 20) * (1 << 20);
        let path = self.mount_point.join(".pcstream-fill");
        let mut f =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let chunk = vec![0x5au8; 1 << 20];
        let mut done = 0u64;
        while done < want {
            f.write_all(&chunk)
                .with_context(|| format!("filling {} ({done} bytes written)", path.display()))?;
            done += chunk.len() as u64;
        }
        f.sync_all()
            .with_context(|| format!("cannot fsync {}", path.display()))?;
        self.fill_bytes = done;
        Ok(done)
    }

    /// Marks the start of the workload (after any fill).
    pub fn mark_workload_start(&mut self, mono_ns: u64) {
        self.workload_start_ns = mono_ns;
    }

    /// Syncs and unmounts the file system (so every write and discard reaches
    /// the device), stops tracing, tears everything down and returns the
    /// parsed device records in time order.
    pub fn finish(mut self) -> Result<DeviceTrace> {
        self.unmount()?;
        let lines = self.stop_tracing()?;
        let mut trace = parse_tracefs(&self.raw_path, self.dev, self.fs_dev, lines)?;
        trace.info = wire::DeviceInfo {
            dev: (u64::from(self.dev.0) << 20) | u64::from(self.dev.1),
            fs_dev: self.fs_dev,
            size_bytes: self.size_bytes,
            fs_type: "ext4".into(),
            block_size: FS_BLOCK_SIZE,
            lost_events: trace.lost_events,
            fill_bytes: self.fill_bytes,
            workload_start_ns: self.workload_start_ns,
        };
        self.teardown();
        // The raw text is parsed into the trace; keep nothing machine-sized behind.
        let _ = fs::remove_file(&self.raw_path);
        if let Some(dir) = self.raw_path.parent() {
            let _ = fs::remove_dir(dir);
        }
        Ok(trace)
    }

    fn unmount(&mut self) -> Result<()> {
        if self.mounted {
            // umount syncs; a busy mount (a leftover process) is retried lazily.
            if run(Command::new("umount").arg(&self.mount_point)).is_err() {
                std::thread::sleep(Duration::from_millis(200));
                run(Command::new("umount").arg(&self.mount_point))?;
            }
            self.mounted = false;
        }
        Ok(())
    }

    fn stop_tracing(&mut self) -> Result<u64> {
        if let Some(inst) = &self.instance {
            let _ = fs::write(inst.join("tracing_on"), "0");
        }
        match self.reader.take() {
            Some((stop, h)) => {
                stop.store(true, Ordering::Release);
                let n = h
                    .join()
                    .map_err(|_| anyhow::anyhow!("tracefs reader thread panicked"))?
                    .context("reading trace_pipe")?;
                Ok(n)
            }
            None => Ok(0),
        }
    }

    fn teardown(&mut self) {
        let _ = self.unmount().map_err(|e| eprintln!("pcstreamctl: {e:#}"));
        let _ = self.stop_tracing();
        if let Some(inst) = self.instance.take() {
            for ev in ["block/block_rq_issue", "ext4/ext4_ext_map_blocks_exit"] {
                let d = inst.join("events").join(ev);
                let _ = fs::write(d.join("enable"), "0");
                let _ = fs::write(d.join("filter"), "0");
            }
            if let Err(e) = fs::remove_dir(&inst) {
                eprintln!(
                    "pcstreamctl: cannot remove tracefs instance {}: {e}",
                    inst.display()
                );
            }
        }
        if self.we_mounted_tracefs {
            let _ = Command::new("umount").arg(TRACEFS).status();
            self.we_mounted_tracefs = false;
        }
        if let Some(dev) = self.loop_dev.take() {
            if let Err(e) = run(Command::new("losetup").args(["-d", &dev])) {
                eprintln!("pcstreamctl: {e:#}");
            }
        }
        let _ = fs::remove_file(&self.image);
        let _ = fs::remove_dir(&self.mount_point);
        self.lock.take();
    }
}

impl Drop for DeviceTracer {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Bytes available to an unprivileged writer on the file system holding `p`.
fn available_bytes(p: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .with_context(|| format!("path {} has a NUL byte", p.display()))?;
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is valid for writes.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statvfs {}", p.display()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}
impl NonBlock for OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

/// Copies trace_pipe to `out` until `stop` is set and the pipe is empty.
/// Returns the number of lines copied.
fn drain_pipe(mut pipe: File, out: &mut File, stop: &AtomicBool) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0u64;
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(n) => {
                lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                out.write_all(&buf[..n])?;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.flush()?;
    Ok(lines)
}

/// The device side of a recording, parsed.
#[derive(Debug, Default)]
pub struct DeviceTrace {
    /// The scratch device.
    pub info: wire::DeviceInfo,
    /// Requests the device received, in time order.
    pub requests: Vec<wire::BlockRequest>,
    /// File-block → device-block mappings, in time order.
    pub extents: Vec<wire::ExtentMap>,
    /// Lines that were neither (e.g. tracefs "LOST EVENTS" markers).
    pub lost_events: u64,
}

impl DeviceTrace {
    /// One paragraph for the terminal.
    pub fn describe(&self) -> String {
        let mut w = 0u64;
        let mut d = 0u64;
        let mut f = 0u64;
        for r in &self.requests {
            match wire::BlockOp::try_from(r.op) {
                Ok(wire::BlockOp::Write) => w += u64::from(r.nr_sectors) * 512,
                Ok(wire::BlockOp::Discard) => d += u64::from(r.nr_sectors) * 512,
                Ok(wire::BlockOp::Flush) => f += 1,
                _ => {}
            }
        }
        let mut s = format!(
            "device: {} requests ({:.1} MiB written, {:.1} MiB discarded, {f} flushes), {} block mappings",
            self.requests.len(),
            w as f64 / 1048576.0,
            d as f64 / 1048576.0,
            self.extents.len()
        );
        if self.lost_events > 0 {
            s.push_str(&format!(
                "\n  warning: tracefs lost {} events (ring buffer overrun): attribution is incomplete",
                self.lost_events
            ));
        }
        s
    }
}

/// Appends the device records (info, then mappings and requests in time
/// order) to a trace.
pub fn write_records<W: Write>(
    t: &DeviceTrace,
    w: &mut pcstream_placement::trace::TraceWriter<W>,
) -> Result<()> {
    use wire::trace_record::Record;
    w.write_record(&wire::TraceRecord {
        record: Some(Record::Device(t.info.clone())),
    })?;
    let (mut i, mut j) = (0, 0);
    while i < t.extents.len() || j < t.requests.len() {
        let take_extent = j >= t.requests.len()
            || (i < t.extents.len() && t.extents[i].time_ns <= t.requests[j].time_ns);
        let rec = if take_extent {
            i += 1;
            Record::Extent(t.extents[i - 1])
        } else {
            j += 1;
            Record::Block(t.requests[j - 1].clone())
        };
        w.write_record(&wire::TraceRecord { record: Some(rec) })?;
    }
    Ok(())
}

/// Parses tracefs text output of the device `dev` (major, minor) whose file
/// system files have `st_dev == fs_dev` (ext4 made with 4 KiB blocks).
/// `reader_lines` (what the reader copied) is checked against what parsed.
pub fn parse_tracefs(
    path: &Path,
    dev: (u32, u32),
    fs_dev: u64,
    reader_lines: u64,
) -> Result<DeviceTrace> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut t = DeviceTrace::default();
    let kdev = (u64::from(dev.0) << 20) | u64::from(dev.1);
    for (i, line) in text.lines().enumerate() {
        match parse_line(line).with_context(|| format!("{}:{}: {line}", path.display(), i + 1))? {
            Some(Parsed::Block(mut b)) => {
                b.dev = kdev;
                t.requests.push(b)
            }
            Some(Parsed::Extent(mut e)) => {
                e.block_size = FS_BLOCK_SIZE;
                if let Some(f) = e.file.as_mut() {
                    f.dev = fs_dev;
                }
                t.extents.push(e)
            }
            Some(Parsed::Lost(n)) => t.lost_events += n,
            None => {}
        }
    }
    let seen = text.lines().count() as u64;
    if seen < reader_lines {
        bail!(
            "{}: has {seen} lines but the tracefs reader copied {reader_lines}",
            path.display()
        );
    }
    t.requests.sort_by_key(|r| r.time_ns);
    t.extents.sort_by_key(|e| e.time_ns);
    Ok(t)
}

#[derive(Debug, PartialEq)]
enum Parsed {
    Block(wire::BlockRequest),
    Extent(wire::ExtentMap),
    Lost(u64),
}

/// `"  407.237039"` → ns.
fn parse_timestamp(s: &str) -> Result<u64> {
    let (secs, frac) = s
        .split_once('.')
        .with_context(|| format!("bad timestamp {s:?}"))?;
    let secs: u64 = secs
        .trim()
        .parse()
        .with_context(|| format!("bad timestamp {s:?}"))?;
    let digits = frac.len().min(9);
    let frac_v: u64 = frac[..digits]
        .parse()
        .with_context(|| format!("bad timestamp {s:?}"))?;
    Ok(secs * 1_000_000_000 + frac_v * 10u64.pow(9 - digits as u32))
}

fn field<'a>(toks: &[&'a str], name: &str) -> Result<&'a str> {
    toks.iter()
        .position(|t| *t == name)
        .and_then(|i| toks.get(i + 1).copied())
        .with_context(|| format!("missing field {name:?}"))
}

fn num<T: std::str::FromStr>(s: &str, what: &str) -> Result<T> {
    s.parse().map_err(|_| anyhow::anyhow!("bad {what} {s:?}"))
}

/// One line of trace_pipe output; `None` for lines that carry no event.
fn parse_line(line: &str) -> Result<Option<Parsed>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return Ok(None);
    }
    if let Some(rest) = line.find("LOST ").map(|i| &line[i..]) {
        // "CPU:1 [LOST 123 EVENTS]"
        let n = rest
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        return Ok(Some(Parsed::Lost(n)));
    }
    // "<task>-<pid> [cpu] flags TIMESTAMP: event: payload"
    let Some((head, payload)) = line
        .split_once(": block_rq_issue: ")
        .map(|(h, p)| (h, (p, true)))
        .or_else(|| {
            line.split_once(": ext4_ext_map_blocks_exit: ")
                .map(|(h, p)| (h, (p, false)))
        })
    else {
        return Ok(None);
    };
    let ts = head.rsplit(' ').next().context("missing timestamp")?;
    let time_ns = parse_timestamp(ts)?;
    let (payload, is_block) = payload;
    let toks: Vec<&str> = payload.split_whitespace().collect();
    if is_block {
        // "7,0 WS 4096 () 15944 + 8 be,0,4 [dd]"
        let rwbs = *toks.get(1).context("missing rwbs")?;
        let plus = toks.iter().position(|t| *t == "+").context("missing '+'")?;
        let sector: u64 = num(toks.get(plus - 1).context("missing sector")?, "sector")?;
        let nr: u32 = num(
            toks.get(plus + 1).context("missing length")?,
            "sector count",
        )?;
        let op = if rwbs.contains('D') {
            wire::BlockOp::Discard
        } else if rwbs.contains('W') {
            if nr == 0 {
                wire::BlockOp::Flush
            } else {
                wire::BlockOp::Write
            }
        } else if rwbs.contains('F') || rwbs.starts_with("FF") {
            wire::BlockOp::Flush
        } else if rwbs.contains('R') {
            wire::BlockOp::Read
        } else if rwbs.contains('Z') {
            wire::BlockOp::WriteZeroes
        } else {
            wire::BlockOp::Unspecified
        };
        Ok(Some(Parsed::Block(wire::BlockRequest {
            time_ns,
            dev: 0,
            sector,
            nr_sectors: nr,
            op: op as i32,
            rwbs: rwbs.to_string(),
        })))
    } else {
        // "dev 7,0 ino 12 flags CREATE|... lblk 0 pblk 7972 len 1 mflags NMU ret 1"
        let ino: u64 = num(field(&toks, "ino")?, "ino")?;
        let lblk: u64 = num(field(&toks, "lblk")?, "lblk")?;
        let pblk: u64 = num(field(&toks, "pblk")?, "pblk")?;
        let len: u32 = num(field(&toks, "len")?, "len")?;
        let ret: i64 = num(field(&toks, "ret")?, "ret")?;
        if ret <= 0 || pblk == 0 {
            return Ok(None); // hole or error: no mapping
        }
        Ok(Some(Parsed::Extent(wire::ExtentMap {
            time_ns,
            file: Some(wire::FileId { dev: 0, ino }),
            file_block: lblk,
            device_block: pblk,
            len_blocks: len.min(ret as u32),
            block_size: 0,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_block_and_extent_lines() {
        let b = parse_line("              dd-7430    [001] .....   407.239127: block_rq_issue: 7,0 WS 4096 () 15944 + 8 be,0,4 [dd]").unwrap();
        match b {
            Some(Parsed::Block(r)) => {
                assert_eq!(r.time_ns, 407_239_127_000);
                assert_eq!(r.sector, 15944);
                assert_eq!(r.nr_sectors, 8);
                assert_eq!(r.op, wire::BlockOp::Write as i32);
            }
            other => panic!("{other:?}"),
        }
        let d = parse_line("  kworker/1:1H-44 [001] ..... 10.000001: block_rq_issue: 7,0 DS 0 () 2048 + 4096 be,0,4 [kworker]").unwrap();
        assert!(
            matches!(d, Some(Parsed::Block(ref r)) if r.op == wire::BlockOp::Discard as i32 && r.nr_sectors == 4096)
        );
        let f = parse_line(
            "  jbd2/loop0-8-99 [000] ..... 11.5: block_rq_issue: 7,0 FF 0 () 0 + 0 none,0,0 [jbd2]",
        )
        .unwrap();
        assert!(matches!(f, Some(Parsed::Block(ref r)) if r.op == wire::BlockOp::Flush as i32));
        let e = parse_line("    kworker/u8:0-12      [001] .....   407.247668: ext4_ext_map_blocks_exit: dev 7,0 ino 13 flags CREATE|UNWRIT|DELALLOC lblk 5 pblk 2134 len 3 mflags NMU ret 3").unwrap();
        match e {
            Some(Parsed::Extent(x)) => {
                assert_eq!(x.file.unwrap().ino, 13);
                assert_eq!((x.file_block, x.device_block, x.len_blocks), (5, 2134, 3));
            }
            other => panic!("{other:?}"),
        }
        // A hole lookup maps nothing.
        assert_eq!(parse_line("dd-1 [001] ..... 1.0: ext4_ext_map_blocks_exit: dev 7,0 ino 12 flags  lblk 0 pblk 0 len 1 mflags  ret 0").unwrap(), None);
        assert_eq!(
            parse_line("CPU:1 [LOST 17 EVENTS]").unwrap(),
            Some(Parsed::Lost(17))
        );
        assert_eq!(parse_line("# tracer: nop").unwrap(), None);
    }

    #[test]
    fn malformed_line_is_an_error() {
        assert!(
            parse_line("x-1 [0] ..... 1.0: block_rq_issue: 7,0 WS 4096 () notanumber + 8 be")
                .is_err()
        );
        assert!(parse_line("x-1 [0] ..... bad: block_rq_issue: 7,0 WS 4096 () 1 + 8 be").is_err());
    }
}
