//! Which signature wrote each live byte range of a file: a map of disjoint
//! extents, coalesced when a signature appends to its own data, so that data
//! dying later (truncate, hole punch, unlink) can be charged to its writer.

use std::collections::BTreeMap;

/// Disjoint `[start, end)` ranges of one file, each with the signature that
/// last wrote it.
#[derive(Debug, Default, Clone)]
pub struct ExtentMap {
    /// start → (end, signature)
    map: BTreeMap<u64, (u64, u64)>,
}

impl ExtentMap {
    /// Removes `[start, end)` and returns the removed bytes per signature.
    pub fn remove(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        if start >= end {
            return out;
        }
        // The extent starting before `start` may overlap it.
        let first = self
            .map
            .range(..start)
            .next_back()
            .filter(|(_, (e, _))| *e > start)
            .map(|(s, _)| *s);
        let keys: Vec<u64> = first
            .into_iter()
            .chain(self.map.range(start..end).map(|(s, _)| *s))
            .collect();
        for s in keys {
            let (e, sig) = self.map.remove(&s).expect("key just listed");
            let cut_s = s.max(start);
            let cut_e = e.min(end);
            if s < cut_s {
                self.map.insert(s, (cut_s, sig));
            }
            if cut_e < e {
                self.map.insert(cut_e, (e, sig));
            }
            match out.iter_mut().find(|(g, _)| *g == sig) {
                Some((_, n)) => *n += cut_e - cut_s,
                None => out.push((sig, cut_e - cut_s)),
            }
        }
        out
    }

    /// Records that `sig` wrote `[start, end)`; returns the bytes it
    /// overwrote per signature (data that died by being overwritten).
    pub fn write(&mut self, start: u64, end: u64, sig: u64) -> Vec<(u64, u64)> {
        if start >= end {
            return Vec::new();
        }
        let over = self.remove(start, end);
        let mut s = start;
        let mut e = end;
        if let Some((&ps, &(pe, psig))) = self.map.range(..start).next_back() {
            if pe == start && psig == sig {
                self.map.remove(&ps);
                s = ps;
            }
        }
        if let Some(&(ne, nsig)) = self.map.get(&end) {
            if nsig == sig {
                self.map.remove(&end);
                e = ne;
            }
        }
        self.map.insert(s, (e, sig));
        over
    }

    /// Removes everything; returns the bytes per signature.
    pub fn clear(&mut self) -> Vec<(u64, u64)> {
        self.remove(0, u64::MAX)
    }

    /// Number of extents held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn appends_coalesce_and_removal_splits() {
        let mut m = ExtentMap::default();
        for i in 0..100 {
            m.write(i * 10, i * 10 + 10, 7);
        }
        assert_eq!(m.len(), 1);
        assert_eq!(m.remove(95, 105), vec![(7, 10)]);
        assert_eq!(m.len(), 2);
        assert_eq!(m.write(0, 50, 8), vec![(7, 50)]);
        assert_eq!(m.clear(), vec![(8, 50), (7, 940)]);
        assert_eq!(m.len(), 0);
    }

    proptest! {
        /// Against a byte-per-byte model: what `remove`/`clear` return per
        /// signature equals the bytes the model held for it.
        #[test]
        fn matches_a_byte_model(ops in proptest::collection::vec((0u64..200, 1u64..40, 1u64..4, any::<bool>()), 1..60)) {
            let mut m = ExtentMap::default();
            let mut model = vec![0u64; 256];
            for (off, len, sig, is_write) in ops {
                let end = off + len;
                let mut expect = std::collections::BTreeMap::new();
                for b in &mut model[off as usize..end as usize] {
                    if *b != 0 { *expect.entry(*b).or_insert(0u64) += 1; }
                    *b = if is_write { sig } else { 0 };
                }
                let got: std::collections::BTreeMap<u64, u64> =
                    if is_write { m.write(off, end, sig) } else { m.remove(off, end) }.into_iter().collect();
                prop_assert_eq!(got, expect);
            }
            let mut expect = std::collections::BTreeMap::new();
            for b in model.iter().filter(|b| **b != 0) { *expect.entry(*b).or_insert(0u64) += 1; }
            let got: std::collections::BTreeMap<u64, u64> = m.clear().into_iter().collect();
            prop_assert_eq!(got, expect);
        }
    }
}
