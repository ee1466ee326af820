//! SepBIT (Wang et al., FAST'22, "Separating Data via Block Invalidation
//! Time Inference"): the strongest LBA-only automatic placement we compare
//! against, beside AutoStream.
//!
//! SepBIT infers when a block will be invalidated from what it can see:
//!
//! * **User writes** (classes 1–2). A write that overwrites a block whose
//!   lifespan `v` (host pages written between that block's write and now)
//!   is below `ℓ` goes to class 1 (short-lived: a block updated soon tends
//!   to be updated soon again); every other user write — including the
//!   first write of an address, which invalidates nothing — goes to class 2.
//! * **`ℓ`**: the average lifespan of the last [`SEGMENTS_AVERAGED`] class-1
//!   segments (erase blocks) the device collected, a segment's lifespan being
//!   host pages written from its opening to its collection; `∞` until the
//!   first class-1 segment is collected (every update is then "short").
//! * **GC writes** (classes 3–6). A block copied out of a class-1 segment
//!   goes to class 3; any other by its age `g` (host pages since its last
//!   user write): `g < 4ℓ` → class 4, `< 16ℓ` → class 5, else class 6.
//!   Old blocks are old because nothing overwrote them: they are expected to
//!   live longest (the paper's "age is a lower bound of the residual
//!   lifetime" reasoning).
//!
//! Classes are streams: class `c` uses stream `c` when the device has at
//! least 7 stream ids; with fewer, classes are folded in order onto the data
//! streams (`1 + (c−1)·m/6` for `m` data streams). Stream 0 is never used
//! unless the device has only one stream.
//!
//! GC placement goes through the simulator's GC hook
//! ([`crate::placement::GcPlacement`]): [`Placement::gc_placement`] hands the
//! device a companion that shares `ℓ` with the policy (an atomic, so the
//! policy stays `Send`). Without the hook (a real device) only the user-write
//! half applies. The per-address write times are a flat vector for the
//! device's LBA range (8 bytes per page, grown on demand) with a map for
//! addresses beyond 2^28 pages, so a bogus LBA cannot allocate unbounded memory.

use crate::placement::{GcPlacement, Placement, StreamId, WriteCtx};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Class-1 segments whose lifespans are averaged into `ℓ` (the paper's 16).
pub const SEGMENTS_AVERAGED: usize = 16;

/// Classes: 2 user + 4 GC.
pub const CLASSES: u32 = 6;

/// Largest page address kept in the flat vector (1 TiB of 4 KiB pages).
const FLAT_PAGES: u64 = 1 << 28;

/// "No time recorded" in the flat vector.
const NONE: u64 = u64::MAX;

/// `ℓ` as shared between the policy and its GC companion (`u64::MAX` = ∞).
#[derive(Debug)]
struct Shared {
    ell: AtomicU64,
}

/// The stream for SepBIT class `class` (1..=6) on a device with `streams`
/// stream ids.
pub fn class_stream(class: u32, streams: u32) -> StreamId {
    let data = streams.saturating_sub(1);
    if data == 0 {
        return 0;
    }
    let c = class.clamp(1, CLASSES);
    if data >= CLASSES {
        c
    } else {
        1 + (c - 1) * data / CLASSES
    }
}

/// The `sepbit` policy (user-write half). See the module docs.
#[derive(Debug)]
pub struct SepBit {
    streams: u32,
    shared: Arc<Shared>,
    /// Host time of the last write of each page below [`FLAT_PAGES`].
    flat: Vec<u64>,
    far: HashMap<u64, u64>,
}

impl SepBit {
    /// `sepbit` for a device with `streams` stream ids.
    pub fn new(streams: u32) -> Self {
        SepBit {
            streams: streams.max(1),
            shared: Arc::new(Shared {
                ell: AtomicU64::new(u64::MAX),
            }),
            flat: Vec::new(),
            far: HashMap::new(),
        }
    }

    /// The current `ℓ` (host pages), `None` while it is still infinite.
    pub fn ell(&self) -> Option<u64> {
        match self.shared.ell.load(Ordering::Relaxed) {
            u64::MAX => None,
            v => Some(v),
        }
    }

    /// Records that `lpn` was written at `now`; returns its previous write time.
    fn swap_time(&mut self, lpn: u64, now: u64) -> Option<u64> {
        if lpn < FLAT_PAGES {
            let i = lpn as usize;
            if i >= self.flat.len() {
                let n = (i + 1).next_power_of_two().min(FLAT_PAGES as usize);
                self.flat.resize(n, NONE);
            }
            let old = std::mem::replace(&mut self.flat[i], now);
            (old != NONE).then_some(old)
        } else {
            self.far.insert(lpn, now)
        }
    }

    fn forget(&mut self, lpn: u64) {
        if lpn < FLAT_PAGES {
            if let Some(t) = self.flat.get_mut(lpn as usize) {
                *t = NONE;
            }
        } else {
            self.far.remove(&lpn);
        }
    }

    /// The class (1 or 2) of a user write invalidating a block of lifespan
    /// `v` (`None`: a first write), given `ℓ`.
    pub fn user_class(v: Option<u64>, ell: Option<u64>) -> u32 {
        match (v, ell) {
            (Some(v), Some(l)) if v < l => 1,
            (Some(_), None) => 1,
            _ => 2,
        }
    }

    /// The class (3..=6) of a GC write of a block of age `g` copied out of
    /// a segment of class `from` (`None`: unknown or mixed), given `ℓ`.
    pub fn gc_class(from: Option<u32>, g: u64, ell: Option<u64>) -> u32 {
        if from == Some(1) {
            return 3;
        }
        let Some(l) = ell else {
            // ℓ unknown: no age is "young" yet; keep GC data together.
            return 4;
        };
        if g < l.saturating_mul(4) {
            4
        } else if g < l.saturating_mul(16) {
            5
        } else {
            6
        }
    }
}

impl Placement for SepBit {
    fn name(&self) -> &str {
        "sepbit"
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let ell = self.ell();
        let mut class = 2;
        // Multi-page writes: the first page decides (the simulator places
        // page by page anyway); every page's time is recorded.
        for i in 0..u64::from(w.pages.max(1)) {
            let old = self.swap_time(w.lpn.saturating_add(i), w.time);
            if i == 0 {
                class = Self::user_class(old.map(|t| w.time.saturating_sub(t)), ell);
            }
        }
        class_stream(class, self.streams)
    }

    fn trim(&mut self, lpn: u64, pages: u32, _time: u64) {
        for i in 0..u64::from(pages) {
            self.forget(lpn.saturating_add(i));
        }
    }

    fn gc_placement(&mut self) -> Option<Box<dyn GcPlacement + Send>> {
        Some(Box::new(SepBitGc {
            streams: self.streams,
            shared: Arc::clone(&self.shared),
            recent: [0; SEGMENTS_AVERAGED],
            seen: 0,
        }))
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("ell_pages", self.ell().unwrap_or(0))]
    }
}

/// SepBIT's GC half: places GC copies by class and age, and measures `ℓ`
/// from the class-1 segments collected.
#[derive(Debug)]
pub struct SepBitGc {
    streams: u32,
    shared: Arc<Shared>,
    recent: [u64; SEGMENTS_AVERAGED],
    seen: usize,
}

impl SepBitGc {
    /// The class a stream id holds (inverse of [`class_stream`] for the
    /// classes that have a stream of their own; `None` if shared or 0).
    fn class_of(&self, stream: StreamId) -> Option<u32> {
        (1..=CLASSES).find(|&c| {
            class_stream(c, self.streams) == stream
                && (1..=CLASSES)
                    .filter(|&d| class_stream(d, self.streams) == stream)
                    .count()
                    == 1
        })
    }
}

impl GcPlacement for SepBitGc {
    fn collected(&mut self, stream: Option<StreamId>, opened: u64, now: u64) {
        if stream.and_then(|s| self.class_of(s)) != Some(1) {
            return;
        }
        self.recent[self.seen % SEGMENTS_AVERAGED] = now.saturating_sub(opened);
        self.seen += 1;
        let n = self.seen.min(SEGMENTS_AVERAGED);
        let avg = self.recent[..n].iter().sum::<u64>() / n as u64;
        self.shared.ell.store(avg.max(1), Ordering::Relaxed);
    }

    fn place_gc(
        &mut self,
        stream: Option<StreamId>,
        _lpn: u64,
        written: u64,
        now: u64,
    ) -> StreamId {
        let ell = match self.shared.ell.load(Ordering::Relaxed) {
            u64::MAX => None,
            v => Some(v),
        };
        let from = stream.and_then(|s| self.class_of(s));
        let class = SepBit::gc_class(from, now.saturating_sub(written), ell);
        class_stream(class, self.streams)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(time: u64, lpn: u64) -> WriteCtx {
        WriteCtx {
            time,
            lpn,
            pages: 1,
            ..Default::default()
        }
    }

    #[test]
    fn first_writes_are_long_and_quick_overwrites_are_short() {
        let mut p = SepBit::new(9);
        let mut g = p.gc_placement().unwrap();
        // A class-1 segment opened at 0 and collected at 1000: ℓ = 1000.
        g.collected(Some(1), 0, 1000);
        assert_eq!(p.ell(), Some(1000));
        // New data invalidates nothing: class 2.
        assert_eq!(p.place(&w(1000, 7)), 2);
        // Overwritten 10 pages later (lifespan 10 < ℓ): class 1.
        assert_eq!(p.place(&w(1010, 7)), 1);
        // Overwritten 5000 pages after its last write (≥ ℓ): class 2.
        assert_eq!(p.place(&w(6010, 7)), 2);
        // A TRIM forgets the block: the next write is a first write.
        p.trim(7, 1, 6011);
        assert_eq!(p.place(&w(6012, 7)), 2);
    }

    #[test]
    fn before_any_collection_every_update_is_short() {
        let mut p = SepBit::new(9);
        assert_eq!(p.ell(), None);
        assert_eq!(p.place(&w(0, 1)), 2);
        assert_eq!(p.place(&w(1_000_000, 1)), 1);
    }

    #[test]
    fn gc_copies_go_by_origin_and_age() {
        let mut p = SepBit::new(9);
        let mut g = p.gc_placement().unwrap();
        g.collected(Some(1), 0, 100);
        assert_eq!(p.ell(), Some(100));
        // Out of a class-1 segment: class 3, whatever the age.
        assert_eq!(g.place_gc(Some(1), 0, 0, 10_000), 3);
        // Out of class 2: young → 4, older → 5, old → 6.
        assert_eq!(g.place_gc(Some(2), 0, 9_950, 10_000), 4);
        assert_eq!(g.place_gc(Some(2), 0, 9_000, 10_000), 5);
        assert_eq!(g.place_gc(Some(2), 0, 0, 10_000), 6);
        // Re-collected GC data (class 6) stays by age.
        assert_eq!(g.place_gc(Some(6), 0, 0, 10_000), 6);
        assert_eq!(g.place_gc(None, 0, 9_990, 10_000), 4);
    }

    #[test]
    fn ell_is_the_mean_of_the_last_sixteen_class1_segments() {
        let mut p = SepBit::new(9);
        let mut g = p.gc_placement().unwrap();
        // Other classes do not move ℓ.
        g.collected(Some(2), 0, 5);
        g.collected(Some(4), 0, 5);
        assert_eq!(p.ell(), None);
        for i in 0..16 {
            g.collected(Some(1), 0, 1000 + i);
        }
        assert_eq!(p.ell(), Some(1007));
        // Sixteen more, of lifespan 10: the old ones are forgotten.
        for _ in 0..16 {
            g.collected(Some(1), 90, 100);
        }
        assert_eq!(p.ell(), Some(10));
    }

    #[test]
    fn classes_fold_onto_small_devices_in_order() {
        assert_eq!(
            (1..=6).map(|c| class_stream(c, 9)).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(
            (1..=6).map(|c| class_stream(c, 4)).collect::<Vec<_>>(),
            [1, 1, 2, 2, 3, 3]
        );
        assert_eq!(class_stream(3, 1), 0);
        let mut p = SepBit::new(1);
        assert_eq!(p.place(&w(0, 1)), 0);
    }

    #[test]
    fn bogus_addresses_do_not_allocate_the_address_space() {
        let mut p = SepBit::new(9);
        p.place(&w(0, u64::MAX - 1));
        p.place(&w(1, u64::MAX - 1));
        assert!(p.flat.is_empty());
        assert_eq!(p.far.len(), 1);
    }
}
