//! Lock-free "seen before?" sets of 64-bit keys (signatures, inodes), so a
//! process emits each `SignatureInfo` and `OpenEvent` once.
//!
//! Open addressing over a fixed array of atomics, bounded probing; when the
//! probe window is full the key counts as new (a harmless duplicate event).

use pcstream_placement::signature::mix64;
use std::sync::atomic::{AtomicU64, Ordering};

const PROBES: usize = 16;

/// A fixed-capacity concurrent set of non-zero keys.
#[derive(Debug)]
pub struct SeenSet<const N: usize> {
    slots: [AtomicU64; N],
}

impl<const N: usize> SeenSet<N> {
    /// An empty set.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Self {
        const Z: AtomicU64 = AtomicU64::new(0);
        SeenSet { slots: [Z; N] }
    }

    /// Inserts `key`; true when it was not there before.
    pub fn insert(&self, key: u64) -> bool {
        let key = if key == 0 { 1 } else { key };
        let start = (mix64(key) as usize) % N;
        for i in 0..PROBES {
            let s = &self.slots[(start + i) % N];
            let v = s.load(Ordering::Relaxed);
            if v == key {
                return false;
            }
            if v == 0 {
                match s.compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(now) if now == key => return false,
                    Err(_) => {}
                }
            }
        }
        true
    }

    /// Empties the set (fork child: single-threaded).
    pub fn clear(&self) {
        for s in self.slots.iter() {
            s.store(0, Ordering::Relaxed);
        }
    }
}

impl<const N: usize> Default for SeenSet<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_once_then_seen() {
        let s = SeenSet::<64>::new();
        assert!(s.insert(5));
        assert!(!s.insert(5));
        assert!(s.insert(0));
        assert!(!s.insert(1), "0 and 1 share a slot by design");
        s.clear();
        assert!(s.insert(5));
    }

    #[test]
    fn overfull_set_reports_new_instead_of_hanging() {
        let s = SeenSet::<4>::new();
        for k in 1..100u64 {
            s.insert(k);
        }
        assert!(s.insert(1000));
    }
}
