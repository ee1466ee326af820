//! What the shim knows about file descriptors: per-fd (dev, ino, kind) and,
//! for descriptors it saw opened write-only, the file position, so a plain
//! `write()` costs no extra syscall.
//!
//! An entry is filled by an interposed `open*`/`creat`/`fopen`, or, for a
//! descriptor the shim did not see opened that `fstat` finds is not a
//! regular file (a socket, a pipe), by its first write; it is cleared by
//! every interposed call that can retire or share a descriptor (`close`,
//! `close_range`, `dup*`, `fcntl(F_DUPFD*)`, `fdopen`, `fclose`). Other
//! descriptors without an entry are looked up with `fstat` per write. Each
//! entry is a small seqlock (odd version = being updated), so a reader in a
//! signal handler never sees a torn entry: it just misses. Positions are
//! trusted only within the fork generation they were recorded in (after a
//! fork, parent and child share file offsets).
//!
//! A block-device node whose disk has write streams (`rawdev.rs`) gets a
//! *raw* entry: its identity is the node's (so the per-inode hint cache
//! holds the hint of the inode the kernel reads it from), its device
//! number (`st_rdev`, what events name it by) is kept beside it, and its
//! flags carry the
//! disk's stream count and whether the descriptor is `O_DIRECT`. Block
//! devices without write streams get plain non-file entries, as before.

use crate::events::FileId;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Descriptors with a table entry (higher ones always use `fstat`).
pub const FDS: usize = 4096;

const REGULAR: u32 = 1;
const TRACK_POS: u32 = 2;
const APPEND: u32 = 4;
const NAMED: u32 = 8;
const SHARED: u32 = 16;
/// A block device with write streams (`rawdev.rs`).
const RAW: u32 = 32;
/// Opened `O_DIRECT` (or set so by `F_SETFL`).
const DIRECT: u32 = 64;
/// The disk's write-stream count (raw entries), in bits 8..16.
const STREAMS_SHIFT: u32 = 8;

/// One cache line per descriptor (a write reads the whole entry right after
/// its syscall, when the line is usually cold).
#[repr(align(64))]
struct Entry {
    ver: AtomicU32,
    flags: AtomicU32,
    gen: AtomicU32,
    dev: AtomicU64,
    ino: AtomicU64,
    pos: AtomicU64,
    /// The inode's hint as `epoch << 8 | hint` (see [`known_hint`]).
    hint: AtomicU64,
    /// A raw entry's device number (`st_rdev`).
    rdev: AtomicU64,
    /// A raw entry's hint word (`rawdev::word_of`), 0 for none.
    word: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    ver: AtomicU32::new(0),
    flags: AtomicU32::new(0),
    gen: AtomicU32::new(0),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    pos: AtomicU64::new(0),
    hint: AtomicU64::new(0),
    rdev: AtomicU64::new(0),
    word: AtomicUsize::new(0),
};

static TABLE: [Entry; FDS] = [EMPTY; FDS];

/// A file descriptor's file, as far as writes are concerned.
#[derive(Debug, Clone, Copy)]
pub struct FdInfo {
    /// Identity.
    pub id: FileId,
    /// Whether it is a regular file (only those produce write events).
    pub regular: bool,
    /// Whether the position is tracked in the table.
    pub tracked: bool,
    /// Whether the descriptor is `O_APPEND` (`None`: unknown).
    pub append: Option<bool>,
    /// Whether this process already named the file (`OpenEvent`) through
    /// this table entry.
    pub named: bool,
    /// Whether this process saw the descriptor opened (a table entry of
    /// this fork generation): its first write names the file even when the
    /// inode number was seen before (it may have been freed and reused).
    pub opened: bool,
    /// Whether this came from the descriptor's table entry (else from
    /// `fstat`: the entry, and its copy of the inode's hint, belong to no
    /// file the shim knows of).
    pub table: bool,
    /// Whether the descriptor was duplicated (`dup*`, `F_DUPFD*`): closing
    /// it may not close the file.
    pub shared: bool,
    /// Whether it is a block device whose disk has write streams (see
    /// [`raw`] for the rest).
    pub raw: bool,
    /// Whether the descriptor is `O_DIRECT` (known from the table only:
    /// false without an entry).
    pub direct: bool,
}

/// What a raw entry (a block device with write streams) adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw {
    /// The device number (`st_rdev`): events name the device by it.
    pub rdev: u64,
    /// The disk's write streams (`queue/max_write_streams`, ≤ 255).
    pub streams: u32,
    /// Whether the descriptor is `O_DIRECT` (only such writes carry the
    /// node's hint to the device).
    pub direct: bool,
    /// The address of the device's hint word (`rawdev::word_of`), found
    /// when the entry was made (0: none).
    pub word: usize,
}

/// The flags of an entry for a file of mode `mode` and device `rdev`
/// opened with `oflags`: a block device with write streams is raw.
fn raw_flags(mode: libc::mode_t, rdev: u64, oflags: i32) -> u32 {
    if mode & libc::S_IFMT != libc::S_IFBLK {
        return 0;
    }
    let streams = crate::rawdev::streams(rdev).min(255);
    if streams == 0 {
        return 0;
    }
    RAW | streams << STREAMS_SHIFT
        | if oflags & libc::O_DIRECT != 0 {
            DIRECT
        } else {
            0
        }
}

/// Both sides of a fork: file positions are shared from now on.
pub fn bump_fork_generation() {
    crate::hot::bump_fork_gen();
}

fn entry(fd: i32) -> Option<&'static Entry> {
    usize::try_from(fd).ok().and_then(|i| TABLE.get(i))
}

/// Fills the entry of a descriptor the shim saw opened. `may_track`: the
/// shim sees every write through it (false for stdio-owned descriptors,
/// whose position libc moves internally).
pub fn set(fd: i32, st: &libc::stat, oflags: i32, may_track: bool) {
    let Some(e) = entry(fd) else { return };
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if regular {
        crate::domain::classify(fd, st.st_dev);
    }
    let track = may_track
        && regular
        && oflags & libc::O_ACCMODE == libc::O_WRONLY
        && oflags & libc::O_APPEND == 0;
    let raw = if regular {
        0
    } else {
        raw_flags(st.st_mode, st.st_rdev, oflags)
    };
    if regular && oflags & libc::O_DIRECT != 0 {
        crate::pageage::opened(FileId::of(st), st.st_size as u64);
    }
    let v = e.ver.load(Ordering::Relaxed);
    e.ver.store(v | 1, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Release);
    e.dev.store(st.st_dev, Ordering::Relaxed);
    e.ino.store(st.st_ino, Ordering::Relaxed);
    e.pos.store(0, Ordering::Relaxed);
    e.rdev.store(st.st_rdev, Ordering::Relaxed);
    e.word.store(
        if raw != 0 {
            crate::rawdev::word_of(st.st_rdev)
        } else {
            0
        },
        Ordering::Relaxed,
    );
    e.hint.store(0, Ordering::Relaxed);
    e.gen.store(crate::hot::fork_gen(), Ordering::Relaxed);
    e.flags.store(
        raw | if regular { REGULAR } else { 0 }
            | if track { TRACK_POS } else { 0 }
            | if oflags & libc::O_APPEND != 0 {
                APPEND
            } else {
                0
            }
            | if regular && oflags & libc::O_DIRECT != 0 {
                DIRECT
            } else {
                0
            },
        Ordering::Relaxed,
    );
    e.ver
        .store((v | 1).wrapping_add(1).max(2), Ordering::Release);
}

/// Forgets a descriptor (closed, replaced, or shared with code the shim cannot see).
pub fn clear(fd: i32) {
    if let Some(e) = entry(fd) {
        e.ver.store(0, Ordering::Release);
    }
}

/// Stops trusting a descriptor's tracked position (it was duplicated or
/// handed to stdio), keeping its identity.
pub fn untrack(fd: i32) {
    if let Some(e) = entry(fd) {
        e.flags.fetch_and(!TRACK_POS, Ordering::Relaxed);
    }
}

/// A duplicate of `fd` exists: its position is shared and closing it may
/// not close the file.
pub fn share(fd: i32) {
    if let Some(e) = entry(fd) {
        e.flags.fetch_and(!TRACK_POS, Ordering::Relaxed);
        e.flags.fetch_or(SHARED, Ordering::Relaxed);
    }
}

/// Remembers that the file behind `fd` was named (a later reader that
/// raced with a clear simply names it again).
pub fn mark_named(fd: i32) {
    if let Some(e) = entry(fd) {
        e.flags.fetch_or(NAMED, Ordering::Relaxed);
    }
}

/// The table's knowledge of `fd`, if any.
#[inline]
pub fn get(fd: i32) -> Option<FdInfo> {
    let e = entry(fd)?;
    let v1 = e.ver.load(Ordering::Acquire);
    if v1 == 0 || v1 & 1 == 1 {
        return None;
    }
    let flags = e.flags.load(Ordering::Relaxed);
    let id = FileId {
        dev: e.dev.load(Ordering::Relaxed),
        ino: e.ino.load(Ordering::Relaxed),
    };
    let gen_ok = e.gen.load(Ordering::Relaxed) == crate::hot::fork_gen();
    std::sync::atomic::fence(Ordering::Acquire);
    if e.ver.load(Ordering::Relaxed) != v1 {
        return None;
    }
    Some(FdInfo {
        id,
        regular: flags & REGULAR != 0,
        tracked: flags & TRACK_POS != 0 && gen_ok,
        append: Some(flags & APPEND != 0),
        // A fork child names its files again in its own trace.
        named: flags & NAMED != 0 && gen_ok,
        opened: gen_ok,
        table: true,
        shared: flags & SHARED != 0,
        raw: flags & RAW != 0,
        direct: flags & DIRECT != 0,
    })
}

/// The raw part of `fd`'s entry (`None` unless it is a block device with
/// write streams).
pub fn raw(fd: i32) -> Option<Raw> {
    let e = entry(fd)?;
    let v1 = e.ver.load(Ordering::Acquire);
    if v1 == 0 || v1 & 1 == 1 {
        return None;
    }
    let flags = e.flags.load(Ordering::Relaxed);
    let rdev = e.rdev.load(Ordering::Relaxed);
    let word = e.word.load(Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Acquire);
    if e.ver.load(Ordering::Relaxed) != v1 || flags & RAW == 0 {
        return None;
    }
    Some(Raw {
        rdev,
        streams: flags >> STREAMS_SHIFT & 0xff,
        direct: flags & DIRECT != 0,
        word,
    })
}

/// Advances a tracked position by `n` bytes; returns the position before.
#[inline]
pub fn advance(fd: i32, n: u64) -> u64 {
    entry(fd).map_or(0, |e| e.pos.fetch_add(n, Ordering::Relaxed))
}

/// The hint of `fd`'s inode as last copied into its table entry, if that
/// was in hint-cache epoch `epoch` (`hot::hint_epoch`, read before the
/// hint it tags: a copy is never newer than its epoch).
#[inline(always)]
pub fn known_hint(fd: i32, epoch: u32) -> Option<u64> {
    let v = entry(fd)?.hint.load(Ordering::Relaxed);
    (v >> 8 == epoch as u64).then_some(v & 0xff)
}

/// Copies `fd`'s inode's hint, read in hint-cache epoch `epoch`, into its
/// table entry.
#[inline]
pub fn set_known_hint(fd: i32, epoch: u32, hint: u64) {
    if let Some(e) = entry(fd) {
        e.hint
            .store((epoch as u64) << 8 | (hint & 0xff), Ordering::Relaxed);
    }
}

/// Sets a tracked position (after the application's `lseek`).
pub fn set_pos(fd: i32, pos: u64) {
    if let Some(e) = entry(fd) {
        e.pos.store(pos, Ordering::Relaxed);
    }
}

/// Remembers that `fd`, which has no entry, is not a regular file (a
/// socket, pipe or device the shim did not see opened), so its next writes
/// need no `fstat`: a writer to a pipe under the shim with events on paid
/// one per write (dd into a pipe: 1.8 s native, 3.3 s). Only an empty
/// entry is filled; every interposed call that retires the descriptor
/// clears it, as for the entries of opened files. A block device with
/// write streams gets a raw entry (its `O_DIRECT` flag read once here).
fn remember_other(fd: i32, st: &libc::stat) {
    let Some(e) = entry(fd) else { return };
    let mut raw = raw_flags(st.st_mode, st.st_rdev, 0);
    if raw != 0 && crate::sys::fcntl(fd, libc::F_GETFL, 0) & libc::O_DIRECT != 0 {
        raw |= DIRECT;
    }
    if e.ver
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    std::sync::atomic::fence(Ordering::Release);
    e.dev.store(st.st_dev, Ordering::Relaxed);
    e.ino.store(st.st_ino, Ordering::Relaxed);
    e.pos.store(0, Ordering::Relaxed);
    e.rdev.store(st.st_rdev, Ordering::Relaxed);
    e.word.store(
        if raw != 0 {
            crate::rawdev::word_of(st.st_rdev)
        } else {
            0
        },
        Ordering::Relaxed,
    );
    e.hint.store(0, Ordering::Relaxed);
    e.gen.store(crate::hot::fork_gen(), Ordering::Relaxed);
    e.flags.store(raw, Ordering::Relaxed);
    e.ver.store(2, Ordering::Release);
}

/// The descriptor's file: from the table, else `fstat` (a descriptor that
/// is not a regular file is then remembered in the table).
#[inline]
pub fn info(fd: i32) -> Option<FdInfo> {
    if let Some(i) = get(fd) {
        return Some(i);
    }
    let st = crate::sys::fstat(fd)?;
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if regular {
        crate::domain::classify(fd, st.st_dev);
    } else {
        remember_other(fd, &st);
        // A raw entry is only useful from the table (its device number).
        if let Some(i) = get(fd).filter(|i| i.raw) {
            return Some(i);
        }
    }
    Some(FdInfo {
        id: FileId::of(&st),
        regular,
        tracked: false,
        append: None,
        named: false,
        opened: false,
        table: false,
        shared: false,
        raw: false,
        direct: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(f: &std::fs::File) -> libc::stat {
        use std::os::fd::AsRawFd;
        // SAFETY: zeroed stat is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and buffer.
        assert_eq!(unsafe { libc::fstat(f.as_raw_fd(), &mut st) }, 0);
        st
    }

    #[test]
    fn set_get_advance_clear() {
        let f = tempfile::tempfile().unwrap();
        let st = stat_of(&f);
        set(4000, &st, libc::O_WRONLY, true);
        let i = get(4000).unwrap();
        assert!(i.regular && i.tracked);
        assert_eq!(i.id.ino, st.st_ino);
        assert_eq!(advance(4000, 10), 0);
        assert_eq!(advance(4000, 5), 10);
        untrack(4000);
        assert!(!get(4000).unwrap().tracked);
        clear(4000);
        assert!(get(4000).is_none());
        set(4001, &st, libc::O_RDWR, true);
        assert!(
            !get(4001).unwrap().tracked,
            "read-write descriptors are not tracked"
        );
        set(4002, &st, libc::O_WRONLY | libc::O_APPEND, true);
        assert!(
            !get(4002).unwrap().tracked,
            "append descriptors are not tracked"
        );
        bump_fork_generation();
        set(4003, &st, libc::O_WRONLY, true);
        assert!(get(4003).unwrap().tracked);
        bump_fork_generation();
        assert!(!get(4003).unwrap().tracked, "positions die at fork");
        assert!(get(-1).is_none() && get(1 << 20).is_none());
    }

    #[test]
    fn a_descriptor_copy_of_its_inode_hint_lives_for_one_epoch() {
        let f = tempfile::tempfile().unwrap();
        let st = stat_of(&f);
        set(4010, &st, libc::O_WRONLY, true);
        let epoch = crate::hot::hint_epoch();
        assert_eq!(known_hint(4010, epoch), None, "a new entry has no copy");
        set_known_hint(4010, epoch, 3);
        assert_eq!(known_hint(4010, epoch), Some(3));
        // Any change to the hint cache moves the epoch.
        let other = FileId {
            dev: 77,
            ino: st.st_ino ^ 0x5555,
        };
        crate::hint::remember(other, 2);
        let moved = crate::hot::hint_epoch();
        assert_ne!(moved, epoch);
        assert_eq!(known_hint(4010, moved), None);
        set_known_hint(4010, moved, 1);
        set(4010, &st, libc::O_WRONLY, true);
        assert_eq!(known_hint(4010, moved), None, "reopened: copy gone");
        crate::hint::forget(other);
        assert_ne!(crate::hot::hint_epoch(), moved);
    }
}
