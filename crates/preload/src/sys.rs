//! Small wrappers over libc the hooks and the trackers share: this thread's
//! `errno`, the `ENOSYS` failure of a function this libc lacks, and `fstat`/
//! `fstatat` returning `Option<libc::stat>`, and `fcntl`/`lseek` as raw
//! syscalls (never the interposed entry points).

use libc::{c_char, c_int};

/// This thread's `errno` location.
pub fn errno_loc() -> *mut c_int {
    // SAFETY: __errno_location has no preconditions and returns this thread's errno.
    unsafe { libc::__errno_location() }
}

/// This thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: errno_loc points to this thread's errno.
    unsafe { *errno_loc() }
}

/// Sets this thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: errno_loc points to this thread's errno.
    unsafe { *errno_loc() = e };
}

/// A missing libc function behaves like a missing syscall: `-1`, `ENOSYS`.
pub fn enosys<T: From<i8>>() -> T {
    set_errno(libc::ENOSYS);
    T::from(-1)
}

/// `fstat(fd)`.
pub fn fstat(fd: c_int) -> Option<libc::stat> {
    // SAFETY: zeroed stat is a valid out-buffer for fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// `fstatat(dirfd, path, flags)`.
///
/// # Safety
/// `path` is null or a NUL-terminated string (fstatat fails on a null one).
pub unsafe fn fstatat(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<libc::stat> {
    // SAFETY: zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat writes into `st` and reads `path` (caller contract).
    (unsafe { libc::fstatat(dirfd, path, &mut st, flags) } == 0).then_some(st)
}

/// `fcntl(fd, cmd, arg)` as a raw syscall (`-1` and `errno` on failure).
pub fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller passes an argument of the kind `cmd` expects.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) as c_int }
}

/// `lseek(fd, off, whence)` as a raw syscall (`-1` and `errno` on failure).
pub fn lseek(fd: c_int, off: libc::off_t, whence: c_int) -> libc::off_t {
    // SAFETY: lseek only moves or reads a descriptor's position.
    unsafe { libc::syscall(libc::SYS_lseek, fd, off, whence) }
}
