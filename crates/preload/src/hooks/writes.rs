//! The write family's bodies (`write`, `pwrite`, `writev`, `pwritev`,
//! `pwritev2` and their 64-bit twins): every one is [`traced`], differing
//! only in the real call, the offset it reports and the `WriteCall` kind
//! (the kernel-side copies in [`super::copies`] too).
//! In the hot section (`build.rs` keeps `.text.hot.*` together).

use super::shape::Rec;
use crate::events::WriteCall;
use crate::hot;
use crate::real::Real;
use crate::state::Guard;
use crate::{sys, track};
use libc::{c_int, c_void, iovec, off_t, size_t, ssize_t};

/// `write`'s type.
pub type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
/// `pwrite`'s and `pwrite64`'s type.
pub type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
/// `writev`'s type.
pub type WritevFn = unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
/// `pwritev`'s and `pwritev64`'s type.
pub type PwritevFn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
/// `pwritev2`'s and `pwritev64v2`'s type.
pub type Pwritev2Fn = unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t;

/// The shared body (`at`: where the write went and its kind, from the
/// result): the signature and hint before the real call (the
/// stream's hint must be on the inode before the data is written), the
/// event after it. `call` makes the real call with the application's
/// arguments unchanged.
///
/// # Safety
/// `rec` is the trampoline's frame record; `call` forwards the
/// application's arguments with the real function's contract.
#[inline(always)]
pub(super) unsafe fn traced<F: Copy>(
    real: Option<F>,
    fd: c_int,
    rec: Rec,
    at: impl FnOnce(&Guard, ssize_t) -> (Option<u64>, WriteCall),
    call: impl Fn(F) -> ssize_t,
) -> ssize_t {
    // SAFETY: forwarded caller contract.
    unsafe { traced_at(real, fd, rec, None, at, call) }
}

/// [`traced`] for a write whose (offset, length) `pre` is known before
/// the call: an `O_DIRECT` one gets its page age and hint before its data
/// reaches the device (`track::pre_place`).
///
/// # Safety
/// As [`traced`].
#[inline(always)]
unsafe fn traced_at<F: Copy>(
    real: Option<F>,
    fd: c_int,
    rec: Rec,
    pre: Option<(u64, u64)>,
    at: impl FnOnce(&Guard, ssize_t) -> (Option<u64>, WriteCall),
    call: impl Fn(F) -> ssize_t,
) -> ssize_t {
    let Some(real) = real else {
        return sys::enosys();
    };
    let Some(g) = Guard::enter_write() else {
        return call(real);
    };
    let mut before = track::Before::new();
    before.pos = pre;
    g.observe(|| {
        // SAFETY: `rec` is the trampoline's frame record.
        unsafe { track::before_write(g.thread(), fd, rec, &mut before) };
        track::pre_place(&mut before, fd);
    });
    let r = g.call(|| call(real));
    if r > 0 && before.after_needed(fd) {
        let (off, kind) = at(&g, r);
        g.observe(|| {
            // SAFETY: as above; the write succeeded.
            unsafe { track::write(g.thread(), fd, off, r as u64, kind, rec, &before) }
        });
    }
    r
}

/// Where a write went (`None`: at the file position) and its kind, known
/// before the call.
#[inline(always)]
fn at(
    off: Option<u64>,
    kind: WriteCall,
) -> impl FnOnce(&Guard, ssize_t) -> (Option<u64>, WriteCall) {
    move |_, _| (off, kind)
}

/// `write`.
///
/// # Safety
/// `write`'s contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn write(
    real: &Real<WriteFn>,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    rec: Rec,
) -> ssize_t {
    let real = real.get_hot(hot::hot_fn(hot::HOT_WRITE));
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real, fd, rec, at(None, WriteCall::Write), |f| f(fd, buf, n)) }
}

/// `pwrite`, `pwrite64` (`HOT`: the real function's copy in the hot line).
///
/// # Safety
/// `pwrite`'s contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn pwrite<const HOT: usize>(
    real: &Real<PwriteFn>,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    off: off_t,
    rec: Rec,
) -> ssize_t {
    let real = real.get_hot(hot::hot_fn(HOT));
    let at = at(Some(off as u64), WriteCall::Pwrite);
    let pre = Some((off as u64, n as u64));
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced_at(real, fd, rec, pre, at, |f| f(fd, buf, n, off)) }
}

/// `writev`.
///
/// # Safety
/// `writev`'s contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn writev(
    real: &Real<WritevFn>,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    rec: Rec,
) -> ssize_t {
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe {
        traced(real.get(), fd, rec, at(None, WriteCall::Writev), |f| {
            f(fd, iov, cnt)
        })
    }
}

/// `pwritev`, `pwritev64`.
///
/// # Safety
/// `pwritev`'s contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn pwritev(
    real: &Real<PwritevFn>,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    rec: Rec,
) -> ssize_t {
    let at = at(Some(off as u64), WriteCall::Pwritev);
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real.get(), fd, rec, at, |f| f(fd, iov, cnt, off)) }
}

/// `pwritev2`, `pwritev64v2`: offset -1 writes at (and advances) the file
/// position; `RWF_APPEND` appends like `O_APPEND` (the position does not
/// move, so the end of file minus the length is where it went).
///
/// # Safety
/// `pwritev2`'s contract; `rec` is the trampoline's frame record.
#[inline(always)]
pub unsafe fn pwritev2(
    real: &Real<Pwritev2Fn>,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    fl: c_int,
    rec: Rec,
) -> ssize_t {
    const RWF_APPEND: c_int = 0x10;
    let at = move |g: &Guard, r: ssize_t| {
        let off = if fl & RWF_APPEND != 0 {
            let end = g.observe(|| sys::fstat(fd).map_or(0, |st| st.st_size as u64));
            Some(end.unwrap_or(0).saturating_sub(r as u64))
        } else {
            (off >= 0).then_some(off as u64)
        };
        let kind = if off.is_some() {
            WriteCall::Pwritev
        } else {
            WriteCall::Writev
        };
        (off, kind)
    };
    // SAFETY: forwarding the application's arguments unchanged.
    unsafe { traced(real.get(), fd, rec, at, |f| f(fd, iov, cnt, off, fl)) }
}
