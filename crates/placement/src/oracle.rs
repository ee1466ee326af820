//! `oracle`: places each write by its true lifetime, read from the trace
//! (`WriteCtx::death`) — the lower bound any real policy is compared with.
//! `oracle-write` is the same but must give every page of a device write
//! the write's stream (by the typical lifetime of its pages,
//! `WriteCtx::write_death`): one device write carries one stream, so it
//! shows what perfect knowledge gives a placement that keeps writes whole,
//! where `oracle` also splits them. A reference, not a bound: it clusters
//! as the oracle does and leaves GC copies to the device.
//!
//! Lifetimes (`death − time`, pages; data never invalidated within the trace
//! counts as lifetime 2^60) are binned on `log2` in quarter steps, weighted by
//! pages. The bin histogram is clustered by exact weighted 1-D k-means
//! ([`cluster_1d_exact`], dynamic programming over the ≤ 244 bins: optimal,
//! so the oracle never suffers a k-means local optimum) into as many clusters as the device
//! has streams (the oracle needs no "unknown" stream, so it uses all ids,
//! shortest lifetimes in stream 0); a write goes to the cluster whose range
//! holds its lifetime. The histogram is re-clustered every `refit_interval`
//! pages (sooner at the start: after `max(256, time/4)` pages while that is
//! smaller), so the oracle adapts like the online policies do but never has
//! to guess.

use crate::mapper::{cluster_1d_exact, spacing};
use crate::placement::{Placement, StreamId, WriteCtx};

/// Bins per log2 unit.
const STEPS: f64 = 4.0;
/// log2 of the lifetime given to data that never dies in the trace (also
/// in the typical lifetime of a write the replay works out for
/// `oracle-write`).
pub const NEVER_LOG2: f64 = 60.0;
const BINS: usize = (NEVER_LOG2 as usize + 1) * STEPS as usize;

/// Tunables of the oracle.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OracleConfig {
    /// Longest interval (pages) between re-fits. Default 16384.
    pub refit_interval: u64,
}

impl Default for OracleConfig {
    fn default() -> Self {
        OracleConfig {
            refit_interval: 16384,
        }
    }
}

/// The `oracle` policy (and `oracle-write`). See the module docs.
#[derive(Debug)]
pub struct Oracle {
    cfg: OracleConfig,
    /// `oracle-write`: places by the write's typical lifetime
    /// (`WriteCtx::write_death`) instead of the page's own.
    per_write: bool,
    streams: u32,
    hist: Vec<f64>,
    /// Upper bounds (log2) of streams `0..streams-1`; the last stream is open.
    bounds: Vec<f64>,
    next_fit: u64,
    refits: u64,
}

impl Oracle {
    /// The oracle for a device with `streams` stream ids.
    pub fn new(streams: u32, cfg: OracleConfig) -> Self {
        Oracle {
            cfg,
            per_write: false,
            streams: streams.max(1),
            hist: vec![0.0; BINS],
            bounds: Vec::new(),
            next_fit: 0,
            refits: 0,
        }
    }

    /// `oracle-write`: the oracle that places whole device writes, each
    /// by the typical lifetime of its pages (`WriteCtx::write_death`), as a
    /// host must: one device write carries one stream.
    pub fn per_write(streams: u32, cfg: OracleConfig) -> Self {
        Oracle {
            per_write: true,
            ..Oracle::new(streams, cfg)
        }
    }

    fn refit(&mut self, now: u64) {
        let pts: Vec<(f64, f64)> = self
            .hist
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0.0)
            .map(|(i, w)| (i as f64 / STEPS, *w))
            .collect();
        let c = cluster_1d_exact(&pts, self.streams as usize);
        self.bounds = c
            .centroids
            .windows(2)
            .map(|w| (w[0] + w[1]) / 2.0)
            .collect();
        self.refits += 1;
        self.next_fit = now + spacing(now, 256, self.cfg.refit_interval);
    }
}

impl Placement for Oracle {
    fn name(&self) -> &str {
        if self.per_write {
            "oracle-write"
        } else {
            "oracle"
        }
    }

    fn streams(&self) -> u32 {
        self.streams
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("refits", self.refits)]
    }

    fn needs_write_death(&self) -> bool {
        self.per_write
    }

    fn place(&mut self, w: &WriteCtx) -> StreamId {
        let death = if self.per_write {
            w.write_death
        } else {
            w.death
        };
        let x = match death {
            Some(d) => (d.saturating_sub(w.time).max(1) as f64)
                .log2()
                .min(NEVER_LOG2),
            None => NEVER_LOG2,
        };
        let bin = ((x * STEPS) as usize).min(BINS - 1);
        self.hist[bin] += f64::from(w.pages.max(1));
        if w.time >= self.next_fit {
            self.refit(w.time);
        }
        // Values are binned before comparing, so a write lands in the same
        // cluster as its histogram bin.
        let xb = bin as f64 / STEPS;
        self.bounds.partition_point(|b| *b < xb) as StreamId
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_by_true_lifetime_in_order() {
        let mut o = Oracle::new(3, OracleConfig::default());
        let mut got = [[0u32; 3]; 3];
        for t in 0..30_000u64 {
            let (class, death) = match t % 3 {
                0 => (0, Some(t + 4)),
                1 => (1, Some(t + 5000)),
                _ => (2, None),
            };
            let s = o.place(&WriteCtx {
                time: t,
                pages: 1,
                death,
                ..Default::default()
            });
            if t > 2000 {
                got[class][s as usize] += 1;
            }
        }
        for (class, row) in got.iter().enumerate() {
            assert_eq!(
                row[class] as u64,
                row.iter().map(|v| *v as u64).sum::<u64>(),
                "{got:?}"
            );
        }
    }

    /// Writes of two pages, one dying 4 pages later and one never: the
    /// oracle splits each write, `oracle-write` must keep it whole, and
    /// puts writes of long-lived pages apart from them.
    #[test]
    fn oracle_write_keeps_each_write_whole() {
        let mut page = Oracle::new(3, OracleConfig::default());
        let mut whole = Oracle::per_write(3, OracleConfig::default());
        assert_eq!(whole.name(), "oracle-write");
        let mut split = 0;
        for t in (0..30_000u64).step_by(3) {
            // Pages t and t + 1 are one write (typical: 2^30); page t + 2
            // a write of its own, dying 2^12 later.
            let at = |time, death, write_death| WriteCtx {
                time,
                pages: 1,
                death,
                write_death,
                ..Default::default()
            };
            let w = [
                at(t, Some(t + 4), Some(t + (1 << 30))),
                at(t + 1, None, Some(t + 1 + (1 << 30))),
                at(t + 2, Some(t + 2 + 4096), Some(t + 2 + 4096)),
            ];
            let p: Vec<_> = w.iter().map(|w| page.place(w)).collect();
            let o: Vec<_> = w.iter().map(|w| whole.place(w)).collect();
            if t > 3000 {
                split += u32::from(p[0] != p[1]);
                assert_eq!(o[0], o[1], "one write, one stream");
                assert_ne!(o[0], o[2]);
            }
        }
        assert!(split > 8000, "the page oracle splits the writes: {split}");
    }

    #[test]
    fn one_stream_device_uses_stream_zero() {
        let mut o = Oracle::new(1, OracleConfig::default());
        for t in 0..1000 {
            let w = WriteCtx {
                time: t,
                pages: 1,
                death: Some(t + (t % 7) * 100),
                ..Default::default()
            };
            assert_eq!(o.place(&w), 0);
        }
    }
}
