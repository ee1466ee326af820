//! `pcstreamctl compare`: every placement policy on every trace, on a
//! simulated multi-stream SSD aged as in the PCStream paper, reported as the
//! paper's tables (WAF, modelled IOPS normalised to baseline, share of writes
//! in stream 0, signatures and re-clusterings, per-stream lifetime quartiles)
//! — as text, as JSON (`--json`) or as SVG charts (`--svg DIR`, see
//! [`crate::charts`]).
//!
//! The work is in `ftl_sim::replay`: building the replay (ground truth or the
//! allocation model), sizing and ageing the device, and the parallel runs.
//! This module chooses the runs, collects the results and renders them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use ftl_sim::replay::{
    self, simulate_all, DeviceSpec, Job, JoinStats, Replay, ReplayOptions, RunMode, RunResult,
    Source,
};
use ftl_sim::signatures::{pcstream_signatures, SignatureRow};
use pcstream_placement::policies::{PolicyConfig, POLICY_NAMES};
use serde::Serialize;

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
    #[arg(long, default_value_t = 9)]
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
    #[arg(long, default_value_t = 0.9)]
    pub prefill: f64,
    /// Over-provisioning, (physical − logical) / logical.
    #[arg(long, default_value_t = 0.07)]
    pub op: f64,
    /// Whether the device hears TRIMs (discards, and the model's frees): `off`
    /// replays as a file system mounted without `discard` would.
    #[arg(long, value_enum, default_value = "on")]
    pub trim: Switch,
    /// Use the file-system allocation model even when the trace has device records.
    #[arg(long)]
    pub model: bool,
    /// Size of the allocation model's file system in MiB (default: 5/4 of the peak live data).
    #[arg(long, value_name = "MIB")]
    pub fs_mib: Option<u64>,
    /// Allocation model: dirty pages cached before write-back (1 = write through).
    #[arg(long, value_name = "PAGES", default_value_t = ftl_sim::replay::DEFAULT_WRITEBACK_PAGES)]
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
}

/// Everything `compare` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The options of the comparison.
    pub settings: Settings,
    /// One entry per trace, in command-line order.
    pub traces: Vec<TraceReport>,
}

/// The options of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Policies, in report order.
    pub policies: Vec<String>,
    /// Device stream ids (default stream included).
    pub streams: u32,
    /// Internal-stream settings run.
    pub internal_streams: Vec<bool>,
    /// Without internal streams, GC copies shared one GC block (else they
    /// went back into their own stream).
    pub shared_gc_block: bool,
    /// Cold pre-fill fraction.
    pub prefill: f64,
    /// Over-provisioning.
    pub op: f64,
    /// Whether the device heard TRIMs.
    pub trim: bool,
    /// Warm-up passes before the measured one (tables kept).
    pub warmup_passes: u32,
    /// Policies restarted with empty tables at each round mark.
    pub clear_at_marks: bool,
}

/// One trace's results.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    /// The trace file.
    pub path: String,
    /// Where the device operations came from.
    pub source: Source,
    /// `source` in words.
    pub source_text: String,
    /// How the trace was turned into device operations.
    pub join: JoinStats,
    /// Host pages the replay writes.
    pub host_pages: u64,
    /// Logical pages of the traced device (or of the allocation model).
    pub trace_logical_pages: u64,
    /// Distinct pages the replay writes (after confinement, if any).
    pub footprint_pages: u64,
    /// When the trace's pages were spread over more than the hot region
    /// (5/4 of the peak live data), they were re-allocated into it before
    /// ageing: the footprint they had in the trace.
    pub confined_from_pages: Option<u64>,
    /// Peak of live pages during the replay.
    pub peak_live_pages: u64,
    /// Round marks in the trace (`*.pcstream-mark` files, see `--clear-at-marks`).
    pub marks: usize,
    /// The simulated device.
    pub device: DeviceReport,
    /// One entry per policy × internal-stream setting.
    pub runs: Vec<RunReport>,
    /// pcstream's placement by signature, heaviest first (`--signatures N`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<SignatureRow>,
}

/// The simulated device of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// Channels.
    pub channels: u32,
    /// Dies per channel.
    pub ways: u32,
    /// Blocks per die.
    pub blocks_per_unit: u32,
    /// Pages per block.
    pub pages_per_block: u32,
    /// Page size, bytes.
    pub page_size: u32,
    /// Physical pages.
    pub physical_pages: u64,
    /// Logical pages.
    pub logical_pages: u64,
    /// Logical size over the traced device's.
    pub scale: f64,
    /// Cold pages written before the run (stream 0).
    pub cold_pages: u64,
}

/// One policy run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Policy name.
    pub policy: String,
    /// Whether the device had internal streams.
    pub internal_streams: bool,
    /// Write amplification.
    pub waf: f64,
    /// Host pages written.
    pub host_pages: u64,
    /// GC copies.
    pub gc_pages: u64,
    /// Blocks erased.
    pub erases: u64,
    /// Modelled host write IOPS (4 KiB pages per second, timing model).
    pub iops: Option<f64>,
    /// `iops` over baseline's on the same trace and device.
    pub iops_normalized: Option<f64>,
    /// Share of host pages placed in stream 0.
    pub stream0_share: f64,
    /// Streams that received host writes.
    pub streams_used: u32,
    /// Signatures the policy tracks (pcstream).
    pub signatures: Option<u64>,
    /// Re-clusterings of the signature → stream table (pcstream).
    pub reclusterings: Option<u64>,
    /// All of the policy's own counters.
    pub policy_counters: BTreeMap<String, u64>,
    /// One entry per stream with host writes.
    pub per_stream: Vec<StreamReport>,
    /// Wall-clock seconds of the replay.
    pub replay_seconds: f64,
}

/// One stream of one run (paper Fig. 11).
#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    /// Stream id.
    pub stream: u32,
    /// Host pages placed in the stream.
    pub host_pages: u64,
    /// GC copies of the stream's data.
    pub gc_pages: u64,
    /// Pages of the stream invalidated during the run (the lifetime samples).
    pub dead_pages: u64,
    /// Lifetime quartiles of those pages, in host pages written in between.
    pub lifetime_p25: Option<f64>,
    /// Median lifetime.
    pub lifetime_p50: Option<f64>,
    /// 75th percentile lifetime.
    pub lifetime_p75: Option<f64>,
    /// Mean lifetime.
    pub lifetime_mean: Option<f64>,
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
    /// Force the allocation model.
    pub model: bool,
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policies: POLICY_NAMES.iter().map(|s| s.to_string()).collect(),
            streams: 9,
            internal: InternalMode::Off,
            shared_gc_block: false,
            prefill: 0.9,
            op: 0.07,
            model: false,
            trim: true,
            fs_pages: None,
            writeback_pages: ftl_sim::replay::DEFAULT_WRITEBACK_PAGES,
            policy_config: PolicyConfig::default(),
            threads: 2,
            warmup_passes: 0,
            clear_at_marks: false,
            signatures: 0,
        }
    }
}

/// Runs the subcommand.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let policy_config = match &args.policy_config {
        None => PolicyConfig::default(),
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
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
        model: args.model,
        trim: args.trim == Switch::On,
        fs_pages: args.fs_mib.map(|m| m * (1 << 20) / ftl_sim::replay::PAGE),
        writeback_pages: args.writeback_pages,
        policy_config,
        threads: args.threads,
        warmup_passes: args.warmup_passes,
        clear_at_marks: args.clear_at_marks,
        signatures: args.signatures,
    };
    let report = compare(&args.traces, &opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    if let Some(dir) = &args.svg {
        let files = crate::charts::write_all(&report, dir)?;
        eprintln!("wrote {} charts to {}", files.len(), dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks the options before any trace is read.
fn check(opts: &Options) -> anyhow::Result<()> {
    if opts.policies.is_empty() {
        bail!(
            "--policies: no policy given (known: {})",
            POLICY_NAMES.join(", ")
        );
    }
    for p in &opts.policies {
        if !POLICY_NAMES.contains(&p.as_str()) {
            bail!(
                "--policies: unknown policy {p:?} (known: {})",
                POLICY_NAMES.join(", ")
            );
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
    if opts.signatures > 0 && opts.clear_at_marks {
        bail!(
            "--signatures: the breakdown needs one set of tables over the trace; drop --clear-at-marks"
        );
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
        force_model: opts.model,
        writeback_pages: Some(opts.writeback_pages),
    };
    let replays: Vec<Replay> = traces
        .iter()
        .map(|p| {
            // Its errors name the trace file (and byte offset) themselves.
            Ok(Replay::from_trace(
                &crate::record::resolve_trace(p),
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
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            let mut r = if opts.trim {
                r
            } else {
                replay::without_trims(&r).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
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
        if opts.signatures > 0 {
            let job = Job {
                replay: r,
                policy: "pcstream".into(),
                spec: spec(modes[0]),
            };
            let mut rows = pcstream_signatures(&job, &opts.policy_config)
                .with_context(|| format!("breaking {} down by signature", path.display()))?;
            rows.truncate(opts.signatures);
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

/// Bytes of `pages` 4 KiB pages, human-readable.
fn size(pages: u64) -> String {
    let b = pages as f64 * 4096.0;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// A page count (lifetime) in k/M/G.
fn pages_short(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 1e9 => format!("{:.1}G", v / 1e9),
        Some(v) if v >= 1e6 => format!("{:.1}M", v / 1e6),
        Some(v) if v >= 1e4 => format!("{:.0}k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The one-line note for a trace on which GC copied (almost) nothing, so that
/// every policy's WAF is about 1: it says so and gives the commands that age the device.
fn gc_note(t: &TraceReport) -> Option<String> {
    let most_gc = t
        .runs
        .iter()
        .map(|r| r.gc_pages as f64 / r.host_pages.max(1) as f64)
        .fold(0.0, f64::max);
    if most_gc >= 0.01 {
        return None;
    }
    let copied = if t.runs.iter().all(|r| r.gc_pages == 0) {
        "nothing".to_string()
    } else {
        format!(
            "under 1% of the host writes ({:.2}% at most)",
            most_gc * 100.0
        )
    };
    Some(format!(
        "note: GC copied {copied} under every policy, so placement cannot show (WAF ≈ 1); age the device with \
         the workload's own data: pcstreamctl record --device-trace --device-fill 0.9 -o DIR -- CMD, then \
         pcstreamctl compare --prefill 0 --warmup-passes 1 DIR (docs/compare.md)"
    ))
}

/// The human-readable report: per trace, its source, join statistics and
/// device, then the paper's tables.
pub fn render(rep: &Report) -> String {
    let mut o = String::new();
    let st = &rep.settings;
    let _ = writeln!(
        o,
        "compare: {} trace(s) × {} policies, internal streams {}{}; {} streams, OP {:.0}%, {:.0}% cold pre-fill (unless a trace brings its own fill), TRIM {}",
        rep.traces.len(),
        st.policies.len(),
        match st.internal_streams.as_slice() {
            [false] => "off",
            [true] => "on",
            _ => "off and on",
        },
        match (st.internal_streams.contains(&false), st.shared_gc_block) {
            (false, _) => "",
            (true, false) => " (off: GC copies go back into their stream)",
            (true, true) => " (off: GC copies share one GC block)",
        },
        st.streams,
        st.op * 100.0,
        st.prefill * 100.0,
        if st.trim { "on" } else { "off" }
    );
    if st.warmup_passes > 0 || st.clear_at_marks {
        let _ = writeln!(
            o,
            "policies: {} warm-up pass(es) with tables kept{}",
            st.warmup_passes,
            if st.clear_at_marks {
                "; tables cleared at every round mark"
            } else {
                ""
            }
        );
    }
    for t in &rep.traces {
        let j = &t.join;
        let d = &t.device;
        let _ = writeln!(o, "\n== {} ==", t.path);
        if let Some(note) = gc_note(t) {
            let _ = writeln!(o, "{note}");
        }
        let _ = writeln!(o, "source: {}", t.source_text);
        let _ = writeln!(
            o,
            "join: {} pages written: {} file data ({:.1}% of it with a signature; {} signatures), {} metadata; {} pages trimmed",
            j.write_pages,
            j.data_pages,
            pct(j.signed_pages, j.data_pages),
            j.signatures,
            j.metadata_pages,
            j.trim_pages
        );
        let _ = writeln!(
            o,
            "      shim: {} write events, {} invalidations; {} flushes",
            j.shim_writes, j.shim_invalidations, j.flushes
        );
        let _ = writeln!(
            o,
            "device: {} ch × {} ways × {} blocks × {} pages × {} KiB = {} raw; logical {} \
             ({:.2} × the traced {}; footprint {}, peak live {}); cold pre-fill {} in stream 0",
            d.channels,
            d.ways,
            d.blocks_per_unit,
            d.pages_per_block,
            d.page_size / 1024,
            size(d.physical_pages),
            size(d.logical_pages),
            d.scale,
            size(t.trace_logical_pages),
            size(t.footprint_pages),
            size(t.peak_live_pages),
            size(d.cold_pages)
        );
        if j.ageing_pages > 0 {
            let _ = writeln!(
                o,
                "        aged by the recording's own fill: {} written before the workload started, \
                 replayed into stream 0 first and not measured (--prefill does not apply)",
                size(j.ageing_pages)
            );
        }
        if let Some(f) = t.confined_from_pages {
            let _ = writeln!(
                o,
                "        the trace's writes spread over {}: re-allocated into {} (5/4 of the peak live data) \
                 as on the aged device",
                size(f),
                size(t.footprint_pages.max(1))
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<15} {:>3} {:>7} {:>9} {:>9} {:>7} {:>10} {:>8}",
            "policy", "int", "WAF", "IOPS/base", "stream 0", "streams", "signatures", "reclust."
        );
        for r in &t.runs {
            let _ = writeln!(
                o,
                "{:<15} {:>3} {:>7.3} {:>9} {:>8.1}% {:>7} {:>10} {:>8}",
                r.policy,
                if r.internal_streams { "on" } else { "off" },
                r.waf,
                r.iops_normalized
                    .map_or_else(|| "-".into(), |v| format!("{v:.2}")),
                r.stream0_share * 100.0,
                r.streams_used,
                opt_u(r.signatures),
                opt_u(r.reclusterings)
            );
        }
        let _ = writeln!(
            o,
            "\nper-stream lifetimes (host pages written between a page's write and its invalidation):"
        );
        let _ = writeln!(
            o,
            "{:<15} {:>3} {:>6} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8}",
            "policy", "int", "stream", "share", "written", "dead", "p25", "p50", "p75"
        );
        for r in &t.runs {
            for s in &r.per_stream {
                let _ = writeln!(
                    o,
                    "{:<15} {:>3} {:>6} {:>7.1}% {:>10} {:>10} {:>8} {:>8} {:>8}",
                    r.policy,
                    if r.internal_streams { "on" } else { "off" },
                    s.stream,
                    pct(s.host_pages, r.host_pages),
                    s.host_pages,
                    s.dead_pages,
                    pages_short(s.lifetime_p25),
                    pages_short(s.lifetime_p50),
                    pages_short(s.lifetime_p75)
                );
            }
        }
        if !t.signatures.is_empty() {
            render_signatures(&mut o, t);
        }
    }
    o
}

fn render_signatures(o: &mut String, t: &TraceReport) {
    let _ = writeln!(
        o,
        "\npcstream by signature (the {} heaviest; measured pass): its streams, the lifetime it learnt \
         (from the deaths it hears) and the pages' lifetimes on the device (p10 / p50 / p90; `-`: none died):",
        t.signatures.len()
    );
    let _ = writeln!(
        o,
        "{:<18} {:>6} {:>10} {:<18} {:>8} {:>8} {:>8} {:>8}",
        "signature", "share", "pages", "streams", "learnt", "dev p10", "dev p50", "dev p90"
    );
    for r in &t.signatures {
        let streams: Vec<String> = r
            .streams
            .iter()
            .take(3)
            .map(|(s, n)| format!("{s}:{:.0}%", pct(*n, r.pages)))
            .collect();
        let _ = writeln!(
            o,
            "{:<18} {:>5.1}% {:>10} {:<18} {:>8} {:>8} {:>8} {:>8}",
            r.signature
                .map_or_else(|| "(none)".to_string(), |s| format!("{s:016x}")),
            pct(r.pages, t.host_pages),
            r.pages,
            streams.join(" "),
            pages_short(r.estimate_log2.map(f64::exp2)),
            pages_short(r.device_lifetime_p10.map(|v| v as f64)),
            pages_short(r.device_lifetime_p50.map(|v| v as f64)),
            pages_short(r.device_lifetime_p90.map(|v| v as f64))
        );
    }
    let _ = writeln!(
        o,
        "(none): device writes without a signature (file-system metadata, journal). \
         `pcstreamctl trace-stats TRACE` shows each signature's call path."
    );
}

#[cfg(test)]
mod tests;
