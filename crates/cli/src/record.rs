//! `pcstreamctl record` (not implemented yet).

use std::process::ExitCode;

/// Arguments of `pcstreamctl record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {}

/// Runs the subcommand.
pub fn run(_args: RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`record` is not implemented yet")
}
