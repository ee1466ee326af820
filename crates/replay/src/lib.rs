//! pcstream-replay: turns a recorded pcstream trace into the operations a
//! device receives, and drives a placement policy and an
//! [`ftl_sim::Ssd`] with them. Start at [`Replay::from_trace`], then
//! [`simulate`].
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
//! - **file-system allocator** ([`fs_alloc`]): without device records, a
//!   simple allocator maps
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
//!
//! Errors are typed per stage ([`RecordError`], [`BuildError`],
//! [`SizingError`], [`RunError`]) and gathered in [`ReplayError`].
//!
//! Modules, in pipeline order: [`source`] reads and merges the trace's
//! events; [`ground_truth`] or [`fs_alloc`] turns them into device
//! operations ([`ops`]); [`deaths`] computes when each page dies;
//! [`transforms`] derive replays other devices would see; [`sizing`] sizes
//! and ages the simulated device; [`pass`] drives a policy through the
//! replay; [`experiment`] runs policies side by side; [`signatures`] breaks
//! pcstream's placement down by signature.

#![deny(missing_docs)]

pub mod deaths;
mod error;
pub mod experiment;
pub mod fs_alloc;
pub mod ground_truth;
pub mod ops;
pub mod pass;
mod separability;
pub mod signatures;
pub mod sizing;
pub mod source;
#[cfg(test)]
mod tests;
pub mod transforms;

pub use deaths::NEVER;
pub use error::{BuildError, RecordError, ReplayError, RunError, SizingError};
pub use experiment::{policy_config_for, simulate, simulate_all, Job, RunResult};
pub use fs_alloc::DEFAULT_WRITEBACK_PAGES;
pub use ops::{JoinStats, Op, Replay, ReplayTimes, RunMode, Source, WriteClass, MARK_SUFFIX, PAGE};
pub use pass::{run, RunCounters};
pub use sizing::{
    aged_ssd, layout, DeviceLayout, DeviceSpec, MIN_BLOCKS_PER_STREAM, PAPER_PAGES_PER_BLOCK,
};
pub use source::{MAX_DEVICE_BYTES, MAX_EVENT_BYTES, MAX_FILE_BYTES};
pub use transforms::{confine, fit_for_ageing, hot_region, without_trims};

use pcstream_placement::trace::TraceReader;
use pcstream_placement::wire::{event::Kind, trace_record::Record};
use source::{check_record, file_of, Ev};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Options for building a [`Replay`].
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Logical device size in pages. Ground truth: the recorded device's
    /// size (`DeviceInfo`) when the trace has it, else this, else the
    /// highest page touched. Model: this, default 5/4 of the peak live data
    /// (at least 1024 pages).
    pub logical_pages: Option<u64>,
    /// Use the allocation model even when device records exist.
    pub force_fs_alloc: bool,
    /// Model only: dirty pages the page cache holds before writing them all
    /// back in file order (default [`DEFAULT_WRITEBACK_PAGES`]; 1 = write
    /// through). Rewrites of a cached page (small appends) reach the device
    /// once; pages deleted while cached never do.
    pub writeback_pages: Option<u64>,
    /// Model written through only (`writeback_pages = Some(1)`): the
    /// policies' clock counts the bytes of the write events (in pages), as
    /// pcstreamd's does, instead of the pages written ([`Replay::times`]);
    /// each page a write touches is placed at the clock of its first byte
    /// in the write (`pcstream_placement::online::page_time`). Ignored
    /// otherwise.
    pub byte_clock: bool,
    /// Replay each write under the native signature the shim recorded
    /// beside its Java call path (`WriteEvent.native_signature`; writes
    /// without one keep theirs): the same run as the paper's PCStream sees
    /// it without its JDK change. A trace with none is an error
    /// ([`ReplayError::NoNativeSignatures`]).
    pub native_signatures: bool,
}

impl Replay {
    /// Reads a trace file and builds the replay.
    pub fn from_trace(path: &Path, opts: &ReplayOptions) -> Result<Replay, ReplayError> {
        let name = path.display().to_string();
        let mut evs: Vec<(u64, u8, u64, Ev)> = Vec::new();
        let mut file_names = HashMap::new();
        // Files some process opened O_DIRECT (the join attributes their
        // device writes to the shim write that follows them).
        let mut direct_files: HashSet<(u64, u64)> = HashSet::new();
        let mut device_size: Option<u64> = None;
        let mut workload_start: Option<u64> = None;
        let mut seq = 0u64;
        let mut native_writes = 0u64;
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
            check_record(&rec, device_size).map_err(|source| ReplayError::Record {
                path: name.clone(),
                offset: at,
                source,
            })?;
            match rec.record {
                Some(Record::Batch(b)) => {
                    for e in b.events {
                        let t = e.time_ns;
                        match e.kind {
                            Some(Kind::Write(mut w)) => {
                                if opts.native_signatures && w.native_signature != 0 {
                                    w.signature = w.native_signature;
                                    native_writes += 1;
                                }
                                push(&mut evs, t, Ev::ShimWrite(w))
                            }
                            Some(Kind::Invalidate(i)) => push(&mut evs, t, Ev::ShimInvalidate(i)),
                            Some(Kind::AppHint(h)) => push(&mut evs, t, Ev::AppHint(h)),
                            Some(Kind::Open(o)) => {
                                if o.flags & libc::O_DIRECT != 0 {
                                    direct_files.insert(file_of(&o.file));
                                }
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
        if opts.native_signatures && native_writes == 0 {
            return Err(ReplayError::NoNativeSignatures { path: name });
        }
        evs.sort_by_key(|(t, r, s, _)| (*t, *r, *s));
        let has_device = evs.iter().any(|e| matches!(e.3, Ev::Block(_)));
        let mark_files: HashSet<(u64, u64)> = file_names
            .iter()
            .filter(|(_, p)| p.ends_with(MARK_SUFFIX))
            .map(|(f, _)| *f)
            .collect();
        let mut r = if has_device && !opts.force_fs_alloc {
            let lp = device_size.map(|b| b / PAGE).or(opts.logical_pages);
            // Events before the workload's start mark are the ageing fill.
            let split = workload_start.map_or(0, |t| evs.partition_point(|e| e.0 < t));
            ground_truth::ground_truth(
                evs.into_iter().map(|e| e.3),
                lp,
                mark_files,
                &direct_files,
                split,
            )
        } else {
            fs_alloc::allocate(
                evs.into_iter().map(|e| e.3),
                opts.logical_pages,
                opts.writeback_pages,
                opts.byte_clock && opts.writeback_pages == Some(1),
            )
        }
        .map_err(|source| ReplayError::Build {
            path: name.clone(),
            source,
        })?;
        r.file_names = file_names;
        Ok(r)
    }
}
