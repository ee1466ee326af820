//! Body of libaio's `io_submit` (not libc's: `libaio.so.1`, which MySQL's
//! InnoDB and fio's `libaio` engine link): each submitted `IOCB_CMD_PWRITE`
//! or `IOCB_CMD_PWRITEV` to a regular file is a positioned write, traced
//! (call kind `aio`) and hinted like `pwrite`, by the call path that
//! submitted it.
//!
//! Traced at submission, for the control blocks the kernel took (the first
//! `r` of a call that returned `r`): whether the write then succeeds is
//! only known at completion, which the shim does not see (a failed
//! asynchronous write is still traced). The blocks and their vectors are
//! read after the call, once the kernel has read them (the shim never reads
//! application memory a call may reject); an application that reuses a
//! block for another request on another thread in the instant between the
//! kernel's return and that read can get that request traced instead.
//! `RWF_APPEND` writes (their offset is chosen at completion) are not traced.
//!
//! The real `io_submit` is found when the first call comes if libaio was
//! not loaded at start-up (a `dlopen`ed engine).
//!
//! A block device with write streams (`rawdev.rs`) needs its node's hint
//! *before* the submission (the kernel builds the requests inside the
//! call): in a process that has met such a device, the first block is read
//! before the call, without risking a fault (`process_vm_readv`: a block
//! the call would reject with `EFAULT` is simply not read), and when it is a
//! write to such a device the call path's hint is set on its node. Every
//! block of one call has the same call path, so the same stream.

use super::shape::{around, Rec};
use crate::events::WriteCall;
use crate::real::Real;
use crate::{sys, track};
use libc::{c_int, c_long, iovec};

/// `struct iocb` (`linux/aio_abi.h`, x86-64; libaio's has the same layout).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Iocb {
    data: u64,
    key: u32,
    rw_flags: c_int,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_PWRITEV: u16 = 8;
const RWF_APPEND: c_int = 0x10;

/// `io_submit`'s type (`io_context_t` is a pointer).
pub type IoSubmitFn = unsafe extern "C" fn(usize, c_long, *mut *mut Iocb) -> c_int;

/// Where a submitted block writes: `(fd, offset, bytes)`, `None` for
/// anything but a positioned write of at least one byte.
///
/// # Safety
/// `cb` is a block the kernel just accepted (readable, as its vector for
/// `IOCB_CMD_PWRITEV`).
unsafe fn write_of(cb: *const Iocb) -> Option<(c_int, u64, u64)> {
    // SAFETY: the caller's contract.
    let cb = unsafe { cb.read_volatile() };
    if cb.rw_flags & RWF_APPEND != 0 || cb.offset < 0 {
        return None;
    }
    let len = match cb.opcode {
        IOCB_CMD_PWRITE => cb.nbytes,
        IOCB_CMD_PWRITEV => {
            let v = cb.buf as *const iovec;
            // SAFETY: the kernel imported these `nbytes` vectors at submission.
            (0..cb.nbytes as usize)
                .map(|i| unsafe { v.add(i).read_volatile() }.iov_len as u64)
                .sum()
        }
        _ => return None,
    };
    (len > 0).then_some((cb.fildes as c_int, cb.offset as u64, len))
}

/// Before the call, in a process that met a block device with write
/// streams: the hint of the first block's device, when it is a write to
/// such a device.
fn raw_first(g: &crate::state::Guard, iocbpp: *mut *mut Iocb, rec: Rec) {
    let mut p = [0u8; 8];
    if !crate::rawdev::peek(iocbpp as usize, &mut p) {
        return;
    }
    let mut cb = [0u8; std::mem::size_of::<Iocb>()];
    if !crate::rawdev::peek(usize::from_ne_bytes(p), &mut cb) {
        return;
    }
    // SAFETY: `cb` holds the bytes of a whole `Iocb` (plain integers).
    let cb: Iocb = unsafe { std::ptr::read_unaligned(cb.as_ptr() as *const Iocb) };
    let fd = cb.fildes as c_int;
    if !matches!(cb.opcode, IOCB_CMD_PWRITE | IOCB_CMD_PWRITEV)
        || !crate::files::get(fd).is_some_and(|i| i.raw)
    {
        return;
    }
    let mut b = track::Before::new();
    // SAFETY: `rec` is the trampoline's frame record, on this thread's stack.
    unsafe { track::before_write(g.thread(), fd, rec, &mut b) };
}

/// `io_submit(ctx, nr, iocbpp)`.
///
/// # Safety
/// libaio's contract; `rec` is the trampoline's frame record.
pub unsafe fn io_submit(
    real: &Real<IoSubmitFn>,
    ctx: usize,
    nr: c_long,
    iocbpp: *mut *mut Iocb,
    rec: Rec,
) -> c_int {
    around(
        real.get_late(),
        sys::enosys,
        true,
        // SAFETY: forwarding the application's arguments unchanged.
        |f| unsafe { f(ctx, nr, iocbpp) },
        |g| {
            if nr > 0 && crate::rawdev::seen() {
                g.observe(|| raw_first(g, iocbpp, rec));
            }
        },
        |g, r, ()| {
            if r <= 0 {
                return;
            }
            g.observe(|| {
                for i in 0..r as usize {
                    // SAFETY: the kernel took the first `r` blocks.
                    let Some((fd, off, n)) = (unsafe { write_of(iocbpp.add(i).read_volatile()) })
                    else {
                        continue;
                    };
                    let mut b = track::Before::new();
                    // SAFETY: `rec` is the trampoline's frame record, still
                    // on this thread's stack.
                    unsafe {
                        track::before_write(g.thread(), fd, rec, &mut b);
                        if b.after_needed(fd) {
                            track::write(g.thread(), fd, Some(off), n, WriteCall::Aio, rec, &b);
                        }
                    }
                }
            });
        },
    )
}
