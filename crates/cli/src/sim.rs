//! `pcstreamctl sim` (not implemented yet).

use std::process::ExitCode;

/// Arguments of `pcstreamctl sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

/// Runs the subcommand.
pub fn run(_args: SimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`sim` is not implemented yet")
}
