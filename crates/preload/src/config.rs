//! Environment options (`PCSTREAM_*`), read once by the library constructor.
//!
//! Parsing never fails the application: a bad value is reported to the
//! system log (one line naming the variable, `syslog.rs`) and the default
//! is used. The variables and
//! their defaults are the contract documented in `docs/shim.md`.

use pcstream_placement::env;
use std::ffi::OsString;
use std::path::PathBuf;

/// Default daemon event socket.
pub const DEFAULT_SOCKET: &str = "/run/pcstream/events.sock";
/// Default daemon runtime directory.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/pcstream";
/// Most frames a signature can hold.
pub use pcstream_placement::env::MAX_FRAMES;

/// How return addresses are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwind {
    /// Frame-pointer walk when the chain validates, else stack scan.
    Auto,
    /// Frame-pointer walk only (a broken chain ends the signature).
    FramePointer,
    /// Bounded stack scan only.
    Scan,
    /// DWARF unwinding (libgcc's unwinder through the `backtrace` crate):
    /// the slow (µs), exact reference the fast modes are measured against.
    /// Not async-signal-safe: for measurements, not production.
    Exact,
}

impl Unwind {
    /// A small number for the mode (kept in an atomic).
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// The mode of [`Unwind::index`] (`Auto` for unknown numbers).
    pub const fn from_index(i: u8) -> Unwind {
        match i {
            1 => Unwind::FramePointer,
            2 => Unwind::Scan,
            3 => Unwind::Exact,
            _ => Unwind::Auto,
        }
    }
}

/// Every option of the shim.
#[derive(Debug, Clone)]
pub struct Config {
    /// `PCSTREAM_DISABLE=1`: pure pass-through.
    pub disabled: bool,
    /// `PCSTREAM_RECORD_DIR`: per-process trace files go here.
    pub record_dir: Option<PathBuf>,
    /// `PCSTREAM_SOCKET`: daemon datagram socket.
    pub socket: PathBuf,
    /// `PCSTREAM_RUNTIME_DIR`: the daemon's runtime directory (its table
    /// files; the socket's default directory).
    pub runtime_dir: PathBuf,
    /// `PCSTREAM_MAP`: static signature → stream mapping file.
    pub map: Option<PathBuf>,
    /// `PCSTREAM_FRAMES`: frames per signature.
    pub frames: usize,
    /// `PCSTREAM_UNWIND`.
    pub unwind: Unwind,
    /// `PCSTREAM_SCAN_WORDS`: stack words the scan examines at most.
    pub scan_words: usize,
    /// `PCSTREAM_FIX_APP_HINTS`: repair malformed application hints.
    pub fix_app_hints: bool,
    /// `PCSTREAM_FLUSH_MS`: age after which a pending batch is flushed.
    pub flush_ns: u64,
    /// `PCSTREAM_DEBUG=1`: diagnostics on stderr.
    pub debug: bool,
    /// `PCSTREAM_JAVA`: Java call paths (`java.rs`).
    pub java: bool,
    /// `PCSTREAM_JAVA_NATIVE`: while recording, a Java write's native
    /// signature beside its Java one (`java::native_beside`).
    pub java_native: bool,
    /// `PCSTREAM_JAVA_FRAMES`: Java frames per signature.
    pub java_frames: usize,
    /// `PCSTREAM_PAGE_AGES`: pages the age table holds (`pageage.rs`; 0 = off).
    pub page_ages: usize,
    /// `PCSTREAM_SYSFS`: where sysfs is (tests: a device with write
    /// streams on a host without one).
    pub sysfs: PathBuf,
    /// `PCSTREAM_SYSLOG`: the system log's socket, where the shim's
    /// warnings go (`syslog.rs`).
    pub syslog: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            disabled: false,
            record_dir: None,
            socket: PathBuf::from(DEFAULT_SOCKET),
            runtime_dir: PathBuf::from(DEFAULT_RUNTIME_DIR),
            map: None,
            frames: 5,
            unwind: Unwind::Auto,
            scan_words: 512,
            fix_app_hints: true,
            flush_ns: 100_000_000,
            debug: false,
            java: true,
            java_native: false,
            java_frames: MAX_FRAMES,
            page_ages: crate::pageage::DEFAULT_SLOTS,
            sysfs: PathBuf::from("/sys"),
            syslog: PathBuf::from(crate::syslog::DEFAULT_SYSLOG),
        }
    }
}

/// A bad option value: the variable, its value, and what was expected.
#[derive(Debug, thiserror::Error)]
#[error("pcstream: ignoring {var}={value:?}: expected {expected}")]
pub struct BadOption {
    var: &'static str,
    value: String,
    expected: &'static str,
}

fn flag(v: &str) -> Option<bool> {
    match v.trim() {
        "1" | "yes" | "true" | "on" => Some(true),
        "0" | "no" | "false" | "off" | "" => Some(false),
        _ => None,
    }
}

impl Config {
    /// Options from a variable lookup (the process environment in the shim,
    /// a map in tests). Returns the config and the complaints about bad values.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> (Config, Vec<BadOption>) {
        let mut c = Config::default();
        let mut bad = Vec::new();
        let text = |var: &'static str| get(var).map(|v| v.to_string_lossy().into_owned());
        let mut complain = |var, value: String, expected| {
            bad.push(BadOption {
                var,
                value,
                expected,
            })
        };
        if let Some(v) = text(env::DISABLE) {
            match flag(&v) {
                Some(b) => c.disabled = b,
                None => complain(env::DISABLE, v, "0 or 1"),
            }
        }
        if let Some(v) = get(env::RECORD_DIR).filter(|v| !v.is_empty()) {
            c.record_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get(env::RUNTIME_DIR).filter(|v| !v.is_empty()) {
            c.runtime_dir = PathBuf::from(v);
            c.socket = c.runtime_dir.join("events.sock");
        }
        if let Some(v) = get(env::SOCKET).filter(|v| !v.is_empty()) {
            c.socket = PathBuf::from(v);
        }
        if let Some(v) = get(env::SYSFS).filter(|v| !v.is_empty()) {
            c.sysfs = PathBuf::from(v);
        }
        if let Some(v) = get(env::SYSLOG).filter(|v| !v.is_empty()) {
            c.syslog = PathBuf::from(v);
        }
        if let Some(v) = get(env::MAP).filter(|v| !v.is_empty()) {
            c.map = Some(PathBuf::from(v));
        }
        if let Some(v) = text(env::FRAMES) {
            match v.trim().parse::<usize>() {
                Ok(k) if (1..=MAX_FRAMES).contains(&k) => c.frames = k,
                _ => complain(env::FRAMES, v, "an integer in 1..=16"),
            }
        }
        if let Some(v) = text(env::UNWIND) {
            match v.trim() {
                "auto" => c.unwind = Unwind::Auto,
                "fp" => c.unwind = Unwind::FramePointer,
                "scan" => c.unwind = Unwind::Scan,
                "exact" => c.unwind = Unwind::Exact,
                _ => complain(env::UNWIND, v, "auto, fp, scan or exact"),
            }
        }
        if let Some(v) = text(env::SCAN_WORDS) {
            match v.trim().parse::<usize>() {
                Ok(n) if (16..=65536).contains(&n) => c.scan_words = n,
                _ => complain(env::SCAN_WORDS, v, "an integer in 16..=65536"),
            }
        }
        if let Some(v) = text(env::FIX_APP_HINTS) {
            match flag(&v) {
                Some(b) => c.fix_app_hints = b,
                None => complain(env::FIX_APP_HINTS, v, "0 or 1"),
            }
        }
        if let Some(v) = text(env::FLUSH_MS) {
            match v.trim().parse::<u64>() {
                Ok(ms) if ms <= 3_600_000 => c.flush_ns = ms * 1_000_000,
                _ => complain(env::FLUSH_MS, v, "milliseconds (0..=3600000)"),
            }
        }
        if let Some(v) = text(env::DEBUG) {
            match flag(&v) {
                Some(b) => c.debug = b,
                None => complain(env::DEBUG, v, "0 or 1"),
            }
        }
        if let Some(v) = text(env::JAVA_FRAMES) {
            match v.trim().parse::<usize>() {
                Ok(k) if (1..=MAX_FRAMES).contains(&k) => c.java_frames = k,
                _ => complain(env::JAVA_FRAMES, v, "an integer in 1..=16"),
            }
        }
        if let Some(v) = text(env::PAGE_AGES) {
            match v.trim().parse::<usize>() {
                Ok(k) if k <= 1 << 26 => c.page_ages = k,
                _ => complain(env::PAGE_AGES, v, "a page count in 0..=67108864"),
            }
        }
        if let Some(v) = text(env::JAVA) {
            match flag(&v) {
                Some(b) => c.java = b,
                None => complain(env::JAVA, v, "0 or 1"),
            }
        }
        if let Some(v) = text(env::JAVA_NATIVE) {
            match flag(&v) {
                Some(b) => c.java_native = b,
                None => complain(env::JAVA_NATIVE, v, "0 or 1"),
            }
        }
        (c, bad)
    }

    /// Options from the process environment.
    pub fn from_env() -> (Config, Vec<BadOption>) {
        Config::from_lookup(|k| std::env::var_os(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> (Config, Vec<BadOption>) {
        let m: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn runtime_dir_moves_the_socket_unless_the_socket_is_given() {
        let (c, _) = parse(&[("PCSTREAM_RUNTIME_DIR", "/tmp/r")]);
        assert_eq!(c.runtime_dir, PathBuf::from("/tmp/r"));
        assert_eq!(c.socket, PathBuf::from("/tmp/r/events.sock"));
        let (c, _) = parse(&[
            ("PCSTREAM_RUNTIME_DIR", "/tmp/r"),
            ("PCSTREAM_SOCKET", "/s"),
        ]);
        assert_eq!(c.socket, PathBuf::from("/s"));
        let (c, _) = parse(&[]);
        assert_eq!(c.runtime_dir, PathBuf::from(DEFAULT_RUNTIME_DIR));
    }

    #[test]
    fn defaults_without_variables() {
        let (c, bad) = parse(&[]);
        assert!(bad.is_empty());
        assert_eq!(c.frames, 5);
        assert_eq!(c.unwind, Unwind::Auto);
        assert!(c.fix_app_hints && !c.disabled && !c.debug);
        assert_eq!(c.socket, PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn values_are_parsed() {
        let (c, bad) = parse(&[
            ("PCSTREAM_FRAMES", "8"),
            ("PCSTREAM_UNWIND", "scan"),
            ("PCSTREAM_RECORD_DIR", "/tmp/x"),
            ("PCSTREAM_FIX_APP_HINTS", "0"),
            ("PCSTREAM_FLUSH_MS", "5"),
        ]);
        assert!(bad.is_empty());
        assert_eq!(c.frames, 8);
        assert_eq!(c.unwind, Unwind::Scan);
        assert_eq!(
            c.record_dir.as_deref(),
            Some(std::path::Path::new("/tmp/x"))
        );
        assert!(!c.fix_app_hints);
        assert_eq!(c.flush_ns, 5_000_000);
    }

    #[test]
    fn bad_values_are_named_and_defaulted() {
        let (c, bad) = parse(&[("PCSTREAM_FRAMES", "99"), ("PCSTREAM_UNWIND", "dwarfish")]);
        assert_eq!(c.frames, 5);
        assert_eq!(c.unwind, Unwind::Auto);
        assert_eq!(bad.len(), 2);
        let msg = bad[0].to_string();
        assert!(
            msg.contains("PCSTREAM_FRAMES") && msg.contains("99"),
            "{msg}"
        );
    }
}
