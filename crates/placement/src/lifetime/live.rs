//! A signature's live pages, and the lifetime they imply by Little's law:
//! the estimate of a signature most of whose data has not died yet, which
//! the deaths heard so far cannot give (they are its shortest lives).
//!
//! The lifetime manager hears a death when data is overwritten, trimmed or
//! unlinked, so a signature's EWMA ([`SigStats::estimate_log2`]) is the
//! mean of the lives that *ended*. Where most of what a signature writes
//! stays (a database's pages, most rewritten rarely and a few often), the
//! ended lives are the few short ones and the estimate is biased short by
//! as much as the data that stays is long-lived: survivor bias, the same
//! censoring the mapper's never-died estimate answers with the age of the
//! first write. Little's law gives the mean time a page stays without
//! waiting for it to die: pages live now = write rate × mean lifetime, so
//! the mean lifetime is at least `live pages / (written pages / age)`
//! (equal in a steady state; data that will die later only adds to it).
//! For a signature none of whose data died, that is its age: the
//! never-died estimate is the special case.

use super::SigStats;

impl SigStats {
    /// Pages this signature wrote that the live-data table holds now:
    /// written, neither dead nor evicted (nor written before the table
    /// was loaded).
    pub fn live_pages(&self) -> u64 {
        self.written_pages
            .saturating_sub(self.dead_pages)
            .saturating_sub(self.untracked_pages)
    }

    /// Little's law's lifetime at logical time `now` (log2 pages):
    /// `log2(live pages × age / written pages)`, the age counted from the
    /// first write; `None` with nothing written or nothing live. A lower
    /// bound of the mean lifetime where the data written is still dying
    /// (see the module docs).
    pub fn little_log2(&self, now: u64) -> Option<f64> {
        let live = self.live_pages();
        let age = now.saturating_sub(self.first_write);
        (live > 0 && age > 0 && self.written_pages > 0).then(|| {
            (live as f64 * age as f64 / self.written_pages as f64)
                .max(1.0)
                .log2()
        })
    }

    /// Share of the pages written whose death was heard (`0.0` with
    /// nothing written).
    pub fn dead_share(&self) -> f64 {
        if self.written_pages == 0 {
            0.0
        } else {
            self.dead_pages as f64 / self.written_pages as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lifetime::{LifetimeConfig, LifetimeManager, LBA_SPACE};

    fn manager(max_entries: usize) -> LifetimeManager {
        LifetimeManager::new(LifetimeConfig {
            chunk_pages: 1,
            max_entries,
            ewma_alpha_per_mib: 1.0,
        })
    }

    #[test]
    fn live_pages_are_written_minus_dead_minus_evicted() {
        let mut m = manager(1 << 20);
        m.write(LBA_SPACE, 0, 100, 1, 0);
        m.write(LBA_SPACE, 0, 30, 2, 100);
        m.invalidate(LBA_SPACE, 90, 20, 130);
        let s = m.sig(1).unwrap();
        assert_eq!(
            (s.written_pages, s.dead_pages, s.live_pages()),
            (100, 40, 60)
        );
        assert_eq!(m.sig(2).unwrap().live_pages(), 30);
        // A table of 8 segments: the oldest are evicted unheard.
        let mut m = manager(8);
        for p in 0..20 {
            m.write(LBA_SPACE, p * 2, 1, 7, p);
        }
        let s = m.sig(7).unwrap();
        assert_eq!(
            (s.dead_pages, s.untracked_pages, s.live_pages()),
            (0, 12, 8)
        );
        // A loaded table's pages are not in the new live table.
        let saved = m.sigs_sorted().into_iter().map(|(k, s)| (k, s.clone()));
        let mut fresh = manager(8);
        fresh.load_sigs(saved.collect::<Vec<_>>());
        assert_eq!(fresh.sig(7).unwrap().live_pages(), 0);
    }

    /// 1000 pages written at one per tick, a tenth of them overwritten
    /// 10 ticks later and the rest never: the deaths heard say 2^3.3, the
    /// live pages say what the data does (1000 of the 1100 written stay
    /// while the signature writes 1.1 pages per tick: ≈ 2^9.6).
    #[test]
    fn little_sees_the_data_that_stays() {
        let mut m = manager(1 << 20);
        let mut t = 0;
        for p in 0..1000 {
            m.write(LBA_SPACE, p, 1, 1, t);
            t += 1;
            if p % 10 == 9 {
                m.write(LBA_SPACE, p, 1, 1, t + 9);
            }
        }
        let s = m.sig(1).unwrap();
        let ewma = s.estimate_log2().unwrap();
        let little = s.little_log2(t).unwrap();
        assert!(ewma < 4.0, "{ewma}");
        assert!((9.0..10.5).contains(&little), "{little}");
        assert!(s.dead_share() < 0.1);
        // Nothing died: the age.
        let mut m = manager(1 << 20);
        m.write(LBA_SPACE, 0, 64, 5, 100);
        assert_eq!(m.sig(5).unwrap().little_log2(100 + 4096), Some(12.0));
    }
}
