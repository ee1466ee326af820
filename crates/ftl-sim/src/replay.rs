//! Trace replay: turns a recorded pcstream trace into the operations a device
//! receives, and drives a placement policy and an [`Ssd`] with them.
//!
//! Two sources, most faithful first ([`Source`]):
//! - **ground truth**: the trace holds what the block device really received
//!   (`BlockRequest`s recorded with tracefs) and the file system's
//!   file-block → device-block mappings (`ExtentMap`s). Each device write is
//!   attributed to the inode and file block that owned the device block at
//!   that moment, hence to the signature of the shim write that last wrote
//!   that file block and to the hint the application gave that inode —
//!   exactly what a kernel passing `bi_write_hint` down would deliver.
//!   Device writes no file owns are file-system metadata or journal
//!   ([`WriteClass::Metadata`]). Discards become TRIMs. Page-cache effects
//!   (data deleted before writeback) are in the measurement by construction.
//! - **file-system model**: without device records, a simple allocator maps
//!   `(file, offset)` to LBAs (in place for overwrites, next to the file's
//!   last block for appends, first free block from a rotating cursor
//!   otherwise) and TRIMs what unlink, truncate and punch-hole free — the
//!   behaviour of ext4 mounted with `discard`, minus its metadata. Writes go
//!   through a page cache first: dirty pages are written back in file order
//!   (blocks allocated then, as ext4's delayed allocation does) when the
//!   cache holds [`ReplayOptions::writeback_pages`], so small appends to one
//!   page reach the device once and data deleted while cached never does.
//!
//! [`layout`], [`aged_ssd`], [`simulate`] and [`simulate_all`] size a
//! device for a replay, age it with cold data as the PCStream paper does and
//! run policies on it (what `pcstreamctl compare` and the `replay` bench use).
//!
//! [`Replay::deaths`] knows when every written page is next overwritten or
//! trimmed; the oracle policy reads it through `WriteCtx::death`.

use crate::config::{ConfigError, GcPolicy, Geometry};
use crate::{Config, SimError, Ssd, Stats, Timing};
use pcstream_placement::policies::{self, PolicyConfig};
use pcstream_placement::policy::{Placement, StreamId, WriteCtx};
use pcstream_placement::trace::{TraceError, TraceReader};
use pcstream_placement::wire::{self, event::Kind, trace_record::Record};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// Bytes per logical page.
pub const PAGE: u64 = 4096;
const SECTORS_PER_PAGE: u64 = PAGE / 512;

/// Where the replayed device operations came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Recorded device requests (tracefs), attributed through extent maps.
    GroundTruth,
    /// Shim file events mapped to LBAs by the allocation model.
    FsModel,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::GroundTruth => "ground-truth device trace",
            Source::FsModel => "file-system allocation model",
        })
    }
}

/// What kind of data a device write carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteClass {
    /// File data, attributed to a file (and a signature when the shim saw the write).
    Data,
    /// Device blocks no file owned at the time: file-system metadata, journal.
    Metadata,
}

/// One device operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `pages` pages written at `lpn`; page `i` is file page `file_page + i`.
    Write {
        /// First logical page.
        lpn: u64,
        /// Page count (≥ 1).
        pages: u32,
        /// File `(dev, ino)` when attributed.
        file: Option<(u64, u64)>,
        /// Page offset in the file of the first page.
        file_page: u64,
        /// Signature of the code path that wrote the data, when known.
        signature: Option<u64>,
        /// The application's own hint for the file (0 = none).
        app_hint: u8,
        /// Data or metadata.
        class: WriteClass,
    },
    /// Pages `lpn..lpn+pages` discarded.
    Trim {
        /// First logical page.
        lpn: u64,
        /// Page count.
        pages: u64,
    },
    /// File pages stopped being live (unlink, truncate, punch): what the shim
    /// reports; policies that learn from files use it.
    InvalidateFile {
        /// `(dev, ino)`.
        file: (u64, u64),
        /// First file page.
        first_page: u64,
        /// Page count (`u64::MAX` = to the end of the file).
        pages: u64,
    },
}

/// Counts describing how a trace was turned into device operations.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct JoinStats {
    /// Pages written to the device.
    pub write_pages: u64,
    /// Of those, attributed to a file.
    pub data_pages: u64,
    /// Of the data pages, with a known signature.
    pub signed_pages: u64,
    /// Pages no file owned (metadata, journal).
    pub metadata_pages: u64,
    /// Pages discarded (whole pages inside discard requests).
    pub trim_pages: u64,
    /// Flush requests seen (not simulated).
    pub flushes: u64,
    /// Shim write events read.
    pub shim_writes: u64,
    /// Shim invalidation events read.
    pub shim_invalidations: u64,
    /// Distinct signatures among the written pages.
    pub signatures: u64,
    /// Pages written before the workload started (the recording's
    /// `--device-fill` ageing), replayed as [`Replay::ageing`] and not
    /// measured; the other page counts leave them (and the ageing's trims) out.
    pub ageing_pages: u64,
}

/// A trace ready to replay.
#[derive(Debug, Clone)]
pub struct Replay {
    /// Operations in time order.
    pub ops: Vec<Op>,
    /// One entry per written page, in write order: the replay clock (pages
    /// written since the start) at which that page is next overwritten or
    /// trimmed, [`NEVER`] if never within the trace (see [`Replay::death`]).
    pub deaths: Vec<u64>,
    /// Distinct logical pages the replay writes.
    pub footprint_pages: u64,
    /// Set by [`confine`]: the footprint before the replay's pages were
    /// re-allocated into a smaller region.
    pub confined_from: Option<u64>,
    /// The most logical pages holding data at once during the replay
    /// (starting from an empty device).
    pub peak_live_pages: u64,
    /// Bitmap of the pages counted in `footprint_pages`.
    touched: Vec<u64>,
    /// Logical size of the device, pages.
    pub logical_pages: u64,
    /// Where the operations came from.
    pub source: Source,
    /// How the join went.
    pub stats: JoinStats,
    /// File names seen (`OpenEvent`s), for reports.
    pub file_names: HashMap<(u64, u64), String>,
    /// Round marks: the replay clock (host pages written before it) of the
    /// first write to each file whose name ends in [`MARK_SUFFIX`], in
    /// order (`bench/workloads.sh` writes one per gcc build). Ground-truth
    /// traces only; empty otherwise.
    pub marks: Vec<u64>,
    /// How [`simulate`] runs this replay (default: one pass, tables kept).
    pub run_mode: RunMode,
    /// Device operations recorded before the workload started (ground truth
    /// of a `record --device-fill` ageing): [`aged_ssd`] writes them to
    /// stream 0 before the measured run; policies never see them, and the
    /// replay's own statistics (footprint, peak, deaths) leave them out.
    pub ageing: Vec<Op>,
}

/// File-name suffix of the round marks in [`Replay::marks`].
pub const MARK_SUFFIX: &str = ".pcstream-mark";

/// How [`simulate`] runs a replay through a policy (paper Fig. 13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunMode {
    /// Whole passes over the trace before the measured one, through the same
    /// policy instance and device ("PC table kept", a warmed-up steady
    /// state). Their writes are not counted: the device counters are reset
    /// after them, the cold data and the workload's live data stay.
    pub warmup_passes: u32,
    /// A new policy instance (all tables empty) at every round mark ("PC
    /// table cleared between builds").
    pub clear_at_marks: bool,
}

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading the trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The trace's content is unusable.
    #[error("{path}: {what}")]
    Bad {
        /// The trace file.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// A policy run could not be set up.
    #[error("{policy}: {what}")]
    Run {
        /// The policy.
        policy: String,
        /// What went wrong.
        what: String,
    },
    /// The simulator rejected an operation.
    #[error("replay operation {index}: {source}")]
    Sim {
        /// Index into [`Replay::ops`].
        index: usize,
        /// The simulator's error.
        source: SimError,
    },
}

/// Options for building a [`Replay`].
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Logical device size in pages. Ground truth: the recorded device's
    /// size (`DeviceInfo`) when the trace has it, else this, else the
    /// highest page touched. Model: this, default 5/4 of the peak live data
    /// (at least 1024 pages).
    pub logical_pages: Option<u64>,
    /// Use the allocation model even when device records exist.
    pub force_model: bool,
    /// Model only: dirty pages the page cache holds before writing them all
    /// back in file order (default [`DEFAULT_WRITEBACK_PAGES`]; 1 = write
    /// through). Rewrites of a cached page (small appends) reach the device
    /// once; pages deleted while cached never do.
    pub writeback_pages: Option<u64>,
}

#[derive(Clone)]
enum Ev {
    ShimWrite(wire::WriteEvent),
    ShimInvalidate(wire::InvalidateEvent),
    AppHint(wire::AppHintEvent),
    Extent(wire::ExtentMap),
    Block(wire::BlockRequest),
}

impl Ev {
    /// Order among events with the same timestamp: shim events first (a
    /// write() precedes its writeback), then mappings, then requests.
    fn rank(&self) -> u8 {
        match self {
            Ev::ShimWrite(_) | Ev::AppHint(_) => 0,
            Ev::ShimInvalidate(_) => 1,
            Ev::Extent(_) => 2,
            Ev::Block(_) => 3,
        }
    }
}

/// Largest write one event may carry: Linux moves at most this much per call
/// (`MAX_RW_COUNT`), and the shim's coalesced runs are far shorter.
pub const MAX_EVENT_BYTES: u64 = 0x7fff_f000;

/// Largest file offset (`loff_t` is signed).
pub const MAX_FILE_BYTES: u64 = i64::MAX as u64;

/// Largest recorded device a replay accepts (its per-page tables are held in memory).
pub const MAX_DEVICE_BYTES: u64 = 1 << 40;

/// Rejects a record whose sizes or offsets no real file or device has, before
/// anything is allocated for it. `device_size` is the recorded device's, if seen.
fn check_record(rec: &wire::TraceRecord, device_size: Option<u64>) -> Result<(), String> {
    let file_range = |what: &str, offset: u64, len: u64| -> Result<(), String> {
        match offset.checked_add(len) {
            Some(end) if end <= MAX_FILE_BYTES => Ok(()),
            _ => Err(format!(
                "{what} of {len} bytes at file offset {offset} ends past the largest file ({MAX_FILE_BYTES} bytes)"
            )),
        }
    };
    let device = device_size.unwrap_or(MAX_DEVICE_BYTES);
    let device_range = |what: &str, start: u64, bytes: u64| -> Result<(), String> {
        match start.checked_add(bytes) {
            Some(end) if end <= device => Ok(()),
            _ => Err(format!(
                "{what} of {bytes} bytes at device byte {start} ends past the {device}-byte device"
            )),
        }
    };
    match &rec.record {
        Some(Record::Batch(b)) => {
            for e in &b.events {
                match &e.kind {
                    Some(Kind::Write(w)) => {
                        if w.len > MAX_EVENT_BYTES {
                            return Err(format!(
                                "write event of {} bytes exceeds the {MAX_EVENT_BYTES}-byte limit of one write",
                                w.len
                            ));
                        }
                        file_range("write event", w.offset, w.len)?;
                    }
                    Some(Kind::Invalidate(i)) => file_range("invalidation", i.offset, i.len)?,
                    _ => {}
                }
            }
        }
        Some(Record::Block(b)) => device_range(
            "block request",
            b.sector.saturating_mul(512),
            u64::from(b.nr_sectors) * 512,
        )?,
        Some(Record::Extent(x)) => device_range(
            "extent",
            x.device_block.saturating_mul(PAGE),
            u64::from(x.len_blocks) * PAGE,
        )?,
        Some(Record::Device(d)) if d.size_bytes > MAX_DEVICE_BYTES => {
            return Err(format!(
                "recorded device of {} bytes exceeds the {MAX_DEVICE_BYTES}-byte replay limit",
                d.size_bytes
            ))
        }
        _ => {}
    }
    Ok(())
}

fn file_of(f: &Option<wire::FileId>) -> (u64, u64) {
    f.as_ref().map(|f| (f.dev, f.ino)).unwrap_or((0, 0))
}

impl Replay {
    /// Reads a trace file and builds the replay.
    pub fn from_trace(path: &Path, opts: &ReplayOptions) -> Result<Replay, ReplayError> {
        let name = path.display().to_string();
        let mut evs: Vec<(u64, u8, u64, Ev)> = Vec::new();
        let mut file_names = HashMap::new();
        let mut device_size: Option<u64> = None;
        let mut workload_start: Option<u64> = None;
        let mut seq = 0u64;
        let mut push = |evs: &mut Vec<(u64, u8, u64, Ev)>, t: u64, e: Ev| {
            evs.push((t, e.rank(), seq, e));
            seq += 1;
        };
        let mut reader = TraceReader::open(path)?;
        loop {
            let at = reader.offset();
            let Some(rec) = reader.next_record()? else {
                break;
            };
            check_record(&rec, device_size).map_err(|what| ReplayError::Bad {
                path: name.clone(),
                what: format!("byte offset {at}: {what}"),
            })?;
            match rec.record {
                Some(Record::Batch(b)) => {
                    for e in b.events {
                        let t = e.time_ns;
                        match e.kind {
                            Some(Kind::Write(w)) => push(&mut evs, t, Ev::ShimWrite(w)),
                            Some(Kind::Invalidate(i)) => push(&mut evs, t, Ev::ShimInvalidate(i)),
                            Some(Kind::AppHint(h)) => push(&mut evs, t, Ev::AppHint(h)),
                            Some(Kind::Open(o)) => {
                                file_names.insert(file_of(&o.file), o.path);
                            }
                            _ => {}
                        }
                    }
                }
                Some(Record::Block(b)) => push(&mut evs, b.time_ns, Ev::Block(b)),
                Some(Record::Extent(x)) => push(&mut evs, x.time_ns, Ev::Extent(x)),
                Some(Record::Device(d)) => {
                    device_size = Some(d.size_bytes);
                    if d.fill_bytes > 0 && d.workload_start_ns > 0 {
                        workload_start = Some(d.workload_start_ns);
                    }
                }
                Some(Record::Header(_)) | None => {}
            }
        }
        evs.sort_by_key(|(t, r, s, _)| (*t, *r, *s));
        let has_device = evs.iter().any(|e| matches!(e.3, Ev::Block(_)));
        let mark_files: HashSet<(u64, u64)> = file_names
            .iter()
            .filter(|(_, p)| p.ends_with(MARK_SUFFIX))
            .map(|(f, _)| *f)
            .collect();
        let mut r = if has_device && !opts.force_model {
            let lp = device_size.map(|b| b / PAGE).or(opts.logical_pages);
            // Events before the workload's start mark are the ageing fill.
            let split = workload_start.map_or(0, |t| evs.partition_point(|e| e.0 < t));
            ground_truth(evs.into_iter().map(|e| e.3), lp, mark_files, split)
        } else {
            fs_model(evs.into_iter().map(|e| e.3), opts)
        }
        .map_err(|what| ReplayError::Bad {
            path: name.clone(),
            what,
        })?;
        r.file_names = file_names;
        Ok(r)
    }

    /// Takes over what a derived replay (its operations rewritten) keeps
    /// from `from`: file names, round marks, run mode, ageing and the
    /// pre-confinement footprint.
    fn keep_context_of(&mut self, from: &Replay) {
        self.confined_from = from.confined_from;
        self.file_names = from.file_names.clone();
        self.marks = from.marks.clone();
        self.run_mode = from.run_mode;
        self.ageing = from.ageing.clone();
    }

    /// Builds a replay from operations directly (tests, synthetic traces),
    /// computing deaths and statistics.
    pub fn from_ops(ops: Vec<Op>, logical_pages: u64, source: Source) -> Result<Replay, String> {
        let mut stats = JoinStats::default();
        for op in &ops {
            match *op {
                Op::Write {
                    pages,
                    class,
                    signature,
                    ..
                } => {
                    stats.write_pages += u64::from(pages);
                    match class {
                        WriteClass::Data => {
                            stats.data_pages += u64::from(pages);
                            if signature.is_some() {
                                stats.signed_pages += u64::from(pages);
                            }
                        }
                        WriteClass::Metadata => stats.metadata_pages += u64::from(pages),
                    }
                }
                Op::Trim { pages, .. } => stats.trim_pages += pages,
                Op::InvalidateFile { .. } => {}
            }
        }
        finish(ops, logical_pages, source, stats)
    }

    /// Host pages the replay writes.
    pub fn host_pages(&self) -> u64 {
        self.deaths.len() as u64
    }

    /// When the `k`-th written page dies (replay clock), `None` if never.
    pub fn death(&self, k: u64) -> Option<u64> {
        let d = self.deaths[k as usize];
        (d != NEVER).then_some(d)
    }

    /// Whether the replay writes logical page `lpn`.
    pub fn touches(&self, lpn: u64) -> bool {
        self.touched
            .get((lpn / 64) as usize)
            .is_some_and(|w| w >> (lpn % 64) & 1 == 1)
    }
}

/// "Never dies within the trace" in [`Replay::deaths`].
pub const NEVER: u64 = u64::MAX;

/// Checks bounds, computes deaths and distinct signatures.
fn finish(
    ops: Vec<Op>,
    logical_pages: u64,
    source: Source,
    mut stats: JoinStats,
) -> Result<Replay, String> {
    if logical_pages == 0 {
        return Err("the device has no pages".into());
    }
    let mut sigs = std::collections::HashSet::new();
    let mut total = 0u64;
    for (i, op) in ops.iter().enumerate() {
        let (lpn, n) = match *op {
            Op::Write {
                lpn,
                pages,
                signature,
                ..
            } => {
                if let Some(s) = signature {
                    sigs.insert(s);
                }
                total += u64::from(pages);
                (lpn, u64::from(pages))
            }
            Op::Trim { lpn, pages } => (lpn, pages),
            Op::InvalidateFile { .. } => continue,
        };
        if lpn.checked_add(n).is_none_or(|end| end > logical_pages) {
            return Err(format!(
                "operation {i} touches pages {lpn}..{} beyond the device's {logical_pages} pages",
                lpn.saturating_add(n)
            ));
        }
    }
    stats.signatures = sigs.len() as u64;
    // Forward: replay clock at each op, footprint and peak of live pages.
    // Backward: next kill of each lpn.
    let words = logical_pages.div_ceil(64) as usize;
    let mut touched = vec![0u64; words];
    let mut mapped = vec![0u64; words];
    let (mut live, mut peak) = (0u64, 0u64);
    let mut clocks = Vec::with_capacity(ops.len());
    let mut c = 0u64;
    for op in &ops {
        clocks.push(c);
        match *op {
            Op::Write { lpn, pages, .. } => {
                c += u64::from(pages);
                for p in lpn..lpn + u64::from(pages) {
                    let (w, b) = ((p / 64) as usize, 1u64 << (p % 64));
                    touched[w] |= b;
                    if mapped[w] & b == 0 {
                        mapped[w] |= b;
                        live += 1;
                    }
                }
                peak = peak.max(live);
            }
            Op::Trim { lpn, pages } => {
                for p in lpn..lpn + pages {
                    let (w, b) = ((p / 64) as usize, 1u64 << (p % 64));
                    if mapped[w] & b != 0 {
                        mapped[w] &= !b;
                        live -= 1;
                    }
                }
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    drop(mapped);
    let footprint_pages = touched.iter().map(|w| u64::from(w.count_ones())).sum();
    let mut next_kill = vec![NEVER; logical_pages as usize];
    let mut deaths = vec![NEVER; total as usize];
    let mut k = total as usize;
    for (op, &clock) in ops.iter().zip(&clocks).rev() {
        match *op {
            Op::Write { lpn, pages, .. } => {
                for i in (0..u64::from(pages)).rev() {
                    k -= 1;
                    let slot = &mut next_kill[(lpn + i) as usize];
                    deaths[k] = *slot;
                    *slot = clock + i;
                }
            }
            Op::Trim { lpn, pages } => {
                next_kill[lpn as usize..(lpn + pages) as usize].fill(clock);
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    Ok(Replay {
        ops,
        deaths,
        footprint_pages,
        peak_live_pages: peak,
        touched,
        confined_from: None,
        logical_pages,
        source,
        stats,
        file_names: HashMap::new(),
        marks: Vec::new(),
        run_mode: RunMode::default(),
        ageing: Vec::new(),
    })
}

/// Appends a page write, merging it into the previous op when contiguous
/// with the same attribution.
fn push_page(
    ops: &mut Vec<Op>,
    lpn: u64,
    attr: (Option<(u64, u64)>, u64, Option<u64>, u8, WriteClass),
) {
    let (file, file_page, signature, app_hint, class) = attr;
    if let Some(Op::Write {
        lpn: l,
        pages,
        file: f,
        file_page: fp,
        signature: s,
        app_hint: h,
        class: c,
    }) = ops.last_mut()
    {
        let n = u64::from(*pages);
        let same_file_run = match (file, *f) {
            (Some(a), Some(b)) => a == b && file_page == *fp + n,
            (None, None) => true,
            _ => false,
        };
        if *l + n == lpn
            && same_file_run
            && *s == signature
            && *h == app_hint
            && *c == class
            && *pages < u32::MAX
        {
            *pages += 1;
            return;
        }
    }
    ops.push(Op::Write {
        lpn,
        pages: 1,
        file,
        file_page: if file.is_some() { file_page } else { 0 },
        signature,
        app_hint,
        class,
    });
}

/// Device-block → (ino, file block) over time.
#[derive(Default)]
struct RevMap {
    /// start pblk → (len, ino, lblk)
    m: BTreeMap<u64, (u64, u64, u64)>,
}

impl RevMap {
    fn insert(&mut self, pblk: u64, len: u64, ino: u64, lblk: u64) {
        let end = pblk + len;
        // Cut every overlapping mapping.
        let overlapping: Vec<u64> = self
            .m
            .range(..end)
            .rev()
            .take_while(|(&s, &(l, _, _))| s + l > pblk)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            let (l, i, lb) = self.m.remove(&s).expect("present");
            if s < pblk {
                self.m.insert(s, (pblk - s, i, lb));
            }
            if s + l > end {
                self.m.insert(end, (s + l - end, i, lb + (end - s)));
            }
        }
        self.m.insert(pblk, (len, ino, lblk));
    }

    fn lookup(&self, pblk: u64) -> Option<(u64, u64)> {
        let (&s, &(l, ino, lblk)) = self.m.range(..=pblk).next_back()?;
        (pblk < s + l).then_some((ino, lblk + (pblk - s)))
    }
}

/// Per-file state both sources keep: which signature last wrote each file
/// page, and the application's own hint.
#[derive(Default)]
struct FileState {
    page_sig: HashMap<u64, u64>,
    app_hint: u8,
}

fn pages_of(offset: u64, len: u64) -> std::ops::Range<u64> {
    if len == 0 {
        return 0..0;
    }
    offset / PAGE..(offset + len).div_ceil(PAGE)
}

fn app_hint_of(h: &wire::AppHintEvent) -> Option<u8> {
    (1..=5).contains(&h.requested).then_some(h.requested as u8)
}

fn invalidate_op(i: &wire::InvalidateEvent) -> Op {
    let kind = wire::InvalidateKind::try_from(i.kind).unwrap_or(wire::InvalidateKind::Unspecified);
    let (first_page, pages) = match kind {
        wire::InvalidateKind::Unlink | wire::InvalidateKind::RenameReplace => (0, u64::MAX),
        wire::InvalidateKind::Truncate => (i.offset.div_ceil(PAGE), u64::MAX),
        _ => {
            // Only whole pages inside a punched range die.
            let first = i.offset.div_ceil(PAGE);
            let end = (i.offset + i.len) / PAGE;
            (first, end.saturating_sub(first))
        }
    };
    Op::InvalidateFile {
        file: file_of(&i.file),
        first_page,
        pages,
    }
}

fn ground_truth(
    evs: impl Iterator<Item = Ev>,
    logical_pages: Option<u64>,
    mut mark_files: HashSet<(u64, u64)>,
    ageing_events: usize,
) -> Result<Replay, String> {
    let mut marks = Vec::new();
    let mut ops = Vec::new();
    let mut stats = JoinStats::default();
    let mut rev = RevMap::default();
    let mut files: HashMap<u64, FileState> = HashMap::new();
    let mut fs_dev: Option<u64> = None;
    let mut pending_shim: Vec<Ev> = Vec::new();
    let mut max_page = 0u64;
    // Ops and counts produced by the first `ageing_events` events.
    let mut ageing_split = (0usize, JoinStats::default());
    let mut seen = 0usize;
    for (index, ev) in evs.enumerate() {
        seen = index + 1;
        if index == ageing_events && ageing_events > 0 {
            ageing_split = (ops.len(), stats.clone());
        }
        if let Ev::ShimWrite(w) = &ev {
            if !mark_files.is_empty() && mark_files.remove(&file_of(&w.file)) {
                marks.push(stats.write_pages);
            }
        }
        match ev {
            Ev::Extent(x) => {
                let (dev, ino) = file_of(&x.file);
                fs_dev.get_or_insert(dev);
                if x.block_size != 0 && u64::from(x.block_size) != PAGE {
                    return Err(format!(
                        "file-system block size {} is not the 4 KiB page size",
                        x.block_size
                    ));
                }
                rev.insert(x.device_block, u64::from(x.len_blocks), ino, x.file_block);
                // Shim events held until the file system's device is known.
                for e in pending_shim.drain(..) {
                    shim_event(e, fs_dev, &mut files, &mut ops, &mut stats);
                }
            }
            e @ (Ev::ShimWrite(_) | Ev::ShimInvalidate(_) | Ev::AppHint(_)) => {
                if fs_dev.is_none() {
                    pending_shim.push(e);
                } else {
                    shim_event(e, fs_dev, &mut files, &mut ops, &mut stats);
                }
            }
            Ev::Block(b) => {
                let op = wire::BlockOp::try_from(b.op).unwrap_or(wire::BlockOp::Unspecified);
                let start = b.sector;
                let end = b.sector + u64::from(b.nr_sectors);
                match op {
                    wire::BlockOp::Write | wire::BlockOp::WriteZeroes => {
                        for p in start / SECTORS_PER_PAGE..end.div_ceil(SECTORS_PER_PAGE) {
                            max_page = max_page.max(p);
                            stats.write_pages += 1;
                            let attr = match rev.lookup(p) {
                                Some((ino, lblk)) => {
                                    let st = files.entry(ino).or_default();
                                    let sig = st.page_sig.get(&lblk).copied();
                                    stats.data_pages += 1;
                                    if sig.is_some() {
                                        stats.signed_pages += 1;
                                    }
                                    let dev = fs_dev.unwrap_or(0);
                                    (Some((dev, ino)), lblk, sig, st.app_hint, WriteClass::Data)
                                }
                                None => {
                                    stats.metadata_pages += 1;
                                    (None, 0, None, 0, WriteClass::Metadata)
                                }
                            };
                            push_page(&mut ops, p, attr);
                        }
                    }
                    wire::BlockOp::Discard => {
                        let first = start.div_ceil(SECTORS_PER_PAGE);
                        let last = end / SECTORS_PER_PAGE;
                        if last > first {
                            max_page = max_page.max(last - 1);
                            stats.trim_pages += last - first;
                            ops.push(Op::Trim {
                                lpn: first,
                                pages: last - first,
                            });
                        }
                    }
                    wire::BlockOp::Flush => stats.flushes += 1,
                    _ => {}
                }
            }
        }
    }
    if ageing_events > 0 && seen <= ageing_events {
        // Nothing after the start mark: everything was ageing.
        ageing_split = (ops.len(), stats.clone());
    }
    let lp = logical_pages.unwrap_or(max_page + 1);
    let (split, before) = ageing_split;
    let ageing: Vec<Op> = ops
        .drain(..split)
        .filter(|op| !matches!(op, Op::InvalidateFile { .. }))
        .collect();
    let ageing_pages = before.write_pages;
    stats.ageing_pages = ageing_pages;
    stats.write_pages -= before.write_pages;
    stats.data_pages -= before.data_pages;
    stats.signed_pages -= before.signed_pages;
    stats.metadata_pages -= before.metadata_pages;
    stats.trim_pages -= before.trim_pages;
    let mut r = finish(ops, lp, Source::GroundTruth, stats)?;
    r.marks = marks
        .into_iter()
        .map(|m| m.saturating_sub(ageing_pages))
        .collect();
    r.ageing = ageing;
    Ok(r)
}

fn shim_event(
    e: Ev,
    fs_dev: Option<u64>,
    files: &mut HashMap<u64, FileState>,
    ops: &mut Vec<Op>,
    stats: &mut JoinStats,
) {
    match e {
        Ev::ShimWrite(w) => {
            stats.shim_writes += 1;
            let (dev, ino) = file_of(&w.file);
            if Some(dev) != fs_dev || w.signature == 0 {
                return;
            }
            let st = files.entry(ino).or_default();
            for p in pages_of(w.offset, w.len) {
                st.page_sig.insert(p, w.signature);
            }
        }
        Ev::AppHint(h) => {
            let (dev, ino) = file_of(&h.file);
            if Some(dev) == fs_dev {
                if let Some(v) = app_hint_of(&h) {
                    files.entry(ino).or_default().app_hint = v;
                }
            }
        }
        Ev::ShimInvalidate(i) => {
            stats.shim_invalidations += 1;
            let (dev, ino) = file_of(&i.file);
            if Some(dev) != fs_dev {
                return;
            }
            let op = invalidate_op(&i);
            if let Op::InvalidateFile {
                first_page, pages, ..
            } = op
            {
                if let Some(st) = files.get_mut(&ino) {
                    if first_page == 0 && pages == u64::MAX {
                        st.page_sig.clear();
                    } else {
                        let end = first_page.saturating_add(pages);
                        st.page_sig.retain(|&p, _| p < first_page || p >= end);
                    }
                }
            }
            ops.push(op);
        }
        Ev::Extent(_) | Ev::Block(_) => unreachable!("not a shim event"),
    }
}

/// Free-space allocator of the file-system model: a bitmap with a rotating
/// cursor (next-fit), plus "goal" allocation right after a file's last block.
struct Allocator {
    used: Vec<u64>,
    pages: u64,
    cursor: u64,
    live: u64,
}

impl Allocator {
    fn new(pages: u64) -> Self {
        Allocator {
            used: vec![0; pages.div_ceil(64) as usize],
            pages,
            cursor: 0,
            live: 0,
        }
    }
    fn is_used(&self, p: u64) -> bool {
        self.used[(p / 64) as usize] >> (p % 64) & 1 == 1
    }
    fn set(&mut self, p: u64, on: bool) {
        let w = &mut self.used[(p / 64) as usize];
        if on {
            *w |= 1 << (p % 64);
            self.live += 1;
        } else {
            *w &= !(1 << (p % 64));
            self.live -= 1;
        }
    }
    fn alloc(&mut self, goal: Option<u64>) -> Option<u64> {
        if let Some(g) = goal.filter(|&g| g < self.pages && !self.is_used(g)) {
            self.set(g, true);
            return Some(g);
        }
        if self.live >= self.pages {
            return None;
        }
        let words = self.used.len() as u64;
        let mut w = self.cursor / 64;
        for _ in 0..=words {
            let free = !self.used[w as usize];
            if free != 0 {
                let p = w * 64 + u64::from(free.trailing_zeros());
                if p < self.pages {
                    self.set(p, true);
                    self.cursor = p + 1;
                    if self.cursor >= self.pages {
                        self.cursor = 0;
                    }
                    return Some(p);
                }
            }
            w = (w + 1) % words;
        }
        None
    }
}

#[derive(Default)]
struct ModelFile {
    /// file page → lpn
    blocks: BTreeMap<u64, u64>,
    last_lpn: Option<u64>,
    app_hint: u8,
}

fn fs_model(evs: impl Iterator<Item = Ev> + Clone, opts: &ReplayOptions) -> Result<Replay, String> {
    let wb = opts.writeback_pages.unwrap_or(DEFAULT_WRITEBACK_PAGES);
    let lp = match opts.logical_pages {
        Some(n) => n,
        None => {
            // Dry run with unbounded space for the peak of live data.
            let peak = model_pass(evs.clone(), u64::MAX / 4, wb, true)?.1;
            (peak + peak / 4).max(1024)
        }
    };
    let (ops, _, stats) = model_pass(evs, lp, wb, false)?;
    finish(ops, lp, Source::FsModel, stats)
}

/// Default size of the model's page cache: 8192 dirty pages (32 MiB).
pub const DEFAULT_WRITEBACK_PAGES: u64 = 8192;

/// The model's dirty pages, `(dev, ino, page)` → (signature, app hint) of
/// the last write, written back in file order when full.
type Dirty = HashMap<(u64, u64, u64), (Option<u64>, u8)>;

/// The file-system model's state: allocator, per-file block maps, the
/// write-back cache and the live-page count.
struct Model {
    alloc: Option<Allocator>,
    pages: u64,
    dry_next: u64,
    live: u64,
    peak: u64,
    files: HashMap<(u64, u64), ModelFile>,
    dirty: Dirty,
    ops: Vec<Op>,
    stats: JoinStats,
}

impl Model {
    /// Writes every dirty page back (delayed allocation: blocks are chosen
    /// now, next to the file's last block when possible).
    fn writeback(&mut self) -> Result<(), String> {
        let mut dirty: Vec<_> = self.dirty.drain().collect();
        dirty.sort_unstable_by_key(|&(k, _)| k);
        for ((dev, ino, p), (sig, hint)) in dirty {
            let key = (dev, ino);
            let f = self.files.entry(key).or_default();
            let lpn = match f.blocks.get(&p) {
                Some(&l) => l,
                None => {
                    let goal = f.last_lpn.map(|l| l + 1);
                    let l = match self.alloc.as_mut() {
                        Some(a) => a.alloc(goal).ok_or_else(|| {
                            format!(
                                "file-system model is out of space ({} pages): give a larger size",
                                self.pages
                            )
                        })?,
                        None => {
                            self.dry_next += 1;
                            self.dry_next
                        }
                    };
                    self.live += 1;
                    self.peak = self.peak.max(self.live);
                    f.blocks.insert(p, l);
                    l
                }
            };
            f.last_lpn = Some(lpn);
            self.stats.write_pages += 1;
            self.stats.data_pages += 1;
            if sig.is_some() {
                self.stats.signed_pages += 1;
            }
            push_page(
                &mut self.ops,
                lpn,
                (Some(key), p, sig, hint, WriteClass::Data),
            );
        }
        Ok(())
    }
}

fn model_pass(
    evs: impl Iterator<Item = Ev>,
    pages: u64,
    writeback_pages: u64,
    dry: bool,
) -> Result<(Vec<Op>, u64, JoinStats), String> {
    let mut m = Model {
        alloc: if dry {
            None
        } else {
            Some(Allocator::new(pages))
        },
        pages,
        dry_next: 0,
        live: 0,
        peak: 0,
        files: HashMap::new(),
        dirty: HashMap::new(),
        ops: Vec::new(),
        stats: JoinStats::default(),
    };
    for ev in evs {
        match ev {
            Ev::ShimWrite(w) => {
                m.stats.shim_writes += 1;
                let key = file_of(&w.file);
                let sig = (w.signature != 0).then_some(w.signature);
                let hint = m.files.get(&key).map_or(0, |f| f.app_hint);
                for p in pages_of(w.offset, w.len) {
                    m.dirty.insert((key.0, key.1, p), (sig, hint));
                }
                if m.dirty.len() as u64 >= writeback_pages {
                    m.writeback()?;
                }
            }
            Ev::AppHint(h) => {
                if let Some(v) = app_hint_of(&h) {
                    m.files.entry(file_of(&h.file)).or_default().app_hint = v;
                }
            }
            Ev::ShimInvalidate(i) => {
                m.stats.shim_invalidations += 1;
                let key = file_of(&i.file);
                let op = invalidate_op(&i);
                m.ops.push(op);
                let Op::InvalidateFile {
                    first_page, pages, ..
                } = op
                else {
                    unreachable!()
                };
                let end = first_page.saturating_add(pages);
                // Dirty pages of the range die in the cache, never written.
                m.dirty
                    .retain(|&(d, i, p), _| (d, i) != key || p < first_page || p >= end);
                let Some(f) = m.files.get_mut(&key) else {
                    continue;
                };
                let dead: Vec<(u64, u64)> = f
                    .blocks
                    .range(first_page..end)
                    .map(|(&p, &l)| (p, l))
                    .collect();
                let mut lpns: Vec<u64> = Vec::with_capacity(dead.len());
                for (p, l) in dead {
                    f.blocks.remove(&p);
                    if let Some(a) = m.alloc.as_mut() {
                        a.set(l, false);
                    }
                    m.live -= 1;
                    lpns.push(l);
                }
                if f.blocks.is_empty() {
                    f.last_lpn = None;
                }
                lpns.sort_unstable();
                // TRIM the freed blocks as runs, like ext4 with `discard`.
                let mut k = 0;
                while k < lpns.len() {
                    let mut n = 1;
                    while k + n < lpns.len() && lpns[k + n] == lpns[k] + n as u64 {
                        n += 1;
                    }
                    m.stats.trim_pages += n as u64;
                    m.ops.push(Op::Trim {
                        lpn: lpns[k],
                        pages: n as u64,
                    });
                    k += n;
                }
            }
            Ev::Extent(_) | Ev::Block(_) => {}
        }
    }
    m.writeback()?;
    Ok((m.ops, m.peak, m.stats))
}

/// What one replay run measured, beyond the device's own statistics.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RunCounters {
    /// Host pages written per stream id.
    pub pages_per_stream: Vec<u64>,
    /// Host pages written to stream 0.
    pub stream0_pages: u64,
}

/// Replays `replay` into `ssd`, placing every page with `policy` (one pass,
/// [`Replay::run_mode`] not applied: see [`simulate`]).
pub fn run(
    replay: &Replay,
    policy: &mut dyn Placement,
    ssd: &mut Ssd,
) -> Result<RunCounters, ReplayError> {
    let mut c = RunCounters::for_streams(ssd.config().streams);
    let mut slot = PolicySlot {
        base: policy,
        fresh: None,
    };
    run_pass(replay, &mut slot, None, ssd, 0, &mut c)?;
    Ok(c)
}

impl RunCounters {
    fn for_streams(streams: u32) -> RunCounters {
        RunCounters {
            pages_per_stream: vec![0; streams.max(1) as usize],
            stream0_pages: 0,
        }
    }
}

/// The policy a pass places with: the caller's, until a round mark
/// replaces it by a fresh instance.
pub(crate) struct PolicySlot<'a> {
    pub(crate) base: &'a mut dyn Placement,
    pub(crate) fresh: Option<Box<dyn Placement + Send>>,
}

impl PolicySlot<'_> {
    fn get(&mut self) -> &mut dyn Placement {
        match self.fresh.as_deref_mut() {
            Some(p) => p,
            None => &mut *self.base,
        }
    }
}

/// A fresh policy instance for [`RunMode::clear_at_marks`].
pub(crate) type MakePolicy<'a> = &'a dyn Fn() -> Result<Box<dyn Placement + Send>, ReplayError>;

/// One pass over the replay starting at replay clock `clock0` (policies see
/// times and deaths shifted by it); with `fresh`, the policy is replaced at
/// every round mark. Returns the clock after the pass.
fn run_pass(
    replay: &Replay,
    slot: &mut PolicySlot<'_>,
    fresh: Option<MakePolicy<'_>>,
    ssd: &mut Ssd,
    clock0: u64,
    c: &mut RunCounters,
) -> Result<u64, ReplayError> {
    let streams = ssd.config().streams;
    drive_pass(replay, slot, fresh, streams, clock0, |ev| match ev {
        PassEvent::Page {
            index, lpn, stream, ..
        } => {
            ssd.write(lpn, stream)
                .map_err(|source| ReplayError::Sim { index, source })?;
            c.pages_per_stream[stream as usize] += 1;
            if stream == 0 {
                c.stream0_pages += 1;
            }
            Ok(())
        }
        PassEvent::Trim { index, lpn, pages } => {
            // Only pages the replay writes: the others may hold the
            // cold data of the ageing, which the workload never frees.
            let mut p = lpn;
            while p < lpn + pages {
                if !replay.touches(p) {
                    p += 1;
                    continue;
                }
                let start = p;
                while p < lpn + pages && replay.touches(p) {
                    p += 1;
                }
                ssd.trim(start, p - start)
                    .map_err(|source| ReplayError::Sim { index, source })?;
            }
            Ok(())
        }
    })
}

/// What [`drive_pass`] reports to its sink.
pub(crate) enum PassEvent {
    /// One host page placed by the policy.
    Page {
        /// Index of the operation in [`Replay::ops`].
        index: usize,
        /// Logical page.
        lpn: u64,
        /// The policy's stream (clamped to the device's).
        stream: StreamId,
        /// The page's index in the pass (its entry in [`Replay::deaths`]).
        k: u64,
        /// Signature of the write.
        signature: Option<u64>,
        /// Data or metadata.
        class: WriteClass,
    },
    /// Pages discarded (the policy has heard it already).
    Trim {
        /// Index of the operation in [`Replay::ops`].
        index: usize,
        /// First logical page.
        lpn: u64,
        /// Page count.
        pages: u64,
    },
}

/// Drives the policy through one pass of the replay (see [`run_pass`]):
/// every write is placed page by page, TRIMs and file invalidations are
/// told to the policy, and `sink` hears each placed page (its stream
/// clamped to the device's `streams`) and each TRIM — the device
/// simulation, or a breakdown that needs no device ([`crate::signatures`]).
pub(crate) fn drive_pass(
    replay: &Replay,
    slot: &mut PolicySlot<'_>,
    fresh: Option<MakePolicy<'_>>,
    streams: u32,
    clock0: u64,
    mut sink: impl FnMut(PassEvent) -> Result<(), ReplayError>,
) -> Result<u64, ReplayError> {
    let mut clock = clock0;
    let mut next_mark = 0usize;
    let streams = streams.max(1);
    for (index, op) in replay.ops.iter().enumerate() {
        match *op {
            Op::Write {
                lpn,
                pages,
                file,
                file_page,
                signature,
                app_hint,
                class,
            } => {
                for i in 0..u64::from(pages) {
                    if let Some(make) = fresh {
                        while replay
                            .marks
                            .get(next_mark)
                            .is_some_and(|&m| m <= clock - clock0)
                        {
                            slot.fresh = Some(make()?);
                            next_mark += 1;
                        }
                    }
                    let k = clock - clock0;
                    let ctx = WriteCtx {
                        time: clock,
                        lpn: lpn + i,
                        pages: 1,
                        file,
                        file_page: file_page + i,
                        signature,
                        app_hint,
                        death: replay.death(k).map(|d| d + clock0),
                    };
                    let stream: StreamId = slot.get().place(&ctx).min(streams - 1);
                    sink(PassEvent::Page {
                        index,
                        lpn: lpn + i,
                        stream,
                        k,
                        signature,
                        class,
                    })?;
                    clock += 1;
                }
            }
            Op::Trim { lpn, pages } => {
                let mut done = 0;
                while done < pages {
                    let n = (pages - done).min(u64::from(u32::MAX)) as u32;
                    slot.get().trim(lpn + done, n, clock);
                    done += u64::from(n);
                }
                sink(PassEvent::Trim { index, lpn, pages })?;
            }
            Op::InvalidateFile {
                file,
                first_page,
                pages,
            } => slot.get().invalidate_file(file, first_page, pages, clock),
        }
    }
    Ok(clock)
}

/// Re-allocates the replay's logical pages into `0..hot_pages` (the logical
/// size stays the larger of the two), as the
/// traced file system would have placed them on a device whose remaining
/// space is taken by cold data: a page keeps its address when that is below
/// `hot_pages` and free, else it gets the free page after the previous one
/// written (next-fit); a trim frees the pages. Overwrite, trim and
/// death order are unchanged (the FTL sees the same page identities under
/// other names); only LBA-based policies see different addresses. Needs
/// `hot_pages` ≥ the peak of live pages.
pub fn confine(replay: &Replay, hot_pages: u64) -> Result<Replay, String> {
    if hot_pages < replay.peak_live_pages {
        return Err(format!(
            "cannot confine {} live pages into {hot_pages}",
            replay.peak_live_pages
        ));
    }
    const NONE: u64 = u64::MAX;
    let mut map = vec![NONE; replay.logical_pages as usize];
    let mut alloc = Allocator::new(hot_pages.max(1));
    let mut ops = Vec::with_capacity(replay.ops.len());
    let mut last: Option<u64> = None;
    for op in &replay.ops {
        match *op {
            Op::Write {
                lpn,
                pages,
                file,
                file_page,
                signature,
                app_hint,
                class,
            } => {
                for i in 0..u64::from(pages) {
                    let old = lpn + i;
                    let new = match map[old as usize] {
                        NONE => {
                            let goal = if old < hot_pages {
                                Some(old)
                            } else {
                                last.map(|l| l + 1)
                            };
                            let n = alloc
                                .alloc(goal)
                                .ok_or_else(|| format!("no free page among {hot_pages}"))?;
                            map[old as usize] = n;
                            n
                        }
                        n => n,
                    };
                    last = Some(new);
                    let fp = if file.is_some() { file_page + i } else { 0 };
                    push_page(&mut ops, new, (file, fp, signature, app_hint, class));
                }
            }
            Op::Trim { lpn, pages } => {
                let mut freed = Vec::new();
                for old in lpn..lpn + pages {
                    let n = map[old as usize];
                    if n != NONE {
                        map[old as usize] = NONE;
                        alloc.set(n, false);
                        freed.push(n);
                    }
                }
                freed.sort_unstable();
                let mut k = 0;
                while k < freed.len() {
                    let mut n = 1;
                    while k + n < freed.len() && freed[k + n] == freed[k] + n as u64 {
                        n += 1;
                    }
                    ops.push(Op::Trim {
                        lpn: freed[k],
                        pages: n as u64,
                    });
                    k += n;
                }
            }
            Op::InvalidateFile { .. } => ops.push(*op),
        }
    }
    let logical = replay.logical_pages.max(hot_pages).max(1);
    let mut r = finish(ops, logical, replay.source, replay.stats.clone())?;
    r.keep_context_of(replay);
    r.confined_from = Some(replay.footprint_pages);
    Ok(r)
}

/// The hot region [`confine`] uses before ageing: 5/4 of the peak of live
/// pages (the allocation model's default slack), at least 1024 pages.
pub fn hot_region(replay: &Replay) -> u64 {
    (replay.peak_live_pages + replay.peak_live_pages / 4).max(1024)
}

/// Confines the replay into [`hot_region`] when its footprint is larger,
/// so that the `prefill` cold data leaves the workload the room a file
/// system on the aged device would have: the replay unchanged otherwise,
/// when `prefill` is 0, or when the recording was aged already (its file
/// system allocated around the fill, [`Replay::ageing`]).
pub fn fit_for_ageing(replay: Replay, prefill: f64) -> Result<Replay, String> {
    let hot = hot_region(&replay);
    if prefill > 0.0 && replay.ageing.is_empty() && replay.footprint_pages > hot {
        confine(&replay, hot)
    } else {
        Ok(replay)
    }
}

/// The replay as a device without TRIM sees it (a file system mounted
/// without `discard`): the trims are dropped, so freed data stays valid
/// until its page is written again, and deaths are next overwrites only.
/// Policies still hear the file invalidations.
pub fn without_trims(replay: &Replay) -> Result<Replay, String> {
    let ops = replay
        .ops
        .iter()
        .filter(|op| !matches!(op, Op::Trim { .. }))
        .copied()
        .collect();
    let mut r = finish(
        ops,
        replay.logical_pages,
        replay.source,
        replay.stats.clone(),
    )?;
    r.keep_context_of(replay);
    Ok(r)
}

/// The simulated device a replay runs on, before sizing (see [`layout`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceSpec {
    /// External streams including the default stream 0 (PM963: 9).
    pub streams: u32,
    /// One internal (GC) stream per external stream.
    pub internal_streams: bool,
    /// Without internal streams, GC copies go to one shared GC block
    /// instead of back into their own stream ([`Config::shared_gc_block`]).
    pub shared_gc_block: bool,
    /// Over-provisioning, `(physical − logical) / logical`.
    pub op: f64,
    /// Fraction of the logical space filled with cold data before the run
    /// (the paper ages the device with 90% valid cold data).
    pub prefill: f64,
    /// Victim selection.
    pub gc: GcPolicy,
    /// Timing model for the throughput estimate.
    pub timing: Option<Timing>,
}

impl Default for DeviceSpec {
    fn default() -> Self {
        DeviceSpec {
            streams: 9,
            internal_streams: false,
            shared_gc_block: false,
            op: 0.07,
            prefill: 0.9,
            gc: GcPolicy::Greedy,
            timing: Some(Timing::default()),
        }
    }
}

/// The paper's pages per block, kept when the device has enough blocks.
pub const PAPER_PAGES_PER_BLOCK: u32 = 384;
/// Blocks per external stream below which pages per block are halved.
pub const MIN_BLOCKS_PER_STREAM: u64 = 64;
const CHANNELS: u32 = 4;
const WAYS: u32 = 4;

/// The device chosen for a replay, and why it has that size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceLayout {
    /// The simulator configuration.
    pub config: Config,
    /// Logical pages of the simulated device (≥ the trace's).
    pub logical_pages: u64,
    /// Logical pages of the traced device (or of the allocation model).
    pub trace_logical_pages: u64,
    /// Distinct pages the replay writes or trims.
    pub footprint_pages: u64,
    /// Pages of cold data written before the run (stream 0, never touched by the replay).
    pub cold_pages: u64,
}

impl DeviceLayout {
    /// How much larger than the traced device the simulated one is.
    pub fn scale(&self) -> f64 {
        self.logical_pages as f64 / self.trace_logical_pages.max(1) as f64
    }
}

/// Sizes the device for `replay`: the logical space is the traced device's,
/// enlarged when needed so that the replay's footprint fits beside
/// `prefill` of cold data (`⌈footprint / (1 − prefill)⌉`); 4 channels × 4
/// ways; the paper's 384 pages per block unless that gives fewer than
/// [`MIN_BLOCKS_PER_STREAM`] blocks per stream, in which case pages per block
/// are halved until it does (down to 6); blocks from the logical size and OP.
pub fn layout(replay: &Replay, spec: &DeviceSpec) -> Result<DeviceLayout, String> {
    if !(0.0..1.0).contains(&spec.prefill) {
        return Err(format!(
            "prefill fraction {} is outside [0, 1)",
            spec.prefill
        ));
    }
    if !(spec.op.is_finite() && spec.op > 0.0) {
        return Err(format!(
            "over-provisioning {} must be a positive number",
            spec.op
        ));
    }
    let fp = replay.footprint_pages;
    // A recording aged by its own fill brings its cold data along.
    let prefill = if replay.ageing.is_empty() {
        spec.prefill
    } else {
        0.0
    };
    let need = replay
        .logical_pages
        .max((fp as f64 / (1.0 - prefill)).ceil() as u64)
        .max(1);
    let phys_need = (need as f64 * (1.0 + spec.op)).ceil() as u64;
    let mut ppb = PAPER_PAGES_PER_BLOCK;
    let min_blocks = MIN_BLOCKS_PER_STREAM * u64::from(spec.streams.max(1));
    while ppb > 6 && phys_need.div_ceil(u64::from(ppb)) < min_blocks {
        ppb /= 2;
    }
    let units = u64::from(CHANNELS * WAYS);
    let first = phys_need.div_ceil(u64::from(ppb)).div_ceil(units).max(1);
    let mut bpu = first;
    loop {
        let config = Config {
            geometry: Geometry {
                channels: CHANNELS,
                ways: WAYS,
                blocks_per_unit: u32::try_from(bpu).map_err(|_| {
                    format!("a device of {need} logical pages is too large to simulate")
                })?,
                pages_per_block: ppb,
                page_size: PAGE as u32,
            },
            op: spec.op,
            streams: spec.streams,
            internal_streams: spec.internal_streams,
            shared_gc_block: spec.shared_gc_block,
            gc: spec.gc,
            gc_free_blocks: 2,
            timing: spec.timing,
        };
        let valid = config.validate();
        if config.logical_pages() >= need && valid.is_ok() {
            let logical_pages = config.logical_pages();
            let untouched = logical_pages - fp;
            let cold = ((logical_pages as f64 * prefill).round() as u64).min(untouched);
            return Ok(DeviceLayout {
                config,
                logical_pages,
                trace_logical_pages: replay.logical_pages,
                footprint_pages: fp,
                cold_pages: cold,
            });
        }
        match valid {
            Err(ConfigError::TooLittleSpare { .. }) | Ok(()) if bpu < 4 * first + 64 => bpu += 1,
            Err(e) => return Err(e.to_string()),
            Ok(()) => return Err(format!("cannot size a device for {need} logical pages")),
        }
    }
}

/// A fresh device of `layout`, aged: the recording's own ageing operations
/// ([`Replay::ageing`]) replayed into stream 0, then the cold pages (the
/// lowest logical pages the replay never touches) written sequentially to
/// stream 0, then the counters reset. Policies see neither.
pub fn aged_ssd(replay: &Replay, layout: &DeviceLayout) -> Result<Ssd, String> {
    let mut ssd = Ssd::new(layout.config.clone()).map_err(|e| e.to_string())?;
    for op in &replay.ageing {
        match *op {
            Op::Write { lpn, pages, .. } => ssd
                .write_pages(lpn, u64::from(pages), 0)
                .map_err(|e| format!("ageing write: {e}"))?,
            Op::Trim { lpn, pages } => ssd
                .trim(lpn, pages)
                .map_err(|e| format!("ageing trim: {e}"))?,
            Op::InvalidateFile { .. } => {}
        }
    }
    let mut left = layout.cold_pages;
    let mut lpn = 0u64;
    while left > 0 && lpn < layout.logical_pages {
        if !replay.touches(lpn) {
            ssd.write(lpn, 0).map_err(|e| e.to_string())?;
            left -= 1;
        }
        lpn += 1;
    }
    ssd.reset_stats();
    Ok(ssd)
}

/// One policy run of [`simulate`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// Whether the device had internal GC streams.
    pub internal_streams: bool,
    /// The device used.
    pub layout: DeviceLayout,
    /// Device statistics after the replay (the cold fill excluded).
    pub stats: Stats,
    /// Stream use as placed by the policy.
    pub counters: RunCounters,
    /// The policy's own counters (signatures, re-clusterings, ...).
    pub policy_counters: Vec<(String, u64)>,
    /// Wall-clock seconds of the replay (aging excluded).
    pub seconds: f64,
}

/// One job for [`simulate_all`].
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// The trace.
    pub replay: &'a Replay,
    /// Policy name ([`pcstream_placement::policies::POLICY_NAMES`]).
    pub policy: String,
    /// The device.
    pub spec: DeviceSpec,
}

/// The policies' configuration on a device: `policy_cfg` with the device's
/// stream count and, unless it names one, the device's erase block as
/// pcstream's lifetime resolution (`MapperConfig::erase_unit_pages`).
pub fn policy_config_for(
    spec: &DeviceSpec,
    layout: &DeviceLayout,
    policy_cfg: &PolicyConfig,
) -> PolicyConfig {
    let mut cfg = PolicyConfig {
        streams: spec.streams,
        ..policy_cfg.clone()
    };
    if cfg.pcstream.mapper.erase_unit_pages == 0 {
        cfg.pcstream.mapper.erase_unit_pages = u64::from(layout.config.geometry.pages_per_block);
    }
    cfg
}

/// Sizes and ages a device for `job`, replays the trace through the policy
/// and collects the statistics.
pub fn simulate(job: &Job<'_>, policy_cfg: &PolicyConfig) -> Result<RunResult, ReplayError> {
    let bad = |what: String| ReplayError::Run {
        policy: job.policy.clone(),
        what,
    };
    let layout = layout(job.replay, &job.spec).map_err(bad)?;
    let cfg = policy_config_for(&job.spec, &layout, policy_cfg);
    let make = || policies::build(&job.policy, &cfg).map_err(|e| bad(e.to_string()));
    let mut policy = make()?;
    let mut ssd = aged_ssd(job.replay, &layout).map_err(bad)?;
    if let Some(hook) = policy.gc_placement() {
        ssd.set_gc_placement(hook);
    }
    let mode = job.replay.run_mode;
    let fresh: Option<MakePolicy<'_>> = if mode.clear_at_marks {
        Some(&make)
    } else {
        None
    };
    let mut slot = PolicySlot {
        base: policy.as_mut(),
        fresh: None,
    };
    let mut clock = 0;
    for _ in 0..mode.warmup_passes {
        let mut scratch = RunCounters::for_streams(job.spec.streams);
        clock = run_pass(job.replay, &mut slot, fresh, &mut ssd, clock, &mut scratch)?;
    }
    if mode.warmup_passes > 0 {
        ssd.reset_stats();
    }
    let t0 = std::time::Instant::now();
    let mut counters = RunCounters::for_streams(ssd.config().streams);
    run_pass(job.replay, &mut slot, fresh, &mut ssd, clock, &mut counters)?;
    let seconds = t0.elapsed().as_secs_f64();
    let policy_counters = slot
        .get()
        .counters()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(RunResult {
        policy: job.policy.clone(),
        internal_streams: job.spec.internal_streams,
        layout,
        stats: ssd.stats(),
        counters,
        policy_counters,
        seconds,
    })
}

/// Runs every job on `threads` worker threads (each run owns its device and
/// policy; replays are shared read-only). Results are in job order.
pub fn simulate_all(
    jobs: &[Job<'_>],
    policy_cfg: &PolicyConfig,
    threads: usize,
) -> Vec<Result<RunResult, ReplayError>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<RunResult, ReplayError>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = simulate(job, policy_cfg);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every job ran")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(lpn: u64, pages: u32) -> Op {
        Op::Write {
            lpn,
            pages,
            file: None,
            file_page: 0,
            signature: None,
            app_hint: 0,
            class: WriteClass::Data,
        }
    }

    #[test]
    fn deaths_follow_overwrites_and_trims() {
        let ops = vec![w(0, 2), w(1, 1), Op::Trim { lpn: 0, pages: 1 }, w(5, 1)];
        let r = Replay::from_ops(ops, 8, Source::FsModel).unwrap();
        // pages written: clock0 lpn0, clock1 lpn1, clock2 lpn1, clock3 lpn5
        assert_eq!(r.deaths, vec![3, 2, NEVER, NEVER]);
        assert_eq!(r.death(0), Some(3));
        assert_eq!(r.death(3), None);
        assert_eq!(r.footprint_pages, 3);
        assert_eq!(r.peak_live_pages, 2);
        assert!(r.touches(5) && !r.touches(4));
        assert_eq!(r.host_pages(), 4);
    }

    #[test]
    fn out_of_range_op_is_an_error() {
        let e = Replay::from_ops(vec![w(7, 2)], 8, Source::FsModel).unwrap_err();
        assert!(e.contains("beyond"), "{e}");
    }

    #[test]
    fn revmap_splits_overlaps() {
        let mut m = RevMap::default();
        m.insert(100, 10, 1, 0);
        m.insert(104, 2, 2, 50);
        assert_eq!(m.lookup(103), Some((1, 3)));
        assert_eq!(m.lookup(104), Some((2, 50)));
        assert_eq!(m.lookup(105), Some((2, 51)));
        assert_eq!(m.lookup(106), Some((1, 6)));
        assert_eq!(m.lookup(110), None);
        assert_eq!(m.lookup(99), None);
    }

    #[test]
    fn allocator_prefers_goal_and_wraps() {
        let mut a = Allocator::new(130);
        assert_eq!(a.alloc(None), Some(0));
        assert_eq!(a.alloc(Some(100)), Some(100));
        assert_eq!(a.alloc(Some(100)), Some(1));
        a.set(0, false);
        for _ in 0..128 {
            assert!(a.alloc(None).is_some());
        }
        assert_eq!(a.alloc(None), None);
    }

    fn shim_write(ino: u64, offset: u64, len: u64, sig: u64) -> Ev {
        Ev::ShimWrite(wire::WriteEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            offset,
            len,
            signature: sig,
            ..Default::default()
        })
    }

    fn unlink(ino: u64) -> Ev {
        Ev::ShimInvalidate(wire::InvalidateEvent {
            file: Some(wire::FileId { dev: 1, ino }),
            kind: wire::InvalidateKind::Unlink as i32,
            offset: 0,
            len: 0,
        })
    }

    #[test]
    fn model_cache_coalesces_appends_and_drops_deleted_pages() {
        // 64 appends of 512 bytes fill 8 pages; file 2 is written and
        // unlinked while cached; file 3 lives.
        let mut evs: Vec<Ev> = (0..64).map(|i| shim_write(1, i * 512, 512, 7)).collect();
        evs.push(shim_write(2, 0, 8 * PAGE, 8));
        evs.push(unlink(2));
        evs.push(shim_write(3, 0, 4 * PAGE, 9));
        let cached = model_pass(evs.clone().into_iter(), 1024, 1024, false).unwrap();
        assert_eq!(cached.2.write_pages, 8 + 4);
        assert_eq!(cached.2.trim_pages, 0);
        assert_eq!(cached.2.shim_writes, 66);
        // Write-through: every append rewrites its page; file 2 reaches the
        // device and is trimmed.
        let through = model_pass(evs.into_iter(), 1024, 1, false).unwrap();
        assert_eq!(through.2.write_pages, 64 + 8 + 4);
        assert_eq!(through.2.trim_pages, 8);
        // A file's pages are contiguous next to each other.
        let firsts: Vec<(u64, u32)> = cached
            .0
            .iter()
            .filter_map(|op| match *op {
                Op::Write { lpn, pages, .. } => Some((lpn, pages)),
                _ => None,
            })
            .collect();
        assert_eq!(firsts, vec![(0, 8), (8, 4)]);
    }

    #[test]
    fn model_reuses_freed_space_and_reports_its_peak() {
        let evs = vec![
            shim_write(1, 0, 6 * PAGE, 1),
            shim_write(2, 0, 2 * PAGE, 1),
            unlink(1),
            shim_write(3, 0, 5 * PAGE, 1),
        ];
        let r = fs_model(
            evs.into_iter(),
            &ReplayOptions {
                writeback_pages: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.source, Source::FsModel);
        assert_eq!(r.peak_live_pages, 8);
        // 5/4 of the peak, at least 1024 pages.
        assert_eq!(r.logical_pages, 1024);
        // File 3 lands in file 1's freed pages, so the footprint stays 8.
        assert_eq!(r.footprint_pages, 8);
        assert_eq!(r.stats.trim_pages, 6);
        // Too small a file system is an error, not a panic.
        let e = fs_model(
            vec![shim_write(1, 0, 9 * PAGE, 1)].into_iter(),
            &ReplayOptions {
                logical_pages: Some(8),
                writeback_pages: Some(1),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.contains("out of space"), "{e}");
    }

    fn replay_touching(logical: u64, pages: &[u64]) -> Replay {
        let ops = pages.iter().map(|&p| w(p, 1)).collect();
        Replay::from_ops(ops, logical, Source::FsModel).unwrap()
    }

    #[test]
    fn layout_fits_the_footprint_beside_the_cold_data() {
        let r = replay_touching(100_000, &(0..20_000).map(|p| p * 5).collect::<Vec<_>>());
        let spec = DeviceSpec::default();
        let l = layout(&r, &spec).unwrap();
        // ⌈20 000 / 0.1⌉ = 200 000 > the traced 100 000.
        assert!(l.logical_pages >= 200_000, "{}", l.logical_pages);
        assert!(l.logical_pages < 200_000 + 16 * 384, "{}", l.logical_pages);
        assert_eq!(l.cold_pages, (l.logical_pages as f64 * 0.9).round() as u64);
        assert!(l.logical_pages - l.cold_pages >= r.footprint_pages);
        assert!(l.scale() >= 2.0);
        // 200 000 pages / 384 ≈ 560 blocks < 64 × 9: pages per block halve.
        assert_eq!(l.config.geometry.pages_per_block, 192);
        assert!(l.config.geometry.blocks() >= 64 * 9);
        // A big device keeps the paper's 384.
        let big = replay_touching(4_000_000, &[0]);
        let lb = layout(&big, &spec).unwrap();
        assert_eq!(lb.config.geometry.pages_per_block, 384);
        assert!(lb.logical_pages >= 4_000_000);
        // Bad values are errors.
        let bad = DeviceSpec {
            prefill: 1.0,
            ..DeviceSpec::default()
        };
        assert!(layout(&r, &bad).unwrap_err().contains("prefill"));
    }

    #[test]
    fn aged_device_holds_cold_data_only_where_the_replay_never_writes() {
        let r = replay_touching(4096, &[0, 1, 2, 100, 4000]);
        let l = layout(&r, &DeviceSpec::default()).unwrap();
        let ssd = aged_ssd(&r, &l).unwrap();
        let st = ssd.stats();
        assert_eq!(st.host_pages, 0, "counters reset after ageing");
        assert_eq!(st.valid_pages, l.cold_pages);
        for p in [0, 1, 2, 100, 4000] {
            assert_eq!(
                ssd.lookup(p),
                None,
                "page {p} must stay free for the replay"
            );
        }
        assert!(ssd.lookup(3).is_some() && ssd.lookup(99).is_some());
    }

    #[test]
    fn simulate_all_keeps_job_order_and_reports_errors_per_job() {
        let r = replay_touching(4096, &(0..4096).collect::<Vec<_>>());
        let jobs: Vec<Job<'_>> = ["oracle", "nope", "baseline"]
            .iter()
            .map(|p| Job {
                replay: &r,
                policy: p.to_string(),
                spec: DeviceSpec::default(),
            })
            .collect();
        let res = simulate_all(&jobs, &PolicyConfig::default(), 2);
        assert_eq!(res[0].as_ref().unwrap().policy, "oracle");
        let e = res[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("baseline"), "{e}");
        let b = res[2].as_ref().unwrap();
        assert_eq!(b.stats.host_pages, 4096);
        assert_eq!(b.counters.stream0_pages, 4096);
    }

    #[test]
    fn confine_renames_pages_but_keeps_every_death() {
        // Pages spread 7 apart, rewritten, trimmed (also a never-written
        // range), rewritten again.
        let mut ops: Vec<Op> = (0..200).map(|i| w(i * 7, 1)).collect();
        ops.extend((0..100).map(|i| w(i * 7, 1)));
        ops.push(Op::Trim { lpn: 0, pages: 700 });
        ops.push(Op::Trim {
            lpn: 1500,
            pages: 100,
        });
        ops.extend((0..50).map(|i| w(1400 + i * 3, 1)));
        let r = Replay::from_ops(ops, 2000, Source::GroundTruth).unwrap();
        assert_eq!(r.peak_live_pages, 200);
        let c = confine(&r, 256).unwrap();
        assert_eq!(c.deaths, r.deaths);
        assert_eq!(c.peak_live_pages, r.peak_live_pages);
        assert_eq!(c.confined_from, Some(r.footprint_pages));
        assert!(c.footprint_pages <= 256);
        assert_eq!(c.logical_pages, 2000);
        for op in &c.ops {
            match *op {
                Op::Write { lpn, pages, .. } => assert!(lpn + u64::from(pages) <= 256),
                // Only the 100 mapped pages of 0..700; nothing of 1500..1600.
                Op::Trim { lpn, pages } => assert!(lpn + pages <= 256),
                Op::InvalidateFile { .. } => {}
            }
        }
        let trimmed: u64 = c
            .ops
            .iter()
            .map(|op| match *op {
                Op::Trim { pages, .. } => pages,
                _ => 0,
            })
            .sum();
        assert_eq!(trimmed, 100);
        assert!(confine(&r, 199).unwrap_err().contains("200 live pages"));
        // Nothing to do for a dense replay.
        let dense = replay_touching(4096, &(0..2000).collect::<Vec<_>>());
        let f = fit_for_ageing(dense, 0.9).unwrap();
        assert_eq!(f.confined_from, None);
    }

    #[test]
    fn without_trims_data_dies_only_when_rewritten() {
        let ops = vec![w(0, 2), Op::Trim { lpn: 0, pages: 2 }, w(1, 1)];
        let r = Replay::from_ops(ops, 8, Source::FsModel).unwrap();
        assert_eq!(r.deaths, vec![2, 2, NEVER]);
        let n = without_trims(&r).unwrap();
        assert_eq!(n.deaths, vec![NEVER, 2, NEVER]);
        assert!(n.ops.iter().all(|op| !matches!(op, Op::Trim { .. })));
        assert_eq!(n.stats.trim_pages, 2, "the join statistics are the trace's");
    }

    #[test]
    fn clear_at_marks_restarts_policies_and_warmup_passes_are_not_counted() {
        let sw = |lpn: u64, sig: u64| Op::Write {
            lpn,
            pages: 1,
            file: Some((1, lpn)),
            file_page: 0,
            signature: Some(sig),
            app_hint: 0,
            class: WriteClass::Data,
        };
        // Round 1 writes with signatures 1 and 2, round 2 (from clock 4) with 3.
        let ops = vec![sw(0, 1), sw(1, 2), sw(2, 1), sw(3, 2), sw(4, 3), sw(5, 3)];
        let mut r = Replay::from_ops(ops, 64, Source::GroundTruth).unwrap();
        r.marks = vec![0, 4];
        let go = |r: &Replay| {
            let job = Job {
                replay: r,
                policy: "pcstream".into(),
                spec: DeviceSpec::default(),
            };
            let res = simulate(&job, &PolicyConfig::default()).unwrap();
            let sigs = res
                .policy_counters
                .iter()
                .find(|(k, _)| k == "signatures")
                .map(|(_, v)| *v)
                .unwrap();
            (res.stats.host_pages, sigs)
        };
        assert_eq!(go(&r), (6, 3), "tables kept over the rounds");
        r.run_mode = RunMode {
            warmup_passes: 0,
            clear_at_marks: true,
        };
        assert_eq!(
            go(&r),
            (6, 1),
            "the last round's instance saw one signature"
        );
        r.run_mode = RunMode {
            warmup_passes: 2,
            clear_at_marks: false,
        };
        assert_eq!(go(&r), (6, 3), "warm-up writes are not counted");
        // The confined replay keeps the marks and the mode.
        let c = confine(&r, 1024).unwrap();
        assert_eq!((c.marks.clone(), c.run_mode), (r.marks.clone(), r.run_mode));
    }
}
