//! `pcstreamctl record -o DIR -- CMD`: runs a command tree under the shim in
//! record mode (each process appends to `DIR/procs/<pid>-<start>.pcstrace`),
//! then merges the per-process files into `DIR/trace.pcstrace`, ordered by
//! time (`pcstream_placement::merge`), and prints a summary.

use crate::devtrace::{self, DeviceTraceOptions, DeviceTracer};
use crate::launch;
use crate::run::ShimOptions;
use anyhow::Context;
use pcstream_placement::env as var;
use pcstream_placement::merge;
use pcstream_placement::trace::{TraceWriter, TRACE_FILE};
use pcstream_placement::wire;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Directory of the per-process files inside the output directory.
pub const PARTS_DIR: &str = "procs";
/// Sub-directory of the output holding the scratch device during `--device-trace`.
pub const DEVICE_DIR: &str = "device";
/// Machine-readable summary written next to the trace.
pub const SUMMARY_FILE: &str = "summary.json";

/// Arguments of `pcstreamctl record`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  pcstreamctl record -o /tmp/rocks -- db_bench --benchmarks=fillrandom --num=20000\n  \
pcstreamctl trace-stats /tmp/rocks\n\n\
Writes DIR/trace.pcstrace (merged, time-ordered) and DIR/summary.json. Exit status: the\n\
command's own, or 128+N when signal N killed it."
)]
pub struct RecordArgs {
    /// Output directory (created; must not already hold a trace unless --force).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Keep the per-process files in DIR/procs after merging.
    #[arg(long)]
    pub keep_parts: bool,
    /// Overwrite an existing trace in DIR.
    #[arg(long)]
    pub force: bool,
    /// Also record what a block device really receives (root only): the
    /// command runs in a fresh ext4 file system on a loop device, mounted with
    /// `discard`, as its working directory (also `$PCSTREAM_DEVICE_DIR`, with
    /// `TMPDIR` inside it); tracefs records the device's requests and the
    /// file-system's block mappings into the trace. See docs/cli.md.
    #[arg(long)]
    pub device_trace: bool,
    /// Size of the scratch device for --device-trace (e.g. 2G, 512M).
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    pub device_size: u64,
    /// Age the scratch file system first, as the paper does: one file of this
    /// fraction of its size written sequentially before the command starts
    /// (e.g. 0.9). Its device writes are in the trace, marked as ageing.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.0,
        requires = "device_trace"
    )]
    pub device_fill: f64,
    /// Record beside each Java write's call path the native signature it
    /// would have had with Java call paths off (sets PCSTREAM_JAVA_NATIVE=1),
    /// so that `compare --native-signatures` replays the same run as the
    /// paper's PCStream sees it. Costs a native stack capture per Java write.
    #[arg(long)]
    pub java_native: bool,
    #[command(flatten)]
    pub shim: ShimOptions,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Parses `512M`, `2G`, `1048576` (bytes; K/M/G/T are powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in {s:?} (use K, M, G or T)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 512M, 2G)"))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("size {s:?} is too large"))?;
    if bytes < 16 << 20 {
        return Err(format!(
            "device size {s:?} is below the 16M minimum (ext4 and its journal need room)"
        ));
    }
    Ok(bytes)
}

/// CLOCK_MONOTONIC and the wall clock now, in nanoseconds.
fn clocks_now() -> (u64, u64) {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is valid for writes; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (mono, unix)
}

/// The per-process trace files in `dir`, sorted by name.
pub fn part_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        if p.extension().is_some_and(|x| x == "pcstrace") && p.is_file() {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

/// Events the shims could not append to their trace files: the sizes of
/// the `<part>.lost` markers they leave beside them (a sparse file's size is
/// the count, so it can be written on a full file system). Also the markers.
fn lost_events(dir: &Path) -> (u64, Vec<PathBuf>) {
    let mut n = 0;
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "lost") && p.is_file() {
            n += e.metadata().map_or(0, |m| m.len());
            files.push(p);
        }
    }
    (n, files)
}

/// Human one-paragraph summary of a merge.
pub fn describe(s: &merge::MergeSummary, trace: &Path) -> String {
    let mut t = format!(
        "pcstreamctl record: {} process(es) ({} program image(s)), {} events, {} writes of {} bytes in {} signature(s), \
         {} invalidation(s), {} app hint(s), {} event(s) dropped by the shim; merged in {:.1} s into {}",
        s.pids,
        s.processes,
        s.events,
        s.writes,
        s.bytes_written,
        s.signatures,
        s.invalidations,
        s.app_hints,
        s.dropped,
        s.merge_ms as f64 / 1000.0,
        trace.display()
    );
    if s.missing_batches > 0 {
        t.push_str(&format!(
            "\n  {} batch(es) missing from the per-process files (gaps in their sequence numbers)",
            s.missing_batches
        ));
    }
    if s.torn_parts > 0 {
        t.push_str(&format!(
            "\n  {} per-process file(s) ended in a partial record (process killed while writing)",
            s.torn_parts
        ));
    }
    for b in &s.bad_parts {
        t.push_str(&format!("\n  warning: kept only the readable part of {b}"));
    }
    t
}

/// Bytes the waited-for children of this process have sent to storage so
/// far (`getrusage(RUSAGE_CHILDREN)`'s `ru_oublock`, 512-byte units: the
/// kernel's per-task I/O accounting, which sees writes however they are
/// made: `write`, `mmap`, io_uring, raw system calls).
fn children_storage_bytes() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a pointer to our rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    (ru.ru_oublock.max(0) as u64) * 512
}

/// A note when the command's processes sent much more to storage than the
/// shim saw written (`storage`: from [`children_storage_bytes`]): writes
/// the shim cannot see (docs/shim.md, "Known limits"). The kernel counts a
/// page when it becomes dirty, so a rewrite of a page still dirty counts
/// once; but it counts a whole folio, and on kernels whose file systems
/// cache files in large folios (ext4 since Linux 6.16) a 4 KiB rewrite of
/// a file the program has read counts the folio around it: a database that
/// updates its file in place can trip the note with every write seen
/// (H2: 4.6× what it wrote; a 4 KiB rewrite after a read, 300×). The note
/// says so rather than be dropped: it is the only sign of mmap and
/// io_uring writes.
pub fn unseen_writes_note(traced_bytes: u64, storage: u64) -> Option<String> {
    const MIB: f64 = 1048576.0;
    (storage > 1 << 20 && traced_bytes < storage / 2).then(|| {
        format!(
            "  note: the command's processes sent {:.1} MiB to storage but the shim saw {:.1} MiB \
             written to files: writes through io_uring, mmap, raw system calls (Go programs, \
             fio's io_uring engine) or to block devices are invisible to it, unless the kernel \
             counted whole large folios for small in-place rewrites (databases; docs/shim.md, \
             \"Known limits\")",
            storage as f64 / MIB,
            traced_bytes as f64 / MIB
        )
    })
}

/// Runs the subcommand.
pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let out = &args.output;
    if out.exists() && !out.is_dir() {
        anyhow::bail!(
            "{}: exists and is not a directory (record -o takes the directory to write the recording into)",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out = out
        .canonicalize()
        .with_context(|| format!("resolving {}", out.display()))?;
    let trace = out.join(TRACE_FILE);
    let parts_dir = out.join(PARTS_DIR);
    if !args.force && trace.exists() {
        anyhow::bail!(
            "{} already exists (use --force to overwrite)",
            trace.display()
        );
    }
    if parts_dir.exists() {
        let old = part_files(&parts_dir)?;
        if !old.is_empty() && !args.force {
            anyhow::bail!(
                "{} already holds {} per-process trace(s) (use --force to discard them)",
                parts_dir.display(),
                old.len()
            );
        }
        for p in old {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    std::fs::create_dir_all(&parts_dir)
        .with_context(|| format!("creating {}", parts_dir.display()))?;
    // Processes that switch user (runuser, servers dropping root) create
    // their own trace files: the parts directory is world-writable and
    // sticky, like /tmp (its parents must let them through).
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&parts_dir, std::fs::Permissions::from_mode(0o1777))
            .with_context(|| format!("opening {} to every user", parts_dir.display()))?;
    }

    let mut env = args.shim.env()?;
    env.push((var::RECORD_DIR.into(), parts_dir.clone().into_os_string()));
    if args.java_native {
        env.push((var::JAVA_NATIVE.into(), "1".into()));
    }
    let mut tracer = if args.device_trace {
        let mut t = DeviceTracer::start(&DeviceTraceOptions {
            size_bytes: args.device_size,
            work_dir: out.join(DEVICE_DIR),
            buffer_kb: 16 << 10,
        })?;
        let filled = t.fill(args.device_fill)?;
        if filled > 0 {
            eprintln!(
                "pcstreamctl record: aged the scratch file system with {:.0} MiB of cold data",
                filled as f64 / 1048576.0
            );
        }
        let tmp = t.mount_point().join("tmp");
        std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        env.push((var::DEVICE_DIR.into(), t.mount_point().into()));
        env.push(("TMPDIR".into(), tmp.into_os_string()));
        Some(t)
    } else {
        None
    };
    let (start_mono_ns, start_unix_ns) = clocks_now();
    if let Some(t) = tracer.as_mut() {
        t.mark_workload_start(start_mono_ns);
    }
    let storage_before = children_storage_bytes();
    let status = launch::run_child_in(
        &args.command,
        &env,
        tracer.as_ref().map(|t| t.mount_point()),
    );
    // Tear the device down whatever the command did; its records go into the trace.
    let device = tracer.map(|t| t.finish()).transpose();
    let status = status?;
    let storage_bytes = children_storage_bytes().saturating_sub(storage_before);
    let device = device.context("finishing the device recording")?;

    let parts = part_files(&parts_dir)?;
    let header = wire::TraceHeader {
        version: 1,
        producer: format!("pcstreamctl record {}", env!("CARGO_PKG_VERSION")),
        start_mono_ns,
        start_unix_ns,
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    };
    let tmp = out.join(format!("{TRACE_FILE}.tmp"));
    let writer = TraceWriter::create(&tmp)?;
    let t0 = std::time::Instant::now();
    let (mut summary, inner) = merge::merge(&parts, header, writer)
        .with_context(|| format!("merging {} into {}", parts_dir.display(), trace.display()))?;
    if let Some(d) = &device {
        // Device records follow the shim's events (readers order by time).
        let mut w = TraceWriter::resume(tmp.clone(), inner);
        devtrace::write_records(d, &mut w)?;
        w.finish()?;
        eprintln!("{}", d.describe());
    }
    summary.merge_ms = t0.elapsed().as_millis() as u64;
    std::fs::rename(&tmp, &trace)
        .with_context(|| format!("renaming {} to {}", tmp.display(), trace.display()))?;
    let (lost, lost_files) = lost_events(&parts_dir);
    let mut json = serde_json::to_value(&summary)?;
    json["lost_events"] = lost.into();
    json["storage_write_bytes"] = storage_bytes.into();
    let json = serde_json::to_string_pretty(&json)?;
    std::fs::write(out.join(SUMMARY_FILE), json + "\n")
        .with_context(|| format!("writing {}", out.join(SUMMARY_FILE).display()))?;
    if !args.keep_parts {
        for p in parts.iter().chain(&lost_files) {
            std::fs::remove_file(p).with_context(|| format!("removing {}", p.display()))?;
        }
        // Left in place if something else put files there.
        let _ = std::fs::remove_dir(&parts_dir);
    }
    eprintln!("{}", describe(&summary, &trace));
    if let Some(n) = unseen_writes_note(summary.bytes_written, storage_bytes) {
        eprintln!("{n}");
    }
    if lost > 0 {
        eprintln!(
            "  {lost} event(s) could not be appended to the per-process files \
             (record directory full or not writable): the trace lacks them"
        );
    }
    if parts.is_empty() {
        eprintln!(
            "pcstreamctl record: warning: no per-process trace was written: the command may be \
             statically linked, setuid, or the shim did not load (check LD_PRELOAD errors above)"
        );
    }
    Ok(launch::exit_code(status))
}
