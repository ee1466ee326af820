//! Writes to raw block devices whose disk has write streams (an NVMe FDP
//! namespace on Linux ≥ 6.16): the call path's stream is set as the device
//! node's write hint before the data is written.
//!
//! For an `O_DIRECT` write to a block-device node, the kernel uses the
//! node's `F_SET_RW_HINT` value `k` as write stream `k` when
//! `1 ≤ k ≤ queue/max_write_streams` (DESIGN.md §4). The hint lives on the
//! node's inode, shared by every opener (other descriptors, threads and
//! processes): see docs/shim.md, "Raw block devices", for how often
//! concurrent writers meet each other's hint.
//!
//! What this module owns:
//! * whether a device has write streams ([`streams`]): read once per device
//!   from sysfs (`<sysfs>/dev/block/MAJ:MIN/queue/max_write_streams`; a
//!   partition's from its disk; absent = 0) and kept in a small lock-free
//!   table (one atomic word per device, no allocation); the descriptor
//!   table (`files.rs`) keeps the answer per descriptor, so a write never
//!   asks;
//! * the stream of a write ([`before`]): its call path's stream in the
//!   static map (`PCSTREAM_MAP`, which wins) or in the daemon's live table;
//!   stream `k` ↔ hint value `k`; a stream above `min(5, streams)` cannot
//!   be expressed by a hint: the hint is left alone and the write counted
//!   ([`unexpressed`]);
//! * the hint: set with `F_SET_RW_HINT` (a raw syscall) before the call,
//!   only when it differs from the last value known on the node (the
//!   per-inode cache of `hint.rs`, and the descriptor's copy of it in
//!   `files.rs`), and only for `O_DIRECT` descriptors (a buffered write is
//!   written back through the block device's own page cache, whose inode is
//!   not the node's: the node's hint does not reach it);
//! * page ages: a positional `O_DIRECT` write (`pwrite`) records its
//!   pages' ages (`pageage.rs`, keyed by the device's `FileId`) and takes
//!   the stream of its call path refined by its first page's age class,
//!   before the call, as a regular file's `pwrite` does; a page the
//!   table does not hold is free (a raw device has no size at first
//!   sight). Other writes (`write`, vectored, libaio) keep the call path's
//!   stream;
//! * the event ([`after`]): a `WriteEvent` whose `FileId` is
//!   `{ dev: st_rdev, ino: 0 }` (ino 0 names a raw block device by its
//!   device number, `proto/pcstream.proto`), at the given offset or the
//!   descriptor's position.
//!
//! A block device without write streams is not a raw device here: its
//! writes pass through as before (no event, no hint).

use crate::events::FileId;
use crate::files::{self, FdInfo};
use crate::track::{self, Before};
use crate::{batch::RawWrite, events::WriteCall, tls::Thread};
use crate::{hint, state};
use libc::c_int;
use pcstream_placement::delivery::{table_key, Domain};
use pcstream_placement::signature::{age_key, mix64};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Devices whose stream count is remembered (a device that collides with
/// another is read from sysfs again: rare, never per write).
const DEVS: usize = 64;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
/// Per device: `kernel_dev << 32 | 1 << 16 | streams` (0: empty).
static DEVS_TABLE: [AtomicU64; DEVS] = [ZERO; DEVS];
const KNOWN: u64 = 1 << 16;

/// The sysfs root (`/sys`; `PCSTREAM_SYSFS` for tests), set once at init.
static SYSFS: OnceLock<Box<[u8]>> = OnceLock::new();

/// Writes whose stream no hint can express (above `min(5, streams)`).
static UNEXPRESSED: AtomicU64 = AtomicU64::new(0);

/// Whether this process met a block device with write streams.
static SEEN: AtomicBool = AtomicBool::new(false);

/// Whether this process met a block device with write streams (what
/// libaio's hook asks before reading a block ahead of the call).
#[inline]
pub fn seen() -> bool {
    SEEN.load(Ordering::Relaxed)
}

/// Reads `out.len()` bytes of this process's memory at `addr` without
/// risking a fault (`process_vm_readv`); `false` when they are not all
/// readable.
pub fn peek(addr: usize, out: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut libc::c_void,
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: process_vm_readv on our own pid copies into `out` and reports
    // EFAULT instead of faulting on a bad address.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}

/// Remembers the sysfs root (library constructor).
pub fn init(sysfs: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let _ = SYSFS.set(sysfs.as_os_str().as_bytes().into());
}

/// Raw-device writes so far whose stream no hint could express.
pub fn unexpressed() -> u64 {
    UNEXPRESSED.load(Ordering::Relaxed)
}

/// The `FileId` events name a raw block device by: `{ dev: st_rdev, ino: 0 }`.
#[inline]
pub fn device_id(rdev: u64) -> FileId {
    FileId { dev: rdev, ino: 0 }
}

/// The kernel's 32-bit device number (`major << 20 | minor`), `None` for
/// numbers it cannot have.
fn kernel_dev(rdev: u64) -> Option<u32> {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    (major < 1 << 12 && minor < 1 << 20).then_some(major << 20 | minor)
}

/// The write streams of block device `rdev` (0: none, or not a device
/// sysfs knows): from the table, else sysfs (once per device).
pub fn streams(rdev: u64) -> u32 {
    let Some(k) = kernel_dev(rdev) else { return 0 };
    let slot = &DEVS_TABLE[mix64(k as u64) as usize % DEVS];
    let v = slot.load(Ordering::Relaxed);
    if v >> 32 == k as u64 && v & KNOWN != 0 {
        return (v & 0xffff) as u32;
    }
    let n = read_streams(SYSFS.get().map_or(b"/sys", |r| r), rdev).min(0xffff);
    if n > 0 {
        SEEN.store(true, Ordering::Relaxed);
        map_shared();
    }
    slot.store((k as u64) << 32 | KNOWN | n as u64, Ordering::Relaxed);
    n
}

/// A path under the sysfs root in a fixed buffer (NUL-terminated), no
/// allocation.
struct PathBuf {
    buf: [u8; 512],
    len: usize,
}

impl PathBuf {
    fn new(root: &[u8]) -> PathBuf {
        let mut p = PathBuf {
            buf: [0; 512],
            len: 0,
        };
        p.push(root);
        p
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - 1 - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_num(&mut self, mut v: u32) {
        let mut d = [0u8; 10];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&d[i..]);
    }

    /// The path as a C string (truncated paths simply do not exist).
    fn c(&mut self) -> *const libc::c_char {
        self.buf[self.len] = 0;
        self.buf.as_ptr() as *const libc::c_char
    }
}

/// Reads a small decimal file (raw syscalls: no interposed entry point, no
/// descriptor kept).
fn read_number(path: *const libc::c_char) -> Option<u32> {
    // SAFETY: `path` is NUL-terminated; the descriptor is ours and closed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as c_int;
    if fd < 0 {
        return None;
    }
    let mut b = [0u8; 32];
    // SAFETY: reads at most b.len() bytes into `b`.
    let n = unsafe { libc::syscall(libc::SYS_read, fd, b.as_mut_ptr(), b.len()) };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    let text = b.get(..usize::try_from(n).ok()?)?;
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// `queue/max_write_streams` of the device's disk (a partition's parent),
/// under sysfs root `root`.
fn read_streams(root: &[u8], rdev: u64) -> u32 {
    let dir = || {
        let mut p = PathBuf::new(root);
        p.push(b"/dev/block/");
        p.push_num(libc::major(rdev));
        p.push(b":");
        p.push_num(libc::minor(rdev));
        p
    };
    let mut p = dir();
    p.push(b"/queue/max_write_streams");
    if let Some(n) = read_number(p.c()) {
        return n;
    }
    // A partition has no queue of its own: its disk's is one level up.
    let mut p = dir();
    p.push(b"/partition");
    if read_number(p.c()).is_none() {
        return 0;
    }
    let mut p = dir();
    p.push(b"/../queue/max_write_streams");
    read_number(p.c()).unwrap_or(0)
}

/// The stream of a raw-device write from call path `sig` (`cached`: its
/// stream in the static map, which wins) to device `rdev`: the daemon
/// publishes a raw device's streams under the key of that device's domain
/// (`delivery::table_key(sig, Domain::Raw { dev: rdev })`, streams 1..5 =
/// hint values); a path the table has no entry for there takes its entry
/// in the default domain (streams 1..4: a daemon that does not learn per
/// device, or a path it has only seen writing files), else 0.
#[inline]
pub fn stream_for(sig: u64, cached: u32, rdev: u64) -> u32 {
    if hint::have_map() {
        return cached;
    }
    let key = table_key(sig, Domain::Raw { dev: rdev });
    match crate::live::lookup(key) {
        Some((stream, _)) => stream,
        None => crate::live::stream(sig),
    }
}

/// The stream of a write of call path (`sig`, `cached`) to `raw` at `pos`
/// (offset, length; known before the call): [`stream_for`], refined, for
/// an `O_DIRECT` descriptor, by the age class of the write's first page
/// (`pageage.rs`, recorded here: the class is returned for the event),
/// the live table's stream for `age_key(sig, class)` in the device's
/// domain when it has one. A static map is per call path.
#[inline]
pub fn placed(
    sig: u64,
    cached: u32,
    raw: files::Raw,
    pos: Option<(u64, u64)>,
) -> (u32, Option<u32>) {
    let stream = stream_for(sig, cached, raw.rdev);
    let Some((off, n)) = pos.filter(|_| raw.direct) else {
        return (stream, None);
    };
    if !track::ages_recorded() {
        return (stream, None);
    }
    let age = crate::pageage::touch(device_id(raw.rdev), off, n);
    if age == 0 || hint::have_map() {
        return (stream, Some(age));
    }
    let key = table_key(age_key(sig, age), Domain::Raw { dev: raw.rdev });
    let s = crate::live::lookup(key).map_or(stream, |(s, _)| s);
    (s, Some(age))
}

/// The hint value for stream `stream` on a device of `streams` write
/// streams: `Some(stream)` when a hint can carry it (1 ≤ k ≤ min(5, N)).
#[inline]
pub fn hint_for(stream: u32, streams: u32) -> Option<u64> {
    (stream >= 1 && stream <= streams.min(5)).then_some(stream as u64)
}

/// Before a write to raw device descriptor `fd`: the call path's signature
/// and stream (captured in full when the caches miss: the hint must be on
/// the node before the call), and the hint set when it changes.
///
/// # Safety
/// `rec` is the entry trampoline's frame record on this thread's stack.
pub unsafe fn before(t: &Thread, fd: c_int, info: FdInfo, rec: *const usize, b: &mut Before) {
    let Some(raw) = files::raw(fd) else { return };
    // SAFETY: forwarded caller contract.
    let hit = match unsafe { crate::context::cached_context(t, rec) } {
        Some(h) => Some(h),
        // SAFETY: forwarded caller contract.
        None => unsafe { crate::context::capture_described(t, rec) },
    };
    let Some((sig, cached)) = hit else { return };
    let (stream, age) = placed(sig, cached, raw, b.pos);
    b.age = age;
    b.hit = Some((sig, stream));
    b.raw_hint = if raw.direct {
        node_hint(fd, info, stream, raw)
    } else {
        shared_hint(raw.rdev)
            .or_else(|| hint::cached(info.id))
            .unwrap_or(0)
    } as u8;
}

/// Words of the per-device hint page (one 4 KiB page).
const SHARED_WORDS: usize = 512;

/// The per-device hint page shared by this user's processes (null until
/// mapped, or when it cannot be: then [`LOCAL`] serves this process).
static SHARED: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
/// Whether mapping the shared page was tried.
static SHARED_TRIED: AtomicBool = AtomicBool::new(false);
/// This process's hint words when the shared page is not there.
static LOCAL: [AtomicU64; SHARED_WORDS] = [ZERO; SHARED_WORDS];

/// The hint words: the shared page, else this process's.
fn words() -> &'static [AtomicU64] {
    let p = SHARED.load(Ordering::Acquire);
    if p.is_null() {
        &LOCAL
    } else {
        // SAFETY: a MAP_SHARED page of SHARED_WORDS words, never unmapped.
        unsafe { std::slice::from_raw_parts(p, SHARED_WORDS) }
    }
}

/// A device's word: `kernel_dev << 32 | hint + 1` (0: nothing known).
fn word(k: u32, hint: u64) -> u64 {
    (k as u64) << 32 | (hint + 1)
}

/// Slots probed for a device's word.
const PROBES: usize = 8;

/// The word of device `rdev` (`None`: a device number the kernel cannot
/// have): found by its key from the device's hash on (linear probing; a
/// free word is claimed with a CAS, key set and hint unknown, so processes
/// sharing the page agree on it); when all probed words belong to other
/// devices, the first is shared (each then sets its hint more often).
fn slot(rdev: u64) -> Option<(u32, &'static AtomicU64)> {
    let k = kernel_dev(rdev)?;
    let ws = words();
    let h = mix64(k as u64 ^ 0x6e6f_6465) as usize;
    for i in 0..PROBES {
        let w = &ws[(h + i) % SHARED_WORDS];
        let v = w.load(Ordering::Relaxed);
        if v >> 32 == k as u64 {
            return Some((k, w));
        }
        if v == 0 {
            match w.compare_exchange(0, (k as u64) << 32, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some((k, w)),
                Err(now) if now >> 32 == k as u64 => return Some((k, w)),
                Err(_) => {}
            }
        }
    }
    Some((k, &ws[h % SHARED_WORDS]))
}

/// The address of device `rdev`'s hint word (0: a device number the
/// kernel cannot have), kept in its descriptors' table entries so a write
/// finds the word with one load.
pub fn word_of(rdev: u64) -> usize {
    slot(rdev).map_or(0, |(_, w)| w as *const AtomicU64 as usize)
}

/// The hint last set on device `rdev`'s node by any of this user's
/// processes under the shim, if known.
fn shared_hint(rdev: u64) -> Option<u64> {
    let (k, w) = slot(rdev)?;
    let v = w.load(Ordering::Relaxed);
    (v >> 32 == k as u64 && v & 0xff != 0).then(|| (v & 0xff) - 1)
}

/// Records the hint now on device `rdev`'s node (set by the shim, read at
/// an open, or set by the application itself).
pub fn remember(rdev: u64, hint: u64) {
    if let (Some((k, w)), true) = (slot(rdev), hint <= 5) {
        w.store(word(k, hint), Ordering::Relaxed);
    }
}

/// Reads the node's hint when the shim sees a raw device opened.
pub fn refresh(fd: c_int, node: FileId, rdev: u64) {
    let mut v = 0u64;
    if crate::sys::fcntl(
        fd,
        pcstream_placement::hint::F_GET_RW_HINT,
        &mut v as *mut u64 as usize,
    ) == 0
    {
        hint::remember(node, v);
        remember(rdev, v);
    }
}

/// Maps this user's per-device hint page, `/dev/shm/pcstream-rawdev.<uid>`
/// (created 0600; a file another user owns, or not a regular file, is not
/// used): every process under the shim that writes a raw device then sees
/// the hint the others set on its node. Once per process, when the first
/// device with write streams is met; raw syscalls, no descriptor kept.
fn map_shared() {
    if SHARED_TRIED.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mut p = PathBuf::new(b"/dev/shm/pcstream-rawdev.");
    p.push_num(uid);
    // SAFETY: a NUL-terminated path; the descriptor is ours and closed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            p.c(),
            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o600,
        )
    } as c_int;
    if fd < 0 {
        return;
    }
    let len = SHARED_WORDS * 8;
    let ok = crate::sys::fstat(fd).is_some_and(|st| {
        st.st_uid == uid
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && (st.st_size as usize >= len
                // SAFETY: sizing our own descriptor's file.
                || unsafe { libc::syscall(libc::SYS_ftruncate, fd, len) } == 0)
    });
    let m = if ok {
        // SAFETY: a shared read-write mapping of `len` bytes of the file.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        }
    } else {
        libc::MAP_FAILED
    };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    if m != libc::MAP_FAILED {
        SHARED.store(m as *mut AtomicU64, Ordering::Release);
    }
}

/// The node's hint after a write of `stream`: set when it is expressible
/// and not already there (as far as this user's processes under the shim
/// know: [`map_shared`]), else as it was.
fn node_hint(fd: c_int, info: FdInfo, stream: u32, raw: files::Raw) -> u64 {
    let (rdev, streams) = (raw.rdev, raw.streams);
    let known = || {
        shared_hint(rdev)
            .or_else(|| hint::cached(info.id))
            .unwrap_or(0)
    };
    if stream == 0 {
        return known();
    }
    let Some(want) = hint_for(stream, streams) else {
        UNEXPRESSED.fetch_add(1, Ordering::Relaxed);
        return known();
    };
    let Some(k) = kernel_dev(rdev) else { return 0 };
    let w = if raw.word != 0 {
        // SAFETY: a word of LOCAL or of the shared page (never unmapped),
        // found by `word_of` when the descriptor's entry was made.
        unsafe { &*(raw.word as *const AtomicU64) }
    } else {
        match slot(rdev) {
            Some((_, w)) => w,
            None => return 0,
        }
    };
    // Without the shared page (no /dev/shm), this process's word cannot
    // see what another process set on the node since: the hint is set
    // again before every write, an fcntl each (before, fio's two jobs, two
    // processes on one namespace in a guest without /dev/shm, put 94 % of
    // the cold job's data in the hot job's RUH).
    if w.load(Ordering::Relaxed) == word(k, want) && !SHARED.load(Ordering::Relaxed).is_null() {
        return want;
    }
    // A hint the kernel refused through this descriptor is not asked again
    // (one failed fcntl per write otherwise) until another one is.
    let epoch = crate::hot::hint_epoch();
    if let Some(r) = files::known_hint(fd, epoch).filter(|r| r >> track::REFUSED_SHIFT == want) {
        return r & 0xf;
    }
    let mut v = want;
    if crate::sys::fcntl(
        fd,
        pcstream_placement::hint::F_SET_RW_HINT,
        &mut v as *mut u64 as usize,
    ) == 0
    {
        w.store(word(k, want), Ordering::Relaxed);
        hint::remember(info.id, want);
        return want;
    }
    let now = known();
    files::set_known_hint(fd, epoch, now | want << track::REFUSED_SHIFT);
    now
}

/// After a successful write of `n` bytes to raw device descriptor `fd`
/// (`off`: given by a positioned write): its event.
pub fn after(
    t: &Thread,
    fd: c_int,
    info: FdInfo,
    off: Option<u64>,
    n: u64,
    call: WriteCall,
    b: &Before,
) {
    if !state::events_on() {
        return;
    }
    let (Some(raw), Some((sig, stream))) = (files::raw(fd), b.hit) else {
        return;
    };
    let id = device_id(raw.rdev);
    if !info.named {
        track::name_file(fd, FdInfo { id, ..info });
        files::mark_named(fd);
    }
    let offset = match off {
        Some(o) => o,
        None => (crate::sys::lseek(fd, 0, libc::SEEK_CUR) as u64).saturating_sub(n),
    };
    state::emit_write(
        t,
        RawWrite::new(id, offset, n, sig, stream, b.raw_hint as u32, call as u32)
            .with_age(b.age.unwrap_or(0)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_carry_streams_one_to_five_within_the_device() {
        assert_eq!(hint_for(0, 8), None);
        assert_eq!(hint_for(1, 8), Some(1));
        assert_eq!(hint_for(5, 8), Some(5));
        assert_eq!(hint_for(6, 8), None, "no hint value above EXTREME");
        assert_eq!(hint_for(3, 2), None, "above the device's streams");
        assert_eq!(hint_for(2, 2), Some(2));
    }

    #[test]
    fn stream_counts_come_from_the_disk() {
        let root = tempfile::tempdir().unwrap();
        let disk = root.path().join("devices/nvme0n1");
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::write(disk.join("queue/max_write_streams"), "8\n").unwrap();
        let part = disk.join("nvme0n1p1");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(part.join("partition"), "1\n").unwrap();
        let plain = root.path().join("devices/loop0/queue");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("max_write_streams"), "0\n").unwrap();
        let old = root.path().join("devices/sda");
        std::fs::create_dir_all(&old).unwrap();
        let links = root.path().join("dev/block");
        std::fs::create_dir_all(&links).unwrap();
        for (name, target) in [
            ("259:0", disk.clone()),
            ("259:1", part),
            ("7:0", root.path().join("devices/loop0")),
            ("8:0", old),
        ] {
            std::os::unix::fs::symlink(target, links.join(name)).unwrap();
        }
        use std::os::unix::ffi::OsStrExt;
        let r = root.path().as_os_str().as_bytes();
        assert_eq!(read_streams(r, libc::makedev(259, 0)), 8);
        assert_eq!(
            read_streams(r, libc::makedev(259, 1)),
            8,
            "a partition: its disk's"
        );
        assert_eq!(read_streams(r, libc::makedev(7, 0)), 0);
        assert_eq!(read_streams(r, libc::makedev(8, 0)), 0, "no attribute");
        assert_eq!(read_streams(r, libc::makedev(1, 99)), 0, "unknown device");
    }

    #[test]
    fn devices_whose_words_collide_keep_their_own() {
        // 7:1 and 7:2 hash to the same word: the second probes on.
        let (a, b) = (libc::makedev(7, 1), libc::makedev(7, 2));
        let (wa, wb) = (slot(a).unwrap().1, slot(b).unwrap().1);
        assert!(!std::ptr::eq(wa, wb));
        remember(a, 1);
        remember(b, 2);
        assert_eq!((shared_hint(a), shared_hint(b)), (Some(1), Some(2)));
        assert_eq!(shared_hint(libc::makedev(7, 3)), None);
    }

    #[test]
    fn stream_counts_are_remembered_per_device() {
        // The host's own sysfs (the library constructor set the root): a
        // device it does not have has none, and the answer is kept.
        let nodev = libc::makedev(4095, 1_000_000);
        assert_eq!(streams(nodev), 0);
        let k = kernel_dev(nodev).unwrap();
        let v = DEVS_TABLE[mix64(k as u64) as usize % DEVS].load(Ordering::Relaxed);
        assert_eq!(v, (k as u64) << 32 | KNOWN);
        assert_eq!(kernel_dev(libc::makedev(4096, 0)), None);
    }
}
