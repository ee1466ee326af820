//! Bodies of the calls that end or change the process image: the `exec`
//! family (everything pending is flushed first: the new image starts with
//! empty batches), `dlopen` (the module table is refreshed) and
//! `_exit`/`_Exit` (which skip the library destructor: the final flush and
//! EXIT event happen first).

use super::shape::{around, Rec};
use crate::real::{self, Real};
use crate::{state, sys};
use libc::{c_char, c_int, c_void};

type Argv = *const *const c_char;
/// `execve`'s and `execvpe`'s type.
pub type ExecEnvFn = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
/// `execv`'s and `execvp`'s type.
pub type ExecFn = unsafe extern "C" fn(*const c_char, Argv) -> c_int;
/// `dlopen`'s type.
pub type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;

/// The exec family's shared body: flush, then the real call (which
/// returns only when it failed).
#[inline(always)]
fn exec<F: Copy>(real: Option<F>, call: impl Fn(F) -> c_int) -> c_int {
    around(
        real,
        sys::enosys,
        false,
        call,
        |g| g.observe(state::flush_all),
        |_, _, _| (),
    )
}

/// `execve`, `execvpe`.
///
/// # Safety
/// `execve`'s contract.
pub unsafe fn execve(
    real: &Real<ExecEnvFn>,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    _: Rec,
) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    exec(real.get(), |f| unsafe { f(path, argv, envp) })
}

/// `execv`, `execvp`.
///
/// # Safety
/// `execv`'s contract.
pub unsafe fn execv(real: &Real<ExecFn>, path: *const c_char, argv: Argv, _: Rec) -> c_int {
    // SAFETY: forwarding the application's arguments unchanged.
    exec(real.get(), |f| unsafe { f(path, argv) })
}

/// `dlopen`: a new module may hold call sites.
///
/// # Safety
/// `dlopen`'s contract.
pub unsafe fn dlopen(
    real: &Real<DlopenFn>,
    path: *const c_char,
    flags: c_int,
    _: Rec,
) -> *mut c_void {
    let after = |g: &state::Guard, r: *mut c_void, ()| {
        if !r.is_null() {
            g.observe(crate::modules::refresh);
        }
    };
    // SAFETY: forwarding the application's arguments unchanged.
    around(
        real.get(),
        std::ptr::null_mut,
        false,
        |f| unsafe { f(path, flags) },
        |_| (),
        after,
    )
}

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
