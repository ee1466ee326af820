//! Per-address write history: when each logical page was first written
//! and how many times since, for `pcstream`'s LBA-keyed learner
//! ([`crate::pcstream::RefineConfig::lba_writes`]) and its GC hook
//! ([`crate::gc_age`]).
//!
//! An address's *write interval* — host pages since it was first written,
//! per write of it — is the LBA view's measure of how hot it is: the mean
//! of all its lifetimes so far, where the previous lifetime
//! ([`crate::pcstream::RefineConfig::prev_lifetime`]) is one sample of it.
//! A database page rewritten at random by a steady workload has lifetimes
//! spread over decades around its rate (an exponential's log2 has a
//! standard deviation of ≈ 1.9); their mean settles. pcstream does not
//! place by it directly: it refines a write's key by the log2 bucket of
//! the interval, and each key learns its own lifetime, so the pages a code
//! path rewrites again and again (a database's hot pages, the blocks the
//! file system keeps handing a short-lived file) part from the pages the
//! same code path writes rarely.
//!
//! Measured on the paper-scale SQLite traces (docs/placement.md): keying by
//! the interval instead of the write count relative to the average
//! address's (what AutoStream-MQ places by, never decaying) took
//! mixed-sqlite-gcc from 1.626 / 1.543 to 1.576 / 1.507 and sqlite-tpcc
//! from 1.330 / 1.277 to 1.296 / 1.267 (internal streams off / on, mean of
//! 3); both together made too many keys (1.638 / 1.587, 1.406 / 1.286).
//!
//! Memory: 12 bytes per logical page up to the highest written below
//! [`MAX_COUNTED`], grown on demand; pages above are never counted.

/// Logical pages below this are counted (3 GiB of history at most: 1 TiB
/// of 4 KiB pages; the same bound as `PcStreamDual`'s scoring).
pub const MAX_COUNTED: u64 = 1 << 28;

/// Per-page first write and write count. See the module docs.
#[derive(Debug, Default, Clone)]
pub struct WriteCounts {
    /// Writes of each page (saturating).
    counts: Vec<u32>,
    /// Host time of each page's first write (valid where its count > 0).
    first: Vec<u64>,
}

impl WriteCounts {
    /// Times page `lpn` was written (0 above [`MAX_COUNTED`]).
    pub fn get(&self, lpn: u64) -> u32 {
        usize::try_from(lpn)
            .ok()
            .and_then(|i| self.counts.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Counts one write at host time `time` of each page of
    /// `first..first + pages`.
    pub fn bump(&mut self, first: u64, pages: u64, time: u64) {
        let end = first.saturating_add(pages).min(MAX_COUNTED);
        if first >= end {
            return;
        }
        let need = end as usize;
        if need > self.counts.len() {
            let n = need.next_power_of_two().min(MAX_COUNTED as usize);
            self.counts.resize(n, 0);
            self.first.resize(n, 0);
        }
        let range = first as usize..end as usize;
        for (c, t) in self.counts[range.clone()]
            .iter_mut()
            .zip(&mut self.first[range])
        {
            if *c == 0 {
                *t = time;
            }
            *c = c.saturating_add(1);
        }
    }

    /// Host pages per write of page `lpn` from its first write to `now`
    /// (`None` if never written): before a write, the mean of its
    /// lifetimes so far, the open one included.
    pub fn interval(&self, lpn: u64, now: u64) -> Option<u64> {
        let n = self.get(lpn);
        (n > 0).then(|| now.saturating_sub(self.first[lpn as usize]) / u64::from(n))
    }

    /// The refinement bucket of a write of page `lpn` at `now`: 0 if it
    /// was never written, else `1 + ⌊log2(interval)⌋` (×2 buckets).
    pub fn interval_bucket(&self, lpn: u64, now: u64) -> u64 {
        self.interval(lpn, now)
            .map_or(0, |i| 1 + u64::from(i.max(1).ilog2()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_host_pages_per_write_since_the_first() {
        let mut c = WriteCounts::default();
        assert_eq!(c.get(5), 0);
        c.bump(4, 3, 100);
        assert_eq!((c.get(3), c.get(4), c.get(6), c.get(7)), (0, 1, 1, 0));
        // Page 4 written 300 times more, every 10 pages.
        for t in 1..=300 {
            c.bump(4, 1, 100 + 10 * t);
        }
        assert_eq!(c.get(4), 301);
        c.bump(MAX_COUNTED, 10, 0);
        assert_eq!(c.get(MAX_COUNTED), 0);
        assert_eq!(c.interval(MAX_COUNTED, 1), None);
        // At 3110: page 4 written 301 times since 100 (every 10 pages);
        // page 5 once, at 100.
        assert_eq!(c.interval(3, 3110), None);
        assert_eq!(c.interval(4, 3110), Some(10));
        assert_eq!(c.interval(5, 3110), Some(3010));
        assert_eq!(c.interval_bucket(3, 3110), 0, "never written");
        assert_eq!(c.interval_bucket(4, 3110), 1 + 3, "10: 2^3.3");
        assert_eq!(c.interval_bucket(5, 3110), 1 + 11, "3010: 2^11.6");
        assert_eq!(c.interval_bucket(5, 100), 1, "written at the same time");
    }
}
