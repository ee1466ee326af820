//! The replay's data: the device operations a trace becomes ([`Op`]), what
//! each write carried ([`WriteClass`]), where they came from ([`Source`]),
//! the join's counts ([`JoinStats`]) and the [`Replay`] they form, with its
//! run mode. Every other module builds, transforms or runs these.

use std::collections::HashMap;

/// Bytes per logical page.
pub const PAGE: u64 = ftl_sim::paper::PAGE_SIZE as u64;

/// Where the replayed device operations came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Recorded device requests (tracefs), attributed through extent maps.
    GroundTruth,
    /// Shim file events mapped to LBAs by the file-system allocator
    /// ([`crate::fs_alloc`]); `fs-model` in JSON, as before the rename.
    #[serde(rename = "fs-model")]
    FsAlloc,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::GroundTruth => "ground-truth device trace",
            Source::FsAlloc => "file-system allocation model",
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
    /// trimmed, [`crate::NEVER`] if never within the trace (see [`Replay::death`]).
    pub deaths: Vec<u64>,
    /// Distinct logical pages the replay writes.
    pub footprint_pages: u64,
    /// Set by [`crate::confine`]: the footprint before the replay's pages were
    /// re-allocated into a smaller region.
    pub confined_from: Option<u64>,
    /// The most logical pages holding data at once during the replay
    /// (starting from an empty device).
    pub peak_live_pages: u64,
    /// Bitmap of the pages counted in `footprint_pages`.
    pub(crate) touched: Vec<u64>,
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
    /// How [`crate::simulate`] runs this replay (default: one pass, tables kept).
    pub run_mode: RunMode,
    /// Device operations recorded before the workload started (ground truth
    /// of a `record --device-fill` ageing): [`crate::aged_ssd`] writes them to
    /// stream 0 before the measured run; policies never see them, and the
    /// replay's own statistics (footprint, peak, deaths) leave them out.
    pub ageing: Vec<Op>,
    /// The policies' clock on the byte clock
    /// ([`crate::ReplayOptions::byte_clock`]); `None`: pages written.
    /// Transforms drop it (their operations are rebuilt).
    pub times: Option<ReplayTimes>,
}

/// The clock the policies see when it counts the bytes the write events
/// carry (what pcstreamd's clock counts), in 4 KiB pages, instead of the
/// pages written: a 100-byte append moves it by 100 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayTimes {
    /// Per written page, in write order (as [`Replay::deaths`]): its time.
    pub pages: Vec<u64>,
    /// Per operation (as [`Replay::ops`]): the time of a TRIM or file
    /// invalidation (unused for writes).
    pub ops: Vec<u64>,
}

/// File-name suffix of the round marks in [`Replay::marks`].
pub const MARK_SUFFIX: &str = ".pcstream-mark";

/// How [`crate::simulate`] runs a replay through a policy (paper Fig. 13).
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

/// Appends a page write, merging it into the previous op when contiguous
/// with the same attribution.
pub(crate) fn push_page(
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
