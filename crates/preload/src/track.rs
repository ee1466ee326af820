//! What each intercepted call means: the work the entry points in
//! `hooks` do after (or just before) the real call, always with the
//! re-entrancy guard held and `errno` preserved by the caller.
//!
//! Writes to regular files get a signature, a stream and hint from the
//! mapping, and a `WriteEvent` (writes to block devices with write streams
//! too: `rawdev.rs`); calls that end the life of data produce
//! `InvalidateEvent`s (`track/lifecycle.rs`); the application's own
//! `F_SET_RW_HINT` becomes an `AppHintEvent` (and is repaired when
//! malformed).

use crate::batch::RawWrite;
use crate::context::{cached_context, capture_described};
use crate::events::{FileId, Kind, WriteCall};
use crate::state::{self, events_on, SEEN_FILES};
use crate::tls::Thread;
use crate::{files, hint, real};

mod aged;
mod lifecycle;
pub(crate) use aged::ages_recorded;
pub use aged::pre_place;
use libc::{c_char, c_int, FILE};
pub use lifecycle::{
    before_close, before_fclose, before_open, before_rename, before_unlink, closed_unnamed,
    discarded, fallocated, flags_changed, opened, replaced, stat_fd, stat_path, truncated,
    unlinked, BeforeOpen, PathStat,
};
use pcstream_placement::hint::RwHint;
use pcstream_placement::signature::mix64;

/// What a write learns before it reaches the kernel: the descriptor's
/// table entry and, for a regular file whose call path is in the signature
/// cache, its signature and stream, read while the caller's stack (and the
/// shim's tables) are still in the CPU cache: after a `write` syscall they
/// often are not.
#[derive(Debug, Clone, Copy, Default)]
pub struct Before {
    pub(crate) info: Option<files::FdInfo>,
    /// (signature, stream) of a signature-cache hit (a raw device's: of
    /// the call path, captured in full before the call).
    pub(crate) hit: Option<(u64, u32)>,
    /// A raw device's hint after the shim's hint handling (`rawdev.rs`).
    pub(crate) raw_hint: u8,
    /// The age class [`pre_place`] (or, for a raw device,
    /// `rawdev::before`) found and recorded (`pageage.rs`).
    pub(crate) age: Option<u32>,
    /// (offset, length) of a positional write, known before the call.
    pub(crate) pos: Option<(u64, u64)>,
}

impl Before {
    /// Nothing learnt yet.
    #[inline(always)]
    pub const fn new() -> Before {
        Before {
            info: None,
            hit: None,
            raw_hint: 0,
            age: None,
            pos: None,
        }
    }

    /// Whether a successful write has anything left to do after the
    /// syscall: not for a descriptor known not to be a regular file, nor,
    /// when no events are produced (a mapping alone), for a call path known
    /// to map to stream 0 (no hint to set) or to a stream of the static map
    /// whose hint `fd`'s copy of its inode's hint shows settled (what
    /// `inode_hint` would return at once).
    #[inline(always)]
    pub fn after_needed(&self, fd: c_int) -> bool {
        if let Some(i) = self.info.filter(|i| !i.regular) {
            // A raw device's write has only its event left to make.
            return i.raw && events_on();
        }
        if events_on() {
            return true;
        }
        match (self.info, self.hit) {
            // An in-place O_DIRECT write's age picks among the live
            // table's refined keys (`pageage.rs`).
            (Some(i), _) if aged::placed_by_age(i) => true,
            (_, Some((_, 0))) => false,
            (Some(info), Some((_, stream))) if hint::have_map() => {
                settled_hint(fd, info, stream).is_none()
            }
            _ => true,
        }
    }
}

/// Before a write to `fd`: what the descriptor table knows, and the cached
/// program context when that is a regular file. The rest (descriptors the
/// table does not know, contexts the cache does not have) is found after
/// the write.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(always)]
pub unsafe fn before_write(t: &Thread, fd: c_int, rec: *const usize, b: &mut Before) {
    let Some(info) = files::get(fd) else {
        // SAFETY: forwarded caller contract.
        return unsafe { before_unknown(t, fd, rec, b) };
    };
    b.info = Some(info);
    if !info.regular {
        if info.raw {
            // SAFETY: forwarded caller contract.
            unsafe { crate::rawdev::before(t, fd, info, rec, b) };
        }
        return;
    }
    // SAFETY: forwarded caller contract.
    b.hit = unsafe { cached_context(t, rec) };
}

/// [`before_write`] for a descriptor the table does not know: its
/// `fstat` (which the write needed anyway, after the call) is made before
/// the call, so a block device with write streams gets its entry and its
/// hint before the data reaches the device. A regular file's call path is
/// captured after the call, as before.
///
/// # Safety
/// As [`before_write`].
#[cold]
#[inline(never)]
unsafe fn before_unknown(t: &Thread, fd: c_int, rec: *const usize, b: &mut Before) {
    let Some(info) = files::info(fd) else { return };
    b.info = Some(info);
    if info.raw {
        // SAFETY: forwarded caller contract.
        unsafe { crate::rawdev::before(t, fd, info, rec, b) };
    }
}

/// The key of a file in `SEEN_FILES`.
fn file_key(id: FileId) -> u64 {
    mix64(id.dev.rotate_left(32) ^ mix64(id.ino))
}

/// Names a file (`OpenEvent`) before the first write event through a
/// descriptor this process saw opened (every such open: the inode number may
/// belong to a new file since an earlier one), or, for descriptors it did not
/// see opened, the first time it writes to the inode since the inode was last
/// seen unlinked or replaced.
#[cold]
#[inline(never)]
pub(crate) fn name_file(fd: c_int, info: files::FdInfo) {
    let id = info.id;
    if !SEEN_FILES.insert(file_key(id)) && !info.opened {
        return;
    }
    let mut link = [0u8; 32];
    let mut buf = [0u8; crate::events::MAX_PATH];
    let mut e = crate::events::Enc::new(&mut link);
    e.raw(b"/proc/self/fd/");
    let mut digits = [0u8; 12];
    let mut n = fd.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    e.raw(&digits[i..]);
    e.raw(b"\0");
    // SAFETY: link is NUL-terminated; readlink writes at most buf.len() bytes.
    let len = unsafe {
        libc::readlink(
            link.as_ptr() as *const c_char,
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
        )
    };
    let path = if len > 0 {
        &buf[..len as usize]
    } else {
        &[][..]
    };
    let flags = crate::sys::fcntl(fd, libc::F_GETFL, 0);
    state::emit(&Kind::Open {
        file: id,
        path,
        flags,
    });
}

/// A successful write of `n` bytes to `fd` (`off` given for positioned
/// writes); `b`: what [`before_write`] learnt.
///
/// The steady state of a writer is handled here, inline: a descriptor the
/// table knows (a regular file already named in the trace, its position
/// tracked or the offset given on a descriptor known not to append), a
/// call path the caches knew, events on. Everything else goes to
/// [`write_general`]. This function itself is out of line, so that the
/// entry points' code before the syscall stays small.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
#[inline(never)]
#[link_section = ".text.hot.pcstream"]
pub unsafe fn write(
    t: &Thread,
    fd: c_int,
    off: Option<u64>,
    n: u64,
    call: WriteCall,
    rec: *const usize,
    b: &Before,
) {
    if let (Some(info), Some((signature, stream))) = (b.info, b.hit) {
        let offset_known = match off {
            Some(_) => info.append == Some(false),
            None => info.tracked,
        };
        if info.regular && info.named && offset_known && events_on() {
            let offset = match off {
                Some(o) => o,
                None => files::advance(fd, n),
            };
            let age = b.age.unwrap_or_else(|| aged::age_of(info, offset, n));
            let stream = aged::aged_stream(signature, stream, info, age);
            let hint_now = inode_hint(fd, info, stream);
            // SAFETY: forwarded caller contract.
            let native = unsafe { crate::context::native_beside_java(t, rec, signature) };
            state::emit_write(
                t,
                RawWrite::new(
                    info.id,
                    offset,
                    n,
                    signature,
                    stream,
                    hint_now as u32,
                    call as u32,
                )
                .with_age(age)
                .with_native(native),
            );
            return;
        }
        if !events_on() && info.regular && !aged::placed_by_age(info) {
            // A mapping alone: the hint is all a write can change. A known
            // call path whose stream's hint the descriptor's copy shows
            // settled on the inode (what `inode_hint` returns at once) is
            // done.
            let stream = file_stream(signature, stream, info);
            if stream != 0 && settled_hint(fd, info, stream).is_some() {
                return;
            }
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { write_general(t, fd, off, n, call, rec, b) }
}

/// [`write`] in general (first writes, unknown descriptors and call paths,
/// no events).
///
/// # Safety
/// As [`write`].
#[inline(never)]
unsafe fn write_general(
    t: &Thread,
    fd: c_int,
    off: Option<u64>,
    n: u64,
    call: WriteCall,
    rec: *const usize,
    b: &Before,
) {
    let Some(info) = b.info.or_else(|| files::info(fd)) else {
        return;
    };
    if !info.regular {
        if info.raw && b.hit.is_some() {
            crate::rawdev::after(t, fd, info, off, n, call, b);
        }
        return;
    }
    if !events_on() && !aged::placed_by_age(info) {
        // Only the hint matters (no event carries the offset; an O_DIRECT
        // write's age, when it picks the stream, needs it).
        // SAFETY: forwarded caller contract.
        unsafe { finish_write(t, fd, info, 0, n, call, rec, b) };
        return;
    }
    let offset = match off {
        Some(o) if !is_append(fd, info) => o,
        // pwrite on an O_APPEND descriptor appends (Linux ignores the offset).
        Some(_) => stat_fd(fd).map_or(0, |s| s.size.saturating_sub(n)),
        None if info.tracked => files::advance(fd, n),
        None => {
            // The position after the write, minus what was written (also
            // right for O_APPEND).
            let after = crate::sys::lseek(fd, 0, libc::SEEK_CUR);
            (after as u64).saturating_sub(n)
        }
    };
    // SAFETY: forwarded caller contract.
    unsafe { finish_write(t, fd, info, offset, n, call, rec, b) };
}

fn is_append(fd: c_int, info: files::FdInfo) -> bool {
    match info.append {
        Some(a) => a,
        None => {
            let fl = crate::sys::fcntl(fd, libc::F_GETFL, 0);
            fl >= 0 && fl & libc::O_APPEND != 0
        }
    }
}

/// # Safety
/// As [`write`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn finish_write(
    t: &Thread,
    fd: c_int,
    info: files::FdInfo,
    offset: u64,
    n: u64,
    call: WriteCall,
    rec: *const usize,
    b: &Before,
) -> Option<(u32, u32)> {
    let id = info.id;
    let (signature, stream) = match b.hit {
        Some(hit) => hit,
        None => {
            // SAFETY: forwarded caller contract.
            unsafe { capture_described(t, rec) }?
        }
    };
    let age = b.age.unwrap_or_else(|| aged::age_of(info, offset, n));
    let stream = aged::aged_stream(signature, stream, info, age);
    let hint_now = inode_hint(fd, info, stream);
    if events_on() {
        if !info.named {
            name_file(fd, info);
            files::mark_named(fd);
        }
        // SAFETY: forwarded caller contract.
        let native = unsafe { crate::context::native_beside_java(t, rec, signature) };
        state::emit_write(
            t,
            RawWrite::new(
                id,
                offset,
                n,
                signature,
                stream,
                hint_now as u32,
                call as u32,
            )
            .with_age(age)
            .with_native(native),
        );
    }
    Some((stream, hint_now as u32))
}

/// The stream of a write: the static map's (`cached`, remembered with the
/// call path) when `PCSTREAM_MAP` is installed — the explicit map wins —
/// else the daemon's live table's (a lock-free probe of the mapped file).
#[inline(always)]
pub(crate) fn live_stream(sig: u64, cached: u32) -> u32 {
    if hint::have_map() {
        cached
    } else {
        crate::live::stream(sig)
    }
}

/// [`live_stream`] for a write to a file: the live table is asked under
/// the key of the file's learning domain (`domain.rs`: the signature
/// itself while the process has seen no file outside the default domain).
#[inline(always)]
fn file_stream(sig: u64, cached: u32, info: files::FdInfo) -> u32 {
    if hint::have_map() {
        cached
    } else if crate::domain::any_salted() {
        salted_stream(sig, info.id)
    } else {
        crate::live::stream(sig)
    }
}

/// [`live_stream`] for a file outside the default domain, out of line so
/// that the default domain's write path keeps its code.
#[cold]
#[inline(never)]
fn salted_stream(sig: u64, id: FileId) -> u32 {
    crate::live::stream(crate::domain::key(sig, id))
}

/// `RwHint::for_stream(stream).raw()` for a stream ≠ 0 (SHORT = 2 …
/// EXTREME = 5), by arithmetic rather than a table lookup (a cache line).
#[inline(always)]
fn stream_hint(stream: u32) -> u64 {
    stream.min(4) as u64 + 1
}

/// In a descriptor's copy of its inode's hint (`files::known_hint`): the
/// low nibble is the hint, the high one a hint that `F_SET_RW_HINT` refused
/// on this descriptor (0: none; a stream's hint is never 0).
pub(crate) const REFUSED_SHIFT: u32 = 4;

/// The hint on `fd`'s inode after a write from a call path of `stream`:
/// the stream's hint, set when the inode does not have it already
/// (stream ≠ 0), else the hint last known on the inode. The descriptor's
/// table entry keeps a copy while the hint cache does not change, and
/// remembers a hint the kernel refused (an old kernel, a seccomp filter,
/// valgrind): that hint is not asked for again through this descriptor
/// (one failed `fcntl` per write otherwise), but a different one (the
/// stream changed) is.
#[inline(always)]
fn inode_hint(fd: c_int, info: files::FdInfo, stream: u32) -> u64 {
    let id = info.id;
    let epoch = crate::hot::hint_epoch();
    let known = if info.table {
        files::known_hint(fd, epoch)
    } else {
        None
    };
    let mut refused = 0;
    let h = if stream != 0 {
        let want = stream_hint(stream);
        if let Some(h) = settled(known, want) {
            return h;
        }
        let h = hint::apply(fd, id, RwHint::for_stream(stream));
        if h != want {
            refused = want;
        }
        h
    } else if let Some(k) = known {
        return k & 0xf;
    } else {
        hint::cached(id).unwrap_or(0)
    };
    if info.table {
        files::set_known_hint(fd, epoch, h | refused << REFUSED_SHIFT);
    }
    h
}

/// The hint on the inode when the descriptor's copy `known` shows that
/// `want` needs no `F_SET_RW_HINT`: it is there, or was refused through
/// this descriptor.
#[inline(always)]
pub(crate) fn settled(known: Option<u64>, want: u64) -> Option<u64> {
    match known {
        Some(k) if k & 0xf == want => Some(want),
        Some(k) if k >> REFUSED_SHIFT == want => Some(k & 0xf),
        _ => None,
    }
}

/// [`settled`] for a write of `stream` (≠ 0) to `fd`, from the
/// descriptor's copy of its inode's hint in the current epoch.
#[inline(always)]
fn settled_hint(fd: c_int, info: files::FdInfo, stream: u32) -> Option<u64> {
    if !info.table {
        return None;
    }
    settled(
        files::known_hint(fd, crate::hot::hint_epoch()),
        stream_hint(stream),
    )
}

/// A successful stdio call that accepted `n` bytes for `f`.
///
/// # Safety
/// `f` was just used successfully by a real stdio call; `rec` as for [`write`].
pub unsafe fn stdio(t: &Thread, f: *mut FILE, n: u64, rec: *const usize) {
    if f.is_null() || n == 0 {
        return;
    }
    let buf = glibc_buffer(f);
    if let Some(b) = buf.filter(|_| f as usize == t.stdio_fp.get()) {
        if continue_run(t, f, b, n) {
            return;
        }
    }
    let (Some(fileno), Some(ftello)) = (real::FILENO.get(), real::FTELLO.get()) else {
        return;
    };
    // SAFETY: `f` was just used successfully by the real stdio call.
    let fd = unsafe { fileno(f) };
    let Some(info) = files::info(fd) else { return };
    if !info.regular {
        return;
    }
    let offset = match buf.and_then(|b| continued_offset(t, f, b, n)) {
        Some(o) => o,
        None => {
            // SAFETY: as above; ftello reports the stream's logical position.
            let pos = unsafe { ftello(f) };
            (pos as u64).saturating_sub(n)
        }
    };
    if let Some((base, ptr)) = buf {
        t.stdio_fp.set(f as usize);
        t.stdio_base.set(base);
        t.stdio_ptr.set(ptr);
    } else {
        t.stdio_fp.set(0);
    }
    // A call that continues this thread's stdio run on the file (cc1
    // writing a `.s`: ~600,000 calls per unit from hundreds of call paths)
    // is the run's first call's signature and stream, as its event is
    // (batch.rs, `RawWrite`): no unwinding, and the run's hint stays.
    let run = t.stdio_sig.get() != 0
        && t.stdio_file.get() == info.id
        && offset.wrapping_sub(t.stdio_end.get()) <= crate::batch::STDIO_GAP;
    let hit = if run {
        (t.stdio_sig.get(), t.stdio_stream.get())
    } else {
        // SAFETY: forwarded caller contract.
        match unsafe { capture_described(t, rec) } {
            Some(c) => c,
            None => return,
        }
    };
    t.stdio_file.set(info.id);
    t.stdio_end.set(offset + n);
    t.stdio_sig.set(hit.0);
    t.stdio_stream.set(hit.1);
    let b = Before {
        hit: Some(hit),
        ..Before::new()
    };
    // SAFETY: forwarded caller contract.
    let sent = unsafe { finish_write(t, fd, info, offset, n, WriteCall::Fwrite, rec, &b) };
    // What a call continuing the run in this buffer repeats (`continue_run`).
    match sent {
        Some((stream, hint)) if t.stdio_fp.get() == f as usize => {
            t.stdio_fd.set(fd);
            t.stdio_sent.set(stream as u64 | (hint as u64) << 32);
        }
        _ => t.stdio_fp.set(0),
    }
}

/// `_fileno` of glibc's `struct _IO_FILE`.
const IO_FILENO: usize = 112;

/// A stdio call on the stream of this thread's stdio run (its buffer
/// `buf`, from [`glibc_buffer`]) that continues the run in the same buffer
/// (`continued_offset`) on the same descriptor: the run's file, signature,
/// stream and hint, as the call before it ([`stdio`] keeps them), with no
/// `fileno`, descriptor lookup, live-table probe or hint check. cc1 makes
/// ~300,000 such calls per unit; this is what they cost. `false`: not such
/// a call, take the full path.
#[inline]
fn continue_run(t: &Thread, f: *mut FILE, buf: (usize, usize), n: u64) -> bool {
    let Some(offset) = continued_offset(t, f, buf, n) else {
        return false;
    };
    // SAFETY: as in `glibc_buffer`: a FILE the real call just used.
    let fd = unsafe { ((f as usize + IO_FILENO) as *const c_int).read_volatile() };
    if fd != t.stdio_fd.get() {
        return false;
    }
    t.stdio_base.set(buf.0);
    t.stdio_ptr.set(buf.1);
    t.stdio_end.set(offset + n);
    if events_on() {
        let sent = t.stdio_sent.get();
        state::emit_write(
            t,
            RawWrite::new(
                t.stdio_file.get(),
                offset,
                n,
                t.stdio_sig.get(),
                sent as u32,
                (sent >> 32) as u32,
                WriteCall::Fwrite as u32,
            ),
        );
    }
    true
}

/// glibc's `struct _IO_FILE` (`bits/types/struct_FILE.h`, a stable ABI):
/// `_IO_write_base`, `_IO_write_ptr`, `_IO_buf_base`, `_IO_buf_end`.
const IO_WRITE_BASE: usize = 32;
const IO_WRITE_PTR: usize = 40;
const IO_BUF_BASE: usize = 56;
const IO_BUF_END: usize = 64;

/// `(_IO_write_base, _IO_write_ptr)` of a stream in write mode with a
/// buffer of at least 4 × `STDIO_GAP` bytes (so `putc` cannot flush it
/// within the gap a run may skip); `None` otherwise.
fn glibc_buffer(f: *mut FILE) -> Option<(usize, usize)> {
    let p = f as usize;
    // SAFETY: `f` is a FILE the real stdio call just used: glibc's
    // `struct _IO_FILE`, whose first 72 bytes hold these pointers. They
    // are only read (the application may write them concurrently, under
    // the stream's lock: a torn value only makes the check below fail or
    // misplace this shim's event, never the application's data).
    let [base, ptr, bbase, bend] = [IO_WRITE_BASE, IO_WRITE_PTR, IO_BUF_BASE, IO_BUF_END]
        .map(|o| unsafe { ((p + o) as *const usize).read_volatile() });
    let ok = bbase != 0
        && bend >= bbase + 4 * crate::batch::STDIO_GAP as usize
        && bbase <= base
        && base <= ptr
        && ptr <= bend;
    ok.then_some((base, ptr))
}

/// The offset of a stdio call of `n` bytes on `f` that left the write
/// pointer at `ptr`, when this thread's last stdio call was on `f` and the
/// buffer was not flushed since: the bytes between that call's end and
/// this call's start (what `putc` added unseen) are at most `STDIO_GAP`,
/// the buffer is the same and holds them all. A flush resets the pointer
/// to the buffer's start, so one inside this call or within the gap (the
/// buffer is at least 4 gaps long) leaves `ptr - n` below the last
/// pointer. What `ftello` would return then, without its `lseek`.
fn continued_offset(t: &Thread, f: *mut FILE, (base, ptr): (usize, usize), n: u64) -> Option<u64> {
    if t.stdio_fp.get() != f as usize || t.stdio_base.get() != base || t.stdio_sig.get() == 0 {
        return None;
    }
    let start = ptr.checked_sub(n as usize)?;
    let gap = start.checked_sub(t.stdio_ptr.get())?;
    (gap as u64 <= crate::batch::STDIO_GAP).then(|| t.stdio_end.get() + gap as u64)
}

/// Reads 8 bytes of the application's memory without risking a fault.
fn peek_u64(addr: usize) -> Option<u64> {
    let mut v = 0u64;
    let local = libc::iovec {
        iov_base: &mut v as *mut u64 as *mut libc::c_void,
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: process_vm_readv on our own pid copies into `v` and reports
    // EFAULT instead of faulting on a bad address.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == 8).then_some(v)
}

/// After the application's `fcntl(fd, F_SET_RW_HINT, arg)` returned `rc`
/// with `err` (errno when rc < 0).
pub fn app_hint(fd: c_int, arg: usize, rc: c_int, err: c_int) {
    let Some(s) = stat_fd(fd) else { return };
    let raw = if rc == 0 || err == libc::EINVAL {
        peek_u64(arg)
    } else {
        None
    };
    let mut requested = 0;
    let mut repaired = false;
    if let Some(raw) = raw {
        let node = files::raw(fd).map(|r| r.rdev);
        if rc == 0 {
            requested = raw;
            hint::remember(s.id, raw);
            if let Some(rdev) = node {
                crate::rawdev::remember(rdev, raw);
            }
        } else if let Some(meant) = hint::intended(raw) {
            requested = meant;
            if state::cfg().fix_app_hints {
                repaired = hint::repair(fd, s.id, meant);
                if let (true, Some(rdev)) = (repaired, node) {
                    crate::rawdev::remember(rdev, meant);
                }
            }
        } else {
            requested = raw;
        }
    }
    state::emit(&Kind::AppHint {
        file: s.id,
        requested,
        accepted: rc == 0,
        errno: if rc == 0 { 0 } else { err },
        repaired,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_sees_the_inode_hint_as_it_is_now() {
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        // SAFETY: zeroed stat is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and buffer.
        assert_eq!(unsafe { libc::fstat(f.as_raw_fd(), &mut st) }, 0);
        // The entry lives at a number of its own (the table is per number).
        let fd = 4020;
        files::set(fd, &st, libc::O_WRONLY, true);
        let info = files::get(fd).unwrap();
        hint::remember(info.id, 2);
        assert_eq!(inode_hint(fd, info, 0), 2);
        assert_eq!(inode_hint(fd, info, 0), 2, "from the descriptor's copy");
        // The application (or another thread) changes the inode's hint.
        hint::remember(info.id, 4);
        assert_eq!(inode_hint(fd, info, 0), 4, "the copy is not used stale");
        // A call path mapped to stream 3 (LONG = 4): already there, no fcntl
        // (fd 4020 is not open: a fcntl would fail and keep the old hint).
        assert_eq!(inode_hint(fd, info, 3), 4);
        // Stream 1 (SHORT) is not there: F_SET_RW_HINT on a descriptor that
        // is not open fails, so the inode keeps what it had.
        assert_eq!(inode_hint(fd, info, 1), 4);
        // The refusal is kept on the descriptor (the next write from that
        // path asks no more); another stream's hint is asked for. (Other
        // tests may move the hint cache's epoch meanwhile: then the copy
        // is rightly not used and there is nothing to check.)
        for (stream, refused) in [(1, 2), (2, 3)] {
            let e0 = crate::hot::hint_epoch();
            assert_eq!(inode_hint(fd, info, stream), 4);
            if crate::hot::hint_epoch() == e0 {
                assert_eq!(
                    files::known_hint(fd, e0),
                    Some(4 | refused << REFUSED_SHIFT),
                    "stream {stream}"
                );
            }
        }
        hint::forget(info.id);
        assert_eq!(inode_hint(fd, info, 0), 0, "forgotten: unknown");
        files::clear(fd);
    }

    #[test]
    fn stream_hints_are_the_placement_crates() {
        for s in 1..10 {
            assert_eq!(stream_hint(s), RwHint::for_stream(s).raw(), "stream {s}");
        }
    }
}
