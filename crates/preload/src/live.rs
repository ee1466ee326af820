//! The daemon's published mapping table, as the shim reads it (push-back).
//!
//! `pcstreamd` publishes `signature → (stream, hint)` in
//! `<runtime>/mapping.<uid>` (or `mapping.all` when users share a learner),
//! in the layout of `pcstream_placement::table`. This module owns the shim's
//! read-only `mmap` of that file and the lookup the write path makes in it.
//!
//! * Lookup ([`stream`]): one atomic load of the current mapping, then the
//!   table's lock-free probe — no allocation, no lock, no syscall,
//!   async-signal-safe. No mapping → stream 0 (the inode's hint is left alone).
//! * (Re)attach ([`check`]): `stat` of the table's name, and when the file is
//!   new (another inode than the one mapped, or the mapped one is flagged
//!   *replaced*) `openat` + `fstat` + `mmap(PROT_READ, MAP_SHARED)` + `close`:
//!   no descriptor is kept. It runs at init and then at most once per
//!   `PCSTREAM_FLUSH_MS` (piggy-backed on the batch age check; a CAS elects
//!   one thread), never per write. Raw syscalls, so the shim's own
//!   interposers are not re-entered; no allocation (the path is built once at
//!   init). When the file is gone (daemon stopped or killed), the last good
//!   mapping is kept: its memory stays valid after the daemon exits.
//! * A daemon that starts after the process ([`look_due`], [`look`]): a
//!   process that found no daemon at start stays *dormant* (`state.rs`):
//!   its intercepted calls pass straight through after one `rdtsc`
//!   compared with the next look's deadline (flush interval × 5 GHz, the
//!   fastest TSC, so never early); then one caller (a CAS on the
//!   `CLOCK_MONOTONIC_COARSE` deadline elects it, at most once per
//!   `PCSTREAM_FLUSH_MS`) `stat`s `events.sock` and the table names.
//!   When the socket is there the shim turns on (events sent, table
//!   mapped). A process already sending events (record mode) picks up a
//!   late socket in [`check`].
//! * An old mapping is never unmapped (a concurrent reader may be probing
//!   it); at most [`MAX_MAPPINGS`] are made per process (a table is a few
//!   KiB), after which the process keeps the last one.
//! * Fork-safe: the mapping is inherited; nothing else is held.
//!
//! The static `PCSTREAM_MAP` wins over the live table when both are present
//! (an explicit operator choice); see `hint.rs`.

use pcstream_placement::table::TableView;
use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Most table files mapped over a process's life.
pub const MAX_MAPPINGS: usize = 64;

struct Slot {
    ptr: AtomicPtr<u8>,
    /// The table's slot mask, validated when it was mapped.
    mask: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    ptr: AtomicPtr::new(std::ptr::null_mut()),
    mask: AtomicUsize::new(0),
};
static SLOTS: [Slot; MAX_MAPPINGS] = [EMPTY; MAX_MAPPINGS];
/// 1 + the slot of the current mapping (0: none).
static CURRENT: AtomicUsize = AtomicUsize::new(0);
/// Slots used so far (only the checker elected by `LAST_CHECK` writes).
static USED: AtomicUsize = AtomicUsize::new(0);
/// (dev, ino) of the mapped file.
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);
/// When the table was last checked (ns, the shim's clock); `u64::MAX`
/// while a check runs.
static LAST_CHECK: AtomicU64 = AtomicU64::new(0);
/// The table names to try, in order (NUL-terminated), set once at init.
static PATHS: OnceLock<[CString; 2]> = OnceLock::new();
/// The daemon's event socket (NUL-terminated), set once at init.
static SOCKET: OnceLock<CString> = OnceLock::new();
/// When a dormant process next looks for the daemon (coarse clock, ns).
static NEXT_LOOK: AtomicU64 = AtomicU64::new(0);
/// The same deadline as a TSC value, a pre-filter read per call (see
/// [`look_due`]).
static NEXT_LOOK_TSC: AtomicU64 = AtomicU64::new(0);
/// TSC ticks per ns assumed when turning `flush_ns` into a TSC deadline: no
/// x86 TSC runs faster than 5 GHz, so the deadline is never early.
const MAX_TICKS_PER_NS: u64 = 5;

/// Remembers where the daemon's table (`runtime_dir`) and event socket are
/// and maps the table if it is there. Called once by the library
/// constructor.
pub fn init(runtime_dir: &Path, socket: &Path, now_ns: u64) {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mk = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
    let _ = PATHS.set([
        mk(&runtime_dir.join(format!("mapping.{uid}"))),
        mk(&runtime_dir.join("mapping.all")),
    ]);
    let _ = SOCKET.set(mk(socket));
    LAST_CHECK.store(now_ns, Ordering::Relaxed);
    NEXT_LOOK.store(coarse_ns(), Ordering::Relaxed);
    reattach();
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the vDSO reads it from the
/// kernel's data page without the TSC (a few ns; resolution one tick).
#[inline(always)]
fn coarse_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether a dormant process may look for the daemon now: one `rdtsc` and
/// one load per call (a vDSO clock read costs ~25 instructions more; the
/// elected [`look`] checks the coarse clock itself, so a TSC that is not
/// in step across CPUs can only make a look happen later or be skipped).
#[inline(always)]
pub fn look_due() -> bool {
    rdtsc() >= NEXT_LOOK_TSC.load(Ordering::Relaxed)
}

/// Looks for a daemon that started after this process: one caller per
/// `flush_ns` (CAS-elected; the others return false at once) maps a new
/// table if there is one and returns whether `events.sock` exists.
#[cold]
#[inline(never)]
pub fn look(flush_ns: u64) -> bool {
    let next = NEXT_LOOK.load(Ordering::Relaxed);
    let now = coarse_ns();
    let wait = flush_ns.max(1_000_000);
    NEXT_LOOK_TSC.store(
        rdtsc().saturating_add(wait.saturating_mul(MAX_TICKS_PER_NS)),
        Ordering::Relaxed,
    );
    if now < next
        || NEXT_LOOK
            .compare_exchange(
                next,
                now.saturating_add(wait),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
    {
        return false;
    }
    reattach();
    socket_exists()
}

/// Whether the daemon's event socket exists (a raw `stat`).
fn socket_exists() -> bool {
    let Some(p) = SOCKET.get().filter(|p| !p.as_bytes().is_empty()) else {
        return false;
    };
    // SAFETY: stat is plain data; zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a stat buffer we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_newfstatat,
            libc::AT_FDCWD,
            p.as_ptr(),
            &mut st as *mut libc::stat,
            0,
        )
    };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
}

/// The current table, if one is mapped.
#[inline(always)]
fn view() -> Option<TableView<'static>> {
    let cur = CURRENT.load(Ordering::Acquire);
    if cur == 0 {
        return None;
    }
    let s = &SLOTS[cur - 1];
    let ptr = s.ptr.load(Ordering::Relaxed);
    let mask = s.mask.load(Ordering::Relaxed);
    // SAFETY: the slot was filled (before CURRENT was released) with a
    // page-aligned read-only mapping that is never unmapped, and the mask
    // of the view `from_raw` validated on it (the header is not re-read per
    // write); the daemon changes it only with atomic 64-bit stores.
    Some(unsafe { TableView::from_parts(ptr, mask) })
}

/// Whether a live table is mapped.
#[inline]
pub fn present() -> bool {
    CURRENT.load(Ordering::Relaxed) != 0
}

/// The live (stream, hint) of a signature; `None` when unmapped or no table.
#[inline(always)]
pub fn lookup(sig: u64) -> Option<(u32, u8)> {
    view()?.lookup(sig)
}

/// The live stream of a signature (0 when unknown or no table); inline
/// in the write path (a call there costs it the registers it saves).
#[inline(always)]
pub fn stream(sig: u64) -> u32 {
    lookup(sig).map_or(0, |(s, _)| s)
}

/// Generation of the mapped table (0 without one).
pub fn generation() -> u64 {
    view().map_or(0, |v| v.generation())
}

/// Looks for a new table when `flush_ns` passed since the last look
/// (`now_ns` on the shim's clock), and for the daemon's socket when
/// events are not sent to one yet (record mode started without a daemon).
/// Cheap when not due: one load.
#[inline]
pub fn check(now_ns: u64, flush_ns: u64) {
    let last = LAST_CHECK.load(Ordering::Relaxed);
    if last == u64::MAX || now_ns < last.saturating_add(flush_ns.max(1_000_000)) {
        return;
    }
    if LAST_CHECK
        .compare_exchange(last, u64::MAX, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        reattach();
        if !crate::record::socket_on() && socket_exists() {
            if let Some(p) = SOCKET.get() {
                use std::os::unix::ffi::OsStrExt;
                crate::record::open_socket(Path::new(std::ffi::OsStr::from_bytes(p.as_bytes())));
            }
        }
        LAST_CHECK.store(now_ns, Ordering::Release);
    }
}

#[cold]
#[inline(never)]
fn reattach() {
    if let Some(paths) = PATHS.get() {
        reattach_to(paths);
    }
}

/// Maps the first of `paths` that holds a table newer than the mapped one.
fn reattach_to(paths: &[CString]) {
    let replaced = view().is_some_and(|v| v.replaced());
    for p in paths {
        if p.as_bytes().is_empty() {
            continue;
        }
        // SAFETY: stat is plain data; zero is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a stat buffer we own.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_newfstatat,
                libc::AT_FDCWD,
                p.as_ptr(),
                &mut st as *mut libc::stat,
                0,
            )
        };
        if rc != 0 {
            continue;
        }
        let same = present()
            && DEV.load(Ordering::Relaxed) == st.st_dev
            && INO.load(Ordering::Relaxed) == st.st_ino;
        if same && !replaced {
            return;
        }
        if !same && map_file(p) {
            return;
        }
    }
    // Nothing new: the last good mapping stays.
}

/// Maps the table at `p` and makes it current; false on any failure.
fn map_file(p: &CString) -> bool {
    let used = USED.load(Ordering::Relaxed);
    if used >= MAX_MAPPINGS {
        return false;
    }
    // SAFETY: openat with a NUL-terminated path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            p.as_ptr(),
            // Non-blocking: a FIFO under the table's name must not hang
            // the program (it is refused below, as anything not regular).
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return false;
    }
    let fd = fd as libc::c_int;
    // SAFETY: stat is plain data; zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a buffer we own.
    let ok = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } == 0;
    let len = st.st_size.max(0) as usize;
    let mut ptr = libc::MAP_FAILED;
    if ok && len >= 64 && len.is_multiple_of(8) && st.st_mode & libc::S_IFMT == libc::S_IFREG {
        // SAFETY: a fresh read-only shared mapping of the whole file.
        ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
    }
    // SAFETY: closing the descriptor we opened (the mapping stays).
    unsafe { libc::syscall(libc::SYS_close, fd) };
    if ptr == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: the mapping is page-aligned and `len` bytes long.
    let mask = match unsafe { TableView::from_raw(ptr as *const u8, len) } {
        Ok(v) => v.mask(),
        Err(_) => {
            // SAFETY: nobody else has seen this mapping.
            unsafe { libc::munmap(ptr, len) };
            return false;
        }
    };
    let s = &SLOTS[used];
    s.ptr.store(ptr.cast(), Ordering::Relaxed);
    s.mask.store(mask, Ordering::Relaxed);
    USED.store(used + 1, Ordering::Relaxed);
    DEV.store(st.st_dev, Ordering::Relaxed);
    INO.store(st.st_ino, Ordering::Relaxed);
    CURRENT.store(used + 1, Ordering::Release);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::table::{slots_for, table_words, TableWriter};
    use std::sync::atomic::AtomicU64;

    /// The library constructor may have set PATHS already (the test binary
    /// links the shim): look at the test's own directory.
    fn check_now(dir: &Path) {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let p = CString::new(dir.join(format!("mapping.{uid}")).as_os_str().as_bytes()).unwrap();
        reattach_to(&[p]);
    }

    fn write_table(path: &Path, entries: &[(u64, u32, u8)]) -> Vec<u8> {
        let slots = slots_for(entries.len().max(4));
        let words: Vec<AtomicU64> = (0..table_words(slots)).map(|_| AtomicU64::new(0)).collect();
        let mut w = TableWriter::init(&words, slots, 4).unwrap();
        for &(s, st, h) in entries {
            w.set(s, Some((st, h))).unwrap();
        }
        w.publish();
        let bytes: Vec<u8> = words
            .iter()
            .flat_map(|a| a.load(Ordering::Relaxed).to_le_bytes())
            .collect();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &bytes).unwrap();
        std::fs::rename(&tmp, path).unwrap();
        bytes
    }

    #[test]
    fn maps_the_table_keeps_it_when_gone_and_picks_up_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let path = dir.path().join(format!("mapping.{uid}"));
        assert!(!present(), "no table yet");
        assert_eq!(stream(0x1234), 0);
        write_table(&path, &[(0x1234, 1, 2), (0x99, 3, 4)]);
        check_now(dir.path());
        assert_eq!(lookup(0x1234), Some((1, 2)));
        assert_eq!(stream(0x99), 3);
        assert_eq!(stream(0x77), 0, "unknown signature: stream 0");
        std::fs::remove_file(&path).unwrap();
        check_now(dir.path());
        assert_eq!(stream(0x1234), 1, "last good mapping kept");
        write_table(&path, &[(0x1234, 2, 3)]);
        check_now(dir.path());
        assert_eq!(stream(0x1234), 2, "a new file (new inode) is picked up");
        assert_eq!(stream(0x99), 0);
        write_table(&path, &[(0x1234, 4, 5)]);
        check_now(dir.path());
        assert_eq!(stream(0x1234), 4);
        // A bad file is refused; the last good mapping stays.
        let tmp = path.with_extension("bad");
        std::fs::write(&tmp, [0u8; 128]).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        check_now(dir.path());
        assert_eq!(stream(0x1234), 4);
    }
}
