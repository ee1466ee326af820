//! Bodies of the kernel-side copies into a file: `copy_file_range` (what
//! `cp` and `install` use since coreutils 9), `sendfile`/`sendfile64`
//! (Python's `shutil.copyfile`) and `splice` (a pipe into a file). Each is
//! a write to its output descriptor, traced like the write family
//! ([`super::writes::traced`], call kind `copy`): the caller's call path
//! gets the output file's hint, and the event names where the data went.
//!
//! Where it went: at the output descriptor's file position when the call
//! takes no output offset (and the kernel moves the position on); else at
//! the offset the caller's pointer held, which the kernel advanced by the
//! bytes copied, so it is read back after a successful call (a pointer the
//! kernel accepted; the shim never reads an application pointer the call
//! may reject). A copy the file system makes by sharing extents (a
//! reflink on Btrfs or XFS) is reported as written, though no data moves.

use super::shape::Rec;
use super::writes::traced;
use crate::events::WriteCall;
use crate::real::Real;
use crate::state::Guard;
use libc::{c_int, c_uint, loff_t, off_t, size_t, ssize_t};

/// `copy_file_range`'s and `splice`'s type.
pub type CopyFn =
    unsafe extern "C" fn(c_int, *mut loff_t, c_int, *mut loff_t, size_t, c_uint) -> ssize_t;
/// `sendfile`'s and `sendfile64`'s type.
pub type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut off_t, size_t) -> ssize_t;

/// Where `r` bytes copied to an output offset `off_out` went: `None` (at
/// the file position) without a pointer, else its value before the call.
///
/// # Safety
/// Only after a successful call that took `off_out`: the kernel then read
/// and wrote it, so it is valid.
#[inline(always)]
unsafe fn out_offset(off_out: *mut loff_t, r: ssize_t) -> Option<u64> {
    if off_out.is_null() {
        return None;
    }
    // SAFETY: the caller's contract (the kernel just advanced it by `r`).
    let after = unsafe { off_out.read_volatile() };
    Some((after as u64).saturating_sub(r as u64))
}

/// `copy_file_range` and `splice`: `len` bytes from `fd_in` into `fd_out`
/// (at `*off_out`, or at its file position).
///
/// # Safety
/// The real function's contract; `rec` is the trampoline's frame record.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the C function's six, the real one and the record
pub unsafe fn copy(
    real: &Real<CopyFn>,
    fd_in: c_int,
    off_in: *mut loff_t,
    fd_out: c_int,
    off_out: *mut loff_t,
    len: size_t,
    flags: c_uint,
    rec: Rec,
) -> ssize_t {
    // SAFETY: `traced` calls `at` only after the call succeeded.
    let at = move |_: &Guard, r: ssize_t| (unsafe { out_offset(off_out, r) }, WriteCall::Copy);
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), fd_out, rec, at, |f| {
            f(fd_in, off_in, fd_out, off_out, len, flags)
        })
    }
}

/// `sendfile`, `sendfile64`: `count` bytes from `in_fd` (at `*offset`, an
/// input offset) to `out_fd` at its file position.
///
/// # Safety
/// The real function's contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn sendfile(
    real: &Real<SendfileFn>,
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut off_t,
    count: size_t,
    rec: Rec,
) -> ssize_t {
    let at = |_: &Guard, _: ssize_t| (None, WriteCall::Copy);
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), out_fd, rec, at, |f| {
            f(out_fd, in_fd, offset, count)
        })
    }
}
