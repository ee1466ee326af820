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
        // Live pages are written pages: `written_pages` > 0 here.
        (live > 0 && age > 0).then(|| {
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
