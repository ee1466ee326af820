//! Every interposed C entry point, all of one shape.
//!
//! Each exported symbol is a naked trampoline that pushes the caller's `rbp`
//! and passes a pointer to the synthetic frame record `{rbp, return address}`
//! as the 6th argument (`r9`; no interposed function takes six arguments) to
//! its `*_impl` function. An impl then:
//! 1. gets the real function (`ENOSYS` if this libc lacks it);
//! 2. takes the re-entrancy guard, or passes straight through;
//! 3. does any "before" work (stat of a file about to die) in `observe`;
//! 4. makes the real call with the guard released;
//! 5. does the "after" work in `observe` (errno kept, panics contained);
//! 6. returns the real call's result.
//!
//! The trampolines, the write-family impls and the write path after the
//! syscall are in `.text.hot.*` sections, kept together by the link
//! (`build.rs`). (Checking the state before anything else, to pass through
//! without a stack frame, was tried: it made traced writes ~8 ns slower
//! end to end, one more code line and a deeper stack, for no measurable
//! gain when passing through.)
//!
//! The variadic stdio entry points (`fprintf`, `printf` and their `_chk`
//! forms) are tiny C wrappers in `stdio.c` that call the `v*` impls here with
//! their own frame address as the record.

use crate::events::WriteCall;
use crate::real::{self, Real};
use crate::state::{self, Guard};
use crate::{files, track};
use libc::{c_char, c_int, c_uint, c_void, iovec, mode_t, off_t, size_t, ssize_t, FILE};
use pcstream_placement::hint::F_SET_RW_HINT;

macro_rules! trampolines {
    ($($sym:ident => $imp:ident;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($sym), "` (trampoline to `", stringify!($imp), "`).")]
        ///
        /// # Safety
        /// Called by C code with the C signature of the libc function of the same name.
        #[unsafe(naked)]
        #[no_mangle]
        #[link_section = ".text.hot.pcstream"]
        pub unsafe extern "C" fn $sym() {
            // CFI so unwinders (debuggers, profilers, the forced unwinding
            // of pthread_cancel through C++ frames) can step through.
            core::arch::naked_asm!(
                ".cfi_startproc",
                "push rbp",
                ".cfi_adjust_cfa_offset 8",
                ".cfi_rel_offset rbp, 0",
                "mov r9, rsp",
                "call {f}",
                "pop rbp",
                ".cfi_adjust_cfa_offset -8",
                ".cfi_restore rbp",
                "ret",
                ".cfi_endproc",
                f = sym $imp,
            )
        }
    )*};
}

trampolines! {
    write => write_impl;
    pwrite => pwrite_impl;
    pwrite64 => pwrite64_impl;
    writev => writev_impl;
    pwritev => pwritev_impl;
    pwritev64 => pwritev64_impl;
    pwritev2 => pwritev2_impl;
    pwritev64v2 => pwritev64v2_impl;
    fwrite => fwrite_impl;
    fwrite_unlocked => fwrite_unlocked_impl;
    fputs => fputs_impl;
    fputs_unlocked => fputs_unlocked_impl;
    puts => puts_impl;
    vfprintf => vfprintf_tramp_impl;
    vprintf => vprintf_impl;
    __vfprintf_chk => vfprintf_chk_tramp_impl;
    __vprintf_chk => vprintf_chk_impl;
    fclose => fclose_impl;
    fopen => fopen_impl;
    fopen64 => fopen64_impl;
    fdopen => fdopen_impl;
    fcntl => fcntl_impl;
    fcntl64 => fcntl64_impl;
    fallocate => fallocate_impl;
    fallocate64 => fallocate64_impl;
    truncate => truncate_impl;
    truncate64 => truncate64_impl;
    ftruncate => ftruncate_impl;
    ftruncate64 => ftruncate64_impl;
    unlink => unlink_impl;
    unlinkat => unlinkat_impl;
    remove => remove_impl;
    rename => rename_impl;
    renameat => renameat_impl;
    renameat2 => renameat2_impl;
    open => open_impl;
    open64 => open64_impl;
    openat => openat_impl;
    openat64 => openat64_impl;
    __open_2 => open_2_impl;
    __open64_2 => open64_2_impl;
    __openat_2 => openat_2_impl;
    __openat64_2 => openat64_2_impl;
    creat => creat_impl;
    creat64 => creat64_impl;
    close => close_impl;
    close_range => close_range_impl;
    dup => dup_impl;
    dup2 => dup2_impl;
    dup3 => dup3_impl;
    lseek => lseek_impl;
    lseek64 => lseek64_impl;
    fsync => fsync_impl;
    fdatasync => fdatasync_impl;
    execve => execve_impl;
    execv => execv_impl;
    execvp => execvp_impl;
    execvpe => execvpe_impl;
    dlopen => dlopen_impl;
}

macro_rules! jumps {
    ($($sym:ident => $c:ident;)*) => {
        extern "C" {
            $(fn $c();)*
        }
        $(
            #[doc = concat!("Interposed variadic `", stringify!($sym), "` (jumps to `", stringify!($c), "` in stdio.c).")]
            ///
            /// # Safety
            /// Called by C code with the C signature of the libc function of the same name.
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $sym() {
                core::arch::naked_asm!(".cfi_startproc", "jmp {f}", ".cfi_endproc", f = sym $c)
            }
        )*
    };
}

jumps! {
    fprintf => pcstream_c_fprintf;
    printf => pcstream_c_printf;
    __fprintf_chk => pcstream_c__fprintf_chk;
    __printf_chk => pcstream_c__printf_chk;
}

type Rec = *const usize;

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// A missing libc function behaves like a missing syscall.
fn enosys<T: From<i8>>() -> T {
    set_errno(libc::ENOSYS);
    T::from(-1)
}

// ---------------------------------------------------------------------------
// write family
// ---------------------------------------------------------------------------

type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type PwritevFn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
type Pwritev2Fn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;

#[link_section = ".text.hot.pcstream"]
unsafe extern "C" fn write_impl(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    _: usize,
    _: usize,
    rec: Rec,
) -> ssize_t {
    let Some(real) = real::WRITE.get_hot(state::hot_fn(state::HOT_WRITE)) else {
        return enosys();
    };
    // SAFETY (all real calls below): forwarding the application's arguments unchanged.
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, buf, n) };
    };
    let mut before = track::Before::new();
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) }
    });
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, buf, n) });
    if r > 0 && before.after_needed() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe {
                track::write(
                    g.thread(),
                    fd,
                    None,
                    r as u64,
                    WriteCall::Write,
                    rec,
                    &before,
                )
            }
        });
    }
    r
}

/// `hot`: the index of `real`'s copy in the hot line.
#[inline(always)]
unsafe fn pwrite_common(
    real: &Real<PwriteFn>,
    hot: usize,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    off: off_t,
    rec: Rec,
) -> ssize_t {
    let Some(real) = real.get_hot(state::hot_fn(hot)) else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, buf, n, off) };
    };
    let mut before = track::Before::new();
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) }
    });
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, buf, n, off) });
    if r > 0 && before.after_needed() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe {
                track::write(
                    g.thread(),
                    fd,
                    Some(off as u64),
                    r as u64,
                    WriteCall::Pwrite,
                    rec,
                    &before,
                )
            }
        });
    }
    r
}

#[link_section = ".text.hot.pcstream"]
unsafe extern "C" fn pwrite_impl(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    off: off_t,
    _: usize,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwrite.
    unsafe { pwrite_common(&real::PWRITE, state::HOT_PWRITE, fd, buf, n, off, rec) }
}

#[link_section = ".text.hot.pcstream"]
unsafe extern "C" fn pwrite64_impl(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    off: off_t,
    _: usize,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwrite64.
    unsafe { pwrite_common(&real::PWRITE64, state::HOT_PWRITE64, fd, buf, n, off, rec) }
}

#[link_section = ".text.hot.pcstream"]
unsafe extern "C" fn writev_impl(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    _: usize,
    _: usize,
    rec: Rec,
) -> ssize_t {
    let Some(real) = real::WRITEV.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, iov, cnt) };
    };
    let mut before = track::Before::new();
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) }
    });
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, iov, cnt) });
    if r > 0 && before.after_needed() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe {
                track::write(
                    g.thread(),
                    fd,
                    None,
                    r as u64,
                    WriteCall::Writev,
                    rec,
                    &before,
                )
            }
        });
    }
    r
}

#[inline(always)]
unsafe fn pwritev_common(
    real: &Real<PwritevFn>,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    rec: Rec,
) -> ssize_t {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, iov, cnt, off) };
    };
    let mut before = track::Before::new();
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) }
    });
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, iov, cnt, off) });
    if r > 0 && before.after_needed() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe {
                track::write(
                    g.thread(),
                    fd,
                    Some(off as u64),
                    r as u64,
                    WriteCall::Pwritev,
                    rec,
                    &before,
                )
            }
        });
    }
    r
}

unsafe extern "C" fn pwritev_impl(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    _: usize,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwritev.
    unsafe { pwritev_common(&real::PWRITEV, fd, iov, cnt, off, rec) }
}

unsafe extern "C" fn pwritev64_impl(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    _: usize,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwritev64.
    unsafe { pwritev_common(&real::PWRITEV64, fd, iov, cnt, off, rec) }
}

#[inline(always)]
unsafe fn pwritev2_common(
    real: &Real<Pwritev2Fn>,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    fl: c_int,
    rec: Rec,
) -> ssize_t {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, iov, cnt, off, fl) };
    };
    let mut before = track::Before::new();
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) }
    });
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, iov, cnt, off, fl) });
    if r > 0 && before.after_needed() {
        // offset -1: the current file position is used (and advanced);
        // RWF_APPEND: appended like O_APPEND (the position is not moved, so
        // the end of file minus the length is where it went).
        const RWF_APPEND: c_int = 0x10;
        let off = if fl & RWF_APPEND != 0 {
            Some(
                g.observe(|| {
                    files::fstat(fd).map_or(0, |(_, _, size)| size.saturating_sub(r as u64))
                })
                .unwrap_or(0),
            )
        } else {
            (off >= 0).then_some(off as u64)
        };
        let call = if off.is_some() {
            WriteCall::Pwritev
        } else {
            WriteCall::Writev
        };
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::write(g.thread(), fd, off, r as u64, call, rec, &before) }
        });
    }
    r
}

unsafe extern "C" fn pwritev2_impl(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    fl: c_int,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwritev2.
    unsafe { pwritev2_common(&real::PWRITEV2, fd, iov, cnt, off, fl, rec) }
}

unsafe extern "C" fn pwritev64v2_impl(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    fl: c_int,
    rec: Rec,
) -> ssize_t {
    // SAFETY: same contract as pwritev64v2.
    unsafe { pwritev2_common(&real::PWRITEV64V2, fd, iov, cnt, off, fl, rec) }
}

// ---------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------

type FwriteFn = unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t;
type FputsFn = unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int;

#[inline(always)]
unsafe fn fwrite_common(
    real: &Real<FwriteFn>,
    p: *const c_void,
    size: size_t,
    n: size_t,
    f: *mut FILE,
    rec: Rec,
) -> size_t {
    let Some(real) = real.get() else {
        return enosys::<i8>() as size_t;
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(p, size, n, f) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(p, size, n, f) });
    if r > 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stdio(g.thread(), f, (r as u64).saturating_mul(size as u64), rec) }
        });
    }
    r
}

unsafe extern "C" fn fwrite_impl(
    p: *const c_void,
    size: size_t,
    n: size_t,
    f: *mut FILE,
    _: usize,
    rec: Rec,
) -> size_t {
    // SAFETY: same contract as fwrite.
    unsafe { fwrite_common(&real::FWRITE, p, size, n, f, rec) }
}

unsafe extern "C" fn fwrite_unlocked_impl(
    p: *const c_void,
    size: size_t,
    n: size_t,
    f: *mut FILE,
    _: usize,
    rec: Rec,
) -> size_t {
    // SAFETY: same contract as fwrite_unlocked.
    unsafe { fwrite_common(&real::FWRITE_UNLOCKED, p, size, n, f, rec) }
}

#[inline(always)]
unsafe fn fputs_common(real: &Real<FputsFn>, s: *const c_char, f: *mut FILE, rec: Rec) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(s, f) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(s, f) });
    if r >= 0 {
        g.observe(|| {
            // SAFETY: fputs succeeded, so `s` is a valid C string and `f` a
            // valid stream; `rec` is the trampoline's record.
            unsafe { track::stdio(g.thread(), f, libc::strlen(s) as u64, rec) }
        });
    }
    r
}

unsafe extern "C" fn fputs_impl(
    s: *const c_char,
    f: *mut FILE,
    _: usize,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: same contract as fputs.
    unsafe { fputs_common(&real::FPUTS, s, f, rec) }
}

unsafe extern "C" fn fputs_unlocked_impl(
    s: *const c_char,
    f: *mut FILE,
    _: usize,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: same contract as fputs_unlocked.
    unsafe { fputs_common(&real::FPUTS_UNLOCKED, s, f, rec) }
}

extern "C" {
    static mut stdout: *mut FILE;
}

fn stdout_file() -> *mut FILE {
    // SAFETY: reading libc's `stdout` pointer (the application may have
    // reassigned it; we read it when the call returns, as libc did).
    unsafe { stdout }
}

unsafe extern "C" fn puts_impl(
    s: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    let Some(real) = real::PUTS.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(s) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(s) });
    if r >= 0 {
        g.observe(|| {
            // SAFETY: puts succeeded, so `s` is a valid C string (+1: the
            // newline); `rec` is the trampoline's record.
            unsafe { track::stdio(g.thread(), stdout_file(), libc::strlen(s) as u64 + 1, rec) }
        });
    }
    r
}

/// `vfprintf` with an explicit frame record (also called by `stdio.c`).
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
    let Some(real) = real::VFPRINTF.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(f, fmt, ap) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(f, fmt, ap) });
    if r > 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stdio(g.thread(), f, r as u64, rec) }
        });
    }
    r
}

unsafe extern "C" fn vfprintf_tramp_impl(
    f: *mut FILE,
    fmt: *const c_char,
    ap: *mut c_void,
    a: usize,
    b: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: same contract as vfprintf.
    unsafe { pcstream_vfprintf_impl(f, fmt, ap, a, b, rec) }
}

unsafe extern "C" fn vprintf_impl(
    fmt: *const c_char,
    ap: *mut c_void,
    _: usize,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    let Some(real) = real::VPRINTF.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fmt, ap) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fmt, ap) });
    if r > 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stdio(g.thread(), stdout_file(), r as u64, rec) }
        });
    }
    r
}

/// `__vfprintf_chk` with an explicit frame record (also called by `stdio.c`).
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
    let Some(real) = real::VFPRINTF_CHK.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(f, flag, fmt, ap) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(f, flag, fmt, ap) });
    if r > 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stdio(g.thread(), f, r as u64, rec) }
        });
    }
    r
}

unsafe extern "C" fn vfprintf_chk_tramp_impl(
    f: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
    a: usize,
    rec: Rec,
) -> c_int {
    // SAFETY: same contract as __vfprintf_chk.
    unsafe { pcstream_vfprintf_chk_impl(f, flag, fmt, ap, a, rec) }
}

unsafe extern "C" fn vprintf_chk_impl(
    flag: c_int,
    fmt: *const c_char,
    ap: *mut c_void,
    _: usize,
    _: usize,
    rec: Rec,
) -> c_int {
    let Some(real) = real::VPRINTF_CHK.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter_write() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(flag, fmt, ap) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(flag, fmt, ap) });
    if r > 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stdio(g.thread(), stdout_file(), r as u64, rec) }
        });
    }
    r
}

unsafe extern "C" fn fclose_impl(
    f: *mut FILE,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::FCLOSE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(f) };
    };
    let fd = if f.is_null() {
        -1
    } else {
        // SAFETY: the application hands `f` to fclose, which reads it the same way.
        g.observe(|| real::FILENO.get().map_or(-1, |fileno| unsafe { fileno(f) }))
            .unwrap_or(-1)
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(f) });
    g.observe(|| {
        files::clear(fd);
        crate::batch::flush_mine(g.thread());
    });
    r
}

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;

/// open(2) flags equivalent to an fopen mode.
fn fopen_flags(mode: *const c_char) -> c_int {
    if mode.is_null() {
        return 0;
    }
    // SAFETY: the mode is a C string (fopen reads it too; checked non-null).
    let m = unsafe { std::ffi::CStr::from_ptr(mode) }.to_bytes();
    let plus = m.contains(&b'+');
    match m.first() {
        Some(b'w') => {
            libc::O_CREAT | libc::O_TRUNC | if plus { libc::O_RDWR } else { libc::O_WRONLY }
        }
        Some(b'a') => {
            libc::O_CREAT | libc::O_APPEND | if plus { libc::O_RDWR } else { libc::O_WRONLY }
        }
        _ => {
            if plus {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            }
        }
    }
}

#[inline(always)]
unsafe fn fopen_common(
    real: &Real<FopenFn>,
    path: *const c_char,
    mode: *const c_char,
) -> *mut FILE {
    let Some(real) = real.get() else {
        return enosys::<i8>() as isize as *mut FILE;
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, mode) };
    };
    let flags = g.observe(|| fopen_flags(mode)).unwrap_or(0);
    let before = if flags & libc::O_TRUNC != 0 && state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stat_path(libc::AT_FDCWD, path, true) }
        })
        .flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, mode) });
    if !r.is_null() {
        g.observe(|| {
            // SAFETY: r is the FILE libc just opened.
            let fd = real::FILENO.get().map_or(-1, |fileno| unsafe { fileno(r) });
            if fd >= 0 {
                track::opened(fd, flags, before, true);
            }
        });
    }
    r
}

unsafe extern "C" fn fopen_impl(
    path: *const c_char,
    mode: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> *mut FILE {
    // SAFETY: same contract as fopen.
    unsafe { fopen_common(&real::FOPEN, path, mode) }
}

unsafe extern "C" fn fopen64_impl(
    path: *const c_char,
    mode: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> *mut FILE {
    // SAFETY: same contract as fopen64.
    unsafe { fopen_common(&real::FOPEN64, path, mode) }
}

unsafe extern "C" fn fdopen_impl(
    fd: c_int,
    mode: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> *mut FILE {
    let Some(real) = real::FDOPEN.get() else {
        return enosys::<i8>() as isize as *mut FILE;
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, mode) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, mode) });
    if !r.is_null() {
        g.observe(|| files::untrack(fd));
    }
    r
}

// ---------------------------------------------------------------------------
// fcntl, fallocate, truncate
// ---------------------------------------------------------------------------

type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;

#[inline(always)]
unsafe fn fcntl_common(real: &Real<FcntlFn>, fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    // SAFETY: forwarding the application's arguments unchanged (the third
    // argument is passed as the machine word the application passed).
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, cmd, arg) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, cmd, arg) });
    let err = errno();
    match cmd {
        F_SET_RW_HINT => {
            g.observe(|| track::app_hint(fd, arg, r, err));
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if r >= 0 => {
            g.observe(|| {
                files::clear(r);
                files::untrack(fd);
            });
        }
        // O_APPEND may have changed: forget what the table knew.
        libc::F_SETFL if r == 0 => {
            g.observe(|| files::clear(fd));
        }
        _ => {}
    }
    r
}

unsafe extern "C" fn fcntl_impl(
    fd: c_int,
    cmd: c_int,
    arg: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fcntl.
    unsafe { fcntl_common(&real::FCNTL, fd, cmd, arg) }
}

unsafe extern "C" fn fcntl64_impl(
    fd: c_int,
    cmd: c_int,
    arg: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fcntl64.
    unsafe { fcntl_common(&real::FCNTL64, fd, cmd, arg) }
}

type FallocateFn = unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;

#[inline(always)]
unsafe fn fallocate_common(
    real: &Real<FallocateFn>,
    fd: c_int,
    mode: c_int,
    off: off_t,
    len: off_t,
) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, mode, off, len) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, mode, off, len) });
    if r == 0 && state::events_on() {
        g.observe(|| track::fallocated(fd, mode, off, len));
    }
    r
}

unsafe extern "C" fn fallocate_impl(
    fd: c_int,
    mode: c_int,
    off: off_t,
    len: off_t,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fallocate.
    unsafe { fallocate_common(&real::FALLOCATE, fd, mode, off, len) }
}

unsafe extern "C" fn fallocate64_impl(
    fd: c_int,
    mode: c_int,
    off: off_t,
    len: off_t,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fallocate64.
    unsafe { fallocate_common(&real::FALLOCATE64, fd, mode, off, len) }
}

type TruncateFn = unsafe extern "C" fn(*const c_char, off_t) -> c_int;
type FtruncateFn = unsafe extern "C" fn(c_int, off_t) -> c_int;

#[inline(always)]
unsafe fn truncate_common(real: &Real<TruncateFn>, path: *const c_char, len: off_t) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, len) };
    };
    let before = if state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stat_path(libc::AT_FDCWD, path, true) }
        })
        .flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, len) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::truncated(b, len as u64));
    }
    r
}

unsafe extern "C" fn truncate_impl(
    path: *const c_char,
    len: off_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as truncate.
    unsafe { truncate_common(&real::TRUNCATE, path, len) }
}

unsafe extern "C" fn truncate64_impl(
    path: *const c_char,
    len: off_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as truncate64.
    unsafe { truncate_common(&real::TRUNCATE64, path, len) }
}

#[inline(always)]
unsafe fn ftruncate_common(real: &Real<FtruncateFn>, fd: c_int, len: off_t) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, len) };
    };
    let before = if state::events_on() {
        g.observe(|| track::stat_fd(fd)).flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, len) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::truncated(b, len as u64));
    }
    r
}

unsafe extern "C" fn ftruncate_impl(
    fd: c_int,
    len: off_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as ftruncate.
    unsafe { ftruncate_common(&real::FTRUNCATE, fd, len) }
}

unsafe extern "C" fn ftruncate64_impl(
    fd: c_int,
    len: off_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as ftruncate64.
    unsafe { ftruncate_common(&real::FTRUNCATE64, fd, len) }
}

// ---------------------------------------------------------------------------
// unlink, rename
// ---------------------------------------------------------------------------

unsafe extern "C" fn unlink_impl(
    path: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::UNLINK.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path) };
    };
    let before = if state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::before_unlink(libc::AT_FDCWD, path) }
        })
        .flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::unlinked(b));
    }
    r
}

unsafe extern "C" fn remove_impl(
    path: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::REMOVE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path) };
    };
    let before = if state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::before_unlink(libc::AT_FDCWD, path) }
        })
        .flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::unlinked(b));
    }
    r
}

unsafe extern "C" fn unlinkat_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::UNLINKAT.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(dirfd, path, flags) };
    };
    let before = if state::events_on() && flags & libc::AT_REMOVEDIR == 0 {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::before_unlink(dirfd, path) }
        })
        .flatten()
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(dirfd, path, flags) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::unlinked(b));
    }
    r
}

#[inline(always)]
fn rename_before(
    g: &Guard,
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
) -> Option<track::PathStat> {
    if state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::before_rename(od, old, nd, new) }
        })
        .flatten()
    } else {
        None
    }
}

unsafe extern "C" fn rename_impl(
    old: *const c_char,
    new: *const c_char,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::RENAME.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(old, new) };
    };
    let before = rename_before(&g, libc::AT_FDCWD, old, libc::AT_FDCWD, new);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(old, new) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::replaced(b));
    }
    r
}

unsafe extern "C" fn renameat_impl(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::RENAMEAT.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(od, old, nd, new) };
    };
    let before = rename_before(&g, od, old, nd, new);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(od, old, nd, new) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::replaced(b));
    }
    r
}

unsafe extern "C" fn renameat2_impl(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    fl: c_uint,
    _: Rec,
) -> c_int {
    let Some(real) = real::RENAMEAT2.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(od, old, nd, new, fl) };
    };
    // RENAME_EXCHANGE keeps both files; RENAME_NOREPLACE replaces nothing.
    let before = if fl & (libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) == 0 {
        rename_before(&g, od, old, nd, new)
    } else {
        None
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(od, old, nd, new, fl) });
    if let (0, Some(b)) = (r, before) {
        g.observe(|| track::replaced(b));
    }
    r
}

// ---------------------------------------------------------------------------
// open family
// ---------------------------------------------------------------------------

fn open_before(
    g: &Guard,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
) -> Option<track::PathStat> {
    if flags & libc::O_TRUNC != 0 && state::events_on() {
        g.observe(|| {
            // SAFETY: the application's pointers, as it passed them to the real call.
            unsafe { track::stat_path(dirfd, path, flags & libc::O_NOFOLLOW == 0) }
        })
        .flatten()
    } else {
        None
    }
}

fn open_after(g: &Guard, fd: c_int, flags: c_int, before: Option<track::PathStat>) {
    if fd >= 0 {
        g.observe(|| track::opened(fd, flags, before, false));
    }
}

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;

#[inline(always)]
unsafe fn open_common(
    real: &Real<OpenFn>,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    // SAFETY: forwarding the application's arguments unchanged (mode is
    // passed on as the word the application passed; open ignores it unless
    // O_CREAT/O_TMPFILE is set).
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, flags, mode) };
    };
    let before = open_before(&g, libc::AT_FDCWD, path, flags);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, flags, mode) });
    open_after(&g, r, flags, before);
    r
}

unsafe extern "C" fn open_impl(
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as open.
    unsafe { open_common(&real::OPEN, path, flags, mode) }
}

unsafe extern "C" fn open64_impl(
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as open64.
    unsafe { open_common(&real::OPEN64, path, flags, mode) }
}

#[inline(always)]
unsafe fn openat_common(
    real: &Real<OpenAtFn>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(dirfd, path, flags, mode) };
    };
    let before = open_before(&g, dirfd, path, flags);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(dirfd, path, flags, mode) });
    open_after(&g, r, flags, before);
    r
}

unsafe extern "C" fn openat_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as openat.
    unsafe { openat_common(&real::OPENAT, dirfd, path, flags, mode) }
}

unsafe extern "C" fn openat64_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as openat64.
    unsafe { openat_common(&real::OPENAT64, dirfd, path, flags, mode) }
}

type Open2Fn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type OpenAt2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;

#[inline(always)]
unsafe fn open2_common(real: &Real<Open2Fn>, path: *const c_char, flags: c_int) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, flags) };
    };
    let before = open_before(&g, libc::AT_FDCWD, path, flags);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, flags) });
    open_after(&g, r, flags, before);
    r
}

unsafe extern "C" fn open_2_impl(
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as __open_2.
    unsafe { open2_common(&real::OPEN_2, path, flags) }
}

unsafe extern "C" fn open64_2_impl(
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as __open64_2.
    unsafe { open2_common(&real::OPEN64_2, path, flags) }
}

#[inline(always)]
unsafe fn openat2_common(
    real: &Real<OpenAt2Fn>,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(dirfd, path, flags) };
    };
    let before = open_before(&g, dirfd, path, flags);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(dirfd, path, flags) });
    open_after(&g, r, flags, before);
    r
}

unsafe extern "C" fn openat_2_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as __openat_2.
    unsafe { openat2_common(&real::OPENAT_2, dirfd, path, flags) }
}

unsafe extern "C" fn openat64_2_impl(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as __openat64_2.
    unsafe { openat2_common(&real::OPENAT64_2, dirfd, path, flags) }
}

type CreatFn = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;

#[inline(always)]
unsafe fn creat_common(real: &Real<CreatFn>, path: *const c_char, mode: mode_t) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, mode) };
    };
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    let before = open_before(&g, libc::AT_FDCWD, path, flags);
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, mode) });
    open_after(&g, r, flags, before);
    r
}

unsafe extern "C" fn creat_impl(
    path: *const c_char,
    mode: mode_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as creat.
    unsafe { creat_common(&real::CREAT, path, mode) }
}

unsafe extern "C" fn creat64_impl(
    path: *const c_char,
    mode: mode_t,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as creat64.
    unsafe { creat_common(&real::CREAT64, path, mode) }
}

// ---------------------------------------------------------------------------
// descriptors: close, dup, lseek, sync
// ---------------------------------------------------------------------------

unsafe extern "C" fn close_impl(
    fd: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::CLOSE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd) });
    g.observe(|| {
        files::clear(fd);
        crate::batch::flush_mine(g.thread());
    });
    r
}

unsafe extern "C" fn close_range_impl(
    first: c_uint,
    last: c_uint,
    flags: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::CLOSE_RANGE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(first, last, flags) };
    };
    // SAFETY: forwarding the application's arguments unchanged.
    let r = g.call(|| unsafe { real(first, last, flags) });
    if r == 0 && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        g.observe(|| {
            let hi = last.min(files::FDS as c_uint);
            for fd in first..hi {
                files::clear(fd as c_int);
            }
        });
    }
    r
}

unsafe extern "C" fn dup_impl(fd: c_int, _: usize, _: usize, _: usize, _: usize, _: Rec) -> c_int {
    let Some(real) = real::DUP.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd) });
    if r >= 0 {
        g.observe(|| {
            files::clear(r);
            files::untrack(fd);
        });
    }
    r
}

unsafe extern "C" fn dup2_impl(
    old: c_int,
    new: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::DUP2.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(old, new) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(old, new) });
    if r >= 0 && old != new {
        g.observe(|| {
            files::clear(new);
            files::untrack(old);
        });
    }
    r
}

unsafe extern "C" fn dup3_impl(
    old: c_int,
    new: c_int,
    fl: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::DUP3.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(old, new, fl) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(old, new, fl) });
    if r >= 0 {
        g.observe(|| {
            files::clear(new);
            files::untrack(old);
        });
    }
    r
}

type LseekFn = unsafe extern "C" fn(c_int, off_t, c_int) -> off_t;

#[inline(always)]
unsafe fn lseek_common(real: &Real<LseekFn>, fd: c_int, off: off_t, whence: c_int) -> off_t {
    let Some(real) = real.get() else {
        return enosys::<i8>() as off_t;
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd, off, whence) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd, off, whence) });
    if r >= 0 {
        g.observe(|| files::set_pos(fd, r as u64));
    }
    r
}

unsafe extern "C" fn lseek_impl(
    fd: c_int,
    off: off_t,
    whence: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> off_t {
    // SAFETY: same contract as lseek.
    unsafe { lseek_common(&real::LSEEK, fd, off, whence) }
}

unsafe extern "C" fn lseek64_impl(
    fd: c_int,
    off: off_t,
    whence: c_int,
    _: usize,
    _: usize,
    _: Rec,
) -> off_t {
    // SAFETY: same contract as lseek64.
    unsafe { lseek_common(&real::LSEEK64, fd, off, whence) }
}

type SyncFn = unsafe extern "C" fn(c_int) -> c_int;

#[inline(always)]
unsafe fn sync_common(real: &Real<SyncFn>, fd: c_int) -> c_int {
    let Some(real) = real.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(fd) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(fd) });
    g.observe(|| crate::batch::flush_mine(g.thread()));
    r
}

unsafe extern "C" fn fsync_impl(
    fd: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fsync.
    unsafe { sync_common(&real::FSYNC, fd) }
}

unsafe extern "C" fn fdatasync_impl(
    fd: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    // SAFETY: same contract as fdatasync.
    unsafe { sync_common(&real::FDATASYNC, fd) }
}

// ---------------------------------------------------------------------------
// exec, dlopen
// ---------------------------------------------------------------------------

type Argv = *const *const c_char;

unsafe extern "C" fn execve_impl(
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::EXECVE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, argv, envp) };
    };
    g.observe(state::flush_all);
    // SAFETY: as above.
    g.call(|| unsafe { real(path, argv, envp) })
}

unsafe extern "C" fn execvpe_impl(
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::EXECVPE.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, argv, envp) };
    };
    g.observe(state::flush_all);
    // SAFETY: as above.
    g.call(|| unsafe { real(path, argv, envp) })
}

unsafe extern "C" fn execv_impl(
    path: *const c_char,
    argv: Argv,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::EXECV.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, argv) };
    };
    g.observe(state::flush_all);
    // SAFETY: as above.
    g.call(|| unsafe { real(path, argv) })
}

unsafe extern "C" fn execvp_impl(
    path: *const c_char,
    argv: Argv,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> c_int {
    let Some(real) = real::EXECVP.get() else {
        return enosys();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, argv) };
    };
    g.observe(state::flush_all);
    // SAFETY: as above.
    g.call(|| unsafe { real(path, argv) })
}

unsafe extern "C" fn dlopen_impl(
    path: *const c_char,
    flags: c_int,
    _: usize,
    _: usize,
    _: usize,
    _: Rec,
) -> *mut c_void {
    let Some(real) = real::DLOPEN.get() else {
        return std::ptr::null_mut();
    };
    let Some(g) = Guard::enter() else {
        // SAFETY: forwarding the application's arguments unchanged.
        return unsafe { real(path, flags) };
    };
    // SAFETY: as above.
    let r = g.call(|| unsafe { real(path, flags) });
    if !r.is_null() {
        g.observe(crate::modules::refresh);
    }
    r
}

// ---------------------------------------------------------------------------
// _exit, _Exit (exit() runs the library destructor; these skip it)
// ---------------------------------------------------------------------------

fn exit_now(real: &Real<unsafe extern "C" fn(c_int) -> !>, status: c_int) -> ! {
    state::before_exit();
    if let Some(f) = real.get() {
        // SAFETY: forwarding the application's argument unchanged.
        unsafe { f(status) }
    }
    // SAFETY: exit_group ends the process; no memory is touched.
    unsafe { libc::syscall(libc::SYS_exit_group, status as libc::c_long) };
    unreachable!("exit_group returned")
}

/// Interposed `_exit`: this process's pending events and its EXIT event are
/// written first (see `state::before_exit`), then the real `_exit`.
///
/// # Safety
/// Called by C code with the C signature of `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    exit_now(&real::EXIT_, status)
}

/// Interposed `_Exit` (as `_exit`).
///
/// # Safety
/// Called by C code with the C signature of `_Exit`.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(&real::EXIT_UPPER, status)
}
