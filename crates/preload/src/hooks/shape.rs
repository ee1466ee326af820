//! The shape every hook shares, written once: the [`hooks!`] macro that
//! turns one table row (symbol, C signature, body) into the exported naked
//! trampoline, the real function's pointer and the adapter between them,
//! and [`around`], the body skeleton (real function, re-entrancy guard,
//! work before, the real call, work after).
//!
//! **Trampolines.** Each exported symbol is a naked function that pushes the
//! caller's `rbp` and passes a pointer to the synthetic frame record
//! `{rbp, return address}` as the 6th integer argument (`r9`) to its
//! adapter, then returns what it returns. A row marked `[six]` (a function
//! that takes six arguments: `copy_file_range`, `splice`) keeps `r9` and
//! passes the record as the 7th argument, on the stack. The signature
//! capture starts from that record. They carry CFI so unwinders (debuggers,
//! profilers, the forced unwinding of `pthread_cancel`) can step through.
//!
//! **Adapters.** An adapter has the fixed C shape `(a, b, c, d, e: usize,
//! rec)` (`[six]`: `(a, b, c, d, e, f: usize, rec)`) and gives each
//! register the type the table declares for it ([`Reg`]: on x86-64 an
//! `int` argument is the low half of its register, a pointer the whole
//! register), so the table needs no padding per arity. It then calls the
//! row's body with the real function's [`Real`] and `rec`.
//!
//! [`Real`]: crate::real::Real

use crate::state::Guard;

/// A trampoline's frame record `{caller rbp, return address}`.
pub type Rec = *const usize;

/// A C argument as the x86-64 SysV ABI passes it: the register it came in.
pub trait Reg: Sized {
    /// The argument from its (integer) register.
    fn from_reg(r: usize) -> Self;
}

macro_rules! reg_as {
    ($($t:ty),*) => {$(
        impl Reg for $t {
            #[inline(always)]
            fn from_reg(r: usize) -> Self {
                r as $t
            }
        }
    )*};
}
reg_as!(i32, u32, i64, u64, usize);

impl<T> Reg for *const T {
    #[inline(always)]
    fn from_reg(r: usize) -> Self {
        r as *const T
    }
}

impl<T> Reg for *mut T {
    #[inline(always)]
    fn from_reg(r: usize) -> Self {
        r as *mut T
    }
}

/// Binds the table's named arguments to the adapter's registers, in order.
macro_rules! bind_regs {
    ([$($r:ident)*]) => {};
    ([$r:ident $($rs:ident)*] $arg:ident : $ty:ty $(, $($rest:tt)*)?) => {
        let $arg = <$ty as $crate::hooks::shape::Reg>::from_reg($r);
        bind_regs!([$($rs)*] $($($rest)*)?);
    };
}

/// The hook table: one row per interposed symbol,
/// `$(#[attr])* symbol(arg: type, ...) -> result [as RealType] [[six]] => body;`
/// where `RealType` is the real function's type when it is not
/// `unsafe extern "C" fn(types...) -> result` (variadic functions), `[six]`
/// marks a function of six arguments (see the module docs), and
/// `body(&REAL, args..., rec)` does the work. Attributes go to the adapter
/// (e.g. the hot section of the write family). Generates, per row:
/// - `reals::symbol`, the [`Real`](crate::real::Real) the body calls;
/// - the exported naked trampoline `symbol`;
/// - its adapter `symbol::adapter`;
///
/// and `reals::resolve_all`, run by the library constructor.
macro_rules! hooks {
    ($(
        $(#[$attr:meta])*
        $sym:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty
        $(as $real:ty)? $([$six:ident])? => $body:path;
    )*) => {
        /// The real function behind every hooked symbol (`dlsym(RTLD_NEXT)`).
        #[allow(non_upper_case_globals)]
        pub mod reals {
            use super::*;
            $(
                #[doc = concat!("The real `", stringify!($sym), "`.")]
                pub static $sym: $crate::real::Real<
                    hooks!(@real_ty $($real)? ; unsafe extern "C" fn($($ty),*) -> $ret)
                > = $crate::real::Real::new(
                    // SAFETY: NUL-terminated, no interior NUL.
                    unsafe {
                        std::ffi::CStr::from_bytes_with_nul_unchecked(
                            concat!(stringify!($sym), "\0").as_bytes(),
                        )
                    },
                );
            )*

            /// Resolves every real function (library constructor).
            pub fn resolve_all() {
                $( $sym.resolve(); )*
            }
        }

        $(
            hooks!(@trampoline [$($six)?] $sym);

            #[doc = concat!("The adapter of `", stringify!($sym), "`.")]
            mod $sym {
                use super::*;

                hooks!(@adapter [$($six)?] [$(#[$attr])*] $sym($($arg: $ty),*) -> $ret => $body);
            }
        )*
    };
    (@real_ty $real:ty ; $default:ty) => { $real };
    (@real_ty ; $default:ty) => { $default };
    (@trampoline [] $sym:ident) => {
        #[doc = concat!("Interposed `", stringify!($sym), "` (trampoline to its adapter).")]
        ///
        /// # Safety
        /// Called by C code with the C signature of the libc function of the same name.
        #[unsafe(naked)]
        #[no_mangle]
        #[link_section = ".text.hot.pcstream"]
        pub unsafe extern "C" fn $sym() {
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
                f = sym $sym::adapter,
            )
        }
    };
    // Six arguments: `r9` is the sixth, so the record goes on the stack as
    // the 7th (padded so that `rsp` is 16-byte aligned at the call).
    (@trampoline [six] $sym:ident) => {
        #[doc = concat!("Interposed `", stringify!($sym), "` (trampoline to its adapter; six arguments).")]
        ///
        /// # Safety
        /// Called by C code with the C signature of the libc function of the same name.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $sym() {
            core::arch::naked_asm!(
                ".cfi_startproc",
                "push rbp",
                ".cfi_adjust_cfa_offset 8",
                ".cfi_rel_offset rbp, 0",
                "mov rax, rsp",
                "sub rsp, 8",
                ".cfi_adjust_cfa_offset 8",
                "push rax",
                ".cfi_adjust_cfa_offset 8",
                "call {f}",
                "add rsp, 16",
                ".cfi_adjust_cfa_offset -16",
                "pop rbp",
                ".cfi_adjust_cfa_offset -8",
                ".cfi_restore rbp",
                "ret",
                ".cfi_endproc",
                f = sym $sym::adapter,
            )
        }
    };
    (@adapter [] [$(#[$attr:meta])*] $sym:ident($($arg:ident : $ty:ty),*) -> $ret:ty => $body:path) => {
        #[allow(unused_variables)]
        $(#[$attr])*
        pub(super) unsafe extern "C" fn adapter(
            a: usize,
            b: usize,
            c: usize,
            d: usize,
            e: usize,
            rec: $crate::hooks::shape::Rec,
        ) -> $ret {
            bind_regs!([a b c d e] $($arg: $ty),*);
            // SAFETY: the C caller's arguments, with its contract.
            unsafe { $body(&reals::$sym, $($arg,)* rec) }
        }
    };
    (@adapter [six] [$(#[$attr:meta])*] $sym:ident($($arg:ident : $ty:ty),*) -> $ret:ty => $body:path) => {
        #[allow(unused_variables, clippy::too_many_arguments)]
        $(#[$attr])*
        pub(super) unsafe extern "C" fn adapter(
            a: usize,
            b: usize,
            c: usize,
            d: usize,
            e: usize,
            f: usize,
            rec: $crate::hooks::shape::Rec,
        ) -> $ret {
            bind_regs!([a b c d e f] $($arg: $ty),*);
            // SAFETY: the C caller's arguments, with its contract.
            unsafe { $body(&reals::$sym, $($arg,)* rec) }
        }
    };
}

/// Variadic entry points that jump to C wrappers (`stdio.c`, `exec.c`),
/// which call the bodies (or the hooked `execv*`) themselves.
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

pub(crate) use {bind_regs, hooks, jumps};

/// The body every hook shares: the real function (`missing()` when this
/// libc lacks it: an `ENOSYS` failure), then, with the re-entrancy guard
/// (`write`: a call that would produce a write event, counted as dropped
/// when re-entrant), `before` (in `observe`: errno kept, panics contained),
/// the real call with the guard released, `after` with its result; without
/// the guard, only the real call. Returns the real call's result.
#[inline(always)]
pub fn around<F: Copy, R: Copy, B>(
    real: Option<F>,
    missing: impl FnOnce() -> R,
    write: bool,
    call: impl Fn(F) -> R,
    before: impl FnOnce(&Guard) -> B,
    after: impl FnOnce(&Guard, R, B),
) -> R {
    let Some(real) = real else {
        return missing();
    };
    let g = if write {
        Guard::enter_write()
    } else {
        Guard::enter()
    };
    let Some(g) = g else {
        return call(real);
    };
    let b = before(&g);
    let r = g.call(|| call(real));
    after(&g, r, b);
    r
}
