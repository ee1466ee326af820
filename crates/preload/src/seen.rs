//! Lock-free "seen before?" sets of 64-bit keys (signatures, inodes), so a
//! process emits each `SignatureInfo` and `OpenEvent` once.
//!
//! Open addressing over a fixed array of atomics, bounded probing; when the
//! probe window is full the key counts as new (a harmless duplicate event).
//! A removed key leaves a tombstone that a later insert may reuse; races
//! between a remove and inserts of the same key at worst make the key count
//! as new once more (again a harmless duplicate).

use pcstream_placement::signature::mix64;
use std::sync::atomic::{AtomicU64, Ordering};

const PROBES: usize = 16;
/// A removed key's slot (never a stored key: keys are mapped away from it).
const TOMB: u64 = u64::MAX;

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

    fn norm(key: u64) -> u64 {
        match key {
            0 => 1,
            TOMB => TOMB - 1,
            k => k,
        }
    }

    /// Inserts `key`; true when it was not there before.
    pub fn insert(&self, key: u64) -> bool {
        let key = Self::norm(key);
        let start = (mix64(key) as usize) % N;
        // The key may sit after a tombstone: look through the window first.
        let mut free = None;
        for i in 0..PROBES {
            let s = &self.slots[(start + i) % N];
            let v = s.load(Ordering::Relaxed);
            if v == key {
                return false;
            }
            if v == 0 || v == TOMB {
                free.get_or_insert(s);
                if v == 0 {
                    break;
                }
            }
        }
        if let Some(s) = free {
            let v = s.load(Ordering::Relaxed);
            if (v == 0 || v == TOMB)
                && s.compare_exchange(v, key, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                // Lost a race for the slot: whoever won, counting the key
                // as seen could lose an event; counting it new cannot.
                return s.load(Ordering::Relaxed) != key;
            }
        }
        true
    }

    /// Forgets `key` (an inode number that was freed may name a new file).
    pub fn remove(&self, key: u64) {
        let key = Self::norm(key);
        let start = (mix64(key) as usize) % N;
        for i in 0..PROBES {
            let s = &self.slots[(start + i) % N];
            let v = s.load(Ordering::Relaxed);
            if v == key {
                let _ = s.compare_exchange(key, TOMB, Ordering::Relaxed, Ordering::Relaxed);
            }
            if v == 0 {
                return;
            }
        }
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
    fn removed_key_is_new_again_and_others_stay() {
        let s = SeenSet::<8>::new();
        for k in 1..=6u64 {
            assert!(s.insert(k));
        }
        s.remove(3);
        assert!(s.insert(3), "a removed key is new again");
        assert!(!s.insert(3));
        for k in [1u64, 2, 4, 5, 6] {
            assert!(!s.insert(k), "{k} survives the removal of another key");
        }
        s.remove(u64::MAX);
        assert!(s.insert(u64::MAX));
        assert!(
            !s.insert(u64::MAX - 1),
            "MAX and MAX-1 share a slot by design"
        );
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
