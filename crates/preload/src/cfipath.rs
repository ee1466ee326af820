//! A thread's remembered CFI-walked call paths (code without frame
//! pointers, or a frame-pointer chain that breaks in such code): what is
//! kept in a [`PathMemo`] when a walk completes (`fix_slots`: where each
//! return address lies relative to the entry record, and the `rbp` values
//! that holds for) and the repeat check (`cfi_path_hit`). A child module
//! of `signature.rs`.

use super::*;

/// `PathMemo::n` flag: the path came from a CFI walk (compare it with
/// [`cfi_path_hit`], not the frame-pointer chain; the flag makes
/// [`path_hit`] miss, as `n` then exceeds any `k`).
pub(super) const CFI_PATH: u32 = 0x80;

/// `PathMemo::n` flag, with [`CFI_PATH`]: the path ends at the
/// outermost frame with fewer frames than K (a repeat compares those and
/// is complete; the rule at the last address says there is no caller).
pub(super) const CFI_END: u32 = 0x100;

/// `PathMemo::n` flag, with [`CFI_PATH`]: some rule on the path takes
/// the CFA from `rbp`, so `Thread::path_slots` hold only while the
/// `Thread::path_checks` do.
pub(super) const CFI_CHECKS: u32 = 0x200;

/// [`path_hit`] for a path found by the CFI walk: unwinds with the rules
/// remembered with the path (`PathMemo::rules`: no lookup), comparing
/// each return address with the remembered ones.
///
/// # Safety
/// As [`capture`].
#[inline(always)]
pub(super) unsafe fn cfi_path_hit(
    t: &Thread,
    m: &PathMemo,
    table: &Table,
    record: *const usize,
    k: usize,
) -> Option<(Signature, u32)> {
    let flags = m.n.get();
    let n = (flags & 0x7f) as usize;
    // The path was found by the CFI walk and has K frames, or
    // fewer ending at the outermost frame.
    if flags & CFI_PATH == 0 || !(n == k || (flags & CFI_END != 0 && n < k)) || n > PATH_FRAMES {
        return None;
    }
    let (rec, hi, mut rbp) = memo_record(t, m, table, record)?;
    if m.slots[0].get() != 0 && n > 1 {
        // Each return address lies at a fixed offset from the record while
        // the `rbp` values the rules take CFAs from are the remembered ones
        // (`fix_slots` checked what the walk below checks of each CFA and
        // saved `rbp` slot), so the words there are compared directly. The
        // last one is the highest; every `rbp` is read below it.
        let last = m.slots[n - 2].get() as usize;
        if rec + last + 8 > hi {
            return None;
        }
        if flags & CFI_CHECKS == 0 {
            // Every rule takes the CFA from `rsp`: the offsets are fixed.
            for i in 1..n {
                let at = rec + m.slots[i - 1].get() as usize;
                // SAFETY: rec + 16 <= at <= rec + last, and rec + last + 8 <= hi.
                if unsafe { word(at) } != m.addrs[i].get() {
                    return None;
                }
            }
            return Some((Signature(m.sig.get()), m.stream.get()));
        }
        let mut same = true;
        for i in 1..n {
            let c = m.checks[i - 1].get();
            if c != 0 {
                // SAFETY: the offset is below the frame's CFA, <= last + 8.
                let v = unsafe { word(rec + (c as u32) as usize) };
                if v.wrapping_sub(rec) != ((c >> 32) as u32 & 0x7fff_ffff) as usize {
                    // Another layout: unwind with the rules below.
                    same = false;
                    break;
                }
            }
            let at = rec + m.slots[i - 1].get() as usize;
            // SAFETY: rec + 16 <= at <= rec + last, and rec + last + 8 <= hi.
            if unsafe { word(at) } != m.addrs[i].get() {
                return None;
            }
        }
        if same {
            return Some((Signature(m.sig.get()), m.stream.get()));
        }
    }
    let mut rsp = rec + 16;
    for i in 1..n {
        // The rule at this frame's return address (= path[i - 1], checked),
        // remembered with the path.
        let r = crate::cfi::Rule::unpack(m.rules[i - 1].get())?;
        let cfa = if r.cfa_rbp { rbp } else { rsp }.wrapping_add(r.cfa_off as usize);
        if cfa & 7 != 0 || cfa < rsp + 8 || cfa > hi {
            return None;
        }
        // SAFETY: rsp <= cfa - 8 < cfa <= hi: inside the stack.
        let ra = unsafe { word(cfa - 8) };
        if let Some(o) = r.rbp_at {
            let at = cfa.wrapping_add(o as isize as usize);
            if at < rsp || at + 8 > hi {
                return None;
            }
            // SAFETY: rsp <= at and at + 8 <= hi: inside the stack.
            rbp = unsafe { word(at) };
        }
        if ra != m.addrs[i].get() {
            return None;
        }
        rsp = cfa;
    }
    Some((Signature(m.sig.get()), m.stream.get()))
}

/// Fills `m.slots` and `m.checks` for the path `raw` just unwound from
/// `record` with `m.rules`: replays the
/// walk on this stack, and keeps, per frame, where its return address lies
/// (an offset from the record) and, for a rule that takes the CFA from
/// `rbp`, the `rbp` value it was computed from (as an offset from the
/// record) and where that value was read. On a repeat those offsets hold
/// whenever the `rbp` values do (a rule that takes the CFA from `rsp`
/// fixes it from the frame below); every check the walk makes of a CFA
/// and of a saved `rbp`'s slot is made here, on the offsets. `false`: no
/// such layout (a check failed, an `rbp` below the record); else whether
/// any frame has an `rbp` check.
///
/// # Safety
/// As [`capture`].
pub(super) unsafe fn fix_slots(
    t: &Thread,
    m: &PathMemo,
    record: *const usize,
    raw: &Raw,
) -> Option<bool> {
    let rec = record as usize;
    let (_, hi) = stack_bounds(t, rec);
    if rec & 7 != 0 || rec + 16 > hi {
        return None;
    }
    let mut any = false;
    // SAFETY: rec..rec+16 is inside the stack (checked above).
    let mut rbp = unsafe { word(rec) };
    let mut rbp_from = 0usize; // where `rbp` was read, from the record
    let mut rsp = 16usize; // offsets from the record
    for i in 0..raw.n - 1 {
        let r = crate::cfi::Rule::unpack(m.rules[i].get())?;
        let mut check = 0u64;
        let cfa = if r.cfa_rbp {
            let v = rbp.checked_sub(rec).filter(|&v| v < 1 << 31)?;
            check = 1 << 63 | (v as u64) << 32 | rbp_from as u64;
            any = true;
            v + r.cfa_off as usize
        } else {
            rsp + r.cfa_off as usize
        };
        if cfa & 7 != 0 || cfa < rsp + 8 || rec + cfa > hi || cfa >= 1 << 31 {
            return None;
        }
        // SAFETY: rec + rsp <= rec + cfa - 8 and rec + cfa <= hi: inside the stack.
        if unsafe { word(rec + cfa - 8) } != raw.addrs[i + 1] {
            return None;
        }
        if let Some(o) = r.rbp_at {
            let at = cfa.wrapping_add(o as isize as usize);
            if at < rsp || at + 8 > cfa {
                return None;
            }
            // SAFETY: rec + rsp <= rec + at and rec + at + 8 <= rec + cfa <= hi.
            rbp = unsafe { word(rec + at) };
            rbp_from = at;
        }
        m.slots[i].set((cfa - 8) as u32);
        m.checks[i].set(check);
        rsp = cfa;
    }
    Some(any)
}
