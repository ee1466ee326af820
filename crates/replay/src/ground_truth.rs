//! The ground-truth source: the device requests recorded with tracefs,
//! each write attributed through the file system's extent maps to the inode
//! and file block that owned the device block at that moment — hence to the
//! signature of the shim write that last wrote that file block and to the
//! application's hint for that inode. Device writes no file owns are
//! metadata or journal; discards become TRIMs.
//!
//! A file some process opened `O_DIRECT` is written to the device *during*
//! the shim write that carries the data, and the shim stamps its event when
//! the call returns: its device write comes first in the time order. For
//! such a file the join keeps, per page, whether the page's latest shim
//! write has reached the device yet; a device write of a page whose latest
//! shim write already has is the next shim write's, and waits for it (at
//! the end of the trace, a device write no shim write claimed keeps the
//! page's last signature). Without this, an `O_DIRECT` page's device write
//! carried its *previous* write's signature, and its first none (a single
//! fio job with `direct=1`: 67 % of data pages signed, against 100 %
//! buffered).

use crate::deaths::finish;
use crate::error::BuildError;
use crate::ops::{push_page, JoinStats, Op, Replay, Source, WriteClass, PAGE};
use crate::source::{app_hint_of, file_of, invalidate_op, pages_of, Ev};
use pcstream_placement::wire;
use std::collections::{BTreeMap, HashMap, HashSet};

const SECTORS_PER_PAGE: u64 = PAGE / 512;

/// Device-block → (ino, file block) over time.
#[derive(Default)]
pub(crate) struct RevMap {
    /// start pblk → (len, ino, lblk)
    m: BTreeMap<u64, (u64, u64, u64)>,
}

impl RevMap {
    pub(crate) fn insert(&mut self, pblk: u64, len: u64, ino: u64, lblk: u64) {
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

    pub(crate) fn lookup(&self, pblk: u64) -> Option<(u64, u64)> {
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
    /// `O_DIRECT` files only: what the module docs describe.
    direct: Option<Box<DirectPages>>,
}

/// The join's state of an `O_DIRECT` file (see the module docs).
#[derive(Default)]
struct DirectPages {
    /// Pages whose latest shim write has not reached the device yet.
    unlanded: HashSet<u64>,
    /// Device writes (logical pages) waiting for the next shim write of
    /// their file page.
    waiting: HashMap<u64, Vec<u64>>,
}

pub(crate) fn ground_truth(
    evs: impl Iterator<Item = Ev>,
    logical_pages: Option<u64>,
    mut mark_files: HashSet<(u64, u64)>,
    direct_files: &HashSet<(u64, u64)>,
    ageing_events: usize,
) -> Result<Replay, BuildError> {
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
                    return Err(BuildError::BlockSize(x.block_size));
                }
                rev.insert(x.device_block, u64::from(x.len_blocks), ino, x.file_block);
                // Shim events held until the file system's device is known.
                for e in pending_shim.drain(..) {
                    shim_event(e, fs_dev, direct_files, &mut files, &mut ops, &mut stats);
                }
            }
            e @ (Ev::ShimWrite(_) | Ev::ShimInvalidate(_) | Ev::AppHint(_)) => {
                if fs_dev.is_none() {
                    pending_shim.push(e);
                } else {
                    shim_event(e, fs_dev, direct_files, &mut files, &mut ops, &mut stats);
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
                                    let dev = fs_dev.unwrap_or(0);
                                    let st = file_state(&mut files, direct_files, dev, ino);
                                    stats.data_pages += 1;
                                    if let Some(d) = &mut st.direct {
                                        if !d.unlanded.remove(&lblk) {
                                            // The next shim write's.
                                            d.waiting.entry(lblk).or_default().push(p);
                                            continue;
                                        }
                                    }
                                    let sig = st.page_sig.get(&lblk).copied();
                                    if sig.is_some() {
                                        stats.signed_pages += 1;
                                    }
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
    // Device writes of O_DIRECT files no shim write claimed (its event
    // lost, or the call failed after writing): the page's last signature.
    let dev = fs_dev.unwrap_or(0);
    let mut left: Vec<(u64, u64, u64)> = files
        .iter_mut()
        .filter_map(|(&ino, st)| Some((ino, st.direct.as_mut()?)))
        .flat_map(|(ino, d)| {
            d.waiting
                .drain()
                .flat_map(move |(lblk, lpns)| lpns.into_iter().map(move |p| (p, ino, lblk)))
        })
        .collect();
    left.sort_unstable();
    for (p, ino, lblk) in left {
        let st = &files[&ino];
        let sig = st.page_sig.get(&lblk).copied();
        push_data_page(&mut ops, &mut stats, p, (dev, ino), lblk, sig, st.app_hint);
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

/// An `O_DIRECT` file's device write, attributed after its turn (module
/// docs): counted as signed when it is, and pushed.
fn push_data_page(
    ops: &mut Vec<Op>,
    stats: &mut JoinStats,
    lpn: u64,
    file: (u64, u64),
    file_page: u64,
    sig: Option<u64>,
    app_hint: u8,
) {
    stats.signed_pages += u64::from(sig.is_some());
    push_page(
        ops,
        lpn,
        (Some(file), file_page, sig, app_hint, WriteClass::Data),
    );
}

/// The join's state of file `ino` on the traced file system `dev`.
fn file_state<'a>(
    files: &'a mut HashMap<u64, FileState>,
    direct_files: &HashSet<(u64, u64)>,
    dev: u64,
    ino: u64,
) -> &'a mut FileState {
    files.entry(ino).or_insert_with(|| FileState {
        direct: direct_files.contains(&(dev, ino)).then(Default::default),
        ..Default::default()
    })
}

fn shim_event(
    e: Ev,
    fs_dev: Option<u64>,
    direct_files: &HashSet<(u64, u64)>,
    files: &mut HashMap<u64, FileState>,
    ops: &mut Vec<Op>,
    stats: &mut JoinStats,
) {
    match e {
        Ev::ShimWrite(w) => {
            stats.shim_writes += 1;
            let (dev, ino) = file_of(&w.file);
            if Some(dev) != fs_dev {
                return;
            }
            let st = file_state(files, direct_files, dev, ino);
            let sig = (w.signature != 0).then_some(w.signature);
            for p in pages_of(w.offset, w.len) {
                if let Some(d) = &mut st.direct {
                    match d.waiting.remove(&p) {
                        // Its device writes came first: they are this write's.
                        Some(lpns) => {
                            for lpn in lpns {
                                push_data_page(ops, stats, lpn, (dev, ino), p, sig, st.app_hint);
                            }
                        }
                        None => {
                            d.unlanded.insert(p);
                        }
                    }
                }
                if let Some(s) = sig {
                    st.page_sig.insert(p, s);
                }
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
