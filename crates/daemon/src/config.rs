//! pcstreamd's configuration: the TOML file (`/etc/pcstream/pcstreamd.toml`
//! by default), every key with its default in one place ([`Config::default`]),
//! unknown keys rejected naming the key. `packaging/pcstreamd.toml` documents
//! every key; a test checks that file parses to exactly these defaults.

use pcstream_placement::hint::HINT_STREAMS;
use pcstream_placement::lifetime::{LifetimeConfig, ENTRY_BYTES};
use pcstream_placement::mapper::MapperConfig;
use pcstream_placement::online::OnlineConfig;
use pcstream_placement::pcstream::PcStreamConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default config file.
pub const DEFAULT_CONFIG: &str = "/etc/pcstream/pcstreamd.toml";

/// Largest configuration file read (1 MiB; the packaged one is 4 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Default runtime directory (sockets, mapping table).
pub const DEFAULT_RUNTIME_DIR: &str = "/run/pcstream";
/// Default state directory (the learned table).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/pcstream";

/// The daemon's settings. See `packaging/pcstreamd.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Runtime directory (events.sock, ctl.sock, the mapping tables).
    pub runtime_dir: PathBuf,
    /// State directory (state.json).
    pub state_dir: PathBuf,
    /// Stream ids, 0 (default/unknown) included: 5 = the four
    /// `F_SET_RW_HINT` lifetime classes; N + 1 for a device with N streams/RUHs.
    pub streams: u32,
    /// Erase unit of the device (block or FDP reclaim unit), bytes: the
    /// shortest lifetime worth telling apart. 0 = no floor.
    pub erase_unit_bytes: u64,
    /// Memory cap of each learner's live-data table (one per uid, or the shared one), MiB.
    pub memory_cap_mib: u64,
    /// Live-data chunk, KiB (4 = exact … 1024 = the paper's 1 MiB).
    pub chunk_kib: u32,
    /// One learner for all users (true) or one per uid (false).
    pub share_between_users: bool,
    /// Signatures whose frames and programs are kept for `contexts`.
    pub max_signatures: usize,
    /// Learn an in-place `O_DIRECT` write under its call path refined by
    /// how long ago the shim saw the page it overwrites written
    /// (`OnlineConfig::refine_by_age`); false: the call path alone.
    pub refine_by_age: bool,
    /// Call paths one uid may bring into its learner, and descriptions it
    /// may add (`quota.rs`).
    pub max_signatures_per_user: usize,
    /// Seconds between state saves (0 = only at shutdown).
    pub save_interval_s: u64,
    /// Largest datagram accepted, bytes.
    pub max_datagram_bytes: usize,
    /// Datagrams the kernel may queue on `events.sock` (`ingest::bind`):
    /// raised from `net.unix.max_dgram_qlen` (10) for this socket alone when
    /// the daemon may write that sysctl. 0 = the kernel's.
    pub event_queue_datagrams: u32,
    /// Optional TCP address for gRPC ("127.0.0.1:50051"); off when empty.
    pub grpc_tcp: String,
    /// Mapper settings of the pcstream policy (docs/placement.md).
    pub mapper: MapperSection,
    /// `[[device]]` sections: delivery paths set by hand instead of
    /// discovered (`domains.rs`).
    #[serde(rename = "device", skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceSection>,
}

/// One `[[device]]` section: overrides what the daemon discovers about a
/// device. Named by `dev` ("MAJ:MIN") or `path` (a block device node: its
/// device number; any other path: the device of the file system holding
/// it), one of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSection {
    /// "MAJ:MIN".
    #[serde(default)]
    pub dev: String,
    /// A device node, or a path on the file system to override.
    #[serde(default)]
    pub path: String,
    /// Delivery path: "f2fs", "raw", "file-stream", "scsi" or "none".
    pub kind: String,
    /// Write streams of the device (for "raw": the streams to use, ≤ 5
    /// reach it through hints).
    #[serde(default)]
    pub streams: u32,
    /// Erase unit (FDP reclaim unit), bytes; 0 = as discovered.
    #[serde(default)]
    pub erase_unit_bytes: u64,
}

/// The mapper keys the daemon exposes (the rest keep the policy's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MapperSection {
    /// Fraction of signatures that must have changed to re-cluster.
    pub change_fraction: f64,
    /// Longest spacing of re-cluster checks, pages.
    pub check_interval: u64,
    /// Shortest spacing of re-cluster checks, pages.
    pub first_interval: u64,
}

impl Default for MapperSection {
    fn default() -> Self {
        let m = MapperConfig::default();
        MapperSection {
            change_fraction: m.change_fraction,
            check_interval: m.check_interval,
            first_interval: m.first_interval,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            runtime_dir: DEFAULT_RUNTIME_DIR.into(),
            state_dir: DEFAULT_STATE_DIR.into(),
            streams: HINT_STREAMS + 1,
            erase_unit_bytes: 0,
            memory_cap_mib: 64,
            chunk_kib: 1024,
            share_between_users: false,
            max_signatures: 100_000,
            refine_by_age: true,
            max_signatures_per_user: 20_000,
            save_interval_s: 60,
            max_datagram_bytes: 1 << 20,
            event_queue_datagrams: 1024,
            grpc_tcp: String::new(),
            mapper: MapperSection::default(),
            devices: Vec::new(),
        }
    }
}

/// A configuration error, naming the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum DaemonConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is invalid or has an unknown key.
    #[error("{what}")]
    Parse {
        /// The file, the line and toml's message
        /// ([`pcstream_placement::readfile::toml_error`]).
        what: String,
    },
    /// A value is out of range.
    #[error("{path}: {key} = {value}: {why}")]
    Value {
        /// The file.
        path: String,
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
        /// What is allowed.
        why: &'static str,
    },
}

impl Config {
    /// Parses TOML text (`path` names it in errors) and checks the values.
    pub fn parse(text: &str, path: &str) -> Result<Config, DaemonConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| DaemonConfigError::Parse {
            what: pcstream_placement::readfile::toml_error(path, text, e.message(), e.span()),
        })?;
        c.check(path)?;
        Ok(c)
    }

    /// Reads `path` (a regular file of at most [`MAX_CONFIG_BYTES`]); a
    /// missing file at the default location means defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, DaemonConfigError> {
        let (p, required) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => (PathBuf::from(DEFAULT_CONFIG), false),
        };
        let text = pcstream_placement::readfile::read_bounded_text(&p, MAX_CONFIG_BYTES);
        match text {
            Ok(t) => Config::parse(&t, &p.display().to_string()),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::default())
            }
            Err(source) => Err(DaemonConfigError::Read {
                path: p.display().to_string(),
                source,
            }),
        }
    }

    fn check(&self, path: &str) -> Result<(), DaemonConfigError> {
        let bad = |key, value: String, why| DaemonConfigError::Value {
            path: path.into(),
            key,
            value,
            why,
        };
        if !(2..=65535).contains(&self.streams) {
            return Err(bad(
                "streams",
                self.streams.to_string(),
                "must be in 2..=65535",
            ));
        }
        if !(4..=1 << 20).contains(&self.chunk_kib) || !self.chunk_kib.is_multiple_of(4) {
            return Err(bad(
                "chunk_kib",
                self.chunk_kib.to_string(),
                "must be a multiple of 4 in 4..=1048576",
            ));
        }
        if self.max_signatures_per_user == 0 {
            return Err(bad(
                "max_signatures_per_user",
                "0".into(),
                "must be at least 1",
            ));
        }
        if self.memory_cap_mib == 0 || self.memory_cap_mib > 1 << 20 {
            return Err(bad(
                "memory_cap_mib",
                self.memory_cap_mib.to_string(),
                "must be in 1..=1048576",
            ));
        }
        if !(1024..=16 << 20).contains(&self.max_datagram_bytes) {
            return Err(bad(
                "max_datagram_bytes",
                self.max_datagram_bytes.to_string(),
                "must be in 1024..=16777216",
            ));
        }
        if self.event_queue_datagrams > 1 << 16 {
            return Err(bad(
                "event_queue_datagrams",
                self.event_queue_datagrams.to_string(),
                "must be in 0..=65536",
            ));
        }
        if !(self.mapper.change_fraction > 0.0 && self.mapper.change_fraction <= 1.0) {
            return Err(bad(
                "mapper.change_fraction",
                self.mapper.change_fraction.to_string(),
                "must be in (0, 1]",
            ));
        }
        if self.mapper.first_interval == 0 || self.mapper.check_interval == 0 {
            return Err(bad(
                "mapper.check_interval",
                format!(
                    "{}/{}",
                    self.mapper.first_interval, self.mapper.check_interval
                ),
                "intervals must be at least 1 page",
            ));
        }
        for d in &self.devices {
            if pcstream_placement::delivery::PathKind::parse(&d.kind).is_none() {
                return Err(bad(
                    "device.kind",
                    d.kind.clone(),
                    "must be one of f2fs, raw, file-stream, scsi, none",
                ));
            }
            if d.dev.is_empty() == d.path.is_empty() {
                return Err(bad(
                    "device",
                    format!("dev = {:?}, path = {:?}", d.dev, d.path),
                    "name the device by exactly one of dev (\"MAJ:MIN\") and path",
                ));
            }
            if !d.dev.is_empty() && pcstream_placement::delivery::parse_dev(&d.dev).is_none() {
                return Err(bad("device.dev", d.dev.clone(), "must be \"MAJ:MIN\""));
            }
            if d.kind == "raw" && d.streams == 0 {
                return Err(bad(
                    "device.streams",
                    "0".into(),
                    "a raw device needs its write stream count (1 or more)",
                ));
            }
        }
        if !self.grpc_tcp.is_empty() && self.grpc_tcp.parse::<std::net::SocketAddr>().is_err() {
            return Err(bad(
                "grpc_tcp",
                self.grpc_tcp.clone(),
                "must be an address like 127.0.0.1:50051",
            ));
        }
        Ok(())
    }

    /// The engine settings this configuration stands for.
    pub fn online(&self) -> OnlineConfig {
        let mapper = MapperConfig {
            change_fraction: self.mapper.change_fraction,
            check_interval: self.mapper.check_interval,
            first_interval: self.mapper.first_interval,
            erase_unit_pages: self.erase_unit_bytes / 4096,
            ..MapperConfig::default()
        };
        let cap_bytes = self.memory_cap_mib.saturating_mul(1 << 20);
        let lifetime = LifetimeConfig {
            chunk_pages: self.chunk_kib / 4,
            max_entries: (cap_bytes / ENTRY_BYTES as u64) as usize,
            ..LifetimeConfig::default()
        };
        OnlineConfig {
            streams: self.streams,
            policy: PcStreamConfig {
                lifetime,
                mapper,
                key_by_lba: false,
                // The shim looks its stream up by PC signature alone: the
                // engine must learn and publish plain signatures.
                refine: pcstream_placement::pcstream::RefineConfig::none(),
                gc_by_age: false,
                gc_streams: None,
                gc_age_only: false,
                // Every write a shim reports carries its signature; the
                // file system's own writes are not seen online.
                learn_unattributed: false,
            },
            share_between_users: self.share_between_users,
            max_signatures: self.max_signatures,
            refine_by_age: self.refine_by_age,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packaged_file_documents_exactly_the_defaults() {
        let text = include_str!("../../../packaging/pcstreamd.toml");
        // Every key is there, commented out: uncommenting them all gives the defaults.
        let uncommented: String = text
            .lines()
            .map(|l| {
                l.strip_prefix("# ")
                    .filter(|r| {
                        let mut t = r.split_whitespace();
                        let key = t.next().unwrap_or("");
                        r.starts_with('[')
                            || (t.next() == Some("=")
                                && key.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                    })
                    .unwrap_or("")
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            Config::parse(&uncommented, "packaged").unwrap(),
            Config::default()
        );
        assert_eq!(Config::parse(text, "packaged").unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = Config::parse("stremas = 3\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.toml:1: ") && e.contains("stremas"), "{e}");
        // A type error names its line and key.
        let e = Config::parse("# c\nstreams = \"x\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f.toml:2: ") && e.contains("(`streams = \"x\"`)"),
            "{e}"
        );
        let e = Config::parse("streams = 4\n[mapper\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.toml:2: ") && !e.contains('\n'), "{e}");
        let e = Config::parse("[mapper]\nseed = 1\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("seed"), "{e}");
        let e = Config::parse("streams = 1\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "f.toml: streams = 1: must be in 2..=65535");
        let e = Config::parse("chunk_kib = 6\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("chunk_kib = 6"), "{e}");
        let e = Config::parse("[[device]]\ndev = \"259:1\"\nkind = \"ext5\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("device.kind = ext5"), "{e}");
        let e = Config::parse("[[device]]\nkind = \"f2fs\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one of dev"), "{e}");
        let e = Config::parse("[[device]]\ndev = \"259\"\nkind = \"f2fs\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("device.dev = 259"), "{e}");
        let e = Config::parse("[[device]]\npath = \"/dev/x\"\nkind = \"raw\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("device.streams"), "{e}");
        let c = Config::parse(
            "[[device]]\npath = \"/dev/nvme0n1\"\nkind = \"raw\"\nstreams = 8\n\n[[device]]\ndev = \"259:1\"\nkind = \"f2fs\"\nerase_unit_bytes = 1048576\n",
            "f",
        )
        .unwrap();
        assert_eq!(c.devices.len(), 2);
        assert_eq!(
            (c.devices[0].streams, c.devices[1].erase_unit_bytes),
            (8, 1 << 20)
        );
        let c = Config::parse("streams = 9\nerase_unit_bytes = 1572864\n", "f").unwrap();
        let o = c.online();
        assert_eq!(o.streams, 9);
        assert_eq!(o.policy.mapper.erase_unit_pages, 384);
        assert_eq!(o.policy.lifetime.max_entries, (64 << 20) / ENTRY_BYTES);
    }
}
