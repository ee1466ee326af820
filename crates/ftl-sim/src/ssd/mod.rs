//! The page-mapped FTL: logical↔physical maps, write frontiers (one open
//! block per external stream, plus one per internal stream or for the shared
//! GC stream when configured), the free-block pool, garbage collection and
//! the counters.
//!
//! Everything on the write path is a flat `Vec` indexed by page or block
//! number; nothing allocates per write.

use pcstream_placement::{GcPlacement, StreamId};

use crate::buckets::Buckets;
use crate::config::{Config, ConfigError, GcPolicy};
use crate::histogram::LogHistogram;
use crate::hugepage;
use crate::stats::{Stats, StreamStats};

/// "No page" / "no block" / "unmapped".
const NIL: u32 = u32::MAX;
/// [`Block::data_stream`] of a block holding pages of several streams.
const MIXED: u32 = u32::MAX - 1;

/// Cache prefetch hint (a no-op off x86-64).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and has no effect
    // on memory contents; `p` points into a live slice anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Cache prefetch hint with intent to write (`prefetchw`).
#[inline(always)]
fn prefetch_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as for `prefetch`: a hint that never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How many victim pages ahead GC prefetches forward-map entries.
const GC_AHEAD: usize = 16;

/// What a write or trim can do wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// A logical page beyond the device's logical space.
    #[error("logical page {lpn} is beyond the device's {logical} logical pages")]
    LpnOutOfRange {
        /// The offending page (first page past the end for ranges).
        lpn: u64,
        /// Logical pages of the device.
        logical: u64,
    },
    /// A stream id the device does not have.
    #[error("stream {stream} is not one of the device's streams 0..{streams}")]
    StreamOutOfRange {
        /// The offending id.
        stream: StreamId,
        /// External streams of the device.
        streams: u32,
    },
    /// A pre-fill fraction outside 0..=1.
    #[error("pre-fill fraction {0} is outside 0..=1")]
    BadFraction(f64),
    /// No free block although the configuration was validated (a bug).
    #[error("no free block left for a write frontier (simulator invariant broken)")]
    OutOfSpace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Open,
    Closed,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    valid: u32,
    /// Frontier that filled the block (see [`Ssd::frontiers`]).
    frontier: u32,
    state: State,
    /// External stream whose data the block holds (host blocks of `k` and
    /// blocks of `k`'s internal stream hold only `k`'s pages), [`MIXED`]
    /// for shared GC blocks with pages of several streams, [`NIL`] while
    /// a shared GC block is still empty.
    data_stream: u32,
    erases: u32,
    /// Host clock when the block was closed (for cost-benefit).
    closed_at: u64,
    /// Host clock when the block was opened (its lifespan for a GC hook).
    opened_at: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frontier {
    block: u32,
    next: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct PerStream {
    host: u64,
    gc: u64,
    blocks: u64,
    internal_blocks: u64,
    opened: u64,
}

/// Counts of blocks by state (for checks and reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCounts {
    /// Erased, in the free pool.
    pub free: u64,
    /// Being filled by a write frontier.
    pub open: u64,
    /// Full; GC candidates.
    pub closed: u64,
}

/// A policy's GC placement ([`GcPlacement`]), boxed.
struct GcHook(Box<dyn GcPlacement + Send>);

impl std::fmt::Debug for GcHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GcHook")
    }
}

/// A simulated SSD. Drive it write by write with [`Ssd::write`] and
/// [`Ssd::trim`], read the counters with [`Ssd::stats`].
#[derive(Debug)]
pub struct Ssd {
    cfg: Config,
    ppb: u32,
    logical: u64,
    streams: u32,
    reserve: usize,
    /// Logical page → physical page. GC touches only this map and `p2l`,
    /// so the host-only `wtime` and `stream_of` live apart.
    l2p: Vec<u32>,
    /// Host clock of the last write of each logical page (low 32 bits:
    /// lifetimes are exact below 2^32 host pages).
    wtime: Vec<u32>,
    /// Stream of the last host write of each logical page (read only for
    /// pages in [`MIXED`] blocks).
    stream_of: Vec<u8>,
    p2l: Vec<u32>,
    blocks: Vec<Block>,
    buckets: Buckets,
    free: Vec<u32>,
    /// `0..streams`: host frontiers; then either `streams..2·streams`
    /// (internal stream of stream `k` at `streams + k`), one shared GC
    /// frontier at `streams`, or nothing (GC copies into host frontiers).
    frontiers: Vec<Frontier>,
    /// Host pages written since creation (never reset).
    clock: u64,
    host_pages: u64,
    gc_pages: u64,
    erases: u64,
    trimmed: u64,
    victims: u64,
    valid_pages: u64,
    gc_stream_blocks: u64,
    per: Vec<PerStream>,
    lifetimes: Vec<LogHistogram>,
    /// The policy's placement of GC copies, when it has one
    /// ([`Ssd::set_gc_placement`]).
    gc_hook: Option<GcHook>,
    /// Test-only payload per physical page, moved by GC like data.
    #[cfg(test)]
    tags: Vec<u64>,
}

impl Ssd {
    /// A fresh (all free) device.
    pub fn new(cfg: Config) -> Result<Ssd, ConfigError> {
        cfg.validate()?;
        let g = cfg.geometry;
        let ppb = g.pages_per_block;
        let nblocks = g.blocks() as usize;
        let phys = g.physical_pages() as usize;
        let logical = cfg.logical_pages();
        let streams = cfg.streams;
        let nfront = cfg.max_open_blocks() as usize;
        let ns = streams as usize;
        Ok(Ssd {
            ppb,
            logical,
            streams,
            reserve: cfg.gc_free_blocks as usize,
            l2p: hugepage::filled_vec(logical as usize, NIL),
            wtime: hugepage::filled_vec(logical as usize, 0),
            stream_of: hugepage::filled_vec(logical as usize, 0),
            p2l: hugepage::filled_vec(phys, NIL),
            blocks: vec![
                Block {
                    valid: 0,
                    frontier: NIL,
                    state: State::Free,
                    data_stream: NIL,
                    erases: 0,
                    closed_at: 0,
                    opened_at: 0,
                };
                nblocks
            ],
            buckets: Buckets::new(nblocks, ppb as usize),
            // Popped from the end: block 0 first.
            free: (0..nblocks as u32).rev().collect(),
            frontiers: vec![
                Frontier {
                    block: NIL,
                    next: 0
                };
                nfront
            ],
            clock: 0,
            host_pages: 0,
            gc_pages: 0,
            erases: 0,
            trimmed: 0,
            victims: 0,
            valid_pages: 0,
            gc_stream_blocks: 0,
            per: vec![PerStream::default(); ns],
            lifetimes: vec![LogHistogram::default(); ns],
            gc_hook: None,
            #[cfg(test)]
            tags: vec![0; phys],
            cfg,
        })
    }

    /// Lets a policy place GC copies: from now on each valid page of a
    /// victim goes to the external stream `hook` chooses (copied into that
    /// stream's own frontier, beside its host writes), instead of the
    /// device's default (internal streams, the shared GC block, or the
    /// victim's own stream). The hook also hears every collected victim.
    /// GC then keeps one more free block per stream, as one victim's
    /// copies may open a block in every stream.
    pub fn set_gc_placement(&mut self, hook: Box<dyn GcPlacement + Send>) {
        self.gc_hook = Some(GcHook(hook));
        self.reserve = self.cfg.gc_free_blocks as usize + self.streams as usize;
    }

    /// The configuration the device was built from.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Logical pages exported to the host.
    pub fn logical_pages(&self) -> u64 {
        self.logical
    }

    /// Host pages written since the device was created (the logical clock
    /// lifetimes are measured in; not reset by [`Ssd::reset_stats`]).
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Host pages + GC copies since the last reset (flash page programs).
    pub fn flash_pages(&self) -> u64 {
        self.host_pages + self.gc_pages
    }

    /// Writes one logical page through external stream `stream`.
    #[inline]
    pub fn write(&mut self, lpn: u64, stream: StreamId) -> Result<(), SimError> {
        if lpn >= self.logical {
            return Err(SimError::LpnOutOfRange {
                lpn,
                logical: self.logical,
            });
        }
        if stream >= self.streams {
            return Err(SimError::StreamOutOfRange {
                stream,
                streams: self.streams,
            });
        }
        let f = stream as usize;
        if self.frontiers[f].block == NIL {
            self.open_block(f)?;
            self.collect()?;
            // GC copies back into their own stream (no internal streams,
            // no shared GC block) may have filled the block just opened.
            if self.frontiers[f].block == NIL {
                self.open_block(f)?;
            }
        }
        let i = lpn as usize;
        let now = self.clock;
        self.clock += 1;
        let old = self.l2p[i];
        if old != NIL {
            self.forget(i, old, now as u32);
        } else {
            self.valid_pages += 1;
        }
        let ppn = self.take_page(f);
        self.p2l[ppn as usize] = lpn as u32;
        self.l2p[i] = ppn;
        self.wtime[i] = now as u32;
        self.stream_of[i] = stream as u8;
        self.host_pages += 1;
        self.per[f].host += 1;
        Ok(())
    }

    /// Writes a batch of `(logical page, stream)` in order, exactly as
    /// calling [`Ssd::write`] on each, but prefetching the map entries of
    /// writes a few places ahead so that their cache misses overlap. Stops
    /// at the first error (earlier writes stay done).
    pub fn write_batch(&mut self, writes: &[(u64, StreamId)]) -> Result<(), SimError> {
        const AHEAD: usize = 12;
        for &(lpn, _) in writes.iter().take(AHEAD) {
            self.prefetch_logical(lpn);
        }
        for (i, &(lpn, stream)) in writes.iter().enumerate() {
            if let Some(&(next, _)) = writes.get(i + AHEAD) {
                self.prefetch_logical(next);
            }
            // Second stage: the forward-map entry of a nearer write is in
            // cache by now; fetch the reverse-map entry it will invalidate.
            if let Some(&(near, _)) = writes.get(i + AHEAD / 3) {
                if let Some(&ppn) = self.l2p.get(near as usize) {
                    if let Some(e) = self.p2l.get(ppn as usize) {
                        prefetch_write(e);
                    }
                }
            }
            self.write(lpn, stream)?;
        }
        Ok(())
    }

    /// Hints the CPU to fetch the per-logical-page entries of `lpn`.
    #[inline(always)]
    fn prefetch_logical(&self, lpn: u64) {
        let i = lpn as usize;
        if i < self.l2p.len() {
            prefetch(self.l2p[i..].as_ptr());
            prefetch(self.wtime[i..].as_ptr());
            prefetch(self.stream_of[i..].as_ptr());
        }
    }

    /// Writes `pages` consecutive logical pages from `lpn` through `stream`.
    /// Checks the whole range first: on error nothing is written.
    pub fn write_pages(&mut self, lpn: u64, pages: u64, stream: StreamId) -> Result<(), SimError> {
        self.check_range(lpn, pages)?;
        for p in lpn..lpn + pages {
            self.write(p, stream)?;
        }
        Ok(())
    }

    /// Trims (discards) `pages` logical pages from `lpn`: their data becomes
    /// invalid and GC will not copy it. Unmapped pages are ignored. Checks
    /// the whole range first: on error nothing is trimmed.
    pub fn trim(&mut self, lpn: u64, pages: u64) -> Result<(), SimError> {
        self.check_range(lpn, pages)?;
        let now = self.clock as u32;
        for i in lpn as usize..(lpn + pages) as usize {
            let old = self.l2p[i];
            if old == NIL {
                continue;
            }
            self.forget(i, old, now);
            self.l2p[i] = NIL;
            self.valid_pages -= 1;
            self.trimmed += 1;
        }
        Ok(())
    }

    fn check_range(&self, lpn: u64, pages: u64) -> Result<(), SimError> {
        match lpn.checked_add(pages) {
            Some(end) if end <= self.logical => Ok(()),
            _ => Err(SimError::LpnOutOfRange {
                lpn: lpn.saturating_add(pages),
                logical: self.logical,
            }),
        }
    }

    /// Ages the device as the PCStream paper does: writes the first
    /// `fraction` of the logical space sequentially (page `lpn` through
    /// stream `stream_of(lpn)`), then resets the counters. Returns the pages written.
    pub fn prefill(
        &mut self,
        fraction: f64,
        mut stream_of: impl FnMut(u64) -> StreamId,
    ) -> Result<u64, SimError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SimError::BadFraction(fraction));
        }
        let n = ((self.logical as f64 * fraction).round() as u64).min(self.logical);
        for lpn in 0..n {
            self.write(lpn, stream_of(lpn))?;
        }
        self.reset_stats();
        Ok(n)
    }

    /// The physical page holding logical page `lpn`, if it holds data.
    pub fn lookup(&self, lpn: u64) -> Option<u64> {
        let &ppn = self.l2p.get(lpn as usize)?;
        (ppn != NIL).then_some(u64::from(ppn))
    }

    /// Runs one GC step now, whatever the free-block count; false when no
    /// block can be collected (none closed, or all fully valid).
    pub fn gc_step(&mut self) -> Result<bool, SimError> {
        if self.free.is_empty() {
            // Collecting may need one free block to copy into.
            return Ok(false);
        }
        self.gc_one()
    }

    /// Zeroes the counters (not the device contents, not the clock).
    pub fn reset_stats(&mut self) {
        self.host_pages = 0;
        self.gc_pages = 0;
        self.erases = 0;
        self.trimmed = 0;
        self.victims = 0;
        for p in &mut self.per {
            p.host = 0;
            p.gc = 0;
            p.opened = 0;
        }
        for h in &mut self.lifetimes {
            h.clear();
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let per_stream = (0..self.streams as usize)
            .map(|s| {
                let p = &self.per[s];
                StreamStats {
                    stream: s as StreamId,
                    host_pages: p.host,
                    gc_pages: p.gc,
                    blocks: p.blocks,
                    internal_blocks: p.internal_blocks,
                    blocks_opened: p.opened,
                    lifetime: self.lifetimes[s].summary(),
                }
            })
            .collect();
        Stats {
            host_pages: self.host_pages,
            gc_pages: self.gc_pages,
            erases: self.erases,
            waf: Stats::waf_of(self.host_pages, self.gc_pages),
            trimmed_pages: self.trimmed,
            gc_victims: self.victims,
            physical_pages: self.cfg.geometry.physical_pages(),
            logical_pages: self.logical,
            valid_pages: self.valid_pages,
            free_blocks: self.free.len() as u64,
            gc_stream_blocks: self.gc_stream_blocks,
            per_stream,
            throughput: self.cfg.timing.map(|t| {
                t.estimate(
                    &self.cfg.geometry,
                    self.host_pages,
                    self.gc_pages,
                    self.erases,
                )
            }),
        }
    }

    /// Blocks by state.
    pub fn block_counts(&self) -> BlockCounts {
        let mut c = BlockCounts {
            free: 0,
            open: 0,
            closed: 0,
        };
        for b in &self.blocks {
            match b.state {
                State::Free => c.free += 1,
                State::Open => c.open += 1,
                State::Closed => c.closed += 1,
            }
        }
        c
    }

    // --- internals -------------------------------------------------------

    /// Logical page `i`, stored at `ppn`, is overwritten or trimmed at
    /// host time `now`: records its lifetime and invalidates the page.
    #[inline]
    fn forget(&mut self, i: usize, ppn: u32, now: u32) {
        let life = now.wrapping_sub(self.wtime[i]);
        self.p2l[ppn as usize] = NIL;
        let b = ppn / self.ppb;
        let blk = &mut self.blocks[b as usize];
        let s = if blk.data_stream == MIXED {
            u32::from(self.stream_of[i])
        } else {
            blk.data_stream
        };
        if blk.state == State::Closed {
            self.buckets.decrement(b, blk.valid);
        }
        blk.valid -= 1;
        self.lifetimes[s as usize].record(u64::from(life));
    }

    /// Next page of frontier `f`, which has an open block; closes the block
    /// when it becomes full.
    #[inline]
    fn take_page(&mut self, f: usize) -> u32 {
        let fr = self.frontiers[f];
        self.fill_frontier(f, 1);
        fr.block * self.ppb + fr.next
    }

    /// Frontier `f`'s open block received `n` more valid pages (at most the
    /// room left); closes it when full.
    #[inline]
    fn fill_frontier(&mut self, f: usize, n: u32) {
        let fr = &mut self.frontiers[f];
        let b = fr.block;
        fr.next += n;
        let full = fr.next == self.ppb;
        if full {
            fr.block = NIL;
        }
        let blk = &mut self.blocks[b as usize];
        blk.valid += n;
        if full {
            blk.state = State::Closed;
            blk.closed_at = self.clock;
            self.buckets.insert(b, blk.valid);
        }
    }

    fn open_block(&mut self, f: usize) -> Result<(), SimError> {
        let b = self.free.pop().ok_or(SimError::OutOfSpace)?;
        let blk = &mut self.blocks[b as usize];
        debug_assert_eq!(blk.state, State::Free);
        blk.state = State::Open;
        blk.frontier = f as u32;
        blk.opened_at = self.clock;
        let s = self.streams;
        blk.data_stream = if (f as u32) < s {
            f as u32
        } else if self.cfg.internal_streams {
            f as u32 - s
        } else {
            NIL
        };
        self.frontiers[f] = Frontier { block: b, next: 0 };
        self.owner_count(f as u32, 1);
        Ok(())
    }

    /// Adjusts the per-owner block count of frontier `f` by `delta` (±1).
    fn owner_count(&mut self, f: u32, delta: i64) {
        let s = self.streams;
        let slot = if f < s {
            let p = &mut self.per[f as usize];
            if delta > 0 {
                p.opened += 1;
            }
            &mut p.blocks
        } else if self.cfg.internal_streams {
            let p = &mut self.per[(f - s) as usize];
            if delta > 0 {
                p.opened += 1;
            }
            &mut p.internal_blocks
        } else {
            &mut self.gc_stream_blocks
        };
        *slot = slot.wrapping_add_signed(delta);
    }

    /// GC until the free pool is back at the watermark.
    fn collect(&mut self) -> Result<(), SimError> {
        while self.free.len() < self.reserve {
            if !self.gc_one()? {
                break;
            }
        }
        Ok(())
    }

    /// Frontier that receives GC copies of a block filled by frontier `f`.
    #[inline]
    fn gc_dest(&self, f: u32) -> usize {
        let s = self.streams;
        if !self.cfg.internal_streams {
            if self.cfg.shared_gc_block {
                s as usize
            } else {
                f as usize
            }
        } else if f < s {
            (s + f) as usize
        } else {
            f as usize
        }
    }

    /// Picks, copies and erases one victim. False when there is none worth
    /// collecting (no closed block, or only fully valid ones).
    fn gc_one(&mut self) -> Result<bool, SimError> {
        let picked = match self.cfg.gc {
            GcPolicy::Greedy => self.buckets.pop_min(),
            GcPolicy::CostBenefit => self.pick_cost_benefit(),
        };
        let Some((v, valid)) = picked else {
            return Ok(false);
        };
        if valid == self.ppb {
            // Copying a full block frees nothing: put it back.
            self.buckets.insert(v, valid);
            return Ok(false);
        }
        if self.gc_hook.is_some() {
            return self.gc_placed(v, valid);
        }
        let dest = self.gc_dest(self.blocks[v as usize].frontier);
        let vs = self.blocks[v as usize].data_stream;
        let ppb = self.ppb as usize;
        let base = v as usize * ppb;
        let mut left = valid as usize;
        let mut p = base;
        while left > 0 {
            if self.frontiers[dest].block == NIL {
                self.open_block(dest)?;
            }
            let Frontier { block: db, next } = self.frontiers[dest];
            let dblk = &mut self.blocks[db as usize];
            dblk.data_stream = match dblk.data_stream {
                NIL => vs,
                ds if ds == vs => ds,
                _ => MIXED,
            };
            let n = left.min(ppb - next as usize);
            let dbase = db as usize * ppb;
            let mut w = dbase + next as usize;
            let end = w + n;
            // The hot loop: one sequential read of the victim's reverse map,
            // one random store into the forward map per valid page.
            while w < end {
                // Ask for the forward-map line of a page a little ahead, so
                // the random stores below find it in cache.
                if let Some(&ahead) = self.p2l.get(p + GC_AHEAD) {
                    if let Some(e) = self.l2p.get(ahead as usize) {
                        prefetch_write(e);
                    }
                }
                let lpn = self.p2l[p];
                if lpn != NIL {
                    self.p2l[w] = lpn;
                    self.l2p[lpn as usize] = w as u32;
                    if vs == MIXED {
                        self.per[usize::from(self.stream_of[lpn as usize])].gc += 1;
                    }
                    #[cfg(test)]
                    {
                        self.tags[w] = self.tags[p];
                    }
                    w += 1;
                }
                p += 1;
            }
            left -= n;
            self.fill_frontier(dest, n as u32);
        }
        if vs != MIXED {
            self.per[vs as usize].gc += u64::from(valid);
        }
        self.p2l[base..base + ppb].fill(NIL);
        self.gc_pages += u64::from(valid);
        self.victims += 1;
        self.erase(v);
        Ok(true)
    }

    /// [`Ssd::gc_one`] with the policy's GC hook: every valid page of
    /// victim `v` goes to the host frontier of the stream the hook picks.
    fn gc_placed(&mut self, v: u32, valid: u32) -> Result<bool, SimError> {
        // The stream the victim was written through (its class, for the
        // hook), not the streams of the data in it.
        let vf = self.blocks[v as usize].frontier;
        let from = (vf < self.streams).then_some(vf);
        let now = self.clock;
        let opened = self.blocks[v as usize].opened_at;
        if let Some(h) = self.gc_hook.as_mut() {
            h.0.collected(from, opened, now);
        }
        let ppb = self.ppb as usize;
        let base = v as usize * ppb;
        for p in base..base + ppb {
            let lpn = self.p2l[p];
            if lpn == NIL {
                continue;
            }
            // Host times are kept modulo 2^32: the age is exact below that.
            let age = (now as u32).wrapping_sub(self.wtime[lpn as usize]);
            let written = now.saturating_sub(u64::from(age));
            let s = match self.gc_hook.as_mut() {
                Some(h) => h.0.place_gc(from, u64::from(lpn), written, now),
                None => 0,
            }
            .min(self.streams - 1) as usize;
            if self.frontiers[s].block == NIL {
                self.open_block(s)?;
            }
            let w = self.take_page(s) as usize;
            let ds = u32::from(self.stream_of[lpn as usize]);
            let dblk = &mut self.blocks[w / ppb];
            if dblk.data_stream != ds {
                dblk.data_stream = MIXED;
            }
            self.p2l[w] = lpn;
            self.l2p[lpn as usize] = w as u32;
            self.per[usize::from(self.stream_of[lpn as usize])].gc += 1;
            #[cfg(test)]
            {
                self.tags[w] = self.tags[p];
            }
        }
        self.p2l[base..base + ppb].fill(NIL);
        self.gc_pages += u64::from(valid);
        self.victims += 1;
        self.erase(v);
        Ok(true)
    }

    fn erase(&mut self, b: u32) {
        let f = self.blocks[b as usize].frontier;
        let blk = &mut self.blocks[b as usize];
        blk.valid = 0;
        blk.state = State::Free;
        blk.frontier = NIL;
        blk.data_stream = NIL;
        blk.erases += 1;
        self.erases += 1;
        self.owner_count(f, -1);
        self.free.push(b);
    }

    /// Cost-benefit victim: the closed block maximising `(1−u)·(age+1)/(2u)`
    /// (an empty block wins at once); removed from the bucket index.
    fn pick_cost_benefit(&mut self) -> Option<(u32, u32)> {
        let ppb = f64::from(self.ppb);
        let mut best: Option<(u32, u32)> = None;
        let mut best_score = f64::NEG_INFINITY;
        for (i, b) in self.blocks.iter().enumerate() {
            if b.state != State::Closed {
                continue;
            }
            if b.valid == 0 {
                best = Some((i as u32, 0));
                break;
            }
            let u = f64::from(b.valid) / ppb;
            let age = (self.clock - b.closed_at) as f64 + 1.0;
            let score = (1.0 - u) * age / (2.0 * u);
            if score > best_score {
                best_score = score;
                best = Some((i as u32, b.valid));
            }
        }
        if let Some((b, v)) = best {
            self.buckets.remove(b, v);
        }
        best
    }

    /// Checks every internal invariant (slow: a full scan). Used by tests;
    /// returns the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let ppb = self.ppb as usize;
        for (lpn, &ppn) in self.l2p.iter().enumerate() {
            if ppn == NIL {
                continue;
            }
            match self.p2l.get(ppn as usize) {
                Some(&back) if back as usize == lpn => {}
                other => return Err(format!("l2p[{lpn}] = {ppn} but p2l = {other:?}")),
            }
        }
        let mut valid = vec![0u32; self.blocks.len()];
        let mut mapped = 0u64;
        for (ppn, &lpn) in self.p2l.iter().enumerate() {
            if lpn == NIL {
                continue;
            }
            if self.l2p.get(lpn as usize).map(|&e| e as usize) != Some(ppn) {
                return Err(format!("p2l[{ppn}] = {lpn} but l2p disagrees"));
            }
            let b = &self.blocks[ppn / ppb];
            let ds = u32::from(self.stream_of[lpn as usize]);
            if b.data_stream != MIXED && b.data_stream != ds {
                return Err(format!(
                    "page {ppn} holds stream {ds} data, its block claims only stream {}",
                    b.data_stream
                ));
            }
            valid[ppn / ppb] += 1;
            mapped += 1;
        }
        if mapped != self.valid_pages {
            return Err(format!(
                "{mapped} mapped pages, counter says {}",
                self.valid_pages
            ));
        }
        let mut in_pool = vec![false; self.blocks.len()];
        for &b in &self.free {
            match in_pool.get_mut(b as usize) {
                Some(seen) if !*seen => *seen = true,
                _ => return Err(format!("free pool holds block {b} twice or out of range")),
            }
        }
        let mut open_seen = 0usize;
        for (i, b) in self.blocks.iter().enumerate() {
            if b.valid != valid[i] {
                return Err(format!(
                    "block {i}: valid count {} but {} pages map to it",
                    b.valid, valid[i]
                ));
            }
            let in_index = self.buckets.contains(i as u32, b.valid);
            match b.state {
                State::Free => {
                    if b.valid != 0 || in_index || !in_pool[i] {
                        return Err(format!("free block {i} is inconsistent"));
                    }
                }
                State::Open => {
                    open_seen += 1;
                    let f = self.frontiers.get(b.frontier as usize);
                    let Some(f) = f.filter(|f| f.block == i as u32) else {
                        return Err(format!("open block {i} is not its frontier's block"));
                    };
                    let written = &self.p2l[i * ppb..i * ppb + ppb][f.next as usize..];
                    if in_index || written.iter().any(|&x| x != NIL) {
                        return Err(format!(
                            "open block {i}: mapped page past the write pointer"
                        ));
                    }
                }
                State::Closed => {
                    if !in_index {
                        return Err(format!("closed block {i} missing from the victim index"));
                    }
                }
            }
        }
        let open_frontiers = self.frontiers.iter().filter(|f| f.block != NIL).count();
        if open_seen != open_frontiers {
            return Err(format!(
                "{open_seen} open blocks, {open_frontiers} frontiers"
            ));
        }
        let c = self.block_counts();
        if c.free != self.free.len() as u64 || c.closed != self.buckets.len() as u64 {
            return Err(format!(
                "free pool {} / index {} disagree with block states {c:?}",
                self.free.len(),
                self.buckets.len()
            ));
        }
        if c.free + c.open + c.closed != self.blocks.len() as u64 {
            return Err("block states do not add up".into());
        }
        let owned: u64 = self
            .per
            .iter()
            .map(|p| p.blocks + p.internal_blocks)
            .sum::<u64>()
            + self.gc_stream_blocks;
        if owned != c.open + c.closed {
            return Err(format!(
                "per-stream block counts sum to {owned}, {} blocks are in use",
                c.open + c.closed
            ));
        }
        Ok(())
    }

    /// Where logical page `lpn`'s data lives, if mapped.
    pub fn residence(&self, lpn: u64) -> Option<Residence> {
        let ppn = self.lookup(lpn)?;
        let f = self.blocks[(ppn / u64::from(self.ppb)) as usize].frontier;
        Some(if f < self.streams {
            Residence::Host(f)
        } else if self.cfg.internal_streams {
            Residence::Internal(f - self.streams)
        } else {
            Residence::Gc
        })
    }
}

/// The kind of block a page lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residence {
    /// A host write block of this external stream.
    Host(StreamId),
    /// A block of this external stream's internal (GC) stream.
    Internal(StreamId),
    /// The shared GC stream (devices without internal streams).
    Gc,
}

#[cfg(test)]
impl Ssd {
    /// Host write carrying a payload tag the test can read back.
    pub(crate) fn write_tagged(
        &mut self,
        lpn: u64,
        stream: StreamId,
        tag: u64,
    ) -> Result<(), SimError> {
        self.write(lpn, stream)?;
        let ppn = self.l2p[lpn as usize];
        self.tags[ppn as usize] = tag;
        Ok(())
    }

    /// The payload tag of logical page `lpn`, if mapped.
    pub(crate) fn read_tag(&self, lpn: u64) -> Option<u64> {
        self.lookup(lpn).map(|p| self.tags[p as usize])
    }
}

#[cfg(test)]
mod tests;
