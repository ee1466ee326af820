//! `pcstreamctl target`: runs ftl-sim as an NVMe/TCP FDP device (the
//! `nvme-target` crate) until SIGINT/SIGTERM, logging connections and a live
//! WAF line, then prints the device's counters (a table or `--json`) and the
//! `pcstreamctl sim` command that replays its `--trace` offline. A trace
//! that failed (or a store that failed its last flush) still gets the
//! counters printed, then exits 1 with the error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use nvme_target::{DeviceConfig, Target, DEFAULT_NQN};
use serde::Serialize;

/// `pcstreamctl target` options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
pcstreamctl target --capacity 4G --ruhs 8\n  \
pcstreamctl target --listen 127.0.0.1:4420 --capacity 1G --ruhs 4 --internal-streams --backing /var/tmp/ns.img --trace ns.fio --json\n\
Then, on the host: nvme connect -t tcp -a 127.0.0.1 -s 4420 -n nqn.2026-11.io.pcstream:ftl-sim")]
pub struct TargetArgs {
    /// Device from a TOML file (keys: capacity, ruhs, ru_size, op,
    /// internal_streams, backing, trace; sizes in bytes) instead of the flags.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["capacity", "ruhs", "ru_size", "op", "internal_streams", "backing", "trace"])]
    pub config: Option<PathBuf>,
    /// Address and port to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:4420", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Namespace capacity (bytes; K, M, G, T suffixes are powers of 1024).
    #[arg(long, default_value = "4G", value_parser = parse_size)]
    pub capacity: u64,
    /// Reclaim unit handles (each one a simulator stream).
    #[arg(long, default_value_t = 8)]
    pub ruhs: u16,
    /// Reclaim unit size (= the simulated erase block).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub ru_size: u64,
    /// Over-provisioning, (physical − logical) / logical.
    #[arg(long, default_value_t = ftl_sim::paper::OP)]
    pub op: f64,
    /// GC copies of each RUH go to its own internal stream.
    #[arg(long)]
    pub internal_streams: bool,
    /// Keep the namespace's data in this file (kept across restarts) instead of memory.
    #[arg(long, value_name = "FILE")]
    pub backing: Option<PathBuf>,
    /// Log host writes and deallocations as a fio iolog (replay with `pcstreamctl sim`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Subsystem NQN.
    #[arg(long, default_value = DEFAULT_NQN)]
    pub nqn: String,
    /// Seconds between live WAF lines on stderr (0: none).
    #[arg(long, default_value_t = 5)]
    pub interval: u64,
    /// Print the final counters as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Reads a device configuration from TOML.
pub fn load_config(path: &std::path::Path) -> anyhow::Result<DeviceConfig> {
    let text = pcstream_placement::readfile::read_bounded_text(path, 1 << 20)
        .with_context(|| format!("{}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let p = path.display().to_string();
        anyhow::anyhow!(pcstream_placement::readfile::toml_error(
            &p,
            &text,
            e.message(),
            e.span()
        ))
    })
}

/// Parses `4G`, `512M`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("`{s}`: unknown size suffix `{c}` (K, M, G, T)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a size"))?;
    n.checked_mul(mul)
        .ok_or_else(|| format!("`{s}` is too large"))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe);
        // installing it has no other effect on the process.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

#[derive(Debug, Serialize)]
struct Report {
    listen: String,
    nqn: String,
    device: DeviceConfig,
    seconds: f64,
    #[serde(flatten)]
    stats: nvme_target::DeviceStats,
    /// The offline replay of `--trace` with the same model (none when the
    /// trace failed: it is incomplete).
    replay: Option<String>,
    /// Why the trace stopped, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_error: Option<String>,
}

/// Runs the subcommand.
pub fn run(a: TargetArgs) -> anyhow::Result<ExitCode> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let cfg = match &a.config {
        Some(p) => load_config(p)?,
        None => DeviceConfig {
            capacity: a.capacity,
            ruhs: a.ruhs,
            ru_size: a.ru_size,
            op: a.op,
            internal_streams: a.internal_streams,
            backing: a.backing.clone(),
            trace: a.trace.clone(),
        },
    };
    let sim = cfg.sim_config().context("invalid device")?;
    let target = Target::bind(&a.listen, cfg.clone(), &a.nqn)?;
    let addr = target.local_addr();
    catch_signals();
    let mut running = target.start().context("starting the accept thread")?;
    eprintln!(
        "pcstreamctl target: listening on {addr} (nqn {}, {} MiB, {} RUHs of {} KiB)",
        a.nqn,
        cfg.capacity >> 20,
        cfg.ruhs,
        cfg.ru_size >> 10
    );
    let start = Instant::now();
    let mut last = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if a.interval > 0 && last.elapsed() >= Duration::from_secs(a.interval) {
            last = Instant::now();
            let s = running.stats();
            let per_ruh: Vec<String> = s
                .ruh_host_bytes
                .iter()
                .map(|b| (b >> 20).to_string())
                .collect();
            eprintln!(
                "pcstreamctl target: host {} MiB, media {} MiB, WAF {:.4}, per-RUH host MiB {}",
                s.host_bytes >> 20,
                s.media_bytes >> 20,
                s.waf,
                per_ruh.join("/")
            );
        }
    }
    running.stop();
    // The counters are printed whatever failed; the failure is the exit status.
    let flushed = running.shared().dev().flush();
    let trace_error = running.shared().dev().trace_error().map(str::to_string);
    let g = &sim.geometry;
    let replay = cfg.trace.as_ref().filter(|_| trace_error.is_none()).map(|t| {
        format!(
            "pcstreamctl sim --channels 1 --ways 1 --blocks-per-unit {} --pages-per-block {} --op {} --streams {}{} --trace {} --format fio",
            g.blocks_per_unit,
            g.pages_per_block,
            sim.op,
            sim.streams,
            if sim.internal_streams { " --internal-streams" } else { "" },
            t.display()
        )
    });
    let report = Report {
        listen: addr.to_string(),
        nqn: a.nqn,
        device: cfg,
        seconds: start.elapsed().as_secs_f64(),
        stats: running.stats(),
        replay,
        trace_error,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let s = &report.stats;
        println!("host bytes written   {:>16}", s.host_bytes);
        println!("media bytes written  {:>16}", s.media_bytes);
        println!("media bytes erased   {:>16}", s.erased_bytes);
        println!("WAF                  {:>16.4}", s.waf);
        println!(
            "bytes deallocated    {:>16}   (that held data)",
            s.trimmed_bytes
        );
        println!("bytes live at exit   {:>16}", s.valid_bytes);
        for (i, (b, g)) in s.ruh_host_bytes.iter().zip(&s.ruh_gc_bytes).enumerate() {
            println!("RUH {i:<3} host bytes     {b:>16}   GC-copied {g:>16}");
        }
        if let Some(r) = &report.replay {
            println!("replay: {r}");
        }
        if let Some(e) = &report.trace_error {
            println!("trace failed: {e}");
        }
    }
    flushed.context("flushing the device")?;
    if let Some(e) = report.trace_error {
        anyhow::bail!(e);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn toml_config_with_defaults_and_a_named_bad_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.toml");
        std::fs::write(&p, "capacity = 67108864\nruhs = 3\n").unwrap();
        let c = super::load_config(&p).unwrap();
        assert_eq!((c.capacity, c.ruhs, c.ru_size), (64 << 20, 3, 1 << 20));
        std::fs::write(&p, "rus = 3\n").unwrap();
        let e = super::load_config(&p).unwrap_err().to_string();
        assert!(e.contains("rus") && e.contains("d.toml"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("4X").unwrap_err().contains("suffix"));
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("G").is_err());
    }
}
