//! The learning domain of each event's file, found once per device: the
//! daemon's side of `pcstream_placement::delivery`. A file's device
//! (`FileId.dev`, `st_dev`) is classified with its file system type from
//! `/proc/self/mountinfo` and the sysfs walk; a block device node
//! (`FileId.ino == 0`, `dev` = its `st_rdev`) by its disk's write streams.
//! `[[device]]` sections of the configuration replace what discovery says
//! for the devices they name. Results are cached per (device, node) for the
//! daemon's life (a configuration reload starts a new cache), so the
//! ingest path costs one hash lookup per write.
//!
//! A device whose path delivers nothing although it has write streams
//! (ext4 on an FDP namespace) is logged once, and `status` warns about it,
//! naming the ways that work.

use crate::config::{Config, DeviceSection};
use pcstream_placement::delivery::{self, Delivery, Domain, PathKind, Sysfs};
use pcstream_placement::online::DomainSpec;
use pcstream_placement::wire;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// A device as the daemon classified it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Device number.
    pub dev: u64,
    /// Writes to the block device node itself.
    pub node: bool,
    /// Where placement goes.
    pub delivery: Delivery,
    /// The learning domain and its device facts.
    pub spec: DomainSpec,
    /// Set by a `[[device]]` section.
    pub configured: bool,
}

/// Classifies devices, with a cache and the configured overrides.
#[derive(Debug)]
pub struct Classifier {
    sysfs: Sysfs,
    overrides: BTreeMap<u64, DeviceSection>,
    cache: HashMap<(u64, bool), Seen>,
}

/// The device number a `[[device]]` section names (`None`, logged, when its
/// path cannot be read).
fn section_dev(d: &DeviceSection) -> Option<u64> {
    if !d.dev.is_empty() {
        return delivery::parse_dev(&d.dev);
    }
    match std::fs::metadata(&d.path) {
        Ok(m) if m.file_type().is_block_device() => Some(m.rdev()),
        Ok(m) => Some(m.dev()),
        Err(e) => {
            tracing::warn!(path = %d.path, error = %e, "[[device]] section ignored: path unreadable");
            None
        }
    }
}

impl Classifier {
    /// A classifier for `cfg`'s overrides over the host's sysfs.
    pub fn new(cfg: &Config) -> Classifier {
        Classifier::with_sysfs(cfg, Sysfs::default())
    }

    /// The same over another sysfs tree (tests).
    pub fn with_sysfs(cfg: &Config, sysfs: Sysfs) -> Classifier {
        let overrides = cfg
            .devices
            .iter()
            .filter_map(|d| section_dev(d).map(|n| (n, d.clone())))
            .collect();
        Classifier {
            sysfs,
            overrides,
            cache: HashMap::new(),
        }
    }

    /// The domain of writes to `f` (cached per device).
    pub fn spec(&mut self, f: &wire::FileId) -> DomainSpec {
        let node = f.ino == 0;
        if let Some(s) = self.cache.get(&(f.dev, node)) {
            return s.spec;
        }
        let seen = self.classify(f.dev, node);
        if seen.delivery.hints_lost() {
            tracing::warn!(
                dev = %delivery::dev_name(f.dev),
                disks = %seen.delivery.disks.join(","),
                streams = seen.delivery.device_streams,
                "learnt hints cannot reach this device: {}; {}",
                seen.delivery.why,
                delivery::WAYS_THAT_WORK
            );
        } else {
            tracing::info!(
                dev = %delivery::dev_name(f.dev),
                node,
                path = seen.delivery.kind.name(),
                domain = %seen.spec.domain.name(),
                classes = seen.delivery.classes,
                "device classified: {}",
                seen.delivery.why
            );
        }
        let spec = seen.spec;
        self.cache.insert((f.dev, node), seen);
        spec
    }

    fn classify(&self, dev: u64, node: bool) -> Seen {
        let (mut d, configured) = match self.overrides.get(&dev) {
            Some(o) => {
                let kind = PathKind::parse(&o.kind).unwrap_or(PathKind::None);
                let found = if node {
                    self.sysfs.classify_node(dev)
                } else {
                    self.sysfs.classify_files(dev, "configured")
                };
                let classes = match kind {
                    PathKind::F2fs => 3,
                    PathKind::Raw => o.streams.min(delivery::RAW_MAX_STREAMS),
                    PathKind::Scsi => 4,
                    _ => 0,
                };
                (
                    Delivery {
                        kind,
                        classes,
                        device_streams: if o.streams > 0 {
                            o.streams
                        } else {
                            found.device_streams
                        },
                        erase_unit_bytes: if o.erase_unit_bytes > 0 {
                            o.erase_unit_bytes
                        } else {
                            found.erase_unit_bytes
                        },
                        disks: found.disks,
                        why: "set by a [[device]] section".into(),
                    },
                    true,
                )
            }
            None if node => (self.sysfs.classify_node(dev), false),
            None => {
                let fs = delivery::fs_type_of_dev(dev).unwrap_or_else(|| "unknown".into());
                (self.sysfs.classify_files(dev, &fs), false)
            }
        };
        // A raw path applies to writes to the node; files on a device set
        // "raw" keep the default domain.
        if d.kind == PathKind::Raw && !node {
            d.kind = PathKind::None;
        }
        let domain = d.domain(dev);
        let spec = DomainSpec {
            domain,
            device_streams: d.device_streams,
            erase_unit_pages: match domain {
                Domain::Hints => 0,
                _ => d.erase_unit_bytes / 4096,
            },
        };
        Seen {
            dev,
            node,
            delivery: d,
            spec,
            configured,
        }
    }

    /// The device entries to publish ([`delivery::device_key`]): the class
    /// of the files on each device a `[[device]]` section names.
    pub fn device_entries(&self) -> Vec<(u64, u32)> {
        self.overrides
            .iter()
            .map(|(&dev, o)| {
                let class = if o.kind == "f2fs" {
                    delivery::DEVICE_CLASS_F2FS
                } else {
                    delivery::DEVICE_CLASS_HINTS
                };
                (dev, class)
            })
            .collect()
    }

    /// Every device classified so far, by (device, node).
    pub fn seen(&self) -> Vec<&Seen> {
        let mut v: Vec<&Seen> = self.cache.values().collect();
        v.sort_by_key(|s| (s.dev, s.node));
        v
    }

    /// The devices where domain `d`'s streams arrive as placement, as
    /// "MAJ:MIN path" lines.
    pub fn devices_of(&self, d: Domain) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|s| s.spec.domain == d)
            .map(|s| {
                format!(
                    "{} {}{}",
                    delivery::dev_name(s.dev),
                    s.delivery.kind.name(),
                    if s.delivery.device_streams > 0 {
                        format!(" ({} write streams)", s.delivery.device_streams)
                    } else {
                        String::new()
                    }
                )
            })
            .collect()
    }

    /// One warning per device whose hints are lost (`status`).
    pub fn warnings(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|s| s.delivery.hints_lost())
            .map(|s| {
                format!(
                    "device {} ({}): {}; {}",
                    delivery::dev_name(s.dev),
                    s.delivery.disks.join(","),
                    s.delivery.why,
                    delivery::WAYS_THAT_WORK
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn fake_nvme(root: &std::path::Path) {
        let d = root.join("devices/nvme0n1");
        std::fs::create_dir_all(d.join("queue")).unwrap();
        std::fs::write(d.join("dev"), "259:0").unwrap();
        std::fs::write(d.join("queue/max_write_streams"), "8").unwrap();
        std::fs::write(d.join("queue/write_stream_granularity"), "1048576").unwrap();
        std::fs::create_dir_all(root.join("dev/block")).unwrap();
        symlink(&d, root.join("dev/block/259:0")).unwrap();
    }

    #[test]
    fn nodes_with_streams_are_raw_domains_and_overrides_win() {
        let t = tempfile::tempdir().unwrap();
        fake_nvme(t.path());
        let nvme = delivery::parse_dev("259:0").unwrap();
        let cfg = Config::parse(
            "[[device]]\ndev = \"7:3\"\nkind = \"f2fs\"\nerase_unit_bytes = 8192\n",
            "t",
        )
        .unwrap();
        let mut c = Classifier::with_sysfs(&cfg, Sysfs::new(t.path()));
        let raw = c.spec(&wire::FileId { dev: nvme, ino: 0 });
        assert_eq!(raw.domain, Domain::Raw { dev: nvme });
        assert_eq!((raw.device_streams, raw.erase_unit_pages), (8, 256));
        // Files on the namespace (not mounted here): no hint reaches it.
        let files = c.spec(&wire::FileId { dev: nvme, ino: 12 });
        assert_eq!(files.domain, Domain::Hints);
        assert_eq!(c.warnings().len(), 1, "{:?}", c.warnings());
        assert!(c.warnings()[0].contains("F2FS"));
        // The override makes 7:3's files an f2fs domain.
        let f2 = c.spec(&wire::FileId {
            dev: delivery::parse_dev("7:3").unwrap(),
            ino: 5,
        });
        assert_eq!((f2.domain, f2.erase_unit_pages), (Domain::F2fs, 2));
        assert_eq!(c.seen().len(), 3);
        assert!(c.seen().iter().any(|s| s.configured));
        assert_eq!(c.devices_of(Domain::F2fs), ["7:3 f2fs"]);
        assert_eq!(
            c.device_entries(),
            [(
                delivery::parse_dev("7:3").unwrap(),
                delivery::DEVICE_CLASS_F2FS
            )]
        );
    }
}
