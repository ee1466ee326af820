//! The published mapping table: signature → (stream, hint), written by
//! `pcstreamd` into a file of the runtime directory and read lock-free by
//! every shim through a read-only `mmap`.
//!
//! This module owns the file's layout, its single writer ([`TableWriter`],
//! over any `&[AtomicU64]`, e.g. a shared writable mapping) and its reader
//! ([`TableView`]). It compiles without the `learn` feature, allocates
//! nothing and takes no lock on the read path, so the shim can call
//! [`TableView::lookup`] from inside `write()`.
//!
//! Layout (every field a little-endian `u64`, the file a multiple of 8 bytes):
//!
//! | word | field |
//! |------|-------|
//! | 0 | magic `"PCSTMAP1"` ([`MAGIC`]) |
//! | 1 | format version ([`VERSION`]) |
//! | 2 | slot count `n` (a power of two) |
//! | 3 | generation: bumped after every published change |
//! | 4 | flags: bit 0 = replaced (a newer file took this one's name; reopen) |
//! | 5 | entries in use |
//! | 6 | streams of the mapping |
//! | 7 | reserved (0) |
//! | 8 + 2i | slot i: key (signature; 0 = empty) |
//! | 9 + 2i | slot i: value word |
//!
//! A value word is `version << 32 | valid << 24 | hint << 16 | stream`
//! (`stream` 16 bits, `hint` the `RWH_WRITE_LIFE_*` value, `valid` 1 when the
//! slot maps to a stream, `version` the slot's update count). Slots use
//! linear probing from `mix64(sig) & (n - 1)`; a key, once written, never
//! changes in a file (a signature the mapper forgets keeps its slot with
//! `valid = 0`), so a reader that found the key reads one atomic value word:
//! a torn (stream, hint) pair cannot be observed. A new key is published by
//! storing its value first and the key after it (release/acquire), so a
//! reader that sees the key sees its value. When the table would exceed half
//! full the writer builds a larger file, renames it over the old name and
//! sets the old file's replaced flag.

use crate::signature::mix64;
use std::sync::atomic::{AtomicU64, Ordering};

/// File magic, word 0: the bytes `PCSTMAP1` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PCSTMAP1");
/// Format version, word 1.
pub const VERSION: u64 = 1;
/// Header words before the slots.
pub const HEADER_WORDS: usize = 8;
/// Flag bit of word 4: this file was replaced by a newer one.
pub const FLAG_REPLACED: u64 = 1;

const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_SLOTS: usize = 2;
const W_GENERATION: usize = 3;
const W_FLAGS: usize = 4;
const W_ENTRIES: usize = 5;
const W_STREAMS: usize = 6;

/// Why a mapped file is not a usable table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// Shorter than its header or its slots.
    #[error("mapping table is truncated: {0} bytes")]
    Truncated(usize),
    /// Wrong magic.
    #[error("not a pcstream mapping table (bad magic)")]
    BadMagic,
    /// Unknown format version.
    #[error("mapping table format version {0} is not supported (expected {VERSION})")]
    Version(u64),
    /// Slot count not a power of two.
    #[error("mapping table slot count {0} is not a power of two")]
    BadSlots(u64),
    /// The table has no free slot left for a new signature.
    #[error("mapping table is full ({0} slots)")]
    Full(usize),
}

/// Words a table of `slots` slots takes (header included).
pub const fn table_words(slots: usize) -> usize {
    HEADER_WORDS + 2 * slots
}

/// Packs a value word.
const fn pack(version: u32, valid: bool, hint: u8, stream: u16) -> u64 {
    (version as u64) << 32 | (valid as u64) << 24 | (hint as u64) << 16 | stream as u64
}

/// A read-only view of a mapping table. See the module docs.
#[derive(Debug, Clone, Copy)]
pub struct TableView<'a> {
    words: &'a [AtomicU64],
    mask: usize,
}

impl<'a> TableView<'a> {
    /// Checks the header of `words` and returns a view of it.
    pub fn new(words: &'a [AtomicU64]) -> Result<Self, TableError> {
        if words.len() < HEADER_WORDS {
            return Err(TableError::Truncated(words.len() * 8));
        }
        if words[W_MAGIC].load(Ordering::Relaxed) != MAGIC {
            return Err(TableError::BadMagic);
        }
        let v = words[W_VERSION].load(Ordering::Relaxed);
        if v != VERSION {
            return Err(TableError::Version(v));
        }
        let n = words[W_SLOTS].load(Ordering::Relaxed);
        if n == 0 || !n.is_power_of_two() {
            return Err(TableError::BadSlots(n));
        }
        let n = usize::try_from(n).map_err(|_| TableError::BadSlots(n))?;
        if words.len() < table_words(n) {
            return Err(TableError::Truncated(words.len() * 8));
        }
        Ok(TableView {
            words: &words[..table_words(n)],
            mask: n - 1,
        })
    }

    /// A view of `len` bytes at `ptr` (e.g. a read-only `mmap` of the file).
    ///
    /// # Safety
    /// `ptr` must be 8-byte aligned and valid for reads of `len` bytes for
    /// `'a`; the memory may be changed concurrently only through atomic
    /// 64-bit stores (what [`TableWriter`] does).
    pub unsafe fn from_raw(ptr: *const u8, len: usize) -> Result<Self, TableError> {
        // SAFETY: the caller guarantees alignment, validity for 'a and that
        // concurrent changes are atomic u64 stores; AtomicU64 has the layout of u64.
        let words = unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU64>(), len / 8) };
        TableView::new(words)
    }

    /// Slots − 1 (for [`TableView::from_parts`]).
    #[inline]
    pub fn mask(&self) -> usize {
        self.mask
    }

    /// The view [`TableView::from_raw`] made of `ptr`, rebuilt from `ptr`
    /// and that view's [`TableView::mask`] without reading and checking the
    /// header again: a reader's per-lookup path (the shim's).
    ///
    /// # Safety
    /// As for [`TableView::from_raw`], and `mask` is that of a view
    /// `from_raw` returned for the same memory (a table's slot count never
    /// changes in place: a table that grows is a new file).
    #[inline(always)]
    pub unsafe fn from_parts(ptr: *const u8, mask: usize) -> Self {
        // SAFETY: see the function's contract; the validated view covered
        // `table_words(mask + 1)` words.
        let words =
            unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU64>(), table_words(mask + 1)) };
        TableView { words, mask }
    }

    /// Stream and hint of `sig`, `None` when the table does not map it.
    /// Lock-free and allocation-free: a probe sequence of atomic loads.
    #[inline]
    pub fn lookup(&self, sig: u64) -> Option<(u32, u8)> {
        if sig == 0 {
            return None;
        }
        let mut i = mix64(sig) as usize & self.mask;
        for _ in 0..=self.mask {
            let key = self.words[HEADER_WORDS + 2 * i].load(Ordering::Acquire);
            if key == 0 {
                return None;
            }
            if key == sig {
                let v = self.words[HEADER_WORDS + 2 * i + 1].load(Ordering::Acquire);
                return (v >> 24 & 1 == 1).then_some(((v & 0xffff) as u32, (v >> 16) as u8));
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// The generation: changes whenever the writer publishes a change.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.words[W_GENERATION].load(Ordering::Acquire)
    }

    /// Whether a newer file replaced this one (the reader should reopen).
    #[inline]
    pub fn replaced(&self) -> bool {
        self.words[W_FLAGS].load(Ordering::Acquire) & FLAG_REPLACED != 0
    }

    /// Slots in use.
    pub fn entries(&self) -> u64 {
        self.words[W_ENTRIES].load(Ordering::Relaxed)
    }

    /// Streams of the mapping.
    pub fn streams(&self) -> u32 {
        self.words[W_STREAMS].load(Ordering::Relaxed) as u32
    }

    /// Slot count.
    pub fn slots(&self) -> usize {
        self.mask + 1
    }

    /// Every mapped signature with its stream and hint (for tools; allocates).
    pub fn entries_vec(&self) -> Vec<(u64, u32, u8)> {
        (0..=self.mask)
            .filter_map(|i| {
                let k = self.words[HEADER_WORDS + 2 * i].load(Ordering::Acquire);
                if k == 0 {
                    return None;
                }
                let v = self.words[HEADER_WORDS + 2 * i + 1].load(Ordering::Acquire);
                (v >> 24 & 1 == 1).then_some((k, (v & 0xffff) as u32, (v >> 16) as u8))
            })
            .collect()
    }
}

/// The single writer of a mapping table (the daemon). Readers may run
/// concurrently in other processes.
#[derive(Debug)]
pub struct TableWriter<'a> {
    words: &'a [AtomicU64],
    mask: usize,
}

impl<'a> TableWriter<'a> {
    /// Formats `words` as an empty table of `slots` slots (a power of two;
    /// `words` must hold [`table_words`]`(slots)`).
    pub fn init(words: &'a [AtomicU64], slots: usize, streams: u32) -> Result<Self, TableError> {
        if slots == 0 || !slots.is_power_of_two() {
            return Err(TableError::BadSlots(slots as u64));
        }
        if words.len() < table_words(slots) {
            return Err(TableError::Truncated(words.len() * 8));
        }
        for w in &words[..table_words(slots)] {
            w.store(0, Ordering::Relaxed);
        }
        words[W_VERSION].store(VERSION, Ordering::Relaxed);
        words[W_SLOTS].store(slots as u64, Ordering::Relaxed);
        words[W_STREAMS].store(u64::from(streams), Ordering::Relaxed);
        words[W_MAGIC].store(MAGIC, Ordering::Release);
        Ok(TableWriter {
            words: &words[..table_words(slots)],
            mask: slots - 1,
        })
    }

    /// Re-attaches to an existing table (checked like [`TableView::new`]).
    pub fn attach(words: &'a [AtomicU64]) -> Result<Self, TableError> {
        let v = TableView::new(words)?;
        Ok(TableWriter {
            words: v.words,
            mask: v.mask,
        })
    }

    /// A reader's view of the same table.
    pub fn view(&self) -> TableView<'a> {
        TableView {
            words: self.words,
            mask: self.mask,
        }
    }

    /// Maps `sig` to `Some((stream, hint))`, or unmaps it with `None`.
    /// Does not bump the generation: call [`TableWriter::publish`] after a
    /// batch of changes. Signature 0 is never stored.
    pub fn set(&mut self, sig: u64, value: Option<(u32, u8)>) -> Result<(), TableError> {
        if sig == 0 {
            return Ok(());
        }
        let mut i = mix64(sig) as usize & self.mask;
        for _ in 0..=self.mask {
            let kw = &self.words[HEADER_WORDS + 2 * i];
            let vw = &self.words[HEADER_WORDS + 2 * i + 1];
            let key = kw.load(Ordering::Relaxed);
            if key == sig {
                let old = vw.load(Ordering::Relaxed);
                let ver = ((old >> 32) as u32).wrapping_add(1);
                let new = match value {
                    Some((s, h)) => pack(ver, true, h, s as u16),
                    None => pack(ver, false, 0, 0),
                };
                if (old & 0xffff_ffff) != (new & 0xffff_ffff) {
                    vw.store(new, Ordering::Release);
                }
                return Ok(());
            }
            if key == 0 {
                let Some((s, h)) = value else {
                    return Ok(());
                };
                vw.store(pack(1, true, h, s as u16), Ordering::Release);
                kw.store(sig, Ordering::Release);
                self.words[W_ENTRIES].fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            i = (i + 1) & self.mask;
        }
        Err(TableError::Full(self.mask + 1))
    }

    /// Announces the changes made since the last call (generation + 1).
    pub fn publish(&mut self) {
        self.words[W_GENERATION].fetch_add(1, Ordering::AcqRel);
    }

    /// Sets the generation (a new file continues its predecessor's count).
    pub fn set_generation(&mut self, g: u64) {
        self.words[W_GENERATION].store(g, Ordering::Release);
    }

    /// Marks this file replaced by a newer one.
    pub fn mark_replaced(&mut self) {
        self.words[W_FLAGS].fetch_or(FLAG_REPLACED, Ordering::AcqRel);
    }

    /// Whether one more signature fits under the half-full load limit.
    pub fn has_room(&self, more: usize) -> bool {
        (self.view().entries() as usize + more) * 2 <= self.mask + 1
    }
}

/// Slot count for `entries` signatures at most half full (at least 1024).
pub fn slots_for(entries: usize) -> usize {
    (entries.saturating_mul(2)).max(1024).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn words(slots: usize) -> Vec<AtomicU64> {
        (0..table_words(slots)).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn set_lookup_unmap_and_header_checks() {
        let w = words(16);
        let mut t = TableWriter::init(&w, 16, 4).unwrap();
        assert_eq!(t.view().lookup(7), None);
        t.set(7, Some((2, 3))).unwrap();
        t.set(0, Some((1, 1))).unwrap();
        t.set(23, Some((1, 2))).unwrap();
        t.publish();
        let v = TableView::new(&w).unwrap();
        assert_eq!(v.lookup(7), Some((2, 3)));
        assert_eq!(v.lookup(23), Some((1, 2)));
        assert_eq!(v.lookup(0), None);
        assert_eq!(v.generation(), 1);
        assert_eq!(v.entries(), 2);
        t.set(7, None).unwrap();
        assert_eq!(v.lookup(7), None);
        assert_eq!(v.lookup(23), Some((1, 2)));
        for s in 100..114 {
            t.set(s, Some((1, 2))).unwrap();
        }
        assert_eq!(t.set(999, Some((1, 2))), Err(TableError::Full(16)));
        assert!(!t.has_room(1));
        w[0].store(1, Ordering::Relaxed);
        assert_eq!(TableView::new(&w).unwrap_err(), TableError::BadMagic);
        assert!(matches!(
            TableView::new(&w[..3]),
            Err(TableError::Truncated(24))
        ));
        let w2 = words(16);
        TableWriter::init(&w2, 16, 4).unwrap();
        assert!(matches!(
            TableView::new(&w2[..20]),
            Err(TableError::Truncated(_))
        ));
        w2[2].store(12, Ordering::Relaxed);
        assert_eq!(TableView::new(&w2).unwrap_err(), TableError::BadSlots(12));
    }

    /// A writer flips every signature between two (stream, hint) pairs and
    /// inserts new signatures while readers look them up: a reader only ever
    /// sees a pair the writer wrote for that signature, never a mix.
    #[test]
    fn concurrent_writer_never_tears_a_read() {
        const SIGS: u64 = 400;
        let w: Arc<Vec<AtomicU64>> = Arc::new(words(1024));
        TableWriter::init(&w, 1024, 9).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // (stream, hint) pairs for signature s, round r: stream and hint
        // both derive from (s, r) so a mixed read is detectable.
        fn pair(s: u64, r: u64) -> (u32, u8) {
            let x = (s * 7 + r) % 8 + 1;
            (x as u32, (x * 3 % 251) as u8)
        }
        let writer = {
            let (w, stop) = (w.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut t = TableWriter::attach(&w).unwrap();
                let mut r = 0;
                while !stop.load(Ordering::Relaxed) {
                    for s in 1..=SIGS.min(r + 1) {
                        t.set(s, Some(pair(s, r))).unwrap();
                    }
                    t.publish();
                    r += 1;
                }
                r
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                std::thread::spawn(move || {
                    let v = TableView::new(&w).unwrap();
                    let mut seen = 0u64;
                    let mut last_gen = 0;
                    for _ in 0..20_000 {
                        let g = v.generation();
                        assert!(g >= last_gen, "generation went back");
                        last_gen = g;
                        for s in 1..=SIGS {
                            if let Some((stream, hint)) = v.lookup(s) {
                                assert_eq!(
                                    u64::from(hint),
                                    u64::from(stream) * 3 % 251,
                                    "torn read for signature {s}"
                                );
                                seen += 1;
                            }
                        }
                    }
                    seen
                })
            })
            .collect();
        let seen: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        stop.store(true, Ordering::Relaxed);
        let rounds = writer.join().unwrap();
        assert!(rounds > 1 && seen > 0, "rounds {rounds}, reads {seen}");
    }
}
