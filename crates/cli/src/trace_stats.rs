//! `pcstreamctl trace-stats` (not implemented yet).

use std::process::ExitCode;

/// Arguments of `pcstreamctl trace-stats`.
#[derive(Debug, clap::Args)]
pub struct TraceStatsArgs {}

/// Runs the subcommand.
pub fn run(_args: TraceStatsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`trace-stats` is not implemented yet")
}
