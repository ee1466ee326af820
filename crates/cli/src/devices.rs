//! `pcstreamctl device` without a device: where learnt placement can reach
//! on this host. Every block device in `/sys/block` with its write streams
//! and their granularity (an FDP reclaim unit) and, for an NVMe namespace
//! that answers the passthrough reads of `device.rs`, its FDP state and
//! statistics; then every mounted file system on a block device with its
//! delivery path (`pcstream_placement::delivery`): whether a file's hint
//! reaches the device, how, and in how many classes. A table or `--json`.

use pcstream_placement::delivery::{self, Delivery, Disk, F2fsHotRules, PathKind, Sysfs};
use serde::Serialize;
use std::path::Path;

/// FDP state of an NVMe namespace, as far as it answered.
#[derive(Debug, Serialize)]
pub struct Fdp {
    /// FDP enabled in its endurance group.
    pub enabled: bool,
    /// Reclaim unit handles of the configuration in force.
    pub ruhs: u16,
    /// Reclaim unit nominal size, bytes.
    pub ru_bytes: u64,
    /// FDP statistics: host bytes with metadata written.
    pub host_bytes: u128,
    /// FDP statistics: media bytes written.
    pub media_bytes: u128,
    /// media / host (`None` before any write).
    pub waf: Option<f64>,
}

/// One block device.
#[derive(Debug, Serialize)]
pub struct BlockDevice {
    /// The disk as sysfs shows it.
    #[serde(flatten)]
    pub disk: Disk,
    /// What writes to its node deliver.
    pub node_path: PathKind,
    /// Streams an application reaches through the node (0: none).
    pub node_streams: u32,
    /// FDP, for NVMe namespaces that answered.
    pub fdp: Option<Fdp>,
    /// Why FDP was not read (not NVMe, no permission, not supported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fdp_error: Option<String>,
}

/// One mounted file system.
#[derive(Debug, Serialize)]
pub struct FileSystem {
    /// Mount point.
    pub mount_point: String,
    /// Mount source.
    pub source: String,
    /// `MAJ:MIN`.
    pub dev: String,
    /// Type.
    pub fs_type: String,
    /// Whether a file's learnt hint reaches the device as placement.
    pub hints_reach_device: bool,
    /// The delivery path.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// F2FS: its rules that send synced data to the hot log whatever the
    /// hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub f2fs_hot_rules: Option<F2fsHotRules>,
}

/// The whole listing.
#[derive(Debug, Serialize)]
pub struct Listing {
    /// Block devices.
    pub block_devices: Vec<BlockDevice>,
    /// File systems on block devices.
    pub file_systems: Vec<FileSystem>,
    /// What to do when a device with write streams gets none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

fn fdp_of(disk: &Disk) -> (Option<Fdp>, Option<String>) {
    if disk.transport != "nvme" {
        return (None, Some(format!("{} is not NVMe", disk.transport)));
    }
    match crate::device::read_path(&Path::new("/dev").join(&disk.name)) {
        Ok(r) if r.fdp_supported => {
            let cfg = r.configs.get(usize::from(r.fdp_config_index));
            (
                Some(Fdp {
                    enabled: r.fdp_enabled,
                    ruhs: cfg.map_or(0, |c| c.nruh),
                    ru_bytes: cfg.map_or(0, |c| c.runs),
                    host_bytes: r.host_bytes,
                    media_bytes: r.media_bytes,
                    waf: r.waf,
                }),
                None,
            )
        }
        Ok(_) => (None, Some("FDP not supported".into())),
        Err(e) => (None, Some(format!("{e:#}"))),
    }
}

/// Builds the listing from a sysfs tree and mountinfo text (`fdp`: read
/// NVMe FDP state through passthrough).
pub fn listing(sysfs: &Sysfs, mountinfo: &str, fdp: bool) -> Listing {
    let block_devices: Vec<BlockDevice> = sysfs
        .disks()
        .into_iter()
        .map(|disk| {
            let node = delivery::parse_dev(&disk.dev)
                .map(|d| sysfs.classify_node(d))
                .map_or((PathKind::None, 0), |c| (c.kind, c.classes));
            let (fdp, fdp_error) = if fdp { fdp_of(&disk) } else { (None, None) };
            BlockDevice {
                disk,
                node_path: node.0,
                node_streams: if node.0 == PathKind::Raw { node.1 } else { 0 },
                fdp,
                fdp_error,
            }
        })
        .collect();
    let mut file_systems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for m in delivery::parse_mountinfo(mountinfo) {
        let Some(dev) = delivery::parse_dev(&m.dev) else {
            continue;
        };
        // File systems on block devices (major ≠ 0), each mount point once.
        if libc::major(dev) == 0 || !seen.insert(m.mount_point.clone()) {
            continue;
        }
        let d = sysfs.classify_files(dev, &m.fs_type);
        let f2fs_hot_rules = if d.kind == PathKind::F2fs {
            sysfs.f2fs_hot_rules(dev)
        } else {
            None
        };
        file_systems.push(FileSystem {
            f2fs_hot_rules,
            hints_reach_device: d.kind != PathKind::None && d.device_streams > 0
                || d.kind == PathKind::Scsi,
            mount_point: m.mount_point,
            source: m.source,
            dev: m.dev,
            fs_type: m.fs_type,
            delivery: d,
        });
    }
    let advice = file_systems
        .iter()
        .any(|f| f.delivery.hints_lost())
        .then(|| delivery::WAYS_THAT_WORK.to_string());
    Listing {
        block_devices,
        file_systems,
        advice,
    }
}

fn mib(b: u64) -> String {
    if b == 0 {
        "-".into()
    } else if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// Prints the listing as two tables.
pub fn print(l: &Listing) {
    println!(
        "{:<12} {:>8} {:<8} {:>10} {:>8} {:>12}  {:<7} FDP",
        "DEVICE", "MAJ:MIN", "BUS", "SIZE", "STREAMS", "GRANULARITY", "NODE"
    );
    for b in &l.block_devices {
        let fdp = match (&b.fdp, &b.fdp_error) {
            (Some(f), _) => format!(
                "{}, {} RUHs × {}, host {} MiB, media {} MiB, WAF {}",
                if f.enabled { "enabled" } else { "disabled" },
                f.ruhs,
                mib(f.ru_bytes),
                f.host_bytes >> 20,
                f.media_bytes >> 20,
                f.waf.map_or("-".into(), |w| format!("{w:.3}"))
            ),
            (None, Some(e)) if b.disk.transport == "nvme" => format!("- ({e})"),
            _ => "-".into(),
        };
        let node = if b.node_path == PathKind::Raw {
            format!("raw/{}", b.node_streams)
        } else {
            b.node_path.name().to_string()
        };
        println!(
            "{:<12} {:>8} {:<8} {:>10} {:>8} {:>12}  {:<7} {}",
            b.disk.name,
            b.disk.dev,
            b.disk.transport,
            mib(b.disk.size_bytes),
            b.disk.max_write_streams,
            mib(b.disk.write_stream_granularity),
            node,
            fdp
        );
    }
    println!();
    // Mount points run long (a loop device's scratch mount): the column
    // takes the longest one's width.
    let mw = l
        .file_systems
        .iter()
        .map(|f| f.mount_point.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    println!(
        "{:<mw$} {:<6} {:<14} {:<11} {:>7}  WHY",
        "MOUNT", "TYPE", "DISKS", "PATH", "CLASSES"
    );
    for f in &l.file_systems {
        println!(
            "{:<mw$} {:<6} {:<14} {:<11} {:>7}  {}",
            f.mount_point,
            f.fs_type,
            f.delivery.disks.join(","),
            f.delivery.kind.name(),
            f.delivery.classes,
            f.delivery.why
        );
    }
    for f in &l.file_systems {
        if let Some(r) = &f.f2fs_hot_rules {
            println!();
            println!("note: {}", f2fs_note(f, r));
        }
    }
    if let Some(a) = &l.advice {
        println!();
        println!("note: hints do not reach a device that has write streams; {a}.");
    }
}

/// What F2FS on `f` does with synced data, and the knob that changes it.
fn f2fs_note(f: &FileSystem, r: &F2fsHotRules) -> String {
    let name = &r.name;
    let mut s = format!(
        "F2FS on {} sends to its hot log, whatever a file's hint, the data of every fdatasync, \
         of an fsync of ≤ {} dirty pages (min_fsync_blocks) and of an fsync or writeback of \
         ≤ {} (min_hot_blocks); hints reach the device for data written back in larger runs \
         and for O_DIRECT",
        f.mount_point, r.min_fsync_blocks, r.min_hot_blocks
    );
    if r.min_hot_blocks > 0 || r.min_fsync_blocks > 0 {
        s.push_str(&format!(
            "; `echo 0 | tee /sys/fs/f2fs/{name}/min_hot_blocks /sys/fs/f2fs/{name}/min_fsync_blocks` \
             leaves fsyncs to the hints (docs/nvme.md)"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn lists_disks_and_file_systems_from_a_fake_host() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["block", "dev/block"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let mk = |name: &str, dev: &str, streams: u32| {
            let d = r.join("devices").join(name);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            std::fs::write(d.join("dev"), dev).unwrap();
            std::fs::write(d.join("size"), "204800").unwrap();
            std::fs::write(d.join("queue/max_write_streams"), streams.to_string()).unwrap();
            std::fs::write(d.join("queue/write_stream_granularity"), "1048576").unwrap();
            symlink(&d, r.join("block").join(name)).unwrap();
            symlink(&d, r.join("dev/block").join(dev)).unwrap();
        };
        mk("nvme0n1", "259:0", 8);
        mk("vda", "254:0", 0);
        let f2 = r.join("fs/f2fs/nvme0n1");
        std::fs::create_dir_all(&f2).unwrap();
        std::fs::write(f2.join("min_hot_blocks"), "16\n").unwrap();
        std::fs::write(f2.join("min_fsync_blocks"), "8\n").unwrap();
        let mi = "1 0 254:0 / / rw - ext4 /dev/vda rw\n\
                  2 1 259:0 / /mnt/f2 rw - f2fs /dev/nvme0n1 rw\n\
                  3 1 259:0 / /mnt/f2 rw - f2fs /dev/nvme0n1 rw\n\
                  4 1 0:23 / /dev/shm rw - tmpfs tmpfs rw\n";
        let l = listing(&Sysfs::new(r), mi, false);
        assert_eq!(l.block_devices.len(), 2);
        let nvme = &l.block_devices[0];
        assert_eq!((nvme.node_path, nvme.node_streams), (PathKind::Raw, 5));
        assert_eq!(l.block_devices[1].node_path, PathKind::None);
        assert_eq!(l.file_systems.len(), 2, "{:?}", l.file_systems);
        assert!(!l.file_systems[0].hints_reach_device);
        assert!(l.file_systems[1].hints_reach_device);
        assert_eq!(l.file_systems[1].delivery.classes, 3);
        assert!(l.advice.is_none());
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(j["file_systems"][1]["kind"], "f2fs");
        assert_eq!(j["block_devices"][0]["max_write_streams"], 8);
        assert_eq!(j["block_devices"][0]["node_path"], "raw");
        // F2FS's hot-log rules, and what to do about them.
        assert_eq!(j["file_systems"][1]["f2fs_hot_rules"]["min_hot_blocks"], 16);
        assert!(j["file_systems"][0].get("f2fs_hot_rules").is_none());
        let r1 = l.file_systems[1].f2fs_hot_rules.as_ref().unwrap();
        let note = f2fs_note(&l.file_systems[1], r1);
        assert!(note.contains("≤ 16 (min_hot_blocks)"), "{note}");
        assert!(
            note.contains("/sys/fs/f2fs/nvme0n1/min_hot_blocks"),
            "{note}"
        );
        let tuned = F2fsHotRules {
            min_hot_blocks: 0,
            min_fsync_blocks: 0,
            ..r1.clone()
        };
        assert!(!f2fs_note(&l.file_systems[1], &tuned).contains("echo 0"));
        // ext4 on the FDP namespace instead: the advice appears.
        let l = listing(
            &Sysfs::new(r),
            "2 1 259:0 / /mnt rw - ext4 /dev/nvme0n1 rw\n",
            false,
        );
        assert!(l.advice.as_deref().unwrap().contains("F2FS"));
    }
}
