//! Call-site validation for the stack scan: is a stack word that points into
//! code really the return address of a call into the frame below it?
//!
//! A scan (the last resort for code without frame pointers) reads every
//! stack word above the last trusted frame and keeps those inside
//! executable mappings. Many are stale: return addresses left by calls that
//! already returned (below a signal frame: whatever the interrupted code
//! did last), function pointers, the vdso's own base. Each would split one
//! call path into several signatures. A candidate `ra` is kept only when
//! * the bytes before it are a `call` instruction (`e8 rel32`, or
//!   `ff /2` with any addressing form, optionally REX-prefixed), and
//! * for a direct call whose target can be resolved (in the same module, or
//!   through a PLT stub / `-fno-plt` GOT slot already bound), the target is
//!   the start of the function holding the previous frame's address, the
//!   function starts coming from the module's `.eh_frame_hdr` search table
//!   (the FDE initial locations, sorted: a binary search, no allocation).
//!
//! Indirect calls through a register or memory cannot be resolved and are
//! accepted.
//!
//! Both answers are memoised in small lock-free direct-mapped tables ([`Memo`]:
//! one atomic word per entry, tagged with a hash of the key and the module
//! table's generation; a race costs a miss, never a wrong answer): the
//! `.eh_frame_hdr` search and the instruction bytes are cold after each
//! write syscall, the memo lines stay warm. Everything read is inside an executable range of a loaded
//! module (checked by the caller's range bounds) or its mapped
//! `.eh_frame_hdr`/GOT; nothing allocates, locks or makes a syscall.

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

    /// The FDE whose initial location is the last one at or below `pc`.
    pub fn fde_for(&self, pc: usize) -> Option<usize> {
        if self.hdr == 0 || self.n == 0 {
            return None;
        }
        let rel = pc.wrapping_sub(self.hdr) as isize;
        // SAFETY: `parse` saw a table of `n` pairs right after the header.
        let t = unsafe { std::slice::from_raw_parts((self.hdr + 12) as *const [i32; 2], self.n) };
        let i = t.partition_point(|e| e[0] as isize <= rel);
        let e = t.get(i.checked_sub(1)?)?;
        Some(self.hdr.wrapping_add(e[1] as isize as usize))
    }

    /// Start of the function whose FDE covers `pc` (by initial location; the
    /// FDE's length is not checked: a gap maps to the previous function).
    pub fn function_start(&self, pc: usize) -> Option<usize> {
        if self.hdr == 0 || self.n == 0 {
            return None;
        }
        let rel = pc.wrapping_sub(self.hdr) as isize;
        // SAFETY: `parse` saw a table of `n` pairs right after the header.
        let t = unsafe { std::slice::from_raw_parts((self.hdr + 12) as *const [i32; 2], self.n) };
        let i = t.partition_point(|e| e[0] as isize <= rel);
        let e = t.get(i.checked_sub(1)?)?;
        Some(self.hdr.wrapping_add(e[0] as isize as usize))
    }
}

/// What the bytes before a return address say about the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Not preceded by a call: not a return address.
    None,
    /// A direct call to this address.
    Direct(usize),
    /// A call through a GOT slot at this address (`call *disp(%rip)`).
    Got(usize),
    /// An indirect call whose target is unknown.
    Indirect,
}

/// Length of an `ff /2` (call r/m64) instruction with this ModRM and SIB,
/// or `None` when the ModRM is not `/2`.
fn ff_call_len(modrm: u8, sib: u8) -> Option<usize> {
    if (modrm >> 3) & 7 != 2 {
        return None;
    }
    let (md, rm) = (modrm >> 6, modrm & 7);
    let mut len = 2;
    if md != 3 && rm == 4 {
        len += 1; // SIB
    }
    len += match md {
        0 if rm == 5 => 4,
        0 if rm == 4 && sib & 7 == 5 => 4,
        0 | 3 => 0,
        1 => 1,
        _ => 4,
    };
    Some(len)
}

/// Decodes the call that `ra` returns from; `avail` bytes before `ra` are
/// readable code.
///
/// # Safety
/// `[ra - avail, ra)` must be mapped.
pub unsafe fn call_before(ra: usize, avail: usize) -> Call {
    let at = |k: usize| -> u8 {
        // SAFETY: k <= avail (checked by every caller below).
        unsafe { *((ra - k) as *const u8) }
    };
    if avail >= 5 && at(5) == 0xe8 {
        // SAFETY: 4 bytes before ra are mapped (avail >= 5).
        let rel = unsafe { ((ra - 4) as *const i32).read_unaligned() };
        return Call::Direct(ra.wrapping_add(rel as isize as usize));
    }
    // ff /2, `len` bytes long, optionally after a REX prefix (40..4f).
    for total in [2usize, 3, 4, 6, 7, 8] {
        if avail < total {
            break;
        }
        for rex in [false, true] {
            let op = total - rex as usize; // distance of the ff byte
            if op < 2 || (rex && at(total) & 0xf0 != 0x40) || at(op) != 0xff {
                continue;
            }
            let modrm = at(op - 1);
            let sib = if op >= 3 { at(op - 2) } else { 0 };
            if ff_call_len(modrm, sib) != Some(op) {
                continue;
            }
            if modrm == 0x15 && !rex {
                // call *disp32(%rip): the GOT slot is ra + disp32.
                // SAFETY: 4 bytes before ra are mapped (avail >= 6).
                let d = unsafe { ((ra - 4) as *const i32).read_unaligned() };
                return Call::Got(ra.wrapping_add(d as isize as usize));
            }
            return Call::Indirect;
        }
    }
    Call::None
}

/// Where a PLT stub at `stub` jumps through (its GOT slot), if it is one:
/// `ff 25 disp32` or IBT's `endbr64; bnd jmp *disp32(%rip)`.
///
/// # Safety
/// `[stub, stub + 11)` must be mapped.
pub unsafe fn plt_got(stub: usize) -> Option<usize> {
    // SAFETY: caller contract.
    let b = unsafe { std::slice::from_raw_parts(stub as *const u8, 11) };
    if b[0] == 0xff && b[1] == 0x25 {
        let d = i32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        return Some((stub + 6).wrapping_add(d as isize as usize));
    }
    if b[..4] == [0xf3, 0x0f, 0x1e, 0xfa] && b[4] == 0xf2 && b[5] == 0xff && b[6] == 0x25 {
        let d = i32::from_le_bytes([b[7], b[8], b[9], b[10]]);
        return Some((stub + 11).wrapping_add(d as isize as usize));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(code: &[u8]) -> Call {
        let ra = code.as_ptr() as usize + code.len();
        // SAFETY: the whole slice is readable.
        unsafe { call_before(ra, code.len()) }
    }

    #[test]
    fn call_forms_are_recognised() {
        // e8 rel32 = +0x10
        let c = [0x90, 0xe8, 0x10, 0, 0, 0];
        let ra = c.as_ptr() as usize + c.len();
        assert_eq!(decode(&c), Call::Direct(ra + 0x10));
        assert_eq!(decode(&[0x90, 0xff, 0xd0]), Call::Indirect); // call *%rax
        assert_eq!(decode(&[0x90, 0x41, 0xff, 0xd3]), Call::Indirect); // call *%r11
        assert_eq!(decode(&[0x90, 0xff, 0x50, 0x08]), Call::Indirect); // call *8(%rax)
        assert_eq!(decode(&[0xff, 0x54, 0x24, 0x08]), Call::Indirect); // call *8(%rsp)
        let g = [0x90, 0xff, 0x15, 0x20, 0, 0, 0];
        let ra = g.as_ptr() as usize + g.len();
        assert_eq!(decode(&g), Call::Got(ra + 0x20));
        assert_eq!(decode(&[0x90, 0x48, 0x89, 0xc7]), Call::None); // mov
        assert_eq!(decode(&[]), Call::None); // nothing before (a module's base)
        assert_eq!(decode(&[0x90, 0xff, 0xe0]), Call::None); // jmp *%rax
    }

    #[test]
    fn plt_stubs_name_their_got_slot() {
        let s: [u8; 11] = [0xff, 0x25, 0x10, 0, 0, 0, 0x68, 0, 0, 0, 0];
        let a = s.as_ptr() as usize;
        // SAFETY: 11 readable bytes.
        assert_eq!(unsafe { plt_got(a) }, Some(a + 6 + 0x10));
        let s: [u8; 11] = [0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0, 0, 0];
        let a = s.as_ptr() as usize;
        // SAFETY: 11 readable bytes.
        assert_eq!(unsafe { plt_got(a) }, Some(a + 11 + 0x10));
        let s = [0x90u8; 11];
        // SAFETY: 11 readable bytes.
        assert_eq!(unsafe { plt_got(s.as_ptr() as usize) }, None);
    }
}
