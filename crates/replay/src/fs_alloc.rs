//! The file-system allocator, used when a trace has no device records: it
//! maps `(file, offset)` to LBAs (in place for overwrites, next to the
//! file's last block for appends, first free block from a rotating cursor
//! otherwise) and TRIMs what unlink, truncate and punch-hole free — the
//! behaviour of ext4 mounted with `discard`, minus its metadata. Writes go
//! through a page cache first: dirty pages are written back in file order
//! (blocks allocated then, as ext4's delayed allocation does) when the cache
//! holds [`crate::ReplayOptions::writeback_pages`], so small appends to one
//! page reach the device once and data deleted while cached never does.

use crate::deaths::finish;
use crate::error::BuildError;
use crate::ops::{push_page, JoinStats, Op, Replay, ReplayTimes, Source, WriteClass, PAGE};
use crate::source::{app_hint_of, file_of, invalidate_op, pages_of, Ev};
use pcstream_placement::online::page_time;
use std::collections::{BTreeMap, HashMap};

/// Free-space allocator of the file-system model: a bitmap with a rotating
/// cursor (next-fit), plus "goal" allocation right after a file's last block.
pub(crate) struct Allocator {
    used: Vec<u64>,
    pages: u64,
    cursor: u64,
    live: u64,
}

impl Allocator {
    pub(crate) fn new(pages: u64) -> Self {
        Allocator {
            used: vec![0; pages.div_ceil(64) as usize],
            pages,
            cursor: 0,
            live: 0,
        }
    }
    pub(crate) fn is_used(&self, p: u64) -> bool {
        self.used[(p / 64) as usize] >> (p % 64) & 1 == 1
    }
    pub(crate) fn set(&mut self, p: u64, on: bool) {
        let w = &mut self.used[(p / 64) as usize];
        if on {
            *w |= 1 << (p % 64);
            self.live += 1;
        } else {
            *w &= !(1 << (p % 64));
            self.live -= 1;
        }
    }
    pub(crate) fn alloc(&mut self, goal: Option<u64>) -> Option<u64> {
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
struct AllocFile {
    /// file page → lpn
    blocks: BTreeMap<u64, u64>,
    last_lpn: Option<u64>,
    app_hint: u8,
}

/// Replays the shim's events through the allocator onto a file system of
/// `logical_pages` (default: 5/4 of the peak of live data, at least 1024
/// pages) with a page cache of `writeback_pages` (default
/// [`DEFAULT_WRITEBACK_PAGES`]).
pub(crate) fn allocate(
    evs: impl Iterator<Item = Ev> + Clone,
    logical_pages: Option<u64>,
    writeback_pages: Option<u64>,
    byte_clock: bool,
) -> Result<Replay, BuildError> {
    let wb = writeback_pages.unwrap_or(DEFAULT_WRITEBACK_PAGES);
    let lp = match logical_pages {
        Some(n) => n,
        None => {
            // Dry run with unbounded space for the peak of live data.
            let peak = alloc_pass(evs.clone(), u64::MAX / 4, wb, true)?.1;
            (peak + peak / 4).max(1024)
        }
    };
    let (ops, _, stats, times) = alloc_pass_timed(evs, lp, wb, false, byte_clock)?;
    let mut r = finish(ops, lp, Source::FsAlloc, stats)?;
    r.times = times;
    Ok(r)
}

/// Default size of the model's page cache: 8192 dirty pages (32 MiB).
pub const DEFAULT_WRITEBACK_PAGES: u64 = 8192;

/// The model's dirty pages, `(dev, ino, page)` → (signature, app hint) of
/// the last write, written back in file order when full.
type Dirty = HashMap<(u64, u64, u64), (Option<u64>, u8)>;

/// The file-system model's state: allocator, per-file block maps, the
/// write-back cache and the live-page count.
struct FsState {
    alloc: Option<Allocator>,
    pages: u64,
    dry_next: u64,
    live: u64,
    peak: u64,
    files: HashMap<(u64, u64), AllocFile>,
    dirty: Dirty,
    ops: Vec<Op>,
    stats: JoinStats,
    /// The byte clock ([`crate::ReplayOptions::byte_clock`]): bytes
    /// written so far, the offset of the write being written back, and
    /// the times so far.
    bytes: u64,
    write_offset: u64,
    times: Option<ReplayTimes>,
}

impl FsState {
    /// Gives the operations pushed since the last call the byte clock's
    /// time now.
    fn stamp_ops(&mut self) {
        let now = self.bytes / PAGE;
        if let Some(t) = self.times.as_mut() {
            t.ops.resize(self.ops.len(), now);
        }
    }

    /// Writes every dirty page back (delayed allocation: blocks are chosen
    /// now, next to the file's last block when possible).
    fn writeback(&mut self) -> Result<(), BuildError> {
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
                        Some(a) => a.alloc(goal).ok_or(BuildError::OutOfSpace(self.pages))?,
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
            if let Some(t) = self.times.as_mut() {
                t.pages.push(page_time(self.bytes, self.write_offset, p));
            }
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

pub(crate) fn alloc_pass(
    evs: impl Iterator<Item = Ev>,
    pages: u64,
    writeback_pages: u64,
    dry: bool,
) -> Result<(Vec<Op>, u64, JoinStats), BuildError> {
    let (ops, peak, stats, _) = alloc_pass_timed(evs, pages, writeback_pages, dry, false)?;
    Ok((ops, peak, stats))
}

/// [`alloc_pass`], with the byte clock's times when `byte_clock` (and
/// written through).
pub(crate) fn alloc_pass_timed(
    evs: impl Iterator<Item = Ev>,
    pages: u64,
    writeback_pages: u64,
    dry: bool,
    byte_clock: bool,
) -> Result<(Vec<Op>, u64, JoinStats, Option<ReplayTimes>), BuildError> {
    let mut m = FsState {
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
        bytes: 0,
        write_offset: 0,
        times: (byte_clock && writeback_pages == 1).then(ReplayTimes::default),
    };
    for ev in evs {
        m.stamp_ops();
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
                    m.write_offset = w.offset;
                    m.writeback()?;
                }
                m.bytes = m.bytes.saturating_add(w.len);
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
    m.stamp_ops();
    Ok((m.ops, m.peak, m.stats, m.times))
}
