//! Repeats of a Java call path, recognised from the raw stack without
//! asking the JVM (JVMTI's `GetStackTrace` costs about 0.9 µs a walk).
//!
//! [`fingerprint`] hashes the stack's return addresses into JIT code (and,
//! for interpreted frames, their method and bytecode pointer) into a key
//! that names the Java path; the process-wide table here ([`cache_get`],
//! [`cache_put`]) maps keys to signatures, confirmed by walks before it
//! is trusted and sampled after (`super::direct_jvm`).
//!
//! The scan reads every stack word from the first Java frame up to the
//! entry into Java (about 70 words and 9 hashes for a `FileChannel.write`
//! from a loop). A per-thread memo makes a repeat cheaper than that: the
//! scan records which words it read to reach its key, and a write on the
//! same thread with the first Java frame at the same place and those words
//! unchanged has the same key, found with one compare per word and no
//! hashing ([`Memo`]; a word the scan skipped, a spill slot or a loop
//! counter, may change freely).
//!
//! Hand-written: HotSpot's frames are read from its exported `vmStructs`
//! (no crate reads them), and this runs on every Java write, so it neither
//! allocates nor locks.

use crate::modules::Table;
use crate::tls::Thread;
use libc::c_char;
use pcstream_placement::signature::mix64;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::{ZERO_ID as ZERO_USIZE, ZERO_KEY as ZERO_U64};

/// The JVM's code cache `[lo, hi)`, its interpreter `[lo, hi)` and the
/// call stub's return address (where Java frames begin), from
/// the JVM's own exported description of its structures (`vmStructs`, what
/// the serviceability agent reads): 0 while unknown (no repeats cached).
static CODE: [AtomicUsize; 5] = [ZERO_USIZE; 5];

/// Stack words a fingerprint reads at most (32 KiB); a deeper stack is
/// walked by JVMTI on every write.
const MAX_SCAN: usize = 4096;
/// Fingerprint cache entries (process-wide: two threads on the same
/// compiled path have the same fingerprint).
const FP_SLOTS: usize = 4096;
/// One cache hit in this many is verified by a full walk.
pub(super) const VERIFY_ONE_IN: u64 = 256;
/// Verified repeats whose fingerprint named another path (a compiled
/// method's code freed and reused, or a frame layout other than assumed);
/// at MAX_MISMATCHES, fingerprints are turned off for the process.
static MISMATCHES: AtomicU32 = AtomicU32::new(0);
const MAX_MISMATCHES: u32 = 16;
/// Walks that must find a fingerprint's signature again before the entry
/// answers without one.
pub(super) const CONFIRMED: u32 = 2;
pub(super) const AMBIGUOUS: u32 = u32::MAX;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_STATE: AtomicU32 = AtomicU32::new(0);
static FP_STATE: [AtomicU32; FP_SLOTS] = [ZERO_STATE; FP_SLOTS];
static FP_KEY: [AtomicU64; FP_SLOTS] = [ZERO_U64; FP_SLOTS];
static FP_SIG: [AtomicU64; FP_SLOTS] = [ZERO_U64; FP_SLOTS];

/// Counts a verified repeat whose fingerprint named another path; at
/// [`MAX_MISMATCHES`], fingerprints do not hold in this JVM (an
/// interpreter frame layout other than the one assumed) and are turned
/// off: every write is walked.
pub(super) fn note_mismatch() {
    if MISMATCHES.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_MISMATCHES {
        CODE[0].store(0, Ordering::Relaxed);
    }
}

/// What a scan tests stack words against (from [`CODE`]).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    code_lo: usize,
    code_len: usize,
    int_lo: usize,
    int_len: usize,
    call_stub: usize,
}

impl Bounds {
    #[inline(always)]
    fn code(&self, w: usize) -> bool {
        w.wrapping_sub(self.code_lo) < self.code_len
    }
    #[inline(always)]
    fn interpreter(&self, w: usize) -> bool {
        w.wrapping_sub(self.int_lo) < self.int_len
    }
}

/// A fingerprint of the Java call path behind `rec`, from the stack
/// words between the record and the top of the thread's stack ([`scan`]
/// says which), or from this thread's memo of its last scan there.
/// `None` when the code cache is unknown, the JDK natives' frames do not
/// check out, or the stack is deeper than [`MAX_SCAN`] words.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
pub(super) unsafe fn fingerprint(t: &Thread, table: &Table, rec: *const usize) -> Option<u64> {
    let code_lo = CODE[0].load(Ordering::Relaxed);
    if code_lo == 0 {
        return None;
    }
    let int_lo = CODE[2].load(Ordering::Relaxed);
    let b = Bounds {
        code_lo,
        code_len: CODE[1].load(Ordering::Relaxed).wrapping_sub(code_lo),
        int_lo,
        int_len: CODE[3].load(Ordering::Relaxed).wrapping_sub(int_lo),
        call_stub: CODE[4].load(Ordering::Relaxed),
    };
    let rec = rec as usize;
    let (lo, hi) = crate::stack::stack_bounds(t, rec);
    if rec < lo || rec & 7 != 0 || rec + 16 > hi {
        return None;
    }
    // The JDK's natives keep frame pointers (OpenJDK builds them so): follow
    // them to the first return address in JIT code, the Java side's first
    // frame (skipping the natives' frames, `writeBytes`'s 8 KiB buffer).
    // SAFETY: rec and rec+8 lie inside the stack bounds.
    let (mut fp, mut ra_slot) = unsafe { (*(rec as *const usize), rec + 8) };
    let mut prev = rec;
    for _ in 0..8 {
        // SAFETY: ra_slot lies inside the stack bounds (checked below for
        // every slot after the record's).
        let ra = unsafe { *(ra_slot as *const usize) };
        if b.code(ra) {
            break;
        }
        if !super::in_jdk_natives(table, ra) {
            return None;
        }
        if fp <= prev || fp & 7 != 0 || fp + 16 > hi {
            return None;
        }
        prev = fp;
        ra_slot = fp + 8;
        // SAFETY: fp+16 <= hi and fp > rec >= lo.
        fp = unsafe { *(fp as *const usize) };
    }
    // SAFETY: as above: the slot holds a code-cache address now, or the
    // chain ran out of hops.
    if !b.code(unsafe { *(ra_slot as *const usize) }) {
        return None;
    }
    // From the saved frame pointer below that return address (an
    // interpreted caller's, if the first Java frame is interpreted).
    let start = ra_slot - 8;
    if (hi - start) / 8 > MAX_SCAN {
        return None;
    }
    // SAFETY: [start, hi) lies inside this thread's readable stack bounds
    // and start is 8-aligned; it holds the two words of ra_slot - 8.
    let words = unsafe { std::slice::from_raw_parts(start as *const usize, (hi - start) / 8) };
    let memo = &MEMOS[memo_slot(hi, start, words[1])];
    if let Some(f) = memo.get(hi, start, words, &b) {
        return Some(f);
    }
    let mut reads = Reads::default();
    let f = scan(words, &b, |a| table.maybe_code(a), &mut reads)?;
    memo.put(hi, start, words, &reads, f);
    Some(f)
}

/// The fingerprint of the stack words `words` (`words[0]` the saved frame
/// pointer below the first Java frame's return address, `words[1]`), each
/// index the decision read noted in `reads`:
/// * a word inside the JIT code cache but outside the interpreter is a
///   compiled frame's return address (or a stub's, or a stale value in a
///   spill slot): hashed. It names its call site with the inlining there;
/// * a word inside the interpreter is the return address into an
///   interpreted frame, shared by every interpreted call site: the frame
///   is found from the frame pointer its callee saved just below that
///   word (compiled code, native wrappers and interpreter entries all push
///   `rbp` first), and its `Method*` and bytecode pointer (at
///   `fp - 3` and `fp - 8` words: HotSpot's x86-64 interpreter frame, see
///   [`read_code_bounds`]) are hashed as well; the scan goes on above the
///   frame;
/// * the call stub's return address ends this entry into Java: above it
///   the VM's native frames are followed by their frame pointers
///   (`is_code` says which return addresses may be code) to the next Java
///   frames, a native method that called back into Java, if any.
///
/// Equal fingerprints then mean equal Java call paths. `None` when no word
/// was code.
fn scan(
    words: &[usize],
    b: &Bounds,
    is_code: impl Fn(usize) -> bool,
    reads: &mut Reads,
) -> Option<u64> {
    let start = words.as_ptr() as usize;
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    let mut n = 0u64;
    let mut i = 1;
    while i < words.len() {
        let w = words[i];
        i += 1;
        if !b.code(w) {
            continue;
        }
        reads.note(i - 1);
        h = mix64(h ^ w as u64);
        n += 1;
        if w == b.call_stub {
            // The call stub's return address: below it, the Java frames of
            // this entry into Java; above, the VM's native frames that made
            // the call (`JavaCalls::call_helper`), with frame pointers, up
            // to the next Java frames (a native method that called back
            // into Java) or the thread's first frame.
            match native_up(words, i - 2, b, &is_code, start, reads) {
                Some(next) => i = next,
                None => break,
            }
            continue;
        }
        if !b.interpreter(w) {
            continue;
        }
        // An interpreted frame's return address: the frame's fp, saved by
        // its callee below the return address, lies above it inside the
        // stack, aligned, with room for the fixed slots between, and the
        // frame's own return address is code. A word that does not check
        // out is a stale value in a compiled frame (hashed as it is).
        let fp = words[i - 2];
        if not_a_frame(fp, start, i, words.len()) {
            reads.note_as(i - 2, NOT_A_FRAME);
            continue;
        }
        reads.note(i - 2);
        let fi = (fp - start) / 8;
        if !b.code(words[fi + 1]) {
            reads.note_as(fi + 1, NOT_CODE);
            continue;
        }
        reads.note(fi + 1);
        reads.note(fi - 3);
        reads.note(fi - 8);
        let (method, bcp) = (words[fi - 3], words[fi - 8]);
        if method == 0 || bcp == 0 {
            continue;
        }
        h = mix64(mix64(h ^ method as u64) ^ bcp as u64);
        i = fi + 1;
    }
    (n > 0).then_some(mix64(h ^ n) | 1)
}

/// Whether `fp`, read below what looks like the return address into an
/// interpreted frame at `words[i - 1]`, cannot be that frame's frame
/// pointer: unaligned, outside the stack, without room for the fixed
/// slots between, or with no return address above it.
#[inline(always)]
fn not_a_frame(fp: usize, start: usize, i: usize, len: usize) -> bool {
    let fi = fp.wrapping_sub(start) / 8;
    fp & 7 != 0 || fp < start || fi < i + 8 || fi + 1 >= len
}

/// From the frame pointer at `words[link]` (saved below a call stub's
/// return address), follows the native frames' `rbp` chain while their
/// return addresses may be code: the index of the next return address in
/// the code cache (where the scan resumes), or `None` where the chain ends
/// (the thread's first frames: no Java frame above).
fn native_up(
    words: &[usize],
    link: usize,
    b: &Bounds,
    is_code: impl Fn(usize) -> bool,
    start: usize,
    reads: &mut Reads,
) -> Option<usize> {
    reads.note(link);
    let mut fp = words[link];
    let mut prev = start + link * 8;
    for _ in 0..64 {
        if fp <= prev || fp & 7 != 0 {
            return None;
        }
        let fi = (fp - start) / 8;
        reads.note(fi + 1);
        let ra = *words.get(fi + 1)?;
        if b.code(ra) {
            return Some(fi + 1);
        }
        if !is_code(ra) {
            return None;
        }
        prev = fp;
        reads.note(fi);
        fp = words[fi];
    }
    None
}

// ---------------------------------------------------------------------------
// The per-thread memo of the last scan
// ---------------------------------------------------------------------------

/// Stack words a memo compares at most; a scan that read more is not
/// remembered (its thread scans every write, as without the memo).
const MEMO_WORDS: usize = 128;
/// Memo slots, process-wide, picked by thread and first Java frame: a
/// thread alternating call paths through different innermost Java frames
/// keeps a memo of each. 256 × 1,568 bytes of zero pages that only a JVM
/// touches.
const MEMO_SLOTS: usize = 256;

/// How a memo checks a word the scan read (the high half of
/// [`Reads::at`], the word's index in the low half): its value must be the
/// same ([`SAME`]), or it must still fail the test it failed: not an
/// interpreted frame's frame pointer ([`NOT_A_FRAME`]: a spill slot's loop
/// counter below a stale interpreter address changes at every write), or
/// not code ([`NOT_CODE`]).
const SAME: u32 = 0;
const NOT_A_FRAME: u32 = 1 << 16;
const NOT_CODE: u32 = 2 << 16;

/// The stack words a scan read to reach its fingerprint, each as its
/// index and how a repeat checks it (`n > MEMO_WORDS`: too many to
/// remember).
struct Reads {
    n: usize,
    at: [u32; MEMO_WORDS],
}

impl Default for Reads {
    fn default() -> Self {
        Reads {
            n: 0,
            at: [0; MEMO_WORDS],
        }
    }
}

impl Reads {
    #[inline(always)]
    fn note(&mut self, i: usize) {
        self.note_as(i, SAME);
    }

    #[inline(always)]
    fn note_as(&mut self, i: usize, how: u32) {
        if self.n < MEMO_WORDS && i <= u16::MAX as usize {
            self.at[self.n] = i as u32 | how;
            self.n += 1;
        } else {
            // (an index past the stack, from a frame pointer that left it,
            // cannot be remembered either)
            self.n = MEMO_WORDS + 1;
        }
    }
}

/// A thread's last scan from one first Java frame: the stack's top (`hi`,
/// which names the thread while it lives), where the Java frames began,
/// the words the scan read and their values, and its fingerprint. Same
/// place, same words: same Java frames, so the same fingerprint (each
/// return address the scan hashed sits where its callee's fixed-size
/// compiled frame, or the frame pointer the memo also holds, puts it).
/// A sequence lock (`seq` odd while written) lets threads that share a
/// slot overwrite each other's memo without a lock on the read side.
struct Memo {
    seq: AtomicU32,
    /// Words noted; the first `same` must hold their value, the others
    /// fail their test again.
    n: AtomicU32,
    same: AtomicU32,
    hi: AtomicUsize,
    start: AtomicUsize,
    fp: AtomicU64,
    at: [AtomicU32; MEMO_WORDS],
    val: [AtomicUsize; MEMO_WORDS],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_MEMO: Memo = Memo {
    seq: AtomicU32::new(0),
    n: AtomicU32::new(0),
    same: AtomicU32::new(0),
    hi: ZERO_USIZE,
    start: ZERO_USIZE,
    fp: ZERO_U64,
    at: [ZERO_STATE; MEMO_WORDS],
    val: [ZERO_USIZE; MEMO_WORDS],
};
static MEMOS: [Memo; MEMO_SLOTS] = [EMPTY_MEMO; MEMO_SLOTS];

/// The memo slot of a thread (its stack's top) and first Java frame (where
/// it lies, and its return address): one multiply.
#[inline(always)]
fn memo_slot(hi: usize, start: usize, ra: usize) -> usize {
    let k = (hi ^ start.rotate_left(21) ^ ra.rotate_left(42)) as u64;
    (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize % MEMO_SLOTS
}

impl Memo {
    /// The remembered fingerprint, when this memo is the thread's scan
    /// from `start` and every word it read still passes its check.
    #[inline]
    fn get(&self, hi: usize, start: usize, words: &[usize], b: &Bounds) -> Option<u64> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 != 0
            || self.hi.load(Ordering::Relaxed) != hi
            || self.start.load(Ordering::Relaxed) != start
        {
            return None;
        }
        let n = self.n.load(Ordering::Relaxed) as usize;
        let same = self.same.load(Ordering::Relaxed) as usize;
        if n == 0 || n > MEMO_WORDS || same > n {
            return None;
        }
        // The words that must be the same first (most of them), in a loop
        // of their own: one load and compare each.
        for (at, val) in self.at[..same].iter().zip(&self.val[..same]) {
            let w = *words.get(at.load(Ordering::Relaxed) as usize)?;
            if w != val.load(Ordering::Relaxed) {
                return None;
            }
        }
        for at in &self.at[same..n] {
            let at = at.load(Ordering::Relaxed);
            let i = (at & 0xffff) as usize;
            let w = *words.get(i)?;
            let holds = if at & !0xffff == NOT_A_FRAME {
                not_a_frame(w, start, i + 2, words.len())
            } else {
                !b.code(w)
            };
            if !holds {
                return None;
            }
        }
        let fp = self.fp.load(Ordering::Relaxed);
        // The reads above happened before the sequence is read again.
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == seq).then_some(fp)
    }

    /// Remembers a scan (not when it read more than [`MEMO_WORDS`] words,
    /// or another thread is writing this slot).
    fn put(&self, hi: usize, start: usize, words: &[usize], reads: &Reads, fp: u64) {
        if reads.n > MEMO_WORDS {
            return;
        }
        let seq = self.seq.load(Ordering::Relaxed);
        if seq & 1 != 0
            || self
                .seq
                .compare_exchange(
                    seq,
                    seq.wrapping_add(1),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        // The odd sequence is visible before any field changes.
        fence(Ordering::Release);
        self.hi.store(hi, Ordering::Relaxed);
        self.start.store(start, Ordering::Relaxed);
        self.fp.store(fp, Ordering::Relaxed);
        // The words that must be the same first, then the tests.
        let reads = &reads.at[..reads.n];
        let same = reads.iter().filter(|&&at| at & !0xffff == SAME);
        let tests = reads.iter().filter(|&&at| at & !0xffff != SAME);
        let mut n = 0;
        for &at in same.clone().chain(tests) {
            self.at[n].store(at, Ordering::Relaxed);
            self.val[n].store(words[(at & 0xffff) as usize], Ordering::Relaxed);
            n += 1;
        }
        self.same.store(same.count() as u32, Ordering::Relaxed);
        self.n.store(n as u32, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

// ---------------------------------------------------------------------------
// Fingerprint → signature
// ---------------------------------------------------------------------------

/// A fingerprint's signature and state: 0..CONFIRMED, the walks that
/// found the same signature; AMBIGUOUS, two signatures seen.
pub(super) fn cache_get(fp: u64) -> Option<(u64, u32)> {
    let i = fp as usize % FP_SLOTS;
    if FP_KEY[i].load(Ordering::Acquire) != fp {
        return None;
    }
    let sig = FP_SIG[i].load(Ordering::Acquire);
    let state = FP_STATE[i].load(Ordering::Acquire);
    // A writer clears the key before it changes the signature or state.
    (FP_KEY[i].load(Ordering::Relaxed) == fp).then_some((sig, state))
}

pub(super) fn cache_put(fp: u64, sig: u64, state: u32) {
    let i = fp as usize % FP_SLOTS;
    FP_KEY[i].store(0, Ordering::Relaxed);
    FP_SIG[i].store(sig, Ordering::Release);
    FP_STATE[i].store(state, Ordering::Release);
    FP_KEY[i].store(fp, Ordering::Release);
}

/// Reads the code cache's and the interpreter's bounds from `vmStructs`
/// (`CodeCache::_low_bound`/`_high_bound`, `AbstractInterpreter::_code` →
/// `StubQueue::_stub_buffer`/`_buffer_limit`); leaves [`CODE`] at 0 when
/// any is missing.
pub(super) fn read_code_bounds() {
    let sym = |name: &std::ffi::CStr| -> usize {
        // SAFETY: dlsym with a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
    };
    let var = |name: &std::ffi::CStr| -> Option<usize> {
        let a = sym(name);
        // SAFETY: an exported uint64_t / pointer variable of libjvm.
        (a != 0).then(|| unsafe { *(a as *const usize) })
    };
    let (Some(base), Some(tn), Some(fnm), Some(st), Some(off), Some(addr), Some(stride)) = (
        var(c"gHotSpotVMStructs"),
        var(c"gHotSpotVMStructEntryTypeNameOffset"),
        var(c"gHotSpotVMStructEntryFieldNameOffset"),
        var(c"gHotSpotVMStructEntryIsStaticOffset"),
        var(c"gHotSpotVMStructEntryOffsetOffset"),
        var(c"gHotSpotVMStructEntryAddressOffset"),
        var(c"gHotSpotVMStructEntryArrayStride"),
    ) else {
        return;
    };
    if base == 0 || stride == 0 {
        return;
    }
    // (type, field) → static address or field offset.
    let find = |ty: &[u8], field: &[u8]| -> Option<usize> {
        let mut p = base;
        for _ in 0..100_000 {
            // SAFETY: entries of the exported array, each `stride` bytes,
            // ending with a NULL type name; names are C strings.
            unsafe {
                let t = *((p + tn) as *const *const c_char);
                if t.is_null() {
                    return None;
                }
                let f = *((p + fnm) as *const *const c_char);
                if !f.is_null()
                    && std::ffi::CStr::from_ptr(t).to_bytes() == ty
                    && std::ffi::CStr::from_ptr(f).to_bytes() == field
                {
                    return Some(if *((p + st) as *const i32) != 0 {
                        *((p + addr) as *const usize)
                    } else {
                        *((p + off) as *const usize)
                    });
                }
            }
            p += stride;
        }
        None
    };
    let (Some(low), Some(high), Some(code), Some(buf), Some(limit), Some(stub)) = (
        find(b"CodeCache", b"_low_bound"),
        find(b"CodeCache", b"_high_bound"),
        find(b"AbstractInterpreter", b"_code"),
        find(b"StubQueue", b"_stub_buffer"),
        find(b"StubQueue", b"_buffer_limit"),
        find(b"StubRoutines", b"_call_stub_return_address"),
    ) else {
        return;
    };
    // SAFETY: static variables of the live JVM (set before its live phase)
    // at the addresses vmStructs gives; the StubQueue it points to.
    let bounds = unsafe {
        let (lo, hi) = (*(low as *const usize), *(high as *const usize));
        let q = *(code as *const usize);
        if q == 0 {
            return;
        }
        let b = *((q + buf) as *const usize);
        let n = *((q + limit) as *const i32);
        [lo, hi, b, b + n.max(0) as usize, *(stub as *const usize)]
    };
    if bounds[0] == 0
        || bounds[0] >= bounds[1]
        || bounds[2] < bounds[0]
        || bounds[3] > bounds[1]
        || !(bounds[0]..bounds[1]).contains(&bounds[4])
    {
        return;
    }
    for (c, v) in CODE.iter().zip(bounds) {
        c.store(v, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code cache at [0x4000_0000, 0x5000_0000), its interpreter in
    /// the first MiB, the call stub's return address near its end.
    const B: Bounds = Bounds {
        code_lo: 0x4000_0000,
        code_len: 0x1000_0000,
        int_lo: 0x4000_0000,
        int_len: 0x10_0000,
        call_stub: 0x4f00_0000,
    };
    const INTERP: usize = 0x4000_2000;

    /// A stack of `len` words of small numbers (spill slots) with compiled
    /// return addresses at 1 and 5, the call stub's at 30 with a zero link
    /// below it (the chain ends: the thread's first frames above).
    fn stack(len: usize) -> Vec<usize> {
        let mut w: Vec<usize> = (0..len).map(|i| 1000 + i).collect();
        w[1] = 0x4800_1000;
        w[5] = 0x4800_2000;
        w[29] = 0;
        w[30] = B.call_stub;
        w
    }

    fn fingerprint_of(words: &[usize]) -> (Option<u64>, Reads) {
        let mut reads = Reads::default();
        let f = scan(words, &B, |_| true, &mut reads);
        (f, reads)
    }

    #[test]
    fn a_repeat_hits_the_memo_until_a_frame_changes() {
        let mut w = stack(40);
        let start = w.as_ptr() as usize;
        let (f, reads) = fingerprint_of(&w);
        let f = f.expect("compiled frames give a fingerprint");
        let memo = EMPTY_MEMO;
        memo.put(0x7000, start, &w, &reads, f);
        assert_eq!(memo.get(0x7000, start, &w, &B), Some(f));
        // Another thread (stack top), or the Java frames elsewhere: no.
        assert_eq!(memo.get(0x8000, start, &w, &B), None);
        assert_eq!(memo.get(0x7000, start + 8, &w, &B), None);
        // A spill slot that changed is not a frame: same path, same key,
        // and the scan agrees.
        w[3] = 77;
        assert_eq!(memo.get(0x7000, start, &w, &B), Some(f));
        assert_eq!(fingerprint_of(&w).0, Some(f));
        // A caller's return address that changed is another path.
        w[5] = 0x4800_3000;
        assert_eq!(memo.get(0x7000, start, &w, &B), None);
        let other = fingerprint_of(&w).0.unwrap();
        assert_ne!(other, f);
    }

    /// `stack(64)` with an interpreted frame: its return address at 9, the
    /// frame pointer its callee saved at 8 pointing at word 20, the
    /// frame's own return address at 21, its `Method*` at 17 and bytecode
    /// pointer at 12.
    fn interpreted(bcp: usize) -> Vec<usize> {
        let mut w = stack(64);
        let start = w.as_ptr() as usize;
        w[9] = INTERP;
        w[8] = start + 20 * 8;
        w[21] = 0x4800_4000;
        w[17] = 0x0bad_0000;
        w[12] = bcp;
        w
    }

    #[test]
    fn interpreted_frames_are_told_apart_by_their_bytecode_pointer() {
        let mut w = interpreted(0x6000_0010);
        let start = w.as_ptr() as usize;
        let (fa, reads) = fingerprint_of(&w);
        let fa = fa.unwrap();
        let memo = EMPTY_MEMO;
        memo.put(1, start, &w, &reads, fa);
        assert_eq!(memo.get(1, start, &w, &B), Some(fa));
        // The same method called from another bytecode: another path.
        w[12] = 0x6000_0020;
        let fb = fingerprint_of(&w).0.unwrap();
        assert_ne!(fa, fb);
        assert_eq!(memo.get(1, start, &w, &B), None);
        // Another method at the same bytecode offset: another path.
        w[12] = 0x6000_0010;
        w[17] = 0x0bad_1000;
        assert_ne!(fingerprint_of(&w).0.unwrap(), fa);
        assert_eq!(memo.get(1, start, &w, &B), None);
        // The words between the interpreted frame's return address and its
        // frame are not read: a change there is the same path.
        w[17] = 0x0bad_0000;
        w[15] = 0x4800_5000;
        assert_eq!(fingerprint_of(&w).0, Some(fa));
        assert_eq!(memo.get(1, start, &w, &B), Some(fa));
    }

    #[test]
    fn a_stale_interpreter_address_over_a_changing_counter_still_hits() {
        // A spill slot at 13 holds an interpreter address left over, and
        // the slot below it a loop counter: not a frame pointer, whatever
        // it counts to.
        let mut w = stack(40);
        w[13] = INTERP;
        w[12] = 4096;
        let start = w.as_ptr() as usize;
        let (f, reads) = fingerprint_of(&w);
        let f = f.unwrap();
        let memo = EMPTY_MEMO;
        memo.put(2, start, &w, &reads, f);
        for pos in [8192, 12288, 1 << 40] {
            w[12] = pos;
            assert_eq!(memo.get(2, start, &w, &B), Some(f), "counter {pos}");
            assert_eq!(fingerprint_of(&w).0, Some(f));
        }
        // Once it could be a frame pointer, the memo no longer answers.
        w[12] = start + 25 * 8;
        assert_eq!(memo.get(2, start, &w, &B), None);
    }

    #[test]
    fn a_scan_that_read_too_much_or_off_the_stack_is_not_remembered() {
        let mut reads = Reads::default();
        for i in 0..MEMO_WORDS {
            reads.note(i);
        }
        assert_eq!(reads.n, MEMO_WORDS);
        reads.note(1);
        assert!(reads.n > MEMO_WORDS);
        let mut far = Reads::default();
        far.note(70_000);
        assert!(far.n > MEMO_WORDS);
        let w = stack(40);
        let memo = EMPTY_MEMO;
        memo.put(3, w.as_ptr() as usize, &w, &reads, 5);
        assert_eq!(memo.get(3, w.as_ptr() as usize, &w, &B), None);
    }
}
