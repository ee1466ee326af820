//! Events out of the shim: a hand-written protobuf encoder into fixed
//! buffers, and the per-thread batches they accumulate in.
//!
//! Encoding follows `proto/pcstream.proto` (`Event`, `EventBatch`) byte for
//! byte in canonical form; the tests decode the bytes with prost. Nested
//! messages are encoded into small stack buffers and copied, so nothing
//! allocates. Paths are truncated to [`MAX_PATH`] bytes.
//!
//! Batches live in a static pool of [`SLOTS`] slots instead of thread-locals
//! with destructors (registering a TLS destructor allocates). A thread claims
//! a slot on its first event and keeps its index in a const-initialised
//! thread-local; slot states make the hot path lock-free and let another
//! thread flush an idle slot (at exit, or when its owner died).

use crate::record;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Longest path (bytes) carried in an event.
pub const MAX_PATH: usize = 1024;
/// Batch slots (threads with pending events at once).
pub const SLOTS: usize = 256;
/// Bytes of encoded events per batch.
pub const BATCH: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------

/// Appends protobuf fields to a fixed buffer; overflow sets a flag and
/// further writes are ignored.
#[derive(Debug)]
pub struct Enc<'a> {
    buf: &'a mut [u8],
    pos: usize,
    overflow: bool,
}

/// Length of `v` as a varint.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

impl<'a> Enc<'a> {
    /// An encoder writing at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Enc {
            buf,
            pos: 0,
            overflow: false,
        }
    }

    /// Bytes written so far (meaningless after overflow).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// Whether everything fit.
    pub fn ok(&self) -> bool {
        !self.overflow
    }

    /// Raw bytes.
    pub fn raw(&mut self, b: &[u8]) {
        if self.overflow || self.buf.len() - self.pos < b.len() {
            self.overflow = true;
            return;
        }
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    /// A varint.
    pub fn varint(&mut self, mut v: u64) {
        let mut tmp = [0u8; 10];
        let mut i = 0;
        while v >= 0x80 {
            tmp[i] = (v as u8) | 0x80;
            v >>= 7;
            i += 1;
        }
        tmp[i] = v as u8;
        self.raw(&tmp[..=i]);
    }

    fn key(&mut self, field: u32, wire_type: u32) {
        self.varint(((field << 3) | wire_type) as u64);
    }

    /// A varint field (omitted when 0, as proto3 does).
    pub fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }

    /// An int32 field (negative values take 10 bytes, as proto3 does).
    pub fn int32(&mut self, field: u32, v: i32) {
        self.uint(field, v as i64 as u64);
    }

    /// A bool field.
    pub fn boolean(&mut self, field: u32, v: bool) {
        self.uint(field, v as u64);
    }

    /// A bytes/string field (omitted when empty).
    pub fn bytes_field(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.key(field, 2);
            self.varint(b.len() as u64);
            self.raw(b);
        }
    }

    /// A bytes/string field that is written even when empty (repeated entries).
    pub fn bytes_always(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.raw(b);
    }

    /// A nested message encoded by `f` into an `N`-byte stack buffer.
    pub fn message<const N: usize>(&mut self, field: u32, f: impl FnOnce(&mut Enc<'_>)) {
        let mut scratch = [0u8; N];
        let mut inner = Enc::new(&mut scratch);
        f(&mut inner);
        if !inner.ok() {
            self.overflow = true;
            return;
        }
        let n = inner.pos;
        self.bytes_always(field, &scratch[..n]);
    }
}

// ---------------------------------------------------------------------------
// Event kinds
// ---------------------------------------------------------------------------

/// `FileId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileId {
    /// st_dev.
    pub dev: u64,
    /// st_ino.
    pub ino: u64,
}

fn file_id(e: &mut Enc<'_>, field: u32, f: FileId) {
    e.message::<24>(field, |e| {
        e.uint(1, f.dev);
        e.uint(2, f.ino);
    });
}

/// `WriteCall` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WriteCall {
    Write = 1,
    Pwrite = 2,
    Writev = 3,
    Pwritev = 4,
    Fwrite = 5,
}

/// `InvalidateKind` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum InvalidateKind {
    Truncate = 1,
    Unlink = 2,
    PunchHole = 3,
    RenameReplace = 4,
}

/// `ProcessEventKind` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ProcessKind {
    Start = 1,
    ForkChild = 2,
    Exit = 3,
}

/// One event's payload (the `Event.kind` oneof).
#[derive(Debug)]
pub enum Kind<'a> {
    /// `WriteEvent`.
    Write {
        file: FileId,
        offset: u64,
        len: u64,
        signature: u64,
        stream: u32,
        hint: u32,
        call: WriteCall,
    },
    /// `InvalidateEvent`.
    Invalidate {
        file: FileId,
        kind: InvalidateKind,
        offset: u64,
        len: u64,
    },
    /// `AppHintEvent`.
    AppHint {
        file: FileId,
        requested: u64,
        accepted: bool,
        errno: i32,
        repaired: bool,
    },
    /// `SignatureInfo`.
    Signature {
        signature: u64,
        frames: &'a [(u64, u64)],
        method: u32,
    },
    /// `ModuleInfo`.
    Module {
        key: u64,
        build_id: &'a [u8],
        path: &'a [u8],
        size: u64,
    },
    /// `OpenEvent`.
    Open {
        file: FileId,
        path: &'a [u8],
        flags: i32,
    },
    /// `ProcessEvent`.
    Process {
        kind: ProcessKind,
        ppid: u32,
        exe: &'a [u8],
        argv: &'a [Vec<u8>],
        dropped: u64,
    },
}

fn trunc(p: &[u8]) -> &[u8] {
    &p[..p.len().min(MAX_PATH)]
}

/// Encodes the fields of one `Event` (not its length prefix).
pub fn encode_event(e: &mut Enc<'_>, time_ns: u64, tid: u32, kind: &Kind<'_>) {
    e.uint(1, time_ns);
    e.uint(2, tid as u64);
    match *kind {
        Kind::Write {
            file,
            offset,
            len,
            signature,
            stream,
            hint,
            call,
        } => e.message::<96>(10, |e| {
            file_id(e, 1, file);
            e.uint(2, offset);
            e.uint(3, len);
            e.uint(4, signature);
            e.uint(5, stream as u64);
            e.uint(6, hint as u64);
            e.uint(7, call as u64);
        }),
        Kind::Invalidate {
            file,
            kind,
            offset,
            len,
        } => e.message::<64>(11, |e| {
            file_id(e, 1, file);
            e.uint(2, kind as u64);
            e.uint(3, offset);
            e.uint(4, len);
        }),
        Kind::AppHint {
            file,
            requested,
            accepted,
            errno,
            repaired,
        } => e.message::<64>(12, |e| {
            file_id(e, 1, file);
            e.uint(2, requested);
            e.boolean(3, accepted);
            e.int32(4, errno);
            e.boolean(5, repaired);
        }),
        Kind::Signature {
            signature,
            frames,
            method,
        } => e.message::<512>(13, |e| {
            e.uint(1, signature);
            for &(key, offset) in frames {
                e.message::<24>(2, |e| {
                    e.uint(1, key);
                    e.uint(2, offset);
                });
            }
            e.uint(3, method as u64);
        }),
        Kind::Module {
            key,
            build_id,
            path,
            size,
        } => e.message::<{ MAX_PATH + 128 }>(14, |e| {
            e.uint(1, key);
            e.bytes_field(2, &build_id[..build_id.len().min(64)]);
            e.bytes_field(3, trunc(path));
            e.uint(4, size);
        }),
        Kind::Open { file, path, flags } => e.message::<{ MAX_PATH + 64 }>(15, |e| {
            file_id(e, 1, file);
            e.bytes_field(2, trunc(path));
            e.int32(3, flags);
        }),
        Kind::Process {
            kind,
            ppid,
            exe,
            argv,
            dropped,
        } => {
            // Not a hot-path event: encode on the heap (argv may be long).
            // Long command lines are cut to fit one batch.
            let mut v = vec![0u8; BATCH - 64];
            let mut inner = Enc::new(&mut v);
            inner.uint(1, kind as u64);
            inner.uint(2, ppid as u64);
            inner.bytes_field(3, trunc(exe));
            let mut room = BATCH / 2;
            for a in argv {
                let a = &a[..a.len().min(room)];
                room -= a.len();
                inner.bytes_always(4, a);
            }
            inner.uint(5, dropped);
            let n = inner.pos;
            e.bytes_always(16, &v[..n]);
        }
    }
}

// ---------------------------------------------------------------------------
// Per-thread batches
// ---------------------------------------------------------------------------

const FREE: u32 = 0;
const IDLE: u32 = 1;
const BUSY: u32 = 2;
const SWEEP: u32 = 3;

struct Slot {
    state: AtomicU32,
    tid: AtomicU32,
    // The fields below belong to whoever moved `state` to BUSY or SWEEP.
    len: UnsafeCell<usize>,
    count: UnsafeCell<u32>,
    first_ns: UnsafeCell<u64>,
    buf: UnsafeCell<[u8; BATCH]>,
}

// SAFETY: the UnsafeCell fields are only touched by the thread that won the
// state transition to BUSY/SWEEP (exclusive ownership by protocol).
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    tid: AtomicU32::new(0),
    len: UnsafeCell::new(0),
    count: UnsafeCell::new(0),
    first_ns: UnsafeCell::new(0),
    buf: UnsafeCell::new([0; BATCH]),
};

static POOL: [Slot; SLOTS] = [EMPTY; SLOTS];
static DROPPED: AtomicU64 = AtomicU64::new(0);

const NO_SLOT: u32 = u32::MAX;
const POOL_FULL: u32 = u32::MAX - 1;

thread_local! {
    static MY_SLOT: Cell<u32> = const { Cell::new(NO_SLOT) };
    static MY_TID: Cell<u32> = const { Cell::new(0) };
}

/// Events dropped so far (no slot, busy slot, failed send).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Counts `n` dropped events.
pub fn count_dropped(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

/// This thread's id (cached; the cache is reset in a fork child).
#[inline]
pub fn tid() -> u32 {
    let t = MY_TID.with(|c| c.get());
    if t != 0 {
        return t;
    }
    // SAFETY: gettid has no preconditions.
    let t = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    MY_TID.with(|c| c.set(t));
    t
}

/// `CLOCK_MONOTONIC` in nanoseconds (vDSO, no syscall).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn thread_alive(tid: u32) -> bool {
    // SAFETY: signal 0 only checks existence; getpid has no preconditions.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid as i64, 0) };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
}

fn claim(tid: u32) -> u32 {
    for (i, s) in POOL.iter().enumerate() {
        if s.state
            .compare_exchange(FREE, IDLE, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            s.tid.store(tid, Ordering::Relaxed);
            return i as u32;
        }
    }
    // Reclaim the slot of a thread that exited.
    for (i, s) in POOL.iter().enumerate() {
        let owner = s.tid.load(Ordering::Relaxed);
        if owner != tid
            && s.state.load(Ordering::Relaxed) == IDLE
            && !thread_alive(owner)
            && s.state
                .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            flush_locked(s);
            s.tid.store(tid, Ordering::Relaxed);
            s.state.store(IDLE, Ordering::Release);
            return i as u32;
        }
    }
    POOL_FULL
}

/// Sends/records the slot's events and empties it. The caller owns the slot
/// (BUSY or SWEEP).
fn flush_locked(s: &Slot) {
    // SAFETY: the caller owns the slot's cells (state protocol).
    let (len, count, buf) = unsafe { (&mut *s.len.get(), &mut *s.count.get(), &*s.buf.get()) };
    if *len > 0 {
        record::emit_batch(&buf[..*len], *count);
    }
    *len = 0;
    *count = 0;
}

/// Adds one event to this thread's batch (flushing it when full or old).
/// `flush_ns`: the age after which the batch is flushed; `force`: flush now.
pub fn push(kind: &Kind<'_>, flush_ns: u64, force: bool) {
    let now = now_ns();
    let tid = tid();
    if let Kind::Process { .. } = kind {
        // Not a hot-path event (start/fork/exit): argv may be long.
        let mut heap = vec![0u8; BATCH];
        let mut e = Enc::new(&mut heap);
        encode_event(&mut e, now, tid, kind);
        if e.ok() {
            append(e.bytes(), now, flush_ns, force);
        } else {
            count_dropped(1);
        }
        return;
    }
    let mut scratch = [0u8; MAX_PATH + 256];
    let mut e = Enc::new(&mut scratch);
    encode_event(&mut e, now, tid, kind);
    if !e.ok() {
        count_dropped(1);
        return;
    }
    append(e.bytes(), now, flush_ns, force);
}

fn append(ev: &[u8], now: u64, flush_ns: u64, force: bool) {
    let tid = tid();
    let mut idx = MY_SLOT.with(|c| c.get());
    if idx == NO_SLOT {
        idx = claim(tid);
        MY_SLOT.with(|c| c.set(idx));
    }
    let Some(s) = POOL.get(idx as usize) else {
        count_dropped(1);
        return;
    };
    if s.state
        .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        count_dropped(1);
        return;
    }
    // SAFETY: we moved the slot to BUSY: its cells are ours until we release it.
    let (len, count, first, buf) = unsafe {
        (
            &mut *s.len.get(),
            &mut *s.count.get(),
            &mut *s.first_ns.get(),
            &mut *s.buf.get(),
        )
    };
    let need = 1 + varint_len(ev.len() as u64) + ev.len();
    if *len + need > BATCH {
        flush_locked(s);
    }
    if need <= BATCH {
        if *len == 0 {
            *first = now;
        }
        let mut out = Enc::new(&mut buf[*len..]);
        out.bytes_always(3, ev);
        *len += out.pos;
        *count += 1;
    } else {
        count_dropped(1);
    }
    if force || now.saturating_sub(*first) >= flush_ns {
        flush_locked(s);
        s.state.store(IDLE, Ordering::Release);
        if !force {
            sweep(Some(now.saturating_sub(flush_ns)));
        }
        return;
    }
    s.state.store(IDLE, Ordering::Release);
}

/// Flushes this thread's pending batch, if any.
pub fn flush_mine() {
    let idx = MY_SLOT.with(|c| c.get());
    if let Some(s) = POOL.get(idx as usize) {
        if s.state
            .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            flush_locked(s);
            s.state.store(IDLE, Ordering::Release);
        }
    }
}

/// Flushes every idle slot whose batch started before `older_than` (all idle
/// slots when `None`), e.g. at exit or for threads that went quiet.
pub fn sweep(older_than: Option<u64>) {
    for s in POOL.iter() {
        if s.state.load(Ordering::Relaxed) != IDLE {
            continue;
        }
        if s.state
            .compare_exchange(IDLE, SWEEP, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: SWEEP gives us the slot's cells.
        let (len, first) = unsafe { (*s.len.get(), *s.first_ns.get()) };
        if len > 0 && older_than.is_none_or(|t| first <= t) {
            flush_locked(s);
        }
        s.state.store(IDLE, Ordering::Release);
    }
}

/// In a fork child: forget the parent's batches and threads.
pub fn after_fork_child() {
    for s in POOL.iter() {
        // SAFETY: the child is single-threaded right after fork; nobody else
        // can own a slot's cells.
        unsafe {
            *s.len.get() = 0;
            *s.count.get() = 0;
        }
        s.state.store(FREE, Ordering::Relaxed);
        s.tid.store(0, Ordering::Relaxed);
    }
    MY_SLOT.with(|c| c.set(NO_SLOT));
    MY_TID.with(|c| c.set(0));
    DROPPED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcstream_placement::wire;
    use prost::Message;

    fn encode(kind: &Kind<'_>) -> wire::Event {
        let mut buf = [0u8; 4096];
        let mut e = Enc::new(&mut buf);
        encode_event(&mut e, 123_456_789, 42, kind);
        assert!(e.ok());
        wire::Event::decode(e.bytes()).expect("prost decodes the shim's bytes")
    }

    #[test]
    fn write_event_decodes() {
        let ev = encode(&Kind::Write {
            file: FileId { dev: 2049, ino: 77 },
            offset: 1 << 40,
            len: 4096,
            signature: 0xdead_beef_0123_4567,
            stream: 3,
            hint: 4,
            call: WriteCall::Pwrite,
        });
        assert_eq!(ev.time_ns, 123_456_789);
        assert_eq!(ev.tid, 42);
        let Some(wire::event::Kind::Write(w)) = ev.kind else {
            panic!("not a write: {ev:?}")
        };
        assert_eq!(w.file, Some(wire::FileId { dev: 2049, ino: 77 }));
        assert_eq!(
            (w.offset, w.len, w.signature),
            (1 << 40, 4096, 0xdead_beef_0123_4567)
        );
        assert_eq!(
            (w.stream, w.hint, w.call),
            (3, 4, wire::WriteCall::Pwrite as i32)
        );
    }

    #[test]
    fn other_events_decode() {
        let frames = [(1u64, 2u64), (u64::MAX, 0)];
        let ev = encode(&Kind::Signature {
            signature: 9,
            frames: &frames,
            method: 2,
        });
        let Some(wire::event::Kind::Signature(s)) = ev.kind else {
            panic!()
        };
        assert_eq!(s.frames.len(), 2);
        assert_eq!((s.frames[1].module_key, s.frames[1].offset), (u64::MAX, 0));
        assert_eq!(s.method, 2);

        let ev = encode(&Kind::AppHint {
            file: FileId::default(),
            requested: 3,
            accepted: false,
            errno: libc::EINVAL,
            repaired: true,
        });
        let Some(wire::event::Kind::AppHint(h)) = ev.kind else {
            panic!()
        };
        assert_eq!(
            (h.requested, h.accepted, h.errno, h.repaired),
            (3, false, libc::EINVAL, true)
        );

        let argv = vec![b"prog".to_vec(), Vec::new(), b"x y".to_vec()];
        let ev = encode(&Kind::Process {
            kind: ProcessKind::Start,
            ppid: 1,
            exe: b"/bin/prog",
            argv: &argv,
            dropped: 0,
        });
        let Some(wire::event::Kind::Process(p)) = ev.kind else {
            panic!()
        };
        assert_eq!(p.argv, vec!["prog", "", "x y"]);
        assert_eq!(p.exe, "/bin/prog");

        let long = vec![b'a'; 5000];
        let ev = encode(&Kind::Open {
            file: FileId { dev: 1, ino: 1 },
            path: &long,
            flags: -1,
        });
        let Some(wire::event::Kind::Open(o)) = ev.kind else {
            panic!()
        };
        assert_eq!(o.path.len(), MAX_PATH);
        assert_eq!(o.flags, -1);
    }

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut b = [0u8; 10];
            let mut e = Enc::new(&mut b);
            e.varint(v);
            assert_eq!(e.bytes().len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn overflow_is_reported_not_panicking() {
        let mut b = [0u8; 8];
        let mut e = Enc::new(&mut b);
        e.bytes_field(1, &[7u8; 20]);
        assert!(!e.ok());
    }
}
