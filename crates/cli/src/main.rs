//! pcstreamctl: the command-line front end of pcstream.
//!
//! Each subcommand lives in its own module with its own clap `Args` struct;
//! this file only dispatches. Exit codes: 0 success, 1 runtime failure,
//! 2 usage error (clap), and the traced command's own status for `run`/`record`.

// Doc comments on the clap structs are --help text, written for a terminal
// (`hotcold:H/C[:seq]`), not rustdoc markdown.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::{Parser, Subcommand};

mod compare;
mod daemon;
mod demo;
mod device;
mod devices;
mod devtrace;
mod extents;
mod launch;
mod record;
mod run;
mod shim_path;
mod sim;
mod symbolize;
mod target;
mod trace_stats;

/// Fully automatic data placement for multi-stream and FDP SSDs.
#[derive(Debug, Parser)]
#[command(name = "pcstreamctl", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate an SSD on a synthetic workload or a block trace and report WAF.
    Sim(sim::SimArgs),
    /// Run a command under the shim (LD_PRELOAD=libpcstream.so).
    Run(run::RunArgs),
    /// Run a command tree under the shim and record one merged trace.
    Record(record::RecordArgs),
    /// Summarise a trace: signatures with volume, calls, files and call paths.
    TraceStats(trace_stats::TraceStatsArgs),
    /// Replay traces through every placement policy on a simulated SSD: WAF, IOPS, lifetimes.
    Compare(compare::CompareArgs),
    /// Ask the running pcstreamd (status, contexts, streams, watch, export, import).
    #[command(flatten)]
    Daemon(daemon::DaemonCmd),
    /// Run ftl-sim as an NVMe/TCP device with Flexible Data Placement.
    Target(target::TargetArgs),
    /// Where learnt placement reaches: block devices, file systems, or one NVMe device's FDP / Streams state and WAF.
    Device(device::DeviceArgs),
    /// The live system in one command: pcstreamd learning from db_bench under the shim, then every policy compared.
    Demo(demo::DemoArgs),
}

fn main() -> std::process::ExitCode {
    // Output piped into `head` or a closed pager ends the command quietly, as
    // with any Unix tool, instead of a "failed printing to stdout" panic:
    // Rust ignores SIGPIPE by default, so restore the default action.
    // SAFETY: setting a signal's disposition to SIG_DFL at the start of
    // main, before any thread exists, has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(a) => sim::run(a),
        Command::Run(a) => run::run(a),
        Command::Record(a) => record::run(a),
        Command::TraceStats(a) => trace_stats::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Daemon(d) => daemon::run(d),
        Command::Target(a) => target::run(a),
        Command::Device(a) => device::run(a),
        Command::Demo(a) => demo::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pcstreamctl: error: {}", error_line(&e));
            // A command that could not be started exits as with env(1).
            let code = e
                .downcast_ref::<launch::SpawnError>()
                .map_or(1, launch::SpawnError::exit_code);
            std::process::ExitCode::from(code)
        }
    }
}

/// The error and its causes on one line, each said once: a cause whose text
/// the message already ends with (an error that quotes its source) is dropped.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}
