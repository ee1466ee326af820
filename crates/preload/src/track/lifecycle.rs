//! What the calls that name, open, close, truncate or remove a file, or
//! discard a range of it, mean: the path's state looked at just before a
//! destructive call ([`PathStat`], [`before_open`]) and the
//! `InvalidateEvent`s for the data that died (unlink of the last link,
//! replacing rename, truncation, `O_TRUNC`, an empty file opened for
//! writing — mostly a file's creation —, a punched hole, a raw device's
//! discard); and the descriptor table kept as opens and `F_SETFL` change
//! it. Split from `track.rs`, which keeps the write paths: these are the
//! calls that end data's life rather than write it.

use super::{file_key, peek_u64};
use crate::events::{FileId, InvalidateKind, Kind};
use crate::state::{self, events_on, SEEN_FILES};
use crate::{files, hint, real};
use libc::{c_char, c_int, FILE};

/// Identity, type, link count and size of a path (before a destructive call).
#[derive(Debug, Clone, Copy)]
pub struct PathStat {
    pub(super) id: FileId,
    regular: bool,
    nlink: u64,
    pub(super) size: u64,
}

impl PathStat {
    /// The fields kept of a `stat` (of a path or a descriptor).
    fn of(st: &libc::stat) -> PathStat {
        PathStat {
            id: FileId::of(st),
            regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
            nlink: st.st_nlink,
            size: st.st_size as u64,
        }
    }
}

/// What an `open` that may truncate a file found at its path before the
/// call ([`before_open`]).
#[derive(Debug, Clone, Copy)]
pub enum BeforeOpen {
    /// The file it named (an `O_TRUNC` open: its data past the new size dies).
    Was(PathStat),
    /// Not looked at, or nothing there.
    Unknown,
}

/// Before an `open` with `flags` of `path`: the file an `O_TRUNC` open
/// would shrink. Other opens are not looked at: whether an open created
/// its file, or found it empty, the file's size after the call says
/// ([`opened`]), without a `fstatat` per open.
///
/// # Safety
/// As [`stat_path`].
pub unsafe fn before_open(dirfd: c_int, path: *const c_char, flags: c_int) -> BeforeOpen {
    if flags & libc::O_TRUNC == 0 {
        return BeforeOpen::Unknown;
    }
    // SAFETY: forwarded caller contract.
    match unsafe { stat_path(dirfd, path, flags & libc::O_NOFOLLOW == 0) } {
        Some(s) => BeforeOpen::Was(s),
        None => BeforeOpen::Unknown,
    }
}

/// `fstatat(dirfd, path)`; `follow` = follow a final symlink.
///
/// # Safety
/// `path` is null or the C string the application passes to the real call.
pub unsafe fn stat_path(dirfd: c_int, path: *const c_char, follow: bool) -> Option<PathStat> {
    if path.is_null() {
        return None;
    }
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: path is the application's C string (it passes the same to the
    // real call); fstatat only reads it.
    let st = unsafe { crate::sys::fstatat(dirfd, path, flags) }?;
    Some(PathStat::of(&st))
}

fn invalidate(id: FileId, kind: InvalidateKind, offset: u64, len: u64) {
    crate::pageage::forget(id, offset, offset.saturating_add(len));
    if matches!(
        kind,
        InvalidateKind::Unlink | InvalidateKind::CloseUnlinked | InvalidateKind::RenameReplace
    ) {
        crate::pageage::gone(id);
    }
    state::emit(&Kind::Invalidate {
        file: id,
        kind,
        offset,
        len,
    });
}

/// Before `unlink`-like calls: the file whose last link may go.
///
/// # Safety
/// As [`stat_path`].
pub unsafe fn before_unlink(dirfd: c_int, path: *const c_char) -> Option<PathStat> {
    // SAFETY: forwarded caller contract.
    unsafe { stat_path(dirfd, path, false) }.filter(|s| s.regular && s.nlink == 1)
}

/// After a successful unlink of a file seen by [`before_unlink`].
pub fn unlinked(s: PathStat) {
    hint::forget(s.id);
    SEEN_FILES.remove(file_key(s.id));
    invalidate(s.id, InvalidateKind::Unlink, 0, s.size);
}

/// Before `close(fd)` (or `fclose` of its stream): the file, when this
/// descriptor is the writer's only handle on a file without a name (an
/// `O_TMPFILE` never linked, a file unlinked while open), whose data then
/// dies at the close. Only for a descriptor this process opened and wrote
/// through (in this fork generation) and never duplicated, with events on:
/// another handle may keep the file (and write to it) after this close.
pub fn before_close(fd: c_int) -> Option<PathStat> {
    if !events_on() {
        return None;
    }
    let info = files::get(fd)?;
    if !(info.regular && info.named && !info.shared) {
        return None;
    }
    stat_fd(fd).filter(|s| s.regular && s.nlink == 0)
}

/// [`before_close`] for `fclose(f)` (`fd` its descriptor): the size
/// counts what the stream still buffers (its position, when further).
///
/// # Safety
/// `f` is the stream the application passes to `fclose`.
pub unsafe fn before_fclose(f: *mut FILE, fd: c_int) -> Option<PathStat> {
    let mut s = before_close(fd)?;
    if let Some(ftello) = real::FTELLO.get() {
        // SAFETY: the caller's contract (a stream about to be closed).
        let pos = unsafe { ftello(f) };
        if pos > 0 {
            s.size = s.size.max(pos as u64);
        }
    }
    Some(s)
}

/// After a successful close of a file seen by [`before_close`].
pub fn closed_unnamed(s: PathStat) {
    hint::forget(s.id);
    SEEN_FILES.remove(file_key(s.id));
    invalidate(s.id, InvalidateKind::CloseUnlinked, 0, s.size);
}

/// Before `rename*`: the destination that would be replaced (and the source,
/// to tell a no-op rename of a file onto itself).
///
/// # Safety
/// As [`stat_path`], for both paths.
pub unsafe fn before_rename(
    olddir: c_int,
    old: *const c_char,
    newdir: c_int,
    new: *const c_char,
) -> Option<PathStat> {
    // SAFETY: forwarded caller contract.
    let dst = unsafe { stat_path(newdir, new, false) }.filter(|s| s.regular && s.nlink == 1)?;
    // SAFETY: forwarded caller contract.
    let src = unsafe { stat_path(olddir, old, false) }?;
    (src.id != dst.id).then_some(dst)
}

/// After a successful rename that replaced `dst`.
pub fn replaced(dst: PathStat) {
    hint::forget(dst.id);
    SEEN_FILES.remove(file_key(dst.id));
    invalidate(dst.id, InvalidateKind::RenameReplace, 0, dst.size);
}

/// After a successful truncate to `len` of a file that had `before.size`.
pub fn truncated(before: PathStat, len: u64) {
    if before.regular && before.size > len {
        invalidate(before.id, InvalidateKind::Truncate, len, before.size - len);
    }
}

/// `fstat` of a descriptor as a [`PathStat`].
pub fn stat_fd(fd: c_int) -> Option<PathStat> {
    let st = crate::sys::fstat(fd)?;
    Some(PathStat::of(&st))
}

/// After a successful `open*`/`creat`/`fopen` returning `fd`. `before` is
/// what [`before_open`] found at the path; `stdio` marks stdio-owned
/// descriptors (position managed by libc, never tracked).
pub fn opened(fd: c_int, oflags: c_int, before: BeforeOpen, stdio: bool) {
    let Some(st) = crate::sys::fstat(fd) else {
        files::clear(fd);
        return;
    };
    files::set(fd, &st, oflags, !stdio);
    let PathStat {
        id, regular, size, ..
    } = PathStat::of(&st);
    match before {
        BeforeOpen::Was(b) if b.id == id && b.regular && b.size > size => {
            invalidate(id, InvalidateKind::Truncate, size, b.size - size);
        }
        _ if regular && size == 0 && oflags & libc::O_ACCMODE != libc::O_RDONLY && events_on() => {
            // An empty file opened for writing, most often one this open
            // created (`O_CREAT` alone, as SQLite and Java's
            // `RandomAccessFile` create theirs, as well as `O_EXCL` and
            // `O_TRUNC`): it holds no data, so whatever a learner still
            // holds under its inode number is dead. Mostly an earlier
            // file's, deleted where no shim saw it (`rm` without the shim,
            // another host's process, a re-run's clean-up); it dies now, so
            // the new file's writes are not taken for overwrites in place
            // (docs/shim.md, "Events").
            crate::pageage::gone(id);
            invalidate(id, InvalidateKind::Truncate, 0, 0);
        }
        _ => {}
    }
    if hint::have_map() || crate::live::present() {
        if regular {
            hint::refresh(fd, id);
        } else if let Some(r) = files::raw(fd) {
            crate::rawdev::refresh(fd, id, r.rdev);
        }
    }
}

/// After a successful `fcntl(fd, F_SETFL, …)`: `O_APPEND` or `O_DIRECT`
/// may have changed. A descriptor with an entry gets it made again from
/// its flags as they are now (its position no longer tracked); one
/// without stays without.
pub fn flags_changed(fd: c_int) {
    if files::get(fd).is_none() {
        files::clear(fd);
        return;
    }
    let fl = crate::sys::fcntl(fd, libc::F_GETFL, 0);
    match crate::sys::fstat(fd) {
        Some(st) if fl >= 0 => files::set(fd, &st, fl, false),
        _ => files::clear(fd),
    }
}

/// After `fallocate(fd, mode, off, len)` succeeded.
pub fn fallocated(fd: c_int, mode: c_int, off: i64, len: i64) {
    const KILLS: c_int =
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_ZERO_RANGE;
    if mode & KILLS == 0 || len <= 0 {
        return;
    }
    let id = match stat_fd(fd) {
        Some(s) if s.regular => s.id,
        // A block device with write streams: the range is deallocated.
        _ => match files::raw(fd) {
            Some(r) => crate::rawdev::device_id(r.rdev),
            None => return,
        },
    };
    invalidate(id, InvalidateKind::PunchHole, off.max(0) as u64, len as u64);
}

/// After a successful `BLKDISCARD`/`BLKSECDISCARD`/`BLKZEROOUT` on `fd`
/// whose argument `arg` points to `{start, length}` (bytes): on a block
/// device with write streams, that range died (`PUNCH_HOLE` of the
/// device's `FileId`).
pub fn discarded(fd: c_int, arg: usize) {
    let Some(r) = files::raw(fd) else { return };
    let (Some(start), Some(len)) = (peek_u64(arg), peek_u64(arg.wrapping_add(8))) else {
        return;
    };
    if len > 0 {
        invalidate(
            crate::rawdev::device_id(r.rdev),
            InvalidateKind::PunchHole,
            start,
            len,
        );
    }
}
