//! The lifetime manager: measures how long the data of each PC signature lives.
//!
//! It owns two tables, as in the paper (§5.1):
//!
//! * the **live-data table**, keyed by `(space, page)` → `(written at,
//!   signature, extent)`: segments of pages within one chunk (below). A
//!   *space* is a file `(dev, ino)` when the write names one, or the
//!   device's LBA space ([`LBA_SPACE`]) for block-level writes. A chunk is
//!   `chunk_pages` pages (1 = 4 KiB, exact; 256 = 1 MiB, the paper's choice
//!   and the default). Memory is bounded by `max_entries` with
//!   least-recently-used eviction (an evicted segment's life is simply not
//!   measured);
//! * the **signature table** (the paper's PC attribute table), signature →
//!   [`SigStats`]: pages written, deaths seen, and the lifetime estimate.
//!
//! The clock is logical: 4 KiB pages written (the caller passes it in, the
//! daemon counts pages of all clients, the simulator counts host pages).
//! A *death* is an overwrite, a TRIM/punch, a truncate or an unlink of live
//! pages; its lifetime is `now − written at`, attributed to the signature that
//! wrote those pages, weighted by the pages that died.
//!
//! Coarse chunks: the paper treats any write into a live 1 MiB chunk as an
//! update and re-stamps the chunk, which makes appends look like deaths of
//! a few pages, credits a chunk's death to one signature whatever wrote it,
//! and makes a file rewritten piece by piece look like one death and many
//! of age ≈ 0. pcstream keeps *segments* instead: runs of pages within one
//! chunk written by one signature, each with its birth. A write ends the
//! lives of exactly the pages it covers (splitting segments as needed) and
//! adds its pages as a new segment or, when it overwrote nothing (an
//! append), extends the segment of the same signature that ends where it
//! starts in the same chunk (the one approximation left: appended pages take
//! that segment's older birth).
//! So a chunk costs one entry when one code path fills it, and one per run
//! of another code path's pages otherwise; at `chunk_pages = 1` everything
//! is exact.
//!
//! Lifetime estimate per signature, on `log2(lifetime in pages)`: an
//! exponentially weighted moving average whose weight is
//! `ewma_alpha_per_mib` per MiB (256 pages) of dead data, so the estimate
//! does not depend on the chunk size, bias-corrected so that a young
//! signature's estimate is the mean of its deaths rather than its first
//! death ([`SigStats::ewma_weight`]); plus the page-weighted mean and variance
//! (Welford) and a histogram of whole-log2 buckets for reports.

use std::collections::{BTreeMap, HashMap};

mod check;
mod live;
pub use check::MAX_COUNT;

/// A file identity `(dev, ino)`, or [`LBA_SPACE`].
pub type SpaceKey = (u64, u64);

/// The space of block-level (LBA-addressed) writes and TRIMs.
pub const LBA_SPACE: SpaceKey = (u64::MAX, u64::MAX);

/// Page count meaning "to the end of the file" (truncate, unlink).
pub const TO_END: u64 = u64::MAX;

/// Histogram buckets: `log2(lifetime)` in `[i, i+1)` goes to bucket `i`.
pub const HIST_BUCKETS: usize = 48;

fn one() -> f64 {
    1.0
}

/// Pages per MiB (the unit of the EWMA weight).
const PAGES_PER_MIB: f64 = 256.0;

/// Approximate bytes one live-data entry costs (slot + index node share);
/// used to turn a memory budget into `max_entries`.
pub const ENTRY_BYTES: usize = 96;

/// Tunables of the lifetime manager.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LifetimeConfig {
    /// Pages per live-table chunk (1 = 4 KiB exact … 256 = 1 MiB). Default 256.
    pub chunk_pages: u32,
    /// Live-table entries kept before least-recently-used eviction.
    /// Default: 64 MiB / [`ENTRY_BYTES`] (the dissertation's 64 MiB cap).
    pub max_entries: usize,
    /// EWMA weight of one MiB of dead data in the log2-lifetime estimate. Default 0.125.
    pub ewma_alpha_per_mib: f64,
}

impl Default for LifetimeConfig {
    fn default() -> Self {
        LifetimeConfig {
            chunk_pages: 256,
            max_entries: (64 << 20) / ENTRY_BYTES,
            ewma_alpha_per_mib: 0.125,
        }
    }
}

/// What is known about one signature's data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SigStats {
    /// Pages written by this signature.
    pub written_pages: u64,
    /// Logical time of its first write.
    pub first_write: u64,
    /// Logical time of its latest write.
    pub last_write: u64,
    /// Deaths observed (chunk-level events).
    pub deaths: u64,
    /// Pages whose death was observed.
    pub dead_pages: u64,
    /// EWMA of log2(lifetime in pages), bias-corrected (see
    /// [`SigStats::ewma_weight`]); meaningful once `deaths > 0`.
    pub ewma_log2: f64,
    /// Total weight behind `ewma_log2`: `1 − (1 − α)^(dead MiB)`. The
    /// estimate is the weighted mean of the deaths seen with weights decaying
    /// by `α` per MiB of younger deaths, so a young signature's estimate is
    /// the plain mean of its deaths, not its first death carried for MiB
    /// (state saved before this field existed loads as fully weighted).
    #[serde(default = "one")]
    pub ewma_weight: f64,
    /// Page-weighted mean of log2(lifetime).
    pub mean_log2: f64,
    /// Page-weighted sum of squared deviations (Welford); variance = m2 / dead_pages.
    pub m2_log2: f64,
    /// Dead pages per whole-log2 lifetime bucket.
    pub hist: Vec<u64>,
    /// Pages written that left the live-data table without a death being
    /// heard: evicted, or written before the table was loaded (a saved
    /// table's pages are not in the new live table). With them,
    /// [`SigStats::live_pages`] is what the live table holds. Not saved.
    #[serde(skip)]
    pub untracked_pages: u64,
}

impl SigStats {
    fn new(now: u64) -> Self {
        SigStats {
            written_pages: 0,
            first_write: now,
            last_write: now,
            deaths: 0,
            dead_pages: 0,
            ewma_log2: 0.0,
            ewma_weight: 0.0,
            mean_log2: 0.0,
            m2_log2: 0.0,
            hist: vec![0; HIST_BUCKETS],
            untracked_pages: 0,
        }
    }

    /// The current lifetime estimate (log2 pages), `None` before any death.
    pub fn estimate_log2(&self) -> Option<f64> {
        (self.deaths > 0).then_some(self.ewma_log2)
    }

    /// Page-weighted variance of log2(lifetime), `None` before any death.
    pub fn variance_log2(&self) -> Option<f64> {
        (self.dead_pages > 0).then(|| self.m2_log2 / self.dead_pages as f64)
    }

    fn record_death(&mut self, lifetime: u64, pages: u64, alpha_per_mib: f64) {
        if pages == 0 {
            return;
        }
        let x = (lifetime.max(1) as f64).log2();
        let a = 1.0 - (1.0 - alpha_per_mib.clamp(0.0, 1.0)).powf(pages as f64 / PAGES_PER_MIB);
        // Bias-corrected EWMA: the old estimate keeps weight `(1 − a) · w`,
        // the new deaths get `a`, renormalised (w = 0 before any death).
        let prior = if self.deaths == 0 {
            0.0
        } else {
            self.ewma_weight
        };
        let kept = (1.0 - a) * prior;
        let w = kept + a;
        self.ewma_log2 = if w > 0.0 {
            (kept * self.ewma_log2 + a * x) / w
        } else {
            x
        };
        self.ewma_weight = w;
        // Weighted Welford.
        let w_old = self.dead_pages as f64;
        let w_new = w_old + pages as f64;
        let delta = x - self.mean_log2;
        self.mean_log2 += delta * pages as f64 / w_new;
        self.m2_log2 += delta * (x - self.mean_log2) * pages as f64;
        self.deaths += 1;
        self.dead_pages += pages;
        let b = (x as usize).min(HIST_BUCKETS - 1);
        self.hist[b] += pages;
    }
}

/// Counters of the lifetime manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifetimeCounters {
    /// Write events seen.
    pub writes: u64,
    /// Deaths attributed to a signature.
    pub deaths: u64,
    /// Live-table entries evicted by the memory cap (chunks of a write too
    /// large for the table count as evicted at once).
    pub evictions: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Slot {
    space: SpaceKey,
    /// First page of the segment (absolute, within `space`).
    start: u64,
    /// One past its last page; `start..end` lies within one chunk.
    end: u64,
    born: u64,
    sig: u64,
    prev: u32,
    next: u32,
}

/// The live-data table plus the signature table. See the module docs.
#[derive(Debug)]
pub struct LifetimeManager {
    cfg: LifetimeConfig,
    /// Per space: segment start page → slot index (ordered, so range
    /// invalidation is cheap and deterministic).
    index: HashMap<SpaceKey, BTreeMap<u64, u32>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// LRU list: head = most recently used.
    head: u32,
    tail: u32,
    live: usize,
    sigs: HashMap<u64, SigStats>,
    counters: LifetimeCounters,
}

impl LifetimeManager {
    /// An empty manager. `chunk_pages` and `max_entries` are raised to at least 1.
    pub fn new(mut cfg: LifetimeConfig) -> Self {
        cfg.chunk_pages = cfg.chunk_pages.max(1);
        cfg.max_entries = cfg.max_entries.clamp(1, (NIL - 1) as usize);
        LifetimeManager {
            cfg,
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            live: 0,
            sigs: HashMap::new(),
            counters: LifetimeCounters::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &LifetimeConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn counters(&self) -> LifetimeCounters {
        self.counters
    }

    /// Live-table entries currently held.
    pub fn live_entries(&self) -> usize {
        self.live
    }

    /// Statistics of one signature.
    pub fn sig(&self, sig: u64) -> Option<&SigStats> {
        self.sigs.get(&sig)
    }

    /// All signatures with their statistics, sorted by signature.
    pub fn sigs_sorted(&self) -> Vec<(u64, &SigStats)> {
        let mut v: Vec<_> = self.sigs.iter().map(|(k, s)| (*k, s)).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// Number of signatures known.
    pub fn sig_count(&self) -> usize {
        self.sigs.len()
    }

    /// Replaces the signature table (e.g. reloaded from the daemon's state
    /// file); live data is untouched.
    pub fn load_sigs(&mut self, sigs: impl IntoIterator<Item = (u64, SigStats)>) {
        for (k, mut s) in sigs {
            s.hist.resize(HIST_BUCKETS, 0);
            s.untracked_pages = s.written_pages.saturating_sub(s.dead_pages);
            self.sigs.insert(k, s);
        }
    }

    /// Birth time of the live page `page` of `space`, if the table holds it
    /// (what an overwrite of that page would end: its previous lifetime is
    /// `now − birth`).
    pub fn born_at(&self, space: SpaceKey, page: u64) -> Option<u64> {
        let (_, &i) = self.index.get(&space)?.range(..=page).next_back()?;
        let s = &self.slots[i as usize];
        (s.end > page).then_some(s.born)
    }

    /// `pages` pages starting at page `first` of `space` were written by
    /// `sig` (0 = unknown signature: overwrites still end lives, but the new
    /// data is attributed to nobody) at logical time `now`.
    pub fn write(&mut self, space: SpaceKey, first: u64, pages: u64, sig: u64, now: u64) {
        // Pages past the end of the 64-bit page space are dropped.
        let end = first.saturating_add(pages);
        if end <= first {
            return;
        }
        let pages = end - first;
        self.counters.writes += 1;
        if sig != 0 {
            let s = self.sigs.entry(sig).or_insert_with(|| SigStats::new(now));
            s.written_pages += pages;
            s.last_write = now;
        }
        // Fast path: the write covers exactly one segment (a page or run
        // rewritten in place): the same as ending it and starting a new
        // one, without touching the index.
        if let Some(i) = self.index.get(&space).and_then(|m| m.get(&first)).copied() {
            let s = &mut self.slots[i as usize];
            if s.end == end {
                let (old_sig, born) = (s.sig, s.born);
                s.born = now;
                s.sig = sig;
                self.touch(i);
                self.death(old_sig, now.saturating_sub(born), pages);
                return;
            }
        }
        // The overwritten lives end, whatever signature and time they have.
        // An overwrite starts new segments; only a write onto free pages
        // (an append) may extend its neighbour.
        let append = self.end_lives(space, first, pages, now) == 0;
        let cp = u64::from(self.cfg.chunk_pages);
        let mut p = first;
        let chunks = (end - 1) / cp - first / cp + 1;
        if chunks > self.cfg.max_entries as u64 {
            // Only the last `max_entries` chunks could stay in the table;
            // the skipped ones count as evicted at once.
            self.counters.evictions += chunks - self.cfg.max_entries as u64;
            p = p.max(((end - 1) / cp + 1 - self.cfg.max_entries as u64) * cp);
            self.untracked(sig, p - first);
        }
        while p < end {
            let q = (p / cp).saturating_add(1).saturating_mul(cp).min(end);
            self.add_segment(space, p, q, sig, now, append);
            p = q;
        }
    }

    /// The last live page of `first..first+pages` of `space` in the
    /// table, if any.
    pub fn last_live(&self, space: SpaceKey, first: u64, pages: u64) -> Option<u64> {
        let (a, b) = (first, first.saturating_add(pages));
        // Segments do not overlap: the last one starting before `b` holds
        // the last live page of the range, or none does.
        let (_, &i) = self.index.get(&space)?.range(..b).next_back()?;
        let end = self.slots[i as usize].end;
        (end > a).then(|| end.min(b) - 1)
    }

    /// `pages` one-page writes by `sig` of the consecutive pages from
    /// `first`, none of them live ([`LifetimeManager::last_live`]) and all
    /// within one chunk, the first at logical time `born` and the last at
    /// `last`: the same table, statistics and counters as `pages` calls of
    /// [`LifetimeManager::write`] with one page each (the first page starts
    /// or extends a segment, the others extend it), in one step.
    pub fn append_pages(
        &mut self,
        space: SpaceKey,
        first: u64,
        pages: u64,
        sig: u64,
        born: u64,
        last: u64,
    ) {
        let cp = u64::from(self.cfg.chunk_pages);
        debug_assert!(pages > 0 && first / cp == (first + pages - 1) / cp);
        debug_assert!(self.last_live(space, first, pages).is_none());
        self.counters.writes += pages;
        if sig != 0 {
            let s = self.sigs.entry(sig).or_insert_with(|| SigStats::new(born));
            s.written_pages += pages;
            s.last_write = last;
        }
        self.add_segment(space, first, first + pages, sig, born, true);
    }

    /// Records `[a, b)` (within one chunk, no live page in it) as written
    /// by `sig` at `now`: with `append`, a segment of the same signature
    /// ending at `a` in the same chunk is extended (keeping its birth, the
    /// coarse-chunk approximation); anything else is a new segment.
    fn add_segment(&mut self, space: SpaceKey, a: u64, b: u64, sig: u64, now: u64, append: bool) {
        let cp = u64::from(self.cfg.chunk_pages);
        let prev = self
            .index
            .get(&space)
            .filter(|_| append)
            .and_then(|m| m.range(..a).next_back())
            .map(|(_, &i)| i)
            .filter(|&i| {
                let s = &self.slots[i as usize];
                s.end == a && s.sig == sig && s.start / cp == a / cp
            });
        if let Some(i) = prev {
            self.slots[i as usize].end = b;
            self.touch(i);
        } else {
            self.insert_slot(space, a, b, now, sig);
        }
    }

    fn insert_slot(&mut self, space: SpaceKey, start: u64, end: u64, born: u64, sig: u64) {
        if self.live >= self.cfg.max_entries {
            self.evict_lru();
        }
        let slot = Slot {
            space,
            start,
            end,
            born,
            sig,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.entry(space).or_default().insert(start, i);
        self.live += 1;
        self.push_front(i);
    }

    /// Pages `first..first+pages` of `space` stopped being live at `now`
    /// (TRIM, punch-hole, truncate with `pages = TO_END`, unlink with
    /// `first = 0, pages = TO_END`). Each live page's death goes to the
    /// segment that holds it: its own signature and birth.
    pub fn invalidate(&mut self, space: SpaceKey, first: u64, pages: u64, now: u64) {
        self.end_lives(space, first, pages, now);
    }

    /// [`LifetimeManager::invalidate`]; returns the live pages it ended.
    fn end_lives(&mut self, space: SpaceKey, first: u64, pages: u64, now: u64) -> u64 {
        if pages == 0 {
            return 0;
        }
        let (a, b) = (first, first.saturating_add(pages));
        let Some(map) = self.index.get(&space) else {
            return 0;
        };
        // Segments do not overlap: the one starting before `a` may reach
        // into the range, then every one starting inside it.
        let before = map
            .range(..a)
            .next_back()
            .map(|(_, &i)| i)
            .filter(|&i| self.slots[i as usize].end > a);
        let hits: Vec<u32> = before
            .into_iter()
            .chain(map.range(a..b).map(|(_, &i)| i))
            .collect();
        let mut deaths = Vec::with_capacity(hits.len());
        for i in hits {
            let s = self.slots[i as usize].clone();
            let overlap = b.min(s.end) - a.max(s.start);
            deaths.push((s.sig, now.saturating_sub(s.born), overlap));
            match (a <= s.start, b >= s.end) {
                (true, true) => self.remove_slot(i),
                (true, false) => {
                    // The head died: the rest keeps its birth under a new key.
                    self.rekey(i, b);
                }
                (false, true) => self.slots[i as usize].end = a,
                (false, false) => {
                    // A hole inside: the tail becomes a segment of its own.
                    self.slots[i as usize].end = a;
                    self.insert_slot(space, b, s.end, s.born, s.sig);
                }
            }
        }
        let mut ended = 0;
        for (sig, life, pages) in deaths {
            ended += pages;
            self.death(sig, life, pages);
        }
        ended
    }

    fn rekey(&mut self, i: u32, start: u64) {
        let s = &mut self.slots[i as usize];
        let (space, old) = (s.space, s.start);
        s.start = start;
        if let Some(m) = self.index.get_mut(&space) {
            m.remove(&old);
            m.insert(start, i);
        }
    }

    fn remove_slot(&mut self, i: u32) {
        let (space, start) = (self.slots[i as usize].space, self.slots[i as usize].start);
        if let Some(m) = self.index.get_mut(&space) {
            m.remove(&start);
            if m.is_empty() {
                self.index.remove(&space);
            }
        }
        self.unlink_slot(i);
        self.free.push(i);
        self.live -= 1;
    }

    /// `pages` of `sig`'s live pages leave the table unheard (evicted).
    fn untracked(&mut self, sig: u64, pages: u64) {
        if let Some(s) = self.sigs.get_mut(&sig) {
            s.untracked_pages += pages;
        }
    }

    fn death(&mut self, sig: u64, lifetime: u64, pages: u64) {
        if sig == 0 {
            return;
        }
        let alpha = self.cfg.ewma_alpha_per_mib;
        if let Some(s) = self.sigs.get_mut(&sig) {
            s.record_death(lifetime, pages, alpha);
            self.counters.deaths += 1;
        }
    }

    fn evict_lru(&mut self) {
        let i = self.tail;
        if i == NIL {
            return;
        }
        let s = &self.slots[i as usize];
        self.untracked(s.sig, s.end - s.start);
        self.remove_slot(i);
        self.counters.evictions += 1;
    }

    fn unlink_slot(&mut self, i: u32) {
        let (p, n) = (self.slots[i as usize].prev, self.slots[i as usize].next);
        if p == NIL {
            self.head = n;
        } else {
            self.slots[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.slots[n as usize].prev = p;
        }
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = NIL;
    }

    fn push_front(&mut self, i: u32) {
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink_slot(i);
            self.push_front(i);
        }
    }
}

#[cfg(test)]
mod tests;
