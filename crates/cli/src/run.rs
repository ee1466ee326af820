//! `pcstreamctl run` (not implemented yet).

use std::process::ExitCode;

/// Arguments of `pcstreamctl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs the subcommand.
pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`run` is not implemented yet")
}
