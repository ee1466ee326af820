//! Where a write's placement goes after the kernel: the *delivery path* of
//! a file or block device, found once per device (never per write), and
//! the *learning domain* it puts a write in.
//!
//! A learnt stream helps only if the kernel carries it to the device
//! (DESIGN.md §4). From a file's `st_dev` (or a block device node's
//! `st_rdev`) this module walks sysfs: `/sys/dev/block/MAJ:MIN` → a
//! partition's disk → a device-mapper or md device's members (`slaves/`,
//! recursively) → each disk's `queue/max_write_streams` and
//! `queue/write_stream_granularity` (Linux 6.16+; absent files read as 0).
//! With the file system's type (`fstatfs` magic, or `/proc/self/mountinfo`
//! for listings) that gives one [`PathKind`]:
//!
//! | path | when | what reaches the device |
//! |------|------|-------------------------|
//! | `f2fs` | a file on F2FS | 3 classes: SHORT → hot, EXTREME → cold, any other hint → warm; F2FS's logs, and its write streams where the device has them |
//! | `raw` | a block device node whose disk has write streams | `F_SET_RW_HINT` = k selects stream k for O_DIRECT writes, so at most 5 streams (hint values 1..5) |
//! | `file-stream` | a kernel with a per-file write-stream ioctl | not probed: the proposed `FS_IOC_WRITE_STREAM` (an XFS series, not merged) has no ioctl number in any public header pcstream could check; never produced |
//! | `scsi` | a file or node on an `sd` disk | hints as SBC-5 constrained streams (Linux 6.9+), when the disk supports them |
//! | `none` | anything else: ext4/XFS/btrfs on NVMe, tmpfs, a disk without streams | nothing; the hint stays on the inode |
//!
//! The learning domain of a write ([`Domain`]) follows from its path: the
//! default `hints` domain (four classes SHORT..EXTREME, what pcstream always
//! did, harmless where nothing arrives and what SCSI receives), `f2fs`
//! (two classes mapped shorter → longer onto MEDIUM / EXTREME, F2FS's warm
//! and cold, leaving its hot log to F2FS's own rules: [`F2FS_STREAMS`]),
//! and one `raw` domain per block device (its stream
//! count, at most [`RAW_MAX_STREAMS`]; stream k ↔ hint value k; learnt
//! classes from stream 2 up, stream 1 left to unplaced writes:
//! [`raw_reserves_first`]).
//!
//! The daemon publishes a domain's signatures under [`table_key`]: the
//! signature itself for `hints` (so a shim that knows nothing of domains
//! finds them), a salted mix of it otherwise ([`salted_key`]). The shim uses
//! only the constants and key functions here (no allocation); the sysfs walk
//! ([`Sysfs`]) is for the daemon and `pcstreamctl device`, and its root is a
//! parameter so tests run it against a fake tree.
//!
//! Convention for block devices in events: a `FileId` whose `ino` is 0
//! names a raw block device by its `st_rdev` in `dev` (no regular file has
//! inode 0).

use crate::hint::RwHint;
use crate::signature::mix64;
use std::path::{Path, PathBuf};

/// `f_type` of F2FS in `statfs` (`F2FS_SUPER_MAGIC`).
pub const F2FS_SUPER_MAGIC: u64 = 0xF2F5_2010;

/// Streams of a raw block device reachable through `F_SET_RW_HINT`
/// (hint values 1..=5).
pub const RAW_MAX_STREAMS: u32 = 5;

/// The streams the `f2fs` domain publishes for its two lifetime clusters,
/// shorter first: numbered like the `hints` domain's streams (stream s ↔
/// hint `RwHint::for_stream(s)`), so they carry MEDIUM and EXTREME —
/// F2FS's warm and cold logs.
///
/// F2FS's hot log is not a class pcstream can own: F2FS sends there, whatever
/// the hint, every `fdatasync`'s data (updated in place), small `fsync`s and
/// writebacks, and its node blocks (docs/nvme.md). A learnt SHORT class put
/// table pages beside PostgreSQL's WAL there: with three classes (SHORT /
/// MEDIUM / EXTREME) the device's GC copied 132–142 MiB of hot-RUH data
/// against 81–108 MiB with no shim, end-to-end 1.086 / 1.096 against 1.078 /
/// 1.123; with these two 1.065 / 1.072 and 74–87 MiB (bench/fdp.sh
/// f2fs-postgres, quick, 2026-11-28).
pub const F2FS_STREAMS: [u32; 2] = [2, 4];

/// Salt of the `f2fs` domain's table keys.
pub const F2FS_SALT: u64 = 0x6632_6673_2d64_6f6d; // "f2fs-dom"
/// Salt mixed with a device number for a `raw` domain's table keys.
pub const RAW_SALT: u64 = 0x7261_772d_6465_7673; // "raw-devs"
/// Salt of the table keys of device entries ([`device_key`]).
pub const DEVICE_SALT: u64 = 0x6465_762d_636c_6173; // "dev-clas"

/// Device entry class: files on the device are in the `hints` domain.
pub const DEVICE_CLASS_HINTS: u32 = 1;
/// Device entry class: files on the device are in the `f2fs` domain.
pub const DEVICE_CLASS_F2FS: u32 = 2;

/// The table key of a *device entry*: the daemon publishes, for each
/// device a `[[device]]` section names, the class of its files
/// ([`DEVICE_CLASS_HINTS`], [`DEVICE_CLASS_F2FS`]) as the entry's stream,
/// so a shim keys that device's writes as the daemon learns them even
/// when `fstatfs` would say otherwise. A shim without such an entry
/// classifies by `fstatfs`.
#[inline]
pub const fn device_key(dev: u64) -> u64 {
    mix64(dev ^ DEVICE_SALT) | 1
}

/// The table key of `sig` in a domain of salt `salt` (0: the `hints`
/// domain, whose key is the signature). Never 0 for a signature ≠ 0.
#[inline(always)]
pub const fn salted_key(sig: u64, salt: u64) -> u64 {
    if salt == 0 || sig == 0 {
        return sig;
    }
    let k = mix64(sig ^ salt);
    if k == 0 {
        1
    } else {
        k
    }
}

/// Salt of the `raw` domain of block device `rdev`.
#[inline]
pub const fn raw_salt(rdev: u64) -> u64 {
    mix64(rdev ^ RAW_SALT) | 1
}

/// How learnt placement reaches a device (see the module docs).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    /// F2FS temperatures (3 classes).
    F2fs,
    /// A raw block device with write streams.
    Raw,
    /// A per-file write-stream ioctl (never produced: not probed).
    FileStream,
    /// SCSI constrained streams (an `sd` disk).
    Scsi,
    /// Nothing reaches the device.
    None,
}

impl PathKind {
    /// The name used in configs, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            PathKind::F2fs => "f2fs",
            PathKind::Raw => "raw",
            PathKind::FileStream => "file-stream",
            PathKind::Scsi => "scsi",
            PathKind::None => "none",
        }
    }

    /// The kind named `s` (as [`PathKind::name`] spells it).
    pub fn parse(s: &str) -> Option<PathKind> {
        Some(match s {
            "f2fs" => PathKind::F2fs,
            "raw" => PathKind::Raw,
            "file-stream" => PathKind::FileStream,
            "scsi" => PathKind::Scsi,
            "none" => PathKind::None,
            _ => return None,
        })
    }
}

/// A learning domain: which learner a write's lifetime goes to and how its
/// streams are published. Ordered: `hints` first.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Domain {
    /// Four classes SHORT..EXTREME; table key = signature.
    #[default]
    Hints,
    /// Two classes onto F2FS's warm / cold ([`F2FS_STREAMS`]).
    F2fs,
    /// A block device node with write streams (its `st_rdev`).
    Raw {
        /// The device number.
        dev: u64,
    },
}

impl Domain {
    /// The salt of its table keys (0 for `hints`).
    #[inline]
    pub const fn salt(self) -> u64 {
        match self {
            Domain::Hints => 0,
            Domain::F2fs => F2FS_SALT,
            Domain::Raw { dev } => raw_salt(dev),
        }
    }

    /// `hints`, `f2fs`, `raw:MAJ:MIN`.
    pub fn name(self) -> String {
        match self {
            Domain::Hints => "hints".into(),
            Domain::F2fs => "f2fs".into(),
            Domain::Raw { dev } => format!("raw:{}", dev_name(dev)),
        }
    }

    /// Stream ids a learner of this domain clusters into, 0 (unknown)
    /// included; `device_streams` is a raw device's stream count.
    ///
    /// A raw device with two or more streams keeps its stream 1 for what
    /// no learner placed ([`raw_reserves_first`]), so its learners cluster
    /// into one stream fewer than hints reach.
    pub fn learner_streams(self, device_streams: u32) -> u32 {
        match self {
            Domain::Hints => crate::hint::HINT_STREAMS + 1,
            Domain::F2fs => F2FS_STREAMS.len() as u32 + 1,
            Domain::Raw { .. } => {
                let n = device_streams.clamp(1, RAW_MAX_STREAMS);
                n - u32::from(raw_reserves_first(device_streams)) + 1
            }
        }
    }

    /// The (stream, hint) published for a learner's stream `s` (0 = unknown
    /// → (0, not set)): `hints` as `RwHint::for_stream`, `f2fs` through
    /// [`F2FS_STREAMS`], `raw` stream k with hint value k, from stream 2 up
    /// where the device (of `device_streams`; ignored elsewhere) keeps
    /// stream 1 for unplaced writes.
    pub fn publish(self, s: u32, device_streams: u32) -> (u32, u8) {
        if s == 0 {
            return (0, 0);
        }
        match self {
            Domain::Hints => (s, RwHint::for_stream(s).raw() as u8),
            Domain::F2fs => {
                let p = F2FS_STREAMS[(s as usize - 1).min(F2FS_STREAMS.len() - 1)];
                (p, RwHint::for_stream(p).raw() as u8)
            }
            Domain::Raw { .. } => {
                let first = 1 + u32::from(raw_reserves_first(device_streams));
                let k = (s - 1 + first).min(RAW_MAX_STREAMS);
                (k, k as u8)
            }
        }
    }
}

/// Whether a raw device of `device_streams` write streams keeps stream 1
/// out of learnt placement: yes with two or more.
///
/// A write with no hint goes to the device's default placement, the same
/// reclaim unit handle as stream 1 (the NVMe driver sends stream k to
/// placement id k − 1 and an unhinted write to the namespace's first):
/// everything a shim writes before the first clustering, paths no learner
/// has placed, and other programs' writes. Learnt placement starts at
/// stream 2 so that its shortest-lived class does not share reclaim units
/// with all that (raw-zipf online, before: the hottest class shared RUH 0
/// with the 256 MiB fill; docs/results-fdp.md). A device with one stream
/// has nothing to keep apart.
#[inline]
pub const fn raw_reserves_first(device_streams: u32) -> bool {
    device_streams >= 2
}

/// The key under which a domain's learner publishes `sig`.
#[inline]
pub const fn table_key(sig: u64, domain: Domain) -> u64 {
    salted_key(sig, domain.salt())
}

/// `MAJ:MIN` of a device number.
pub fn dev_name(dev: u64) -> String {
    format!("{}:{}", libc::major(dev), libc::minor(dev))
}

/// The device number `MAJ:MIN` names.
pub fn parse_dev(s: &str) -> Option<u64> {
    let (a, b) = s.trim().split_once(':')?;
    Some(libc::makedev(a.parse().ok()?, b.parse().ok()?))
}

/// A file system's type name from its `statfs` magic (`f_type`).
pub fn fs_name(magic: u64) -> &'static str {
    match magic {
        F2FS_SUPER_MAGIC => "f2fs",
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x6969 => "nfs",
        0x794C_7630 => "overlay",
        _ => "other",
    }
}

/// `fstatfs(fd)`'s `f_type`, `None` when the call fails.
pub fn fs_magic(fd: i32) -> Option<u64> {
    // SAFETY: statfs is plain data; fstatfs fills it or fails.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `s` is a valid out-pointer for the call.
    let rc = unsafe { libc::fstatfs(fd, &mut s) };
    (rc == 0).then_some(s.f_type as u64)
}

/// One disk (a whole block device, not a partition) as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Disk {
    /// Kernel name (`nvme0n1`, `sda`, `vda`, `loop0`).
    pub name: String,
    /// `MAJ:MIN`.
    pub dev: String,
    /// Size, bytes (`size` × 512).
    pub size_bytes: u64,
    /// `nvme`, `scsi`, `virtio`, `loop`, `dm`, `md`, `zram` or `other`.
    pub transport: String,
    /// `queue/max_write_streams` (0: none, or a kernel before 6.16).
    pub max_write_streams: u32,
    /// `queue/write_stream_granularity`, bytes (an FDP reclaim unit; 0: unknown).
    pub write_stream_granularity: u64,
    /// Member disks of a dm/md device (empty otherwise).
    pub members: Vec<String>,
}

/// The delivery path of a device or of the files on it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Delivery {
    /// The path.
    pub kind: PathKind,
    /// Lifetime classes that reach the device or its file system (0: none).
    pub classes: u32,
    /// Write streams of the device(s) behind it (the smallest over a dm/md
    /// device's members; 0: none).
    pub device_streams: u32,
    /// Reclaim-unit size of the device, bytes (0: unknown).
    pub erase_unit_bytes: u64,
    /// The disks that hold the data (members of dm/md resolved).
    pub disks: Vec<String>,
    /// One line for the user.
    pub why: String,
}

impl Delivery {
    /// The learning domain of writes along this path (`dev`: the device
    /// number of a block device node, for `raw`).
    pub fn domain(&self, dev: u64) -> Domain {
        match self.kind {
            PathKind::F2fs => Domain::F2fs,
            PathKind::Raw => Domain::Raw { dev },
            _ => Domain::Hints,
        }
    }

    /// Whether the device could place data by stream while this path
    /// delivers nothing (ext4 on an FDP NVMe): worth telling the user.
    pub fn hints_lost(&self) -> bool {
        self.kind == PathKind::None && self.device_streams > 0
    }
}

/// What works when hints cannot reach a device that has write streams.
pub const WAYS_THAT_WORK: &str = "learnt hints reach a device with write streams through F2FS \
(3 classes), through writes to a raw namespace (O_DIRECT on the block device node), or on a \
kernel with per-file write streams";

/// F2FS's own rules that send data to its hot log whatever the file's
/// hint (`/sys/fs/f2fs/<dev>/`; measured on Linux 7.3, docs/nvme.md): an
/// `fdatasync` always; an `fsync` or a writeback of a file with at most
/// `min_hot_blocks` dirty pages; an `fsync` of at most `min_fsync_blocks`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct F2fsHotRules {
    /// The file system's directory under `/sys/fs/f2fs` (the kernel's
    /// name of the device it is mounted from: `nvme0n1p1`, `dm-0`).
    pub name: String,
    /// `min_hot_blocks` (kernel default 16).
    pub min_hot_blocks: u64,
    /// `min_fsync_blocks` (kernel default 8).
    pub min_fsync_blocks: u64,
}

/// A sysfs tree (the host's `/sys`, or a fake one in tests).
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

fn read_u64(p: &Path) -> u64 {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn transport(name: &str) -> &'static str {
    const PREFIXES: [(&str, &str); 9] = [
        ("nvme", "nvme"),
        ("sd", "scsi"),
        ("vd", "virtio"),
        ("loop", "loop"),
        ("dm-", "dm"),
        ("md", "md"),
        ("zram", "zram"),
        ("nbd", "nbd"),
        ("mmcblk", "mmc"),
    ];
    PREFIXES
        .iter()
        .find(|(p, _)| name.starts_with(p))
        .map_or("other", |(_, t)| t)
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::new("/sys")
    }
}

impl Sysfs {
    /// A tree rooted at `root` (`/sys` on a host).
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// F2FS's hot-log rules for the F2FS mounted from device `dev` (its
    /// `fs/f2fs/<name>` directory, `name` the partition's or disk's
    /// kernel name); `None` where sysfs has no such directory.
    pub fn f2fs_hot_rules(&self, dev: u64) -> Option<F2fsHotRules> {
        let dir = self.node_dir(dev)?;
        let name = dir.file_name()?.to_string_lossy().into_owned();
        let f = self.root.join("fs/f2fs").join(&name);
        let get = |n: &str| {
            std::fs::read_to_string(f.join(n))
                .ok()
                .and_then(|s| s.trim().parse().ok())
        };
        Some(F2fsHotRules {
            name,
            min_hot_blocks: get("min_hot_blocks")?,
            min_fsync_blocks: get("min_fsync_blocks")?,
        })
    }

    /// The sysfs directory of device `dev` itself (a partition's own).
    fn node_dir(&self, dev: u64) -> Option<PathBuf> {
        std::fs::canonicalize(self.root.join("dev/block").join(dev_name(dev))).ok()
    }

    /// The whole-disk directory behind device `dev` (a partition's parent).
    fn disk_dir(&self, dev: u64) -> Option<PathBuf> {
        let dir = self.node_dir(dev)?;
        Some(if dir.join("partition").exists() {
            dir.parent()?.to_path_buf()
        } else {
            dir
        })
    }

    fn disk_at(&self, dir: &Path, depth: u32) -> Option<Disk> {
        let name = dir.file_name()?.to_string_lossy().into_owned();
        let q = dir.join("queue");
        let mut members = Vec::new();
        if depth < 8 {
            if let Ok(rd) = std::fs::read_dir(dir.join("slaves")) {
                let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
                names.sort();
                for m in names {
                    let Ok(m) = std::fs::canonicalize(&m) else {
                        continue;
                    };
                    let m = if m.join("partition").exists() {
                        m.parent().map(Path::to_path_buf).unwrap_or(m)
                    } else {
                        m
                    };
                    if let Some(d) = m.file_name() {
                        members.push(d.to_string_lossy().into_owned());
                    }
                }
            }
        }
        Some(Disk {
            transport: transport(&name).into(),
            dev: std::fs::read_to_string(dir.join("dev"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            size_bytes: read_u64(&dir.join("size")) * 512,
            max_write_streams: read_u64(&q.join("max_write_streams")) as u32,
            write_stream_granularity: read_u64(&q.join("write_stream_granularity")),
            members,
            name,
        })
    }

    /// The disk `name` (as in `/sys/block`).
    pub fn disk(&self, name: &str) -> Option<Disk> {
        let dir = std::fs::canonicalize(self.root.join("block").join(name)).ok()?;
        self.disk_at(&dir, 0)
    }

    /// The disk behind device number `dev` (a partition resolves to its disk).
    pub fn disk_of(&self, dev: u64) -> Option<Disk> {
        let dir = self.disk_dir(dev)?;
        self.disk_at(&dir, 0)
    }

    /// Every disk in `/sys/block`, by name.
    pub fn disks(&self) -> Vec<Disk> {
        let mut names: Vec<String> = std::fs::read_dir(self.root.join("block"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names.iter().filter_map(|n| self.disk(n)).collect()
    }

    /// The disks that finally hold the data of `dev`: the disk itself, or a
    /// dm/md device's members, recursively (a member without members is a
    /// leaf). Empty when sysfs does not know `dev` (tmpfs, NFS).
    pub fn leaves(&self, dev: u64) -> Vec<Disk> {
        let Some(top) = self.disk_of(dev) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut todo = vec![(top, 0u32)];
        while let Some((d, depth)) = todo.pop() {
            if d.members.is_empty() || depth >= 8 {
                if !out.iter().any(|o: &Disk| o.name == d.name) {
                    out.push(d);
                }
                continue;
            }
            for m in &d.members {
                if let Some(md) = self.disk(m) {
                    todo.push((md, depth + 1));
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The delivery path of the files on a file system of type `fs_type`
    /// (a [`fs_name`] name or mountinfo's) on device `dev` (`st_dev`).
    pub fn classify_files(&self, dev: u64, fs_type: &str) -> Delivery {
        let leaves = self.leaves(dev);
        let (streams, unit) = streams_of(&leaves);
        let disks: Vec<String> = leaves.iter().map(|d| d.name.clone()).collect();
        let (kind, classes, why) = if fs_type == "f2fs" {
            let why = if streams > 0 {
                format!(
                    "F2FS maps hints to hot/warm/cold and those to the device's {streams} write streams"
                )
            } else {
                "F2FS maps hints to its hot/warm/cold logs; the device has no write streams".into()
            };
            (PathKind::F2fs, 3, why)
        } else if leaves.is_empty() {
            (
                PathKind::None,
                0,
                format!("{fs_type}: no block device behind it"),
            )
        } else if leaves.iter().all(|d| d.transport == "scsi") {
            (
                PathKind::Scsi,
                4,
                "SCSI disk: hints go out as constrained streams where the disk supports them"
                    .into(),
            )
        } else if streams > 0 {
            (
                PathKind::None,
                0,
                format!(
                    "{fs_type} does not pass file hints to the device's {streams} write streams"
                ),
            )
        } else {
            (PathKind::None, 0, "the device has no write streams".into())
        };
        Delivery {
            kind,
            classes,
            device_streams: streams,
            erase_unit_bytes: unit,
            disks,
            why,
        }
    }

    /// The delivery path of writes to the block device node `rdev` itself.
    pub fn classify_node(&self, rdev: u64) -> Delivery {
        let leaves = self.leaves(rdev);
        let (streams, unit) = streams_of(&leaves);
        let disks: Vec<String> = leaves.iter().map(|d| d.name.clone()).collect();
        // Write streams per block device node exist on a disk (or a
        // partition of one), not through dm/md.
        let direct = self
            .disk_of(rdev)
            .is_some_and(|d| d.members.is_empty() && d.max_write_streams > 0);
        let (kind, classes, why) = if direct {
            let n = streams.min(RAW_MAX_STREAMS);
            (
                PathKind::Raw,
                n,
                format!("O_DIRECT writes take the node's hint as one of {n} write streams"),
            )
        } else if !leaves.is_empty() && leaves.iter().all(|d| d.transport == "scsi") {
            (
                PathKind::Scsi,
                4,
                "SCSI disk: hints go out as constrained streams where the disk supports them"
                    .into(),
            )
        } else if streams > 0 {
            (
                PathKind::None,
                0,
                "a dm/md device does not pass hints to its members' write streams".into(),
            )
        } else {
            (PathKind::None, 0, "the device has no write streams".into())
        };
        Delivery {
            kind,
            classes,
            device_streams: streams,
            erase_unit_bytes: unit,
            disks,
            why,
        }
    }
}

/// (write streams, reclaim unit) of a set of leaf disks: the fewest
/// streams (every member must place), the largest unit.
fn streams_of(leaves: &[Disk]) -> (u32, u64) {
    let streams = leaves
        .iter()
        .map(|d| d.max_write_streams)
        .min()
        .unwrap_or(0);
    let unit = leaves
        .iter()
        .map(|d| d.write_stream_granularity)
        .max()
        .unwrap_or(0);
    (streams, if streams > 0 { unit } else { 0 })
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mount {
    /// Device number `MAJ:MIN` (st_dev of its files).
    pub dev: String,
    /// Mount point.
    pub mount_point: String,
    /// File system type.
    pub fs_type: String,
    /// Mount source (`/dev/nvme0n1p2`, `tmpfs`).
    pub source: String,
}

/// Parses `/proc/self/mountinfo` text (lines that do not parse are skipped;
/// octal escapes in paths are decoded).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    fn unescape(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
                let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
                out.push(v);
                i += 4;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let h: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            if h.len() < 5 || t.len() < 2 {
                return None;
            }
            Some(Mount {
                dev: h[2].to_string(),
                mount_point: unescape(h[4]),
                fs_type: t[0].to_string(),
                source: unescape(t[1]),
            })
        })
        .collect()
}

/// The file system type of device `dev` from `/proc/self/mountinfo`
/// (`None` when not mounted here).
pub fn fs_type_of_dev(dev: u64) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let name = dev_name(dev);
    parse_mountinfo(&text)
        .into_iter()
        .find(|m| m.dev == name)
        .map(|m| m.fs_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake sysfs: `devices/<disk>[/<part>]` with `dev`, `size`,
    /// `queue/…`, `partition`, `slaves/`; `block/<disk>` and
    /// `dev/block/MAJ:MIN` symlinks, as the kernel lays them out.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Fake {
            let f = Fake {
                dir: tempfile::tempdir().unwrap(),
            };
            for d in ["devices", "block", "dev/block"] {
                std::fs::create_dir_all(f.dir.path().join(d)).unwrap();
            }
            f
        }
        fn root(&self) -> &Path {
            self.dir.path()
        }
        fn disk(&self, name: &str, dev: &str, streams: Option<(u32, u64)>) -> PathBuf {
            let d = self.root().join("devices").join(name);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            std::fs::write(d.join("size"), "2048\n").unwrap();
            if let Some((n, g)) = streams {
                std::fs::write(d.join("queue/max_write_streams"), format!("{n}\n")).unwrap();
                std::fs::write(d.join("queue/write_stream_granularity"), format!("{g}\n")).unwrap();
            }
            symlink(&d, self.root().join("block").join(name)).unwrap();
            symlink(&d, self.root().join("dev/block").join(dev)).unwrap();
            d
        }
        fn part(&self, disk: &Path, name: &str, dev: &str) -> PathBuf {
            let p = disk.join(name);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("partition"), "1\n").unwrap();
            std::fs::write(p.join("dev"), format!("{dev}\n")).unwrap();
            symlink(&p, self.root().join("dev/block").join(dev)).unwrap();
            p
        }
        fn slave(&self, top: &Path, member: &Path) {
            std::fs::create_dir_all(top.join("slaves")).unwrap();
            symlink(member, top.join("slaves").join(member.file_name().unwrap())).unwrap();
        }
    }

    fn dev(s: &str) -> u64 {
        parse_dev(s).unwrap()
    }

    /// F2FS's knobs are found under the partition's own name, and a
    /// device without an F2FS directory (or a garbled value) has none.
    #[test]
    fn f2fs_hot_rules_are_read_under_the_mounted_partitions_name() {
        let f = Fake::new();
        let nvme = f.disk("nvme0n1", "259:0", Some((8, 1 << 20)));
        f.part(&nvme, "nvme0n1p1", "259:1");
        f.part(&nvme, "nvme0n1p2", "259:2");
        for (p, hot) in [("nvme0n1p1", "16\n"), ("nvme0n1p2", "many\n")] {
            let d = f.root().join("fs/f2fs").join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("min_hot_blocks"), hot).unwrap();
            std::fs::write(d.join("min_fsync_blocks"), "8\n").unwrap();
        }
        let s = Sysfs::new(f.root());
        assert_eq!(
            s.f2fs_hot_rules(dev("259:1")),
            Some(F2fsHotRules {
                name: "nvme0n1p1".into(),
                min_hot_blocks: 16,
                min_fsync_blocks: 8
            })
        );
        assert_eq!(s.f2fs_hot_rules(dev("259:2")), None, "garbled value");
        assert_eq!(s.f2fs_hot_rules(dev("259:0")), None, "no F2FS there");
        assert_eq!(s.f2fs_hot_rules(dev("8:0")), None, "no such device");
    }

    #[test]
    fn partitions_resolve_to_their_disk_and_its_write_streams() {
        let f = Fake::new();
        let nvme = f.disk("nvme0n1", "259:0", Some((8, 96 << 20)));
        f.part(&nvme, "nvme0n1p1", "259:1");
        let s = Sysfs::new(f.root());
        let d = s.disk_of(dev("259:1")).unwrap();
        assert_eq!(d.name, "nvme0n1");
        assert_eq!(
            (d.max_write_streams, d.write_stream_granularity),
            (8, 96 << 20)
        );
        assert_eq!(d.transport, "nvme");
        assert_eq!(d.size_bytes, 2048 * 512);
        // ext4 on the partition: nothing arrives, and that is worth a warning.
        let ext4 = s.classify_files(dev("259:1"), "ext4");
        assert_eq!(ext4.kind, PathKind::None);
        assert!(ext4.hints_lost(), "{ext4:?}");
        assert_eq!(ext4.domain(dev("259:1")), Domain::Hints);
        // F2FS on it: three classes, the RU size as the erase unit.
        let f2 = s.classify_files(dev("259:1"), "f2fs");
        assert_eq!(
            (f2.kind, f2.classes, f2.device_streams),
            (PathKind::F2fs, 3, 8)
        );
        assert_eq!(f2.erase_unit_bytes, 96 << 20);
        assert_eq!(f2.domain(0), Domain::F2fs);
        // The namespace node itself: raw, at most 5 streams through hints.
        let raw = s.classify_node(dev("259:0"));
        assert_eq!((raw.kind, raw.classes), (PathKind::Raw, 5));
        assert_eq!(raw.domain(dev("259:0")), Domain::Raw { dev: dev("259:0") });
        assert_eq!(s.classify_node(dev("259:1")).kind, PathKind::Raw);
    }

    #[test]
    fn a_kernel_without_write_stream_files_reads_as_none() {
        let f = Fake::new();
        f.disk("vda", "254:0", None);
        f.disk("nvme1n1", "259:4", Some((0, 0)));
        let s = Sysfs::new(f.root());
        for d in ["254:0", "259:4"] {
            let c = s.classify_files(dev(d), "ext4");
            assert_eq!((c.kind, c.device_streams), (PathKind::None, 0), "{d}");
            assert!(!c.hints_lost());
            assert_eq!(s.classify_node(dev(d)).kind, PathKind::None);
        }
        // tmpfs (no sysfs entry): none, and no warning.
        let t = s.classify_files(dev("0:42"), "tmpfs");
        assert_eq!(t.kind, PathKind::None);
        assert!(t.disks.is_empty() && !t.hints_lost());
        assert!(s.disk_of(dev("0:42")).is_none());
        // F2FS on a disk without streams: F2FS's own logs still separate.
        let f2 = s.classify_files(dev("254:0"), "f2fs");
        assert_eq!((f2.kind, f2.device_streams), (PathKind::F2fs, 0));
        assert_eq!(s.disks().len(), 2);
    }

    #[test]
    fn dm_and_md_resolve_to_their_members() {
        let f = Fake::new();
        let a = f.disk("nvme0n1", "259:0", Some((8, 1 << 20)));
        let b = f.disk("nvme1n1", "259:2", Some((4, 2 << 20)));
        let pa = f.part(&a, "nvme0n1p1", "259:1");
        // md0 over a partition of one disk and the whole other one.
        let md = f.disk("md0", "9:0", None);
        f.slave(&md, &pa);
        f.slave(&md, &b);
        // dm-0 (LVM) over md0.
        let dm = f.disk("dm-0", "253:0", None);
        f.slave(&dm, &md);
        let s = Sysfs::new(f.root());
        assert_eq!(s.disk("md0").unwrap().members, ["nvme0n1", "nvme1n1"]);
        let leaves: Vec<String> = s.leaves(dev("253:0")).into_iter().map(|d| d.name).collect();
        assert_eq!(leaves, ["nvme0n1", "nvme1n1"]);
        let c = s.classify_files(dev("253:0"), "xfs");
        // The fewest streams of the members, the largest unit.
        assert_eq!(
            (c.kind, c.device_streams, c.erase_unit_bytes),
            (PathKind::None, 4, 2 << 20)
        );
        assert!(c.hints_lost());
        assert_eq!(c.disks, ["nvme0n1", "nvme1n1"]);
        // Writes to the dm node never reach the members' streams.
        assert_eq!(s.classify_node(dev("253:0")).kind, PathKind::None);
        assert_eq!(s.classify_files(dev("253:0"), "f2fs").kind, PathKind::F2fs);
    }

    #[test]
    fn scsi_disks_take_constrained_streams() {
        let f = Fake::new();
        let sda = f.disk("sda", "8:0", None);
        f.part(&sda, "sda1", "8:1");
        let s = Sysfs::new(f.root());
        assert_eq!(s.classify_files(dev("8:1"), "ext4").kind, PathKind::Scsi);
        assert_eq!(s.classify_node(dev("8:0")).kind, PathKind::Scsi);
        assert_eq!(
            s.classify_files(dev("8:1"), "ext4").domain(0),
            Domain::Hints
        );
    }

    #[test]
    fn domains_publish_their_classes_and_salt_their_keys() {
        use crate::hint::RwHint::*;
        let h = |d: Domain, s| d.publish(s, 8);
        assert_eq!(Domain::Hints.learner_streams(0), 5);
        assert_eq!(Domain::F2fs.learner_streams(0), 3);
        // A raw device keeps stream 1 for unplaced writes: of the five
        // streams a hint reaches, four are learnt, published 2..=5.
        let raw = Domain::Raw { dev: 1 };
        assert_eq!(raw.learner_streams(8), 5);
        let published: Vec<_> = (0..5).map(|s| raw.publish(s, 8)).collect();
        assert_eq!(published, [(0, 0), (2, 2), (3, 3), (4, 4), (5, 5)]);
        // Two streams: one learnt class, in stream 2; one stream: nothing
        // to keep apart, the one class in stream 1.
        assert_eq!(raw.learner_streams(2), 2);
        assert_eq!(raw.publish(1, 2), (2, 2));
        assert_eq!(raw.learner_streams(1), 2);
        assert_eq!(raw.publish(1, 1), (1, 1));
        // F2FS's warm and cold; a stream past the last stays the longest.
        let f2: Vec<u8> = (1..=3).map(|s| h(Domain::F2fs, s).1).collect();
        assert_eq!(f2, [Medium as u8, Extreme as u8, Extreme as u8]);
        // The f2fs domain's streams carry their hints by the hints
        // domain's rule (what a shim computes from a stream).
        for s in 1..=2 {
            let (p, hint) = h(Domain::F2fs, s);
            assert_eq!(RwHint::for_stream(p).raw() as u8, hint);
        }
        assert_eq!(h(Domain::Hints, 4), (4, Extreme as u8));
        assert_eq!(h(Domain::Raw { dev: 9 }, 3), (4, 4));
        assert_eq!(h(Domain::F2fs, 0), (0, 0));
        // Keys: the signature for hints, distinct and nonzero otherwise.
        let sig = 0x1234_5678_9abc_def0;
        assert_eq!(table_key(sig, Domain::Hints), sig);
        let k = [
            table_key(sig, Domain::F2fs),
            table_key(sig, Domain::Raw { dev: 7 }),
            table_key(sig, Domain::Raw { dev: 8 }),
        ];
        assert!(k.iter().all(|&x| x != 0 && x != sig));
        assert!(k[0] != k[1] && k[1] != k[2] && k[0] != k[2]);
        assert_eq!(table_key(0, Domain::F2fs), 0);
        assert_eq!(Domain::Raw { dev: dev("259:0") }.name(), "raw:259:0");
    }

    #[test]
    fn mountinfo_lines_parse_with_escapes() {
        let m = parse_mountinfo(
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n\
             99 27 259:1 / /mnt/my\\040disk rw - f2fs /dev/nvme0n1p1 rw\n\
             garbage\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].mount_point, "/mnt/my disk");
        assert_eq!(
            (m[1].dev.as_str(), m[1].fs_type.as_str()),
            ("259:1", "f2fs")
        );
        assert_eq!(m[0].source, "/dev/vda");
        assert_eq!(parse_dev("259:1"), Some(libc::makedev(259, 1)));
        assert_eq!(parse_dev("x"), None);
        assert_eq!(fs_name(F2FS_SUPER_MAGIC), "f2fs");
    }

    #[test]
    fn the_hosts_own_root_file_system_classifies() {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata("/").unwrap();
        let f = std::fs::File::open("/").unwrap();
        let magic = fs_magic(std::os::fd::AsRawFd::as_raw_fd(&f)).unwrap();
        let c = Sysfs::default().classify_files(md.dev(), fs_name(magic));
        // Whatever the host is, the answer is one of the paths with a reason.
        assert!(!c.why.is_empty());
        if fs_name(magic) != "f2fs" {
            assert_ne!(c.kind, PathKind::F2fs);
        }
    }
}
