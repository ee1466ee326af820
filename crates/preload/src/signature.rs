//! Program-context capture: the return addresses that reached an intercepted
//! call, normalised to `(module key, module-relative offset)` and hashed with
//! [`SignatureBuilder`] (the placement crate's definition, so tools can
//! recompute a signature from its frames).
//!
//! Every interposed entry point is reached through a naked trampoline
//! (`hooks::shape`) that pushes the caller's `rbp` and hands the shim a
//! pointer to a synthetic frame record `{caller rbp, return address}`. From
//! there:
//! * **frame-pointer walk**: follow `rbp` links while each link points higher
//!   up the same stack, is 8-byte aligned and its return address lies in an
//!   executable mapping; a zero link (the outermost frame) ends it cleanly;
//! * **stack scan** (the paper's method): read the stack words above the
//!   record and keep those that point into executable mappings;
//! * **auto**: frame-pointer walk, continued by a scan from where the chain
//!   broke when it broke before K frames.
//!
//! Memory is only read inside the current thread's stack, whose bounds are
//! cached per thread (see `stack.rs`). Nothing here allocates, locks or
//! makes a syscall on the fast path.

use crate::callsite::{called_from, MAYBE, STARTS, VERDICTS, YES};
use crate::config::{Unwind, MAX_FRAMES};
use crate::modules::Table;
pub use crate::stack::{init_stack_facts, stack_bounds};
use crate::tls::{PathMemo, Thread, PATHS, PATH_FRAMES};
use pcstream_placement::signature::{Signature, SignatureBuilder};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the frames of a capture were obtained (wire `UnwindMethod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Frame-pointer chain only.
    FramePointer = 1,
    /// At least one frame came from the stack scan.
    StackScan = 2,
    /// DWARF unwinding (`PCSTREAM_UNWIND=exact`).
    Dwarf = 3,
    /// Java frames from JVMTI (`java.rs`).
    Java = 4,
}

/// Capture parameters (from the config).
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Frames wanted (1..=MAX_FRAMES).
    pub frames: usize,
    /// Unwind mode.
    pub unwind: Unwind,
    /// Most stack words a scan reads.
    pub scan_words: usize,
}

/// One normalised frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Frame {
    /// Module identity.
    pub key: u64,
    /// Runtime address − load bias.
    pub offset: u64,
}

/// A captured program context.
#[derive(Debug, Clone, Copy)]
pub struct Captured {
    /// Hash of the frames.
    pub signature: Signature,
    /// Its stream under the static mapping (0: unmapped), looked up once
    /// per call path: cached with the signature.
    pub stream: u32,
    /// Frames, innermost first; the first `n` are initialised (read them
    /// with [`Captured::frames`]). Left uninitialised otherwise: zeroing
    /// them would cost more than the cached capture itself.
    frames: [MaybeUninit<Frame>; MAX_FRAMES],
    /// Number of valid frames.
    pub n: usize,
    /// How they were obtained.
    pub method: Method,
    /// Whether the signature came from the signature cache: `frames` are
    /// then not filled in (only first sightings need them).
    pub cached: bool,
    /// Whether frames of the shim itself were skipped (the result then
    /// depends on more stack than its frames show; never cached).
    skipped: bool,
    /// Raw return addresses of a complete CFI walk (`cfi_n` of them, 0:
    /// none), what the thread's last-path check compares.
    cfi_raw: [MaybeUninit<usize>; CACHED_FRAMES],
    cfi_n: usize,
    /// Whether the CFI walk ended at the outermost frame (its rule says
    /// the return address is undefined: `_start`, a new thread's first
    /// frame), so the path is complete with fewer than K frames.
    cfi_end: bool,
}

impl Captured {
    /// An empty capture.
    pub const fn new() -> Self {
        Captured {
            signature: Signature(0),
            stream: 0,
            frames: [MaybeUninit::uninit(); MAX_FRAMES],
            cfi_raw: [MaybeUninit::uninit(); CACHED_FRAMES],
            cfi_n: 0,
            cfi_end: false,
            n: 0,
            method: Method::FramePointer,
            cached: false,
            skipped: false,
        }
    }
}

impl Default for Captured {
    fn default() -> Self {
        Captured::new()
    }
}

impl Captured {
    /// The valid frames.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        let n = if self.cached {
            0
        } else {
            self.n.min(MAX_FRAMES)
        };
        self.frames[..n].iter().map(|f| {
            // SAFETY: `push` initialises frames[i] before counting it in `n`
            // (and a cached capture reports none).
            unsafe { f.assume_init_ref() }
        })
    }
}

/// Reads a stack word.
///
/// # Safety
/// `[p, p+8)` must lie inside the current thread's readable stack bounds.
#[inline(always)]
unsafe fn word(p: usize) -> usize {
    // SAFETY: guaranteed by the caller; aligned because every p is 8-aligned.
    unsafe { (p as *const usize).read_volatile() }
}

/// Captures the program context from a synthetic frame record
/// `record = [caller rbp, return address]` (built by the entry trampoline).
///
/// # Safety
/// `record` must point to two readable words on the current thread's stack.
#[cfg(test)]
pub unsafe fn capture(t: &Thread, table: &Table, record: *const usize, p: Params) -> Captured {
    let mut out = Captured::new();
    // SAFETY: forwarded caller contract.
    unsafe { capture_into(t, table, record, p, &mut out) };
    out
}

/// [`capture`] into a caller-provided [`Captured`] (no copy of the result).
/// `t`: this thread's state (its cached stack bounds).
///
/// # Safety
/// As [`capture`].
#[inline]
pub unsafe fn capture_into(
    t: &Thread,
    table: &Table,
    record: *const usize,
    p: Params,
    out: &mut Captured,
) {
    out.n = 0;
    out.method = Method::FramePointer;
    out.cached = false;
    out.skipped = false;
    out.cfi_n = 0;
    out.cfi_end = false;
    let k = p.frames.clamp(1, MAX_FRAMES);
    if p.unwind == Unwind::Exact {
        walk_exact(table, out, k);
        finish(out);
        return;
    }
    if p.unwind != Unwind::Scan && k <= CACHED_FRAMES {
        let mut raw = Raw {
            addrs: [0; CACHED_FRAMES],
            n: 0,
            hash: 0,
        };
        // SAFETY: forwarded caller contract.
        if unsafe { raw_chain(t, table, record, k, &mut raw) } {
            if let Some((sig, n, stream)) = cache_get(&raw, table.gen) {
                out.signature = sig;
                out.stream = stream;
                out.n = n;
                out.cached = true;
                remember_path(t, table, &raw, sig.0, stream);
                return;
            }
            // SAFETY: forwarded caller contract.
            unsafe { walk(t, table, record, p, out) };
            finish(out);
            if out.method == Method::FramePointer && !out.skipped && out.n == raw.n {
                cache_put(&raw, out, table.gen);
                remember_path(t, table, &raw, out.signature.0, out.stream);
            }
            return;
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { walk(t, table, record, p, out) };
    finish(out);
    // A complete CFI walk: K frames, or fewer ending at the outermost frame
    // (the chain ends in libc's or the program's start-up code, or in the
    // first frame of a thread).
    let n = out.n;
    if out.method == Method::Dwarf
        && !out.skipped
        && n >= 1
        && out.cfi_n == n
        && (n == k || out.cfi_end)
    {
        let mut addrs = [0; CACHED_FRAMES];
        for (d, s) in addrs.iter_mut().zip(&out.cfi_raw[..n]) {
            // SAFETY: the first cfi_n (= n) entries were written by the walk.
            *d = unsafe { s.assume_init() };
        }
        let raw = Raw { addrs, n, hash: 0 };
        // The rule at each return address but the last (what a repeat
        // unwinds with; the last one's is the outermost frame's when the
        // path is shorter than K, and a repeat has nothing to unwind
        // there); a path with any frame whose rule cannot be packed is not
        // remembered.
        let slot = victim(t, &raw);
        let m = &t.paths[slot];
        // The memo is rewritten: nothing may compare against it meanwhile.
        m.clear();
        let mut ok = true;
        for (i, &ra) in addrs[..n - 1].iter().enumerate() {
            let r = crate::cfi::rule(table, ra).map_or(0, crate::cfi::Rule::pack);
            ok &= r != 0;
            m.rules[i].set(r);
        }
        // Where each return address lies, from the record.
        let mut checks = 0;
        let fixed = ok
            .then(|| {
                // SAFETY: forwarded caller contract (the record on this stack).
                unsafe { fix_slots(t, m, record, &raw) }
            })
            .flatten();
        match fixed {
            Some(true) => checks = CFI_CHECKS,
            Some(false) => {}
            None => m.slots[0].set(0),
        }
        if ok {
            remember_in(t, slot, table, &raw, out.signature.0, out.stream);
            let end = if n < k { CFI_END } else { 0 };
            m.n.set(n as u32 | CFI_PATH | end | checks);
        }
    }
}

/// The signature and stream of the call path behind `record` when it is
/// one of this thread's remembered call paths ([`path_hit`]) or in the signature
/// cache (a clean frame-pointer chain seen before): the cheap part of
/// [`capture_into`], for callers that do the full capture later when this
/// misses.
///
/// # Safety
/// As [`capture`].
#[inline(always)]
pub unsafe fn cached(
    t: &Thread,
    table: &Table,
    record: *const usize,
    p: Params,
) -> Option<(Signature, u32)> {
    let k = p.frames.clamp(1, MAX_FRAMES);
    if p.unwind == Unwind::Exact || p.unwind == Unwind::Scan || k > CACHED_FRAMES {
        return None;
    }
    let mru = t.path_mru.get() as usize % PATHS;
    // SAFETY: forwarded caller contract.
    if let Some(hit) = unsafe { path_hit(t, &t.paths[mru], table, record, k) } {
        return Some(hit);
    }
    // SAFETY: forwarded caller contract.
    unsafe { cached_shared(t, table, record, k) }
}

/// [`cached`] when the thread's most recent frame-pointer path missed:
/// its remembered paths found by the CFI walk, its other remembered path,
/// then the process-wide signature cache (out of line).
///
/// # Safety
/// As [`capture`].
#[inline(never)]
unsafe fn cached_shared(
    t: &Thread,
    table: &Table,
    record: *const usize,
    k: usize,
) -> Option<(Signature, u32)> {
    let mru = t.path_mru.get() as usize % PATHS;
    for i in 0..PATHS {
        let slot = (mru + i) % PATHS;
        let m = &t.paths[slot];
        let hit = if m.n.get() & CFI_PATH != 0 {
            // A path found by the CFI walk (code without frame pointers;
            // only auto mode records such paths, see `capture_into`).
            // SAFETY: forwarded caller contract.
            unsafe { cfi_path_hit(t, m, table, record, k) }
        } else if i != 0 {
            // SAFETY: forwarded caller contract.
            unsafe { path_hit(t, m, table, record, k) }
        } else {
            None // `cached` compared it
        };
        if hit.is_some() {
            t.path_mru.set(slot as u32);
            return hit;
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { cached_chain(t, table, record, k) }
}

/// [`cached_shared`] for a path the thread does not remember: its
/// frame-pointer chain looked up in the shared cache.
///
/// # Safety
/// As [`capture`].
#[inline(never)]
unsafe fn cached_chain(
    t: &Thread,
    table: &Table,
    record: *const usize,
    k: usize,
) -> Option<(Signature, u32)> {
    let mut raw = Raw {
        addrs: [0; CACHED_FRAMES],
        n: 0,
        hash: 0,
    };
    // SAFETY: forwarded caller contract.
    if !unsafe { raw_chain(t, table, record, k, &mut raw) } {
        return None;
    }
    let (sig, _, stream) = cache_get(&raw, table.gen)?;
    remember_path(t, table, &raw, sig.0, stream);
    Some((sig, stream))
}

/// Whether the chain behind `record` is the clean call path remembered in
/// `m` (the same `k` raw return addresses, or the same shorter chain ending
/// in a zero link, under the same module table): its signature and stream.
/// Only the stack and the thread's own state are read. The addresses were
/// checked to be code when the path was cached, so only the links are
/// validated (each higher up the same stack, aligned) before they are
/// followed.
///
/// # Safety
/// As [`capture`].
#[inline(always)]
unsafe fn path_hit(
    t: &Thread,
    m: &PathMemo,
    table: &Table,
    record: *const usize,
    k: usize,
) -> Option<(Signature, u32)> {
    let n = m.n.get() as usize;
    if n == 0 || n > k {
        return None;
    }
    let (rec, hi, mut fp) = memo_record(t, m, table, record)?;
    let mut prev = rec;
    for i in 1..n.min(PATH_FRAMES) {
        // A zero link fails here too (0 <= prev): the chain would end
        // shorter than the cached one.
        if fp <= prev || fp & 7 != 0 || fp + 16 > hi {
            return None;
        }
        // SAFETY: prev < fp and fp+16 <= hi: inside the stack.
        let (next, ret) = unsafe { (word(fp), word(fp + 8)) };
        if ret != m.addrs[i].get() {
            return None;
        }
        prev = fp;
        fp = next;
    }
    if n < k && fp != 0 {
        return None;
    }
    Some((Signature(m.sig.get()), m.stream.get()))
}

/// The entry record behind `record` when it can start a repeat of the path
/// remembered in `m`: resolved under the same module table, inside this
/// thread's cached stack bounds, aligned, with `m`'s first return address.
/// `(record, stack top, the record's saved rbp)`.
#[inline(always)]
fn memo_record(
    t: &Thread,
    m: &PathMemo,
    table: &Table,
    record: *const usize,
) -> Option<(usize, usize, usize)> {
    if m.table.get() != table as *const Table as usize {
        return None;
    }
    let rec = record as usize;
    let (lo, hi) = t.stack.get();
    if rec < lo || rec & 7 != 0 || rec + 16 > hi {
        return None;
    }
    // SAFETY: lo <= rec and rec+16 <= hi: inside the stack.
    let (rbp, ret) = unsafe { (word(rec), word(rec + 8)) };
    (ret == m.addrs[0].get()).then_some((rec, hi, rbp))
}

/// Which of the thread's path memos a newly found path goes to: the one
/// already holding the same return addresses (found again after a repeat
/// missed it, e.g. under another layout), else the least recently used.
fn victim(t: &Thread, raw: &Raw) -> usize {
    let mru = t.path_mru.get() as usize % PATHS;
    for i in 0..PATHS {
        let m = &t.paths[(mru + i) % PATHS];
        let n = (m.n.get() & 0x7f) as usize;
        if n == raw.n && (0..n.min(PATH_FRAMES)).all(|j| m.addrs[j].get() == raw.addrs[j]) {
            return (mru + i) % PATHS;
        }
    }
    (mru + 1) % PATHS
}

/// Makes a clean frame-pointer chain one of this thread's remembered call
/// paths (the most recent).
#[inline]
fn remember_path(t: &Thread, table: &Table, raw: &Raw, sig: u64, stream: u32) {
    if raw.n == 0 || raw.n > PATH_FRAMES {
        return;
    }
    remember_in(t, victim(t, raw), table, raw, sig, stream);
}

/// Writes a path into memo `slot` and makes it the most recent.
#[inline]
fn remember_in(t: &Thread, slot: usize, table: &Table, raw: &Raw, sig: u64, stream: u32) {
    let m = &t.paths[slot];
    if raw.n == 0 || raw.n > PATH_FRAMES {
        m.clear();
        return;
    }
    for i in 0..raw.n {
        m.addrs[i].set(raw.addrs[i]);
    }
    m.sig.set(sig);
    m.stream.set(stream);
    m.table.set(table as *const Table as usize);
    m.n.set(raw.n as u32);
    t.path_mru.set(slot as u32);
}

// ---------------------------------------------------------------------------
// Signature cache
// ---------------------------------------------------------------------------
//
// The expensive part of a capture is normalising each return address (module
// lookup). Within a process the raw addresses of a call path never change,
// so a frame-pointer chain's raw return addresses key a small global cache of
// finished signatures. Entries are seqlocked (writers never wait: a busy
// entry is simply not updated), so readers in signal handlers are safe.

/// Most frames a cached signature can have.
pub const CACHED_FRAMES: usize = 8;
const CACHE_ENTRIES: usize = 1024;
const _: () = assert!(CACHE_ENTRIES.is_power_of_two());

/// Raw return addresses of a frame-pointer chain.
#[derive(Debug, Clone, Copy)]
struct Raw {
    addrs: [usize; CACHED_FRAMES],
    n: usize,
    hash: u64,
}

/// 104 bytes in a 128-byte-aligned pair of cache lines (what the
/// adjacent-line prefetcher fetches together): a lookup after a syscall
/// pays one miss.
#[repr(align(128))]
struct Entry {
    seq: AtomicU64,
    hash: AtomicU64,
    signature: AtomicU64,
    /// n | gen << 8.
    meta: AtomicU64,
    /// The signature's stream under the static mapping.
    stream: AtomicU64,
    addrs: [AtomicU64; CACHED_FRAMES],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_ENTRY: Entry = {
    #[allow(clippy::declare_interior_mutable_const)]
    const Z: AtomicU64 = AtomicU64::new(0);
    Entry {
        seq: Z,
        hash: Z,
        signature: Z,
        meta: Z,
        stream: Z,
        addrs: [Z; CACHED_FRAMES],
    }
};

static CACHE: [Entry; CACHE_ENTRIES] = [EMPTY_ENTRY; CACHE_ENTRIES];

/// Collects the raw return addresses of a clean frame-pointer chain (K of
/// them, or fewer when the chain ends with a zero link) into `raw`. `false`
/// when the chain breaks first (the full capture will scan; not cacheable).
///
/// # Safety
/// As [`capture`].
#[inline(always)]
unsafe fn raw_chain(
    t: &Thread,
    table: &Table,
    record: *const usize,
    k: usize,
    raw: &mut Raw,
) -> bool {
    let rec = record as usize;
    let (_, hi) = stack_bounds(t, rec);
    if rec & 7 != 0 || rec + 16 > hi {
        return false;
    }
    // SAFETY: rec..rec+16 is inside the stack (checked above).
    let (mut fp, ret0) = unsafe { (word(rec), word(rec + 8)) };
    if !table.maybe_code(ret0) {
        return false;
    }
    // Independent multiplies (pipelined) summed: this hash only spreads
    // entries (by its top bits); hits are confirmed by comparing every
    // address.
    const K: [u64; CACHED_FRAMES] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x85eb_ca77_c2b2_ae63,
        0x27d4_eb2f_1656_67c5,
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
        0x8764_3a6b_c9d1_2e35,
    ];
    raw.addrs[0] = ret0;
    let mut h = (ret0 as u64).wrapping_mul(K[0]);
    let mut n = 1;
    let mut prev = rec;
    while n < k {
        if fp == 0 {
            break;
        }
        if fp <= prev || fp & 7 != 0 || fp + 16 > hi {
            return false;
        }
        // SAFETY: prev < fp and fp+16 <= hi: inside the stack.
        let (next, ret) = unsafe { (word(fp), word(fp + 8)) };
        if !table.maybe_code(ret) {
            return false;
        }
        raw.addrs[n] = ret;
        h = h.wrapping_add((ret as u64).wrapping_mul(K[n]));
        n += 1;
        prev = fp;
        fp = next;
    }
    raw.n = n;
    raw.hash = (h ^ n as u64) | 1;
    true
}

/// The cache entry for a chain's hash (its top bits: the best mixed).
#[inline(always)]
fn entry_for(hash: u64) -> &'static Entry {
    const BITS: u32 = CACHE_ENTRIES.trailing_zeros();
    &CACHE[(hash >> (64 - BITS)) as usize]
}

#[inline(always)]
fn cache_get(raw: &Raw, gen: u64) -> Option<(Signature, usize, u32)> {
    let e = entry_for(raw.hash);
    let s1 = e.seq.load(Ordering::Acquire);
    if s1 & 1 == 1 || e.hash.load(Ordering::Relaxed) != raw.hash {
        return None;
    }
    let meta = e.meta.load(Ordering::Relaxed);
    let sig = e.signature.load(Ordering::Relaxed);
    let stream = e.stream.load(Ordering::Relaxed) as u32;
    let n = (meta & 0xff) as usize;
    if n != raw.n || meta >> 8 != gen {
        return None;
    }
    for i in 0..n {
        if e.addrs[i].load(Ordering::Relaxed) != raw.addrs[i] as u64 {
            return None;
        }
    }
    std::sync::atomic::fence(Ordering::Acquire);
    if e.seq.load(Ordering::Relaxed) != s1 {
        return None;
    }
    Some((Signature(sig), n, stream))
}

fn cache_put(raw: &Raw, out: &Captured, gen: u64) {
    let e = entry_for(raw.hash);
    let s = e.seq.load(Ordering::Relaxed);
    if s & 1 == 1
        || e.seq
            .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    std::sync::atomic::fence(Ordering::Release);
    e.hash.store(raw.hash, Ordering::Relaxed);
    e.signature.store(out.signature.0, Ordering::Relaxed);
    e.meta.store(raw.n as u64 | gen << 8, Ordering::Relaxed);
    e.stream.store(out.stream as u64, Ordering::Relaxed);
    for i in 0..raw.n {
        e.addrs[i].store(raw.addrs[i] as u64, Ordering::Relaxed);
    }
    e.seq.store(s + 2, Ordering::Release);
}

/// Empties the process-wide signature cache (the threads' remembered
/// paths stay).
fn empty_shared_cache() {
    for e in CACHE.iter() {
        e.hash.store(0, Ordering::Relaxed);
    }
}

/// Empties the signature cache and the calling thread's remembered paths
/// (fork child, single-threaded: signatures must be described again in the
/// child's own trace).
pub fn clear_cache(t: &Thread) {
    empty_shared_cache();
    for m in &t.paths {
        m.clear();
    }
}

/// # Safety
/// As [`capture`].
#[inline(always)]
unsafe fn walk(t: &Thread, table: &Table, record: *const usize, p: Params, out: &mut Captured) {
    let k = p.frames.clamp(1, MAX_FRAMES);
    let rec = record as usize;
    let (_, hi) = stack_bounds(t, rec);
    if rec & 7 != 0 || rec + 16 > hi {
        return;
    }
    // SAFETY: rec..rec+16 is inside the stack (checked above).
    let (mut fp, ret0) = unsafe { (word(rec), word(rec + 8)) };
    if push(table, out, ret0) != Step::Code {
        return;
    }
    let mut last_pc = ret0;
    // Where a scan would resume: just above the last trusted return address.
    let mut scan_from = rec + 16;
    if p.unwind != Unwind::Scan {
        let mut prev = rec;
        let mut clean = false;
        while out.n < k {
            if fp == 0 {
                clean = true;
                break;
            }
            if fp <= prev || fp & 7 != 0 || fp + 16 > hi {
                break;
            }
            // SAFETY: prev < fp and fp+16 <= hi: inside the stack.
            let (next, ret) = unsafe { (word(fp), word(fp + 8)) };
            match push(table, out, ret) {
                Step::Code => last_pc = ret,
                Step::End => {
                    clean = true;
                    break;
                }
                Step::NotCode => break,
            }
            prev = fp;
            scan_from = fp + 16;
            fp = next;
        }
        if out.n >= k || clean || p.unwind == Unwind::FramePointer {
            return;
        }
        if p.unwind == Unwind::Auto {
            // The chain broke: unwind from the start with the CFI rules
            // (the frames so far come out the same where the chain was
            // right), and scan only above the first frame without one.
            out.n = 0;
            out.skipped = false;
            out.method = Method::Dwarf;
            push(table, out, ret0);
            out.cfi_raw[0] = MaybeUninit::new(ret0);
            out.cfi_n = 1;
            // SAFETY: rec..rec+16 is inside the stack (checked above).
            let rbp0 = unsafe { word(rec) };
            // SAFETY: as above; cfi_walk reads only inside [rec, hi).
            match unsafe { cfi_walk(table, out, k, rec + 16, rbp0, ret0, hi) } {
                None => return,
                Some((rsp, pc)) => {
                    last_pc = pc;
                    scan_from = rsp;
                }
            }
            if out.n >= k {
                return;
            }
        }
    }
    out.method = Method::StackScan;
    let limit = hi.min(scan_from.saturating_add(p.scan_words * 8));
    // SAFETY: scan_from..limit lies inside this thread's stack.
    unsafe { scan(table, out, k, scan_from, limit, last_pc) };
}

/// Unwinds with the modules' CFI rules ([`crate::cfi`]) from a frame at
/// `pc` whose stack pointer is `rsp` and frame register `rbp`, pushing
/// frames until `k`. `None`: done (k frames, the outermost frame, or the
/// signal trampoline); `Some((rsp, pc))`: stopped at a frame without a rule
/// (or with an implausible one): where a scan would go on.
///
/// # Safety
/// `[rsp, hi)` must be this thread's stack.
unsafe fn cfi_walk(
    table: &Table,
    out: &mut Captured,
    k: usize,
    mut rsp: usize,
    mut rbp: usize,
    mut pc: usize,
    hi: usize,
) -> Option<(usize, usize)> {
    while out.n < k {
        let Some(r) = crate::cfi::rule(table, pc) else {
            return Some((rsp, pc));
        };
        if r.is_end() {
            // The outermost frame: the path is complete.
            out.cfi_end = true;
            return None;
        }
        let base = if r.cfa_rbp { rbp } else { rsp };
        let cfa = base.wrapping_add(r.cfa_off as usize);
        if cfa & 7 != 0 || cfa < rsp + 8 || cfa > hi {
            return Some((rsp, pc));
        }
        // SAFETY: rsp <= cfa - 8 < cfa <= hi: inside the stack.
        let ra = unsafe { word(cfa - 8) };
        if let Some(o) = r.rbp_at {
            let at = cfa.wrapping_add(o as isize as usize);
            if at < rsp || at + 8 > hi {
                return Some((rsp, pc));
            }
            // SAFETY: rsp <= at and at + 8 <= hi: inside the stack.
            rbp = unsafe { word(at) };
        }
        rsp = cfa;
        if ra == 0 {
            return None; // the outermost frame
        }
        match push(table, out, ra) {
            Step::Code => {
                if out.cfi_n < CACHED_FRAMES {
                    out.cfi_raw[out.cfi_n] = MaybeUninit::new(ra);
                    out.cfi_n += 1;
                }
                pc = ra;
            }
            Step::End => return None,
            Step::NotCode => return Some((rsp, pc)),
        }
    }
    None
}

/// The stack scan from `from` to `limit`, keeping only words that
/// [`callsite`](crate::callsite) accepts as the return address of a call
/// into the frame below (`last_pc`: the last kept address). A direct call
/// to another function than the one holding `last_pc` may still be genuine
/// (that function was reached by a tail call): such a word is kept only when
/// the scan finds nothing better before the signal trampoline or its limit,
/// and the scan then resumes above it.
///
/// # Safety
/// `[from, limit)` must be readable stack, `from` 8-aligned.
unsafe fn scan(
    table: &Table,
    out: &mut Captured,
    k: usize,
    from: usize,
    limit: usize,
    last_pc: usize,
) {
    let mut a = from;
    let mut soft: Option<(usize, usize)> = None; // (address on stack, word)
    let gen = table.gen;
    // Function starts as `pc - start` (u32::MAX: unknown), memoised.
    let fn_start = |pc: usize| {
        let d = match STARTS.get(pc, 0, gen) {
            Some(d) => d,
            None => {
                let d = table
                    .lookup(pc)
                    .and_then(|h| h.module.fdes.function_start(pc))
                    .and_then(|st| u32::try_from(pc.wrapping_sub(st)).ok())
                    .filter(|&d| d != u32::MAX)
                    .unwrap_or(u32::MAX);
                STARTS.put(pc, 0, gen, d);
                d
            }
        };
        (d != u32::MAX).then(|| pc - d as usize)
    };
    let mut start = fn_start(last_pc);
    while out.n < k {
        if a + 8 > limit {
            // Nothing better: take the tail-call candidate and go on above it.
            let Some((at, w)) = soft.take() else { break };
            push(table, out, w);
            start = fn_start(w);
            a = at + 8;
            continue;
        }
        // SAFETY: a is 8-aligned and a+8 <= limit (caller contract).
        let w = unsafe { word(a) };
        a += 8;
        let Some(h) = table.lookup(w) else { continue };
        if is_sigreturn(w, h.range_end) {
            if let Some((_, sw)) = soft.take() {
                if out.n < k {
                    push(table, out, sw);
                }
            }
            break;
        }
        let key = start.unwrap_or(0);
        let v = match VERDICTS.get(w, key, gen) {
            Some(v) => v,
            None => {
                let v = called_from(table, w, h.range_start, start) as u32;
                VERDICTS.put(w, key, gen, v);
                v
            }
        };
        match v {
            YES => {
                soft = None;
                push(table, out, w);
                start = fn_start(w);
            }
            MAYBE if soft.is_none() => soft = Some((a - 8, w)),
            _ => {}
        }
    }
}

/// DWARF unwinding of the current stack: the shim's own frames are skipped
/// by [`push`] like in the other modes, so `frames[0]` is the same return
/// address the trampoline records.
fn walk_exact(table: &Table, out: &mut Captured, k: usize) {
    out.method = Method::Dwarf;
    // SAFETY: libgcc's `_Unwind_Backtrace` (what the crate uses on Linux)
    // may run on several threads at once; the callback only reads `ip`.
    unsafe {
        backtrace::trace_unsynchronized(|f| {
            if push(table, out, f.ip() as usize) == Step::End {
                return false;
            }
            out.n < k
        })
    };
}

/// What a candidate return address turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Code (recorded, or skipped when it is the shim's own).
    Code,
    /// Not inside any executable mapping.
    NotCode,
    /// The signal-return trampoline: a signal handler's context ends here.
    End,
}

#[inline(always)]
fn push(table: &Table, out: &mut Captured, addr: usize) -> Step {
    let Some(h) = table.lookup(addr) else {
        return Step::NotCode;
    };
    if is_sigreturn(addr, h.range_end) {
        return Step::End;
    }
    if h.module.own {
        out.skipped = true;
    } else if out.n < MAX_FRAMES {
        out.frames[out.n] = MaybeUninit::new(Frame {
            key: h.module.key,
            offset: h.offset,
        });
        out.n += 1;
    }
    Step::Code
}

/// `mov $15, %rax; syscall`: glibc's `__restore_rt`, the return address
/// the kernel gives a signal handler.
const SIGRETURN: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

#[inline]
fn is_sigreturn(addr: usize, range_end: usize) -> bool {
    if addr + SIGRETURN.len() > range_end {
        return false;
    }
    // SAFETY: [addr, addr+9) lies inside an executable mapping of a loaded module.
    let code = unsafe { (addr as *const [u8; 9]).read_unaligned() };
    code == SIGRETURN
}

#[inline]
fn finish(out: &mut Captured) {
    let mut b = SignatureBuilder::new();
    for f in out.frames() {
        b.push(f.key, f.offset);
    }
    out.signature = b.finish();
    // The mapping is installed once, before any capture: safe to cache.
    out.stream = crate::hint::stream_for(out.signature.0);
}

#[path = "cfipath.rs"]
mod cfipath;
use cfipath::{cfi_path_hit, fix_slots, CFI_CHECKS, CFI_END, CFI_PATH};

#[cfg(test)]
#[path = "signature_tests.rs"]
mod tests;
