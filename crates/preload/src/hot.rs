//! The write path's hot cache line: what every intercepted write reads
//! (the shim's state, capture parameters, the fork generation, the hint
//! cache's epoch, the TLS offset, the module table and the real write
//! functions), in one line, set at init. A leaf module: the modules whose
//! values live here (`state`, `files`, `hint`, `modules`, `tls`, `hooks`)
//! all use it and it uses none of them.

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// `Hot::state` before the constructor ran.
pub const UNINIT: u8 = 0;
/// `Hot::state`: the shim works.
pub const ACTIVE: u8 = 2;
/// `Hot::state`: every call passes straight through.
pub const PASSTHROUGH: u8 = 3;
/// `Hot::state`: nothing to do yet (no trace directory, no daemon, no
/// mapping); calls pass through, and now and then one looks for a daemon
/// that started after the process (`state::wake`, `live::look`).
pub const DORMANT: u8 = 4;
/// `Hot::state`: a dormant process turning active (one thread, `state::wake`).
pub const WAKING: u8 = 5;

/// What every intercepted write reads, in one cache line: after a write
/// syscall the shim's data is usually cold, and one miss is cheaper than
/// one per scattered static. Set at init (the configuration is immutable
/// after it); the defaults are `Config::default()`'s.
#[repr(C, align(64))]
pub struct Hot {
    pub state: AtomicU8,
    /// Events are produced (a trace file or a daemon socket).
    pub events: AtomicBool,
    /// The process is exiting: every event is flushed at once.
    pub finished: AtomicBool,
    /// `Unwind` as `Unwind::index`.
    pub unwind: AtomicU8,
    pub frames: AtomicU32,
    pub scan_words: AtomicU32,
    /// Fork generation (`files.rs`: positions are trusted only within it).
    pub fork_gen: AtomicU32,
    /// Changes of the per-inode hint cache (`hint.rs`): a descriptor's
    /// copy of its inode's hint is good while this has not moved.
    pub hint_epoch: AtomicU32,
    /// Offset of the per-thread state from the thread pointer (`tls.rs`;
    /// 0: not known yet).
    pub tls_off: AtomicI32,
    pub flush_ns: AtomicU64,
    /// The current module table (`modules.rs`).
    pub table: AtomicPtr<()>,
    /// The real `write`, `pwrite`, `pwrite64` (`real.rs`; 0 before init).
    pub fns: [AtomicUsize; 3],
}

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

pub static HOT: Hot = Hot {
    state: AtomicU8::new(UNINIT),
    events: AtomicBool::new(false),
    finished: AtomicBool::new(false),
    unwind: AtomicU8::new(0),
    frames: AtomicU32::new(5),
    scan_words: AtomicU32::new(512),
    fork_gen: AtomicU32::new(1),
    hint_epoch: AtomicU32::new(1),
    tls_off: AtomicI32::new(0),
    flush_ns: AtomicU64::new(100_000_000),
    table: AtomicPtr::new(std::ptr::null_mut()),
    fns: [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ],
};

/// Index of the real `write` in the hot line (see [`hot_fn`]).
pub const HOT_WRITE: usize = 0;
/// Index of the real `pwrite`.
pub const HOT_PWRITE: usize = 1;
/// Index of the real `pwrite64`.
pub const HOT_PWRITE64: usize = 2;

/// The address of a real write function kept in the hot line (what
/// the hook table resolved at init; 0 before).
#[inline(always)]
pub fn hot_fn(i: usize) -> usize {
    HOT.fns[i].load(Ordering::Relaxed)
}

/// The fork generation (starts at 1).
#[inline(always)]
pub fn fork_gen() -> u32 {
    HOT.fork_gen.load(Ordering::Relaxed)
}

/// Both sides of a fork: a new generation.
pub fn bump_fork_gen() {
    HOT.fork_gen.fetch_add(1, Ordering::Relaxed);
}

/// The per-inode hint cache's epoch (starts at 1).
#[inline(always)]
pub fn hint_epoch() -> u32 {
    HOT.hint_epoch.load(Ordering::Acquire)
}

/// After a change to the per-inode hint cache.
pub fn bump_hint_epoch() {
    HOT.hint_epoch.fetch_add(1, Ordering::Release);
}

/// The per-thread state's offset from the thread pointer (0: not known
/// yet), and setting it (init).
#[inline(always)]
pub fn tls_off() -> i32 {
    HOT.tls_off.load(Ordering::Relaxed)
}

/// Sets the per-thread state's offset (init).
pub fn set_tls_off(off: isize) {
    if let Ok(o) = i32::try_from(off) {
        HOT.tls_off.store(o, Ordering::Relaxed);
    }
}

/// The current module table's slot (kept in the hot line; `modules.rs`
/// owns what it points to).
#[inline(always)]
pub fn table_slot() -> &'static AtomicPtr<()> {
    &HOT.table
}

/// Stores the real write functions' addresses (init).
pub fn set_hot_fns(fns: [usize; 3]) {
    for (slot, a) in HOT.fns.iter().zip(fns) {
        slot.store(a, Ordering::Relaxed);
    }
}
