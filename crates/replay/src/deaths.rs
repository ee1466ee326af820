//! Page deaths: when every written page is next overwritten or trimmed
//! ([`Replay::deaths`], read by the oracle policy through `WriteCtx::death`),
//! with the footprint and peak of live pages — computed once for every
//! replay, however it was built (`finish`).

use crate::error::BuildError;
use crate::ops::{JoinStats, Op, Replay, RunMode, Source, WriteClass};
use std::collections::HashMap;

impl Replay {
    /// Builds a replay from operations directly (tests, synthetic traces),
    /// computing deaths and statistics.
    pub fn from_ops(
        ops: Vec<Op>,
        logical_pages: u64,
        source: Source,
    ) -> Result<Replay, BuildError> {
        let mut stats = JoinStats::default();
        for op in &ops {
            match *op {
                Op::Write {
                    pages,
                    class,
                    signature,
                    ..
                } => {
                    stats.write_pages += u64::from(pages);
                    match class {
                        WriteClass::Data => {
                            stats.data_pages += u64::from(pages);
                            if signature.is_some() {
                                stats.signed_pages += u64::from(pages);
                            }
                        }
                        WriteClass::Metadata => stats.metadata_pages += u64::from(pages),
                    }
                }
                Op::Trim { pages, .. } => stats.trim_pages += pages,
                Op::InvalidateFile { .. } => {}
            }
        }
        finish(ops, logical_pages, source, stats)
    }

    /// Host pages the replay writes.
    pub fn host_pages(&self) -> u64 {
        self.deaths.len() as u64
    }

    /// When the `k`-th written page dies (replay clock), `None` if never.
    pub fn death(&self, k: u64) -> Option<u64> {
        let d = self.deaths[k as usize];
        (d != NEVER).then_some(d)
    }

    /// Whether the replay writes logical page `lpn`.
    pub fn touches(&self, lpn: u64) -> bool {
        self.touched
            .get((lpn / 64) as usize)
            .is_some_and(|w| w >> (lpn % 64) & 1 == 1)
    }
}

/// "Never dies within the trace" in [`Replay::deaths`].
pub const NEVER: u64 = u64::MAX;

/// Checks bounds, computes deaths and distinct signatures.
pub(crate) fn finish(
    ops: Vec<Op>,
    logical_pages: u64,
    source: Source,
    mut stats: JoinStats,
) -> Result<Replay, BuildError> {
    if logical_pages == 0 {
        return Err(BuildError::NoPages);
    }
    let mut sigs = std::collections::HashSet::new();
    let mut total = 0u64;
    for (i, op) in ops.iter().enumerate() {
        let (lpn, n) = match *op {
            Op::Write {
                lpn,
                pages,
                signature,
                ..
            } => {
                if let Some(s) = signature {
                    sigs.insert(s);
                }
                total += u64::from(pages);
                (lpn, u64::from(pages))
            }
            Op::Trim { lpn, pages } => (lpn, pages),
            Op::InvalidateFile { .. } => continue,
        };
        if lpn.checked_add(n).is_none_or(|end| end > logical_pages) {
            return Err(BuildError::OutOfRange {
                index: i,
                first: lpn,
                end: lpn.saturating_add(n),
                logical_pages,
            });
        }
    }
    stats.signatures = sigs.len() as u64;
    // Forward: replay clock at each op, footprint and peak of live pages.
    // Backward: next kill of each lpn.
    let words = logical_pages.div_ceil(64) as usize;
    let mut touched = vec![0u64; words];
    let mut mapped = vec![0u64; words];
    let (mut live, mut peak) = (0u64, 0u64);
    let mut clocks = Vec::with_capacity(ops.len());
    let mut c = 0u64;
    for op in &ops {
        clocks.push(c);
        match *op {
            Op::Write { lpn, pages, .. } => {
                c += u64::from(pages);
                for p in lpn..lpn + u64::from(pages) {
                    let (w, b) = ((p / 64) as usize, 1u64 << (p % 64));
                    touched[w] |= b;
                    if mapped[w] & b == 0 {
                        mapped[w] |= b;
                        live += 1;
                    }
                }
                peak = peak.max(live);
            }
            Op::Trim { lpn, pages } => {
                for p in lpn..lpn + pages {
                    let (w, b) = ((p / 64) as usize, 1u64 << (p % 64));
                    if mapped[w] & b != 0 {
                        mapped[w] &= !b;
                        live -= 1;
                    }
                }
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    drop(mapped);
    let footprint_pages = touched.iter().map(|w| u64::from(w.count_ones())).sum();
    let mut next_kill = vec![NEVER; logical_pages as usize];
    let mut deaths = vec![NEVER; total as usize];
    let mut k = total as usize;
    for (op, &clock) in ops.iter().zip(&clocks).rev() {
        match *op {
            Op::Write { lpn, pages, .. } => {
                for i in (0..u64::from(pages)).rev() {
                    k -= 1;
                    let slot = &mut next_kill[(lpn + i) as usize];
                    deaths[k] = *slot;
                    *slot = clock + i;
                }
            }
            Op::Trim { lpn, pages } => {
                next_kill[lpn as usize..(lpn + pages) as usize].fill(clock);
            }
            Op::InvalidateFile { .. } => {}
        }
    }
    Ok(Replay {
        ops,
        deaths,
        footprint_pages,
        peak_live_pages: peak,
        touched,
        confined_from: None,
        logical_pages,
        source,
        stats,
        file_names: HashMap::new(),
        marks: Vec::new(),
        run_mode: RunMode::default(),
        ageing: Vec::new(),
        times: None,
    })
}
