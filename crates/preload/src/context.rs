//! The program context of an intercepted call: its signature and stream,
//! cheaply when they can be had (a write from the JDK's natives: its Java
//! call path, `java.rs`; any other: the signature caches), else captured in
//! full and described (`ModuleInfo`s, `SignatureInfo`) the first time the
//! process sees it. Every writer asks here: regular files (`track.rs`),
//! raw devices (`rawdev.rs`) and the C API (`capi.rs`).

use crate::events::Kind;
use crate::modules;
use crate::signature::{self, Captured};
use crate::state::{self, events_on, SEEN_SIGS};
use crate::tls::Thread;
use std::sync::atomic::Ordering;

/// Captures the program context behind the trampoline's frame record;
/// `false` before the module table exists.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
unsafe fn capture(t: &Thread, rec: *const usize, cap: &mut Captured) -> bool {
    let Some(table) = modules::table() else {
        return false;
    };
    // SAFETY: `rec` is the trampoline's frame record on this thread's stack.
    unsafe { signature::capture_into(t, table, rec, state::params(), cap) };
    true
}

/// The full capture of a call path the caches did not have (described the
/// first time the process sees it): its signature and stream; `None`
/// before the module table exists.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[cold]
#[inline(never)]
pub(crate) unsafe fn capture_described(t: &Thread, rec: *const usize) -> Option<(u64, u32)> {
    if let Some(table) = modules::table() {
        // SAFETY: forwarded caller contract.
        if let Some(hit) = unsafe { crate::java::direct(t, table, rec) } {
            return Some(hit);
        }
    }
    let mut cap = Captured::new();
    // SAFETY: forwarded caller contract.
    if !unsafe { capture(t, rec, &mut cap) } {
        return None;
    }
    describe(&cap);
    Some((cap.signature.0, cap.stream))
}

/// The signature and stream of the call path behind `rec` when they come
/// cheap: a write from the JDK's natives gets its Java call path's
/// (`java.rs`), any other one its path's from the signature caches; `None`
/// otherwise (then [`capture_described`]) and before the module table
/// exists. What every writer asks first (regular files, raw devices, the C
/// API), so that a Java write is never answered by its native path's cache.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
pub(crate) unsafe fn cached_context(t: &Thread, rec: *const usize) -> Option<(u64, u32)> {
    let table = modules::table()?;
    // SAFETY: forwarded caller contract.
    if let Some(hit) = unsafe { crate::java::direct(t, table, rec) } {
        return Some(hit);
    }
    // SAFETY: forwarded caller contract.
    unsafe { signature::cached(t, table, rec, state::params()) }
        .map(|(sig, stream)| (sig.0, stream))
}

/// The native signature of a Java write, recorded beside its Java call
/// path `signature` (`java::native_beside`): the call path captured as
/// with Java call paths off (the signature caches, else a full capture,
/// described the first time). 0 for every other write, and when the two
/// are the same (the Java stack could not be read). Two relaxed loads
/// unless recording native signatures.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
pub(crate) unsafe fn native_beside_java(t: &Thread, rec: *const usize, signature: u64) -> u64 {
    if !crate::java::native_beside() {
        return 0;
    }
    // SAFETY: forwarded caller contract.
    let native = unsafe { native_capture(t, rec) };
    if native == signature {
        0
    } else {
        native
    }
}

/// [`native_beside_java`]'s capture, out of line: 0 for a write not
/// called from the JDK's I/O natives.
///
/// # Safety
/// As [`native_beside_java`].
#[cold]
#[inline(never)]
unsafe fn native_capture(t: &Thread, rec: *const usize) -> u64 {
    let Some(table) = modules::table() else {
        return 0;
    };
    // SAFETY: forwarded caller contract.
    if !unsafe { crate::java::from_jdk_natives(table, rec) } {
        return 0;
    }
    // SAFETY: forwarded caller contract.
    if let Some((sig, _)) = unsafe { signature::cached(t, table, rec, state::params()) } {
        return sig.0;
    }
    let mut cap = Captured::new();
    // SAFETY: forwarded caller contract.
    if !unsafe { capture(t, rec, &mut cap) } {
        return 0;
    }
    describe(&cap);
    cap.signature.0
}

/// Describes a program context (modules, signature) the first time this
/// process sees it.
fn describe(cap: &Captured) {
    // A cached signature was described by the capture that cached it.
    if !events_on() || cap.cached || !SEEN_SIGS.insert(cap.signature.0) {
        return;
    }
    let Some(table) = modules::table() else {
        return;
    };
    let mut frames = [(0u64, 0u64); crate::config::MAX_FRAMES];
    for (i, f) in cap.frames().enumerate() {
        frames[i] = (f.key, f.offset);
        let Some(m) = table.modules.iter().find(|m| m.key == f.key) else {
            continue;
        };
        if !m.sent.swap(true, Ordering::Relaxed) {
            state::emit(&Kind::Module {
                key: m.key,
                build_id: m.build_id,
                path: m.path,
                size: m.size,
            });
        }
    }
    state::emit(&Kind::Signature {
        signature: cap.signature.0,
        frames: &frames[..cap.n],
        method: cap.method as u32,
    });
}
