//! Placing the pages of one write in one step: [`PcStream::place_pages`].
//!
//! The daemon learns a write page by page: each page has its own logical
//! time (the byte clock at its first byte), as in the replay. A 1 MiB
//! append (a WAL or an SST being written, a compiler's output) was then
//! 256 rounds of table lookups, hashing and B-tree searches, and the
//! daemon's learner spent about 0.3 s of CPU per 4 GB that db_bench wrote.
//! Here the pages of a write from its last live page on (an append: all
//! of them, or all but the first when the append does not start on a page
//! boundary) are placed chunk by chunk instead, the live ones before them
//! page by page, with exactly the outcome of page-by-page feeding: the same
//! segments, signature statistics, counters, returned stream, and
//! re-clusterings at the same page (a piece is cut where the mapper's next
//! check falls). A learner that keeps per-LBA write counts goes page by
//! page throughout.

use super::PcStream;
use crate::lifetime::LBA_SPACE;
use crate::placement::{Placement, StreamId, WriteCtx};

impl PcStream {
    /// Places the `pages` pages of one write: page `i` is `w` (a one-page
    /// write context) with `lpn` and `file_page` advanced by `i` and its
    /// time `time_at(i)`, non-decreasing in `i`. Learns exactly what
    /// `pages` calls of [`Placement::place`], one per page, learn, and
    /// returns the last page's stream (`pages` = 0: nothing is learnt,
    /// and the stream is the signature's).
    pub fn place_pages(
        &mut self,
        w: &WriteCtx,
        pages: u64,
        time_at: impl Fn(u64) -> u64,
    ) -> StreamId {
        let page = |i: u64| WriteCtx {
            time: time_at(i),
            lpn: w.lpn.wrapping_add(i),
            file_page: w.file_page.wrapping_add(i),
            pages: 1,
            ..*w
        };
        let (space, first) = match w.file {
            Some(f) if !self.key_by_lba => (f, w.file_page),
            _ => (LBA_SPACE, w.lpn),
        };
        // Pages up to the last live one go page by page (an append that
        // does not start on a page boundary rewrites its first page), the
        // rest in one step when at least two are left.
        let by_page = if w.pages == 1
            && !self.keep_counts
            && w.lpn.checked_add(pages).is_some()
            && w.file_page.checked_add(pages).is_some()
        {
            self.lm
                .last_live(space, first, pages)
                .map_or(0, |l| l - first + 1)
        } else {
            pages
        };
        let sig = w.signature.unwrap_or(0);
        if pages - by_page < 2 {
            let mut stream = self.mapper.stream(sig);
            for i in 0..pages {
                stream = self.place(&page(i));
            }
            return stream;
        }
        for i in 0..by_page {
            self.place(&page(i));
        }
        // Every page from `by_page` on is an append: the same key (no
        // previous lifetime), nothing overwritten.
        let (key, _) = self.key_of(sig, &page(by_page), space, first + by_page, 0);
        if sig != 0 && key != sig && self.refined.insert(key) {
            self.signatures.insert(sig);
        }
        let cp = u64::from(self.lm.config().chunk_pages);
        let appended = pages - by_page;
        let mut last_stream = None;
        let mut i = by_page;
        while i < pages {
            let p = first + i;
            // The rest of this chunk.
            let piece_end = pages.min((p / cp + 1).saturating_mul(cp) - first);
            // The first page after whose write the mapper looks again.
            let check = self.mapper.next_check();
            let stop = first_at_or_after(i, piece_end, |j| time_at(j).saturating_add(1) >= check);
            let end = if stop < piece_end {
                stop + 1
            } else {
                piece_end
            };
            self.lm
                .append_pages(space, p, end - i, key, time_at(i), time_at(end - 1));
            if stop < piece_end {
                if stop == pages - 1 {
                    // The last page's stream is chosen before its check.
                    last_stream = Some(self.append_stream(w, sig, key, appended));
                }
                self.mapper
                    .maybe_recluster(&self.lm, time_at(stop).saturating_add(1));
            }
            i = end;
        }
        last_stream.unwrap_or_else(|| self.append_stream(w, sig, key, appended))
    }

    /// The stream of an append's last page (`key` under the mapper as it
    /// stands, then file affinity over the `pages` appended, which it
    /// counts).
    fn append_stream(&mut self, w: &WriteCtx, sig: u64, key: u64, pages: u64) -> StreamId {
        // No write counts are kept here, so an unplaced key borrows its
        // signature's stream (never the write-interval rule of `place`).
        let stream = self
            .mapper
            .assigned(key)
            .unwrap_or_else(|| self.mapper.stream(sig));
        match w.file {
            Some(f) if self.refine.file_affinity && !self.key_by_lba && sig != 0 => {
                self.file_affinity(f, key, false, pages, stream)
            }
            _ => stream,
        }
    }
}

/// The first `j` in `a..b` with `pred(j)` (`b` if none), `pred` being
/// false then true along the range.
fn first_at_or_after(mut a: u64, mut b: u64, pred: impl Fn(u64) -> bool) -> u64 {
    while a < b {
        let m = a + (b - a) / 2;
        if pred(m) {
            b = m;
        } else {
            a = m + 1;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifetime::LifetimeConfig;
    use crate::mapper::MapperConfig;
    use crate::pcstream::{PcStreamConfig, RefineConfig};
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// File, first page, pages, signature (0 = none), app hint.
        Write(u64, u64, u64, u64, u8),
        /// File, first page, pages (`u64::MAX` = to the end).
        Invalidate(u64, u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..4u64, 0..64u64, 1..40u64, 0..4u64, prop_oneof![Just(0u8), 2..6u8])
                .prop_map(|(f, p, n, s, h)| Op::Write(f, p, n, s, h)),
            1 => (0..4u64, 0..64u64, prop_oneof![1..16u64, Just(u64::MAX)])
                .prop_map(|(f, p, n)| Op::Invalidate(f, p, n)),
        ]
    }

    fn config(chunk_pages: u32, refine: bool, by_lba: bool, unattributed: bool) -> PcStreamConfig {
        PcStreamConfig {
            lifetime: LifetimeConfig {
                chunk_pages,
                max_entries: 48,
                ..Default::default()
            },
            mapper: MapperConfig {
                first_interval: 3,
                check_interval: 11,
                censor_min_age: 20,
                ..Default::default()
            },
            refine: if refine {
                RefineConfig {
                    lba_writes: false,
                    ..RefineConfig::default()
                }
            } else {
                RefineConfig::none()
            },
            key_by_lba: by_lba,
            learn_unattributed: unattributed,
            ..Default::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Whole writes through `place_pages` and the same writes page by
        /// page through `place` learn the same: streams returned, mapping,
        /// signature statistics and counters, after every operation.
        #[test]
        fn a_write_placed_at_once_learns_what_its_pages_learn_one_by_one(
            ops in proptest::collection::vec(op(), 1..80),
            chunk_pages in prop_oneof![Just(1u32), Just(4), Just(16), Just(256)],
            refine: bool,
            by_lba: bool,
            unattributed: bool,
        ) {
            let cfg = config(chunk_pages, refine, by_lba, unattributed);
            let mut whole = PcStream::new(3, cfg.clone());
            let mut paged = PcStream::new(3, cfg);
            let mut bytes = 0u64;
            for op in ops {
                match op {
                    Op::Write(f, p, n, s, h) => {
                        // Byte offsets not page-aligned, as a program's.
                        let offset = p * 4096 + 100;
                        let w = WriteCtx {
                            lpn: 1000 * f + p,
                            pages: 1,
                            file: Some((1, f)),
                            file_page: p,
                            signature: (s != 0).then_some(s),
                            app_hint: h,
                            ..Default::default()
                        };
                        let t = |i: u64| crate::online::page_time(bytes, offset, p + i);
                        let a = whole.place_pages(&w, n, t);
                        let mut b = 0;
                        for i in 0..n {
                            b = paged.place(&WriteCtx {
                                time: t(i),
                                lpn: w.lpn + i,
                                file_page: p + i,
                                ..w
                            });
                        }
                        prop_assert_eq!(a, b);
                        bytes += n * 4096;
                    }
                    Op::Invalidate(f, p, n) => {
                        let now = bytes / 4096;
                        whole.invalidate_file((1, f), p, n, now);
                        paged.invalidate_file((1, f), p, n, now);
                    }
                }
                prop_assert_eq!(whole.mapper().table(), paged.mapper().table());
                prop_assert_eq!(whole.export_sigs(), paged.export_sigs());
                prop_assert_eq!(whole.counters(), paged.counters());
                prop_assert_eq!(whole.lifetimes().counters(), paged.lifetimes().counters());
            }
        }
    }

    #[test]
    fn the_search_finds_the_first_page_at_the_check() {
        assert_eq!(first_at_or_after(0, 10, |j| j >= 4), 4);
        assert_eq!(first_at_or_after(0, 10, |_| false), 10);
        assert_eq!(first_at_or_after(3, 10, |_| true), 3);
        assert_eq!(first_at_or_after(5, 5, |_| true), 5);
    }
}
