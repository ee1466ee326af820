//! The greedy victim index: closed blocks kept in intrusive doubly-linked
//! lists, one per valid-page count, plus a lower bound on the smallest
//! non-empty count. Moving a block down one count (a page invalidated) is
//! O(1); taking the block with the fewest valid pages is O(1) amortised,
//! because the lower bound only rises while scanning and falls by at most
//! one per invalidation.

const NIL: u32 = u32::MAX;

/// Closed blocks bucketed by valid count.
#[derive(Debug, Clone)]
pub struct Buckets {
    heads: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// No bucket below this index is non-empty.
    min_hint: usize,
    len: usize,
}

impl Buckets {
    /// An empty index for `blocks` blocks with up to `max_valid` valid pages each.
    pub fn new(blocks: usize, max_valid: usize) -> Self {
        Buckets {
            heads: vec![NIL; max_valid + 1],
            prev: vec![NIL; blocks],
            next: vec![NIL; blocks],
            min_hint: max_valid + 1,
            len: 0,
        }
    }

    /// Blocks in the index.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds block `b` with `valid` valid pages (at the head of its bucket).
    #[inline]
    pub fn insert(&mut self, b: u32, valid: u32) {
        let v = valid as usize;
        let h = self.heads[v];
        self.prev[b as usize] = NIL;
        self.next[b as usize] = h;
        if h != NIL {
            self.prev[h as usize] = b;
        }
        self.heads[v] = b;
        if v < self.min_hint {
            self.min_hint = v;
        }
        self.len += 1;
    }

    /// Removes block `b`, which is in bucket `valid`.
    #[inline]
    pub fn remove(&mut self, b: u32, valid: u32) {
        let (p, n) = (self.prev[b as usize], self.next[b as usize]);
        if p == NIL {
            self.heads[valid as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.len -= 1;
    }

    /// Block `b` went from `valid` to `valid − 1` valid pages.
    #[inline]
    pub fn decrement(&mut self, b: u32, valid: u32) {
        self.remove(b, valid);
        self.insert(b, valid - 1);
    }

    /// Removes and returns a block with the fewest valid pages and that count.
    pub fn pop_min(&mut self) -> Option<(u32, u32)> {
        if self.len == 0 {
            return None;
        }
        let mut v = self.min_hint;
        while self.heads[v] == NIL {
            v += 1;
        }
        self.min_hint = v;
        let b = self.heads[v];
        self.remove(b, v as u32);
        Some((b, v as u32))
    }

    /// Whether block `b` is in bucket `valid` (a walk of that bucket; for checks).
    pub fn contains(&self, b: u32, valid: u32) -> bool {
        let mut x = self.heads[valid as usize];
        while x != NIL {
            if x == b {
                return true;
            }
            x = self.next[x as usize];
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pop_min_matches_a_naive_index(ops in prop::collection::vec((0u32..16, 0u32..9, 0u8..3), 1..300)) {
            let mut b = Buckets::new(16, 8);
            let mut naive: Vec<Option<u32>> = vec![None; 16];
            for (blk, val, kind) in ops {
                match (kind, naive[blk as usize]) {
                    (0, None) => { b.insert(blk, val); naive[blk as usize] = Some(val); }
                    (1, Some(v)) if v > 0 => { b.decrement(blk, v); naive[blk as usize] = Some(v - 1); }
                    (2, _) => {
                        let want = naive.iter().filter_map(|v| *v).min();
                        let got = b.pop_min();
                        prop_assert_eq!(got.map(|(_, v)| v), want);
                        if let Some((blk, v)) = got {
                            prop_assert_eq!(naive[blk as usize], Some(v));
                            naive[blk as usize] = None;
                        }
                    }
                    _ => {}
                }
                prop_assert_eq!(b.len(), naive.iter().filter(|v| v.is_some()).count());
                for (i, v) in naive.iter().enumerate() {
                    if let Some(v) = v { prop_assert!(b.contains(i as u32, *v)); }
                }
            }
        }
    }
}
