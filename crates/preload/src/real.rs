//! The real libc functions behind every interposed symbol, resolved with
//! `dlsym(RTLD_NEXT, name)`.
//!
//! [`resolve_all`] runs in the library constructor, before the shim is marked
//! ready, so the hot path only loads an atomic. A call that arrives before
//! the constructor (another library's constructor writing) resolves its one
//! symbol on the spot. A symbol that does not exist in this libc (an old
//! glibc without `pwritev2`) makes the entry point fail with `ENOSYS`, exactly
//! what the application would get from a missing syscall.

use libc::{c_char, c_int, c_uint, c_void, iovec, mode_t, off64_t, off_t, size_t, ssize_t, FILE};
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
    const fn new(name: &'static CStr) -> Self {
        assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>());
        Real {
            addr: AtomicUsize::new(0),
            name,
            _f: PhantomData,
        }
    }

    fn resolve(&self) -> usize {
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

        /// Resolves every real function (library constructor).
        pub fn resolve_all() {
            $( $name.resolve(); )*
        }
    };
}

type Variadic3 = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;

reals! {
    WRITE = "write": unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
    PWRITE = "pwrite": unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
    PWRITE64 = "pwrite64": unsafe extern "C" fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;
    WRITEV = "writev": unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    PWRITEV = "pwritev": unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    PWRITEV64 = "pwritev64": unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;
    PWRITEV2 = "pwritev2": unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;
    PWRITEV64V2 = "pwritev64v2": unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t, c_int) -> ssize_t;
    FWRITE = "fwrite": unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t;
    FWRITE_UNLOCKED = "fwrite_unlocked": unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t;
    FPUTS = "fputs": unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int;
    FPUTS_UNLOCKED = "fputs_unlocked": unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int;
    PUTS = "puts": unsafe extern "C" fn(*const c_char) -> c_int;
    VFPRINTF = "vfprintf": unsafe extern "C" fn(*mut FILE, *const c_char, *mut c_void) -> c_int;
    VPRINTF = "vprintf": unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;
    VFPRINTF_CHK = "__vfprintf_chk": unsafe extern "C" fn(*mut FILE, c_int, *const c_char, *mut c_void) -> c_int;
    FFLUSH = "fflush": unsafe extern "C" fn(*mut FILE) -> c_int;
    FCLOSE = "fclose": unsafe extern "C" fn(*mut FILE) -> c_int;
    FOPEN = "fopen": unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
    FOPEN64 = "fopen64": unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
    FDOPEN = "fdopen": unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE;
    FTELLO = "ftello": unsafe extern "C" fn(*mut FILE) -> off_t;
    VPRINTF_CHK = "__vprintf_chk": unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;
    FILENO = "fileno": unsafe extern "C" fn(*mut FILE) -> c_int;
    FCNTL = "fcntl": Variadic3;
    FCNTL64 = "fcntl64": Variadic3;
    FALLOCATE = "fallocate": unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int;
    FALLOCATE64 = "fallocate64": unsafe extern "C" fn(c_int, c_int, off64_t, off64_t) -> c_int;
    TRUNCATE = "truncate": unsafe extern "C" fn(*const c_char, off_t) -> c_int;
    TRUNCATE64 = "truncate64": unsafe extern "C" fn(*const c_char, off64_t) -> c_int;
    FTRUNCATE = "ftruncate": unsafe extern "C" fn(c_int, off_t) -> c_int;
    FTRUNCATE64 = "ftruncate64": unsafe extern "C" fn(c_int, off64_t) -> c_int;
    UNLINK = "unlink": unsafe extern "C" fn(*const c_char) -> c_int;
    UNLINKAT = "unlinkat": unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    REMOVE = "remove": unsafe extern "C" fn(*const c_char) -> c_int;
    RENAME = "rename": unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
    RENAMEAT = "renameat": unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
    RENAMEAT2 = "renameat2": unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
    OPEN = "open": OpenFn;
    OPEN64 = "open64": OpenFn;
    OPENAT = "openat": OpenAtFn;
    OPENAT64 = "openat64": OpenAtFn;
    OPEN_2 = "__open_2": unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    OPEN64_2 = "__open64_2": unsafe extern "C" fn(*const c_char, c_int) -> c_int;
    OPENAT_2 = "__openat_2": unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    OPENAT64_2 = "__openat64_2": unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
    CREAT = "creat": unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    CREAT64 = "creat64": unsafe extern "C" fn(*const c_char, mode_t) -> c_int;
    CLOSE = "close": unsafe extern "C" fn(c_int) -> c_int;
    CLOSE_RANGE = "close_range": unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
    DUP = "dup": unsafe extern "C" fn(c_int) -> c_int;
    DUP2 = "dup2": unsafe extern "C" fn(c_int, c_int) -> c_int;
    DUP3 = "dup3": unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    LSEEK = "lseek": unsafe extern "C" fn(c_int, off_t, c_int) -> off_t;
    LSEEK64 = "lseek64": unsafe extern "C" fn(c_int, off64_t, c_int) -> off64_t;
    FSYNC = "fsync": unsafe extern "C" fn(c_int) -> c_int;
    FDATASYNC = "fdatasync": unsafe extern "C" fn(c_int) -> c_int;
    EXECVE = "execve": unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    EXECV = "execv": unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
    EXECVP = "execvp": unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
    EXECVPE = "execvpe": unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    EXIT_ = "_exit": unsafe extern "C" fn(c_int) -> !;
    EXIT_UPPER = "_Exit": unsafe extern "C" fn(c_int) -> !;
    DLOPEN = "dlopen": unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
}
