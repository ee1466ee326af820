//! Finding `libpcstream.so` for `run` and `record`, and building the
//! `LD_PRELOAD` value that puts it in front of whatever the caller preloads.
//!
//! Search order: `--shim PATH`, then `$PCSTREAM_SHIM`, then next to the
//! `pcstreamctl` executable (`target/<profile>/libpcstream.so` in a cargo
//! build), then `../lib/pcstream/` relative to it, then the system locations
//! in [`SYSTEM_DIRS`]. A miss is an error listing every place looked at.

use anyhow::{bail, Context};
use pcstream_placement::env as var;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// File name of the shim.
pub const SHIM_FILE: &str = "libpcstream.so";

/// Installed locations searched after the ones relative to the executable.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr/lib/pcstream",
    "/usr/local/lib/pcstream",
    "/usr/lib",
    "/usr/local/lib",
];

/// Locates the shim. `explicit` is the `--shim` flag, `env` the value of
/// `PCSTREAM_SHIM`, `exe` the running executable (all injectable for tests).
pub fn find_shim(
    explicit: Option<&Path>,
    env: Option<&OsStr>,
    exe: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return existing(p).with_context(|| format!("--shim {}", p.display()));
    }
    if let Some(p) = env.filter(|v| !v.is_empty()) {
        let p = Path::new(p);
        return existing(p).with_context(|| format!("{}={}", var::SHIM, p.display()));
    }
    let mut looked = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        looked.push(dir.join(SHIM_FILE));
        looked.push(dir.join("../lib/pcstream").join(SHIM_FILE));
    }
    looked.extend(SYSTEM_DIRS.iter().map(|d| Path::new(d).join(SHIM_FILE)));
    for p in &looked {
        if p.is_file() {
            return existing(p);
        }
    }
    let list: Vec<String> = looked
        .iter()
        .map(|p| format!("  {}", p.display()))
        .collect();
    bail!(
        "cannot find {SHIM_FILE}; build it with `cargo build -p pcstream-preload` \
         (same profile as pcstreamctl) or pass --shim PATH / set PCSTREAM_SHIM. Looked in:\n{}",
        list.join("\n")
    )
}

/// The shim located from the real environment and executable.
pub fn find_shim_from_env(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let env = std::env::var_os(var::SHIM);
    let exe = std::env::current_exe().ok();
    find_shim(explicit, env.as_deref(), exe.as_deref())
}

fn existing(p: &Path) -> anyhow::Result<PathBuf> {
    if !p.is_file() {
        bail!("{} does not exist or is not a file", p.display());
    }
    // Absolute, so processes that chdir before exec still find it.
    p.canonicalize()
        .with_context(|| format!("resolving {}", p.display()))
}

/// `LD_PRELOAD` with `shim` first, followed by the entries of `existing`
/// (colon- or space-separated, as ld.so accepts) minus any copy of the shim.
pub fn ld_preload_with(shim: &Path, existing: Option<&OsStr>) -> OsString {
    let mut out = OsString::from(shim.as_os_str());
    if let Some(existing) = existing.and_then(OsStr::to_str) {
        for entry in existing.split([':', ' ']).filter(|e| !e.is_empty()) {
            if Path::new(entry) == shim {
                continue;
            }
            out.push(":");
            out.push(entry);
        }
    } else if let Some(raw) = existing.filter(|e| !e.is_empty()) {
        // Not UTF-8: keep it verbatim rather than guess at its separators.
        out.push(":");
        out.push(raw);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_then_env_then_exe_dir() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("pcstreamctl");
        let shim = d.path().join(SHIM_FILE);
        std::fs::write(&shim, b"x").unwrap();
        let other = d.path().join("other.so");
        std::fs::write(&other, b"x").unwrap();
        let canon = |p: &Path| p.canonicalize().unwrap();
        assert_eq!(find_shim(None, None, Some(&exe)).unwrap(), canon(&shim));
        assert_eq!(
            find_shim(None, Some(other.as_os_str()), Some(&exe)).unwrap(),
            canon(&other)
        );
        assert_eq!(
            find_shim(Some(&other), Some(shim.as_os_str()), Some(&exe)).unwrap(),
            canon(&other)
        );
    }

    #[test]
    fn missing_explicit_or_env_is_an_error_not_a_fallback() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("pcstreamctl");
        std::fs::write(d.path().join(SHIM_FILE), b"x").unwrap();
        let missing = d.path().join("nope.so");
        let e = find_shim(Some(&missing), None, Some(&exe)).unwrap_err();
        assert!(format!("{e:#}").contains("--shim"), "{e:#}");
        let e = find_shim(None, Some(missing.as_os_str()), Some(&exe)).unwrap_err();
        assert!(format!("{e:#}").contains("PCSTREAM_SHIM"), "{e:#}");
    }

    #[test]
    fn miss_lists_where_it_looked() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("bin/pcstreamctl");
        match find_shim(None, None, Some(&exe)) {
            // A system-wide install would legitimately be found.
            Ok(p) => assert!(
                SYSTEM_DIRS.iter().any(|s| p.starts_with(s)),
                "{}",
                p.display()
            ),
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(
                    msg.contains(&d.path().join("bin").join(SHIM_FILE).display().to_string()),
                    "{msg}"
                );
                assert!(msg.contains("/usr/lib/pcstream/libpcstream.so"), "{msg}");
            }
        }
    }

    #[test]
    fn preload_is_prepended_and_deduplicated() {
        let shim = Path::new("/x/libpcstream.so");
        assert_eq!(
            ld_preload_with(shim, None),
            OsString::from("/x/libpcstream.so")
        );
        assert_eq!(
            ld_preload_with(shim, Some(OsStr::new("/a.so /x/libpcstream.so:/b.so"))),
            OsString::from("/x/libpcstream.so:/a.so:/b.so")
        );
    }
}
