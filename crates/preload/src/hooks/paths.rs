//! Bodies of the calls that name a file by path: the `open` family and
//! `creat` (a truncated file's data dies; the descriptor is tracked),
//! `truncate`, `unlink`/`remove`/`unlinkat` and the `rename` family (the
//! data of a file losing its last name dies). Each family is one shared
//! body ([`opened`], [`dying`]) differing only in the real call.

use super::shape::{around, Rec};
use crate::real::Real;
use crate::state::{self, Guard};
use crate::{sys, track};
use libc::{c_char, c_int, c_uint, mode_t, off_t};

/// `open`'s and `open64`'s type (variadic: the mode is read when needed).
pub type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
/// `openat`'s and `openat64`'s type.
pub type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;
/// `__open_2`'s and `__open64_2`'s type (fortified, no mode).
pub type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
/// `__openat_2`'s and `__openat64_2`'s type.
pub type OpenAt2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
/// `creat`'s and `creat64`'s type.
pub type CreatFn = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
/// `truncate`'s and `truncate64`'s type.
pub type TruncateFn = unsafe extern "C" fn(*const c_char, off_t) -> c_int;
/// `unlink`'s and `remove`'s type.
pub type UnlinkFn = unsafe extern "C" fn(*const c_char) -> c_int;
/// `unlinkat`'s type.
pub type UnlinkAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
/// `rename`'s type.
pub type RenameFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
/// `renameat`'s type.
pub type RenameAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
/// `renameat2`'s type.
pub type RenameAt2Fn =
    unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;

/// The open family's shared body: `dirfd`/`path`/`flags` as the call
/// sees them; `call` makes the real call.
#[inline(always)]
fn opened<F: Copy>(
    real: Option<F>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    call: impl Fn(F) -> c_int,
) -> c_int {
    let before = |g: &Guard| {
        if state::events_on() {
            g.observe(|| {
                // SAFETY: the application's pointers, as it passes them to the real call.
                unsafe { track::before_open(dirfd, path, flags) }
            })
            .unwrap_or(track::BeforeOpen::Unknown)
        } else {
            track::BeforeOpen::Unknown
        }
    };
    let after = |g: &Guard, fd: c_int, stat| {
        if fd >= 0 {
            g.observe(|| track::opened(fd, flags, stat, false));
        }
    };
    around(real, sys::enosys, false, call, before, after)
}

/// `open`, `open64` (the mode is passed on as the word the application
/// passed; the kernel ignores it unless `O_CREAT`/`O_TMPFILE` is set).
///
/// # Safety
/// `open`'s contract.
pub unsafe fn open(
    real: &Real<OpenFn>,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    opened(real.get(), libc::AT_FDCWD, path, flags, |f| unsafe {
        f(path, flags, mode)
    })
}

/// `openat`, `openat64`.
///
/// # Safety
/// `openat`'s contract.
pub unsafe fn openat(
    real: &Real<OpenAtFn>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    opened(real.get(), dirfd, path, flags, |f| unsafe {
        f(dirfd, path, flags, mode)
    })
}

/// `__open_2`, `__open64_2`.
///
/// # Safety
/// `__open_2`'s contract.
pub unsafe fn open_2(real: &Real<Open2Fn>, path: *const c_char, flags: c_int, _: Rec) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    opened(real.get(), libc::AT_FDCWD, path, flags, |f| unsafe {
        f(path, flags)
    })
}

/// `__openat_2`, `__openat64_2`.
///
/// # Safety
/// `__openat_2`'s contract.
pub unsafe fn openat_2(
    real: &Real<OpenAt2Fn>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    _: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    opened(real.get(), dirfd, path, flags, |f| unsafe {
        f(dirfd, path, flags)
    })
}

/// `creat`, `creat64` (`open` with `O_CREAT | O_WRONLY | O_TRUNC`).
///
/// # Safety
/// `creat`'s contract.
pub unsafe fn creat(real: &Real<CreatFn>, path: *const c_char, mode: mode_t, _: Rec) -> c_int {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    // SAFETY: forwarding the application's arguments unchanged.
    opened(real.get(), libc::AT_FDCWD, path, flags, |f| unsafe {
        f(path, mode)
    })
}

/// `truncate`, `truncate64`: the data past the new length dies.
///
/// # Safety
/// `truncate`'s contract.
pub unsafe fn truncate(real: &Real<TruncateFn>, path: *const c_char, len: off_t, _: Rec) -> c_int {
    let before = |g: &Guard| {
        if !state::events_on() {
            return None;
        }
        g.observe(|| {
            // SAFETY: the application's pointers, as it passes them to the real call.
            unsafe { track::stat_path(libc::AT_FDCWD, path, true) }
        })
        .flatten()
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
        |f| unsafe { f(path, len) },
        before,
        after,
    )
}

/// The shared body of calls that may take a file's last name: `stat()`
/// says which file (before the call), `died` what its success means.
#[inline(always)]
fn dying<F: Copy>(
    real: Option<F>,
    stat: impl FnOnce() -> Option<track::PathStat>,
    died: fn(track::PathStat),
    call: impl Fn(F) -> c_int,
) -> c_int {
    let before = |g: &Guard| {
        if state::events_on() {
            g.observe(stat).flatten()
        } else {
            None
        }
    };
    let after = |g: &Guard, r: c_int, stat: Option<track::PathStat>| {
        if let (0, Some(b)) = (r, stat) {
            g.observe(|| died(b));
        }
    };
    around(real, sys::enosys, false, call, before, after)
}

/// `unlink`, `remove`.
///
/// # Safety
/// `unlink`'s contract.
pub unsafe fn unlink(real: &Real<UnlinkFn>, path: *const c_char, _: Rec) -> c_int {
    // SAFETY: the application's pointer, as it passes it to the real call.
    let stat = || unsafe { track::before_unlink(libc::AT_FDCWD, path) };
    // SAFETY: forwarding the application's arguments unchanged.
    dying(real.get(), stat, track::unlinked, |f| unsafe { f(path) })
}

/// `unlinkat` (`AT_REMOVEDIR` removes a directory: no file data dies).
///
/// # Safety
/// `unlinkat`'s contract.
pub unsafe fn unlinkat(
    real: &Real<UnlinkAtFn>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    _: Rec,
) -> c_int {
    let stat = || {
        // SAFETY: the application's pointers, as it passes them to the real call.
        (flags & libc::AT_REMOVEDIR == 0).then(|| unsafe { track::before_unlink(dirfd, path) })?
    };
    // SAFETY: forwarding the application's arguments unchanged.
    dying(real.get(), stat, track::unlinked, |f| unsafe {
        f(dirfd, path, flags)
    })
}

/// The file a rename would replace.
fn replaced(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
) -> impl FnOnce() -> Option<track::PathStat> {
    // SAFETY: the application's pointers, as it passes them to the real call.
    move || unsafe { track::before_rename(od, old, nd, new) }
}

/// `rename`.
///
/// # Safety
/// `rename`'s contract.
pub unsafe fn rename(
    real: &Real<RenameFn>,
    old: *const c_char,
    new: *const c_char,
    _: Rec,
) -> c_int {
    let stat = replaced(libc::AT_FDCWD, old, libc::AT_FDCWD, new);
    // SAFETY: forwarding the application's arguments unchanged.
    dying(real.get(), stat, track::replaced, |f| unsafe {
        f(old, new)
    })
}

/// `renameat`.
///
/// # Safety
/// `renameat`'s contract.
pub unsafe fn renameat(
    real: &Real<RenameAtFn>,
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    _: Rec,
) -> c_int {
    let stat = replaced(od, old, nd, new);
    // SAFETY: forwarding the application's arguments unchanged.
    dying(real.get(), stat, track::replaced, |f| unsafe {
        f(od, old, nd, new)
    })
}

/// `renameat2` (`RENAME_EXCHANGE` keeps both files; `RENAME_NOREPLACE`
/// replaces nothing).
///
/// # Safety
/// `renameat2`'s contract.
pub unsafe fn renameat2(
    real: &Real<RenameAt2Fn>,
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    fl: c_uint,
    _: Rec,
) -> c_int {
    let replaces = fl & (libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) == 0;
    let stat = replaced(od, old, nd, new);
    let stat = move || if replaces { stat() } else { None };
    // SAFETY: forwarding the application's arguments unchanged.
    dying(real.get(), stat, track::replaced, |f| unsafe {
        f(od, old, nd, new, fl)
    })
}
