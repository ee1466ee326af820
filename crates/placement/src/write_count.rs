//! Per-address write counts: how many times each logical page has been
//! written so far, for `pcstream`'s LBA-keyed learner
//! ([`crate::pcstream::RefineConfig::lba_writes`]).
//!
//! An address's write count is the LBA view's measure of how hot it is:
//! AutoStream-MQ places by the same never-decaying count (per 1 MiB chunk).
//! pcstream does not place by it directly; it refines a write's key by the
//! log2 bucket of the count relative to the average written page's (so a
//! steady workload's buckets stay put while every count grows), and each
//! key learns its own lifetime. Pages a
//! code path rewrites again and again (a database's hot pages, the blocks
//! the file system keeps handing a short-lived file) part from the pages
//! the same code path writes rarely, which the previous lifetime alone
//! (one interval) cannot always tell apart.
//!
//! Memory: one byte per logical page below [`MAX_COUNTED`] (saturating at
//! 255), grown on demand; pages above are never counted (count 0).

/// Logical pages below this are counted (256 MiB of counters at most: 1 TiB
/// of 4 KiB pages; the same bound as `PcStreamDual`'s scoring).
pub const MAX_COUNTED: u64 = 1 << 28;

/// Per-page write counters (saturating). See the module docs.
#[derive(Debug, Default, Clone)]
pub struct WriteCounts {
    counts: Vec<u32>,
    /// Writes counted, all pages.
    total: u64,
    /// Pages written at least once.
    distinct: u64,
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

    /// Counts one write of each page of `first..first + pages`.
    pub fn bump(&mut self, first: u64, pages: u64) {
        let end = first.saturating_add(pages).min(MAX_COUNTED);
        if first >= end {
            return;
        }
        let need = end as usize;
        if need > self.counts.len() {
            let n = need.next_power_of_two().min(MAX_COUNTED as usize);
            self.counts.resize(n, 0);
        }
        for c in &mut self.counts[first as usize..end as usize] {
            if *c == 0 {
                self.distinct += 1;
            }
            *c = c.saturating_add(1);
        }
        self.total += end - first;
    }

    /// The refinement bucket of page `lpn`: 0 if never written, else
    /// `1 + ⌊log2(count / mean count)⌋ + 32` (clamped to `1..=64`), the
    /// page's writes relative to the average written page's. Relative,
    /// so that a steady workload's buckets stay where they are while
    /// every count grows.
    pub fn relative_bucket(&self, lpn: u64) -> u64 {
        let n = self.get(lpn);
        if n == 0 || self.total == 0 {
            return 0;
        }
        let rel = f64::from(n) * self.distinct as f64 / self.total as f64;
        (rel.log2().floor() + 33.0).clamp(1.0, 64.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grow_and_buckets_are_log2_of_the_relative_count() {
        let mut c = WriteCounts::default();
        assert_eq!(c.get(5), 0);
        c.bump(4, 3);
        assert_eq!((c.get(3), c.get(4), c.get(6), c.get(7)), (0, 1, 1, 0));
        for _ in 0..300 {
            c.bump(4, 1);
        }
        assert_eq!(c.get(4), 301);
        c.bump(MAX_COUNTED, 10);
        assert_eq!(c.get(MAX_COUNTED), 0);
        // Pages 4..7 once, page 4 300 times more: 303 writes over 3
        // pages, a mean of 101.
        assert_eq!(c.relative_bucket(3), 0, "never written");
        assert_eq!(c.relative_bucket(4), 33 + 1, "301 / 101: ×2^1.58");
        assert_eq!(c.relative_bucket(5), 33 - 7, "1 / 101: ×2^-6.66");
    }
}
