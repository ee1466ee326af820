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
//! Both answers are memoised in small lock-free direct-mapped tables
//! ([`Memo`], in `ehhdr.rs`: one atomic word per entry, tagged with a hash
//! of the key and the module table's generation; a race costs a miss, never
//! a wrong answer): the `.eh_frame_hdr` search and the instruction bytes are
//! cold after each write syscall, the memo lines stay warm.
//!
//! Everything read is inside an executable range of a loaded module
//! (checked by the caller's range bounds) or its mapped `.eh_frame_hdr` or
//! GOT; nothing allocates, locks or makes a syscall.

pub use crate::ehhdr::Memo;
use crate::modules::Table;

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

/// Memoised `.eh_frame_hdr` function starts, as `pc - start` (u32::MAX:
/// unknown), and scan verdicts, keyed by (word, previous function start).
pub static STARTS: Memo = Memo::new();
pub static VERDICTS: Memo = Memo::new();
pub const YES: u32 = Verdict::Yes as u32;
pub const MAYBE: u32 = Verdict::Maybe as u32;

/// Whether a stack word is a return address (see `signature::scan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Preceded by a call that reaches the previous frame's function, or an
    /// indirect call (unverifiable).
    Yes,
    /// A direct call to another function (genuine only after a tail call).
    Maybe,
    /// Not preceded by a call.
    No,
}

/// `start`: the start of the function holding the previous frame's address.
pub fn called_from(table: &Table, ra: usize, range_start: usize, start: Option<usize>) -> Verdict {
    let avail = (ra - range_start).min(8);
    // SAFETY: [ra - avail, ra) lies in the executable range holding ra.
    let target = match unsafe { call_before(ra, avail) } {
        Call::None => return Verdict::No,
        Call::Indirect | Call::Got(_) => return Verdict::Yes,
        Call::Direct(t) => t,
    };
    let Some(ht) = table.lookup(target) else {
        return Verdict::No; // a call into no code: not an instruction
    };
    let Some(start) = start else {
        return Verdict::Yes; // nothing to compare with
    };
    if target == start {
        return Verdict::Yes;
    }
    if target + 11 <= ht.range_end {
        // SAFETY: [target, target+11) is inside an executable range.
        if let Some(slot) = unsafe { plt_got(target) } {
            // SAFETY: a PLT stub's GOT slot is mapped (the stub jumps through it).
            let dest = unsafe { (slot as *const usize).read_unaligned() };
            return if dest == start
                || table
                    .lookup(dest)
                    .is_some_and(|d| std::ptr::eq(d.module, ht.module))
            {
                Verdict::Yes // bound to our function, or not bound yet
            } else {
                Verdict::Maybe
            };
        }
    }
    Verdict::Maybe
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
