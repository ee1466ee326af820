//! Whether a [`SigStats`] read from a file (a saved or imported table)
//! holds figures the lifetime manager can have made: what the daemon's
//! state loader and `import` check before anything of a table is used.

use super::SigStats;

/// Largest time or count a [`SigStats`] read from a file may hold
/// ([`SigStats::check`]): 2^56 pages are 256 EiB, far beyond any clock, and
/// leave the counters room to grow without overflowing.
pub const MAX_COUNT: u64 = 1 << 56;

/// Largest log2 lifetime (pages are counted in a `u64`).
const MAX_LOG2_LIFETIME: f64 = 64.0;

/// Rounding allowed at the edges of [`SigStats::check`]'s ranges.
const SLACK: f64 = 1e-6;

impl SigStats {
    /// Checks that statistics read from a file (a saved or imported table)
    /// are ones the manager can have made: every figure finite, log2
    /// lifetimes within `0..=64` (lifetimes are `u64` pages), the EWMA's
    /// weight within `0..=1`, the squared deviations within what lifetimes
    /// of `0..=64` allow, and times and counts at most [`MAX_COUNT`]. A
    /// value outside makes no sense to learn from and can overflow what is
    /// derived from it (k-means distances, counters). The error names the
    /// field and its value.
    pub fn check(&self) -> Result<(), String> {
        let counts = [
            ("written_pages", self.written_pages),
            ("first_write", self.first_write),
            ("last_write", self.last_write),
            ("deaths", self.deaths),
            ("dead_pages", self.dead_pages),
        ];
        for (field, v) in counts {
            if v > MAX_COUNT {
                return Err(format!("{field} is {v}, more than 2^56"));
            }
        }
        if let Some((i, v)) = self.hist.iter().enumerate().find(|e| *e.1 > MAX_COUNT) {
            return Err(format!("hist[{i}] is {v}, more than 2^56"));
        }
        let in_range =
            |x: f64, lo: f64, hi: f64| x.is_finite() && x >= lo - SLACK && x <= hi + SLACK;
        let floats = [
            (
                "ewma_log2",
                self.ewma_log2,
                MAX_LOG2_LIFETIME,
                "a log2 lifetime",
            ),
            (
                "mean_log2",
                self.mean_log2,
                MAX_LOG2_LIFETIME,
                "a log2 lifetime",
            ),
            ("ewma_weight", self.ewma_weight, 1.0, "a weight"),
        ];
        for (field, v, hi, what) in floats {
            if !in_range(v, 0.0, hi) {
                return Err(format!("{field} is {v:?}, not {what} (0 to {hi})"));
            }
        }
        let m2_max = MAX_LOG2_LIFETIME * MAX_LOG2_LIFETIME * self.dead_pages as f64;
        if !in_range(self.m2_log2, 0.0, m2_max) {
            return Err(format!(
                "m2_log2 is {:?}, not a sum of squared log2 deviations of {} dead pages (0 to {m2_max})",
                self.m2_log2, self.dead_pages
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_accepts_the_extremes_the_manager_makes_and_names_a_bad_field() {
        let mut s = SigStats::new(7);
        assert_eq!(s.check(), Ok(()));
        s.record_death(u64::MAX, 1, 0.125);
        s.record_death(1, 1000, 1.0);
        s.record_death(u64::MAX, 3, 0.0);
        assert_eq!(s.check(), Ok(()), "{s:?}");
        let bad = |f: &dyn Fn(&mut SigStats)| {
            let mut b = s.clone();
            f(&mut b);
            b.check().unwrap_err()
        };
        let e = bad(&|b| b.ewma_log2 = -1e300);
        assert_eq!(e, "ewma_log2 is -1e300, not a log2 lifetime (0 to 64)");
        assert!(bad(&|b| b.mean_log2 = f64::NAN).starts_with("mean_log2 is NaN"));
        assert!(bad(&|b| b.ewma_log2 = 64.5).starts_with("ewma_log2 is 64.5"));
        assert!(bad(&|b| b.ewma_weight = f64::INFINITY).starts_with("ewma_weight is inf"));
        assert!(bad(&|b| b.ewma_weight = 1.5).starts_with("ewma_weight is 1.5"));
        assert!(bad(&|b| b.m2_log2 = -1.0).starts_with("m2_log2 is -1.0"));
        assert!(bad(&|b| b.m2_log2 = 1e30).starts_with("m2_log2 is 1e30"));
        assert_eq!(
            bad(&|b| b.written_pages = u64::MAX),
            format!("written_pages is {}, more than 2^56", u64::MAX)
        );
        assert!(bad(&|b| b.last_write = MAX_COUNT + 1).starts_with("last_write is "));
        assert!(bad(&|b| b.hist[3] = u64::MAX).starts_with("hist[3] is "));
    }
}
