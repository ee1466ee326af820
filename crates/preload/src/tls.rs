//! The shim's per-thread state: one zero-initialised block of
//! initial-exec TLS (defined in `thread.c`), with no destructor
//! (registering a TLS destructor allocates, and the shim must not allocate
//! on its hot path or run code at thread exit).
//!
//! A Rust thread-local in a shared object is reached through a call to
//! `__tls_get_addr` (general-dynamic model: its code, the thread's DTV and
//! the loader's TLS generation, several cache lines). The block in
//! `thread.c` is initial-exec, so [`with`] is `%fs:0` plus the block's
//! offset from the thread pointer (a GOT word, copied at init into the
//! write path's hot line in `state.rs`).
//! An intercepted call reaches it once (the re-entrancy guard in
//! `state.rs` keeps a pointer to it) and hands it down to the signature
//! capture and the event batch.
//!
//! The first cache line holds what every intercepted write reads (guard,
//! errno location, stack bounds, batch slot) and the head of the thread's
//! first remembered call path ([`Thread::paths`]); the second its raw
//! return addresses; the third and fourth, read only for paths the CFI
//! walk found, the unwind rules at those addresses and where a repeat of
//! the path finds them on the stack. The second remembered path follows
//! (read when the thread alternates paths), then this thread's stdio run
//! and its draw for verifying Java repeats.

use std::cell::Cell;

/// Most raw return addresses the per-thread path cache keeps.
pub const PATH_FRAMES: usize = 8;

/// How many call paths a thread remembers ([`Thread::paths`]).
pub const PATHS: usize = 2;

/// One remembered call path of a thread (all-zero: none).
#[derive(Debug)]
#[repr(C)]
pub struct PathMemo {
    /// Frames of the path in [`PathMemo::addrs`] (0: none), with the CFI
    /// flags of `signature::cfipath` in the high bits.
    pub n: Cell<u32>,
    /// Stream of the path's signature.
    pub stream: Cell<u32>,
    /// Signature of the path.
    pub sig: Cell<u64>,
    /// The module table the path was resolved with (its raw addresses mean
    /// nothing under another one).
    pub table: Cell<usize>,
    /// The raw return addresses of the path (the first `n`).
    pub addrs: [Cell<usize>; PATH_FRAMES],
    /// For a path found by the CFI walk: the packed unwind rule
    /// (`cfi::Rule::pack`) at each of `addrs`, so a repeat of the path
    /// unwinds with a few loads per frame and no lookup.
    pub rules: [Cell<u32>; PATH_FRAMES],
    /// For a path found by the CFI walk: where return address `i + 1`
    /// lies, as an offset from the entry trampoline's frame record (fixed
    /// by the rules at the path's addresses while they take the CFA from
    /// `rsp`, what code without frame pointers has; where a rule takes it
    /// from `rbp`, fixed as long as [`PathMemo::checks`] holds), so a
    /// repeat compares one word per frame; `slots[0] == 0`: not known,
    /// unwind with `rules`.
    pub slots: [Cell<u32>; PATH_FRAMES],
    /// With `slots`: for frame `i` whose rule takes the CFA from `rbp`, the
    /// `rbp` value that puts its CFA where `slots` says, as
    /// `1 << 63 | (value - record) << 32 | where it is read` (an offset
    /// from the record: the trampoline's saved `rbp`, or the slot a frame
    /// below saved it in); 0: the rule takes the CFA from `rsp`.
    pub checks: [Cell<u64>; PATH_FRAMES],
}

impl PathMemo {
    /// Forgets the path.
    #[inline]
    pub fn clear(&self) {
        self.n.set(0);
    }
}

/// Everything the shim keeps per thread. All-zero is the initial state
/// (the TLS block starts zeroed in every thread).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Thread {
    /// Inside the shim (the re-entrancy guard).
    pub in_shim: Cell<bool>,
    /// Index + 1 of this thread's batch slot ([`NO_SLOT`]: none claimed yet).
    pub slot: Cell<u32>,
    /// Cached `gettid()` (0: not read yet; reset in a fork child).
    tid: Cell<u32>,
    /// Index of the most recently used of [`Thread::paths`].
    pub path_mru: Cell<u32>,
    /// `__errno_location()` (null: not asked yet); a thread's errno does
    /// not move, also not in a fork child (same address space layout).
    errno: Cell<*mut i32>,
    /// Bounds `[lo, hi)` of the stack this thread last captured on.
    pub stack: Cell<(usize, usize)>,
    /// The thread's last clean call paths whose signatures are known, most
    /// recently used first by [`Thread::path_mru`]: a write from one of
    /// them compares its chain against the remembered return addresses and
    /// is done, touching no shared cache line. Two, so that a thread
    /// alternating two call paths (a journal and its table, two streams on
    /// one raw device) repeats both.
    pub paths: [PathMemo; PATHS],
    /// The file of this thread's last stdio call (`track::stdio`): a call
    /// on it that continues where that one ended (within the gap `putc`
    /// may leave) is the same stdio run, with the run's signature and
    /// stream, and is not unwound again.
    pub stdio_file: Cell<crate::events::FileId>,
    /// Where the last stdio call's bytes ended in `stdio_file`.
    pub stdio_end: Cell<u64>,
    /// The stdio run's signature (0: no run).
    pub stdio_sig: Cell<u64>,
    /// The stdio run's stream.
    pub stdio_stream: Cell<u32>,
    /// The `FILE` of the last stdio call, its buffer (`_IO_write_base`)
    /// and where its write pointer stood after the call: the next call's
    /// offset follows from the pointer while the buffer was not flushed
    /// (`track::stdio`), without `ftello` (an `lseek` per call where glibc
    /// does not know the position).
    pub stdio_fp: Cell<usize>,
    /// `_IO_write_base` of `stdio_fp` after the last call.
    pub stdio_base: Cell<usize>,
    /// `_IO_write_ptr` of `stdio_fp` after the last call.
    pub stdio_ptr: Cell<usize>,
    /// The stream and hint (high half) the run's last event carried, which
    /// a call continuing the run in the same buffer repeats.
    pub stdio_sent: Cell<u64>,
    /// The descriptor of `stdio_fp` when the run's last call was made.
    pub stdio_fd: Cell<i32>,
    /// A xorshift state (0: not seeded yet) that picks which of this
    /// thread's trusted Java repeats are verified (`java::direct_jvm`):
    /// random, so that no call path a thread alternates with others is
    /// always the one skipped; per thread, so that no cache line is shared.
    pub java_rng: Cell<u32>,
}

// thread.c's `pcstream_thread_state` has exactly this size.
const _: () = assert!(std::mem::size_of::<Thread>() == 576);
const _: () = assert!(std::mem::align_of::<Thread>() <= 64);

/// [`Thread::slot`] before the thread claimed a batch slot.
pub const NO_SLOT: u32 = 0;

impl Thread {
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

extern "C" {
    /// The TLS block (`thread.c`); only its address is used, through `asm!`.
    static pcstream_thread_state: u8;
}

/// The thread pointer (`%fs:0`).
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: on x86-64 Linux `%fs:0` holds the thread pointer itself.
    unsafe {
        core::arch::asm!(
            "mov {tp}, qword ptr fs:[0]",
            tp = out(reg) tp,
            options(pure, readonly, nostack, preserves_flags),
        )
    };
    tp
}

/// This thread's state block, through its GOT word.
#[inline(always)]
fn from_got() -> usize {
    let off: usize;
    // SAFETY: initial-exec TLS access to a symbol defined in thread.c as
    // `__thread` with that model: the GOT word holds the block's offset
    // from the thread pointer.
    unsafe {
        core::arch::asm!(
            "mov {off}, qword ptr [rip + {s}@GOTTPOFF]",
            off = out(reg) off,
            s = sym pcstream_thread_state,
            options(pure, readonly, nostack, preserves_flags),
        )
    };
    thread_pointer().wrapping_add(off)
}

/// The state block's offset from the thread pointer (the same in every
/// thread); `state.rs` keeps it in the write path's hot line, which saves
/// reading the GOT's line.
pub fn offset() -> isize {
    from_got().wrapping_sub(thread_pointer()) as isize
}

/// This thread's state block.
#[inline(always)]
fn current() -> *const Thread {
    let off = crate::hot::tls_off();
    let p = if off != 0 {
        thread_pointer().wrapping_add(off as isize as usize)
    } else {
        from_got()
    };
    p as *const Thread
}

/// Runs `f` with this thread's state.
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&Thread) -> R) -> R {
    // SAFETY: the block is size_of::<Thread>() zero-initialised bytes (the
    // size of thread.c's array, kept equal by the assertion above), 64-aligned, private
    // to this thread and alive as long as it; all-zero is a valid Thread
    // (cells of integers, bools and raw pointers), and it is only ever
    // accessed as a Thread (through shared references: interior mutability).
    f(unsafe { &*current() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_zeroed_state() {
        let here = with(|t| t as *const Thread as usize);
        with(|t| t.paths[1].n.set(3));
        let (other, n) =
            std::thread::spawn(|| with(|t| (t as *const Thread as usize, t.paths[1].n.get())))
                .join()
                .unwrap();
        assert_ne!(here, other);
        assert_eq!(n, 0, "a new thread starts from zero");
        assert_eq!(with(|t| t.paths[1].n.get()), 3);
        assert_eq!(here % 64, 0);
    }
}
