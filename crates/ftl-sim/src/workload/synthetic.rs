//! Seeded synthetic write generators: uniform random, two-temperature
//! (hot/cold), Zipf and sequential, each one page per write, reproducible
//! from a seed (xoshiro256++).
//!
//! Pattern syntax (`FromStr`), over a logical space of `L` pages:
//! - `uniform`: every page equally likely;
//! - `hotcold:H/C` (e.g. `hotcold:0.2/0.8`): the first `H·L` pages are hot
//!   and receive a fraction `C` of the writes, the rest receive `1 − C`;
//!   inside each region pages are chosen uniformly at random;
//!   `hotcold:H/C:seq` walks each region sequentially instead (wrapping), so
//!   every hot page lives exactly `H·L/C` writes and every cold page
//!   `(1−H)·L/(1−C)`: two clean lifetimes;
//! - `zipf:S`: page `i` (0-based) has weight `1/(i+1)^S`;
//! - `seq`: pages `0, 1, …, L−1, 0, …`.
//!
//! Streams: hot/cold puts hot writes in stream 1 and cold writes in stream 2
//! when the device has at least 3 streams, hot in 1 and cold in 0 with 2
//! streams, everything in 0 with 1. The other patterns write stream 0.

use std::str::FromStr;

use pcstream_placement::StreamId;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A synthetic access pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Uniform random pages.
    Uniform,
    /// Two temperatures.
    HotCold {
        /// Fraction of the logical space that is hot, in (0, 1).
        hot_space: f64,
        /// Fraction of the writes that go to the hot region, in [0, 1].
        hot_writes: f64,
        /// Walk each region sequentially instead of at random.
        sequential: bool,
    },
    /// Zipf-distributed pages with exponent `s`.
    Zipf {
        /// The exponent (> 0).
        s: f64,
    },
    /// Sequential, wrapping.
    Sequential,
}

/// A pattern string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workload `{input}`: {reason} (expected uniform, hotcold:H/C[:seq], zipf:S or seq)")]
pub struct PatternError {
    input: String,
    reason: String,
}

fn perr(input: &str, reason: impl Into<String>) -> PatternError {
    PatternError {
        input: input.to_string(),
        reason: reason.into(),
    }
}

fn fraction(input: &str, what: &str, v: &str, open: bool) -> Result<f64, PatternError> {
    let x: f64 = v
        .trim()
        .parse()
        .map_err(|_| perr(input, format!("{what} `{v}` is not a number")))?;
    let ok = if open {
        x > 0.0 && x < 1.0
    } else {
        (0.0..=1.0).contains(&x)
    };
    if !ok {
        let range = if open { "(0, 1)" } else { "[0, 1]" };
        return Err(perr(input, format!("{what} {x} is outside {range}")));
    }
    Ok(x)
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (name, arg) = match input.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (input, None),
        };
        match (name, arg) {
            ("uniform", None) => Ok(Pattern::Uniform),
            ("seq", None) => Ok(Pattern::Sequential),
            ("zipf", Some(a)) => {
                let s: f64 = a
                    .parse()
                    .map_err(|_| perr(input, format!("exponent `{a}` is not a number")))?;
                if !(s.is_finite() && s > 0.0) {
                    return Err(perr(input, format!("exponent {s} must be > 0")));
                }
                Ok(Pattern::Zipf { s })
            }
            ("hotcold", Some(a)) => {
                let (fracs, sequential) = match a.strip_suffix(":seq") {
                    Some(f) => (f, true),
                    None => (a, false),
                };
                let (h, c) = fracs
                    .split_once('/')
                    .ok_or_else(|| perr(input, "want H/C, e.g. hotcold:0.2/0.8"))?;
                Ok(Pattern::HotCold {
                    hot_space: fraction(input, "hot space fraction", h, true)?,
                    hot_writes: fraction(input, "hot write fraction", c, false)?,
                    sequential,
                })
            }
            ("uniform" | "seq", Some(_)) => Err(perr(input, "takes no argument")),
            ("zipf" | "hotcold", None) => Err(perr(input, "needs an argument")),
            _ => Err(perr(input, "unknown pattern")),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Uniform => write!(f, "uniform"),
            Pattern::Sequential => write!(f, "seq"),
            Pattern::Zipf { s } => write!(f, "zipf:{s}"),
            Pattern::HotCold {
                hot_space,
                hot_writes,
                sequential,
            } => {
                write!(f, "hotcold:{hot_space}/{hot_writes}")?;
                if *sequential {
                    write!(f, ":seq")?;
                }
                Ok(())
            }
        }
    }
}

/// A reproducible stream of single-page writes over `logical` pages.
#[derive(Debug, Clone)]
pub struct Generator {
    pattern: Pattern,
    logical: u64,
    rng: Xoshiro256PlusPlus,
    zipf: Option<Zipf<f64>>,
    /// Pages `0..hot_pages` are hot (hot/cold only).
    hot_pages: u64,
    hot_stream: StreamId,
    cold_stream: StreamId,
    /// Sequential cursors: `seq` uses `cursor[0]`; hot/cold:seq uses both.
    cursor: [u64; 2],
}

impl Generator {
    /// A generator for a device with `logical` pages and `streams` external
    /// streams, seeded with `seed`.
    pub fn new(
        pattern: Pattern,
        logical: u64,
        streams: u32,
        seed: u64,
    ) -> Result<Generator, PatternError> {
        let text = pattern.to_string();
        if logical < 2 {
            return Err(perr(&text, "the device needs at least 2 logical pages"));
        }
        let zipf = match pattern {
            Pattern::Zipf { s } => {
                Some(Zipf::new(logical as f64, s).map_err(|e| perr(&text, format!("zipf: {e}")))?)
            }
            _ => None,
        };
        let hot_pages = match pattern {
            Pattern::HotCold { hot_space, .. } => {
                ((logical as f64 * hot_space).round() as u64).clamp(1, logical - 1)
            }
            _ => 0,
        };
        let (hot_stream, cold_stream) = match streams {
            0 | 1 => (0, 0),
            2 => (1, 0),
            _ => (1, 2),
        };
        Ok(Generator {
            pattern,
            logical,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            zipf,
            hot_pages,
            hot_stream,
            cold_stream,
            cursor: [0, hot_pages],
        })
    }

    /// The pattern.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// The next write: logical page and stream.
    #[inline]
    pub fn next_write(&mut self) -> (u64, StreamId) {
        match self.pattern {
            Pattern::Uniform => (self.rng.random_range(0..self.logical), 0),
            Pattern::Sequential => {
                let p = self.cursor[0];
                self.cursor[0] = if p + 1 == self.logical { 0 } else { p + 1 };
                (p, 0)
            }
            Pattern::Zipf { .. } => {
                let z = self.zipf.as_ref().map_or(1.0, |z| z.sample(&mut self.rng));
                ((z as u64).clamp(1, self.logical) - 1, 0)
            }
            Pattern::HotCold {
                hot_writes,
                sequential,
                ..
            } => {
                let hot = self.rng.random::<f64>() < hot_writes;
                let (lo, hi, stream, c) = if hot {
                    (0, self.hot_pages, self.hot_stream, 0)
                } else {
                    (self.hot_pages, self.logical, self.cold_stream, 1)
                };
                let lpn = if sequential {
                    let p = self.cursor[c];
                    self.cursor[c] = if p + 1 == hi { lo } else { p + 1 };
                    p
                } else {
                    self.rng.random_range(lo..hi)
                };
                (lpn, stream)
            }
        }
    }

    /// The stream a pre-fill should write page `lpn` through, so that aged
    /// data sits where the workload would have put it.
    pub fn stream_of(&self, lpn: u64) -> StreamId {
        match self.pattern {
            Pattern::HotCold { .. } if lpn < self.hot_pages => self.hot_stream,
            Pattern::HotCold { .. } => self.cold_stream,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_patterns() {
        for s in [
            "uniform",
            "seq",
            "zipf:1.1",
            "hotcold:0.2/0.8",
            "hotcold:0.1/0.9:seq",
        ] {
            let p: Pattern = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        for bad in [
            "",
            "zipf",
            "zipf:x",
            "zipf:-1",
            "hotcold:0.2",
            "hotcold:1.2/0.5",
            "hotcold:0/0.5",
            "hotcold:0.2/1.5",
            "uniform:3",
            "poisson",
        ] {
            let e = bad.parse::<Pattern>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn same_seed_same_writes() {
        let p = "zipf:0.9".parse().unwrap();
        let mut a = Generator::new(p, 1000, 1, 7).unwrap();
        let mut b = Generator::new(p, 1000, 1, 7).unwrap();
        let mut c = Generator::new(p, 1000, 1, 8).unwrap();
        let va: Vec<_> = (0..100).map(|_| a.next_write()).collect();
        let vb: Vec<_> = (0..100).map(|_| b.next_write()).collect();
        let vc: Vec<_> = (0..100).map(|_| c.next_write()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        assert!(va.iter().all(|&(l, s)| l < 1000 && s == 0));
    }

    #[test]
    fn hotcold_splits_space_writes_and_streams() {
        let p = "hotcold:0.2/0.8".parse().unwrap();
        let mut g = Generator::new(p, 10_000, 9, 1).unwrap();
        let n = 200_000;
        let mut hot = 0;
        for _ in 0..n {
            let (lpn, s) = g.next_write();
            if lpn < 2000 {
                hot += 1;
                assert_eq!(s, 1);
            } else {
                assert_eq!(s, 2);
            }
        }
        let frac = f64::from(hot) / f64::from(n);
        assert!((frac - 0.8).abs() < 0.01, "{frac}");
        assert_eq!(g.stream_of(0), 1);
        assert_eq!(g.stream_of(9999), 2);
        let g2 = Generator::new(p, 10_000, 2, 1).unwrap();
        assert_eq!((g2.stream_of(0), g2.stream_of(9999)), (1, 0));
    }

    #[test]
    fn hotcold_seq_walks_each_region_in_order() {
        let p = "hotcold:0.5/0.5:seq".parse().unwrap();
        let mut g = Generator::new(p, 10, 3, 3).unwrap();
        let (mut hot, mut cold) = (vec![], vec![]);
        for _ in 0..40 {
            let (lpn, s) = g.next_write();
            if s == 1 {
                hot.push(lpn)
            } else {
                cold.push(lpn)
            }
        }
        for (i, &l) in hot.iter().enumerate() {
            assert_eq!(l, i as u64 % 5);
        }
        for (i, &l) in cold.iter().enumerate() {
            assert_eq!(l, 5 + i as u64 % 5);
        }
    }

    #[test]
    fn seq_wraps_and_zipf_prefers_low_pages() {
        let mut g = Generator::new(Pattern::Sequential, 3, 1, 0).unwrap();
        let v: Vec<u64> = (0..7).map(|_| g.next_write().0).collect();
        assert_eq!(v, [0, 1, 2, 0, 1, 2, 0]);
        let mut z = Generator::new(Pattern::Zipf { s: 1.2 }, 100_000, 1, 0).unwrap();
        let low = (0..10_000).filter(|_| z.next_write().0 < 100).count();
        // Under 1.2-Zipf the first 0.1 % of pages take well over half the writes.
        assert!(low > 5_000, "{low}");
    }
}
