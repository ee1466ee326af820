//! The shim's per-thread state, in one const-initialised thread-local with no
//! destructor (registering a TLS destructor allocates, and the shim must not
//! allocate on its hot path or run code at thread exit).
//!
//! In a shared object every thread-local access is a call to
//! `__tls_get_addr`, so an intercepted call reaches this struct once (the
//! re-entrancy guard in `state.rs` keeps a pointer to it) and hands it down
//! to the signature capture and the event batch instead of each of them
//! looking up its own thread-local.

use std::cell::Cell;

/// Everything the shim keeps per thread.
#[derive(Debug)]
pub struct Thread {
    /// Inside the shim (the re-entrancy guard).
    pub in_shim: Cell<bool>,
    /// Cached `gettid()` (0: not read yet; reset in a fork child).
    tid: Cell<u32>,
    /// Index of this thread's batch slot ([`NO_SLOT`]: none claimed yet).
    pub slot: Cell<u32>,
    /// Bounds `[lo, hi)` of the stack this thread last captured on.
    pub stack: Cell<(usize, usize)>,
    /// `__errno_location()` (null: not asked yet); a thread's errno does
    /// not move, also not in a fork child (same address space layout).
    errno: Cell<*mut i32>,
}

/// [`Thread::slot`] before the thread claimed a batch slot.
pub const NO_SLOT: u32 = u32::MAX;

impl Thread {
    const fn new() -> Thread {
        Thread {
            in_shim: Cell::new(false),
            tid: Cell::new(0),
            slot: Cell::new(NO_SLOT),
            stack: Cell::new((0, 0)),
            errno: Cell::new(std::ptr::null_mut()),
        }
    }

    /// This thread's `errno` (one `__errno_location` call per thread).
    #[inline(always)]
    pub fn errno(&self) -> *mut i32 {
        let e = self.errno.get();
        if !e.is_null() {
            return e;
        }
        // SAFETY: __errno_location has no preconditions.
        let e = unsafe { libc::__errno_location() };
        self.errno.set(e);
        e
    }

    /// This thread's id (one `gettid` per thread).
    #[inline]
    pub fn tid(&self) -> u32 {
        let t = self.tid.get();
        if t != 0 {
            return t;
        }
        // SAFETY: gettid has no preconditions.
        let t = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        self.tid.set(t);
        t
    }

    /// In a fork child: the thread is a new one (its id and batch slot are
    /// its parent's).
    pub fn reset_after_fork(&self) {
        self.tid.set(0);
        self.slot.set(NO_SLOT);
    }
}

thread_local! {
    static THREAD: Thread = const { Thread::new() };
}

/// Runs `f` with this thread's state (one thread-local access).
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&Thread) -> R) -> R {
    THREAD.with(f)
}
