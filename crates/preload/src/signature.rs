//! Program-context capture: the return addresses that reached an intercepted
//! call, normalised to `(module key, module-relative offset)` and hashed with
//! [`SignatureBuilder`] (the placement crate's definition, so tools can
//! recompute a signature from its frames).
//!
//! Every interposed entry point is reached through a naked trampoline
//! (`interpose.rs`) that pushes the caller's `rbp` and hands the shim a
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
//! cached per thread (see [`stack_bounds`]). Nothing here allocates, locks or
//! makes a syscall on the fast path.

use crate::config::{Unwind, MAX_FRAMES};
use crate::modules::{Module, Table};
use pcstream_placement::signature::{Signature, SignatureBuilder};
use std::cell::Cell;

/// How the frames of a capture were obtained (wire `UnwindMethod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Frame-pointer chain only.
    FramePointer = 1,
    /// At least one frame came from the stack scan.
    StackScan = 2,
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
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    /// Module identity.
    pub key: u64,
    /// Runtime address − load bias.
    pub offset: u64,
    /// The module (for `ModuleInfo`).
    pub module: &'static Module,
}

/// A captured program context.
#[derive(Debug, Clone, Copy)]
pub struct Captured {
    /// Hash of the frames.
    pub signature: Signature,
    /// Frames, innermost first; `n` are valid.
    pub frames: [Option<Frame>; MAX_FRAMES],
    /// Number of valid frames.
    pub n: usize,
    /// How they were obtained.
    pub method: Method,
}

impl Captured {
    /// The valid frames.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        self.frames[..self.n].iter().flatten()
    }
}

thread_local! {
    /// Cached bounds `[lo, hi)` of the stack this thread last captured on.
    static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// Cheap, process-wide facts used to recognise stacks (set at init).
#[derive(Debug, Clone, Copy)]
pub struct StackFacts {
    /// `__libc_stack_end`: just below the top of the main thread's stack.
    pub main_end: usize,
    /// Bytes below `main_end` that certainly belong to the main stack.
    pub main_span: usize,
    /// Bytes below a thread's TCB that certainly belong to its stack.
    pub thread_span: usize,
}

static mut FACTS: StackFacts = StackFacts {
    main_end: 0,
    main_span: 0,
    thread_span: 0,
};
static FACTS_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records the stack facts (constructor, before the shim is ready).
pub fn init_stack_facts() {
    extern "C" {
        static __libc_stack_end: *mut libc::c_void;
    }
    // SAFETY: __libc_stack_end is a plain pointer variable exported by ld.so.
    let main_end = unsafe { __libc_stack_end } as usize;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) };
    let lim = if rc == 0 {
        rl.rlim_cur as usize
    } else {
        8 << 20
    };
    let main_span = lim.clamp(128 << 10, 64 << 20) - (64 << 10);
    // Default pthread stack size (glibc uses RLIMIT_STACK, 2 MiB when unlimited).
    let thread_span = if rc == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
        lim.clamp(64 << 10, 64 << 20)
    } else {
        2 << 20
    } - (64 << 10);
    // SAFETY: written once here, before FACTS_SET publishes it; read only after.
    unsafe {
        FACTS = StackFacts {
            main_end,
            main_span,
            thread_span,
        }
    };
    FACTS_SET.store(true, std::sync::atomic::Ordering::Release);
}

fn facts() -> Option<StackFacts> {
    if FACTS_SET.load(std::sync::atomic::Ordering::Acquire) {
        // SAFETY: FACTS is immutable after FACTS_SET was stored.
        Some(unsafe { FACTS })
    } else {
        None
    }
}

/// Bounds `[lo, hi)` of mapped stack memory around `sp` that may be read.
///
/// Fast paths: the main thread's stack (below `__libc_stack_end`) and a
/// glibc thread stack (below the thread's TCB, which sits at the top of the
/// same mapping). Otherwise (alternate signal stacks, coroutines, unusually
/// large thread stacks) the mapping that contains `sp` is looked up once in
/// `/proc/self/maps` with raw syscalls and a stack buffer, and cached for the
/// thread. If even that fails, only the rest of the current page is readable.
pub fn stack_bounds(sp: usize) -> (usize, usize) {
    let (lo, hi) = STACK.with(|c| c.get());
    if sp >= lo && sp < hi {
        return (lo, hi);
    }
    let b = compute_bounds(sp);
    STACK.with(|c| c.set(b));
    b
}

fn compute_bounds(sp: usize) -> (usize, usize) {
    if let Some(f) = facts() {
        if sp < f.main_end && f.main_end - sp < f.main_span {
            return (f.main_end - f.main_span, f.main_end);
        }
        // SAFETY: pthread_self has no preconditions (reads the thread pointer).
        let tp = unsafe { libc::pthread_self() } as usize;
        if sp < tp && tp - sp < f.thread_span {
            return (tp - f.thread_span, tp);
        }
    }
    if let Some(b) = maps_lookup(sp) {
        return b;
    }
    (sp & !4095, (sp | 4095) + 1)
}

/// The mapping containing `addr`, from `/proc/self/maps` (async-signal-safe:
/// raw syscalls, no allocation).
fn maps_lookup(addr: usize) -> Option<(usize, usize)> {
    // SAFETY: raw openat with a NUL-terminated path; the fd is closed below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as i32;
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 2048];
    // Parser state: 0 = start hex, 1 = end hex, 2 = skip to newline.
    let (mut state, mut start, mut end) = (0u8, 0usize, 0usize);
    let mut found = None;
    'read: loop {
        // SAFETY: reads into our stack buffer of the given length.
        let n = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            match (state, b) {
                (0, b'-') => state = 1,
                (0, _) => start = (start << 4) | hex(b),
                (1, b' ') => {
                    if addr >= start && addr < end {
                        found = Some((start, end));
                        break 'read;
                    }
                    state = 2;
                }
                (1, _) => end = (end << 4) | hex(b),
                (_, b'\n') => {
                    state = 0;
                    start = 0;
                    end = 0;
                }
                _ => {}
            }
        }
    }
    // SAFETY: closes the fd opened above.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    found
}

fn hex(b: u8) -> usize {
    match b {
        b'0'..=b'9' => (b - b'0') as usize,
        b'a'..=b'f' => (b - b'a' + 10) as usize,
        _ => 0,
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
#[inline]
pub unsafe fn capture(table: &'static Table, record: *const usize, p: Params) -> Captured {
    let mut out = Captured {
        signature: Signature(0),
        frames: [None; MAX_FRAMES],
        n: 0,
        method: Method::FramePointer,
    };
    let k = p.frames.clamp(1, MAX_FRAMES);
    let rec = record as usize;
    let (_, hi) = stack_bounds(rec);
    if rec & 7 != 0 || rec + 16 > hi {
        return finish(out);
    }
    // SAFETY: rec..rec+16 is inside the stack (checked above).
    let (mut fp, ret0) = unsafe { (word(rec), word(rec + 8)) };
    if push(table, &mut out, ret0) != Step::Code {
        return finish(out);
    }
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
            match push(table, &mut out, ret) {
                Step::Code => {}
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
            return finish(out);
        }
    }
    out.method = Method::StackScan;
    let limit = hi.min(scan_from.saturating_add(p.scan_words * 8));
    let mut a = scan_from;
    while out.n < k && a + 8 <= limit {
        // SAFETY: a is 8-aligned and a+8 <= limit <= hi.
        let w = unsafe { word(a) };
        if push(table, &mut out, w) == Step::End {
            break;
        }
        a += 8;
    }
    finish(out)
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
fn push(table: &'static Table, out: &mut Captured, addr: usize) -> Step {
    let Some(h) = table.lookup(addr) else {
        return Step::NotCode;
    };
    if is_sigreturn(addr, h.range_end) {
        return Step::End;
    }
    if !h.module.own && out.n < MAX_FRAMES {
        let module: &'static Module = h.module;
        out.frames[out.n] = Some(Frame {
            key: module.key,
            offset: h.offset,
            module,
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

fn finish(mut out: Captured) -> Captured {
    let mut b = SignatureBuilder::new();
    for f in out.frames() {
        b.push(f.key, f.offset);
    }
    out.signature = b.finish();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modules;

    #[inline(never)]
    fn capture_here(p: Params) -> Captured {
        // A synthetic record like the trampoline's: {rbp, return address}.
        // The return address is one of our own functions' code (an address
        // inside a non-own module is needed for a frame, so use libc's).
        let rec = [0usize, libc::getpid as *const () as usize + 1];
        // SAFETY: `rec` lives on this stack.
        unsafe { capture(modules::table().unwrap(), rec.as_ptr(), p) }
    }

    #[test]
    fn record_frame_is_first_and_deterministic() {
        init_stack_facts();
        modules::refresh();
        let p = Params {
            frames: 5,
            unwind: Unwind::FramePointer,
            scan_words: 256,
        };
        let a = capture_here(p);
        assert_eq!(a.n, 1, "zero rbp ends the chain after the record's frame");
        assert_eq!(a.method, Method::FramePointer);
        let f = a.frames[0].unwrap();
        let t = modules::table().unwrap();
        let h = t.lookup(libc::getpid as *const () as usize + 1).unwrap();
        assert_eq!((f.key, f.offset), (h.module.key, h.offset));
        assert_eq!(a.signature, capture_here(p).signature);
    }

    #[test]
    fn bounds_of_this_thread_contain_sp() {
        init_stack_facts();
        let x = 0u64;
        let sp = &x as *const u64 as usize;
        let (lo, hi) = stack_bounds(sp);
        assert!(lo <= sp && sp < hi, "{lo:x} {sp:x} {hi:x}");
        let from_maps = maps_lookup(sp).expect("stack is in /proc/self/maps");
        assert!(from_maps.0 <= sp && sp < from_maps.1);
        assert!(
            hi <= from_maps.1 + 4096 * 64,
            "bounds stay near the mapping"
        );
    }
}
