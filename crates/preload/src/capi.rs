//! The opt-in C API (`crates/preload/include/pcstream.h`) for programs
//! whose writes the shim cannot see (io_uring): the stream of the caller's
//! call path, to put in `sqe->write_stream`, and reporting the write so the
//! daemon learns that path's lifetimes.
//!
//! * `int pcstream_stream_for_caller(void)`: the stream of the call path
//!   that reached this call, in the default domain (what a write from
//!   there to a regular file would be given); 0 when none is known.
//! * `int pcstream_stream_for_write(int fd, uint64_t offset, uint64_t len)`:
//!   the stream for a write of `len` bytes at `offset` of `fd` from the
//!   caller's call path, in `fd`'s domain: for a block device with write
//!   streams, a stream `1..=max_write_streams` for `sqe->write_stream` (0:
//!   none known, or above the device's streams); for a regular file, the
//!   default domain's stream, whose hint is also set on the file like a
//!   `write` would (`len > 0`). With `len > 0` the write is reported as a
//!   `WriteEvent` of call kind `URING` (at submission, like libaio's).
//!
//! Each is a naked trampoline like the hooks' (`hooks/shape.rs`): the
//! signature starts at the caller's return address, so a call site gets the
//! same signature every run. The body takes the re-entrancy guard; when the
//! shim is inactive (dormant, disabled, not initialised) or re-entered, it
//! returns 0 and does nothing. It never fails the caller and never touches
//! `errno`.

use crate::events::WriteCall;
use crate::hooks::shape::Rec;
use crate::state::Guard;
use crate::track::{self, Before};
use crate::{files, rawdev};
use libc::c_int;

/// `pcstream_stream_for_caller()`: see the module docs.
///
/// # Safety
/// Called from C with no arguments.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn pcstream_stream_for_caller() -> c_int {
    core::arch::naked_asm!(
        ".cfi_startproc",
        "push rbp",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_rel_offset rbp, 0",
        "mov rdi, rsp",
        "call {f}",
        "pop rbp",
        ".cfi_adjust_cfa_offset -8",
        ".cfi_restore rbp",
        "ret",
        ".cfi_endproc",
        f = sym stream_for_caller,
    )
}

/// `pcstream_stream_for_write(fd, offset, len)`: see the module docs.
///
/// # Safety
/// Called from C with the declared arguments.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn pcstream_stream_for_write(_fd: c_int, _offset: u64, _len: u64) -> c_int {
    core::arch::naked_asm!(
        ".cfi_startproc",
        "push rbp",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_rel_offset rbp, 0",
        "mov rcx, rsp",
        "call {f}",
        "pop rbp",
        ".cfi_adjust_cfa_offset -8",
        ".cfi_restore rbp",
        "ret",
        ".cfi_endproc",
        f = sym stream_for_write,
    )
}

/// The caller's call path: (signature, stream in the static map), `None`
/// before the module table exists.
///
/// # Safety
/// `rec` is the trampoline's frame record on this thread's stack.
unsafe fn path(g: &Guard, rec: Rec) -> Option<(u64, u32)> {
    let t = g.thread();
    // SAFETY: forwarded caller contract.
    match unsafe { crate::context::cached_context(t, rec) } {
        Some(hit) => Some(hit),
        // SAFETY: forwarded caller contract.
        None => unsafe { crate::context::capture_described(t, rec) },
    }
}

extern "C" fn stream_for_caller(rec: Rec) -> c_int {
    let Some(g) = Guard::enter() else { return 0 };
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        let (sig, cached) = unsafe { path(&g, rec) }?;
        Some(track::live_stream(sig, cached) as c_int)
    })
    .flatten()
    .unwrap_or(0)
}

extern "C" fn stream_for_write(fd: c_int, offset: u64, len: u64, rec: Rec) -> c_int {
    let Some(g) = Guard::enter() else { return 0 };
    g.observe(|| {
        let info = files::info(fd)?;
        // SAFETY: `rec` is the trampoline's frame record.
        let (sig, cached) = unsafe { path(&g, rec) }?;
        let t = g.thread();
        if info.raw {
            let raw = files::raw(fd)?;
            // An O_DIRECT write's page age refines it (`rawdev::placed`).
            let pos = (len > 0).then_some((offset, len));
            let (mut stream, age) = rawdev::placed(sig, cached, raw, pos);
            if stream > raw.streams {
                stream = 0;
            }
            if len > 0 {
                let b = Before {
                    info: Some(info),
                    hit: Some((sig, stream)),
                    raw_hint: crate::hint::cached(info.id).unwrap_or(0) as u8,
                    age,
                    pos,
                };
                rawdev::after(t, fd, info, Some(offset), len, WriteCall::Uring, &b);
            }
            return Some(stream as c_int);
        }
        if !info.regular {
            return Some(0);
        }
        if len > 0 {
            let b = Before {
                info: Some(info),
                hit: Some((sig, cached)),
                raw_hint: 0,
                age: None,
                pos: Some((offset, len)),
            };
            // The stream of the write as placed (an O_DIRECT one's by its
            // page age too).
            // SAFETY: forwarded caller contract.
            let placed =
                unsafe { track::finish_write(t, fd, info, offset, len, WriteCall::Uring, rec, &b) };
            if let Some((stream, _)) = placed {
                return Some(stream as c_int);
            }
        }
        Some(track::live_stream(sig, cached) as c_int)
    })
    .flatten()
    .unwrap_or(0)
}
