//! The shim's internals as `benches/hot_path.rs` measures them, and the
//! only part of the crate public to other Rust code.
//!
//! Every other module is private to the crate on purpose: an item that
//! other crates can reach (a public function, or anything a public
//! `#[inline]` or generic function touches) keeps default symbol
//! visibility, so inside `libpcstream.so` it is addressed through the GOT
//! (each static one extra load from a GOT line, each call an indirect
//! call). Crate-private items are hidden and addressed directly. What the
//! bench needs is therefore offered here as types and `#[inline(never)]`
//! wrappers, whose bodies other crates never see (each measured operation
//! pays one direct call for it).

use crate::{batch, clock, hint, modules, signature, tls};

pub use crate::batch::RawWrite;
pub use crate::config::Unwind;
pub use crate::events::{FileId, Kind, WriteCall, WriteEncoder};
pub use crate::hint::Map;
pub use crate::modules::Table;
pub use crate::signature::{Captured, Params};
pub use crate::tls::Thread;

/// What the library constructor sets up for the write path (stack facts,
/// module table, clock), and a calibrated TSC rate as a shim has ~20 ms
/// after starting.
#[inline(never)]
pub fn init() {
    signature::init_stack_facts();
    modules::refresh();
    clock::init();
    std::thread::sleep(std::time::Duration::from_millis(20));
    clock::Anchor::read();
}

/// The module table ([`init`] built it).
#[inline(never)]
pub fn table() -> Option<&'static Table> {
    modules::table()
}

/// Runs `f` with this thread's shim state.
#[inline(never)]
pub fn with_thread(f: &mut dyn FnMut(&Thread)) {
    tls::with(|t| f(t))
}

/// [`signature::capture_into`].
///
/// # Safety
/// `record` points to two readable words (a frame record) on this thread's stack.
#[inline(never)]
pub unsafe fn capture_into(
    t: &Thread,
    table: &Table,
    record: *const usize,
    p: Params,
    out: &mut Captured,
) {
    // SAFETY: forwarded caller contract.
    unsafe { signature::capture_into(t, table, record, p, out) }
}

/// [`signature::cached`]: (signature, stream) of a known call path.
///
/// # Safety
/// As [`capture_into`].
#[inline(never)]
pub unsafe fn cached(
    t: &Thread,
    table: &Table,
    record: *const usize,
    p: Params,
) -> Option<(u64, u32)> {
    // SAFETY: forwarded caller contract.
    unsafe { signature::cached(t, table, record, p) }.map(|(s, stream)| (s.0, stream))
}

/// Forgets this thread's remembered call paths (so [`cached`] goes to the
/// process-wide signature cache, as a thread cycling through more call
/// paths than it remembers does).
#[inline(never)]
pub fn forget_path(t: &Thread) {
    for m in &t.paths {
        m.clear();
    }
}

/// [`hint::install_map`].
#[inline(never)]
pub fn install_map(m: Map) {
    hint::install_map(m)
}

/// [`hint::remember`].
#[inline(never)]
pub fn remember_hint(f: FileId, h: u64) {
    hint::remember(f, h)
}

/// [`hint::cached`].
#[inline(never)]
pub fn cached_hint(f: FileId) -> Option<u64> {
    hint::cached(f)
}

/// [`batch::push`].
#[inline(never)]
pub fn push(t: &Thread, kind: &Kind<'_>, flush_ns: u64, force: bool) {
    batch::push(t, kind, flush_ns, force)
}

/// [`batch::push_write`].
#[inline(never)]
pub fn push_write(t: &Thread, w: RawWrite, flush_ns: u64, force: bool) {
    batch::push_write(t, w, flush_ns, force)
}

/// `pageage::touch`: an in-place `O_DIRECT` write's age class, recorded.
#[inline(never)]
pub fn page_age(id: FileId, offset: u64, len: u64) -> u32 {
    crate::pageage::touch(id, offset, len)
}
