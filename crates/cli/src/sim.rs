//! `pcstreamctl sim`: one SSD simulation (crate `ftl-sim`) on a synthetic
//! workload or a block trace, reported as a table or JSON with WAF, the
//! per-stream counters and the simulator's own speed.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ftl_sim::workload::synthetic::{Generator, Pattern};
use ftl_sim::workload::trace::{BlkparseOptions, BlockTraceReader, Format, Kind};
use ftl_sim::{model, paper, Config, GcPolicy, Geometry, Ssd, Stats, Timing};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pcstream_placement::FromTrace;
use serde::Serialize;

/// Arguments of `pcstreamctl sim`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
pcstreamctl sim --streams 1 --synthetic uniform --prefill 1 --warmup 6000000 --writes 6000000\n  \
pcstreamctl sim --streams 3 --synthetic hotcold:0.2/0.8:seq --prefill 1 --warmup 15000000 --writes 6000000\n  \
pcstreamctl sim --streams 1 --synthetic hotcold:0.2/0.8:seq --prefill 1 --warmup 15000000 --writes 6000000\n  \
pcstreamctl sim --trace wdev_0.csv --format msr --wrap --internal-streams --timing --json")]
// One workload: a synthetic pattern or a trace (the error names both).
#[command(group(clap::ArgGroup::new("workload").required(true).args(["synthetic", "trace"])))]
pub struct SimArgs {
    /// Channels.
    #[arg(long, default_value_t = paper::CHANNELS, help_heading = "Geometry")]
    pub channels: u32,
    /// Dies (ways) per channel.
    #[arg(long, default_value_t = paper::WAYS, help_heading = "Geometry")]
    pub ways: u32,
    /// Erase blocks per die.
    #[arg(long, default_value_t = paper::BLOCKS_PER_UNIT, help_heading = "Geometry")]
    pub blocks_per_unit: u32,
    /// Pages per erase block.
    #[arg(long, default_value_t = paper::PAGES_PER_BLOCK, help_heading = "Geometry")]
    pub pages_per_block: u32,
    /// Page size in bytes.
    #[arg(long, default_value_t = paper::PAGE_SIZE, help_heading = "Geometry")]
    pub page_size: u32,

    /// Over-provisioning, (physical − logical) / logical.
    #[arg(long, default_value_t = paper::OP, help_heading = "Device")]
    pub op: f64,
    /// External streams including the default stream 0 (ids 0..N).
    #[arg(long, default_value_t = paper::STREAMS, value_name = "N", help_heading = "Device")]
    pub streams: u32,
    /// Give each external stream an internal stream for its GC copies.
    #[arg(long, help_heading = "Device")]
    pub internal_streams: bool,
    /// Without internal streams: GC copies of every stream go to one shared
    /// GC block instead of back into their own stream.
    #[arg(long, help_heading = "Device", conflicts_with = "internal_streams")]
    pub shared_gc_block: bool,
    /// GC victim selection.
    #[arg(long, value_enum, default_value_t = GcArg::Greedy, help_heading = "Device")]
    pub gc: GcArg,
    /// GC runs while fewer than this many blocks are free.
    #[arg(
        long,
        default_value_t = paper::GC_FREE_BLOCKS,
        value_name = "BLOCKS",
        help_heading = "Device"
    )]
    pub gc_free_blocks: u32,
    /// Estimate host write throughput with the timing model.
    #[arg(long, help_heading = "Device")]
    pub timing: bool,
    /// Page read latency, µs (timing model).
    #[arg(long, default_value_t = paper::READ_US, help_heading = "Device")]
    pub read_us: f64,
    /// Page program latency, µs (timing model).
    #[arg(long, default_value_t = paper::PROGRAM_US, help_heading = "Device")]
    pub program_us: f64,
    /// Block erase latency, µs (timing model).
    #[arg(long, default_value_t = paper::ERASE_US, help_heading = "Device")]
    pub erase_us: f64,
    /// Bandwidth of one channel, MB/s (timing model).
    #[arg(long, default_value_t = paper::CHANNEL_MB_S, help_heading = "Device")]
    pub channel_mb_s: f64,

    /// Fill this fraction of the logical space sequentially first, then
    /// reset the counters (the paper ages its SSD with 0.9).
    #[arg(long, value_name = "FRACTION", help_heading = "Workload")]
    pub prefill: Option<f64>,
    /// Synthetic workload: uniform, hotcold:H/C[:seq] (fraction H of the
    /// space gets fraction C of the writes), zipf:S, seq.
    #[arg(long, value_name = "PATTERN", help_heading = "Workload")]
    pub synthetic: Option<Pattern>,
    /// Page writes to measure (synthetic; default: one logical space).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "trace",
        help_heading = "Workload"
    )]
    pub writes: Option<u64>,
    /// Page writes to run before the counters are reset (synthetic).
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        conflicts_with = "trace",
        help_heading = "Workload"
    )]
    pub warmup: u64,
    /// Random seed of the synthetic workload.
    #[arg(long, default_value_t = 1, help_heading = "Workload")]
    pub seed: u64,
    /// Block trace to replay.
    #[arg(
        long,
        value_name = "FILE",
        requires = "format",
        help_heading = "Workload"
    )]
    pub trace: Option<PathBuf>,
    /// Format of --trace.
    #[arg(long, value_enum, help_heading = "Workload")]
    pub format: Option<FormatArg>,
    /// blkparse events to use: D (issued), Q (queued) or C (completed).
    #[arg(
        long,
        default_value_t = 'D',
        value_name = "ACTION",
        help_heading = "Workload"
    )]
    pub blkparse_action: char,
    /// Fold trace addresses beyond the logical space back into it (modulo)
    /// instead of failing.
    #[arg(long, help_heading = "Workload")]
    pub wrap: bool,

    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// `--gc` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GcArg {
    /// Fewest valid pages.
    Greedy,
    /// Rosenblum & Ousterhout's cost-benefit.
    CostBenefit,
}

/// `--format` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// MSR-Cambridge CSV.
    Msr,
    /// blkparse text output.
    Blkparse,
    /// fio iolog v2/v3.
    Fio,
}

impl SimArgs {
    fn config(&self) -> Config {
        Config {
            geometry: Geometry {
                channels: self.channels,
                ways: self.ways,
                blocks_per_unit: self.blocks_per_unit,
                pages_per_block: self.pages_per_block,
                page_size: self.page_size,
            },
            op: self.op,
            streams: self.streams,
            internal_streams: self.internal_streams,
            shared_gc_block: self.shared_gc_block,
            gc: match self.gc {
                GcArg::Greedy => GcPolicy::Greedy,
                GcArg::CostBenefit => GcPolicy::CostBenefit,
            },
            gc_free_blocks: self.gc_free_blocks,
            timing: self.timing.then_some(Timing {
                read_us: self.read_us,
                program_us: self.program_us,
                erase_us: self.erase_us,
                channel_mb_s: self.channel_mb_s,
            }),
        }
    }
}

/// Shows a progress bar on stderr once a run has taken a second, if stderr
/// is a terminal.
struct Progress {
    start: Instant,
    total: u64,
    unit: &'static str,
    bar: Option<ProgressBar>,
    tty: bool,
}

impl Progress {
    fn new(total: u64, unit: &'static str) -> Self {
        Progress {
            start: Instant::now(),
            total,
            unit,
            bar: None,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, pos: u64) {
        if self.bar.is_none() && self.tty && self.start.elapsed() > Duration::from_secs(1) {
            let bar = ProgressBar::with_draw_target(Some(self.total), ProgressDrawTarget::stderr())
                .with_elapsed(self.start.elapsed());
            let template = format!(
                "{{elapsed_precise}} [{{bar:40}}] {{human_pos}}/{{human_len}} {} ({{eta}} left)",
                self.unit
            );
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style.progress_chars("=> "));
            }
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(pos);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How often (in operations) the progress bar is updated.
const TICK: u64 = 1 << 16;
/// Synthetic writes generated and handed to the simulator at once.
const CHUNK: usize = 256;

/// What the measured phase did, besides the device counters.
#[derive(Debug, Serialize)]
struct RunInfo {
    /// Workload description.
    workload: String,
    /// Pages written by the pre-fill.
    prefill_pages: u64,
    /// Wall-clock seconds of the measured phase.
    wall_seconds: f64,
    /// Flash page writes (host + GC) per second of wall time: the simulator's speed.
    flash_pages_per_s: f64,
    /// CPU seconds this thread spent in the measured phase.
    cpu_seconds: f64,
    /// Flash page writes per CPU second (the speed on one unshared core).
    flash_pages_per_cpu_s: f64,
    /// Trace records read (traces only).
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_records: Option<u64>,
    /// Read records skipped (traces only).
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_reads: Option<u64>,
    /// Greedy-GC WAF of Desnoyers' model (uniform random with greedy GC only).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_waf: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    config: &'a Config,
    #[serde(flatten)]
    run: &'a RunInfo,
    #[serde(flatten)]
    stats: &'a Stats,
}

/// Runs the subcommand.
pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let (cfg, info, stats) = simulate(&args)?;
    if args.json {
        let report = Report {
            config: &cfg,
            run: &info,
            stats: &stats,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&cfg, &info, &stats);
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the device, runs the workload and returns what to report.
fn simulate(args: &SimArgs) -> anyhow::Result<(Config, RunInfo, Stats)> {
    let cfg = args.config();
    cfg.validate().context("invalid device configuration")?;
    if let Some(avail) = nvme_target::memory::meminfo("MemAvailable") {
        let need = cfg.memory_bytes();
        if need > avail {
            bail!(
                "the simulated device needs about {} MiB of memory, only {} MiB are available; use a smaller geometry",
                need >> 20,
                avail >> 20
            );
        }
    }
    let mut ssd = Ssd::new(cfg.clone()).context("invalid device configuration")?;
    let l = ssd.logical_pages();
    let mut info = RunInfo {
        workload: String::new(),
        prefill_pages: 0,
        wall_seconds: 0.0,
        flash_pages_per_s: 0.0,
        cpu_seconds: 0.0,
        flash_pages_per_cpu_s: 0.0,
        trace_records: None,
        trace_reads: None,
        model_waf: None,
    };
    if let Some(pattern) = args.synthetic {
        let mut g = Generator::new(pattern, l, cfg.streams, args.seed)?;
        if let Some(f) = args.prefill {
            info.prefill_pages = ssd
                .prefill(f, |lpn| g.stream_of(lpn))
                .context("--prefill")?;
        }
        let writes = args.writes.unwrap_or(l);
        info.workload = format!(
            "{pattern}, {} warm-up + {writes} measured page writes, seed {}",
            args.warmup, args.seed
        );
        let total = args.warmup + writes;
        let mut progress = Progress::new(total, "writes");
        // Warm-up, then the measured writes, in batches (prefetching).
        let mut buf = Vec::with_capacity(CHUNK);
        let mut done = 0u64;
        let mut measured_from = Instant::now();
        let mut cpu_from = thread_cpu_seconds();
        for (phase, n) in [(0, args.warmup), (1, writes)] {
            if phase == 1 {
                ssd.reset_stats();
                measured_from = Instant::now();
                cpu_from = thread_cpu_seconds();
            }
            let mut left = n;
            while left > 0 {
                let k = left.min(CHUNK as u64);
                buf.clear();
                buf.extend((0..k).map(|_| g.next_write()));
                ssd.write_batch(&buf)?;
                left -= k;
                done += k;
                if done % TICK < k {
                    progress.update(done);
                }
            }
        }
        progress.finish();
        info.wall_seconds = measured_from.elapsed().as_secs_f64();
        info.cpu_seconds = thread_cpu_seconds() - cpu_from;
        if matches!(pattern, Pattern::Uniform) && cfg.gc == GcPolicy::Greedy {
            info.model_waf = Some(model::greedy_waf(cfg.op, cfg.geometry.pages_per_block));
        }
    } else if let (Some(path), Some(format)) = (&args.trace, args.format) {
        if let Some(f) = args.prefill {
            info.prefill_pages = ssd.prefill(f, |_| 0).context("--prefill")?;
        }
        let format = match format {
            FormatArg::Msr => Format::Msr,
            FormatArg::Blkparse => Format::Blkparse,
            FormatArg::Fio => Format::Fio,
        };
        if path.is_dir() {
            bail!(
                "{}: is a directory; sim --trace reads a block trace (msr, blkparse, fio); \
                 to replay a `pcstreamctl record` directory use `pcstreamctl compare {}`",
                path.display(),
                path.display()
            );
        }
        info.workload = format!("trace {} ({format:?})", path.display());
        let size = std::fs::metadata(path)
            .with_context(|| format!("{}", path.display()))?
            .len();
        let mut reader = BlockTraceReader::open(path, format)?.with_blkparse(BlkparseOptions {
            action: args.blkparse_action,
        });
        let streams = FromTrace::new(cfg.streams);
        let page_size = cfg.geometry.page_size;
        let mut progress = Progress::new(size, "bytes");
        let start = Instant::now();
        let cpu_from = thread_cpu_seconds();
        let (mut records, mut reads) = (0u64, 0u64);
        while let Some(rec) = reader.next_record() {
            let rec = rec?;
            records += 1;
            if records % TICK == 0 {
                progress.update(reader.bytes_read());
            }
            if rec.kind == Kind::Read {
                reads += 1;
                continue;
            }
            let (first, n) = rec.pages(page_size);
            if n > l {
                bail!(
                    "{}:{}: a request of {n} pages is larger than the device's {l} logical pages",
                    path.display(),
                    rec.line
                );
            }
            let beyond = first.checked_add(n).is_none_or(|end| end > l);
            if beyond && !args.wrap {
                bail!(
                    "{}:{}: pages {first}..{} are beyond the device's {l} logical pages (use --wrap, or a larger geometry / --op)",
                    path.display(),
                    rec.line,
                    first.saturating_add(n)
                );
            }
            let at = |i: u64| {
                if beyond {
                    (first.wrapping_add(i)) % l
                } else {
                    first + i
                }
            };
            match rec.kind {
                Kind::Write => {
                    let s = streams.map(rec.stream.unwrap_or(0));
                    for i in 0..n {
                        ssd.write(at(i), s)?;
                    }
                }
                Kind::Discard => {
                    for i in 0..n {
                        ssd.trim(at(i), 1)?;
                    }
                }
                Kind::Read => {}
            }
        }
        progress.finish();
        info.wall_seconds = start.elapsed().as_secs_f64();
        info.cpu_seconds = thread_cpu_seconds() - cpu_from;
        info.trace_records = Some(records);
        info.trace_reads = Some(reads);
    } else {
        bail!("give a workload: --synthetic PATTERN or --trace FILE --format FORMAT");
    }
    let stats = ssd.stats();
    let flash = (stats.host_pages + stats.gc_pages) as f64;
    let rate = |secs: f64| if secs > 0.0 { flash / secs } else { 0.0 };
    info.flash_pages_per_s = rate(info.wall_seconds);
    info.flash_pages_per_cpu_s = rate(info.cpu_seconds);
    Ok((cfg, info, stats))
}

/// CPU time of the calling thread, seconds (0 if the clock is unavailable).
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.0}"))
}

fn print_table(cfg: &Config, info: &RunInfo, s: &Stats) {
    let g = &cfg.geometry;
    let gib = (g.physical_pages() * u64::from(g.page_size)) as f64 / f64::from(1u32 << 30);
    println!(
        "device    {}×{} units × {} blocks × {} pages × {} B = {gib:.1} GiB, OP {:.1} %, {} streams{}, GC {:?}",
        g.channels,
        g.ways,
        g.blocks_per_unit,
        g.pages_per_block,
        g.page_size,
        cfg.op * 100.0,
        cfg.streams,
        if cfg.internal_streams { " + internal" } else { "" },
        cfg.gc
    );
    println!("workload  {}", info.workload);
    if info.prefill_pages > 0 {
        println!(
            "prefill   {} pages (counters reset after)",
            info.prefill_pages
        );
    }
    if let (Some(r), Some(reads)) = (info.trace_records, info.trace_reads) {
        println!("records   {r} ({reads} reads ignored)");
    }
    println!();
    println!("host pages      {:>14}", s.host_pages);
    println!("GC pages        {:>14}", s.gc_pages);
    println!("erases          {:>14}", s.erases);
    println!("trimmed pages   {:>14}", s.trimmed_pages);
    println!("WAF             {:>14.4}", s.waf);
    if let Some(m) = info.model_waf {
        println!("model WAF       {m:>14.4}   (Desnoyers, greedy, uniform; steady state)");
    }
    println!("physical pages  {:>14}", s.physical_pages);
    println!("logical pages   {:>14}", s.logical_pages);
    println!("valid pages     {:>14}", s.valid_pages);
    if let Some(t) = &s.throughput {
        println!(
            "est. host IOPS  {:>14.0}   ({:.1} MiB/s, {}-bound; {:.0} with WAF 1)",
            t.host_pages_per_s, t.host_mib_per_s, t.bound, t.ideal_host_pages_per_s
        );
    }
    println!(
        "sim speed       {:>14.2}   M flash page writes/s of wall time ({:.2} s; {:.2} M/s per CPU second)",
        info.flash_pages_per_s / 1e6,
        info.wall_seconds,
        info.flash_pages_per_cpu_s / 1e6
    );
    println!();
    println!(
        "{:>6} {:>12} {:>12} {:>7} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "stream", "host", "gc", "blocks", "internal", "life p25", "p50", "p75", "p99"
    );
    for p in &s.per_stream {
        if p.host_pages == 0 && p.gc_pages == 0 && p.blocks == 0 && p.internal_blocks == 0 {
            continue;
        }
        let lt = &p.lifetime;
        println!(
            "{:>6} {:>12} {:>12} {:>7} {:>8} {:>10} {:>10} {:>10} {:>10}",
            p.stream,
            p.host_pages,
            p.gc_pages,
            p.blocks,
            p.internal_blocks,
            opt(lt.p25),
            opt(lt.p50),
            opt(lt.p75),
            opt(lt.p99)
        );
    }
    if s.gc_stream_blocks > 0 {
        println!("(shared GC stream: {} blocks)", s.gc_stream_blocks);
    }
    println!("lifetimes in host pages written between a page's write and its invalidation");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::io::Write;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    /// A small device (4 × 64 blocks × 32 pages) plus the given arguments.
    fn args(extra: &[&str]) -> SimArgs {
        let mut v = vec![
            "sim",
            "--channels",
            "2",
            "--ways",
            "2",
            "--blocks-per-unit",
            "64",
            "--pages-per-block",
            "32",
        ];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).unwrap().sim
    }

    fn trace(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn json_report_has_the_promised_fields() {
        let a = args(&[
            "--streams",
            "3",
            "--synthetic",
            "hotcold:0.2/0.8:seq",
            "--prefill",
            "1",
            "--writes",
            "20000",
            "--timing",
        ]);
        let (cfg, info, stats) = simulate(&a).unwrap();
        let report = Report {
            config: &cfg,
            run: &info,
            stats: &stats,
        };
        let v = serde_json::to_value(&report).unwrap();
        for key in [
            "waf",
            "host_pages",
            "gc_pages",
            "erases",
            "physical_pages",
            "logical_pages",
            "per_stream",
            "flash_pages_per_s",
            "config",
            "throughput",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["host_pages"], 20000);
        assert_eq!(v["physical_pages"], 4 * 64 * 32);
        assert_eq!(v["per_stream"].as_array().unwrap().len(), 3);
        // Hot writes went to stream 1, cold ones to stream 2, none to 0.
        assert_eq!(v["per_stream"][0]["host_pages"], 0);
        let hot = v["per_stream"][1]["host_pages"].as_u64().unwrap();
        assert!((15000..17000).contains(&hot), "{hot}");
    }

    #[test]
    fn uniform_greedy_reports_the_model() {
        let a = args(&[
            "--streams",
            "1",
            "--synthetic",
            "uniform",
            "--writes",
            "1000",
        ]);
        let (_, info, stats) = simulate(&a).unwrap();
        assert!(info.model_waf.unwrap() > 1.0);
        assert_eq!(stats.host_pages, 1000);
        let a = args(&[
            "--streams",
            "1",
            "--synthetic",
            "uniform",
            "--writes",
            "1000",
            "--gc",
            "cost-benefit",
        ]);
        assert!(simulate(&a).unwrap().1.model_waf.is_none());
    }

    #[test]
    fn replays_an_msr_trace_with_streams_and_discards() {
        let t = trace("1,h,0,Write,0,8192,5,2\n2,h,0,Read,0,4096,5\n3,h,0,Write,4096,4096,5,7\n");
        let path = t.path().to_str().unwrap();
        let a = args(&["--streams", "3", "--trace", path, "--format", "msr"]);
        let (_, info, stats) = simulate(&a).unwrap();
        assert_eq!(info.trace_records, Some(3));
        assert_eq!(info.trace_reads, Some(1));
        assert_eq!(stats.host_pages, 3);
        assert_eq!(stats.per_stream[2].host_pages, 2);
        // Stream 7 does not exist on a 3-stream device: the default stream.
        assert_eq!(stats.per_stream[0].host_pages, 1);
        let t = trace("fio version 2 iolog\n/dev/x write 0 16384\n/dev/x trim 0 8192\n");
        let a = args(&["--trace", t.path().to_str().unwrap(), "--format", "fio"]);
        let (_, _, stats) = simulate(&a).unwrap();
        assert_eq!(
            (stats.host_pages, stats.trimmed_pages, stats.valid_pages),
            (4, 2, 2)
        );
    }

    #[test]
    fn bad_traces_name_file_and_line() {
        let t = trace("1,h,0,Write,0,4096,5\n2,h,0,Write,x,4096,5\n");
        let path = t.path().to_str().unwrap().to_string();
        let a = args(&["--trace", &path, "--format", "msr"]);
        let e = format!("{:#}", simulate(&a).unwrap_err());
        assert!(e.contains(&format!("{path}:2:")), "{e}");
        // Beyond the logical space: an error naming the line, unless --wrap.
        let t = trace("1,h,0,Write,1099511627776,4096,5\n");
        let path = t.path().to_str().unwrap().to_string();
        let e = format!(
            "{:#}",
            simulate(&args(&["--trace", &path, "--format", "msr"])).unwrap_err()
        );
        assert!(
            e.contains(&format!("{path}:1:")) && e.contains("--wrap"),
            "{e}"
        );
        let (_, _, s) = simulate(&args(&["--trace", &path, "--format", "msr", "--wrap"])).unwrap();
        assert_eq!(s.host_pages, 1);
        // A request larger than the device is refused, even with --wrap.
        let t = trace("1,h,0,Write,0,1152921504606846976,5\n");
        let path = t.path().to_str().unwrap().to_string();
        let e = simulate(&args(&["--trace", &path, "--format", "msr", "--wrap"])).unwrap_err();
        assert!(
            format!("{e:#}").contains(&format!("{path}:1: a request of")),
            "{e:#}"
        );
    }

    #[test]
    fn bad_options_are_errors() {
        assert!(Cli::try_parse_from(["sim", "--synthetic", "zipf"]).is_err());
        // Without a workload, the error names both kinds.
        let e = Cli::try_parse_from(["sim"]).unwrap_err().to_string();
        assert!(e.contains("--synthetic") && e.contains("--trace"), "{e}");
        assert!(Cli::try_parse_from(["sim", "--trace", "x"]).is_err());
        assert!(Cli::try_parse_from([
            "sim",
            "--synthetic",
            "seq",
            "--trace",
            "x",
            "--format",
            "msr"
        ])
        .is_err());
        let e = simulate(&args(&["--op", "0", "--synthetic", "seq"])).unwrap_err();
        assert!(format!("{e:#}").contains("spare blocks"), "{e:#}");
        let e = simulate(&args(&["--prefill", "2", "--synthetic", "seq"])).unwrap_err();
        assert!(format!("{e:#}").contains("--prefill"), "{e:#}");
    }
}
