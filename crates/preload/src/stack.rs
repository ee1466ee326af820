//! The bounds of the stack a capture may read: process-wide facts set at
//! init (the main thread's stack end, glibc's thread-descriptor layout) and
//! [`stack_bounds`], the per-thread cached bounds around a stack pointer
//! (fast paths for the main and glibc thread stacks, else a raw-syscall
//! lookup in `/proc/self/maps`). Async-signal-safe: no allocation, no lock.

use crate::tls::Thread;

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
/// thread (in `t`). If even that fails, only the rest of the current page
/// is readable.
#[inline(always)]
pub fn stack_bounds(t: &Thread, sp: usize) -> (usize, usize) {
    let (lo, hi) = t.stack.get();
    if sp >= lo && sp < hi {
        return (lo, hi);
    }
    let b = compute_bounds(sp);
    t.stack.set(b);
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
pub(crate) fn maps_lookup(addr: usize) -> Option<(usize, usize)> {
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
