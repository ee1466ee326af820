//! Every interposed C entry point, in one table: symbol, C signature, body.
//!
//! [`shape::hooks!`] turns each row into the exported naked trampoline
//! (which hands the body the caller's frame record for the signature
//! capture), the real function's pointer (`reals::symbol`, resolved with
//! `dlsym(RTLD_NEXT)` at init) and the adapter between them. Rows that
//! differ only in the real function (`pwrite`/`pwrite64`, `open`/`open64`,
//! `unlink`/`remove`, ...) name the same body. A body then:
//! 1. gets the real function (`ENOSYS` if this libc lacks it);
//! 2. takes the re-entrancy guard, or passes straight through;
//! 3. does any "before" work (the signature and hint of a write, the stat
//!    of a file about to die) in `observe`;
//! 4. makes the real call with the guard released;
//! 5. does the "after" work in `observe` (errno kept, panics contained);
//! 6. returns the real call's result.
//!
//! The bodies live by what they do: [`writes`] (the hot write family),
//! [`copies`] (`copy_file_range`, `sendfile`, `splice`), [`aio`]
//! (libaio's `io_submit`), [`stdio`],
//! [`paths`] (open, truncate, unlink, rename), [`descriptors`] (fcntl,
//! close, dup, lseek, sync) and [`process`] (exec, dlopen, `_exit`). The variadic stdio entry points (`fprintf`, `printf`
//! and their `_chk` forms) jump to tiny C wrappers in `stdio.c` that call
//! the `vfprintf` body with their own frame address as the record; the
//! variadic `execl`, `execlp` and `execle` jump to wrappers in `exec.c`
//! that call `execv`, `execvp` and `execve` (glibc's own call its internal
//! `__execve`, which would skip the flush).
//!
//! The trampolines, the write family's adapters and the write path after
//! the syscall are in `.text.hot.*` sections, kept together by the link
//! (`build.rs`). (Checking the state before anything else, to pass through
//! without a stack frame, was tried: it made traced writes ~8 ns slower end
//! to end, one more code line and a deeper stack, for no measurable gain
//! when passing through.)

pub mod aio;
pub mod copies;
pub mod descriptors;
pub mod paths;
pub mod process;
pub mod shape;
pub mod stdio;
pub mod writes;

use crate::hot::{HOT_PWRITE, HOT_PWRITE64};
use descriptors::{
    CloseRangeFn, Dup2Fn, Dup3Fn, FallocateFn, FcntlFn, FdFn, FtruncateFn, IoctlFn, LseekFn,
};
use libc::{
    c_char, c_int, c_long, c_uint, c_void, iovec, loff_t, mode_t, off_t, size_t, ssize_t, FILE,
};
use paths::{OpenAtFn, OpenFn};
use shape::{bind_regs, hooks, jumps};

type Argv = *const *const c_char;

hooks! {
    #[link_section = ".text.hot.pcstream"]
    write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t => writes::write;
    #[link_section = ".text.hot.pcstream"]
    pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t
        => writes::pwrite::<HOT_PWRITE>;
    #[link_section = ".text.hot.pcstream"]
    pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t
        => writes::pwrite::<HOT_PWRITE64>;
    #[link_section = ".text.hot.pcstream"]
    writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t => writes::writev;
    pwritev(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t => writes::pwritev;
    pwritev64(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t => writes::pwritev;
    pwritev2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, fl: c_int) -> ssize_t
        => writes::pwritev2;
    pwritev64v2(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, fl: c_int) -> ssize_t
        => writes::pwritev2;
    copy_file_range(fd_in: c_int, off_in: *mut loff_t, fd_out: c_int, off_out: *mut loff_t,
        len: size_t, flags: c_uint) -> ssize_t [six] => copies::copy;
    splice(fd_in: c_int, off_in: *mut loff_t, fd_out: c_int, off_out: *mut loff_t,
        len: size_t, flags: c_uint) -> ssize_t [six] => copies::copy;
    sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t
        => copies::sendfile;
    sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t
        => copies::sendfile;
    io_submit(ctx: usize, nr: c_long, iocbpp: *mut *mut aio::Iocb) -> c_int => aio::io_submit;

    fwrite(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t => stdio::fwrite;
    fwrite_unlocked(p: *const c_void, size: size_t, n: size_t, f: *mut FILE) -> size_t
        => stdio::fwrite;
    fputs(s: *const c_char, f: *mut FILE) -> c_int => stdio::fputs;
    fputs_unlocked(s: *const c_char, f: *mut FILE) -> c_int => stdio::fputs;
    puts(s: *const c_char) -> c_int => stdio::puts;
    vfprintf(f: *mut FILE, fmt: *const c_char, ap: *mut c_void) -> c_int => stdio::vfprintf;
    vprintf(fmt: *const c_char, ap: *mut c_void) -> c_int => stdio::vprintf;
    __vfprintf_chk(f: *mut FILE, flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int
        => stdio::vfprintf_chk;
    __vprintf_chk(flag: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int
        => stdio::vprintf_chk;
    fclose(f: *mut FILE) -> c_int => stdio::fclose;
    fopen(path: *const c_char, mode: *const c_char) -> *mut FILE => stdio::fopen;
    fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE => stdio::fopen;
    fdopen(fd: c_int, mode: *const c_char) -> *mut FILE => stdio::fdopen;

    fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int as FcntlFn => descriptors::fcntl;
    fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int as FcntlFn => descriptors::fcntl;
    ioctl(fd: c_int, req: u64, arg: usize) -> c_int as IoctlFn => descriptors::ioctl;
    fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int as FallocateFn
        => descriptors::fallocate;
    fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int as FallocateFn
        => descriptors::fallocate;
    ftruncate(fd: c_int, len: off_t) -> c_int as FtruncateFn => descriptors::ftruncate;
    ftruncate64(fd: c_int, len: off_t) -> c_int as FtruncateFn => descriptors::ftruncate;
    close(fd: c_int) -> c_int as FdFn => descriptors::close;
    close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int as CloseRangeFn
        => descriptors::close_range;
    dup(fd: c_int) -> c_int as FdFn => descriptors::dup;
    dup2(old: c_int, new: c_int) -> c_int as Dup2Fn => descriptors::dup2;
    dup3(old: c_int, new: c_int, fl: c_int) -> c_int as Dup3Fn => descriptors::dup3;
    lseek(fd: c_int, off: off_t, whence: c_int) -> off_t as LseekFn => descriptors::lseek;
    lseek64(fd: c_int, off: off_t, whence: c_int) -> off_t as LseekFn => descriptors::lseek;
    fsync(fd: c_int) -> c_int as FdFn => descriptors::sync;
    fdatasync(fd: c_int) -> c_int as FdFn => descriptors::sync;

    open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int as OpenFn => paths::open;
    open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int as OpenFn => paths::open;
    openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int as OpenAtFn
        => paths::openat;
    openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int as OpenAtFn
        => paths::openat;
    __open_2(path: *const c_char, flags: c_int) -> c_int => paths::open_2;
    __open64_2(path: *const c_char, flags: c_int) -> c_int => paths::open_2;
    __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int => paths::openat_2;
    __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int => paths::openat_2;
    creat(path: *const c_char, mode: mode_t) -> c_int => paths::creat;
    creat64(path: *const c_char, mode: mode_t) -> c_int => paths::creat;
    truncate(path: *const c_char, len: off_t) -> c_int => paths::truncate;
    truncate64(path: *const c_char, len: off_t) -> c_int => paths::truncate;
    unlink(path: *const c_char) -> c_int => paths::unlink;
    remove(path: *const c_char) -> c_int => paths::unlink;
    unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int => paths::unlinkat;
    rename(old: *const c_char, new: *const c_char) -> c_int => paths::rename;
    renameat(od: c_int, old: *const c_char, nd: c_int, new: *const c_char) -> c_int
        => paths::renameat;
    renameat2(od: c_int, old: *const c_char, nd: c_int, new: *const c_char, fl: c_uint) -> c_int
        => paths::renameat2;

    execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int => process::execve;
    execvpe(path: *const c_char, argv: Argv, envp: Argv) -> c_int => process::execve;
    execv(path: *const c_char, argv: Argv) -> c_int => process::execv;
    execvp(path: *const c_char, argv: Argv) -> c_int => process::execv;
    dlopen(path: *const c_char, flags: c_int) -> *mut c_void => process::dlopen;
}

jumps! {
    fprintf => pcstream_c_fprintf;
    printf => pcstream_c_printf;
    __fprintf_chk => pcstream_c__fprintf_chk;
    __printf_chk => pcstream_c__printf_chk;
    // glibc's execl* call its internal __execve (not interposable): these
    // build argv and call execv/execvp/execve, the hooks above (`exec.c`).
    execl => pcstream_c_execl;
    execlp => pcstream_c_execlp;
    execle => pcstream_c_execle;
}

/// Resolves every real function and keeps the write family's in the hot
/// line (library constructor, before `state::init`).
pub fn init() {
    reals::resolve_all();
    crate::hot::set_hot_fns([
        reals::write.addr(),
        reals::pwrite.addr(),
        reals::pwrite64.addr(),
    ]);
}
