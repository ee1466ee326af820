//! `pcstreamctl run`: runs one command (and everything it spawns) with the
//! shim preloaded, passing the shim's options through the environment, and
//! exits with the command's own status.

use crate::{launch, shim_path};
use pcstream_placement::env as var;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options shared by `run` and `record`: where the shim is and how it behaves.
#[derive(Debug, Clone, clap::Args)]
pub struct ShimOptions {
    /// The shim library (default: $PCSTREAM_SHIM, then next to pcstreamctl,
    /// then /usr/lib/pcstream, /usr/local/lib/pcstream).
    #[arg(long, value_name = "PATH")]
    pub shim: Option<PathBuf>,
    /// Daemon socket the shim sends events to (sets PCSTREAM_SOCKET).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Static signature → stream map (sets PCSTREAM_MAP; lines `<signature-hex> <stream>`).
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Maximum stack frames per signature, 1 to 16 (sets PCSTREAM_FRAMES).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=var::MAX_FRAMES as i64))]
    pub frames: Option<u32>,
    /// Unwinding method (sets PCSTREAM_UNWIND; see docs/shim.md).
    #[arg(long, value_name = "METHOD", value_parser = var::UNWIND_METHODS)]
    pub unwind: Option<String>,
}

impl ShimOptions {
    /// Environment for the child: LD_PRELOAD with the shim first, plus the
    /// options that were given.
    pub fn env(&self) -> anyhow::Result<Vec<(OsString, OsString)>> {
        let shim = shim_path::find_shim_from_env(self.shim.as_deref())?;
        let existing = std::env::var_os("LD_PRELOAD");
        let mut env = vec![(
            OsString::from("LD_PRELOAD"),
            shim_path::ld_preload_with(&shim, existing.as_deref()),
        )];
        if let Some(s) = &self.socket {
            env.push((var::SOCKET.into(), s.clone().into_os_string()));
        }
        if let Some(m) = &self.map {
            let m = m
                .canonicalize()
                .map_err(|e| anyhow::anyhow!("--map {}: {e}", m.display()))?;
            env.push((var::MAP.into(), m.into_os_string()));
        }
        if let Some(n) = self.frames {
            env.push((var::FRAMES.into(), n.to_string().into()));
        }
        if let Some(u) = &self.unwind {
            env.push((var::UNWIND.into(), u.into()));
        }
        Ok(env)
    }
}

/// Arguments of `pcstreamctl run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  pcstreamctl run --socket /run/pcstream.sock -- db_bench --benchmarks=fillrandom\n\n\
Exit status: the command's own, or 128+N when signal N killed it. SIGINT, SIGTERM and\n\
SIGHUP sent to pcstreamctl are forwarded to the command."
)]
pub struct RunArgs {
    #[command(flatten)]
    pub shim: ShimOptions,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Runs the subcommand.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let env = args.shim.env()?;
    let status = launch::run_child(&args.command, &env)?;
    Ok(launch::exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shim_options_are_checked_before_the_command_runs() {
        let ok = parse(&["--frames", "16", "--unwind", "fp", "--", "true"]).unwrap();
        assert_eq!(ok.run.shim.frames, Some(16));
        for (args, what) in [
            (&["--frames", "0", "--", "true"][..], "0 is not in 1..=16"),
            (&["--frames", "99", "--", "true"][..], "99 is not in 1..=16"),
            (&["--unwind", "bogus", "--", "true"][..], "possible values"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(what), "{args:?}: {e}");
        }
    }
}
