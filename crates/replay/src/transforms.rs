//! Replay transforms: the same trace as another device would see it —
//! confined into a smaller hot region before ageing ([`confine`],
//! [`fit_for_ageing`]) or without TRIM ([`without_trims`]). Deaths and
//! statistics are recomputed; the context (names, marks, mode, ageing) kept.

use crate::deaths::finish;
use crate::error::BuildError;
use crate::fs_alloc::Allocator;
use crate::ops::{push_page, Op, Replay};

impl Replay {
    /// Takes over what a derived replay (its operations rewritten) keeps
    /// from `from`: file names, round marks, run mode, ageing and the
    /// pre-confinement footprint.
    fn keep_context_of(&mut self, from: &Replay) {
        self.confined_from = from.confined_from;
        self.file_names = from.file_names.clone();
        self.marks = from.marks.clone();
        self.run_mode = from.run_mode;
        self.ageing = from.ageing.clone();
    }
}

/// Re-allocates the replay's logical pages into `0..hot_pages` (the logical
/// size stays the larger of the two), as the
/// traced file system would have placed them on a device whose remaining
/// space is taken by cold data: a page keeps its address when that is below
/// `hot_pages` and free, else it gets the free page after the previous one
/// written (next-fit); a trim frees the pages. Overwrite, trim and
/// death order are unchanged (the FTL sees the same page identities under
/// other names); only LBA-based policies see different addresses. Needs
/// `hot_pages` ≥ the peak of live pages.
pub fn confine(replay: &Replay, hot_pages: u64) -> Result<Replay, BuildError> {
    if hot_pages < replay.peak_live_pages {
        return Err(BuildError::CannotConfine {
            live: replay.peak_live_pages,
            hot: hot_pages,
        });
    }
    const NONE: u64 = u64::MAX;
    let mut map = vec![NONE; replay.logical_pages as usize];
    let mut alloc = Allocator::new(hot_pages.max(1));
    let mut ops = Vec::with_capacity(replay.ops.len());
    let mut last: Option<u64> = None;
    for op in &replay.ops {
        match *op {
            Op::Write {
                lpn,
                pages,
                file,
                file_page,
                signature,
                app_hint,
                class,
            } => {
                for i in 0..u64::from(pages) {
                    let old = lpn + i;
                    let new = match map[old as usize] {
                        NONE => {
                            let goal = if old < hot_pages {
                                Some(old)
                            } else {
                                last.map(|l| l + 1)
                            };
                            let n = alloc.alloc(goal).ok_or(BuildError::NoFreePage(hot_pages))?;
                            map[old as usize] = n;
                            n
                        }
                        n => n,
                    };
                    last = Some(new);
                    let fp = if file.is_some() { file_page + i } else { 0 };
                    push_page(&mut ops, new, (file, fp, signature, app_hint, class));
                }
            }
            Op::Trim { lpn, pages } => {
                let mut freed = Vec::new();
                for old in lpn..lpn + pages {
                    let n = map[old as usize];
                    if n != NONE {
                        map[old as usize] = NONE;
                        alloc.set(n, false);
                        freed.push(n);
                    }
                }
                freed.sort_unstable();
                let mut k = 0;
                while k < freed.len() {
                    let mut n = 1;
                    while k + n < freed.len() && freed[k + n] == freed[k] + n as u64 {
                        n += 1;
                    }
                    ops.push(Op::Trim {
                        lpn: freed[k],
                        pages: n as u64,
                    });
                    k += n;
                }
            }
            Op::InvalidateFile { .. } => ops.push(*op),
        }
    }
    let logical = replay.logical_pages.max(hot_pages).max(1);
    let mut r = finish(ops, logical, replay.source, replay.stats.clone())?;
    r.keep_context_of(replay);
    r.confined_from = Some(replay.footprint_pages);
    Ok(r)
}

/// The hot region [`confine`] uses before ageing: 5/4 of the peak of live
/// pages (the allocation model's default slack), at least 1024 pages.
pub fn hot_region(replay: &Replay) -> u64 {
    (replay.peak_live_pages + replay.peak_live_pages / 4).max(1024)
}

/// Confines the replay into [`hot_region`] when its footprint is larger,
/// so that the `prefill` cold data leaves the workload the room a file
/// system on the aged device would have: the replay unchanged otherwise,
/// when `prefill` is 0, or when the recording was aged already (its file
/// system allocated around the fill, [`Replay::ageing`]).
pub fn fit_for_ageing(replay: Replay, prefill: f64) -> Result<Replay, BuildError> {
    let hot = hot_region(&replay);
    if prefill > 0.0 && replay.ageing.is_empty() && replay.footprint_pages > hot {
        confine(&replay, hot)
    } else {
        Ok(replay)
    }
}

/// The replay as a device without TRIM sees it (a file system mounted
/// without `discard`): the trims are dropped, so freed data stays valid
/// until its page is written again, and deaths are next overwrites only.
/// Policies still hear the file invalidations.
pub fn without_trims(replay: &Replay) -> Result<Replay, BuildError> {
    let ops = replay
        .ops
        .iter()
        .filter(|op| !matches!(op, Op::Trim { .. }))
        .copied()
        .collect();
    let mut r = finish(
        ops,
        replay.logical_pages,
        replay.source,
        replay.stats.clone(),
    )?;
    r.keep_context_of(replay);
    Ok(r)
}
