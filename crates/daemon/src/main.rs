//! `pcstreamd`: command line, logging, then [`pcstreamd::daemon::run`].

use clap::Parser;
use pcstreamd::config::Config;
use std::path::PathBuf;

/// pcstream's daemon: learns the lifetime of every program context the shims
/// report and publishes the signature → stream mapping they apply.
#[derive(Debug, Parser)]
#[command(
    version,
    after_help = "Example:\n  pcstreamd --foreground --runtime-dir /tmp/pcs/run --state-dir /tmp/pcs/state\n  PCSTREAM_RUNTIME_DIR=/tmp/pcs/run LD_PRELOAD=libpcstream.so db_bench ...\n\nSee docs/daemon.md."
)]
struct Args {
    /// Configuration file (default /etc/pcstream/pcstreamd.toml, if present).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Runtime directory: events.sock, ctl.sock, mapping tables (default /run/pcstream).
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// State directory: the learned table (default /var/lib/pcstream).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Stay in the foreground (pcstreamd never forks; accepted for compatibility
    /// with init scripts and systemd units that pass it).
    #[arg(long)]
    foreground: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PCSTREAMD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut cfg = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pcstreamd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(d) = &args.runtime_dir {
        cfg.runtime_dir = d.clone();
    }
    if let Some(d) = &args.state_dir {
        cfg.state_dir = d.clone();
    }
    let _ = args.foreground;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pcstreamd: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(pcstreamd::daemon::run(
        cfg,
        args.config.clone(),
        (args.runtime_dir, args.state_dir),
    )) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pcstreamd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
