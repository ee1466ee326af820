//! Log-bucketed histogram of page lifetimes (host pages written between a
//! page's write and its invalidation), cheap enough for the write path.
//!
//! Values below 8 have their own bucket; above, each power of two is split
//! into 8 equal sub-buckets (3 mantissa bits), so a bucket spans at most
//! 1/8 of its lower bound. Percentiles interpolate linearly inside the
//! bucket holding the wanted rank, so they are exact below 8 and within
//! 12.5 % of the true sample value above (usually much closer).

use serde::Serialize;

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Number of buckets: 8 exact ones, then 8 per exponent 3..=63.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// A histogram of `u64` values with ~12 % bucket resolution.
#[derive(Clone)]
pub struct LogHistogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    sum: u128,
    max: u64,
}

impl std::fmt::Debug for LogHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHistogram")
            .field("count", &self.count)
            .field("summary", &self.summary())
            .finish()
    }
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            counts: Box::new([0; BUCKETS]),
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        v as usize
    } else {
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let shift = e - SUB_BITS;
        let m = (v >> shift) as usize - SUB; // 0..SUB
        SUB + (shift as usize) * SUB + m
    }
}

/// `[lo, hi)` of the values that fall in bucket `i`.
fn bucket_bounds(i: usize) -> (f64, f64) {
    if i < SUB {
        (i as f64, i as f64 + 1.0)
    } else {
        let shift = (i - SUB) / SUB;
        let m = (i - SUB) % SUB;
        let w = (1u128 << shift) as f64;
        let lo = (SUB + m) as f64 * w;
        (lo, lo + w)
    }
}

impl LogHistogram {
    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = LogHistogram::default();
    }

    /// The value below which a fraction `q` (0..=1) of the values fall,
    /// interpolated inside its bucket; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let target = q * self.count as f64;
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (below + c) as f64 >= target {
                let (lo, hi) = bucket_bounds(i);
                let frac = ((target - below as f64) / c as f64).clamp(0.0, 1.0);
                let v = lo + frac * (hi - lo);
                // Never report more than the largest value seen.
                return Some(v.min(self.max as f64));
            }
            below += c;
        }
        Some(self.max as f64)
    }

    /// p25/p50/p75/p99, mean and count.
    pub fn summary(&self) -> LifetimeSummary {
        LifetimeSummary {
            count: self.count,
            mean: (self.count > 0).then(|| self.sum as f64 / self.count as f64),
            p25: self.quantile(0.25),
            p50: self.quantile(0.50),
            p75: self.quantile(0.75),
            p99: self.quantile(0.99),
        }
    }
}

/// Distribution of the lifetimes of the pages invalidated in one stream, in
/// host pages written between write and invalidation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LifetimeSummary {
    /// Pages invalidated (overwritten or trimmed).
    pub count: u64,
    /// Exact mean.
    pub mean: Option<f64>,
    /// 25th percentile (bucket-interpolated, see the module docs).
    pub p25: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 75th percentile.
    pub p75: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_partition_the_range() {
        for i in 0..BUCKETS - 1 {
            let (lo, hi) = bucket_bounds(i);
            let (lo2, _) = bucket_bounds(i + 1);
            assert_eq!(hi, lo2, "bucket {i}");
            assert!(lo < hi);
            if hi < 1e15 {
                assert_eq!(bucket_of(lo as u64), i);
                assert_eq!(bucket_of(hi as u64 - 1), i);
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = LogHistogram::default();
        for v in [1u64, 2, 3, 4] {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!(s.count, 4);
        assert_eq!(s.mean, Some(2.5));
        // 25 % of 4 values = rank 1 → the top of the bucket of 1.
        assert_eq!(s.p25, Some(2.0));
        assert!(LogHistogram::default().quantile(0.5).is_none());
    }

    proptest! {
        #[test]
        fn quantiles_are_within_the_documented_precision(
            mut vals in prop::collection::vec(1u64..10_000_000, 1..400),
            q in 0.01f64..0.99,
        ) {
            let mut h = LogHistogram::default();
            for &v in &vals { h.record(v); }
            vals.sort_unstable();
            let est = h.quantile(q).unwrap();
            // The estimate lies in the bucket of the sample of rank ⌈q·n⌉,
            // so within 12.5 % of it (or 1 for the exact small buckets).
            let n = vals.len();
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            let v = vals[rank] as f64;
            prop_assert!(est >= v / 1.125 - 1.0 && est <= v * 1.125 + 1.0,
                "q {q} est {est} sample {v}");
        }
    }
}
