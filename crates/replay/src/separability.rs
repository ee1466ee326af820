//! What could tell one signature's page lifetimes apart: of the spread of
//! the log2 device lifetimes of a signature's pages, the share each of two
//! observables explains (one minus the within-group variance over the
//! total, the correlation ratio η²):
//!
//! * **the time since the page's address was last written** (log2, in
//!   steps of 2; first writes a group of their own): what pcstream's
//!   previous-lifetime keys and the LBA schemes see;
//! * **the page's place in its device write** (last page, second last,
//!   3rd–4th, 5th–8th, further from the end): a part no host placement can
//!   use, since one device write carries one stream, and with buffered
//!   files the hint is the inode's at writeback.
//!
//! A signature whose spread the write's tail explains and its history does
//! not mixes lifetimes inside each write (PostgreSQL's WAL: the 8 KiB page
//! being filled is the last one of every write and is rewritten at the
//! next commit; the pages before it are final). Used by
//! [`crate::signatures`] (`compare --explain`).

use std::collections::HashMap;

/// Count, sum and sum of squares of a sample.
#[derive(Debug, Default, Clone, Copy)]
struct Moments {
    n: f64,
    sum: f64,
    sumsq: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1.0;
        self.sum += x;
        self.sumsq += x * x;
    }

    /// Sum of squared deviations from the mean.
    fn ss(&self) -> f64 {
        if self.n == 0.0 {
            0.0
        } else {
            (self.sumsq - self.sum * self.sum / self.n).max(0.0)
        }
    }
}

/// A sample grouped one way: the share of its variance the groups explain.
#[derive(Debug, Default, Clone)]
pub(crate) struct Explained {
    total: Moments,
    groups: HashMap<u8, Moments>,
}

impl Explained {
    pub(crate) fn add(&mut self, group: u8, x: f64) {
        self.total.add(x);
        self.groups.entry(group).or_default().add(x);
    }

    /// Standard deviation of the whole sample; `None` when empty.
    pub(crate) fn spread(&self) -> Option<f64> {
        (self.total.n > 0.0).then(|| (self.total.ss() / self.total.n).sqrt())
    }

    /// The share of the variance between the groups' means, in [0, 1];
    /// `None` with fewer than two values or no variance at all.
    pub(crate) fn share(&self) -> Option<f64> {
        let total = self.total.ss();
        if self.total.n < 2.0 || total <= 1e-12 * self.total.n {
            return None;
        }
        let within: f64 = self.groups.values().map(Moments::ss).sum();
        Some((1.0 - within / total).clamp(0.0, 1.0))
    }
}

/// The group of a page `from_end` pages before the end of its device
/// write: 0 (the last), 1, 2–3, 4–7, 8 and more.
pub(crate) fn tail_group(from_end: u64) -> u8 {
    match from_end {
        0 => 0,
        1 => 1,
        2..=3 => 2,
        4..=7 => 3,
        _ => 4,
    }
}

/// The group of a page whose address was last written `prev` host pages
/// before (`None`: never): log2 in steps of 2, first writes apart.
pub(crate) fn history_group(prev: Option<u64>) -> u8 {
    prev.map_or(u8::MAX, |p| (p.max(1).ilog2() / 2) as u8)
}

/// Host time of each address's latest write, for [`history_group`].
#[derive(Debug, Default)]
pub(crate) struct LastWrite(Vec<u64>);

impl LastWrite {
    /// Address `lpn` is written at `now`; returns how long ago it was
    /// written before (`None`: never).
    pub(crate) fn write(&mut self, lpn: u64, now: u64) -> Option<u64> {
        let i = usize::try_from(lpn).ok()?;
        if i >= self.0.len() {
            self.0.resize(i + 1, u64::MAX);
        }
        let before = std::mem::replace(&mut self.0[i], now);
        (before != u64::MAX).then(|| now.saturating_sub(before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pure_groups_explain_everything_and_equal_means_nothing() {
        let mut pure = Explained::default();
        let mut none = Explained::default();
        for i in 0..100 {
            // Group 0 always 2, group 1 always 10.
            pure.add((i % 2) as u8, if i % 2 == 0 { 2.0 } else { 10.0 });
            // Both groups hold 2s and 10s alike.
            none.add((i % 2) as u8, if (i / 2) % 2 == 0 { 2.0 } else { 10.0 });
        }
        assert!((pure.share().unwrap() - 1.0).abs() < 1e-9);
        assert!(none.share().unwrap() < 1e-9);
        assert!((pure.spread().unwrap() - 4.0).abs() < 1e-9);
        // Half and half: a third group with the overall mean adds nothing.
        let mut half = Explained::default();
        for (g, x) in [(0, 0.0), (0, 2.0), (1, 4.0), (1, 6.0)] {
            half.add(g, x);
        }
        // Total SS 20, within 2 + 2: 0.8 explained.
        assert!((half.share().unwrap() - 0.8).abs() < 1e-9);
    }

    #[test]
    fn no_share_without_a_spread() {
        let mut e = Explained::default();
        assert_eq!(e.share(), None);
        assert_eq!(e.spread(), None);
        e.add(0, 5.0);
        assert_eq!(e.share(), None);
        e.add(1, 5.0);
        assert_eq!(e.share(), None, "no variance to explain");
        assert_eq!(e.spread(), Some(0.0));
    }

    #[test]
    fn groups_and_history() {
        let tails: Vec<u8> = [0, 1, 2, 3, 4, 7, 8, 1000].map(tail_group).to_vec();
        assert_eq!(tails, vec![0, 1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(history_group(None), u8::MAX);
        assert_eq!(history_group(Some(0)), 0);
        assert_eq!(history_group(Some(3)), 0);
        assert_eq!(history_group(Some(4)), 1);
        assert_eq!(history_group(Some(1 << 20)), 10);
        let mut l = LastWrite::default();
        assert_eq!(l.write(5, 10), None);
        assert_eq!(l.write(5, 17), Some(7));
        assert_eq!(l.write(2, 18), None);
        assert_eq!(l.write(5, 18), Some(1));
    }
}
