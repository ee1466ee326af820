//! Lookup tables the unwinders share, with no dependency inside the crate:
//! a module's `.eh_frame_hdr` search table ([`FdeTable`]: function starts and
//! FDEs by address) and [`Memo`], the lock-free direct-mapped memo that
//! `callsite.rs` and `cfi.rs` keep their per-address answers in.

use std::sync::atomic::{AtomicU64, Ordering};
/// Entries of each memo table (a power of two).
const MEMO: usize = 4096;

/// A direct-mapped memo of 32-bit answers keyed by two words and the module
/// table's generation: an entry is `tag << 32 | answer`.
pub struct Memo([AtomicU64; MEMO]);

impl Memo {
    /// An empty memo.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Memo {
        const Z: AtomicU64 = AtomicU64::new(0);
        Memo([Z; MEMO])
    }

    #[inline(always)]
    fn hash(a: usize, b: usize, gen: u64) -> u64 {
        let h = (a as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (b as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ gen.wrapping_mul(0x1656_67b1_9e37_79f9);
        h ^ (h >> 29)
    }

    /// The answer remembered for `(a, b)`, if any.
    #[inline(always)]
    pub fn get(&self, a: usize, b: usize, gen: u64) -> Option<u32> {
        let h = Self::hash(a, b, gen);
        let e = self.0[h as usize & (MEMO - 1)].load(Ordering::Relaxed);
        // Tag 0 marks an empty entry: real tags are forced non-zero.
        (e >> 32 == (h >> 32) | 1).then_some(e as u32)
    }

    /// Remembers `v` for `(a, b)`.
    #[inline(always)]
    pub fn put(&self, a: usize, b: usize, gen: u64, v: u32) {
        let h = Self::hash(a, b, gen);
        self.0[h as usize & (MEMO - 1)].store(((h >> 32) | 1) << 32 | v as u64, Ordering::Relaxed);
    }
}

impl Default for Memo {
    fn default() -> Self {
        Memo::new()
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

/// A module's `.eh_frame_hdr` binary-search table (GNU ld's encoding:
/// `DW_EH_PE_datarel | DW_EH_PE_sdata4` pairs, relative to the header).
#[derive(Debug, Clone, Copy, Default)]
pub struct FdeTable {
    /// Runtime address of `.eh_frame_hdr` (0: none usable).
    hdr: usize,
    /// Entries (pairs of i32: initial location, FDE address).
    n: usize,
}

impl FdeTable {
    /// Parses the header at runtime address `hdr` (from `PT_GNU_EH_FRAME`).
    ///
    /// # Safety
    /// `hdr` must be the mapped `.eh_frame_hdr` of a loaded module.
    pub unsafe fn parse(hdr: usize) -> FdeTable {
        if hdr == 0 {
            return FdeTable::default();
        }
        // SAFETY: the header's first 12 bytes are mapped (caller contract).
        let b = unsafe { std::slice::from_raw_parts(hdr as *const u8, 12) };
        let (version, ptr_enc, count_enc, table_enc) = (b[0], b[1], b[2], b[3]);
        // eh_frame_ptr and fde_count must be 4-byte encodings (udata4 or sdata4).
        let four = |e: u8| matches!(e & 0x0f, 0x03 | 0x0b);
        if version != 1 || !four(ptr_enc) || !four(count_enc) || table_enc != 0x3b {
            return FdeTable::default();
        }
        let n = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
        FdeTable { hdr, n }
    }

    /// The table entry (initial location, FDE address; both relative to the
    /// header) whose initial location is the last one at or below `pc`.
    fn entry_for(&self, pc: usize) -> Option<[i32; 2]> {
        if self.hdr == 0 || self.n == 0 {
            return None;
        }
        let rel = pc.wrapping_sub(self.hdr) as isize;
        // SAFETY: `parse` saw a table of `n` pairs right after the header.
        let t = unsafe { std::slice::from_raw_parts((self.hdr + 12) as *const [i32; 2], self.n) };
        let i = t.partition_point(|e| e[0] as isize <= rel);
        t.get(i.checked_sub(1)?).copied()
    }

    /// The FDE whose initial location is the last one at or below `pc`.
    pub fn fde_for(&self, pc: usize) -> Option<usize> {
        let e = self.entry_for(pc)?;
        Some(self.hdr.wrapping_add(e[1] as isize as usize))
    }

    /// Start of the function whose FDE covers `pc` (by initial location; the
    /// FDE's length is not checked: a gap maps to the previous function).
    pub fn function_start(&self, pc: usize) -> Option<usize> {
        let e = self.entry_for(pc)?;
        Some(self.hdr.wrapping_add(e[0] as isize as usize))
    }
}
