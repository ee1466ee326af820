//! Bodies of the calls on descriptors: `fcntl` (the application's own
//! hints, duplication, `O_APPEND` changes), `ioctl` (a raw device's
//! `BLKDISCARD`, `BLKSECDISCARD`, `BLKZEROOUT`), `fallocate`, `ftruncate`,
//! `close`/`close_range`, `dup`/`dup2`/`dup3`, `lseek` and `fsync`/
//! `fdatasync`; each keeps the per-descriptor table (`files.rs`) right or
//! reports the data that died. Symbols that differ only in the real
//! function (`fcntl64`, `lseek64`, ...) share a body.

use super::shape::{around, Rec};
use crate::real::Real;
use crate::state::{self, Guard};
use crate::{files, sys, track};
use libc::{c_int, c_uint, off_t};
use pcstream_placement::hint::F_SET_RW_HINT;

/// `fcntl`'s and `fcntl64`'s type.
pub type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
/// `ioctl`'s type.
pub type IoctlFn = unsafe extern "C" fn(c_int, libc::c_ulong, ...) -> c_int;
/// `fallocate`'s and `fallocate64`'s type.
pub type FallocateFn = unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;
/// `ftruncate`'s and `ftruncate64`'s type.
pub type FtruncateFn = unsafe extern "C" fn(c_int, off_t) -> c_int;
/// `close`'s, `dup`'s, `fsync`'s and `fdatasync`'s type.
pub type FdFn = unsafe extern "C" fn(c_int) -> c_int;
/// `close_range`'s type.
pub type CloseRangeFn = unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
/// `dup2`'s type.
pub type Dup2Fn = unsafe extern "C" fn(c_int, c_int) -> c_int;
/// `dup3`'s type.
pub type Dup3Fn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
/// `lseek`'s and `lseek64`'s type.
pub type LseekFn = unsafe extern "C" fn(c_int, off_t, c_int) -> off_t;

/// A hook with no work before the call and `after(result)` (in
/// `observe`) after it.
#[inline(always)]
fn then<F: Copy, R: Copy + From<i8>>(
    real: Option<F>,
    call: impl Fn(F) -> R,
    after: impl FnOnce(&Guard, R),
) -> R {
    around(
        real,
        sys::enosys,
        false,
        call,
        |_| (),
        |g, r, ()| after(g, r),
    )
}

/// `fcntl`, `fcntl64` (the third argument is passed on as the machine word
/// the application passed).
///
/// # Safety
/// `fcntl`'s contract.
pub unsafe fn fcntl(real: &Real<FcntlFn>, fd: c_int, cmd: c_int, arg: usize, _: Rec) -> c_int {
    let after = |g: &Guard, r: c_int| {
        let err = sys::errno();
        match cmd {
            F_SET_RW_HINT => {
                g.observe(|| track::app_hint(fd, arg, r, err));
            }
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if r >= 0 => {
                g.observe(|| {
                    files::clear(r);
                    files::share(fd);
                });
            }
            // O_APPEND or O_DIRECT may have changed (InnoDB sets O_DIRECT
            // this way): the entry is made again from the flags.
            libc::F_SETFL if r == 0 => {
                g.observe(|| track::flags_changed(fd));
            }
            _ => {}
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(fd, cmd, arg) }, after)
}

/// `ioctl`: a block device's range deallocated or zeroed (`BLKDISCARD`,
/// `BLKSECDISCARD`, `BLKZEROOUT`) dies; every other request goes straight
/// to the real call (no guard, no work: a terminal's `TCGETS` costs the
/// trampoline and one compare). The third argument is passed on as the
/// machine word the application passed.
///
/// # Safety
/// `ioctl`'s contract.
pub unsafe fn ioctl(real: &Real<IoctlFn>, fd: c_int, req: u64, arg: usize, _: Rec) -> c_int {
    const BLKDISCARD: u64 = 0x1277;
    const BLKSECDISCARD: u64 = 0x127d;
    const BLKZEROOUT: u64 = 0x127f;
    if !matches!(req, BLKDISCARD | BLKSECDISCARD | BLKZEROOUT) {
        let Some(f) = real.get() else {
            return sys::enosys();
        };
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { f(fd, req as libc::c_ulong, arg) };
    }
    let after = |g: &Guard, r: c_int| {
        if r == 0 && state::events_on() {
            g.observe(|| track::discarded(fd, arg));
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(
        real.get(),
        |f| unsafe { f(fd, req as libc::c_ulong, arg) },
        after,
    )
}

/// `fallocate`, `fallocate64` (punched or zeroed ranges die).
///
/// # Safety
/// `fallocate`'s contract.
pub unsafe fn fallocate(
    real: &Real<FallocateFn>,
    fd: c_int,
    mode: c_int,
    off: off_t,
    len: off_t,
    _: Rec,
) -> c_int {
    let after = |g: &Guard, r: c_int| {
        if r == 0 && state::events_on() {
            g.observe(|| track::fallocated(fd, mode, off, len));
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(fd, mode, off, len) }, after)
}

/// `ftruncate`, `ftruncate64`: the data past the new length dies.
///
/// # Safety
/// `ftruncate`'s contract.
pub unsafe fn ftruncate(real: &Real<FtruncateFn>, fd: c_int, len: off_t, _: Rec) -> c_int {
    let before = |g: &Guard| {
        if state::events_on() {
            g.observe(|| track::stat_fd(fd)).flatten()
        } else {
            None
        }
    };
    let after = |g: &Guard, r: c_int, stat: Option<track::PathStat>| {
        if let (0, Some(b)) = (r, stat) {
            g.observe(|| track::truncated(b, len as u64));
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    around(
        real.get(),
        sys::enosys,
        false,
        |f| unsafe { f(fd, len) },
        before,
        after,
    )
}

/// `close`: the descriptor's entry goes; the thread's batch is flushed.
///
/// # Safety
/// `close`'s contract.
pub unsafe fn close(real: &Real<FdFn>, fd: c_int, _: Rec) -> c_int {
    let before = |g: &Guard| g.observe(|| track::before_close(fd)).flatten();
    let after = |g: &Guard, r: c_int, unnamed| {
        g.observe(|| {
            files::clear(fd);
            if let (0, Some(s)) = (r, unnamed) {
                track::closed_unnamed(s);
            }
            crate::batch::flush_mine(g.thread());
        });
    };
    // SAFETY: forwarding the application's arguments unchanged.
    around(
        real.get(),
        sys::enosys,
        false,
        |f| unsafe { f(fd) },
        before,
        after,
    )
}

/// `close_range` (with `CLOSE_RANGE_CLOEXEC` nothing is closed yet).
///
/// # Safety
/// `close_range`'s contract.
pub unsafe fn close_range(
    real: &Real<CloseRangeFn>,
    first: c_uint,
    last: c_uint,
    flags: c_int,
    _: Rec,
) -> c_int {
    let after = |g: &Guard, r: c_int| {
        if r == 0 && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
            g.observe(|| {
                for fd in first..last.min(files::FDS as c_uint) {
                    files::clear(fd as c_int);
                }
            });
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(first, last, flags) }, after)
}

/// After a duplication of `old` onto `new`: `new` is a new entry, and
/// `old`'s position is shared (no longer the shim's to follow).
fn duplicated(g: &Guard, old: c_int, new: c_int) {
    g.observe(|| {
        files::clear(new);
        files::share(old);
    });
}

/// `dup`.
///
/// # Safety
/// `dup`'s contract.
pub unsafe fn dup(real: &Real<FdFn>, fd: c_int, _: Rec) -> c_int {
    let after = |g: &Guard, r: c_int| {
        if r >= 0 {
            duplicated(g, fd, r);
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(fd) }, after)
}

/// `dup2` (onto itself: nothing changes).
///
/// # Safety
/// `dup2`'s contract.
pub unsafe fn dup2(real: &Real<Dup2Fn>, old: c_int, new: c_int, _: Rec) -> c_int {
    let after = |g: &Guard, r: c_int| {
        if r >= 0 && old != new {
            duplicated(g, old, new);
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(old, new) }, after)
}

/// `dup3`.
///
/// # Safety
/// `dup3`'s contract.
pub unsafe fn dup3(real: &Real<Dup3Fn>, old: c_int, new: c_int, fl: c_int, _: Rec) -> c_int {
    let after = |g: &Guard, r: c_int| {
        if r >= 0 {
            duplicated(g, old, new);
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(old, new, fl) }, after)
}

/// `lseek`, `lseek64`: the shim follows the new position.
///
/// # Safety
/// `lseek`'s contract.
pub unsafe fn lseek(real: &Real<LseekFn>, fd: c_int, off: off_t, whence: c_int, _: Rec) -> off_t {
    let after = |g: &Guard, r: off_t| {
        if r >= 0 {
            g.observe(|| files::set_pos(fd, r as u64));
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(fd, off, whence) }, after)
}

/// `fsync`, `fdatasync`: the thread's batch is flushed once it is a few
/// milliseconds old (`state::SYNC_FLUSH_NS`).
///
/// # Safety
/// `fsync`'s contract.
pub unsafe fn sync(real: &Real<FdFn>, fd: c_int, _: Rec) -> c_int {
    let after = |g: &Guard, _| {
        g.observe(|| crate::batch::flush_mine_older(g.thread(), state::sync_flush_ns()));
    };
    // SAFETY: forwarding the application's arguments unchanged.
    then(real.get(), |f| unsafe { f(fd) }, after)
}
