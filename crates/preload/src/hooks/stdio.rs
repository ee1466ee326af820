//! The stdio bodies: `fwrite`, `fputs`, `puts` and the `printf` family
//! (the variadic forms reach [`vfprintf`] through `stdio.c`) are [`traced`]
//! stdio writes, differing in the real call and the byte count; `fopen`,
//! `fdopen` and `fclose` keep the descriptor table right.

use super::shape::{around, Rec};
use crate::real::{self, Real};
use crate::state::{self, Guard};
use crate::{files, sys, track};
use libc::{c_char, c_int, c_void, size_t, FILE};

/// `fwrite`'s and `fwrite_unlocked`'s type.
pub type FwriteFn = unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t;
/// `fputs`'s and `fputs_unlocked`'s type.
pub type FputsFn = unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int;
/// `puts`'s type.
pub type PutsFn = unsafe extern "C" fn(*const c_char) -> c_int;
/// `vfprintf`'s type.
pub type VfprintfFn = unsafe extern "C" fn(*mut FILE, *const c_char, *mut c_void) -> c_int;
/// `vprintf`'s type.
pub type VprintfFn = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;
/// `__vfprintf_chk`'s type.
pub type VfprintfChkFn =
    unsafe extern "C" fn(*mut FILE, c_int, *const c_char, *mut c_void) -> c_int;
/// `__vprintf_chk`'s type.
pub type VprintfChkFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;
/// `fopen`'s and `fopen64`'s type.
pub type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;

extern "C" {
    static mut stdout: *mut FILE;
}

fn stdout_file() -> *mut FILE {
    // SAFETY: reading libc's `stdout` pointer (the application may have
    // reassigned it; we read it when the call returns, as libc did).
    unsafe { stdout }
}

/// The shared body of a stdio write: the real call, then (when `bytes`
/// says it wrote some) the event for stream `f()`.
///
/// # Safety
/// `rec` is the trampoline's frame record; `call` forwards the
/// application's arguments; `bytes(r)` may read what they point to only
/// when `r` says the call succeeded.
#[inline(always)]
unsafe fn traced<F: Copy, R: Copy>(
    real: Option<F>,
    failed: R,
    rec: Rec,
    f: impl FnOnce() -> *mut FILE,
    bytes: impl FnOnce(R) -> Option<u64>,
    call: impl Fn(F) -> R,
) -> R {
    let missing = || {
        sys::set_errno(libc::ENOSYS);
        failed
    };
    around(
        real,
        missing,
        true,
        call,
        |_| (),
        |g, r, ()| {
            g.observe(|| {
                if let Some(n) = bytes(r) {
                    // SAFETY: the stream the application wrote to; `rec` as above.
                    unsafe { track::stdio(g.thread(), f(), n, rec) }
                }
            });
        },
    )
}

/// `fwrite`, `fwrite_unlocked`.
///
/// # Safety
/// `fwrite`'s contract; `rec` is the trampoline's frame record.
pub unsafe fn fwrite(
    real: &Real<FwriteFn>,
    p: *const c_void,
    size: size_t,
    n: size_t,
    f: *mut FILE,
    rec: Rec,
) -> size_t {
    let bytes = |r: size_t| (r > 0).then(|| (r as u64).saturating_mul(size as u64));
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real.get(), 0, rec, || f, bytes, |real| real(p, size, n, f)) }
}

/// `fputs`, `fputs_unlocked`.
///
/// # Safety
/// `fputs`'s contract; `rec` is the trampoline's frame record.
pub unsafe fn fputs(real: &Real<FputsFn>, s: *const c_char, f: *mut FILE, rec: Rec) -> c_int {
    // SAFETY: fputs succeeded, so `s` is a valid C string.
    let bytes = |r: c_int| (r >= 0).then(|| unsafe { libc::strlen(s) } as u64);
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real.get(), libc::EOF, rec, || f, bytes, |real| real(s, f)) }
}

/// `puts` (the string and a newline to `stdout`).
///
/// # Safety
/// `puts`'s contract; `rec` is the trampoline's frame record.
pub unsafe fn puts(real: &Real<PutsFn>, s: *const c_char, rec: Rec) -> c_int {
    // SAFETY: puts succeeded, so `s` is a valid C string.
    let bytes = |r: c_int| (r >= 0).then(|| unsafe { libc::strlen(s) } as u64 + 1);
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), libc::EOF, rec, stdout_file, bytes, |real| {
            real(s)
        })
    }
}

/// What a `printf` reports: the bytes it wrote when positive.
fn printed(r: c_int) -> Option<u64> {
    (r > 0).then_some(r as u64)
}

/// `vfprintf` (also `fprintf` and `printf`, through `stdio.c`).
///
/// # Safety
/// `vfprintf`'s contract; `rec` is a frame record on this stack.
pub unsafe fn vfprintf(
    real: &Real<VfprintfFn>,
    f: *mut FILE,
    fmt: *const c_char,
    ap: *mut c_void,
    rec: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real.get(), -1, rec, || f, printed, |real| real(f, fmt, ap)) }
}

/// `vprintf`.
///
/// # Safety
/// `vprintf`'s contract; `rec` is the trampoline's frame record.
pub unsafe fn vprintf(
    real: &Real<VprintfFn>,
    fmt: *const c_char,
    ap: *mut c_void,
    rec: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), -1, rec, stdout_file, printed, |real| {
            real(fmt, ap)
        })
    }
}

/// `__vfprintf_chk` (also `__fprintf_chk` and `__printf_chk`, through
/// `stdio.c`).
///
/// # Safety
/// `__vfprintf_chk`'s contract; `rec` is a frame record on this stack.
pub unsafe fn vfprintf_chk(
    real: &Real<VfprintfChkFn>,
    f: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
    rec: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(
            real.get(),
            -1,
            rec,
            || f,
            printed,
            |real| real(f, flag, fmt, ap),
        )
    }
}

/// `__vprintf_chk`.
///
/// # Safety
/// `__vprintf_chk`'s contract; `rec` is the trampoline's frame record.
pub unsafe fn vprintf_chk(
    real: &Real<VprintfChkFn>,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
    rec: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), -1, rec, stdout_file, printed, |real| {
            real(flag, fmt, ap)
        })
    }
}

/// `vfprintf` with an explicit frame record, for `stdio.c`.
///
/// # Safety
/// Same contract as `vfprintf`; `rec` points to a frame record on this stack.
#[no_mangle]
pub unsafe extern "C" fn pcstream_vfprintf_impl(
    f: *mut FILE,
    fmt: *const c_char,
    ap: *mut c_void,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: as documented.
    unsafe { vfprintf(&super::reals::vfprintf, f, fmt, ap, rec) }
}

/// `__vfprintf_chk` with an explicit frame record, for `stdio.c`.
///
/// # Safety
/// Same contract as `__vfprintf_chk`; `rec` points to a frame record on this stack.
#[no_mangle]
pub unsafe extern "C" fn pcstream_vfprintf_chk_impl(
    f: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
    _: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: as documented.
    unsafe { vfprintf_chk(&super::reals::__vfprintf_chk, f, flag, fmt, ap, rec) }
}

/// The descriptor behind a stream (`-1`: none or unknown).
fn fileno(f: *mut FILE) -> c_int {
    if f.is_null() {
        return -1;
    }
    // SAFETY: the application hands `f` to libc, which reads it the same way.
    real::FILENO.get().map_or(-1, |fileno| unsafe { fileno(f) })
}

/// `fclose`: the descriptor's entry goes, the thread's batch is flushed.
///
/// # Safety
/// `fclose`'s contract.
pub unsafe fn fclose(
    real: &Real<unsafe extern "C" fn(*mut FILE) -> c_int>,
    f: *mut FILE,
    _: Rec,
) -> c_int {
    let before = |g: &Guard| {
        // The stream's stdio run ends with it (its FILE may come back from
        // the next fopen, with a buffer at the same address).
        if g.thread().stdio_fp.get() == f as usize {
            g.thread().stdio_fp.set(0);
        }
        let fd = g.observe(|| fileno(f)).unwrap_or(-1);
        // SAFETY: `f` is the stream the application is closing.
        (
            fd,
            g.observe(|| unsafe { track::before_fclose(f, fd) })
                .flatten(),
        )
    };
    let after = |g: &Guard, r: c_int, (fd, unnamed)| {
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
        |real| unsafe { real(f) },
        before,
        after,
    )
}

/// open(2) flags equivalent to an fopen mode.
fn fopen_flags(mode: *const c_char) -> c_int {
    if mode.is_null() {
        return 0;
    }
    // SAFETY: the mode is a C string (fopen reads it too; checked non-null).
    let m = unsafe { std::ffi::CStr::from_ptr(mode) }.to_bytes();
    let rw = |w| if m.contains(&b'+') { libc::O_RDWR } else { w };
    match m.first() {
        Some(b'w') => libc::O_CREAT | libc::O_TRUNC | rw(libc::O_WRONLY),
        Some(b'a') => libc::O_CREAT | libc::O_APPEND | rw(libc::O_WRONLY),
        _ => rw(libc::O_RDONLY),
    }
}

/// `fopen`, `fopen64`: a truncated file's data dies; the new descriptor
/// is tracked.
///
/// # Safety
/// `fopen`'s contract.
pub unsafe fn fopen(
    real: &Real<FopenFn>,
    path: *const c_char,
    mode: *const c_char,
    _: Rec,
) -> *mut FILE {
    let before = |g: &Guard| {
        let flags = g.observe(|| fopen_flags(mode)).unwrap_or(0);
        let stat = if state::events_on() {
            g.observe(|| {
                // SAFETY: the application's pointers, as it passes them to fopen.
                unsafe { track::before_open(libc::AT_FDCWD, path, flags) }
            })
            .unwrap_or(track::BeforeOpen::Unknown)
        } else {
            track::BeforeOpen::Unknown
        };
        (flags, stat)
    };
    let after = |g: &Guard, r: *mut FILE, (flags, stat)| {
        if !r.is_null() {
            g.observe(|| {
                let fd = fileno(r);
                if fd >= 0 {
                    track::opened(fd, flags, stat, true);
                }
            });
        }
    };
    let missing = || {
        sys::set_errno(libc::ENOSYS);
        std::ptr::null_mut()
    };
    // SAFETY: forwarding the application's arguments unchanged.
    around(
        real.get(),
        missing,
        false,
        |real| unsafe { real(path, mode) },
        before,
        after,
    )
}

/// `fdopen`: the descriptor now belongs to a stream (its position moves
/// behind the shim's back).
///
/// # Safety
/// `fdopen`'s contract.
pub unsafe fn fdopen(
    real: &Real<unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE>,
    fd: c_int,
    mode: *const c_char,
    _: Rec,
) -> *mut FILE {
    let after = |g: &Guard, r: *mut FILE, ()| {
        if !r.is_null() {
            g.observe(|| files::untrack(fd));
        }
    };
    let missing = || {
        sys::set_errno(libc::ENOSYS);
        std::ptr::null_mut()
    };
    // SAFETY: forwarding the application's arguments unchanged.
    around(
        real.get(),
        missing,
        false,
        |real| unsafe { real(fd, mode) },
        |_| (),
        after,
    )
}
