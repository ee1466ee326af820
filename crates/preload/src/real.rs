//! A real libc function resolved with `dlsym(RTLD_NEXT, name)` ([`Real`]):
//! those behind the interposed symbols are declared by the hook table
//! (`hooks::reals`); here, the few others the shim calls (`fileno`,
//! `ftello`, `_exit`, `_Exit`).
//!
//! `resolve_all` runs in the library constructor, before the shim is marked
//! ready, so the hot path only loads an atomic. A call that arrives before
//! the constructor (another library's constructor writing) resolves its one
//! symbol on the spot. A symbol that does not exist in this libc (an old
//! glibc without `pwritev2`) makes the entry point fail with `ENOSYS`, exactly
//! what the application would get from a missing syscall.

use libc::{c_int, off_t, FILE};
use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One resolved function pointer of type `F` (an `unsafe extern "C" fn`).
#[derive(Debug)]
pub struct Real<F> {
    addr: AtomicUsize,
    name: &'static CStr,
    _f: PhantomData<F>,
}

/// Marker stored while a symbol is known to be missing.
const MISSING: usize = 1;

impl<F: Copy> Real<F> {
    /// An unresolved function named `name`.
    pub const fn new(name: &'static CStr) -> Self {
        assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>());
        Real {
            addr: AtomicUsize::new(0),
            name,
            _f: PhantomData,
        }
    }

    /// Resolves the function now (the library constructor does).
    pub fn resolve(&self) -> usize {
        // SAFETY: RTLD_NEXT with a NUL-terminated name is dlsym's documented use.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        let v = if p == 0 { MISSING } else { p };
        self.addr.store(v, Ordering::Relaxed);
        v
    }

    /// The resolved address (0: not yet, 1: missing).
    pub fn addr(&self) -> usize {
        self.addr.load(Ordering::Relaxed)
    }

    /// [`Real::get`] for a function whose address `state.rs` keeps in the
    /// write path's hot line (`hot`: that copy, 0 before init).
    #[inline(always)]
    pub fn get_hot(&self, hot: usize) -> Option<F> {
        if hot > MISSING {
            // SAFETY: `hot` is a copy of this Real's resolved address, as in `get`.
            return Some(unsafe { std::mem::transmute_copy::<usize, F>(&hot) });
        }
        self.get()
    }

    /// [`Real::get`] for a function of a library that may be loaded after
    /// start-up (`dlopen`): a symbol missing so far is looked up again.
    pub fn get_late(&self) -> Option<F> {
        if self.addr.load(Ordering::Relaxed) == MISSING {
            self.resolve();
        }
        self.get()
    }

    /// The real function, `None` when this libc does not have it.
    #[inline(always)]
    pub fn get(&self) -> Option<F> {
        let mut a = self.addr.load(Ordering::Relaxed);
        if a == 0 {
            a = self.resolve();
        }
        if a == MISSING {
            return None;
        }
        // SAFETY: `a` is the non-null address dlsym returned for `self.name`,
        // and `F` is the C signature of that symbol (declared below); F is a
        // pointer-sized fn pointer (checked in `new`).
        Some(unsafe { std::mem::transmute_copy::<usize, F>(&a) })
    }
}

macro_rules! reals {
    ($($name:ident = $sym:literal : $ty:ty;)*) => {
        $(
            #[doc = concat!("The real `", $sym, "`.")]
            pub static $name: Real<$ty> = Real::new(
                // SAFETY: the literal is NUL-terminated and has no interior NUL.
                unsafe { CStr::from_bytes_with_nul_unchecked(concat!($sym, "\0").as_bytes()) },
            );
        )*

        /// Resolves these functions (library constructor).
        pub fn resolve_all() {
            $( $name.resolve(); )*
        }
    };
}

reals! {
    FTELLO = "ftello": unsafe extern "C" fn(*mut FILE) -> off_t;
    FILENO = "fileno": unsafe extern "C" fn(*mut FILE) -> c_int;
    EXIT_ = "_exit": unsafe extern "C" fn(c_int) -> !;
    EXIT_UPPER = "_Exit": unsafe extern "C" fn(c_int) -> !;
}
