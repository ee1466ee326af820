//! Table-driven unwinding: the CFA rule of a code address from its module's
//! `.eh_frame` (DWARF call-frame information), for code built without frame
//! pointers (Debian's default).
//!
//! For x86-64 code, what an unwinder needs at a return address is small: the
//! CFA (`rsp + n` or `rbp + n`), the return address at `CFA - 8`, and where
//! the caller's `rbp` was saved (`CFA + m`), if it was. [`rule`] finds the
//! FDE through the module's `.eh_frame_hdr` search table (see
//! [`crate::ehhdr::FdeTable`]), runs its CIE's and its own instructions up
//! to the address, and packs the result into 32 bits, memoised per address in
//! a lock-free [`Memo`]: a repeat path costs one memo load per frame.
//!
//! Hand-written rather than `framehop` (evaluated first: it does this and
//! more, samply uses it): framehop's unwinder wants a `&mut` cache per
//! unwinding thread, allocated up front (a `Box` per cache, and gimli's
//! `UnwindContext` on the heap), and its module list is a `Vec` mutated on
//! `dlopen`; the shim must unwind from any thread, in signal handlers and
//! fork children, with no allocation and no lock on the write path and no
//! per-thread destructor. The part it needs (CFA and `rbp` rules, the
//! handful of DWARF opcodes compilers emit for them) is this file. Rules it
//! does not model (CFA expressions, other registers as CFA base) make
//! [`rule`] answer `None`, and the capture falls back to the scan.
//!
//! Every read is bounded by the FDE's and CIE's own lengths inside the
//! module's mapped `.eh_frame`; nothing allocates, locks or makes a syscall.

use crate::ehhdr::Memo;
use crate::modules::Table;

/// How to find the caller's frame from a frame at some address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// CFA = `rbp` + offset (else `rsp` + offset).
    pub cfa_rbp: bool,
    /// CFA offset in bytes.
    pub cfa_off: u32,
    /// The caller's `rbp` is saved at CFA + this (negative) offset.
    pub rbp_at: Option<i32>,
}

impl Rule {
    /// The outermost frame: the CFI says the return address is undefined
    /// (`DW_CFA_undefined` on the return-address column), as glibc marks
    /// `_start` and the child side of `clone`/`clone3` (a new thread's first
    /// frame): there is no caller, the walk ends here. Packed as a valid
    /// rule with a CFA offset of 0, which no real rule has (the return
    /// address lies at CFA − 8, above the frame's own stack pointer).
    pub const END: Rule = Rule {
        cfa_rbp: false,
        cfa_off: 0,
        rbp_at: None,
    };

    /// Whether this is [`Rule::END`].
    #[inline(always)]
    pub fn is_end(self) -> bool {
        self == Rule::END
    }

    /// The rule in 32 bits (bit 31 set: valid).
    pub fn pack(self) -> u32 {
        // bit 31: valid; bit 30: cfa_rbp; bits 16..30: cfa_off / 8 (14 bits);
        // bit 15: rbp saved; bits 0..15: -rbp_at / 8.
        let mut v = 1 << 31 | (self.cfa_off / 8) << 16;
        if self.cfa_rbp {
            v |= 1 << 30;
        }
        if let Some(o) = self.rbp_at {
            v |= 1 << 15 | ((-o / 8) as u32 & 0x7fff);
        }
        v
    }

    /// The rule [`Rule::pack`] packed (`None`: no rule).
    #[inline(always)]
    pub fn unpack(v: u32) -> Option<Rule> {
        if v & 1 << 31 == 0 {
            return None;
        }
        Some(Rule {
            cfa_rbp: v & 1 << 30 != 0,
            cfa_off: ((v >> 16) & 0x3fff) * 8,
            rbp_at: (v & 1 << 15 != 0).then(|| -(((v & 0x7fff) * 8) as i32)),
        })
    }

    fn packable(self) -> bool {
        if self.is_end() {
            return true;
        }
        // A CFA offset of 0 is END's encoding (and no real rule's: the walk
        // refuses a CFA below rsp + 8).
        self.cfa_off >= 8
            && self.cfa_off.is_multiple_of(8)
            && self.cfa_off / 8 < 1 << 14
            && self
                .rbp_at
                .is_none_or(|o| o < 0 && (o % 8 == 0) && -o / 8 < 1 << 15)
    }
}

static RULES: Memo = Memo::new();

/// The rule at return address `ra` (the call instruction is at `ra - 1`).
pub fn rule(table: &Table, ra: usize) -> Option<Rule> {
    if let Some(v) = RULES.get(ra, 1, table.gen) {
        return Rule::unpack(v);
    }
    let r = table
        .lookup(ra)
        .and_then(|h| {
            h.module
                .fdes
                .fde_for(ra - 1)
                // SAFETY: `fde_for` returns FDEs of a loaded module's mapped
                // .eh_frame (`eval` answers `None` outside the FDE's range).
                .and_then(|fde| unsafe { eval(fde, ra - 1) })
                .or_else(|| start_up(h.module, ra - 1).then_some(Rule::END))
        })
        .filter(|r| r.packable());
    RULES.put(ra, 1, table.gen, r.map_or(0, Rule::pack));
    r
}

/// Bytes of start-up code after an entry point that [`start_up`] accepts:
/// the x86-64 dynamic loader's `_start` + `_dl_start_user` is 61 bytes.
const ENTRY_CODE: usize = 128;

/// Whether `pc`, covered by no FDE (or by none this file can read), is the start-up code at its module's
/// entry point (the program's `_start` built without CFI, or the dynamic
/// loader's `_dl_start_user`, which calls the libraries' constructors and
/// has no CFI): the outermost frame.
fn start_up(m: &crate::modules::Module, pc: usize) -> bool {
    m.entry != 0 && pc.wrapping_sub(m.entry) < ENTRY_CODE
}

/// A bounded reader over mapped bytes.
struct Rd {
    p: usize,
    end: usize,
}

impl Rd {
    fn u8(&mut self) -> Option<u8> {
        if self.p >= self.end {
            return None;
        }
        // SAFETY: p < end, inside the mapped entry (constructor contract).
        let v = unsafe { *(self.p as *const u8) };
        self.p += 1;
        Some(v)
    }
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        for x in &mut b {
            *x = self.u8()?;
        }
        Some(b)
    }
    fn uleb(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn sleb(&mut self) -> Option<i64> {
        let mut v = 0i64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            v |= ((b & 0x7f) as i64) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    v |= -1i64 << shift;
                }
                return Some(v);
            }
            if shift >= 63 {
                return None;
            }
        }
    }
    /// A pointer in encoding `enc` (absptr, udata4/sdata4, pcrel).
    fn ptr(&mut self, enc: u8) -> Option<usize> {
        let at = self.p;
        let v = match enc & 0x0f {
            0x00 => u64::from_le_bytes(self.bytes::<8>()?) as usize,
            0x03 => u32::from_le_bytes(self.bytes::<4>()?) as usize,
            0x0b => i32::from_le_bytes(self.bytes::<4>()?) as isize as usize,
            0x04 | 0x0c => u64::from_le_bytes(self.bytes::<8>()?) as usize,
            _ => return None,
        };
        match enc & 0x70 {
            0x00 => Some(v),
            0x10 => Some(at.wrapping_add(v)),
            _ => None,
        }
    }
}

/// Register numbers (DWARF x86-64).
const RBP: u64 = 6;
const RSP: u64 = 7;

#[derive(Clone, Copy)]
struct State {
    cfa_reg: u64,
    cfa_off: i64,
    rbp_at: Option<i64>,
    /// The return address is undefined here (`DW_CFA_undefined` on the
    /// return-address column): the outermost frame.
    ra_undefined: bool,
}

/// Runs the CFI of the FDE at `fde` up to `pc`.
///
/// # Safety
/// `fde` must be an FDE of a mapped `.eh_frame` (its CIE pointer too).
unsafe fn eval(fde: usize, pc: usize) -> Option<Rule> {
    // FDE: length, CIE pointer (relative, backwards), pc_begin, range, aug, insns.
    // SAFETY: the length word of a mapped FDE.
    let len = unsafe { (fde as *const u32).read_unaligned() } as usize;
    if len == 0 || len == 0xffff_ffff || len > 1 << 20 {
        return None;
    }
    let mut f = Rd {
        p: fde + 4,
        end: fde + 4 + len,
    };
    let cie_off = u32::from_le_bytes(f.bytes::<4>()?) as usize;
    let cie = (fde + 4).checked_sub(cie_off)?;
    // CIE.
    // SAFETY: the CIE a mapped FDE points to is mapped.
    let clen = unsafe { (cie as *const u32).read_unaligned() } as usize;
    if clen == 0 || clen == 0xffff_ffff || clen > 1 << 16 {
        return None;
    }
    let mut c = Rd {
        p: cie + 4,
        end: cie + 4 + clen,
    };
    if c.bytes::<4>()? != [0; 4] {
        return None; // not a CIE
    }
    let version = c.u8()?;
    let mut aug = [0u8; 8];
    let mut n = 0;
    loop {
        let b = c.u8()?;
        if b == 0 {
            break;
        }
        if n == aug.len() {
            return None;
        }
        aug[n] = b;
        n += 1;
    }
    let aug = &aug[..n];
    let caf = c.uleb()?;
    let daf = c.sleb()?;
    let ra_reg = if version == 1 {
        c.u8()? as u64
    } else {
        c.uleb()?
    };
    let mut fde_enc = 0u8;
    if aug.first() == Some(&b'z') {
        let alen = c.uleb()? as usize;
        let aend = c.p + alen;
        for &a in &aug[1..] {
            match a {
                b'R' => fde_enc = c.u8()?,
                b'P' => {
                    let e = c.u8()?;
                    c.ptr(e)?;
                }
                b'L' => {
                    c.u8()?;
                }
                b'S' | b'B' => {}
                _ => return None,
            }
        }
        c.p = aend;
    } else if !aug.is_empty() {
        return None;
    }
    let start = f.ptr(fde_enc)?;
    let range = f.ptr(fde_enc & 0x0f)?;
    if pc < start || pc >= start.wrapping_add(range) {
        return None;
    }
    if aug.first() == Some(&b'z') {
        let alen = f.uleb()? as usize;
        f.p += alen;
    }
    let init = State {
        cfa_reg: RSP,
        cfa_off: 8,
        rbp_at: None,
        ra_undefined: false,
    };
    let mut st = init;
    let mut stack = [init; 4];
    let mut depth = 0;
    let mut loc = start;
    // The CIE's initial instructions, then the FDE's (stopping past pc).
    for rd in [&mut c, &mut f] {
        let cie_state = st;
        while rd.p < rd.end {
            let op = rd.u8()?;
            let (hi, lo) = (op >> 6, (op & 0x3f) as u64);
            let mut adv = |d: u64| -> bool {
                loc = loc.wrapping_add((d * caf) as usize);
                loc > pc
            };
            match hi {
                1 => {
                    if adv(lo) {
                        break;
                    }
                }
                2 => {
                    let o = rd.uleb()? as i64 * daf;
                    if lo == RBP {
                        st.rbp_at = Some(o);
                    }
                }
                3 => {
                    if lo == RBP {
                        st.rbp_at = cie_state.rbp_at;
                    }
                    if lo == ra_reg {
                        st.ra_undefined = cie_state.ra_undefined;
                    }
                }
                _ => match op {
                    0x00 => {}
                    0x02 => {
                        let d = rd.u8()? as u64;
                        if adv(d) {
                            break;
                        }
                    }
                    0x03 => {
                        let d = u16::from_le_bytes(rd.bytes::<2>()?) as u64;
                        if adv(d) {
                            break;
                        }
                    }
                    0x04 => {
                        let d = u32::from_le_bytes(rd.bytes::<4>()?) as u64;
                        if adv(d) {
                            break;
                        }
                    }
                    0x05 => {
                        let r = rd.uleb()?;
                        let o = rd.uleb()? as i64 * daf;
                        if r == RBP {
                            st.rbp_at = Some(o);
                        }
                        if r == ra_reg {
                            st.ra_undefined = false;
                        }
                    }
                    0x06..=0x08 => {
                        let r = rd.uleb()?;
                        if r == RBP {
                            st.rbp_at = if op == 0x06 { cie_state.rbp_at } else { None };
                        }
                        if r == ra_reg {
                            // restore / undefined / same value
                            st.ra_undefined = match op {
                                0x06 => cie_state.ra_undefined,
                                0x07 => true,
                                _ => false,
                            };
                        }
                    }
                    0x09 => {
                        let r = rd.uleb()?;
                        rd.uleb()?;
                        if r == RBP {
                            return None;
                        }
                    }
                    0x0a => {
                        if depth == stack.len() {
                            return None;
                        }
                        stack[depth] = st;
                        depth += 1;
                    }
                    0x0b => {
                        depth = depth.checked_sub(1)?;
                        st = stack[depth];
                    }
                    0x0c => {
                        st.cfa_reg = rd.uleb()?;
                        st.cfa_off = rd.uleb()? as i64;
                    }
                    0x0d => st.cfa_reg = rd.uleb()?,
                    0x0e => st.cfa_off = rd.uleb()? as i64,
                    0x0f => return None, // def_cfa_expression
                    0x10 | 0x16 => {
                        let r = rd.uleb()?;
                        let l = rd.uleb()? as usize;
                        rd.p += l;
                        if r == RBP || r == 16 {
                            return None;
                        }
                    }
                    0x11 => {
                        let r = rd.uleb()?;
                        let o = rd.sleb()? * daf;
                        if r == RBP {
                            st.rbp_at = Some(o);
                        }
                        if r == ra_reg {
                            st.ra_undefined = false;
                        }
                    }
                    0x12 => {
                        st.cfa_reg = rd.uleb()?;
                        st.cfa_off = rd.sleb()? * daf;
                    }
                    0x13 => st.cfa_off = rd.sleb()? * daf,
                    0x14 | 0x15 => {
                        let r = rd.uleb()?;
                        rd.uleb()?;
                        if r == RBP {
                            return None;
                        }
                    }
                    0x2e => {
                        rd.uleb()?;
                    }
                    _ => return None,
                },
            }
        }
    }
    if st.ra_undefined {
        return Some(Rule::END);
    }
    if !(st.cfa_reg == RSP || st.cfa_reg == RBP) || st.cfa_off < 0 {
        return None;
    }
    Some(Rule {
        cfa_rbp: st.cfa_reg == RBP,
        cfa_off: u32::try_from(st.cfa_off).ok()?,
        rbp_at: match st.rbp_at {
            Some(o) => Some(i32::try_from(o).ok()?),
            None => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_pack_and_unpack() {
        for r in [
            Rule {
                cfa_rbp: false,
                cfa_off: 8,
                rbp_at: None,
            },
            Rule {
                cfa_rbp: true,
                cfa_off: 16,
                rbp_at: Some(-16),
            },
            Rule {
                cfa_rbp: false,
                cfa_off: 4096,
                rbp_at: Some(-48),
            },
        ] {
            assert!(r.packable());
            assert_eq!(Rule::unpack(r.pack()), Some(r));
        }
        assert_eq!(Rule::unpack(0), None);
        // The outermost frame survives packing, and no other rule packs
        // into its encoding.
        assert!(Rule::END.packable());
        assert_eq!(Rule::unpack(Rule::END.pack()), Some(Rule::END));
        assert!(Rule::unpack(Rule::END.pack()).unwrap().is_end());
        assert!(!Rule {
            cfa_rbp: false,
            cfa_off: 0,
            rbp_at: Some(-16),
        }
        .packable());
    }

    #[test]
    fn this_crates_own_code_has_rules() {
        crate::modules::refresh();
        let t = crate::modules::table().unwrap();
        // A return address inside this test function's caller chain: use the
        // address of a function of ours plus a little (any code address in
        // an FDE has a rule).
        let a = rule as *const () as usize + 4;
        let h = t.lookup(a).expect("our code is in the table");
        let fde = h.module.fdes.fde_for(a).expect("an FDE");
        // SAFETY: an FDE of our own mapped .eh_frame.
        assert!(unsafe { eval(fde, a) }.is_some(), "eval");
        let r = rule(t, a + 1).expect("a rule for our own code");
        assert!(r.cfa_off >= 8);
        // Memoised: the same answer again.
        assert_eq!(rule(t, a + 1), Some(r));
    }
}
