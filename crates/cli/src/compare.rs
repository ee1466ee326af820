//! `pcstreamctl compare`: every placement policy on every trace, on a
//! simulated multi-stream SSD aged as in the PCStream paper, reported as the
//! paper's tables (WAF, modelled IOPS normalised to baseline, share of writes
//! in stream 0, signatures and re-clusterings, per-stream lifetime quartiles)
//! — as text, as JSON (`--json`) or as SVG charts (`--svg DIR`, see
//! [`charts`]). Split by job: [`report`] (the data), [`text`], [`charts`].
//!
//! The work is in `pcstream_replay`: building the replay (ground truth or the
//! allocation model), sizing and ageing the device, and the parallel runs.
//! This module chooses the runs, collects the results and renders them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use ftl_sim::paper;
use pcstream_placement::policies::{PolicyConfig, EXTRA_POLICY_NAMES, POLICY_NAMES};
use pcstream_replay::signatures::pcstream_signatures;
use pcstream_replay::{
    self as replay, simulate_all, DeviceSpec, Job, Replay, ReplayOptions, RunMode, RunResult,
};

/// Whether the simulated device has internal (GC) streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InternalMode {
    /// GC copies of every stream share one GC block.
    Off,
    /// One internal stream per external stream.
    On,
    /// Run both devices (paper Fig. 12).
    Both,
}

impl InternalMode {
    fn modes(self) -> &'static [bool] {
        match self {
            InternalMode::Off => &[false],
            InternalMode::On => &[true],
            InternalMode::Both => &[false, true],
        }
    }
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Arguments of `pcstreamctl compare`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  pcstreamctl compare /tmp/x/trace.pcstrace --internal-streams both --svg /tmp/x/charts\n\n\
Each trace is replayed from its device records (ground truth) when it has them, else through \
the file-system allocation model; the report says which. See docs/compare.md."
)]
pub struct CompareArgs {
    /// Trace files written by `pcstreamctl record`.
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Policies to run, comma-separated, in report order.
    #[arg(long, value_delimiter = ',', default_values_t = POLICY_NAMES.iter().map(|s| s.to_string()))]
    pub policies: Vec<String>,
    /// Stream ids of the device, default stream included (PM963: 9).
    #[arg(long, default_value_t = paper::STREAMS)]
    pub streams: u32,
    /// Internal (GC) streams of the device.
    #[arg(long, value_enum, default_value = "off")]
    pub internal_streams: InternalMode,
    /// Without internal streams, GC copies of every stream go to one shared
    /// GC block (default: back into the victim's own stream, the paper's
    /// device without internal streams).
    #[arg(long)]
    pub shared_gc_block: bool,
    /// Fraction of the logical space pre-filled with cold data (the paper: 0.9).
    #[arg(long, default_value_t = paper::PREFILL)]
    pub prefill: f64,
    /// Over-provisioning, (physical − logical) / logical.
    #[arg(long, default_value_t = paper::OP)]
    pub op: f64,
    /// Whether the device hears TRIMs (discards, and the model's frees): `off`
    /// replays as a file system mounted without `discard` would.
    #[arg(long, value_enum, default_value = "on")]
    pub trim: Switch,
    /// Use the file-system allocator even when the trace has device records
    /// (`--model` is the old spelling).
    #[arg(long, alias = "model")]
    pub fs_alloc: bool,
    /// Size of the allocation model's file system in MiB (default: 5/4 of the peak live data).
    #[arg(long, value_name = "MIB")]
    pub fs_mib: Option<u64>,
    /// Allocation model: dirty pages cached before write-back (1 = write through).
    #[arg(long, value_name = "PAGES", default_value_t = pcstream_replay::DEFAULT_WRITEBACK_PAGES)]
    pub writeback_pages: u64,
    /// Policy parameters as JSON (`PolicyConfig`, every field optional; `streams` is set by --streams).
    #[arg(long, value_name = "FILE")]
    pub policy_config: Option<PathBuf>,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write SVG charts (WAF, IOPS, per-stream lifetimes) into this directory.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Simulations run in parallel.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Replay each trace this many times before the measured pass, through
    /// the same policy and device ("PC table kept"; the warm-up writes are
    /// not counted).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup_passes: u32,
    /// Give every policy empty tables (a new instance) at each round mark of
    /// the trace, a file named `*.pcstream-mark` (paper Fig. 13, "PC table
    /// cleared"; bench/workloads.sh marks each gcc build).
    #[arg(long)]
    pub clear_at_marks: bool,
    /// Also show pcstream's placement of the N heaviest signatures per trace:
    /// streams, learnt lifetime, and how long their pages lived on the
    /// device (`pcstreamctl trace-stats` names their call paths).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub signatures: usize,
    /// Break down these signatures only (16 hex digits, as `trace-stats`
    /// and `contexts` print them; repeatable): every stream pcstream and
    /// pcstream-paper put their pages in, what each learnt, and how long
    /// the pages lived on the device.
    #[arg(long, value_name = "SIGNATURE", value_parser = parse_signature)]
    pub explain: Vec<u64>,
    /// Replay a Java program's writes under their native signatures, which
    /// `record` keeps beside their Java call paths: the same run as the
    /// paper's PCStream sees it without its JDK change (every write of the
    /// JVM under the JDK native it went through). A trace without any is
    /// an error.
    #[arg(long)]
    pub native_signatures: bool,
}

/// A signature as printed: 16 hex digits (a `0x` prefix allowed).
fn parse_signature(s: &str) -> Result<u64, String> {
    let h = s.strip_prefix("0x").unwrap_or(s);
    if h.is_empty() || h.len() > 16 {
        return Err(format!("{s:?} is not a signature (16 hex digits)"));
    }
    u64::from_str_radix(h, 16).map_err(|_| format!("{s:?} is not a signature (16 hex digits)"))
}

/// Options of [`compare`] (the arguments without the output choices).
#[derive(Debug, Clone)]
pub struct Options {
    /// Policies in report order.
    pub policies: Vec<String>,
    /// Device streams.
    pub streams: u32,
    /// Internal-stream settings.
    pub internal: InternalMode,
    /// Shared GC block without internal streams.
    pub shared_gc_block: bool,
    /// Cold fraction.
    pub prefill: f64,
    /// Over-provisioning.
    pub op: f64,
    /// Force the file-system allocator.
    pub fs_alloc: bool,
    /// Pass TRIMs to the device.
    pub trim: bool,
    /// Model file-system size, pages.
    pub fs_pages: Option<u64>,
    /// Model page-cache size, pages.
    pub writeback_pages: u64,
    /// Policy parameters.
    pub policy_config: PolicyConfig,
    /// Parallel simulations.
    pub threads: usize,
    /// Warm-up passes (tables kept).
    pub warmup_passes: u32,
    /// New policy instances at round marks.
    pub clear_at_marks: bool,
    /// Signatures to break pcstream's placement down by, per trace (0 = none).
    pub signatures: usize,
    /// Signatures to break down alone (`--explain`); every one must have
    /// written in every trace.
    pub explain: Vec<u64>,
    /// Replay Java writes under their recorded native signatures.
    pub native_signatures: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policies: POLICY_NAMES.iter().map(|s| s.to_string()).collect(),
            streams: paper::STREAMS,
            internal: InternalMode::Off,
            shared_gc_block: false,
            prefill: paper::PREFILL,
            op: paper::OP,
            fs_alloc: false,
            trim: true,
            fs_pages: None,
            writeback_pages: pcstream_replay::DEFAULT_WRITEBACK_PAGES,
            policy_config: PolicyConfig::default(),
            threads: 2,
            warmup_passes: 0,
            clear_at_marks: false,
            signatures: 0,
            explain: Vec::new(),
            native_signatures: false,
        }
    }
}

/// Runs the subcommand.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let policy_config = match &args.policy_config {
        None => PolicyConfig::default(),
        Some(p) => {
            // Bounded: a FIFO or /dev/zero named by mistake is refused.
            let text = pcstream_placement::readfile::read_bounded_text(p, 1 << 20)
                .with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a policy config", p.display()))?
        }
    };
    let opts = Options {
        policies: args.policies,
        streams: args.streams,
        internal: args.internal_streams,
        shared_gc_block: args.shared_gc_block,
        prefill: args.prefill,
        op: args.op,
        fs_alloc: args.fs_alloc,
        trim: args.trim == Switch::On,
        fs_pages: args.fs_mib.map(|m| m * (1 << 20) / pcstream_replay::PAGE),
        writeback_pages: args.writeback_pages,
        policy_config,
        threads: args.threads,
        warmup_passes: args.warmup_passes,
        clear_at_marks: args.clear_at_marks,
        signatures: args.signatures,
        explain: args.explain,
        native_signatures: args.native_signatures,
    };
    let report = compare(&args.traces, &opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    if let Some(dir) = &args.svg {
        let files = charts::write_all(&report, dir)?;
        eprintln!("wrote {} charts to {}", files.len(), dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks the options before any trace is read.
fn check(opts: &Options) -> anyhow::Result<()> {
    let known = || {
        POLICY_NAMES
            .iter()
            .chain(EXTRA_POLICY_NAMES)
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    };
    if opts.policies.is_empty() {
        bail!("--policies: no policy given (known: {})", known());
    }
    for p in &opts.policies {
        if !POLICY_NAMES.contains(&p.as_str()) && !EXTRA_POLICY_NAMES.contains(&p.as_str()) {
            bail!("--policies: unknown policy {p:?} (known: {})", known());
        }
    }
    if !(1..=256).contains(&opts.streams) {
        bail!("--streams: {} is outside 1..=256", opts.streams);
    }
    if !(0.0..1.0).contains(&opts.prefill) {
        bail!("--prefill: {} is outside [0, 1)", opts.prefill);
    }
    if !(opts.op.is_finite() && opts.op > 0.0 && opts.op <= 10.0) {
        bail!("--op: {} is not in (0, 10]", opts.op);
    }
    if opts.fs_pages == Some(0) {
        bail!("--fs-mib: the model file system needs at least one page");
    }
    if (opts.signatures > 0 || !opts.explain.is_empty()) && opts.clear_at_marks {
        let arg = if opts.signatures > 0 {
            "--signatures"
        } else {
            "--explain"
        };
        bail!("{arg}: the breakdown needs one set of tables over the trace; drop --clear-at-marks");
    }
    let cfg = PolicyConfig {
        streams: opts.streams,
        ..opts.policy_config.clone()
    };
    cfg.validate().context("--policy-config")?;
    Ok(())
}

/// Replays every trace through every policy (and internal-stream setting).
pub fn compare(traces: &[PathBuf], opts: &Options) -> anyhow::Result<Report> {
    check(opts)?;
    let ropts = ReplayOptions {
        logical_pages: opts.fs_pages,
        force_fs_alloc: opts.fs_alloc,
        writeback_pages: Some(opts.writeback_pages),
        native_signatures: opts.native_signatures,
        ..Default::default()
    };
    let replays: Vec<Replay> = traces
        .iter()
        .map(|p| {
            // Its errors name the trace file (and byte offset) themselves.
            Ok(Replay::from_trace(
                &pcstream_placement::trace::resolve_trace(p),
                &ropts,
            )?)
        })
        .collect::<anyhow::Result<_>>()?;
    let replays: Vec<Replay> = replays
        .into_iter()
        .zip(traces)
        .map(|(r, p)| {
            if r.host_pages() == 0 {
                bail!("{}: the trace has no writes to replay", p.display());
            }
            let r = replay::fit_for_ageing(r, opts.prefill)
                .with_context(|| p.display().to_string())?;
            let mut r = if opts.trim {
                r
            } else {
                replay::without_trims(&r).with_context(|| p.display().to_string())?
            };
            if opts.clear_at_marks && r.marks.is_empty() {
                eprintln!(
                    "compare: warning: {} has no round marks (*{}); --clear-at-marks changes nothing there",
                    p.display(),
                    replay::MARK_SUFFIX
                );
            }
            r.run_mode = RunMode {
                warmup_passes: opts.warmup_passes,
                clear_at_marks: opts.clear_at_marks,
            };
            Ok(r)
        })
        .collect::<anyhow::Result<_>>()?;
    let modes = opts.internal.modes();
    let spec = |internal_streams| DeviceSpec {
        streams: opts.streams,
        internal_streams,
        shared_gc_block: opts.shared_gc_block,
        op: opts.op,
        prefill: opts.prefill,
        ..DeviceSpec::default()
    };
    let mut jobs = Vec::new();
    for r in &replays {
        for &internal_streams in modes {
            for p in &opts.policies {
                jobs.push(Job {
                    replay: r,
                    policy: p.clone(),
                    spec: spec(internal_streams),
                });
            }
        }
    }
    let results = simulate_all(&jobs, &opts.policy_config, opts.threads);
    let mut results = results.into_iter();
    let mut out = Vec::new();
    for (r, path) in replays.iter().zip(traces) {
        let mut runs = Vec::new();
        for _ in 0..modes.len() * opts.policies.len() {
            let res = results
                .next()
                .expect("one result per job")
                .with_context(|| format!("simulating {}", path.display()))?;
            runs.push(res);
        }
        let mut t = trace_report(path, r, &runs);
        if opts.signatures > 0 || !opts.explain.is_empty() {
            let job = Job {
                replay: r,
                policy: "pcstream".into(),
                spec: spec(modes[0]),
            };
            let mut rows = pcstream_signatures(&job, &opts.policy_config)
                .with_context(|| format!("breaking {} down by signature", path.display()))?;
            if opts.explain.is_empty() {
                rows.truncate(opts.signatures);
            } else {
                rows.retain(|r| r.signature.is_some_and(|s| opts.explain.contains(&s)));
                for sig in &opts.explain {
                    if !rows.iter().any(|r| r.signature == Some(*sig)) {
                        bail!(
                            "--explain {sig:016x}: no page of {} was written by that signature \
                             (`pcstreamctl trace-stats` lists the trace's signatures)",
                            path.display()
                        );
                    }
                }
                t.explained = true;
            }
            t.signatures = rows;
        }
        out.push(t);
    }
    Ok(Report {
        settings: Settings {
            policies: opts.policies.clone(),
            streams: opts.streams,
            internal_streams: modes.to_vec(),
            shared_gc_block: opts.shared_gc_block,
            prefill: opts.prefill,
            op: opts.op,
            trim: opts.trim,
            warmup_passes: opts.warmup_passes,
            clear_at_marks: opts.clear_at_marks,
            native_signatures: opts.native_signatures,
        },
        traces: out,
    })
}

fn trace_report(path: &Path, r: &Replay, runs: &[RunResult]) -> TraceReport {
    let l = &runs[0].layout;
    let g = l.config.geometry;
    let mut reports: Vec<RunReport> = runs.iter().map(run_report).collect();
    for i in 0..reports.len() {
        let base = reports
            .iter()
            .find(|b| b.policy == "baseline" && b.internal_streams == reports[i].internal_streams)
            .and_then(|b| b.iops);
        reports[i].iops_normalized = match (reports[i].iops, base) {
            (Some(x), Some(b)) if b > 0.0 => Some(x / b),
            _ => None,
        };
    }
    TraceReport {
        path: path.display().to_string(),
        source: r.source,
        source_text: r.source.to_string(),
        join: r.stats.clone(),
        host_pages: r.host_pages(),
        trace_logical_pages: r.logical_pages,
        footprint_pages: r.footprint_pages,
        confined_from_pages: r.confined_from,
        peak_live_pages: r.peak_live_pages,
        marks: r.marks.len(),
        device: DeviceReport {
            channels: g.channels,
            ways: g.ways,
            blocks_per_unit: g.blocks_per_unit,
            pages_per_block: g.pages_per_block,
            page_size: g.page_size,
            physical_pages: g.physical_pages(),
            logical_pages: l.logical_pages,
            scale: l.scale(),
            cold_pages: l.cold_pages,
        },
        runs: reports,
        signatures: Vec::new(),
        explained: false,
    }
}

fn run_report(r: &RunResult) -> RunReport {
    let s = &r.stats;
    let counters: BTreeMap<String, u64> = r.policy_counters.iter().cloned().collect();
    let per_stream: Vec<StreamReport> = s
        .per_stream
        .iter()
        .filter(|p| p.host_pages > 0 || p.lifetime.count > 0)
        .map(|p| StreamReport {
            stream: p.stream,
            host_pages: p.host_pages,
            gc_pages: p.gc_pages,
            dead_pages: p.lifetime.count,
            lifetime_p25: p.lifetime.p25,
            lifetime_p50: p.lifetime.p50,
            lifetime_p75: p.lifetime.p75,
            lifetime_mean: p.lifetime.mean,
        })
        .collect();
    RunReport {
        policy: r.policy.clone(),
        internal_streams: r.internal_streams,
        waf: s.waf,
        host_pages: s.host_pages,
        gc_pages: s.gc_pages,
        erases: s.erases,
        iops: s.throughput.map(|t| t.host_pages_per_s),
        iops_normalized: None,
        stream0_share: if s.host_pages == 0 {
            0.0
        } else {
            r.counters.stream0_pages as f64 / s.host_pages as f64
        },
        streams_used: r
            .counters
            .pages_per_stream
            .iter()
            .filter(|&&n| n > 0)
            .count() as u32,
        signatures: counters.get("signatures").copied(),
        reclusterings: counters.get("reclusters").copied(),
        policy_counters: counters,
        per_stream,
        replay_seconds: r.seconds,
    }
}

pub mod charts;
pub mod report;
pub mod text;

pub use report::*;
pub use text::render;

#[cfg(test)]
mod tests;
