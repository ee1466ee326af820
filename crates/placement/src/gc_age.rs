//! GC copies by age into streams of their own: `pcstream`'s placement of
//! the device's garbage-collection copies on a device without internal
//! streams (simulator only, through the GC hook, as `sepbit` does; the
//! daemon cannot place a device's GC copies).
//!
//! Without internal streams a device copies a victim's valid pages back
//! into the victim's own stream, beside fresh host data: a page that
//! outlived the lifetime its stream was chosen for (the long tail of a
//! short-lived key) is copied again at each collection of that stream.
//! With this hook `pcstream` keeps the last `n` of its stream ids for GC
//! copies and gives the host data the others. A copy goes by its age `g`
//! (host pages since the host wrote it; a lower bound of its lifetime, as
//! SepBIT argues): the GC streams split ages in steps of ×[`AGE_STEP`],
//! starting at `ℓ`, the mean lifespan (host pages from opening to
//! collection) of the last [`LIFESPAN_WINDOW`] victims — the age at which
//! data is typically found valid by GC on this device. Class `i < n − 1`
//! takes ages below `ℓ · AGE_STEP^i`, the last class the rest: with three
//! GC streams, below `ℓ` (copies out of a block collected young), below
//! `8ℓ`, and older.
//!
//! The age is only a lower bound. With [`WriteCounts`] (what `pcstream`
//! uses unless `gc_age_only`) a copy goes by the larger of its age and its
//! address's own write interval ([`WriteCounts::interval`]: host pages
//! since the address was first written, per write of it, the live one
//! included): a page written once long ago and copied soon after its one
//! rewrite is still a cold page, and a page rewritten every `I` pages is
//! expected to live ≈ `I` however young its copy is. On the paper-scale
//! SQLite traces 44% of `pcstream`'s GC copies were copies of pages copied
//! before (mixed-sqlite-gcc r1, internal streams off); the interval took
//! mixed-sqlite-gcc from 1.675 to 1.626 and sqlite-tpcc from 1.361 to
//! 1.330 (mean of 3 recordings, docs/placement-log.md), about a third of what
//! placing each copy by its true remaining lifetime would give.
//!
//! A device with internal streams separates GC copies from host data by
//! itself; the simulator then leaves the hook off (`gc_streams` = 0, see
//! `PcStreamConfig::gc_streams`).

use crate::placement::{GcPlacement, StreamId};
use crate::write_count::WriteCounts;
use std::sync::{Arc, Mutex};

/// Ratio of one GC stream's age bound to the previous one's.
pub const AGE_STEP: f64 = 8.0;

/// Victims whose lifespans average into `ℓ`.
pub const LIFESPAN_WINDOW: usize = 16;

/// The GC hook: copies by age (and write interval, [`AgeClasses::with_rates`])
/// into streams `first..first + n`.
#[derive(Debug, Clone)]
pub struct AgeClasses {
    first: StreamId,
    n: u32,
    /// Lifespans of the last victims (ring).
    spans: [u64; LIFESPAN_WINDOW],
    seen: usize,
    rates: Option<Arc<Mutex<WriteCounts>>>,
}

impl AgeClasses {
    /// Copies go to streams `first..first + n` (`n` ≥ 1).
    pub fn new(first: StreamId, n: u32) -> Self {
        AgeClasses {
            first,
            n: n.max(1),
            spans: [0; LIFESPAN_WINDOW],
            seen: 0,
            rates: None,
        }
    }

    /// Classes by the larger of a copy's age and its address's write
    /// interval in `rates` (see the module docs).
    pub fn with_rates(mut self, rates: Arc<Mutex<WriteCounts>>) -> Self {
        self.rates = Some(rates);
        self
    }

    /// `ℓ`: mean lifespan of the last victims (`None` before the first).
    pub fn lifespan(&self) -> Option<f64> {
        let k = self.seen.min(LIFESPAN_WINDOW);
        (k > 0).then(|| self.spans[..k].iter().sum::<u64>() as f64 / k as f64)
    }

    /// The GC class (0 = youngest) of a copy of age `age`.
    pub fn class(&self, age: u64) -> u32 {
        let Some(l) = self.lifespan() else {
            return 0;
        };
        let mut bound = l.max(1.0);
        for i in 0..self.n - 1 {
            if (age as f64) < bound {
                return i;
            }
            bound *= AGE_STEP;
        }
        self.n - 1
    }
}

impl GcPlacement for AgeClasses {
    fn collected(&mut self, _stream: Option<StreamId>, opened: u64, now: u64) {
        self.spans[self.seen % LIFESPAN_WINDOW] = now.saturating_sub(opened);
        self.seen += 1;
    }

    fn place_gc(
        &mut self,
        _stream: Option<StreamId>,
        lpn: u64,
        written: u64,
        now: u64,
    ) -> StreamId {
        let age = now.saturating_sub(written);
        let interval = self.rates.as_ref().and_then(|r| {
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .interval(lpn, now)
        });
        self.first + self.class(interval.map_or(age, |i| i.max(age)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_step_by_eight_from_the_victims_mean_lifespan() {
        let mut h = AgeClasses::new(6, 3);
        assert_eq!(h.place_gc(Some(1), 0, 0, 10_000), 6, "no victim yet");
        for i in 0..LIFESPAN_WINDOW as u64 {
            // Lifespans 50 and 150: mean 100.
            h.collected(
                Some(1),
                1000 * i,
                1000 * i + if i % 2 == 0 { 50 } else { 150 },
            );
        }
        assert_eq!(h.lifespan(), Some(100.0));
        assert_eq!(h.place_gc(Some(1), 0, 1000, 1000 + 99), 6);
        assert_eq!(h.place_gc(Some(1), 0, 1000, 1000 + 100), 7);
        assert_eq!(h.place_gc(Some(1), 0, 1000, 1000 + 799), 7);
        assert_eq!(h.place_gc(None, 0, 1000, 1000 + 800), 8);
        assert_eq!(h.place_gc(None, 0, 0, u64::MAX), 8);
        // Only the last sixteen victims count.
        for i in 0..LIFESPAN_WINDOW as u64 {
            h.collected(Some(2), i, i + 10);
        }
        assert_eq!(h.lifespan(), Some(10.0));
        assert_eq!(AgeClasses::new(3, 1).class(1 << 40), 0);
    }

    /// A copy goes by the larger of its age and its address's write
    /// interval: a young copy of a page rewritten rarely since it was first
    /// written is old; an old copy of a busy page stays old (the age is a
    /// lower bound); an address never written goes by its age.
    #[test]
    fn the_write_interval_raises_a_copys_class() {
        let rates = Arc::new(Mutex::new(WriteCounts::default()));
        let mut h = AgeClasses::new(6, 3).with_rates(Arc::clone(&rates));
        for i in 0..LIFESPAN_WINDOW as u64 {
            h.collected(Some(1), 1000 * i, 1000 * i + 100);
        }
        {
            let mut r = rates.lock().unwrap();
            // Page 7: written once at 0. Page 9: twenty times from 10_000.
            r.bump(7, 1, 0);
            for t in 0..20 {
                r.bump(9, 1, 10_000 + 50 * t);
            }
        }
        assert_eq!(rates.lock().unwrap().interval(7, 20_000), Some(20_000));
        assert_eq!(rates.lock().unwrap().interval(9, 20_000), Some(500));
        assert_eq!(rates.lock().unwrap().interval(8, 20_000), None);
        // Age 50 alone: the youngest class; page 7's interval: the oldest.
        assert_eq!(h.place_gc(Some(1), 8, 19_950, 20_000), 6);
        assert_eq!(h.place_gc(Some(1), 7, 19_950, 20_000), 8);
        // Page 9: interval 500 (< 8 × 100): the middle class, at age 50
        // and at age 700; at age 20_000 the age wins.
        assert_eq!(h.place_gc(Some(1), 9, 19_950, 20_000), 7);
        assert_eq!(h.place_gc(Some(1), 9, 19_300, 20_000), 7);
        assert_eq!(h.place_gc(Some(1), 9, 0, 20_000), 8);
    }
}
